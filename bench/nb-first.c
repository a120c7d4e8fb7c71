/*
 * nb-first.c -- what a non-blocking allreduce on world costs when the
 * program makes no blocking collective first (session 40: world's shared
 * area and host map are made in plait_init; before, such calls ran on
 * messages until the first blocking one).
 *
 *   nb-first [DOUBLES [BARRIER]]     (under plaitrun; defaults 1 and 0)
 *
 * With BARRIER 1 one plait_barrier runs before the loop. Then 5 batches of
 * 2000 plait_iallreduce + plait_wait of DOUBLES float64 (SUM, every result
 * checked); rank 0 prints the median batch's time per call.
 */
#include <stdio.h>
#include <stdlib.h>

#include "plait.h"

#define BATCHES 5
#define ITERS   2000

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int fail(const char *what)
{
    fprintf(stderr, "nb-first: %s: %s\n", what, plait_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1, barrier = argc > 2 && atoi(argv[2]), rank, np;
    double *in, *out, t[BATCHES];
    plait_comm_t w;
    plait_request_t r;
    if (n < 1 || argc > 3) {
        fprintf(stderr, "usage: nb-first [DOUBLES (>= 1) [BARRIER (0 or 1)]]\n");
        return 2;
    }
    if (!(in = malloc((size_t)n * 8)) || !(out = malloc((size_t)n * 8)))
        return 1;
    if (plait_init() != PLAIT_OK)
        return fail("plait_init");
    w = plait_comm_world();
    plait_comm_rank(w, &rank);
    plait_comm_size(w, &np);
    for (int i = 0; i < n; i++)
        in[i] = rank + i;
    if (barrier && plait_barrier(w) != PLAIT_OK)
        return fail("plait_barrier");
    for (int b = 0; b < BATCHES; b++) {
        double t0 = plait_wtime();
        for (int it = 0; it < ITERS; it++)
            if (plait_iallreduce(in, out, (size_t)n, PLAIT_FLOAT64, PLAIT_SUM, w, &r) != PLAIT_OK ||
                plait_wait(&r, NULL) != PLAIT_OK)
                return fail("plait_iallreduce");
        t[b] = (plait_wtime() - t0) / ITERS * 1e6;
        for (int i = 0; i < n; i++)   /* sum over ranks of rank + i (exact in float64) */
            if (out[i] != (double)np * (np - 1) / 2 + (double)np * i) {
                fprintf(stderr, "nb-first: element %d is %g\n", i, out[i]);
                return 1;
            }
    }
    qsort(t, BATCHES, sizeof *t, cmp);
    if (rank == 0)
        printf("nb-first ranks %d bytes %d barrier-first %d: %.2f us\n", np, n * 8, barrier,
               t[BATCHES / 2]);
    free(in);
    free(out);
    return plait_finalize() == PLAIT_OK ? 0 : 1;
}
