/* Unit test of the reduction kernels (coll/reduce_ops.c): every vector family
 * this CPU has must give the scalar family's bits for every datatype x
 * operator, on random bit patterns mixed with special values (NaNs with
 * payloads, infinities, signed zeros, subnormals, rounding ties), at every
 * length up to a few vectors past the widest (the tails), from unaligned
 * addresses and in place, and the same for AVG's division of the 16-bit
 * floats; plus hand-computed bfloat16 and float16 roundings.
 * The seed is printed; PLAIT_TEST_SEED overrides it. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "coll/pcoll.h"
#include "tests/unit/tap.h"

#define MAXN 4133   /* the longest vector checked: odd, past every kernel's unroll */

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return *s;
}

static const plait_dtype_t dts[] = {PLAIT_INT8, PLAIT_UINT8, PLAIT_INT32, PLAIT_UINT32,
                                    PLAIT_INT64, PLAIT_UINT64, PLAIT_FLOAT16, PLAIT_BFLOAT16,
                                    PLAIT_FLOAT32, PLAIT_FLOAT64};
static const plait_op_t ops[] = {PLAIT_SUM, PLAIT_PROD, PLAIT_MIN, PLAIT_MAX};

/* Random elements, one in four a special value of the type's format. */
static void fill(unsigned char *p, size_t n, size_t es, uint64_t *seed)
{
    static const uint16_t h16[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e01, 0xfd02, 0x7c03,
                                   0x0001, 0x83ff, 0x3c00, 0x7bff, 0x7f80, 0xff80, 0x7fc1,
                                   0xffc2, 0x7f83, 0x0080, 0x807f, 0x3f80, 0x3b80, 0x3bc0};
    static const uint32_t f32[] = {0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00001,
                                   0xffc00002, 0x7f800003, 0x00000001, 0x807fffff, 0x7f7fffff,
                                   0x3f800000, 0x33800000};
    static const uint64_t f64[] = {0, 0x8000000000000000ull, 0x7ff0000000000000ull,
                                   0xfff8000000000001ull, 0x7ff0000000000002ull, 1,
                                   0x7fefffffffffffffull, 0x3ff0000000000000ull};
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rng(seed), v = rng(seed);
        if (r % 4 == 0) {
            if (es == 2)
                v = h16[(r >> 8) % (sizeof h16 / sizeof h16[0])];
            else if (es == 4)
                v = f32[(r >> 8) % (sizeof f32 / sizeof f32[0])];
            else if (es == 8)
                v = f64[(r >> 8) % (sizeof f64 / sizeof f64[0])];
        }
        memcpy(p + i * es, &v, es);
    }
}

/* float16 AVG's fused turn (coll/shm.c): pcoll_add_scaled16(acc, x) must
 * give the bits of the scaled copy (scalar pcoll_mul16_to) summed in
 * (scalar pcoll_reduce), in the scalar family and in family pref, in place
 * and into another buffer, nothing written past the result. a: x (n + 1
 * elements, from the caller's fill), b: acc; want and got: scratch. */
static int add_scaled_check(int pref, unsigned char *a, unsigned char *b, unsigned char *want,
                            unsigned char *got, size_t n, int div, uint64_t *seed)
{
    float f = 1.0f / (float)div;
    int bad = 0;
    fill(b, n + 1, 2, seed);
    pcoll_reduce_pick(1);
    pcoll_mul16_to(want, a, n, PLAIT_FLOAT16, f);
    pcoll_reduce(want, b, want, n, PLAIT_FLOAT16, PLAIT_SUM);   /* the reference */
    for (int fam = 0; fam < 2; fam++) {
        pcoll_reduce_pick(fam ? pref : 1);
        memset(got, 0x5a, (n + 1) * 2);
        pcoll_add_scaled16(got, b, a, n, f);
        if ((memcmp(got, want, n * 2) != 0 || got[n * 2] != 0x5a) && bad++ < 3)
            tap_diag("add_scaled16 %s n %zu by 1/%d: differs from mul16 + SUM",
                     fam ? "vector" : "scalar", n, div);
        memcpy(got, b, (n + 1) * 2);   /* in place, as coll/shm.c calls it */
        pcoll_add_scaled16(got, got, a, n, f);
        if (memcmp(got, want, n * 2) != 0 && bad++ < 3)
            tap_diag("add_scaled16 %s n %zu in place: differs", fam ? "vector" : "scalar", n);
    }
    pcoll_reduce_pick(pref);
    return bad;
}

