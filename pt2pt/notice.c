/*
 * notice.c -- a collective call that fails on one rank fails on all of them,
 * at once, with that rank's reason.
 *
 * Why: a collective call whose arguments fail the checks on one rank only
 * (a root out of range, a NULL buffer) returns PLAIT_ERR_ARG there at once,
 * while the other ranks wait for that rank's part; so does a rank whose
 * transfer showed a mismatch (a truncated message). With PLAIT_TIMEOUT at 0
 * (the default) the others waited for ever; with a timeout they reported it
 * without the cause, often naming a partner stuck behind the real one.
 *
 * How: the failing rank sends each other member of the communicator a
 * NOTICE, an eager message on the collective context with the reserved tag
 * PPT_TAG_NOTICE: the call's number in the communicator's count of
 * collective calls (plait_comm.coll_calls; a rank that refuses a call counts
 * it too, so every rank numbers its later calls alike), its error code and
 * text;
 * one per call (coll_told), and none for a failure a notice caused.
 * A notice never joins the matching queues: rx_eager hands it here on
 * arrival, into a small per-context ring (ppt_notice_rx). A wait inside a
 * collective looks at the ring with its dead-peer checks (every 100 ms, see
 * request.c wait_check_peers and coll/shm_small.c area_alive; schedules also
 * at each progress pass) and fails with the peer's code (PLAIT_ERR_NOMEM
 * where it ran out of memory, else PLAIT_ERR_ARG), naming the rank and
 * quoting it, when a notice names the call it waits in (request.call; 0: not
 * a collective call's wait). Notices of calls this rank finished, or failed
 * itself (every rank refuses the same bad call when all pass the same
 * argument), name no waiting call and are overwritten in the ring later;
 * nothing of them stays queued.
 *
 * Ranks that went different ways in one call without any of them seeing it
 * (another operator: the bytes still fit) are found here too, by the
 * messages they left: ppt_coll_diverged, at the end of this file.
 *
 * Nothing on the wire is trusted: a notice shorter than its call number and
 * code is dropped, a code other than those above reads PLAIT_ERR_ARG, its
 * text is cut to PPT_NOTICE_TEXT bytes and anything but printable ASCII in it
 * becomes '?'; its source is checked against the communicator when a wait
 * reads it.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "pt2pt/ppt.h"

#define PPT_NOTICE_RING 4     /* notices kept per context (the latest) */
#define PPT_NOTICE_TEXT 240   /* bytes of the failure's text sent */
#define PPT_NOTICE_HDR  8     /* call number, code (host order: one job, one machine kind) */

typedef struct ppt_notice {
    uint32_t call;   /* 0: empty */
    int      src;    /* sender's rank in the communicator */
    int      code;   /* what the call returns here (ppt_notice_code) */
    char     why[PPT_NOTICE_TEXT + 1];
} ppt_notice_t;

/* A notice on its way: its send request lives here (storage: neither
 * counted as the caller's nor freed by ppt_req_free), the payload after it. */
typedef struct ppt_notice_tx {
    struct ppt_notice_tx *next;
    struct plait_request  req;
    size_t                len;
    unsigned char         buf[PPT_NOTICE_HDR + PPT_NOTICE_TEXT];
} ppt_notice_tx_t;

/* Frees the notices sent (every one when all: at finalize, after the last
 * frames went out; one still unsent then is left to the process's end). */
void ppt_notice_sweep_locked(ppt_state_t *s, int all)
{
    ppt_notice_tx_t **pp = &s->notice_tx;
    while (*pp) {
        ppt_notice_tx_t *n = *pp;
        if (!atomic_load(&n->req.done) && !all) {
            pp = &n->next;
            continue;
        }
        *pp = n->next;
        if (atomic_load(&n->req.done)) {
            ppt_req_free(&n->req);
            free(n);
        }
    }
}

int ppt_notice_send_locked(ppt_state_t *s, plait_comm_t comm, int peer, int tag,
                           const void *msg, size_t len)
{
    ppt_notice_tx_t *n;
    plait_request_t r;
    if (len > sizeof n->buf || !(n = calloc(1, sizeof *n)))
        return PLAIT_ERR_NOMEM;
    memcpy(n->buf, msg, len);
    n->len = len;
    r = &n->req;
    if (ppt_isend_locked(s, comm, comm->cmq, n->buf, n->len, peer, tag, &r) != PLAIT_OK) {
        free(n);
        return PLAIT_ERR_NOMEM;
    }
    n->next = s->notice_tx;
    s->notice_tx = n;
    return PLAIT_OK;
}

