/*
 * util.c -- pieces several algorithms share: block partitions, the folding of
 * non-power-of-two communicators, and the recursive halving / doubling phases
 * (used by Rabenseifner allreduce and reduce, recursive-halving
 * reduce_scatter and recursive-doubling allgather).
 */
#include "config.h"

#include "coll/pcoll.h"

size_t pcoll_blk_off(size_t count, int n, int i)
{
    size_t q = count / (size_t)n, r = count % (size_t)n;
    return (size_t)i * q + ((size_t)i < r ? (size_t)i : r);
}

size_t pcoll_blk_cnt(size_t count, int n, int i)
{
    return count / (size_t)n + ((size_t)i < count % (size_t)n);
}

int pcoll_pof2(int n)
{
    int p = 1;
    while (p * 2 <= n)
        p *= 2;
    return p;
}

int pcoll_fold_newrank(int rank, int rem)
{
    if (rank < 2 * rem)
        return rank % 2 ? rank / 2 : -1;
    return rank - rem;
}

int pcoll_fold_real(int newrank, int rem)
{
    return newrank < rem ? 2 * newrank + 1 : newrank + rem;
}

void pcoll_halving(pcoll_sched_t *sc, char *acc, char *in, const size_t *edge, size_t unit,
                   int pof2, int nr, int rem)
{
    int r = sc->comm->rank;
    size_t es = plait_dtype_size(sc->dt);
    for (int d = pof2 / 2; d >= 1; d /= 2) {
        int pnr = nr ^ d, p = pcoll_fold_real(pnr, rem);
        int klo = nr & ~(d - 1), glo = pnr & ~(d - 1);
        char *keep = acc + edge[klo] * unit, *give = acc + edge[glo] * unit;
        size_t kbytes = (edge[klo + d] - edge[klo]) * unit;
        size_t gbytes = (edge[glo + d] - edge[glo]) * unit;
        pcoll_sched_send(sc, p, give, gbytes);
        pcoll_sched_recv(sc, p, in, kbytes);
        pcoll_sched_reduce(sc, keep, p < r ? in : keep, p < r ? keep : in, kbytes / es);
        pcoll_sched_end_round(sc);
    }
}

void pcoll_doubling(pcoll_sched_t *sc, char *buf, const size_t *edge, size_t unit, int pof2,
                    int nr, int rem)
{
    for (int d = 1; d < pof2; d *= 2) {
        int pnr = nr ^ d, p = pcoll_fold_real(pnr, rem);
        int mlo = nr & ~(d - 1), tlo = pnr & ~(d - 1);
        pcoll_sched_send(sc, p, buf + edge[mlo] * unit, (edge[mlo + d] - edge[mlo]) * unit);
        pcoll_sched_recv(sc, p, buf + edge[tlo] * unit, (edge[tlo + d] - edge[tlo]) * unit);
        pcoll_sched_end_round(sc);
    }
}
