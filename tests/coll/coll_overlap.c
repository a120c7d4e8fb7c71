/*
 * coll_overlap.c -- non-blocking collectives move on while the program
 * computes, without any plait call (the progress thread, pt2pt/async.c).
 *
 * Every rank starts three collectives at once -- an allreduce of SUM over
 * int64 (a multi-round schedule: ring or recursive doubling), an allgather
 * and a bcast from the last rank -- on seeded data, with poisoned outputs,
 * then makes no plait call at all: it watches its own output buffers
 * (volatile reads) until each holds the result it computed itself from
 * every rank's seeded input. Only then does it call plait_wait on the
 * three requests and check the results again.
 *
 *   coll_overlap on       the outputs must complete before any plait call;
 *                         gives up (exit 1) after 60 s of watching
 *   coll_overlap off      (PLAIT_PROGRESS_THREAD=0) the outputs must stay
 *                         unfinished through 0.5 s of watching (no pass ran:
 *                         the check above is not vacuous), then plait_wait
 *                         completes them
 *
 * Options after the mode:
 *   selfbind  every rank binds itself to its first CPU before plait_init,
 *             leaving the others spare: the progress thread moves there and
 *             polls (PLAIT_PROGRESS_POLL)
 *   churn     then CHURN_ITERS rounds of an allreduce, an allgather and a
 *             bcast of seeded random sizes in flight at once, started,
 *             followed by a random 0-60 us of computation (a spin, no plait
 *             call), then plait_waitall or a plait_test loop, so the thread
 *             and the program hand the work over at every point of a
 *             collective; each result checked against a local reference
 *
 * Exit 0 when every check held. Written against plait.h only; run by t-coll.sh.
 */
#define _GNU_SOURCE 1   /* selfbind.h: sched_setaffinity */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plait.h"
#include "selfbind.h"

#define AR_COUNT 20000        /* int64 elements: 160 KB, above the eager sizes */
#define AG_COUNT 3001         /* int32 elements per rank */
#define BC_COUNT 50000        /* bytes */
#define CHURN_ITERS 300

static uint64_t seed_of(void)
{
    const char *e = getenv("PLAIT_TEST_SEED");
    return e && *e ? strtoull(e, NULL, 10) : 20261121ull;
}

/* splitmix64: element k of stream (rank, what). */
static uint64_t mix(uint64_t seed, int rank, int what, uint64_t k)
{
    uint64_t z = seed ^ ((uint64_t)rank << 40) ^ ((uint64_t)what << 32) ^ k;
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void nap(long us)
{
    struct timespec t = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&t, NULL);
}

typedef struct {
    int64_t *ar_in, *ar_out, *ar_ref;
    int32_t *ag_out, *ag_ref;
    uint8_t *bc, *bc_ref;
    int      rank, size;
} bufs_t;

static void fill(bufs_t *b, uint64_t seed)
{
    int root = b->size - 1;
    memset(b->ar_out, 0xA5, AR_COUNT * sizeof(int64_t));
    memset(b->ag_out, 0xA5, (size_t)b->size * AG_COUNT * sizeof(int32_t));
    for (size_t k = 0; k < AR_COUNT; k++) {
        b->ar_in[k] = (int64_t)(mix(seed, b->rank, 1, k) >> 20);
        b->ar_ref[k] = 0;
        for (int p = 0; p < b->size; p++)
            b->ar_ref[k] += (int64_t)(mix(seed, p, 1, k) >> 20);
    }
    for (int p = 0; p < b->size; p++)
        for (size_t k = 0; k < AG_COUNT; k++)
            b->ag_ref[(size_t)p * AG_COUNT + k] = (int32_t)mix(seed, p, 2, k);
    memcpy(b->ag_out + (size_t)b->rank * AG_COUNT, b->ag_ref + (size_t)b->rank * AG_COUNT,
           AG_COUNT * sizeof(int32_t));   /* in place: own block already there */
    for (size_t k = 0; k < BC_COUNT; k++)
        b->bc_ref[k] = (uint8_t)mix(seed, root, 3, k);
    if (b->rank == root)
        memcpy(b->bc, b->bc_ref, BC_COUNT);
    else
        memset(b->bc, 0xA5, BC_COUNT);
}

/* How many of the three outputs hold their result (volatile reads: the
 * library may be writing them from another thread). */
