/*
 * pair.c -- blocking collectives of a two-rank communicator, small messages,
 * straight on pt2pt.
 *
 * With two ranks every algorithm of the table comes down to one exchange (one
 * message for bcast) plus local work, and running that through the schedule
 * engine (build, start, progress rounds, tear down) cost more than the
 * message itself. Here the call posts its send and receive with requests on
 * its own stack, on the collective context, tagged with the collective's
 * sequence number like the engine's traffic (so pair-run and engine-run
 * collectives on one communicator interleave correctly), waits for both and
 * finishes locally:
 *
 *   bcast           the root sends the buffer; the other rank receives it.
 *   allreduce       the ranks swap vectors; both compute rank 0's op rank 1's
 *                   (same operands, same order: bitwise identical results);
 *                   AVG divides by 2 on both.
 *   reduce_scatter  rank r sends block (1 - r) of its input and receives the
 *                   peer's block r, then computes rank 0's op rank 1's into
 *                   recvbuf (in place: its front).
 *   allgather       own block into place; the ranks swap blocks.
 *   alltoall        own block into place; block (1 - r) goes to the peer, the
 *                   peer's block lands there (in place: the outgoing block is
 *                   copied aside first).
 *
 * These are exactly the messages and operations of recursive doubling,
 * recursive halving, binomial and scattered with n = 2, minus the engine.
 * Used only where nothing forces an algorithm (PLAIT_<COLL>_ALGO), so every
 * scheduled algorithm still runs when asked for, and only up to the sizes in
 * pcoll_pair_eligible (the received operand of a reduction sits on the stack).
 */
#include "config.h"

#include <string.h>

#include "coll/pcoll.h"

/* Bytes of stack scratch: the received vector of a reduction, the outgoing
 * block of an in-place alltoall. */
#define PAIR_SCRATCH ((size_t)8 << 10)

int pcoll_pair_eligible(const pcoll_args_t *a)
{
    size_t b = a->count * a->es;
    switch (a->coll) {
    case PCOLL_BCAST:          return b <= (64u << 10);
    case PCOLL_ALLREDUCE:
    case PCOLL_REDUCE_SCATTER: return b <= PAIR_SCRATCH;
    case PCOLL_ALLGATHER:      return b <= (16u << 10);  /* the table's rd range */
    case PCOLL_ALLTOALL:       /* in place, the outgoing block is copied aside */
        return b <= (64u << 10) && (a->sbuf != a->rbuf || b <= PAIR_SCRATCH);
    default:                   return 0;
    }
}

/* A failed or short transfer: the error every schedule reports. */
static int pair_check(plait_request_t r, size_t want, int peer, const char *fn)
{
    return pcoll_xfer_check(r, r->kind == PPT_REQ_RECV, want, peer, fn);
}

enum { PAIR_SEND = 1, PAIR_RECV = 2 };

/* Sends slen bytes of sbuf to the other rank (PAIR_SEND in what) and
 * receives rlen bytes into rbuf (PAIR_RECV); returns once both are done.
 * Empty messages still go: the peer waits for them. */
