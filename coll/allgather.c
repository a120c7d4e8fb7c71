/*
 * allgather.c -- allgather schedules. recvbuf holds n blocks of sendcount
 * elements, block i from rank i. In place (sendbuf == recvbuf) rank r's block
 * is already at block r of recvbuf. Every rank ends with bitwise the same
 * bytes: blocks are only ever copied.
 */
#include "config.h"

#include "coll/pcoll.h"

static const char *ag_own(const pcoll_args_t *a, int r, size_t blk)
{
    return a->sbuf == a->rbuf ? (const char *)a->rbuf + (size_t)r * blk : a->sbuf;
}

/*
 * Ring (large messages): block r goes into place, then in step
 * k = 0 .. n-2 rank r sends block (r - k) to r + 1 and receives block
 * (r - k - 1) from r - 1 into place. n - 1 rounds, each moving one block.
 */
int pcoll_allgather_ring(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int n = sc->comm->size, r = sc->comm->rank, right = (r + 1) % n, left = (r - 1 + n) % n;
    size_t blk = a->count * a->es;
    char *R = a->rbuf;
    pcoll_sched_copy(sc, R + (size_t)r * blk, ag_own(a, r, blk), blk);
    pcoll_sched_end_round(sc);
    for (int k = 0; k < n - 1; k++) {
        int sb = (r - k + n) % n, rb = (r - k - 1 + n) % n;
        pcoll_sched_send(sc, right, R + (size_t)sb * blk, blk);
        pcoll_sched_recv(sc, left, R + (size_t)rb * blk, blk);
        pcoll_sched_end_round(sc);
    }
    return sc->err;
}

/*
 * Recursive doubling (small messages, log2 rounds): fold to pof2 ranks (each
 * even rank 2i < 2*rem gives its block to 2i + 1), then in step
 * d = 1 .. pof2/2 newrank i swaps its window of d super-blocks with i ^ d,
 * where survivor j's super-block is the blocks of the real ranks it stands
 * for (util.c). Finally 2i + 1 sends the whole result to 2i.
 */
int pcoll_allgather_rd(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int n = sc->comm->size, r = sc->comm->rank, pof2 = pcoll_pof2(n), rem = n - pof2;
    int nr = pcoll_fold_newrank(r, rem);
    size_t blk = a->count * a->es, *edge;
    char *R = a->rbuf;
    pcoll_sched_copy(sc, R + (size_t)r * blk, ag_own(a, r, blk), blk);
    pcoll_sched_end_round(sc);
    if (n == 1)
        return sc->err;
    edge = pcoll_sched_tmp(sc, ((size_t)pof2 + 1) * sizeof *edge);
    if (sc->err)
        return sc->err;
    for (int j = 0; j <= pof2; j++)
        edge[j] = (size_t)(j < rem ? 2 * j : j + rem);
    if (r < 2 * rem) {
        if (r % 2 == 0)
            pcoll_sched_send(sc, r + 1, R + (size_t)r * blk, blk);
        else
            pcoll_sched_recv(sc, r - 1, R + (size_t)(r - 1) * blk, blk);
        pcoll_sched_end_round(sc);
    }
    if (nr >= 0)
        pcoll_doubling(sc, R, edge, blk, pof2, nr, rem);
    if (r < 2 * rem) {
        if (r % 2)
            pcoll_sched_send(sc, r - 1, R, (size_t)n * blk);
        else
            pcoll_sched_recv(sc, r + 1, R, (size_t)n * blk);
        pcoll_sched_end_round(sc);
    }
    return sc->err;
}

/*
 * Bruck (small messages, any n, ceil(log2 n) rounds): blocks are collected in
 * a scratch buffer in the order r, r+1, r+2, ... (mod n). In step
 * d = 1, 2, 4, ... rank r sends the first min(d, n - d) blocks it has to
 * r - d and appends the ones r + d sends it; after the last step it holds all
 * n and rotates them into place (scratch block i is rank (r + i)'s).
 */
int pcoll_allgather_bruck(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int n = sc->comm->size, r = sc->comm->rank;
    size_t blk = a->count * a->es;
    char *R = a->rbuf, *t = pcoll_sched_tmp(sc, (size_t)n * blk);
    if (sc->err)
        return sc->err;
    pcoll_sched_copy(sc, t, ag_own(a, r, blk), blk);
    pcoll_sched_end_round(sc);
    for (int d = 1; d < n; d *= 2) {
        size_t nb = (size_t)(d < n - d ? d : n - d);
        pcoll_sched_send(sc, (r - d + n) % n, t, nb * blk);
        pcoll_sched_recv(sc, (r + d) % n, t + (size_t)d * blk, nb * blk);
        pcoll_sched_end_round(sc);
    }
    pcoll_sched_copy(sc, R + (size_t)r * blk, t, (size_t)(n - r) * blk);
    pcoll_sched_copy(sc, R, t + (size_t)(n - r) * blk, (size_t)r * blk);
    return sc->err;
}
