/*
 * reduce_ops.c -- the reduction kernels: dst = a op b, elementwise, for every
 * datatype x operator of the API, and the final division of PLAIT_AVG.
 *
 * One generic body (REDUCE_BODY) is compiled three times: for AVX-512, for
 * AVX2 and for the baseline, each with the vectoriser on; the first call picks
 * the best the CPU supports (__builtin_cpu_supports), or the one
 * PLAIT_REDUCE_ISA names. float16 uses explicit F16C / AVX-512 conversions in
 * the vector families and an exact software conversion in the baseline;
 * bfloat16 converts with the same integer rule everywhere (explicit vectors
 * in the AVX2 / AVX-512 families, BF16_LOOP). Every family
 * computes bitwise the same result: integer ops wrap (two's complement),
 * float ops are IEEE single/double in the same order (a sum or product of
 * two NaNs gives the left one, NAN_LEFT, whatever the operand order the
 * compiler picks), min/max of floats are IEEE 754-2019 minimum / maximum
 * (FMIN / FMAX: a NaN on either side wins, -0 < +0), and 16-bit floats compute
 * each pairwise step in float32 and round to nearest-even.
 */
#include "config.h"

#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PCOLL_X86 1
#endif

#include "coll/pcoll.h"

#if defined(__GNUC__) && !defined(__clang__)
/* -O2 alone keeps loops scalar unless they need no remainder loop. And
 * NAN_LEFT's NaN test is a floating-point comparison, which GCC will not
 * turn into a vector select while it assumes FP operations may trap: its
 * float32, float64 and bfloat16 loops then stayed scalar (AVX2 float32 sum
 * at 64 KiB 36-41 -> 20-22 GB/s with an integer-mask test instead; with
 * no-trapping-math it is as fast as the plain sum). Nothing here reads the
 * FP exception flags, and no result changes: this only lets the compiler
 * compute both arms and select. */
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic", "no-trapping-math")
#endif

int pcoll_op_valid(plait_dtype_t dt, plait_op_t op, const char **why)
{
    if (dt == PLAIT_BYTE) {
        *why = "cannot be applied to PLAIT_BYTE (no arithmetic on raw bytes)";
        return 0;
    }
    if (op == PLAIT_AVG && !(dt == PLAIT_FLOAT16 || dt == PLAIT_BFLOAT16 ||
                             dt == PLAIT_FLOAT32 || dt == PLAIT_FLOAT64)) {
        *why = "PLAIT_AVG is for floating types only";
        return 0;
    }
    return 1;
}

/* ------------------------------------------------ 16-bit float conversions */

static inline float bf16_to_f32(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static inline uint16_t f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40);             /* NaN: stay NaN, quiet */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);   /* nearest-even */
}

/* Exact IEEE binary16 -> binary32 (as F16C's VCVTPH2PS). */
static inline float f16_to_f32_sw(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
    float f;
    if (e == 0) {
        if (m == 0) {
            x = sign;
        } else {                  /* subnormal: normalise */
            e = 113;
            while (!(m & 0x400u)) {
                m <<= 1;
                e--;
            }
            x = sign | (e << 23) | ((m & 0x3ffu) << 13);
        }
    } else if (e == 31) {
        x = sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0);
    } else {
        x = sign | ((e + 112) << 23) | (m << 13);
    }
    memcpy(&f, &x, 4);
    return f;
}

/* binary32 -> binary16, round to nearest-even (as VCVTPS2PH with imm 0). */
static inline uint16_t f32_to_f16_sw(float f)
{
    uint32_t x, sign, ax;
    memcpy(&x, &f, 4);
    sign = (x >> 16) & 0x8000u;
    ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u)        /* inf, NaN (quieted, top payload bits kept) */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0));
    if (ax >= 0x477ff000u)        /* >= 65520: rounds to infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) {       /* below 2^-14: subnormal or zero */
        uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, shift, q, rem, half;
        if (ax < 0x33000000u)     /* <= 2^-25 (ties to the even zero) */
            return (uint16_t)sign;
        shift = 126 - e;
        q = m >> shift;
        rem = m & ((1u << shift) - 1);
        half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u)))
            q++;
        return (uint16_t)(sign | q);
    }
    ax -= 112u << 23;
    return (uint16_t)(sign | ((ax + 0xfffu + ((ax >> 13) & 1u)) >> 13));
}

/* ------------------------------------------------------------ generic body */