static int pair_xchg(ppt_state_t *s, plait_comm_t comm, const char *fn, uint32_t sig, int what,
                     const void *sbuf, size_t slen, void *rbuf, size_t rlen)
{
    struct plait_request sst, rst;
    plait_request_t sr = what & PAIR_SEND ? &sst : NULL, rr = what & PAIR_RECV ? &rst : NULL;
    int peer = 1 - comm->rank, tag = pcoll_next_tag(comm, sig), rc = PLAIT_OK;
    /* the receive first: the peer's eager message then finds it posted */
    if (rr && (rc = ppt_irecv_locked(s, comm, comm->cmq, rbuf, rlen, peer, tag, &rr)) != PLAIT_OK)
        rr = NULL;
    if (rc == PLAIT_OK && sr &&
        (rc = ppt_isend_flags_locked(s, comm, comm->cmq, sbuf, slen, peer, tag,
                                     rr ? PPT_SEND_XCHG : 0, &sr)) != PLAIT_OK)
        sr = NULL;
    if (rr)   /* (the peer's refusal of this call ends the waits: pt2pt/notice.c) */
        rr->call = comm->coll_calls;
    if (sr)
        sr->call = comm->coll_calls;
    /* A finished transfer's own status decides (a truncation is a count
     * mismatch), else the wait's timeout or dead-peer error. Like a schedule
     * round, the send is waited for even after a mismatched receive (the
     * peer may still be reading it); not after a receive that never came. */
    if (rc == PLAIT_OK && rr && ((rc = ppt_wait_locked(s, rr, fn)) == PLAIT_OK || rr->done))
        rc = pair_check(rr, rlen, peer, fn);
    if (sr && (!rr || rr->done)) {
        int src = ppt_wait_locked(s, sr, fn);
        if (src == PLAIT_OK || sr->done)
            src = pair_check(sr, slen, peer, fn);
        rc = rc != PLAIT_OK ? rc : src;
    }
    if (rr) {
        ppt_cancel_locked(s, rr);       /* no-op unless it failed to complete */
        ppt_req_free(rr);
    }
    if (sr) {
        ppt_cancel_locked(s, sr);
        ppt_req_free(sr);
    }
    return rc;
}

/* Reduces the two ranks' operands into dst: rank 0's is always the left one. */
static void pair_reduce(plait_comm_t comm, const pcoll_args_t *a, void *dst, const void *mine,
                        const void *theirs, size_t count)
{
    const void *lo = comm->rank == 0 ? mine : theirs, *hi = comm->rank == 0 ? theirs : mine;
    if (!count)
        return;
    pcoll_reduce(dst, lo, hi, count, a->dt, a->op);
    if (a->op == PLAIT_AVG)
        pcoll_scale(dst, count, a->dt, 2);
}

int pcoll_pair_run_locked(ppt_state_t *s, plait_comm_t comm, const pcoll_args_t *a,
                          const char *fn)
{
    _Alignas(64) char tmp[PAIR_SCRATCH];
    int r = comm->rank, p = 1 - r, rc;
    uint32_t sig = pcoll_tag_sig(a);
    size_t b = a->count * a->es;
    const char *S = a->sbuf;
    char *R = a->rbuf;
    switch (a->coll) {
    case PCOLL_BCAST:
        return r == a->root ? pair_xchg(s, comm, fn, sig, PAIR_SEND, R, b, NULL, 0)
                            : pair_xchg(s, comm, fn, sig, PAIR_RECV, NULL, 0, R, b);
    case PCOLL_ALLREDUCE:
        rc = pair_xchg(s, comm, fn, sig, PAIR_SEND | PAIR_RECV, S, b, tmp, b);
        if (rc == PLAIT_OK)
            pair_reduce(comm, a, R, S, tmp, a->count);
        return rc;
    case PCOLL_REDUCE_SCATTER:
        rc = pair_xchg(s, comm, fn, sig, PAIR_SEND | PAIR_RECV, S + (size_t)p * b, b, tmp, b);
        if (rc == PLAIT_OK)
            pair_reduce(comm, a, R, S + (size_t)r * b, tmp, a->count);
        return rc;
    case PCOLL_ALLGATHER:
        if (S != R && b)
            memcpy(R + (size_t)r * b, S, b);
        return pair_xchg(s, comm, fn, sig, PAIR_SEND | PAIR_RECV, R + (size_t)r * b, b,
                         R + (size_t)p * b, b);
    case PCOLL_ALLTOALL: {
        const char *out = S + (size_t)p * b;
        if (b && S == R) {  /* the peer's block arrives where the outgoing one is */
            memcpy(tmp, out, b);
            out = tmp;
        } else if (b) {
            memcpy(R + (size_t)r * b, S + (size_t)r * b, b);
        }
        return pair_xchg(s, comm, fn, sig, PAIR_SEND | PAIR_RECV, out, b, R + (size_t)p * b, b);
    }
    default:
        return PLAIT_ERR_INTERNAL;
    }
}
