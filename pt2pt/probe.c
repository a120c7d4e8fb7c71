/*
 * probe.c -- a collective call stalled on some peers asks them where they
 * are, so that ranks that went different ways without any message showing it
 * fail at once instead of waiting for ever.
 *
 * Why: notice.c finds a divergence by the messages it left (one of another
 * call's kind under this call's number). Some leave none. A reduce where
 * rank 0 passed root 2 and the others root 1, on 4 ranks: rank 0 waits for
 * rank 1's part, rank 1 (the root in its view) for rank 3's, rank 3 for rank
 * 0's, rank 2 is done; nobody sent anything a check could see, and with
 * PLAIT_TIMEOUT at 0 (the default) every rank waited for ever.
 *
 * How: a schedule whose round has not moved for PCOLL_PROBE_NS (coll/sched.c)
 * sends each peer it still waits for in that round a PROBE, once per round:
 * an eager message on the collective context with the reserved tag
 * PPT_TAG_PROBE carrying [call][tag][low][kind]: its call's number in the
 * communicator's count, the schedule's tag (sequence number and hash of the
 * call's signature), and `low`, the oldest of this rank's collective calls
 * on the communicator not finished yet (every earlier one is). The peer keeps
 * it in a small ring (rx_eager hands it here, never to the matching queues)
 * and answers it at the end of its next progress pass with its own `low`
 * (kind ANSWER, tag 0; an answer is never answered). The checks, with the
 * dead-peer checks of a wait (every 100 ms):
 *   - ppt_coll_probed: a peer stalled in the schedule with this one's
 *     sequence number under another hash runs another kind of call (its
 *     collective, datatype, operator or root differ);
 *   - ppt_coll_passed: a peer whose `low` is past this call has finished it,
 *     and every message it sent in it went out before its probe or answer
 *     (one transport per peer delivers in order, as matching requires), so a
 *     receive of this call from it that is still unmatched will never be.
 * The rank that finds either fails the call and tells the others
 * (pcoll_fail_tell_locked). A healthy call never waits long enough to probe;
 * one that does (a slow peer, a big round on a slow link) costs a few small
 * messages per stalled round and fails nothing: a slow peer's tag is the same,
 * its `low` not past the call.
 *
 * Nothing on the wire is trusted: a probe shorter than its fields or with a
 * kind not known is dropped, its source checked against the communicator
 * when used; a ring of PPT_PROBE_RING entries per context bounds what a
 * flood can hold.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "pt2pt/ppt.h"

#define PPT_PROBE_RING 8
#define PPT_PROBE_ASK    1u
#define PPT_PROBE_ANSWER 2u

/* On the wire (host order: one job, one machine kind). An ASK goes on the
 * collective context of the communicator it is about; an ANSWER on the
 * world's (the answering rank may have freed that communicator: ctx and
 * rank say which it was and who answers in it). */
typedef struct ppt_probe_msg {
    uint32_t call;   /* the sender's call stalled (ASK) or asked about (ANSWER) */
    int32_t  tag;    /* the sender's schedule's tag (ASK), 0 (ANSWER) */
    uint32_t low;    /* the sender's oldest unfinished collective call on the communicator */
    uint32_t kind;   /* PPT_PROBE_ASK or PPT_PROBE_ANSWER */
    uint64_t ctx;    /* ANSWER: the communicator's collective context */
    int32_t  rank;   /* ANSWER: the sender's rank in it */
    int32_t  pad;
} ppt_probe_msg_t;

typedef struct ppt_probe {
    ppt_probe_msg_t m;
    int             src;    /* sender's rank in the communicator; -1: empty */
    int             world;  /* ... and in the world (checked against the communicator) */
    int             due;    /* an ASK not answered yet */
} ppt_probe_t;

/* Calls of comm before this one are finished here: the oldest collective
 * call still running on it -- the blocking one (on the shared area or the
 * two-rank exchange, the progress list does not hold it) or a schedule in
 * the progress list -- else the next one. */
static uint32_t probe_low(const ppt_state_t *s, plait_comm_t comm)
{
    uint32_t low = comm->coll_blocking ? comm->coll_blocking : comm->coll_calls + 1;
    for (plait_request_t r = s->coll_head; r; r = r->next)
        if (r->comm == comm && r->call && r->call < low &&
            !atomic_load_explicit(&r->done, memory_order_acquire))
            low = r->call;
    return low;
}

void ppt_coll_probe_locked(ppt_state_t *s, plait_comm_t comm, int peer, uint32_t call, int tag)
{
    ppt_probe_msg_t m = {call, tag, probe_low(s, comm), PPT_PROBE_ASK, 0, 0, 0};
    if (peer == comm->rank || peer < 0 || peer >= comm->size || !call)
        return;
    ppt_notice_sweep_locked(s, 0);
    (void)ppt_notice_send_locked(s, comm, peer, PPT_TAG_PROBE, &m, sizeof m);   /* (best effort) */
}

