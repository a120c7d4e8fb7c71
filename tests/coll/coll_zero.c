/*
 * coll_zero.c -- a rooted collective where some ranks pass a count of 0 and
 * the others do not (a mismatch the count-0 side cannot see: it sends and
 * waits for nothing), followed by a correct call of the same collective:
 * the second call must get its own data, never the first call's leftovers.
 *
 *   gather, reduce   the root passes 0, the others 4
 *   bcast, scatter   the root passes 4, the others 0
 *
 * then the same collective with 4 on every rank, data that tells the calls
 * apart (call c, rank p: 1000 * c + 10 * p + element); blocking, or
 * non-blocking ("nb"). The first call may return PLAIT_OK or an error. The
 * second may fail (the mismatch seen late: the shared area's call numbers)
 * but never return PLAIT_OK with other data than its own (before the fix:
 * the first call's, on every transport). Exit 0 when that held.
 * Written against plait.h only; run by t-coll.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plait.h"

#define N 4

static int nb_mode;

static int finish(int rc, plait_request_t *q)
{
    return rc == PLAIT_OK && nb_mode ? plait_wait(q, NULL) : rc;
}

/* One call of collective k (0 gather, 1 reduce, 2 bcast, 3 scatter) with
 * count cnt from root 0, data of call number c. */
static int one(plait_comm_t w, int k, int c, size_t cnt, int r, int *out)
{
    int in[N * 8], rc;
    plait_request_t q = NULL;
    for (int i = 0; i < N * 8; i++)
        in[i] = 1000 * c + 10 * r + i;
    memset(out, 0xA5, sizeof(int) * N * 8);
    switch (k) {
    case 0:
        rc = nb_mode ? plait_igather(in, out, cnt, PLAIT_INT32, 0, w, &q)
                     : plait_gather(in, out, cnt, PLAIT_INT32, 0, w);
        break;
    case 1:
        rc = nb_mode ? plait_ireduce(in, out, cnt, PLAIT_INT32, PLAIT_SUM, 0, w, &q)
                     : plait_reduce(in, out, cnt, PLAIT_INT32, PLAIT_SUM, 0, w);
        break;
    case 2:
        if (r == 0)
            memcpy(out, in, sizeof in);
        rc = nb_mode ? plait_ibcast(out, cnt, PLAIT_INT32, 0, w, &q)
                     : plait_bcast(out, cnt, PLAIT_INT32, 0, w);
        break;
    default:
        rc = nb_mode ? plait_iscatter(in, out, cnt, PLAIT_INT32, 0, w, &q)
                     : plait_scatter(in, out, cnt, PLAIT_INT32, 0, w);
        break;
    }
    return finish(rc, &q);
}

/* Wrong elements of call c's result on rank r. */
static int wrong(int k, int c, int r, int n, const int *out)
{
    int bad = 0;
    for (int i = 0; i < N; i++) {
        int want;
        if (k == 0) {
            if (r != 0)
                return 0;
            for (int p = 0; p < n; p++)
                bad += out[p * N + i] != 1000 * c + 10 * p + i;
            continue;
        }
        if (k == 1) {
            if (r != 0)
                return 0;
            want = 0;
            for (int p = 0; p < n; p++)
                want += 1000 * c + 10 * p + i;
        } else if (k == 2) {
            want = 1000 * c + i;
        } else {
            want = 1000 * c + r * N + i;
        }
        bad += out[i] != want;
    }
    return bad;
}

int main(int argc, char **argv)
{
    static const char *names[] = {"gather", "reduce", "bcast", "scatter"};
    int r, n, out[N * 8], failed = 0, k = -1, rc, bad, zero_side;
    plait_comm_t w;
    for (int i = 0; i < 4; i++)
        if (argc > 1 && strcmp(argv[1], names[i]) == 0)
            k = i;
    nb_mode = argc > 2 && strcmp(argv[2], "nb") == 0;
    if (k < 0) {
        fprintf(stderr, "usage: coll_zero gather|reduce|bcast|scatter [nb]\n");
        return 2;
    }
    if (plait_init() != PLAIT_OK)
        return 1;
    w = plait_comm_world();
    plait_comm_rank(w, &r);
    plait_comm_size(w, &n);
    zero_side = k < 2 ? r == 0 : r != 0;
    if (one(w, k, 0, N, r, out) != PLAIT_OK || wrong(k, 0, r, n, out)) {   /* (sets up the area) */
        fprintf(stderr, "coll_zero: rank %d: %s failed before any mismatch\n", r, names[k]);
        return 1;
    }
    one(w, k, 1, zero_side ? 0 : N, r, out);   /* the mismatch: any result */
    rc = one(w, k, 2, N, r, out);              /* (right after it, as a program would) */
    /* an error (the mismatch seen late) is right; PLAIT_OK with data of
     * the first call is what must never happen */
    bad = rc == PLAIT_OK ? wrong(k, 2, r, n, out) : 0;
    if (bad) {
        fprintf(stderr, "coll_zero: rank %d: %s after a count-0 mismatch returned PLAIT_OK with "
                "%d wrong elements (an earlier call's data)\n", r, names[k], bad);
        failed = 1;
    } else if (rc != PLAIT_OK) {
        printf("coll_zero: rank %d: %s after the mismatch: %s\n", r, names[k], plait_last_error());
    }
    plait_finalize();
    if (r == 0 && !failed)
        printf("coll_zero %s %s: no wrong data after a count-0 mismatch\n", names[k],
               nb_mode ? "non-blocking" : "blocking");
    return failed;
}
