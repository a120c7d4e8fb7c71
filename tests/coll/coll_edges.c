/*
 * coll_edges.c -- edge cases of plait's collectives, written by an outside
 * QA reader against the public contract only (/work/shared/API.md and
 * include/plait.h); nothing of the library's internals is used.
 *
 * Sections (all run by default, in this order; name some on the command
 * line to run only those, e.g. `coll_edges a2av split`):
 *   dtypes    every numeric datatype x every valid op (AVG floats only) for
 *             allreduce / reduce / reduce_scatter, out of place and in place,
 *             blocking and non-blocking, counts 1, 3, 1023; exact expected
 *             results computed locally (integers wrap modulo 2^n, full-range
 *             values for every op including PROD; floats use small integers
 *             that every pairwise float32/half step keeps exact, PROD uses
 *             {1,2,-1}); FLOAT16/BFLOAT16 AVG of values whose sum overflows
 *             FLOAT16; subnormal inputs (no flush-to-zero), and the caller's
 *             own floating-point state left alone.
 *   counts    every collective with count 0 (NULL buffers, and poisoned
 *             buffers that must stay untouched), 1, 3, 1023, 65537 and a
 *             large odd count (4-8 MiB in total), blocking and non-blocking.
 *   roots     roots 0, middle and last; in-place forms of reduce, gather,
 *             scatter (at root), allreduce, allgather, reduce_scatter,
 *             alltoall; recvbuf NULL (or poisoned, must stay so) at non-roots.
 *   a2av      alltoallv with zero counts for some peers, counts that differ
 *             per pair, out-of-order displacements with poisoned gaps that
 *             must stay poisoned, one pair > 1 MiB now and then, all-zero
 *             counts with NULL buffers, only-self and ring patterns, and
 *             displacements beyond 2^31 / 2^32 elements and bytes (sparse
 *             mappings, so no real memory).
 *   bitwise   allreduce of random non-integer float data (every float type,
 *             SUM/AVG/PROD/MAX): close to the exact value, and a hash of the
 *             result compared across ranks (bitwise-identical promise); same
 *             for bcast and allgather.
 *   split     color PLAIT_UNDEFINED for some / all ranks (newcomm NULL), keys
 *             reversing the order, key ties, extreme colors and keys, size-1
 *             communicators, nested splits, dup of a split, small and large
 *             collectives on all of them, and traffic on different
 *             communicators that must not match (p2p and collectives).
 *   nb        20 non-blocking collectives in flight on one communicator,
 *             started in the same order everywhere and completed in a
 *             rank-dependent order (plait_test loops, plait_wait, plait_waitall
 *             with NULL entries), blocking collectives on another communicator
 *             in between; a blocking collective, a dup and a split of the same
 *             communicator behind in-flight ones; six collectives reading one
 *             send buffer at once; large ones on three communicators polled
 *             round-robin.
 *   errors    bad roots (-1, size), bad dtype (99, -1), bad op, BYTE with any
 *             op, AVG on integers, NULL comm, NULL req, NULL buffers with
 *             count > 0, alltoallv sendcounts[me] != recvcounts[me], bad split
 *             color: PLAIT_ERR_ARG on every rank (no hang), plait_last_error()
 *             naming the argument, buffers untouched, an in-flight collective
 *             unharmed, library usable.
 *   overflow  counts whose byte size overflows size_t: PLAIT_ERR_ARG.
 *   sizes     byte sizes around 256, 4K, 8K, 16K, 32K, 64K, 128K, 256K, 1M,
 *             2M (+-1) for every collective, blocking / non-blocking,
 *             aligned / misaligned buffers, some in place.
 *   churn     60 dup/split/free cycles, 40 communicators alive at once freed
 *             in a rank-dependent order, free with collectives in flight.
 *   skew      small blocking collectives on three communicators with random
 *             per-rank delays (ranks run ahead of each other).
 *   threads   four threads running collectives on four communicators at
 *             once plus one doing p2p on the world; a request started by one
 *             thread and completed by another.
 *   freed     a collective on a freed communicator: PLAIT_ERR_STATE.
 *   final     a last round of collectives on the world (library still usable).
 * Also checked around them: plait_initialized / plait_comm_world before init
 * and after finalize, a second plait_init (PLAIT_ERR_STATE), plait_version,
 * plait_strerror, and PLAIT_ERR_STATE for a collective after finalize.
 *
 * Only when named on the command line:
 *   timeout   (PLAIT_TIMEOUT=1..5) a non-blocking collective whose root joins
 *             late: plait_wait gives PLAIT_ERR_TIMEOUT with the request still
 *             posted, a second plait_wait completes it.
 *   mismatch  (PLAIT_TIMEOUT=1..5) counts that differ across ranks for every
 *             collective: an error (never a write outside the buffers, never
 *             a change to a send buffer), library usable; prints each rank's
 *             result code.
 *   huge      vectors over 2^31 bytes: bcast of 2^31+13 BYTEs, allreduce of
 *             2^31+5 UINT8 (several GiB per rank).
 *
 * Data are seeded random (seed printed; PLAIT_TEST_SEED overrides), every
 * output buffer is poisoned and guarded (bytes before/after must survive) and
 * every element is compared. A failure prints
 *   FAIL rank R case C seed S: ...
 * and the job exits 1; rank 0 prints "coll_edges: ... ok" when every rank
 * passed. An unexpected error code from a call that must succeed aborts the
 * job at once (plait_abort) after printing FAIL, so that a broken collective
 * cannot desynchronize the ranks into a cascade of timeouts.
 *
 * Build: gcc -O1 -g -Wall -Wextra -Iinclude tests/coll/coll_edges.c \
 *          -o tests/coll/coll_edges -L.libs -lplait -Wl,-rpath,$PWD/.libs -lm
 * Run:   PLAIT_TIMEOUT=60 launcher/plaitrun -n 4 --bind-to none tests/coll/coll_edges
 * Env:   PLAIT_TEST_SEED=N   reproduce a run
 *        PLAIT_EDGES_BIG=B   bytes of the "large" cases (default 8 MiB for
 *                            up to 4 ranks, 4 MiB above)
 */
#define _GNU_SOURCE             /* MAP_NORESERVE, MAP_ANONYMOUS */

#include <plait.h>

#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ globals */

static plait_comm_t g_world;
static int g_rank, g_size;
static uint64_t g_seed;
static _Thread_local char g_case[160] = "init";
static _Atomic long g_fails, g_checks;
static _Thread_local uint64_t g_ctr;    /* per-section counter for case seeds */
static size_t g_big;            /* bytes of the large cases */

#define POISON 0xA5
#define GUARD  256              /* guard bytes on each side of every buffer */

static void set_case(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_case, sizeof g_case, fmt, ap);
    va_end(ap);
}

/* Records a failure (the run goes on; exit status 1 at the end). */
static void fail(const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    g_fails++;
    if (g_fails > 60)
        return;                 /* enough output; still counted */
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printf("FAIL rank %d case %s seed %" PRIu64 ": %s\n", g_rank, g_case, g_seed, msg);
    fflush(stdout);
}

/* A call that must succeed did not: print and end the job (the ranks may
 * now disagree on what comes next, so going on would only produce timeouts). */
static void die_rc(const char *what, int rc, int line)
{
    printf("FAIL rank %d case %s seed %" PRIu64 ": %s returned %d (%s): \"%s\" [coll_edges.c:%d]\n",
           g_rank, g_case, g_seed, what, rc, plait_strerror(rc), plait_last_error(), line);
    fflush(stdout);
    plait_abort(1, "coll_edges: unexpected error");
}

#define CALL(expr)                                                            \
    do {                                                                      \
        int call_rc_ = (expr);                                                \
        if (call_rc_ != PLAIT_OK)                                             \
            die_rc(#expr, call_rc_, __LINE__);                                \
    } while (0)

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        printf("FAIL rank %d case %s seed %" PRIu64 ": out of memory (%zu bytes)\n",
               g_rank, g_case, g_seed, n);
        fflush(stdout);
        plait_abort(1, "coll_edges: out of memory");
    }
    return p;
}

/* ------------------------------------------------------------------- random */

static uint64_t sm64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Each section starts its case counter from a value derived from its name,
 * so that ranks which skipped work in an earlier section (e.g. not members
 * of a split) agree again. */
static void ctr_reset(const char *name)
{
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    g_ctr = h;
}

static uint64_t next_cs(void)
{
    g_ctr++;
    return sm64(g_seed ^ sm64(g_ctr));
}

/* A random permutation of 0..n-1 from seed s. */
static void make_perm(int *perm, int n, uint64_t s)
{
    for (int i = 0; i < n; i++)
        perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        s = sm64(s);
        int k = (int)(s % (uint64_t)(i + 1));
        int t = perm[i];
        perm[i] = perm[k];
        perm[k] = t;
    }
}

/* Fills nbytes at dst with the data of block (src -> blk) of case cs: any
 * rank can regenerate what any other rank sent. */
static void gen_fill(uint64_t cs, int src, int blk, void *dst, size_t nbytes)
{
    unsigned char *p = dst;
    uint64_t base = sm64(cs + sm64(((uint64_t)(unsigned)src << 32) ^ (uint64_t)(unsigned)blk));
    for (size_t k = 0; k < nbytes; k += 8) {
        uint64_t w = sm64(base ^ (k >> 3));
        size_t m = nbytes - k < 8 ? nbytes - k : 8;
        memcpy(p + k, &w, m);
    }
}

static uint64_t fnv1a(const void *buf, size_t n)
{
    const unsigned char *p = buf;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

/* ---------------------------------------------------------------- datatypes */

static const struct {
    plait_dtype_t dt;
    const char *name;
    size_t size;
    int isfloat, issigned;
} DT[11] = {
    { PLAIT_BYTE, "BYTE", 1, 0, 0 },         { PLAIT_INT8, "INT8", 1, 0, 1 },
    { PLAIT_UINT8, "UINT8", 1, 0, 0 },       { PLAIT_INT32, "INT32", 4, 0, 1 },
    { PLAIT_UINT32, "UINT32", 4, 0, 0 },     { PLAIT_INT64, "INT64", 8, 0, 1 },
    { PLAIT_UINT64, "UINT64", 8, 0, 0 },     { PLAIT_FLOAT16, "FLOAT16", 2, 1, 1 },
    { PLAIT_BFLOAT16, "BFLOAT16", 2, 1, 1 }, { PLAIT_FLOAT32, "FLOAT32", 4, 1, 1 },
    { PLAIT_FLOAT64, "FLOAT64", 8, 1, 1 },
};

static int dti(plait_dtype_t dt)
{
    for (int i = 0; i < 11; i++)
        if (DT[i].dt == dt)
            return i;
    return 0;
}
static const char *dtn(plait_dtype_t dt) { return DT[dti(dt)].name; }
static size_t esz(plait_dtype_t dt) { return DT[dti(dt)].size; }
static int isf(plait_dtype_t dt) { return DT[dti(dt)].isfloat; }
static int iss(plait_dtype_t dt) { return DT[dti(dt)].issigned; }

static const char *opn(plait_op_t op)
{
    static const char *n[] = { "SUM", "PROD", "MIN", "MAX", "AVG" };
    return (unsigned)op < 5 ? n[op] : "op?";
}

/* IEEE binary16 <-> float, round to nearest even. */
static uint16_t f2h(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
    if (exp == 0xff)
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 0x1f)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        if (e < -10)
            return (uint16_t)sign;
        man |= 0x800000u;
        int shift = 14 - e;
        uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
        h++;                    /* a carry into the exponent is right */
    return (uint16_t)(sign | h);
}

static float h2f(uint16_t h)
{
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    float f;
    if (e == 31) {
        uint32_t b = ((uint32_t)(h & 0x8000u) << 16) | 0x7f800000u | (m << 13);
        memcpy(&f, &b, 4);
        return f;
    }
    f = e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(m | 0x400u), (int)e - 25);
    return (h & 0x8000u) ? -f : f;
}

