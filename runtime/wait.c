/* wait.c -- staged backoff for blocked callers and futex sleep/wake. */
#include "config.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "runtime/prt.h"

void prt_backoff_start(prt_backoff_t *b, double timeout_s)
{
    prt_backoff_start_at(b, timeout_s, prt_now_ns());
}

void prt_backoff_start_at(prt_backoff_t *b, double timeout_s, uint64_t now)
{
    b->start_ns = b->work_ns = now;
    b->deadline_ns = timeout_s > 0 ? b->start_ns + (uint64_t)(timeout_s * 1e9) : 0;
}

int prt_backoff_expired(const prt_backoff_t *b, uint64_t now)
{
    return b->deadline_ns != 0 && now >= b->deadline_ns;
}

int prt_backoff_stage(const prt_backoff_t *b, uint64_t now, long spin_us, long yield_us)
{
    uint64_t waited_us = (now - b->start_ns) / 1000, idle_us = (now - b->work_ns) / 1000;
    if (waited_us < (uint64_t)spin_us)
        return 0;
    if (idle_us < (uint64_t)(spin_us + yield_us))
        return 1;
    return 2;
}

/* Shared (not FUTEX_PRIVATE) operations: the word lives in a segment mapped by
 * several processes. */
void prt_futex_wait(volatile uint32_t *word, uint32_t expected, long timeout_us)
{
    struct timespec ts = {timeout_us / 1000000, (timeout_us % 1000000) * 1000};
    syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, NULL, 0);
}

void prt_futex_wake(volatile uint32_t *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE, 1 << 30, NULL, NULL, 0);
}
