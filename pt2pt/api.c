/*
 * api.c -- the pt2pt layer's instance (setup/teardown used by plait_init and
 * plait_finalize) and the public point-to-point calls with their argument
 * checks.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pt2pt/ppt.h"

enum { PPT_PHASE_NEVER = 0, PPT_PHASE_ACTIVE, PPT_PHASE_FINALIZED };

/* The one library instance: the C API has no handle to carry it. */
static ppt_state_t *ppt_inst;
static _Atomic int ppt_phase;

ppt_state_t *ppt_get(void)
{
    return atomic_load_explicit(&ppt_phase, memory_order_acquire) == PPT_PHASE_ACTIVE ? ppt_inst
                                                                                      : NULL;
}

ppt_state_t *ppt_enter(int *rc, const char *fn)
{
    int phase = atomic_load_explicit(&ppt_phase, memory_order_acquire);
    if (phase == PPT_PHASE_ACTIVE)
        return ppt_inst;
    *rc = prt_err(PLAIT_ERR_STATE, phase == PPT_PHASE_NEVER
                                       ? "%s: plait_init has not been called"
                                       : "%s: called after plait_finalize", fn);
    return NULL;
}

static int ppt_routes(ppt_state_t *s)
{
    prt_job_t *j = &s->job;
    if (s->cfg.transport == PRT_TRANSPORT_SHM && j->local_size < j->size)
        return prt_err(PLAIT_ERR_ARG, "PLAIT_TRANSPORT=shm, but %d of the %d ranks run on other "
                       "hosts", j->size - j->local_size, j->size);
    s->tl_of = calloc((size_t)j->size, sizeof *s->tl_of);
    s->txq = calloc((size_t)j->size, sizeof *s->txq);
    s->heads = calloc((size_t)j->size, sizeof *s->heads);
    s->early = calloc((size_t)j->size, sizeof *s->early);
    if (!s->tl_of || !s->txq || !s->heads || !s->early)
        return prt_err(PLAIT_ERR_NOMEM, "no memory for %d routes", j->size);
    if (s->tcp.ops) {
        for (int r = 0; r < j->size; r++)
            s->tl_of[r] = r == j->rank ? NULL : &s->tcp;
        s->tls[s->ntl++] = &s->tcp;
    }
    if (s->udp.ops) {
        for (int r = 0; r < j->size; r++)
            s->tl_of[r] = r == j->rank ? NULL : &s->udp;
        s->tls[s->ntl++] = &s->udp;
    }
    if (s->cfg.transport != PRT_TRANSPORT_TCP && s->cfg.transport != PRT_TRANSPORT_UDP)
        for (int i = 0; i < j->local_size; i++)
            if (j->local_peers[i] != j->rank)
                s->tl_of[j->local_peers[i]] = &s->shm;
    s->tls[s->ntl++] = &s->shm;
    for (int i = 0; i < s->ntl; i++)
        if (s->tls[i]->ops->rx_early_set)
            s->tls[i]->ops->rx_early_set(s->tls[i], ppt_rx_early, s);
    return PLAIT_OK;
}

static int ppt_world(ppt_state_t *s)
{
    int *world_of = malloc((size_t)s->job.size * sizeof(int));
    if (!world_of)
        return prt_err(PLAIT_ERR_NOMEM, "no memory for the world communicator");
    for (int i = 0; i < s->job.size; i++)
        world_of[i] = i;
    PRT_CHECK(ppt_comm_create(s, 2, s->job.rank, s->job.size, world_of, &s->world));
    snprintf(s->world->name, sizeof s->world->name, "world");
    return PLAIT_OK;
}

/* TCP (the single-path baseline) carries every pair when forced. */
static int ppt_needs_tcp(const ppt_state_t *s)
{
    return s->cfg.transport == PRT_TRANSPORT_TCP && s->job.size > 1;
}

/* The multipath UDP transport carries the ranks of other hosts (automatic:
 * it spreads each connection over the network's paths, where one TCP
 * connection is hashed onto one), or every pair when forced
 * (PLAIT_TRANSPORT=udp; loopback inside a host). */
static int ppt_needs_udp(const ppt_state_t *s)
{
    if (s->cfg.transport == PRT_TRANSPORT_UDP)
        return s->job.size > 1;
    return s->cfg.transport == PRT_TRANSPORT_AUTO && s->job.local_size < s->job.size;
}

