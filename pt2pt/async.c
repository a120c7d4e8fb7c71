/*
 * async.c -- the progress thread: non-blocking collectives move on while the
 * program computes.
 *
 * A non-blocking collective is a schedule of rounds (coll/sched.c), and a
 * round starts only when a progress pass sees the previous one complete. A
 * program that starts plait_iallreduce and computes without calling plait
 * would find at its plait_wait the first round done and every other still
 * to run: no overlap. So while a non-blocking collective is in flight a
 * thread of the library makes the passes itself.
 *
 * It is started at the first non-blocking collective (programs that never
 * start one have no such thread). While one is in flight it looks every
 * 100-200 us (PPT_ASYNC_LOOK_US, doubling while the answer stays the same)
 * whether the program made a progress pass since its last look (a pass
 * counter, s->passes): if so the program is inside plait
 * (plait_wait, plait_test loops) and the thread leaves the work to it, so a
 * start-and-wait program pays nothing; if not, the program is away
 * computing, and the thread drives: a pass, then a sleep on the process's
 * wake-up word (the shm transport's: peers on this host bump it when they
 * send to this rank, the udp engine when its packets made something
 * deliverable; tcp does not, hence a 1 ms bound there), a pass, ... until
 * the program is back. With none in flight for 1-2 ms it sleeps until the
 * next one starts (the one system call a start may cost). A look reads two
 * counters (passes, nb_inflight) without the lock; only driving takes it,
 * with trylock: the first version took it at every look, and its handoffs
 * cost start-and-wait calls of 4-128 KiB 5-75% (bench/nb-overlap, 2 ranks).
 * Where the ranks of the host are bound and leave a core free, the thread
 * moves there when it starts (PLAIT_THREAD_CPU, runtime/affinity.c) and
 * polls instead (async_poll, PLAIT_PROGRESS_POLL; =0: looks every 20 us
 * without backing off). PLAIT_PROGRESS_THREAD=0 turns it off.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "pt2pt/ppt.h"

#define PPT_ASYNC_LOOK_US   100     /* first look after a start or a pass of its own */
#define PPT_ASYNC_LOOK_MAX  200     /* looks back off to this while the program makes its
                                     * own passes: a thread sharing the program's core costs
                                     * it two context switches per look, but a program gone
                                     * computing is seen only at the second look after (800
                                     * lost most of the overlap of 2-4 MiB allreduces) */
#define PPT_ASYNC_LOOK_SPARE_US 20 /* on a core of its own (async_main) looks cost the
                                     * program nothing, and it sees the program leave sooner:
                                     * 1-2 MiB allreduces hid 46-72% (100: -4-34%; 10: no
                                     * better, 4 ranks' 64 KiB start-and-wait 46 -> 114 us) */
#define PPT_ASYNC_NET_US    1000    /* driving, sleep bound with tcp peers (their data bumps
                                     * nothing) */
#define PPT_ASYNC_SHM_US    10000   /* driving, sleep bound otherwise: every source of work
                                     * wakes it */
#define PPT_ASYNC_IDLE_LOOKS 10     /* looks with none in flight (1-2 ms) before it sleeps
                                     * until the next non-blocking collective: its looks on
                                     * a bound rank's core slowed 4-rank blocking calls of
                                     * 1-512 KiB that followed non-blocking ones 10-50% */
#define PPT_ASYNC_DEEP_US   200000  /* that sleep's guard bound */
#define PPT_ASYNC_QUIET_NS  3000    /* on a spare core: nobody else made a pass for this
                                     * long, so the program is away (async_poll) */
#define PPT_ASYNC_GAP_PAUSES 32     /* between its passes: 1-4 us with the lock free */
#define PPT_ASYNC_YIELD_NS  20000   /* polling, it yields the core this often */
#define PPT_ASYNC_POLL_IDLE_NS 2000000 /* on a spare core: polls this long with none in
                                     * flight before the deep sleep */
#define PPT_ASYNC_SAMPLE_NS 2000    /* polling, it reads the program's counters this often:
                                     * each read takes their cache line from the program's
                                     * core, whose next write then waits for it back. Read
                                     * at every pause, 16-512 B start-and-wait iallreduces
                                     * took 0.2-0.4 us longer with the thread than without;
                                     * every 1 us (and a second line), 0.07-0.17 us; every
                                     * 20 us, 0.03 us or less at most sizes. It drives 3-5
                                     * us after the program left. */

enum { ASYNC_LOOK, ASYNC_DRIVE, ASYNC_DEEP };

static long async_look_first(const ppt_state_t *s)
{
    return s->async_spare ? PPT_ASYNC_LOOK_SPARE_US : PPT_ASYNC_LOOK_US;
}

