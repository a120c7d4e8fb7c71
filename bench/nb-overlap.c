/*
 * nb-overlap.c -- how much of a non-blocking allreduce hides behind
 * computation, and what starting then waiting at once costs.
 *
 *   nb-overlap [-b SIZE] [-e SIZE] [-n ITERS] [-c US]
 *
 * Per size (doubling from -b to -e, float32 SUM), iterations timed on every
 * rank, median of the per-iteration times over ranks' averages:
 *   blocking   plait_allreduce
 *   nb-wait    plait_iallreduce then plait_wait at once (the thread's cost)
 *   compute    C us of computation alone (a spin on the clock, no plait call)
 *   overlap    plait_iallreduce, C us of computation, plait_wait
 * C is -c, or by default the blocking time of that size (measured first), so
 * that perfect overlap gives overlap = compute. The last column is the part
 * of the communication hidden: (blocking + compute - overlap) / blocking.
 * Run under plaitrun with PLAIT_PROGRESS_THREAD=0 and =1 to compare.
 * Built with -DNB_MPI (mpicc: bench/nb-overlap-mpi) the same code times
 * MPI_Allreduce / MPI_Iallreduce + MPI_Wait, Open MPI beside plait.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef NB_MPI
#include <mpi.h>
typedef MPI_Comm comm_t;
typedef MPI_Request req_t;
static int lib_init(void) { return MPI_Init(NULL, NULL); }
static comm_t lib_world(void) { return MPI_COMM_WORLD; }
static int lib_rank(comm_t w) { int r; MPI_Comm_rank(w, &r); return r; }
static int lib_size(comm_t w) { int n; MPI_Comm_size(w, &n); return n; }
static int lib_barrier(comm_t w) { return MPI_Barrier(w); }
static int lib_sum(const void *in, void *out, size_t n, int f64, comm_t w)
{
    return MPI_Allreduce(in, out, (int)n, f64 ? MPI_DOUBLE : MPI_FLOAT, MPI_SUM, w);
}
static int lib_isum(const float *in, float *out, size_t n, comm_t w, req_t *q)
{
    return MPI_Iallreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, w, q);
}
static int lib_wait(req_t *q) { return MPI_Wait(q, MPI_STATUS_IGNORE); }
static int lib_bcast_f64(double *v, comm_t w) { return MPI_Bcast(v, 1, MPI_DOUBLE, 0, w); }
static int lib_finalize(void) { return MPI_Finalize(); }
static const char *lib_error(void) { return "MPI error"; }
#else
#include "plait.h"
typedef plait_comm_t comm_t;
typedef plait_request_t req_t;
static int lib_init(void) { return plait_init(); }
static comm_t lib_world(void) { return plait_comm_world(); }
static int lib_rank(comm_t w) { int r; plait_comm_rank(w, &r); return r; }
static int lib_size(comm_t w) { int n; plait_comm_size(w, &n); return n; }
static int lib_barrier(comm_t w) { return plait_barrier(w); }
static int lib_sum(const void *in, void *out, size_t n, int f64, comm_t w)
{
    return plait_allreduce(in, out, n, f64 ? PLAIT_FLOAT64 : PLAIT_FLOAT32, PLAIT_SUM, w);
}
static int lib_isum(const float *in, float *out, size_t n, comm_t w, req_t *q)
{
    return plait_iallreduce(in, out, n, PLAIT_FLOAT32, PLAIT_SUM, w, q);
}
static int lib_wait(req_t *q) { return plait_wait(q, NULL); }
static int lib_bcast_f64(double *v, comm_t w) { return plait_bcast(v, 1, PLAIT_FLOAT64, 0, w); }
static int lib_finalize(void) { return plait_finalize(); }
static const char *lib_error(void) { return plait_last_error(); }
#endif

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static void compute(double us)
{
    double end = now_us() + us;
    volatile double x = 1.0;
    while (now_us() < end)
        for (int i = 0; i < 64; i++)
            x = x * 1.0000001 + 1e-9;
}

static size_t parse_size(const char *s)
{
    char *e;
    size_t v = strtoull(s, &e, 10);
    if (*e == 'K' || *e == 'k') v <<= 10;
    else if (*e == 'M' || *e == 'm') v <<= 20;
    return v;
}

static void check(int rc, const char *what)
{
    if (rc != 0) {   /* (PLAIT_OK and MPI_SUCCESS are 0) */
        fprintf(stderr, "nb-overlap: %s: %s\n", what, lib_error());
        exit(1);
    }
}

/* Mean us per iteration of mode m (0 blocking, 1 nb-wait, 2 compute, 3
 * overlap), averaged over ranks. */
static double run(int m, float *in, float *out, size_t n, int iters, double c, comm_t w)
{
    req_t q;
    double t0, t, sum;
    check(lib_barrier(w), "barrier");
    t0 = now_us();
    for (int i = 0; i < iters; i++) {
        if (m == 0)
            check(lib_sum(in, out, n, 0, w), "allreduce");
        if (m == 1 || m == 3)
            check(lib_isum(in, out, n, w, &q), "iallreduce");
        if (m >= 2)
            compute(c);
        if (m == 1 || m == 3)
            check(lib_wait(&q), "wait");
    }
    t = (now_us() - t0) / iters;
    check(lib_sum(&t, &sum, 1, 1, w), "time sum");
    return sum / lib_size(w);
}

int main(int argc, char **argv)
{
    size_t lo = 4096, hi = 16u << 20;
    int iters = 50, rank;
    double cfix = -1;
    comm_t w;
    float *in, *out;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-b")) lo = parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "-e")) hi = parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "-n")) iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-c")) cfix = atof(argv[i + 1]);
        else { fprintf(stderr, "usage: nb-overlap [-b SIZE] [-e SIZE] [-n ITERS] [-c US]\n"); return 2; }
    }
    check(lib_init(), "init");
    w = lib_world();
    rank = lib_rank(w);
    in = malloc(hi);
    out = malloc(hi);
    if (!in || !out)
        return 1;
    for (size_t k = 0; k < hi / sizeof(float); k++)
        in[k] = (float)(k % 101);
    if (rank == 0)
        printf("# %12s %10s %10s %10s %10s %8s\n", "bytes", "blocking", "nb-wait", "compute",
               "overlap", "hidden");
    for (size_t b = lo; b <= hi; b *= 2) {
        size_t n = b / sizeof(float);
        double blk, nbw, cmp, ovl, c;
        run(0, in, out, n, iters / 5 + 1, 0, w);   /* warm-up */
        blk = run(0, in, out, n, iters, 0, w);
        c = cfix >= 0 ? cfix : blk;
        check(lib_bcast_f64(&c, w), "bcast");
        nbw = run(1, in, out, n, iters, c, w);
        cmp = run(2, in, out, n, iters, c, w);
        ovl = run(3, in, out, n, iters, c, w);
        if (rank == 0)
            printf("  %12zu %10.2f %10.2f %10.2f %10.2f %7.0f%%\n", b, blk, nbw, cmp, ovl,
                   100.0 * (blk + cmp - ovl) / blk);
    }
    free(in);
    free(out);
    check(lib_finalize(), "finalize");
    return 0;
}
