/*
 * shm_small.c -- small collectives of a one-host communicator on a
 * shared-memory area with sequence flags: no pt2pt message on the fast path.
 *
 * Why: a small collective on the schedule engine is several pt2pt messages
 * and each costs a ring slot, a match and a wake-up (~0.45 us per receive);
 * Open MPI's vader pays less per message. Here a call is one store of this
 * rank's contribution and one flag, then loads of the peers' flags and data.
 *
 * The area (one POSIX shm segment per communicator, made lazily at the first
 * eligible blocking call, which every rank reaches as collectives start in
 * the same order; world's in plait_init): a control line (futex bell,
 * sleeper count), two lines per rank (its read word, step 4 below), then
 * per rank two lanes of slots: 32 small ones (AREA_SMALL_DATA bytes) for
 * one-exchange calls that small, and D big ones (4..32, see AREA_DEPTH_MAX)
 * for the rest; call s takes slot[s % depth] of its lane (area_lane, the
 * same choice on every rank that passed the same arguments). A
 * slot is a 32-byte header (seq: the call it holds, 0 before the first;
 * bytes and root of that call, so ranks that passed different counts or
 * roots fail with PLAIT_ERR_ARG) followed by the data, cache-line aligned. Comm rank 0
 * creates the segment (name /plait-<tag>-a<ctx>-<pid>-<random>: plaitrun's
 * cleanup removes the /plait-<tag>- prefix), sends the name with a bcast on
 * the collective context, every rank maps it, an allreduce (MIN) of the
 * "mapped" flags tells every rank whether all did (else all fall back to
 * messages, for good), and rank 0 unlinks the name, so nothing stays in
 * /dev/shm even under mpirun.
 *
 * Call s (area calls only are counted: a non-blocking collective takes
 * an area call only where the area already exists and the call is one
 * exchange, see "Non-blocking calls" below; every rank decides alike):
 *   1. reuse: wait until every rank has finished reading call s - depth of
 *      the lane (whatever lane the calls between took), as the
 *      read level in the header of its newest slots shows (written with
 *      each publish), or its read word (done, in its lines of the control
 *      block) where it keeps one (in batches, see area_reuse);
 *   2. write header and data into own slot[s % D], release-store seq = s;
 *   3. acquire-load the peers' slot[s % D].seq until it is >= s (all peers,
 *      the root, or none, by collective), check their headers, read, compute;
 *   4. read level = s (also where the call read nothing, or failed); a rank
 *      that has queued a non-blocking call also release-stores done = s.
 * Invariant: a rank writes slot[s % D] of a lane (D its depth) only after
 * every rank has finished reading call s - D: the slot's previous tenant is
 * that call or an earlier one. Reads finish in call order, so the read
 * level is one number; a wait for an earlier call's slots (step 1) looks in
 * both lanes, since either holding that call or a later one shows it
 * published (publishes go in call order). Conversely a reader of call s finds the
 * peer's slot[s % D] still holding s: the peer cannot publish s + D before
 * the reader has read s. (A slot may already hold a later call than one
 * awaited in step 3: hence ">=", in wrap-around arithmetic.) Every rank
 * publishes in every area call, even one with nothing to contribute (a bcast
 * non-root; only a non-blocking call that failed, whose peers were told,
 * publishes nothing), so step 1 cannot wait for ever; it
 * is skipped while an earlier look already saw every rank that far
 * (A->seen). D > 2 lets a root of bcast, scatter (and non-roots of reduce,
 * gather) run up to D - 1 calls ahead, as eager messages would, instead of
 * in lockstep.
 *
 * Non-blocking calls (area_op_t, the second half of this file). Until
 * session 38 only blocking calls used the area, and a non-blocking
 * allreduce of 8 B on 8 ranks cost 3.2 us on messages against 0.65 for the
 * blocking one. Collectives start in the same order on every rank, so a
 * non-blocking call (everything above but area_allreduce_pieces, whose
 * peers read its input in place) takes its area call numbers at its start,
 * like a blocking one: one, or two for the two-phase reductions. A start
 * must never wait (a root may run ahead of a rank blocked in a receive from
 * it), so where step 1 does not hold yet the publish waits in the
 * communicator's queue of calls, and the progress passes publish it once it
 * holds (area_nb_advance); a two-phase call's second publish also waits
 * there for its first call's inputs. Calls publish in number order and
 * finish in call order, which keeps done one number. A blocking area
 * call first finishes every queued one (area_drain), waiting as its own
 * steps do. The area itself is made only where every rank may wait (its
 * setup is collective): world's in plait_init, another communicator's by
 * its first blocking eligible collective (plait_barrier is one), and until
 * then that communicator's non-blocking calls use messages.
 * As a side effect the two forms of one collective meet on the area where
 * both use it; MPI never promises that, and neither does USER-GUIDE.
 *
 * Results: every reduction over the slots runs in rank order 0..n-1, lower
 * rank the left operand (own input copied there too: in place works), then
 * pcoll_scale for AVG (float16 AVG's inputs go into the slots scaled
 * instead: area_publish): the same operations on every rank, bitwise
 * identical.
 * (area_allreduce_pieces reads its inputs directly, in turn order; each
 * element is still reduced by one rank only.)
 * allreduce: every rank reduces the whole vector (one phase: for a few KiB
 * the second synchronisation of a reduce-scatter + allgather costs more than
 * n - 1 reductions), above AREA_AR_ONE_PHASE each rank reduces one slice and
 * publishes it in a second area call (area_2phase); reduce: the root does (in
 * slices above the same size, area_2phase too); reduce_scatter: each
 * its block of everyone's n blocks; alltoall: block r of every peer's slot;
 * allgather / gather / bcast / scatter: copies.
 *
 * Waiting: spin PLAIT_WAIT_SPIN_US (0 when oversubscribed), yield until
 * PLAIT_WAIT_YIELD_US, then sleep on the area's bell (publishers ring it when
 * a rank sleeps), with the library lock dropped as in ppt_wait_locked; pt2pt
 * progress keeps running, dead peers are noticed every 100 ms, PLAIT_TIMEOUT
 * fails the call naming the ranks that did not arrive.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coll/pcoll.h"

#define AREA_LINE      64
/* Slots per rank D: a power of two (seq wraps) from 4 to 32, as many as fit
 * in AREA_RANK_BYTES. Depth is how far a bcast / scatter root may run ahead
 * of its slowest reader; it matters most when oversubscribed (4 ranks on 2
 * cores, 8 B bcast: D = 8 about 1.1 us a call, D = 32 about 0.8 us, where
 * messages take 1.7-2.8 us). */
#define AREA_DEPTH_MIN 4
#define AREA_DEPTH_MAX 32
/* The small lane: besides the D slots of PLAIT_COLL_SHM_SMALL bytes, every
 * rank has AREA_SMALL_DEPTH slots of AREA_SMALL_DATA bytes, packed, which
 * one-exchange calls of at most that many bytes use (area_lane). With the
 * default 128 KiB slots D is 4, and a bcast root then runs at most 3 calls
 * ahead of its readers. 16-core machine, bound, median us (docs/PERFORMANCE.md
 * session 42), D = 4 x 128 KiB against D = 32 x 256 B slots: 2-rank bcast
 * 8 B 0.24 / 0.17 (Open MPI 0.16-0.20), 8-rank bcast 8 B 0.39 / 0.23. Deep
 * slots of 4 KiB cost 512 B calls (8 ranks 0.66 -> 0.78), hence a lane. */
#define AREA_SMALL_DEPTH 32
#define AREA_SMALL_DATA  256
#define AREA_SMALL_STRIDE AREA_STRIDE(AREA_SMALL_DATA)
#define AREA_RANK_BYTES ((size_t)512 << 10)
#define AREA_SLOT_MAX  ((size_t)1 << 20)     /* per slot, whatever PLAIT_COLL_SHM_SMALL says */
#define AREA_ALIVE_NS  100000000ull          /* look for dead peers every 100 ms of waiting */
#define AREA_SLEEP_US  2000                  /* one bell sleep; publishers wake it earlier */
/* Two ranks: above this the direct exchange of coll/pair.c is used where it
 * applies. On 2 cores the area won clearly up to 64 B, tied from 256 B to
 * 1 KiB and lost 5-20% from 2 KiB; on the 16-core machine (not
 * oversubscribed, bound to cores) it won at 1-8 KiB for every collective and
 * at 16 KiB for allgather and reduce_scatter, where pair.c fell behind Open
 * MPI (allgather 16-32 KiB), and lost 10-30% at 16-64 KiB for allreduce,
 * alltoall and bcast. */
#define AREA_PAIR_MAX  ((size_t)16 << 10)
/* Allreduce reduces the whole vector on every rank while b * (n - 2) stays
 * below this; above, slices (two area calls). 16-core machine: one phase at 8
 * ranks x 16 KiB was slower than Open MPI, and at 4 ranks x 64 KiB. */
#define AREA_AR_ONE_PHASE ((size_t)16 << 10)
/* The same for reduce, where only the root reduces the whole vector: 16-core
 * machine, 4 ranks x 32 KiB one phase 7.0 us, two 10.1; 8 ranks x 32 KiB one
 * 17.4, two 13.0; 4 ranks x 128 KiB two 27.4 (docs/PERFORMANCE.md, session
 * 19). */
#define AREA_RE_ONE_PHASE ((size_t)128 << 10)
/* The block collectives (allgather, alltoall, gather, scatter) copy each
 * block twice through the area (into a slot, out of it) where the direct
 * reads of coll/shm.c copy it once, in a system call per block: above
 * AREA_BLOCKS_ANY bytes per rank they use the area only while blocks are at
 * most AREA_BLOCK_MAX. 16-core machine, 128 KiB per rank, area against
 * direct reads (median us, docs/PERFORMANCE.md session 19): allgather 8
 * ranks (16 KiB blocks) 27.6 / 42.1, 4 ranks (32 KiB) 24.3 / 19.6, 2 ranks
 * (64 KiB) 15.4 / 9.9; alltoall 8 ranks 37.0 / 48.3. The reductions and
 * bcast gained at 128 KiB at every rank count. */
#define AREA_PIECES_MAX_RANKS 256        /* area_allreduce_pieces: input addresses on the stack */
#define AREA_BLOCKS_ANY ((size_t)64 << 10)
#define AREA_BLOCK_MAX  ((size_t)16 << 10)

