/*
 * plait-bench -- benchmarks of the plait library, one family per first argument:
 *
 *   plait-bench pt2pt [latency|bw|both] [options]   OSU-style point-to-point
 *   plait-bench coll COLL [options]                 nccl-tests style collectives
 *
 * Run under a launcher (plaitrun -n 2 plait-bench pt2pt). The pt2pt method lives
 * in ptool_pt2pt.c, shared with bench/osu_mpi_pt2pt.c, the collective one in
 * ptool_coll.c, shared with bench/nccltests_mpi.c, so plait and MPI are
 * measured the same way; this file only binds them to the plait API.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plait.h"
#include "ptool_coll.h"
#include "ptool_pt2pt.h"

#define PTOOL_PROG "plait-bench"

/* ------------------------------------------------------- plait as a backend */

static plait_comm_t    ptool_world;
static plait_request_t ptool_reqs[PTOOL_MAX_WINDOW];

static int ptool_plait_send(const void *buf, size_t len, int peer, int tag)
{
    return plait_send(buf, len, PLAIT_BYTE, peer, tag, ptool_world);
}

static int ptool_plait_recv(void *buf, size_t len, int peer, int tag)
{
    return plait_recv(buf, len, PLAIT_BYTE, peer, tag, ptool_world, NULL);
}

static int ptool_plait_isend(const void *buf, size_t len, int peer, int tag, int slot)
{
    return plait_isend(buf, len, PLAIT_BYTE, peer, tag, ptool_world, &ptool_reqs[slot]);
}

static int ptool_plait_irecv(void *buf, size_t len, int peer, int tag, int slot)
{
    return plait_irecv(buf, len, PLAIT_BYTE, peer, tag, ptool_world, &ptool_reqs[slot]);
}

static int ptool_plait_waitall(int n)
{
    return plait_waitall(n, ptool_reqs, NULL);
}

static void ptool_plait_fail(const char *what, int rc) __attribute__((noreturn));
static void ptool_plait_fail(const char *what, int rc)
{
    const char *detail = plait_last_error();

    if (rc == PLAIT_OK)   /* not the library's failure: what says it all */
        fprintf(stderr, "%s: %s\n", PTOOL_PROG, what);
    else
        fprintf(stderr, "%s: %s failed: %s%s%s\n", PTOOL_PROG, what, plait_strerror(rc),
                detail[0] ? ": " : "", detail);
    fflush(stderr);
    plait_abort(1, "plait-bench failed");
    exit(1);   /* plait_abort does not return; this keeps the compiler sure of it */
}

/* ------------------------------------------------------------------ helpers */

/* Under a launcher PMIx tells every rank its rank before plait_init. */
static int ptool_in_job(void)
{
    return getenv("PMIX_RANK") != NULL;
}

static int ptool_is_first_rank(void)
{
    const char *r = getenv("PMIX_RANK");

    return r == NULL || strcmp(r, "0") == 0;
}

/*
 * A usage error under a launcher: every rank found it, but only rank 0 should
 * say so, and a rank leaving early would make the launcher tear the job down
 * before rank 0's message is out. So the ranks join the job, rank 0 prints,
 * and all leave together.
 */
static int ptool_usage_error(const char *msg)
{
    int rank = 0;

    if (ptool_in_job() && plait_init() == PLAIT_OK) {
        plait_comm_rank(plait_comm_world(), &rank);
        if (rank == 0)
            fputs(msg, stderr);
        plait_finalize();
    } else {
        fputs(msg, stderr);
    }
    return 2;
}

/* Ranks that take no part wait without spinning: on a small node a spinning
 * bystander would steal the cores rank 0 and 1 are measured on. The
 * non-blocking barrier also keeps long runs clear of PLAIT_TIMEOUT. */
static int ptool_idle_barrier(int busy_rank)
{
    plait_request_t req;
    int done = 0, rc;
    struct timespec nap = {0, 1000000};

    rc = plait_ibarrier(ptool_world, &req);
    if (rc != PLAIT_OK)
        return rc;
    if (busy_rank)
        return plait_wait(&req, NULL);
    while ((rc = plait_test(&req, &done, NULL)) == PLAIT_OK && !done)
        nanosleep(&nap, NULL);
    return rc;
}

static void ptool_usage(FILE *out)
{
    fprintf(out,
        "Usage: %s FAMILY [options]\n"
        "Benchmarks of the plait library; run under a launcher, e.g.\n"
        "  plaitrun -n 2 %s pt2pt latency\n"
        "\n"
        "Families:\n"
        "  pt2pt     OSU-style latency and bandwidth between rank 0 and rank 1\n"
        "            (%s pt2pt --help for its options)\n"
        "  coll      nccl-tests style collectives over every rank\n"
        "            (%s coll --help for its options)\n"
        "\n"
        "  -h, --help       this text\n"
        "  -V, --version    print the plait version\n",
        PTOOL_PROG, PTOOL_PROG, PTOOL_PROG, PTOOL_PROG);
}