/* One look: the mode to sleep in next. The lock is taken only to drive,
 * when a non-blocking collective is in flight and nobody made a pass since
 * the last look (the program is away): a program inside its own calls
 * never finds its lock held by this thread. */
static int async_look(ppt_state_t *s, uint64_t *seen, int *idle, long *look_us)
{
    uint64_t passes;
    if (atomic_load_explicit(&s->nb_inflight, memory_order_relaxed) == 0)
        return ++*idle >= PPT_ASYNC_IDLE_LOOKS ? ASYNC_DEEP : ASYNC_LOOK;
    *idle = 0;
    passes = atomic_load_explicit(&s->passes, memory_order_relaxed);
    if (passes != *seen) {   /* the program progresses by itself */
        *seen = passes;
        if (!s->async_spare && *look_us < PPT_ASYNC_LOOK_MAX)
            *look_us *= 2;
        return ASYNC_LOOK;
    }
    *look_us = async_look_first(s);
    if (pthread_mutex_trylock(&s->lock) != 0)   /* a program thread is in a call */
        return ASYNC_LOOK;
    if (atomic_load_explicit(&s->nb_inflight, memory_order_relaxed) > 0)
        ppt_progress_locked(s);
    *seen = atomic_load_explicit(&s->passes, memory_order_relaxed);
    pthread_mutex_unlock(&s->lock);
    return ASYNC_DRIVE;
}

static void async_sleep(ppt_state_t *s, int mode, uint32_t gen, long look_us)
{
    switch (mode) {
    case ASYNC_DEEP:   /* until the next non-blocking collective (or finalize) */
        /* deep, then look: a kick counts first, then looks at deep (both
         * sequentially consistent), so one of the two sees the other */
        atomic_store(&s->async_deep, 1);
        if (atomic_load(&s->nb_inflight) == 0)
            prt_futex_wait((volatile uint32_t *)&s->async_gen, gen, PPT_ASYNC_DEEP_US);
        atomic_store(&s->async_deep, 0);
        break;
    case ASYNC_DRIVE:  /* until a frame or the udp engine wakes the process */
        ptl_shm_sleep(&s->shm, s->tcp.ops ? PPT_ASYNC_NET_US : PPT_ASYNC_SHM_US, &s->async_stop);
        break;
    default:
        prt_futex_wait((volatile uint32_t *)&s->async_gen, gen, look_us);
        break;
    }
}

/* async_poll with nothing in flight: polls on, and after
 * PPT_ASYNC_POLL_IDLE_NS of it (*idle_ns: since when) sleeps until a start
 * kicks it. */
static void async_poll_idle(ppt_state_t *s, uint64_t *idle_ns, uint64_t now)
{
    if (!*idle_ns) {
        *idle_ns = now;
    } else if (now - *idle_ns > PPT_ASYNC_POLL_IDLE_NS) {
        async_sleep(s, ASYNC_DEEP, atomic_load(&s->async_gen), 0);
        *idle_ns = 0;
    }
    prt_cpu_relax();
}

/* The thread on a spare core polls instead of sleeping between looks. A
 * look every 20 us saw a program that went computing only 20-40 us after
 * it did: every collective shorter than that (below about 1 MiB on one
 * host) was over, or waiting on its next round, before the thread drove,
 * and hid nothing. Here the thread pauses in a loop and reads the counters
 * every PPT_ASYNC_SAMPLE_NS: while someone else makes progress passes (the
 * program in plait_wait, a plait_test loop, a blocking call) it keeps off
 * the lock; once nobody has for PPT_ASYNC_QUIET_NS it drives, pass after
 * pass, until the program is back (its first pass shows in the counter) or
 * nothing is in flight. The core is one no rank of the host is bound to
 * (runtime/affinity.c), so the spinning takes no rank's CPU, and the
 * spaced reads seldom take the counters' line from the program; with
 * nothing in flight for PPT_ASYNC_POLL_IDLE_NS it sleeps until the next
 * start kicks it. */
