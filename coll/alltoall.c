/*
 * alltoall.c -- alltoall and alltoallv schedules. Block j of sendbuf goes to
 * rank j and lands in block (source rank) of recvbuf. In place
 * (sendbuf == recvbuf) the input is first copied into a scratch buffer the
 * schedule owns, so no block is overwritten before it is sent.
 */
#include "config.h"

#include "coll/pcoll.h"

#define PCOLL_A2A_WINDOW 8   /* peers in flight per round of the scattered schedule */

/* The input to send from: sendbuf, or a snapshot of recvbuf when in place. */
static const char *aa_input(pcoll_sched_t *sc, const pcoll_args_t *a, size_t bytes)
{
    char *t;
    if (a->sbuf != a->rbuf)
        return a->sbuf;
    if (!(t = pcoll_sched_tmp(sc, bytes)))
        return NULL;
    pcoll_sched_copy(sc, t, a->rbuf, bytes);
    pcoll_sched_end_round(sc);
    return t;
}

/*
 * Pairwise exchange (large blocks): in step k = 1 .. n-1 rank r sends block
 * r + k to r + k and receives block r - k from r - k; its own block is
 * copied while the first step's transfers move (posted first: a peer's
 * eager message then finds its receive and lands in place). One peer pair
 * per round keeps exactly one block in flight each way, which suits large
 * blocks and avoids incast.
 * Scattered (medium blocks): the same exchanges, PCOLL_A2A_WINDOW peers per
 * round, so the transports see several messages at once.
 */
static int aa_exchange(pcoll_sched_t *sc, const pcoll_args_t *a, int window)
{
    int n = sc->comm->size, r = sc->comm->rank;
    size_t blk = a->count * a->es;
    const char *S = aa_input(sc, a, (size_t)n * blk);
    char *R = a->rbuf;
    if (sc->err)
        return sc->err;
    pcoll_sched_copy_posted(sc, R + (size_t)r * blk, S + (size_t)r * blk, blk);
    for (int k0 = 1; k0 < n; k0 += window) {
        for (int k = k0; k < n && k < k0 + window; k++) {
            int to = (r + k) % n, from = (r - k + n) % n;
            pcoll_sched_send(sc, to, S + (size_t)to * blk, blk);
            pcoll_sched_recv(sc, from, R + (size_t)from * blk, blk);
        }
        pcoll_sched_end_round(sc);
    }
    pcoll_sched_end_round(sc);   /* (one rank: the copy's own round; an empty one is none) */
    return sc->err;
}

int pcoll_alltoall_pairwise(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    return aa_exchange(sc, a, 1);
}

int pcoll_alltoall_scattered(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    return aa_exchange(sc, a, PCOLL_A2A_WINDOW);
}

/*
 * Bruck (tiny blocks, many ranks: ceil(log2 n) rounds instead of n - 1).
 * 1. Rotate: scratch block i = the block for rank r + i.
 * 2. For d = 1, 2, 4, ...: pack the scratch blocks whose index has bit d set,
 *    send them to r + d, receive the same positions from r - d, unpack them
 *    into place. A block at index i travels i ranks forward in total (the sum
 *    of its bits), so afterwards scratch block i came from rank r - i.
 * 3. recvbuf block (r - i) = scratch block i.
 * Each block moves up to log2(n) times: only worth it for small blocks.
 */
int pcoll_alltoall_bruck(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int n = sc->comm->size, r = sc->comm->rank;
    size_t blk = a->count * a->es;
    const char *S = a->sbuf == a->rbuf ? a->rbuf : a->sbuf;
    char *R = a->rbuf, *t = pcoll_sched_tmp(sc, (size_t)n * blk);
    char *pack = pcoll_sched_tmp(sc, (size_t)n * blk), *unpack = pcoll_sched_tmp(sc, (size_t)n * blk);
    if (sc->err)
        return sc->err;
    pcoll_sched_copy(sc, t, S + (size_t)r * blk, (size_t)(n - r) * blk);
    pcoll_sched_copy(sc, t + (size_t)(n - r) * blk, S, (size_t)r * blk);
    for (int d = 1; d < n; d *= 2) {
        size_t nb = 0;
        for (int i = 1; i < n; i++)          /* pack: runs before this round's transfers */
            if (i & d)
                pcoll_sched_copy(sc, pack + nb++ * blk, t + (size_t)i * blk, blk);
        pcoll_sched_end_round(sc);
        pcoll_sched_send(sc, (r + d) % n, pack, nb * blk);
        pcoll_sched_recv(sc, (r - d + n) % n, unpack, nb * blk);
        nb = 0;
        for (int i = 1; i < n; i++)
            if (i & d)
                pcoll_sched_copy(sc, t + (size_t)i * blk, unpack + nb++ * blk, blk);
    }
    for (int i = 0; i < n; i++)
        pcoll_sched_copy(sc, R + (size_t)((r - i + n) % n) * blk, t + (size_t)i * blk, blk);
    return sc->err;
}

/* alltoallv: extent of the send regions (for the in-place snapshot). */
static size_t av_extent(const pcoll_args_t *a, int n)
{
    size_t most = 0;
    for (int i = 0; i < n; i++)
        if (a->v->scounts[i] && a->v->sdispls[i] + a->v->scounts[i] > most)
            most = a->v->sdispls[i] + a->v->scounts[i];
    return most * a->es;
}

/* alltoallv: pairwise (window 1) or scattered exchange; counts and
 * displacements in elements, read once while the schedule is built. */
static int av_exchange(pcoll_sched_t *sc, const pcoll_args_t *a, int window)
{
    int n = sc->comm->size, r = sc->comm->rank;
    size_t es = a->es;
    const char *S = aa_input(sc, a, av_extent(a, n));
    char *R = a->rbuf;
    if (sc->err)
        return sc->err;
    pcoll_sched_copy_posted(sc, R + a->v->rdispls[r] * es, S + a->v->sdispls[r] * es,
                            a->v->rcounts[r] * es);   /* (as aa_exchange) */
    for (int k0 = 1; k0 < n; k0 += window) {
        for (int k = k0; k < n && k < k0 + window; k++) {
            int to = (r + k) % n, from = (r - k + n) % n;
            pcoll_sched_send(sc, to, S + a->v->sdispls[to] * es, a->v->scounts[to] * es);
            pcoll_sched_recv(sc, from, R + a->v->rdispls[from] * es, a->v->rcounts[from] * es);
        }
        pcoll_sched_end_round(sc);
    }
    pcoll_sched_end_round(sc);
    return sc->err;
}

int pcoll_alltoallv_pairwise(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    return av_exchange(sc, a, 1);
}

int pcoll_alltoallv_scattered(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    return av_exchange(sc, a, PCOLL_A2A_WINDOW);
}
