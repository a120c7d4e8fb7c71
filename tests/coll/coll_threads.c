/*
 * coll_threads.c -- collectives on several communicators at once, one thread
 * per communicator, beside point-to-point traffic from other threads.
 *
 * Written against plait.h only (as an outside program would be). It checks
 * the "Threads" section of API.md:
 *   - "different communicators are independent": T threads each drive their
 *     own communicator (made by plait_comm_dup of the world; one more thread
 *     drives a plait_comm_split of the world by rank parity when size >= 2);
 *     about one round in five runs on a fresh per-round dup or split of the
 *     thread's communicator, so threads also create and free communicators
 *     concurrently (each on its own parent);
 *   - "point-to-point calls may run concurrently from several threads, on one
 *     communicator too": P extra threads run ring exchanges with
 *     plait_isend/plait_irecv/plait_send (0 bytes to 3 MiB, some receives
 *     PLAIT_ANY_SOURCE) at the same time, each iteration on the world or on
 *     one of the dup'ed communicators while its collective thread runs
 *     collectives on it (their traffic must never match);
 *   - "any thread may call any function": with -F 1 plait_init and
 *     plait_finalize run in helper threads; in churn mode a request is
 *     sometimes waited on by a thread other than the one that started it
 *     ("one request object is used by one thread at a time");
 *   - plait_last_error is per thread: now and then every rank's thread makes
 *     the same invalid call with a root/tag value unique to the thread and
 *     round; it must fail with PLAIT_ERR_ARG, leave the buffers untouched and
 *     its plait_last_error() must name that value and stay unchanged while
 *     the other threads run (and fail their own calls);
 *   - (mode "churn") the main thread meanwhile dups/splits, uses and frees
 *     fresh communicators of the world (every rank does the same sequence).
 *
 * Collective threads: thread t runs R rounds on its communicator. A round
 * starts 1..M (default 5) collectives, each chosen at random from all ten of
 * API.md (barrier, bcast, reduce, allreduce, allgather, reduce_scatter,
 * alltoall, alltoallv, gather, scatter), blocking or non-blocking (several
 * non-blocking ones in flight at once, blocking ones started between them),
 * dtype int32/int64/float32/float64/uint8, op SUM/MAX/MIN, random root,
 * sometimes in place (sendbuf == recvbuf, as API.md/plait.h define it per
 * call; alltoallv in place as tests/coll/coll_check.c uses it: the send
 * layout and the receive layout in one buffer), counts mostly 1..64,
 * sometimes 0 (then sometimes NULL buffers), 65..2064 or 4000..70000
 * elements (block collectives: divided by the size); reduce passes a NULL
 * recvbuf at non-roots half of the time. The pending non-blocking ones are
 * then completed by plait_waitall, by plait_wait in a random order, by a
 * plait_test loop, or by a mix of these; a per-round communicator is
 * sometimes freed while they are still in flight (plait.h: "any operation
 * still in flight on it completes first").
 *
 * Determinism: every choice shared by the ranks of a communicator is drawn
 * from a generator seeded by (seed, thread, round) only, so all ranks' thread
 * t make the same calls in the same order. Every input element is a pure
 * function of (seed, thread, round, call, sender rank, index), so each rank
 * computes the expected result locally. Floating-point inputs are integers
 * small enough that every sum is exact in any order; uint8 SUM wraps modulo
 * 256 (unsigned arithmetic); int32 inputs stay within +-2^20.
 * Output buffers are poisoned (a per-call byte) and guarded by GUARD poisoned
 * bytes on both sides; every result element is checked, inputs must come back
 * unchanged, buffers of ranks that receive nothing (non-roots) must stay
 * poisoned, alltoallv's gaps between receive blocks must stay poisoned;
 * point-to-point receives check contents, status (source, tag, bytes) and
 * the bytes past the message. Rank-local timing jitter (short sleeps, not
 * shared) shakes the interleavings between ranks; it never changes what is
 * called.
 *
 * Usage: coll_threads [plain|churn] [-t T] [-r R] [-p P] [-i I] [-c C]
 *                     [-m M] [-L PCT] [-S 0|1] [-F 0|1]
 *   plain   (default) T collective threads (+1 on the split communicator),
 *           P point-to-point threads; the main thread just joins them
 *   churn   the same, and the main thread runs C iterations of
 *           dup (or split) of the world + barrier + allreduce (checked)
 *           + free, sometimes freeing with an iallreduce still in flight,
 *           waited on afterwards, sometimes by a short-lived thread
 *   -t T    collective threads on dup'ed communicators (default 4)
 *   -r R    rounds per collective thread (default 40)
 *   -p P    point-to-point threads (default 1, 0 = none)
 *   -i I    ring iterations per point-to-point thread (default 30)
 *   -c C    churn iterations (default 30)
 *   -m M    at most M collectives per round (default 5, at most 16)
 *   -L PCT  percent of calls with a large count (default 4)
 *   -S 0    no per-round communicators (default 1)
 *   -F 1    plait_init and plait_finalize in helper threads (default 0)
 * Env: PLAIT_TEST_SEED (decimal; "time" = from the clock), default 20260101.
 * Rank 0's seed is broadcast to all ranks, so the job always agrees on it.
 *
 * Rank 0 prints "coll_threads MODE: ... ok" at the end. Any failure prints a
 * "FAIL coll_threads" line (rank, thread, round, seed, call, details, with
 * plait_strerror/plait_last_error for error results) to stderr and the rank
 * exits with status 1 at once (_exit: other threads may be inside the
 * library, so no atexit handlers run; plaitrun then ends the job).
 *
 * Build: gcc -O1 -g -Wall -Wextra -pthread -Iinclude tests/coll/coll_threads.c \
 *            -o tests/coll/coll_threads -L.libs -lplait -Wl,-rpath,$PWD/.libs
 * Run:   PLAIT_TIMEOUT=60 launcher/plaitrun -n 4 --bind-to none tests/coll/coll_threads [churn]
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "plait.h"

#define GUARD 64          /* poisoned bytes on each side of every buffer */
#define MAX_OPS 16        /* most collectives started in one round (-m) */
#define GOLDEN 0x9E3779B97F4A7C15ull

/* ------------------------------------------------------------ settings */

static uint64_t g_seed = 20260101ull;
static int g_rank = -1, g_size = 0;
static int g_T = 4, g_R = 40, g_P = 1, g_iters = 30, g_churn = 30;
static int g_maxops = 5;      /* -m: collectives per round, 1..MAX_OPS */
static int g_large = 4;       /* -L: percent of calls with a large count */
static int g_subcomm = 1;     /* -S 0: no per-round dup/split by the threads */
static int g_foreign = 0;     /* -F 1: plait_init and plait_finalize in helper threads */
static const char *g_mode = "plain";
static plait_comm_t g_world;
static plait_comm_t *g_dups;  /* the T dup'ed communicators (p2p threads use them too) */

/* Domain separators for the hash, so different uses never share a stream. */
enum { D_CHOICE = 1, D_VAL, D_CNT, D_LAYOUT, D_JITTER, D_P2P, D_P2PVAL, D_CHURN, D_PERM };

/* ------------------------------------------------------------- hashing */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Hash of the seed and n words. */
static uint64_t hashv(size_t n, const uint64_t *v)
{
    uint64_t z = mix64(g_seed + GOLDEN);
    for (size_t i = 0; i < n; i++)
        z = mix64(z ^ (v[i] + GOLDEN * (i + 1)));
    return z;
}
#define HASH(...) \
    hashv(sizeof((uint64_t[]){__VA_ARGS__}) / sizeof(uint64_t), (uint64_t[]){__VA_ARGS__})

/* A small generator (splitmix64) for sequences of choices. */
typedef struct { uint64_t s; } rng_t;
static uint64_t rnext(rng_t *r)
{
    r->s += GOLDEN;
    return mix64(r->s);
}
static uint64_t rbelow(rng_t *r, uint64_t n) { return n ? rnext(r) % n : 0; }

/* ---------------------------------------------------------- failures */

/* What a thread is doing, for FAIL lines. */
typedef struct {
    const char *who;       /* "coll", "split", "p2p", "main" */
    int thread, round;
    plait_comm_t comm;
    int rank, size;        /* in comm */
    unsigned long calls, nbcalls, big;   /* what this thread did (for the summary) */
} tctx_t;

