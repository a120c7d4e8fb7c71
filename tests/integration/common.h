/*
 * common.h -- helpers shared by the integration test programs (run under
 * plaitrun, written against include/plait.h only).
 *
 * - A seeded RNG: every message's size, tag and bytes are a pure function of
 *   (seed, phase, communicator, sender, receiver, index), so a receiver computes
 *   its expectation independently of what the library hands it.
 * - Poison/guard helpers: receive buffers are filled with T_POISON and have
 *   T_GUARD extra bytes past their end, so unwritten and over-written bytes
 *   show up as the first bad index.
 * - CHECK macros: on failure print rank, case, seed, file:line and exit 1
 *   (plaitrun then ends the job, so a failure never turns into a hang).
 *
 * The seed is PLAIT_TEST_SEED (default T_DEFAULT_SEED); rerun a failure with
 * the seed it printed.
 */
#ifndef PLAIT_TEST_COMMON_H
#define PLAIT_TEST_COMMON_H

/* strcasestr, shm_open flags etc.; include this header before any other. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "plait.h"

#define T_DEFAULT_SEED 20261121ULL
#define T_POISON       0xA5
#define T_GUARD        64          /* poisoned bytes checked past every receive buffer */
#define T_NO_ERROR     ((size_t)-1)

/* Failure context: rank and seed are per process, the case name per thread. */
static int           t_rank = -1;
static uint64_t      t_seed = T_DEFAULT_SEED;
static _Thread_local const char *t_case = "setup";

static inline void t_vfail(const char *file, int line, const char *fmt, va_list ap)
    __attribute__((noreturn));
static inline void t_vfail(const char *file, int line, const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    fprintf(stderr, "FAIL rank %d case '%s' seed %llu (%s:%d): %s\n", t_rank, t_case,
            (unsigned long long)t_seed, file, line, msg);
    fflush(stderr);
    fflush(stdout);
    exit(1);
}

static inline void t_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));
static inline void t_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    t_vfail(file, line, fmt, ap);
}

/* Like t_fail, with the text of the failed condition in front. */
static inline void t_fail_cond(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 4, 5)));
static inline void t_fail_cond(const char *file, int line, const char *cond, const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    t_fail(file, line, "check '%s' failed: %s", cond, msg);
}

#define FAIL(...) t_fail(__FILE__, __LINE__, __VA_ARGS__)

