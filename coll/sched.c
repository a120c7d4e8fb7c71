/*
 * sched.c -- the schedule engine every collective algorithm runs on.
 *
 * A collective is built, before any byte moves, as a list of rounds. A round
 * holds transfers (non-blocking sends and receives on the communicator's
 * collective context, all tagged with the collective's sequence number so that
 * several collectives may be in flight on one communicator) and local steps
 * (reduce a received buffer into an accumulator, copy a block, divide for
 * PLAIT_AVG). When a round starts its transfers are posted at once; when all of
 * them have completed its local steps run in the order they were added; then
 * the next round starts. A round with no transfers just runs its local steps.
 * Temporary buffers an algorithm needs belong to the schedule and are freed
 * with it, so a non-blocking collective owns everything it touches besides the
 * caller's buffers.
 *
 * Small schedules allocate nothing (see PCOLL_INL_* in pcoll.h): steps,
 * rounds, the transfer requests of a round and small scratch buffers live
 * inside the schedule object, which a blocking call keeps on its stack along
 * with the collective's own request. The allocator used to be over half the
 * instructions of an 8-byte allreduce.
 *
 * The pt2pt progress loop calls sched_progress for every active collective;
 * blocking collectives wait on the same request. A failed transfer, or a
 * receive that got fewer bytes than the schedule expects (ranks passed
 * different counts), fails the collective with a message naming the cause.
 */
#include "config.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "coll/pcoll.h"

/* Makes room for need elements in *arr (capacity *cap); inl is the inline
 * array *arr starts as, which is copied out, never freed. */
static int sched_grow(void **arr, int *cap, int need, size_t esize, void *inl)
{
    void *p;
    int ncap;
    if (need <= *cap)
        return 0;
    ncap = *cap ? *cap : 8;
    while (ncap < need)
        ncap *= 2;
    if (*arr == inl) {
        if (!(p = malloc((size_t)ncap * esize)))
            return -1;
        memcpy(p, inl, (size_t)*cap * esize);
    } else if (!(p = realloc(*arr, (size_t)ncap * esize))) {
        return -1;
    }
    *arr = p;
    *cap = ncap;
    return 0;
}

void pcoll_sched_init(pcoll_sched_t *sc, ppt_state_t *s, plait_comm_t comm)
{
    /* only the header: the inline arrays are written before they are read */
    memset(sc, 0, offsetof(pcoll_sched_t, round_end_inl));
    sc->s = s;
    sc->comm = comm;
    sc->dt = PLAIT_BYTE;
    sc->on_stack = 1;
    sc->round_end = sc->round_end_inl;
    sc->caprounds = PCOLL_INL_ROUNDS;
    sc->ops = sc->ops_inl;
    sc->capops = PCOLL_INL_OPS;
    sc->xfer = sc->xfer_inl;
    sc->xfer_op = sc->xfer_op_inl;
    sc->capxfer = PCOLL_INL_XFER;
    sc->tmp = sc->tmp_inl;
    sc->captmp = PCOLL_INL_TMP;
}

int pcoll_sched_new(ppt_state_t *s, plait_comm_t comm, int maxrounds, int maxops,
                    pcoll_sched_t **out)
{
    pcoll_sched_t *sc = malloc(sizeof *sc);
    if (!sc)
        return prt_err(PLAIT_ERR_NOMEM, "no memory for a collective schedule");
    pcoll_sched_init(sc, s, comm);
    sc->on_stack = 0;
    if (sched_grow((void **)&sc->round_end, &sc->caprounds, maxrounds + 1, sizeof(int),
                   sc->round_end_inl) ||
        sched_grow((void **)&sc->ops, &sc->capops, maxops + 1, sizeof(pcoll_op_t), sc->ops_inl)) {
        pcoll_sched_free(sc);
        return prt_err(PLAIT_ERR_NOMEM, "no memory for a collective schedule");
    }
    *out = sc;
    return PLAIT_OK;
}

void pcoll_sched_set_reduce(pcoll_sched_t *sc, plait_dtype_t dt, plait_op_t op)
{
    sc->dt = dt;
    sc->op = op;
}

