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
 *   ibarrier   L's req NULL (it once neither counted the call nor told)
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
 * automatic selection the ranks may pick different algorithms), the
 * non-blocking form (ibarrier, iallreduce of 16) where they call the
 * blocking one (never matched, as in MPI; the area against messages), and
 * counts of 48 and 96 int32 to allreduce and bcast after a barrier (192 and
 * 384 bytes: the shared-memory area keeps calls of up to 256 bytes in slots
 * of their own, so the ranks publish in different places). The rank
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

/* Each case's own duplicate of the world (ok: its buffers were allocated);
 * a case that cannot be set up ends the program. */
static plait_comm_t case_comm(const char *name, int ok)
{
    plait_comm_t c;
    if (!ok || plait_comm_dup(plait_comm_world(), &c) != PLAIT_OK) {
        FAIL("%s: setup: %s", name, plait_last_error());
        exit(1);
    }
    return c;
}

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
    if (!strcmp(kind, "ibarrier"))
        rc = plait_ibarrier(c, bad ? NULL : &q);
    else
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
    c = case_comm(kind, in && out);
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

/* The end of a case where a mismatch may fail the call: every rank must
 * return PLAIT_OK or PLAIT_ERR_ARG (a rank whose notice came after the
 * notifier's withdrawn sends may say so instead); frees what the case made. */
static void mismatch_end(const char *name, int rc, double t0, plait_comm_t *c, int *in, int *out)
{
    fprintf(stderr, "rank %d: %s -> %s after %.2f s: %s\n", me, name, plait_strerror(rc),
            plait_wtime() - t0, rc ? plait_last_error() : "");
    if (rc != PLAIT_OK && rc != PLAIT_ERR_ARG &&
        !(rc == PLAIT_ERR_TRANSPORT && strstr(plait_last_error(), "withdrew")))
        FAIL("%s: got %d (%s), expected PLAIT_ERR_ARG or PLAIT_OK", name, rc, plait_strerror(rc));
    free(in);
    free(out);
    if (plait_comm_free(c) != PLAIT_OK)
        FAIL("%s: comm_free: %s", name, plait_last_error());
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
    char name[48];
    c = case_comm(kind, in && out);
    memset(out, 0xA5, cap * sizeof(int));
    t0 = plait_wtime();
    rc = !strcmp(kind, "allreduce") ? plait_allreduce(in, out, n, PLAIT_INT32, PLAIT_SUM, c)
       : !strcmp(kind, "allgather") ? plait_allgather(in, out, n / 4, PLAIT_INT32, c)
       : !strcmp(kind, "alltoall") ? plait_alltoall(in, out, n / (size_t)np, PLAIT_INT32, c)
       : plait_bcast(me == 0 ? in : out, n, PLAIT_INT32, 0, c);
    snprintf(name, sizeof name, "mismatched %s", kind);
    if (me == last && rc == PLAIT_OK)
        FAIL("%s: the rank with twice the count got PLAIT_OK", name);
    mismatch_end(name, rc, t0, &c, in, out);
}

/* L makes another kind of call (case k of the "diverge" list above). */
static void diverge_case(int k)
{
    static const char *names[] = {"MAX against SUM, 16", "MAX against SUM, 65536",
                                  "bcast against allreduce", "allreduce of twice the count",
                                  "ibarrier against barrier", "iallreduce against allreduce, 16",
                                  "allreduce of 96 against 48", "bcast of 96 against 48"};
    plait_request_t q = NULL;
    int last = np - 1, bad = me == last, rc;
    size_t cap = (size_t)BIG * 2 * (size_t)np;
    int *in = calloc(cap, sizeof(int)), *out = malloc(cap * sizeof(int));
    plait_comm_t c;
    double t0;
    c = case_comm(names[k], in && out);
    memset(out, 0xA5, cap * sizeof(int));
    t0 = plait_wtime();
    if ((k == 4 || k == 5) && bad) {   /* the non-blocking form where the others call the blocking one */
        rc = k == 4 ? plait_ibarrier(c, &q)
                    : plait_iallreduce(in, out, SMALL, PLAIT_INT32, PLAIT_SUM, c, &q);
        if (rc == PLAIT_OK)
            rc = plait_wait(&q, NULL);
    } else if (k == 4) {
        rc = plait_barrier(c);
    } else if (k >= 6) {   /* (after a barrier, which sets the area up) */
        size_t cnt = bad ? 96 : 48;
        if ((rc = plait_barrier(c)) == PLAIT_OK)
            rc = k == 6 ? plait_allreduce(in, out, cnt, PLAIT_INT32, PLAIT_SUM, c)
                        : plait_bcast(me == 0 ? in : out, cnt, PLAIT_INT32, 0, c);
    } else {
        rc = k < 2 ? plait_allreduce(in, out, k ? BIG : SMALL, PLAIT_INT32,
                                     bad ? PLAIT_MAX : PLAIT_SUM, c)
           : k == 2 && bad ? plait_bcast(out, SMALL, PLAIT_INT32, 0, c)
           : plait_allreduce(in, out, k == 3 && bad ? 2 * BIG : k == 3 ? BIG : SMALL, PLAIT_INT32,
                             PLAIT_SUM, c);
    }
    mismatch_end(names[k], rc, t0, &c, in, out);
}