#define PMIN(x, y) ((x) < (y) ? (x) : (y))
#define PMAX(x, y) ((x) > (y) ? (x) : (y))
/* NAN_LEFT(x, e): e, unless x is a NaN, then x quieted (x + x). Which NaN a
 * sum or product of two NaNs returns depends on the instruction's operand
 * order (x86 keeps the first source's), and the compiler may swap the
 * operands of a commutative add or multiply: in the sanitizer build the
 * scalar float16 and the bfloat16 kernels returned the right operand's NaN
 * where the -O2 build and the vector float16 kernels (NANA below) returned
 * the left one's, and ranks on different kernel families disagreed bitwise
 * (coll_check mixed, special values). With the rule spelled out the result
 * does not depend on code generation; a NaN on the right alone comes out of
 * e quieted in either operand order. */
#define NAN_LEFT(x, e) ((x) != (x) ? (x) + (x) : (e))
/* MIN and MAX of the floating types: IEEE 754-2019 minimum and maximum, so
 * that no result depends on the operand order, which the algorithm picks
 * (the rank that holds a value, its place in a ring or a slice): a NaN on
 * either side comes out (quieted; the left one's when both are NaN), and -0
 * is below +0 (of two zeros -(-x - y) is -0 if either is, x + y +0 if
 * either is). The x86 MINPS rule (x < y ? x : y) used before kept a NaN
 * only on the right and returned either zero: a MAX over ranks kept or
 * dropped a NaN by the rank that held it (a black-box test). Integers
 * keep PMIN / PMAX. */
#define FMIN_FN(NAME, T)                                                       \
    static inline T NAME(T x, T y)                                             \
    {                                                                          \
        T m = x < y ? x : y, z = -(-x - y), r = x == y ? (x == 0 ? z : x) : m; \
        r = y != y ? y + y : r;                                                \
        return x != x ? x + x : r;                                             \
    }
#define FMAX_FN(NAME, T)                                                       \
    static inline T NAME(T x, T y)                                             \
    {                                                                          \
        T m = x > y ? x : y, z = x + y, r = x == y ? (x == 0 ? z : x) : m;     \
        r = y != y ? y + y : r;                                                \
        return x != x ? x + x : r;                                             \
    }
/* (Every arm computed, then selected, in separate statements: written as
 * one nested conditional expression GCC kept the loop scalar, float32 MAX
 * at half the speed of SUM.) */
FMIN_FN(fmin754f, float)
FMIN_FN(fmin754d, double)
FMAX_FN(fmax754f, float)
FMAX_FN(fmax754d, double)
#define FMIN(x, y) _Generic((x), float: fmin754f, double: fmin754d)(x, y)
#define FMAX(x, y) _Generic((x), float: fmax754f, double: fmax754d)(x, y)

/* Element types of alignment 1: a user's buffer need not be aligned to its
 * element size (a float array at an odd address is valid input), and a
 * typed access through it would be undefined (UBSan stops on it); x86 loads
 * and stores them alike, and the vectoriser uses unaligned moves. LOOP and
 * VECF declare theirs per element type; these serve the scaling loops. */
typedef float    una_f32 __attribute__((aligned(1), may_alias));
typedef double   una_f64 __attribute__((aligned(1), may_alias));
typedef uint16_t una_u16 __attribute__((aligned(1), may_alias));

#define LOOP(T, EXPR)                                                          \
    do {                                                                       \
        typedef T __attribute__((aligned(1), may_alias)) una_t;                \
        una_t *d_ = dst;                                                       \
        const una_t *a_ = a, *b_ = b;                                          \
        for (size_t i = 0; i < n; i++) {                                       \
            T x = a_[i], y = b_[i];                                            \
            d_[i] = (EXPR);                                                    \
        }                                                                      \
    } while (0)

/* Integers: U is the unsigned twin, so sums and products wrap without UB. */
#define INT_OPS(T, U)                                                          \
    switch (op) {                                                              \
    case PLAIT_SUM: case PLAIT_AVG: LOOP(T, (T)((U)x + (U)y)); break;          \
    case PLAIT_PROD: LOOP(T, (T)((U)x * (U)y)); break;                         \
    case PLAIT_MIN: LOOP(T, PMIN(x, y)); break;                                \
    case PLAIT_MAX: LOOP(T, PMAX(x, y)); break;                                \
    }