/* One family against the scalar results: the number of disagreeing cases. */
static int family_check(int pref, uint64_t seed0)
{
    size_t cap = (MAXN + 1) * 8;
    unsigned char *a = malloc(cap), *b = malloc(cap), *want = malloc(cap), *got = malloc(cap);
    int bad = 0;
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
        size_t es = plait_dtype_size(dts[t]);
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
            uint64_t seed = seed0 + t * 16 + o;
            for (size_t n = 0; n <= MAXN; n = n < 80 ? n + 1 : n * 2 + 1) {
                size_t off = (n & 1) * es;   /* odd lengths start one element in */
                fill(a, n + 1, es, &seed);
                fill(b, n + 1, es, &seed);
                pcoll_reduce_pick(1);
                pcoll_reduce(want + off, a + off, b + off, n, dts[t], ops[o]);
                pcoll_reduce_pick(pref);
                memset(got, 0xa5, cap);
                pcoll_reduce(got + off, a + off, b + off, n, dts[t], ops[o]);
                if (memcmp(got + off, want + off, n * es) != 0 || got[off + n * es] != 0xa5) {
                    if (bad++ < 5)
                        tap_diag("type %d op %d n %zu: differs from scalar (or wrote past)",
                                 (int)dts[t], (int)ops[o], n);
                    continue;
                }
                memcpy(got, a, (n + 1) * es);   /* in place: dst is the left operand */
                pcoll_reduce(got + off, got + off, b + off, n, dts[t], ops[o]);
                if (memcmp(got + off, want + off, n * es) != 0 && bad++ < 5)
                    tap_diag("type %d op %d n %zu: in place differs", (int)dts[t],
                             (int)ops[o], n);
            }
        }
    }
    for (int t = 0; t < 2; t++) {   /* AVG's division of the 16-bit floats */
        plait_dtype_t dt = t ? PLAIT_BFLOAT16 : PLAIT_FLOAT16;
        uint64_t seed = seed0 + 1000 + (uint64_t)t;
        for (size_t n = 0; n <= MAXN; n = n < 80 ? n + 1 : n * 2 + 1) {
            int div = 1 + (int)(n % 9);
            fill(a, n + 1, 2, &seed);
            memcpy(want, a, (n + 1) * 2);
            memcpy(got, a, (n + 1) * 2);
            pcoll_reduce_pick(1);
            pcoll_scale(want + 2, n, dt, div);
            pcoll_reduce_pick(pref);
            pcoll_scale(got + 2, n, dt, div);
            if (memcmp(got, want, (n + 1) * 2) != 0 && bad++ < 5)
                tap_diag("scale type %d n %zu by %d: differs from scalar", (int)dt, n, div);
            /* float16 AVG's pre-scaling (coll/api.c), into another buffer:
             * x * (1/div) in float32, the scalar family's bits, the source
             * untouched, nothing written before or past the result */
            pcoll_reduce_pick(1);
            pcoll_mul16_to(want + 2, a + 2, n, dt, 1.0f / (float)div);
            pcoll_reduce_pick(pref);
            memset(got, 0x5a, (n + 2) * 2);
            memcpy(b, a, (n + 1) * 2);
            pcoll_mul16_to(got + 2, a + 2, n, dt, 1.0f / (float)div);
            if ((memcmp(got + 2, want + 2, n * 2) != 0 || got[2 + n * 2] != 0x5a ||
                 got[0] != 0x5a || memcmp(a, b, (n + 1) * 2) != 0) && bad++ < 5)
                tap_diag("mul16 type %d n %zu by 1/%d: differs from scalar", (int)dt, n, div);
            if (dt == PLAIT_FLOAT16)
                bad += add_scaled_check(pref, a, b, want, got, n, div, &seed);
        }
    }
    free(a);
    free(b);
    free(want);
    free(got);
    return bad;
}

/* x / div of one 16-bit element in the current family. */
static uint16_t scale16(plait_dtype_t dt, uint16_t x, int div)
{
    pcoll_scale(&x, 1, dt, div);
    return x;
}

/* a op b of one 16-bit element in the current family. */
static uint16_t one16(plait_dtype_t dt, plait_op_t op, uint16_t a, uint16_t b)
{
    uint16_t d;
    pcoll_reduce(&d, &a, &b, 1, dt, op);
    return d;
}

/* a op b of one float32 (bits) in the current family. */
static uint32_t one32(plait_op_t op, uint32_t a, uint32_t b)
{
    float x, y, d;
    uint32_t r;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    pcoll_reduce(&d, &x, &y, 1, PLAIT_FLOAT32, op);
    memcpy(&r, &d, 4);
    return r;
}

/* MIN and MAX of floats do not depend on the operand order (the ranks'
 * order in an algorithm): a NaN on either side comes out quiet, -0 < +0. */
