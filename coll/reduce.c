/*
 * reduce.c -- reduce (to a root) and reduce_scatter schedules.
 *
 * reduce: recvbuf matters at the root only; in place at the root
 * (sendbuf == recvbuf) its input is taken from recvbuf. reduce_scatter:
 * sendbuf holds n blocks of recvcount elements; rank r gets block r reduced.
 * In place (sendbuf == recvbuf) recvbuf holds the n blocks on entry and the
 * result lands in its first recvcount elements (MPI_IN_PLACE semantics).
 * PLAIT_AVG divides each result element once, where it was computed.
 */
#include "config.h"

#include "coll/pcoll.h"

static int lowbit(int v) { return v & -v; }

/*
 * Binomial tree (small messages). Ranks are renumbered v = (r - root) mod n.
 * In step m = 1, 2, 4, ...: a rank with bit m set in v sends its partial
 * result to v - m and is done; one without it receives from v + m (if it
 * exists) and reduces: acc = acc (+) child. After ceil(log2 n) steps v = 0,
 * the root, holds the result.
 */
int pcoll_reduce_binomial(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int n = sc->comm->size, r = sc->comm->rank, root = a->root, v = (r - root + n) % n;
    size_t bytes = a->count * a->es;
    const char *src = r == root && a->sbuf == a->rbuf ? a->rbuf : a->sbuf;
    char *acc, *in = NULL;
    int has_child = v == 0 ? n > 1 : (lowbit(v) > 1 && v + 1 < n);
    if (r == root) {
        acc = a->rbuf;
        pcoll_sched_copy(sc, acc, src, bytes);
    } else if (has_child) {
        acc = pcoll_sched_tmp(sc, bytes);
        if (acc)
            pcoll_sched_copy(sc, acc, src, bytes);
    } else {
        acc = (char *)src;      /* a leaf sends its input as it is */
    }
    pcoll_sched_end_round(sc);
    if (has_child)
        in = pcoll_sched_tmp(sc, bytes);
    if (sc->err)
        return sc->err;
    for (int m = 1; m < n; m *= 2) {
        if (v & m) {
            pcoll_sched_send(sc, (v - m + root) % n, acc, bytes);
            pcoll_sched_end_round(sc);
            break;
        }
        if (v + m < n) {
            pcoll_sched_recv(sc, (v + m + root) % n, in, bytes);
            pcoll_sched_reduce(sc, acc, acc, in, a->count);
            pcoll_sched_end_round(sc);
        }
    }
    if (r == root)
        pcoll_sched_scale(sc, acc, a->count);
    return sc->err;
}

/*
 * Rabenseifner-style reduce (large messages): fold to pof2 ranks, recursive
 * halving (each survivor ends with 1/pof2 of the vector reduced, see
 * util.c), then a binomial gather of those blocks to the survivor that stands
 * for the root: with vr = newrank ^ newrank(root), in step d = 1, 2, ... a
 * rank with bit d of vr set sends its window of d blocks to newrank ^ d and is
 * done; the others receive the neighbouring window. XOR keeps every window a
 * contiguous range. If the root was folded out, its partner forwards the
 * result. Moves about 2x the vector per rank instead of log2(n) x.
 */
int pcoll_reduce_rabenseifner(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int n = sc->comm->size, r = sc->comm->rank, root = a->root, pof2 = pcoll_pof2(n);
    int rem = n - pof2, nr = pcoll_fold_newrank(r, rem);
    int rootnr = pcoll_fold_newrank(root, rem) >= 0 ? pcoll_fold_newrank(root, rem)
                                                    : pcoll_fold_newrank(root + 1, rem);
    int stand_in = pcoll_fold_real(rootnr, rem);
    size_t es = a->es, cnt = a->count, bytes = cnt * es, *edge;
    const char *src = r == root && a->sbuf == a->rbuf ? a->rbuf : a->sbuf;
    char *acc, *in;
    if (n == 1)
        return pcoll_reduce_binomial(sc, a);
    acc = pcoll_sched_tmp(sc, bytes);
    in = pcoll_sched_tmp(sc, bytes);
    edge = pcoll_sched_tmp(sc, ((size_t)pof2 + 1) * sizeof *edge);
    if (sc->err)
        return sc->err;
    for (int j = 0; j <= pof2; j++)
        edge[j] = pcoll_blk_off(cnt, pof2, j);
    pcoll_sched_copy(sc, acc, src, bytes);
    pcoll_sched_end_round(sc);
    if (r < 2 * rem) {
        if (r % 2 == 0) {
            pcoll_sched_send(sc, r + 1, src, bytes);
        } else {
            pcoll_sched_recv(sc, r - 1, in, bytes);
            pcoll_sched_reduce(sc, acc, in, acc, cnt);
        }
        pcoll_sched_end_round(sc);
    }
    if (nr >= 0) {
        int vr = nr ^ rootnr;
        pcoll_halving(sc, acc, in, edge, es, pof2, nr, rem);
        for (int d = 1; d < pof2; d *= 2) {
            int p = pcoll_fold_real(nr ^ d, rem), mlo = nr & ~(d - 1), tlo = (nr ^ d) & ~(d - 1);
            if (vr & d) {
                pcoll_sched_send(sc, p, acc + edge[mlo] * es, (edge[mlo + d] - edge[mlo]) * es);
                pcoll_sched_end_round(sc);
                break;
            }
            pcoll_sched_recv(sc, p, acc + edge[tlo] * es, (edge[tlo + d] - edge[tlo]) * es);
            pcoll_sched_end_round(sc);
        }
    }
    if (r == stand_in && r != root)
        pcoll_sched_send(sc, root, acc, bytes);
    else if (r == root && r != stand_in)
        pcoll_sched_recv(sc, stand_in, a->rbuf, bytes);
    else if (r == root)
        pcoll_sched_copy(sc, a->rbuf, acc, bytes);
    pcoll_sched_end_round(sc);
    if (r == root)
        pcoll_sched_scale(sc, a->rbuf, cnt);
    return sc->err;
}

