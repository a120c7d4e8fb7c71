/*
 * pcoll.h -- collectives layer: one round-based schedule engine over the
 * pt2pt layer's internal sends and receives (collective context of a
 * communicator), the reduction kernels, the algorithms built on the engine and
 * the table that picks one per call.
 */
#ifndef PLAIT_COLL_PCOLL_H
#define PLAIT_COLL_PCOLL_H

#include <stdio.h>

#include "pt2pt/ppt.h"

/* ------------------------------------------------------------ the engine */

/* What one step of a schedule does. Transfers run concurrently within their
 * round; local steps run, in the order added, once every transfer of their
 * round has completed (a round may have only local steps); a posted copy
 * (PCOLL_COPY_POSTED) runs as soon as its round's transfers are posted,
 * while they move. */
enum { PCOLL_SEND = 1, PCOLL_RECV, PCOLL_REDUCE, PCOLL_COPY, PCOLL_SCALE, PCOLL_FUNC,
       PCOLL_COPY_POSTED };

struct pcoll_sched;
/* A FUNC step: any local work (the shared-memory algorithms read peers'
 * buffers in one); a non-OK return fails the collective. */
typedef int (*pcoll_func_t)(struct pcoll_sched *sc, void *arg);

typedef struct {
    int          kind;
    int          peer;     /* transfers: comm rank */
    void        *buf;      /* transfers: the data; REDUCE/COPY/SCALE: destination */
    size_t       len;      /* transfers and COPY: bytes; REDUCE/SCALE: elements */
    const void  *a, *b;    /* REDUCE: buf = a op b (elementwise; buf may alias a or b);
                            * COPY: a is the source */
    pcoll_func_t fn;       /* FUNC: called with buf */
} pcoll_op_t;

/* Inline capacity of a schedule. A small collective (every blocking call
 * below a few KiB on a one-host communicator of up to 8 ranks) fits in it
 * entirely, so it runs without a single malloc: the schedule itself lives on
 * the caller's stack (blocking) or in one allocation (non-blocking), its
 * transfer requests live in xfer_inl, and scratch up to PCOLL_INL_SCRATCH
 * bytes comes from scratch_inl. Larger schedules spill to the heap. */
#define PCOLL_INL_OPS     32
#define PCOLL_INL_ROUNDS  16
#define PCOLL_INL_XFER    8
#define PCOLL_INL_TMP     4
#define PCOLL_INL_SCRATCH 1024

typedef struct {                     /* a scratch buffer from the pool or malloc */
    void  *p;
    size_t cap;                      /* its size (it goes back to the pool) */
} pcoll_tmp_t;

/* A wait that has not moved for this long asks the peers it waits for where
 * they are (pt2pt/probe.c): long against a healthy round, short against a
 * user's patience. */
#define PCOLL_PROBE_NS 500000000ull

typedef struct pcoll_sched {
    ppt_state_t     *s;
    plait_comm_t     comm;
    int              tag;
    int              tag_set;        /* tag given by the builder (finalize), not sequenced */
    uint32_t         sig;            /* pcoll_call_sig of a user's call (0: internal) */
    const char      *fn;             /* the user's call, for a builder's messages (NULL: internal) */
    int              err;            /* first failure while building (NOMEM) */
    int              on_stack;       /* storage owned by the caller: free only spills */
    plait_dtype_t    dt;             /* of REDUCE and SCALE steps */
    plait_op_t       op;
    int              nrounds, round, caprounds;
    int             *round_end;      /* ops[round_end[k-1] .. round_end[k]) form round k */
    pcoll_op_t      *ops;
    int              nops, capops;
    int              ahead;          /* rounds whose transfers may be posted early (see
                                        pcoll_sched_ahead) */
    int              posted;         /* rounds whose transfers are posted */
    int              send_flags;     /* ppt_isend_flags_locked's flags for its sends */
    int              stall_round;    /* round + 1 a wait saw not moving since stall_ns (0: */
    uint64_t         stall_ns;       /*  none yet), probed: its peers asked (pt2pt/probe.c) */
    int              probed;
    struct plait_request *xfer;      /* posted transfer requests (storage, a ring of capxfer) */
    int             *xfer_op;        /* ... and the op index of each */
    int              xfer_lo, xfer_hi, capxfer;   /* transfers [lo, hi) posted and not dropped,
                                                     the current round's first; slot i % cap */
    pcoll_tmp_t     *tmp;            /* buffers the schedule owns, released with it */
    int              ntmp, captmp;
    size_t           scratch_used;   /* bytes of scratch_inl handed out */
    int              round_end_inl[PCOLL_INL_ROUNDS];
    pcoll_op_t       ops_inl[PCOLL_INL_OPS];
    int              xfer_op_inl[PCOLL_INL_XFER];
    pcoll_tmp_t      tmp_inl[PCOLL_INL_TMP];
    struct plait_request xfer_inl[PCOLL_INL_XFER];
    _Alignas(64) char scratch_inl[PCOLL_INL_SCRATCH];
} pcoll_sched_t;