#define FLT_OPS(T)                                                             \
    switch (op) {                                                              \
    case PLAIT_SUM: case PLAIT_AVG: LOOP(T, NAN_LEFT(x, x + y)); break;        \
    case PLAIT_PROD: LOOP(T, NAN_LEFT(x, x * y)); break;                       \
    case PLAIT_MIN: LOOP(T, FMIN(x, y)); break;                                \
    case PLAIT_MAX: LOOP(T, FMAX(x, y)); break;                                \
    }

#define BF16_OPS()                                                             \
    switch (op) {                                                              \
    case PLAIT_SUM: case PLAIT_AVG:                                            \
        LOOP(uint16_t, f32_to_bf16(f32_op(bf16_to_f32(x), bf16_to_f32(y), PLAIT_SUM))); break; \
    case PLAIT_PROD:                                                           \
        LOOP(uint16_t, f32_to_bf16(f32_op(bf16_to_f32(x), bf16_to_f32(y), PLAIT_PROD))); break; \
    case PLAIT_MIN:                                                            \
        LOOP(uint16_t, f32_to_bf16(f32_op(bf16_to_f32(x), bf16_to_f32(y), PLAIT_MIN))); break; \
    case PLAIT_MAX:                                                            \
        LOOP(uint16_t, f32_to_bf16(f32_op(bf16_to_f32(x), bf16_to_f32(y), PLAIT_MAX))); break; \
    }

static inline float f32_op(float x, float y, plait_op_t op)
{
    switch (op) {
    case PLAIT_PROD: return NAN_LEFT(x, x * y);
    case PLAIT_MIN:  return FMIN(x, y);
    case PLAIT_MAX:  return FMAX(x, y);
    default:         return NAN_LEFT(x, x + y);
    }
}

/* Every type but float16, whose conversions differ per family. */
#define REDUCE_BODY                                                            \
    switch (dt) {                                                              \
    case PLAIT_INT8:    INT_OPS(int8_t, uint8_t) break;                        \
    case PLAIT_UINT8:   INT_OPS(uint8_t, uint8_t) break;                       \
    case PLAIT_INT32:   INT_OPS(int32_t, uint32_t) break;                      \
    case PLAIT_UINT32:  INT_OPS(uint32_t, uint32_t) break;                     \
    case PLAIT_INT64:   INT_OPS(int64_t, uint64_t) break;                      \
    case PLAIT_UINT64:  INT_OPS(uint64_t, uint64_t) break;                     \
    case PLAIT_FLOAT32: FLT_OPS(float) break;                                  \
    case PLAIT_FLOAT64: FLT_OPS(double) break;                                 \
    case PLAIT_BFLOAT16: BF16_OPS() break;                                     \
    default: break;                                                            \
    }

typedef void (*red_fn_t)(void *dst, const void *a, const void *b, size_t n, plait_dtype_t dt,
                         plait_op_t op);

static void red_scalar(void *dst, const void *a, const void *b, size_t n, plait_dtype_t dt,
                       plait_op_t op)
{
    if (dt == PLAIT_FLOAT16) {
        LOOP(uint16_t, f32_to_f16_sw(f32_op(f16_to_f32_sw(x), f16_to_f32_sw(y), op)));
        return;
    }
    REDUCE_BODY
}

#ifdef PCOLL_X86
/* NANA(x, z): z where x is not a NaN, x where it is. SUM and PROD take the
 * left operand's NaN when both are NaN, as NAN_LEFT does in scalar code: the
 * compiler may swap the operands of a commutative vector add (the avx512
 * build returned the right one's), so the rule is applied explicitly. */
#define NANA256(x, z) _mm256_blendv_ps(z, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q))
#define NANA512(x, z) _mm512_mask_mov_ps(z, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x)
/* FMIN / FMAX on vectors: MINPS both ways round agree but for two zeros,
 * where OR (AND) of the two gives -0 (+0); then the NaNs, left first. */
#define MIN256(x, y) \
    NANA256(x, NANA256(y, _mm256_or_ps(_mm256_min_ps(x, y), _mm256_min_ps(y, x))))
#define MAX256(x, y) \
    NANA256(x, NANA256(y, _mm256_and_ps(_mm256_max_ps(x, y), _mm256_max_ps(y, x))))
#define MIN512(x, y) \
    NANA512(x, NANA512(y, _mm512_or_ps(_mm512_min_ps(x, y), _mm512_min_ps(y, x))))