static void failf(const tctx_t *c, const char *call, int rc, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* plait_last_error is per thread: this is the failing thread. */
    if (rc != PLAIT_OK)
        fprintf(stderr,
                "FAIL coll_threads %s: rank %d %s thread %d round %d seed %llu call %s: %s"
                " -> rc %d (%s): %s\n",
                g_mode, g_rank, c->who, c->thread, c->round, (unsigned long long)g_seed, call, msg,
                rc, plait_strerror(rc), plait_last_error());
    else
        fprintf(stderr, "FAIL coll_threads %s: rank %d %s thread %d round %d seed %llu call %s: %s\n",
                g_mode, g_rank, c->who, c->thread, c->round, (unsigned long long)g_seed, call, msg);
    fflush(stderr);
    fflush(stdout);
    _exit(1);
}

/* Rank-local jitter: sometimes sleep up to 300 us (not a shared choice). */
static void jitter(const tctx_t *c, uint64_t what)
{
    uint64_t h = HASH(D_JITTER, (uint64_t)g_rank, (uint64_t)c->thread, (uint64_t)c->round, what);
    if (h % 5 == 0) {
        struct timespec t = {0, (long)((h >> 8) % 300) * 1000};
        nanosleep(&t, NULL);
    } else if (h % 5 == 1) {
        sched_yield();
    }
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------ datatypes */

static const plait_dtype_t DTS[5] = {PLAIT_INT32, PLAIT_INT64, PLAIT_FLOAT32, PLAIT_FLOAT64,
                                     PLAIT_UINT8};
static const plait_op_t OPS[3] = {PLAIT_SUM, PLAIT_MAX, PLAIT_MIN};

static const char *dt_name(plait_dtype_t dt)
{
    switch (dt) {
    case PLAIT_INT32: return "int32";
    case PLAIT_INT64: return "int64";
    case PLAIT_FLOAT32: return "float32";
    case PLAIT_FLOAT64: return "float64";
    case PLAIT_UINT8: return "uint8";
    default: return "?";
    }
}
static const char *op_name(plait_op_t op)
{
    return op == PLAIT_SUM ? "sum" : op == PLAIT_MAX ? "max" : op == PLAIT_MIN ? "min" : "?";
}

/* Stores integer v as element i of a dt array (uint8 wraps modulo 256). */
static void put(plait_dtype_t dt, void *buf, size_t i, int64_t v)
{
    switch (dt) {
    case PLAIT_INT32: { int32_t x = (int32_t)v; memcpy((char *)buf + 4 * i, &x, 4); break; }
    case PLAIT_INT64: { int64_t x = v; memcpy((char *)buf + 8 * i, &x, 8); break; }
    case PLAIT_FLOAT32: { float x = (float)v; memcpy((char *)buf + 4 * i, &x, 4); break; }
    case PLAIT_FLOAT64: { double x = (double)v; memcpy((char *)buf + 8 * i, &x, 8); break; }
    case PLAIT_UINT8: { uint8_t x = (uint8_t)(uint64_t)v; memcpy((char *)buf + i, &x, 1); break; }
    default: break;
    }
}

/* Element i of a dt array as text (for FAIL lines). */
static void show(plait_dtype_t dt, const void *buf, size_t i, char *out, size_t n)
{
    switch (dt) {
    case PLAIT_INT32: { int32_t x; memcpy(&x, (const char *)buf + 4 * i, 4); snprintf(out, n, "%" PRId32, x); break; }
    case PLAIT_INT64: { int64_t x; memcpy(&x, (const char *)buf + 8 * i, 8); snprintf(out, n, "%" PRId64, x); break; }
    case PLAIT_FLOAT32: { float x; memcpy(&x, (const char *)buf + 4 * i, 4); snprintf(out, n, "%.9g", (double)x); break; }
    case PLAIT_FLOAT64: { double x; memcpy(&x, (const char *)buf + 8 * i, 8); snprintf(out, n, "%.17g", x); break; }
    case PLAIT_UINT8: { uint8_t x; memcpy(&x, (const char *)buf + i, 1); snprintf(out, n, "%u", (unsigned)x); break; }
    default: snprintf(out, n, "?"); break;
    }
}

/* An input value from a 64-bit hash, in a range where every reduction of up
 * to a few thousand ranks is exact (floats: integers below 2^12 / 2^40). */
static int64_t val_of(plait_dtype_t dt, uint64_t h)
{
    switch (dt) {
    case PLAIT_UINT8: return (int64_t)(h & 0xff);
    case PLAIT_INT32: return (int64_t)(h % (1u << 21)) - (1 << 20);
    case PLAIT_INT64: return (int64_t)(h % (1ull << 51)) - (int64_t)(1ull << 50);
    case PLAIT_FLOAT32: return (int64_t)(h % 8193) - 4096;
    case PLAIT_FLOAT64: return (int64_t)(h % (1ull << 41)) - (int64_t)(1ull << 40);
    default: return 0;
    }
}

static int64_t combine(plait_op_t op, int64_t a, int64_t b)
{
    switch (op) {
    case PLAIT_SUM: return a + b;
    case PLAIT_MAX: return a > b ? a : b;
    case PLAIT_MIN: return a < b ? a : b;
    default: return 0;
    }
}

/* --------------------------------------------------- guarded buffers */

static unsigned char *galloc(size_t bytes, unsigned char poison)
{
    unsigned char *p = malloc(bytes + 2 * GUARD);
    if (!p) {
        fprintf(stderr, "FAIL coll_threads: rank %d: out of memory (%zu bytes)\n", g_rank, bytes);
        _exit(1);
    }
    memset(p, poison, bytes + 2 * GUARD);
    return p + GUARD;
}
static void gfree(unsigned char *p)
{
    if (p)
        free(p - GUARD);
}

/* ------------------------------------------------------ result checks */

/* Collects mismatches of one call; the FAIL line shows the first few. */
typedef struct {
    size_t bad;
    char text[1024];
} chk_t;

static void chk_note(chk_t *k, const char *fmt, ...)
{
    size_t len = strlen(k->text);
    if (k->bad++ < 4 && len < sizeof k->text - 1) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(k->text + len, sizeof k->text - len, fmt, ap);
        va_end(ap);
    }
}

/* Element pos of buf (dt) must equal v. */
static void chk_elem(chk_t *k, plait_dtype_t dt, const unsigned char *buf, size_t pos, int64_t v,
                     const char *what)
{
    unsigned char want[8];
    size_t es = plait_dtype_size(dt);
    put(dt, want, 0, v);
    if (memcmp(buf + pos * es, want, es) != 0) {
        char g[64], w[64];
        show(dt, buf, pos, g, sizeof g);
        show(dt, want, 0, w, sizeof w);
        chk_note(k, " [%s element %zu: got %s want %s]", what, pos, g, w);
    }
}

/* Bytes [from, to) of buf must all be the poison byte. */
static void chk_poison(chk_t *k, const unsigned char *buf, ptrdiff_t from, ptrdiff_t to,
                       unsigned char poison, const char *what)
{
    for (ptrdiff_t i = from; i < to; i++)
        if (buf[i] != poison) {
            chk_note(k, " [%s byte %td written: 0x%02x, poison 0x%02x]", what, i, buf[i], poison);
            return;
        }
}

/* The GUARD bytes on both sides of a buffer of `bytes` bytes. */
static void chk_guards(chk_t *k, const unsigned char *buf, size_t bytes, unsigned char poison,
                       const char *what)
{
    if (!buf)
        return;
    chk_poison(k, buf, -GUARD, 0, poison, what);
    chk_poison(k, buf, (ptrdiff_t)bytes, (ptrdiff_t)bytes + GUARD, poison, what);
}

/* ------------------------------------------------------ collective calls */

enum { K_BARRIER, K_BCAST, K_REDUCE, K_ALLREDUCE, K_ALLGATHER, K_REDUCE_SCATTER, K_ALLTOALL,
       K_ALLTOALLV, K_GATHER, K_SCATTER, K_NKINDS };
static const char *kind_names[K_NKINDS] = {"barrier", "bcast", "reduce", "allreduce",
                                           "allgather", "reduce_scatter", "alltoall",
                                           "alltoallv", "gather", "scatter"};

typedef struct {
    int idx;                 /* position in the round */
    int kind, nb, inplace, nullbuf, nullrecv;
    plait_dtype_t dt;
    plait_op_t op;
    int root;
    size_t count, es;
    unsigned char poison;
    uint64_t *base;          /* base[r]: hash of rank r's inputs for this call */
    unsigned char *sa, *ra;  /* allocations (guarded), or NULL */
    size_t sbytes, rbytes;   /* their sizes */
    const void *sp;          /* what is passed as sendbuf */
    void *rp;                /* ... and as recvbuf */
    size_t *sc, *sd, *rc, *rd;  /* alltoallv */
    unsigned char *cover;    /* alltoallv: which receive elements are block data */
    size_t sext, rext;       /* alltoallv extents in elements */
    plait_request_t req;
    char desc[200];
} op_t;