static pcoll_op_t *sched_push(pcoll_sched_t *sc, int kind)
{
    pcoll_op_t *op;
    if (sc->err ||
        sched_grow((void **)&sc->ops, &sc->capops, sc->nops + 1, sizeof *sc->ops, sc->ops_inl)) {
        sc->err = PLAIT_ERR_NOMEM;
        return NULL;
    }
    op = &sc->ops[sc->nops++];
    memset(op, 0, sizeof *op);
    op->kind = kind;
    return op;
}

void pcoll_sched_add(pcoll_sched_t *sc, int peer, int send, void *buf, size_t len)
{
    pcoll_op_t *op = sched_push(sc, send ? PCOLL_SEND : PCOLL_RECV);
    if (op) {
        op->peer = peer;
        op->buf = buf;
        op->len = len;
    }
}

void pcoll_sched_send(pcoll_sched_t *sc, int peer, const void *buf, size_t len)
{
    pcoll_sched_add(sc, peer, 1, (void *)buf, len);
}

void pcoll_sched_recv(pcoll_sched_t *sc, int peer, void *buf, size_t len)
{
    pcoll_sched_add(sc, peer, 0, buf, len);
}

void pcoll_sched_reduce(pcoll_sched_t *sc, void *dst, const void *a, const void *b, size_t count)
{
    pcoll_op_t *op;
    if (count == 0 || !(op = sched_push(sc, PCOLL_REDUCE)))
        return;
    op->buf = dst;
    op->a = a;
    op->b = b;
    op->len = count;
}

static void sched_copy(pcoll_sched_t *sc, int kind, void *dst, const void *src, size_t len)
{
    pcoll_op_t *op;
    if (len == 0 || dst == src || !(op = sched_push(sc, kind)))
        return;
    op->buf = dst;
    op->a = src;
    op->len = len;
}

void pcoll_sched_copy(pcoll_sched_t *sc, void *dst, const void *src, size_t len)
{
    sched_copy(sc, PCOLL_COPY, dst, src, len);
}

void pcoll_sched_copy_posted(pcoll_sched_t *sc, void *dst, const void *src, size_t len)
{
    sched_copy(sc, PCOLL_COPY_POSTED, dst, src, len);
}

void pcoll_sched_scale(pcoll_sched_t *sc, void *buf, size_t count)
{
    pcoll_op_t *op;
    if (count == 0 || sc->op != PLAIT_AVG || !(op = sched_push(sc, PCOLL_SCALE)))
        return;
    op->buf = buf;
    op->len = count;
}

/*
 * Scratch buffers are kept for the next collective instead of freed: a large
 * malloc is a fresh mmap whose pages fault in on every call, which cost more
 * than the copy itself at MiB sizes. A few buffers (the sizes recent
 * collectives used) stay in a process-wide pool; schedules of any
 * communicator draw from it (its own mutex: schedules may be freed by a
 * request release outside the state lock).
 */
#define POOL_SLOTS 8
#define POOL_MAX_BYTES ((size_t)256 << 20)
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static void  *pool_buf[POOL_SLOTS];
static size_t pool_cap[POOL_SLOTS];

/* The smallest pooled buffer of at least len bytes (and not wastefully
 * larger), or NULL. */
static void *pool_take(size_t len, size_t *cap)
{
    int best = -1;
    void *p = NULL;
    pthread_mutex_lock(&pool_lock);
    for (int i = 0; i < POOL_SLOTS; i++)
        if (pool_buf[i] && pool_cap[i] >= len && pool_cap[i] / 4 <= len + 4096 &&
            (best < 0 || pool_cap[i] < pool_cap[best]))
            best = i;
    if (best >= 0) {
        p = pool_buf[best];
        *cap = pool_cap[best];
        pool_buf[best] = NULL;
    }
    pthread_mutex_unlock(&pool_lock);
    return p;
}

