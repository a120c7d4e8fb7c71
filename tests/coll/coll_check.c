/*
 * coll_check.c -- correctness of every collective, written against plait.h
 * only; run under plaitrun by t-coll.sh (which forces algorithms through the
 * PLAIT_<COLL>_ALGO settings, one job per choice).
 *
 * Every input element is a pure function of (seed, call number, sender rank,
 * index), so each rank computes the result it expects from all ranks' inputs
 * on its own, independently of the library. Floating-point inputs are small
 * integers (sums, products of +-1/+-2, min, max are then exact in every
 * type and every order), so results must match bit for bit; a second check
 * uses random fractions, where order matters, and requires that all ranks
 * got bitwise the same allreduce result (hashes compared over pt2pt).
 * Output buffers are poisoned and guarded on both sides; inputs must come
 * back unchanged; ranks that get nothing (non-roots) must find their buffer
 * untouched.
 *
 * Modes (argv[1]):
 *   suite    the full matrix on the world and on a split communicator, plus
 *            several non-blocking collectives in flight at once
 *   mixed    the bitwise-identity check only, each rank using a different
 *            reduction kernel family (PLAIT_REDUCE_ISA by PMIX_RANK)
 *   errors   argument checks and mismatched arguments across ranks (expects
 *            a small PLAIT_TIMEOUT)
 *   rootmismatch  a 4 MB bcast with mismatched roots and a barrier, then
 *            finalize must return PLAIT_OK everywhere (small PLAIT_TIMEOUT);
 *            a rank whose bcast returned PLAIT_OK must hold its root's data
 *   rootdata the same with 16 floats (for the forced bcast schedules)
 *   hangpeer the last rank sleeps through an allreduce: the others time out,
 *            the one sharing its host saying it waited to withdraw its sends
 *            (small PLAIT_TIMEOUT; the last two ranks on one host)
 *   rewait   the first half of the ranks start an iallreduce late: the
 *            others' first plait_wait times out, the next one completes it
 *            (small PLAIT_TIMEOUT)
 *   badalgo  plait_init must fail with PLAIT_ERR_ARG listing the choices
 * argv[2] "reduced": the suite with 6 datatypes (every size class, signedness
 * and float kind) instead of all 11, for the larger, oversubscribed runs.
 * Env: PLAIT_TEST_SEED, PLAIT_TEST_QUICK=1 (no MiB sizes).
 * Prints "coll_check: N calls ok" on rank 0; exits 1 on the first failure.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plait.h"

#define GUARD 64
#define POISON 0xA5
#define GUARDB 0x5A

static uint64_t seed = 20261121;
static int wrank = -1, quick, reduced;
static unsigned long ncalls;
static const char *where = "setup";

#define FAIL(...)                                                                  \
    do {                                                                           \
        fprintf(stderr, "FAIL rank %d [%s] seed %llu line %d: ", wrank, where,     \
                (unsigned long long)seed, __LINE__);                               \
        fprintf(stderr, __VA_ARGS__);                                              \
        fprintf(stderr, "\n");                                                     \
        fflush(stderr);                                                            \
        exit(1);                                                                   \
    } while (0)
#define CHECK_RC(call)                                                             \
    do {                                                                           \
        int rc_ = (call);                                                          \
        if (rc_ != PLAIT_OK)                                                       \
            FAIL("%s -> %d (%s): %s", #call, rc_, plait_strerror(rc_), plait_last_error()); \
    } while (0)

static const char *dt_names[] = {"byte", "int8", "uint8", "int32", "uint32", "int64", "uint64",
                                 "float16", "bfloat16", "float32", "float64"};
static const char *op_names[] = {"sum", "prod", "min", "max", "avg"};

/* ------------------------------------------------------------- data */

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t raw(unsigned long call, int rank, size_t i)
{
    return mix(seed ^ mix(call * 0x10001ull + (uint64_t)rank * 0x7777ull) ^ mix(i + 12345));
}

static int is_float(plait_dtype_t dt)
{
    return dt == PLAIT_FLOAT16 || dt == PLAIT_BFLOAT16 || dt == PLAIT_FLOAT32 ||
           dt == PLAIT_FLOAT64;
}

/* The exact value a float input has: a small integer (+-1/+-2 for PROD). */
static double fval(uint64_t r, plait_op_t op)
{
    static const double pm[] = {-2, -1, 1, 2};
    return op == PLAIT_PROD ? pm[r & 3] : (double)(int)(r % 17) - 8;
}

/* float -> binary16 / bfloat16 with round to nearest-even, by the compiler
 * where it can (an implementation independent of the library's). */
static uint16_t to_f16(float f)
{
#ifdef __FLT16_MAX__
    _Float16 h = (_Float16)f;
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
#else
    /* exact for the values used here (integers < 2048 and their quotients) */
    uint32_t x, sign, e, m, rnd;
    memcpy(&x, &f, 4);
    sign = (x >> 16) & 0x8000u;
    if ((x & 0x7fffffffu) == 0)
        return (uint16_t)sign;
    e = ((x >> 23) & 0xff) - 127 + 15;
    m = x & 0x7fffffu;
    rnd = (m >> 13) + (((m >> 12) & 1) && ((m & 0x2fffu) || ((m >> 13) & 1)));
    return (uint16_t)(sign | ((e << 10) + rnd));
#endif
}

static uint16_t to_bf16(float f)
{
    uint32_t x, lsb;
    memcpy(&x, &f, 4);
    lsb = (x >> 16) & 1u;
    return (uint16_t)((x + 0x7fffu + lsb) >> 16);
}

