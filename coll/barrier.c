/*
 * barrier.c -- dissemination barrier (Hensgen, Finkel, Manber).
 *
 * Schedule for n ranks, rank r: in round k = 0, 1, ..., ceil(log2 n) - 1 send
 * an empty message to (r + 2^k) mod n and receive one from (r - 2^k) mod n.
 * After round k every rank has heard, directly or through others, from the
 * 2^(k+1) - 1 ranks before it, so after the last round from all n - 1. Works
 * for any n (no power-of-two padding), ceil(log2 n) rounds of one message.
 */
#include "config.h"

#include "coll/pcoll.h"

/* Builds and starts the barrier in sc; storage: see pcoll_sched_start_locked. */
static int barrier_build(pcoll_sched_t *sc, plait_comm_t comm, const char *what,
                         plait_request_t storage, plait_request_t *req)
{
    int n = comm->size;
    if (!sc->tag_set)
        sc->sig = PCOLL_BARRIER_SIG;
    for (int d = 1; d < n; d <<= 1) {
        pcoll_sched_add(sc, (comm->rank + d) % n, 1, NULL, 0);
        pcoll_sched_add(sc, (comm->rank - d % n + n) % n, 0, NULL, 0);
        pcoll_sched_end_round(sc);
    }
    return pcoll_sched_start_locked(sc, what, storage, req);
}

static int barrier_start(ppt_state_t *s, plait_comm_t comm, const char *what,
                         plait_request_t *req)
{
    int rounds = 0;
    pcoll_sched_t *sc;
    for (int d = 1; d < comm->size; d <<= 1)
        rounds++;
    PRT_CHECK(pcoll_sched_new(s, comm, rounds, 2 * rounds, &sc));
    return barrier_build(sc, comm, what, NULL, req);
}

int plait_ibarrier(plait_comm_t comm, plait_request_t *req)
{
    ppt_state_t *s;
    int rc;
    if (!(s = ppt_enter(&rc, "plait_ibarrier")))
        return rc;
    PRT_CHECK(ppt_comm_check(comm, "plait_ibarrier"));
    if (!req)   /* counted and told, as every collective's refusal (coll/util.c) */
        return pcoll_refuse(s, comm, prt_err(PLAIT_ERR_ARG, "plait_ibarrier: req is NULL"));
    *req = NULL;
    pthread_mutex_lock(&s->lock);
    comm->coll_calls++;   /* (a peer's refusal names calls by this count: pt2pt/notice.c) */
    if (pcoll_area_nb_use_locked(s, comm, &(pcoll_args_t){.coll = PCOLL_BARRIER})) {
        comm->coll_seq++;   /* an area call takes its number too (coll/api.c coll_run) */
        s->coll_stats[PCOLL_ST_AREA_NB]++;
        rc = pcoll_area_start_locked(s, comm, &(pcoll_args_t){.coll = PCOLL_BARRIER},
                                     "plait_ibarrier", req);
    } else {
        s->coll_stats[PCOLL_ST_SCHED_NB]++;
        rc = barrier_start(s, comm, "plait_ibarrier", req);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int pcoll_barrier_locked(ppt_state_t *s, plait_comm_t comm, const char *what, int tag)
{
    pcoll_sched_t sc;               /* blocking: schedule and request on the stack */
    struct plait_request storage;
    plait_request_t req = NULL;
    int rc;
    pcoll_sched_init(&sc, s, comm);
    if (tag >= 0) {
        sc.tag = tag;
        sc.tag_set = 1;
    }
    rc = barrier_build(&sc, comm, what, &storage, &req);
    if (rc == PLAIT_OK) {
        rc = ppt_wait_locked(s, req, what);
        ppt_cancel_locked(s, req);
        ppt_req_free(req);
    }
    return rc;
}

int plait_barrier(plait_comm_t comm)
{
    ppt_state_t *s;
    int rc;
    if (!(s = ppt_enter(&rc, "plait_barrier")))
        return rc;
    PRT_CHECK(ppt_comm_check(comm, "plait_barrier"));
    pthread_mutex_lock(&s->lock);
    comm->coll_calls++;   /* (a peer's refusal names calls by this count: pt2pt/notice.c) */
    comm->coll_blocking = comm->coll_calls;   /* (running: pt2pt/probe.c) */
    if (pcoll_area_use_locked(s, comm, &(pcoll_args_t){.coll = PCOLL_BARRIER}, "plait_barrier",
                              &rc)) {   /* flags on the shared area (coll/shm_small.c) */
        comm->coll_seq++;   /* an area call takes its number too (coll/api.c coll_run) */
        s->coll_stats[PCOLL_ST_AREA]++;
        if (rc == PLAIT_OK)
            rc = pcoll_area_run_locked(s, comm, &(pcoll_args_t){.coll = PCOLL_BARRIER},
                                       "plait_barrier");
    } else {
        s->coll_stats[PCOLL_ST_SCHED]++;
        rc = pcoll_barrier_locked(s, comm, "plait_barrier", -1);
    }
    comm->coll_blocking = 0;
    pthread_mutex_unlock(&s->lock);
    return rc;
}
