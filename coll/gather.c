/*
 * gather.c -- binomial gather and scatter. Ranks are renumbered
 * v = (r - root) mod n. Rank v's subtree is [v, v + lowbit(v)) clipped to n
 * (the root's: everything); its children are v + m for m = lowbit(v)/2 .. 1.
 * A subtree's blocks travel as one message in renumbered order; the root
 * rotates them into rank order (unless root is 0).
 * In place at the root (sendbuf == recvbuf): the root's own block is block
 * root of that buffer already (gather) or stays there (scatter).
 */
#include "config.h"

#include "coll/pcoll.h"

static int real_of(int v, int root, int n) { return (v + root) % n; }

/* lowbit(v), or for the root the smallest power of two >= n. */
static int span_of(int v, int n)
{
    int p = 1;
    if (v)
        return v & -v;
    while (p < n)
        p *= 2;
    return p;
}

/*
 * Gather: each rank receives its children's subtrees (all at once, into
 * their places in its subtree buffer), then sends its whole subtree to its
 * parent v - lowbit(v). ceil(log2 n) levels; leaves send their block as is.
 */
int pcoll_gather_binomial(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int n = sc->comm->size, r = sc->comm->rank, root = a->root, v = (r - root + n) % n;
    int span = span_of(v, n), sz = v + span < n ? span : n - v;
    size_t blk = a->count * a->es;
    const char *own = a->sbuf == a->rbuf && r == root ? (const char *)a->rbuf + (size_t)r * blk
                                                      : a->sbuf;
    char *R = a->rbuf, *t;
    if (sz == 1 && v) {                       /* leaf */
        pcoll_sched_send(sc, real_of(v - span, root, n), own, blk);
        pcoll_sched_end_round(sc);
        return sc->err;
    }
    t = v == 0 && root == 0 ? R : pcoll_sched_tmp(sc, (size_t)sz * blk);
    if (sc->err)
        return sc->err;
    for (int m = span / 2; m >= 1; m /= 2) {
        int c = v + m;
        if (c < n)
            pcoll_sched_recv(sc, real_of(c, root, n), t + (size_t)m * blk,
                             (size_t)(c + m < n ? m : n - c) * blk);
    }
    pcoll_sched_copy(sc, t, own, blk);
    pcoll_sched_end_round(sc);
    if (v) {
        pcoll_sched_send(sc, real_of(v - span, root, n), t, (size_t)sz * blk);
    } else if (root != 0) {                   /* renumbered -> rank order */
        pcoll_sched_copy(sc, R + (size_t)root * blk, t, (size_t)(n - root) * blk);
        pcoll_sched_copy(sc, R, t + (size_t)(n - root) * blk, (size_t)root * blk);
    }
    pcoll_sched_end_round(sc);
    return sc->err;
}

/*
 * Scatter: the reverse. The root lays the blocks out in renumbered order
 * (a copy unless root is 0), every inner rank receives its subtree from its
 * parent, then sends each child its subtree (all at once) and keeps block 0
 * of it; leaves receive straight into recvbuf.
 */
int pcoll_scatter_binomial(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int n = sc->comm->size, r = sc->comm->rank, root = a->root, v = (r - root + n) % n;
    int span = span_of(v, n), sz = v + span < n ? span : n - v;
    size_t blk = a->count * a->es;
    int inplace = r == root && a->sbuf == a->rbuf;
    const char *t;
    if (sz == 1 && v) {                       /* leaf */
        pcoll_sched_recv(sc, real_of(v - span, root, n), a->rbuf, blk);
        pcoll_sched_end_round(sc);
        return sc->err;
    }
    if (v == 0 && root == 0) {
        t = a->sbuf;
    } else {
        char *w = pcoll_sched_tmp(sc, (size_t)sz * blk);
        if (sc->err)
            return sc->err;
        if (v == 0) {
            const char *S = a->sbuf;
            pcoll_sched_copy(sc, w, S + (size_t)root * blk, (size_t)(n - root) * blk);
            pcoll_sched_copy(sc, w + (size_t)(n - root) * blk, S, (size_t)root * blk);
        } else {
            pcoll_sched_recv(sc, real_of(v - span, root, n), w, (size_t)sz * blk);
        }
        pcoll_sched_end_round(sc);
        t = w;
    }
    for (int m = span / 2; m >= 1; m /= 2) {
        int c = v + m;
        if (c < n)
            pcoll_sched_send(sc, real_of(c, root, n), t + (size_t)m * blk,
                             (size_t)(c + m < n ? m : n - c) * blk);
    }
    if (!inplace)
        pcoll_sched_copy(sc, a->rbuf, t, blk);
    pcoll_sched_end_round(sc);
    return sc->err;
}
