/*
 * api.c -- the public collective calls (barrier aside): argument checks, the
 * algorithm choice, and the blocking / non-blocking entry points, which share
 * one path: check, build the chosen schedule, start it; a blocking call then
 * waits for it. A call whose arguments fail the checks starts nothing.
 */
#include "config.h"

#include <stdint.h>

#include "coll/pcoll.h"

/* Blocks of count elements each collective lays out in a buffer. */
static int nblocks(int coll, int n)
{
    switch (coll) {
    case PCOLL_ALLGATHER: case PCOLL_REDUCE_SCATTER: case PCOLL_ALLTOALL:
    case PCOLL_GATHER: case PCOLL_SCATTER:
        return n;
    default:
        return 1;
    }
}

/* Which buffers this rank must pass (count > 0). */
static void bufs_needed(const pcoll_args_t *a, int rank, int *need_s, int *need_r)
{
    int at_root = rank == a->root;
    *need_s = a->coll != PCOLL_BCAST && (a->coll != PCOLL_SCATTER || at_root);
    *need_r = (a->coll != PCOLL_REDUCE_C && a->coll != PCOLL_GATHER) || at_root;
}

static int check_alltoallv(const char *fn, const pcoll_args_t *a, int n, int r)
{
    int any_s = 0, any_r = 0;
    if (!a->v->scounts || !a->v->sdispls || !a->v->rcounts || !a->v->rdispls)
        return prt_err(PLAIT_ERR_ARG, "%s: %s is NULL", fn,
                       !a->v->scounts ? "sendcounts" : !a->v->sdispls ? "sdispls"
                       : !a->v->rcounts ? "recvcounts" : "rdispls");
    for (int i = 0; i < n; i++) {
        size_t end;   /* of each block, in elements and then bytes */
        if (__builtin_add_overflow(a->v->sdispls[i], a->v->scounts[i], &end) ||
            !prt_buf_bytes(end, a->es, 1, &end))
            return prt_err(PLAIT_ERR_ARG, "%s: sdispls[%d] + sendcounts[%d] is larger than "
                           "any buffer (a negative count?)", fn, i, i);
        if (__builtin_add_overflow(a->v->rdispls[i], a->v->rcounts[i], &end) ||
            !prt_buf_bytes(end, a->es, 1, &end))
            return prt_err(PLAIT_ERR_ARG, "%s: rdispls[%d] + recvcounts[%d] is larger than "
                           "any buffer (a negative count?)", fn, i, i);
        any_s |= a->v->scounts[i] != 0;
        any_r |= a->v->rcounts[i] != 0;
    }
    if (a->v->scounts[r] != a->v->rcounts[r])
        return prt_err(PLAIT_ERR_ARG, "%s: sendcounts[%d] = %zu but recvcounts[%d] = %zu (this "
                       "rank's block to itself)", fn, r, a->v->scounts[r], r, a->v->rcounts[r]);
    if ((any_s && !a->sbuf) || (any_r && !a->rbuf))
        return prt_err(PLAIT_ERR_ARG, "%s: %s is NULL with non-zero counts", fn,
                       any_s && !a->sbuf ? "sendbuf" : "recvbuf");
    return PLAIT_OK;
}

/* coll_check's return for a refusal of a buffer alone (a root's NULL
 * recvbuf, say; PLAIT_ERR_ARG's message set): every other argument passed,
 * so the others' calls take the path this rank would have taken
 * (coll_refuse_in_step). Distinct from PLAIT_ERR_ARG only inside this file. */
#define COLL_BUF_REFUSED 1