static void ptool_fill_backend(ptool_pt2pt_backend_t *be)
{
    int major = 0, minor = 0, patch = 0;

    memset(be, 0, sizeof(*be));
    be->name = "plait";
    plait_version(&major, &minor, &patch);
    snprintf(be->version, sizeof(be->version), "%d.%d.%d", major, minor, patch);
    be->send = ptool_plait_send;
    be->recv = ptool_plait_recv;
    be->isend = ptool_plait_isend;
    be->irecv = ptool_plait_irecv;
    be->waitall = ptool_plait_waitall;
    be->wtime = plait_wtime;
    be->fail = ptool_plait_fail;
}

/* ------------------------------------------------------------- pt2pt family */

/* Parses the pt2pt options: -1 to go on, else the exit status. Runs before
 * plait_init so --help and usage errors need no launcher. */
static int ptool_pt2pt_args(int argc, char **argv, ptool_pt2pt_opts_t *opts)
{
    char *msg = NULL;
    size_t msglen = 0;
    FILE *err = open_memstream(&msg, &msglen);
    int rc = ptool_pt2pt_parse(argc, argv, opts, PTOOL_PROG " pt2pt", err ? err : stderr);

    if (err)
        fclose(err);
    if (rc == PTOOL_PARSE_ERROR)
        ptool_usage_error(msg ? msg : "");
    free(msg);
    if (rc == PTOOL_PARSE_ERROR)
        return 2;
    if (rc == PTOOL_PARSE_HELP) {
        if (ptool_is_first_rank())
            ptool_pt2pt_usage(stdout, PTOOL_PROG " pt2pt");
        return 0;
    }
    return -1;
}

static int ptool_pt2pt_main(int argc, char **argv)
{
    ptool_pt2pt_opts_t opts;
    ptool_pt2pt_backend_t be;
    int rc = ptool_pt2pt_args(argc, argv, &opts), brc;

    if (rc >= 0)
        return rc;
    rc = plait_init();
    if (rc != PLAIT_OK) {
        fprintf(stderr, "%s: plait_init failed: %s: %s\n", PTOOL_PROG, plait_strerror(rc),
                plait_last_error());
        return 1;
    }
    ptool_world = plait_comm_world();
    ptool_fill_backend(&be);
    plait_comm_rank(ptool_world, &be.rank);
    plait_comm_size(ptool_world, &be.size);
    if (be.size < 2) {
        if (be.rank == 0)
            fprintf(stderr, "%s pt2pt: needs at least 2 ranks (this job has %d); "
                    "run e.g. 'plaitrun -n 2 %s pt2pt'\n", PTOOL_PROG, be.size, PTOOL_PROG);
        plait_finalize();
        return 2;
    }

    rc = ptool_pt2pt_run(&opts, &be);
    brc = ptool_idle_barrier(be.rank <= 1);
    if (brc != PLAIT_OK)
        ptool_plait_fail("final barrier", brc);
    plait_finalize();
    return rc;
}

/* -------------------------------------------------------------- coll family */

static const plait_dtype_t ptool_plait_types[PTOOL_T_N] = {
    PLAIT_INT8, PLAIT_UINT8, PLAIT_INT32, PLAIT_UINT32, PLAIT_INT64, PLAIT_UINT64,
    PLAIT_FLOAT16, PLAIT_BFLOAT16, PLAIT_FLOAT32, PLAIT_FLOAT64};
static const plait_op_t ptool_plait_ops[PTOOL_O_N] = {PLAIT_SUM, PLAIT_PROD, PLAIT_MAX,
                                                      PLAIT_MIN, PLAIT_AVG};

static int ptool_plait_coll(const ptool_coll_call_t *k)
{
    plait_dtype_t dt = ptool_plait_types[k->dtype];
    plait_op_t op = ptool_plait_ops[k->op];
    plait_comm_t w = ptool_world;

    switch (k->coll) {
    case PTOOL_C_ALLREDUCE:      return plait_allreduce(k->sbuf, k->rbuf, k->count, dt, op, w);
    case PTOOL_C_ALLGATHER:      return plait_allgather(k->sbuf, k->rbuf, k->count, dt, w);
    case PTOOL_C_REDUCE_SCATTER: return plait_reduce_scatter(k->sbuf, k->rbuf, k->count, dt, op, w);
    case PTOOL_C_ALLTOALL:       return plait_alltoall(k->sbuf, k->rbuf, k->count, dt, w);
    case PTOOL_C_BCAST:          return plait_bcast(k->rbuf, k->count, dt, k->root, w);
    case PTOOL_C_REDUCE:         return plait_reduce(k->sbuf, k->rbuf, k->count, dt, op, k->root, w);
    case PTOOL_C_GATHER:         return plait_gather(k->sbuf, k->rbuf, k->count, dt, k->root, w);
    case PTOOL_C_SCATTER:        return plait_scatter(k->sbuf, k->rbuf, k->count, dt, k->root, w);
    case PTOOL_C_ALLTOALLV:
        return plait_alltoallv(k->sbuf, k->counts, k->displs, k->rbuf, k->counts, k->displs, dt,
                               w);
    default:                     return plait_barrier(w);
    }
}