#define MAX512(x, y) \
    NANA512(x, NANA512(y, _mm512_and_ps(_mm512_max_ps(x, y), _mm512_max_ps(y, x))))

/* The 16-bit kernels: VEC16 runs LOOPX(EXPR) over the whole vectors of W
 * elements (pa, pb, pd, m in scope; x op y -> EXPR), the operator chosen once
 * per pass, not per vector (inside the loop the switch kept both 16-bit
 * kernels at a third of float32's speed on AVX2); the tail of n % W elements goes
 * through the same vector code in a second pass over zero-padded copies. */
#define VEC16(W, LOOPX, ADD, MUL, MIN, MAX, NANA)                              \
    do {                                                                       \
        uint16_t ta[W] = {0}, tb[W] = {0}, td[W], *pd = dst;                   \
        const uint16_t *pa = a, *pb = b;                                       \
        size_t m = n / W * W, rest = n - m;                                    \
        for (int pass = 0; pass < 2; pass++) {                                 \
            switch (op) {                                                      \
            case PLAIT_PROD: LOOPX(NANA(x, MUL(x, y))) break;                  \
            case PLAIT_MIN:  LOOPX(MIN(x, y)) break;                           \
            case PLAIT_MAX:  LOOPX(MAX(x, y)) break;                           \
            default:         LOOPX(NANA(x, ADD(x, y))) break;                  \
            }                                                                  \
            if (pass == 1 || rest == 0)                                        \
                break;                                                         \
            memcpy(ta, pa + m, rest * 2);                                      \
            memcpy(tb, pb + m, rest * 2);                                      \
            pa = ta;                                                           \
            pb = tb;                                                           \
            pd = td;                                                           \
            m = W;                                                             \
        }                                                                      \
        if (rest)                                                              \
            memcpy((uint16_t *)dst + n - rest, td, rest * 2);                  \
    } while (0)

/* float16: the F16C / AVX-512 conversions, W elements in one float vector. */
#define F16_LOOP(VT, W, LOAD, STORE, CVTIN, CVTOUT, EXPR)                      \
    for (size_t i = 0; i < m; i += W) {                                        \
        VT x = CVTIN(LOAD(pa + i)), y = CVTIN(LOAD(pb + i));                   \
        STORE(pd + i, CVTOUT(EXPR));                                           \
    }

/* bfloat16: the integer rule of bf16_to_f32 / f32_to_bf16 on whole vectors
 * (not AVX512_BF16's VCVTNEPS2BF16, which treats subnormal inputs as zero and
 * would not match the other families). A vector of W bf16 widens to two
 * float vectors by interleaving zero words below each element (unpacklo /
 * unpackhi: within each 128-bit lane, elements 0-3 and 4-7), and the
 * saturating pack of the two rounded halves puts every element back in its
 * place, lane by lane: one shuffle per 8 elements each way, where a
 * zero-extension plus shift and a narrowing move cost more (AVX2 64 KiB SUM
 * 7-7.7 -> 8.5-10.8 GB/s). Left to the vectoriser the scalar form ran at a
 * quarter of float32's speed. */
#define BF16_LOOP(VT, VI, W, LOAD, STORE, UNLO, UNHI, ZERO, CAST, ROUND, PACK, EXPR) \
    for (size_t i = 0; i < m; i += W) {                                        \
        VI va = LOAD(pa + i), vb = LOAD(pb + i), z0 = ZERO();                  \
        VT x = CAST(UNLO(z0, va)), y = CAST(UNLO(z0, vb)), lo, hi;             \
        lo = (EXPR);                                                           \
        x = CAST(UNHI(z0, va));                                                \
        y = CAST(UNHI(z0, vb));                                                \
        hi = (EXPR);                                                           \
        STORE(pd + i, PACK(ROUND(lo), ROUND(hi)));                             \
    }

/* f32 -> bf16 in the low 16 bits of each 32-bit lane: round to nearest-even,
 * a NaN quieted with its payload's top bits kept (as f32_to_bf16). */