static float bf16_val(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static float f16_val(uint16_t h)
{
#ifdef __FLT16_MAX__
    _Float16 v;
    memcpy(&v, &h, 2);
    return (float)v;
#else
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v = (float)(e ? 1024 + m : m);
    for (int k = e ? e - 25 : -24; k < 0; k++)
        v *= 0.5f;
    for (int k = e - 25; k > 0; k--)
        v *= 2.0f;
    return h & 0x8000 ? -v : v;
#endif
}

/* Stores value v (floats) or raw bits r (integers) as element i of dt. */
static void put(plait_dtype_t dt, void *buf, size_t i, uint64_t r, double v)
{
    char *b = buf;
    switch (dt) {
    case PLAIT_BYTE: case PLAIT_INT8: case PLAIT_UINT8: b[i] = (char)r; break;
    case PLAIT_INT32: case PLAIT_UINT32: { uint32_t x = (uint32_t)r; memcpy(b + i * 4, &x, 4); break; }
    case PLAIT_INT64: case PLAIT_UINT64: memcpy(b + i * 8, &r, 8); break;
    case PLAIT_FLOAT16: { uint16_t h = to_f16((float)v); memcpy(b + i * 2, &h, 2); break; }
    case PLAIT_BFLOAT16: { uint16_t h = to_bf16((float)v); memcpy(b + i * 2, &h, 2); break; }
    case PLAIT_FLOAT32: { float f = (float)v; memcpy(b + i * 4, &f, 4); break; }
    case PLAIT_FLOAT64: memcpy(b + i * 8, &v, 8); break;
    }
}

/* Input element i of rank's buffer in call `call`. */
static void gen(plait_dtype_t dt, plait_op_t op, unsigned long call, int rank, size_t i, void *buf,
                size_t at)
{
    uint64_t r = raw(call, rank, i);
    put(dt, buf, at, r, is_float(dt) ? fval(r, op) : 0);
}

static void fill_input(plait_dtype_t dt, plait_op_t op, unsigned long call, int rank, void *buf,
                       size_t n)
{
    for (size_t i = 0; i < n; i++)
        gen(dt, op, call, rank, i, buf, i);
}

/* Integer reduction with wrap-around at the type's width. */
static uint64_t ired(plait_dtype_t dt, plait_op_t op, uint64_t acc, uint64_t x)
{
    int bits = dt == PLAIT_INT8 || dt == PLAIT_UINT8 ? 8 : dt == PLAIT_INT32 || dt == PLAIT_UINT32 ? 32 : 64;
    int sgn = dt == PLAIT_INT8 || dt == PLAIT_INT32 || dt == PLAIT_INT64;
    uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    int64_t sa, sx;
    acc &= mask;
    x &= mask;
    switch (op) {
    case PLAIT_SUM: return (acc + x) & mask;
    case PLAIT_PROD: return (acc * x) & mask;
    default: break;
    }
    if (sgn) {
        sa = bits == 64 ? (int64_t)acc : (int64_t)(acc << (64 - bits)) >> (64 - bits);
        sx = bits == 64 ? (int64_t)x : (int64_t)(x << (64 - bits)) >> (64 - bits);
        return (op == PLAIT_MIN ? sx < sa : sx > sa) ? x : acc;
    }
    return (op == PLAIT_MIN ? x < acc : x > acc) ? x : acc;
}

/* Expected element: op over ranks 0..n-1 of their input element i. */
static void expect_red(plait_dtype_t dt, plait_op_t op, unsigned long call, int n, size_t i,
                       void *out)
{
    if (!is_float(dt)) {
        uint64_t acc = raw(call, 0, i);
        for (int r = 1; r < n; r++)
            acc = ired(dt, op, acc, raw(call, r, i));
        put(dt, out, 0, acc, 0);
        return;
    }
    double acc = fval(raw(call, 0, i), op);
    for (int r = 1; r < n; r++) {
        double x = fval(raw(call, r, i), op);
        acc = op == PLAIT_PROD ? acc * x : op == PLAIT_MIN ? (x < acc ? x : acc)
            : op == PLAIT_MAX ? (x > acc ? x : acc) : acc + x;
    }
    if (op == PLAIT_AVG) {   /* the exact sum, divided once in the type's arithmetic */
        if (dt == PLAIT_FLOAT64) {
            acc = acc / n;
        } else {
            float q = (float)acc / (float)n;
            if (dt == PLAIT_FLOAT16) {
                uint16_t h = to_f16(q);
                memcpy(out, &h, 2);
                return;
            }
            if (dt == PLAIT_BFLOAT16) {
                uint16_t h = to_bf16(q);
                memcpy(out, &h, 2);
                return;
            }
            acc = q;
        }
    }
    put(dt, out, 0, 0, acc);
}

/* ------------------------------------------------------- guarded buffers */

static void *galloc(size_t bytes)
{
    unsigned char *p = malloc(bytes + 2 * GUARD);
    if (!p)
        FAIL("out of memory (%zu bytes)", bytes);
    memset(p, GUARDB, GUARD);
    memset(p + GUARD, POISON, bytes);
    memset(p + GUARD + bytes, GUARDB, GUARD);
    return p + GUARD;
}

static void gcheck_free(void *buf, size_t bytes, const char *name)
{
    unsigned char *p = (unsigned char *)buf - GUARD;
    for (size_t i = 0; i < GUARD; i++)
        if (p[i] != GUARDB || p[GUARD + bytes + i] != GUARDB)
            FAIL("%s: guard byte %s the buffer overwritten", name,
                 p[i] != GUARDB ? "before" : "after");
    free(p);
}

static void check_poison(const void *buf, size_t bytes, const char *name)
{
    const unsigned char *p = buf;
    for (size_t i = 0; i < bytes; i++)
        if (p[i] != POISON)
            FAIL("%s: byte %zu was written (0x%02x) though this rank gets nothing", name, i, p[i]);
}

/* Compares element i of got with the expectation; names the first mismatch. */
static void check_elem(plait_dtype_t dt, const void *got, size_t i, const void *want,
                       const char *what)
{
    size_t es = plait_dtype_size(dt);
    if (memcmp((const char *)got + i * es, want, es)) {
        uint64_t g = 0, w = 0;
        memcpy(&g, (const char *)got + i * es, es);
        memcpy(&w, want, es);
        FAIL("%s: element %zu is 0x%llx, expected 0x%llx", what, i, (unsigned long long)g,
             (unsigned long long)w);
    }
}

/* Input buffers must come back as they were given. */
static void check_input(plait_dtype_t dt, plait_op_t op, unsigned long call, int rank,
                        const void *buf, size_t n)
{
    char want[8];
    for (size_t i = 0; i < n; i++) {
        gen(dt, op, call, rank, i, want, 0);
        check_elem(dt, buf, i, want, "input buffer changed");
    }
}

/* Completes a non-blocking collective with a test loop that computes in
 * between (so progress must come from plait_test). */
static volatile double sink;
static void finish(plait_request_t *req)
{
    int done = 0;
    double x = 1;
    while (!done) {
        CHECK_RC(plait_test(req, &done, NULL));
        for (int i = 0; i < 200; i++)
            x = x * 1.0000001 + 1e-9;
    }
    sink = x;
    if (*req)
        FAIL("plait_test left *req set after completion");
}

/* ------------------------------------------------------------- the cases */

typedef struct {
    plait_comm_t comm;
    int rank, size;
} ctx_t;

typedef struct {
    plait_dtype_t dt;
    plait_op_t op;
    size_t count;
    int inplace, root, nb;
    unsigned long call;
    char name[160];
} case_t;

/* Result element i (input element gi) of a reduction over n ranks:
 * bitwise as expect_red, but for float16 AVG over a size other than a
 * power of two. There each rank's input is multiplied by 1/n before the sum
 * (coll/api.c, coll_avg16), and the last bits depend on the order of
 * the sum, which the algorithm chooses: the result must lie within n/256
 * of the exact average (the inputs are integers in [-8, 8], their scaled
 * parts and partial sums below 8, each rounded by at most 2^-9). For a
 * power of two every step is exact and the bitwise check holds. */
static void check_red(const case_t *c, int n, const void *out, size_t i, size_t gi)
{
    char want[8];
    if (c->dt == PLAIT_FLOAT16 && c->op == PLAIT_AVG && (n & (n - 1))) {
        double exact = 0, got = f16_val(((const uint16_t *)out)[i]);
        for (int r = 0; r < n; r++)
            exact += fval(raw(c->call, r, gi), c->op);
        exact /= n;
        if (!(got - exact <= n / 256.0 && exact - got <= n / 256.0))
            FAIL("%s: element %zu is %g, exact average %g (float16 AVG, %d ranks)", c->name, i,
                 got, exact, n);
        return;
    }
    expect_red(c->dt, c->op, c->call, n, gi, want);
    check_elem(c->dt, out, i, want, c->name);
}

#define NB_OR(c, blocking, ...) \
    do { if ((c)->nb) { plait_request_t rq_ = NULL; CHECK_RC(__VA_ARGS__); finish(&rq_); } \
         else CHECK_RC(blocking); } while (0)

static void t_allreduce(ctx_t *x, case_t *c)
{
    size_t es = plait_dtype_size(c->dt), n = c->count, b = n * es;
    char *in = galloc(b), *out = c->inplace ? in : galloc(b);
    fill_input(c->dt, c->op, c->call, x->rank, in, n);
    NB_OR(c, plait_allreduce(in, out, n, c->dt, c->op, x->comm),
          plait_iallreduce(in, out, n, c->dt, c->op, x->comm, &rq_));
    for (size_t i = 0; i < n; i++)
        check_red(c, x->size, out, i, i);
    if (!c->inplace) {
        check_input(c->dt, c->op, c->call, x->rank, in, n);
        gcheck_free(out, b, c->name);
    }
    gcheck_free(in, b, c->name);
}

static void t_reduce(ctx_t *x, case_t *c)
{
    size_t es = plait_dtype_size(c->dt), n = c->count, b = n * es;
    int root = c->root, me = x->rank == root;
    char *in = galloc(b), *out = c->inplace && me ? in : galloc(b);
    fill_input(c->dt, c->op, c->call, x->rank, in, n);
    NB_OR(c, plait_reduce(in, out, n, c->dt, c->op, root, x->comm),
          plait_ireduce(in, out, n, c->dt, c->op, root, x->comm, &rq_));
    if (me) {
        for (size_t i = 0; i < n; i++)
            check_red(c, x->size, out, i, i);
    } else {
        check_poison(out, b, c->name);
    }
    if (out != in) {
        check_input(c->dt, c->op, c->call, x->rank, in, n);
        gcheck_free(out, b, c->name);
    }
    gcheck_free(in, b, c->name);
}

static void t_reduce_scatter(ctx_t *x, case_t *c)
{
    size_t es = plait_dtype_size(c->dt), n = c->count, nn = n * (size_t)x->size;
    char *in = galloc(nn * es), *out = c->inplace ? in : galloc(n * es);
    fill_input(c->dt, c->op, c->call, x->rank, in, nn);
    NB_OR(c, plait_reduce_scatter(in, out, n, c->dt, c->op, x->comm),
          plait_ireduce_scatter(in, out, n, c->dt, c->op, x->comm, &rq_));
    for (size_t i = 0; i < n; i++)
        check_red(c, x->size, out, i, (size_t)x->rank * n + i);
    if (!c->inplace) {
        check_input(c->dt, c->op, c->call, x->rank, in, nn);
        gcheck_free(out, n * es, c->name);
    }
    gcheck_free(in, nn * es, c->name);
}

static void t_allgather(ctx_t *x, case_t *c)
{
    size_t es = plait_dtype_size(c->dt), n = c->count, nn = n * (size_t)x->size;
    char *out = galloc(nn * es), *in = c->inplace ? out + (size_t)x->rank * n * es : galloc(n * es);
    char want[8];
    fill_input(c->dt, c->op, c->call, x->rank, in, n);
    NB_OR(c, plait_allgather(c->inplace ? out : in, out, n, c->dt, x->comm),
          plait_iallgather(c->inplace ? out : in, out, n, c->dt, x->comm, &rq_));
    for (int r = 0; r < x->size; r++)
        for (size_t i = 0; i < n; i++) {
            gen(c->dt, c->op, c->call, r, i, want, 0);
            check_elem(c->dt, out, (size_t)r * n + i, want, c->name);
        }
    if (!c->inplace) {
        check_input(c->dt, c->op, c->call, x->rank, in, n);
        gcheck_free(in, n * es, c->name);
    }
    gcheck_free(out, nn * es, c->name);
}

static void t_bcast(ctx_t *x, case_t *c)
{
    size_t es = plait_dtype_size(c->dt), n = c->count;
    char *buf = galloc(n * es), want[8];
    if (x->rank == c->root)
        fill_input(c->dt, c->op, c->call, c->root, buf, n);
    NB_OR(c, plait_bcast(buf, n, c->dt, c->root, x->comm),
          plait_ibcast(buf, n, c->dt, c->root, x->comm, &rq_));
    for (size_t i = 0; i < n; i++) {
        gen(c->dt, c->op, c->call, c->root, i, want, 0);
        check_elem(c->dt, buf, i, want, c->name);
    }
    gcheck_free(buf, n * es, c->name);
}

static void t_alltoall(ctx_t *x, case_t *c)
{
    size_t es = plait_dtype_size(c->dt), n = c->count, nn = n * (size_t)x->size;
    char *in = galloc(nn * es), *out = c->inplace ? in : galloc(nn * es), want[8];
    fill_input(c->dt, c->op, c->call, x->rank, in, nn);
    NB_OR(c, plait_alltoall(in, out, n, c->dt, x->comm),
          plait_ialltoall(in, out, n, c->dt, x->comm, &rq_));
    for (int r = 0; r < x->size; r++)   /* block r came from rank r's block (me) */
        for (size_t i = 0; i < n; i++) {
            gen(c->dt, c->op, c->call, r, (size_t)x->rank * n + i, want, 0);
            check_elem(c->dt, out, (size_t)r * n + i, want, c->name);
        }
    if (!c->inplace) {
        check_input(c->dt, c->op, c->call, x->rank, in, nn);
        gcheck_free(out, nn * es, c->name);
    }
    gcheck_free(in, nn * es, c->name);
}

/* alltoallv: rank i sends cnt(i, j) elements to j; blocks are packed with a
 * one-element gap (which must stay poisoned out of place). */
static size_t av_cnt(const case_t *c, int i, int j)
{
    return ((size_t)i * 3 + (size_t)j * 5 + c->call) % (c->count + 1);
}

static void t_alltoallv(ctx_t *x, case_t *c)
{
    int P = x->size, me = x->rank;
    size_t es = plait_dtype_size(c->dt), sc[64], sd[64], rc[64], rd[64], se = 0, re = 0, ext;
    char *in, *out, want[8];
    for (int j = 0; j < P; j++) {
        sc[j] = av_cnt(c, me, j);
        sd[j] = se;
        se += sc[j] + 1;
        rc[j] = av_cnt(c, j, me);
        rd[j] = re;
        re += rc[j] + 1;
    }
    ext = se > re ? se : re;
    in = galloc(ext * es);
    out = c->inplace ? in : galloc(re * es);
    for (int j = 0; j < P; j++)
        for (size_t i = 0; i < sc[j]; i++)   /* element index = position in the sender's buffer */
            gen(c->dt, c->op, c->call, me, sd[j] + i, in, sd[j] + i);
    NB_OR(c, plait_alltoallv(in, sc, sd, out, rc, rd, c->dt, x->comm),
          plait_ialltoallv(in, sc, sd, out, rc, rd, c->dt, x->comm, &rq_));
    for (int i = 0; i < P; i++) {
        size_t off = 0;    /* rank i's displacement of its block for me */
        for (int j = 0; j < me; j++)
            off += av_cnt(c, i, j) + 1;
        for (size_t e = 0; e < rc[i]; e++) {
            gen(c->dt, c->op, c->call, i, off + e, want, 0);
            check_elem(c->dt, out, rd[i] + e, want, c->name);
        }
        if (!c->inplace)
            check_poison(out + (rd[i] + rc[i]) * es, es, c->name);
    }
    if (!c->inplace)
        gcheck_free(out, re * es, c->name);
    gcheck_free(in, ext * es, c->name);
}

static void t_gather(ctx_t *x, case_t *c)
{
    size_t es = plait_dtype_size(c->dt), n = c->count, nn = n * (size_t)x->size;
    int me = x->rank == c->root, inpl = c->inplace && me;
    char *out = galloc(nn * es), *in = inpl ? out + (size_t)x->rank * n * es : galloc(n * es);
    char want[8];
    fill_input(c->dt, c->op, c->call, x->rank, in, n);
    NB_OR(c, plait_gather(inpl ? out : in, out, n, c->dt, c->root, x->comm),
          plait_igather(inpl ? out : in, out, n, c->dt, c->root, x->comm, &rq_));
    if (me) {
        for (int r = 0; r < x->size; r++)
            for (size_t i = 0; i < n; i++) {
                gen(c->dt, c->op, c->call, r, i, want, 0);
                check_elem(c->dt, out, (size_t)r * n + i, want, c->name);
            }
    } else {
        check_poison(out, nn * es, c->name);
    }
    if (!inpl) {
        check_input(c->dt, c->op, c->call, x->rank, in, n);
        gcheck_free(in, n * es, c->name);
    }
    gcheck_free(out, nn * es, c->name);
}

static void t_scatter(ctx_t *x, case_t *c)
{
    size_t es = plait_dtype_size(c->dt), n = c->count, nn = n * (size_t)x->size;
    int me = x->rank == c->root, inpl = c->inplace && me;
    char *in = galloc(nn * es), *out = inpl ? in : galloc(n * es), want[8];
    if (me)
        fill_input(c->dt, c->op, c->call, c->root, in, nn);
    NB_OR(c, plait_scatter(in, out, n, c->dt, c->root, x->comm),
          plait_iscatter(in, out, n, c->dt, c->root, x->comm, &rq_));
    if (me)
        check_input(c->dt, c->op, c->call, c->root, in, nn);
    else
        check_poison(in, nn * es, c->name);
    if (!inpl) {
        for (size_t i = 0; i < n; i++) {
            gen(c->dt, c->op, c->call, c->root, (size_t)x->rank * n + i, want, 0);
            check_elem(c->dt, out, i, want, c->name);
        }
        gcheck_free(out, n * es, c->name);
    }
    gcheck_free(in, nn * es, c->name);
}

/* ------------------------------------------------------------- drivers */

typedef void (*case_fn)(ctx_t *, case_t *);
static const struct { const char *name; case_fn fn; int reduces, rooted, has_inplace; } colls[] = {
    {"allreduce", t_allreduce, 1, 0, 1},   {"reduce", t_reduce, 1, 1, 1},
    {"reduce_scatter", t_reduce_scatter, 1, 0, 1}, {"allgather", t_allgather, 0, 0, 1},
    {"bcast", t_bcast, 0, 1, 0},           {"alltoall", t_alltoall, 0, 0, 1},
    {"alltoallv", t_alltoallv, 0, 0, 1},   {"gather", t_gather, 0, 1, 1},
    {"scatter", t_scatter, 0, 1, 1},
};
#define NCOLLS (int)(sizeof colls / sizeof colls[0])

static unsigned long call_no;

static void run_case(ctx_t *x, int k, plait_dtype_t dt, plait_op_t op, size_t count, int inplace,
                     const char *label)
{
    case_t c;
    memset(&c, 0, sizeof c);
    c.dt = dt;
    c.op = op;
    c.count = count;
    c.inplace = inplace;
    c.call = ++call_no;
    c.root = colls[k].rooted ? (int)(c.call % (unsigned long)x->size) : 0;
    c.nb = (int)(c.call % 3 == 0);          /* every third call non-blocking */
    snprintf(c.name, sizeof c.name, "%s %s %s %s count %zu root %d %s on %s", colls[k].name,
             dt_names[dt], colls[k].reduces ? op_names[op] : "-", inplace ? "in-place" : "out-of-place",
             count, c.root, c.nb ? "non-blocking" : "blocking", label);
    where = c.name;
    colls[k].fn(x, &c);
    ncalls++;
}

static int op_ok(plait_dtype_t dt, plait_op_t op)
{
    return dt != PLAIT_BYTE && (op != PLAIT_AVG || is_float(dt));
}

/* Every collective x dtype x op x in-place, for each count. */
static void suite(ctx_t *x, const size_t *counts, int ncounts, const plait_dtype_t *dts, int ndts,
                  const char *label)
{
    for (int k = 0; k < NCOLLS; k++)
        for (int d = 0; d < ndts; d++)
            for (int op = 0; op <= (colls[k].reduces ? PLAIT_AVG : 0); op++) {
                if (colls[k].reduces && !op_ok(dts[d], (plait_op_t)op))
                    continue;
                for (int ci = 0; ci < ncounts; ci++)
                    for (int ip = 0; ip <= colls[k].has_inplace; ip++)
                        run_case(x, k, dts[d], (plait_op_t)op, counts[ci], ip, label);
            }
}

/* MiB-sized calls (1 MiB in all), one type per collective, both placements. */
static void suite_large(ctx_t *x, const char *label)
{
    for (int k = 0; k < NCOLLS; k++) {
        const char *nm = colls[k].name;
        int blocks = strcmp(nm, "allreduce") && strcmp(nm, "reduce") && strcmp(nm, "bcast");
        size_t count = ((size_t)1 << 18) / (size_t)(blocks ? x->size : 1) + 3;
        for (int ip = 0; ip <= colls[k].has_inplace; ip++)
            run_case(x, k, colls[k].reduces ? PLAIT_FLOAT32 : PLAIT_INT32, PLAIT_SUM, count, ip,
                     label);
    }
}

/* Random fractions: order matters, so the check is that every rank holds
 * bitwise the same allreduce result (and that it is close to the exact one). */
static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* Fails unless every rank holds the same n bytes at p: hashes compared over
 * pt2pt, not through the collectives under test. */
static void same_everywhere(ctx_t *x, const void *p, size_t n, const char *name)
{
    uint64_t h = hash_bytes(p, n), other;
    if (x->rank == 0) {
        for (int r = 1; r < x->size; r++) {
            CHECK_RC(plait_recv(&other, 8, PLAIT_BYTE, r, 777, x->comm, NULL));
            if (other != h)
                FAIL("%s: rank %d's result differs from rank 0's", name, r);
        }
    } else {
        CHECK_RC(plait_send(&h, 8, PLAIT_BYTE, 0, 777, x->comm));
    }
}

/* Special values (NaNs of both signs with different payloads, quiet and
 * signalling, infinities, zeros, subnormals, extremes), every pair of them
 * across ranks 0 and 1 (the others add a zero), through allreduce of every
 * float type and op: with a different kernel family on each rank the
 * results must still be bitwise identical (the avx512 half-precision
 * kernel once took the right operand's NaN where the others took the left
 * one's). */
/* Element es bytes at p of dt as a double, NaN by its bits (f16_val's
 * fallback has no NaN). */
static double spec_val(plait_dtype_t dt, const void *p)
{
    uint16_t h;
    float f;
    if (dt == PLAIT_FLOAT32) {
        memcpy(&f, p, 4);
        return f;
    }
    memcpy(&h, p, 2);
    if (dt == PLAIT_FLOAT16 ? (h & 0x7c00) == 0x7c00 && (h & 0x3ff)
                            : (h & 0x7f80) == 0x7f80 && (h & 0x7f))
        return NAN;
    return dt == PLAIT_FLOAT16 ? f16_val(h) : bf16_val(h);
}

/* MIN / MAX of the special values against IEEE 754-2019 minimum / maximum,
 * computed here: whatever order the algorithm combined the ranks in, a NaN
 * from rank 0 or 1 comes out, and else the least (greatest) of their values
 * and the other ranks' +0, -0 below +0. (A black-box test saw MAX keep a
 * NaN only from the last rank.) */
static void minmax_special(const ctx_t *x, plait_dtype_t dt, plait_op_t op, const void *t0,
                           const void *t1, const void *out, const char *name)
{
    double v[3] = {spec_val(dt, t0), spec_val(dt, t1), 0.0}, want = v[0], got;
    int nv = x->size < 2 ? 1 : x->size == 2 ? 2 : 3, nan = isnan(v[0]);
    for (int k = 1; k < nv; k++) {
        nan |= isnan(v[k]);
        if (op == PLAIT_MIN ? v[k] < want || (v[k] == want && signbit(v[k]))
                            : v[k] > want || (v[k] == want && !signbit(v[k])))
            want = v[k];
    }
    got = spec_val(dt, out);
    if (nan ? !isnan(got) : got != want || !signbit(got) != !signbit(want))
        FAIL("%s: %s of %g and %g (and %d zeros) is %g, not %g", name, op_names[op], v[0], v[1],
             x->size - 2 > 0 ? x->size - 2 : 0, got, nan ? NAN : want);
}

static void special_check(ctx_t *x, const char *label)
{
    static const uint16_t h16[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e01, 0xfe02, 0x7d03,
                                   0x0001, 0x7bff, 0x3c00, 0xbc00, 0x03ff};
    static const uint16_t b16[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc1, 0xffc2, 0x7f83,
                                   0x0001, 0x7f7f, 0x3f80, 0xbf80, 0x007f};
    static const uint32_t f32[] = {0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00001,
                                   0xffc00002, 0x7fa00003, 0x00000001, 0x7f7fffff, 0x3f800000,
                                   0xbf800000, 0x007fffff};
    static const plait_op_t ops[] = {PLAIT_SUM, PLAIT_PROD, PLAIT_MIN, PLAIT_MAX, PLAIT_AVG};
    enum { K = 12 };
    for (int d = 0; d < 3; d++)
        for (int o = 0; o < 5; o++) {
            plait_dtype_t dt = d == 0 ? PLAIT_FLOAT16 : d == 1 ? PLAIT_BFLOAT16 : PLAIT_FLOAT32;
            size_t es = plait_dtype_size(dt), n = K * K;
            char *in = calloc(n, es), *out = malloc(n * es), name[128];
            for (size_t i = 0; i < n && x->rank < 2; i++) {
                size_t k = x->rank == 0 ? i / K : i % K;
                if (d == 2)
                    memcpy(in + i * es, &f32[k], es);
                else
                    memcpy(in + i * es, d == 0 ? &h16[k] : &b16[k], es);
            }
            snprintf(name, sizeof name, "special values, allreduce %s %s on %s", dt_names[dt],
                     op_names[ops[o]], label);
            where = name;
            CHECK_RC(plait_allreduce(in, out, n, dt, ops[o], x->comm));
            same_everywhere(x, out, n * es, name);
            for (size_t i = 0; i < n && (ops[o] == PLAIT_MIN || ops[o] == PLAIT_MAX); i++) {
                const void *tab = d == 2 ? (const void *)f32 : d == 0 ? (const void *)h16
                                                                      : (const void *)b16;
                minmax_special(x, dt, ops[o], (const char *)tab + i / K * es,
                               (const char *)tab + i % K * es, out + i * es, name);
            }
            free(in);
            free(out);
            ncalls++;
        }
}

/* float16 AVG where the sum leaves float16's range (65504) but the average
 * does not: every rank passes the same large values, so the exact average
 * is the input itself. It must come back finite and within n/1024 of it
 * (each scaled input and partial sum rounded once), the same on every rank,
 * blocking and not, in place and not, for allreduce, reduce and
 * reduce_scatter, at sizes that take the shared area, direct reads and
 * message schedules. (The sum was formed first: 2 ranks averaging 49152
 * got infinity, a black-box test.) */
static void avg16_range_check(ctx_t *x, const char *label)
{
    static const float big[] = {49152, -63136, 60000, -28928, 65000, 1.5f};
    static const size_t counts[] = {6, 1001, 70000};
    const int n = x->size;
    for (int ci = 0; ci < (quick ? 2 : 3); ci++)
        for (int k = 0; k < 5; k++) {   /* allreduce, its in-place and i- forms, reduce, rs */
            size_t m = counts[ci], nin = k == 4 ? m * (size_t)n : m;
            uint16_t *in = malloc(nin * 2), *out = k == 1 ? in : malloc(nin * 2);
            char name[128];
            for (size_t i = 0; i < nin; i++)
                in[i] = to_f16(big[i % 6]);
            snprintf(name, sizeof name, "float16 AVG of large values, %s count %zu on %s",
                     k < 3 ? "allreduce" : k == 3 ? "reduce" : "reduce_scatter", m, label);
            where = name;
            if (k == 2) {
                plait_request_t rq = NULL;
                CHECK_RC(plait_iallreduce(in, out, m, PLAIT_FLOAT16, PLAIT_AVG, x->comm, &rq));
                finish(&rq);
            } else if (k == 3) {
                CHECK_RC(plait_reduce(in, out, m, PLAIT_FLOAT16, PLAIT_AVG, 0, x->comm));
            } else if (k == 4) {
                CHECK_RC(plait_reduce_scatter(in, out, m, PLAIT_FLOAT16, PLAIT_AVG, x->comm));
            } else {
                CHECK_RC(plait_allreduce(in, out, m, PLAIT_FLOAT16, PLAIT_AVG, x->comm));
            }
            for (size_t i = 0; (k != 3 || x->rank == 0) && i < m; i++) {
                double want = f16_val(to_f16(big[(k == 4 ? (size_t)x->rank * m + i : i) % 6]));
                double got = f16_val(out[i]), tol = (want < 0 ? -want : want) * n / 1024.0;
                if (!(got - want <= tol && want - got <= tol))
                    FAIL("%s: element %zu is %g, the average is %g", name, i, got, want);
            }
            if (k < 3)
                same_everywhere(x, out, m * 2, name);
            if (out != in)
                free(out);
            free(in);
            ncalls++;
        }
}

static void identity_check(ctx_t *x, const char *label)
{
    static const plait_dtype_t fdts[] = {PLAIT_FLOAT16, PLAIT_BFLOAT16, PLAIT_FLOAT32, PLAIT_FLOAT64};
    static const plait_op_t fops[] = {PLAIT_SUM, PLAIT_AVG, PLAIT_PROD};
    static const size_t counts[] = {1, 5, 1001, 70000};
    for (int d = 0; d < 4; d++)
        for (int o = 0; o < 3; o++)
            for (int ci = 0; ci < (quick ? 3 : 4); ci++)
                for (int ip = 0; ip < 2; ip++) {
                    plait_dtype_t dt = fdts[d];
                    size_t n = counts[ci], es = plait_dtype_size(dt);
                    char *in = malloc(n * es), *out = ip ? in : malloc(n * es), name[128];
                    unsigned long call = ++call_no;
                    for (size_t i = 0; i < n; i++) {
                        uint64_t r = raw(call, x->rank, i);
                        double v = fops[o] == PLAIT_PROD ? 1.0 + ((double)(r % 1000) - 500) / 4096.0
                                                         : ((double)(r % 200001) - 100000) / 7919.0;
                        put(dt, in, i, r, v);
                    }
                    snprintf(name, sizeof name, "identity allreduce %s %s count %zu %s on %s",
                             dt_names[dt], op_names[fops[o]], n, ip ? "in-place" : "out-of-place",
                             label);
                    where = name;
                    CHECK_RC(plait_allreduce(in, out, n, dt, fops[o], x->comm));
                    for (size_t i = 0; fops[o] != PLAIT_PROD && i < n; i += 97) {
                        double exact = 0, tol = 0, got;
                        for (int r = 0; r < x->size; r++) {
                            double v = ((double)(raw(call, r, i) % 200001) - 100000) / 7919.0;
                            exact += v;
                            tol += v < 0 ? -v : v;
                        }
                        if (fops[o] == PLAIT_AVG) {
                            exact /= x->size;
                            tol /= x->size;
                        }
                        got = dt == PLAIT_FLOAT16 ? f16_val(((uint16_t *)out)[i])
                            : dt == PLAIT_BFLOAT16 ? bf16_val(((uint16_t *)out)[i])
                            : dt == PLAIT_FLOAT32 ? ((float *)out)[i] : ((double *)out)[i];
                        tol = (tol + 1) * (dt == PLAIT_FLOAT64 ? 1e-12 : dt == PLAIT_FLOAT32 ? 1e-5
                                           : dt == PLAIT_FLOAT16 ? 1e-2 : 6e-2);
                        if (got - exact > tol || exact - got > tol)
                            FAIL("%s: element %zu is %g, exact %g", name, i, got, exact);
                    }
                    same_everywhere(x, out, n * es, name);
                    if (!ip)
                        free(out);
                    free(in);
                    ncalls++;
                }
}

/* Every kind of non-blocking collective in flight at once on one comm,
 * progressed only by a test loop, then checked. */
static void inflight_check(ctx_t *x, const char *label)
{
    enum { N = 1000 };
    int P = x->size, me = x->rank, root = P - 1;
    size_t cnt[64], dsp[64];
    float *ar_in = malloc(N * 4), *ar_out = malloc(N * 4), *ag_out = malloc((size_t)P * N * 4);
    float *rs_in = malloc((size_t)P * N * 4), *rs_out = malloc(N * 4), *bc = malloc(N * 4);
    float *aa_in = malloc((size_t)P * N * 4), *aa_out = malloc((size_t)P * N * 4);
    float *av_out = malloc((size_t)P * N * 4), *re_out = malloc(N * 4);
    plait_request_t rq[9];
    int done[9] = {0}, left = 9;
    char name[96];
    snprintf(name, sizeof name, "9 non-blocking collectives in flight on %s", label);
    where = name;
    for (int i = 0; i < N; i++) {
        ar_in[i] = (float)(me + i % 7);
        bc[i] = me == root ? (float)(i * 3) : -1.0f;
    }
    for (int i = 0; i < P * N; i++) {
        rs_in[i] = (float)(me * 2 + i % 5);
        aa_in[i] = (float)(me * 100000 + i);
    }
    for (int j = 0; j < P; j++) {
        cnt[j] = N;
        dsp[j] = (size_t)j * N;
    }
    CHECK_RC(plait_iallreduce(ar_in, ar_out, N, PLAIT_FLOAT32, PLAIT_SUM, x->comm, &rq[0]));
    CHECK_RC(plait_iallgather(ar_in, ag_out, N, PLAIT_FLOAT32, x->comm, &rq[1]));
    CHECK_RC(plait_ireduce_scatter(rs_in, rs_out, N, PLAIT_FLOAT32, PLAIT_MAX, x->comm, &rq[2]));
    CHECK_RC(plait_ibcast(bc, N, PLAIT_FLOAT32, root, x->comm, &rq[3]));
    CHECK_RC(plait_ialltoall(aa_in, aa_out, N, PLAIT_FLOAT32, x->comm, &rq[4]));
    CHECK_RC(plait_ialltoallv(aa_in, cnt, dsp, av_out, cnt, dsp, PLAIT_FLOAT32, x->comm, &rq[5]));
    CHECK_RC(plait_ireduce(ar_in, re_out, N, PLAIT_FLOAT32, PLAIT_MIN, root, x->comm, &rq[6]));
    CHECK_RC(plait_ibarrier(x->comm, &rq[7]));
    CHECK_RC(plait_iallreduce(ar_in, ar_in, 0, PLAIT_FLOAT32, PLAIT_SUM, x->comm, &rq[8]));
    while (left) {     /* in reverse order of start, while computing */
        for (int k = 8; k >= 0; k--) {
            double y = 1;
            if (done[k])
                continue;
            CHECK_RC(plait_test(&rq[k], &done[k], NULL));
            left -= done[k];
            for (int i = 0; i < 100; i++)
                y = y * 1.000001 + 1e-7;
            sink = y;
        }
    }
    for (int i = 0; i < N; i++) {
        float s = 0;
        for (int r = 0; r < P; r++)
            s += (float)(r + i % 7);
        if (ar_out[i] != s || bc[i] != (float)(i * 3) ||
            rs_out[i] != (float)((P - 1) * 2 + (me * N + i) % 5))
            FAIL("%s: element %d wrong (allreduce %g, bcast %g, reduce_scatter %g)", name, i,
                 ar_out[i], bc[i], rs_out[i]);
        if (me == root && re_out[i] != (float)(i % 7))
            FAIL("%s: reduce element %d is %g", name, i, re_out[i]);
    }
    for (int r = 0; r < P; r++)
        for (int i = 0; i < N; i++) {
            float a2a = (float)(r * 100000 + me * N + i);
            if (ag_out[r * N + i] != (float)(r + i % 7) || aa_out[r * N + i] != a2a ||
                av_out[r * N + i] != a2a)
                FAIL("%s: block %d element %d wrong", name, r, i);
        }
    free(ar_in); free(ar_out); free(ag_out); free(rs_in); free(rs_out); free(bc);
    free(aa_in); free(aa_out); free(av_out); free(re_out);
    ncalls += 9;
}

static void run_all(ctx_t *x, int full, const char *label)
{
    static const plait_dtype_t all[] = {PLAIT_BYTE, PLAIT_INT8, PLAIT_UINT8, PLAIT_INT32,
                                        PLAIT_UINT32, PLAIT_INT64, PLAIT_UINT64, PLAIT_FLOAT16,
                                        PLAIT_BFLOAT16, PLAIT_FLOAT32, PLAIT_FLOAT64};
    static const plait_dtype_t some[] = {PLAIT_INT8, PLAIT_FLOAT16, PLAIT_FLOAT64};
    static const size_t counts[] = {0, 1, 7, 1000}, few[] = {1, 33, 4099};
    if (full && reduced) {   /* every size class, signedness and float kind */
        static const plait_dtype_t six[] = {PLAIT_INT8, PLAIT_UINT32, PLAIT_INT64, PLAIT_FLOAT16,
                                            PLAIT_BFLOAT16, PLAIT_FLOAT64};
        suite(x, counts, 4, six, 6, label);
        suite(x, few + 1, 2, (const plait_dtype_t[]){PLAIT_FLOAT32}, 1, label);
        if (!quick)
            suite_large(x, label);
    } else if (full) {
        suite(x, counts, 4, all, 11, label);
        suite(x, few + 1, 2, (const plait_dtype_t[]){PLAIT_FLOAT32, PLAIT_UINT64}, 2, label);
        if (!quick)
            suite_large(x, label);
    } else {
        suite(x, few, 3, some, 3, label);
    }
    identity_check(x, label);
    avg16_range_check(x, label);
    inflight_check(x, label);
}

/* ----------------------------------------------------------- error mode */

static void expect_arg(int rc, const char *call, const char *word)
{
    if (rc != PLAIT_ERR_ARG)
        FAIL("%s returned %d, expected PLAIT_ERR_ARG", call, rc);
    if (!strstr(plait_last_error(), word))
        FAIL("%s: plait_last_error() '%s' does not name '%s'", call, plait_last_error(), word);
}

static void errors(ctx_t *x)
{
    int v[64] = {0}, out[64], P = x->size;
    size_t c4[64], d4[64];
    double t0;
    where = "argument checks";
    expect_arg(plait_allreduce(v, out, 4, PLAIT_BYTE, PLAIT_SUM, x->comm), "allreduce BYTE", "BYTE");
    expect_arg(plait_allreduce(v, out, 4, PLAIT_INT32, PLAIT_AVG, x->comm), "allreduce int AVG", "AVG");
    expect_arg(plait_reduce_scatter(v, out, 1, PLAIT_UINT8, PLAIT_AVG, x->comm), "rs AVG", "AVG");
    expect_arg(plait_allreduce(v, out, 4, PLAIT_INT32, (plait_op_t)9, x->comm), "bad op", "op");
    expect_arg(plait_allreduce(v, out, 4, (plait_dtype_t)42, PLAIT_SUM, x->comm), "bad dt", "dt");
    expect_arg(plait_bcast(v, 4, PLAIT_INT32, P, x->comm), "bcast root=size", "root");
    expect_arg(plait_reduce(v, out, 4, PLAIT_INT32, PLAIT_SUM, -1, x->comm), "reduce root=-1", "root");
    expect_arg(plait_gather(v, out, 1, PLAIT_INT32, P + 3, x->comm), "gather root", "root");
    expect_arg(plait_allreduce(NULL, out, 4, PLAIT_INT32, PLAIT_SUM, x->comm), "NULL sendbuf", "sendbuf");
    expect_arg(plait_allgather(v, NULL, 1, PLAIT_INT32, x->comm), "NULL recvbuf", "recvbuf");
    expect_arg(plait_bcast(NULL, 1, PLAIT_INT32, 0, x->comm), "NULL buf", "buf");
    expect_arg(plait_allgather(v, out, SIZE_MAX / 2, PLAIT_INT32, x->comm), "overflow", "count");
    expect_arg(plait_alltoall(v, out, SIZE_MAX / 4, PLAIT_INT64, x->comm), "overflow", "count");
    /* an int -1 passed as count: no overflow with 1-byte elements, still no buffer */
    expect_arg(plait_bcast(v, (size_t)-1, PLAIT_BYTE, 0, x->comm), "bcast count -1", "count");
    expect_arg(plait_allreduce(v, out, (size_t)-1, PLAIT_UINT8, PLAIT_SUM, x->comm),
               "allreduce count -1", "count");
    expect_arg(plait_allreduce(v, out, 4, PLAIT_INT32, (plait_op_t)-1, x->comm), "op -1",
               "op -1 is not a plait_op_t");
    expect_arg(plait_allreduce(v, out, 4, PLAIT_INT32, PLAIT_SUM, NULL), "NULL comm", "comm");
    expect_arg(plait_iallreduce(v, out, 4, PLAIT_INT32, PLAIT_SUM, x->comm, NULL), "NULL req", "req");
    expect_arg(plait_alltoallv(v, NULL, d4, out, c4, d4, PLAIT_INT32, x->comm), "NULL counts", "sendcounts");
    for (int j = 0; j < P; j++) {
        c4[j] = 1;
        d4[j] = (size_t)j;
    }
    c4[x->rank] = 0;   /* sendcounts[me] != recvcounts[me] */
    {
        size_t r4[64];
        memcpy(r4, c4, sizeof r4);
        r4[x->rank] = 1;
        expect_arg(plait_alltoallv(v, c4, d4, out, r4, d4, PLAIT_INT32, x->comm), "self count", "sendcounts");
        /* an int -1 as a count, and a displacement whose block end wraps */
        memcpy(r4, c4, sizeof r4);
        r4[P - 1] = (size_t)-1;
        expect_arg(plait_alltoallv(v, r4, d4, out, c4, d4, PLAIT_INT32, x->comm), "sendcount -1",
                   "sdispls[");
        memcpy(r4, d4, sizeof r4);
        r4[P - 1] = SIZE_MAX - 1;
        expect_arg(plait_alltoallv(v, c4, d4, out, c4, r4, PLAIT_INT32, x->comm), "rdispl wraps",
                   "rdispls[");
    }
    /* count 0 with NULL buffers is fine, and every rank stays in step */
    CHECK_RC(plait_allreduce(NULL, NULL, 0, PLAIT_FLOAT32, PLAIT_AVG, x->comm));
    CHECK_RC(plait_gather(NULL, NULL, 0, PLAIT_INT8, 0, x->comm));
    ncalls += 22;

    /* Mismatched counts across ranks: an error or a timeout everywhere,
     * never a hang, never a write past the buffer. */
    if (P > 1) {
        static const char *algos[] = {"allreduce", "bcast", "alltoall"};
        const char *tv = getenv("PLAIT_TIMEOUT");
        double slot = (tv ? atof(tv) : 3) + 2.5, start;
        if (slot > 30)
            FAIL("errors mode wants a small PLAIT_TIMEOUT (got %s)", tv);
        /* Each case gets a fixed time slot from a common start, so a rank
         * that failed at once and one that waited for its timeout begin the
         * next case together. */
        /* Operators and collective kinds: the shared area compares them
         * (PLAIT_ERR_ARG); message schedules tag their messages with them
         * (coll/util.c pcoll_next_tag), and a rank holding a message of
         * another kind under the call's number fails and tells the others
         * (pt2pt/notice.c); a hash collision (1 in 128) times out. */
        CHECK_RC(plait_barrier(x->comm));
        start = plait_wtime();
        for (int k = 0; k < 6; k++) {
            size_t n = x->rank == 0 ? 3 : 5, big = 60000;
            int last = x->rank == P - 1;
            char *in = galloc(big * 8), *o = galloc(big * 8), name[96];
            int rc;
            snprintf(name, sizeof name, "mismatched %s", k < 3 ? "counts" : "arguments");
            snprintf(name + strlen(name), sizeof name - strlen(name), " in %s",
                     k < 3 ? algos[k] : k == 3 ? "allgather (datatype sizes, direct reads)"
                     : k == 4 ? "allreduce (operators)" : "allreduce against bcast");
            where = name;
            memset(in, 0, big * 8);
            t0 = plait_wtime();
            rc = k == 0 ? plait_allreduce(in, o, n, PLAIT_INT32, PLAIT_SUM, x->comm)
               : k == 1 ? plait_bcast(o, n, PLAIT_INT32, 0, x->comm)
               : k == 2 ? plait_alltoall(in, o, n / 2, PLAIT_INT32, x->comm)
               : k == 3 ? plait_allgather(in, o, big / (size_t)P, last ? PLAIT_FLOAT64
                                          : PLAIT_FLOAT32, x->comm)
               : k == 4 ? plait_allreduce(in, o, 4, PLAIT_INT32, last ? PLAIT_MAX : PLAIT_SUM,
                                          x->comm)
               : last ? plait_bcast(o, 4, PLAIT_INT32, 0, x->comm)
               : plait_allreduce(in, o, 4, PLAIT_INT32, PLAIT_SUM, x->comm);
            /* a bcast root only sends: it cannot tell */
            if (rc == PLAIT_OK && k == 1 && x->rank == 0)
                rc = PLAIT_ERR_ARG;
            if (rc != PLAIT_ERR_ARG && rc != PLAIT_ERR_TIMEOUT)
                FAIL("%s returned %d (%s), expected PLAIT_ERR_ARG or PLAIT_ERR_TIMEOUT", name, rc,
                     plait_strerror(rc));
            fprintf(stderr, "rank %d: %s -> %s after %.1f s: %s\n", x->rank, name,
                    plait_strerror(rc), plait_wtime() - t0, plait_last_error());
            gcheck_free(in, big * 8, name);
            gcheck_free(o, big * 8, name);
            while (plait_wtime() < start + (k + 1) * slot)
                usleep(10000);
        }
        where = "collective after the mismatches";
        {
            int one = 1, sum = 0;
            CHECK_RC(plait_allreduce(&one, &sum, 1, PLAIT_INT32, PLAIT_SUM, x->comm));
            if (sum != P)
                FAIL("allreduce after mismatches gave %d, expected %d", sum, P);
        }
    }
}

/* Roots that differ in a rendezvous-sized bcast, as the first collective,
 * then a barrier: some ranks may return at once (OK), others time out, and
 * the traffic left behind must not pair with finalize's: main checks
 * finalize returns OK everywhere. It returned PLAIT_ERR_ARG (a truncation)
 * on one rank in 3 of 3 runs (3 ranks) while finalize took the next
 * collective tag. (The barrier also made the shared area then, amid that
 * traffic; since session 40 world's area is made in plait_init.) */
static void root_mismatch(ctx_t *x, size_t n)
{
    float *b = galloc(n * 4);
    int rc, P = x->size, root = x->rank == P - 1 && P > 2 ? 1 : 0;
    const char *tv = getenv("PLAIT_TIMEOUT");
    double timeout = tv ? atof(tv) : 3, start = plait_wtime();
    where = "bcast with mismatched roots, then a barrier and finalize";
    if (timeout > 30)
        FAIL("rootmismatch mode wants a small PLAIT_TIMEOUT (got %s)", tv);
    for (size_t i = 0; i < n; i++)   /* whose data it is, element by element */
        b[i] = (float)((x->rank + 1) * 1000) + (float)(i % 997);
    rc = plait_bcast(b, n, PLAIT_FLOAT32, root, x->comm);
    if (rc != PLAIT_OK && rc != PLAIT_ERR_ARG && rc != PLAIT_ERR_TIMEOUT)
        FAIL("%s: bcast returned %d (%s)", where, rc, plait_strerror(rc));
    /* A rank that got PLAIT_OK holds the data of the root it passed, all of
     * it (forced chain and scatter + allgather schedules handed the last
     * rank root 0's data, or a mix, with PLAIT_OK: a black-box test). */
    for (size_t i = 0; rc == PLAIT_OK && i < n; i++)
        if (b[i] != (float)((root + 1) * 1000) + (float)(i % 997))
            FAIL("%s: PLAIT_OK, but element %zu is %g, not root %d's %g", where, i, (double)b[i],
                 root, (double)((root + 1) * 1000 + (int)(i % 997)));
    gcheck_free(b, n * 4, where);
    double t_bcast = plait_wtime() - start;
    int brc = rc;
    rc = plait_barrier(x->comm);   /* on the broken communicator: any outcome but a hang */
    fprintf(stderr, "rank %d: bcast with mismatched roots -> %s (%.1f s), then barrier -> %s (%.1f s)\n",
            x->rank, plait_strerror(brc), t_bcast, plait_strerror(rc), plait_wtime() - start);
    /* Finalize's own wait is PLAIT_TIMEOUT too: a rank whose calls returned
     * at once must not reach it a timeout ahead of the others. The ranks
     * left init together (a fence), so a common deadline from then. */
    while (plait_wtime() < start + 2 * (timeout + 2.5))
        usleep(10000);
}

/* The last rank stops answering (it sleeps, in no plait call) while the
 * others start a rendezvous-sized allreduce: every other rank must fail
 * with PLAIT_ERR_TIMEOUT, and one whose send the silent rank could have
 * been reading (same host: shared memory) waits for it to answer the
 * withdrawal first, which its message must then say (a black-box test saw
 * a call of twice PLAIT_TIMEOUT report one). Run with the last two ranks
 * on one host. Then all meet again and finalize. */
static void hang_peer(ctx_t *x)
{
    size_t n = 200000;
    float *in = galloc(n * 4), *out = galloc(n * 4);
    const char *tv = getenv("PLAIT_TIMEOUT");
    double timeout = tv ? atof(tv) : 3, start = plait_wtime();
    int rc, P = x->size;
    where = "allreduce of 800 KB while the last rank sleeps";
    if (timeout > 30 || P < 4)
        FAIL("hangpeer mode wants a small PLAIT_TIMEOUT and 4 or more ranks");
    for (size_t i = 0; i < n; i++)
        in[i] = (float)x->rank;
    CHECK_RC(plait_allreduce(in, out, n, PLAIT_FLOAT32, PLAIT_SUM, x->comm));   /* (hosts learnt) */
    if (x->rank != P - 1) {
        rc = plait_allreduce(in, out, n, PLAIT_FLOAT32, PLAIT_SUM, x->comm);
        fprintf(stderr, "rank %d: %s after %.1f s: %s\n", x->rank, plait_strerror(rc),
                plait_wtime() - start, plait_last_error());
        if (rc != PLAIT_ERR_TIMEOUT)
            FAIL("%s: returned %d (%s), not PLAIT_ERR_TIMEOUT", where, rc, plait_strerror(rc));
        if (x->rank == P - 2 && !strstr(plait_last_error(), "withdrawing its sends"))
            FAIL("%s: the message does not say the call waited to withdraw its sends: %s",
                 where, plait_last_error());
    }
    gcheck_free(in, n * 4, where);
    gcheck_free(out, n * 4, where);
    while (plait_wtime() < start + 2 * timeout + 5)   /* all meet again (see root_mismatch) */
        usleep(10000);
}

/* A plait_wait that times out leaves a non-blocking collective posted (its
 * buffers still belong to it): the first half of the ranks start an
 * iallreduce of 400 KB 1.5 x PLAIT_TIMEOUT late, the others' first wait
 * fails with PLAIT_ERR_TIMEOUT, and waiting again completes it with the
 * right data everywhere (shared memory: the late ranks read the early
 * ones' buffers; udp: messages). */
static void rewait(ctx_t *x)
{
    size_t n = 100000;
    int32_t *in = galloc(n * 4), *out = galloc(n * 4);
    const char *tv = getenv("PLAIT_TIMEOUT");
    double timeout = tv ? atof(tv) : 3;
    int rc, waits = 0, P = x->size, late = x->rank < P / 2;
    plait_request_t req;
    where = "iallreduce waited for again after a timeout";
    if (timeout > 30 || P < 2)
        FAIL("rewait mode wants a small PLAIT_TIMEOUT and 2 or more ranks");
    for (size_t i = 0; i < n; i++)
        in[i] = (int32_t)((x->rank + 1) * (int)(1 + i % 7));
    memset(out, POISON, n * 4);
    if (late)
        usleep((useconds_t)(1.5e6 * timeout));
    CHECK_RC(plait_iallreduce(in, out, n, PLAIT_INT32, PLAIT_SUM, x->comm, &req));
    do {
        rc = plait_wait(&req, NULL);
        waits++;
    } while (rc == PLAIT_ERR_TIMEOUT && waits < 4);
    if (rc != PLAIT_OK)
        FAIL("%s: returned %d (%s) after %d waits: %s", where, rc, plait_strerror(rc), waits,
             plait_last_error());
    if (!late && waits < 2)
        FAIL("%s: an early rank's first wait did not time out", where);
    for (size_t i = 0; i < n; i++)
        if (out[i] != (int32_t)(P * (P + 1) / 2 * (int)(1 + i % 7)))
            FAIL("%s: element %zu is %d", where, i, (int)out[i]);
    gcheck_free(in, n * 4, where);
    gcheck_free(out, n * 4, where);
    ncalls++;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "suite";
    const char *s = getenv("PLAIT_TEST_SEED");
    ctx_t world;
    plait_comm_t half = NULL;
    int rc;
    if (s)
        seed = strtoull(s, NULL, 10);
    quick = getenv("PLAIT_TEST_QUICK") && atoi(getenv("PLAIT_TEST_QUICK"));
    reduced = argc > 2 && !strcmp(argv[2], "reduced");
    if (!strcmp(mode, "badalgo")) {
        rc = plait_init();
        if (rc != PLAIT_ERR_ARG || !strstr(plait_last_error(), "recursive_doubling"))
            FAIL("plait_init with a bad algorithm name returned %d '%s'", rc, plait_last_error());
        printf("coll_check: bad name refused: %s\n", plait_last_error());
        return 0;
    }
    if (!strcmp(mode, "mixed")) {   /* a different kernel family on each rank */
        static const char *isa[] = {"avx512", "scalar", "avx2"};   /* rank 0 the widest */
        const char *pr = getenv("PMIX_RANK");
        setenv("PLAIT_REDUCE_ISA", isa[(pr ? atoi(pr) : 0) % 3], 1);
    }
    CHECK_RC(plait_init());
    world.comm = plait_comm_world();
    CHECK_RC(plait_comm_rank(world.comm, &world.rank));
    CHECK_RC(plait_comm_size(world.comm, &world.size));
    wrank = world.rank;
    if (world.size > 64)
        FAIL("at most 64 ranks");
    if (!strcmp(mode, "errors")) {
        errors(&world);
    } else if (!strcmp(mode, "rootmismatch")) {
        root_mismatch(&world, (size_t)1 << 20);
    } else if (!strcmp(mode, "rootdata")) {
        root_mismatch(&world, 16);
    } else if (!strcmp(mode, "hangpeer")) {
        hang_peer(&world);
    } else if (!strcmp(mode, "rewait")) {
        rewait(&world);
    } else if (!strcmp(mode, "mixed")) {
        identity_check(&world, "world (mixed kernels)");
        special_check(&world, "world (mixed kernels)");
    } else {
        ctx_t sub;
        run_all(&world, 1, "world");
        /* a split communicator: odd and even ranks, in reverse order */
        CHECK_RC(plait_comm_split(world.comm, world.rank % 2, -world.rank, &half));
        sub.comm = half;
        CHECK_RC(plait_comm_rank(half, &sub.rank));
        CHECK_RC(plait_comm_size(half, &sub.size));
        run_all(&sub, 0, "split comm");
        CHECK_RC(plait_comm_free(&half));
    }
    where = "finalize";
    CHECK_RC(plait_finalize());
    if (world.rank == 0)
        printf("coll_check %s: %lu calls ok on %d ranks\n", mode, ncalls, world.size);
    return 0;
}