/*
 * Ring reduce_scatter: step k = 0 .. n-2, rank r sends the partial sum of
 * block (r - k - 1) to r + 1 (at k = 0 its own input block) and receives the
 * partial sum of block (r - k - 2) from r - 1, adding its own input block to
 * it. The last step's block is (r - n) = r: it is written into recvbuf. Each
 * block is reduced along the ring starting at rank (b + 1), once.
 */
int pcoll_reduce_scatter_ring(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int n = sc->comm->size, r = sc->comm->rank, right = (r + 1) % n, left = (r - 1 + n) % n;
    size_t blk = a->count * a->es;
    const char *src = a->sbuf;
    char *acc, *in;
    if (n == 1) {
        pcoll_sched_copy(sc, a->rbuf, src, blk);
        pcoll_sched_end_round(sc);
        pcoll_sched_scale(sc, a->rbuf, a->count);
        return sc->err;
    }
    acc = pcoll_sched_tmp(sc, blk);
    in = pcoll_sched_tmp(sc, blk);
    for (int k = 0; k < n - 1; k++) {
        int sb = (r - k - 1 + n) % n, rb = (r - k - 2 + 2 * n) % n;
        char *dst = k == n - 2 ? a->rbuf : acc;
        pcoll_sched_send(sc, right, k == 0 ? src + (size_t)sb * blk : acc, blk);
        pcoll_sched_recv(sc, left, in, blk);
        pcoll_sched_reduce(sc, dst, in, src + (size_t)rb * blk, a->count);
        pcoll_sched_end_round(sc);
    }
    pcoll_sched_scale(sc, a->rbuf, a->count);
    return sc->err;
}

/*
 * Recursive-halving reduce_scatter (small and medium sizes): fold to pof2
 * ranks (the even rank of each folded pair hands its whole input to the odd
 * one), then recursive halving where survivor i's super-block is the blocks
 * of the real ranks it stands for: blocks 2i and 2i+1 for i < rem, block
 * i + rem otherwise. At the end a folded pair's survivor sends block 2i to
 * rank 2i.
 */
int pcoll_reduce_scatter_halving(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int n = sc->comm->size, r = sc->comm->rank, pof2 = pcoll_pof2(n), rem = n - pof2;
    int nr = pcoll_fold_newrank(r, rem);
    size_t es = a->es, blk = a->count * es, *edge;
    const char *src = a->sbuf;
    char *acc, *in;
    if (n == 1)
        return pcoll_reduce_scatter_ring(sc, a);
    acc = pcoll_sched_tmp(sc, (size_t)n * blk);
    in = pcoll_sched_tmp(sc, (size_t)n * blk);
    edge = pcoll_sched_tmp(sc, ((size_t)pof2 + 1) * sizeof *edge);
    if (sc->err)
        return sc->err;
    for (int j = 0; j <= pof2; j++)   /* in blocks: first real rank of newrank j */
        edge[j] = (size_t)(j < rem ? 2 * j : j + rem);
    if (r < 2 * rem && r % 2 == 0) {
        pcoll_sched_send(sc, r + 1, src, (size_t)n * blk);
        pcoll_sched_end_round(sc);
        pcoll_sched_recv(sc, r + 1, a->rbuf, blk);
        pcoll_sched_scale(sc, a->rbuf, a->count);
        return sc->err;
    }
    pcoll_sched_copy(sc, acc, src, (size_t)n * blk);
    pcoll_sched_end_round(sc);
    if (r < 2 * rem) {
        pcoll_sched_recv(sc, r - 1, in, (size_t)n * blk);
        pcoll_sched_reduce(sc, acc, in, acc, (size_t)n * a->count);
        pcoll_sched_end_round(sc);
    }
    pcoll_halving(sc, acc, in, edge, blk, pof2, nr, rem);
    if (r < 2 * rem)
        pcoll_sched_send(sc, r - 1, acc + (size_t)(r - 1) * blk, blk);
    pcoll_sched_copy(sc, a->rbuf, acc + (size_t)r * blk, blk);
    pcoll_sched_scale(sc, a->rbuf, a->count);
    return sc->err;
}