static int finished(const bufs_t *b)
{
    const volatile int64_t *ar = b->ar_out;
    const volatile int32_t *ag = b->ag_out;
    const volatile uint8_t *bc = b->bc;
    int n = 3;
    for (size_t k = 0; k < AR_COUNT; k++)
        if (ar[k] != b->ar_ref[k]) { n--; break; }
    for (size_t k = 0; k < (size_t)b->size * AG_COUNT; k++)
        if (ag[k] != b->ag_ref[k]) { n--; break; }
    for (size_t k = 0; k < BC_COUNT; k++)
        if (bc[k] != b->bc_ref[k]) { n--; break; }
    return n;
}

static void die(int rank, const char *what)
{
    fprintf(stderr, "coll_overlap: rank %d: %s (seed %llu)\n", rank, what,
            (unsigned long long)seed_of());
    exit(1);
}

static void spin_us(double us)
{
    double end = now_s() + us * 1e-6;
    while (now_s() < end)
        ;
}

/* Call it of the churn: an allreduce, an allgather and a bcast (root it mod
 * size) of seeded sizes, with seeded data and poisoned outputs, all three
 * in flight at once. */
typedef struct {
    size_t nar, nag, nbc;
    int    root;
} churn_call_t;

static churn_call_t churn_fill(bufs_t *b, uint64_t seed, int it)
{
    churn_call_t c = {1 + (size_t)(mix(seed, 0, 4, (uint64_t)it) % AR_COUNT),
                      1 + (size_t)(mix(seed, 0, 6, (uint64_t)it) % AG_COUNT),
                      1 + (size_t)(mix(seed, 0, 7, (uint64_t)it) % BC_COUNT), it % b->size};
    uint64_t s = seed + (uint64_t)it;
    for (size_t k = 0; k < c.nar; k++) {
        b->ar_in[k] = (int64_t)(mix(s, b->rank, 1, k) >> 20);
        b->ar_ref[k] = 0;
        for (int p = 0; p < b->size; p++)
            b->ar_ref[k] += (int64_t)(mix(s, p, 1, k) >> 20);
    }
    memset(b->ar_out, 0xA5, c.nar * sizeof(int64_t));
    for (int p = 0; p < b->size; p++)
        for (size_t k = 0; k < c.nag; k++)
            b->ag_ref[(size_t)p * c.nag + k] = (int32_t)mix(s, p, 2, k);
    memset(b->ag_out, 0xA5, (size_t)b->size * c.nag * sizeof(int32_t));
    memcpy(b->ag_out + (size_t)b->rank * c.nag, b->ag_ref + (size_t)b->rank * c.nag,
           c.nag * sizeof(int32_t));   /* in place */
    for (size_t k = 0; k < c.nbc; k++)
        b->bc_ref[k] = (uint8_t)mix(s, c.root, 3, k);
    if (b->rank == c.root)
        memcpy(b->bc, b->bc_ref, c.nbc);
    else
        memset(b->bc, 0xA5, c.nbc);
    return c;
}

static void churn_check(const bufs_t *b, const churn_call_t *c, int it)
{
    const char *what = NULL;
    if (memcmp(b->ar_out, b->ar_ref, c->nar * sizeof(int64_t)) != 0)
        what = "allreduce";
    else if (memcmp(b->ag_out, b->ag_ref, (size_t)b->size * c->nag * sizeof(int32_t)) != 0)
        what = "allgather";
    else if (memcmp(b->bc, b->bc_ref, c->nbc) != 0)
        what = "bcast";
    if (what) {
        fprintf(stderr, "coll_overlap: rank %d: churn call %d (allreduce %zu, allgather %zu, "
                "bcast %zu elements, root %d): wrong %s result\n", b->rank, it, c->nar, c->nag,
                c->nbc, c->root, what);
        die(b->rank, "wrong churn result");
    }
}

/* CHURN_ITERS calls of three collectives in flight at once, started, then
 * a seeded 0-60 us of computation, then completed by plait_waitall or (every
 * other call, by seed) a plait_test loop; every output checked. */