__attribute__((target("avx2"))) static inline __m256i bf16_round256(__m256 f)
{
    __m256i x = _mm256_castps_si256(f), top = _mm256_srli_epi32(x, 16), r;
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
    __m256i bias = _mm256_add_epi32(_mm256_and_si256(top, _mm256_set1_epi32(1)),
                                    _mm256_set1_epi32(0x7fff));
    r = _mm256_srli_epi32(_mm256_add_epi32(x, bias), 16);
    return _mm256_blendv_epi8(r, _mm256_or_si256(top, _mm256_set1_epi32(0x40)), nan);
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx2"))) static inline __m512i
bf16_round512(__m512 f)
{
    __m512i x = _mm512_castps_si512(f), top = _mm512_srli_epi32(x, 16), r;
    __mmask16 nan = _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q);
    __m512i bias = _mm512_add_epi32(_mm512_and_si512(top, _mm512_set1_epi32(1)),
                                    _mm512_set1_epi32(0x7fff));
    r = _mm512_srli_epi32(_mm512_add_epi32(x, bias), 16);
    return _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(top, _mm512_set1_epi32(0x40)));
}

#define L128(p) _mm_loadu_si128((const __m128i *)(p))
#define S128(p, v) _mm_storeu_si128((__m128i *)(p), v)
#define L256(p) _mm256_loadu_si256((const __m256i *)(p))
#define S256(p, v) _mm256_storeu_si256((__m256i *)(p), v)
#define L512(p) _mm512_loadu_si512((const void *)(p))
#define S512(p, v) _mm512_storeu_si512((void *)(p), v)
#define CVT256_OUT(v) _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)
#define CVT512_OUT(v) _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

#define F16_AVX2(EXPR) F16_LOOP(__m256, 8, L128, S128, _mm256_cvtph_ps, CVT256_OUT, EXPR)
#define BF16_AVX2(EXPR)                                                        \
    BF16_LOOP(__m256, __m256i, 16, L256, S256, _mm256_unpacklo_epi16, _mm256_unpackhi_epi16, \
              _mm256_setzero_si256, _mm256_castsi256_ps, bf16_round256, _mm256_packus_epi32, EXPR)
#define F16_AVX512(EXPR) F16_LOOP(__m512, 16, L256, S256, _mm512_cvtph_ps, CVT512_OUT, EXPR)
#define BF16_AVX512(EXPR)                                                      \
    BF16_LOOP(__m512, __m512i, 32, L512, S512, _mm512_unpacklo_epi16, _mm512_unpackhi_epi16, \
              _mm512_setzero_si512, _mm512_castsi512_ps, bf16_round512, _mm512_packus_epi32, EXPR)

/* float32 / float64 MIN and MAX on explicit vectors: FMIN / FMAX as
 * MIN256 does it, the NaN quieted (x + x) as the scalar functions quiet it;
 * the tail through those functions. (Left to the vectoriser, the selects
 * stayed scalar with one compiler version and not another: the device's
 * build ran float32 MAX at half the speed of SUM.) */
#define NANQ(BLEND, ADD, x, z) BLEND(z, ADD(x, x), x)
#define VECF(T, VT, W, LOAD, STORE, EXPR, SCALAR)                               \
    do {                                                                       \
        typedef T __attribute__((aligned(1), may_alias)) una_t;   /* (LOOP) */ \
        const una_t *pa = a, *pb = b;                                          \
        una_t *pd = dst;                                                       \
        size_t i = 0;                                                          \
        for (; i + W <= n; i += W) {                                           \
            VT x = LOAD(pa + i), y = LOAD(pb + i);                             \
            STORE(pd + i, EXPR);                                               \
        }                                                                      \
        for (; i < n; i++)                                                     \
            pd[i] = SCALAR(pa[i], pb[i]);                                      \
    } while (0)
/* BLEND(z, q, x): q where x is a NaN, else z. MM: the ordered min or max,
 * OA: OR for MIN (-0 wins), AND for MAX (+0 wins). */
#define FMM(BLEND, ADD, MM, OA, x, y) \
    NANQ(BLEND, ADD, x, NANQ(BLEND, ADD, y, OA(MM(x, y), MM(y, x))))
