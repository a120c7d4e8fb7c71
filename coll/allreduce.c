/*
 * allreduce.c -- three allreduce schedules. Each leaves every rank with a
 * bitwise-identical result: either every element is reduced at exactly one
 * rank and then copied to all (ring, Rabenseifner), or every rank applies the
 * same operations to the same operands in the same order (recursive
 * doubling: the lower rank's data is always the left operand). PLAIT_AVG is a
 * SUM whose result is divided by the communicator size as the last step of
 * the rank that computed it (or, for recursive doubling, identically on all);
 * float16's AVG arrives here as a SUM of inputs scaled by 1/n first
 * (coll/api.c, coll_avg16_prescale).
 *
 * Non-power-of-two sizes (recursive doubling and Rabenseifner) fold first:
 * with pof2 the largest power of two <= n and rem = n - pof2, each even rank
 * 2i < 2*rem sends its vector to 2i + 1, which reduces it into its own and
 * takes part as newrank i; the others take part as newrank r - rem. At the
 * end each 2i + 1 sends the result back to 2i. See util.c.
 */
#include "config.h"

#include "coll/pcoll.h"

/* Copies the input into recvbuf (unless in place). */
static void ar_prologue(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    pcoll_sched_copy(sc, a->rbuf, a->sbuf, a->count * a->es);
    pcoll_sched_end_round(sc);
}

/* Fold-in of a non-power-of-two size; acc holds this rank's vector, in is
 * scratch of the same size. */
static void ar_fold_in(pcoll_sched_t *sc, char *acc, char *in, size_t count, size_t es, int rem)
{
    int r = sc->comm->rank;
    if (r >= 2 * rem)
        return;
    if (r % 2 == 0) {
        pcoll_sched_send(sc, r + 1, acc, count * es);
    } else {
        pcoll_sched_recv(sc, r - 1, in, count * es);
        pcoll_sched_reduce(sc, acc, in, acc, count);
    }
    pcoll_sched_end_round(sc);
}

static void ar_fold_out(pcoll_sched_t *sc, char *buf, size_t bytes, int rem)
{
    int r = sc->comm->rank;
    if (r >= 2 * rem)
        return;
    if (r % 2)
        pcoll_sched_send(sc, r - 1, buf, bytes);
    else
        pcoll_sched_recv(sc, r + 1, buf, bytes);
    pcoll_sched_end_round(sc);
}

/*
 * Two ranks, pipelined (recursive doubling's one swap, cut into chunks):
 * chunk j (PLAIT_COLL_PIPE bytes, the last one shorter) is round j: send
 * this rank's chunk j, receive the peer's into scratch, reduce the two
 * (lower rank's operand left, so both ranks compute the same bits) and
 * scale it for AVG. The schedule posts the transfers of AR_PIPE_AHEAD
 * rounds beyond the current one, so chunk j is reduced while chunks j + 1
 * .. j + AR_PIPE_AHEAD move: the swap and the reduction overlap instead of
 * taking turns. Safe to post ahead: a send reads chunk j of sendbuf (in
 * place: of recvbuf, which only round j's reduction writes, after that send
 * is done) and every receive has its own scratch chunk.
 *
 * 2 namespace hosts x 1 rank of the 16-core machine (docs/PERFORMANCE.md,
 * session 34): with 1 MiB chunks, 8 ahead, 16-64 MiB 4-14% faster than the
 * one swap in both calls that ran it, 2-8 MiB within the spread. Each chunk
 * is a rendezvous of its own, which costs: 256 KiB chunks were 5-20% slower
 * at 2-16 MiB, 64 KiB ones 35-60%; and posting one round ahead or none was
 * slower than 8 at every size.
 */
#define AR_PIPE_AHEAD 8
static int ar_pair_pipelined(pcoll_sched_t *sc, const pcoll_args_t *a, size_t chunk)
{
    int r = sc->comm->rank, p = 1 - r;
    size_t bytes = a->count * a->es;
    char *acc = a->rbuf, *in = pcoll_sched_tmp(sc, bytes);
    const char *cur = a->sbuf;
    pcoll_sched_ahead(sc, AR_PIPE_AHEAD);
    for (size_t off = 0; off < bytes && in; off += chunk) {
        size_t len = bytes - off < chunk ? bytes - off : chunk;
        pcoll_sched_send(sc, p, cur + off, len);
        pcoll_sched_recv(sc, p, in + off, len);
        pcoll_sched_reduce(sc, acc + off, p < r ? in + off : cur + off,
                           p < r ? cur + off : in + off, len / a->es);
        pcoll_sched_scale(sc, acc + off, len / a->es);
        pcoll_sched_end_round(sc);
    }
    return sc->err;
}

