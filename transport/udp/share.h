/*
 * share.h -- a receive batch's placement copies, shared between the thread
 * that drives a udp engine (an application thread inside a wait) and that
 * engine's own thread.
 *
 * The driver posts the second half of its copies, makes the first half,
 * then takes the second half back unless the engine thread already claimed
 * it, in which case it waits for that thread to finish. So an engine thread
 * that is asleep or busy sending costs the driver nothing but two atomic
 * operations, and each copy is made exactly once, by one of the two:
 *
 *   IDLE --post--> POSTED --claim (driver)--> TAKEN --> IDLE
 *                         --claim (engine)--> TAKEN --copies--> DONE --> IDLE
 *
 * One driver at a time per share (it holds the engine's drive lock); the
 * engine thread is the only helper.
 */
#ifndef PLAIT_TRANSPORT_UDP_SHARE_H
#define PLAIT_TRANSPORT_UDP_SHARE_H

#include <stdatomic.h>
#include <stdint.h>

#include "transport/proto/pp.h"

enum { UDP_SHARE_IDLE, UDP_SHARE_POSTED, UDP_SHARE_TAKEN, UDP_SHARE_DONE };

typedef struct {
    _Atomic int      state;       /* UDP_SHARE_* */
    _Atomic uint64_t posted_ns;   /* when the last half was posted (0: never) */
    _Atomic uint64_t helped;      /* copies the helper made, in all */
    const pp_copy_t *q;           /* the posted half: written before POSTED */
    uint32_t         n;
} udp_share_t;

/* Makes copies q[0..n) (memcpy each). */
void udp_share_copies(const pp_copy_t *q, uint32_t n);

/* Driver: offers q[0..n) to the helper, stamped now. Follow with
 * udp_share_finish for the driver's own half. */
void udp_share_post(udp_share_t *s, const pp_copy_t *q, uint32_t n, uint64_t now);

/* Driver: makes q[0..n) (its own half), then the posted half unless the
 * helper claimed it (then waits until the helper is done). Returns the
 * copies the driver made of the posted half (0: the helper made them). */
uint32_t udp_share_finish(udp_share_t *s, const pp_copy_t *q, uint32_t n);

/* Helper: makes a posted half if it claims it first; returns the copies
 * it made (0: nothing was posted, or the driver took it back). */
uint32_t udp_share_help(udp_share_t *s);

/* 1 while halves were posted within window_ns of now: the helper stays at
 * hand (spins) rather than sleeps. */
static inline int udp_share_recent(udp_share_t *s, uint64_t now, uint64_t window_ns)
{
    uint64_t t = atomic_load_explicit(&s->posted_ns, memory_order_relaxed);
    return t && now - t < window_ns;
}

#endif