/* Rank r's input element idx of call o. */
static int64_t val(const op_t *o, int r, uint64_t idx)
{
    return val_of(o->dt, mix64(o->base[r] ^ (idx * GOLDEN + 0x632BE59BD9B4E019ull)));
}

/* op over all n ranks' input element idx (exact: see val_of). */
static int64_t red(const op_t *o, int n, uint64_t idx)
{
    int64_t a = val(o, 0, idx);
    for (int r = 1; r < n; r++)
        a = combine(o->op, a, val(o, r, idx));
    return a;
}

/* alltoallv: number of elements rank a sends to rank b. */
static size_t av_cnt(const tctx_t *c, const op_t *o, int a, int b)
{
    return (size_t)(HASH(D_CNT, (uint64_t)c->thread, (uint64_t)c->round, (uint64_t)o->idx,
                         (uint64_t)a, (uint64_t)b) % (o->count + 1));
}

static int is_block_kind(int k)
{
    return k == K_ALLGATHER || k == K_REDUCE_SCATTER || k == K_ALLTOALL || k == K_ALLTOALLV ||
           k == K_GATHER || k == K_SCATTER;
}

/* The shared choices of call idx of a round: the same draws on every rank. */
static void op_choose(const tctx_t *c, rng_t *g, op_t *o, int idx)
{
    memset(o, 0, sizeof *o);
    o->idx = idx;
    o->kind = (int)rbelow(g, K_NKINDS);
    o->nb = (int)rbelow(g, 2);
    uint64_t r = rbelow(g, 100);
    uint64_t large = 4000 + rbelow(g, 66000), medium = 65 + rbelow(g, 2000), small = 1 + rbelow(g, 64);
    o->count = r < 6 ? 0 : r < 6 + (uint64_t)g_large ? large : r < 18 + (uint64_t)g_large ? medium : small;
    if (is_block_kind(o->kind) && o->count > 1000)
        o->count = o->count / (size_t)c->size + 1;   /* keep size * count bounded */
    o->dt = DTS[rbelow(g, 5)];
    o->op = OPS[rbelow(g, 3)];
    o->root = (int)rbelow(g, (uint64_t)c->size);
    o->inplace = rbelow(g, 3) == 0;
    o->nullbuf = o->count == 0 && rbelow(g, 2);   /* count 0: NULL buffers are allowed */
    o->nullrecv = (int)rbelow(g, 2);              /* reduce: recvbuf NULL at non-roots */
    o->poison = (unsigned char)rnext(g);
    o->es = plait_dtype_size(o->dt);
    if (o->kind == K_BCAST || o->kind == K_BARRIER)
        o->inplace = 0;
    snprintf(o->desc, sizeof o->desc, "%s%s(count=%zu, %s%s%s, root=%d%s%s) #%d",
             o->nb ? "plait_i" : "plait_", kind_names[o->kind], o->count, dt_name(o->dt),
             (o->kind == K_REDUCE || o->kind == K_ALLREDUCE || o->kind == K_REDUCE_SCATTER) ? ", " : "",
             (o->kind == K_REDUCE || o->kind == K_ALLREDUCE || o->kind == K_REDUCE_SCATTER)
                 ? op_name(o->op) : "",
             o->root, o->inplace ? ", in place" : "", o->nullbuf ? ", NULL buffers" : "", idx);
}

/* Allocates and fills the buffers of call o on this rank. */
static void op_setup(const tctx_t *c, op_t *o)
{
    int me = c->rank, n = c->size;
    size_t N = o->count, es = o->es, nN = (size_t)n * N;
    unsigned char P = o->poison;
    o->base = malloc(sizeof(uint64_t) * (size_t)n);
    for (int r = 0; r < n; r++)
        o->base[r] = HASH(D_VAL, (uint64_t)c->thread, (uint64_t)c->round, (uint64_t)o->idx,
                          (uint64_t)r, (uint64_t)o->dt);
#define FILL(buf, r, from, cnt) \
    for (size_t i_ = 0; i_ < (cnt); i_++) put(o->dt, (buf), (from) + i_, val(o, (r), (from) + i_))
    switch (o->kind) {
    case K_BARRIER:
        break;
    case K_BCAST:
        o->ra = galloc(o->rbytes = N * es, P);
        if (me == o->root)
            FILL(o->ra, me, 0, N);
        o->rp = o->ra;
        break;
    case K_REDUCE:
    case K_ALLREDUCE:
        o->sa = galloc(o->sbytes = N * es, P);
        FILL(o->sa, me, 0, N);
        o->sp = o->sa;
        if (o->kind == K_REDUCE && me != o->root) {
            if (!o->nullrecv)
                o->ra = galloc(o->rbytes = N * es, P);
            o->rp = o->ra;
        } else if (o->inplace) {
            o->rp = o->sa;
        } else {
            o->ra = galloc(o->rbytes = N * es, P);
            o->rp = o->ra;
        }
        break;
    case K_ALLGATHER:
        o->ra = galloc(o->rbytes = nN * es, P);
        o->rp = o->ra;
        if (o->inplace) {
            FILL(o->ra + (size_t)me * N * es, me, 0, N);   /* own block already in place */
            o->sp = o->ra;
        } else {
            o->sa = galloc(o->sbytes = N * es, P);
            FILL(o->sa, me, 0, N);
            o->sp = o->sa;
        }
        break;
    case K_REDUCE_SCATTER:
    case K_ALLTOALL:
        o->sa = galloc(o->sbytes = nN * es, P);
        FILL(o->sa, me, 0, nN);
        o->sp = o->sa;
        if (o->inplace) {
            o->rp = o->sa;
        } else {
            size_t rn = o->kind == K_ALLTOALL ? nN : N;
            o->ra = galloc(o->rbytes = rn * es, P);
            o->rp = o->ra;
        }
        break;
    case K_ALLTOALLV: {
        size_t *a = malloc(sizeof(size_t) * 4 * (size_t)n);
        int *perm = malloc(sizeof(int) * (size_t)n);
        o->sc = a; o->sd = a + n; o->rc = a + 2 * n; o->rd = a + 3 * n;
        /* This rank's own layout: blocks in a random order with 0..2 element
         * gaps (rank-local choice, the peers do not need to know it). */
        rng_t lg = {HASH(D_LAYOUT, (uint64_t)c->thread, (uint64_t)c->round, (uint64_t)o->idx,
                         (uint64_t)me)};
        for (int j = 0; j < n; j++) {
            o->sc[j] = av_cnt(c, o, me, j);
            o->rc[j] = av_cnt(c, o, j, me);
        }
        for (int pass = 0; pass < 2; pass++) {
            size_t *cnt = pass ? o->rc : o->sc, *dsp = pass ? o->rd : o->sd, ext = 0;
            for (int j = 0; j < n; j++)
                perm[j] = j;
            for (int j = n - 1; j > 0; j--) {
                int k = (int)rbelow(&lg, (uint64_t)j + 1), t = perm[j];
                perm[j] = perm[k];
                perm[k] = t;
            }
            for (int j = 0; j < n; j++) {
                ext += rbelow(&lg, 3);
                dsp[perm[j]] = ext;
                ext += cnt[perm[j]];
            }
            ext += rbelow(&lg, 3);
            if (pass)
                o->rext = ext;
            else
                o->sext = ext;
        }
        free(perm);
        if (o->inplace) {
            size_t ext = o->sext > o->rext ? o->sext : o->rext;
            o->sa = galloc(o->sbytes = ext * es, P);
            o->sp = o->rp = o->sa;
        } else {
            o->sa = galloc(o->sbytes = o->sext * es, P);
            o->ra = galloc(o->rbytes = o->rext * es, P);
            o->sp = o->sa;
            o->rp = o->ra;
            o->cover = calloc(o->rext + 1, 1);
            for (int i = 0; i < n; i++)
                memset(o->cover + o->rd[i], 1, o->rc[i]);
        }
        /* Element e of the block for rank j is input index (j << 32) + e. */
        for (int j = 0; j < n; j++)
            for (size_t e = 0; e < o->sc[j]; e++)
                put(o->dt, o->sa, o->sd[j] + e, val(o, me, ((uint64_t)j << 32) + e));
        break;
    }
    case K_GATHER:
        o->ra = galloc(o->rbytes = nN * es, P);   /* non-roots: must stay poisoned */
        o->rp = o->ra;
        if (o->inplace && me == o->root) {
            FILL(o->ra + (size_t)me * N * es, me, 0, N);
            o->sp = o->ra;
        } else {
            o->sa = galloc(o->sbytes = N * es, P);
            FILL(o->sa, me, 0, N);
            o->sp = o->sa;
        }
        break;
    case K_SCATTER:
        o->sa = galloc(o->sbytes = nN * es, P);   /* non-roots: unused, must stay poisoned */
        if (me == o->root)
            FILL(o->sa, me, 0, nN);
        o->sp = o->sa;
        if (o->inplace && me == o->root) {
            o->rp = o->sa;
        } else {
            o->ra = galloc(o->rbytes = N * es, P);
            o->rp = o->ra;
        }
        break;
    }
#undef FILL
    if (o->nullbuf) {   /* count 0 (so every count is 0): NULL buffers */
        o->sp = NULL;
        o->rp = NULL;
    }
}