/* Every rank refuses the same call alike (recvbuf NULL): nothing is left
 * behind, and the same communicator's next calls -- ibarrier, barrier,
 * iallreduce -- work (the ibarrier once took the refused call's number and
 * failed with its notice). */
static void alike_case(void)
{
    int in[SMALL], out[SMALL], rc;
    plait_request_t q = NULL;
    plait_comm_t c = case_comm("alike", 1);
    for (int i = 0; i < SMALL; i++)
        in[i] = me * 100 + i;
    if ((rc = plait_allreduce(in, NULL, SMALL, PLAIT_INT32, PLAIT_SUM, c)) != PLAIT_ERR_ARG)
        FAIL("alike: every rank's refused allreduce got %d", rc);
    for (int k = 0; k < 3; k++) {
        rc = plait_ibarrier(c, &q);
        if (rc != PLAIT_OK || (rc = plait_wait(&q, NULL)) != PLAIT_OK)
            FAIL("alike: ibarrier %d after the refusal: %s", k, plait_last_error());
    }
    if (plait_barrier(c) != PLAIT_OK)
        FAIL("alike: barrier after the refusal: %s", plait_last_error());
    memset(out, 0xA5, sizeof out);
    rc = plait_iallreduce(in, out, SMALL, PLAIT_INT32, PLAIT_SUM, c, &q);
    if (rc != PLAIT_OK || (rc = plait_wait(&q, NULL)) != PLAIT_OK)
        FAIL("alike: iallreduce after the refusal: %s", plait_last_error());
    for (int i = 0; i < SMALL && rc == PLAIT_OK; i++)
        if (out[i] != 100 * np * (np - 1) / 2 + np * i) {
            FAIL("alike: iallreduce element %d is %d, expected %d", i, out[i],
                 100 * np * (np - 1) / 2 + np * i);
            break;
        }
    if (plait_comm_free(&c) != PLAIT_OK)
        FAIL("alike: comm_free: %s", plait_last_error());
}

/* Non-blocking, L passes MAX where the others pass MIN to an ireduce of 57
 * float32 to root 0, completed with plait_wait, with plait_waitall behind an
 * ibcast, or with a plait_test loop (how = 0, 1, 2). The rank that sees the
 * other kind's message fails and tells the others (it once told nobody, and
 * the root waited for ever); a failed call's handle is freed (NULL). */