/* Keeps p for reuse, evicting the smallest pooled buffer when full. */
static void pool_give(void *p, size_t cap)
{
    size_t total = cap;
    int slot = -1;
    pthread_mutex_lock(&pool_lock);
    for (int i = 0; i < POOL_SLOTS; i++) {
        total += pool_buf[i] ? pool_cap[i] : 0;
        if (!pool_buf[i] && slot < 0)
            slot = i;
    }
    if (slot < 0) {
        slot = 0;
        for (int i = 1; i < POOL_SLOTS; i++)
            slot = pool_cap[i] < pool_cap[slot] ? i : slot;
        if (pool_cap[slot] >= cap) {
            slot = -1;
        } else {
            total -= pool_cap[slot];
            free(pool_buf[slot]);
            pool_buf[slot] = NULL;
        }
    }
    if (slot >= 0 && total <= POOL_MAX_BYTES) {
        pool_buf[slot] = p;
        pool_cap[slot] = cap;
        p = NULL;
    }
    pthread_mutex_unlock(&pool_lock);
    free(p);
}

void *pcoll_pool_get(size_t len, size_t *cap)
{
    void *p = pool_take(len, cap);
    if (!p && (p = malloc(len ? len : 1)))
        *cap = len ? len : 1;
    return p;
}

void pcoll_pool_put(void *p, size_t cap)
{
    if (p)
        pool_give(p, cap);
}

void pcoll_pool_drain(void)
{
    pthread_mutex_lock(&pool_lock);
    for (int i = 0; i < POOL_SLOTS; i++) {
        free(pool_buf[i]);
        pool_buf[i] = NULL;
    }
    pthread_mutex_unlock(&pool_lock);
}

/* Small buffers are carved from the schedule's inline scratch (64-byte
 * aligned, like malloc's large blocks, for the vector kernels); the rest come
 * from the pool or malloc. */
void *pcoll_sched_tmp(pcoll_sched_t *sc, size_t len)
{
    void *p;
    size_t cap = len ? len : 1, room = (cap + 63) & ~(size_t)63;
    if (sc->err)
        return NULL;
    if (room <= PCOLL_INL_SCRATCH - sc->scratch_used) {
        p = sc->scratch_inl + sc->scratch_used;
        sc->scratch_used += room;
        return p;               /* part of the schedule: nothing to release */
    }
    if (sched_grow((void **)&sc->tmp, &sc->captmp, sc->ntmp + 1, sizeof *sc->tmp, sc->tmp_inl) ||
        (!(p = pool_take(cap, &cap)) && !(p = malloc(cap)))) {
        sc->err = PLAIT_ERR_NOMEM;
        return NULL;
    }
    sc->tmp[sc->ntmp].p = p;
    sc->tmp[sc->ntmp++].cap = cap;
    return p;
}

void pcoll_sched_func(pcoll_sched_t *sc, pcoll_func_t fn, void *arg)
{
    pcoll_op_t *op = sched_push(sc, PCOLL_FUNC);
    if (op) {
        op->fn = fn;
        op->buf = arg;
    }
}

void pcoll_sched_end_round(pcoll_sched_t *sc)
{
    if (sc->err || sched_grow((void **)&sc->round_end, &sc->caprounds, sc->nrounds + 1,
                              sizeof *sc->round_end, sc->round_end_inl)) {
        sc->err = PLAIT_ERR_NOMEM;
        return;
    }
    /* an empty round would only cost a pass of the loop */
    if (sc->nrounds && sc->round_end[sc->nrounds - 1] == sc->nops)
        return;
    if (!sc->nrounds && sc->nops == 0)
        return;
    sc->round_end[sc->nrounds++] = sc->nops;
}

void pcoll_sched_ahead(pcoll_sched_t *sc, int depth)
{
    sc->ahead = depth > 0 ? depth : 0;
}

static int is_xfer(const pcoll_op_t *op) { return op->kind == PCOLL_SEND || op->kind == PCOLL_RECV; }

static int round_first(const pcoll_sched_t *sc, int k) { return k ? sc->round_end[k - 1] : 0; }

/* Transfers of round k. */
static int round_nxfer(const pcoll_sched_t *sc, int k)
{
    int n = 0;
    for (int i = round_first(sc, k); i < sc->round_end[k]; i++)
        n += is_xfer(&sc->ops[i]);
    return n;
}