/* CHECK(cond, fmt, ...): the format and its arguments say what was checked. */
#define CHECK(cond, ...)                                                            \
    do {                                                                            \
        if (!(cond)) t_fail_cond(__FILE__, __LINE__, #cond, __VA_ARGS__);           \
    } while (0)

/* A call that must return `want`; on mismatch prints both codes and last_error. */
#define CHECK_RC_IS(call, want)                                                     \
    do {                                                                            \
        int t_rc_ = (call);                                                         \
        if (t_rc_ != (want))                                                        \
            t_fail(__FILE__, __LINE__, "%s returned %d (%s), expected %d (%s); last_error: %s", \
                   #call, t_rc_, plait_strerror(t_rc_), (int)(want),                \
                   plait_strerror(want), plait_last_error());                       \
    } while (0)

#define CHECK_RC(call) CHECK_RC_IS(call, PLAIT_OK)

/* ------------------------------------------------------------------ RNG */

/* splitmix64 finalizer: turns structured keys into well-spread 64-bit values. */
static inline uint64_t t_mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

/* A key for one item of the test, mixed with the run's seed. */
static inline uint64_t t_key(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    return t_mix(t_seed ^ t_mix(a ^ t_mix(b ^ t_mix(c ^ t_mix(d)))));
}

typedef struct { uint64_t s; } t_rng_t;

static inline void t_rng_init(t_rng_t *r, uint64_t key)
{
    r->s = t_mix(key) | 1;   /* xorshift state must not be 0 */
}

/* xorshift64* */
static inline uint64_t t_rng_next(t_rng_t *r)
{
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static inline uint64_t t_rng_below(t_rng_t *r, uint64_t n)
{
    return n ? t_rng_next(r) % n : 0;
}

/*
 * A message size in 0..max with many small ones, some exactly around the
 * power-of-two sizes where eager/rendezvous thresholds usually sit
 * (4 KiB .. 128 KiB, +-1), and some large ones up to max.
 */
static inline size_t t_msg_size(t_rng_t *r, size_t max)
{
    static const size_t edges[] = { 4096, 8192, 16384, 32768, 65536, 131072 };
    uint64_t p = t_rng_below(r, 100);
    size_t n;
    if (p < 10)      n = 0;
    else if (p < 15) n = 1;
    else if (p < 45) n = 2 + t_rng_below(r, 256);
    else if (p < 65) n = t_rng_below(r, 8192);
    else if (p < 80) n = edges[t_rng_below(r, 6)] + t_rng_below(r, 3) - 1;
    else if (p < 95) n = t_rng_below(r, 256 * 1024);
    else if (p < 98) n = t_rng_below(r, max + 1);
    else             n = max;
    return n > max ? max : n;
}

/* ------------------------------------------------------------ patterns */

/* Fills buf[0..n) with the byte stream of key. */
static inline void t_fill(void *buf, size_t n, uint64_t key)
{
    t_rng_t r;
    unsigned char *p = buf;
    size_t i;
    t_rng_init(&r, key);
    for (i = 0; i + 8 <= n; i += 8) {
        uint64_t v = t_rng_next(&r);
        memcpy(p + i, &v, 8);
    }
    if (i < n) {
        uint64_t v = t_rng_next(&r);
        memcpy(p + i, &v, n - i);
    }
}

/* First index in buf[0..n) that differs from key's stream, T_NO_ERROR if none. */
static inline size_t t_check_fill(const void *buf, size_t n, uint64_t key)
{
    t_rng_t r;
    const unsigned char *p = buf;
    size_t i;
    t_rng_init(&r, key);
    for (i = 0; i < n; i += 8) {
        uint64_t v = t_rng_next(&r);
        size_t k = n - i < 8 ? n - i : 8;
        if (memcmp(p + i, &v, k) != 0) {
            const unsigned char *e = (const unsigned char *)&v;
            for (size_t j = 0; j < k; j++)
                if (p[i + j] != e[j]) return i + j;
        }
    }
    return T_NO_ERROR;
}

static inline void t_poison(void *buf, size_t n)
{
    memset(buf, T_POISON, n);
}

/* First index in buf[from..to) that is not poison, T_NO_ERROR if none. */
static inline size_t t_check_poison(const void *buf, size_t from, size_t to)
{
    const unsigned char *p = buf;
    for (size_t i = from; i < to; i++)
        if (p[i] != T_POISON) return i;
    return T_NO_ERROR;
}

/*
 * Checks a receive buffer of capacity cap (plus T_GUARD poisoned bytes) that
 * should hold the first len bytes of key's stream and poison after them. The
 * format names the message in the failure text.
 */
static inline void t_check_recv(const char *file, int line, const void *buf, size_t len,
                                size_t cap, uint64_t key, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
static inline void t_check_recv(const char *file, int line, const void *buf, size_t len,
                                size_t cap, uint64_t key, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    size_t bad = t_check_fill(buf, len, key);
    if (bad == T_NO_ERROR) bad = t_check_poison(buf, len, cap + T_GUARD);
    if (bad == T_NO_ERROR) return;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (bad < len)
        t_fail(file, line, "%s: wrong data at byte %zu of %zu (got 0x%02x)", what, bad, len,
               ((const unsigned char *)buf)[bad]);
    t_fail(file, line, "%s: byte %zu written past the %zu-byte message (buffer %zu + guard %d, "
           "got 0x%02x)", what, bad, len, cap, T_GUARD, ((const unsigned char *)buf)[bad]);
}

#define CHECK_RECV(buf, len, cap, key, ...) \
    t_check_recv(__FILE__, __LINE__, (buf), (len), (cap), (key), __VA_ARGS__)

/* ---------------------------------------------------------------- setup */

static inline void *t_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) FAIL("out of memory allocating %zu bytes", n);
    return p;
}

/* Reads the seed, initializes plait and returns world rank and size. */
static inline void t_init(int *rank, int *size)
{
    const char *s = getenv("PLAIT_TEST_SEED");
    if (s && *s) t_seed = strtoull(s, NULL, 0);
    setvbuf(stdout, NULL, _IOLBF, 0);
    t_case = "plait_init";
    CHECK_RC(plait_init());
    CHECK_RC(plait_comm_rank(plait_comm_world(), rank));
    CHECK_RC(plait_comm_size(plait_comm_world(), size));
    t_rank = *rank;
    CHECK(*size >= 1 && *rank >= 0 && *rank < *size, "rank %d size %d", *rank, *size);
}

static inline void t_finalize(void)
{
    t_case = "plait_finalize";
    CHECK_RC(plait_finalize());
}

/* Quick mode (PLAIT_TEST_QUICK=1) lets programs shrink their loops. */
static inline int t_quick(void)
{
    const char *q = getenv("PLAIT_TEST_QUICK");
    return q && *q && strcmp(q, "0") != 0;
}

#endif