#define BL256PS(z, q, x) _mm256_blendv_ps(z, q, _mm256_cmp_ps(x, x, _CMP_UNORD_Q))
#define BL256PD(z, q, x) _mm256_blendv_pd(z, q, _mm256_cmp_pd(x, x, _CMP_UNORD_Q))
#define BL512PS(z, q, x) _mm512_mask_mov_ps(z, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), q)
#define BL512PD(z, q, x) _mm512_mask_mov_pd(z, _mm512_cmp_pd_mask(x, x, _CMP_UNORD_Q), q)
#define MINMAXF_FN(NAME, TARGET, VS, WS, LS, SS, BS, AS, MINS, MAXS, ORS, ANDS,     \
                   VD, WD, LD, SD, BD, AD, MIND, MAXD, ORD, ANDD)                    \
    __attribute__((target(TARGET)))                                            \
    static void NAME(void *dst, const void *a, const void *b, size_t n, plait_dtype_t dt, \
                     plait_op_t op)                                            \
    {                                                                          \
        if (dt == PLAIT_FLOAT32 && op == PLAIT_MIN)                            \
            VECF(float, VS, WS, LS, SS, FMM(BS, AS, MINS, ORS, x, y), fmin754f); \
        else if (dt == PLAIT_FLOAT32)                                          \
            VECF(float, VS, WS, LS, SS, FMM(BS, AS, MAXS, ANDS, x, y), fmax754f); \
        else if (op == PLAIT_MIN)                                              \
            VECF(double, VD, WD, LD, SD, FMM(BD, AD, MIND, ORD, x, y), fmin754d); \
        else                                                                   \
            VECF(double, VD, WD, LD, SD, FMM(BD, AD, MAXD, ANDD, x, y), fmax754d); \
    }
MINMAXF_FN(minmaxf_avx2, "avx2", __m256, 8, _mm256_loadu_ps, _mm256_storeu_ps, BL256PS,
           _mm256_add_ps, _mm256_min_ps, _mm256_max_ps, _mm256_or_ps, _mm256_and_ps,
           __m256d, 4, _mm256_loadu_pd, _mm256_storeu_pd, BL256PD, _mm256_add_pd,
           _mm256_min_pd, _mm256_max_pd, _mm256_or_pd, _mm256_and_pd)
MINMAXF_FN(minmaxf_avx512, "avx512f,avx512dq,avx2,prefer-vector-width=512", __m512, 16,
           _mm512_loadu_ps, _mm512_storeu_ps, BL512PS, _mm512_add_ps, _mm512_min_ps,
           _mm512_max_ps, _mm512_or_ps, _mm512_and_ps, __m512d, 8, _mm512_loadu_pd,
           _mm512_storeu_pd, BL512PD, _mm512_add_pd, _mm512_min_pd, _mm512_max_pd,
           _mm512_or_pd, _mm512_and_pd)
#define MINMAXF(FN)                                                            \
    if ((dt == PLAIT_FLOAT32 || dt == PLAIT_FLOAT64) && (op == PLAIT_MIN || op == PLAIT_MAX)) { \
        FN(dst, a, b, n, dt, op);                                              \
        return;                                                                \
    }

__attribute__((target("avx2,f16c")))
static void red_avx2(void *dst, const void *a, const void *b, size_t n, plait_dtype_t dt,
                     plait_op_t op)
{
    MINMAXF(minmaxf_avx2)
    if (dt == PLAIT_FLOAT16) {
        VEC16(8, F16_AVX2, _mm256_add_ps, _mm256_mul_ps, MIN256, MAX256, NANA256);
        return;
    }
    if (dt == PLAIT_BFLOAT16) {
        VEC16(16, BF16_AVX2, _mm256_add_ps, _mm256_mul_ps, MIN256, MAX256, NANA256);
        return;
    }
    REDUCE_BODY
}

__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,f16c,prefer-vector-width=512")))
static void red_avx512(void *dst, const void *a, const void *b, size_t n, plait_dtype_t dt,
                       plait_op_t op)
{
    MINMAXF(minmaxf_avx512)
    if (dt == PLAIT_FLOAT16) {
        VEC16(16, F16_AVX512, _mm512_add_ps, _mm512_mul_ps, MIN512, MAX512, NANA512);
        return;
    }
    if (dt == PLAIT_BFLOAT16) {
        VEC16(32, BF16_AVX512, _mm512_add_ps, _mm512_mul_ps, MIN512, MAX512, NANA512);
        return;
    }
    REDUCE_BODY
}

/* AVG's division of 16-bit floats (dst = src / by) and float16 AVG's
 * pre-scaling (dst = src * by), through the same loops: the SUM slot of
 * VEC16 divides or multiplies by the broadcast value instead (y, loaded
 * from the same buffer, is unused). IEEE arithmetic and the conversions
 * give the scalar code's bits; the scalar float16 conversion ran at 0.3
 * GB/s, forty times slower than the reduction before it. */