/* maxrounds / maxops are capacity hints; the schedule grows as needed. */
int  pcoll_sched_new(ppt_state_t *s, plait_comm_t comm, int maxrounds, int maxops,
                     pcoll_sched_t **out);
/* The same in caller-owned storage (a blocking call's stack); never fails. */
void pcoll_sched_init(pcoll_sched_t *sc, ppt_state_t *s, plait_comm_t comm);
void pcoll_sched_free(pcoll_sched_t *sc);
/* Sets the datatype and operator of the schedule's REDUCE and SCALE steps. */
void pcoll_sched_set_reduce(pcoll_sched_t *sc, plait_dtype_t dt, plait_op_t op);
void pcoll_sched_add(pcoll_sched_t *sc, int peer, int send, void *buf, size_t len);
void pcoll_sched_send(pcoll_sched_t *sc, int peer, const void *buf, size_t len);
void pcoll_sched_recv(pcoll_sched_t *sc, int peer, void *buf, size_t len);
/* dst = a op b over count elements (a, b are the operands in that order). */
void pcoll_sched_reduce(pcoll_sched_t *sc, void *dst, const void *a, const void *b, size_t count);
void pcoll_sched_copy(pcoll_sched_t *sc, void *dst, const void *src, size_t len);
/* A copy made once this round's transfers are posted, while they move (it
 * must touch none of their buffers): local work that need not hold up
 * posting the receives, e.g. a rank's own block, which made a peer's eager
 * message arrive unexpected (one more copy) while it was made first. */
void pcoll_sched_copy_posted(pcoll_sched_t *sc, void *dst, const void *src, size_t len);
/* PLAIT_AVG's last step: buf /= communicator size, over count elements. */
void pcoll_sched_scale(pcoll_sched_t *sc, void *buf, size_t count);
/* A buffer of len bytes owned by the schedule (NULL and sc->err set on failure). */
void *pcoll_sched_tmp(pcoll_sched_t *sc, size_t len);
void pcoll_sched_end_round(pcoll_sched_t *sc);
/* Lets the transfers of round k be posted when round k - depth starts, so
 * they move while earlier rounds' local steps run (a pipeline). Only for a
 * schedule whose transfers touch no byte that a local step of an earlier
 * round writes, and whose receives land where no earlier local step reads. */
void pcoll_sched_ahead(pcoll_sched_t *sc, int depth);
/* A FUNC step: fn(sc, arg) runs with the round's other local steps. */
void pcoll_sched_func(pcoll_sched_t *sc, pcoll_func_t fn, void *arg);
/* Frees the buffers kept for reuse by pcoll_sched_tmp (at finalize). */
void pcoll_pool_drain(void);
/* A buffer of at least len bytes from that pool (its pages warm from an
 * earlier call) or malloc, *cap its size; NULL when out of memory. */
void *pcoll_pool_get(size_t len, size_t *cap);
/* Gives a pcoll_pool_get buffer back for reuse (p NULL: nothing). */
void pcoll_pool_put(void *p, size_t cap);
/* Wraps the schedule into a request progressed by the pt2pt progress loop;
 * takes ownership of sc (freed on failure too). storage: where the request
 * lives (a blocking call's stack), or NULL to allocate it. */
int  pcoll_sched_start_locked(pcoll_sched_t *sc, const char *what, plait_request_t storage,
                              plait_request_t *req);
/* Blocking form: waits for req, withdraws it if unfinished, frees it. */
int  pcoll_wait_free_locked(ppt_state_t *s, plait_request_t req, const char *what);
/* A started collective that is not finished joins the progress list; a
 * non-blocking one (not on the stack) counts in nb_inflight and wakes the
 * progress thread. */