static void probe_keep(ppt_state_t *s, ppt_mq_t *mq, const ppt_probe_msg_t *m, int src, int world)
{
    ppt_probe_t *e;
    if (!mq->probes) {
        if (!(mq->probes = calloc(PPT_PROBE_RING, sizeof *mq->probes)))
            return;
        for (int i = 0; i < PPT_PROBE_RING; i++)
            mq->probes[i].src = -1;
    }
    e = &mq->probes[mq->probe_next++ % PPT_PROBE_RING];
    e->m = *m;
    e->src = src;
    e->world = world;
    e->due = m->kind == PPT_PROBE_ASK;
    s->probes_due |= e->due;
}

void ppt_probe_rx(ppt_state_t *s, ppt_mq_t *mq, int src, int world, const void *payload,
                  size_t len)
{
    ppt_probe_msg_t m;
    if (len != sizeof m || src < 0)
        return;
    memcpy(&m, payload, sizeof m);
    if (!m.call)
        return;
    if (m.kind == PPT_PROBE_ASK && mq)
        probe_keep(s, mq, &m, src, world);
    else if (m.kind == PPT_PROBE_ANSWER && m.rank >= 0 && (m.ctx & 1) &&
             (mq = ppt_mq_lookup(s, m.ctx, 0)) != NULL)   /* (none made for a stranger's ctx) */
        probe_keep(s, mq, &m, m.rank, world);
}

/* Who this rank is on the communicator of collective context ctx, and which
 * of its calls are finished: a live one's state, or every call of one freed
 * (its tombstone); NULL: none known (freed too long ago). */
static plait_comm_t probe_comm(const ppt_state_t *s, uint64_t ctx, uint32_t *low)
{
    for (plait_comm_t c = s->all_comms; c; c = c->all_next)
        if ((c->ctx | 1) == ctx) {
            *low = probe_low(s, c);
            return c;
        }
    for (plait_comm_t c = s->tombs; c; c = c->all_next)
        if ((c->ctx | 1) == ctx) {
            *low = UINT32_MAX;
            return c;
        }
    return NULL;
}

static void probe_answer(ppt_state_t *s, ppt_mq_t *mq)
{
    for (int i = 0; i < PPT_PROBE_RING; i++) {
        ppt_probe_t *e = &mq->probes[i];
        plait_comm_t c;
        ppt_probe_msg_t m = {0, 0, 0, PPT_PROBE_ANSWER, mq->ctx, 0, 0};
        if (!e->due)
            continue;
        e->due = 0;
        if (!(c = probe_comm(s, mq->ctx, &m.low)) || e->world < 0 || e->world >= s->job.size ||
            e->world == s->job.rank)
            continue;
        m.call = e->m.call;
        m.rank = c->rank;
        (void)ppt_notice_send_locked(s, s->world, e->world, PPT_TAG_PROBE, &m, sizeof m);
    }
}

void ppt_probe_answer_locked(ppt_state_t *s)
{
    s->probes_due = 0;   /* (first: an answer's send may make a progress pass) */
    ppt_notice_sweep_locked(s, 0);
    for (size_t i = 0; i < s->mqs.cap; i++)
        if (s->mqs.keys[i] > 1 && ((ppt_mq_t *)s->mqs.vals[i])->probes)
            probe_answer(s, s->mqs.vals[i]);
}

/* Whether entry e came from a member of comm other than this rank, as its
 * world rank says. */
static int probe_from_member(plait_comm_t comm, const ppt_probe_t *e)
{
    return e->src >= 0 && e->src < comm->size && e->src != comm->rank &&
           comm->world_of[e->src] == e->world;
}

int ppt_coll_probed(plait_comm_t comm, int tag)
{
    const ppt_probe_t *ring = comm->cmq ? comm->cmq->probes : NULL;
    for (int i = 0; ring && i < PPT_PROBE_RING; i++) {
        const ppt_probe_t *e = &ring[i];
        if (!probe_from_member(comm, e) || e->m.kind != PPT_PROBE_ASK || !e->m.tag ||
            e->m.tag == tag ||
            ((uint32_t)e->m.tag & 0xffffffu) != ((uint32_t)tag & 0xffffffu))
            continue;
        return ppt_coll_diverged_err(comm, e->src);
    }
    return PLAIT_OK;
}

int ppt_coll_passed(plait_comm_t comm, int peer, uint32_t call, int send)
{
    const ppt_probe_t *ring = comm->cmq ? comm->cmq->probes : NULL;
    for (int i = 0; ring && call && i < PPT_PROBE_RING; i++) {
        const ppt_probe_t *e = &ring[i];
        if (e->src != peer || !probe_from_member(comm, e) || e->m.low <= call)
            continue;
        return prt_err(PLAIT_ERR_ARG, "rank %d finished this call (its collective call %u) "
                       "without %s this rank's part%s: ranks passed different collectives, "
                       "counts or roots", peer, call, send ? "receiving" : "sending",
                       e->m.low == UINT32_MAX ? ", and freed the communicator" : "");
    }
    return PLAIT_OK;
}