/* Chunk of a pipelined two-rank allreduce (0: not pipelined): whole
 * elements, and at least two chunks. */
static size_t ar_pipe_chunk(const pcoll_sched_t *sc, const pcoll_args_t *a)
{
    size_t chunk = sc->s->cfg.coll_pipe;
    chunk -= chunk % a->es;
    return sc->comm->size == 2 && chunk && a->count * a->es / 2 >= chunk ? chunk : 0;
}

/*
 * Recursive doubling (small messages: log2(n) rounds of whole vectors).
 * After folding, in step d = 1, 2, ..., pof2/2 newrank i exchanges its whole
 * partial result with newrank i ^ d and both compute lower (+) upper. After
 * the last step every survivor holds the full result; the folded-out ranks
 * get it from their partner. No prologue copy: a rank's first send reads
 * sendbuf and its first reduction writes recvbuf from sendbuf and the
 * received vector (with 2 ranks the whole collective is one exchange and one
 * reduction).
 */
int pcoll_allreduce_rd(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int n = sc->comm->size, r = sc->comm->rank, pof2 = pcoll_pof2(n), rem = n - pof2;
    int nr = pcoll_fold_newrank(r, rem);
    size_t bytes = a->count * a->es;
    char *acc = a->rbuf, *in;
    const char *cur = a->sbuf;      /* this rank's partial result so far */
    size_t chunk = ar_pipe_chunk(sc, a);
    if (n == 1) {
        ar_prologue(sc, a);
        pcoll_sched_scale(sc, acc, a->count);
        return sc->err;
    }
    if (chunk)
        return ar_pair_pipelined(sc, a, chunk);
    in = pcoll_sched_tmp(sc, bytes);
    if (r < 2 * rem) {               /* the fold (see ar_fold_in), from sendbuf */
        if (r % 2 == 0) {
            pcoll_sched_send(sc, r + 1, cur, bytes);
        } else {
            pcoll_sched_recv(sc, r - 1, in, bytes);
            pcoll_sched_reduce(sc, acc, in, cur, a->count);
            cur = acc;
        }
        pcoll_sched_end_round(sc);
    }
    for (int d = 1; nr >= 0 && d < pof2; d *= 2) {
        int p = pcoll_fold_real(nr ^ d, rem);
        pcoll_sched_send(sc, p, cur, bytes);
        pcoll_sched_recv(sc, p, in, bytes);
        pcoll_sched_reduce(sc, acc, p < r ? in : cur, p < r ? cur : in, a->count);
        pcoll_sched_end_round(sc);
        cur = acc;
    }
    ar_fold_out(sc, acc, bytes, rem);
    pcoll_sched_scale(sc, acc, a->count);
    return sc->err;
}

/*
 * Ring: reduce-scatter then allgather over n blocks (block i: elements
 * pcoll_blk_off(count, n, i) .. + pcoll_blk_cnt(count, n, i); blocks may be
 * empty when count < n). Bandwidth-optimal: each rank sends and receives
 * 2(n-1)/n of the vector.
 *
 * Reduce-scatter, step k = 0 .. n-2: rank r sends block (r - k) to r + 1 and
 * receives block (r - k - 1) from r - 1, adding it into its own copy:
 *
 *   n = 3, blocks A B C      step 0              step 1
 *   rank 0: A0 B0 C0     sends A0, gets C2   sends C2+C0, gets B1+B2
 *   rank 1: A1 B1 C1     sends B1, gets A0   sends A0+A1, gets C2+C0
 *   rank 2: A2 B2 C2     sends C2, gets B1   sends B1+B2, gets A0+A1
 *
 * so after n - 1 steps rank r holds block (r + 1) fully reduced (rank 0: B,
 * rank 1: C, rank 2: A), computed there only; AVG divides it there.
 * Allgather, step k = 0 .. n-2: rank r sends block (r + 1 - k) to r + 1 and
 * receives block (r - k) from r - 1 straight into place.
 */
/* The ring above over m members: member i is comm rank g[i] (g NULL: rank
 * i), this rank is member gi; buf holds its vector and gets the result.
 * scale: divide each reduced block for AVG between the two phases (the
 * two-level allreduce divides once at the end instead). */
