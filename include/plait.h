/*
 * plait.h -- the public C API of plait, a communication runtime for HPC and ML
 * clusters: MPI-style point-to-point and collectives over a software transport.
 *
 * C99. No CUDA or MPI types appear here. Link with -lplait
 * (`pkg-config --cflags --libs plait`).
 *
 * Conventions that hold for every function below:
 *  - The return value is PLAIT_OK (0) or a negative PLAIT_ERR_* code; on failure
 *    plait_last_error() gives this thread's detailed message, naming the argument
 *    or the peer involved.
 *  - A failed call leaves user buffers it did not promise to write untouched and
 *    leaves the library usable, except after PLAIT_ERR_PEER, when only
 *    plait_finalize() and plait_abort() are promised to work.
 *  - Buffers are host memory in this release.
 *  - Every blocking wait honours PLAIT_TIMEOUT (seconds, 0 = wait forever) and
 *    fails with PLAIT_ERR_TIMEOUT naming what it was waiting for.
 */
#ifndef PLAIT_H
#define PLAIT_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PLAIT_VERSION_MAJOR 0
#define PLAIT_VERSION_MINOR 1
#define PLAIT_VERSION_PATCH 0

/* ------------------------------------------------------------------ results */

enum {
    PLAIT_OK              =  0,
    PLAIT_ERR_ARG         = -1,  /* invalid argument: bad rank, tag, count, NULL, datatype/op mismatch */
    PLAIT_ERR_NOMEM       = -2,
    PLAIT_ERR_TRUNCATE    = -3,  /* incoming message larger than the receive buffer */
    PLAIT_ERR_TIMEOUT     = -4,
    PLAIT_ERR_PEER        = -5,  /* a peer process died or the job is aborting */
    PLAIT_ERR_TRANSPORT   = -6,
    PLAIT_ERR_UNSUPPORTED = -7,  /* valid request this build or machine cannot serve */
    PLAIT_ERR_STATE       = -8,  /* not initialized, already finalized, freed object */
    PLAIT_ERR_INTERNAL    = -9
};

/** Static, human-readable text for a result code ("unknown error" otherwise). */
const char *plait_strerror(int result);

/** This thread's detailed message for its last failed call ("" if none).
 *  The text stays valid until the thread's next failing plait call. */
const char *plait_last_error(void);

/* ---------------------------------------------------------------- lifecycle */

/** Joins the job. Under plaitrun, srun --mpi=pmix or mpirun the process becomes
 *  one rank of the launched job (PMIx); with no PMIx server in reach it becomes
 *  a singleton job of size 1. Calling it twice fails with PLAIT_ERR_STATE. */
int  plait_init(void);

/** Collective over the world: every rank must call it. Waits for all ranks,
 *  then frees every resource. After it only plait_initialized, plait_version,
 *  plait_strerror and plait_last_error may be called. */
int  plait_finalize(void);

/** *flag = 1 between plait_init and plait_finalize, else 0. Any time. */
int  plait_initialized(int *flag);

/** Ends every rank of the job with exit_code (reason is printed); no return.
 *  May be called by one rank alone, at any time, even before plait_init. */
void plait_abort(int exit_code, const char *reason);

/** The library's version (may be called at any time). */
int  plait_version(int *major, int *minor, int *patch);

/** Seconds since an arbitrary point in the past (monotonic clock). */
double plait_wtime(void);

/* ------------------------------------------------------------ communicators */

typedef struct plait_comm *plait_comm_t;

/** The communicator of all ranks; valid between init and finalize (NULL otherwise). */
plait_comm_t plait_comm_world(void);

/** This process's rank in comm. */
int plait_comm_rank(plait_comm_t comm, int *rank);

/** Number of ranks in comm. */
int plait_comm_size(plait_comm_t comm, int *size);

/** Collective over comm: a new communicator with the same ranks whose traffic
 *  never matches comm's. */
int plait_comm_dup(plait_comm_t comm, plait_comm_t *newcomm);

#define PLAIT_UNDEFINED (-32766)

/** Collective over comm: ranks with equal color form a new communicator, ordered
 *  by (key, rank in comm). color PLAIT_UNDEFINED gives *newcomm = NULL.
 *  color must be >= 0 or PLAIT_UNDEFINED. */
int plait_comm_split(plait_comm_t comm, int color, int key, plait_comm_t *newcomm);

/** Frees a communicator made by dup or split and sets *comm = NULL. Local: any
 *  operation still in flight on it completes first. The world cannot be freed. */
