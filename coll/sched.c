/*
 * sched.c -- the schedule engine: a collective is a list of rounds of
 * non-blocking sends and receives on the communicator's collective context,
 * all tagged with the collective's sequence number, so several collectives may
 * be in flight on one communicator. The pt2pt progress loop calls
 * sched_progress; a failed transfer fails the collective.
 */
#include "config.h"

#include <stdlib.h>

#include "coll/pcoll.h"

int pcoll_sched_new(ppt_state_t *s, plait_comm_t comm, int maxrounds, int maxops,
                    pcoll_sched_t **out)
{
    pcoll_sched_t *sc = calloc(1, sizeof *sc);
    if (sc) {
        sc->round_end = calloc((size_t)maxrounds + 1, sizeof *sc->round_end);
        sc->ops = calloc((size_t)maxops + 1, sizeof *sc->ops);
        sc->inner = calloc((size_t)maxops + 1, sizeof *sc->inner);
    }
    if (!sc || !sc->round_end || !sc->ops || !sc->inner) {
        if (sc) {
            free(sc->round_end);
            free(sc->ops);
            free(sc->inner);
            free(sc);
        }
        return prt_err(PLAIT_ERR_NOMEM, "no memory for a collective schedule");
    }
    sc->s = s;
    sc->comm = comm;
    sc->capops = maxops;
    *out = sc;
    return PLAIT_OK;
}

void pcoll_sched_add(pcoll_sched_t *sc, int peer, int send, void *buf, size_t len)
{
    pcoll_op_t *op = &sc->ops[sc->nops++];
    op->peer = peer;
    op->send = send;
    op->buf = buf;
    op->len = len;
}

void pcoll_sched_end_round(pcoll_sched_t *sc)
{
    sc->round_end[sc->nrounds++] = sc->nops;
}

/* Frees the current round's requests (cancelling unfinished ones). */
static void sched_drop_inner(pcoll_sched_t *sc)
{
    for (int i = 0; i < sc->ninner; i++) {
        ppt_cancel_locked(sc->s, sc->inner[i]);
        ppt_req_free(sc->inner[i]);
        sc->inner[i] = NULL;
    }
    sc->ninner = 0;
}

static int sched_start_round(pcoll_sched_t *sc)
{
    int first = sc->round ? sc->round_end[sc->round - 1] : 0;
    for (int i = first; i < sc->round_end[sc->round]; i++) {
        pcoll_op_t *op = &sc->ops[i];
        plait_request_t *r = &sc->inner[sc->ninner];
        int rc = op->send ? ppt_isend_locked(sc->s, sc->comm, sc->comm->cmq, op->buf, op->len,
                                             op->peer, sc->tag, r)
                          : ppt_irecv_locked(sc->s, sc->comm, sc->comm->cmq, op->buf, op->len,
                                             op->peer, sc->tag, r);
        if (rc != PLAIT_OK)
            return rc;
        sc->ninner++;
    }
    return PLAIT_OK;
}

/* Advances as many rounds as have completed; completes req at the end. */
static int sched_progress(plait_request_t req)
{
    pcoll_sched_t *sc = req->coll;
    while (sc->round < sc->nrounds) {
        int rc = PLAIT_OK;
        for (int i = 0; i < sc->ninner; i++) {
            if (!atomic_load_explicit(&sc->inner[i]->done, memory_order_acquire))
                return 0;
            if (sc->inner[i]->rc != PLAIT_OK && rc == PLAIT_OK)
                rc = sc->inner[i]->rc;
        }
        sched_drop_inner(sc);
        if (rc == PLAIT_OK && ++sc->round < sc->nrounds)
            rc = sched_start_round(sc);
        if (rc != PLAIT_OK) {
            ppt_req_complete(sc->s, req, prt_err(rc == PLAIT_ERR_TRUNCATE ? PLAIT_ERR_ARG : rc,
                             "%s: a transfer failed (%s): do all ranks pass matching arguments?",
                             req->what, plait_strerror(rc)));
            return 1;
        }
    }
    ppt_req_complete(sc->s, req, PLAIT_OK);
    return 1;
}

static void sched_destroy(plait_request_t req)
{
    pcoll_sched_t *sc = req->coll;
    if (!sc)
        return;
    sched_drop_inner(sc);
    free(sc->round_end);
    free(sc->ops);
    free(sc->inner);
    free(sc);
    req->coll = NULL;
}

int pcoll_sched_start_locked(pcoll_sched_t *sc, const char *what, plait_request_t *out)
{
    ppt_state_t *s = sc->s;
    plait_request_t req = ppt_req_new(PPT_REQ_COLL, sc->comm, NULL);
    int rc;
    if (!req) {
        sc->round = sc->nrounds;
        free(sc->round_end); free(sc->ops); free(sc->inner); free(sc);
        return prt_err(PLAIT_ERR_NOMEM, "%s: no memory for a request", what);
    }
    req->coll = sc;
    req->what = what;
    req->peer = PLAIT_ANY_SOURCE;
    req->tag = PLAIT_ANY_TAG;
    req->progress = sched_progress;
    req->destroy = sched_destroy;
    sc->tag = (int)(sc->comm->coll_seq++ & PLAIT_TAG_MAX);
    rc = sc->nrounds ? sched_start_round(sc) : PLAIT_OK;
    if (rc != PLAIT_OK) {
        ppt_req_free(req);
        return rc;
    }
    if (!sched_progress(req)) {      /* not finished: the progress loop takes it on */
        req->next = s->coll_head;
        if (s->coll_head)
            s->coll_head->prev = req;
        s->coll_head = req;
    }
    *out = req;
    return PLAIT_OK;
}