/* Starts (nb) or runs (blocking) call o. */
static void op_start(const tctx_t *c, op_t *o)
{
    int rc = PLAIT_ERR_INTERNAL;
    plait_request_t *q = &o->req;
    plait_comm_t cm = c->comm;
    o->req = NULL;
    switch (o->kind) {
    case K_BARRIER:
        rc = o->nb ? plait_ibarrier(cm, q) : plait_barrier(cm);
        break;
    case K_BCAST:
        rc = o->nb ? plait_ibcast(o->rp, o->count, o->dt, o->root, cm, q)
                   : plait_bcast(o->rp, o->count, o->dt, o->root, cm);
        break;
    case K_REDUCE:
        rc = o->nb ? plait_ireduce(o->sp, o->rp, o->count, o->dt, o->op, o->root, cm, q)
                   : plait_reduce(o->sp, o->rp, o->count, o->dt, o->op, o->root, cm);
        break;
    case K_ALLREDUCE:
        rc = o->nb ? plait_iallreduce(o->sp, o->rp, o->count, o->dt, o->op, cm, q)
                   : plait_allreduce(o->sp, o->rp, o->count, o->dt, o->op, cm);
        break;
    case K_ALLGATHER:
        rc = o->nb ? plait_iallgather(o->sp, o->rp, o->count, o->dt, cm, q)
                   : plait_allgather(o->sp, o->rp, o->count, o->dt, cm);
        break;
    case K_REDUCE_SCATTER:
        rc = o->nb ? plait_ireduce_scatter(o->sp, o->rp, o->count, o->dt, o->op, cm, q)
                   : plait_reduce_scatter(o->sp, o->rp, o->count, o->dt, o->op, cm);
        break;
    case K_ALLTOALL:
        rc = o->nb ? plait_ialltoall(o->sp, o->rp, o->count, o->dt, cm, q)
                   : plait_alltoall(o->sp, o->rp, o->count, o->dt, cm);
        break;
    case K_ALLTOALLV:
        rc = o->nb ? plait_ialltoallv(o->sp, o->sc, o->sd, o->rp, o->rc, o->rd, o->dt, cm, q)
                   : plait_alltoallv(o->sp, o->sc, o->sd, o->rp, o->rc, o->rd, o->dt, cm);
        break;
    case K_GATHER:
        rc = o->nb ? plait_igather(o->sp, o->rp, o->count, o->dt, o->root, cm, q)
                   : plait_gather(o->sp, o->rp, o->count, o->dt, o->root, cm);
        break;
    case K_SCATTER:
        rc = o->nb ? plait_iscatter(o->sp, o->rp, o->count, o->dt, o->root, cm, q)
                   : plait_scatter(o->sp, o->rp, o->count, o->dt, o->root, cm);
        break;
    }
    if (rc != PLAIT_OK)
        failf(c, o->desc, rc, "%s returned an error", o->nb ? "start" : "blocking call");
    if (o->nb && o->req == NULL)
        failf(c, o->desc, 0, "non-blocking start returned PLAIT_OK with *req == NULL");
    if (!o->nb && o->req != NULL)
        failf(c, o->desc, 0, "blocking call wrote *req");
}

/* Checks the results of completed call o and frees its buffers. */
static void op_check(const tctx_t *c, op_t *o)
{
    int me = c->rank, n = c->size;
    size_t N = o->count, es = o->es, nN = (size_t)n * N;
    unsigned char P = o->poison;
    chk_t k;
    k.bad = 0;
    k.text[0] = 0;
    const unsigned char *S = o->sa, *R = o->ra;
#define RED(idx) red(o, n, (idx))
    switch (o->kind) {
    case K_BARRIER:
        break;
    case K_BCAST:
        for (size_t i = 0; i < N; i++)
            chk_elem(&k, o->dt, R, i, val(o, o->root, i), "buf");
        break;
    case K_REDUCE:
    case K_ALLREDUCE:
        if (o->kind == K_ALLREDUCE || me == o->root) {
            const unsigned char *out = o->inplace ? S : R;
            for (size_t i = 0; i < N; i++)
                chk_elem(&k, o->dt, out, i, RED(i), "recvbuf");
        } else if (R) {
            chk_poison(&k, R, 0, (ptrdiff_t)o->rbytes, P, "non-root recvbuf");
        }
        if (!o->inplace || (o->kind == K_REDUCE && me != o->root))
            for (size_t i = 0; i < N; i++)
                chk_elem(&k, o->dt, S, i, val(o, me, i), "sendbuf (input changed)");
        break;
    case K_ALLGATHER:
        for (int r = 0; r < n; r++)
            for (size_t i = 0; i < N; i++)
                chk_elem(&k, o->dt, R, (size_t)r * N + i, val(o, r, i), "recvbuf");
        if (!o->inplace)
            for (size_t i = 0; i < N; i++)
                chk_elem(&k, o->dt, S, i, val(o, me, i), "sendbuf (input changed)");
        break;
    case K_REDUCE_SCATTER: {
        const unsigned char *out = o->inplace ? S : R;
        for (size_t i = 0; i < N; i++)
            chk_elem(&k, o->dt, out, i, RED((size_t)me * N + i), "recvbuf");
        if (!o->inplace)
            for (size_t i = 0; i < nN; i++)
                chk_elem(&k, o->dt, S, i, val(o, me, i), "sendbuf (input changed)");
        break;
    }
    case K_ALLTOALL: {
        const unsigned char *out = o->inplace ? S : R;
        for (int r = 0; r < n; r++)
            for (size_t i = 0; i < N; i++)
                chk_elem(&k, o->dt, out, (size_t)r * N + i, val(o, r, (size_t)me * N + i), "recvbuf");
        if (!o->inplace)
            for (size_t i = 0; i < nN; i++)
                chk_elem(&k, o->dt, S, i, val(o, me, i), "sendbuf (input changed)");
        break;
    }
    case K_ALLTOALLV: {
        const unsigned char *out = o->inplace ? S : R;
        for (int r = 0; r < n; r++)
            for (size_t e = 0; e < o->rc[r]; e++)
                chk_elem(&k, o->dt, out, o->rd[r] + e, val(o, r, ((uint64_t)me << 32) + e), "recvbuf");
        if (!o->inplace) {
            for (size_t p = 0; p < o->rext; p++)
                if (!o->cover[p])
                    chk_poison(&k, R, (ptrdiff_t)(p * es), (ptrdiff_t)((p + 1) * es), P,
                               "recvbuf gap between blocks");
            for (int j = 0; j < n; j++)
                for (size_t e = 0; e < o->sc[j]; e++)
                    chk_elem(&k, o->dt, S, o->sd[j] + e, val(o, me, ((uint64_t)j << 32) + e),
                             "sendbuf (input changed)");
        }
        break;
    }
    case K_GATHER:
        if (me == o->root) {
            for (int r = 0; r < n; r++)
                for (size_t i = 0; i < N; i++)
                    chk_elem(&k, o->dt, R, (size_t)r * N + i, val(o, r, i), "recvbuf");
        } else {
            chk_poison(&k, R, 0, (ptrdiff_t)o->rbytes, P, "non-root recvbuf");
        }
        if (S)
            for (size_t i = 0; i < N; i++)
                chk_elem(&k, o->dt, S, i, val(o, me, i), "sendbuf (input changed)");
        break;
    case K_SCATTER:
        if (me == o->root)   /* in place too: the whole sendbuf stays as it was */
            for (size_t i = 0; i < nN; i++)
                chk_elem(&k, o->dt, S, i, val(o, o->root, i), "root sendbuf (input changed)");
        else
            chk_poison(&k, S, 0, (ptrdiff_t)o->sbytes, P, "non-root sendbuf");
        if (R)
            for (size_t i = 0; i < N; i++)
                chk_elem(&k, o->dt, R, i, val(o, o->root, (size_t)me * N + i), "recvbuf");
        break;
    }
#undef RED
    chk_guards(&k, o->sa, o->sbytes, P, "guard around buffer A");
    chk_guards(&k, o->ra, o->rbytes, P, "guard around buffer B");
    if (k.bad)
        failf(c, o->desc, 0, "%zu wrong element(s) or byte range(s) on %s (rank %d of %d):%s",
              k.bad, c->who, me, n, k.text);
    gfree(o->sa);
    gfree(o->ra);
    free(o->base);
    free(o->sc);
    free(o->cover);
    o->sa = o->ra = NULL;
    o->base = NULL;
    o->sc = NULL;
    o->cover = NULL;
}