int plait_comm_free(plait_comm_t *comm);

/* ---------------------------------------------------- datatypes, operators */

typedef enum {
    PLAIT_BYTE, PLAIT_INT8, PLAIT_UINT8, PLAIT_INT32, PLAIT_UINT32, PLAIT_INT64, PLAIT_UINT64,
    PLAIT_FLOAT16, PLAIT_BFLOAT16, PLAIT_FLOAT32, PLAIT_FLOAT64
} plait_dtype_t;

typedef enum { PLAIT_SUM, PLAIT_PROD, PLAIT_MIN, PLAIT_MAX, PLAIT_AVG } plait_op_t;

/** Size in bytes of one element of dt; 0 for an unknown type. */
size_t plait_dtype_size(plait_dtype_t dt);

/* ----------------------------------------------------------- point-to-point */

#define PLAIT_ANY_SOURCE (-1)
#define PLAIT_ANY_TAG    (-1)
#define PLAIT_TAG_MAX    0x7fffffff

/** Of a received message: its source rank in the communicator, its tag, and the
 *  number of bytes written to the receive buffer (the sent size, or the buffer
 *  size when the receive failed with PLAIT_ERR_TRUNCATE). */
typedef struct { int source; int tag; size_t bytes; } plait_status_t;

typedef struct plait_request *plait_request_t;

/** Blocking send of count elements of dt to rank dest of comm. Returns once buf
 *  may be reused. MPI semantics: messages from one sender to one receiver on one
 *  communicator are received in the order sent. Sending to oneself works. */
int plait_send (const void *buf, size_t count, plait_dtype_t dt, int dest,   int tag, plait_comm_t comm);

/** Blocking receive into buf (room for count elements of dt) from rank source
 *  (or PLAIT_ANY_SOURCE) with tag (or PLAIT_ANY_TAG). A longer message fails
 *  with PLAIT_ERR_TRUNCATE after filling buf and never writes past it.
 *  status may be NULL. */
int plait_recv (void *buf,       size_t count, plait_dtype_t dt, int source, int tag, plait_comm_t comm,
                plait_status_t *status);

/** Non-blocking send; complete *req with plait_test/plait_wait/plait_waitall.
 *  buf must not be modified until then. */
int plait_isend(const void *buf, size_t count, plait_dtype_t dt, int dest,   int tag, plait_comm_t comm,
                plait_request_t *req);

/** Non-blocking receive; buf must not be read until the request completes. */
int plait_irecv(void *buf,       size_t count, plait_dtype_t dt, int source, int tag, plait_comm_t comm,
                plait_request_t *req);

/** Checks *req: *done = 1 and *req = NULL when it completed (its result is
 *  returned, e.g. PLAIT_ERR_TRUNCATE), *done = 0 otherwise. A NULL *req counts
 *  as complete. status may be NULL. */
int plait_test   (plait_request_t *req, int *done, plait_status_t *status);

/** Waits until *req completes, returns its result and sets *req = NULL.
 *  A NULL *req returns PLAIT_OK at once (status: source PLAIT_ANY_SOURCE,
 *  tag PLAIT_ANY_TAG, 0 bytes). Two failures leave *req as it was, still posted, its buffer still in use:
 *  PLAIT_ERR_TIMEOUT (PLAIT_TIMEOUT ran out; wait on it again to go on) and
 *  PLAIT_ERR_PEER (the peer it needs is gone). */
int plait_wait   (plait_request_t *req, plait_status_t *status);

/** Waits for all n requests in order; returns PLAIT_OK or the first failure.
 *  A request that completes, with or without an error of its own (e.g.
 *  PLAIT_ERR_TRUNCATE), is freed (NULL) and the wait goes on to the others.
 *  On PLAIT_ERR_TIMEOUT or PLAIT_ERR_PEER it returns at once, with that
 *  code even after an earlier request's own failure: that request and the
 *  ones after it stay as they were (see plait_wait). statuses may be NULL. */
int plait_waitall(int n, plait_request_t reqs[], plait_status_t statuses[]);