static int ptool_plait_barrier(void) { return plait_barrier(ptool_world); }

static int ptool_plait_sum_doubles(double *v, int n)
{
    return plait_allreduce(v, v, (size_t)n, PLAIT_FLOAT64, PLAIT_SUM, ptool_world);
}

/* The setting that forces coll's algorithm, or NULL (one algorithm). */
static const char *ptool_coll_algo_setting(int coll)
{
    static const char *const setting[PTOOL_C_N] = {
        "PLAIT_ALLREDUCE_ALGO", "PLAIT_ALLGATHER_ALGO", "PLAIT_REDUCE_SCATTER_ALGO",
        "PLAIT_ALLTOALL_ALGO", "PLAIT_BCAST_ALGO", "PLAIT_REDUCE_ALGO", NULL, NULL,
        "PLAIT_ALLTOALL_ALGO", NULL};
    return setting[coll];
}

/* -a NAME sets PLAIT_<COLL>_ALGO before plait_init, which checks the name
 * (a bad one fails plait_init with the valid choices). Without -a, a
 * PLAIT_<COLL>_ALGO of the environment is what the header and JSON show. */
static int ptool_coll_force_algo(ptool_coll_opts_t *o)
{
    const char *name = ptool_coll_algo_setting(o->coll);
    if (!o->algo) {
        const char *env = name ? getenv(name) : NULL;
        if (env && *env)
            o->algo = env;
        return 0;
    }
    if (!name) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s coll: %s has one algorithm; -a does not apply\n",
                 PTOOL_PROG, ptool_coll_name(o->coll));
        return ptool_usage_error(msg);
    }
    setenv(name, o->algo, 1);
    return 0;
}

/* Takes back the PLAIT_<COLL>_ALGO of ptool_coll_force_algo (or the
 * environment's). */
static void ptool_coll_unforce(const ptool_coll_opts_t *o)
{
    const char *name = ptool_coll_algo_setting(o->coll);
    if (name)
        unsetenv(name);
}

static int ptool_coll_main(int argc, char **argv)
{
    ptool_coll_opts_t opts;
    ptool_coll_backend_t be;
    char *msg = NULL;
    size_t msglen = 0;
    FILE *err = open_memstream(&msg, &msglen);
    int rc = ptool_coll_parse(argc, argv, &opts, PTOOL_PROG " coll", err ? err : stderr);
    int major = 0, minor = 0, patch = 0;

    if (err)
        fclose(err);
    if (rc == PTOOL_COLL_ERROR)
        ptool_usage_error(msg ? msg : "");
    free(msg);
    if (rc == PTOOL_COLL_ERROR)
        return 2;
    if (rc == PTOOL_COLL_HELP) {
        if (ptool_is_first_rank())
            ptool_coll_usage(stdout, PTOOL_PROG " coll");
        return 0;
    }
    if (ptool_coll_force_algo(&opts) != 0)
        return 2;
    rc = plait_init();
    if (rc == PLAIT_ERR_ARG && opts.algo) {   /* most likely the name -a or the setting gave */
        char text[768];
        snprintf(text, sizeof text, "%s coll: algorithm '%s' (or another setting) refused: %s\n",
                 PTOOL_PROG, opts.algo, plait_last_error());
        ptool_coll_unforce(&opts);    /* so that the ranks can join to print it once */
        return ptool_usage_error(text);
    }
    if (rc != PLAIT_OK) {
        fprintf(stderr, "%s: plait_init failed: %s: %s\n", PTOOL_PROG, plait_strerror(rc),
                plait_last_error());
        return 1;
    }
    ptool_world = plait_comm_world();
    memset(&be, 0, sizeof be);
    be.name = "plait";
    plait_version(&major, &minor, &patch);
    snprintf(be.version, sizeof be.version, "%d.%d.%d", major, minor, patch);
    plait_comm_rank(ptool_world, &be.rank);
    plait_comm_size(ptool_world, &be.size);
    be.run = ptool_plait_coll;
    be.barrier = ptool_plait_barrier;
    be.sum_doubles = ptool_plait_sum_doubles;
    be.wtime = plait_wtime;
    be.fail = ptool_plait_fail;
    rc = ptool_coll_run(&opts, &be);
    plait_finalize();
    return rc;
}

int main(int argc, char **argv)
{
    char msg[512];

    if (argc < 2) {
        ptool_usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        ptool_usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "--version") == 0) {
        int major = 0, minor = 0, patch = 0;

        plait_version(&major, &minor, &patch);
        printf("%s (plait) %d.%d.%d\n", PTOOL_PROG, major, minor, patch);
        return 0;
    }
    if (strcmp(argv[1], "pt2pt") == 0)
        return ptool_pt2pt_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "coll") == 0)
        return ptool_coll_main(argc - 1, argv + 1);
    snprintf(msg, sizeof(msg), "%s: unknown benchmark '%s' (known: pt2pt, coll); try '%s --help'\n",
             PTOOL_PROG, argv[1], PTOOL_PROG);
    return ptool_usage_error(msg);
}
