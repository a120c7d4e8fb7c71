/*
 * coll_nb_area.c -- non-blocking collectives on the shared-memory area
 * (coll/shm_small.c, "Non-blocking calls"): many calls in flight, started
 * and completed in every order, mixed with blocking calls, and calls whose
 * publish must wait in the queue (more in flight than the area's slots, or a
 * root running ahead of a rank blocked in a receive from it). Written
 * against plait.h only; run by t-coll.sh.
 *
 * Modes (argv[1]):
 *   stress  (default) ROUNDS rounds on the world and on a split
 *           communicator: a batch of 1..96 random calls (allreduce,
 *           reduce, bcast, allgather, reduce_scatter, alltoall, gather,
 *           scatter, barrier; 1-64 elements of int32, float32 sums, int64
 *           max, some in place; one in 6 reductions 600-16000 elements,
 *           which from 3 ranks take the area's two phases), blocking calls
 *           of every kind among them on some rounds (which finish the queue
 *           first), completed
 *           by plait_wait in a random order, plait_waitall, or plait_test
 *           loops. Inputs are a pure function of (seed, round, call, rank,
 *           index), every rank computes the expected results itself, and
 *           outputs are poisoned first.
 *   first   3 batches of 96 such calls (no blocking ones) on world before
 *           any blocking collective: they take world's area, made in
 *           plait_init (t-coll.sh counts them with PLAIT_STATS=1).
 *   behind  rank 1 waits in a receive from rank 0 while rank 0 starts 150
 *           ibcasts as root and only then sends: rank 0's publishes past the
 *           slots' depth wait in the queue; a start must not wait.
 *   freed   calls pending on a communicator that is freed before they are
 *           waited for.
 *   diverge after a barrier (the area exists): the last rank passes MAX
 *           where the others pass MIN to an ireduce of 16 int32 to root 0,
 *           then roots differ in an ibcast (the last rank names root 1):
 *           the root of the first and (from 3 ranks) the last rank in the
 *           second must fail with PLAIT_ERR_ARG; then on a new communicator
 *           the last rank passes count 0 to an iallreduce of 16 elsewhere:
 *           the others must fail with PLAIT_ERR_ARG (their stall probes);
 *           from 3 ranks a two-phase iallreduce of MAX against MIN fails
 *           on every rank and the next call works (slices_diverge); and
 *           the last rank passes 96 int32 where the others pass 48 to an
 *           iallreduce (the two sides of the area's small lane): all must
 *           fail (lanes_diverge). No
 *           rank may get another error or hang (run with PLAIT_TIMEOUT=0).
 * Env: PLAIT_TEST_SEED. Prints "coll_nb_area MODE: ... ok" on rank 0;
 * exits 1 on the first failure.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plait.h"

#define ROUNDS 60
#define BATCH  96
#define MAXC   64
#define BIGC   16000   /* a big allreduce / reduce: up to this many elements (at most 128 KB,
                        * the area's default slot), where the area reduces in slices */
#define POISON (-12345)

static int me, np;
static uint64_t seed = 20261130;

#define FAIL(...) do { fprintf(stderr, "FAIL rank %d seed %llu line %d: ", me, \
                       (unsigned long long)seed, __LINE__); fprintf(stderr, __VA_ARGS__); \
                       fputc('\n', stderr); exit(1); } while (0)
#define CK(call) do { int rc_ = (call); if (rc_ != PLAIT_OK) \
                       FAIL("%s -> %s: %s", #call, plait_strerror(rc_), plait_last_error()); \
                 } while (0)

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* The same on every rank: the call's shape. */
static uint64_t shape(int round, int k, int what) { return mix(seed ^ mix((uint64_t)round << 32 ^
                                                            (uint64_t)k << 8 ^ (uint64_t)what)); }
/* Element i of rank r's input in call k of a round, blocks laid end to end
 * (small integers: sums exact in float32). */
static int64_t inp(int round, int k, int r, size_t i)
{
    return (int64_t)(mix(shape(round, k, 7) ^ (uint64_t)r << 20 ^ (uint64_t)i) % 2001) - 1000;
}

