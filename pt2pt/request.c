/*
 * request.c -- request objects, completion, the progress loop and the one
 * blocking-wait loop every blocking call and plait_wait go through.
 */
#include "config.h"

#include <sched.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "pt2pt/ppt.h"

#define PPT_ALIVE_CHECK_NS 100000000ull   /* look for dead peers every 100 ms of waiting */
#define PPT_SLEEP_US       10000          /* one futex sleep; frames wake it earlier */

/* Heap requests are the caller's (internal ones live in a blocking call's
 * or a schedule's storage). */
static void ppt_count_user_req(int kind, long d)
{
    ppt_state_t *s = ppt_get();
    if (s && kind > 0 && kind < 4)
        atomic_fetch_add_explicit(&s->user_reqs[kind], d, memory_order_relaxed);
}

void ppt_report_requests(ppt_state_t *s)
{
    long n[4];
    for (int k = 1; k < 4; k++)
        n[k] = atomic_load_explicit(&s->user_reqs[k], memory_order_relaxed);
    if (n[1] + n[2] + n[3] > 0)
        prt_log(PRT_LOG_WARN, "plait_finalize: %ld request%s never completed with plait_wait "
                "or plait_test (%ld send%s, %ld receive%s, %ld collective%s); dropped",
                n[1] + n[2] + n[3], n[1] + n[2] + n[3] == 1 ? " was" : "s were", n[1],
                n[1] == 1 ? "" : "s", n[2], n[2] == 1 ? "" : "s", n[3], n[3] == 1 ? "" : "s");
}

plait_request_t ppt_req_new(int kind, plait_comm_t comm, plait_request_t storage)
{
    plait_request_t r = storage;
    if (r)
        memset(r, 0, sizeof *r);
    else if (!(r = calloc(1, sizeof *r)))
        return NULL;
    r->on_stack = storage != NULL;
    r->magic = PPT_REQ_MAGIC;
    r->kind = kind;
    if (!storage)   /* (a request of the caller's: see ppt_report_requests) */
        ppt_count_user_req(kind, 1);
    r->comm = comm;
    if (comm)
        atomic_fetch_add(&comm->refs, 1);
    r->world = -1;
    atomic_init(&r->done, 0);
    return r;
}

void ppt_req_free(plait_request_t req)
{
    if (!req)
        return;
    if (req->destroy)
        req->destroy(req);
    if (req->magic == PPT_REQ_MAGIC && req->comm)   /* once per request */
        atomic_fetch_sub(&req->comm->refs, 1);
    if (req->magic == PPT_REQ_MAGIC && !req->on_stack)
        ppt_count_user_req(req->kind, -1);
    /* volatile: a store just before free() is dead to the compiler, which
     * removed it once this function changed shape (the freed request then
     * still read live to a stale handle's wait: t-pt2pt --stale) */
    *(volatile uint32_t *)&req->magic = PPT_REQ_DEAD;
    if (!req->on_stack)
        free(req);
}

void ppt_req_complete(ppt_state_t *s, plait_request_t req, int rc)
{
    req->rc = rc;
    if (rc != PLAIT_OK)
        snprintf(req->why, sizeof req->why, "%s", prt_err_text());
    atomic_store_explicit(&req->done, 1, memory_order_release);
    if (s->shm.ops)
        ptl_shm_wake_self(&s->shm);   /* another thread may sleep on this request */
}

int ppt_req_register(ppt_state_t *s, plait_request_t req)
{
    req->id = ++s->next_id + 1;       /* ids 0 and 1 are reserved by the map */
    return prt_map_put(&s->reqs, req->id, req);
}

void ppt_req_unregister(ppt_state_t *s, plait_request_t req)
{
    if (req->placed) {   /* the transport must stop writing into buf first */
        ptl_tl_t *tl = s->tl_of[req->world];
        tl->ops->unexpose(tl, req->world, req->id);
        req->placed = 0;
    }
    if (req->id) {
        prt_map_del(&s->reqs, req->id);
        req->id = 0;
    }
}