/* -------------------------------------------------------------- collectives */
/*
 * Rules shared by every collective below:
 *  - Every rank of comm calls it, with matching arguments (count, dt, op,
 *    root); collectives on one communicator start in the same order on every
 *    rank. Mismatched arguments fail with PLAIT_ERR_ARG where a rank can see
 *    them (a message of the wrong size) or end in PLAIT_ERR_TIMEOUT (see
 *    PLAIT_TIMEOUT); they never write outside the buffers passed.
 *  - Buffers are host memory in this release.
 *  - In place is sendbuf == recvbuf (what that means is stated per call).
 *  - Reductions: every plait_op_t on every numeric type; PLAIT_BYTE takes no
 *    reduction and PLAIT_AVG is for floating types only (else PLAIT_ERR_ARG).
 *    FLOAT16/BFLOAT16 compute each pairwise step in float32 and round to
 *    nearest-even; AVG is a SUM divided by the communicator size at the end,
 *    except for FLOAT16, whose narrow range (65504) would overflow where
 *    the average does not: there each rank's input is multiplied by
 *    1/size (in float32) first, then summed (so the last bits may differ
 *    from the exact average rounded once).
 *  - allreduce, allgather and bcast leave bitwise-identical results on every
 *    rank.
 *  - Errors: PLAIT_ERR_ARG names the bad argument (comm, dt, op, root, a NULL
 *    buffer with count > 0, a count whose byte size overflows);
 *    PLAIT_ERR_STATE outside init..finalize or on a freed comm;
 *    PLAIT_ERR_TIMEOUT / PLAIT_ERR_PEER as for point-to-point waits.
 *  - The non-blocking forms (plait_i*) take the same arguments plus req,
 *    return at once and complete through plait_test/plait_wait/plait_waitall;
 *    buffers must stay untouched until then. They progress whenever the
 *    library is entered (plait_test in a compute loop is enough); several may
 *    be in flight on one communicator and complete in any order.
 *  - The algorithm is chosen per call by message size, communicator size and
 *    host count (plait_info prints the table) or forced per collective with
 *    PLAIT_<COLL>_ALGO settings.
 */

/** Collective over comm: returns once every rank of comm has entered. */
int plait_barrier (plait_comm_t comm);

/** Non-blocking barrier; completes through plait_test/plait_wait. */
int plait_ibarrier(plait_comm_t comm, plait_request_t *req);

/** Broadcast: every rank calls it; count elements of dt at root's buf are
 *  copied into buf on every other rank. root must be a rank of comm
 *  (else PLAIT_ERR_ARG); host memory. */
int plait_bcast (void *buf, size_t count, plait_dtype_t dt, int root, plait_comm_t comm);
/** Non-blocking plait_bcast. */
int plait_ibcast(void *buf, size_t count, plait_dtype_t dt, int root, plait_comm_t comm,
                 plait_request_t *req);

/** Reduce to root: every rank calls it; recvbuf at root receives op over all
 *  ranks' sendbuf (count elements of dt). recvbuf is used at root only (may be
 *  NULL elsewhere). In place at root: sendbuf == recvbuf holds root's input.
 *  Host memory; dt/op mismatches and a bad root give PLAIT_ERR_ARG. */
int plait_reduce (const void *sendbuf, void *recvbuf, size_t count, plait_dtype_t dt,
                  plait_op_t op, int root, plait_comm_t comm);
/** Non-blocking plait_reduce. */
int plait_ireduce(const void *sendbuf, void *recvbuf, size_t count, plait_dtype_t dt,
                  plait_op_t op, int root, plait_comm_t comm, plait_request_t *req);

/** Allreduce: every rank calls it and receives op over all ranks' sendbuf
 *  (count elements of dt) in recvbuf, bitwise identical on every rank. In
 *  place: sendbuf == recvbuf holds the input. Host memory. */
int plait_allreduce (const void *sendbuf, void *recvbuf, size_t count, plait_dtype_t dt,
                     plait_op_t op, plait_comm_t comm);
/** Non-blocking plait_allreduce. */
int plait_iallreduce(const void *sendbuf, void *recvbuf, size_t count, plait_dtype_t dt,
                     plait_op_t op, plait_comm_t comm, plait_request_t *req);

/** Allgather: every rank calls it; recvbuf (size * sendcount elements) gets
 *  rank i's sendbuf in block i on every rank. In place: sendbuf == recvbuf,
 *  with this rank's block already at block rank. Host memory. */
int plait_allgather (const void *sendbuf, void *recvbuf, size_t sendcount, plait_dtype_t dt,
                     plait_comm_t comm);
/** Non-blocking plait_allgather. */
int plait_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount, plait_dtype_t dt,
                     plait_comm_t comm, plait_request_t *req);