enum { C_ALLREDUCE, C_REDUCE, C_BCAST, C_ALLGATHER, C_RS, C_ALLTOALL, C_GATHER, C_SCATTER,
       C_BARRIER, C_N };
static const char *names[] = {"allreduce", "reduce", "bcast", "allgather", "reduce_scatter",
                              "alltoall", "gather", "scatter", "barrier"};

typedef struct {
    int coll, root, inplace, dt;   /* dt: 0 int32 SUM, 1 float32 SUM, 2 int64 MAX */
    size_t cnt;
    void *in, *out;                /* elems(np) elements of 8 bytes each */
    plait_request_t q;
} call_t;

/* Elements of a call's buffers that are set and checked. */
static size_t span(const call_t *c, int n)
{
    return c->cnt > (size_t)n * MAXC ? c->cnt : (size_t)n * MAXC;
}

static size_t elems(int n) { return (size_t)n * MAXC > BIGC ? (size_t)n * MAXC : BIGC; }

static plait_dtype_t dtype(int dt) { return dt == 0 ? PLAIT_INT32 : dt == 1 ? PLAIT_FLOAT32
                                                                           : PLAIT_INT64; }
static plait_op_t dop(int dt) { return dt == 2 ? PLAIT_MAX : PLAIT_SUM; }

static void put(void *b, int dt, size_t i, int64_t v)
{
    if (dt == 0) ((int32_t *)b)[i] = (int32_t)v;
    else if (dt == 1) ((float *)b)[i] = (float)v;
    else ((int64_t *)b)[i] = v;
}

static int64_t get(const void *b, int dt, size_t i)
{
    return dt == 0 ? ((const int32_t *)b)[i] : dt == 1 ? (int64_t)((const float *)b)[i]
                                                       : ((const int64_t *)b)[i];
}

/* The reduction of element i over the n ranks' inputs. */
static int64_t red(int round, int k, int dt, int n, size_t i)
{
    int64_t v = inp(round, k, 0, i);
    for (int r = 1; r < n; r++) {
        int64_t x = inp(round, k, r, i);
        v = dt == 2 ? (x > v ? x : v) : v + x;
    }
    return v;
}

static void setup(call_t *c, int round, int k, int r, int n)
{
    uint64_t h = shape(round, k, 1);
    size_t tot;
    c->coll = (int)(h % C_N);
    c->root = (int)((h >> 8) % (uint64_t)n);
    c->dt = (int)((h >> 16) % 3);
    c->cnt = 1 + (h >> 24) % MAXC;
    /* one in 6 reductions big: from 3 ranks the area runs allreduce in two
     * phases above 16 KB / (ranks - 2), reduce above 128 KB / (ranks - 2) */
    if ((c->coll == C_ALLREDUCE || c->coll == C_REDUCE) && (h >> 44) % 6 == 0)
        c->cnt = 600 + (h >> 48) % (BIGC - 600 + 1);
    tot = span(c, n);
    c->inplace = (h >> 40) % 3 == 0 && c->coll != C_BCAST && c->coll != C_BARRIER &&
                 c->coll != C_ALLTOALL && c->coll != C_REDUCE && c->coll != C_GATHER &&
                 c->coll != C_SCATTER;
    if (c->coll == C_BARRIER)
        c->cnt = 0;
    for (size_t i = 0; i < tot; i++) {
        put(c->in, c->dt, i, inp(round, k, r, i));
        put(c->out, c->dt, i, POISON);
    }
    if (c->inplace && c->coll == C_ALLGATHER)   /* own block at block r */
        for (size_t i = 0; i < c->cnt; i++)
            put(c->out, c->dt, (size_t)r * c->cnt + i, inp(round, k, r, i));
    else if (c->inplace)
        for (size_t i = 0; i < tot; i++)
            put(c->out, c->dt, i, inp(round, k, r, i));
    if (c->coll == C_BCAST)   /* the root's data in out, everyone else's poisoned */
        for (size_t i = 0; i < c->cnt; i++)
            put(c->out, c->dt, i, r == c->root ? inp(round, k, r, i) : POISON);
}