/* The current round's transfers: ring slots of [xfer_lo, xfer_cur_end). */
static int xfer_cur_end(const pcoll_sched_t *sc)
{
    return sc->round < sc->nrounds && sc->round < sc->posted
               ? sc->xfer_lo + round_nxfer(sc, sc->round) : sc->xfer_lo;
}

static plait_request_t xfer_at(const pcoll_sched_t *sc, int i) { return &sc->xfer[i % sc->capxfer]; }

/* Releases the requests of transfers [xfer_lo, end) (withdrawing unfinished
 * ones); their storage is the schedule's, reused by later rounds. */
static void sched_drop_xfer(pcoll_sched_t *sc, int end)
{
    for (; sc->xfer_lo < end; sc->xfer_lo++) {
        ppt_cancel_locked(sc->s, xfer_at(sc, sc->xfer_lo));
        ppt_req_free(xfer_at(sc, sc->xfer_lo));
    }
}

void pcoll_sched_free(pcoll_sched_t *sc)
{
    if (!sc)
        return;
    sched_drop_xfer(sc, sc->xfer_hi);
    for (int i = 0; i < sc->ntmp; i++)
        pool_give(sc->tmp[i].p, sc->tmp[i].cap);
    if (sc->tmp != sc->tmp_inl)
        free(sc->tmp);
    if (sc->round_end != sc->round_end_inl)
        free(sc->round_end);
    if (sc->ops != sc->ops_inl)
        free(sc->ops);
    if (sc->xfer != sc->xfer_inl)
        free(sc->xfer);
    if (sc->xfer_op != sc->xfer_op_inl)
        free(sc->xfer_op);
    if (!sc->on_stack)
        free(sc);
}

/* Posts round k's transfers (the next ring slots), then makes its posted
 * copies while they move. */
static int sched_post_round(pcoll_sched_t *sc, int k)
{
    sc->posted = k + 1;
    for (int i = round_first(sc, k); i < sc->round_end[k]; i++) {
        pcoll_op_t *op = &sc->ops[i];
        plait_request_t r = xfer_at(sc, sc->xfer_hi);   /* storage: initialized by pt2pt */
        int rc;
        if (!is_xfer(op))
            continue;
        rc = op->kind == PCOLL_SEND
                 ? ppt_isend_flags_locked(sc->s, sc->comm, sc->comm->cmq, op->buf, op->len,
                                          op->peer, sc->tag, sc->send_flags, &r)
                 : ppt_irecv_locked(sc->s, sc->comm, sc->comm->cmq, op->buf, op->len, op->peer,
                                    sc->tag, &r);
        if (rc != PLAIT_OK)
            return rc;
        sc->xfer_op[sc->xfer_hi++ % sc->capxfer] = i;
    }
    for (int i = round_first(sc, k); i < sc->round_end[k]; i++)
        if (sc->ops[i].kind == PCOLL_COPY_POSTED)
            memmove(sc->ops[i].buf, sc->ops[i].a, sc->ops[i].len);
    return PLAIT_OK;
}

/* Posts every round up to the current one plus the lookahead. */
static int sched_post_ahead(pcoll_sched_t *sc)
{
    int rc = PLAIT_OK;
    while (rc == PLAIT_OK && sc->posted < sc->nrounds && sc->posted <= sc->round + sc->ahead)
        rc = sched_post_round(sc, sc->posted);
    return rc;
}

/* The round's local steps, in order; the first FUNC failure, else PLAIT_OK. */
static int sched_run_locals(pcoll_sched_t *sc)
{
    for (int i = round_first(sc, sc->round); i < sc->round_end[sc->round]; i++) {
        pcoll_op_t *op = &sc->ops[i];
        int rc;
        switch (op->kind) {
        case PCOLL_REDUCE: pcoll_reduce(op->buf, op->a, op->b, op->len, sc->dt, sc->op); break;
        case PCOLL_COPY:   memmove(op->buf, op->a, op->len); break;
        case PCOLL_SCALE:  pcoll_scale(op->buf, op->len, sc->dt, sc->comm->size); break;
        case PCOLL_FUNC:
            if ((rc = op->fn(sc, op->buf)) != PLAIT_OK)
                return rc;
            break;
        default: break;
        }
    }
    return PLAIT_OK;
}