static int coll_check(const char *fn, plait_comm_t comm, pcoll_args_t *a)
{
    const char *why;
    int n = comm->size, need_s, need_r, reduces = pcoll_is_reduction(a->coll);
    if ((a->es = plait_dtype_size(a->dt)) == 0)
        return prt_err(PLAIT_ERR_ARG, "%s: dt %d is not a plait_dtype_t", fn, (int)a->dt);
    if (reduces && (unsigned)a->op > PLAIT_AVG)
        return prt_err(PLAIT_ERR_ARG, "%s: op %d is not a plait_op_t", fn, (int)a->op);
    if (reduces && !pcoll_op_valid(a->dt, a->op, &why))
        return prt_err(PLAIT_ERR_ARG, "%s: op %s (%d) with dt %s: %s", fn, pcoll_op_name(a->op),
                       (int)a->op, pcoll_dtype_name(a->dt), why);
    if (pcoll_is_rooted(a->coll) && (a->root < 0 || a->root >= n))
        return prt_err(PLAIT_ERR_ARG, "%s: root %d is out of range for a communicator of %d "
                       "ranks", fn, a->root, n);
    if (a->coll == PCOLL_ALLTOALLV)
        return check_alltoallv(fn, a, n, comm->rank);
    /* multiplications, not divisions: a 64-bit divide costs tens of cycles,
     * which showed in the time of a count-0 call */
    size_t bytes;
    if (!prt_buf_bytes(a->count, a->es, (size_t)nblocks(a->coll, n), &bytes))
        return prt_err(PLAIT_ERR_ARG, "%s: count %zu is larger than any buffer (a negative "
                       "count?)", fn, a->count);
    bufs_needed(a, comm->rank, &need_s, &need_r);
    if (a->count && need_s && !a->sbuf) {
        prt_err(PLAIT_ERR_ARG, "%s: sendbuf is NULL with count %zu", fn, a->count);
        return COLL_BUF_REFUSED;
    }
    if (a->count && need_r && !a->rbuf) {
        prt_err(PLAIT_ERR_ARG, "%s: %s is NULL with count %zu", fn,
                a->coll == PCOLL_BCAST ? "buf" : "recvbuf", a->count);
        return COLL_BUF_REFUSED;
    }
    return PLAIT_OK;
}

static int coll_build(pcoll_sched_t *sc, const pcoll_args_t *a, int algo)
{
    switch (a->coll) {
    case PCOLL_ALLREDUCE:
        return algo == PCOLL_AR_RING ? pcoll_allreduce_ring(sc, a)
             : algo == PCOLL_AR_RABENSEIFNER ? pcoll_allreduce_rabenseifner(sc, a)
             : algo == PCOLL_AR_SHM ? pcoll_allreduce_shm(sc, a)
             : algo == PCOLL_AR_TWO_LEVEL ? pcoll_allreduce_two_level(sc, a)
             : pcoll_allreduce_rd(sc, a);
    case PCOLL_ALLGATHER:
        return algo == PCOLL_AG_RD ? pcoll_allgather_rd(sc, a)
             : algo == PCOLL_AG_BRUCK ? pcoll_allgather_bruck(sc, a)
             : algo == PCOLL_AG_SHM ? pcoll_allgather_shm(sc, a)
             : algo == PCOLL_AG_TWO_LEVEL ? pcoll_allgather_two_level(sc, a)
             : pcoll_allgather_ring(sc, a);
    case PCOLL_REDUCE_SCATTER:
        return algo == PCOLL_RS_HALVING ? pcoll_reduce_scatter_halving(sc, a)
             : algo == PCOLL_RS_SHM ? pcoll_reduce_scatter_shm(sc, a)
             : algo == PCOLL_RS_TWO_LEVEL ? pcoll_reduce_scatter_two_level(sc, a)
             : pcoll_reduce_scatter_ring(sc, a);
    case PCOLL_BCAST:
        return algo == PCOLL_BC_SCATTER_ALLGATHER ? pcoll_bcast_scatter_allgather(sc, a)
             : algo == PCOLL_BC_CHAIN ? pcoll_bcast_chain(sc, a)
             : algo == PCOLL_BC_SHM ? pcoll_bcast_shm(sc, a)
             : pcoll_bcast_binomial(sc, a);
    case PCOLL_REDUCE_C:
        return algo == PCOLL_RE_RABENSEIFNER ? pcoll_reduce_rabenseifner(sc, a)
             : algo == PCOLL_RE_SHM ? pcoll_reduce_shm(sc, a)
             : pcoll_reduce_binomial(sc, a);
    case PCOLL_ALLTOALL:
        return algo == PCOLL_AA_BRUCK ? pcoll_alltoall_bruck(sc, a)
             : algo == PCOLL_AA_SCATTERED ? pcoll_alltoall_scattered(sc, a)
             : algo == PCOLL_AA_SHM ? pcoll_alltoall_shm(sc, a)
             : pcoll_alltoall_pairwise(sc, a);
    case PCOLL_ALLTOALLV:
        return algo == PCOLL_AA_PAIRWISE ? pcoll_alltoallv_pairwise(sc, a)
             : pcoll_alltoallv_scattered(sc, a);
    case PCOLL_GATHER:
        return pcoll_gather_binomial(sc, a);
    case PCOLL_SCATTER:
        return pcoll_scatter_binomial(sc, a);
    default:
        return PLAIT_ERR_INTERNAL;
    }
}