static int start(call_t *c, plait_comm_t w, int blocking)
{
    plait_dtype_t t = dtype(c->dt);
    const void *s = c->inplace ? c->out : c->in;
    plait_request_t *q = blocking ? NULL : &c->q;
    switch (c->coll) {
    case C_ALLREDUCE: return q ? plait_iallreduce(s, c->out, c->cnt, t, dop(c->dt), w, q)
                               : plait_allreduce(s, c->out, c->cnt, t, dop(c->dt), w);
    case C_REDUCE: return q ? plait_ireduce(s, c->out, c->cnt, t, dop(c->dt), c->root, w, q)
                            : plait_reduce(s, c->out, c->cnt, t, dop(c->dt), c->root, w);
    case C_BCAST: return q ? plait_ibcast(c->out, c->cnt, t, c->root, w, q)
                           : plait_bcast(c->out, c->cnt, t, c->root, w);
    case C_ALLGATHER: return q ? plait_iallgather(s, c->out, c->cnt, t, w, q)
                               : plait_allgather(s, c->out, c->cnt, t, w);
    case C_RS: return q ? plait_ireduce_scatter(s, c->out, c->cnt, t, dop(c->dt), w, q)
                        : plait_reduce_scatter(s, c->out, c->cnt, t, dop(c->dt), w);
    case C_ALLTOALL: return q ? plait_ialltoall(s, c->out, c->cnt, t, w, q)
                              : plait_alltoall(s, c->out, c->cnt, t, w);
    case C_GATHER: return q ? plait_igather(s, c->out, c->cnt, t, c->root, w, q)
                            : plait_gather(s, c->out, c->cnt, t, c->root, w);
    case C_SCATTER: return q ? plait_iscatter(s, c->out, c->cnt, t, c->root, w, q)
                             : plait_scatter(s, c->out, c->cnt, t, c->root, w);
    default: return q ? plait_ibarrier(w, q) : plait_barrier(w);
    }
}

/* Expected element i of out (POISON: untouched), from the inputs alone. */
static int64_t expect(const call_t *c, int round, int k, int r, int n, size_t i)
{
    size_t b = c->cnt, blk = i / (b ? b : 1), j = i % (b ? b : 1);
    switch (c->coll) {
    case C_ALLREDUCE: return i < b ? red(round, k, c->dt, n, i) : POISON;
    case C_REDUCE: return r == c->root && i < b ? red(round, k, c->dt, n, i) : POISON;
    case C_BCAST: return i < b ? inp(round, k, c->root, i) : POISON;
    case C_ALLGATHER: return blk < (size_t)n ? inp(round, k, (int)blk, j) : POISON;
    case C_RS:   /* (in place, what follows block 0 is not promised: verify skips it) */
        return i < b ? red(round, k, c->dt, n, (size_t)r * b + i) : POISON;
    case C_ALLTOALL: return blk < (size_t)n ? inp(round, k, (int)blk, (size_t)r * b + j) : POISON;
    case C_GATHER: return r == c->root && blk < (size_t)n ? inp(round, k, (int)blk, j) : POISON;
    case C_SCATTER: return i < b ? inp(round, k, c->root, (size_t)r * b + i) : POISON;
    default: return POISON;
    }
}

static void verify(const call_t *c, int round, int k, int r, int n, const char *on)
{
    for (size_t i = 0; i < span(c, n); i++) {
        int64_t want = expect(c, round, k, r, n, i), got = get(c->out, c->dt, i);
        if (c->inplace && c->coll == C_RS && i >= c->cnt)
            continue;
        if (c->inplace && c->coll == C_ALLREDUCE && i >= c->cnt)
            want = inp(round, k, r, i);
        if (got != want)
            FAIL("%s round %d call %d (%s, %zu elements, root %d, dt %d%s): element %zu is "
                 "%lld, expected %lld", on, round, k, names[c->coll], c->cnt, c->root, c->dt,
                 c->inplace ? ", in place" : "", i, (long long)got, (long long)want);
    }
}