/* PLAIT_OK when the round's transfers all succeeded, else the first failure;
 * 1 while some are still running. */
static int sched_round_status(pcoll_sched_t *sc, const char *what)
{
    int rc = PLAIT_OK, end = xfer_cur_end(sc);
    for (int i = sc->xfer_lo; i < end; i++) {
        plait_request_t r = xfer_at(sc, i);
        const pcoll_op_t *op = &sc->ops[sc->xfer_op[i % sc->capxfer]];
        if (!atomic_load_explicit(&r->done, memory_order_acquire))
            return 1;
        if (rc == PLAIT_OK)
            rc = pcoll_xfer_check(r, op->kind == PCOLL_RECV, op->len, op->peer, what);
    }
    return rc;
}

/* Ends the call with rc and tells the other members when the cause is this
 * rank's own (pcoll_fail_tell_locked: not a peer's notice, a timeout or a
 * dead peer). Its unfinished transfers stay for sched_destroy (below). */
static void sched_fail(plait_request_t req, int rc)
{
    pcoll_sched_t *sc = req->coll;
    sc->round = sc->nrounds;
    pcoll_fail_tell_locked(sc->s, sc->comm, req->call, rc);   /* (0: not a call's) */
    ppt_req_complete(sc->s, req, rc);
}

/* Advances as many rounds as have completed; completes req at the end.
 * A failed call completes at once and leaves its unfinished transfers to
 * sched_destroy, when its owner frees it: withdrawing a send may wait, making
 * progress passes, and a pass made from inside this one would run this
 * schedule again (and walk the list of collectives this pass walks). */
static int sched_progress(plait_request_t req)
{
    pcoll_sched_t *sc = req->coll;
    if (atomic_load_explicit(&req->done, memory_order_acquire))
        return 1;   /* failed outside a pass (sched_check_peers): still listed */
    while (sc->round < sc->nrounds) {
        int rc = sched_round_status(sc, req->what);
        /* A peer failed the call (notice.c)? Its reason, rather than what its
         * withdrawn sends did here, is the call's error. */
        if (rc != PLAIT_OK && rc != PLAIT_ERR_ARG && sc->comm->cmq && sc->comm->cmq->notices) {
            int told = ppt_coll_noticed(sc->comm, req->call);
            rc = told != PLAIT_OK ? told : rc;
        }
        if (rc == 1)
            return 0;
        if (rc == PLAIT_OK) {
            sched_drop_xfer(sc, xfer_cur_end(sc));   /* (all done: no withdrawal waits) */
            rc = sched_run_locals(sc);
        }
        if (rc == PLAIT_OK && ++sc->round < sc->nrounds)
            rc = sched_post_ahead(sc);
        if (rc != PLAIT_OK) {
            sched_fail(req, rc);
            return 1;
        }
    }
    ppt_req_complete(sc->s, req, PLAIT_OK);
    return 1;
}

static void sched_destroy(plait_request_t req)
{
    pcoll_sched_free(req->coll);
    req->coll = NULL;
}

/* Asks each peer of the current round's unfinished transfers, once per
 * round, when the round has not moved for PCOLL_PROBE_NS. */
static void sched_probe(pcoll_sched_t *sc, uint32_t call)
{
    uint64_t now = prt_now_ns();
    int end = xfer_cur_end(sc);
    if (sc->stall_round != sc->round + 1) {   /* first look at this round */
        sc->stall_round = sc->round + 1;
        sc->stall_ns = now;
        sc->probed = 0;
        return;
    }
    if (sc->probed || now - sc->stall_ns < PCOLL_PROBE_NS)
        return;
    sc->probed = 1;
    for (int i = sc->xfer_lo; i < end; i++) {
        plait_request_t r = xfer_at(sc, i);
        int asked = 0;
        if (atomic_load_explicit(&r->done, memory_order_acquire))
            continue;
        for (int j = sc->xfer_lo; j < i && !asked; j++)   /* (once per peer) */
            asked = xfer_at(sc, j)->peer == r->peer &&
                    !atomic_load_explicit(&xfer_at(sc, j)->done, memory_order_acquire);
        if (!asked)
            ppt_coll_probe_locked(sc->s, sc->comm, r->peer, call, sc->tag);
    }
}