/* Completes the pending non-blocking calls pend[0..np) of a round with a
 * method drawn from the shared generator (the completion order is free). */
static void complete_pending(const tctx_t *c, rng_t *g, op_t **pend, int np)
{
    if (np == 0)
        return;
    int method = (int)rbelow(g, 4), order[MAX_OPS];
    for (int i = 0; i < np; i++)
        order[i] = i;
    for (int i = np - 1; i > 0; i--) {
        int k = (int)rbelow(g, (uint64_t)i + 1), t = order[i];
        order[i] = order[k];
        order[k] = t;
    }
    if (method == 0) {                           /* plait_waitall, start order */
        plait_request_t reqs[MAX_OPS];
        plait_status_t st[MAX_OPS];
        for (int i = 0; i < np; i++)
            reqs[i] = pend[i]->req;
        int rc = plait_waitall(np, reqs, rbelow(g, 2) ? st : NULL);
        if (rc != PLAIT_OK)
            failf(c, "plait_waitall", rc, "completing %d collectives, first %s", np, pend[0]->desc);
        for (int i = 0; i < np; i++) {
            if (reqs[i] != NULL)
                failf(c, "plait_waitall", 0, "request %d (%s) not set to NULL", i, pend[i]->desc);
            pend[i]->req = NULL;
        }
        return;
    }
    if (method == 1 || method == 3) {            /* plait_wait, random order */
        int upto = method == 1 ? np : 1;         /* 3: wait on one, then test the rest */
        for (int i = 0; i < upto; i++) {
            op_t *o = pend[order[i]];
            plait_status_t st;
            int rc = plait_wait(&o->req, &st);
            if (rc != PLAIT_OK)
                failf(c, o->desc, rc, "plait_wait");
            if (o->req != NULL)
                failf(c, o->desc, 0, "plait_wait left *req non-NULL");
        }
    }
    /* plait_test loop over whatever is left, in the random order. */
    for (;;) {
        int left = 0;
        for (int i = 0; i < np; i++) {
            op_t *o = pend[order[i]];
            if (o->req == NULL)
                continue;
            int done = -1, rc = plait_test(&o->req, &done, NULL);
            if (rc != PLAIT_OK)
                failf(c, o->desc, rc, "plait_test");
            if (done != 0 && done != 1)
                failf(c, o->desc, 0, "plait_test set done=%d", done);
            if (done && o->req != NULL)
                failf(c, o->desc, 0, "plait_test done=1 but *req non-NULL");
            if (!done)
                left++;
        }
        if (!left)
            break;
        sched_yield();   /* 2 cores, many threads: let the others move */
    }
}

/* Sometimes (shared choice) a round runs on a fresh communicator that the
 * thread makes from its own one -- plait_comm_dup, or plait_comm_split into
 * three colors with some ranks opting out (PLAIT_UNDEFINED) and a reversed
 * key -- and frees at the end of the round. The threads of one rank then
 * create and free communicators concurrently, on different parents (legal:
 * each parent is used by one thread only). Returns 0 when this rank opted
 * out of the split (it skips the round). */
static int sub_make(tctx_t *c, rng_t *g, tctx_t *sub, int kind)
{
    uint64_t h = rnext(g);   /* drawn on every rank */
    int rc;
    *sub = *c;
    if (kind == 0) {
        rc = plait_comm_dup(c->comm, &sub->comm);
        if (rc != PLAIT_OK)
            failf(c, "plait_comm_dup", rc, "of the thread's communicator");
        sub->who = c->thread < g_T ? "coll(dup)/dup" : "coll(split)/dup";
    } else {
        int color = (int)((h + (uint64_t)c->rank) % 4);   /* 3: opt out */
        if (color == 3)
            color = PLAIT_UNDEFINED;
        rc = plait_comm_split(c->comm, color, c->size - c->rank, &sub->comm);
        if (rc != PLAIT_OK)
            failf(c, "plait_comm_split", rc, "of the thread's communicator, color %d", color);
        sub->who = c->thread < g_T ? "coll(dup)/split" : "coll(split)/split";
        if (color == PLAIT_UNDEFINED) {
            if (sub->comm != NULL)
                failf(c, "plait_comm_split", 0, "PLAIT_UNDEFINED gave a communicator");
            return 0;
        }
        /* Expected: the ranks of my color, in reverse order of the parent. */
        int want_size = 0, want_rank = 0;
        for (int r = 0; r < c->size; r++)
            if ((int)((h + (uint64_t)r) % 4) == color) {
                want_size++;
                if (r > c->rank)
                    want_rank++;
            }
        sub->size = want_size;
        sub->rank = want_rank;
    }
    int sz = -1, rk = -1;
    if ((rc = plait_comm_size(sub->comm, &sz)) != PLAIT_OK || (rc = plait_comm_rank(sub->comm, &rk)) != PLAIT_OK)
        failf(c, "plait_comm_size/rank", rc, "of a per-round communicator");
    if (sz != sub->size || rk != sub->rank)
        failf(c, kind ? "plait_comm_split" : "plait_comm_dup", 0, "size %d rank %d, want %d %d", sz, rk,
              sub->size, sub->rank);
    return 1;
}

/* A call with an invalid argument that is unique to this thread and round
 * (a root or tag value), made identically by every rank so no collective
 * starts: it must fail with PLAIT_ERR_ARG, leave the buffer untouched, and
 * plait_last_error() must be this thread's message (naming its own value),
 * still the same after the other threads ran (and failed their own ones)
 * in between: API.md "this thread's detailed message for its last failure". */
static void bad_call(const tctx_t *c, rng_t *g)
{
    int which = (int)rbelow(g, 3), v = 100 + c->thread * 1000 + c->round, rc = PLAIT_OK;
    unsigned char P = (unsigned char)rnext(g), *buf = galloc(64, P), *buf2 = galloc(64, P);
    plait_request_t req = NULL;
    char want[64], msg[512], call[160];
    switch (which) {
    case 0:
        rc = plait_bcast(buf, 16, PLAIT_INT32, c->size + v, c->comm);
        snprintf(want, sizeof want, "root %d", c->size + v);
        break;
    case 1:
        rc = plait_ireduce(buf, buf2, 16, PLAIT_INT32, PLAIT_SUM, -v, c->comm, &req);
        snprintf(want, sizeof want, "root %d", -v);
        break;
    default:
        rc = plait_irecv(buf, 16, PLAIT_INT32, 0, -v, c->comm, &req);
        snprintf(want, sizeof want, "tag %d", -v);
        break;
    }
    snprintf(call, sizeof call, "%s with %s (invalid on purpose)",
             which == 0 ? "plait_bcast" : which == 1 ? "plait_ireduce" : "plait_irecv", want);
    if (rc != PLAIT_ERR_ARG)
        failf(c, call, rc == PLAIT_OK ? 0 : rc, "want PLAIT_ERR_ARG, got %d", rc);
    snprintf(msg, sizeof msg, "%s", plait_last_error());
    /* The number must appear as itself, not as a prefix of a longer one. */
    const char *at = strstr(msg, want);
    if (!at || (at[strlen(want)] >= '0' && at[strlen(want)] <= '9'))
        failf(c, call, 0, "plait_last_error() is \"%s\", want a message naming \"%s\"", msg, want);
    jitter(c, 300);
    sched_yield();
    if (strcmp(msg, plait_last_error()) != 0)
        failf(c, call, 0, "plait_last_error() changed from \"%s\" to \"%s\" without a failing call"
              " of this thread", msg, plait_last_error());
    chk_t k;
    k.bad = 0;
    k.text[0] = 0;
    chk_poison(&k, buf, -GUARD, 64 + GUARD, P, "buffer");
    chk_poison(&k, buf2, -GUARD, 64 + GUARD, P, "recvbuf");
    if (k.bad)
        failf(c, call, 0, "a failed call wrote the user's buffer:%s", k.text);
    gfree(buf);
    gfree(buf2);
}

/* One collective thread: R rounds on its own communicator (some on a
 * per-round child of it); frees its communicator at the end, while the other
 * threads may still be running. */