void pcoll_listed_locked(ppt_state_t *s, plait_request_t req);

/* Blocking barrier with the lock held; tag -1: the next collective's, else
 * that tag (finalize: PPT_TAG_FINALIZE). */
int  pcoll_barrier_locked(ppt_state_t *s, plait_comm_t comm, const char *what, int tag);

/* ------------------------------------------------------------ reductions */

/* dst[i] = a[i] op b[i] for count elements of dt (dst may alias a or b).
 * PLAIT_AVG reduces as PLAIT_SUM (see pcoll_scale). float16/bfloat16: each
 * step computes in float32 and rounds to nearest-even. */
void pcoll_reduce(void *dst, const void *a, const void *b, size_t count, plait_dtype_t dt,
                  plait_op_t op);
/* buf[i] /= divisor (floating types; AVG's final step). */
void pcoll_scale(void *buf, size_t count, plait_dtype_t dt, int divisor);
/* dst[i] = src[i] * factor for float16 / bfloat16, in float32 rounded to
 * nearest-even, the same bits in every family (dst may be src): a
 * multiplication where the scaling need not be a division, which costs
 * several times more (VDIVPS). */
void pcoll_mul16_to(void *dst, const void *src, size_t count, plait_dtype_t dt, float factor);
/*
 * float16 PLAIT_AVG sums inputs scaled by 1/n (coll/api.c says why). The
 * algorithms that read every input themselves (coll/shm.c's direct reads,
 * coll/shm_small.c's area) scale each as they first take it in
 * (pcoll_take_input, pcoll_reduce_step): no pass of its own. The others get
 * a scaled copy and a plain SUM (coll/api.c, coll_avg16_prescale). So a
 * call that reaches an algorithm still as float16 AVG, n > 1, is one of the
 * first kind: it sums (pcoll_red_op) and never divides (pcoll_divides).
 */
static inline int pcoll_prescaled(plait_dtype_t dt, plait_op_t op)
{
    return dt == PLAIT_FLOAT16 && op == PLAIT_AVG;
}
static inline plait_op_t pcoll_red_op(plait_dtype_t dt, plait_op_t op)
{
    return pcoll_prescaled(dt, op) ? PLAIT_SUM : op;
}
static inline int pcoll_divides(plait_dtype_t dt, plait_op_t op)
{
    return op == PLAIT_AVG && !pcoll_prescaled(dt, op);
}
/* float16 dst[i] = a[i] + (b[i] * factor rounded to float16): the bits of
 * pcoll_mul16_to into a copy, then pcoll_reduce's SUM, in one pass (dst may
 * be a). */
void pcoll_add_scaled16(void *dst, const void *a, const void *b, size_t count, float factor);
/* dst = an input of count elements, taken into a reduction over n ranks:
 * copied, or scaled by 1/n where pcoll_prescaled (dst may be src then). */
void pcoll_take_input(void *dst, const void *src, size_t count, plait_dtype_t dt, plait_op_t op,
                      int n);
/* Which kernel family runs here: "avx512", "avx2" or "scalar". */
const char *pcoll_reduce_isa(void);
/* Makes every later pcoll_reduce use one family (pref as PLAIT_REDUCE_ISA:
 * 0 auto, 1 scalar, 2 avx2, 3 avx512; a family the CPU lacks falls back);
 * returns the one chosen. For tests that compare the families. */
const char *pcoll_reduce_pick(int pref);
/* 1 if dt/op is a valid reduction; else 0 with *why set. op must be a
 * plait_op_t (coll_check names one that is not, with its number). */
int  pcoll_op_valid(plait_dtype_t dt, plait_op_t op, const char **why);

/* ------------------------------------------------------------ algorithms */

enum { PCOLL_BARRIER, PCOLL_BCAST, PCOLL_REDUCE_C, PCOLL_ALLREDUCE, PCOLL_ALLGATHER,
       PCOLL_REDUCE_SCATTER, PCOLL_ALLTOALL, PCOLL_ALLTOALLV, PCOLL_GATHER, PCOLL_SCATTER,
       PCOLL_NCOLL };

/* Algorithm ids per collective. Their order (after AUTO = 0) is the order of
 * the choices of the PLAIT_<COLL>_ALGO settings in runtime/config.c. */