/* Whether this call can never finish: a peer failed it, or the ranks went
 * different ways (pt2pt/notice.c, pt2pt/probe.c). A receive still unmatched
 * from a peer that finished the call will never be matched, nor a send that
 * peer has not answered (its CTS or FIN would have come first). */
static int sched_doomed(pcoll_sched_t *sc, uint32_t call)
{
    int end = xfer_cur_end(sc);
    PRT_CHECK(ppt_coll_noticed(sc->comm, call));
    PRT_CHECK(ppt_coll_diverged(sc->comm, sc->tag, 0));
    if (!sc->comm->cmq || !sc->comm->cmq->probes)
        return PLAIT_OK;
    PRT_CHECK(ppt_coll_probed(sc->comm, sc->tag));
    for (int i = sc->xfer_lo; i < end; i++) {
        plait_request_t r = xfer_at(sc, i);
        if (((r->kind == PPT_REQ_RECV && r->post_seq) ||
             (r->kind == PPT_REQ_SEND && r->rts_open)) &&
            !atomic_load_explicit(&r->done, memory_order_acquire))
            PRT_CHECK(ppt_coll_passed(sc->comm, r->peer, call, r->kind == PPT_REQ_SEND));
    }
    return PLAIT_OK;
}

/* Only the peers of the current round's unfinished transfers matter: a member
 * that has done its part and exited (e.g. left plait_finalize's barrier
 * early) is no failure. */
static int sched_check_peers(plait_request_t req)
{
    pcoll_sched_t *sc = req->coll;
    int end = sc ? xfer_cur_end(sc) : 0;
    /* A call that cannot finish fails here: its request completes, so the
     * waiting plait_wait frees it, as every failure but a timeout or a
     * dead peer does, and where the cause was found here the others hear
     * of it (a non-blocking call's only waiter is its caller's plait_wait;
     * nothing else would tell them). */
    if (sc && req->call && sc->round < sc->nrounds) {
        int rc = sched_doomed(sc, req->call);
        if (rc != PLAIT_OK) {
            sched_fail(req, rc);
            return rc;
        }
        sched_probe(sc, req->call);
    }
    for (int i = sc ? sc->xfer_lo : 0; i < end; i++) {
        plait_request_t r = xfer_at(sc, i);
        if (!atomic_load_explicit(&r->done, memory_order_acquire) && r->world >= 0)
            PRT_CHECK(ppt_peer_alive(sc->s, r->world));
    }
    return PLAIT_OK;
}

/* The current round's transfers not done yet: whom a timed-out collective
 * was waiting for. */
static void sched_wait_peers(plait_request_t req, char *out, size_t len)
{
    pcoll_sched_t *sc = req->coll;
    size_t n = 0;
    int end = sc ? xfer_cur_end(sc) : 0;
    out[0] = '\0';
    for (int i = sc ? sc->xfer_lo : 0; i < end && n < len; i++) {
        plait_request_t r = xfer_at(sc, i);
        int w;
        if (atomic_load_explicit(&r->done, memory_order_acquire))
            continue;
        w = snprintf(out + n, len - n, "%s%s rank %d", n ? ", " : "",
                     r->kind == PPT_REQ_RECV ? "a message from" : "a receive by", r->peer);
        n = w < 0 ? len : n + (size_t)w;
    }
}

/* Room for the transfers posted at once: the largest run of ahead + 1
 * consecutive rounds (inline storage mostly suffices). */
static int sched_alloc_xfer(pcoll_sched_t *sc)
{
    int most = 0, win = 0;
    if (sc->nops <= sc->capxfer)    /* no window can hold more transfers than steps */
        return PLAIT_OK;
    for (int k = 0; k < sc->nrounds; k++) {
        win += round_nxfer(sc, k);
        if (k > sc->ahead)
            win -= round_nxfer(sc, k - sc->ahead - 1);
        most = win > most ? win : most;
    }
    if (most <= sc->capxfer)
        return PLAIT_OK;
    sc->xfer = malloc((size_t)most * sizeof *sc->xfer);
    sc->xfer_op = malloc((size_t)most * sizeof *sc->xfer_op);
    if (!sc->xfer || !sc->xfer_op) {
        free(sc->xfer);
        free(sc->xfer_op);
        sc->xfer = sc->xfer_inl;    /* pcoll_sched_free must not free them twice */
        sc->xfer_op = sc->xfer_op_inl;
        return PLAIT_ERR_NOMEM;
    }
    sc->capxfer = most;
    return PLAIT_OK;
}