static void *coll_thread(void *arg)
{
    tctx_t *c = arg;
    op_t ops[MAX_OPS];
    for (c->round = 0; c->round < g_R; c->round++) {
        rng_t g = {HASH(D_CHOICE, (uint64_t)c->thread, (uint64_t)c->round)};
        uint64_t subk = g_subcomm ? rbelow(&g, 10) : 9;   /* 0: dup, 1: split, else: none */
        tctx_t sub, *x = c;
        if (subk <= 1) {
            if (!sub_make(c, &g, &sub, (int)subk))
                continue;   /* opted out of this round's split */
            x = &sub;
        }
        if (rbelow(&g, 8) == 0)
            bad_call(x, &g);
        int nops = 1 + (int)rbelow(&g, (uint64_t)g_maxops), np = 0;
        op_t *pend[MAX_OPS];
        for (int i = 0; i < nops; i++) {
            op_t *o = &ops[i];
            op_choose(x, &g, o, i);
            op_setup(x, o);
            jitter(x, (uint64_t)i);
            op_start(x, o);
            c->calls++;
            c->nbcalls += (unsigned long)o->nb;
            c->big += o->count * o->es * (is_block_kind(o->kind) ? (size_t)x->size : 1) >= 65536;
            if (o->nb) {
                pend[np++] = o;
            } else {
                op_check(x, o);
            }
        }
        jitter(x, 100);
        /* A per-round communicator is sometimes freed with the round's
         * non-blocking calls still in flight (plait.h: "any operation still
         * in flight on it completes first"); they are completed after. */
        int early_free = x == &sub && rbelow(&g, 3) == 0;
        for (int pass = 0; pass < 2; pass++) {
            if (x == &sub && pass == !early_free) {
                plait_comm_t freed = sub.comm;
                int rc = plait_comm_free(&sub.comm);
                if (rc != PLAIT_OK || sub.comm != NULL)
                    failf(x, "plait_comm_free", rc, "per-round communicator%s%s",
                          early_free ? " (calls in flight)" : "",
                          rc == PLAIT_OK ? ": *comm not set to NULL" : "");
                sub.comm = freed;   /* only a name for FAIL lines from here on */
            }
            if (pass == 0) {
                complete_pending(x, &g, pend, np);
                for (int i = 0; i < np; i++)
                    op_check(x, pend[i]);
            }
        }
    }
    /* The split thread frees its own communicator now, while the others may
     * still run; the dup'ed ones are also used by the p2p threads, so the
     * main thread frees them after the join. */
    c->round = g_R;
    if (c->thread >= g_T || g_P == 0) {
        int rc = plait_comm_free(&c->comm);
        if (rc != PLAIT_OK || c->comm != NULL)
            failf(c, "plait_comm_free", rc, "the thread's communicator, by its thread%s",
                  rc == PLAIT_OK ? ": *comm not set to NULL" : "");
    }
    return NULL;
}

/* ------------------------------------------------------ point-to-point */

/* One point-to-point thread: ring exchanges (to rank+1, from rank-1; with
 * one rank, to itself), 1..4 messages in flight per iteration, distinct tags
 * per thread so several such threads share a communicator. Each iteration
 * picks (shared choice) the world or one of the dup'ed communicators, on
 * which a collective thread is running collectives at the same time: legal
 * (API.md: point-to-point may run concurrently from several threads on one
 * communicator; only collectives need one order), and the collectives'
 * own traffic must never match these receives, PLAIT_ANY_SOURCE ones
 * included. */
static void *p2p_thread(void *arg)
{
    tctx_t *c = arg;
    int me = g_rank, n = g_size, right = (me + 1) % n, left = (me + n - 1) % n;
    enum { MAXM = 4 };
    for (c->round = 0; c->round < g_iters; c->round++) {
        rng_t g = {HASH(D_P2P, (uint64_t)c->thread, (uint64_t)c->round)};
        int m = 1 + (int)rbelow(&g, MAXM), order = (int)rbelow(&g, 3), method = (int)rbelow(&g, 3);
        int ci = (int)rbelow(&g, (uint64_t)g_T + 1);
        plait_comm_t pc = ci == g_T ? g_world : g_dups[ci];
        plait_request_t sreq[MAXM], rreq[MAXM];
        plait_status_t rst[MAXM];
        unsigned char *sb[MAXM], *rb[MAXM];
        size_t cnt[MAXM], extra[MAXM], es[MAXM];
        plait_dtype_t dt[MAXM];
        int tag[MAXM], anysrc[MAXM];
        unsigned char P = (unsigned char)rnext(&g);
        char call[160];
        for (int j = 0; j < m; j++) {
            uint64_t r = rbelow(&g, 100), bytes;
            uint64_t big = (1u << 20) + 4096 + rbelow(&g, 2u << 20);   /* 1 MiB .. 3 MiB */
            uint64_t mid = 1024 + rbelow(&g, 64 * 1024), sml = 1 + rbelow(&g, 256);
            bytes = r < 5 ? 0 : r < 13 ? big : r < 40 ? mid : sml;
            dt[j] = rbelow(&g, 2) ? PLAIT_UINT8 : PLAIT_INT64;
            es[j] = plait_dtype_size(dt[j]);
            cnt[j] = (size_t)(bytes / es[j]);
            extra[j] = rbelow(&g, 3) == 0 ? (size_t)rbelow(&g, 9) : 0;   /* larger receive */
            tag[j] = 1 + (int)((uint64_t)c->thread * 1000000u + (uint64_t)c->round * 8u + (uint64_t)j);
            anysrc[j] = rbelow(&g, 4) == 0;
            sb[j] = galloc(cnt[j] * es[j], P);
            rb[j] = galloc((cnt[j] + extra[j]) * es[j], P);
            /* Element i of message j from rank src: a hash of (thread, it, j, src, i). */
            uint64_t base = HASH(D_P2PVAL, (uint64_t)c->thread, (uint64_t)c->round, (uint64_t)j,
                                 (uint64_t)me);
            for (size_t i = 0; i < cnt[j]; i++)
                put(dt[j], sb[j], i, (int64_t)mix64(base + i * GOLDEN));
            sreq[j] = rreq[j] = NULL;
        }
#define P2PCALL(fn, j) \
    snprintf(call, sizeof call, "%s(%s, msg %d: %zu x %s, tag %d, %s %d)", fn, \
             ci == g_T ? "world" : ci == 0 ? "dup 0" : ci == 1 ? "dup 1" : "dup >1", j, cnt[j], \
             dt_name(dt[j]), tag[j], !strcmp(fn, "plait_isend") || !strcmp(fn, "plait_send") ? "to" : "from", \
             !strcmp(fn, "plait_isend") || !strcmp(fn, "plait_send") ? right : anysrc[j] ? PLAIT_ANY_SOURCE : left)
        for (int pass = 0; pass < 2; pass++) {
            /* order 0: receives first; 1: sends first; 2: receives, then blocking sends */
            int recvs = (pass == 0) != (order == 1);
            for (int j = 0; j < m; j++) {
                int rc;
                if (recvs) {
                    rc = plait_irecv(rb[j], cnt[j] + extra[j], dt[j], anysrc[j] ? PLAIT_ANY_SOURCE : left,
                                     tag[j], pc, &rreq[j]);
                    if (rc != PLAIT_OK) { P2PCALL("plait_irecv", j); failf(c, call, rc, "post"); }
                    c->calls++;
                    c->big += cnt[j] * es[j] > (1u << 20);
                } else if (order == 2) {
                    rc = plait_send(sb[j], cnt[j], dt[j], right, tag[j], pc);
                    if (rc != PLAIT_OK) { P2PCALL("plait_send", j); failf(c, call, rc, "blocking send"); }
                } else {
                    rc = plait_isend(sb[j], cnt[j], dt[j], right, tag[j], pc, &sreq[j]);
                    if (rc != PLAIT_OK) { P2PCALL("plait_isend", j); failf(c, call, rc, "post"); }
                }
            }
            jitter(c, 200 + (uint64_t)pass);
        }
        /* Completion: waitall over everything, wait in a random order, or a test loop. */
        if (method == 0) {
            plait_request_t all[2 * MAXM];
            plait_status_t st[2 * MAXM];
            for (int j = 0; j < m; j++) {
                all[j] = rreq[j];
                all[m + j] = sreq[j];
            }
            int rc = plait_waitall(2 * m, all, st);
            if (rc != PLAIT_OK) { P2PCALL("plait_waitall", 0); failf(c, call, rc, "%d requests", 2 * m); }
            for (int j = 0; j < m; j++) {
                rst[j] = st[j];
                if (all[j] || all[m + j]) { P2PCALL("plait_waitall", j); failf(c, call, 0, "request not NULL"); }
                rreq[j] = sreq[j] = NULL;
            }
        } else {
            int done_all;
            do {
                done_all = 1;
                for (int jj = 0; jj < 2 * m; jj++) {
                    int j = (int)((jj + c->round) % (2 * m));   /* rotate the order */
                    plait_request_t *q = j < m ? &rreq[j] : &sreq[j - m];
                    int jm = j < m ? j : j - m;
                    plait_status_t st, *stp = j < m ? &rst[jm] : &st;
                    if (*q == NULL)
                        continue;
                    int rc, done = 1;
                    if (method == 1)
                        rc = plait_wait(q, stp);
                    else
                        rc = plait_test(q, &done, stp);
                    if (rc != PLAIT_OK) {
                        P2PCALL(j < m ? "plait_irecv" : "plait_isend", jm);
                        failf(c, call, rc, "%s", method == 1 ? "plait_wait" : "plait_test");
                    }
                    if (!done)
                        done_all = 0;
                }
                if (!done_all)
                    sched_yield();
            } while (!done_all);
        }
        /* Check every received message, its status and the bytes past it. */
        for (int j = 0; j < m; j++) {
            chk_t k;
            k.bad = 0;
            k.text[0] = 0;
            uint64_t base = HASH(D_P2PVAL, (uint64_t)c->thread, (uint64_t)c->round, (uint64_t)j,
                                 (uint64_t)left);
            for (size_t i = 0; i < cnt[j]; i++)
                chk_elem(&k, dt[j], rb[j], i, (int64_t)mix64(base + i * GOLDEN), "recv");
            chk_poison(&k, rb[j], (ptrdiff_t)(cnt[j] * es[j]),
                       (ptrdiff_t)((cnt[j] + extra[j]) * es[j]) + GUARD, P, "past the message");
            chk_poison(&k, rb[j], -GUARD, 0, P, "guard before recv buffer");
            uint64_t sbase = HASH(D_P2PVAL, (uint64_t)c->thread, (uint64_t)c->round, (uint64_t)j,
                                  (uint64_t)me);
            for (size_t i = 0; i < cnt[j]; i++)
                chk_elem(&k, dt[j], sb[j], i, (int64_t)mix64(sbase + i * GOLDEN), "send buffer changed");
            chk_guards(&k, sb[j], cnt[j] * es[j], P, "guard around send buffer");
            if (rst[j].source != left || rst[j].tag != tag[j] || rst[j].bytes != cnt[j] * es[j])
                chk_note(&k, " [status source %d tag %d bytes %zu, want %d %d %zu]", rst[j].source,
                         rst[j].tag, rst[j].bytes, left, tag[j], cnt[j] * es[j]);
            if (k.bad) {
                P2PCALL("plait_irecv", j);
                failf(c, call, 0, "%zu problem(s) (order %d, method %d):%s", k.bad, order, method, k.text);
            }
            gfree(sb[j]);
            gfree(rb[j]);
        }
#undef P2PCALL
    }
    return NULL;
}