enum { AREA_UNSET = 0, AREA_READY, AREA_NONE };
enum { AREA_WAIT_ALL = -1, AREA_WAIT_NONE = -2 };

typedef struct {
    _Atomic uint32_t seq;      /* the area call this slot holds */
    int32_t          root;     /* that call's root (0 if unrooted) */
    uint64_t         bytes;    /* bytes this rank published (its count, scaled per collective) */
    uint32_t         sig;      /* collective, datatype and operator (pcoll_call_sig) */
    uint32_t         call;     /* the communicator's collective call it belongs to */
    _Atomic uint32_t done;     /* the publisher's read word when it published (area_reuse_ready) */
    uint32_t         rsv;
} area_slot_t;                 /* data follows, at AREA_HDR */
#define AREA_HDR sizeof(area_slot_t)
/* Bytes of a slot of data bytes with its header, a multiple of AREA_LINE. */
#define AREA_STRIDE(data) ((AREA_HDR + (data) + AREA_LINE - 1) & ~(size_t)(AREA_LINE - 1))
_Static_assert(sizeof(area_slot_t) == 32, "area slot header");

typedef struct {
    _Atomic uint32_t bell;     /* futex word sleepers wait on */
    _Atomic uint32_t sleepers; /* ranks asleep on bell */
} area_ctl_t;

/* A rank's line of the control block. */
typedef struct {
    _Atomic uint32_t done;     /* every area call up to this one is read here (step 4) */
} area_rank_t;

struct area_op;

typedef struct pcoll_area {
    int      state;            /* AREA_* */
    char    *base;             /* the mapping (AREA_READY) */
    size_t   len;
    size_t   slots_at;         /* offset of the small lane: the control block's size */
    size_t   big_at;           /* offset of the slots of PLAIT_COLL_SHM_SMALL bytes */
    size_t   slot;             /* data bytes per slot (of those) */
    size_t   sstride;          /* bytes per slot with header, multiple of AREA_LINE */
    uint32_t depth;            /* slots per rank, D (of those) */
    uint32_t seq;              /* area calls so far */
    uint32_t seen;             /* every rank is known to have read up to this call */
    uint32_t read;             /* this rank has read every area call up to this one */
    int      queued_any;       /* this rank has queued a non-blocking call: it keeps its
                                * read word (area_read_done) */
    char    *scratch;          /* a slot's worth for direct reads (area_allreduce_pieces) */
    int      direct;           /* every peer's memory can be read directly (CMA) */
    struct area_op *qhead, *qtail;   /* non-blocking calls not finished, in call order */
    uint32_t nops;             /* non-blocking calls not freed yet (queued, or their
                                * request not freed): they keep the area mapped after
                                * its communicator is freed (area_op_free) */
    int      orphan;           /* its communicator is freed: the last op unmaps it */
    struct area_op *spare;     /* the last freed op, for the next start (a start-and-wait
                                * loop then allocates only its request) */
} pcoll_area_t;

/* What the segment's creator tells the others. */
typedef struct {
    char     name[120];
    uint64_t len, slot;
    uint32_t depth;
    int32_t  ok;
} area_card_t;

typedef struct {
    ppt_state_t  *s;
    plait_comm_t  comm;
    pcoll_area_t *A;
    const char   *fn;
    uint32_t      sig;         /* pcoll_call_sig of the call: every rank's must match */
    uint32_t      call;        /* comm->coll_calls: so must this */
    int           seq;         /* the number it took in comm->coll_seq (a message under it
                                * comes from a rank that went another way) */
    int           lane;        /* AREA_LANE_*: the slots it publishes in (area_lane) */
} area_call_t;

enum { AREA_LANE_BIG = 0, AREA_LANE_SMALL };

/* One exchange of an area call: what this rank publishes, and whose slots
 * it then waits for (area_plan / area_exchange). */
typedef struct {
    const void *src;           /* copied into the slot (len bytes); NULL with len 0 */
    size_t      len;
    size_t      bytes;         /* the header's byte count, compared between ranks */
    int         root;
    int         from;          /* AREA_WAIT_ALL, AREA_WAIT_NONE or a rank */
    int         input;         /* src is a reduction's input: scaled into the slot
                                * where pcoll_prescaled (float16 AVG) */
} area_plan_t;

/* ------------------------------------------------------------- the area */

static area_ctl_t *area_ctl(const pcoll_area_t *A) { return (area_ctl_t *)A->base; }

static uint32_t area_depth(const pcoll_area_t *A, int lane)
{
    return lane == AREA_LANE_SMALL ? AREA_SMALL_DEPTH : A->depth;
}

/* Rank's slot of call s in a lane: slot[s % D] of that lane. */
static area_slot_t *area_lane_slot(const pcoll_area_t *A, int lane, int rank, uint32_t s)
{
    uint32_t d = area_depth(A, lane);
    size_t i = (size_t)rank * d + (s & (d - 1));
    if (lane == AREA_LANE_SMALL)
        return (area_slot_t *)(A->base + A->slots_at + i * AREA_SMALL_STRIDE);
    return (area_slot_t *)(A->base + A->big_at + i * A->sstride);
}

/* Rank's slot of call s, a call that publishes in c's lane. */
static area_slot_t *area_slot(const area_call_t *c, int rank, uint32_t s)
{
    return area_lane_slot(c->A, c->lane, rank, s);
}

static _Atomic uint32_t *area_done(const pcoll_area_t *A, int rank)
{
    return &((area_rank_t *)(A->base + AREA_LINE * (1 + 2 * (size_t)rank)))->done;
}

static char *area_data(area_slot_t *sl) { return (char *)sl + AREA_HDR; }

static void area_unmap(pcoll_area_t *A)
{
    if (A->base)
        munmap(A->base, A->len);
    A->base = NULL;
}

static void area_free_now(pcoll_area_t *A)
{
    area_unmap(A);
    free(A->scratch);
    free(A->spare);
    free(A);
}

/* The communicator is freed: the area goes with it, or with the last
 * non-blocking call still queued on it (area_op_finish). */
static void area_free(void *p)
{
    pcoll_area_t *A = p;
    if (A && A->nops)
        A->orphan = 1;
    else if (A)
        area_free_now(A);
}

/* Bytes a rank writes into its slot for this call (the same on every rank:
 * the eligibility decision must be). */
static size_t area_bytes(const pcoll_args_t *a, int n)
{
    size_t b = a->count * a->es;
    switch (a->coll) {
    case PCOLL_REDUCE_SCATTER: case PCOLL_ALLTOALL: case PCOLL_SCATTER:
    case PCOLL_ALLGATHER:   /* the whole result: every rank copies all n blocks out */
        return b * (size_t)n;
    case PCOLL_BARRIER:
        return 0;
    default:
        return b;
    }
}


/* 1 when a block collective's blocks are too large for the area to win. */
static int area_blocks_too_large(const pcoll_args_t *a, size_t bytes)
{
    switch (a->coll) {
    case PCOLL_ALLGATHER: case PCOLL_ALLTOALL: case PCOLL_GATHER: case PCOLL_SCATTER:
        return bytes > AREA_BLOCKS_ANY && a->count * a->es > AREA_BLOCK_MAX;
    default:
        return 0;
    }
}

/* A blocking allreduce above PLAIT_COLL_SHM_SMALL that area_allreduce_pieces
 * takes: every rank's slice within one slot (one piece) and 8 ranks or
 * more, or 4 or more with slices of at most half a slot; direct reads
 * possible. 16-core machine, against coll/shm.c's schedule, median us of
 * two calls (docs/PERFORMANCE.md session 19): 8 ranks 256 KiB 163.4 / 143.7
 * -> 117.4 / 109.6, 1 MiB 549.4 / 516.6 -> 467.4 / 461.1; 4 ranks 256 KiB
 * 99.7 / 86.8 -> 84.9 / 79.5, but 512 KiB (128 KiB slices) 171.8 / 150.5 ->
 * 170.0 / 165.3. With two pieces or more it lost (4 ranks 1 MiB 325.8 ->
 * 370.4, 8 ranks 2 MiB 928 -> 998: a synchronisation per piece), and with 2
 * ranks at every size. */
static int area_pieces_fit(ppt_state_t *s, plait_comm_t comm, const pcoll_args_t *a,
                           size_t bytes)
{
    size_t slot = s->cfg.coll_shm_small < AREA_SLOT_MAX ? s->cfg.coll_shm_small : AREA_SLOT_MAX;
    size_t slice = pcoll_blk_cnt(a->count, comm->size, 0) * a->es;
    int n = comm->size;
    return a->coll == PCOLL_ALLREDUCE && bytes > s->cfg.coll_shm_small && n >= 4 &&
           n <= AREA_PIECES_MAX_RANKS && slice <= (n >= 8 ? slot : slot / 2) &&
           pcoll_shm_usable(s, comm);
}

/* Every peer reached through the shm transport: on this host (no CMA needed). */
static int area_reachable(ppt_state_t *s, plait_comm_t comm)
{
    if (!s->shm.ops)
        return 0;
    for (int i = 0; i < comm->size; i++)
        if (i != comm->rank && s->tl_of[comm->world_of[i]] != &s->shm)
            return 0;
    return 1;
}

/* Blocking bcast (root 0) / allreduce on the schedule engine, for the setup. */
static int area_sched_locked(ppt_state_t *s, plait_comm_t comm, pcoll_args_t *a, const char *fn)
{
    pcoll_sched_t sc;
    struct plait_request st;
    plait_request_t r = NULL;
    int rc;
    a->es = plait_dtype_size(a->dt);
    pcoll_sched_init(&sc, s, comm);
    pcoll_sched_set_reduce(&sc, a->dt, a->op);
    rc = a->coll == PCOLL_BCAST ? pcoll_bcast_binomial(&sc, a) : pcoll_allreduce_rd(&sc, a);
    if (rc != PLAIT_OK) {
        comm->coll_seq++;       /* the other ranks' numbering goes on */
        pcoll_sched_free(&sc);
        return prt_err(rc, "%s: no memory for the shared-memory area's setup", fn);
    }
    if ((rc = pcoll_sched_start_locked(&sc, fn, &st, &r)) != PLAIT_OK)
        return rc;
    return pcoll_wait_free_locked(s, r, fn);
}