/* The pass may complete any thread's requests, failed ones too: their
 * details go to the requests, not to this thread's plait_last_error. */
int ppt_progress_locked(ppt_state_t *s)
{
    int n = 0, err_side = prt_err_divert();
    plait_request_t r, next;
    atomic_store_explicit(&s->passes, atomic_load_explicit(&s->passes, memory_order_relaxed) + 1,
                          memory_order_relaxed);   /* (the lock is held: no read-modify-write) */
    for (int i = 0; i < s->ntl; i++) {
        n += s->tls[i]->ops->progress(s->tls[i], ppt_rx_frame, s);
        if (s->tls[i]->ops->zc_reap)
            n += s->tls[i]->ops->zc_reap(s->tls[i], ppt_zc_done, s);
    }
    if (s->get_head)
        n += ppt_get_progress(s);
    if (s->ntxq)
        n += ppt_tx_flush_locked(s);
    for (r = s->coop_head; r; r = next) {
        next = r->next;
        n += ppt_coop_progress(s, r);
    }
    for (r = s->coll_head; r; r = next) {
        next = r->next;
        r->progress(r);
        if (atomic_load_explicit(&r->done, memory_order_acquire)) {
            ppt_coll_unlisted_locked(s, r);
            if (r->prev) r->prev->next = r->next; else s->coll_head = r->next;
            if (r->next) r->next->prev = r->prev;
            r->prev = r->next = NULL;
            n++;
        }
    }
    if (s->probes_due)   /* (after the transports: sends from here, not from inside rx) */
        ppt_probe_answer_locked(s);
    prt_err_undivert(err_side);
    return n;
}

/* "world" and its size, or the communicator's id, size and first members
 * by world rank (the id alone tells a user nothing about which it is). */