void pcoll_ring_allreduce(pcoll_sched_t *sc, const int *g, int m, int gi, char *buf, size_t cnt,
                          size_t es, int scale)
{
    int own = (gi + 1) % m, prev = (gi - 1 + m) % m;
    int right = g ? g[own] : own, left = g ? g[prev] : prev;
    char *in = pcoll_sched_tmp(sc, pcoll_blk_cnt(cnt, m, 0) * es);
    for (int k = 0; k < m - 1; k++) {
        int sb = (gi - k + m) % m, rb = (gi - k - 1 + 2 * m) % m;
        char *rblk = buf + pcoll_blk_off(cnt, m, rb) * es;
        pcoll_sched_send(sc, right, buf + pcoll_blk_off(cnt, m, sb) * es,
                         pcoll_blk_cnt(cnt, m, sb) * es);
        pcoll_sched_recv(sc, left, in, pcoll_blk_cnt(cnt, m, rb) * es);
        pcoll_sched_reduce(sc, rblk, in, rblk, pcoll_blk_cnt(cnt, m, rb));
        pcoll_sched_end_round(sc);
    }
    if (scale) {   /* a round of its own: it must run before the allgather sends the block */
        pcoll_sched_scale(sc, buf + pcoll_blk_off(cnt, m, own) * es, pcoll_blk_cnt(cnt, m, own));
        pcoll_sched_end_round(sc);
    }
    for (int k = 0; k < m - 1; k++) {
        int sb = (gi + 1 - k + m) % m, rb = (gi - k + m) % m;
        pcoll_sched_send(sc, right, buf + pcoll_blk_off(cnt, m, sb) * es,
                         pcoll_blk_cnt(cnt, m, sb) * es);
        pcoll_sched_recv(sc, left, buf + pcoll_blk_off(cnt, m, rb) * es,
                         pcoll_blk_cnt(cnt, m, rb) * es);
        pcoll_sched_end_round(sc);
    }
}

int pcoll_allreduce_ring(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int n = sc->comm->size;
    ar_prologue(sc, a);
    if (n == 1)
        pcoll_sched_scale(sc, a->rbuf, a->count);
    else
        pcoll_ring_allreduce(sc, NULL, n, sc->comm->rank, a->rbuf, a->count, a->es, 1);
    return sc->err;
}

/* Super-block edges (in elements) of count split into pof2 blocks. */
static size_t *ar_edges(pcoll_sched_t *sc, size_t count, int pof2)
{
    size_t *edge = pcoll_sched_tmp(sc, ((size_t)pof2 + 1) * sizeof *edge);
    for (int j = 0; edge && j <= pof2; j++)
        edge[j] = pcoll_blk_off(count, pof2, j);
    return edge;
}

/*
 * Rabenseifner: recursive-halving reduce-scatter, then recursive-doubling
 * allgather, on the pof2 survivors of the fold. The vector is split into
 * pof2 blocks. Halving step d = pof2/2 .. 1: newrank i keeps the half of its
 * current window that holds block i, sends the other half to i ^ d and
 * reduces what it receives into the half it keeps; after log2(pof2) steps it
 * holds block i fully reduced. Doubling step d = 1 .. pof2/2: it swaps its
 * window of d blocks with i ^ d. Sends 2(pof2-1)/pof2 of the vector in
 * 2 log2(pof2) rounds (plus one whole vector each way when folding).
 */
int pcoll_allreduce_rabenseifner(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int n = sc->comm->size, r = sc->comm->rank, pof2 = pcoll_pof2(n), rem = n - pof2;
    int nr = pcoll_fold_newrank(r, rem);
    size_t es = a->es, cnt = a->count, *edge;
    char *acc = a->rbuf, *in;
    ar_prologue(sc, a);
    if (n == 1) {
        pcoll_sched_scale(sc, acc, cnt);
        return sc->err;
    }
    in = pcoll_sched_tmp(sc, cnt * es);
    edge = ar_edges(sc, cnt, pof2);
    if (sc->err)
        return sc->err;
    ar_fold_in(sc, acc, in, cnt, es, rem);
    if (nr >= 0) {
        pcoll_halving(sc, acc, in, edge, es, pof2, nr, rem);
        pcoll_sched_scale(sc, acc + edge[nr] * es, edge[nr + 1] - edge[nr]);
        pcoll_sched_end_round(sc);
        pcoll_doubling(sc, acc, edge, es, pof2, nr, rem);
    }
    ar_fold_out(sc, acc, cnt * es, rem);
    return sc->err;
}