/* Makes the call a SUM from tmp (len bytes), the input (sendbuf) scaled
 * by 1/size; the result lands in recvbuf as asked (tmp may be recvbuf
 * itself: an in-place call stays in place). (A peer that calls float16 SUM
 * instead is no longer told apart: both are SUMs now.) */
static int coll_avg16_scale(const char *fn, plait_comm_t comm, pcoll_args_t *a, void *tmp,
                            size_t len)
{
    if (!tmp) {
        comm->coll_seq++;       /* the other ranks' numbering goes on (coll_start) */
        return prt_err(PLAIT_ERR_NOMEM, "%s: no memory for the %zu-byte scaled copy of the "
                       "float16 input (PLAIT_AVG)", fn, len);
    }
    pcoll_take_input(tmp, a->sbuf, len / a->es, a->dt, a->op, comm->size);
    a->sbuf = tmp;
    a->op = PLAIT_SUM;
    return PLAIT_OK;
}

/*
 * float16 PLAIT_AVG scales each rank's input by 1/size (a float32
 * multiplication) before the sum (a pre-scaled sum, as NCCL does for this
 * type), instead of dividing the sum at the end. float16 ends at 65504:
 * two ranks averaging 49152 summed to infinity first (a black-box test
 * found it), and a ring's partial sums overflow the same way. Of k inputs
 * scaled by 1/n no partial sum exceeds k/n of the largest, so no step
 * overflows. The price: each input is rounded once more, so for a size
 * other than a power of two the result may differ from the exact average
 * rounded once by up to about size units in the last place of the largest
 * input / size, a zero average may come back tiny but not zero (a
 * black-box test; USER-GUIDE says so), and it is the same on every rank.
 * bfloat16, float32 and float64 have float32's range or more and keep the
 * single division at the end.
 * Where the inputs are scaled: the algorithms that read every input
 * themselves inside one host (the direct reads of coll/shm.c, the area of
 * coll/shm_small.c) scale each piece as they first take it in, while it is
 * in cache (pcoll_prescaled); every other algorithm gets a scaled copy of
 * the input and a plain SUM (coll_avg16_prescale). The copy was once made
 * for every algorithm: one more pass over memory, which on one host of 4-8
 * ranks made float16 AVG 1.1-2.3x slower than the SUM (docs/PERFORMANCE.md,
 * sessions 30 and 31). Both ways round each scaled input the same way.
 */
static int coll_avg16(const pcoll_args_t *a, plait_comm_t comm)
{
    return pcoll_prescaled(a->dt, a->op) && comm->size > 1;
}

/* The scaled copy for an algorithm that does not scale as it reads: in
 * place in the caller's buffer (the input is the caller's to overwrite),
 * else from the schedule sc (which then owns it) or from the schedules'
 * buffer pool (*pool, whose pages stay warm: a fresh malloc of a MiB is an
 * mmap faulting in on every call). */
static int coll_avg16_prescale(const char *fn, plait_comm_t comm, pcoll_args_t *a,
                               pcoll_sched_t *sc, void **pool, size_t *cap)
{
    size_t len = a->count * (size_t)nblocks(a->coll, comm->size) * a->es;   /* (checked: fits) */
    void *tmp;
    if (a->sbuf == a->rbuf && (a->coll != PCOLL_REDUCE_C || comm->rank == a->root))
        tmp = a->rbuf;
    else
        tmp = sc ? pcoll_sched_tmp(sc, len) : (*pool = pcoll_pool_get(len, cap));
    return coll_avg16_scale(fn, comm, a, tmp, len);
}

/* Builds the chosen schedule into sc and starts it; a blocking call's
 * request lives in storage (else NULL). */