const char *ppt_comm_label(plait_comm_t c, char *buf, size_t len)
{
    ppt_state_t *s = ppt_get();
    size_t at;
    if (s && c == s->world) {
        snprintf(buf, len, "world (%d rank%s)", c->size, c->size == 1 ? "" : "s");
        return buf;
    }
    if (!c || !c->world_of) {
        snprintf(buf, len, "(freed)");
        return buf;
    }
    at = (size_t)snprintf(buf, len, "0x%llx (%d rank%s, world rank%s", (unsigned long long)c->ctx,
                          c->size, c->size == 1 ? "" : "s", c->size == 1 ? "" : "s");
    for (int i = 0; i < c->size && i < 8 && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%d", i ? "," : " ", c->world_of[i]);
    if (at < len)
        snprintf(buf + at, len - at, "%s)", c->size > 8 ? ",..." : "");
    return buf;
}

/* Whether r is a collective or one of a collective's own messages (on the
 * communicator's collective context), whose tag tells a user nothing. */
static int req_of_collective(plait_request_t r)
{
    return r->kind == PPT_REQ_COLL || (r->comm && r->mq == r->comm->cmq);
}

/* What a request waits for, for timeout and peer-death messages. */
static void wait_describe(plait_request_t r, char *out, size_t len)
{
    char cb[112], pb[32], tb[32];
    const char *cl = ppt_comm_label(r->comm, cb, sizeof cb);
    snprintf(pb, sizeof pb, r->peer == PLAIT_ANY_SOURCE ? "any rank" : "rank %d", r->peer);
    snprintf(tb, sizeof tb, r->tag == PLAIT_ANY_TAG ? "any tag" : "tag %d", r->tag);
    if (req_of_collective(r))
        snprintf(tb, sizeof tb, "of this collective");
    if (r->kind == PPT_REQ_RECV)
        snprintf(out, len, "a message from %s (%s) on communicator %s", pb, tb, cl);
    else if (r->kind == PPT_REQ_SEND)
        snprintf(out, len, "%s to receive a %zu-byte message (%s) on communicator %s", pb, r->len,
                 tb, cl);
    else {
        char open[192] = "";
        ppt_state_t *st = ppt_get();
        int in_world = st && r->comm == st->world;
        if (r->wait_peers)
            r->wait_peers(r, open, sizeof open);
        /* the ranks in `open` are numbered in the communicator, not the world */
        snprintf(out, len, "the other ranks of communicator %s in %s%s%s%s", cl,
                 r->what ? r->what : "a collective", open[0] ? "; still open: " : "", open,
                 open[0] && !in_world ? " (ranks of that communicator)" : "");
    }
}

int ppt_peer_alive(ppt_state_t *s, int world)
{
    ptl_tl_t *tl = s->tl_of ? s->tl_of[world] : NULL;
    int rc = tl ? tl->ops->peer_alive(tl, world) : PLAIT_OK;
    /* A rank of this host carried by udp or tcp (PLAIT_TRANSPORT forced) is
     * still watched the shm transport's way (its process): otherwise its
     * death shows only once a connection to it gives up, or never where
     * none was open (a launcher that leaves survivors running). */
    if (rc == PLAIT_OK && tl && tl != &s->shm && s->shm.ops && s->shm.ops->peer_alive)
        rc = s->shm.ops->peer_alive(&s->shm, world);
    return rc;
}

/* PLAIT_ERR_PEER if a rank the request depends on has died. A wildcard
 * receive depends on every member. */
static int wait_check_peers(ppt_state_t *s, plait_request_t r)
{
    if (r->call && r->comm && r->kind != PPT_REQ_COLL) {   /* (a schedule: its check_peers) */
        PRT_CHECK(ppt_coll_noticed(r->comm, r->call));   /* a peer failed the call? */
        PRT_CHECK(ppt_coll_diverged(r->comm, r->tag, 0));
    }
    if (r->check_peers)
        return r->check_peers(r);
    if (r->world >= 0)
        return ppt_peer_alive(s, r->world);
    for (int i = 0; r->comm && i < r->comm->size; i++)
        PRT_CHECK(ppt_peer_alive(s, r->comm->world_of[i]));
    return PLAIT_OK;
}

/* Whether the dead-peer checks are due (every PPT_ALIVE_CHECK_NS of
 * waiting, whichever wait or test loop looks); marks them done. */
static int alive_check_due(ppt_state_t *s, uint64_t now)
{
    if (now - s->last_alive_ns <= PPT_ALIVE_CHECK_NS)
        return 0;
    s->last_alive_ns = now;
    return 1;
}

/* wait_check_peers; on a failure, one more progress pass first: the
 * request's last frames may still be in the ring (or the failure completed
 * it), so the caller reports a completed request's own result. */
static int wait_checked(ppt_state_t *s, plait_request_t req)
{
    int rc = wait_check_peers(s, req);
    if (rc != PLAIT_OK)
        ppt_progress_locked(s);
    return rc;
}

int ppt_quiesce_locked(ppt_state_t *s, double timeout_s)
{
    prt_backoff_t b;
    prt_backoff_start(&b, timeout_s);
    for (;;) {
        int busy = 0;
        ppt_progress_locked(s);
        for (int i = 0; i < s->ntl; i++)
            if (s->tls[i]->ops->flush)
                busy |= s->tls[i]->ops->flush(s->tls[i]);
        if (!busy && s->ntxq == 0)
            return PLAIT_OK;
        if (prt_backoff_expired(&b, prt_now_ns()))
            return prt_err(PLAIT_ERR_TIMEOUT, "plait_finalize: could not deliver the last frames "
                           "within %.0f s", timeout_s);
        sched_yield();
    }
}

static int wait_fail(plait_request_t r, int rc, const char *fn, double waited, double stalled)
{
    char what[512], cause[256];
    int coll = req_of_collective(r);
    wait_describe(r, what, sizeof what);
    if (rc == PLAIT_ERR_TIMEOUT && stalled >= 0)   /* data had moved: the stall is the limit */
        return prt_err(rc, "%s: timed out: nothing moved with that rank for %.1f s "
                       "(PLAIT_TIMEOUT; %.1f s in all) waiting for %s", fn, stalled, waited, what);
    if (rc == PLAIT_ERR_TIMEOUT)   /* mismatched collectives end here too (coll/util.c) */
        return prt_err(rc, "%s: timed out after %.1f s (PLAIT_TIMEOUT) waiting for %s%s", fn,
                       waited, what, coll ? "; a rank that passed a different collective, "
                                            "datatype or operator causes this too" : "");
    snprintf(cause, sizeof cause, "%s", prt_err_text());
    return prt_err(rc, "%s: %s while waiting for %s", fn, cause, what);
}

/* Whether req may wait on a rank of another host (tcp or udp). Read
 * without the lock (it only picks how to spin): another thread's progress
 * may set req->world (an ANY_SOURCE receive matched), so it is read once,
 * atomically, and bounds-checked. */
static int wait_on_network(const ppt_state_t *s, plait_request_t req)
{
    int world = __atomic_load_n(&req->world, __ATOMIC_RELAXED);
    if (!s->tcp.ops && !s->udp.ops)
        return 0;
    if (req->kind == PPT_REQ_COLL || world < 0 || world >= s->job.size)
        return 1;
    return s->tl_of[world] && s->tl_of[world] != &s->shm;
}

/*
 * The spin stage of a wait on another host's rank: a pause loop while such
 * waits end within the spin time (a fast network, dedicated cores: yielding
 * there cost 3 us of a 9 us loopback latency on 16 cores), sched_yield once
 * they typically last over twice as long, until they drop below it again
 * (hysteresis: yielding itself shortens the waits). The peer's packets are delivered by the
 * kernel (softirq) on some CPU of this host, possibly this one, and a pause
 * loop keeps that work off it: on the namespace testbed (two "hosts" on 2
 * cores) 8-byte latency was 43 us over udp and 33 us over tcp pausing,
 * 21 and 12 us yielding (Open MPI's TCP BTL: 10.5 us with
 * mpi_yield_when_idle, 4 ms without).
 */
static int wait_spin_yields(const ppt_state_t *s, plait_request_t req)
{
    return atomic_load_explicit(&s->net_wait_yield, memory_order_relaxed) &&
           wait_on_network(s, req);
}

/* Feeds the average that wait_spin_yields follows (1/8 weight per wait). */
static void wait_account(ppt_state_t *s, plait_request_t req, uint64_t start_ns)
{
    uint64_t spin_ns = (uint64_t)s->cfg.spin_us * 1000;
    if (!wait_on_network(s, req))
        return;
    s->net_wait_ns = s->net_wait_ns - s->net_wait_ns / 8 + (prt_now_ns() - start_ns) / 8;
    if (s->net_wait_ns > 2 * spin_ns)
        atomic_store_explicit(&s->net_wait_yield, 1, memory_order_relaxed);
    else if (s->net_wait_ns < spin_ns)
        atomic_store_explicit(&s->net_wait_yield, 0, memory_order_relaxed);
}

/* One turn's pause (the lock dropped); 1 when it was a mere pause of the
 * spinning stage, after which the loop may skip its clock reads a while. */
static int wait_backoff(ppt_state_t *s, const prt_backoff_t *b, uint64_t now,
                        plait_request_t req)
{
    switch (prt_backoff_stage(b, now, s->cfg.spin_us, s->cfg.yield_us)) {
    case 0:
        if (!wait_spin_yields(s, req)) {
            prt_cpu_relax();
            return 1;
        }
        sched_yield();
        break;
    case 1:
        sched_yield();
        break;
    default:
        /* TCP data does not bump the futex: poll its sockets every millisecond;
         * UDP engines do bump it, the bound only covers a wake racing the sleep */
        if (s->shm.ops)
            ptl_shm_sleep(&s->shm, s->tcp.ops || s->udp.ops ? 1000 : PPT_SLEEP_US, &req->done);
        break;
    }
    return 0;
}

static int req_done(plait_request_t r)
{
    return atomic_load_explicit(&r->done, memory_order_acquire);
}

/* The request's result, its detail made this thread's last error, led by
 * the function that reports it where the detail does not name one (a
 * truncation found while matching, in whichever call progressed). */
static int req_result(plait_request_t req, const char *fn)
{
    if (req->rc == PLAIT_OK || !req->why[0])
        return req->rc;
    if (strncmp(req->why, "plait_", 6) == 0)
        return prt_err(req->rc, "%s", req->why);
    return prt_err(req->rc, "%s: %s", fn, req->why);
}

/*
 * Between hosts PLAIT_TIMEOUT is how long a point-to-point wait may go while
 * nothing moves between this rank and its peer: a send or a receive naming
 * a rank of another host extends its deadline by the timeout each time it
 * runs out while the transport says data moved with that peer since the
 * last look. A large message over a slow link so completes on both sides
 * instead of timing out in the middle (where a sender that had handed over
 * every byte reported success and the receive lost the message), and so
 * does a send whose go-ahead (CTS) queues behind the peer's own bulk data;
 * a stalled peer still ends the wait one timeout after the data stopped.
 * Not extended: a receive from any source, a withdrawal's wait
 * (send_withdraw), collectives, and everything inside a host.
 */
static int wait_moving(const ppt_state_t *s, plait_request_t req, uint64_t *mark)
{
    int world = req->world;
    const ptl_tl_t *tl;
    if (world < 0 || world >= s->job.size || !(tl = s->tl_of[world]) || !tl->ops->moved)
        return 0;
    /* a collective's own messages too: coll/pair.c waits on them directly */
    if ((req->kind != PPT_REQ_RECV && req->kind != PPT_REQ_SEND) || req->withdrawing ||
        req_of_collective(req))
        return 0;
    *mark = tl->ops->moved((ptl_tl_t *)tl, world);
    return 1;
}

/* Samples the transport's count of what moved with req's peer: when it
 * changed since *mark, data moved by now (*moved_ns). Sampled every
 * PPT_ALIVE_CHECK_NS of waiting and at the deadline, so the wait ends one
 * PLAIT_TIMEOUT after the last movement seen, give or take that interval.
 * (Sampled at the deadline only, a message that moved early in a window
 * bought the whole next window: a black-box test saw udp waits end after
 * twice PLAIT_TIMEOUT.) */
static void wait_moved(const ppt_state_t *s, plait_request_t req, uint64_t *mark,
                       uint64_t *moved_ns, uint64_t now)
{
    uint64_t m;
    if (wait_moving(s, req, &m) && m != *mark) {
        *mark = m;
        *moved_ns = now;
    }
}

int ppt_wait_locked(ppt_state_t *s, plait_request_t req, const char *fn)
{
    return ppt_wait_for_locked(s, req, fn, s->cfg.timeout_s);
}

/* While a wait only spins (pauses of the first PLAIT_WAIT_SPIN_US), it reads
 * the clock every this many turns: its deadline, checks and stages move by
 * a few pauses, and a clock read cost about as much as the turn itself
 * (a tenth of a short non-blocking allreduce's start-and-wait). */
#define PPT_WAIT_CLOCK_TURNS 4

/* A wait's progress pass, unless the request is done already: what it did. */
static int wait_pass(ppt_state_t *s, plait_request_t req)
{
    return req_done(req) ? 0 : ppt_progress_locked(s);
}

/* (work: what the caller's pass just before found; the loop makes its next
 * pass at the end of each turn) */
static int wait_loop_locked(ppt_state_t *s, plait_request_t req, const char *fn, double timeout_s,
                            int work)
{
    prt_backoff_t b;
    int backed_off = 0;   /* only waits that had to wait feed the average */
    /* turns left to spin without reading the clock; the first ones too (the
     * wait's start is its first clock read, a few pauses late), unless the
     * spinning stage yields (a wait on another host: wait_spin_yields) */
    int unclocked = wait_spin_yields(s, req) ? 0 : PPT_WAIT_CLOCK_TURNS - 1, started = 0;
    uint64_t mark = 0, moved_ns = 0, timeout_ns = (uint64_t)(timeout_s * 1e9);
    int marked = timeout_s > 0 && wait_moving(s, req, &mark);   /* no deadline: no need */
    for (;; work = wait_pass(s, req)) {
        uint64_t now;
        if (req_done(req)) {
            if (backed_off)
                wait_account(s, req, b.start_ns);
            return req_result(req, fn);
        }
        if (!work && unclocked > 0) {
            unclocked--;
            pthread_mutex_unlock(&s->lock);
            prt_cpu_relax();
            pthread_mutex_lock(&s->lock);
            continue;
        }
        now = prt_now_ns();
        if (!started) {
            prt_backoff_start_at(&b, timeout_s, now);
            started = 1;
        }
        if (work)
            prt_backoff_progress(&b, now);
        if (alive_check_due(s, now)) {
            int rc = wait_checked(s, req);
            if (rc != PLAIT_OK)
                return req_done(req) ? req_result(req, fn)
                                     : wait_fail(req, rc, fn, (now - b.start_ns) * 1e-9, -1);
            if (marked)
                wait_moved(s, req, &mark, &moved_ns, now);
        }
        if (prt_backoff_expired(&b, now)) {
            if (marked)
                wait_moved(s, req, &mark, &moved_ns, now);
            if (!moved_ns || now - moved_ns >= timeout_ns)
                return wait_fail(req, PLAIT_ERR_TIMEOUT, fn, (now - b.start_ns) * 1e-9,
                                 moved_ns ? (now - moved_ns) * 1e-9 : -1);
            b.deadline_ns = moved_ns + timeout_ns;   /* data moved: not stalled */
        }
        unclocked = 0;
        if (req->sleep && prt_backoff_stage(&b, now, s->cfg.spin_us, s->cfg.yield_us) >= 2) {
            req->sleep(req);
        } else {
            pthread_mutex_unlock(&s->lock);
            if (wait_backoff(s, &b, now, req))
                unclocked = PPT_WAIT_CLOCK_TURNS - 1;
            pthread_mutex_lock(&s->lock);
        }
        backed_off = 1;
    }
}

/* A request its first pass completes (the peers were there first: a
 * non-blocking collective's wait, mostly) returns before the wait's clock
 * reads and its count of waiters, which the progress thread polls. */
int ppt_wait_for_locked(ppt_state_t *s, plait_request_t req, const char *fn, double timeout_s)
{
    int rc, work = wait_pass(s, req);
    if (req_done(req))
        return req_result(req, fn);
    ppt_waiting(s, 1);
    rc = wait_loop_locked(s, req, fn, timeout_s, work);
    ppt_waiting(s, -1);
    return rc;
}

/* ------------------------------------------------------------- public API */

/* r is NULL or a live request; a freed one (still marked, see magic) is
 * PLAIT_ERR_STATE, anything else PLAIT_ERR_ARG. The message names it
 * reqs[i] (i >= 0) or *req (i < 0); it is formatted only on failure. */
static int req_live(plait_request_t r, const char *fn, int i)
{
    char what[32] = "*req";
    if (!r || r->magic == PPT_REQ_MAGIC)
        return PLAIT_OK;
    if (i >= 0)
        snprintf(what, sizeof what, "reqs[%d]", i);
    if (r->magic == PPT_REQ_DEAD)
        return prt_err(PLAIT_ERR_STATE, "%s: %s was freed (plait_wait and a successful "
                       "plait_test free a request and set the handle to NULL)", fn, what);
    return prt_err(PLAIT_ERR_ARG, "%s: %s is not a live request (completed or freed?)", fn, what);
}

static int req_check(plait_request_t *req, const char *fn)
{
    if (!req)
        return prt_err(PLAIT_ERR_ARG, "%s: req is NULL", fn);
    return req_live(*req, fn, -1);
}

/* Frees a completed request for wait/test, under the lock: a collective's
 * destroy needs it (a failed schedule withdraws its unfinished transfers as
 * it is freed, sched_destroy, and a withdrawal makes progress passes), and
 * both callers hold it already (taking it again cost a non-blocking 8-byte
 * allreduce's start-and-wait a fifth of its time). */
static void req_finish_locked(plait_request_t *req, plait_status_t *status)
{
    if (status)
        *status = (*req)->st;
    ppt_req_free(*req);
    *req = NULL;
}

static void status_empty(plait_status_t *status)
{
    if (status) {
        status->source = PLAIT_ANY_SOURCE;
        status->tag = PLAIT_ANY_TAG;
        status->bytes = 0;
    }
}

/* A plait_test loop looks at what a wait looks at, as often (every
 * PPT_ALIVE_CHECK_NS): a dead peer, a peer's failure of the collective call
 * (which completes the request with it), ranks gone another way. Without it
 * such a loop spun for ever. No deadline: a loop has no start to count it
 * from. */
static int test_check_peers(ppt_state_t *s, plait_request_t req)
{
    int rc;
    if (!alive_check_due(s, prt_now_ns()) || (rc = wait_checked(s, req)) == PLAIT_OK)
        return PLAIT_OK;
    return req_done(req) ? PLAIT_OK : wait_fail(req, rc, "plait_test", 0, -1);
}

int plait_test(plait_request_t *req, int *done, plait_status_t *status)
{
    ppt_state_t *s;
    int rc;
    if (!(s = ppt_enter(&rc, "plait_test")))
        return rc;
    PRT_CHECK(req_check(req, "plait_test"));
    if (!done)
        return prt_err(PLAIT_ERR_ARG, "plait_test: done is NULL");
    if (!*req) {
        *done = 1;
        status_empty(status);
        return PLAIT_OK;
    }
    pthread_mutex_lock(&s->lock);
    if (!req_done(*req))
        ppt_progress_locked(s);
    rc = req_done(*req) ? PLAIT_OK : test_check_peers(s, *req);
    /* (not done: a dead peer, the request stays valid, as plait_wait leaves it) */
    if ((*done = req_done(*req)) != 0) {
        rc = req_result(*req, "plait_test");
        req_finish_locked(req, status);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int plait_wait(plait_request_t *req, plait_status_t *status)
{
    ppt_state_t *s;
    int rc;
    if (!(s = ppt_enter(&rc, "plait_wait")))
        return rc;
    PRT_CHECK(req_check(req, "plait_wait"));
    if (!*req) {
        status_empty(status);
        return PLAIT_OK;
    }
    pthread_mutex_lock(&s->lock);
    rc = ppt_wait_locked(s, *req, "plait_wait");
    if (req_done(*req))     /* (else a timeout or dead peer: the request stays valid) */
        req_finish_locked(req, status);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int plait_waitall(int n, plait_request_t reqs[], plait_status_t statuses[])
{
    ppt_state_t *s;
    int rc, first = PLAIT_OK;
    char first_text[600];
    if (!(s = ppt_enter(&rc, "plait_waitall")))
        return rc;
    if (n < 0 || (n > 0 && !reqs))
        return prt_err(PLAIT_ERR_ARG, "plait_waitall: n = %d with reqs %s", n, reqs ? "set" : "NULL");
    for (int i = 0; i < n; i++)
        PRT_CHECK(req_live(reqs[i], "plait_waitall", i));
    for (int i = 0; i < n; i++) {
        char detail[512];
        rc = plait_wait(&reqs[i], statuses ? &statuses[i] : NULL);
        if (rc == PLAIT_OK)
            continue;
        snprintf(detail, sizeof detail, "%s", prt_err_text());
        /* A timeout or a dead peer returns at once and wins over an earlier
         * request's own failure: the caller must learn that reqs[i..] are
         * still posted (the earlier one, e.g. a truncation, is freed). */
        if (rc == PLAIT_ERR_TIMEOUT || rc == PLAIT_ERR_PEER) {
            if (first != PLAIT_OK)
                return prt_err(rc, "plait_waitall: reqs[%d]: %s (an earlier request failed "
                               "with %s)", i, detail, plait_strerror(first));
            return prt_err(rc, "plait_waitall: reqs[%d]: %s", i, detail);
        }
        if (first == PLAIT_OK) {
            first = rc;
            snprintf(first_text, sizeof first_text, "plait_waitall: reqs[%d]: %s", i, detail);
        }
    }
    if (first != PLAIT_OK)   /* (a later request's failure set another message) */
        return prt_err(first, "%s", first_text);
    return first;
}