/* bfloat16 <-> float, round to nearest even. */
static uint16_t f2b(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static float b2f(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static void st_int(plait_dtype_t dt, void *b, size_t i, uint64_t v)
{
    unsigned char *p = (unsigned char *)b + i * esz(dt);
    switch (esz(dt)) {
    case 1: { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    default: memcpy(p, &v, 8); break;
    }
}

static double ld_flt(plait_dtype_t dt, const void *b, size_t i)
{
    const unsigned char *p = (const unsigned char *)b + i * esz(dt);
    switch (dt) {
    case PLAIT_FLOAT16: { uint16_t h; memcpy(&h, p, 2); return h2f(h); }
    case PLAIT_BFLOAT16: { uint16_t h; memcpy(&h, p, 2); return b2f(h); }
    case PLAIT_FLOAT32: { float f; memcpy(&f, p, 4); return f; }
    default: { double d; memcpy(&d, p, 8); return d; }
    }
}

static void st_flt(plait_dtype_t dt, void *b, size_t i, double v)
{
    unsigned char *p = (unsigned char *)b + i * esz(dt);
    switch (dt) {
    case PLAIT_FLOAT16: { uint16_t h = f2h((float)v); memcpy(p, &h, 2); break; }
    case PLAIT_BFLOAT16: { uint16_t h = f2b((float)v); memcpy(p, &h, 2); break; }
    case PLAIT_FLOAT32: { float f = (float)v; memcpy(p, &f, 4); break; }
    default: memcpy(p, &v, 8); break;
    }
}

/* v rounded to dt and back. */
static double rt_flt(plait_dtype_t dt, double v)
{
    unsigned char tmp[8];
    st_flt(dt, tmp, 0, v);
    return ld_flt(dt, tmp, 0);
}

/* ---------------------------------------------------------- reduction data */

enum { DATA_EXACT = 0, DATA_RANDOM = 1, DATA_HUGE = 2, DATA_SUBNORMAL = 3 };

/* v as an element of integer type dt: truncated to its width, then sign or
 * zero extended back to 64 bits (so MIN/MAX compare what is stored). */
static uint64_t norm_int(plait_dtype_t dt, uint64_t v)
{
    switch (dt) {
    case PLAIT_INT8: return (uint64_t)(int64_t)(int8_t)(uint8_t)v;
    case PLAIT_UINT8: return (uint8_t)v;
    case PLAIT_INT32: return (uint64_t)(int64_t)(int32_t)(uint32_t)v;
    case PLAIT_UINT32: return (uint32_t)v;
    default: return v;
    }
}

/* Rank r's input element gi of case cs. Integers: full-range random bits
 * (SUM/MIN/MAX wrap and compare over the whole range), PROD from {1,2,-1}.
 * Floats, DATA_EXACT: small integers in [-32,32] (every partial sum of up to
 * 8 ranks is exact even in bfloat16), MIN/MAX also eighths, PROD {1,2,-1}.
 * Floats, DATA_RANDOM: uniform non-integers in [-1,1) (PROD: 1 +- 1%);
 * integers, DATA_RANDOM: PROD too gets full-range values (wraps mod 2^n).
 * Floats, DATA_HUGE: values in [30000, 60000] (FLOAT16 AVG must not
 * overflow although the sum does: plait.h's pre-scaling promise).
 * Floats, DATA_SUBNORMAL: k times the type's smallest subnormal, |k| <= 15:
 * every sum over up to 8 ranks stays an exact subnormal (IEEE arithmetic;
 * a kernel that flushes denormals to zero gets them wrong). */
static void red_in(plait_dtype_t dt, plait_op_t op, int mode, uint64_t cs, int r, size_t gi,
                   uint64_t *iv, double *fv)
{
    static const int pv[3] = { 1, 2, -1 };
    uint64_t h = sm64(sm64(cs + (uint64_t)(unsigned)r * 0x632be59bd9b4e019ULL) ^ gi);
    double v;
    if (!isf(dt)) {
        *iv = norm_int(dt, op == PLAIT_PROD && mode != DATA_RANDOM ? (uint64_t)(int64_t)pv[h % 3]
                                                                     : h);
        return;
    }
    if (mode == DATA_SUBNORMAL) {
        double tiny = dt == PLAIT_FLOAT16 ? 0x1p-24 : dt == PLAIT_BFLOAT16 ? 0x1p-133
                    : dt == PLAIT_FLOAT32 ? 0x1p-149 : 0x1p-1074;
        v = (double)((int)(h % 31) - 15) * tiny;
        if (v == 0)
            v = tiny;           /* no zeros: keeps -0/+0 questions out */
    } else if (mode == DATA_HUGE) {
        v = 30000.0 + (double)(h % 30001);
    } else if (mode == DATA_RANDOM) {
        double u = (double)(h >> 11) * 0x1p-53;
        v = op == PLAIT_PROD ? 1.0 + (u - 0.5) * 0.02 : 2.0 * u - 1.0;
    } else if (op == PLAIT_PROD) {
        v = pv[h % 3];
    } else if (op == PLAIT_MIN || op == PLAIT_MAX) {
        v = (double)((int)(h % 65) - 32) + (double)((h >> 8) % 8) / 8.0;
    } else {
        v = (double)((int)(h % 65) - 32);
    }
    *fv = rt_flt(dt, v);
}

/* Expected element gi of op over n ranks, stored at dst (one element). */
static void red_exp(plait_dtype_t dt, plait_op_t op, int mode, uint64_t cs, int n, size_t gi,
                    void *dst)
{
    uint64_t iv = 0;
    double fv = 0;
    if (!isf(dt)) {
        uint64_t acc = 0;
        int sgn = iss(dt);
        for (int r = 0; r < n; r++) {
            red_in(dt, op, mode, cs, r, gi, &iv, &fv);
            if (r == 0) { acc = iv; continue; }
            switch (op) {
            case PLAIT_SUM: acc += iv; break;
            case PLAIT_PROD: acc *= iv; break;
            case PLAIT_MIN:
                if (sgn ? (int64_t)iv < (int64_t)acc : iv < acc) acc = iv;
                break;
            default:
                if (sgn ? (int64_t)iv > (int64_t)acc : iv > acc) acc = iv;
                break;
            }
        }
        st_int(dt, dst, 0, acc);
        return;
    }
    double acc = 0;
    for (int r = 0; r < n; r++) {
        red_in(dt, op, mode, cs, r, gi, &iv, &fv);
        if (r == 0) { acc = fv; continue; }
        switch (op) {
        case PLAIT_SUM: case PLAIT_AVG: acc += fv; break;
        case PLAIT_PROD: acc *= fv; break;
        case PLAIT_MIN: acc = fv < acc ? fv : acc; break;
        default: acc = fv > acc ? fv : acc; break;
        }
    }
    if (op == PLAIT_AVG)
        acc = dt == PLAIT_FLOAT64 ? acc / n : (double)((float)acc / (float)n);
    st_flt(dt, dst, 0, acc);
}

/* Allowed absolute error for an element with expected value e. Exact data
 * need none except AVG (division; FLOAT16 pre-scales each input by 1/size
 * per plait.h); random data get a bound on n pairwise roundings. */
static double tol_of(plait_dtype_t dt, plait_op_t op, int mode, int n, double e)
{
    double eps = dt == PLAIT_FLOAT64 ? 0x1p-52 : dt == PLAIT_FLOAT32 ? 0x1p-23
               : dt == PLAIT_FLOAT16 ? 0x1p-10 : 0x1p-7;
    if (op == PLAIT_MIN || op == PLAIT_MAX)
        return 0;
    if (mode == DATA_HUGE)      /* AVG only: a few ulps at the top of the range */
        return dt == PLAIT_FLOAT16 ? (n + 2.0) * eps * 65536.0 : 2 * eps * fabs(e);
    if (mode == DATA_EXACT) {
        if (dt == PLAIT_FLOAT16)
            return n * 32.0 * eps + 2 * eps * fabs(e);
        return 2 * eps * fabs(e);
    }
    if (op == PLAIT_PROD)
        return 4.0 * n * eps;
    return 2.0 * n * n * eps + 2 * eps * fabs(e);
}

/* ---------------------------------------------------------- guarded buffers */

typedef struct {
    unsigned char *base, *p;
    size_t n, lead;             /* lead: bytes before p (GUARD + misalignment) */
} gbuf_t;

/* n bytes at p, p = base + GUARD + off (off > 0: p misaligned for any
 * element wider than a byte), poison everywhere. */
static void gb_alloc_off(gbuf_t *g, size_t n, size_t off)
{
    g->n = n;
    g->lead = GUARD + off;
    g->base = xmalloc(n + g->lead + GUARD);
    memset(g->base, POISON, n + g->lead + GUARD);
    g->p = g->base + g->lead;
}

static void gb_alloc(gbuf_t *g, size_t n)
{
    gb_alloc_off(g, n, 0);
}

static int gb_guard_ok(const gbuf_t *g)
{
    for (size_t i = 0; i < g->lead; i++)
        if (g->base[i] != POISON)
            return 0;
    for (size_t i = 0; i < GUARD; i++)
        if (g->p[g->n + i] != POISON)
            return 0;
    return 1;
}

static void gb_free(gbuf_t *g)
{
    free(g->base);
    memset(g, 0, sizeof *g);
}

/* --------------------------------------------------------------------- jobs */

/* One collective call: its arguments, buffers and the expected image of its
 * receive buffer (poison where nothing may be written). */
typedef enum {
    K_BARRIER, K_BCAST, K_REDUCE, K_ALLREDUCE, K_ALLGATHER, K_RS, K_A2A, K_A2AV,
    K_GATHER, K_SCATTER, K_NKIND
} kind_t;

static const char *KN[K_NKIND] = { "barrier", "bcast", "reduce", "allreduce", "allgather",
                                   "reduce_scatter", "alltoall", "alltoallv", "gather",
                                   "scatter" };

/* alltoallv count patterns */
enum { AV_RANDOM, AV_UNIFORM, AV_ZERO, AV_SELF, AV_RING };

typedef struct {
    kind_t kind;
    plait_comm_t comm;
    const char *cname;
    int r, n;
    plait_dtype_t dt;
    plait_op_t op;
    int mode;                   /* DATA_EXACT / DATA_RANDOM for reductions */
    size_t count;
    int root, inplace;
    int nullbufs;               /* count 0: pass NULL for every buffer */
    int nr_buf;                 /* non-root passes a poisoned (unused) buffer instead of NULL */
    int av;                     /* alltoallv pattern */
    int mis;                    /* 1..7: buffers misaligned by that many bytes */
    size_t av_big;              /* alltoallv: elements of one big pair (0: none) */
    uint64_t cs;
    size_t es;
    gbuf_t sb, rb;
    void *sbp, *rbp;            /* the pointers passed */
    unsigned char *exp, *orig;  /* expected image of rb; copy of sb */
    size_t cmp_len;             /* bytes of rb compared */
    int tolmode;                /* compare floats with tolerance */
    size_t *cnt;                /* alltoallv: 4n: scnt, sdsp, rcnt, rdsp */
    plait_request_t req;
    int nb;
    char label[200];
} job_t;

static job_t mk(kind_t k, plait_comm_t c, const char *cname, plait_dtype_t dt, plait_op_t op,
                size_t count, int root, int inplace)
{
    job_t j;
    memset(&j, 0, sizeof j);
    j.kind = k;
    j.comm = c;
    j.cname = cname;
    CALL(plait_comm_rank(c, &j.r));
    CALL(plait_comm_size(c, &j.n));
    j.dt = dt;
    j.op = op;
    j.count = count;
    j.root = root;
    /* bcast has no in-place form; alltoallv's is not exercised here */
    j.inplace = k == K_BCAST || k == K_A2AV || k == K_BARRIER ? 0 : inplace;
    j.cs = next_cs();
    return j;
}

static void job_label(job_t *j)
{
    static const char *modes[4] = { "", " random-data", " huge-data", " subnormal-data" };
    int red = j->kind == K_REDUCE || j->kind == K_ALLREDUCE || j->kind == K_RS;
    char mis[24] = "";
    if (j->mis)
        snprintf(mis, sizeof mis, " misaligned+%d", j->mis);
    snprintf(j->label, sizeof j->label, "%s%s %s%s%s count=%zu root=%d%s%s%s%s comm=%s(size %d)",
             j->nb ? "i" : "", KN[j->kind], dtn(j->dt), red ? " " : "", red ? opn(j->op) : "",
             j->count, j->root, j->inplace ? " in-place" : "", j->nullbufs ? " NULL-bufs" : "",
             modes[j->mode], mis, j->cname, j->n);
}

static void rb_alloc(job_t *j, size_t bytes)
{
    gb_alloc_off(&j->rb, bytes, (size_t)(j->mis * 3 % 8));
    j->exp = xmalloc(bytes);
    memset(j->exp, POISON, bytes);
    j->cmp_len = bytes;
}

static void sb_alloc(job_t *j, size_t bytes)
{
    gb_alloc_off(&j->sb, bytes, (size_t)j->mis);
}

static void save_orig(job_t *j)
{
    j->orig = xmalloc(j->sb.n);
    memcpy(j->orig, j->sb.p, j->sb.n);
}

/* Inputs gi0.. of this rank into buf. */
static void fill_red_in(const job_t *j, void *buf, size_t gi0, size_t cnt)
{
    uint64_t iv = 0;
    double fv = 0;
    for (size_t i = 0; i < cnt; i++) {
        red_in(j->dt, j->op, j->mode, j->cs, j->r, gi0 + i, &iv, &fv);
        if (isf(j->dt))
            st_flt(j->dt, buf, i, fv);
        else
            st_int(j->dt, buf, i, iv);
    }
}

static void fill_red_exp(job_t *j, void *buf, size_t gi0, size_t cnt)
{
    for (size_t i = 0; i < cnt; i++)
        red_exp(j->dt, j->op, j->mode, j->cs, j->n, gi0 + i, (unsigned char *)buf + i * j->es);
    j->tolmode = isf(j->dt) && (j->op == PLAIT_AVG || j->mode == DATA_RANDOM ||
                                j->mode == DATA_HUGE);
}

/* alltoallv: elements rank i sends to rank k. */
static size_t av_count(const job_t *j, int i, int k)
{
    uint64_t h = sm64(j->cs ^ sm64(((uint64_t)(unsigned)i << 20) ^ (uint64_t)(unsigned)k ^ (0xa2aULL << 40)));
    switch (j->av) {
    case AV_UNIFORM: return j->count;
    case AV_ZERO: return 0;
    case AV_SELF: return i == k ? j->count : 0;
    case AV_RING: return k == (i + 1) % j->n ? j->count + (size_t)i : 0;
    default: break;
    }
    if (j->av_big) {
        int bi = (int)(sm64(j->cs ^ 0xb16) % (uint64_t)j->n);
        int bk = (int)(sm64(j->cs ^ 0xb17) % (uint64_t)j->n);
        if (i == bi && k == bk)
            return j->av_big;
    }
    if (h % 4 == 0)
        return 0;               /* a quarter of the pairs exchange nothing */
    return 1 + (size_t)((h >> 8) % (j->count ? j->count : 1));
}

/* Lays out blocks cnt[0..n-1] in a random order with random gaps (0..4
 * elements) before each and after the last; zero-count blocks get a
 * displacement at 0 or one past the end (never dereferenced). Returns the
 * buffer length in elements. Uniform pattern: contiguous in rank order. */
static size_t av_layout(const job_t *j, const size_t *cnt, size_t *dsp, uint64_t s)
{
    int n = j->n, *perm = xmalloc(sizeof(int) * (size_t)n);
    size_t off = 0;
    if (j->av == AV_UNIFORM) {
        for (int p = 0; p < n; p++) {
            dsp[p] = off;
            off += cnt[p];
        }
        free(perm);
        return off;
    }
    make_perm(perm, n, s);
    for (int k = 0; k < n; k++) {
        int p = perm[k];
        s = sm64(s);
        off += (size_t)(s % 5);
        dsp[p] = off;
        off += cnt[p];
    }
    s = sm64(s);
    off += (size_t)(s % 5);
    for (int p = 0; p < n; p++)
        if (cnt[p] == 0)
            dsp[p] = (s >> 8) & 1 ? off : 0;
    free(perm);
    return off;
}

static void job_prep(job_t *j)
{
    const size_t es = esz(j->dt), c = j->count;
    const int n = j->n, r = j->r, root = j->root;
    j->es = es;
    j->req = NULL;
    switch (j->kind) {
    case K_BARRIER:
        break;
    case K_BCAST:
        rb_alloc(j, c * es);
        gen_fill(j->cs, root, 0, j->exp, c * es);
        if (r == root)
            memcpy(j->rb.p, j->exp, c * es);
        j->rbp = j->rb.p;
        break;
    case K_ALLREDUCE:
        rb_alloc(j, c * es);
        fill_red_exp(j, j->exp, 0, c);
        if (j->inplace) {
            fill_red_in(j, j->rb.p, 0, c);
            j->sbp = j->rbp = j->rb.p;
        } else {
            sb_alloc(j, c * es);
            fill_red_in(j, j->sb.p, 0, c);
            save_orig(j);
            j->sbp = j->sb.p;
            j->rbp = j->rb.p;
        }
        break;
    case K_REDUCE:
        if (r == root) {
            rb_alloc(j, c * es);
            fill_red_exp(j, j->exp, 0, c);
            if (j->inplace) {
                fill_red_in(j, j->rb.p, 0, c);
                j->sbp = j->rbp = j->rb.p;
                break;
            }
            j->rbp = j->rb.p;
        } else if (j->nr_buf) {
            rb_alloc(j, c * es);    /* "used at root only": must stay poisoned */
            j->rbp = j->rb.p;
        }
        sb_alloc(j, c * es);
        fill_red_in(j, j->sb.p, 0, c);
        save_orig(j);
        j->sbp = j->sb.p;
        break;
    case K_ALLGATHER:
        rb_alloc(j, (size_t)n * c * es);
        for (int i = 0; i < n; i++)
            gen_fill(j->cs, i, 0, j->exp + (size_t)i * c * es, c * es);
        if (j->inplace) {
            memcpy(j->rb.p + (size_t)r * c * es, j->exp + (size_t)r * c * es, c * es);
            j->sbp = j->rbp = j->rb.p;
        } else {
            sb_alloc(j, c * es);
            gen_fill(j->cs, r, 0, j->sb.p, c * es);
            save_orig(j);
            j->sbp = j->sb.p;
            j->rbp = j->rb.p;
        }
        break;
    case K_RS: {
        size_t tot = (size_t)n * c;
        if (j->inplace) {
            rb_alloc(j, tot * es);
            fill_red_in(j, j->rb.p, 0, tot);
            fill_red_exp(j, j->exp, (size_t)r * c, c);
            j->cmp_len = c * es;    /* the rest is not promised */
            j->sbp = j->rbp = j->rb.p;
        } else {
            sb_alloc(j, tot * es);
            fill_red_in(j, j->sb.p, 0, tot);
            save_orig(j);
            rb_alloc(j, c * es);
            fill_red_exp(j, j->exp, (size_t)r * c, c);
            j->sbp = j->sb.p;
            j->rbp = j->rb.p;
        }
        break;
    }
    case K_A2A: {
        size_t bl = c * es;
        rb_alloc(j, (size_t)n * bl);
        for (int i = 0; i < n; i++)
            gen_fill(j->cs, i, r, j->exp + (size_t)i * bl, bl);
        unsigned char *src;
        if (j->inplace) {
            src = j->rb.p;
            j->sbp = j->rbp = j->rb.p;
        } else {
            sb_alloc(j, (size_t)n * bl);
            src = j->sb.p;
            j->sbp = j->sb.p;
            j->rbp = j->rb.p;
        }
        for (int k = 0; k < n; k++)
            gen_fill(j->cs, r, k, src + (size_t)k * bl, bl);
        if (!j->inplace)
            save_orig(j);
        break;
    }
    case K_GATHER: {
        size_t bl = c * es;
        if (r == root) {
            rb_alloc(j, (size_t)n * bl);
            for (int i = 0; i < n; i++)
                gen_fill(j->cs, i, 0, j->exp + (size_t)i * bl, bl);
            j->rbp = j->rb.p;
            if (j->inplace) {
                memcpy(j->rb.p + (size_t)root * bl, j->exp + (size_t)root * bl, bl);
                j->sbp = j->rb.p;
                break;
            }
        } else if (j->nr_buf) {
            rb_alloc(j, (size_t)n * bl);
            j->rbp = j->rb.p;
        }
        sb_alloc(j, bl);
        gen_fill(j->cs, r, 0, j->sb.p, bl);
        save_orig(j);
        j->sbp = j->sb.p;
        break;
    }
    case K_SCATTER: {
        size_t bl = c * es;
        if (r == root) {
            if (j->inplace) {
                rb_alloc(j, (size_t)n * bl);
                for (int i = 0; i < n; i++)
                    gen_fill(j->cs, root, i, j->rb.p + (size_t)i * bl, bl);
                memcpy(j->exp, j->rb.p, (size_t)n * bl);   /* all of it unchanged */
                j->sbp = j->rbp = j->rb.p;
                break;
            }
            sb_alloc(j, (size_t)n * bl);
            for (int i = 0; i < n; i++)
                gen_fill(j->cs, root, i, j->sb.p + (size_t)i * bl, bl);
            save_orig(j);
            j->sbp = j->sb.p;
        } else if (j->nr_buf) {
            sb_alloc(j, (size_t)n * bl);  /* "used at root only" */
            save_orig(j);
            j->sbp = j->sb.p;
        }
        rb_alloc(j, bl);
        gen_fill(j->cs, root, r, j->exp, bl);
        j->rbp = j->rb.p;
        break;
    }
    case K_A2AV: {
        size_t *scnt, *sdsp, *rcnt, *rdsp, sn, rn;
        j->cnt = xmalloc(4 * sizeof(size_t) * (size_t)n);
        scnt = j->cnt;
        sdsp = scnt + n;
        rcnt = sdsp + n;
        rdsp = rcnt + n;
        for (int p = 0; p < n; p++) {
            scnt[p] = av_count(j, r, p);
            rcnt[p] = av_count(j, p, r);
        }
        sn = av_layout(j, scnt, sdsp, sm64(j->cs ^ ((uint64_t)(unsigned)r << 8) ^ 'S'));
        rn = av_layout(j, rcnt, rdsp, sm64(j->cs ^ ((uint64_t)(unsigned)r << 8) ^ 'R'));
        sb_alloc(j, sn * es);
        for (int p = 0; p < n; p++)
            gen_fill(j->cs, r, p, j->sb.p + sdsp[p] * es, scnt[p] * es);
        save_orig(j);
        rb_alloc(j, rn * es);
        for (int p = 0; p < n; p++)
            gen_fill(j->cs, p, r, j->exp + rdsp[p] * es, rcnt[p] * es);
        j->sbp = j->sb.p;
        j->rbp = j->rb.p;
        break;
    }
    default:
        break;
    }
    if (j->nullbufs)
        j->sbp = j->rbp = NULL;
    job_label(j);
}

static int job_start(job_t *j)
{
    plait_request_t *q = &j->req;
    const size_t c = j->count;
    size_t *a = j->cnt;
    const int n = j->n;
    switch (j->kind) {
    case K_BARRIER:
        return j->nb ? plait_ibarrier(j->comm, q) : plait_barrier(j->comm);
    case K_BCAST:
        return j->nb ? plait_ibcast(j->rbp, c, j->dt, j->root, j->comm, q)
                     : plait_bcast(j->rbp, c, j->dt, j->root, j->comm);
    case K_REDUCE:
        return j->nb ? plait_ireduce(j->sbp, j->rbp, c, j->dt, j->op, j->root, j->comm, q)
                     : plait_reduce(j->sbp, j->rbp, c, j->dt, j->op, j->root, j->comm);
    case K_ALLREDUCE:
        return j->nb ? plait_iallreduce(j->sbp, j->rbp, c, j->dt, j->op, j->comm, q)
                     : plait_allreduce(j->sbp, j->rbp, c, j->dt, j->op, j->comm);
    case K_ALLGATHER:
        return j->nb ? plait_iallgather(j->sbp, j->rbp, c, j->dt, j->comm, q)
                     : plait_allgather(j->sbp, j->rbp, c, j->dt, j->comm);
    case K_RS:
        return j->nb ? plait_ireduce_scatter(j->sbp, j->rbp, c, j->dt, j->op, j->comm, q)
                     : plait_reduce_scatter(j->sbp, j->rbp, c, j->dt, j->op, j->comm);
    case K_A2A:
        return j->nb ? plait_ialltoall(j->sbp, j->rbp, c, j->dt, j->comm, q)
                     : plait_alltoall(j->sbp, j->rbp, c, j->dt, j->comm);
    case K_A2AV: {
        /* pass copies of the arrays and scribble over them after the call:
         * "The arrays are read before the call returns". */
        size_t *cp = xmalloc(4 * sizeof(size_t) * (size_t)n);
        int rc;
        memcpy(cp, a, 4 * sizeof(size_t) * (size_t)n);
        rc = j->nb ? plait_ialltoallv(j->sbp, cp, cp + n, j->rbp, cp + 2 * n, cp + 3 * n, j->dt,
                                      j->comm, q)
                   : plait_alltoallv(j->sbp, cp, cp + n, j->rbp, cp + 2 * n, cp + 3 * n, j->dt,
                                     j->comm);
        memset(cp, 0xff, 4 * sizeof(size_t) * (size_t)n);
        free(cp);
        return rc;
    }
    case K_GATHER:
        return j->nb ? plait_igather(j->sbp, j->rbp, c, j->dt, j->root, j->comm, q)
                     : plait_gather(j->sbp, j->rbp, c, j->dt, j->root, j->comm);
    case K_SCATTER:
        return j->nb ? plait_iscatter(j->sbp, j->rbp, c, j->dt, j->root, j->comm, q)
                     : plait_scatter(j->sbp, j->rbp, c, j->dt, j->root, j->comm);
    default:
        return PLAIT_ERR_INTERNAL;
    }
}

/* Compares nbytes of got with the expected image; tol: elementwise floats. */
static void cmp_image(const job_t *j, const char *what, const unsigned char *got,
                      const unsigned char *exp, size_t nbytes, int tol)
{
    g_checks++;
    if (!tol) {
        if (memcmp(got, exp, nbytes) == 0)
            return;
        size_t first = 0, ndiff = 0;
        for (size_t k = nbytes; k-- > 0;)
            if (got[k] != exp[k]) {
                first = k;
                ndiff++;
            }
        size_t es = j->es ? j->es : 1, e = first / es;
        char gs[40] = "", xs[40] = "";
        for (size_t b = 0; b < es && e * es + b < nbytes; b++) {
            snprintf(gs + 2 * b, 3, "%02x", got[e * es + b]);
            snprintf(xs + 2 * b, 3, "%02x", exp[e * es + b]);
        }
        fail("%s: %s differs at byte %zu of %zu (element %zu: got %s want %s%s); %zu bytes differ",
             j->label, what, first, nbytes, e, gs, xs,
             memcmp(exp + e * es, (const unsigned char[8]){ POISON, POISON, POISON, POISON,
                                                             POISON, POISON, POISON, POISON },
                    es < 8 ? es : 8) == 0 ? " = poison, must stay untouched" : "",
             ndiff);
        return;
    }
    size_t ne = nbytes / j->es, bad = 0, first = 0;
    double fg = 0, fe = 0, ft = 0;
    for (size_t i = 0; i < ne; i++) {
        double g = ld_flt(j->dt, got, i), e = ld_flt(j->dt, exp, i);
        double t = tol_of(j->dt, j->op, j->mode, j->n, e);
        if (!(fabs(g - e) <= t)) {
            if (!bad++) {
                first = i;
                fg = g;
                fe = e;
                ft = t;
            }
        }
    }
    if (bad)
        fail("%s: %s element %zu of %zu = %.17g, want %.17g (tolerance %.3g); %zu elements off",
             j->label, what, first, ne, fg, fe, ft, bad);
}

static void job_check(job_t *j)
{
    if (j->rb.base) {
        if (!gb_guard_ok(&j->rb))
            fail("%s: bytes outside recvbuf were written (guard changed)", j->label);
        cmp_image(j, "recvbuf", j->rb.p, j->exp, j->cmp_len, j->tolmode);
    }
    if (j->sb.base) {
        if (!gb_guard_ok(&j->sb))
            fail("%s: bytes outside sendbuf were written (guard changed)", j->label);
        if (j->orig)
            cmp_image(j, "sendbuf (input, must be unchanged)", j->sb.p, j->orig, j->sb.n, 0);
    }
}

static void job_free(job_t *j)
{
    gb_free(&j->sb);
    gb_free(&j->rb);
    free(j->exp);
    free(j->orig);
    free(j->cnt);
    j->exp = j->orig = NULL;
    j->cnt = NULL;
}

static void job_die(job_t *j, const char *what, int rc)
{
    char buf[400];
    snprintf(buf, sizeof buf, "%s: %s", j->label, what);
    die_rc(buf, rc, __LINE__);
}

/* Prepares, runs (blocking, or non-blocking + plait_wait), checks, frees. */
static void run_job(job_t *j, int nb)
{
    int rc;
    j->nb = nb;
    job_prep(j);
    rc = job_start(j);
    if (rc != PLAIT_OK)
        job_die(j, "start", rc);
    if (nb) {
        plait_status_t st;
        rc = plait_wait(&j->req, &st);
        if (rc != PLAIT_OK)
            job_die(j, "plait_wait", rc);
        if (j->req != NULL)
            fail("%s: plait_wait returned OK but left *req non-NULL", j->label);
    }
    job_check(j);
    job_free(j);
}

/* Every rank of comm must hold the same bytes: allgather of a hash. */
static void hash_cmp(const job_t *j, const void *buf, size_t n, const char *what)
{
    uint64_t h = fnv1a(buf, n);
    uint64_t *all = xmalloc(sizeof(uint64_t) * (size_t)j->n);
    CALL(plait_allgather(&h, all, 1, PLAIT_UINT64, j->comm));
    g_checks++;
    for (int i = 0; i < j->n; i++)
        if (all[i] != h) {
            fail("%s: %s not bitwise identical across ranks: rank %d hash %016" PRIx64
                 ", mine (rank %d) %016" PRIx64, j->label, what, i, all[i], j->r, h);
            break;
        }
    free(all);
}

static int roots_of(int n, int *roots)
{
    int k = 0;
    int cand[3] = { 0, n / 2, n - 1 };
    for (int i = 0; i < 3; i++) {
        int dup = 0;
        for (int m = 0; m < k; m++)
            dup |= roots[m] == cand[i];
        if (!dup)
            roots[k++] = cand[i];
    }
    return k;
}

static const plait_dtype_t NUMERIC[10] = {
    PLAIT_INT8, PLAIT_UINT8, PLAIT_INT32, PLAIT_UINT32, PLAIT_INT64, PLAIT_UINT64,
    PLAIT_FLOAT16, PLAIT_BFLOAT16, PLAIT_FLOAT32, PLAIT_FLOAT64
};

/* ----------------------------------------------------------------- sections */

static void dtypes_huge(void);

/* dtypes: every numeric datatype x valid op, allreduce / reduce /
 * reduce_scatter, out of place and in place, counts 1, 3, 1023. */
static void sec_dtypes(void)
{
    static const size_t counts[3] = { 1, 3, 1023 };
    int roots[3], nroots = roots_of(g_size, roots), combo = 0;
    for (int d = 0; d < 10; d++) {
        plait_dtype_t dt = NUMERIC[d];
        for (int o = 0; o < 5; o++) {
            plait_op_t op = (plait_op_t)o;
            if (op == PLAIT_AVG && !isf(dt))
                continue;       /* errors section: must be PLAIT_ERR_ARG */
            for (int ci = 0; ci < 3; ci++, combo++) {
                size_t c = counts[ci];
                int root = roots[combo % nroots];
                job_t j;
                set_case("dtypes/%s/%s/count=%zu", dtn(dt), opn(op), c);
                for (int ip = 0; ip < 2; ip++) {
                    j = mk(K_ALLREDUCE, g_world, "world", dt, op, c, 0, ip);
                    run_job(&j, 0);
                    j = mk(K_REDUCE, g_world, "world", dt, op, c, root, ip);
                    j.nr_buf = combo & 1;
                    run_job(&j, 0);
                    j = mk(K_RS, g_world, "world", dt, op, c, 0, ip);
                    run_job(&j, 0);
                }
                /* one non-blocking of each, rotating */
                kind_t nk[3] = { K_ALLREDUCE, K_REDUCE, K_RS };
                j = mk(nk[combo % 3], g_world, "world", dt, op, c, root, combo / 3 % 2);
                run_job(&j, 1);
                if (!isf(dt)) {
                    /* full-range integers for every op, PROD too (wraps) */
                    j = mk(nk[(combo + 1) % 3], g_world, "world", dt, op, c, root, ci & 1);
                    j.mode = DATA_RANDOM;
                    run_job(&j, combo & 1);
                }
            }
        }
    }
    dtypes_huge();
}

/* counts: every collective with counts 0 (NULL and poisoned buffers), 1, 3,
 * 1023, 65537 and a large odd count. */
/* FLOAT16/BFLOAT16 AVG of values whose sum overflows FLOAT16 (plait.h:
 * FLOAT16 AVG pre-scales each input by 1/size so that it does not). */
static void dtypes_huge(void)
{
    static const kind_t hk[3] = { K_ALLREDUCE, K_REDUCE, K_RS };
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 3; k++)
            for (int ip = 0; ip < 2; ip++) {
                plait_dtype_t dt = d ? PLAIT_BFLOAT16 : PLAIT_FLOAT16;
                set_case("dtypes/%s/AVG/huge/%s", dtn(dt), KN[hk[k]]);
                job_t j = mk(hk[k], g_world, "world", dt, PLAIT_AVG, 257, g_size - 1, ip);
                j.mode = DATA_HUGE;
                run_job(&j, ip);
            }
    /* subnormal inputs: SUM, MIN, MAX exact */
    static const plait_dtype_t fdt[4] = { PLAIT_FLOAT16, PLAIT_BFLOAT16, PLAIT_FLOAT32,
                                          PLAIT_FLOAT64 };
    static const plait_op_t sop[3] = { PLAIT_SUM, PLAIT_MIN, PLAIT_MAX };
    for (int d = 0; d < 4; d++)
        for (int o = 0; o < 3; o++)
            for (int k = 0; k < 3; k++) {
                set_case("dtypes/%s/%s/subnormal/%s", dtn(fdt[d]), opn(sop[o]), KN[hk[k]]);
                job_t j = mk(hk[k], g_world, "world", fdt[d], sop[o], k == 0 ? 40001 : 1031,
                             g_size / 2, o == 1);
                j.mode = DATA_SUBNORMAL;
                run_job(&j, k == 2);
            }
    /* the library must not have switched this thread to flush-to-zero */
    {
        volatile float a = 0x1p-126f, b = 0.25f;
        volatile double c = 0x1p-1022, e = 0.25;
        g_checks++;
        if (a * b == 0.0f || c * e == 0.0)
            fail("after plait calls this thread flushes subnormals to zero "
                 "(FTZ/DAZ left set in the caller's floating-point state)");
    }
}

static void sec_counts(void)
{
    static const plait_dtype_t rot[11] = { PLAIT_INT32, PLAIT_UINT8, PLAIT_FLOAT64,
                                           PLAIT_BFLOAT16, PLAIT_INT64, PLAIT_FLOAT16,
                                           PLAIT_UINT32, PLAIT_INT8, PLAIT_FLOAT32,
                                           PLAIT_UINT64, PLAIT_BYTE };
    static const plait_op_t ops[5] = { PLAIT_SUM, PLAIT_MAX, PLAIT_MIN, PLAIT_PROD, PLAIT_AVG };
    enum { NC = 7 };
    int n = g_size, step = 0;
    for (int ci = 0; ci < NC; ci++) {
        for (int k = 0; k < K_NKIND; k++, step++) {
            kind_t kind = (kind_t)k;
            int red = kind == K_REDUCE || kind == K_ALLREDUCE || kind == K_RS;
            plait_dtype_t dt = rot[step % 11];
            if (red && dt == PLAIT_BYTE)
                dt = PLAIT_INT32;
            plait_op_t op = ops[step % 5];
            if (op == PLAIT_AVG && !isf(dt))
                op = PLAIT_SUM;
            size_t es = esz(dt), c;
            switch (ci) {
            case 0: case 1: c = 0; break;
            case 2: c = 1; break;
            case 3: c = 3; break;
            case 4: c = 1023; break;
            case 5: c = 65537; break;
            default:            /* large, odd */
                if (kind == K_BCAST || kind == K_ALLREDUCE || kind == K_REDUCE)
                    c = (g_big / es) | 1;
                else
                    c = (g_big / (es * (size_t)n)) | 1;
                if (kind == K_REDUCE || kind == K_RS) {
                    /* keep the local expected-value work modest */
                    c = (c / 2) | 1;
                }
                break;
            }
            if (kind == K_BARRIER && ci > 0)
                continue;
            int root = (step * 7) % n;
            for (int nb = 0; nb < 2; nb++) {
                /* non-blocking for the small counts and 65537 only */
                if (nb && ci == 6)
                    continue;
                set_case("counts/%s/count=%zu%s%s", KN[kind], c, ci == 0 ? "/NULL" : "",
                         nb ? "/nb" : "");
                job_t j = mk(kind, g_world, "world", dt, op, c, root, 0);
                j.nullbufs = ci == 0;
                j.av = AV_UNIFORM;
                j.nr_buf = ci == 1;
                run_job(&j, nb);
            }
        }
    }
}

/* roots and in-place forms. */
static void sec_roots(void)
{
    int roots[3], nroots = roots_of(g_size, roots);
    static const size_t counts[2] = { 1, 777 };
    int t = 0;
    for (int ri = 0; ri < nroots; ri++) {
        int root = roots[ri];
        for (int ci = 0; ci < 2; ci++) {
            size_t c = counts[ci];
            for (int nb = 0; nb < 2; nb++) {
                for (int ip = 0; ip < 2; ip++, t++) {
                    static const kind_t rk[4] = { K_BCAST, K_REDUCE, K_GATHER, K_SCATTER };
                    static const plait_dtype_t rdt[4] = { PLAIT_FLOAT32, PLAIT_INT64, PLAIT_UINT8,
                                                          PLAIT_BFLOAT16 };
                    for (int k = 0; k < 4; k++) {
                        if (rk[k] == K_BCAST && ip)
                            continue;
                        set_case("roots/%s/root=%d/count=%zu%s%s", KN[rk[k]], root, c,
                                 ip ? "/in-place" : "", nb ? "/nb" : "");
                        job_t j = mk(rk[k], g_world, "world", rdt[(k + t) % 4],
                                     (plait_op_t)(t % 4), c, root, ip);
                        j.nr_buf = (t / 2) & 1;
                        run_job(&j, nb);
                    }
                }
            }
        }
    }
    /* in place for the rootless collectives */
    static const kind_t ik[4] = { K_ALLREDUCE, K_ALLGATHER, K_RS, K_A2A };
    static const size_t ic[4] = { 1, 3, 1023, 65537 };
    for (int k = 0; k < 4; k++)
        for (int ci = 0; ci < 4; ci++)
            for (int nb = 0; nb < 2; nb++) {
                plait_dtype_t dt = NUMERIC[(k * 4 + ci + nb) % 10];
                set_case("in-place/%s/count=%zu%s", KN[ik[k]], ic[ci], nb ? "/nb" : "");
                job_t j = mk(ik[k], g_world, "world", dt,
                             isf(dt) ? PLAIT_AVG : (plait_op_t)(ci % 4), ic[ci], 0, 1);
                run_job(&j, nb);
            }
}

static void a2av_far(plait_dtype_t dt, size_t base_elems);

/* alltoallv edge cases. */
static void sec_a2av(void)
{
    static const plait_dtype_t dts[6] = { PLAIT_INT8, PLAIT_FLOAT64, PLAIT_BFLOAT16,
                                          PLAIT_UINT32, PLAIT_BYTE, PLAIT_INT64 };
    static const size_t scale[4] = { 1, 7, 300, 5000 };
    for (int it = 0; it < 12; it++) {
        plait_dtype_t dt = dts[it % 6];
        int nb = it & 1;
        set_case("a2av/random/it=%d%s", it, nb ? "/nb" : "");
        job_t j = mk(K_A2AV, g_world, "world", dt, PLAIT_SUM, scale[it % 4], 0, 0);
        j.av = AV_RANDOM;
        if (it == 3 || it == 8)     /* one pair > 1 MiB */
            j.av_big = ((size_t)1 << 20) / esz(dt) + 13;
        run_job(&j, nb);
    }
    for (int nb = 0; nb < 2; nb++) {
        job_t j;
        set_case("a2av/all-zero-NULL%s", nb ? "/nb" : "");
        j = mk(K_A2AV, g_world, "world", PLAIT_INT32, PLAIT_SUM, 0, 0, 0);
        j.av = AV_ZERO;
        j.nullbufs = 1;
        run_job(&j, nb);
        set_case("a2av/all-zero-poisoned%s", nb ? "/nb" : "");
        j = mk(K_A2AV, g_world, "world", PLAIT_FLOAT32, PLAIT_SUM, 0, 0, 0);
        j.av = AV_ZERO;
        run_job(&j, nb);
        set_case("a2av/self-only%s", nb ? "/nb" : "");
        j = mk(K_A2AV, g_world, "world", PLAIT_UINT64, PLAIT_SUM, 33, 0, 0);
        j.av = AV_SELF;
        run_job(&j, nb);
        set_case("a2av/ring%s", nb ? "/nb" : "");
        j = mk(K_A2AV, g_world, "world", PLAIT_FLOAT16, PLAIT_SUM, 1000, 0, 0);
        j.av = AV_RING;
        run_job(&j, nb);
    }
    a2av_far(PLAIT_BYTE, ((size_t)1 << 32) + 3);        /* > 2^32 elements and bytes */
    a2av_far(PLAIT_INT64, ((size_t)1 << 29) + 1);       /* elements < 2^32, bytes > 2^32 */
    a2av_far(PLAIT_INT32, ((size_t)1 << 31) + 5);       /* elements > 2^31 (signed int) */
}

/* alltoallv with displacements beyond 2^32 elements / bytes (size_t
 * displacements must not be truncated to 32 bits anywhere). The buffers are
 * sparse anonymous mappings: only the pages holding blocks are touched. */
static void a2av_far(plait_dtype_t dt, size_t base_elems)
{
    const int n = g_size, r = g_rank;
    const size_t es = esz(dt), blk = 100, stride = 8192; /* elements */
    size_t span = (base_elems + (size_t)n * stride + blk) * es;
    size_t *a = xmalloc(4 * sizeof(size_t) * (size_t)n);
    unsigned char *S = mmap(NULL, span, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    unsigned char *R = mmap(NULL, span, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    int ok = S != MAP_FAILED && R != MAP_FAILED;
    int all = 0;
    /* every rank must agree to run it */
    CALL(plait_allreduce(&ok, &all, 1, PLAIT_INT32, PLAIT_MIN, g_world));
    set_case("a2av/displacements>2^32/%s", dtn(dt));
    if (all) {
        uint64_t cs = next_cs();
        unsigned char *want = xmalloc(blk * es);
        for (int p = 0; p < n; p++) {
            a[p] = blk;                                           /* sendcounts */
            /* slots are permutations of the peers: reversed, rotated */
            a[n + p] = base_elems + (size_t)((2 * n - 1 - p + r) % n) * stride;  /* sdispls */
            a[2 * n + p] = blk;                                   /* recvcounts */
            a[3 * n + p] = base_elems + (size_t)((p + r + 1) % n) * stride + 7;
            gen_fill(cs, r, p, S + a[n + p] * es, blk * es);
            memset(R + a[3 * n + p] * es - 16, POISON, blk * es + 32);
        }
        CALL(plait_alltoallv(S, a, a + n, R, a + 2 * n, a + 3 * n, dt, g_world));
        for (int p = 0; p < n; p++) {
            unsigned char *b = R + a[3 * n + p] * es;
            gen_fill(cs, p, r, want, blk * es);
            g_checks++;
            if (memcmp(b, want, blk * es) != 0)
                fail("alltoallv block from rank %d at rdispls %zu (byte offset %zu) is wrong", p,
                     a[3 * n + p], a[3 * n + p] * es);
            for (int g = 1; g <= 16; g++)
                if (b[-g] != POISON || b[blk * es + (size_t)g - 1] != POISON) {
                    fail("alltoallv wrote next to the block from rank %d", p);
                    break;
                }
        }
        free(want);
    } else if (g_rank == 0) {
        printf("coll_edges: a2av/displacements>2^32 skipped (no sparse mapping)\n");
    }
    if (S != MAP_FAILED)
        munmap(S, span);
    if (R != MAP_FAILED)
        munmap(R, span);
    free(a);
}

/* bitwise-identical results with random non-integer float data. */
static void sec_bitwise(void)
{
    static const plait_dtype_t fdt[4] = { PLAIT_FLOAT16, PLAIT_BFLOAT16, PLAIT_FLOAT32,
                                          PLAIT_FLOAT64 };
    static const plait_op_t fop[4] = { PLAIT_SUM, PLAIT_AVG, PLAIT_PROD, PLAIT_MAX };
    static const size_t fc[3] = { 1, 1023, 65537 };
    int t = 0;
    for (int d = 0; d < 4; d++)
        for (int o = 0; o < 4; o++)
            for (int ci = 0; ci < 4; ci++, t++) {
                size_t c = ci < 3 ? fc[ci] : (g_big / 4 / esz(fdt[d])) | 1;
                if (ci == 3 && fop[o] != PLAIT_SUM && fop[o] != PLAIT_AVG)
                    continue;
                int nb = t % 3 == 1, ip = t % 4 == 2;
                set_case("bitwise/allreduce/%s/%s/count=%zu%s%s", dtn(fdt[d]), opn(fop[o]), c,
                         ip ? "/in-place" : "", nb ? "/nb" : "");
                job_t j = mk(K_ALLREDUCE, g_world, "world", fdt[d], fop[o], c, 0, ip);
                j.mode = DATA_RANDOM;
                j.nb = nb;
                job_prep(&j);
                int rc = job_start(&j);
                if (rc != PLAIT_OK)
                    job_die(&j, "start", rc);
                if (nb && (rc = plait_wait(&j.req, NULL)) != PLAIT_OK)
                    job_die(&j, "plait_wait", rc);
                job_check(&j);
                hash_cmp(&j, j.rb.p, j.rb.n, "allreduce result");
                job_free(&j);
            }
    /* bcast / allgather of raw bytes that include NaN patterns */
    for (int d = 0; d < 4; d++) {
        set_case("bitwise/bcast+allgather/%s", dtn(fdt[d]));
        job_t j = mk(K_BCAST, g_world, "world", fdt[d], PLAIT_SUM, 65537, g_size - 1, 0);
        job_prep(&j);
        CALL(job_start(&j));
        job_check(&j);
        hash_cmp(&j, j.rb.p, j.rb.n, "bcast result");
        job_free(&j);
        j = mk(K_ALLGATHER, g_world, "world", fdt[d], PLAIT_SUM, 1023 + (size_t)d, 0, d & 1);
        job_prep(&j);
        CALL(job_start(&j));
        job_check(&j);
        hash_cmp(&j, j.rb.p, j.rb.n, "allgather result");
        job_free(&j);
    }
}

/* A small suite of every collective on comm (all its ranks call it). */
static void suite(plait_comm_t c, const char *cname)
{
    int n, r;
    CALL(plait_comm_size(c, &n));
    CALL(plait_comm_rank(c, &r));
    job_t j;
    j = mk(K_BARRIER, c, cname, PLAIT_BYTE, PLAIT_SUM, 0, 0, 0);
    run_job(&j, 0);
    j = mk(K_BCAST, c, cname, PLAIT_INT32, PLAIT_SUM, 5, n - 1, 0);
    run_job(&j, 0);
    j = mk(K_ALLREDUCE, c, cname, PLAIT_INT64, PLAIT_SUM, 7, 0, 0);
    run_job(&j, 0);
    j = mk(K_ALLREDUCE, c, cname, PLAIT_FLOAT32, PLAIT_AVG, 300, 0, 1);
    run_job(&j, 1);
    j = mk(K_REDUCE, c, cname, PLAIT_UINT8, PLAIT_MAX, 9, n / 2, 1);
    run_job(&j, 0);
    j = mk(K_ALLGATHER, c, cname, PLAIT_FLOAT16, PLAIT_SUM, 11, 0, 1);
    run_job(&j, 0);
    j = mk(K_RS, c, cname, PLAIT_FLOAT64, PLAIT_PROD, 13, 0, 0);
    run_job(&j, 1);
    j = mk(K_A2A, c, cname, PLAIT_UINT32, PLAIT_SUM, 17, 0, r & 1);
    run_job(&j, 0);
    j = mk(K_A2A, c, cname, PLAIT_UINT32, PLAIT_SUM, 17, 0, 1);
    run_job(&j, 0);
    j = mk(K_A2AV, c, cname, PLAIT_BFLOAT16, PLAIT_SUM, 20, 0, 0);
    j.av = AV_RANDOM;
    run_job(&j, 0);
    j = mk(K_GATHER, c, cname, PLAIT_INT8, PLAIT_SUM, 19, 0, 0);
    run_job(&j, 1);
    j = mk(K_SCATTER, c, cname, PLAIT_UINT64, PLAIT_SUM, 23, n - 1, 1);
    run_job(&j, 0);
}

/* The members of the split in sec_split, in new-rank order. */
static int split_members(int color, int *mem)
{
    int m = 0;
    for (int q = g_size - 1; q >= 0; q--) {   /* key g_size - q: descending q */
        int undef = g_size > 1 && q == g_size - 1;
        if (!undef && q % 2 == color)
            mem[m++] = q;
    }
    return m;
}

static void sec_split(void)
{
    static int dummy;
    plait_comm_t s = (plait_comm_t)(void *)&dummy;  /* must be overwritten */
    int undef = g_size > 1 && g_rank == g_size - 1;
    int color = undef ? PLAIT_UNDEFINED : g_rank % 2;
    int *mem = xmalloc(sizeof(int) * (size_t)g_size);

    set_case("split/undefined+reverse-keys");
    CALL(plait_comm_split(g_world, color, g_size - g_rank, &s));
    g_checks++;
    if (undef) {
        if (s != NULL)
            fail("color PLAIT_UNDEFINED: *newcomm = %p, want NULL", (void *)s);
        s = NULL;
    } else if (s == NULL || s == (plait_comm_t)(void *)&dummy) {
        die_rc("plait_comm_split gave no communicator", PLAIT_ERR_INTERNAL, __LINE__);
    }
    plait_comm_t inner = NULL, dup = NULL;
    if (s) {
        int m = split_members(color, mem), sr, ssz, want = -1;
        for (int i = 0; i < m; i++)
            if (mem[i] == g_rank)
                want = i;
        CALL(plait_comm_rank(s, &sr));
        CALL(plait_comm_size(s, &ssz));
        if (ssz != m || sr != want)
            fail("split: rank %d size %d, want rank %d size %d (keys reverse the order)",
                 sr, ssz, want, m);
        /* allgather of world ranks: descending order */
        int *got = xmalloc(sizeof(int) * (size_t)(ssz > 0 ? ssz : 1));
        CALL(plait_allgather(&g_rank, got, 1, PLAIT_INT32, s));
        for (int i = 0; i < ssz && i < m; i++)
            if (got[i] != mem[i]) {
                fail("split: allgather of world ranks: block %d = %d, want %d", i, got[i], mem[i]);
                break;
            }
        free(got);
        suite(s, "split");
        /* large messages on the reordered communicator */
        {
            static const kind_t bk[6] = { K_ALLREDUCE, K_BCAST, K_ALLGATHER, K_A2A, K_RS, K_REDUCE };
            for (int k = 0; k < 6; k++) {
                set_case("split/large/%s", KN[bk[k]]);
                size_t c = bk[k] == K_ALLREDUCE || bk[k] == K_BCAST || bk[k] == K_REDUCE
                               ? (size_t)300001 : (size_t)150001 / (size_t)ssz;
                job_t j = mk(bk[k], s, "split", k & 1 ? PLAIT_FLOAT32 : PLAIT_INT32,
                             PLAIT_SUM, c, ssz - 1, k == 2);
                run_job(&j, k == 3);
            }
        }

        /* nested split (pairs of the split, keys reversed again), dup of it */
        set_case("split/nested+dup");
        CALL(plait_comm_split(s, sr / 2, -sr, &inner));
        int ir, isz, wsz = (sr / 2) * 2 + 2 <= ssz ? 2 : 1;
        CALL(plait_comm_rank(inner, &ir));
        CALL(plait_comm_size(inner, &isz));
        int wir = wsz == 2 ? 1 - sr % 2 : 0;
        if (isz != wsz || ir != wir)
            fail("nested split: rank %d size %d, want rank %d size %d", ir, isz, wir, wsz);
        CALL(plait_comm_dup(inner, &dup));
        suite(dup, "dup(nested split)");
        suite(inner, "nested split");
    }
    /* every rank again: resynchronize the case counter */
    ctr_reset("split-2");

    /* key ties (broken by old rank) and extreme colors and keys */
    for (int v = 0; v < 2; v++) {
        int col = v ? (g_rank % 2 ? INT_MAX : 0) : 5;
        int key = v ? (g_rank % 3 == 0 ? INT_MIN : INT_MAX - g_rank) : (g_size - 1 - g_rank) / 2;
        plait_comm_t t = NULL;
        set_case("split/%s", v ? "extreme-color-key" : "key-ties");
        CALL(plait_comm_split(g_world, col, key, &t));
        /* expected order: members sorted by (key, world rank) */
        int m = 0, *ord = mem;
        long long *kk = xmalloc(sizeof(long long) * (size_t)g_size);
        for (int q = 0; q < g_size; q++) {
            int qc = v ? (q % 2 ? INT_MAX : 0) : 5;
            int qk = v ? (q % 3 == 0 ? INT_MIN : INT_MAX - q) : (g_size - 1 - q) / 2;
            if (qc != col)
                continue;
            int pos = m++;
            while (pos > 0 && ((long long)kk[pos - 1] > qk ||
                               (kk[pos - 1] == qk && ord[pos - 1] > q))) {
                kk[pos] = kk[pos - 1];
                ord[pos] = ord[pos - 1];
                pos--;
            }
            kk[pos] = qk;
            ord[pos] = q;
        }
        free(kk);
        int tr, tn;
        CALL(plait_comm_rank(t, &tr));
        CALL(plait_comm_size(t, &tn));
        int *got = xmalloc(sizeof(int) * (size_t)tn);
        CALL(plait_allgather(&g_rank, got, 1, PLAIT_INT32, t));
        g_checks++;
        if (tn != m)
            fail("split size %d, want %d", tn, m);
        else
            for (int i = 0; i < m; i++)
                if (got[i] != ord[i] || (ord[i] == g_rank && tr != i)) {
                    fail("split order: new rank %d is world rank %d, want %d (my new rank %d)",
                         i, got[i], ord[i], tr);
                    break;
                }
        free(got);
        CALL(plait_comm_free(&t));
    }
    ctr_reset("split-2b");

    /* every rank PLAIT_UNDEFINED: NULL everywhere */
    set_case("split/all-undefined");
    {
        plait_comm_t u = (plait_comm_t)(void *)&dummy;
        CALL(plait_comm_split(g_world, PLAIT_UNDEFINED, g_rank, &u));
        g_checks++;
        if (u != NULL)
            fail("every color PLAIT_UNDEFINED: *newcomm = %p, want NULL", (void *)u);
    }

    /* size-1 communicators */
    set_case("split/size-1");
    plait_comm_t one = NULL;
    CALL(plait_comm_split(g_world, g_rank, 0, &one));
    {
        int r1, n1;
        CALL(plait_comm_rank(one, &r1));
        CALL(plait_comm_size(one, &n1));
        if (r1 != 0 || n1 != 1)
            fail("split by rank: rank %d size %d, want 0 and 1", r1, n1);
        suite(one, "self");
        job_t j = mk(K_A2AV, one, "self", PLAIT_INT32, PLAIT_SUM, 0, 0, 0);
        j.av = AV_ZERO;
        j.nullbufs = 1;
        run_job(&j, 1);
    }
    ctr_reset("split-3");

    /* traffic on different communicators must not match */
    set_case("split/no-cross-matching");
    plait_comm_t d = NULL;
    CALL(plait_comm_dup(g_world, &d));
    if (g_size >= 2 && g_rank < 2) {
        int a = 1111, b = 2222, ra = 0, rb = 0;
        if (g_rank == 0) {
            plait_request_t q[2];
            CALL(plait_isend(&a, 1, PLAIT_INT32, 1, 7, g_world, &q[0]));
            CALL(plait_isend(&b, 1, PLAIT_INT32, 1, 7, d, &q[1]));
            CALL(plait_waitall(2, q, NULL));
        } else {
            plait_request_t q;
            plait_status_t st;
            CALL(plait_irecv(&rb, 1, PLAIT_INT32, PLAIT_ANY_SOURCE, PLAIT_ANY_TAG, d, &q));
            CALL(plait_recv(&ra, 1, PLAIT_INT32, PLAIT_ANY_SOURCE, PLAIT_ANY_TAG, g_world, &st));
            CALL(plait_wait(&q, NULL));
            g_checks++;
            if (ra != a || rb != b)
                fail("p2p: world got %d (want %d), dup got %d (want %d): traffic crossed communicators",
                     ra, a, rb, b);
        }
    }
    /* simultaneous collectives on world and its dup, completed dup first */
    {
        job_t jw = mk(K_BCAST, g_world, "world", PLAIT_INT32, PLAIT_SUM, 64, 0, 0);
        job_t jd = mk(K_BCAST, d, "dup(world)", PLAIT_INT32, PLAIT_SUM, 64, g_size - 1, 0);
        job_t jw2 = mk(K_ALLREDUCE, g_world, "world", PLAIT_INT32, PLAIT_SUM, 32, 0, 0);
        job_t jd2 = mk(K_ALLREDUCE, d, "dup(world)", PLAIT_INT32, PLAIT_MAX, 32, 0, 0);
        job_t *js[4] = { &jw, &jd, &jw2, &jd2 };
        for (int i = 0; i < 4; i++) {
            js[i]->nb = 1;
            job_prep(js[i]);
            CALL(job_start(js[i]));
        }
        for (int i = 3; i >= 0; i--) {
            int rc = plait_wait(&js[(i + g_rank) % 4]->req, NULL);
            if (rc != PLAIT_OK)
                job_die(js[(i + g_rank) % 4], "plait_wait", rc);
        }
        for (int i = 0; i < 4; i++) {
            job_check(js[i]);
            job_free(js[i]);
        }
    }
    /* two splits with identical membership: independent */
    {
        plait_comm_t a = NULL, b = NULL;
        CALL(plait_comm_split(g_world, 0, g_rank, &a));
        CALL(plait_comm_split(g_world, 0, g_rank, &b));
        job_t ja = mk(K_ALLGATHER, a, "split A", PLAIT_INT64, PLAIT_SUM, 5, 0, 0);
        job_t jb = mk(K_ALLGATHER, b, "split B", PLAIT_INT64, PLAIT_SUM, 5, 0, 0);
        ja.nb = jb.nb = 1;
        job_prep(&ja);
        job_prep(&jb);
        CALL(job_start(&ja));
        CALL(job_start(&jb));
        CALL(plait_wait(&jb.req, NULL));
        CALL(plait_wait(&ja.req, NULL));
        job_check(&ja);
        job_check(&jb);
        job_free(&ja);
        job_free(&jb);
        CALL(plait_comm_free(&a));
        CALL(plait_comm_free(&b));
    }

    /* free everything; *comm must become NULL */
    set_case("split/free");
    plait_comm_t *all[5] = { &s, &inner, &dup, &one, &d };
    for (int i = 0; i < 5; i++)
        if (*all[i]) {
            CALL(plait_comm_free(all[i]));
            g_checks++;
            if (*all[i] != NULL)
                fail("plait_comm_free left *comm = %p, want NULL", (void *)*all[i]);
        }
    free(mem);
}

/* One send buffer read by six non-blocking collectives at once: a library
 * that used a send buffer as scratch space, even restoring it later, would
 * corrupt the others (send buffers are const). */
static int32_t sh_val(int r, size_t i)
{
    return (int32_t)(uint32_t)sm64(g_seed ^ ((uint64_t)(unsigned)r << 40) ^ i);
}

static void nb_shared_sendbuf(plait_comm_t c, size_t cnt)
{
    const int n = g_size, r = g_rank, root = n - 1;
    const size_t nc = (size_t)n * cnt;
    int32_t *sb = xmalloc(sizeof(int32_t) * nc);
    int32_t *ar = xmalloc(sizeof(int32_t) * cnt), *ag = xmalloc(sizeof(int32_t) * nc);
    int32_t *aa = xmalloc(sizeof(int32_t) * nc), *rs = xmalloc(sizeof(int32_t) * cnt);
    int32_t *ga = xmalloc(sizeof(int32_t) * nc), *rd = xmalloc(sizeof(int32_t) * cnt);
    plait_request_t q[6];
    set_case("nb/shared-sendbuf/count=%zu", cnt);
    for (size_t i = 0; i < nc; i++)
        sb[i] = sh_val(r, i);
    CALL(plait_iallreduce(sb, ar, cnt, PLAIT_INT32, PLAIT_SUM, c, &q[0]));
    CALL(plait_iallgather(sb, ag, cnt, PLAIT_INT32, c, &q[1]));
    CALL(plait_ialltoall(sb, aa, cnt, PLAIT_INT32, c, &q[2]));
    CALL(plait_ireduce_scatter(sb, rs, cnt, PLAIT_INT32, PLAIT_SUM, c, &q[3]));
    CALL(plait_igather(sb, r == 0 ? ga : NULL, cnt, PLAIT_INT32, 0, c, &q[4]));
    CALL(plait_ireduce(sb, r == root ? rd : NULL, cnt, PLAIT_INT32, PLAIT_MAX, root, c, &q[5]));
    CALL(plait_waitall(6, q, NULL));
    size_t bad[7] = { 0 };
    for (size_t i = 0; i < nc; i++)
        bad[6] += sb[i] != sh_val(r, i);
    for (size_t k = 0; k < cnt; k++) {
        uint32_t sum = 0, rsum = 0;
        int32_t mx = INT32_MIN;
        for (int p = 0; p < n; p++) {
            sum += (uint32_t)sh_val(p, k);
            rsum += (uint32_t)sh_val(p, (size_t)r * cnt + k);
            mx = sh_val(p, k) > mx ? sh_val(p, k) : mx;
            bad[1] += ag[(size_t)p * cnt + k] != sh_val(p, k);
            bad[2] += aa[(size_t)p * cnt + k] != sh_val(p, (size_t)r * cnt + k);
            if (r == 0)
                bad[4] += ga[(size_t)p * cnt + k] != sh_val(p, k);
        }
        bad[0] += ar[k] != (int32_t)sum;
        bad[3] += rs[k] != (int32_t)rsum;
        if (r == root)
            bad[5] += rd[k] != mx;
    }
    static const char *what[7] = { "iallreduce", "iallgather", "ialltoall", "ireduce_scatter",
                                   "igather", "ireduce", "the shared send buffer itself" };
    for (int k = 0; k < 7; k++) {
        g_checks++;
        if (bad[k])
            fail("%s: %zu elements wrong (six collectives reading one send buffer)", what[k],
                 bad[k]);
    }
    free(sb); free(ar); free(ag); free(aa); free(rs); free(ga); free(rd);
}

/* Many non-blocking collectives in flight, completed in rank-dependent order. */
static void sec_nb(void)
{
    enum { NJ = 20 };
    static const kind_t kinds[10] = { K_BARRIER, K_BCAST, K_REDUCE, K_ALLREDUCE, K_ALLGATHER,
                                      K_RS, K_A2A, K_A2AV, K_GATHER, K_SCATTER };
    static const plait_dtype_t dts[7] = { PLAIT_INT32, PLAIT_FLOAT32, PLAIT_UINT8, PLAIT_FLOAT64,
                                          PLAIT_BFLOAT16, PLAIT_INT64, PLAIT_FLOAT16 };
    static const size_t cnts[6] = { 1, 17, 1000, 4097, 0, 33000 };
    plait_comm_t c = NULL;
    job_t *jobs = xmalloc(sizeof(job_t) * NJ);
    plait_request_t reqs[NJ];
    int perm[NJ];

    CALL(plait_comm_dup(g_world, &c));
    set_case("nb/20-in-flight");
    for (int k = 0; k < NJ; k++) {
        plait_dtype_t dt = dts[k % 7];
        plait_op_t op = (plait_op_t)(k % 5);
        if (op == PLAIT_AVG && !isf(dt))
            op = PLAIT_MIN;
        jobs[k] = mk(kinds[k % 10], c, "dup(world)", dt, op, cnts[k % 6], k % g_size, k / 10);
        jobs[k].nb = 1;
        jobs[k].av = AV_RANDOM;
        job_prep(&jobs[k]);
        int rc = job_start(&jobs[k]);
        if (rc != PLAIT_OK)
            job_die(&jobs[k], "start", rc);
        reqs[k] = jobs[k].req;
        if (k == 6 || k == 13) {    /* blocking collectives on another communicator */
            job_t w = mk(K_ALLREDUCE, g_world, "world", PLAIT_INT32, PLAIT_SUM, 100, 0, 0);
            run_job(&w, 0);
            w = mk(K_A2AV, g_world, "world", PLAIT_UINT8, PLAIT_SUM, 50, 0, 0);
            w.av = AV_RANDOM;
            run_job(&w, 0);
        }
    }
    make_perm(perm, NJ, sm64(g_seed ^ (uint64_t)(g_rank + 1) * 0x9d));
    double t0 = plait_wtime();
    /* first third: plait_test loops */
    for (int i = 0; i < NJ / 3; i++) {
        int k = perm[i], done = 0, rc;
        while (!done) {
            rc = plait_test(&reqs[k], &done, NULL);
            if (rc != PLAIT_OK)
                job_die(&jobs[k], "plait_test", rc);
            if (!done && plait_wtime() - t0 > 120)
                job_die(&jobs[k], "plait_test never completed (120 s)", PLAIT_ERR_TIMEOUT);
        }
        if (reqs[k] != NULL)
            fail("%s: plait_test done=1 but *req non-NULL", jobs[k].label);
        /* a NULL *req counts as complete */
        rc = plait_test(&reqs[k], &done, NULL);
        if (rc != PLAIT_OK || !done)
            fail("plait_test on a NULL *req: rc %d done %d, want OK and 1", rc, done);
    }
    /* second third: plait_wait */
    for (int i = NJ / 3; i < 2 * NJ / 3; i++) {
        int k = perm[i];
        int rc = plait_wait(&reqs[k], NULL);
        if (rc != PLAIT_OK)
            job_die(&jobs[k], "plait_wait", rc);
    }
    /* rest: plait_waitall over all of them (NULL entries for completed ones) */
    {
        plait_status_t st[NJ];
        int rc = plait_waitall(NJ, reqs, st);
        if (rc != PLAIT_OK)
            die_rc("plait_waitall with NULL entries", rc, __LINE__);
        for (int k = 0; k < NJ; k++)
            if (reqs[k] != NULL)
                fail("plait_waitall left reqs[%d] non-NULL", k);
    }
    /* plait_wait on a NULL *req: OK at once, status ANY_SOURCE/ANY_TAG/0 */
    {
        plait_request_t q = NULL;
        plait_status_t st = { 123, 456, 789 };
        int rc = plait_wait(&q, &st);
        g_checks++;
        if (rc != PLAIT_OK || st.source != PLAIT_ANY_SOURCE || st.tag != PLAIT_ANY_TAG || st.bytes)
            fail("plait_wait(NULL *req): rc %d status {%d,%d,%zu}, want OK {%d,%d,0}", rc,
                 st.source, st.tag, st.bytes, PLAIT_ANY_SOURCE, PLAIT_ANY_TAG);
    }
    for (int k = 0; k < NJ; k++) {
        job_check(&jobs[k]);
        job_free(&jobs[k]);
    }

    /* a blocking collective on the same communicator while several
     * non-blocking ones are in flight on it (started after them everywhere) */
    set_case("nb/blocking-behind-nb");
    for (int k = 0; k < 6; k++) {
        jobs[k] = mk(kinds[(k * 3 + 1) % 10], c, "dup(world)", dts[k % 7], PLAIT_MAX, 513,
                     (k + 1) % g_size, 0);
        jobs[k].nb = 1;
        jobs[k].av = AV_RANDOM;
        job_prep(&jobs[k]);
        CALL(job_start(&jobs[k]));
        reqs[k] = jobs[k].req;
    }
    {
        job_t b = mk(K_ALLREDUCE, c, "dup(world)", PLAIT_INT64, PLAIT_SUM, 129, 0, 0);
        run_job(&b, 0);
        b = mk(K_BCAST, g_world, "world", PLAIT_INT64, PLAIT_SUM, 129, g_size - 1, 0);
        run_job(&b, 0);
    }
    /* complete in reverse order, by plait_waitall of a reversed array */
    {
        plait_request_t rev[6];
        for (int k = 0; k < 6; k++)
            rev[k] = reqs[5 - k];
        CALL(plait_waitall(6, rev, NULL));
    }
    for (int k = 0; k < 6; k++) {
        job_check(&jobs[k]);
        job_free(&jobs[k]);
    }
    /* dup and split of a communicator while non-blocking collectives are in
     * flight on it (both are collectives over it, started after them) */
    set_case("nb/dup-split-behind-nb");
    {
        plait_comm_t nd = NULL, ns = NULL;
        for (int k = 0; k < 4; k++) {
            jobs[k] = mk(kinds[(k * 2 + 1) % 10], c, "dup(world)", dts[(k + 2) % 7], PLAIT_SUM,
                         3000 + (size_t)k, k % g_size, 0);
            jobs[k].nb = 1;
            jobs[k].av = AV_RANDOM;
            job_prep(&jobs[k]);
            CALL(job_start(&jobs[k]));
            reqs[k] = jobs[k].req;
        }
        CALL(plait_comm_dup(c, &nd));
        CALL(plait_comm_split(c, g_rank % 2, g_rank, &ns));
        job_t b = mk(K_ALLREDUCE, nd, "dup(dup)", PLAIT_INT32, PLAIT_SUM, 77, 0, 0);
        run_job(&b, 0);
        CALL(plait_waitall(4, reqs, NULL));
        for (int k = 0; k < 4; k++) {
            job_check(&jobs[k]);
            job_free(&jobs[k]);
        }
        ctr_reset("nb-halves");     /* the halves run their own sequence */
        b = mk(K_ALLGATHER, ns, "split(dup)", PLAIT_INT32, PLAIT_SUM, 5, 0, 0);
        run_job(&b, 0);
        ctr_reset("nb-after-halves");
        CALL(plait_comm_free(&nd));
        CALL(plait_comm_free(&ns));
    }

    nb_shared_sendbuf(c, 10);
    nb_shared_sendbuf(c, 5003);

    /* large ones in flight on three communicators at once, polled with
     * plait_test round-robin in a rank-dependent order */
    set_case("nb/large-three-comms");
    {
        plait_comm_t c2 = NULL;
        plait_comm_t cs3[3];
        static const kind_t lk[9] = { K_ALLREDUCE, K_A2A, K_ALLGATHER, K_BCAST, K_RS, K_A2AV,
                                      K_REDUCE, K_GATHER, K_SCATTER };
        CALL(plait_comm_split(g_world, 0, g_size - g_rank, &c2));
        cs3[0] = c;
        cs3[1] = c2;
        cs3[2] = g_world;
        for (int k = 0; k < 9; k++) {
            int allb = lk[k] == K_ALLGATHER || lk[k] == K_RS || lk[k] == K_GATHER ||
                       lk[k] == K_SCATTER || lk[k] == K_A2A || lk[k] == K_A2AV;
            size_t cnt = allb ? ((size_t)1 << 20) / 4 / (size_t)g_size + 3 : ((size_t)1 << 18) + 1;
            jobs[k] = mk(lk[k], cs3[k % 3], k % 3 == 0 ? "dup" : k % 3 == 1 ? "reversed" : "world",
                         k & 1 ? PLAIT_FLOAT32 : PLAIT_INT32, PLAIT_SUM, cnt, (k * 5) % g_size,
                         k % 4 == 3);
            jobs[k].nb = 1;
            jobs[k].av = AV_UNIFORM;
            job_prep(&jobs[k]);
            int rc = job_start(&jobs[k]);
            if (rc != PLAIT_OK)
                job_die(&jobs[k], "start", rc);
            reqs[k] = jobs[k].req;
        }
        int left = 9;
        make_perm(perm, 9, sm64(g_seed ^ (uint64_t)g_rank * 31));
        double t1 = plait_wtime();
        while (left) {
            for (int i = 0; i < 9; i++) {
                int k = perm[i], done = 0;
                if (!reqs[k])
                    continue;
                int rc = plait_test(&reqs[k], &done, NULL);
                if (rc != PLAIT_OK)
                    job_die(&jobs[k], "plait_test", rc);
                left -= done;
            }
            if (plait_wtime() - t1 > 120)
                die_rc("large non-blocking collectives never completed (120 s)",
                       PLAIT_ERR_TIMEOUT, __LINE__);
        }
        for (int k = 0; k < 9; k++) {
            job_check(&jobs[k]);
            job_free(&jobs[k]);
        }
        CALL(plait_comm_free(&c2));
    }
    CALL(plait_comm_free(&c));
    free(jobs);
}

/* ---------------------------------------------------------------- errors */

static int mentions(const char *msg, const char *names)
{
    char low[1024], nm[64];
    size_t i;
    for (i = 0; msg[i] && i < sizeof low - 1; i++)
        low[i] = (char)tolower((unsigned char)msg[i]);
    low[i] = 0;
    while (*names) {
        size_t k = 0;
        while (*names && *names != '|' && k < sizeof nm - 1)
            nm[k++] = *names++;
        nm[k] = 0;
        if (*names == '|')
            names++;
        if (k && strstr(low, nm))
            return 1;
    }
    return 0;
}

static gbuf_t eA, eB;           /* poisoned buffers passed to failing calls */

static void expect_err(const char *what, int rc, int want, const char *names)
{
    g_checks++;
    if (rc != want) {
        fail("%s returned %d (%s), want %d (%s)%s%s", what, rc, plait_strerror(rc), want,
             plait_strerror(want), rc ? "; last_error: " : "", rc ? plait_last_error() : "");
    } else {
        const char *m = plait_last_error();
        if (!m || !*m)
            fail("%s: returned %d but plait_last_error() is empty", what, rc);
        else if (names && !mentions(m, names))
            fail("%s: plait_last_error() \"%s\" does not name the argument (%s)", what, m, names);
    }
    for (size_t i = 0; i < eA.n + 2 * GUARD; i++)
        if (eA.base[i] != POISON || eB.base[i] != POISON) {
            fail("%s: a failed call wrote into a user buffer", what);
            memset(eA.base, POISON, eA.n + 2 * GUARD);
            memset(eB.base, POISON, eB.n + 2 * GUARD);
            break;
        }
}

#define EXPECT(want, names, call) expect_err(#call, (call), (want), (names))
#define EXPECT_ARG(names, call) EXPECT(PLAIT_ERR_ARG, names, call)

static void sec_errors(void)
{
    const int n = g_size;
    void *A, *B;
    plait_request_t q = NULL;
    size_t cnt[4 * 64];
    gb_alloc(&eA, 4096);
    gb_alloc(&eB, 4096);
    A = eA.p;
    B = eB.p;
    for (int i = 0; i < 64; i++) {
        cnt[i] = cnt[128 + i] = 1;
        cnt[64 + i] = cnt[192 + i] = (size_t)i;
    }
    const size_t *sc = cnt, *sd = cnt + 64, *rc_ = cnt + 128, *rd = cnt + 192;
    const plait_dtype_t BAD_DT = (plait_dtype_t)99, NEG_DT = (plait_dtype_t)-1;
    const plait_op_t BAD_OP = (plait_op_t)99, NEG_OP = (plait_op_t)-1;
    plait_comm_t W = g_world, NC = NULL;

    /* a collective in flight while the bad calls are made must be unharmed */
    set_case("errors/in-flight");
    job_t fl = mk(K_ALLREDUCE, W, "world", PLAIT_INT32, PLAIT_SUM, 2000, 0, 0);
    fl.nb = 1;
    job_prep(&fl);
    CALL(job_start(&fl));

    set_case("errors/dtype_size");
    for (int i = 0; i < 11; i++) {
        g_checks++;
        if (plait_dtype_size(DT[i].dt) != DT[i].size)
            fail("plait_dtype_size(%s) = %zu, want %zu", DT[i].name, plait_dtype_size(DT[i].dt),
                 DT[i].size);
    }
    if (plait_dtype_size(BAD_DT) != 0)
        fail("plait_dtype_size(99) = %zu, want 0", plait_dtype_size(BAD_DT));

    set_case("errors/root");
    EXPECT_ARG("root", plait_bcast(A, 4, PLAIT_INT32, -1, W));
    EXPECT_ARG("root", plait_bcast(A, 4, PLAIT_INT32, n, W));
    EXPECT_ARG("root", plait_bcast(A, 4, PLAIT_INT32, INT_MAX, W));
    EXPECT_ARG("root", plait_reduce(A, B, 4, PLAIT_INT32, PLAIT_SUM, -1, W));
    EXPECT_ARG("root", plait_reduce(A, B, 4, PLAIT_INT32, PLAIT_SUM, n, W));
    EXPECT_ARG("root", plait_gather(A, B, 4, PLAIT_INT32, n, W));
    EXPECT_ARG("root", plait_gather(A, B, 4, PLAIT_INT32, -1, W));
    EXPECT_ARG("root", plait_scatter(A, B, 4, PLAIT_INT32, -1, W));
    EXPECT_ARG("root", plait_scatter(A, B, 4, PLAIT_INT32, n, W));
    EXPECT_ARG("root", plait_ibcast(A, 4, PLAIT_INT32, n, W, &q));
    EXPECT_ARG("root", plait_ireduce(A, B, 4, PLAIT_INT32, PLAIT_SUM, -1, W, &q));
    EXPECT_ARG("root", plait_igather(A, B, 4, PLAIT_INT32, n, W, &q));
    EXPECT_ARG("root", plait_iscatter(A, B, 4, PLAIT_INT32, -1, W, &q));
    /* bad root with count 0 is still a bad root */
    EXPECT_ARG("root", plait_bcast(A, 0, PLAIT_INT32, n, W));

    set_case("errors/dtype");
    const plait_dtype_t bads[2] = { BAD_DT, NEG_DT };
    for (int b = 0; b < 2; b++) {
        plait_dtype_t X = bads[b];
        const char *dn = "dt|type";
        EXPECT_ARG(dn, plait_bcast(A, 4, X, 0, W));
        EXPECT_ARG(dn, plait_allreduce(A, B, 4, X, PLAIT_SUM, W));
        EXPECT_ARG(dn, plait_reduce(A, B, 4, X, PLAIT_SUM, 0, W));
        EXPECT_ARG(dn, plait_allgather(A, B, 4, X, W));
        EXPECT_ARG(dn, plait_reduce_scatter(A, B, 4, X, PLAIT_SUM, W));
        EXPECT_ARG(dn, plait_alltoall(A, B, 4, X, W));
        EXPECT_ARG(dn, plait_alltoallv(A, sc, sd, B, rc_, rd, X, W));
        EXPECT_ARG(dn, plait_gather(A, B, 4, X, 0, W));
        EXPECT_ARG(dn, plait_scatter(A, B, 4, X, 0, W));
        EXPECT_ARG(dn, plait_iallreduce(A, B, 4, X, PLAIT_SUM, W, &q));
        EXPECT_ARG(dn, plait_ialltoallv(A, sc, sd, B, rc_, rd, X, W, &q));
        EXPECT_ARG(dn, plait_bcast(A, 0, X, 0, W));   /* count 0: still a bad type */
    }

    set_case("errors/op");
    const plait_op_t bop[2] = { BAD_OP, NEG_OP };
    for (int b = 0; b < 2; b++) {
        EXPECT_ARG("op", plait_allreduce(A, B, 4, PLAIT_INT32, bop[b], W));
        EXPECT_ARG("op", plait_reduce(A, B, 4, PLAIT_FLOAT32, bop[b], 0, W));
        EXPECT_ARG("op", plait_reduce_scatter(A, B, 1, PLAIT_INT64, bop[b], W));
        EXPECT_ARG("op", plait_iallreduce(A, B, 4, PLAIT_INT32, bop[b], W, &q));
        EXPECT_ARG("op", plait_ireduce(A, B, 4, PLAIT_INT32, bop[b], 0, W, &q));
        EXPECT_ARG("op", plait_ireduce_scatter(A, B, 1, PLAIT_INT32, bop[b], W, &q));
    }

    set_case("errors/BYTE-with-op");
    for (int o = 0; o < 5; o++) {
        plait_op_t op = (plait_op_t)o;
        const char *nm = "dt|type|op|byte";
        EXPECT_ARG(nm, plait_allreduce(A, B, 4, PLAIT_BYTE, op, W));
        EXPECT_ARG(nm, plait_allreduce(A, A, 4, PLAIT_BYTE, op, W));
        EXPECT_ARG(nm, plait_reduce(A, B, 4, PLAIT_BYTE, op, n - 1, W));
        EXPECT_ARG(nm, plait_reduce_scatter(A, B, 2, PLAIT_BYTE, op, W));
        EXPECT_ARG(nm, plait_iallreduce(A, B, 4, PLAIT_BYTE, op, W, &q));
        EXPECT_ARG(nm, plait_ireduce(A, B, 4, PLAIT_BYTE, op, 0, W, &q));
        EXPECT_ARG(nm, plait_ireduce_scatter(A, B, 2, PLAIT_BYTE, op, W, &q));
    }

    set_case("errors/AVG-on-integers");
    for (int d = 0; d < 6; d++) {
        plait_dtype_t dt = NUMERIC[d];
        const char *nm = "op|avg|dt|type";
        EXPECT_ARG(nm, plait_allreduce(A, B, 4, dt, PLAIT_AVG, W));
        EXPECT_ARG(nm, plait_reduce(A, B, 4, dt, PLAIT_AVG, 0, W));
        EXPECT_ARG(nm, plait_reduce_scatter(A, B, 2, dt, PLAIT_AVG, W));
        EXPECT_ARG(nm, plait_iallreduce(A, B, 4, dt, PLAIT_AVG, W, &q));
    }

    set_case("errors/NULL-comm");
    {
        const char *nm = "comm";
        int x;
        plait_comm_t out;
        EXPECT_ARG(nm, plait_barrier(NC));
        EXPECT_ARG(nm, plait_bcast(A, 4, PLAIT_INT32, 0, NC));
        EXPECT_ARG(nm, plait_reduce(A, B, 4, PLAIT_INT32, PLAIT_SUM, 0, NC));
        EXPECT_ARG(nm, plait_allreduce(A, B, 4, PLAIT_INT32, PLAIT_SUM, NC));
        EXPECT_ARG(nm, plait_allgather(A, B, 4, PLAIT_INT32, NC));
        EXPECT_ARG(nm, plait_reduce_scatter(A, B, 4, PLAIT_INT32, PLAIT_SUM, NC));
        EXPECT_ARG(nm, plait_alltoall(A, B, 4, PLAIT_INT32, NC));
        EXPECT_ARG(nm, plait_alltoallv(A, sc, sd, B, rc_, rd, PLAIT_INT32, NC));
        EXPECT_ARG(nm, plait_gather(A, B, 4, PLAIT_INT32, 0, NC));
        EXPECT_ARG(nm, plait_scatter(A, B, 4, PLAIT_INT32, 0, NC));
        EXPECT_ARG(nm, plait_ibarrier(NC, &q));
        EXPECT_ARG(nm, plait_ibcast(A, 4, PLAIT_INT32, 0, NC, &q));
        EXPECT_ARG(nm, plait_ireduce(A, B, 4, PLAIT_INT32, PLAIT_SUM, 0, NC, &q));
        EXPECT_ARG(nm, plait_iallreduce(A, B, 4, PLAIT_INT32, PLAIT_SUM, NC, &q));
        EXPECT_ARG(nm, plait_iallgather(A, B, 4, PLAIT_INT32, NC, &q));
        EXPECT_ARG(nm, plait_ireduce_scatter(A, B, 4, PLAIT_INT32, PLAIT_SUM, NC, &q));
        EXPECT_ARG(nm, plait_ialltoall(A, B, 4, PLAIT_INT32, NC, &q));
        EXPECT_ARG(nm, plait_ialltoallv(A, sc, sd, B, rc_, rd, PLAIT_INT32, NC, &q));
        EXPECT_ARG(nm, plait_igather(A, B, 4, PLAIT_INT32, 0, NC, &q));
        EXPECT_ARG(nm, plait_iscatter(A, B, 4, PLAIT_INT32, 0, NC, &q));
        EXPECT_ARG(nm, plait_comm_rank(NC, &x));
        EXPECT_ARG(nm, plait_comm_size(NC, &x));
        EXPECT_ARG(nm, plait_comm_dup(NC, &out));
        EXPECT_ARG(nm, plait_comm_split(NC, 0, 0, &out));
        /* NULL comm with count 0 is still a NULL comm */
        EXPECT_ARG(nm, plait_allreduce(NULL, NULL, 0, PLAIT_INT32, PLAIT_SUM, NC));
    }

    set_case("errors/NULL-req");
    {
        const char *nm = "req";
        int done;
        EXPECT_ARG(nm, plait_ibarrier(W, NULL));
        EXPECT_ARG(nm, plait_ibcast(A, 4, PLAIT_INT32, 0, W, NULL));
        EXPECT_ARG(nm, plait_ireduce(A, B, 4, PLAIT_INT32, PLAIT_SUM, 0, W, NULL));
        EXPECT_ARG(nm, plait_iallreduce(A, B, 4, PLAIT_INT32, PLAIT_SUM, W, NULL));
        EXPECT_ARG(nm, plait_iallgather(A, B, 4, PLAIT_INT32, W, NULL));
        EXPECT_ARG(nm, plait_ireduce_scatter(A, B, 4, PLAIT_INT32, PLAIT_SUM, W, NULL));
        EXPECT_ARG(nm, plait_ialltoall(A, B, 4, PLAIT_INT32, W, NULL));
        EXPECT_ARG(nm, plait_ialltoallv(A, sc, sd, B, rc_, rd, PLAIT_INT32, W, NULL));
        EXPECT_ARG(nm, plait_igather(A, B, 4, PLAIT_INT32, 0, W, NULL));
        EXPECT_ARG(nm, plait_iscatter(A, B, 4, PLAIT_INT32, 0, W, NULL));
        EXPECT_ARG(nm, plait_wait(NULL, NULL));
        EXPECT_ARG(nm, plait_test(NULL, &done, NULL));
        EXPECT_ARG(nm, plait_waitall(2, NULL, NULL));
        q = NULL;
        EXPECT_ARG("done", plait_test(&q, NULL, NULL));
    }

    set_case("errors/NULL-buffer-count>0");
    {
        const char *nm = "buf|send|recv";
        EXPECT_ARG(nm, plait_bcast(NULL, 4, PLAIT_INT32, 0, W));
        EXPECT_ARG(nm, plait_allreduce(NULL, B, 4, PLAIT_INT32, PLAIT_SUM, W));
        EXPECT_ARG(nm, plait_allreduce(A, NULL, 4, PLAIT_INT32, PLAIT_SUM, W));
        EXPECT_ARG(nm, plait_reduce(NULL, B, 4, PLAIT_INT32, PLAIT_SUM, 0, W));
        EXPECT_ARG(nm, plait_allgather(A, NULL, 4, PLAIT_INT32, W));
        EXPECT_ARG(nm, plait_allgather(NULL, B, 4, PLAIT_INT32, W));
        EXPECT_ARG(nm, plait_reduce_scatter(A, NULL, 4, PLAIT_INT32, PLAIT_SUM, W));
        EXPECT_ARG(nm, plait_reduce_scatter(NULL, B, 4, PLAIT_INT32, PLAIT_SUM, W));
        EXPECT_ARG(nm, plait_alltoall(NULL, B, 4, PLAIT_INT32, W));
        EXPECT_ARG(nm, plait_alltoall(A, NULL, 4, PLAIT_INT32, W));
        EXPECT_ARG(nm, plait_iallreduce(A, NULL, 4, PLAIT_INT32, PLAIT_SUM, W, &q));
        EXPECT_ARG(nm, plait_ialltoall(NULL, B, 4, PLAIT_INT32, W, &q));
        EXPECT_ARG(nm, plait_alltoallv(NULL, sc, sd, B, rc_, rd, PLAIT_INT32, W));
        EXPECT_ARG(nm, plait_alltoallv(A, sc, sd, NULL, rc_, rd, PLAIT_INT32, W));
        EXPECT_ARG("count|displ|sendcounts|sdispls|recvcounts|rdispls",
                   plait_alltoallv(A, NULL, sd, B, rc_, rd, PLAIT_INT32, W));
        EXPECT_ARG("count|displ|sendcounts|sdispls|recvcounts|rdispls",
                   plait_alltoallv(A, sc, sd, B, rc_, NULL, PLAIT_INT32, W));
    }

    /* alltoallv: sendcounts[me] != recvcounts[me] is visible locally */
    set_case("errors/alltoallv-self-count");
    {
        size_t bad[4 * 64];
        memcpy(bad, cnt, sizeof bad);
        bad[128 + g_rank] = 2;      /* recvcounts[me] = 2, sendcounts[me] = 1 */
        EXPECT_ARG("count|self|me", plait_alltoallv(A, bad, bad + 64, B, bad + 128, bad + 192,
                                                    PLAIT_INT32, W));
        EXPECT_ARG("count|self|me", plait_ialltoallv(A, bad, bad + 64, B, bad + 128, bad + 192,
                                                     PLAIT_INT32, W, &q));
    }

    set_case("errors/split-dup-free");
    {
        plait_comm_t out = NULL, w = W;
        EXPECT_ARG("color", plait_comm_split(W, -5, 0, &out));
        EXPECT_ARG("newcomm|comm", plait_comm_split(W, 0, 0, NULL));
        EXPECT_ARG("newcomm|comm", plait_comm_dup(W, NULL));
        EXPECT_ARG("rank", plait_comm_rank(W, NULL));
        EXPECT_ARG("size", plait_comm_size(W, NULL));
        EXPECT_ARG("comm", plait_comm_free(NULL));
        int rc = plait_comm_free(&w);
        g_checks++;
        if (rc == PLAIT_OK)
            fail("plait_comm_free(&world) returned PLAIT_OK; the world cannot be freed");
        else if (!*plait_last_error())
            fail("plait_comm_free(&world) failed with %d but plait_last_error() is empty", rc);
    }

    set_case("errors/waitall-n");
    {
        plait_request_t rq[1] = { NULL };
        EXPECT_ARG("n|count", plait_waitall(-1, rq, NULL));
    }

    /* the in-flight collective completes correctly */
    set_case("errors/in-flight");
    {
        int rc = plait_wait(&fl.req, NULL);
        if (rc != PLAIT_OK)
            job_die(&fl, "plait_wait after the failed calls", rc);
        job_check(&fl);
        job_free(&fl);
    }
    gb_free(&eA);
    gb_free(&eB);
    /* usable: a few collectives */
    set_case("errors/usable-after");
    suite(W, "world");
}

/* byte sizes that overflow size_t */
static void sec_overflow(void)
{
    void *A, *B;
    plait_request_t q = NULL;
    plait_comm_t W = g_world;
    gb_alloc(&eA, 4096);
    gb_alloc(&eB, 4096);
    A = eA.p;
    B = eB.p;
    set_case("overflow");
    const char *nm = "count|overflow|size";
    EXPECT_ARG(nm, plait_bcast(A, SIZE_MAX, PLAIT_INT32, 0, W));
    EXPECT_ARG(nm, plait_allreduce(A, B, SIZE_MAX / 2, PLAIT_FLOAT64, PLAIT_SUM, W));
    EXPECT_ARG(nm, plait_reduce(A, B, SIZE_MAX / 4 + 1, PLAIT_INT64, PLAIT_MAX, 0, W));
    EXPECT_ARG(nm, plait_iallreduce(A, B, SIZE_MAX / 2, PLAIT_UINT32, PLAIT_SUM, W, &q));
    EXPECT_ARG(nm, plait_alltoall(A, B, SIZE_MAX / 2, PLAIT_INT64, W));
    EXPECT_ARG(nm, plait_allgather(A, B, SIZE_MAX / 2, PLAIT_INT64, W));
    if (g_size > 1) {
        /* count * size fits, count * size * nranks does not */
        size_t c = SIZE_MAX / 8 / (size_t)g_size + 1;
        EXPECT_ARG(nm, plait_allgather(A, B, c, PLAIT_INT64, W));
        EXPECT_ARG(nm, plait_reduce_scatter(A, B, c, PLAIT_INT64, PLAIT_SUM, W));
        EXPECT_ARG(nm, plait_alltoall(A, B, c, PLAIT_INT64, W));
    }
    gb_free(&eA);
    gb_free(&eB);
    set_case("overflow/usable-after");
    suite(W, "world");
}

/* collectives on a freed communicator: PLAIT_ERR_STATE */
static void sec_freed(void)
{
    plait_comm_t d = NULL, stale;
    int x = 0, y = 0;
    set_case("freed");
    CALL(plait_comm_dup(g_world, &d));
    CALL(plait_barrier(d));
    stale = d;
    CALL(plait_comm_free(&d));
    g_checks++;
    if (d != NULL)
        fail("plait_comm_free left *comm non-NULL");
    int rc = plait_barrier(stale);
    g_checks++;
    if (rc != PLAIT_ERR_STATE)
        fail("plait_barrier on a freed comm returned %d (%s), want PLAIT_ERR_STATE; \"%s\"", rc,
             plait_strerror(rc), rc ? plait_last_error() : "");
    rc = plait_allreduce(&x, &y, 1, PLAIT_INT32, PLAIT_SUM, stale);
    g_checks++;
    if (rc != PLAIT_ERR_STATE)
        fail("plait_allreduce on a freed comm returned %d (%s), want PLAIT_ERR_STATE", rc,
             plait_strerror(rc));
    set_case("freed/usable-after");
    suite(g_world, "world");
}

/* Message sizes around the library's size classes (powers of two around 4K
 * .. 1M, and 2M+ for two-chunk pipelines), every collective, blocking and
 * non-blocking, aligned and misaligned buffers. Sizes are bytes of the
 * vector (allreduce, reduce, bcast), of all n blocks (allgather,
 * reduce_scatter, gather, scatter) or of one block (alltoall/v). */
static void sec_sizes(void)
{
    static const size_t tgt[] = { 255, 256, 257, 4095, 4096, 4097, 8192, 8193, 16384, 16385,
                                  32768, 32769, 65536, 65537, 131072, 131073, 262145,
                                  1048576 + 8, 2097152 + 24 };
    static const kind_t ks[9] = { K_BCAST, K_ALLREDUCE, K_REDUCE, K_ALLGATHER, K_RS, K_A2A,
                                  K_A2AV, K_GATHER, K_SCATTER };
    static const plait_dtype_t wide[4] = { PLAIT_INT64, PLAIT_FLOAT32, PLAIT_BFLOAT16,
                                           PLAIT_UINT32 };
    const size_t n = (size_t)g_size;
    int t = 0;
    for (size_t ti = 0; ti < sizeof tgt / sizeof tgt[0]; ti++)
        for (int k = 0; k < 9; k++, t++) {
            kind_t kind = ks[k];
            int red = kind == K_REDUCE || kind == K_ALLREDUCE || kind == K_RS;
            int perblock = kind == K_A2A || kind == K_A2AV;
            int allblocks = kind == K_ALLGATHER || kind == K_RS || kind == K_GATHER ||
                            kind == K_SCATTER;
            size_t bytes = tgt[ti];
            if ((perblock ? bytes * n : bytes) > ((size_t)24 << 20))
                continue;       /* keep memory and time modest */
            plait_dtype_t dt = wide[t % 4];
            size_t es = esz(dt);
            if (bytes % es || (allblocks && bytes % (es * n)))
                dt = red ? (t & 1 ? PLAIT_INT8 : PLAIT_UINT8) : PLAIT_BYTE;
            es = esz(dt);
            size_t c = allblocks ? bytes / (es * n) : bytes / es;
            if (c == 0)
                c = 1;
            plait_op_t op = (plait_op_t)(t % 4);
            int root = (int)((size_t)t % n);
            int nb = t % 3 == 1, mis = t % 2 ? (t % 7) + 1 : 0;
            int ip = (t / 3) % 4 == 3 && kind != K_BCAST && kind != K_A2AV;
            set_case("sizes/%s/%zu-bytes%s%s%s", KN[kind], bytes, nb ? "/nb" : "",
                     mis ? "/misaligned" : "", ip ? "/in-place" : "");
            job_t j = mk(kind, g_world, "world", dt, op, c, root, ip);
            j.av = AV_UNIFORM;
            j.mis = mis;
            run_job(&j, nb);
        }
    /* misaligned odd-sized vectors for every float and integer reduction */
    for (int d = 0; d < 10; d++) {
        set_case("sizes/misaligned-reductions/%s", dtn(NUMERIC[d]));
        job_t j = mk(K_ALLREDUCE, g_world, "world", NUMERIC[d], PLAIT_SUM, 40001, 0, d & 1);
        j.mis = 1 + d % 7;
        run_job(&j, d % 3 == 0);
        j = mk(K_RS, g_world, "world", NUMERIC[d], PLAIT_MAX, 5003, 0, 0);
        j.mis = 7 - d % 7;
        run_job(&j, d % 3 == 1);
    }
}

/* Many communicators: dup/split/free churn, many alive at once, freed in a
 * rank-dependent order; free with collectives in flight. */
static void sec_churn(void)
{
    enum { NALIVE = 40, NCHURN = 60 };
    plait_comm_t alive[NALIVE];
    int perm[NALIVE];
    set_case("churn/dup-free");
    for (int i = 0; i < NCHURN; i++) {
        plait_comm_t d = NULL;
        CALL(i % 2 ? plait_comm_dup(g_world, &d)
                   : plait_comm_split(g_world, i % 3 == 0 ? 0 : g_rank % 2, -g_rank, &d));
        job_t j = mk(i % 3 ? K_ALLREDUCE : K_BCAST, d, "churn", PLAIT_INT32, PLAIT_SUM, 3, 0, 0);
        run_job(&j, i % 4 == 1);
        CALL(plait_comm_free(&d));
        if (d != NULL)
            fail("plait_comm_free left *comm non-NULL");
    }
    ctr_reset("churn-2");
    set_case("churn/alive");
    for (int i = 0; i < NALIVE; i++)
        CALL(i % 2 ? plait_comm_dup(i ? alive[i - 1] : g_world, &alive[i])
                   : plait_comm_split(g_world, 0, (i * 7 + g_rank) % 5, &alive[i]));
    for (int i = NALIVE - 1; i >= 0; i--) {
        job_t j = mk(K_ALLGATHER, alive[i], "alive", PLAIT_UINT8, PLAIT_SUM, 2, 0, 0);
        run_job(&j, 0);
    }
    make_perm(perm, NALIVE, sm64(g_seed + (uint64_t)g_rank));
    for (int i = 0; i < NALIVE; i++)   /* free is local: any order per rank */
        CALL(plait_comm_free(&alive[perm[i]]));

    /* free with non-blocking collectives in flight: "any operation still in
     * flight on it completes first"; the requests then complete normally */
    set_case("churn/free-in-flight");
    {
        plait_comm_t d = NULL;
        CALL(plait_comm_dup(g_world, &d));
        job_t j1 = mk(K_ALLREDUCE, d, "dup(freed while in flight)", PLAIT_FLOAT64, PLAIT_SUM,
                      50000, 0, 0);
        job_t j2 = mk(K_A2A, d, "dup(freed while in flight)", PLAIT_INT32, PLAIT_SUM, 3000, 0, 0);
        job_t j3 = mk(K_BCAST, d, "dup(freed while in flight)", PLAIT_INT8, PLAIT_SUM, 100, 0, 0);
        job_t *js[3] = { &j1, &j2, &j3 };
        for (int i = 0; i < 3; i++) {
            js[i]->nb = 1;
            job_prep(js[i]);
            int rc = job_start(js[i]);
            if (rc != PLAIT_OK)
                job_die(js[i], "start", rc);
        }
        CALL(plait_comm_free(&d));
        for (int i = 0; i < 3; i++) {
            int rc = plait_wait(&js[i]->req, NULL);
            if (rc != PLAIT_OK)
                job_die(js[i], "plait_wait after plait_comm_free", rc);
            job_check(js[i]);
            job_free(js[i]);
        }
    }
}

/* Small blocking collectives with random per-rank delays, several
 * communicators interleaved: ranks run ahead of each other by a few calls. */
static void sec_skew(void)
{
    plait_comm_t d = NULL, h = NULL;
    CALL(plait_comm_dup(g_world, &d));
    CALL(plait_comm_split(g_world, g_rank < g_size / 2, g_rank, &h));
    uint64_t rs = sm64(g_seed ^ (uint64_t)(g_rank + 77));
    static const kind_t ks[9] = { K_BCAST, K_ALLREDUCE, K_REDUCE, K_ALLGATHER, K_RS, K_A2A,
                                  K_GATHER, K_SCATTER, K_BARRIER };
    for (int it = 0; it < 150; it++) {
        rs = sm64(rs);
        if (rs % 3 == 0) {
            struct timespec ts = { 0, (long)(rs >> 8) % 300000 };
            nanosleep(&ts, NULL);
        }
        plait_comm_t c = it % 3 == 0 ? g_world : it % 3 == 1 ? d : h;
        const char *cn = it % 3 == 0 ? "world" : it % 3 == 1 ? "dup" : "halves";
        int n;
        CALL(plait_comm_size(c, &n));
        set_case("skew/it=%d", it);
        job_t j = mk(ks[it % 9], c, cn, NUMERIC[it % 10], (plait_op_t)(it % 4),
                     (size_t)(1 + (it * 37) % 600), it % n, (it / 9) % 2);
        run_job(&j, 0);
    }
    CALL(plait_comm_free(&d));
    CALL(plait_comm_free(&h));
}

/* Collectives on different communicators from different threads at once
 * ("different communicators are independent"), p2p beside them. */
typedef struct {
    plait_comm_t comm;
    int id;
    job_t *handoff;             /* a request started by the main thread, waited here */
} thr_arg_t;

static int thr_main(void *p)
{
    thr_arg_t *a = p;
    char nm[32];
    static const kind_t ks[9] = { K_ALLREDUCE, K_BCAST, K_A2AV, K_ALLGATHER, K_RS, K_A2A,
                                  K_REDUCE, K_GATHER, K_SCATTER };
    snprintf(nm, sizeof nm, "thread-%d", a->id);
    ctr_reset(nm);
    if (a->id == 4) {
        /* p2p ring on the world, tags by iteration */
        for (int it = 0; it < 200; it++) {
            int to = (g_rank + 1) % g_size, from = (g_rank + g_size - 1) % g_size;
            uint64_t out = sm64(g_seed ^ (uint64_t)(g_rank * 1000 + it)), in = 0;
            uint64_t want = sm64(g_seed ^ (uint64_t)(from * 1000 + it));
            plait_request_t q;
            set_case("threads/p2p/it=%d", it);
            CALL(plait_irecv(&in, 1, PLAIT_UINT64, from, 1000 + it, g_world, &q));
            CALL(plait_send(&out, 1, PLAIT_UINT64, to, 1000 + it, g_world));
            CALL(plait_wait(&q, NULL));
            g_checks++;
            if (in != want)
                fail("p2p beside collectives: got %016" PRIx64 " want %016" PRIx64, in, want);
        }
        return 0;
    }
    for (int it = 0; it < 80; it++) {
        int n;
        CALL(plait_comm_size(a->comm, &n));
        set_case("threads/%s/it=%d", nm, it);
        /* mostly small (the blocking ones then use the shared-memory area) */
        size_t c = it % 5 == 4 ? (size_t)(1 + (it * 131) % 20000) : (size_t)(1 + it % 37);
        job_t j = mk(ks[(it + a->id) % 9], a->comm, nm, NUMERIC[(it * 3 + a->id) % 10],
                     (plait_op_t)(it % 4), c, it % n, it % 3 == 2);
        j.av = AV_RANDOM;
        run_job(&j, it % 2);
    }
    if (a->handoff) {
        /* complete a request another thread started */
        set_case("threads/%s/handoff", nm);
        int rc = plait_wait(&a->handoff->req, NULL);
        if (rc != PLAIT_OK)
            job_die(a->handoff, "plait_wait in another thread", rc);
        job_check(a->handoff);
        job_free(a->handoff);
    }
    return 0;
}

static void sec_threads(void)
{
    /* threads 0..3: collectives on a dup, a reversed split, a dup of the dup
     * and halves of the world; thread 4: p2p on the world */
    enum { NT = 5 };
    thrd_t th[NT];
    thr_arg_t args[NT];
    plait_comm_t c[5];
    set_case("threads/setup");
    CALL(plait_comm_dup(g_world, &c[0]));
    CALL(plait_comm_split(g_world, 0, -g_rank, &c[1]));
    CALL(plait_comm_dup(c[0], &c[2]));
    CALL(plait_comm_split(g_world, g_rank < g_size / 2, g_rank, &c[3]));
    CALL(plait_comm_dup(g_world, &c[4]));
    /* started here, completed by thread 1 */
    job_t h = mk(K_A2A, c[4], "dup(handoff)", PLAIT_INT64, PLAIT_SUM, 2049, 0, 0);
    h.nb = 1;
    job_prep(&h);
    CALL(job_start(&h));
    for (int i = 0; i < NT; i++) {
        args[i].comm = i < 4 ? c[i] : g_world;
        args[i].id = i;
        args[i].handoff = i == 1 ? &h : NULL;
        if (thrd_create(&th[i], thr_main, &args[i]) != thrd_success)
            die_rc("thrd_create", PLAIT_ERR_INTERNAL, __LINE__);
    }
    for (int i = 0; i < NT; i++)
        thrd_join(th[i], NULL);
    set_case("threads/teardown");
    for (int i = 0; i < 5; i++)
        CALL(plait_comm_free(&c[i]));
}

/* PLAIT_ERR_TIMEOUT on a non-blocking collective leaves the request posted;
 * waiting again completes it (plait.h, plait_wait). Rank 0 joins late.
 * Only when named on the command line, with PLAIT_TIMEOUT set to 1..5 s. */
static void sec_timeout(void)
{
    const char *tv = getenv("PLAIT_TIMEOUT");
    double T = tv ? atof(tv) : 0;
    if (T <= 0 || T > 5 || g_size < 2) {
        if (g_rank == 0)
            printf("coll_edges: section timeout skipped (needs PLAIT_TIMEOUT in (0,5] and 2+ ranks)\n");
        return;
    }
    plait_comm_t d = NULL;
    CALL(plait_comm_dup(g_world, &d));
    set_case("timeout/iallreduce-late-root");
    job_t j = mk(K_ALLREDUCE, d, "dup", PLAIT_INT64, PLAIT_SUM, 1000, 0, 0);
    j.nb = 1;
    job_prep(&j);
    if (g_rank == 0) {
        struct timespec ts = { (time_t)(1.5 * T), (long)(fmod(1.5 * T, 1.0) * 1e9) };
        nanosleep(&ts, NULL);
        CALL(job_start(&j));
        CALL(plait_wait(&j.req, NULL));
    } else {
        CALL(job_start(&j));
        plait_request_t keep = j.req;
        int rc = plait_wait(&j.req, NULL);
        g_checks++;
        if (rc == PLAIT_ERR_TIMEOUT) {
            if (j.req != keep)
                fail("plait_wait timed out but changed *req (must stay posted)");
            if (!*plait_last_error())
                fail("PLAIT_ERR_TIMEOUT with an empty plait_last_error()");
            rc = plait_wait(&j.req, NULL);
            if (rc != PLAIT_OK)
                job_die(&j, "second plait_wait after PLAIT_ERR_TIMEOUT", rc);
        } else if (rc == PLAIT_OK) {
            fail("plait_wait returned OK although rank 0 joined %.1f s late (PLAIT_TIMEOUT=%g)",
                 1.5 * T, T);
        } else {
            job_die(&j, "plait_wait (want PLAIT_ERR_TIMEOUT)", rc);
        }
    }
    job_check(&j);
    job_free(&j);
    set_case("timeout/usable-after");
    suite(d, "dup");
    CALL(plait_comm_free(&d));
}

/* Mismatched counts across ranks (a user error): plait.h promises an error
 * (PLAIT_ERR_ARG where a rank can see it, else PLAIT_ERR_TIMEOUT), never a
 * write outside the buffers passed, and a usable library afterwards. One
 * rank ("odd") passes a different count; buffers are sized for each rank's
 * own count and guarded. Each case runs on a fresh dup. Only when named on
 * the command line, with PLAIT_TIMEOUT set to 1..5 s. */
static void sec_mismatch(void)
{
    const char *tv = getenv("PLAIT_TIMEOUT");
    double T = tv ? atof(tv) : 0;
    if (T <= 0 || T > 5 || g_size < 2) {
        if (g_rank == 0)
            printf("coll_edges: section mismatch skipped (needs PLAIT_TIMEOUT in (0,5] and 2+ ranks)\n");
        return;
    }
    static const struct {
        kind_t kind;
        int odd;                /* 0: rank 0, 1: last rank */
        size_t oddc, c;         /* count of the odd rank, of the others */
    } cases[] = {
        { K_BCAST, 0, 64, 16 },     { K_BCAST, 0, 16, 64 },  { K_BCAST, 1, 64, 16 },
        { K_ALLREDUCE, 0, 64, 16 }, { K_ALLREDUCE, 1, 16, 64 },
        { K_REDUCE, 0, 16, 64 },    { K_REDUCE, 0, 64, 16 },
        { K_ALLGATHER, 1, 32, 8 },  { K_ALLGATHER, 0, 8, 32 },
        { K_RS, 0, 64, 16 },        { K_RS, 1, 16, 64 },
        { K_A2A, 0, 16, 4 },        { K_A2A, 1, 4, 16 },
        { K_GATHER, 0, 4, 16 },     { K_GATHER, 0, 16, 4 },
        { K_SCATTER, 0, 16, 4 },    { K_SCATTER, 0, 4, 16 },
        { K_A2AV, 0, 20, 5 },       { K_A2AV, 1, 5, 20 },
    };
    const int n = g_size;
    int *rcs = xmalloc(sizeof(int) * (size_t)n);
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int scale = 0; scale < 2; scale++)
            for (int nb = 0; nb < 2; nb++) {
                int odd = cases[ci].odd ? n - 1 : 0, me_odd = g_rank == odd;
                size_t mul = scale ? 3001 : 1;
                size_t c = (me_odd ? cases[ci].oddc : cases[ci].c) * mul;
                size_t oc = cases[ci].oddc * mul, cc = cases[ci].c * mul;
                plait_dtype_t dt = PLAIT_INT32;
                size_t es = 4;
                kind_t kind = cases[ci].kind;
                int root = 0;
                plait_comm_t d = NULL;
                gbuf_t sb, rb;
                size_t sn = c, rn = c, *av = NULL;
                plait_request_t q = NULL;
                int rc;
                set_case("mismatch/%s/odd-rank-%d:%zu-others:%zu%s", KN[kind], odd, oc, cc,
                         nb ? "/nb" : "");
                CALL(plait_comm_dup(g_world, &d));
                switch (kind) {
                case K_ALLGATHER: case K_A2A: rn = c * (size_t)n; sn = kind == K_A2A ? rn : c; break;
                case K_RS: sn = c * (size_t)n; break;
                case K_GATHER: rn = g_rank == root ? c * (size_t)n : 0; break;
                case K_SCATTER: sn = g_rank == root ? c * (size_t)n : 0; break;
                case K_REDUCE: rn = g_rank == root ? c : 0; break;
                case K_A2AV: {
                    /* the odd rank sends oc to everyone; everyone expects cc
                     * from everyone (the odd rank expects oc from itself) */
                    av = xmalloc(sizeof(size_t) * 4 * (size_t)n);
                    size_t so = 0, ro = 0;
                    for (int p2 = 0; p2 < n; p2++) {
                        av[p2] = me_odd ? oc : cc;                       /* sendcounts */
                        av[2 * n + p2] = (p2 == odd && me_odd) ? oc : cc; /* recvcounts */
                        av[n + p2] = so;
                        so += av[p2] + 2;                                 /* gaps */
                        av[3 * n + p2] = ro;
                        ro += av[2 * n + p2] + 2;
                    }
                    sn = so;
                    rn = ro;
                    break;
                }
                default: break;
                }
                gb_alloc(&sb, sn * es);
                gb_alloc(&rb, rn * es);
                memset(sb.p, 0x11, sn * es);
                void *S = sb.p, *R = rb.p;
                plait_request_t *Q = nb ? &q : NULL;
                switch (kind) {
                case K_BCAST:
                    rc = Q ? plait_ibcast(R, c, dt, root, d, Q) : plait_bcast(R, c, dt, root, d);
                    break;
                case K_ALLREDUCE:
                    rc = Q ? plait_iallreduce(S, R, c, dt, PLAIT_SUM, d, Q)
                           : plait_allreduce(S, R, c, dt, PLAIT_SUM, d);
                    break;
                case K_REDUCE:
                    rc = Q ? plait_ireduce(S, R, c, dt, PLAIT_SUM, root, d, Q)
                           : plait_reduce(S, R, c, dt, PLAIT_SUM, root, d);
                    break;
                case K_ALLGATHER:
                    rc = Q ? plait_iallgather(S, R, c, dt, d, Q) : plait_allgather(S, R, c, dt, d);
                    break;
                case K_RS:
                    rc = Q ? plait_ireduce_scatter(S, R, c, dt, PLAIT_SUM, d, Q)
                           : plait_reduce_scatter(S, R, c, dt, PLAIT_SUM, d);
                    break;
                case K_A2A:
                    rc = Q ? plait_ialltoall(S, R, c, dt, d, Q) : plait_alltoall(S, R, c, dt, d);
                    break;
                case K_GATHER:
                    rc = Q ? plait_igather(S, R, c, dt, root, d, Q) : plait_gather(S, R, c, dt, root, d);
                    break;
                case K_SCATTER:
                    rc = Q ? plait_iscatter(S, R, c, dt, root, d, Q)
                           : plait_scatter(S, R, c, dt, root, d);
                    break;
                default:
                    rc = Q ? plait_ialltoallv(S, av, av + n, R, av + 2 * n, av + 3 * n, dt, d, Q)
                           : plait_alltoallv(S, av, av + n, R, av + 2 * n, av + 3 * n, dt, d);
                    break;
                }
                int posted = 0;
                if (rc == PLAIT_OK && nb) {
                    rc = plait_wait(&q, NULL);
                    posted = rc == PLAIT_ERR_TIMEOUT || rc == PLAIT_ERR_PEER;
                }
                g_checks++;
                if (!gb_guard_ok(&rb) || !gb_guard_ok(&sb))
                    fail("rc %d (%s): wrote outside the buffers passed", rc, plait_strerror(rc));
                if (rc != PLAIT_OK && rc != PLAIT_ERR_ARG && rc != PLAIT_ERR_TIMEOUT)
                    fail("returned %d (%s) \"%s\", want OK, PLAIT_ERR_ARG or PLAIT_ERR_TIMEOUT", rc,
                         plait_strerror(rc), plait_last_error());
                if (rc != PLAIT_OK && !*plait_last_error())
                    fail("returned %d with an empty plait_last_error()", rc);
                for (size_t i = 0; i < sn * es; i++)
                    if (sb.p[i] != 0x11) {
                        fail("rc %d: the send buffer (input) was modified at byte %zu", rc, i);
                        break;
                    }
                /* every rank's result, for the log */
                CALL(plait_allgather(&rc, rcs, 1, PLAIT_INT32, g_world));
                if (g_rank == 0) {
                    char line[256];
                    int o = snprintf(line, sizeof line, "coll_edges: %s: rc by rank", g_case);
                    for (int i = 0; i < n && o < (int)sizeof line - 8; i++)
                        o += snprintf(line + o, sizeof line - (size_t)o, " %d", rcs[i]);
                    printf("%s\n", line);
                    fflush(stdout);
                }
                if (posted) {
                    /* still posted: its buffers and communicator stay in use */
                    continue;
                }
                gb_free(&sb);
                gb_free(&rb);
                free(av);
                CALL(plait_comm_free(&d));
                /* usable afterwards */
                job_t j = mk(K_ALLREDUCE, g_world, "world", PLAIT_INT64, PLAIT_SUM, 33, 0, 0);
                run_job(&j, 0);
            }
    free(rcs);
    set_case("mismatch/usable-after");
    suite(g_world, "world");
}

/* Vectors over 2^31 bytes (32-bit byte counts would truncate): bcast of
 * 2^31+13 BYTEs from the last rank, allreduce SUM of 2^31+5 UINT8 (wraps).
 * Several GiB per rank: only when named on the command line. */
static uint8_t huge_pat(int r, size_t i)
{
    return (uint8_t)(((uint32_t)i * 2654435761u >> 7) + (uint32_t)r * 31u + (uint32_t)(i >> 20));
}

static void sec_huge(void)
{
    const size_t c1 = ((size_t)1 << 31) + 13, c2 = ((size_t)1 << 31) + 5;
    const int n = g_size, root = n - 1;
    set_case("huge/bcast-2^31+13");
    {
        gbuf_t g;
        unsigned char *b;
        gb_alloc(&g, c1);
        b = g.p;
        if (g_rank == root)
            for (size_t i = 0; i < c1; i++)
                b[i] = huge_pat(root, i);
        else
            memset(b, 0, c1);
        CALL(plait_bcast(b, c1, PLAIT_BYTE, root, g_world));
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < c1; i++)
            if (b[i] != huge_pat(root, i) && !bad++)
                first = i;
        g_checks++;
        if (bad)
            fail("bcast of %zu bytes: %zu bytes wrong, first at %zu", c1, bad, first);
        if (!gb_guard_ok(&g))
            fail("bcast wrote outside the buffer (guard changed)");
        gb_free(&g);
    }
    set_case("huge/allreduce-2^31+5");
    {
        unsigned char *sb = xmalloc(c2), *rb;
        gbuf_t g;
        gb_alloc(&g, c2);
        rb = g.p;
        for (size_t i = 0; i < c2; i++)
            sb[i] = huge_pat(g_rank, i);
        CALL(plait_allreduce(sb, rb, c2, PLAIT_UINT8, PLAIT_SUM, g_world));
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < c2; i++) {
            unsigned sum = 0;
            for (int r = 0; r < n; r++)
                sum += huge_pat(r, i);
            if (rb[i] != (uint8_t)sum && !bad++)
                first = i;
        }
        g_checks++;
        if (bad)
            fail("allreduce of %zu UINT8: %zu elements wrong, first at %zu", c2, bad, first);
        if (!gb_guard_ok(&g))
            fail("allreduce wrote outside the buffer (guard changed)");
        free(sb);
        gb_free(&g);
    }
}

static void sec_final(void)
{
    set_case("final");
    suite(g_world, "world");
    job_t j = mk(K_A2AV, g_world, "world", PLAIT_FLOAT32, PLAIT_SUM, 999, 0, 0);
    j.av = AV_RANDOM;
    run_job(&j, 1);
}

/* --------------------------------------------------------------------- main */

static const struct {
    const char *name;
    void (*fn)(void);
} EXPLICIT[] = { { "timeout", sec_timeout }, { "mismatch", sec_mismatch },
                 { "huge", sec_huge } };   /* only when named */

static const struct {
    const char *name;
    void (*fn)(void);
} SECTIONS[] = {
    { "dtypes", sec_dtypes }, { "counts", sec_counts }, { "roots", sec_roots },
    { "a2av", sec_a2av },     { "bitwise", sec_bitwise }, { "split", sec_split },
    { "nb", sec_nb },         { "errors", sec_errors }, { "overflow", sec_overflow },
    { "sizes", sec_sizes },   { "churn", sec_churn },   { "skew", sec_skew },
    { "threads", sec_threads }, { "freed", sec_freed }, { "final", sec_final },
};

int main(int argc, char **argv)
{
    /* before plait_init: not initialized, no world, calls fail cleanly */
    int flag = -1, pre_bad = 0, prc;
    char pre_msg[200] = "";
    if (plait_initialized(&flag) != PLAIT_OK || flag != 0)
        snprintf(pre_msg, sizeof pre_msg, "plait_initialized before init: flag %d", flag), pre_bad = 1;
    else if (plait_comm_world() != NULL)
        snprintf(pre_msg, sizeof pre_msg, "plait_comm_world() before init is not NULL"), pre_bad = 1;
    else if ((prc = plait_barrier(NULL)) != PLAIT_ERR_STATE && prc != PLAIT_ERR_ARG)
        snprintf(pre_msg, sizeof pre_msg, "plait_barrier(NULL) before init returned %d, want "
                 "PLAIT_ERR_STATE (or PLAIT_ERR_ARG)", prc), pre_bad = 1;

    int rc = plait_init();
    if (rc != PLAIT_OK) {
        printf("FAIL rank ? case init seed ?: plait_init returned %d (%s): %s\n", rc,
               plait_strerror(rc), plait_last_error());
        return 1;
    }
    g_world = plait_comm_world();
    CALL(plait_comm_rank(g_world, &g_rank));
    CALL(plait_comm_size(g_world, &g_size));

    const char *s = getenv("PLAIT_TEST_SEED");
    if (s && *s) {
        g_seed = strtoull(s, NULL, 0);
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        g_seed = (uint64_t)ts.tv_sec * 1000003u + (uint64_t)ts.tv_nsec / 1000u + (uint64_t)getpid();
        g_seed %= 1000000007u;
        set_case("seed-bcast");
        CALL(plait_bcast(&g_seed, 1, PLAIT_UINT64, 0, g_world));
    }
    set_case("lifecycle");
    if (pre_bad)
        fail("%s", pre_msg);
    if (plait_initialized(&flag) != PLAIT_OK || flag != 1)
        fail("plait_initialized after init: flag %d, want 1", flag);
    if ((prc = plait_init()) != PLAIT_ERR_STATE)
        fail("second plait_init returned %d (%s), want PLAIT_ERR_STATE", prc, plait_strerror(prc));
    {
        int ma = -1, mi = -1, pa = -1;
        if (plait_version(&ma, &mi, &pa) != PLAIT_OK || ma != PLAIT_VERSION_MAJOR ||
            mi != PLAIT_VERSION_MINOR || pa != PLAIT_VERSION_PATCH)
            fail("plait_version gave %d.%d.%d, header says %d.%d.%d", ma, mi, pa,
                 PLAIT_VERSION_MAJOR, PLAIT_VERSION_MINOR, PLAIT_VERSION_PATCH);
        for (int c = PLAIT_ERR_INTERNAL; c <= PLAIT_OK; c++) {
            const char *t = plait_strerror(c);
            if (!t || !*t)
                fail("plait_strerror(%d) is empty", c);
            for (int c2 = PLAIT_ERR_INTERNAL; c2 < c && t; c2++)
                if (plait_strerror(c2) && strcmp(plait_strerror(c2), t) == 0)
                    fail("plait_strerror(%d) == plait_strerror(%d) = \"%s\"", c, c2, t);
        }
        if (!plait_strerror(12345))
            fail("plait_strerror(12345) is NULL");
    }
    s = getenv("PLAIT_EDGES_BIG");
    g_big = s && *s ? (size_t)strtoull(s, NULL, 0)
                    : (g_size <= 4 ? (size_t)8 << 20 : (size_t)4 << 20);
    if (g_rank == 0) {
        printf("coll_edges: %d ranks, seed %" PRIu64 " (PLAIT_TEST_SEED=%" PRIu64
               " reproduces), large = %zu bytes\n", g_size, g_seed, g_seed, g_big);
        fflush(stdout);
    }

    for (size_t i = 0; i < sizeof SECTIONS / sizeof SECTIONS[0]; i++) {
        int want = argc < 2;
        for (int a = 1; a < argc; a++)
            want |= strcmp(argv[a], SECTIONS[i].name) == 0;
        if (!want)
            continue;
        double t0 = plait_wtime();
        long f0 = g_fails;
        ctr_reset(SECTIONS[i].name);
        SECTIONS[i].fn();
        if (g_rank == 0) {
            printf("coll_edges: section %-8s %s (%.2f s)\n", SECTIONS[i].name,
                   g_fails == f0 ? "done" : "FAILED on rank 0", plait_wtime() - t0);
            fflush(stdout);
        }
    }

    for (size_t i = 0; i < sizeof EXPLICIT / sizeof EXPLICIT[0]; i++)
        for (int a = 1; a < argc; a++)
            if (strcmp(argv[a], EXPLICIT[i].name) == 0) {
                ctr_reset(EXPLICIT[i].name);
                EXPLICIT[i].fn();
                if (g_rank == 0)
                    printf("coll_edges: section %s finished\n", EXPLICIT[i].name);
            }

    /* total of failures over every rank */
    long long mine = g_fails, total = 0;
    set_case("summary");
    CALL(plait_allreduce(&mine, &total, 1, PLAIT_INT64, PLAIT_SUM, g_world));
    if (g_rank == 0) {
        if (total == 0)
            printf("coll_edges: %d ranks, seed %" PRIu64 ": %ld checks on rank 0, all ok\n",
                   g_size, g_seed, g_checks);
        else
            printf("FAIL rank 0 case summary seed %" PRIu64 ": %lld failures over all ranks\n",
                   g_seed, total);
        fflush(stdout);
    }
    CALL(plait_finalize());
    /* after finalize: not initialized, no world; a collective on the old
     * world handle fails with PLAIT_ERR_STATE (API.md: "PLAIT_ERR_STATE outside
     * init..finalize") */
    set_case("after-finalize");
    if (plait_initialized(&flag) != PLAIT_OK || flag != 0)
        fail("plait_initialized after finalize: flag %d, want 0", flag);
    if (plait_comm_world() != NULL)
        fail("plait_comm_world() after finalize is not NULL");
    {
        int x = 1, y = 0;
        prc = plait_allreduce(&x, &y, 1, PLAIT_INT32, PLAIT_SUM, g_world);
        if (prc != PLAIT_ERR_STATE)
            fail("plait_allreduce on the world after finalize returned %d (%s), want "
                 "PLAIT_ERR_STATE", prc, plait_strerror(prc));
    }
    return (g_fails || total) ? 1 : 0;
}
