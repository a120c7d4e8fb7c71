/*
 * nccltests_mpi -- the Open MPI (any MPI) twin of `plait-bench coll`: the same
 * nccl-tests style method and columns (tools/ptool_coll.c, shared), with the
 * collectives bound to MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block,
 * MPI_Alltoall, MPI_Bcast, MPI_Reduce, MPI_Gather, MPI_Scatter,
 * MPI_Alltoallv and MPI_Barrier, so both libraries can be run side by side
 * (bench/compare-coll.sh):
 *
 *   mpirun -n 4 --mca btl self,vader nccltests_mpi allreduce -b 8 -e 64M
 *
 * In-place calls pass MPI_IN_PLACE where plait's API passes sendbuf == recvbuf.
 * half, bfloat16 and avg have no MPI equivalent: those columns print N/A.
 * -a N forces Open MPI's coll/tuned algorithm number N for the collective
 * (OMPI_MCA_coll_tuned_use_dynamic_rules=1, coll_tuned_<coll>_algorithm=N).
 */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/ptool_coll.h"

#define PTOOL_PROG "nccltests_mpi"

static MPI_Datatype ptool_mpi_type(int t)
{
    switch (t) {
    case PTOOL_T_INT8:   return MPI_INT8_T;
    case PTOOL_T_UINT8:  return MPI_UINT8_T;
    case PTOOL_T_INT32:  return MPI_INT32_T;
    case PTOOL_T_UINT32: return MPI_UINT32_T;
    case PTOOL_T_INT64:  return MPI_INT64_T;
    case PTOOL_T_UINT64: return MPI_UINT64_T;
    case PTOOL_T_FLOAT:  return MPI_FLOAT;
    case PTOOL_T_DOUBLE: return MPI_DOUBLE;
    default:             return MPI_DATATYPE_NULL;
    }
}

static MPI_Op ptool_mpi_op(int op)
{
    switch (op) {
    case PTOOL_O_SUM:  return MPI_SUM;
    case PTOOL_O_PROD: return MPI_PROD;
    case PTOOL_O_MAX:  return MPI_MAX;
    case PTOOL_O_MIN:  return MPI_MIN;
    default:           return MPI_OP_NULL;
    }
}

static int ptool_rank;

/* sbuf == rbuf is plait's in-place form; MPI spells it MPI_IN_PLACE (at the
 * root only, for rooted collectives, where the core only then aliases). */
static const void *ptool_in(const ptool_coll_call_t *k)
{
    return k->sbuf == k->rbuf ? MPI_IN_PLACE : k->sbuf;
}

static int ptool_mpi_run(const ptool_coll_call_t *k)
{
    MPI_Datatype t = ptool_mpi_type(k->dtype);
    MPI_Op op = ptool_mpi_op(k->op);
    MPI_Comm w = MPI_COMM_WORLD;
    int c = (int)k->count, n, *cnt, *dsp, rc;

    if (k->coll != PTOOL_C_BARRIER && t == MPI_DATATYPE_NULL)
        return PTOOL_UNSUPPORTED;
    if ((k->coll == PTOOL_C_ALLREDUCE || k->coll == PTOOL_C_REDUCE ||
         k->coll == PTOOL_C_REDUCE_SCATTER) && op == MPI_OP_NULL)
        return PTOOL_UNSUPPORTED;
    if (k->count > INT_MAX)
        return PTOOL_UNSUPPORTED;
    switch (k->coll) {
    case PTOOL_C_ALLREDUCE:      return MPI_Allreduce(ptool_in(k), k->rbuf, c, t, op, w);
    case PTOOL_C_ALLGATHER:      return MPI_Allgather(ptool_in(k), c, t, k->rbuf, c, t, w);
    case PTOOL_C_REDUCE_SCATTER: return MPI_Reduce_scatter_block(ptool_in(k), k->rbuf, c, t, op, w);
    case PTOOL_C_ALLTOALL:       return MPI_Alltoall(ptool_in(k), c, t, k->rbuf, c, t, w);
    case PTOOL_C_BCAST:          return MPI_Bcast(k->rbuf, c, t, k->root, w);
    case PTOOL_C_REDUCE:         return MPI_Reduce(ptool_in(k), k->rbuf, c, t, op, k->root, w);
    case PTOOL_C_GATHER:         return MPI_Gather(ptool_in(k), c, t, k->rbuf, c, t, k->root, w);
    case PTOOL_C_SCATTER:
        if (k->sbuf == k->rbuf && ptool_rank == k->root)
            return MPI_Scatter(k->sbuf, c, t, MPI_IN_PLACE, c, t, k->root, w);
        return MPI_Scatter(k->sbuf, c, t, k->rbuf, c, t, k->root, w);
    case PTOOL_C_ALLTOALLV:
        MPI_Comm_size(w, &n);
        cnt = malloc(sizeof(int) * (size_t)n);
        dsp = malloc(sizeof(int) * (size_t)n);
        if (!cnt || !dsp)
            return MPI_ERR_NO_MEM;
        for (int i = 0; i < n; i++) {
            cnt[i] = (int)k->counts[i];
            dsp[i] = (int)k->displs[i];
        }
        rc = MPI_Alltoallv(ptool_in(k), cnt, dsp, t, k->rbuf, cnt, dsp, t, w);
        free(cnt);
        free(dsp);
        return rc;
    default:                     return MPI_Barrier(w);
    }
}