/* ------------------------------------------------------------- churn */

/* Waits on a request started by another thread (API.md: one request object
 * is used by one thread at a time -- not necessarily the one that made it). */
typedef struct { plait_request_t *req; int rc; char err[512]; } handoff_t;
static void *handoff_wait(void *arg)
{
    handoff_t *h = arg;
    h->rc = plait_wait(h->req, NULL);
    snprintf(h->err, sizeof h->err, "%s", h->rc == PLAIT_OK ? "" : plait_last_error());
    return NULL;
}

/* Main thread (mode churn): C times make a communicator of the world (dup,
 * or every fourth time or so a split by rank parity, some ranks opting out
 * with PLAIT_UNDEFINED), barrier + allreduce on it (checked), free it --
 * sometimes with an iallreduce still in flight, waited on after the free,
 * sometimes by a short-lived thread of its own. */
static void churn(tctx_t *c)
{
    plait_comm_t w = g_world;
    for (c->round = 0; c->round < g_churn; c->round++) {
        rng_t g = {HASH(D_CHURN, (uint64_t)c->round)};
        int split = rbelow(&g, 4) == 0, late_free = rbelow(&g, 3) == 0, rc;
        int handoff = rbelow(&g, 2) == 0;
        size_t cnt = 1 + (size_t)rbelow(&g, 100);
        int undef_rank = (int)rbelow(&g, (uint64_t)g_size + 2);   /* >= size: nobody opts out */
        plait_comm_t nc = NULL;
        int color = PLAIT_UNDEFINED;
        if (split) {
            color = g_rank == undef_rank ? PLAIT_UNDEFINED : g_rank % 2;
            rc = plait_comm_split(w, color, -g_rank, &nc);   /* key -rank: reversed order */
            if (rc != PLAIT_OK)
                failf(c, "plait_comm_split", rc, "color %d", color);
            if (color == PLAIT_UNDEFINED) {
                if (nc != NULL)
                    failf(c, "plait_comm_split", 0, "color PLAIT_UNDEFINED gave a communicator");
                continue;
            }
        } else {
            rc = plait_comm_dup(w, &nc);
            if (rc != PLAIT_OK)
                failf(c, "plait_comm_dup", rc, "of the world");
        }
        /* The members and my expected rank. */
        int members[4096], nm = 0, myr = -1, sz = -1, rk = -1;
        for (int r = g_size - 1; r >= 0 && nm < 4096; r--)   /* key -rank: descending */
            if (!split || (r != undef_rank && r % 2 == color))
                members[nm++] = r;
        if (!split)   /* dup: same order as the world */
            for (int i = 0; i < nm; i++)
                members[i] = i;
        for (int i = 0; i < nm; i++)
            if (members[i] == g_rank)
                myr = i;
        if ((rc = plait_comm_size(nc, &sz)) != PLAIT_OK || (rc = plait_comm_rank(nc, &rk)) != PLAIT_OK)
            failf(c, "plait_comm_size/rank", rc, "new communicator");
        if (sz != nm || rk != myr)
            failf(c, split ? "plait_comm_split" : "plait_comm_dup", 0,
                  "size %d rank %d, want %d %d", sz, rk, nm, myr);
        if ((rc = plait_barrier(nc)) != PLAIT_OK)
            failf(c, "plait_barrier", rc, "on a fresh communicator");
        int64_t *in = malloc(cnt * 8), *out = malloc(cnt * 8);
        for (size_t e = 0; e < cnt; e++) {
            in[e] = (int64_t)(g_rank + 1) * (c->round + 1) + (int64_t)e;
            out[e] = -1;
        }
        plait_request_t req = NULL;
        if (late_free) {
            if ((rc = plait_iallreduce(in, out, cnt, PLAIT_INT64, PLAIT_SUM, nc, &req)) != PLAIT_OK)
                failf(c, "plait_iallreduce", rc, "on a fresh communicator");
        } else if ((rc = plait_allreduce(in, out, cnt, PLAIT_INT64, PLAIT_SUM, nc)) != PLAIT_OK) {
            failf(c, "plait_allreduce", rc, "on a fresh communicator");
        }
        if ((rc = plait_comm_free(&nc)) != PLAIT_OK)
            failf(c, "plait_comm_free", rc, "%s", late_free ? "with an iallreduce in flight" : "");
        if (nc != NULL)
            failf(c, "plait_comm_free", 0, "left *comm non-NULL");
        if (late_free && handoff) {
            handoff_t h = {&req, PLAIT_OK, ""};
            pthread_t ht;
            if (pthread_create(&ht, NULL, handoff_wait, &h) != 0)
                failf(c, "pthread_create", 0, "handoff thread");
            pthread_join(ht, NULL);
            if (h.rc != PLAIT_OK || req != NULL)
                failf(c, "plait_wait", 0, "in another thread, iallreduce started before plait_comm_free:"
                      " rc %d (%s) %s%s", h.rc, plait_strerror(h.rc), h.err,
                      req != NULL ? " (*req not NULL)" : "");
        } else if (late_free && (rc = plait_wait(&req, NULL)) != PLAIT_OK) {
            failf(c, "plait_wait", rc, "iallreduce started before plait_comm_free");
        }
        for (size_t e = 0; e < cnt; e++) {
            int64_t want = 0;
            for (int i = 0; i < nm; i++)
                want += (int64_t)(members[i] + 1) * (c->round + 1) + (int64_t)e;
            if (out[e] != want)
                failf(c, late_free ? "plait_iallreduce" : "plait_allreduce", 0,
                      "element %zu of %zu: got %" PRId64 " want %" PRId64 " (%s)", e, cnt, out[e], want,
                      split ? "split" : "dup");
        }
        free(in);
        free(out);
    }
}

/* -------------------------------------------------------------- main */

