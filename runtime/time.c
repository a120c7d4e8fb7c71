/* time.c -- monotonic clock. */
#include "config.h"

#include <time.h>

#include "runtime/prt.h"

uint64_t prt_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double plait_wtime(void) { return (double)prt_now_ns() * 1e-9; }