static int coll_start(const char *fn, ppt_state_t *s, plait_comm_t comm, const pcoll_args_t *in,
                      pcoll_sched_t *sc, plait_request_t storage, plait_request_t *r)
{
    pcoll_args_t a = *in;
    int rc, algo = pcoll_select(s, comm, &a);
    if (coll_avg16(&a, comm) && !pcoll_shm_algo(a.coll, algo) &&
        (rc = coll_avg16_prescale(fn, comm, &a, sc, NULL, NULL)) != PLAIT_OK) {
        pcoll_sched_free(sc);   /* (the numbering went on: coll_avg16_scale) */
        return rc;
    }
    pcoll_sched_set_reduce(sc, a.dt, a.op);
    sc->sig = pcoll_tag_sig(&a);
    sc->fn = fn;
    rc = coll_build(sc, &a, algo);
    if (rc != PLAIT_OK) {
        comm->coll_seq++;       /* the other ranks' numbering goes on */
        pcoll_sched_free(sc);
        /* a builder that failed otherwise (e.g. a host-map exchange that
         * timed out) already said why */
        return rc == PLAIT_ERR_NOMEM ? prt_err(rc, "%s: no memory for its schedule", fn) : rc;
    }
    return pcoll_sched_start_locked(sc, fn, storage, r);
}

/* A count of 0 (the same on every rank, as the API requires) moves nothing:
 * no rank sends, so none needs to wait; a non-blocking call gets a request
 * that is already complete. It still takes its number in the communicator's
 * collective sequence (the tag of the messages the others' call sends): where
 * only some ranks passed 0 (a black-box test: a gather root passing 0), the
 * others' messages then keep a tag no later call uses, instead of matching
 * the next collective's receives and handing it the wrong data. (No lock:
 * the API has one thread at a time start collectives on a communicator.) */
static int coll_nothing(const char *fn, plait_comm_t comm, plait_request_t *req)
{
    plait_request_t r;
    comm->coll_seq++;
    if (!req)
        return PLAIT_OK;
    if (!(r = ppt_req_new(PPT_REQ_COLL, comm, NULL)))
        return prt_err(PLAIT_ERR_NOMEM, "%s: no memory for a request", fn);
    r->what = fn;
    atomic_store_explicit(&r->done, 1, memory_order_release);
    *req = r;
    return PLAIT_OK;
}

/* A blocking call on the schedule engine: schedule and request on this
 * frame (several KiB: kept out of coll_run, so that the calls that end
 * before it -- bad arguments, a count of 0, the area and pair paths -- do not
 * set up and probe that much stack). */
static __attribute__((noinline)) int coll_run_sched_locked(const char *fn, ppt_state_t *s,
                                                           plait_comm_t comm,
                                                           const pcoll_args_t *a)
{
    pcoll_sched_t stack_sc;
    struct plait_request stack_req;
    plait_request_t r = NULL;
    int rc;
    pcoll_sched_init(&stack_sc, s, comm);
    rc = coll_start(fn, s, comm, a, &stack_sc, &stack_req, &r);
    if (rc == PLAIT_OK)
        rc = pcoll_wait_free_locked(s, r, fn);
    return rc;
}

/* A call refused for a buffer alone (COLL_BUF_REFUSED) while the others,
 * whose buffers pass (a gather's NULL recvbuf matters at the root only),
 * run it: it takes its numbers as theirs do, or the communicator stays a
 * call out of step for good. On the shared-memory area inside a host that
 * means its area call numbers (pcoll_area_skip_locked; the others fail on
 * this rank's notice where they wait for its part), and where the call is
 * the communicator's first small one, the area's setup, which is
 * collective: this rank takes part, then publishes its refusal in its slot
 * instead of sending a notice (pcoll_area_refuse_locked says why). The
 * next call then meets on every rank. (Found by a test written against
 * API.md alone: the root of a gather with a NULL recvbuf left world's next
 * area call failing on every rank, and 3 ranks of a new communicator hung
 * in their next call.) A non-blocking call never sets the area up. */
static int coll_refuse_in_step(const char *fn, ppt_state_t *s, plait_comm_t comm,
                               const pcoll_args_t *a, int nb)
{
    char why[256];
    int rc = PLAIT_OK, area, was_ready = pcoll_area_ready(comm);
    snprintf(why, sizeof why, "%s", prt_err_text());
    pthread_mutex_lock(&s->lock);
    comm->coll_calls++;
    comm->coll_blocking = comm->coll_calls;   /* (a probe must not read it as over yet) */
    area = nb ? pcoll_area_nb_use_locked(s, comm, a) : pcoll_area_use_locked(s, comm, a, fn, &rc);
    comm->coll_blocking = 0;
    comm->coll_seq++;
    if (area && rc == PLAIT_OK && !was_ready)
        pcoll_area_refuse_locked(s, comm, a, why);
    else if (area && rc == PLAIT_OK)
        pcoll_area_skip_locked(s, comm, a, nb);
    prt_err(PLAIT_ERR_ARG, "%s", why);   /* (the setup may have set another) */
    if (!area || rc != PLAIT_OK || was_ready)
        pcoll_fail_tell_locked(s, comm, comm->coll_calls, PLAIT_ERR_ARG);
    pthread_mutex_unlock(&s->lock);
    return PLAIT_ERR_ARG;
}

