/* Unit test of the staged wait (runtime/wait.c): spin, then yield, then sleep
 * once yield_us have passed without progress; progress moves the sleep stage
 * out again, never the deadline. Times are given, not read. */
#include "config.h"

#include "runtime/prt.h"
#include "tests/unit/tap.h"

#define US 1000ull

int main(void)
{
    prt_backoff_t b;
    uint64_t t0;
    prt_backoff_start(&b, 0);
    t0 = b.start_ns;
    TAP_OK(prt_backoff_stage(&b, t0 + 10 * US, 20, 2000) == 0, "spins within spin_us");
    TAP_OK(prt_backoff_stage(&b, t0 + 30 * US, 20, 2000) == 1, "yields after spin_us");
    TAP_OK(prt_backoff_stage(&b, t0 + 2019 * US, 20, 2000) == 1, "still yields before spin_us + yield_us");
    TAP_OK(prt_backoff_stage(&b, t0 + 2021 * US, 20, 2000) == 2, "sleeps after spin_us + yield_us without progress");
    prt_backoff_progress(&b, t0 + 2500 * US);
    TAP_OK(prt_backoff_stage(&b, t0 + 2600 * US, 20, 2000) == 1,
           "progress: yields again (not back to spinning: the wait is long)");
    TAP_OK(prt_backoff_stage(&b, t0 + 4519 * US, 20, 2000) == 1 &&
               prt_backoff_stage(&b, t0 + 4521 * US, 20, 2000) == 2,
           "sleeps spin_us + yield_us after the last progress");
    TAP_OK(!prt_backoff_expired(&b, t0 + 1000000000ull * 100), "no timeout: never expires");
    prt_backoff_start(&b, 0.5);
    t0 = b.start_ns;
    prt_backoff_progress(&b, t0 + 499 * 1000 * US);
    TAP_OK(!prt_backoff_expired(&b, t0 + 499 * 1000 * US) &&
               prt_backoff_expired(&b, t0 + 500 * 1000 * US),
           "progress does not move the deadline (PLAIT_TIMEOUT counts from the wait's start)");
    return tap_done();
}