/* -F 1: plait_init / plait_finalize run in a helper thread (API.md: any
 * thread may call any function), the main thread waits for it. */
static void *call_lifecycle(void *arg)
{
    int *rc = arg;
    *rc = *rc ? plait_finalize() : plait_init();
    return NULL;
}
static int lifecycle(int finalize)
{
    int rc = finalize;
    pthread_t t;
    if (!g_foreign)
        return finalize ? plait_finalize() : plait_init();
    if (pthread_create(&t, NULL, call_lifecycle, &rc) != 0)
        return PLAIT_ERR_INTERNAL;
    pthread_join(t, NULL);
    return rc;
}

static int parse_int(const char *s, const char *opt)
{
    char *end;
    long v = strtol(s ? s : "", &end, 10);
    if (!s || *end || v < 0 || v > 1000000) {
        fprintf(stderr, "coll_threads: bad value for %s\n", opt);
        exit(2);
    }
    return (int)v;
}

int main(int argc, char **argv)
{
    static const struct { const char *flag; int *to; } opts[] = {
        {"-t", &g_T}, {"-r", &g_R}, {"-p", &g_P}, {"-i", &g_iters}, {"-c", &g_churn},
        {"-m", &g_maxops}, {"-L", &g_large}, {"-S", &g_subcomm}, {"-F", &g_foreign}};
    for (int i = 1; i < argc; i++) {
        size_t k = 0;
        while (k < sizeof opts / sizeof opts[0] && strcmp(argv[i], opts[k].flag))
            k++;
        if (!strcmp(argv[i], "plain") || !strcmp(argv[i], "churn"))
            g_mode = argv[i];
        else if (k < sizeof opts / sizeof opts[0] && i + 1 < argc)
            *opts[k].to = parse_int(argv[++i], opts[k].flag);
        else {
            fprintf(stderr, "usage: coll_threads [plain|churn] [-t T] [-r R] [-p P] [-i I] [-c C]"
                            " [-m M] [-L PCT] [-S 0|1] [-F 0|1]\n");
            return 2;
        }
    }
    if (g_maxops < 1 || g_maxops > MAX_OPS || g_large > 80 || g_P > 100) {
        fprintf(stderr, "coll_threads: -m 1..%d, -L 0..80, -p 0..100\n", MAX_OPS);
        return 2;
    }
    const char *es = getenv("PLAIT_TEST_SEED");
    if (es && !strcmp(es, "time"))
        g_seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
    else if (es && *es)
        g_seed = strtoull(es, NULL, 10);

    tctx_t mc = {"main", -1, -1, NULL, -1, 0, 0, 0, 0};
    int rc = lifecycle(0);
    if (rc != PLAIT_OK)
        failf(&mc, "plait_init", rc, "");
    g_world = plait_comm_world();
    if ((rc = plait_comm_rank(g_world, &g_rank)) != PLAIT_OK ||
        (rc = plait_comm_size(g_world, &g_size)) != PLAIT_OK)
        failf(&mc, "plait_comm_rank/size", rc, "world");
    mc.comm = g_world;
    mc.rank = g_rank;
    mc.size = g_size;
    /* Agree on rank 0's seed (the environment may differ between ranks). */
    if ((rc = plait_bcast(&g_seed, 1, PLAIT_UINT64, 0, g_world)) != PLAIT_OK)
        failf(&mc, "plait_bcast", rc, "the seed");
    if (g_rank == 0) {
        printf("coll_threads %s: %d ranks, %d dup threads%s x %d rounds, %d p2p threads x %d iterations%s,"
               " seed %llu (PLAIT_TEST_SEED=%llu to rerun)\n",
               g_mode, g_size, g_T, g_size >= 2 ? " + 1 split thread" : "", g_R, g_P, g_iters,
               !strcmp(g_mode, "churn") ? ", churn on the main thread" : "",
               (unsigned long long)g_seed, (unsigned long long)g_seed);
        fflush(stdout);
    }
    double t0 = now_s();

    /* The communicators, made by the main thread in the same order everywhere. */
    int nc = g_T + (g_size >= 2 ? 1 : 0);
    tctx_t *cc = calloc((size_t)nc + (size_t)g_P, sizeof *cc);
    for (int t = 0; t < nc; t++) {
        tctx_t *c = &cc[t];
        c->thread = t;
        c->round = -1;
        if (t < g_T) {
            c->who = "coll(dup)";
            if ((rc = plait_comm_dup(g_world, &c->comm)) != PLAIT_OK)
                failf(&mc, "plait_comm_dup", rc, "for thread %d", t);
        } else {
            c->who = "coll(split)";
            if ((rc = plait_comm_split(g_world, g_rank % 2, g_rank, &c->comm)) != PLAIT_OK)
                failf(&mc, "plait_comm_split", rc, "by parity");
        }
        if ((rc = plait_comm_rank(c->comm, &c->rank)) != PLAIT_OK ||
            (rc = plait_comm_size(c->comm, &c->size)) != PLAIT_OK)
            failf(&mc, "plait_comm_rank/size", rc, "thread %d's communicator", t);
        int want_size = t < g_T ? g_size : (g_size + 1 - g_rank % 2) / 2;
        int want_rank = t < g_T ? g_rank : g_rank / 2;
        if (c->size != want_size || c->rank != want_rank)
            failf(&mc, t < g_T ? "plait_comm_dup" : "plait_comm_split", 0,
                  "thread %d's communicator: size %d rank %d, want %d %d", t, c->size, c->rank,
                  want_size, want_rank);
    }
    for (int p = 0; p < g_P; p++) {
        tctx_t *c = &cc[nc + p];
        c->who = "p2p";
        c->thread = 1000 + p;   /* distinct from the collective threads' streams */
        c->round = -1;
        c->comm = g_world;
        c->rank = g_rank;
        c->size = g_size;
    }

    g_dups = calloc((size_t)g_T + 1, sizeof *g_dups);
    for (int t = 0; t < g_T; t++)
        g_dups[t] = cc[t].comm;
    pthread_t *th = calloc((size_t)nc + (size_t)g_P, sizeof *th);
    for (int t = 0; t < nc + g_P; t++)
        if (pthread_create(&th[t], NULL, t < nc ? coll_thread : p2p_thread, &cc[t]) != 0) {
            fprintf(stderr, "FAIL coll_threads: rank %d: pthread_create\n", g_rank);
            _exit(1);
        }
    if (!strcmp(g_mode, "churn"))
        churn(&mc);
    for (int t = 0; t < nc + g_P; t++)
        pthread_join(th[t], NULL);

    mc.round = -1;
    for (int t = 0; t < nc; t++) {
        if (cc[t].comm == NULL)   /* freed by its thread */
            continue;
        if ((rc = plait_comm_free(&cc[t].comm)) != PLAIT_OK)
            failf(&mc, "plait_comm_free", rc, "thread %d's communicator", t);
        if (cc[t].comm != NULL)
            failf(&mc, "plait_comm_free", 0, "left *comm non-NULL");
    }
    /* Everyone got here: a last allreduce over the world counts the ranks. */
    int one = 1, all = 0;
    if ((rc = plait_allreduce(&one, &all, 1, PLAIT_INT32, PLAIT_SUM, g_world)) != PLAIT_OK)
        failf(&mc, "plait_allreduce", rc, "final");
    if (all != g_size)
        failf(&mc, "plait_allreduce", 0, "final count %d, want %d", all, g_size);
    double dt = now_s() - t0;
    unsigned long calls = 0, nbcalls = 0, big = 0, msgs = 0, bigmsgs = 0;
    for (int t = 0; t < nc; t++) {
        calls += cc[t].calls;
        nbcalls += cc[t].nbcalls;
        big += cc[t].big;
    }
    for (int p = 0; p < g_P; p++) {
        msgs += cc[nc + p].calls;
        bigmsgs += cc[nc + p].big;
    }
    if (g_rank == 0)
        printf("coll_threads %s: rank 0 made %lu collective calls (%lu non-blocking, %lu of >= 64 KiB),"
               " %lu ring messages (%lu > 1 MiB)%s\n",
               g_mode, calls, nbcalls, big, msgs, bigmsgs,
               !strcmp(g_mode, "churn") ? ", churned communicators" : "");
    if ((rc = lifecycle(1)) != PLAIT_OK)
        failf(&mc, "plait_finalize", rc, "");
    if (g_rank == 0)
        printf("coll_threads %s: %d ranks, %d+%d collective threads x %d rounds, %d p2p threads,"
               " seed %llu, %.1f s: ok\n",
               g_mode, g_size, g_T, nc - g_T, g_R, g_P, (unsigned long long)g_seed, dt);
    free(th);
    free(cc);
    return 0;
}