enum { PCOLL_AUTO = 0 };
enum { PCOLL_AR_RD = 1, PCOLL_AR_RING, PCOLL_AR_RABENSEIFNER, PCOLL_AR_SHM, PCOLL_AR_TWO_LEVEL };
enum { PCOLL_AG_RING = 1, PCOLL_AG_RD, PCOLL_AG_BRUCK, PCOLL_AG_SHM, PCOLL_AG_TWO_LEVEL };
enum { PCOLL_RS_RING = 1, PCOLL_RS_HALVING, PCOLL_RS_SHM, PCOLL_RS_TWO_LEVEL };
enum { PCOLL_BC_BINOMIAL = 1, PCOLL_BC_SCATTER_ALLGATHER, PCOLL_BC_CHAIN, PCOLL_BC_SHM };
enum { PCOLL_RE_BINOMIAL = 1, PCOLL_RE_RABENSEIFNER, PCOLL_RE_SHM };
enum { PCOLL_AA_PAIRWISE = 1, PCOLL_AA_BRUCK, PCOLL_AA_SCATTERED, PCOLL_AA_SHM };
enum { PCOLL_ONLY = 1 };   /* collectives with one algorithm */

/* alltoallv's per-peer counts and displacements (the caller's arrays). */
typedef struct {
    const size_t *scounts, *sdispls, *rcounts, *rdispls;
} pcoll_vcounts_t;

/* One call's arguments, already checked. count: elements per the API's
 * meaning for that collective (sendcount, recvcount, count). At most 64
 * bytes: every call builds one as a compound literal, and past 64 bytes
 * GCC zero-fills it with `rep stos`, whose start-up was most of the time
 * of a count-0 call (0.03 us against Open MPI's 0.02). */
typedef struct {
    int            coll;
    const void    *sbuf;
    void          *rbuf;
    size_t         count;
    plait_dtype_t  dt;
    plait_op_t     op;
    int            root;
    size_t         es;                /* element size */
    const pcoll_vcounts_t *v;         /* alltoallv; read while the schedule is built */
} pcoll_args_t;
_Static_assert(sizeof(pcoll_args_t) <= 64, "pcoll_args_t: see the comment above");

/* Builders: add the algorithm's rounds to sc (rank sc->comm->rank). */
int pcoll_allreduce_rd(pcoll_sched_t *sc, const pcoll_args_t *a);
int pcoll_allreduce_ring(pcoll_sched_t *sc, const pcoll_args_t *a);
void pcoll_ring_allreduce(pcoll_sched_t *sc, const int *g, int m, int gi, char *buf, size_t cnt,
                          size_t es, int scale);
int pcoll_allreduce_rabenseifner(pcoll_sched_t *sc, const pcoll_args_t *a);
/* Two-level (coll/hier.c): inside each host, then between hosts. */
int pcoll_allreduce_two_level(pcoll_sched_t *sc, const pcoll_args_t *a);
int pcoll_allgather_two_level(pcoll_sched_t *sc, const pcoll_args_t *a);
int pcoll_reduce_scatter_two_level(pcoll_sched_t *sc, const pcoll_args_t *a);
/* 0 when comm is known to have one rank per host (two_level = flat), else 1. */
int  pcoll_hier_useful(const ppt_state_t *s, plait_comm_t comm);
/* Learns comm's host map now where it spans hosts (world's, at plait_init:
 * non-blocking calls, which may not wait to learn it, then run two-level
 * from the first call on); every rank calls it at the same point. */
int  pcoll_hier_prepare_locked(ppt_state_t *s, plait_comm_t comm, const char *fn);
/* Shared-memory (one host) variants, coll/shm.c: ranks read each other's
 * buffers with the shm transport's get (process_vm_readv). */
int pcoll_allreduce_shm(pcoll_sched_t *sc, const pcoll_args_t *a);
int pcoll_reduce_scatter_shm(pcoll_sched_t *sc, const pcoll_args_t *a);
int pcoll_reduce_shm(pcoll_sched_t *sc, const pcoll_args_t *a);
int pcoll_allgather_shm(pcoll_sched_t *sc, const pcoll_args_t *a);
int pcoll_alltoall_shm(pcoll_sched_t *sc, const pcoll_args_t *a);
int pcoll_bcast_shm(pcoll_sched_t *sc, const pcoll_args_t *a);
/* 1 when algo of coll is one of those (coll/select.c). */
int pcoll_shm_algo(int coll, int algo);
/* 1 when every other rank of comm is reached through shm with direct reads. */
int pcoll_shm_usable(ppt_state_t *s, plait_comm_t comm);
/* len bytes at addr in comm rank peer's memory into buf (process_vm_readv
 * through the shm transport), or the error that says which read failed. */