/*
 * One path for every collective: req NULL = blocking. A blocking call keeps
 * its schedule and its request on the stack (nothing allocated for small
 * collectives), or for small sizes skips the engine: flags on a shared area
 * inside one host (coll/shm_small.c), else for two ranks one direct exchange
 * (coll/pair.c); a non-blocking one outlives the call, so schedule and
 * request go to the heap.
 */
static int coll_run(const char *fn, plait_comm_t comm, pcoll_args_t *a, plait_request_t *req)
{
    ppt_state_t *s;
    pcoll_sched_t *sc;
    plait_request_t r = NULL;
    void *avg16 = NULL;   /* the pair path's scaled copy (coll_avg16_prescale) */
    size_t avg16_cap = 0;
    int rc;
    if (!(s = ppt_enter(&rc, fn)))
        return rc;
    PRT_CHECK(ppt_comm_check(comm, fn));
    if ((rc = coll_check(fn, comm, a)) == COLL_BUF_REFUSED)
        return coll_refuse_in_step(fn, s, comm, a, req != NULL);
    if (rc != PLAIT_OK)
        return pcoll_refuse(s, comm, rc);
    if (a->count == 0 && a->coll != PCOLL_ALLTOALLV) {
        comm->coll_calls++;   /* (one thread at a time per communicator: coll_nothing) */
        return coll_nothing(fn, comm, req);
    }
    pthread_mutex_lock(&s->lock);
    /* (counted under the lock, with the blocking call marked: a peer's
     * probe, answered by any thread's progress, must never read this call
     * as finished: pt2pt/probe.c) */
    comm->coll_calls++;
    comm->coll_blocking = req ? 0 : comm->coll_calls;
    if (req && pcoll_area_nb_use_locked(s, comm, a)) {
        comm->coll_seq++;   /* (as a blocking area call, below) */
        s->coll_stats[PCOLL_ST_AREA_NB]++;
        if ((rc = pcoll_area_start_locked(s, comm, a, fn, &r)) == PLAIT_OK)
            *req = r;
    } else if (req) {
        s->coll_stats[PCOLL_ST_SCHED_NB]++;
        rc = pcoll_sched_new(s, comm, 8, 16, &sc);
        if (rc == PLAIT_OK && (rc = coll_start(fn, s, comm, a, sc, NULL, &r)) == PLAIT_OK)
            *req = r;
    } else if (pcoll_area_use_locked(s, comm, a, fn, &rc)) {
        /* An area call sends no message, but it takes its number in the
         * sequence all the same: where ranks went different ways (one
         * rank's bcast on the area against another's allreduce forced onto
         * messages, both timing out), the message's tag then belongs to no
         * later call, instead of matching the next allreduce's receive and
         * handing it the old data (coll_check errors with the allreduce
         * forced: PLAIT_ERR_TRUNCATE; with equal sizes it would be wrong
         * data). */
        comm->coll_seq++;
        s->coll_stats[PCOLL_ST_AREA]++;
        if (rc == PLAIT_OK)   /* (float16 AVG scaled on the way into the slots) */
            rc = pcoll_area_run_locked(s, comm, a, fn);
    } else if (pcoll_pair_use(s, comm, a)) {
        s->coll_stats[PCOLL_ST_PAIR]++;
        if (!coll_avg16(a, comm) ||
            (rc = coll_avg16_prescale(fn, comm, a, NULL, &avg16, &avg16_cap)) == PLAIT_OK)
            rc = pcoll_pair_run_locked(s, comm, a, fn);
    } else {
        s->coll_stats[PCOLL_ST_SCHED]++;
        rc = coll_run_sched_locked(fn, s, comm, a);
    }
    if (rc != PLAIT_OK)   /* a mismatch seen here: the others may wait for this rank */
        pcoll_fail_tell_locked(s, comm, comm->coll_calls, rc);
    comm->coll_blocking = 0;
    pthread_mutex_unlock(&s->lock);
    pcoll_pool_put(avg16, avg16_cap);   /* the call is over: no peer reads it any more */
    return rc;
}