#define DIV_BY_DV(x, y) ((void)(y), (x) / dv)   /* GCC vector division: DIVPS */
#define MUL_BY_DV(x, y) ((void)(y), (x) * dv)   /* (float16 AVG's pre-scaling) */
#define SCALE16_FN(NAME, OPM, TARGET, VT, SET1, MUL, MIN, MAX, NANA, WF, LOOPF, WB, LOOPB) \
    __attribute__((target(TARGET)))                                            \
    static void NAME(void *dst, const void *src, size_t n, plait_dtype_t dt,   \
                     float by)                                                 \
    {                                                                          \
        const void *a = src, *b = src;                                         \
        plait_op_t op = PLAIT_SUM;                                             \
        VT dv = SET1(by);                                                      \
        if (dt == PLAIT_FLOAT16)                                               \
            VEC16(WF, LOOPF, OPM, MUL, MIN, MAX, NANA);                        \
        else                                                                   \
            VEC16(WB, LOOPB, OPM, MUL, MIN, MAX, NANA);                        \
    }
#define SCALE16_AVX2(NAME, OPM)                                                \
    SCALE16_FN(NAME, OPM, "avx2,f16c", __m256, _mm256_set1_ps, _mm256_mul_ps, \
               MIN256, MAX256, NANA256, 8, F16_AVX2, 16, BF16_AVX2)
#define SCALE16_AVX512(NAME, OPM)                                              \
    SCALE16_FN(NAME, OPM, "avx512f,avx512bw,avx512dq,avx512vl,avx2,f16c,prefer-vector-width=512", \
               __m512, _mm512_set1_ps, _mm512_mul_ps, MIN512, MAX512, NANA512, \
               16, F16_AVX512, 32, BF16_AVX512)

SCALE16_AVX2(scale16_avx2, DIV_BY_DV)
SCALE16_AVX512(scale16_avx512, DIV_BY_DV)
SCALE16_AVX2(mul16_avx2, MUL_BY_DV)
SCALE16_AVX512(mul16_avx512, MUL_BY_DV)

/* float16 AVG's fused turn (pcoll_add_scaled16): x + y scaled and rounded to
 * float16 on the way, in registers: the bits of pcoll_mul16_to's element
 * followed by VEC16's SUM of it. (No NANA on the product: dv is never a
 * NaN, and MULPS then returns y's NaN quieted, payload kept.) */
#define ADDSC256(x, y) _mm256_add_ps(x, _mm256_cvtph_ps(CVT256_OUT(_mm256_mul_ps(y, dv))))
#define ADDSC512(x, y) _mm512_add_ps(x, _mm512_cvtph_ps(CVT512_OUT(_mm512_mul_ps(y, dv))))
#define ADDSC16_FN(NAME, TARGET, VT, SET1, ADDSC, MUL, MIN, MAX, NANA, W, LOOPF) \
    __attribute__((target(TARGET)))                                            \
    static void NAME(void *dst, const void *a, const void *b, size_t n, float by) \
    {                                                                          \
        plait_op_t op = PLAIT_SUM;                                             \
        VT dv = SET1(by);                                                      \
        VEC16(W, LOOPF, ADDSC, MUL, MIN, MAX, NANA);                           \
    }
ADDSC16_FN(addsc16_avx2, "avx2,f16c", __m256, _mm256_set1_ps, ADDSC256, _mm256_mul_ps,
           MIN256, MAX256, NANA256, 8, F16_AVX2)
ADDSC16_FN(addsc16_avx512, "avx512f,avx512bw,avx512dq,avx512vl,avx2,f16c,prefer-vector-width=512",
           __m512, _mm512_set1_ps, ADDSC512, _mm512_mul_ps, MIN512, MAX512,
           NANA512, 16, F16_AVX512)
#endif

/* ------------------------------------------------------------- dispatch */

static const char *red_isa_name = "scalar";
static red_fn_t red_fn;
/* float16 / bfloat16 AVG division of the family, NULL: the scalar loops */
typedef void (*scale16_fn_t)(void *dst, const void *src, size_t n, plait_dtype_t dt, float by);
static scale16_fn_t scale16_fn, mul16_fn;   /* dst = src / by, src * by */
typedef void (*addsc16_fn_t)(void *dst, const void *a, const void *b, size_t n, float by);
static addsc16_fn_t addsc16_fn;             /* float16 dst = a + b * by */

/* pref: PLAIT_REDUCE_ISA (0 auto, 1 scalar, 2 avx2, 3 avx512); a family the
 * CPU lacks falls back to the best it has. */
