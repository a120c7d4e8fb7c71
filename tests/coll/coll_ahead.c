/*
 * coll_ahead.c -- rooted collectives where the root runs far ahead of its
 * readers: 20000 small blocking bcasts and scatters (the shared-memory area
 * of coll/shm_small.c lets a root get up to its slot depth ahead), roots
 * changing every 100 calls, readers pausing at random so the window fills
 * and drains. The bcasts' counts (4-484 bytes) fall on both sides of the
 * area's small lane (256 bytes), so the two lanes' slots fill and free in
 * one call order. Every value received is checked; the error count is summed
 * every 1000 calls. Written against plait.h only; run by t-coll.sh.
 * Exits 1 on the first failed call or wrong value.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "plait.h"

#define CALLS 20000
#define MAXC  128

/* Value element k of call i carries (the root's data). */
static int val(int i, int k) { return i * 31 + k; }

/* One call: a bcast of a varying count, or (every third) a scatter of one
 * element per rank (in place at the root). Returns the wrong elements. */
static int one_call(plait_comm_t w, int r, int i, int root)
{
    int v[MAXC], bad = 0, rc;
    size_t cnt = 1 + (size_t)(i % 7) * 20;
    for (int k = 0; k < MAXC; k++)
        v[k] = r == root ? val(i, k) : -1;
    if (i % 3 == 2) {
        rc = plait_scatter(r == root ? v : NULL, v, 1, PLAIT_INT32, root, w);
        bad = rc == PLAIT_OK && v[r == root ? r : 0] != val(i, r);
    } else {
        rc = plait_bcast(v, cnt, PLAIT_INT32, root, w);
        for (size_t k = 0; rc == PLAIT_OK && k < cnt; k++)
            bad += v[k] != val(i, (int)k);
    }
    if (rc != PLAIT_OK) {
        fprintf(stderr, "rank %d call %d: %s\n", r, i, plait_last_error());
        exit(1);
    }
    return bad;
}

int main(void)
{
    int r, n, bad = 0;
    plait_comm_t w;
    if (plait_init() != PLAIT_OK)
        return 1;
    w = plait_comm_world();
    plait_comm_rank(w, &r);
    plait_comm_size(w, &n);
    srand((unsigned)r * 7 + 1);
    for (int i = 0; i < CALLS; i++) {
        if (rand() % 500 == 0)
            usleep(200);       /* a reader falls behind; the root's window fills */
        bad += one_call(w, r, i, (i / 100) % n);
        if (i % 1000 == 999) {
            int all = 0;
            if (plait_allreduce(&bad, &all, 1, PLAIT_INT32, PLAIT_SUM, w) != PLAIT_OK || all) {
                fprintf(stderr, "rank %d: %d wrong values by call %d\n", r, all, i);
                return 1;
            }
        }
    }
    if (r == 0)
        printf("coll_ahead: %d calls ok on %d ranks\n", CALLS, n);
    return plait_finalize() == PLAIT_OK ? 0 : 1;
}