void ppt_coll_notify_locked(ppt_state_t *s, plait_comm_t comm, uint32_t call, int code,
                            const char *why)
{
    unsigned char msg[PPT_NOTICE_HDR + PPT_NOTICE_TEXT];
    int32_t c = code;
    size_t tlen = strnlen(why, PPT_NOTICE_TEXT);
    if (comm->size < 2 || !call || comm->coll_told == call)
        return;
    comm->coll_told = call;
    ppt_notice_sweep_locked(s, 0);
    memcpy(msg, &call, sizeof call);
    memcpy(msg + sizeof call, &c, sizeof c);
    memcpy(msg + PPT_NOTICE_HDR, why, tlen);
    for (int p = 0; p < comm->size; p++)   /* (best effort: without memory the others */
        if (p != comm->rank)               /*  wait as before) */
            (void)ppt_notice_send_locked(s, comm, p, PPT_TAG_NOTICE, msg, PPT_NOTICE_HDR + tlen);
}

/* What a peer's failure makes of the call here: no memory there (or a
 * timeout, should a peer ever tell one) stays that; anything else (its
 * arguments, a mismatch it saw, a code not known) is PLAIT_ERR_ARG. */
static int ppt_notice_code(int32_t wire)
{
    return wire == PLAIT_ERR_TIMEOUT || wire == PLAIT_ERR_NOMEM ? wire : PLAIT_ERR_ARG;
}

void ppt_notice_rx(ppt_mq_t *mq, int src, const void *payload, size_t len)
{
    ppt_notice_t *e;
    uint32_t call;
    int32_t code;
    size_t tlen;
    if (len < PPT_NOTICE_HDR || src < 0)
        return;
    memcpy(&call, payload, sizeof call);
    memcpy(&code, (const char *)payload + sizeof call, sizeof code);
    if (call == 0)
        return;
    if (!mq->notices && !(mq->notices = calloc(PPT_NOTICE_RING, sizeof *mq->notices)))
        return;
    e = &mq->notices[mq->notice_next++ % PPT_NOTICE_RING];
    tlen = len - PPT_NOTICE_HDR < PPT_NOTICE_TEXT ? len - PPT_NOTICE_HDR : PPT_NOTICE_TEXT;
    memcpy(e->why, (const char *)payload + PPT_NOTICE_HDR, tlen);
    e->why[tlen] = '\0';
    for (size_t i = 0; i < tlen; i++)
        if (e->why[i] < 0x20 || e->why[i] > 0x7e)
            e->why[i] = '?';
    e->call = call;
    e->src = src;
    e->code = ppt_notice_code(code);
}

int ppt_coll_noticed(plait_comm_t comm, uint32_t call)
{
    ppt_mq_t *mq = comm->cmq;
    char cb[112];
    if (!call || !mq || !mq->notices)
        return PLAIT_OK;
    for (int i = 0; i < PPT_NOTICE_RING; i++) {
        const ppt_notice_t *e = &mq->notices[i];
        if (e->call != call || e->src >= comm->size || e->src == comm->rank)
            continue;
        comm->coll_told = call;   /* (failing on it, this rank does not echo it) */
        return prt_err(e->code, "rank %d of communicator %s failed this call (its "
                       "collective call %u there): \"%s\"", e->src,
                       ppt_comm_label(comm, cb, sizeof cb), call, e->why);
    }
    return PLAIT_OK;
}

/* Whether a message for the collective call with tag `tag` came from a rank
 * that runs another kind of call under the same number: a collective's tag is
 * its sequence number (low 24 bits) and a hash of its collective, datatype,
 * operator and root (coll/util.c pcoll_next_tag), the same on every rank that
 * makes the same call. A message in the unexpected queue with this call's
 * number and another hash (any message, for a call that sends none: the
 * shared area, any_tag) means the ranks went different ways; the call
 * would wait for ever for a message that never comes. Looked at with the
 * dead-peer checks (every 100 ms of waiting), so a healthy call never pays
 * for the walk. A hash collision (1 in 128) goes unseen: that call still
 * waits for PLAIT_TIMEOUT. */
int ppt_coll_diverged(plait_comm_t comm, int tag, int any_tag)
{
    uint32_t seq = (uint32_t)tag & 0xffffffu;
    for (const ppt_umsg_t *u = comm->cmq ? comm->cmq->unexp_head : NULL; u; u = u->next) {
        if (((uint32_t)u->tag >> 24) == PPT_TAG_LIFE_H || ((uint32_t)u->tag & 0xffffffu) != seq ||
            (!any_tag && u->tag == tag))
            continue;
        return ppt_coll_diverged_err(comm, u->src);
    }
    return PLAIT_OK;
}

int ppt_coll_diverged_err(plait_comm_t comm, int src)
{
    /* (short: a peer's notice quotes it inside a request's 256-byte detail) */
    return prt_err(PLAIT_ERR_ARG, "rank %d runs this call (its collective call %u here) as "
                   "another one: a different collective, datatype, operator or root, a "
                   "blocking call against a non-blocking one (never matched, as in MPI), or "
                   "counts that pick another algorithm", src, comm->coll_calls);
}