/*
 * More ranks on this host than it has CPUs: a blocked call that busy-polls
 * holds the CPU the peer it waits for needs, so every collective round costs
 * a scheduler time slice (4 ranks on 2 cores: 8-byte allreduce 50 us spinning
 * 20 us first, 6 us yielding at once). Open MPI yields when oversubscribed
 * too. An explicit PLAIT_WAIT_SPIN_US wins.
 */
static void ppt_wait_policy(ppt_state_t *s)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (getenv("PLAIT_WAIT_SPIN_US") || cpus <= 0 || s->job.local_size <= cpus)
        return;
    prt_log(PRT_LOG_DEBUG, "%d ranks on %ld CPUs: blocked calls yield without spinning",
            s->job.local_size, cpus);
    s->cfg.spin_us = 0;
}

/* The ranks' CPU masks, for the placement of the library's threads
 * (runtime/affinity.c): a failure only leaves them where the rank runs. */
static void ppt_affinity_put(ppt_state_t *s)
{
    prt_affinity_own(&s->job);   /* the progress thread starts on these (async.c) */
    if (s->cfg.thread_cpu == PRT_THREAD_CPU_AUTO && prt_affinity_put(&s->job) != PLAIT_OK)
        prt_log(PRT_LOG_DEBUG, "thread placement: %s", prt_err_text());
}

static void ppt_affinity_gather(ppt_state_t *s)
{
    if (s->cfg.thread_cpu == PRT_THREAD_CPU_AUTO && prt_affinity_gather(&s->job) != PLAIT_OK)
        prt_log(PRT_LOG_DEBUG, "thread placement: %s", prt_err_text());
}

/* Bootstrap, shared-memory wiring (two fences: cards, then "all mapped"),
 * world communicator. */
static int ppt_setup(ppt_state_t *s)
{
    PRT_CHECK(prt_cfg_load(&s->cfg));
    prt_log_set_level(s->cfg.log_level);
    PRT_CHECK(prt_boot_init(&s->job, s->cfg.singleton_ok, s->cfg.timeout_s));
    prt_log_set_rank(s->job.rank);
    if (s->job.rank == 0)
        prt_cfg_warn_typos();   /* once per job, not once per rank */
    PRT_CHECK(prt_trace_start(s->cfg.trace, s->job.rank, s->job.tag));
    ppt_wait_policy(s);
    PRT_CHECK(ptl_shm_setup(&s->shm, &s->job, &s->cfg));
    if (ppt_needs_tcp(s))
        PRT_CHECK(ptl_tcp_setup(&s->tcp, &s->job, &s->cfg));
    if (ppt_needs_udp(s))
        PRT_CHECK(ptl_udp_setup(&s->udp, &s->job, &s->cfg, &s->shm));
    ppt_affinity_put(s);
    PRT_CHECK(prt_boot_commit_fence(&s->job));
    PRT_CHECK(prt_boot_read_key(&s->job));
    ppt_affinity_gather(s);
    PRT_CHECK(ptl_shm_connect(&s->shm, &s->job));
    if (s->udp.ops)
        PRT_CHECK(ptl_udp_connect(&s->udp));
    PRT_CHECK(prt_boot_fence(&s->job));
    PRT_CHECK(ptl_shm_verify(&s->shm));
    ptl_shm_unlink(&s->shm);
    PRT_CHECK(ppt_routes(s));
    PRT_CHECK(prt_map_init(&s->mqs, 64));
    PRT_CHECK(prt_map_init(&s->reqs, 1024));
    return ppt_world(s);
}

static void ppt_teardown(ppt_state_t *s)
{
    ppt_comm_destroy_all(s);
    for (int w = 0; s->txq && w < s->job.size; w++)
        while (s->txq[w].head) {
            ppt_tx_t *t = s->txq[w].head;
            s->txq[w].head = t->next;
            free(t);
        }
    if (s->tcp.ops)
        s->tcp.ops->fini(&s->tcp);
    if (s->udp.ops)
        s->udp.ops->fini(&s->udp);   /* stops its engines before the shm wake word goes */
    if (s->shm.ops)
        s->shm.ops->fini(&s->shm);
    prt_map_fini(&s->mqs);
    prt_map_fini(&s->reqs);
    free(s->tl_of);
    free(s->txq);
    free(s->heads);
    free(s->early);
}

/* The instance's lock spins a little before it sleeps (glibc's adaptive
 * mutex): the progress thread holds it for one pass at a time (a few us),
 * and a program thread coming back to plait_wait then should not pay a
 * futex sleep and wake-up for it. */