/* Rank 0: creates, sizes (fallocate: no SIGBUS later on a full /dev/shm)
 * and maps the segment; card->ok says whether it worked. */
static void area_create(ppt_state_t *s, plait_comm_t comm, pcoll_area_t *A, area_card_t *card)
{
    uint32_t salt;
    int fd;
    if (getrandom(&salt, sizeof salt, 0) != (ssize_t)sizeof salt)
        salt = (uint32_t)prt_now_ns();
    snprintf(card->name, sizeof card->name, "/plait-%s-a%llx-%d-%08x", s->job.tag,
             (unsigned long long)comm->ctx, (int)getpid(), (unsigned)salt);
    card->len = A->len;
    card->slot = A->slot;
    card->depth = A->depth;
    fd = shm_open(card->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
        prt_log(PRT_LOG_DEBUG, "collective area: shm_open(%s): %s", card->name, strerror(errno));
        return;
    }
    if (ftruncate(fd, (off_t)A->len) != 0 || posix_fallocate(fd, 0, (off_t)A->len) != 0) {
        prt_log(PRT_LOG_DEBUG, "collective area: cannot size %s to %zu bytes", card->name, A->len);
        close(fd);
        shm_unlink(card->name);
        return;
    }
    A->base = mmap(NULL, A->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (A->base == MAP_FAILED) {
        A->base = NULL;
        shm_unlink(card->name);
        return;
    }
    card->ok = 1;
}

/* The other ranks: map rank 0's segment. */
static int area_attach(pcoll_area_t *A, const area_card_t *card, int n)
{
    struct stat st;
    int fd;
    A->len = card->len;
    A->slot = card->slot;
    A->depth = card->depth;
    A->sstride = AREA_STRIDE(A->slot);
    if (!A->depth || (A->depth & (A->depth - 1)) ||   /* (the same geometry) */
        A->len != A->big_at + (size_t)n * A->depth * A->sstride)
        return 0;
    if ((fd = shm_open(card->name, O_RDWR, 0)) < 0)
        return 0;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size != A->len) {
        close(fd);
        return 0;
    }
    A->base = mmap(NULL, A->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (A->base == MAP_FAILED) {
        A->base = NULL;
        return 0;
    }
    return 1;
}

/* The collective setup (see the header comment). A failure to map anywhere
 * leaves A in AREA_NONE on every rank; an error of the setup's own messages
 * (timeout, dead peer) is returned. */
static int area_setup_locked(ppt_state_t *s, plait_comm_t comm, pcoll_area_t *A, const char *fn)
{
    area_card_t card;
    int32_t ok, all = 0;
    int rc;
    size_t slot = s->cfg.coll_shm_small < AREA_SLOT_MAX ? s->cfg.coll_shm_small : AREA_SLOT_MAX;
    memset(&card, 0, sizeof card);
    A->state = AREA_NONE;
    /* the bell's line, then a read word per two lines (no two ranks' words
     * in one pair of lines, which the CPU may fetch together) */
    A->slots_at = AREA_LINE * (1 + 2 * (size_t)comm->size);
    A->big_at = A->slots_at + (size_t)comm->size * AREA_SMALL_DEPTH * AREA_SMALL_STRIDE;
    if (comm->rank == 0) {
        A->slot = (slot + AREA_LINE - 1) & ~(size_t)(AREA_LINE - 1);
        A->sstride = AREA_STRIDE(A->slot);
        A->depth = AREA_DEPTH_MIN;
        while (A->depth < AREA_DEPTH_MAX && 2 * A->depth * A->sstride <= AREA_RANK_BYTES)
            A->depth *= 2;
        A->len = A->big_at + (size_t)comm->size * A->depth * A->sstride;
        area_create(s, comm, A, &card);
    }
    rc = area_sched_locked(s, comm, &(pcoll_args_t){.coll = PCOLL_BCAST, .sbuf = &card,
                           .rbuf = &card, .count = sizeof card, .dt = PLAIT_BYTE}, fn);
    if (rc != PLAIT_OK) {      /* (a peer died, a timeout): leave nothing in /dev/shm */
        if (comm->rank == 0 && card.ok)
            shm_unlink(card.name);
        area_unmap(A);
        return rc;
    }
    ok = comm->rank == 0 ? card.ok : card.ok && area_attach(A, &card, comm->size);
    A->direct = pcoll_shm_usable(s, comm);
    if (ok && A->direct && !(A->scratch = malloc(A->slot)))
        ok = 0;
    rc = area_sched_locked(s, comm, &(pcoll_args_t){.coll = PCOLL_ALLREDUCE, .sbuf = &ok,
                           .rbuf = &all, .count = 1, .dt = PLAIT_INT32, .op = PLAIT_MIN}, fn);
    if (comm->rank == 0 && card.ok)
        shm_unlink(card.name);     /* every rank has opened it or given up */
    if (rc == PLAIT_OK && all == 1) {
        A->state = AREA_READY;
        return PLAIT_OK;
    }
    area_unmap(A);
    if (rc == PLAIT_OK)
        prt_log(PRT_LOG_DEBUG, "collective area of communicator 0x%llx: not every rank could map "
                "it; small collectives use messages", (unsigned long long)comm->ctx);
    return rc;
}

/* The call's own tests, the area's state aside: 1 when it may run there
 * (bytes: what a rank publishes; large: area_allreduce_pieces). The same
 * on every rank, for blocking and non-blocking calls alike. */
static int area_fits(ppt_state_t *s, plait_comm_t comm, const pcoll_args_t *a, size_t *bytes,
                     int *large)
{
    if (!s->cfg.coll_shm_small || comm->size < 2 || a->coll == PCOLL_ALLTOALLV ||
        pcoll_forced(&s->cfg, a->coll) != PCOLL_AUTO)
        return 0;
    *bytes = area_bytes(a, comm->size);
    *large = area_pieces_fit(s, comm, a, *bytes);
    if (!*large && (*bytes > s->cfg.coll_shm_small || *bytes > AREA_SLOT_MAX ||
                    area_blocks_too_large(a, *bytes)))
        return 0;
    return comm->size != 2 || *bytes <= AREA_PAIR_MAX || !pcoll_pair_eligible(a);
}

/* comm's area, set up now if it has none yet (a collective step: every
 * rank comes here at the same call). NULL where it has none for good
 * (AREA_NONE: not one host, or a rank could not map it) or on an error of
 * the setup, *rc then set. */
static pcoll_area_t *area_get_locked(ppt_state_t *s, plait_comm_t comm, const char *fn, int *rc)
{
    pcoll_area_t *A = comm->area;
    *rc = PLAIT_OK;
    if (A && A->state == AREA_NONE)
        return NULL;
    if (!A) {
        if (!(A = calloc(1, sizeof *A))) {
            *rc = prt_err(PLAIT_ERR_NOMEM, "%s: no memory for a collective area", fn);
            return NULL;
        }
        comm->area = A;
        comm->area_free = area_free;
        if (!area_reachable(s, comm)) {
            A->state = AREA_NONE;
            return NULL;
        }
    }
    if (A->state != AREA_READY && (*rc = area_setup_locked(s, comm, A, fn)) != PLAIT_OK)
        return NULL;
    return A->state == AREA_READY ? A : NULL;
}

int pcoll_area_use_locked(ppt_state_t *s, plait_comm_t comm, const pcoll_args_t *a,
                          const char *fn, int *rc)
{
    pcoll_area_t *A;
    size_t bytes;
    int large;
    *rc = PLAIT_OK;
    if (!area_fits(s, comm, a, &bytes, &large))
        return 0;
    if (!(A = area_get_locked(s, comm, fn, rc)))
        return *rc != PLAIT_OK;
    return bytes <= A->slot || (large && A->direct);
}

int pcoll_area_ready(plait_comm_t comm)
{
    const pcoll_area_t *A = comm->area;
    return A && A->state == AREA_READY;
}

int pcoll_area_prepare_locked(ppt_state_t *s, plait_comm_t comm, const char *fn)
{
    int rc = PLAIT_OK;
    if (s->cfg.coll_shm_small && comm->size >= 2)
        area_get_locked(s, comm, fn, &rc);
    return rc;
}

/* ------------------------------------------------------------- waiting */

/* What a wait waits for: peers' slots holding the waiting call (step 3:
 * in its lane only), their read words past a call (step 1, area_reuse), or
 * their slots holding an earlier call (area_reuse: in either lane). */
enum { AREA_ON_SLOTS = 0, AREA_ON_READ, AREA_ON_PAST };

/* Rank p has published call want: a slot of want's, in either lane, holds
 * want or a later call (a rank publishes in call order, so a later one
 * there says as much; a wait for c's own call finds it in c's lane, looked
 * at first). That slot, or NULL. */
static inline area_slot_t *area_holding(const area_call_t *c, int p, uint32_t want)
{
    for (int i = 0; i < 2; i++) {
        area_slot_t *sl = area_lane_slot(c->A, c->lane ^ i, p, want);
        if ((int32_t)(atomic_load_explicit(&sl->seq, memory_order_acquire) - want) >= 0)
            return sl;
    }
    return NULL;
}

/* Rank p has read call want: its read word says so, or the header of a
 * slot it published since (what it had read when it published want + 1 or
 * later; a rank that never queued a non-blocking call leaves its word
 * alone). */
static inline int area_read_past(const area_call_t *c, int p, uint32_t want)
{
    uint32_t v = atomic_load_explicit(area_done(c->A, p), memory_order_acquire);
    const area_slot_t *sl;
    if ((int32_t)(v - want) >= 0)
        return 1;
    if (!(sl = area_holding(c, p, want + 1)))
        return 0;
    v = atomic_load_explicit(&sl->done, memory_order_relaxed);
    return (int32_t)(v - want) >= 0;
}

/* Rank p has published call want, c's own, in c's lane. (Only there: a
 * look at the other lane too, in every poll, cost the 2-rank allreduce of 8
 * B about 10%, s42e; area_alive finds a rank that took the other lane.) */
static inline int area_arrived(const area_call_t *c, int p, uint32_t want)
{
    uint32_t v = atomic_load_explicit(&area_slot(c, p, want)->seq, memory_order_acquire);
    return (int32_t)(v - want) >= 0;
}

static inline int area_reached(const area_call_t *c, int p, uint32_t want, int on)
{
    if (on == AREA_ON_SLOTS)
        return area_arrived(c, p, want);
    return on == AREA_ON_READ ? area_read_past(c, p, want) : area_holding(c, p, want) != NULL;
}

/* Rank p published call want (c's own) in the other lane. Only that call
 * there counts, not a later one: a rank whose call failed publishes
 * nothing of it and goes on (its notice tells the others). */
static inline int area_other_lane(const area_call_t *c, int p, uint32_t want)
{
    const area_slot_t *sl = area_lane_slot(c->A, c->lane ^ 1, p, want);
    return atomic_load_explicit(&sl->seq, memory_order_acquire) == want;
}

/* Rank q published call c's part in the other lane: its count puts it on
 * the other side of AREA_SMALL_DATA. */
static int area_lane_error(const area_call_t *c, int q)
{
    return prt_err(PLAIT_ERR_ARG, "%s: rank %d's data for this call is not where this rank's "
                   "count puts it in the shared-memory area (calls of up to %d bytes per rank "
                   "have slots of their own): ranks passed different counts", c->fn, q,
                   AREA_SMALL_DATA);
}

/* First rank from k on (only that one if only >= 0) that has not reached
 * want, or n. */
static inline int area_missing(const area_call_t *c, uint32_t want, int only, int k, int on)
{
    int n = c->comm->size;
    if (only >= 0)
        return area_reached(c, only, want, on) ? n : only;
    while (k < n && (k == c->comm->rank || area_reached(c, k, want, on)))
        k++;
    return k;
}

/* The ranks from k on (or only) that have not reached want, as "1, 3". */
static void area_who(const area_call_t *c, uint32_t want, int only, int k, int on, char *who,
                     size_t cap)
{
    size_t len = 0;
    int listed = 0;
    who[0] = '\0';
    for (int p = k; p < c->comm->size && len + 16 < cap; p = only >= 0 ? c->comm->size : p + 1) {
        if (p == c->comm->rank || area_reached(c, p, want, on))
            continue;
        len += (size_t)snprintf(who + len, cap - len, "%s%d", listed++ ? ", " : "", p);
    }
}

static int area_timeout(const area_call_t *c, uint32_t want, int only, int k, int on,
                        double waited)
{
    char who[200], cl[32];
    area_who(c, want, only, k, on, who, sizeof who);
    if (c->comm == c->s->world)
        snprintf(cl, sizeof cl, "world");
    else
        snprintf(cl, sizeof cl, "0x%llx", (unsigned long long)c->comm->ctx);
    return prt_err(PLAIT_ERR_TIMEOUT, "%s: timed out after %.1f s (PLAIT_TIMEOUT) waiting for "
                   "rank(s) %s of communicator %s (%d ranks) in its shared-memory collective "
                   "area (%s call %u): did every rank make the same collective calls?", c->fn,
                   waited, who, cl, c->comm->size,
                   on == AREA_ON_READ ? "to finish reading" : "to publish its part of",
                   (unsigned)want);
}

/* PLAIT_ERR_PEER (with message) if a rank still waited for has died;
 * PLAIT_ERR_ARG if a peer failed this call, runs it over messages, or
 * answered a probe that it finished the call without publishing its part
 * (waits on slots only: a read word behind says nothing of this call).
 * probe: first ask each rank still waited for where it is (pt2pt/probe.c;
 * no tag: an area call sends none); its answer shows in a later look. */
static int area_alive(const area_call_t *c, uint32_t want, int only, int k, int on, int probe)
{
    char cause[256];
    int rc;
    if ((rc = ppt_coll_noticed(c->comm, c->call)) == PLAIT_OK)     /* a peer failed this call, */
        rc = ppt_coll_diverged(c->comm, c->seq, 1);                 /* or runs it over messages */
    for (int p = k; rc == PLAIT_OK && p < c->comm->size; p = only >= 0 ? c->comm->size : p + 1) {
        if (p == c->comm->rank || area_reached(c, p, want, on))
            continue;
        if (on == AREA_ON_SLOTS && area_other_lane(c, p, want))
            return area_lane_error(c, p);
        if (probe && on != AREA_ON_READ)
            ppt_coll_probe_locked(c->s, c->comm, p, c->call, 0);
        if (on != AREA_ON_READ && (rc = ppt_coll_passed(c->comm, p, c->call, 0)) != PLAIT_OK)
            break;
        if (ppt_peer_alive(c->s, c->comm->world_of[p]) != PLAIT_OK) {
            snprintf(cause, sizeof cause, "%s", prt_err_text());
            return prt_err(PLAIT_ERR_PEER, "%s: %s while waiting for rank %d in the "
                           "shared-memory collective area", c->fn, cause, p);
        }
    }
    if (rc == PLAIT_OK)
        return PLAIT_OK;
    snprintf(cause, sizeof cause, "%s", prt_err_text());
    return prt_err(rc, "%s: %s", c->fn, cause);
}

/* Sleeps on the bell unless the awaited flags are there (checked after
 * announcing the sleep: a publisher either sees the sleeper or is seen). */
static void area_sleep(const area_call_t *c, uint32_t want, int only, int k, int on)
{
    area_ctl_t *ctl = area_ctl(c->A);
    uint32_t w = atomic_load(&ctl->bell);
    atomic_fetch_add(&ctl->sleepers, 1);
    if (area_missing(c, want, only, k, on) < c->comm->size)
        prt_futex_wait((volatile uint32_t *)&ctl->bell, w, AREA_SLEEP_US);
    atomic_fetch_sub(&ctl->sleepers, 1);
}

/* Wakes the ranks asleep on the bell (after a publish or a read word). */
static inline void area_ring(const pcoll_area_t *A)
{
    area_ctl_t *ctl = area_ctl(A);
    if (atomic_load_explicit(&ctl->sleepers, memory_order_relaxed)) {
        atomic_fetch_add(&ctl->bell, 1);
        prt_futex_wake((volatile uint32_t *)&ctl->bell);
    }
}

/* Waits until every peer (only < 0) or rank only has reached want; rank k
 * is the first that had not at the caller's look. */
static int area_wait_loop(const area_call_t *c, uint32_t want, int only, int on, int k)
{
    ppt_state_t *s = c->s;
    int n = c->comm->size, stage = 0, rc;
    uint32_t iter = 0;
    uint64_t now, last_alive = 0;
    int probed = 0;
    prt_backoff_t b;
    for (;; iter++) {
        if (iter > 0 && (k = area_missing(c, want, only, k, on)) >= n)
            return PLAIT_OK;
        if (iter == 0) {
            prt_backoff_start(&b, s->cfg.timeout_s);
            last_alive = b.start_ns;
            stage = prt_backoff_stage(&b, b.start_ns, s->cfg.spin_us, s->cfg.yield_us);
        }
        if (stage > 0 || (iter & 7) == 7) {   /* spinning: every 8th poll only */
            ppt_progress_locked(s);
            now = prt_now_ns();
            if (now - last_alive > AREA_ALIVE_NS) {
                int probe = !probed && now - b.start_ns > PCOLL_PROBE_NS && c->call;
                last_alive = now;
                probed |= probe;   /* (once per wait) */
                if ((rc = area_alive(c, want, only, k, on, probe)) != PLAIT_OK)
                    return rc;
            }
            if (prt_backoff_expired(&b, now))
                return area_timeout(c, want, only, k, on, (double)(now - b.start_ns) * 1e-9);
            stage = prt_backoff_stage(&b, now, s->cfg.spin_us, s->cfg.yield_us);
        }
        pthread_mutex_unlock(&s->lock);
        if (stage == 0)
            prt_cpu_relax();
        else if (stage == 1)
            sched_yield();
        else
            area_sleep(c, want, only, k, on);
        pthread_mutex_lock(&s->lock);
    }
}

/* A wait the first look ends counts no waiter, as pt2pt's
 * ppt_wait_for_locked: the count's locked add waits for this rank's just
 * published stores to drain, which a reader whose data is there already
 * need not (8-rank reduce of 512 B 1.2 -> 0.8-0.9 us, docs/PERFORMANCE.md
 * session 42; the 4-rank allreduce, whose first look seldom finds its data,
 * lost 2-11%). The loop then begins with its clock read, not a second look
 * at once (polling the publisher's line back to back slows its stores,
 * session 41). */
static inline int area_wait(const area_call_t *c, uint32_t want, int only, int on)
{
    int rc, k = area_missing(c, want, only, 0, on);
    if (k >= c->comm->size)
        return PLAIT_OK;
    ppt_waiting(c->s, 1);
    rc = area_wait_loop(c, want, only, on, k);
    ppt_waiting(c->s, -1);
    return rc;
}

/* ------------------------------------------------------------- one call */

/* How far rank p has read, as far as a look shows: the read word it wrote
 * into the newest of its slots of calls s - 1, s - D/2 and s - D + 1 that
 * it has published, where that already says need (a blocking rank read x -
 * 1 before it published x; the first is a line this rank's wait of call s -
 * 1 has just loaded, when it waited for p); else its read word itself (kept
 * only by a rank that has queued a non-blocking call, on a line of its own:
 * a look at it costs a cache miss; a header's value is old when p published
 * long ago and read on). */
static uint32_t area_read_seen(const area_call_t *c, int p, uint32_t s, uint32_t need)
{
    uint32_t at[3] = {s - 1, s - area_depth(c->A, c->lane) / 2, need + 1};
    const area_slot_t *sl;
    for (int i = 0; i < 3; i++)
        if ((sl = area_holding(c, p, at[i]))) {
            uint32_t v = atomic_load_explicit(&sl->done, memory_order_relaxed);
            if ((int32_t)(v - need) >= 0)
                return v;
            break;   /* (an older slot's is older still) */
        }
    return atomic_load_explicit(area_done(c->A, p), memory_order_acquire);
}

/* Step 1 of the header comment without waiting: 1 when every rank has read
 * call s - D (this one too: its own non-blocking calls may be unread). A
 * look records the least read in A->seen, so the next calls skip it while
 * they need no more: with every rank keeping up (read at s - 2 when they
 * published s - 1) that is the next D - 2. */
static inline int area_reuse_ready(const area_call_t *c, uint32_t s)
{
    pcoll_area_t *A = c->A;
    uint32_t need = s - area_depth(A, c->lane), low = A->read;
    if ((int32_t)(A->seen - need) >= 0)
        return 1;
    for (int p = 0; p < c->comm->size && (int32_t)(low - need) >= 0; p++) {
        uint32_t v = p == c->comm->rank ? low : area_read_seen(c, p, s, need);
        if ((int32_t)(v - low) < 0)
            low = v;
    }
    if ((int32_t)(low - need) < 0)
        return 0;
    A->seen = low;
    return 1;
}

/* Step 1, waiting: where a rank lags, until every peer has published s -
 * D/2 (more than step 1 needs): a root that got D - 1 calls ahead then runs
 * D/2 - 1 calls before it looks again, instead of trailing its slowest
 * reader call by call (one sched_yield per call when oversubscribed). The
 * peers get there without this rank: they need only its calls up to s - 1,
 * all published (a blocking call drains the queue first, area_drain, and a
 * queued call waits here only from there). A blocking peer has read s - D/2
 * - 1 by then; one with calls of its own still queued may not have, and is
 * then waited for by its read word. (Slots, not read words, while it can:
 * a first version had every rank write its read word each call and a root
 * spin on them, each look costing the writer a cache miss: the 8-rank
 * bcast of 8 B went from 0.34 to 0.47 us.) */
static inline int area_reuse(const area_call_t *c, uint32_t s)
{
    uint32_t half = s - area_depth(c->A, c->lane) / 2;
    int rc;
    if (area_reuse_ready(c, s))
        return PLAIT_OK;
    if ((rc = area_wait(c, half, AREA_WAIT_ALL, AREA_ON_PAST)) != PLAIT_OK)
        return rc;
    if (area_reuse_ready(c, s))
        return PLAIT_OK;
    if ((rc = area_wait(c, half - 1, AREA_WAIT_ALL, AREA_ON_READ)) != PLAIT_OK)
        return rc;
    c->A->seen = half - 1;
    return PLAIT_OK;
}

/* Step 2 (step 1 holds): header and data of plan p into this rank's slot
 * of call s, then the flag. */
static inline void area_publish(const area_call_t *c, const pcoll_args_t *a, uint32_t s,
                                const area_plan_t *p)
{
    area_slot_t *mine = area_slot(c, c->comm->rank, s);
    mine->bytes = p->bytes;
    mine->root = p->root;
    mine->sig = c->sig;
    mine->call = c->call;
    atomic_store_explicit(&mine->done, c->A->read, memory_order_relaxed);
    if (p->input && pcoll_prescaled(a->dt, a->op))
        pcoll_take_input(area_data(mine), p->src, p->len / a->es, a->dt, a->op, c->comm->size);
    else if (p->len)
        memcpy(area_data(mine), p->src, p->len);
    /* A release store: no fence draining the stores (the data's cache lines
     * still travel while this rank goes on to wait). Without a fence the
     * sleepers check may pass the store and miss a rank about to sleep: that
     * rank then wakes at its bell timeout (AREA_SLEEP_US), in a wait that
     * already lasted PLAIT_WAIT_YIELD_US. */
    atomic_store_explicit(&mine->seq, s, memory_order_release);
    area_ring(c->A);
}

/* Step 4: every area call up to s is read by rank (this one). The shared
 * word only once this rank has queued a non-blocking call here: until then
 * every publish's header tells the others as much (it read x - 1 before it
 * published x), and a word written every call costs each look at it a cache
 * miss on both sides (8 ranks, bcast of 8 B: 0.32 -> 0.39-0.47 us). */
static inline void area_read_done(pcoll_area_t *A, int rank, uint32_t s)
{
    A->read = s;
    if (A->queued_any) {
        atomic_store_explicit(area_done(A, rank), s, memory_order_release);
        area_ring(A);
    }
}

/* The bytes of a slot whose rank refused its call (pcoll_area_refuse_locked):
 * its reason follows, NUL-terminated within the lane's data. */
#define AREA_REFUSED UINT64_MAX

/* Rank q refused call s (its slot says so): its reason, quoted as a
 * peer's notice is (pt2pt/notice.c), read bounded and printable only. */
static int area_refused(const area_call_t *c, int q, const area_slot_t *sl)
{
    char why[AREA_SMALL_DATA], cb[112];
    const char *d = (const char *)sl + AREA_HDR;
    size_t n = 0;
    for (; n < sizeof why - 1 && d[n]; n++)
        why[n] = d[n] < 0x20 || d[n] > 0x7e ? '?' : d[n];
    why[n] = '\0';
    c->comm->coll_told = c->call;   /* (a peer's refusal: not echoed, as a notice is not) */
    return prt_err(PLAIT_ERR_ARG, "%s: rank %d of communicator %s failed this call (its "
                   "collective call %u there): \"%s\"", c->fn, q,
                   ppt_comm_label(c->comm, cb, sizeof cb), (unsigned)c->call, why);
}

/* Step 3's checks: the headers of the slots of call s that plan p reads
 * against this rank's. */
static inline int area_check(const area_call_t *c, uint32_t s, const area_plan_t *p)
{
    int n = c->comm->size, from = p->from;
    uint32_t low = c->A->read;
    for (int q = from >= 0 ? from : 0; from != AREA_WAIT_NONE && q < n;
         q = from >= 0 ? n : q + 1) {
        const area_slot_t *sl = area_slot(c, q, s);
        uint32_t rd = atomic_load_explicit(&sl->done, memory_order_relaxed);
        if (atomic_load_explicit(&sl->seq, memory_order_relaxed) != s)
            return area_lane_error(c, q);   /* (a later call in that slot let the wait
                                             * pass; see area_arrived) */
        low = (int32_t)(rd - low) < 0 && q != c->comm->rank ? rd : low;
        /* Area calls are numbered by the area alone; a rank that made a
         * collective call without it (a count of 0: nothing to publish)
         * while the others used it is a call behind there: the slot then
         * holds another call's data. */
        if (sl->call != c->call)
            return prt_err(PLAIT_ERR_ARG, "%s: rank %d's data in the shared-memory area is of its "
                           "collective call %u on this communicator, this rank is at call %u: "
                           "an earlier collective's arguments differed between ranks (e.g. a "
                           "count of 0 on some ranks only, which they cannot see)", c->fn, q,
                           (unsigned)sl->call, (unsigned)c->call);
        if (sl->bytes == AREA_REFUSED)
            return area_refused(c, q, sl);
        if (sl->sig != c->sig)
            return pcoll_sig_mismatch(c->fn, q, sl->sig, c->sig);
        if (sl->root != p->root)
            return prt_err(PLAIT_ERR_ARG, "%s: rank %d passed root %d where this rank passed %d: "
                           "ranks passed different roots", c->fn, q, (int)sl->root, p->root);
        if (sl->bytes != p->bytes)
            return prt_err(PLAIT_ERR_ARG, "%s: rank %d contributes %llu bytes where this rank "
                           "contributes %zu: ranks passed different counts", c->fn, q,
                           (unsigned long long)sl->bytes, p->bytes);
    }
    /* Every rank's slot headers are in cache now: how far each had read
     * when it published is step 1's answer for the next calls, free. */
    if (from == AREA_WAIT_ALL && (int32_t)(low - c->A->seen) > 0)
        c->A->seen = low;
    return PLAIT_OK;
}

/* Steps 1-3 of the header comment for plan p as call s (a is needed only
 * for p->input). */
static inline int area_exchange(const area_call_t *c, const pcoll_args_t *a, uint32_t s,
                                const area_plan_t *p)
{
    int rc;
    if ((rc = area_reuse(c, s)) != PLAIT_OK)
        return rc;
    area_publish(c, a, s, p);
    if (p->from == AREA_WAIT_NONE)
        return PLAIT_OK;
    if ((rc = area_wait(c, s, p->from, AREA_ON_SLOTS)) != PLAIT_OK)
        return rc;
    return area_check(c, s, p);
}

/* A plan of raw bytes (area_allreduce_pieces' steps). */
#define AREA_RAW(src_, len_, bytes_, root_, from_) \
    (&(area_plan_t){.src = (src_), .len = (len_), .bytes = (bytes_), .root = (root_), \
                    .from = (from_)})


/* dst = x_0 op x_1 op ... op x_{n-1} (left to right) over cnt elements,
 * x_p = rank p's slot data + off; AVG divides by n at the end. */
static void area_reduce_n(const area_call_t *c, const pcoll_args_t *a, uint32_t s, void *dst,
                          size_t off, size_t cnt)
{
    int n = c->comm->size;
    plait_op_t op = pcoll_red_op(a->dt, a->op);
    if (cnt == 0)
        return;
    pcoll_reduce(dst, area_data(area_slot(c, 0, s)) + off,
                 area_data(area_slot(c, 1, s)) + off, cnt, a->dt, op);
    for (int p = 2; p < n; p++)
        pcoll_reduce(dst, dst, area_data(area_slot(c, p, s)) + off, cnt, a->dt, op);
    if (pcoll_divides(a->dt, a->op))
        pcoll_scale(dst, cnt, a->dt, n);
}

static void area_reduce(const area_call_t *c, const pcoll_args_t *a, uint32_t s, void *dst,
                        size_t off)
{
    area_reduce_n(c, a, s, dst, off, a->count);
}

/* Piece [lo, lo + pe) of every rank's slice (pcoll_blk_off / pcoll_blk_cnt,
 * elements of the slice, clipped to it) from its slot of call s into R,
 * but rank skip's (-1: none). */
static void area_copy_pieces(const area_call_t *c, const pcoll_args_t *a, uint32_t s, char *R,
                             size_t lo, size_t pe, int skip)
{
    int n = c->comm->size;
    size_t es = a->es;
    for (int p = 0; p < n; p++) {
        size_t off = pcoll_blk_off(a->count, n, p), cnt = pcoll_blk_cnt(a->count, n, p);
        if (p != skip && cnt > lo)
            memcpy(R + (off + lo) * es, area_data(area_slot(c, p, s)),
                   (cnt - lo < pe ? cnt - lo : pe) * es);
    }
}

/* Every other rank's whole slice from its slot of call s into R. */
static void area_copy_slices(const area_call_t *c, const pcoll_args_t *a, uint32_t s, char *R)
{
    area_copy_pieces(c, a, s, R, 0, SIZE_MAX, c->comm->rank);
}

/*
 * Two-phase reductions, for vectors where n reductions of the whole vector
 * by every rank (allreduce) or by the root (reduce) cost more than one more
 * synchronisation. Call s publishes the inputs; rank r reduces slice r
 * (pcoll_blk_off / pcoll_blk_cnt) over all slots in rank order; call s + 1
 * publishes the slices:
 * - allreduce: the slice is reduced into the recvbuf (in place is safe: the
 *   input is in the slot) and published from there; every rank copies the
 *   other slices out. Each element is reduced once, in the same order as
 *   the one-phase path: every rank holds bitwise the same bytes.
 * - reduce: a non-root reduces straight into its slot of call s + 1 (hence
 *   that slot's reuse first), the root into its recvbuf, and only the root
 *   waits for the slices and copies them out. 16-core machine, 8 ranks,
 *   128 KiB: the one-phase reduce took 64.0-71.5 us where the two-phase
 *   allreduce took 56.3; in slices 39.7 (docs/PERFORMANCE.md, session 19).
 * The steps are shared by the blocking call (area_2phase) and the
 * non-blocking one (area_op_publish, from the queue's passes).
 */

/* Step 0's plan: the input, waited for from every rank (each reduces a
 * slice). */
static void area_inputs_plan(const pcoll_args_t *a, area_plan_t *p)
{
    size_t b = a->count * a->es;
    *p = (area_plan_t){a->sbuf, b, b, a->coll == PCOLL_REDUCE_C ? a->root : 0, AREA_WAIT_ALL,
                       1};
}

/* Step 1, once every input of call s is in and the slot of call s + 1 is
 * free: this rank's slice reduced, and the plan that publishes it. */
static void area_slice_reduce(const area_call_t *c, const pcoll_args_t *a, uint32_t s,
                              area_plan_t *p)
{
    int n = c->comm->size, r = c->comm->rank;
    size_t b = a->count * a->es, es = a->es;
    size_t off = pcoll_blk_off(a->count, n, r) * es, cnt = pcoll_blk_cnt(a->count, n, r);
    char *R = a->rbuf;
    if (a->coll == PCOLL_ALLREDUCE) {
        area_reduce_n(c, a, s, R + off, off, cnt);
        *p = (area_plan_t){R + off, cnt * es, b, 0, AREA_WAIT_ALL, 0};
        return;
    }
    area_reduce_n(c, a, s, r == a->root ? R + off : area_data(area_slot(c, r, s + 1)), off,
                  cnt);
    *p = (area_plan_t){NULL, 0, b, a->root, r == a->root ? AREA_WAIT_ALL : AREA_WAIT_NONE, 0};
}

/* The result from the slices of call s2 (every rank's for allreduce, the
 * root's for reduce). */
static void area_slices_finish(const area_call_t *c, const pcoll_args_t *a, uint32_t s2)
{
    if (a->coll == PCOLL_ALLREDUCE || c->comm->rank == a->root)
        area_copy_slices(c, a, s2, a->rbuf);
}

/* A blocking two-phase reduction as calls s and s + 1. */
static int area_2phase(const area_call_t *c, const pcoll_args_t *a, uint32_t s)
{
    area_plan_t p;
    int rc;
    area_inputs_plan(a, &p);
    if ((rc = area_exchange(c, a, s, &p)) != PLAIT_OK)
        return rc;
    ++c->A->seq;
    if ((rc = area_reuse(c, s + 1)) != PLAIT_OK)   /* (before writing into the slot) */
        return rc;
    area_slice_reduce(c, a, s, &p);
    if ((rc = area_exchange(c, a, s + 1, &p)) != PLAIT_OK)
        return rc;
    area_slices_finish(c, a, s + 1);
    return PLAIT_OK;
}

/* Piece [lo, lo + pe) of this rank's slice (elements of the slice, clipped
 * to it), reduced over every rank's input (in[p]: its address) in turn
 * order (pcoll_reduce_turn) into this rank's slot of call sj; AVG divides
 * there. */
static int area_piece_reduce(const area_call_t *c, const pcoll_args_t *a, const uint64_t *in,
                             uint32_t sj, size_t lo, size_t pe)
{
    int n = c->comm->size, r = c->comm->rank, rc;
    size_t es = a->es, cnt = pcoll_blk_cnt(a->count, n, r), m, at;
    char *dst = area_data(area_slot(c, r, sj));
    if (cnt <= lo)
        return PLAIT_OK;
    m = cnt - lo < pe ? cnt - lo : pe;
    at = (pcoll_blk_off(a->count, n, r) + lo) * es;
    for (int k = 0; k < n; k++) {
        int p = pcoll_reduce_turn(c->comm, k);
        if ((rc = pcoll_reduce_step(c->s, c->comm, a, p, k == 0,
                                    p == r ? (const char *)a->sbuf + at : NULL, in[p] + at, dst,
                                    c->A->scratch, m)) != PLAIT_OK)
            return rc;
    }
    if (pcoll_divides(a->dt, a->op))
        pcoll_scale(dst, m, a->dt, n);
    return PLAIT_OK;
}

/*
 * Allreduce of more than a slot per rank, blocking, every rank's memory
 * readable directly (CMA). The inputs are read where they are, as coll/shm.c
 * does, but each rank's reduced slice goes to the others through its slots,
 * a slot at a time, copied out by plain loads where coll/shm.c reads every
 * slice through the system call a second time. Call s publishes each
 * rank's input address; call s + 1 + j carries piece j of every slice: rank
 * r reduces piece j of slice r over the ranks' inputs in its turn order
 * (pcoll_reduce_turn: rank r + 1 first) straight into its slot, publishes it, and
 * copies every rank's piece j into its recvbuf. Each element is reduced once,
 * by one rank: every rank holds bitwise the same bytes. A rank publishes
 * piece j only after reading its part of every input, so after the last
 * call's wait nobody reads an input again, and in place is safe: piece j's
 * bytes are written only once every rank is past reading them.
 */
static int area_allreduce_pieces(const area_call_t *c, const pcoll_args_t *a, uint32_t s)
{
    pcoll_area_t *A = c->A;
    int n = c->comm->size, rc;
    size_t es = a->es, b = a->count * es, pe = A->slot / es;   /* elements per piece */
    size_t npieces = (pcoll_blk_cnt(a->count, n, 0) + pe - 1) / pe;
    uint64_t in[AREA_PIECES_MAX_RANKS], mine = (uint64_t)(uintptr_t)a->sbuf;
    if ((rc = area_exchange(c, a, s, AREA_RAW(&mine, sizeof mine, b, 0, AREA_WAIT_ALL))) !=
        PLAIT_OK)
        return rc;
    for (int p = 0; p < n; p++)
        memcpy(&in[p], area_data(area_slot(c, p, s)), sizeof in[p]);
    for (size_t j = 0; j < npieces; j++) {
        uint32_t sj = ++A->seq;
        if ((rc = area_reuse(c, sj)) != PLAIT_OK ||
            (rc = area_piece_reduce(c, a, in, sj, j * pe, pe)) != PLAIT_OK ||
            (rc = area_exchange(c, a, sj, AREA_RAW(NULL, 0, b, 0, AREA_WAIT_ALL))) != PLAIT_OK)
            return rc;
        area_copy_pieces(c, a, sj, a->rbuf, j * pe, pe, -1);
    }
    return PLAIT_OK;
}

/* 1 when a reduction of b bytes per rank runs in slices (two area calls):
 * when b * (n - 2), the bytes one rank reduces beyond what the slices
 * would leave it, passes limit. */
static int area_two_phase(int n, size_t b, size_t limit)
{
    return n >= 3 && b * (size_t)(n - 2) > limit;
}

/* 1 when the call is one exchange (area_plan / area_finish): every area
 * collective but the two-phase reductions and area_allreduce_pieces. */
static inline int area_one_exchange(const pcoll_area_t *A, int n, const pcoll_args_t *a)
{
    size_t b = a->count * a->es;
    if (a->coll == PCOLL_ALLREDUCE)
        return b <= A->slot && !area_two_phase(n, b, AREA_AR_ONE_PHASE);
    return a->coll != PCOLL_REDUCE_C || !area_two_phase(n, b, AREA_RE_ONE_PHASE);
}

/* The lane of a call: the small one for a one-exchange call of at most
 * AREA_SMALL_DATA bytes per rank (area_bytes, the same on every rank that
 * passed the same arguments). */
static int area_lane(const pcoll_area_t *A, int n, const pcoll_args_t *a)
{
    return area_bytes(a, n) <= AREA_SMALL_DATA && area_one_exchange(A, n, a) ? AREA_LANE_SMALL
                                                                             : AREA_LANE_BIG;
}

/* Call a of comm as its area call: the communicator's call number, and its
 * number in comm->coll_seq, which the caller has taken. */
static area_call_t area_call_of(ppt_state_t *s, plait_comm_t comm, const pcoll_args_t *a,
                                const char *fn)
{
    return (area_call_t){s, comm, comm->area, fn, pcoll_call_sig(a), comm->coll_calls,
                         (int)(comm->coll_seq - 1), area_lane(comm->area, comm->size, a)};
}

/* What this rank publishes in a one-exchange call and whose slots it reads:
 * a root's data (bcast, scatter) or everyone's (the rest; a reduction's
 * input is scaled into the slot where pcoll_prescaled), read by everyone, by
 * the root (reduce, gather) or by the others (bcast, scatter). */
static inline void area_plan(const area_call_t *c, const pcoll_args_t *a, area_plan_t *p)
{
    int n = c->comm->size, r = c->comm->rank, root = a->root;
    size_t b = a->count * a->es, nb = (size_t)n * b;
    const char *S = a->sbuf;
    char *R = a->rbuf;
    *p = (area_plan_t){.bytes = b, .from = AREA_WAIT_ALL};
    switch (a->coll) {
    case PCOLL_BARRIER:
        p->bytes = 0;
        break;
    case PCOLL_BCAST:
        *p = (area_plan_t){r == root ? R : NULL, r == root ? b : 0, b, root,
                           r == root ? AREA_WAIT_NONE : root, 0};
        break;
    case PCOLL_SCATTER:
        *p = (area_plan_t){r == root ? S : NULL, r == root ? nb : 0, nb, root,
                           r == root ? AREA_WAIT_NONE : root, 0};
        break;
    case PCOLL_GATHER:
        *p = (area_plan_t){r == root ? NULL : S, r == root ? 0 : b, b, root,
                           r == root ? AREA_WAIT_ALL : AREA_WAIT_NONE, 0};
        break;
    case PCOLL_REDUCE_C:
        *p = (area_plan_t){S, b, b, root, r == root ? AREA_WAIT_ALL : AREA_WAIT_NONE, 1};
        break;
    case PCOLL_ALLREDUCE:
        *p = (area_plan_t){S, b, b, 0, AREA_WAIT_ALL, 1};
        break;
    case PCOLL_REDUCE_SCATTER:
        *p = (area_plan_t){S, nb, nb, 0, AREA_WAIT_ALL, 1};
        break;
    case PCOLL_ALLGATHER:   /* in place: this rank's block already sits at block r */
        p->src = S == R ? R + (size_t)r * b : S;
        p->len = b;
        break;
    default:                /* PCOLL_ALLTOALL: in place works, the input is in the slot */
        *p = (area_plan_t){S, nb, nb, 0, AREA_WAIT_ALL, 0};
        break;
    }
}

/* The result of a one-exchange call s from the slots it waited for. */
static inline void area_finish(const area_call_t *c, const pcoll_args_t *a, uint32_t s)
{
    int n = c->comm->size, r = c->comm->rank, root = a->root;
    size_t b = a->count * a->es;
    const char *S = a->sbuf;
    char *R = a->rbuf;
    switch (a->coll) {
    case PCOLL_BCAST:
        if (r != root)
            memcpy(R, area_data(area_slot(c, root, s)), b);
        break;
    case PCOLL_SCATTER:
        if (r != root)
            memcpy(R, area_data(area_slot(c, root, s)) + (size_t)r * b, b);
        else if (S != R)
            memcpy(R, S + (size_t)r * b, b);
        break;
    case PCOLL_GATHER:
        for (int p = 0; r == root && p < n; p++)
            if (p != r)
                memcpy(R + (size_t)p * b, area_data(area_slot(c, p, s)), b);
        if (r == root && S != R)
            memcpy(R + (size_t)r * b, S, b);
        break;
    case PCOLL_REDUCE_C:
        if (r == root)
            area_reduce(c, a, s, R, 0);
        break;
    case PCOLL_ALLREDUCE:
        area_reduce(c, a, s, R, 0);
        break;
    case PCOLL_REDUCE_SCATTER:
        area_reduce(c, a, s, R, (size_t)r * b);
        break;
    case PCOLL_ALLGATHER:
        for (int p = 0; p < n; p++)
            if (p != r || S != R)
                memcpy(R + (size_t)p * b, area_data(area_slot(c, p, s)), b);
        break;
    case PCOLL_ALLTOALL:
        for (int p = 0; p < n; p++)
            memcpy(R + (size_t)p * b, area_data(area_slot(c, p, s)) + (size_t)r * b, b);
        break;
    default:                /* PCOLL_BARRIER */
        break;
    }
}

/* A blocking call as area call s (and more, for the multi-exchange ones). */
static int area_call(const area_call_t *c, const pcoll_args_t *a, uint32_t s)
{
    area_plan_t p;
    int rc;
    if (!area_one_exchange(c->A, c->comm->size, a))
        return a->count * a->es > c->A->slot ? area_allreduce_pieces(c, a, s)
                                              : area_2phase(c, a, s);
    area_plan(c, a, &p);
    if ((rc = area_exchange(c, a, s, &p)) == PLAIT_OK)
        area_finish(c, a, s);
    return rc;
}

static int area_drain(const area_call_t *c);

int pcoll_area_run_locked(ppt_state_t *s, plait_comm_t comm, const pcoll_args_t *a,
                          const char *fn)
{
    area_call_t c = area_call_of(s, comm, a, fn);
    int rc;
    if (a->coll == PCOLL_ALLTOALLV || a->coll >= PCOLL_NCOLL)
        return prt_err(PLAIT_ERR_INTERNAL, "%s: no shared-memory area variant", fn);
    if ((rc = area_drain(&c)) != PLAIT_OK)
        return rc;
    rc = area_call(&c, a, ++c.A->seq);
    area_read_done(c.A, comm->rank, c.A->seq);   /* (a failed call reads no more either) */
    return rc;
}

/* ------------------------------------------------------------- non-blocking */

/* A non-blocking call (see "Non-blocking calls" in the header comment):
 * queued on its area from its start until its turn to finish. One exchange,
 * or the two of a two-phase reduction (area_2phase): its second publish
 * needs the first's inputs all in (and reduced), so it is made by a later
 * pass, still in call order. */
typedef struct area_op {
    area_call_t      c;
    pcoll_args_t     a;         /* the caller's arguments: its buffers are read at the
                                 * publish and written from the (last) wait on */
    area_plan_t      p;         /* the plan of its last published exchange */
    uint32_t         s;         /* its (first) area call */
    int              steps;     /* area calls it takes: 1, or 2 (area_2phase) */
    int              published; /* exchanges published (all of them once failed) */
    int              failed;    /* the error a wait's checks found (its request is complete
                                 * then; the call is skipped when its turn comes) */
    int              probed;
    uint64_t         since_ns;  /* the first check that found it holding the queue up */
    plait_request_t  req;       /* NULL once its owner freed it */
    struct area_op  *next;
} area_op_t;

/* The area call of op's last published exchange. */
static inline uint32_t area_op_call(const area_op_t *op)
{
    return op->s + (uint32_t)op->published - 1;
}

/* Its last published exchange's slots are in. */
static int area_op_arrived(const area_op_t *op)
{
    return op->p.from == AREA_WAIT_NONE ||
           area_missing(&op->c, area_op_call(op), op->p.from, 0, AREA_ON_SLOTS) >=
               op->c.comm->size;
}

static void area_op_fail(area_op_t *op, int rc)
{
    op->failed = rc;
    if (op->req) {
        pcoll_fail_tell_locked(op->c.s, op->c.comm, op->c.call, rc);
        ppt_req_complete(op->c.s, op->req, rc);
    }
}

/* An op is freed when both its turn in the queue and its request are
 * over; the area of a freed communicator goes with the last one (not at
 * the pop: a waiter may still sleep on the area's bell then). */
static void area_op_free(area_op_t *op)
{
    pcoll_area_t *A = op->c.A;
    if (!A->spare && !A->orphan)
        A->spare = op;
    else
        free(op);
    if (--A->nops == 0 && A->orphan)
        area_free_now(A);
}

/* The queue's head is read (or failed): results, read word, request. */
static void area_op_finish(area_op_t *op)
{
    pcoll_area_t *A = op->c.A;
    plait_comm_t comm = op->c.comm;
    uint32_t last = op->s + (uint32_t)op->steps - 1;
    int rc = op->failed;
    if (rc == PLAIT_OK && (rc = area_check(&op->c, last, &op->p)) == PLAIT_OK) {
        if (op->steps == 1)
            area_finish(&op->c, &op->a, last);
        else
            area_slices_finish(&op->c, &op->a, last);
    }
    if (!(A->qhead = op->next))
        A->qtail = NULL;
    area_read_done(A, comm->rank, last);
    if (!op->failed && rc != PLAIT_OK)
        area_op_fail(op, rc);
    else if (!op->failed && op->req)   /* (NULL: cancelled, ppt_cancel_locked) */
        ppt_req_complete(op->c.s, op->req, PLAIT_OK);
    atomic_fetch_sub(&comm->refs, 1);   /* (the queue's hold: pcoll_area_start_locked) */
    if (!op->req)
        area_op_free(op);
    else
        op->next = op;   /* (out of the queue: area_op_destroy frees it) */
}

/* What op's next step waits for: call *at's slots, from *from (the inputs
 * of a two-phase call's first exchange, or its last exchange's), when 1;
 * the read levels that free the slot of call *at, when 0 (its next publish). */
static int area_op_stage(const area_op_t *op, uint32_t *at, int *from)
{
    if (op->published < op->steps && (op->published == 0 || area_op_arrived(op))) {
        *at = op->s + (uint32_t)op->published;
        *from = AREA_WAIT_ALL;
        return 0;
    }
    *at = area_op_call(op);
    *from = op->p.from;
    return 1;
}

/* Publishes op's next exchange if it may now (its slot free, and for a
 * two-phase call's second the inputs all in and reduced); 0 if not. */
static int area_op_publish(area_op_t *op)
{
    uint32_t at;
    int from, rc;
    if (op->failed || area_op_stage(op, &at, &from) || !area_reuse_ready(&op->c, at))
        return 0;
    if (op->published == 1) {   /* a two-phase call's slices */
        if ((rc = area_check(&op->c, op->s, &op->p)) != PLAIT_OK) {
            area_op_fail(op, rc);
            return 0;
        }
        area_slice_reduce(&op->c, &op->a, op->s, &op->p);
    }
    area_publish(&op->c, &op->a, at, &op->p);
    op->published++;
    return 1;
}

/* Publishes every queued exchange whose turn has come, in call order, then
 * finishes the head while its last exchange's slots are in. A failed call
 * publishes nothing more (its peers were told) and leaves at its turn.
 * Never waits. */
static void area_nb_advance(pcoll_area_t *A)
{
    area_op_t *op = A->qhead;
    while (op && op->published == op->steps)
        op = op->next;
    for (; op; op = op->next) {
        while (op->published < op->steps && area_op_publish(op))
            ;
        if (op->failed)
            op->published = op->steps;
        else if (op->published < op->steps)
            break;
    }
    while ((op = A->qhead) && (op->failed || (op->published == op->steps && area_op_arrived(op))))
        area_op_finish(op);
}

/* What the queue's head waits for: slots, or the read words that free its
 * next slot; only AREA_WAIT_NONE: nothing. */
static void area_op_waits(const area_op_t *h, uint32_t *want, int *only, int *on)
{
    int from;
    *on = area_op_stage(h, want, &from) ? AREA_ON_SLOTS : AREA_ON_READ;
    *only = *on == AREA_ON_SLOTS ? from : AREA_WAIT_ALL;
    if (*on == AREA_ON_READ)
        *want -= area_depth(h->c.A, h->c.lane);
}

/* A blocking area call finishes the queued ones first, waiting as its own
 * steps do (their checks and timeout under the blocking call's name). */
static int area_drain(const area_call_t *c)
{
    area_op_t *h;
    while ((h = c->A->qhead) != NULL) {
        area_call_t w = h->c;
        uint32_t at;
        int from, rc = PLAIT_OK;
        w.fn = c->fn;
        if (h->failed)
            ;   /* (leaves at once) */
        else if (!area_op_stage(h, &at, &from))
            rc = area_reuse(&w, at);
        else if (from != AREA_WAIT_NONE)
            rc = area_wait(&w, at, from, AREA_ON_SLOTS);
        if (rc != PLAIT_OK)
            return rc;
        area_nb_advance(c->A);
    }
    return PLAIT_OK;
}

/* ------------------------------------------- the request's hooks (pt2pt) */

static int area_op_progress(plait_request_t req)
{
    area_op_t *op = req->coll;
    if (!atomic_load_explicit(&req->done, memory_order_acquire))
        area_nb_advance(op->c.A);
    return atomic_load_explicit(&req->done, memory_order_acquire);
}

/* (lock held) An op completes where area_nb_advance runs, which may be
 * another call's progress or start: its request may still be listed. */
static void area_op_destroy(plait_request_t req)
{
    area_op_t *op = req->coll;
    ppt_coll_unlink_locked(op ? op->c.s : ppt_get(), req);
    req->coll = NULL;
    if (op && op->next == op)    /* out of the queue */
        area_op_free(op);
    else if (op) {               /* failed early or cancelled, its turn still to come:
                                  * area_op_finish frees it (now, if it is the head) */
        op->req = NULL;
        area_nb_advance(op->c.A);
    }
}

/* The checks of a wait (every 100 ms), on the call holding the queue up:
 * a dead rank (PLAIT_ERR_PEER, the request stays), a peer's notice, a
 * divergence or a probe's answer (that call fails; the waited one too if it
 * is that one). */
static int area_op_check(plait_request_t req)
{
    area_op_t *op = req->coll, *h;
    uint32_t want;
    int only, on, probe, rc;
    uint64_t now = prt_now_ns();
    if (!op || atomic_load_explicit(&req->done, memory_order_acquire) || !(h = op->c.A->qhead))
        return PLAIT_OK;
    area_op_waits(h, &want, &only, &on);
    if (h->failed || only == AREA_WAIT_NONE)
        return PLAIT_OK;
    if (!h->since_ns)
        h->since_ns = now;
    probe = !h->probed && now - h->since_ns > PCOLL_PROBE_NS && h->c.call;
    h->probed |= probe;
    rc = area_alive(&h->c, want, only, 0, on, probe);
    if (rc == PLAIT_OK || rc == PLAIT_ERR_PEER)
        return rc;
    area_op_fail(h, rc);
    return h == op ? rc : PLAIT_OK;
}

/* Whom the call holding the queue up waits for, for a timeout's message. */
static void area_op_who(plait_request_t req, char *out, size_t len)
{
    area_op_t *op = req->coll, *h = op ? op->c.A->qhead : NULL;
    uint32_t want;
    int only, on;
    char who[200];
    out[0] = '\0';
    if (!h)
        return;
    area_op_waits(h, &want, &only, &on);
    if (only == AREA_WAIT_NONE)
        return;
    area_who(&h->c, want, only, 0, on, who, sizeof who);
    snprintf(out, len, "rank(s) %s %s area call %u in the shared-memory collective area", who,
             on == AREA_ON_READ ? "to finish reading" : "to publish their part of",
             (unsigned)want);
}

/* A wait's sleep (lock held; dropped while asleep): on the area's bell,
 * which publishes and read words ring. */
static void area_op_sleep(plait_request_t req)
{
    area_op_t *op = req->coll, *h = op ? op->c.A->qhead : NULL;
    ppt_state_t *s = op ? op->c.s : ppt_get();
    area_call_t w = {0};
    uint32_t want = 0;
    int only = AREA_WAIT_NONE, on = AREA_ON_SLOTS;
    if (h && !atomic_load_explicit(&req->done, memory_order_acquire)) {
        w = h->c;   /* (a copy: h may leave the queue while this sleeps) */
        w.comm = op->c.comm;
        area_op_waits(h, &want, &only, &on);
    }
    pthread_mutex_unlock(&s->lock);
    if (only == AREA_WAIT_NONE)
        sched_yield();
    else
        area_sleep(&w, want, only, 0, on);
    pthread_mutex_lock(&s->lock);
}

/* --------------------------------------------------------- starting one */

int pcoll_area_nb_use_locked(ppt_state_t *s, plait_comm_t comm, const pcoll_args_t *a)
{
    const pcoll_area_t *A = comm->area;
    size_t bytes;
    int large;
    return A && A->state == AREA_READY && area_fits(s, comm, a, &bytes, &large) && !large &&
           bytes <= A->slot;   /* (an allreduce beyond a slot: area_allreduce_pieces) */
}

/* A zeroed op: the area's spare (the last one freed), or a new one; NULL
 * without memory. */
static area_op_t *area_op_alloc(pcoll_area_t *A)
{
    area_op_t *op = A->spare ? memset(A->spare, 0, sizeof *op) : calloc(1, sizeof *op);
    A->spare = NULL;
    return op;
}

/* Queues op (numbered, its request set or NULL) behind the others. */
static void area_op_queue(pcoll_area_t *A, plait_comm_t comm, area_op_t *op)
{
    atomic_fetch_add(&comm->refs, 1);   /* the queue's hold (area_op_finish drops it) */
    if (A->qtail)
        A->qtail->next = op;
    else
        A->qhead = op;
    A->qtail = op;
    A->nops++;
    if (!A->queued_any) {   /* from now on the read word is kept (area_read_done) */
        A->queued_any = 1;
        atomic_store_explicit(area_done(A, comm->rank), A->read, memory_order_release);
    }
}

int pcoll_area_start_locked(ppt_state_t *s, plait_comm_t comm, const pcoll_args_t *a,
                            const char *fn, plait_request_t *out)
{
    pcoll_area_t *A = comm->area;
    area_op_t *op = area_op_alloc(A);
    plait_request_t req = op ? ppt_req_new(PPT_REQ_COLL, comm, NULL) : NULL;
    int steps = area_one_exchange(A, comm->size, a) ? 1 : 2;
    uint32_t seq = A->seq + 1;
    A->seq += (uint32_t)steps;   /* (taken even without memory: the numbering goes on) */
    if (!req) {
        free(op);
        return prt_err(PLAIT_ERR_NOMEM, "%s: no memory for its request", fn);
    }
    op->c = area_call_of(s, comm, a, fn);
    op->a = *a;
    op->s = seq;
    op->steps = steps;
    op->req = req;
    if (steps == 1)
        area_plan(&op->c, &op->a, &op->p);
    else
        area_inputs_plan(&op->a, &op->p);
    area_op_queue(A, comm, op);
    req->coll = op;
    req->what = fn;
    req->peer = PLAIT_ANY_SOURCE;
    req->tag = PLAIT_ANY_TAG;
    req->progress = area_op_progress;
    req->destroy = area_op_destroy;
    req->check_peers = area_op_check;
    req->wait_peers = area_op_who;
    req->sleep = area_op_sleep;
    req->call = comm->coll_calls;
    area_nb_advance(A);
    if (!atomic_load_explicit(&req->done, memory_order_acquire))
        pcoll_listed_locked(s, req);
    *out = req;
    return PLAIT_OK;
}

/* --------------------------------------------------------- refusing one */

/* The others' calls publish and wait (their waits fail on this rank's
 * notice, or pass where they never read this rank's slot: a gather's
 * non-roots); a blocking one that fails takes one area call however many
 * it would have made (its first exchange waits for every rank), a
 * non-blocking one as many as it would have made (pcoll_area_start_locked).
 * This rank takes the same numbers and reads them, in call order: at once
 * with nothing queued, else as a failed op without a request, which leaves
 * at its turn. A blocking call finishes the queued ones first, as its run
 * would have. */
void pcoll_area_skip_locked(ppt_state_t *s, plait_comm_t comm, const pcoll_args_t *a, int nb)
{
    pcoll_area_t *A = comm->area;
    area_call_t c = area_call_of(s, comm, a, "a refused collective");
    int steps = nb && !area_one_exchange(A, comm->size, a) ? 2 : 1;
    area_op_t *op;
    if (!nb)
        (void)area_drain(&c);   /* (a failure here is the next call's to find) */
    if (!A->qhead) {
        A->seq += (uint32_t)steps;
        area_read_done(A, comm->rank, A->seq);
        return;
    }
    if (!(op = area_op_alloc(A))) {
        A->seq += (uint32_t)steps;   /* (the numbering goes on; read when the next call reads) */
        return;
    }
    op->c = c;
    op->a = *a;
    op->s = A->seq + 1;
    op->steps = op->published = steps;
    op->failed = PLAIT_ERR_ARG;
    A->seq += (uint32_t)steps;
    area_op_queue(A, comm, op);
    area_nb_advance(A);
}

/* A call this rank refused for a buffer alone on a communicator whose area
 * the call itself set up (coll/api.c coll_refuse_in_step): a notice could
 * reach a peer still in the setup's last messages and end the setup there
 * only, leaving the area ready on some ranks and none on others. So the
 * refusal goes through the area instead: this rank publishes its slot of
 * the call marked AREA_REFUSED with its reason, which a peer reading it
 * quotes (area_check); a peer that does not read it (a gather's non-root)
 * finishes the call. One area call, as the others' failing or finishing
 * one-exchange or first exchange takes. */
void pcoll_area_refuse_locked(ppt_state_t *s, plait_comm_t comm, const pcoll_args_t *a,
                              const char *why)
{
    pcoll_area_t *A = comm->area;
    area_call_t c = area_call_of(s, comm, a, "a refused collective");
    uint32_t at = A->seq + 1;
    char text[AREA_SMALL_DATA];   /* (either lane's data holds it whole, NUL included) */
    area_plan_t p = {.src = text, .bytes = AREA_REFUSED, .root = a->root, .from = AREA_WAIT_NONE};
    A->seq = at;
    if (area_drain(&c) != PLAIT_OK || area_reuse(&c, at) != PLAIT_OK) {
        area_read_done(A, comm->rank, at);   /* (the peers fail on their own waits) */
        return;
    }
    snprintf(text, sizeof text, "%s", why);
    p.len = strlen(text) + 1;
    area_publish(&c, a, at, &p);
    area_read_done(A, comm->rank, at);
}