/** Reduce-scatter (block form): every rank calls it; sendbuf holds
 *  size * recvcount elements; rank r receives block r of op over all ranks'
 *  sendbuf in recvbuf (recvcount elements). In place: sendbuf == recvbuf holds
 *  the size blocks and the result lands in its first recvcount elements
 *  (MPI_IN_PLACE semantics). Host memory. */
int plait_reduce_scatter (const void *sendbuf, void *recvbuf, size_t recvcount, plait_dtype_t dt,
                          plait_op_t op, plait_comm_t comm);
/** Non-blocking plait_reduce_scatter. */
int plait_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, plait_dtype_t dt,
                          plait_op_t op, plait_comm_t comm, plait_request_t *req);

/** All-to-all: every rank calls it; block j (count elements) of sendbuf goes
 *  to rank j, and recvbuf block i comes from rank i. In place:
 *  sendbuf == recvbuf (the library keeps a copy of the input). Host memory. */
int plait_alltoall (const void *sendbuf, void *recvbuf, size_t count, plait_dtype_t dt,
                    plait_comm_t comm);
/** Non-blocking plait_alltoall. */
int plait_ialltoall(const void *sendbuf, void *recvbuf, size_t count, plait_dtype_t dt,
                    plait_comm_t comm, plait_request_t *req);

/** All-to-all with per-peer counts and displacements (in elements): every
 *  rank calls it; sendcounts[j] elements at sendbuf + sdispls[j] go to rank j
 *  and arrive at its recvbuf + rdispls[me]. recvcounts[i] must equal what
 *  rank i sends here (else PLAIT_ERR_ARG or a timeout); sendcounts[me] must
 *  equal recvcounts[me]. The arrays are read before the call returns. In
 *  place: sendbuf == recvbuf. Host memory. */
int plait_alltoallv (const void *sendbuf, const size_t sendcounts[], const size_t sdispls[],
                     void *recvbuf, const size_t recvcounts[], const size_t rdispls[],
                     plait_dtype_t dt, plait_comm_t comm);
/** Non-blocking plait_alltoallv. */
int plait_ialltoallv(const void *sendbuf, const size_t sendcounts[], const size_t sdispls[],
                     void *recvbuf, const size_t recvcounts[], const size_t rdispls[],
                     plait_dtype_t dt, plait_comm_t comm, plait_request_t *req);

/** Gather to root: every rank calls it; root's recvbuf (size * sendcount
 *  elements, used at root only) gets rank i's sendbuf in block i. In place at
 *  root: sendbuf == recvbuf with root's block already at block root. Host
 *  memory. */
int plait_gather (const void *sendbuf, void *recvbuf, size_t sendcount, plait_dtype_t dt,
                  int root, plait_comm_t comm);
/** Non-blocking plait_gather. */
int plait_igather(const void *sendbuf, void *recvbuf, size_t sendcount, plait_dtype_t dt,
                  int root, plait_comm_t comm, plait_request_t *req);

/** Scatter from root: every rank calls it; block i (recvcount elements) of
 *  root's sendbuf (used at root only) lands in rank i's recvbuf. In place at
 *  root: sendbuf == recvbuf, root's block stays where it is. Host memory. */
int plait_scatter (const void *sendbuf, void *recvbuf, size_t recvcount, plait_dtype_t dt,
                   int root, plait_comm_t comm);
/** Non-blocking plait_scatter. */
int plait_iscatter(const void *sendbuf, void *recvbuf, size_t recvcount, plait_dtype_t dt,
                   int root, plait_comm_t comm, plait_request_t *req);

/* -------------------------------------------------------------- diagnostics */

/** Writes this rank's transport counters to f: for every connection of the
 *  multipath (udp) transport, bytes, packets, chunks, messages, retransmissions
 *  by cause (fast = duplicate SACKs, timeout), loss events, ACKs, smoothed and
 *  minimum RTT, congestion window and drops by reason; then per path (UDP
 *  port pair) packets, bytes, chunks, retransmissions, losses and RTT. A job
 *  without udp connections writes one line saying so. Any rank, any time
 *  between plait_init and plait_finalize; local (no communication).
 *  PLAIT_STATS=1 prints the same to stderr at plait_finalize.
 *  Errors: PLAIT_ERR_STATE outside init/finalize, PLAIT_ERR_ARG for f NULL. */
int plait_stats_print(FILE *f);

#ifdef __cplusplus
}
#endif

#endif /* PLAIT_H */