int pcoll_direct_read(ppt_state_t *s, plait_comm_t comm, int peer, uint64_t addr, void *buf,
                      size_t len);
/* Turn k (0 .. n-1) of a reduction over every rank's input read directly:
 * rank p = rank + 1 + k (mod n), this rank's own input last. Every rank
 * starts with a different peer, so at any moment the readers read different
 * owners' memory: when all started with rank 0, all process_vm_readv calls
 * took rank 0's page-table lock together (8 ranks x 1 MiB allreduce on the
 * 16-core machine: 12.5% of the samples in the kernel's spin-lock slow
 * path, docs/PERFORMANCE.md session 20). Each element is still reduced by
 * one rank only, so every rank gets bitwise the same bytes; the order of
 * the operands differs from slice to slice, as in a ring. */
static inline int pcoll_reduce_turn(plait_comm_t comm, int k)
{
    return (comm->rank + 1 + k) % comm->size;
}
/* Rank p's turn in such a reduction, m elements: x_p is own (this rank's)
 * or read directly from addr in rank p's memory (through scratch; the first
 * turn's straight into acc); then acc = x_p on the first turn, acc = acc op
 * x_p after, x_p scaled first where pcoll_prescaled. AVG's division is the
 * caller's. */
int pcoll_reduce_step(ppt_state_t *s, plait_comm_t comm, const pcoll_args_t *a, int p, int first,
                      const char *own, uint64_t addr, char *acc, char *scratch, size_t m);
int pcoll_allgather_ring(pcoll_sched_t *sc, const pcoll_args_t *a);
int pcoll_allgather_rd(pcoll_sched_t *sc, const pcoll_args_t *a);
int pcoll_allgather_bruck(pcoll_sched_t *sc, const pcoll_args_t *a);
int pcoll_reduce_scatter_ring(pcoll_sched_t *sc, const pcoll_args_t *a);
int pcoll_reduce_scatter_halving(pcoll_sched_t *sc, const pcoll_args_t *a);
int pcoll_bcast_binomial(pcoll_sched_t *sc, const pcoll_args_t *a);
int pcoll_bcast_scatter_allgather(pcoll_sched_t *sc, const pcoll_args_t *a);
int pcoll_bcast_chain(pcoll_sched_t *sc, const pcoll_args_t *a);
int pcoll_reduce_binomial(pcoll_sched_t *sc, const pcoll_args_t *a);
int pcoll_reduce_rabenseifner(pcoll_sched_t *sc, const pcoll_args_t *a);
int pcoll_alltoall_pairwise(pcoll_sched_t *sc, const pcoll_args_t *a);
int pcoll_alltoall_bruck(pcoll_sched_t *sc, const pcoll_args_t *a);
int pcoll_alltoall_scattered(pcoll_sched_t *sc, const pcoll_args_t *a);
int pcoll_alltoallv_pairwise(pcoll_sched_t *sc, const pcoll_args_t *a);
int pcoll_alltoallv_scattered(pcoll_sched_t *sc, const pcoll_args_t *a);
int pcoll_gather_binomial(pcoll_sched_t *sc, const pcoll_args_t *a);
int pcoll_scatter_binomial(pcoll_sched_t *sc, const pcoll_args_t *a);

/* Two-rank blocking collectives straight on pt2pt (coll/pair.c). eligible:
 * the collective and size qualify (pcoll_pair_use adds the communicator and
 * settings checks); run: the whole blocking call, lock held. */
int pcoll_pair_eligible(const pcoll_args_t *a);
int pcoll_pair_use(ppt_state_t *s, plait_comm_t comm, const pcoll_args_t *a);
int pcoll_pair_run_locked(ppt_state_t *s, plait_comm_t comm, const pcoll_args_t *a,
                          const char *fn);