static void churn(bufs_t *b, plait_comm_t w)
{
    uint64_t seed = seed_of() + 1000;
    for (int it = 0; it < CHURN_ITERS; it++) {
        churn_call_t c = churn_fill(b, seed, it);
        double us = (double)(mix(seed, b->rank, 5, (uint64_t)it) % 61);
        plait_request_t req[3];
        if (plait_iallreduce(b->ar_in, b->ar_out, c.nar, PLAIT_INT64, PLAIT_SUM, w, &req[0]) ||
            plait_iallgather(b->ag_out + (size_t)b->rank * c.nag, b->ag_out, c.nag, PLAIT_INT32,
                             w, &req[1]) ||
            plait_ibcast(b->bc, c.nbc, PLAIT_BYTE, c.root, w, &req[2]))
            die(b->rank, plait_last_error());
        spin_us(us);
        if (mix(seed, b->rank, 8, (uint64_t)it) & 1) {
            if (plait_waitall(3, req, NULL) != PLAIT_OK)
                die(b->rank, plait_last_error());
        } else {
            for (int k = 0; k < 3; k++) {
                int done = 0;
                while (!done)
                    if (plait_test(&req[k], &done, NULL) != PLAIT_OK)
                        die(b->rank, plait_last_error());
            }
        }
        churn_check(b, &c, it);
    }
}

int main(int argc, char **argv)
{
    int want_progress = argc > 1 && strcmp(argv[1], "off") == 0 ? 0 : 1, done, churning = 0;
    plait_comm_t w;
    plait_request_t req[3];
    bufs_t b;
    double t0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "selfbind") == 0)
            bind_first_cpu();
        else if (strcmp(argv[i], "churn") == 0)
            churning = 1;
        else {
            fprintf(stderr, "usage: %s on|off [selfbind] [churn]\n", argv[0]);
            return 2;
        }
    }
    if (plait_init() != PLAIT_OK)
        return 1;
    w = plait_comm_world();
    plait_comm_rank(w, &b.rank);
    plait_comm_size(w, &b.size);
    b.ar_in = malloc(AR_COUNT * sizeof(int64_t));
    b.ar_out = malloc(AR_COUNT * sizeof(int64_t));
    b.ar_ref = malloc(AR_COUNT * sizeof(int64_t));
    b.ag_out = malloc((size_t)b.size * AG_COUNT * sizeof(int32_t));
    b.ag_ref = malloc((size_t)b.size * AG_COUNT * sizeof(int32_t));
    b.bc = malloc(BC_COUNT);
    b.bc_ref = malloc(BC_COUNT);
    if (!b.ar_in || !b.ar_out || !b.ar_ref || !b.ag_out || !b.ag_ref || !b.bc || !b.bc_ref)
        die(b.rank, "out of memory");
    for (int round = 0; round < 3; round++) {
        uint64_t seed = seed_of() + (uint64_t)round;
        fill(&b, seed);
        if (plait_barrier(w) != PLAIT_OK)   /* everyone's outputs poisoned before any start */
            die(b.rank, plait_last_error());
        if (plait_iallreduce(b.ar_in, b.ar_out, AR_COUNT, PLAIT_INT64, PLAIT_SUM, w, &req[0]) ||
            plait_iallgather(b.ag_out + (size_t)b.rank * AG_COUNT, b.ag_out, AG_COUNT,
                             PLAIT_INT32, w, &req[1]) ||
            plait_ibcast(b.bc, BC_COUNT, PLAIT_BYTE, b.size - 1, w, &req[2]))
            die(b.rank, plait_last_error());
        /* the "computation": no plait call until the outputs are seen */
        t0 = now_s();
        while ((done = finished(&b)) < 3 && now_s() - t0 < (want_progress ? 60.0 : 0.5))
            nap(1000);
        if (want_progress && done < 3)
            die(b.rank, "non-blocking collectives made no progress in 60 s without plait calls");
        if (!want_progress && done == 3 && b.size > 1)
            die(b.rank, "outputs complete without any progress pass: the check is vacuous");
        if (plait_waitall(3, req, NULL) != PLAIT_OK)
            die(b.rank, plait_last_error());
        if (finished(&b) != 3)
            die(b.rank, "wrong result after plait_waitall");
    }
    if (churning)
        churn(&b, w);
    free(b.ar_in); free(b.ar_out); free(b.ar_ref); free(b.ag_out); free(b.ag_ref);
    free(b.bc); free(b.bc_ref);
    if (b.rank == 0)
        printf("coll_overlap %s: 9 calls ok (3 rounds of 3 collectives, %d ranks)%s\n",
               want_progress ? "on" : "off", b.size,
               churning ? ", and the churn's rounds of three" : "");
    return plait_finalize() == PLAIT_OK ? 0 : 1;
}
