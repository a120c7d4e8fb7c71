/*
 * coll_refuse.c -- one rank refuses a collective call (its arguments fail the
 * checks), the others pass good ones: they must not wait for its part.
 *
 * Run with PLAIT_TIMEOUT=0 (no limit): before pt2pt/notice.c the other ranks
 * of every case below but bcast waited for ever. Each case runs on a fresh
 * duplicate of the world (the refused call may leave that communicator's
 * collectives out of step, USER-GUIDE); the last rank L makes the bad call:
 *
 *   allreduce  16 int32, L's sendbuf NULL      (shared area inside a host)
 *   big        65536 int32, L's op invalid     (messages / direct reads)
 *   allgather  L's recvbuf NULL
 *   alltoall   L's datatype invalid
 *   gather     to root 0, L's root -1          (the root must hear of it)
 *   bcast      from root 0, L's root out of range (L is needed or not: the
 *              others may complete)
 *   iallreduce non-blocking, L's req NULL; the others complete it with
 *              plait_wait, or with a plait_test loop ("test")
 *   ialltoall  non-blocking, 65536 int32 in all, L's recvbuf NULL: the
 *              others' sends to L are still out when their call fails, and
 *              freeing the request withdraws them (it once did so without
 *              the library lock: the next call on that rank hung)
 *
 * "mismatch": no rank refuses, but L passes twice the others' count (a
 * mismatch only the transfers show) to allreduce, allgather, alltoall and
 * bcast of 64K-256K elements: every rank must return PLAIT_OK or
 * PLAIT_ERR_ARG (a rank that saw the mismatch tells the others), L must
 * fail, and none may wait for ever.
 *
 * "diverge": L makes another kind of call that no transfer of its own can
 * show: MAX where the others SUM (allreduce of 16 and 65536 int32), a bcast
 * where they allreduce, and twice their count of a 64K allreduce (with
 * automatic selection the ranks may pick different algorithms). The rank
 * that sees a message of another kind under the call's number, or the
 * area's or direct reads' own checks, fails and tells the others: every
 * rank must return PLAIT_ERR_ARG (or PLAIT_OK), none may wait for ever.
 *
 * Otherwise L must get PLAIT_ERR_ARG naming its own argument. Every other rank that
 * needs L must get PLAIT_ERR_ARG whose text names rank L and quotes L's
 * message; the others may get PLAIT_OK. Then an allreduce of seeded random
 * data on the world (never refused) must match a local reference: the
 * library stays usable. Exit 0 when all held. Written against plait.h only;
 * run by t-coll.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plait.h"

#define SMALL 16
#define BIG   65536

static int me, np, failures;

#define FAIL(...) do { fprintf(stderr, "rank %d: FAIL: ", me); fprintf(stderr, __VA_ARGS__); \
                       fputc('\n', stderr); failures++; } while (0)

/* One case's call on this rank; bad: this rank is L. */
static int call(const char *kind, int bad, plait_comm_t c, int test_loop, int *in, int *out)
{
    plait_request_t q = NULL;
    int rc, done = 0;
    if (!strcmp(kind, "allreduce"))
        return plait_allreduce(bad ? NULL : in, out, SMALL, PLAIT_INT32, PLAIT_SUM, c);
    if (!strcmp(kind, "big"))
        return plait_allreduce(in, out, BIG, PLAIT_INT32, bad ? (plait_op_t)77 : PLAIT_SUM, c);
    if (!strcmp(kind, "allgather"))
        return plait_allgather(in, bad ? NULL : out, SMALL, PLAIT_INT32, c);
    if (!strcmp(kind, "alltoall"))
        return plait_alltoall(in, out, SMALL, bad ? (plait_dtype_t)42 : PLAIT_INT32, c);
    if (!strcmp(kind, "gather"))
        return plait_gather(in, out, SMALL, PLAIT_INT32, bad ? -1 : 0, c);
    if (!strcmp(kind, "bcast"))
        return plait_bcast(out, SMALL, PLAIT_INT32, bad ? np + 5 : 0, c);
    rc = !strcmp(kind, "ialltoall")
           ? plait_ialltoall(in, bad ? NULL : out, BIG / (size_t)np, PLAIT_INT32, c, &q)
           : plait_iallreduce(in, out, SMALL, PLAIT_INT32, PLAIT_SUM, c, bad ? NULL : &q);
    if (rc != PLAIT_OK || !test_loop)
        return rc == PLAIT_OK ? plait_wait(&q, NULL) : rc;
    while (rc == PLAIT_OK && !done)
        rc = plait_test(&q, &done, NULL);
    return rc;
}