/* What PLAIT_STATS counts of the collectives (ppt_state_t.coll_stats): calls
 * by the path they took (count-0 calls other than barriers, which move
 * nothing, and refused ones are not counted). */
enum {
    PCOLL_ST_AREA,       /* blocking, on the shared-memory area */
    PCOLL_ST_AREA_NB,    /* non-blocking, on the area */
    PCOLL_ST_PAIR,       /* blocking, the direct exchange of 2 ranks */
    PCOLL_ST_SCHED,      /* blocking, on the schedule engine (messages, direct reads) */
    PCOLL_ST_SCHED_NB,   /* non-blocking, on the schedule engine */
    PCOLL_ST_N
};

/* Blocking collectives of a one-host communicator on its shared-memory area
 * with sequence flags (coll/shm_small.c): barrier, bcast, reduce, allreduce,
 * allgather, reduce_scatter, alltoall, gather, scatter, where the bytes a rank
 * contributes are at most PLAIT_COLL_SHM_SMALL and nothing is forced by
 * PLAIT_<COLL>_ALGO. use: 1 when this call runs there; sets up the area at
 * the communicator's first eligible call (a collective step: every rank
 * reaches it), and if *rc is then an error the call must return it. run: the
 * whole call, lock held. */
int pcoll_area_use_locked(ppt_state_t *s, plait_comm_t comm, const pcoll_args_t *a,
                          const char *fn, int *rc);
int pcoll_area_run_locked(ppt_state_t *s, plait_comm_t comm, const pcoll_args_t *a,
                          const char *fn);
/* Sets up comm's area now, where comm may have one (world's, at
 * plait_init: then non-blocking calls take it from the first call on);
 * every rank calls it at the same point. An error of the setup's messages
 * is returned; an area that cannot be mapped everywhere is none, quietly. */
int pcoll_area_prepare_locked(ppt_state_t *s, plait_comm_t comm, const char *fn);
/* The non-blocking form: nb_use is 1 when the area exists already (a
 * blocking call or pcoll_area_prepare_locked made it) and the call is one
 * exchange there; start queues it and returns its request (the caller has
 * taken its number in comm->coll_seq). */
int pcoll_area_nb_use_locked(ppt_state_t *s, plait_comm_t comm, const pcoll_args_t *a);
int pcoll_area_start_locked(ppt_state_t *s, plait_comm_t comm, const pcoll_args_t *a,
                            const char *fn, plait_request_t *out);
/* 1 when comm's area is set up (and usable). */
int pcoll_area_ready(plait_comm_t comm);
/* A call this rank refused that the others run on the area (use or nb_use
 * said so): takes its area call numbers and reads them, publishing nothing
 * (coll/api.c coll_refuse_in_step). */
void pcoll_area_skip_locked(ppt_state_t *s, plait_comm_t comm, const pcoll_args_t *a, int nb);
/* The same where the blocking call set the area up: its slot marked refused,
 * with why, instead of a notice (coll/shm_small.c). */
void pcoll_area_refuse_locked(ppt_state_t *s, plait_comm_t comm, const pcoll_args_t *a,
                              const char *why);

/* Shared pieces (coll/util.c). */
/* Element offset and count of block i when count elements split into n blocks
 * (the first count % n blocks hold one more). */
size_t pcoll_blk_off(size_t count, int n, int i);
size_t pcoll_blk_cnt(size_t count, int n, int i);
/* Largest power of two <= n. */
int    pcoll_pof2(int n);

/* Non-power-of-two folding (recursive doubling / halving): with
 * rem = n - pof2, ranks below 2*rem pair up (2i, 2i+1); the even one hands its
 * data to the odd one and sits out (newrank -1), the odd one becomes newrank
 * i; ranks from 2*rem on become newrank r - rem. */
int    pcoll_fold_newrank(int rank, int rem);
int    pcoll_fold_real(int newrank, int rem);
/* Recursive halving among the pof2 newranks: acc is split into pof2
 * super-blocks, super-block j = units [edge[j], edge[j+1]) of unit bytes each.
 * In step d = pof2/2, ..., 1 a rank keeps the half of its window its newrank
 * falls in, sends the other half to newrank ^ d and reduces the half it keeps
 * with the one received into in (scratch as large as the largest half); the
 * lower real rank's data is always the left operand. Afterwards newrank nr's
 * acc holds super-block nr reduced over every survivor, each element computed
 * at exactly one rank. */