static int minmax_rule(void)
{
    int ok = 1;
    for (int t = 0; t < 2; t++) {
        plait_dtype_t dt = t ? PLAIT_BFLOAT16 : PLAIT_FLOAT16;
        uint16_t one = t ? 0x3f80 : 0x3c00, snan = t ? 0x7f81 : 0x7c01, q = t ? 0x7fc1 : 0x7e01;
        for (int o = 0; o < 2; o++) {
            plait_op_t op = o ? PLAIT_MAX : PLAIT_MIN;
            ok &= one16(dt, op, one, snan) == q && one16(dt, op, snan, one) == q;
            ok &= one16(dt, op, 0x0000, 0x8000) == (o ? 0x0000 : 0x8000) &&
                  one16(dt, op, 0x8000, 0x0000) == (o ? 0x0000 : 0x8000);
        }
    }
    for (int o = 0; o < 2; o++) {
        plait_op_t op = o ? PLAIT_MAX : PLAIT_MIN;
        ok &= one32(op, 0x3f800000, 0x7f800001) == 0x7fc00001 &&
              one32(op, 0x7f800001, 0x3f800000) == 0x7fc00001 &&
              one32(op, 0x7fc00002, 0xffc00003) == 0x7fc00002;
        ok &= one32(op, 0, 0x80000000) == (o ? 0u : 0x80000000u) &&
              one32(op, 0x80000000, 0) == (o ? 0u : 0x80000000u);
    }
    return ok;
}

int main(void)
{
    static const char *names[] = {NULL, "scalar", "avx2", "avx512"};
    uint64_t seed = 0x2545f4914f6cdd1dull;
    if (getenv("PLAIT_TEST_SEED"))
        seed = strtoull(getenv("PLAIT_TEST_SEED"), NULL, 0);
    tap_diag("seed 0x%llx", (unsigned long long)seed);
    for (int pref = 1; pref <= 3; pref++) {
        const char *got = pcoll_reduce_pick(pref);
        if (strcmp(got, names[pref]) != 0) {
            tap_skip(names[pref], "this CPU lacks the family");
            continue;
        }
        /* ties to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 */
        TAP_OK(one16(PLAIT_BFLOAT16, PLAIT_SUM, 0x3f80, 0x3b80) == 0x3f80 &&
               one16(PLAIT_BFLOAT16, PLAIT_SUM, 0x3f80, 0x3bc0) == 0x3f81 &&
               one16(PLAIT_BFLOAT16, PLAIT_SUM, 0x3f81, 0x3b80) == 0x3f82 &&
               one16(PLAIT_BFLOAT16, PLAIT_PROD, 0x4000, 0xc040) == 0xc0c0 &&
               one16(PLAIT_BFLOAT16, PLAIT_SUM, 0x7f7f, 0x7f7f) == 0x7f80,
               "%s: bfloat16 sums and products round to nearest-even, overflow to inf", got);
        TAP_OK(one16(PLAIT_BFLOAT16, PLAIT_SUM, 0x7f81, 0x7fc2) == 0x7fc1 &&
               one16(PLAIT_BFLOAT16, PLAIT_SUM, 0x3f80, 0xffc5) == 0xffc5 &&
               one16(PLAIT_FLOAT16, PLAIT_SUM, 0x7c01, 0x7e02) == 0x7e01,
               "%s: a NaN comes out quiet, the left one's payload when both are NaN", got);
        TAP_OK(minmax_rule(), "%s: MIN and MAX of floats keep a NaN from either side, "
               "-0 below +0, in either operand order", got);
        TAP_OK(one16(PLAIT_FLOAT16, PLAIT_SUM, 0x3c00, 0x1000) == 0x3c00 &&
               one16(PLAIT_FLOAT16, PLAIT_SUM, 0x3c00, 0x1400) == 0x3c01 &&
               one16(PLAIT_FLOAT16, PLAIT_SUM, 0x7bff, 0x7bff) == 0x7c00,
               "%s: float16 sums round to nearest-even, overflow to inf", got);
        TAP_OK(scale16(PLAIT_FLOAT16, 0x3c00, 3) == 0x3555 &&
               scale16(PLAIT_BFLOAT16, 0x3f80, 3) == 0x3eab &&
               scale16(PLAIT_BFLOAT16, 0x7f81, 2) == 0x7fc1,
               "%s: AVG's division of float16 and bfloat16 rounds to nearest-even, "
               "a NaN stays NaN", got);
        if (pref > 1) {
            int bad = family_check(pref, seed);
            TAP_OK(bad == 0, "%s gives the scalar kernels' bits: every type x op, AVG's "
                   "division, float16 AVG's scaling (copied, and fused into the sum), lengths "
                   "0-%d, unaligned, in place (%d cases differ)", got, MAXN, bad);
        }
    }
    return tap_done();
}
