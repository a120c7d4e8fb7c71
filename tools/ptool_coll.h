/*
 * ptool_coll.h -- nccl-tests style collective benchmarks, written once against
 * a small backend table so that the very same method (sizes, timing, checks,
 * bandwidth factors, output) runs on plait (tools/plait-bench.c) and on MPI
 * (bench/nccltests_mpi.c).
 *
 * This file and ptool_coll.c use libc only: no plait.h, no mpi.h.
 */
#ifndef PLAIT_TOOLS_PTOOL_COLL_H
#define PLAIT_TOOLS_PTOOL_COLL_H

#include <stddef.h>
#include <stdio.h>

/* The collectives, in the order of their names in ptool_coll.c. */
enum { PTOOL_C_ALLREDUCE, PTOOL_C_ALLGATHER, PTOOL_C_REDUCE_SCATTER, PTOOL_C_ALLTOALL,
       PTOOL_C_BCAST, PTOOL_C_REDUCE, PTOOL_C_GATHER, PTOOL_C_SCATTER, PTOOL_C_ALLTOALLV,
       PTOOL_C_BARRIER, PTOOL_C_N };

/* Datatypes (nccl-tests names) and operators. */
enum { PTOOL_T_INT8, PTOOL_T_UINT8, PTOOL_T_INT32, PTOOL_T_UINT32, PTOOL_T_INT64,
       PTOOL_T_UINT64, PTOOL_T_HALF, PTOOL_T_BFLOAT16, PTOOL_T_FLOAT, PTOOL_T_DOUBLE,
       PTOOL_T_N };
enum { PTOOL_O_SUM, PTOOL_O_PROD, PTOOL_O_MAX, PTOOL_O_MIN, PTOOL_O_AVG, PTOOL_O_N };

/*
 * One call, in the library-neutral form the core uses. count: elements per the
 * library API's meaning (allreduce/bcast/reduce: the vector; allgather/gather:
 * sendcount; reduce_scatter/scatter: recvcount; alltoall(v): per peer). In
 * place: sbuf == rbuf, laid out as plait's API describes it (the MPI backend
 * passes MPI_IN_PLACE instead). alltoallv: counts[i] = count, displs[i] =
 * i * count for both directions.
 */
typedef struct ptool_coll_call {
    int          coll, dtype, op, root;
    const void  *sbuf;
    void        *rbuf;
    size_t       count;
    const size_t *counts, *displs;   /* alltoallv only */
} ptool_coll_call_t;

typedef struct ptool_coll_backend {
    const char *name;             /* "plait", "Open MPI" */
    char        version[128];
    int         rank, size;
    /* Runs one collective; 0 on success, PTOOL_UNSUPPORTED when this library
     * lacks the type/op combination, else a library error code. */
    int  (*run)(const ptool_coll_call_t *c);
    int  (*barrier)(void);
    /* Sums n doubles over all ranks, in place (time averages, hashes). */
    int  (*sum_doubles)(double *v, int n);
    double (*wtime)(void);
    /* Reports what failed (rc: the library's code; 0: what failed outside
     * the library, and what says why) and ends every rank; must not return. */
    void (*fail)(const char *what, int rc);
} ptool_coll_backend_t;

#define PTOOL_UNSUPPORTED (-12345)

typedef struct ptool_coll_opts {
    int         coll;
    size_t      min_bytes, max_bytes;
    int         step_factor;      /* -f: multiply; 0 -> use step_bytes */
    size_t      step_bytes;       /* -i */
    int         dtype, op, root;  /* -1: every type / op / root (nccl-tests' -d all,
                                     -o all, -r -1), looped in ptool_coll_run */
    long        iters, warmup;
    long        run_cycles;       /* -N: the size sweep this many times (0: forever) */
    int         check;            /* -c N: verify N times (0 off) */
    int         hash;             /* --hash: print a hash of every rank's results */
    int         inplace;          /* -I: 0 out-of-place only, 1 in-place only, 2 both */
    const char *algo;             /* -a: recorded in the header; the front end applies it */
    const char *json_path;
    const char *prog;
} ptool_coll_opts_t;

enum { PTOOL_COLL_RUN = 0, PTOOL_COLL_HELP = 1, PTOOL_COLL_ERROR = 2 };

/* Parses "COLL [options]" (argv[0] is the family name, argv[1] the
 * collective). Errors go to err (NULL: silent). */
int  ptool_coll_parse(int argc, char **argv, ptool_coll_opts_t *o, const char *prog, FILE *err);
void ptool_coll_usage(FILE *out, const char *prog);
const char *ptool_coll_name(int coll);
const char *ptool_coll_type_name(int dtype);
const char *ptool_coll_op_name(int op);

/* Runs the benchmark on every rank; rank 0 prints. Returns 0, or 1 when the
 * check found wrong values (every rank alike). */
int  ptool_coll_run(const ptool_coll_opts_t *o, const ptool_coll_backend_t *be);

#endif