/* The word L's own error must name. */
static const char *bad_word(const char *kind)
{
    return !strcmp(kind, "allreduce") ? "sendbuf" : !strcmp(kind, "big") ? "op"
         : !strcmp(kind, "allgather") || !strcmp(kind, "ialltoall") ? "recvbuf"
         : !strcmp(kind, "alltoall") ? "dt"
         : !strcmp(kind, "gather") || !strcmp(kind, "bcast") ? "root" : "req";
}

static void one_case(const char *kind, int test_loop)
{
    int last = np - 1, bad = me == last, rc, needs_last;
    int *in = malloc(sizeof(int) * (size_t)BIG * (size_t)np);
    int *out = malloc(sizeof(int) * (size_t)BIG * (size_t)np);
    plait_comm_t c;
    double t0;
    char want[32];
    if (!in || !out || plait_comm_dup(plait_comm_world(), &c) != PLAIT_OK) {
        FAIL("%s: setup: %s", kind, plait_last_error());
        exit(1);
    }
    for (int i = 0; i < BIG * np; i++)
        in[i] = i % 97;
    memset(out, 0xA5, sizeof(int) * (size_t)BIG * (size_t)np);
    t0 = plait_wtime();
    rc = call(kind, bad, c, test_loop, in, out);
    needs_last = strcmp(kind, "bcast") && (strcmp(kind, "gather") || me == 0);
    fprintf(stderr, "rank %d: %s%s -> %s after %.2f s: %s\n", me, kind, test_loop ? " (test loop)"
            : "", plait_strerror(rc), plait_wtime() - t0, rc ? plait_last_error() : "");
    snprintf(want, sizeof want, "rank %d ", last);
    if (bad) {
        if (rc != PLAIT_ERR_ARG || !strstr(plait_last_error(), bad_word(kind)))
            FAIL("%s: the refusing rank got %d '%s', expected PLAIT_ERR_ARG naming %s", kind, rc,
                 plait_last_error(), bad_word(kind));
    } else if (rc == PLAIT_ERR_ARG) {
        if (!strstr(plait_last_error(), want) || !strstr(plait_last_error(), "failed this call") ||
            !strstr(plait_last_error(), bad_word(kind)))
            FAIL("%s: '%s' does not name rank %d's refusal and its reason", kind,
                 plait_last_error(), last);
    } else if (rc != PLAIT_OK || needs_last) {
        FAIL("%s: got %d (%s), expected PLAIT_ERR_ARG%s", kind, rc, plait_strerror(rc),
             needs_last ? "" : " or PLAIT_OK");
    }
    free(in);
    free(out);
    /* (c's collectives may be out of step: no more calls on it) */
    if (plait_comm_free(&c) != PLAIT_OK)
        FAIL("%s: comm_free: %s", kind, plait_last_error());
}

/* L passes twice the count: the transfers show it (truncated or short
 * messages), the rank that sees it tells the others. */
static void mismatch_case(const char *kind)
{
    int last = np - 1, rc;
    size_t n = (size_t)BIG * (me == last ? 2 : 1), cap = (size_t)BIG * 2 * (size_t)np;
    int *in = calloc(cap, sizeof(int)), *out = malloc(cap * sizeof(int));
    plait_comm_t c;
    double t0;
    if (!in || !out || plait_comm_dup(plait_comm_world(), &c) != PLAIT_OK) {
        FAIL("%s: setup: %s", kind, plait_last_error());
        exit(1);
    }
    memset(out, 0xA5, cap * sizeof(int));
    t0 = plait_wtime();
    rc = !strcmp(kind, "allreduce") ? plait_allreduce(in, out, n, PLAIT_INT32, PLAIT_SUM, c)
       : !strcmp(kind, "allgather") ? plait_allgather(in, out, n / 4, PLAIT_INT32, c)
       : !strcmp(kind, "alltoall") ? plait_alltoall(in, out, n / (size_t)np, PLAIT_INT32, c)
       : plait_bcast(me == 0 ? in : out, n, PLAIT_INT32, 0, c);
    fprintf(stderr, "rank %d: mismatched %s -> %s after %.2f s: %s\n", me, kind,
            plait_strerror(rc), plait_wtime() - t0, rc ? plait_last_error() : "");
    /* (a rank whose notice of the rank that saw it came after that rank's
     * withdrawn sends says so instead) */
    if (rc != PLAIT_OK && rc != PLAIT_ERR_ARG &&
        !(rc == PLAIT_ERR_TRANSPORT && strstr(plait_last_error(), "withdrew")))
        FAIL("mismatched %s: got %d (%s), expected PLAIT_ERR_ARG or PLAIT_OK", kind, rc,
             plait_strerror(rc));
    if (me == last && rc == PLAIT_OK)
        FAIL("mismatched %s: the rank with twice the count got PLAIT_OK", kind);
    free(in);
    free(out);
    if (plait_comm_free(&c) != PLAIT_OK)
        FAIL("%s: comm_free: %s", kind, plait_last_error());
}