static void state_lock_init(pthread_mutex_t *m)
{
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
    pthread_mutexattr_t a;
    if (pthread_mutexattr_init(&a) == 0) {
        pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP);
        pthread_mutex_init(m, &a);
        pthread_mutexattr_destroy(&a);
        return;
    }
#endif
    pthread_mutex_init(m, NULL);
}

int ppt_init(void)
{
    ppt_state_t *s;
    int rc, phase = atomic_load(&ppt_phase);
    if (phase != PPT_PHASE_NEVER)
        return prt_err(PLAIT_ERR_STATE, phase == PPT_PHASE_ACTIVE
                                            ? "plait_init: already initialized"
                                            : "plait_init: called after plait_finalize (a process "
                                              "initializes once)");
    /* (aligned: the progress thread's counters have cache lines of their own) */
    s = aligned_alloc(_Alignof(ppt_state_t), sizeof *s);
    if (!s)
        return prt_err(PLAIT_ERR_NOMEM, "plait_init: no memory");
    memset(s, 0, sizeof *s);
    state_lock_init(&s->lock);
    rc = ppt_setup(s);
    if (rc != PLAIT_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", prt_err_text());
        ppt_teardown(s);
        prt_trace_stop();
        if (s->job.pmix)
            prt_boot_finalize(&s->job);
        free(s);
        return prt_err(rc, "plait_init: %s", why);
    }
    ppt_inst = s;
    atomic_store_explicit(&ppt_phase, PPT_PHASE_ACTIVE, memory_order_release);
    return PLAIT_OK;
}

/* The transport counters (udp), or the one line that says there are none. */
static void ppt_stats_print(ppt_state_t *s, FILE *f)
{
    if (s->coll_stats_print)
        s->coll_stats_print(s, f);
    if (s->udp.ops)
        ptl_udp_stats_print(&s->udp, f);
    else
        fprintf(f, "plait stats, rank %d: no multipath (udp) connections in this job\n", s->job.rank);
    fflush(f);
}

int ppt_fini(void)
{
    ppt_state_t *s = ppt_inst;
    int rc;
    if (s->cfg.stats)   /* (black-box report: without udp it printed nothing) */
        ppt_stats_print(s, stderr);
    atomic_store(&ppt_phase, PPT_PHASE_FINALIZED);
    ppt_teardown(s);
    prt_trace_stop();   /* the transports' threads have stopped */
    rc = prt_boot_finalize(&s->job);
    pthread_mutex_destroy(&s->lock);
    free(s);
    ppt_inst = NULL;
    return rc;
}

/* ------------------------------------------------------------- public API */

int plait_stats_print(FILE *f)
{
    ppt_state_t *s;
    int rc = PLAIT_OK;
    if (!(s = ppt_enter(&rc, "plait_stats_print")))
        return rc;
    if (!f)
        return prt_err(PLAIT_ERR_ARG, "plait_stats_print: f is NULL");
    clearerr(f);
    ppt_stats_print(s, f);   /* (it flushes f) */
    if (ferror(f))   /* a black-box test printed to /dev/full and got PLAIT_OK */
        return prt_err(PLAIT_ERR_ARG, "plait_stats_print: writing to f failed (%s)",
                       strerror(errno));
    return PLAIT_OK;
}

size_t plait_dtype_size(plait_dtype_t dt)
{
    switch (dt) {
    case PLAIT_BYTE: case PLAIT_INT8: case PLAIT_UINT8: return 1;
    case PLAIT_FLOAT16: case PLAIT_BFLOAT16: return 2;
    case PLAIT_INT32: case PLAIT_UINT32: case PLAIT_FLOAT32: return 4;
    case PLAIT_INT64: case PLAIT_UINT64: case PLAIT_FLOAT64: return 8;
    default: return 0;
    }
}