void   pcoll_halving(pcoll_sched_t *sc, char *acc, char *in, const size_t *edge, size_t unit,
                     int pof2, int nr, int rem);
/* Recursive doubling allgather among the pof2 newranks: starting from its own
 * super-block, in step d = 1, 2, ..., pof2/2 a rank swaps its window of d
 * super-blocks with newrank ^ d, so at the end every survivor holds all. */
void   pcoll_doubling(pcoll_sched_t *sc, char *buf, const size_t *edge, size_t unit, int pof2,
                      int nr, int rem);

/* ------------------------------------------------------------- selection */

/* The algorithm for one call: the forced one (PLAIT_<COLL>_ALGO) or the
 * table's choice for the message size (bytes as the table defines them),
 * communicator size and host count. */
int  pcoll_select(ppt_state_t *s, plait_comm_t comm, const pcoll_args_t *a);
/* The algorithm PLAIT_<COLL>_ALGO forces for coll (PCOLL_AUTO: none); a
 * forced one always runs on the schedule engine, so every algorithm stays
 * reachable. */
int  pcoll_forced(const prt_config_t *c, int coll);
/* Forgets what selection cached about communicators (plait_init). */
void pcoll_select_reset(void);
/* Name of algorithm id algo of collective coll ("ring"...). */
const char *pcoll_algo_name(int coll, int algo);
const char *pcoll_coll_name(int coll);

/* What every rank of one collective call must agree on beyond counts and
 * roots: the collective, the datatype, and (reductions) the operator, in
 * one word the shared-memory paths exchange; pcoll_sig_mismatch is the
 * PLAIT_ERR_ARG naming what rank p passed differently. */
uint32_t pcoll_call_sig(const pcoll_args_t *a);
/* The tag of the next collective's messages on comm (counts it): its
 * number and 7 bits of sig, see util.c. */
int pcoll_next_tag(plait_comm_t comm, uint32_t sig);
/* The sig of the dissemination barrier's messages: a hash of their own,
 * never that of sig 0 (internal schedules: the shared area's and the host
 * map's setup), so that a rank's ibarrier against the others' blocking
 * barrier on the area is seen as another kind of call instead of pairing
 * with their setup's messages (PCOLL_BARRIER is 0; no other sig sets bit 23
 * without bit 24). */
#define PCOLL_BARRIER_SIG (1u << 23)
/* The sig for pcoll_next_tag: pcoll_call_sig and, rooted, the root. */
uint32_t pcoll_tag_sig(const pcoll_args_t *a);
/* bcast, reduce, gather, scatter (inline: every call's argument check asks) */
static inline int pcoll_is_rooted(int coll)
{
    return coll == PCOLL_BCAST || coll == PCOLL_REDUCE_C || coll == PCOLL_GATHER ||
           coll == PCOLL_SCATTER;
}
/* reduce, allreduce, reduce_scatter (likewise) */
static inline int pcoll_is_reduction(int coll)
{
    return coll == PCOLL_REDUCE_C || coll == PCOLL_ALLREDUCE || coll == PCOLL_REDUCE_SCATTER;
}
const char *pcoll_dtype_name(plait_dtype_t dt);   /* "PLAIT_FLOAT32" ... */
const char *pcoll_op_name(plait_op_t op);         /* "PLAIT_SUM" ... */
int pcoll_sig_mismatch(const char *fn, int p, uint32_t theirs, uint32_t mine);
/* Tells the other members that call `call` of comm failed here (rc, its
 * message set), where the cause is this rank's own (pt2pt/notice.c). */
void pcoll_fail_tell_locked(ppt_state_t *s, plait_comm_t comm, uint32_t call, int rc);
/* A call refused here (bad arguments: rc, its message set) still counts as
 * the communicator's next call, and the others hear of it; returns rc. */
int  pcoll_refuse(ppt_state_t *s, plait_comm_t comm, int rc);
/* A finished transfer r with rank peer (a receive of want bytes if is_recv):
 * PLAIT_OK, or the collective fn's error, naming the transfer's own cause. */
int pcoll_xfer_check(plait_request_t r, int is_recv, size_t want, int peer, const char *fn);
/* Prints the selection table (for plait_info): one line per rule. */
void pcoll_selection_print(FILE *f);

#endif