/* Completes the batch's requests: 0 wait in a shuffled order, 1 waitall,
 * 2 test loops from the last to the first. */
static void complete(call_t *cs, int m, int how, uint64_t h)
{
    plait_request_t qs[BATCH];
    int order[BATCH], left = 0;
    for (int k = 0; k < m; k++)
        order[k] = k;
    for (int k = m - 1; k > 0; k--) {
        int j = (int)(mix(h ^ (uint64_t)k) % (uint64_t)(k + 1)), t = order[k];
        order[k] = order[j];
        order[j] = t;
    }
    if (how == 1) {
        for (int k = 0; k < m; k++)
            qs[k] = cs[k].q;
        CK(plait_waitall(m, qs, NULL));
        for (int k = 0; k < m; k++)
            cs[k].q = qs[k];
    }
    for (int k = 0; how == 0 && k < m; k++)
        if (cs[order[k]].q)
            CK(plait_wait(&cs[order[k]].q, NULL));
    do {
        left = 0;
        for (int k = m - 1; how == 2 && k >= 0; k--) {
            int done = 0;
            if (cs[k].q)
                CK(plait_test(&cs[k].q, &done, NULL));
            left += cs[k].q != NULL;
        }
    } while (left);
    for (int k = 0; k < m; k++)
        if (cs[k].q)
            FAIL("request %d still set after completion (mode %d)", k, how);
}

static void stress_on(plait_comm_t w, const char *on, call_t *cs)
{
    int r, n;
    plait_comm_rank(w, &r);
    plait_comm_size(w, &n);
    CK(plait_barrier(w));   /* (makes a split communicator's area: its non-blocking
                             * calls use it only then; world's is made in plait_init) */
    for (int round = 0; round < ROUNDS; round++) {
        uint64_t h = shape(round, 0, 99);
        int m = 1 + (int)(h % BATCH), mixed = (h >> 10) % 3 == 0;
        for (int k = 0; k < m; k++) {
            int blocking = mixed && mix(h ^ (uint64_t)k) % 4 == 0;
            setup(&cs[k], round, k, r, n);
            cs[k].q = NULL;
            CK(start(&cs[k], w, blocking));
            if (blocking)
                verify(&cs[k], round, k, r, n, on);
        }
        complete(cs, m, (int)((h >> 20) % 3), h);
        for (int k = 0; k < m; k++)
            verify(&cs[k], round, k, r, n, on);
    }
}

static void stress(call_t *cs)
{
    plait_comm_t w = plait_comm_world(), half;
    CK(plait_comm_split(w, me % 2, np - me, &half));   /* reversed order in each half */
    stress_on(w, "world", cs);
    stress_on(half, "split", cs);
    CK(plait_comm_free(&half));
}

/* FIRST_ROUNDS batches of BATCH non-blocking calls, every kind, before any
 * blocking collective on world: world's area is made in plait_init, so they
 * take it from the first call (t-coll.sh counts them in PLAIT_STATS' line);
 * each checked as in stress. */
#define FIRST_ROUNDS 3
static void first(call_t *cs)
{
    plait_comm_t w = plait_comm_world();
    for (int round = 0; round < FIRST_ROUNDS; round++) {
        for (int k = 0; k < BATCH; k++) {
            setup(&cs[k], round, k, me, np);
            cs[k].q = NULL;
            CK(start(&cs[k], w, 0));
        }
        complete(cs, BATCH, round % 3, shape(round, 0, 98));
        for (int k = 0; k < BATCH; k++)
            verify(&cs[k], round, k, me, np, "world, before any blocking call");
    }
    if (me == 0)
        printf("coll_nb_area first: %d non-blocking calls\n", FIRST_ROUNDS * BATCH);
}