/* Checks the arguments shared by every pt2pt call; *bytes = message size. */
static int pt_check(const char *fn, const void *buf, size_t count, plait_dtype_t dt, int peer,
                    int tag, plait_comm_t comm, int recv, size_t *bytes)
{
    const char *pname = recv ? "source" : "dest";
    size_t esize = plait_dtype_size(dt);
    PRT_CHECK(ppt_comm_check(comm, fn));
    if (esize == 0)
        return prt_err(PLAIT_ERR_ARG, "%s: dt %d is not a plait_dtype_t", fn, (int)dt);
    if (!prt_buf_bytes(count, esize, 1, bytes))
        return prt_err(PLAIT_ERR_ARG, "%s: count %zu is larger than any buffer (a negative "
                       "count?)", fn, count);
    if (!buf && *bytes)
        return prt_err(PLAIT_ERR_ARG, "%s: buf is NULL with count %zu", fn, count);
    if ((peer < 0 || peer >= comm->size) && !(recv && peer == PLAIT_ANY_SOURCE))
        return prt_err(PLAIT_ERR_ARG, "%s: %s %d is out of range for a communicator of %d ranks",
                       fn, pname, peer, comm->size);
    if (tag < 0 && !(recv && tag == PLAIT_ANY_TAG))
        return prt_err(PLAIT_ERR_ARG, "%s: tag %d is invalid (0..PLAIT_TAG_MAX%s)", fn, tag,
                       recv ? " or PLAIT_ANY_TAG" : "");
    return PLAIT_OK;
}

/* A blocking call whose wait failed (rc): withdraws its request. PLAIT_OK
 * if the peer took the send meanwhile, else rc. A send waits for its
 * receiver to answer the withdrawal (pt2pt/proto.c send_withdraw): when that
 * took long the message says so, or "timed out after 3.0 s" would stand for
 * a call of 5 s. Only failed calls come here: no clock on the fast path. */
static int pt_withdraw(ppt_state_t *s, plait_request_t req, int rc)
{
    uint64_t t0 = prt_now_ns();
    char what[64];
    if (ppt_cancel_locked(s, req))
        return PLAIT_OK;
    snprintf(what, sizeof what, "for rank %d to answer the send's withdrawal", req->peer);
    prt_err_waited(rc, t0, what);
    return rc;
}

/* Starts a send or receive. A blocking one (internal) passes its own storage
 * in *req, waits, and withdraws the request if it did not complete. */
static int pt_start(const char *fn, void *buf, size_t count, plait_dtype_t dt, int peer, int tag,
                    plait_comm_t comm, int recv, plait_request_t *req, int internal)
{
    ppt_state_t *s;
    size_t bytes = 0;
    int rc = PLAIT_OK;
    if (!(s = ppt_enter(&rc, fn)))
        return rc;
    PRT_CHECK(pt_check(fn, buf, count, dt, peer, tag, comm, recv, &bytes));
    if (!req)
        return prt_err(PLAIT_ERR_ARG, "%s: req is NULL", fn);
    if (!internal)
        *req = NULL;
    pthread_mutex_lock(&s->lock);
    rc = recv ? ppt_irecv_locked(s, comm, comm->mq, buf, bytes, peer, tag, req)
              : ppt_isend_locked(s, comm, comm->mq, buf, bytes, peer, tag, req);
    if (rc == PLAIT_OK && internal) {
        rc = ppt_wait_locked(s, *req, fn);
        if (rc != PLAIT_OK)               /* (a completed request needs no withdrawal) */
            rc = pt_withdraw(s, *req, rc);
        ppt_req_free(*req);           /* the caller's storage: only its status is read */
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int plait_isend(const void *buf, size_t count, plait_dtype_t dt, int dest, int tag,
                plait_comm_t comm, plait_request_t *req)
{
    return pt_start("plait_isend", (void *)buf, count, dt, dest, tag, comm, 0, req, 0);
}

int plait_irecv(void *buf, size_t count, plait_dtype_t dt, int source, int tag, plait_comm_t comm,
                plait_request_t *req)
{
    return pt_start("plait_irecv", buf, count, dt, source, tag, comm, 1, req, 0);
}

int plait_send(const void *buf, size_t count, plait_dtype_t dt, int dest, int tag,
               plait_comm_t comm)
{
    struct plait_request storage;
    plait_request_t req = &storage;   /* lives until the call completes or cancels it */
    return pt_start("plait_send", (void *)buf, count, dt, dest, tag, comm, 0, &req, 1);
}

int plait_recv(void *buf, size_t count, plait_dtype_t dt, int source, int tag, plait_comm_t comm,
               plait_status_t *status)
{
    struct plait_request storage;
    plait_request_t req = &storage;
    int rc = pt_start("plait_recv", buf, count, dt, source, tag, comm, 1, &req, 1);
    if (status && (rc == PLAIT_OK || rc == PLAIT_ERR_TRUNCATE))
        *status = req->st;
    return rc;
}