static void red_pick(int pref)
{
    red_fn_t fn = red_scalar;
    const char *name = "scalar";
    scale16_fn = mul16_fn = NULL;
    addsc16_fn = NULL;
#ifdef PCOLL_X86
    int has512, has2;
    __builtin_cpu_init();
    has512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    has2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    if (has512 && (pref == 0 || pref == 3)) {
        fn = red_avx512;
        name = "avx512";
        scale16_fn = scale16_avx512;
        mul16_fn = mul16_avx512;
        addsc16_fn = addsc16_avx512;
    } else if (has2 && pref != 1) {
        fn = red_avx2;
        name = "avx2";
        scale16_fn = scale16_avx2;
        mul16_fn = mul16_avx2;
        addsc16_fn = addsc16_avx2;
    }
#endif
    red_isa_name = name;
    red_fn = fn;
}

/* The family PLAIT_REDUCE_ISA asks for, picked at the first use. */
static void red_ready(void)
{
    if (!red_fn) {
        ppt_state_t *s = ppt_get();
        red_pick(s ? s->cfg.reduce_isa : 0);
    }
}

void pcoll_reduce(void *dst, const void *a, const void *b, size_t count, plait_dtype_t dt,
                  plait_op_t op)
{
    red_ready();
    red_fn(dst, a, b, count, dt, op);
}

const char *pcoll_reduce_pick(int pref)
{
    red_pick(pref);
    return red_isa_name;
}

const char *pcoll_reduce_isa(void)
{
    red_ready();
    return red_isa_name;
}

/* AVG's division: once per element, x / (float or double)divisor, so every
 * family agrees (the 16-bit floats through the family's vectors). */
void pcoll_scale(void *buf, size_t count, plait_dtype_t dt, int divisor)
{
    una_u16 *h = buf;
    red_ready();
    if (scale16_fn && (dt == PLAIT_FLOAT16 || dt == PLAIT_BFLOAT16)) {
        scale16_fn(buf, buf, count, dt, (float)divisor);
        return;
    }
    switch (dt) {
    case PLAIT_FLOAT32: {
        una_f32 *f = buf;
        for (size_t i = 0; i < count; i++)
            f[i] = f[i] / (float)divisor;
        break;
    }
    case PLAIT_FLOAT64: {
        una_f64 *f = buf;
        for (size_t i = 0; i < count; i++)
            f[i] = f[i] / (double)divisor;
        break;
    }
    case PLAIT_FLOAT16:
        for (size_t i = 0; i < count; i++)
            h[i] = f32_to_f16_sw(f16_to_f32_sw(h[i]) / (float)divisor);
        break;
    case PLAIT_BFLOAT16:
        for (size_t i = 0; i < count; i++)
            h[i] = f32_to_bf16(bf16_to_f32(h[i]) / (float)divisor);
        break;
    default:
        break;
    }
}

void pcoll_mul16_to(void *dst, const void *src, size_t count, plait_dtype_t dt, float factor)
{
    una_u16 *h = dst;
    const una_u16 *hs = src;
    red_ready();
    if (mul16_fn) {
        mul16_fn(dst, src, count, dt, factor);
        return;
    }
    for (size_t i = 0; i < count; i++)
        h[i] = dt == PLAIT_FLOAT16 ? f32_to_f16_sw(f16_to_f32_sw(hs[i]) * factor)
                                   : f32_to_bf16(bf16_to_f32(hs[i]) * factor);
}

void pcoll_add_scaled16(void *dst, const void *a, const void *b, size_t count, float factor)
{
    una_u16 *h = dst;
    const una_u16 *ha = a, *hb = b;
    red_ready();
    if (addsc16_fn) {
        addsc16_fn(dst, a, b, count, factor);
        return;
    }
    for (size_t i = 0; i < count; i++) {
        float y = f16_to_f32_sw(f32_to_f16_sw(f16_to_f32_sw(hb[i]) * factor));
        h[i] = f32_to_f16_sw(f32_op(f16_to_f32_sw(ha[i]), y, PLAIT_SUM));
    }
}

void pcoll_take_input(void *dst, const void *src, size_t count, plait_dtype_t dt, plait_op_t op,
                      int n)
{
    if (pcoll_prescaled(dt, op))
        pcoll_mul16_to(dst, src, count, dt, 1.0f / (float)n);
    else if (dst != src)
        memcpy(dst, src, count * plait_dtype_size(dt));
}
