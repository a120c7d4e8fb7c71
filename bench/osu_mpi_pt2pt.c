/*
 * osu_mpi_pt2pt -- the pt2pt benchmarks of plait-bench, run over MPI, so plait
 * and an MPI library are measured by the same code (tools/ptool_pt2pt.c) and
 * print the same columns:
 *
 *   mpirun -np 2 ./osu_mpi_pt2pt [latency|bw|both] [options]
 *
 * Built only when configure finds mpicc; not installed.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/ptool_pt2pt.h"

#define PTOOL_PROG "osu_mpi_pt2pt"

static MPI_Request ptool_reqs[PTOOL_MAX_WINDOW];

static int ptool_mpi_send(const void *buf, size_t len, int peer, int tag)
{
    return MPI_Send(buf, (int)len, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
}

static int ptool_mpi_recv(void *buf, size_t len, int peer, int tag)
{
    return MPI_Recv(buf, (int)len, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static int ptool_mpi_isend(const void *buf, size_t len, int peer, int tag, int slot)
{
    return MPI_Isend(buf, (int)len, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &ptool_reqs[slot]);
}

static int ptool_mpi_irecv(void *buf, size_t len, int peer, int tag, int slot)
{
    return MPI_Irecv(buf, (int)len, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &ptool_reqs[slot]);
}

static int ptool_mpi_waitall(int n)
{
    return MPI_Waitall(n, ptool_reqs, MPI_STATUSES_IGNORE);
}

static void ptool_mpi_fail(const char *what, int rc) __attribute__((noreturn));
static void ptool_mpi_fail(const char *what, int rc)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;

    MPI_Error_string(rc, text, &len);
    if (rc == MPI_SUCCESS)   /* not the library's failure: what says it all */
        fprintf(stderr, "%s: %s\n", PTOOL_PROG, what);
    else
        fprintf(stderr, "%s: %s failed: %s\n", PTOOL_PROG, what, text);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* Before MPI_Init only the launcher's environment tells the rank. */
static const char *ptool_env_rank(void)
{
    const char *r = getenv("PMIX_RANK");

    return r ? r : getenv("OMPI_COMM_WORLD_RANK");
}

static int ptool_is_first_rank(void)
{
    const char *r = ptool_env_rank();

    return r == NULL || strcmp(r, "0") == 0;
}

/* As in plait-bench: under a launcher all ranks join, rank 0 alone reports,
 * and all leave together, so the message is not lost in a job teardown. */
static void ptool_usage_error(const char *msg)
{
    int rank = 0;

    if (ptool_env_rank() == NULL) {
        fputs(msg, stderr);
        return;
    }
    MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        fputs(msg, stderr);
    MPI_Finalize();
}

/* Same as plait-bench: bystander ranks sleep instead of spinning. */
static void ptool_idle_barrier(int busy_rank)
{
    MPI_Request req;
    int done = 0;
    struct timespec nap = {0, 1000000};

    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    if (busy_rank) {
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        return;
    }
    while (MPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done)
        nanosleep(&nap, NULL);
}

static void ptool_fill_backend(ptool_pt2pt_backend_t *be)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;

    memset(be, 0, sizeof(*be));
    be->name = "MPI";
    MPI_Get_library_version(lib, &len);
    /* "Open MPI v4.1.4, package: ..." -> the first part, cut to fit */
    lib[strcspn(lib, ",\n")] = '\0';
    lib[sizeof(be->version) - 1] = '\0';
    memcpy(be->version, lib, sizeof(be->version));
    be->send = ptool_mpi_send;
    be->recv = ptool_mpi_recv;
    be->isend = ptool_mpi_isend;
    be->irecv = ptool_mpi_irecv;
    be->waitall = ptool_mpi_waitall;
    be->wtime = MPI_Wtime;
    be->fail = ptool_mpi_fail;
    MPI_Comm_rank(MPI_COMM_WORLD, &be->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &be->size);
}

int main(int argc, char **argv)
{
    ptool_pt2pt_opts_t opts;
    ptool_pt2pt_backend_t be;
    char *msg = NULL;
    size_t msglen = 0;
    FILE *err = open_memstream(&msg, &msglen);
    int rc;

    rc = ptool_pt2pt_parse(argc, argv, &opts, PTOOL_PROG, err ? err : stderr);
    if (err)
        fclose(err);
    if (rc == PTOOL_PARSE_ERROR)
        ptool_usage_error(msg ? msg : "");
    free(msg);
    if (rc == PTOOL_PARSE_ERROR)
        return 2;
    if (rc == PTOOL_PARSE_HELP) {
        if (ptool_is_first_rank())
            ptool_pt2pt_usage(stdout, PTOOL_PROG);
        return 0;
    }
    MPI_Init(&argc, &argv);
    /* errors come back as codes, reported by ptool_mpi_fail with context */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    ptool_fill_backend(&be);
    if (be.size < 2) {
        if (be.rank == 0)
            fprintf(stderr, "%s: needs at least 2 ranks (this job has %d)\n", PTOOL_PROG, be.size);
        MPI_Finalize();
        return 2;
    }
    rc = ptool_pt2pt_run(&opts, &be);
    ptool_idle_barrier(be.rank <= 1);
    MPI_Finalize();
    return rc;
}
