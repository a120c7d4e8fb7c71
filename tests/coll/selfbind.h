/* selfbind.h -- test helper: a rank binds itself to the first CPU it may
 * use before plait_init (as a user or a launcher might), so the ranks of a
 * host leave the other CPUs spare for the library's threads. */
#ifndef PLAIT_TEST_SELFBIND_H
#define PLAIT_TEST_SELFBIND_H

#include <sched.h>   /* (the includer defines _GNU_SOURCE first) */

static inline void bind_first_cpu(void)
{
    cpu_set_t set, one;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return;
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) {
            CPU_SET(c, &one);
            break;
        }
    sched_setaffinity(0, sizeof one, &one);
}

#endif