static int coll_nb(const char *fn, plait_comm_t comm, pcoll_args_t *a, plait_request_t *req)
{
    if (!req) {
        ppt_state_t *s;
        int rc;
        if (!(s = ppt_enter(&rc, fn)))
            return rc;
        PRT_CHECK(ppt_comm_check(comm, fn));
        return pcoll_refuse(s, comm, prt_err(PLAIT_ERR_ARG, "%s: req is NULL", fn));
    }
    *req = NULL;
    return coll_run(fn, comm, a, req);
}

/* ------------------------------------------------------------- public API */

#define ARGS(...) (pcoll_args_t){__VA_ARGS__}

int plait_bcast(void *buf, size_t count, plait_dtype_t dt, int root, plait_comm_t comm)
{
    pcoll_args_t a = ARGS(.coll = PCOLL_BCAST, .sbuf = buf, .rbuf = buf, .count = count, .dt = dt,
                          .root = root);
    return coll_run("plait_bcast", comm, &a, NULL);
}

int plait_ibcast(void *buf, size_t count, plait_dtype_t dt, int root, plait_comm_t comm,
                 plait_request_t *req)
{
    pcoll_args_t a = ARGS(.coll = PCOLL_BCAST, .sbuf = buf, .rbuf = buf, .count = count, .dt = dt,
                          .root = root);
    return coll_nb("plait_ibcast", comm, &a, req);
}

int plait_reduce(const void *sendbuf, void *recvbuf, size_t count, plait_dtype_t dt,
                 plait_op_t op, int root, plait_comm_t comm)
{
    pcoll_args_t a = ARGS(.coll = PCOLL_REDUCE_C, .sbuf = sendbuf, .rbuf = recvbuf,
                          .count = count, .dt = dt, .op = op, .root = root);
    return coll_run("plait_reduce", comm, &a, NULL);
}

int plait_ireduce(const void *sendbuf, void *recvbuf, size_t count, plait_dtype_t dt,
                  plait_op_t op, int root, plait_comm_t comm, plait_request_t *req)
{
    pcoll_args_t a = ARGS(.coll = PCOLL_REDUCE_C, .sbuf = sendbuf, .rbuf = recvbuf,
                          .count = count, .dt = dt, .op = op, .root = root);
    return coll_nb("plait_ireduce", comm, &a, req);
}

int plait_allreduce(const void *sendbuf, void *recvbuf, size_t count, plait_dtype_t dt,
                    plait_op_t op, plait_comm_t comm)
{
    pcoll_args_t a = ARGS(.coll = PCOLL_ALLREDUCE, .sbuf = sendbuf, .rbuf = recvbuf,
                          .count = count, .dt = dt, .op = op);
    return coll_run("plait_allreduce", comm, &a, NULL);
}

int plait_iallreduce(const void *sendbuf, void *recvbuf, size_t count, plait_dtype_t dt,
                     plait_op_t op, plait_comm_t comm, plait_request_t *req)
{
    pcoll_args_t a = ARGS(.coll = PCOLL_ALLREDUCE, .sbuf = sendbuf, .rbuf = recvbuf,
                          .count = count, .dt = dt, .op = op);
    return coll_nb("plait_iallreduce", comm, &a, req);
}

int plait_allgather(const void *sendbuf, void *recvbuf, size_t sendcount, plait_dtype_t dt,
                    plait_comm_t comm)
{
    pcoll_args_t a = ARGS(.coll = PCOLL_ALLGATHER, .sbuf = sendbuf, .rbuf = recvbuf,
                          .count = sendcount, .dt = dt);
    return coll_run("plait_allgather", comm, &a, NULL);
}

int plait_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount, plait_dtype_t dt,
                     plait_comm_t comm, plait_request_t *req)
{
    pcoll_args_t a = ARGS(.coll = PCOLL_ALLGATHER, .sbuf = sendbuf, .rbuf = recvbuf,
                          .count = sendcount, .dt = dt);
    return coll_nb("plait_iallgather", comm, &a, req);
}