static void nb_diverge_case(int how)
{
    static const char *hows[] = {"plait_wait", "plait_waitall", "plait_test loop"};
    float s[57] = {0}, r[57];
    double b[484] = {0};
    plait_request_t q[2] = {NULL, NULL};
    int k = 0, rc, done = 0;
    plait_comm_t c = case_comm("nb diverge", 1);
    if (how == 1)
        plait_ibcast(b, 484, PLAIT_FLOAT64, 0, c, &q[k++]);
    rc = plait_ireduce(s, r, 57, PLAIT_FLOAT32, me == np - 1 ? PLAIT_MAX : PLAIT_MIN, 0, c, &q[k++]);
    if (rc == PLAIT_OK && how == 0)
        rc = plait_wait(&q[0], NULL);
    else if (rc == PLAIT_OK && how == 1)
        rc = plait_waitall(2, q, NULL);
    while (rc == PLAIT_OK && how == 2 && !done)
        rc = plait_test(&q[0], &done, NULL);
    fprintf(stderr, "rank %d: ireduce MAX against MIN, %s -> %s: %s\n", me, hows[how],
            plait_strerror(rc), rc ? plait_last_error() : "");
    if ((rc != PLAIT_OK && rc != PLAIT_ERR_ARG) || (me == 0 && rc != PLAIT_ERR_ARG))
        FAIL("ireduce MAX against MIN, %s: got %d (%s), expected PLAIT_ERR_ARG%s", hows[how], rc,
             plait_strerror(rc), me ? " or PLAIT_OK" : " at the root");
    if (q[0] || q[1])
        FAIL("ireduce MAX against MIN, %s: a request is left posted after %s", hows[how],
             plait_strerror(rc));
    if (plait_comm_free(&c) != PLAIT_OK)
        FAIL("nb diverge: comm_free: %s", plait_last_error());
}

/* "silent": mismatches that leave no message of another kind anywhere,
 * found by the stalled ranks' probes (pt2pt/probe.c):
 *   0  reduce of 16 int32: L passes root 1, the others root 0
 *   1  the same with 65536 int32
 *   2  bcast of 16 int32 from root 0: rank np/2 passes count 0 (with
 *      four or more ranks a binomial tree has it forward to another)
 *   3  the same with 65536 int32
 * Every rank must return PLAIT_OK or PLAIT_ERR_ARG, none may wait for ever
 * (with PLAIT_TIMEOUT=0 a hang fails the job). */
static void silent_case(int k)
{
    static const char *names[] = {"reduce, roots differ, 16", "reduce, roots differ, 65536",
                                  "bcast, a count of 0, 16", "bcast, a count of 0, 65536"};
    size_t n = k & 1 ? BIG : SMALL;
    int *in = calloc(n, sizeof(int)), *out = malloc(n * sizeof(int)), rc;
    plait_comm_t c;
    double t0;
    c = case_comm(names[k], in && out);
    memset(out, 0xA5, n * sizeof(int));
    t0 = plait_wtime();
    rc = k < 2 ? plait_reduce(in, out, n, PLAIT_INT32, PLAIT_SUM, me == np - 1 ? 1 : 0, c)
               : plait_bcast(me == 0 ? in : out, me == np / 2 ? 0 : n, PLAIT_INT32, 0, c);
    mismatch_end(names[k], rc, t0, &c, in, out);
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
                                "iallreduce", "ialltoall", "ibarrier"};
    const char *s = getenv("PLAIT_TEST_SEED");
    unsigned seed = s ? (unsigned)strtoul(s, NULL, 10) : 20261128u;
    int test_loop = argc > 1 && !strcmp(argv[1], "test");
    int mismatch = argc > 1 && !strcmp(argv[1], "mismatch");
    int diverge = argc > 1 && !strcmp(argv[1], "diverge");
    int silent = argc > 1 && !strcmp(argv[1], "silent");
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
    for (int k = 0; silent && k < 4; k++)
        silent_case(k);
    for (int k = 0; diverge && k < 8; k++)
        diverge_case(k);
    for (int how = 0; diverge && how < 3; how++)
        nb_diverge_case(how);
    for (int k = 0; mismatch && k < 4; k++)
        mismatch_case(k == 0 ? "allreduce" : k == 1 ? "allgather" : k == 2 ? "alltoall" : "bcast");
    for (size_t k = 0; !silent && !diverge && !mismatch && k < sizeof all / sizeof all[0]; k++)
        if (!test_loop || all[k][0] == 'i')
            one_case(all[k], test_loop);
    if (!silent && !diverge && !mismatch && !test_loop)
        alike_case();
    still_usable(seed);
    if (plait_finalize() != PLAIT_OK) {
        FAIL("finalize: %s", plait_last_error());
    }
    if (me == 0 && !failures)
        printf("coll_refuse: ok\n");
    return failures ? 1 : 0;
}