static int ptool_mpi_barrier(void) { return MPI_Barrier(MPI_COMM_WORLD); }

static int ptool_mpi_sum_doubles(double *v, int n)
{
    return MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

static void ptool_mpi_fail(const char *what, int rc) __attribute__((noreturn));
static void ptool_mpi_fail(const char *what, int rc)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;

    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "error %d", rc);
    if (rc == MPI_SUCCESS)   /* not the library's failure: what says it all */
        fprintf(stderr, "%s: %s\n", PTOOL_PROG, what);
    else
        fprintf(stderr, "%s: %s failed: %s\n", PTOOL_PROG, what, text);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

static int ptool_is_first_rank(void)
{
    const char *r = getenv("PMIX_RANK");

    if (!r)
        r = getenv("OMPI_COMM_WORLD_RANK");
    return r == NULL || strcmp(r, "0") == 0;
}

/* -a N: Open MPI reads OMPI_MCA_* from the environment in MPI_Init. */
static void ptool_force_algo(const ptool_coll_opts_t *o)
{
    static const char *const name[PTOOL_C_N] = {
        "allreduce", "allgather", "reduce_scatter_block", "alltoall", "bcast", "reduce",
        "gather", "scatter", "alltoallv", "barrier"};
    char var[128];

    if (!o->algo)
        return;
    setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", 1);
    snprintf(var, sizeof var, "OMPI_MCA_coll_tuned_%s_algorithm", name[o->coll]);
    setenv(var, o->algo, 1);
}

int main(int argc, char **argv)
{
    ptool_coll_opts_t opts;
    ptool_coll_backend_t be;
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0, rc;

    /* argv[0] stands in for the family name ptool_coll_parse skips */
    rc = ptool_coll_parse(argc, argv, &opts, PTOOL_PROG,
                          ptool_is_first_rank() ? stderr : NULL);
    if (rc == PTOOL_COLL_HELP) {
        if (ptool_is_first_rank())
            ptool_coll_usage(stdout, PTOOL_PROG);
        return 0;
    }
    if (rc != PTOOL_COLL_RUN)
        return 2;
    ptool_force_algo(&opts);
    MPI_Init(&argc, &argv);
    memset(&be, 0, sizeof be);
    be.name = "MPI";
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, ",\n")] = '\0';
    lib[sizeof be.version - 1] = '\0';
    memcpy(be.version, lib, sizeof be.version);
    MPI_Comm_rank(MPI_COMM_WORLD, &be.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &be.size);
    ptool_rank = be.rank;
    be.run = ptool_mpi_run;
    be.barrier = ptool_mpi_barrier;
    be.sum_doubles = ptool_mpi_sum_doubles;
    be.wtime = MPI_Wtime;
    be.fail = ptool_mpi_fail;
    rc = ptool_coll_run(&opts, &be);
    MPI_Finalize();
    return rc;
}