int pcoll_sched_start_locked(pcoll_sched_t *sc, const char *what, plait_request_t storage,
                             plait_request_t *out)
{
    ppt_state_t *s = sc->s;
    plait_request_t req;
    int rc;
    pcoll_sched_end_round(sc);          /* steps added after the last end_round */
    if (sc->err || sched_alloc_xfer(sc) != PLAIT_OK ||
        !(req = ppt_req_new(PPT_REQ_COLL, sc->comm, storage))) {
        /* the sequence number still advances: the other ranks' next collective
         * must not pair with this one's traffic */
        sc->comm->coll_seq++;
        pcoll_sched_free(sc);
        return prt_err(PLAIT_ERR_NOMEM, "%s: no memory for its schedule", what);
    }
    req->coll = sc;
    req->what = what;
    req->peer = PLAIT_ANY_SOURCE;
    req->tag = PLAIT_ANY_TAG;
    req->progress = sched_progress;
    req->destroy = sched_destroy;
    req->check_peers = sched_check_peers;
    req->wait_peers = sched_wait_peers;
    req->call = sc->tag_set ? 0 : sc->comm->coll_calls;   /* (finalize's barrier: none) */
    if (!sc->tag_set)
        sc->tag = pcoll_next_tag(sc->comm, sc->sig);
    /* A non-blocking schedule's messages inside a host go eagerly up to the
     * user limit (16 KiB), not the collectives' 4 KiB: each rendezvous
     * costs a handshake that only a progress pass answers, and the passes
     * come from the progress thread while the program computes. One host,
     * bound ranks, start-then-wait of an allreduce: 4 ranks 8 / 16 KiB 12 /
     * 16 -> 8 / 12 us, 8 ranks 21 / 29 -> 13 / 21 (docs/PERFORMANCE.md,
     * session 35). Blocking schedules keep 4K: there 16K was slower as
     * often as faster. */
    if (!storage)
        sc->send_flags |= PPT_SEND_XCHG;
    rc = sched_post_ahead(sc);
    if (rc != PLAIT_OK) {
        ppt_req_free(req);
        return rc;
    }
    if (!sched_progress(req))        /* not finished: the progress loop takes it on */
        pcoll_listed_locked(s, req);
    *out = req;
    return PLAIT_OK;
}

void pcoll_listed_locked(ppt_state_t *s, plait_request_t req)
{
    req->next = s->coll_head;
    if (s->coll_head)
        s->coll_head->prev = req;
    s->coll_head = req;
    if (!req->on_stack) {            /* non-blocking: moves on while the caller computes */
        atomic_fetch_add(&s->nb_inflight, 1);   /* (seq_cst: ppt_async_kick_locked) */
        ppt_async_kick_locked(s);
    }
}

/* A failed call withdraws its transfers; a send that a rank on this host
 * might be reading waits for that rank to answer (pt2pt/proto.c,
 * send_withdraw: up to PLAIT_TIMEOUT or 10 s). When that took long the
 * message says so, as pt2pt's does, or "timed out after 6.0 s" would stand
 * for a call of 12 s (a black-box test). Only failed calls read the clock. */
int pcoll_wait_free_locked(ppt_state_t *s, plait_request_t req, const char *what)
{
    int rc = ppt_wait_locked(s, req, what);
    uint64_t t0 = rc != PLAIT_OK ? prt_now_ns() : 0;
    ppt_cancel_locked(s, req);      /* no-op unless it failed to complete */
    ppt_req_free(req);
    if (rc != PLAIT_OK)
        prt_err_waited(rc, t0, "withdrawing its sends (a rank on this host that might be "
                       "reading one must answer first)");
    return rc;
}