static void behind(void)
{
    enum { K = 150 };
    plait_comm_t w = plait_comm_world();
    plait_request_t q[K];
    int v[K], tok = 7;
    CK(plait_barrier(w));
    for (int k = 0; k < K; k++)
        v[k] = me == 0 ? 1000 + k : -1;
    if (me == 1)
        CK(plait_recv(&tok, 1, PLAIT_INT32, 0, 3, w, NULL));
    for (int k = 0; k < K; k++)
        CK(plait_ibcast(&v[k], 1, PLAIT_INT32, 0, w, &q[k]));
    if (me == 0)
        CK(plait_send(&tok, 1, PLAIT_INT32, 1, 3, w));
    CK(plait_waitall(K, q, NULL));
    for (int k = 0; k < K; k++)
        if (v[k] != 1000 + k)
            FAIL("behind: ibcast %d gave %d", k, v[k]);
}

static void freed(void)
{
    plait_comm_t d;
    plait_request_t q[3];
    int a = me + 1, s1 = 0, s2 = 0, b = me == 0 ? 99 : 0;
    CK(plait_comm_dup(plait_comm_world(), &d));
    CK(plait_barrier(d));
    CK(plait_iallreduce(&a, &s1, 1, PLAIT_INT32, PLAIT_SUM, d, &q[0]));
    CK(plait_ibcast(&b, 1, PLAIT_INT32, 0, d, &q[1]));
    CK(plait_iallreduce(&a, &s2, 1, PLAIT_INT32, PLAIT_MAX, d, &q[2]));
    CK(plait_comm_free(&d));
    CK(plait_waitall(3, q, NULL));
    if (s1 != np * (np + 1) / 2 || b != 99 || s2 != np)
        FAIL("freed: got %d %d %d, expected %d 99 %d", s1, b, s2, np * (np + 1) / 2, np);
}

/* An iallreduce on a fresh communicator (after a barrier: the area
 * exists) where the last rank passes last_count int32 and the others
 * count: the others must fail with PLAIT_ERR_ARG, and the last rank too
 * unless last_ok (it then returns PLAIT_OK). */
static void iallreduce_mismatch(const char *what, size_t count, size_t last_count, int last_ok)
{
    plait_comm_t d;
    plait_request_t q;
    int in[96] = {0}, out[96], rc, last = np - 1;
    CK(plait_comm_dup(plait_comm_world(), &d));
    CK(plait_barrier(d));
    rc = plait_iallreduce(in, out, me == last ? last_count : count, PLAIT_INT32, PLAIT_SUM, d, &q);
    if (rc == PLAIT_OK)
        rc = plait_wait(&q, NULL);
    fprintf(stderr, "rank %d: iallreduce, %s -> %s %s\n", me, what, plait_strerror(rc),
            rc ? plait_last_error() : "");
    if (rc != (me == last && last_ok ? PLAIT_OK : PLAIT_ERR_ARG) || q)
        FAIL("iallreduce, %s: got %s", what, plait_strerror(rc));
    CK(plait_comm_free(&d));
}

/* The last rank passes count 0 (it moves nothing and returns) where the
 * others pass 16: they wait on the area for a part that never comes, and
 * the stall probes must find that rank past the call. */
static void silent(void)
{
    iallreduce_mismatch("count 0 on the last rank", 16, 0, 1);
}

/* A two-phase iallreduce (32 KB: slices from 3 ranks) where the last rank
 * passes MAX and the others MIN: every rank reads every input header
 * before it reduces its slice, so every rank must fail with PLAIT_ERR_ARG
 * and publish no slice; the area then goes on (every rank skipped the same
 * calls), as an allreduce after it shows. */
static void slices_diverge(void)
{
    enum { N = 8192 };
    static int32_t in[N], out[N];
    plait_request_t q;
    int32_t v = me, sum = -1;
    int rc;
    rc = plait_iallreduce(in, out, N, PLAIT_INT32, me == np - 1 ? PLAIT_MAX : PLAIT_MIN,
                          plait_comm_world(), &q);
    if (rc == PLAIT_OK)
        rc = plait_wait(&q, NULL);
    fprintf(stderr, "rank %d: two-phase iallreduce MAX against MIN -> %s %s\n", me,
            plait_strerror(rc), rc ? plait_last_error() : "");
    if (rc != PLAIT_ERR_ARG || q)
        FAIL("two-phase iallreduce MAX against MIN: got %s", plait_strerror(rc));
    CK(plait_iallreduce(&v, &sum, 1, PLAIT_INT32, PLAIT_SUM, plait_comm_world(), &q));
    CK(plait_wait(&q, NULL));
    if (sum != np * (np - 1) / 2)
        FAIL("iallreduce after the failed one: %d, expected %d", (int)sum, np * (np - 1) / 2);
}