/* L makes another kind of call (case k of the "diverge" list above). */
static void diverge_case(int k)
{
    static const char *names[] = {"MAX against SUM, 16", "MAX against SUM, 65536",
                                  "bcast against allreduce", "allreduce of twice the count"};
    int last = np - 1, bad = me == last, rc;
    size_t cap = (size_t)BIG * 2 * (size_t)np;
    int *in = calloc(cap, sizeof(int)), *out = malloc(cap * sizeof(int));
    plait_comm_t c;
    double t0;
    if (!in || !out || plait_comm_dup(plait_comm_world(), &c) != PLAIT_OK) {
        FAIL("%s: setup: %s", names[k], plait_last_error());
        exit(1);
    }
    memset(out, 0xA5, cap * sizeof(int));
    t0 = plait_wtime();
    rc = k < 2 ? plait_allreduce(in, out, k ? BIG : SMALL, PLAIT_INT32, bad ? PLAIT_MAX : PLAIT_SUM, c)
       : k == 2 && bad ? plait_bcast(out, SMALL, PLAIT_INT32, 0, c)
       : plait_allreduce(in, out, k == 3 && bad ? 2 * BIG : k == 3 ? BIG : SMALL, PLAIT_INT32,
                         PLAIT_SUM, c);
    fprintf(stderr, "rank %d: %s -> %s after %.2f s: %s\n", me, names[k], plait_strerror(rc),
            plait_wtime() - t0, rc ? plait_last_error() : "");
    if (rc != PLAIT_OK && rc != PLAIT_ERR_ARG &&
        !(rc == PLAIT_ERR_TRANSPORT && strstr(plait_last_error(), "withdrew")))
        FAIL("%s: got %d (%s), expected PLAIT_ERR_ARG or PLAIT_OK", names[k], rc,
             plait_strerror(rc));
    free(in);
    free(out);
    if (plait_comm_free(&c) != PLAIT_OK)
        FAIL("%s: comm_free: %s", names[k], plait_last_error());
}

/* A correct allreduce on the world afterwards, against a local reference. */
static void still_usable(unsigned seed)
{
    int in[SMALL * 4], out[SMALL * 4];
    for (int i = 0; i < SMALL * 4; i++) {
        in[i] = (int)((seed * 2654435761u + (unsigned)me * 40503u + (unsigned)i * 977u) % 1000);
        out[i] = -77;
    }
    if (plait_allreduce(in, out, SMALL * 4, PLAIT_INT32, PLAIT_SUM, plait_comm_world()) != PLAIT_OK) {
        FAIL("allreduce afterwards: %s", plait_last_error());
        return;
    }
    for (int i = 0; i < SMALL * 4; i++) {
        long want = 0;
        for (int r = 0; r < np; r++)
            want += (long)((seed * 2654435761u + (unsigned)r * 40503u + (unsigned)i * 977u) % 1000);
        if (out[i] != want) {
            FAIL("allreduce afterwards: element %d is %d, expected %ld (seed %u)", i, out[i], want,
                 seed);
            return;
        }
    }
}

int main(int argc, char **argv)
{
    static const char *all[] = {"allreduce", "big", "allgather", "alltoall", "gather", "bcast",
                                "iallreduce", "ialltoall"};
    const char *s = getenv("PLAIT_TEST_SEED");
    unsigned seed = s ? (unsigned)strtoul(s, NULL, 10) : 20261128u;
    int test_loop = argc > 1 && !strcmp(argv[1], "test");
    int mismatch = argc > 1 && !strcmp(argv[1], "mismatch");
    int diverge = argc > 1 && !strcmp(argv[1], "diverge");
    if (plait_init() != PLAIT_OK) {
        fprintf(stderr, "plait_init: %s\n", plait_last_error());
        return 1;
    }
    plait_comm_rank(plait_comm_world(), &me);
    plait_comm_size(plait_comm_world(), &np);
    if (me == 0)
        printf("coll_refuse: %d ranks, seed %u%s\n", np, seed, test_loop ? ", test loops" : "");
    if (np < 2) {
        fprintf(stderr, "coll_refuse wants 2 or more ranks\n");
        plait_finalize();
        return 1;
    }
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        if (diverge && k < 4)
            diverge_case((int)k);
        else if (diverge)
            continue;
        else if (mismatch && k < 4)
            mismatch_case(k == 0 ? "allreduce" : k == 1 ? "allgather" : k == 2 ? "alltoall"
                                                                                : "bcast");
        else if (!mismatch && (!test_loop || all[k][0] == 'i'))
            one_case(all[k], test_loop);
    still_usable(seed);
    if (plait_finalize() != PLAIT_OK) {
        FAIL("finalize: %s", plait_last_error());
    }
    if (me == 0 && !failures)
        printf("coll_refuse: ok\n");
    return failures ? 1 : 0;
}