int plait_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, plait_dtype_t dt,
                         plait_op_t op, plait_comm_t comm)
{
    pcoll_args_t a = ARGS(.coll = PCOLL_REDUCE_SCATTER, .sbuf = sendbuf, .rbuf = recvbuf,
                          .count = recvcount, .dt = dt, .op = op);
    return coll_run("plait_reduce_scatter", comm, &a, NULL);
}

int plait_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, plait_dtype_t dt,
                          plait_op_t op, plait_comm_t comm, plait_request_t *req)
{
    pcoll_args_t a = ARGS(.coll = PCOLL_REDUCE_SCATTER, .sbuf = sendbuf, .rbuf = recvbuf,
                          .count = recvcount, .dt = dt, .op = op);
    return coll_nb("plait_ireduce_scatter", comm, &a, req);
}

int plait_alltoall(const void *sendbuf, void *recvbuf, size_t count, plait_dtype_t dt,
                   plait_comm_t comm)
{
    pcoll_args_t a = ARGS(.coll = PCOLL_ALLTOALL, .sbuf = sendbuf, .rbuf = recvbuf,
                          .count = count, .dt = dt);
    return coll_run("plait_alltoall", comm, &a, NULL);
}

int plait_ialltoall(const void *sendbuf, void *recvbuf, size_t count, plait_dtype_t dt,
                    plait_comm_t comm, plait_request_t *req)
{
    pcoll_args_t a = ARGS(.coll = PCOLL_ALLTOALL, .sbuf = sendbuf, .rbuf = recvbuf,
                          .count = count, .dt = dt);
    return coll_nb("plait_ialltoall", comm, &a, req);
}

int plait_alltoallv(const void *sendbuf, const size_t sendcounts[], const size_t sdispls[],
                    void *recvbuf, const size_t recvcounts[], const size_t rdispls[],
                    plait_dtype_t dt, plait_comm_t comm)
{
    pcoll_vcounts_t v = {sendcounts, sdispls, recvcounts, rdispls};
    pcoll_args_t a = ARGS(.coll = PCOLL_ALLTOALLV, .sbuf = sendbuf, .rbuf = recvbuf, .dt = dt,
                          .v = &v);
    return coll_run("plait_alltoallv", comm, &a, NULL);
}

int plait_ialltoallv(const void *sendbuf, const size_t sendcounts[], const size_t sdispls[],
                     void *recvbuf, const size_t recvcounts[], const size_t rdispls[],
                     plait_dtype_t dt, plait_comm_t comm, plait_request_t *req)
{
    pcoll_vcounts_t v = {sendcounts, sdispls, recvcounts, rdispls};
    pcoll_args_t a = ARGS(.coll = PCOLL_ALLTOALLV, .sbuf = sendbuf, .rbuf = recvbuf, .dt = dt,
                          .v = &v);
    return coll_nb("plait_ialltoallv", comm, &a, req);
}

int plait_gather(const void *sendbuf, void *recvbuf, size_t sendcount, plait_dtype_t dt, int root,
                 plait_comm_t comm)
{
    pcoll_args_t a = ARGS(.coll = PCOLL_GATHER, .sbuf = sendbuf, .rbuf = recvbuf,
                          .count = sendcount, .dt = dt, .root = root);
    return coll_run("plait_gather", comm, &a, NULL);
}

int plait_igather(const void *sendbuf, void *recvbuf, size_t sendcount, plait_dtype_t dt,
                  int root, plait_comm_t comm, plait_request_t *req)
{
    pcoll_args_t a = ARGS(.coll = PCOLL_GATHER, .sbuf = sendbuf, .rbuf = recvbuf,
                          .count = sendcount, .dt = dt, .root = root);
    return coll_nb("plait_igather", comm, &a, req);
}

int plait_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, plait_dtype_t dt, int root,
                  plait_comm_t comm)
{
    pcoll_args_t a = ARGS(.coll = PCOLL_SCATTER, .sbuf = sendbuf, .rbuf = recvbuf,
                          .count = recvcount, .dt = dt, .root = root);
    return coll_run("plait_scatter", comm, &a, NULL);
}

int plait_iscatter(const void *sendbuf, void *recvbuf, size_t recvcount, plait_dtype_t dt,
                   int root, plait_comm_t comm, plait_request_t *req)
{
    pcoll_args_t a = ARGS(.coll = PCOLL_SCATTER, .sbuf = sendbuf, .rbuf = recvbuf,
                          .count = recvcount, .dt = dt, .root = root);
    return coll_nb("plait_iscatter", comm, &a, req);
}
