/*
 * hello_plait -- joins the job and leaves it: the smallest plait program, used
 * by bench/startup.sh to time job start-up and teardown.
 */
#include <stdio.h>

#include "plait.h"

int main(void)
{
    int rc = plait_init();

    if (rc != PLAIT_OK) {
        fprintf(stderr, "hello_plait: plait_init: %s: %s\n", plait_strerror(rc), plait_last_error());
        return 1;
    }
    rc = plait_finalize();
    if (rc != PLAIT_OK) {
        fprintf(stderr, "hello_plait: plait_finalize: %s: %s\n", plait_strerror(rc),
                plait_last_error());
        return 1;
    }
    return 0;
}
