/*
 * bcast.c -- broadcast schedules. Ranks are renumbered v = (r - root) mod n
 * so the root is v = 0; real rank of v is (v + root) mod n.
 */
#include "config.h"

#include "coll/pcoll.h"

#define PCOLL_CHAIN_SEGMENT (64u * 1024u)   /* bytes per pipelined chain segment */

static int real_of(int v, int root, int n) { return (v + root) % n; }

/* Smallest power of two >= n. */
static int ceil_pof2(int n)
{
    int p = 1;
    while (p < n)
        p *= 2;
    return p;
}

/*
 * Binomial tree (small messages): v != 0 receives from v - lowbit(v); then
 * every rank sends to v + m for m = lowbit(v)/2, ..., 1 (the root: every
 * power of two below n), largest subtree first, all in one round.
 * ceil(log2 n) hops, each moving the whole buffer.
 */
int pcoll_bcast_binomial(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int n = sc->comm->size, root = a->root, v = (sc->comm->rank - root + n) % n, m;
    size_t bytes = a->count * a->es;
    if (v) {
        int low = v & -v;
        pcoll_sched_recv(sc, real_of(v - low, root, n), a->rbuf, bytes);
        pcoll_sched_end_round(sc);
        m = low / 2;
    } else {
        m = ceil_pof2(n) / 2;
    }
    for (; m >= 1; m /= 2)
        if (v + m < n)
            pcoll_sched_send(sc, real_of(v + m, root, n), a->rbuf, bytes);
    pcoll_sched_end_round(sc);
    return sc->err;
}

/*
 * Scatter + allgather (van de Geijn; medium messages): the buffer is cut into
 * n blocks, block v for renumbered rank v. A binomial scatter gives every v
 * the blocks of its subtree [v, v + lowbit(v)) (the root keeps all), then a
 * ring allgather in renumbered order (step k: send block v - k to v + 1,
 * receive block v - k - 1 from v - 1) completes every buffer. Moves about
 * 2x the buffer per rank instead of log2(n) x.
 */
int pcoll_bcast_scatter_allgather(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int n = sc->comm->size, root = a->root, v = (sc->comm->rank - root + n) % n, m;
    size_t es = a->es, cnt = a->count;
    char *B = a->rbuf;
    if (n == 1)
        return PLAIT_OK;
#define BOFF(i) (pcoll_blk_off(cnt, n, (i)) * es)
    if (v) {
        int low = v & -v, end = v + low < n ? v + low : n;
        pcoll_sched_recv(sc, real_of(v - low, root, n), B + BOFF(v), BOFF(end) - BOFF(v));
        pcoll_sched_end_round(sc);
        m = low / 2;
    } else {
        m = ceil_pof2(n) / 2;
    }
    for (; m >= 1; m /= 2) {
        int c = v + m, end = c + m < n ? c + m : n;
        if (c < n)
            pcoll_sched_send(sc, real_of(c, root, n), B + BOFF(c), BOFF(end) - BOFF(c));
    }
    pcoll_sched_end_round(sc);
    for (int k = 0; k < n - 1; k++) {
        int sb = (v - k + n) % n, rb = (v - k - 1 + n) % n;
        pcoll_sched_send(sc, real_of(v + 1, root, n), B + BOFF(sb), pcoll_blk_cnt(cnt, n, sb) * es);
        pcoll_sched_recv(sc, real_of(v - 1 + n, root, n), B + BOFF(rb),
                         pcoll_blk_cnt(cnt, n, rb) * es);
        pcoll_sched_end_round(sc);
    }
#undef BOFF
    return sc->err;
}

/*
 * Pipelined chain (large messages): v receives from v - 1 and forwards to
 * v + 1 in segments of PCOLL_CHAIN_SEGMENT bytes. Round j: the root sends
 * segment j; every other rank receives segment j while forwarding segment
 * j - 1. With S segments the last rank has everything after S + n - 2
 * segment times, close to one buffer time for S >> n.
 */
int pcoll_bcast_chain(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int n = sc->comm->size, root = a->root, v = (sc->comm->rank - root + n) % n;
    size_t bytes = a->count * a->es, seg = PCOLL_CHAIN_SEGMENT - PCOLL_CHAIN_SEGMENT % a->es;
    size_t nseg = (bytes + seg - 1) / seg;
    char *B = a->rbuf;
    if (n == 1)
        return PLAIT_OK;
#define SEGLEN(j) ((j) + 1 < nseg ? seg : bytes - (j) * seg)
    for (size_t j = 0; j <= nseg; j++) {
        if (v == 0) {
            if (j < nseg)
                pcoll_sched_send(sc, real_of(1, root, n), B + j * seg, SEGLEN(j));
        } else {
            if (j < nseg)
                pcoll_sched_recv(sc, real_of(v - 1, root, n), B + j * seg, SEGLEN(j));
            if (v + 1 < n && j >= 1)
                pcoll_sched_send(sc, real_of(v + 1, root, n), B + (j - 1) * seg, SEGLEN(j - 1));
        }
        pcoll_sched_end_round(sc);
    }
#undef SEGLEN
    return sc->err;
}