/* The last rank passes 96 int32 where the others pass 48 (384 against 192
 * bytes: the area's small lane takes only the others' calls): each rank
 * waits in its own lane for a part published in the other, and every rank
 * must fail, none wait for ever. */
static void lanes_diverge(void)
{
    iallreduce_mismatch("96 against 48", 48, 96, 0);
}

static void diverge(void)
{
    plait_comm_t w = plait_comm_world();
    plait_request_t q;
    int in[16] = {0}, out[16], rc, last = np - 1;
    CK(plait_barrier(w));
    rc = plait_ireduce(in, out, 16, PLAIT_INT32, me == last ? PLAIT_MAX : PLAIT_MIN, 0, w, &q);
    if (rc == PLAIT_OK)
        rc = plait_wait(&q, NULL);
    fprintf(stderr, "rank %d: ireduce MAX against MIN -> %s %s\n", me, plait_strerror(rc),
            rc ? plait_last_error() : "");
    if ((rc != PLAIT_OK && rc != PLAIT_ERR_ARG) || (me == 0 && rc != PLAIT_ERR_ARG) || q)
        FAIL("ireduce MAX against MIN: got %s (request %s)", plait_strerror(rc),
             q ? "left set" : "freed");
    rc = plait_ibcast(in, 16, PLAIT_INT32, me == last ? 1 : 0, w, &q);
    if (rc == PLAIT_OK)
        rc = plait_wait(&q, NULL);
    fprintf(stderr, "rank %d: ibcast roots differ -> %s %s\n", me, plait_strerror(rc),
            rc ? plait_last_error() : "");
    if ((rc != PLAIT_OK && rc != PLAIT_ERR_ARG) || (me == last && np > 2 && rc != PLAIT_ERR_ARG) ||
        q)   /* (two ranks: both are roots in their own view, neither reads) */
        FAIL("ibcast roots differ: got %s", plait_strerror(rc));
    silent();
    lanes_diverge();
    if (np >= 3)
        slices_diverge();
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "stress";
    const char *env = getenv("PLAIT_TEST_SEED");
    call_t *cs = NULL;
    if (env)
        seed = strtoull(env, NULL, 0);
    CK(plait_init());
    plait_comm_rank(plait_comm_world(), &me);
    plait_comm_size(plait_comm_world(), &np);
    if (me == 0)
        printf("coll_nb_area %s: seed %llu, %d ranks\n", mode, (unsigned long long)seed, np);
    if (!strcmp(mode, "stress") || !strcmp(mode, "first")) {
        if (!(cs = calloc(BATCH, sizeof *cs)))
            FAIL("no memory");
        for (int k = 0; k < BATCH; k++)
            if (!(cs[k].in = malloc(elems(np) * 8)) || !(cs[k].out = malloc(elems(np) * 8)))
                FAIL("no memory");
        if (!strcmp(mode, "first"))
            first(cs);
        else
            stress(cs);
    } else if (!strcmp(mode, "behind") && np >= 2) {
        behind();
    } else if (!strcmp(mode, "freed")) {
        freed();
    } else if (!strcmp(mode, "diverge") && np >= 2) {
        diverge();
    } else {
        FAIL("unknown mode %s (or too few ranks)", mode);
    }
    if (me == 0)
        printf("coll_nb_area %s: ok\n", mode);
    for (int k = 0; cs && k < BATCH; k++) {
        free(cs[k].in);
        free(cs[k].out);
    }
    free(cs);
    return plait_finalize() == PLAIT_OK ? 0 : 1;
}