static void async_poll(ppt_state_t *s)
{
    uint64_t seen = atomic_load(&s->passes), quiet_ns = prt_now_ns(), idle_ns = 0,
             yield_ns = quiet_ns, sample_ns = 0;
    int drove = 0;   /* its last turn made a pass: the next one samples at once */
    for (;;) {
        uint64_t passes, now = prt_now_ns();
        if (!drove && now - sample_ns < PPT_ASYNC_SAMPLE_NS) {
            prt_cpu_relax();
            continue;
        }
        if (atomic_load_explicit(&s->async_stop, memory_order_relaxed))   /* (same line) */
            break;
        sample_ns = now;
        drove = 0;
        if (now - yield_ns > PPT_ASYNC_YIELD_NS) {   /* the core may not be as spare as */
            sched_yield();                           /* it looked (another job, a bed of */
            yield_ns = now;                          /* namespace hosts): share it */
        }
        if (atomic_load_explicit(&s->nb_inflight, memory_order_relaxed) == 0) {
            async_poll_idle(s, &idle_ns, now);
            continue;
        }
        idle_ns = 0;
        passes = atomic_load_explicit(&s->passes, memory_order_relaxed);
        if (passes != seen || atomic_load_explicit(&s->waiters, memory_order_relaxed)) {
            seen = passes;   /* the program progresses by itself, or waits to */
            quiet_ns = now;
        }
        if (now - quiet_ns < PPT_ASYNC_QUIET_NS)
            continue;
        if (pthread_mutex_trylock(&s->lock) != 0) {   /* a program thread is in a call */
            quiet_ns = now;
            continue;
        }
        if (atomic_load_explicit(&s->nb_inflight, memory_order_relaxed) > 0)
            ppt_progress_locked(s);
        seen = atomic_load_explicit(&s->passes, memory_order_relaxed);
        pthread_mutex_unlock(&s->lock);
        drove = 1;
        /* a program thread spinning for the lock gets it now (relocking at
         * once, this thread would win most races against it) */
        for (int i = 0; i < PPT_ASYNC_GAP_PAUSES; i++)
            prt_cpu_relax();
    }
}

static void *async_main(void *arg)
{
    ppt_state_t *s = arg;
    uint64_t seen = 0;
    int idle = 0;
    long look_us;
    pthread_setname_np(pthread_self(), "plait-progress");
    /* Bound to the rank's own core, each look and pass takes turns with the
     * program: one host, ranks bound to cores, 4-16 MiB allreduces hid
     * 0-37% of their time behind computation there, 46-100% on a core of
     * their own (docs/PERFORMANCE.md, session 33). */
    s->async_spare = prt_affinity_place(&s->job, s->job.local_rank, "progress thread");
    if (s->async_spare && s->cfg.progress_poll) {
        prt_log(PRT_LOG_DEBUG, "progress thread: polls on its spare core (PLAIT_PROGRESS_POLL)");
        async_poll(s);
        return NULL;
    }
    look_us = async_look_first(s);
    while (!atomic_load(&s->async_stop)) {
        uint32_t gen = atomic_load(&s->async_gen);
        int mode = async_look(s, &seen, &idle, &look_us);
        async_sleep(s, mode, gen, look_us);
        if (mode == ASYNC_DEEP) {
            idle = 0;
            look_us = async_look_first(s);
        }
    }
    return NULL;
}

/* Starts the thread on the rank's CPUs of plait_init, not on those of
 * whichever thread starts the first non-blocking collective (a program's
 * thread pinned elsewhere put it on another rank's core: a black-box test). */
static int async_create(ppt_state_t *s)
{
    pthread_attr_t attr;
    int err = pthread_attr_init(&attr);
    if (err != 0)
        return err;
    if (s->job.cpus_own_known)
        pthread_attr_setaffinity_np(&attr, sizeof s->job.cpus_own, &s->job.cpus_own);
    err = pthread_create(&s->async_thread, &attr, async_main, s);
    pthread_attr_destroy(&attr);
    return err;
}

void ppt_async_kick_locked(ppt_state_t *s)
{
    if (!s->cfg.progress_thread || s->async_failed)
        return;
    if (!s->async_started) {
        int err = async_create(s);
        if (err != 0) {   /* the collectives still complete in the program's own calls */
            s->async_failed = 1;
            prt_log(PRT_LOG_WARN, "cannot start the progress thread (%s): non-blocking "
                    "collectives move on only inside plait calls", strerror(err));
            return;
        }
        s->async_started = 1;
    }
    /* Counted (the caller's fetch_add, sequentially consistent) before this
     * look: a thread going deep either sees the count or is seen here. A
     * system call only for one in its deep sleep. */
    if (atomic_load(&s->async_deep)) {
        atomic_fetch_add(&s->async_gen, 1);
        prt_futex_wake((volatile uint32_t *)&s->async_gen);
    }
}

void ppt_async_stop(ppt_state_t *s)
{
    if (!s->async_started)
        return;
    atomic_store(&s->async_stop, 1);
    atomic_fetch_add(&s->async_gen, 1);
    prt_futex_wake((volatile uint32_t *)&s->async_gen);
    ptl_shm_wake_self(&s->shm);
    pthread_join(s->async_thread, NULL);
    s->async_started = 0;
}
