/*
 * tap.h -- tiny TAP helpers for the C unit tests (tests/unit/test_*.c).
 *
 * Output follows the project's test convention, one line per case:
 *     ok - <name>
 *     not ok - <name>
 *     #   at file.c:42: <detail>          (diagnostics start with "# ")
 *     ok - <name> # SKIP <reason>
 * tests/run-all.sh counts these lines. End main() with `return tap_done();`
 * (exit status 0 if no case failed, 1 otherwise).
 *
 *     TAP_OK(x > 0, "x is positive (x = %d)", x);
 *     TAP_IS_INT(f(3), 9, "f(3)");
 *     TAP_IS_STR(name, "shm", "transport name");
 *     TAP_IS_MEM(got, want, n, "copied block");
 *     tap_skip("udp loss", "needs netns");
 *     tap_diag("seed %llu", seed);
 */
#ifndef PLAIT_TEST_TAP_H
#define PLAIT_TEST_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int tap_count_run;
static int tap_count_failed;

static inline void tap_vline(int pass, const char *fmt, va_list ap)
{
    printf("%s - ", pass ? "ok" : "not ok");
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
}

/* A "# " diagnostic line (shown by the runner, never counted). */
static inline void tap_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void tap_diag(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("# ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

/* Records one case; returns pass so callers can stop early on failure. */
static inline int tap_ok_at(int pass, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline int tap_ok_at(int pass, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    tap_count_run++;
    va_start(ap, fmt);
    tap_vline(pass, fmt, ap);
    va_end(ap);
    if (!pass) {
        tap_count_failed++;
        tap_diag("  at %s:%d", file, line);
    }
    return pass;
}

#define TAP_OK(cond, ...) tap_ok_at(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

/* Integer equality; prints both values on failure. */
#define TAP_IS_INT(got, want, ...)                                                  \
    do {                                                                            \
        long long tap_g_ = (long long)(got), tap_w_ = (long long)(want);            \
        if (!tap_ok_at(tap_g_ == tap_w_, __FILE__, __LINE__, __VA_ARGS__))          \
            tap_diag("  got %lld, expected %lld (%s)", tap_g_, tap_w_, #got);       \
    } while (0)

/* String equality (NULL-safe); prints both strings on failure. */
#define TAP_IS_STR(got, want, ...)                                                  \
    do {                                                                            \
        const char *tap_g_ = (got), *tap_w_ = (want);                               \
        int tap_p_ = (tap_g_ && tap_w_) ? strcmp(tap_g_, tap_w_) == 0 : tap_g_ == tap_w_; \
        if (!tap_ok_at(tap_p_, __FILE__, __LINE__, __VA_ARGS__))                    \
            tap_diag("  got \"%s\", expected \"%s\"", tap_g_ ? tap_g_ : "(NULL)",   \
                     tap_w_ ? tap_w_ : "(NULL)");                                    \
    } while (0)

/* Memory equality; prints the first differing byte on failure. */
#define TAP_IS_MEM(got, want, n, ...)                                               \
    do {                                                                            \
        const unsigned char *tap_g_ = (const unsigned char *)(got);                 \
        const unsigned char *tap_w_ = (const unsigned char *)(want);                \
        size_t tap_n_ = (n), tap_i_ = 0;                                            \
        while (tap_i_ < tap_n_ && tap_g_[tap_i_] == tap_w_[tap_i_]) tap_i_++;       \
        if (!tap_ok_at(tap_i_ == tap_n_, __FILE__, __LINE__, __VA_ARGS__))          \
            tap_diag("  first difference at byte %zu of %zu: got 0x%02x, expected 0x%02x", \
                     tap_i_, tap_n_, tap_g_[tap_i_], tap_w_[tap_i_]);               \
    } while (0)

/* A case that cannot run here; counted as skipped by the runner. */
static inline void tap_skip(const char *name, const char *reason)
{
    tap_count_run++;
    printf("ok - %s # SKIP %s\n", name, reason);
    fflush(stdout);
}

/* Exit status for main: 0 if every case passed. */
static inline int tap_done(void)
{
    if (tap_count_run == 0) {   /* a test binary that checked nothing is a failure */
        printf("not ok - no test cases ran\n");
        return 1;
    }
    return tap_count_failed ? 1 : 0;
}

#endif
