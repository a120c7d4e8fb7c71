/*
 * proto.c -- the point-to-point protocols.
 *
 *  eager  (len <= PLAIT_SHM_EAGER_LIMIT, and every send to oneself):
 *         EAGER frame with the payload. The receiver copies it straight from
 *         the ring into a posted buffer, or into an unexpected-message copy.
 *  rendezvous (larger, same host):
 *         sender  -> RTS {sender request id, buffer address, length}
 *         receiver, once matched, reads the data with the transport's get()
 *         (process_vm_readv: one copy), then -> FIN {sender id}; the send
 *         completes on FIN.
 *         Where get() is refused (ptrace rules, PLAIT_SHM_CMA=0) the receiver
 *         answers CTS {sender id, receiver id} and the sender streams DATA
 *         frames of at most one ring slot; the send completes when the last
 *         one is in the ring, the receive when the last one arrives.
 *         A transport with send_placed_zc may send large DATA frames from
 *         the user's buffer instead of copying them (PTL_PENDING); such a
 *         send completes once the transport reported every one of them
 *         (ppt_zc_done: acknowledged by the peer, or failed).
 *  rendezvous between hosts (a transport without get()), with
 *         PLAIT_NET_HEAD set: the RTS announces a HEAD frame that follows
 *         it at once with the first bytes (at most half the message), sent
 *         while the RTS travels; the receiver, once matched, exposes its
 *         buffer and answers CTS, and the sender streams DATA from the
 *         head's end. The handshake's round trip overlaps the head instead
 *         of idling the link. The receiver copies the head into place (or
 *         keeps it with an unexpected RTS until a receive matches).
 * Frames that cannot go now (ring full) wait in a per-peer FIFO, so order per
 * pair is kept: a HEAD frame is the next frame after its RTS. Every frame is
 * checked before use; unknown ids are dropped.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "pt2pt/ppt.h"

/* The largest HEAD frame a receiver takes. PLAIT_NET_HEAD sets the size,
 * 0 (none) by default: 64K keeps the link busy over the handshake's round
 * trip (about 20 us across a bridge of the 16-core machine, where 64 KiB
 * take about as long at 3 GB/s), and made one-way transfers faster there
 * (2-rank bcast 256-512 KiB 189-468 -> 169-294 us, 2 rounds), but
 * exchanges slower (alltoall 512 KiB-1 MiB 235-428 -> 288-491 us,
 * allreduce 512 KiB-1 MiB 480-793 -> 549-1034): with data flowing both
 * ways the link is busy anyway, and the head costs the receiver a copy
 * (and its buffering while unexpected). docs/PERFORMANCE.md, session 13.
 * Session 14, with the udp engine kicked before a bulk send: slower one-way
 * as well (bcast 256 KiB 92 -> 115 us), so it stays off. */
#define PPT_HEAD_MAX (1u << 20)

/* ------------------------------------------------------------ sending */

static void txq_push(ppt_state_t *s, int world, ppt_tx_t *t)
{
    ppt_txq_t *q = &s->txq[world];
    t->next = NULL;
    if (q->tail)
        q->tail->next = t;
    else {
        q->head = t;
        s->ntxq++;
    }
    q->tail = t;
}

static void txq_pop(ppt_state_t *s, int world)
{
    ppt_txq_t *q = &s->txq[world];
    ppt_tx_t *t = q->head;
    q->head = t->next;
    if (!q->head) {
        q->tail = NULL;
        s->ntxq--;
    }
    free(t);
}

/* Sends one frame now if the pair's FIFO is empty and the ring has room;
 * otherwise queues it. req (may be NULL) completes once the frame is sent. */
static int tx_frame(ppt_state_t *s, int world, const ppt_hdr_t *h, const void *payload, size_t plen,
                    plait_request_t req)
{
    ptl_tl_t *tl = s->tl_of[world];
    ppt_tx_t *t;
    if (!s->txq[world].head) {
        int rc = tl->ops->send(tl, world, h, ppt_hdr_len(h->type), payload, plen);
        if (rc == PLAIT_OK) {
            if (req)
                ppt_req_complete(s, req, PLAIT_OK);
            return PLAIT_OK;
        }
        if (rc != 1)
            return rc;
    }
    t = calloc(1, sizeof *t);
    if (!t)
        return prt_err(PLAIT_ERR_NOMEM, "no memory to queue a frame for rank %d", world);
    t->hdr = *h;
    t->payload = payload;
    t->plen = plen;
    t->req = req;
    txq_push(s, world, t);
    return PLAIT_OK;
}

/* A frame of a send's stream (HEAD or DATA) was refused (rc): the first
 * refusal is the send's verdict once the stream ends. */
static void stream_fail(plait_request_t req, int rc)
{
    if (rc != PLAIT_OK && req->zc_rc == PLAIT_OK)
        req->zc_rc = rc;
}

/* A send's DATA stream ended (rc): it completes now, or, while the
 * transport still reads its buffer, once ppt_zc_done saw the last frame. */
static void stream_end(ppt_state_t *s, plait_request_t req, int rc)
{
    stream_fail(req, rc);
    req->zc_streamed = 1;
    if (req->zc_pending)
        return;
    ppt_req_unregister(s, req);
    ppt_req_complete(s, req, req->zc_rc);
}

void ppt_zc_done(void *ctx, uint64_t cookie, int rc)
{
    ppt_state_t *s = ctx;
    plait_request_t r = prt_map_get(&s->reqs, cookie);
    if (!r || r->kind != PPT_REQ_SEND || r->zc_pending <= 0)
        return;   /* withdrawn (cancelled) meanwhile */
    if (rc != PLAIT_OK)
        r->zc_rc = rc;   /* the transport's verdict over a later frame's refusal */
    prt_trace('Z', r->zc_pending - 1, 0, r->id);
    if (--r->zc_pending == 0 && r->zc_streamed)
        stream_end(s, r, PLAIT_OK);
}

/* One DATA frame: the receiver exposed its buffer where the transport
 * places data; zero copy where the transport offers it (the request id
 * comes back through ppt_zc_done). */
static int tx_data(ptl_tl_t *tl, int world, ppt_tx_t *t, const void *p, size_t n)
{
    int rc;
    prt_trace('D', (int64_t)n, world, t->hdr.rid);
    if (tl->ops->send_placed_zc) {
        rc = tl->ops->send_placed_zc(tl, world, &t->hdr, sizeof t->hdr, p, n, t->hdr.rid,
                                     t->hdr.aux, t->req->id);
        if (rc == PTL_PENDING) {
            t->req->zc_pending++;
            rc = PLAIT_OK;
        }
    } else if (tl->ops->send_placed) {
        rc = tl->ops->send_placed(tl, world, &t->hdr, sizeof t->hdr, p, n, t->hdr.rid,
                                  t->hdr.aux);
    } else {
        rc = tl->ops->send(tl, world, &t->hdr, sizeof t->hdr, p, n);
    }
    prt_trace('d', (int64_t)n, rc, t->hdr.rid);
    return rc;
}

/* Streams DATA fragments of a send (copy path); 1 when the ring filled up. */
static int tx_stream(ppt_state_t *s, int world, ppt_tx_t *t)
{
    plait_request_t req = t->req;
    ptl_tl_t *tl = s->tl_of[world];
    size_t frag = tl->ops->max_frame(tl) - sizeof(ppt_hdr_t);
    while (t->hdr.aux < req->len) {
        size_t n = req->len - t->hdr.aux < frag ? req->len - t->hdr.aux : frag;
        int rc = tx_data(tl, world, t, (const char *)req->buf + t->hdr.aux, n);
        if (rc == 1)
            return 1;
        if (rc != PLAIT_OK) {
            stream_end(s, req, rc);
            return 0;
        }
        t->hdr.aux += n;
    }
    stream_end(s, req, PLAIT_OK);
    return 0;
}

/* Sends a HEAD frame (unplaced: the receiver has exposed nothing yet; zero
 * copy where the transport offers it, counted like a DATA frame); 1 when
 * the ring is full. A refusal fails the send once its stream ends. */
static int tx_head(ppt_state_t *s, int world, ppt_tx_t *t)
{
    int rc = tx_data(s->tl_of[world], world, t, t->payload, t->plen);
    if (rc == 1)
        return 1;
    stream_fail(t->req, rc);
    return 0;
}

/* The HEAD frame of send r (announced by the RTS just sent or queued): now
 * if nothing waits before it, else behind the RTS. */
static int tx_head_start(ppt_state_t *s, int world, plait_request_t r, const ppt_hdr_t *rts)
{
    ppt_tx_t *t = calloc(1, sizeof *t);
    if (!t)
        return prt_err(PLAIT_ERR_NOMEM, "no memory to queue a frame for rank %d", world);
    t->hdr = *rts;
    t->hdr.type = PPT_HEAD;
    t->hdr.head = 0;
    t->hdr.aux = 0;
    t->hdr.rid = UINT64_MAX;   /* not placed */
    t->payload = r->buf;
    t->plen = r->head;
    t->req = r;
    if (!s->txq[world].head && !tx_head(s, world, t)) {
        free(t);
        return PLAIT_OK;
    }
    txq_push(s, world, t);
    return PLAIT_OK;
}

static int tx_flush_peer(ppt_state_t *s, int world)
{
    ptl_tl_t *tl = s->tl_of[world];
    ppt_tx_t *t;
    int n = 0;
    while ((t = s->txq[world].head) != NULL) {
        if (t->hdr.type == PPT_DATA) {
            if (tx_stream(s, world, t))
                break;
        } else if (t->hdr.type == PPT_HEAD) {
            if (tx_head(s, world, t))
                break;
        } else {
            int rc = tl->ops->send(tl, world, &t->hdr, ppt_hdr_len(t->hdr.type), t->payload,
                                   t->plen);
            if (rc == 1)
                break;
            if (t->req)
                ppt_req_complete(s, t->req, rc);
            else if (rc != PLAIT_OK)
                prt_log(PRT_LOG_ERROR, "control frame to rank %d lost: %s", world, prt_err_text());
        }
        txq_pop(s, world);
        n++;
    }
    return n;
}

int ppt_tx_flush_locked(ppt_state_t *s)
{
    int n = 0;
    for (int w = 0; w < s->job.size && s->ntxq; w++)
        if (s->txq[w].head)
            n += tx_flush_peer(s, w);
    return n;
}

/* ---------------------------------------------------------- receiving */

/* Completes receive r with a message of len bytes (PLAIT_ERR_TRUNCATE,
 * saying so, when the buffer was shorter). */
static void recv_done(ppt_state_t *s, plait_request_t r, int src, int tag, size_t len)
{
    if (len > r->len)
        prt_err(PLAIT_ERR_TRUNCATE, "message of %zu bytes from rank %d (tag %d) truncated to the "
                "%zu-byte receive buffer", len, src, tag, r->len);
    r->st.source = src;
    r->st.tag = tag;
    r->st.bytes = len < r->len ? len : r->len;
    ppt_req_complete(s, r, len > r->len ? PLAIT_ERR_TRUNCATE : PLAIT_OK);
}

static void recv_copy(ppt_state_t *s, plait_request_t r, int src, int tag, const void *data,
                      size_t len)
{
    size_t n = len < r->len ? len : r->len;
    if (n)
        memcpy(r->buf, data, n);
    recv_done(s, r, src, tag, len);
}

static void control_ctx(ppt_state_t *s, int world, int type, uint64_t ctx, uint64_t sid,
                        uint64_t aux)
{
    ppt_hdr_t h;
    memset(&h, 0, sizeof h);
    h.type = (uint8_t)type;
    h.ctx = ctx;
    h.sid = sid;
    h.aux = aux;
    if (tx_frame(s, world, &h, NULL, 0, NULL) != PLAIT_OK)
        prt_log(PRT_LOG_ERROR, "cannot answer rank %d: %s", world, prt_err_text());
}

/* Whether a receive from world reads the sender's memory (a pull or a
 * cooperative copy) rather than take what the sender streams. */
static int reads_sender(const ppt_state_t *s, int world)
{
    const ptl_tl_t *tl = s->tl_of[world];
    return tl && (tl->ops->get || tl->ops->coop_open);
}

static void control(ppt_state_t *s, int world, int type, uint64_t sid, uint64_t aux)
{
    control_ctx(s, world, type, 0, sid, aux);
}

/* The receive lists of the state (cooperative copies, pending pulls): doubly
 * linked through the requests' prev and next, newest first. */
static void req_push(plait_request_t *head, plait_request_t r)
{
    r->prev = NULL;
    r->next = *head;
    if (*head)
        (*head)->prev = r;
    *head = r;
}

static void req_unlink(plait_request_t *head, plait_request_t r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        *head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
}

/* Large enough, and the transport can: receiver and a waiting sender copy the
 * message together (the COOP frame invites the sender to help). */
static int rndv_coop(ppt_state_t *s, plait_request_t r, int world, size_t len, size_t n,
                     uint64_t sid, uint64_t addr)
{
    ptl_tl_t *tl = s->tl_of[world];
    if (!tl->ops->coop_open || !s->cfg.shm_coop_min || n < s->cfg.shm_coop_min ||
        tl->ops->coop_open(tl, world, addr, r->buf, n, &r->coop) != PLAIT_OK)
        return 0;
    __atomic_store_n(&r->world, world, __ATOMIC_RELAXED);   /* read unlocked: wait_on_network */
    r->sid = sid;
    r->total = len;
    control(s, world, PPT_COOP, sid, r->coop);
    req_push(&s->coop_head, r);
    return 1;   /* the progress loop copies, once the sender had a chance to join */
}

/* A cooperative receive stops copying: out of the list, descriptor closed. */
static void coop_end(ppt_state_t *s, plait_request_t r)
{
    ptl_tl_t *tl = s->tl_of[r->world];
    req_unlink(&s->coop_head, r);
    tl->ops->coop_close(tl, r->world, r->coop);
    r->coop = 0;
}

/* Copies what is left of a cooperative receive; completes it when every byte is in. */
int ppt_coop_progress(ppt_state_t *s, plait_request_t r)
{
    ptl_tl_t *tl = s->tl_of[r->world];
    int rc = tl->ops->coop_work(tl, r->world, r->coop, 1);
    if (rc == 0)
        return 0;
    coop_end(s, r);
    control(s, r->world, PPT_FIN, r->sid, 0);
    if (rc < 0) {
        ppt_req_complete(s, r, rc);
        return 1;
    }
    recv_done(s, r, r->st.source, r->st.tag, r->total);
    return 1;
}

/* A rendezvous head's bytes into receive r (what fits), counted as arrived. */
static void head_copy(plait_request_t r, const void *data, size_t head)
{
    if (r->len)
        memcpy(r->buf, data, head < r->len ? head : r->len);
    r->got = head;
}

/* The head of a matched rendezvous (CTS path, r registered): copied into
 * place if it came (data), else the HEAD frame expected next from world
 * goes to r when it comes (rx_head). */
static void rndv_head(ppt_state_t *s, plait_request_t r, int world, uint64_t sid, size_t head,
                      const void *data)
{
    r->got = 0;
    if (!head)
        return;
    if (data)
        head_copy(r, data, head);
    else if (s->heads[world].sid == sid && s->heads[world].len == head)
        s->heads[world].rid = r->id;
}

static void rndv_finish(ppt_state_t *s, plait_request_t r, int world, int src, int tag,
                        size_t len, uint64_t sid, size_t head, const void *data, int rc);

/* A matched rendezvous: copy together with the sender, pull the data, or ask
 * for it through the ring (after the head the sender sent unasked: head
 * bytes, data NULL until its frame came). The pull is left to the end of the
 * progress pass (ppt_get_progress): a withdrawal (rx_wdraw) right behind the
 * RTS, delivered in the same pass, then stops it before it reads a buffer
 * the sender's failed call gave back. */
static void rndv_start(ppt_state_t *s, plait_request_t r, int world, int src, int tag, size_t len,
                       uint64_t sid, uint64_t addr, size_t head, const void *data)
{
    ptl_tl_t *tl = s->tl_of[world];
    size_t n = len < r->len ? len : r->len;
    r->st.source = src;
    r->st.tag = tag;
    if (rndv_coop(s, r, world, len, n, sid, addr))
        return;
    if (n && tl->ops->get) {
        __atomic_store_n(&r->world, world, __ATOMIC_RELAXED);   /* read unlocked: wait_on_network */
        r->sid = sid;
        r->total = len;
        r->raddr = addr;
        r->get_pending = 1;
        req_push(&s->get_head, r);
        return;
    }
    rndv_finish(s, r, world, src, tag, len, sid, head, data,
                n == 0 ? PLAIT_OK : PLAIT_ERR_UNSUPPORTED);
}

static void get_unlink(ppt_state_t *s, plait_request_t r)
{
    req_unlink(&s->get_head, r);
    r->get_pending = 0;
}

/* The pulls rndv_start left for the end of the pass. */
int ppt_get_progress(ppt_state_t *s)
{
    int n = 0;
    plait_request_t r;
    while ((r = s->get_head) != NULL) {
        ptl_tl_t *tl = s->tl_of[r->world];
        size_t len = r->total < r->len ? r->total : r->len;
        get_unlink(s, r);
        rndv_finish(s, r, r->world, r->st.source, r->st.tag, r->total, r->sid, 0, NULL,
                    tl->ops->get(tl, r->world, r->raddr, r->buf, len));
        n++;
    }
    return n;
}

/* The rest of rndv_start, once the pull ran (rc: its result; UNSUPPORTED:
 * none, ask for the data through the ring). */
static void rndv_finish(ppt_state_t *s, plait_request_t r, int world, int src, int tag,
                        size_t len, uint64_t sid, size_t head, const void *data, int rc)
{
    ptl_tl_t *tl = s->tl_of[world];
    if (rc == PLAIT_ERR_UNSUPPORTED) {
        r->st.source = src;
        r->st.tag = tag;
        r->total = len;
        __atomic_store_n(&r->world, world, __ATOMIC_RELAXED);   /* read unlocked: wait_on_network */
        r->sid = sid;
        rc = ppt_req_register(s, r) == PLAIT_OK ? PLAIT_OK : PLAIT_ERR_NOMEM;
        if (rc == PLAIT_OK)
            rndv_head(s, r, world, sid, head, data);
        /* where the transport can, DATA lands straight in the buffer */
        if (rc == PLAIT_OK && tl->ops->expose) {
            rc = tl->ops->expose(tl, world, r->id, r->buf, r->len);
            r->placed = rc == PLAIT_OK;
            if (rc != PLAIT_OK)
                ppt_req_unregister(s, r);
        }
        if (rc == PLAIT_OK) {
            prt_trace('C', (int64_t)r->id, world, sid);
            control(s, world, PPT_CTS, sid, r->id);
            return;
        }
    }
    control(s, world, PPT_FIN, sid, 0);
    if (rc != PLAIT_OK) {
        r->st.source = src;
        r->st.tag = tag;
        ppt_req_complete(s, r, rc);
        return;
    }
    recv_done(s, r, src, tag, len);
}

/* len: payload bytes to make room for (EAGER), 0 for an announcement (RTS). */
static ppt_umsg_t *umsg_new(ppt_state_t *s, const ppt_hdr_t *h, int world, size_t len)
{
    ppt_umsg_t *u = ppt_umsg_get(s, len);
    if (!u)
        return NULL;
    u->type = h->type;
    u->src = h->src;
    u->tag = h->tag;
    u->world = world;
    u->len = h->len;
    u->sid = h->sid;
    u->addr = h->aux;
    u->head = h->type == PPT_RTS ? h->head : 0;
    return u;
}

/* The matching queue of a context, made on demand; consecutive frames mostly
 * name the same context, hence the one-entry cache. */
static ppt_mq_t *rx_mq(ppt_state_t *s, uint64_t ctx)
{
    if (s->mq_last && s->mq_last->ctx == ctx)
        return s->mq_last;
    s->mq_last = ppt_mq_lookup(s, ctx, 1);
    return s->mq_last;
}

/* From this size an unexpected eager payload stays in the transport's frame
 * (rx_keep) instead of being copied: the copy is one of four the bytes of a
 * 64 KiB message went through on a bcast receiver between hosts (kernel,
 * reassembly, this one, the user's buffer), where Open MPI's TCP path has
 * three; below it the copy is cheap and frees the frame at once. */
#define PPT_UMSG_FRAME_MIN 4096

/* An unexpected EAGER message that keeps the transport's frame, or NULL
 * (not offered: copy it). */
static ppt_umsg_t *umsg_frame(ppt_state_t *s, const ppt_hdr_t *h, int world, const void *payload)
{
    ptl_tl_t *tl = s->tl_of[world];
    ppt_umsg_t *u;
    if (h->len < PPT_UMSG_FRAME_MIN || !tl->ops->rx_keep || !(u = umsg_new(s, h, world, 0)))
        return NULL;
    if (!(u->kept = tl->ops->rx_keep(tl))) {
        ppt_umsg_put(s, u);
        return NULL;
    }
    u->data = (void *)payload;   /* read only: the transport's frame */
    return u;
}

/* Early placement (ptl.h ptl_early_fn): an EAGER frame from world whose
 * header came before the rest takes the posted receive it matches now, the
 * one rx_eager would give it (frames from world arrive in order, and this
 * one is the next); the transport writes its payload into the buffer as it
 * comes. Between hosts that saves the copy out of the transport's frame,
 * and lets messages up to PLAIT_NET_EAGER_LIMIT skip the rendezvous' round
 * trip at the cost of none. A receive too short for the message is left to
 * rx_eager (truncation). */
void *ppt_rx_early(void *ctx, int world, const void *hdr, size_t hlen, size_t plen)
{
    ppt_state_t *s = ctx;
    ppt_hdr_t h;
    ppt_mq_t *mq;
    plait_request_t r;
    if (s->early[world] || hlen < PPT_HDR_EAGER || hlen != ppt_hdr_len(((const uint8_t *)hdr)[0]))
        return NULL;
    memcpy(&h, hdr, hlen);
    if (h.type != PPT_EAGER || h.len != plen || h.src < 0 || h.tag < 0 || !(mq = rx_mq(s, h.ctx)) ||
        !(r = ppt_mq_find_posted(mq, h.src, h.tag)) || r->len < plen)
        return NULL;
    ppt_mq_unpost(mq, r);
    __atomic_store_n(&r->world, world, __ATOMIC_RELAXED);   /* read unlocked: wait_on_network */
    r->early = 1;
    s->early[world] = r;
    prt_trace('e', (int64_t)plen, world, 0);
    return r->buf;
}

/* An EAGER message: into a posted receive, else unexpected: kept (frame:
 * payload is a transport's frame inside rx, not a send to oneself) or copied.
 * The frame of an early placement is in its receive already. */
static int rx_eager(ppt_state_t *s, int world, const ppt_hdr_t *h, const void *payload, int frame)
{
    ppt_mq_t *mq = rx_mq(s, h->ctx);
    plait_request_t r;
    ppt_umsg_t *u;
    if (frame && (r = s->early[world]) != NULL && payload == r->buf) {
        s->early[world] = NULL;
        r->early = 0;
        recv_done(s, r, h->src, h->tag, h->len);
        return PLAIT_OK;
    }
    if (!mq)
        return prt_err(PLAIT_ERR_NOMEM, "no memory for a matching queue");
    if (h->tag == PPT_TAG_NOTICE && (h->ctx & 1)) {   /* a peer refused a collective call */
        ppt_notice_rx(mq, h->src, payload, h->len);
        return PLAIT_OK;
    }
    if (h->tag == PPT_TAG_PROBE && (h->ctx & 1)) {    /* a stalled peer asks (probe.c) */
        ppt_probe_rx(s, mq, h->src, world, payload, h->len);
        return PLAIT_OK;
    }
    if ((r = ppt_mq_match_posted(mq, h->src, h->tag)) != NULL) {
        recv_copy(s, r, h->src, h->tag, payload, h->len);
        return PLAIT_OK;
    }
    if (!frame || !(u = umsg_frame(s, h, world, payload))) {
        if (!(u = umsg_new(s, h, world, h->len)))
            return prt_err(PLAIT_ERR_NOMEM, "no memory to buffer a %llu-byte unexpected message "
                           "from rank %d", (unsigned long long)h->len, world);
        if (h->len)
            memcpy(u->data, payload, h->len);
    }
    if (ppt_mq_add_unexp(mq, u) != PLAIT_OK) {
        ppt_umsg_put(s, u);
        return prt_err(PLAIT_ERR_NOMEM, "no memory to queue an unexpected message from rank %d",
                       world);
    }
    return PLAIT_OK;
}

static void rx_rts(ppt_state_t *s, int world, const ppt_hdr_t *h)
{
    ppt_mq_t *mq = rx_mq(s, h->ctx);
    plait_request_t r;
    ppt_umsg_t *u;
    prt_trace('r', (int64_t)h->len, world, h->sid);
    s->heads[world] = (ppt_head_t){h->sid, 0, h->head};
    if (mq && (r = ppt_mq_match_posted(mq, h->src, h->tag)) != NULL) {
        rndv_start(s, r, world, h->src, h->tag, h->len, h->sid, h->aux, h->head, NULL);
        return;
    }
    if (!mq || !(u = umsg_new(s, h, world, 0)) || ppt_mq_add_unexp(mq, u) != PLAIT_OK) {
        if (mq && u)
            ppt_umsg_put(s, u);
        prt_log(PRT_LOG_ERROR, "no memory for a message announcement from rank %d", world);
        return;
    }
}

/* The unexpected RTS from world with sender id sid, or NULL. From the
 * newest: a HEAD frame comes right behind its RTS. */
static ppt_umsg_t *umsg_rts(ppt_mq_t *mq, int world, uint64_t sid)
{
    for (ppt_umsg_t *u = mq ? mq->unexp_tail : NULL; u; u = u->prev)
        if (u->type == PPT_RTS && u->world == world && u->sid == sid)
            return u;
    return NULL;
}

static plait_request_t rx_req(ppt_state_t *s, uint64_t id, int kind, int world);

/* A HEAD frame, the one world's last RTS announced: into the matched
 * receive, or kept with the RTS while it waits unexpected (the transport's
 * frame where it lets us keep it, else a copy). */
static void rx_head(ppt_state_t *s, int world, const ppt_hdr_t *h, const void *payload, size_t plen)
{
    ppt_head_t e = s->heads[world];
    ptl_tl_t *tl = s->tl_of[world];
    plait_request_t r;
    ppt_umsg_t *u;
    s->heads[world].len = 0;
    if (!e.len || e.sid != h->sid || plen != e.len) {
        prt_log(PRT_LOG_WARN, "dropped a HEAD frame from rank %d that no RTS announced", world);
        return;
    }
    if (e.rid) {
        if ((r = rx_req(s, e.rid, PPT_REQ_RECV, world)) != NULL && r->got == 0)
            head_copy(r, payload, plen);
        return;   /* (none: the receive was withdrawn) */
    }
    if (!(u = umsg_rts(rx_mq(s, h->ctx), world, h->sid)) || u->head_in)
        return;
    if (tl->ops->rx_keep && (u->kept = tl->ops->rx_keep(tl)) != NULL) {
        u->data = (void *)payload;   /* read only: the transport's frame */
    } else if ((u->data = malloc(plen)) != NULL) {
        u->cap = plen;
        memcpy(u->data, payload, plen);
    } else {
        prt_log(PRT_LOG_ERROR, "no memory to keep %zu bytes from rank %d", plen, world);
        return;   /* (the receive that matches it will wait for bytes that never come) */
    }
    u->head_in = 1;
}

/* The request a frame names, if it is live, of the right kind, and belongs to
 * the pair the frame came from. */
static plait_request_t rx_req(ppt_state_t *s, uint64_t id, int kind, int world)
{
    plait_request_t r = prt_map_get(&s->reqs, id);
    return r && r->kind == kind && r->world == world ? r : NULL;
}

static void rx_cts(ppt_state_t *s, int world, const ppt_hdr_t *h)
{
    plait_request_t r = rx_req(s, h->sid, PPT_REQ_SEND, world);
    ppt_tx_t *t;
    if (!r || r->withdrawing) {   /* withdrawn (its call failed): the receive must not wait */
        prt_log(PRT_LOG_DEBUG, "a CTS from rank %d named a withdrawn send", world);
        control(s, world, PPT_WDRAW, h->sid, h->aux);
        return;
    }
    prt_trace('c', (int64_t)h->aux, world, h->sid);
    r->rts_open = 0;
    t = calloc(1, sizeof *t);
    if (!t) {
        ppt_req_unregister(s, r);
        ppt_req_complete(s, r, prt_err(PLAIT_ERR_NOMEM, "no memory to stream to rank %d", world));
        return;
    }
    t->hdr.type = PPT_DATA;
    t->hdr.rid = h->aux;
    t->hdr.aux = r->head;     /* hdr.aux counts the bytes streamed so far: the HEAD's first */
    t->req = r;
    txq_push(s, world, t);    /* behind anything already queued for this pair */
    tx_flush_peer(s, world);
}

static void rx_data(ppt_state_t *s, int world, const ppt_hdr_t *h, const void *payload, size_t plen)
{
    plait_request_t r = rx_req(s, h->rid, PPT_REQ_RECV, world);
    if (!r) {   /* a receive that gave up (timed out) while its data streamed in */
        prt_log(PRT_LOG_DEBUG, "dropped a DATA frame from rank %d for a withdrawn receive", world);
        return;
    }
    if (h->aux != r->got || plen > r->total - r->got || plen == 0) {
        prt_log(PRT_LOG_WARN, "dropped a DATA frame from rank %d (offset %llu, %zu bytes: the "
                "receive has %zu of %zu)", world, (unsigned long long)h->aux, plen, r->got,
                r->total);
        return;
    }
    prt_trace('F', (int64_t)plen, world, h->rid);
    if (r->got < r->len && payload) {   /* NULL: the transport placed it already */
        size_t room = r->len - r->got;
        memcpy((char *)r->buf + r->got, payload, plen < room ? plen : room);
    }
    r->got += plen;
    if (r->got == r->total) {
        ppt_req_unregister(s, r);
        recv_done(s, r, r->st.source, r->st.tag, r->total);
    }
}

/* The receiver invites this (waiting) sender to help copy: do so now. */
static void rx_coop(ppt_state_t *s, int world, const ppt_hdr_t *h)
{
    plait_request_t r = rx_req(s, h->sid, PPT_REQ_SEND, world);
    ptl_tl_t *tl = s->tl_of[world];
    if (!r || !tl->ops->coop_work) {
        prt_log(PRT_LOG_DEBUG, "dropped a COOP from rank %d naming no live send", world);
        return;
    }
    if (tl->ops->coop_work(tl, world, h->aux, 0) < 0)
        prt_log(PRT_LOG_WARN, "%s", prt_err_text());
}

static void txq_remove_req(ppt_state_t *s, plait_request_t req);

static void rx_fin(ppt_state_t *s, int world, const ppt_hdr_t *h)
{
    plait_request_t r = rx_req(s, h->sid, PPT_REQ_SEND, world);
    s->txq[world].mute = 0;   /* it answers (send_withdraw) */
    if (!r) {
        prt_log(PRT_LOG_DEBUG, "dropped a FIN from rank %d naming no live send", world);
        return;
    }
    r->rts_open = 0;
    if (h->aux == PPT_FIN_WITHDRAWN) {   /* (send_withdraw waits for it) */
        if (!r->withdrawing)
            return;
        txq_remove_req(s, r);
        ppt_req_unregister(s, r);
        ppt_req_complete(s, r, PLAIT_ERR_TIMEOUT);
        return;
    }
    if (h->aux == PPT_FIN_GAVE_UP) {   /* stop streaming: nobody takes the rest */
        txq_remove_req(s, r);
        stream_end(s, r, prt_err(PLAIT_ERR_TRANSPORT, "rank %d gave up its receive of this "
                                 "message (its call failed: timed out?) before it arrived whole",
                                 r->peer));
        return;
    }
    stream_end(s, r, PLAIT_OK);   /* (a HEAD frame may still be read from its buffer) */
}

/* The receive of list (linked by next) matched to send sid of world, or NULL. */
static plait_request_t sid_find(plait_request_t list, int world, uint64_t sid)
{
    while (list && !(list->world == world && list->sid == sid))
        list = list->next;
    return list;
}

/* A send withdrawn by its sender after its RTS went out (its call failed;
 * ppt_cancel_locked): aux 0: its RTS, if it still waits unexpected here, is
 * dropped as if never sent (nothing may read the sender's buffer now); a
 * receive that matched it this pass, its pull not yet made, or one copying
 * it cooperatively, fails; aux a receive's id: that receive matched it and
 * answered (the CTS found no live send): it fails, rather than wait for
 * data that never comes. */
static void rx_wdraw(ppt_state_t *s, int world, const ppt_hdr_t *h)
{
    ppt_mq_t *mq = ppt_mq_lookup(s, h->ctx, 0);
    plait_request_t r = NULL;
    ppt_umsg_t *u;
    if (s->heads[world].sid == h->sid)
        s->heads[world].len = 0;
    if ((r = sid_find(s->get_head, world, h->sid)) != NULL) {
        get_unlink(s, r);
    } else if (h->aux) {
        if ((r = rx_req(s, h->aux, PPT_REQ_RECV, world)) != NULL)
            ppt_req_unregister(s, r);
    } else if ((u = umsg_rts(mq, world, h->sid)) != NULL) {
        ppt_mq_del_unexp(mq, u);
        ppt_umsg_put(s, u);
    } else if ((r = sid_find(s->coop_head, world, h->sid)) != NULL) {
        coop_end(s, r);
    }
    if (r)
        ppt_req_complete(s, r, prt_err(PLAIT_ERR_TRANSPORT, "rank %d withdrew the message this "
                                       "receive matched (its send failed: timed out?)", world));
    /* The sender waits for this behind any FIN of ours (send_withdraw):
     * nothing here reads its buffer from now on. */
    if (!h->aux && reads_sender(s, world))
        control(s, world, PPT_FIN, h->sid, PPT_FIN_WITHDRAWN);
}

static void rx_frame(ppt_state_t *s, int world, const void *hdr, size_t hlen,
                     const void *payload, size_t plen)
{
    ppt_hdr_t h;
    if (hlen < PPT_HDR_EAGER || hlen != ppt_hdr_len(((const uint8_t *)hdr)[0])) {
        prt_log(PRT_LOG_ERROR, "dropped a frame from rank %d with a %zu-byte header", world, hlen);
        return;
    }
    memcpy(&h, hdr, hlen);   /* the slot may be unaligned for us */
    switch (h.type) {
    case PPT_EAGER:
        if (h.len != plen || h.src < 0 || h.tag < 0)
            break;
        if (rx_eager(s, world, &h, payload, 1) != PLAIT_OK)
            prt_log(PRT_LOG_ERROR, "%s", prt_err_text());
        return;
    case PPT_RTS:
        if (plen != 0 || h.src < 0 || h.tag < 0 || h.head >= h.len || h.head > PPT_HEAD_MAX)
            break;
        rx_rts(s, world, &h);
        return;
    case PPT_HEAD:
        if (plen == 0)
            break;
        rx_head(s, world, &h, payload, plen);
        return;
    case PPT_CTS:  rx_cts(s, world, &h); return;
    case PPT_DATA: rx_data(s, world, &h, payload, plen); return;
    case PPT_FIN:  rx_fin(s, world, &h); return;
    case PPT_WDRAW: rx_wdraw(s, world, &h); return;
    case PPT_COOP: rx_coop(s, world, &h); return;
    default: break;
    }
    prt_log(PRT_LOG_ERROR, "dropped a malformed frame (type %d) from rank %d", h.type, world);
}

/* A frame may complete any thread's request, failed (a truncation, a
 * withdrawn message): that detail is the request's, so it is kept apart
 * from this thread's plait_last_error (transports also deliver frames
 * from inside a send, outside a progress pass). */
void ppt_rx_frame(void *ctx, int world, const void *hdr, size_t hlen, const void *payload,
                  size_t plen)
{
    int err_side = prt_err_divert();
    rx_frame(ctx, world, hdr, hlen, payload, plen);
    prt_err_undivert(err_side);
}

/* ------------------------------------------------------ starting operations */

/* Largest message sent eagerly to a peer of this transport. Inside a host
 * the rendezvous is one single-copy read, which beats the eager path's two
 * copies (three when the message arrives unexpected, the usual case in a
 * collective whose ranks run ahead) from a few KiB: the collectives' own
 * messages (coll: 1) switch at PLAIT_COLL_EAGER_LIMIT. User messages keep
 * the larger PLAIT_SHM_EAGER_LIMIT (lower ping-pong latency, and blocking
 * sends up to it return at once). Between hosts a rendezvous costs a round
 * trip, which costs more than the receiver's extra copy of an eager
 * message up to about 128 KiB: PLAIT_NET_EAGER_LIMIT, 128K by default
 * (Open MPI's TCP BTL has 64K). 2 namespace hosts x 1 rank on the 16-core
 * machine, three calls against 64K (docs/PERFORMANCE.md, session 13):
 * better in all three for 2-rank bcast of 128 KiB and allreduce and
 * reduce_scatter of 256 KiB (128 KiB messages; allreduce, medians per call,
 * 218-534 -> 175-221 us), in two of three for the 128 KiB ping-pong, alltoall and
 * allgather of 256 KiB. (16K had made 64 KiB collectives 1.3-2x slower
 * than 64K; 256K copies too much: 512 KiB alltoalls slower.)
 * A two-rank exchange (PPT_SEND_XCHG, coll/pair.c) keeps the user limit: its
 * receive is posted before the peer's message comes, so eager costs two
 * copies against the rendezvous' one plus a handshake (about 4 us), and up
 * to 16 KiB the copies are cheaper (allgather of 16 KiB blocks, 2 ranks,
 * 16-core machine: 7.1 us with the rendezvous, 4.6 eager; Open MPI 7.2). */
static size_t eager_limit(ppt_state_t *s, ptl_tl_t *tl, int coll)
{
    size_t frame = tl->ops->max_frame(tl) - PPT_HDR_EAGER;
    size_t want = tl != &s->shm ? s->cfg.net_eager_limit
                : coll && s->cfg.coll_eager_limit < s->cfg.shm_eager_limit
                    ? s->cfg.coll_eager_limit : s->cfg.shm_eager_limit;
    return want < frame ? want : frame;
}

int ppt_isend_locked(ppt_state_t *s, plait_comm_t comm, ppt_mq_t *mq, const void *buf,
                     size_t len, int dest, int tag, plait_request_t *out)
{
    return ppt_isend_flags_locked(s, comm, mq, buf, len, dest, tag, 0, out);
}

int ppt_isend_flags_locked(ppt_state_t *s, plait_comm_t comm, ppt_mq_t *mq, const void *buf,
                           size_t len, int dest, int tag, int flags, plait_request_t *out)
{
    plait_request_t r = ppt_req_new(PPT_REQ_SEND, comm, *out);
    int world = comm->world_of[dest], rc;
    ppt_hdr_t h;
    if (!r)
        return prt_err(PLAIT_ERR_NOMEM, "no memory for a send request");
    r->peer = dest;
    r->world = world;
    r->tag = tag;
    r->buf = (void *)buf;
    r->len = len;
    r->mq = mq;
    memset(&h, 0, sizeof h);
    h.src = comm->rank;
    h.tag = tag;
    h.ctx = mq->ctx;
    h.len = len;
    if (world == s->job.rank) {
        h.type = PPT_EAGER;
        rc = rx_eager(s, world, &h, buf, 0);
        if (rc == PLAIT_OK)
            ppt_req_complete(s, r, PLAIT_OK);
    } else if (!s->tl_of[world]) {
        rc = prt_err(PLAIT_ERR_UNSUPPORTED, "rank %d is on another host and this build has no "
                     "transport between hosts yet", dest);
    } else if (len <= eager_limit(s, s->tl_of[world], mq == comm->cmq && !(flags & PPT_SEND_XCHG))) {
        h.type = PPT_EAGER;
        rc = tx_frame(s, world, &h, buf, len, r);
    } else {
        h.type = PPT_RTS;
        r->rts_open = 1;
        rc = ppt_req_register(s, r);
        h.sid = r->id;
        h.aux = (uint64_t)(uintptr_t)buf;
        if (!s->tl_of[world]->ops->get) {   /* between hosts: a HEAD frame follows */
            ptl_tl_t *tl = s->tl_of[world];
            size_t cap = tl->ops->max_frame(tl) - sizeof h;
            if (s->cfg.net_head < cap)
                cap = s->cfg.net_head;
            r->head = len / 2 < cap ? len / 2 : cap;
        }
        h.head = (uint32_t)r->head;
        if (rc == PLAIT_OK) {
            prt_trace('R', (int64_t)len, world, r->id);
            rc = tx_frame(s, world, &h, NULL, 0, NULL);
        }
        if (rc == PLAIT_OK && r->head)
            rc = tx_head_start(s, world, r, &h);
    }
    if (rc != PLAIT_OK) {
        ppt_req_unregister(s, r);
        ppt_req_free(r);
        return rc;
    }
    *out = r;
    return PLAIT_OK;
}

int ppt_irecv_locked(ppt_state_t *s, plait_comm_t comm, ppt_mq_t *mq, void *buf, size_t cap,
                     int src, int tag, plait_request_t *out)
{
    plait_request_t r = ppt_req_new(PPT_REQ_RECV, comm, *out);
    ppt_umsg_t *u;
    if (!r)
        return prt_err(PLAIT_ERR_NOMEM, "no memory for a receive request");
    r->peer = src;
    r->world = src == PLAIT_ANY_SOURCE ? -1 : comm->world_of[src];
    r->tag = tag;
    r->buf = buf;
    r->len = cap;
    r->mq = mq;
    *out = r;
    u = ppt_mq_match_unexp(mq, src, tag);
    if (!u) {
        int rc = ppt_mq_post(mq, r), heap = !r->on_stack;
        if (rc != PLAIT_OK) {
            ppt_req_free(r);
            if (heap)
                *out = NULL;
        }
        return rc;
    }
    if (u->type == PPT_EAGER)
        recv_copy(s, r, u->src, u->tag, u->data, u->len);
    else
        rndv_start(s, r, u->world, u->src, u->tag, u->len, u->sid, u->addr, u->head,
                   u->head_in ? u->data : NULL);
    ppt_umsg_put(s, u);
    return PLAIT_OK;
}

static void txq_remove_req(ppt_state_t *s, plait_request_t req)
{
    ppt_txq_t *q = &s->txq[req->world];
    ppt_tx_t **pp = &q->head, *last = NULL;
    int had = q->head != NULL;
    while (*pp) {
        ppt_tx_t *t = *pp;
        if (t->req == req) {
            *pp = t->next;
            free(t);
            continue;
        }
        last = t;
        pp = &t->next;
    }
    q->tail = last;
    if (had && !q->head)
        s->ntxq--;
}

void ppt_coll_unlink_locked(ppt_state_t *s, plait_request_t req)
{
    if (req->prev || s->coll_head == req) {   /* (else not in the list: finished already) */
        ppt_coll_unlisted_locked(s, req);
        req_unlink(&s->coll_head, req);
    }
}

/* The transport stops reading a zero-copy send's buffer (it copies what it
 * still needs); what names the caller's step in a failure's log line. */
static void send_detach(ppt_state_t *s, plait_request_t req, const char *what)
{
    ptl_tl_t *tl = s->tl_of[req->world];
    if (tl->ops->zc_detach(tl, req->world, req->id) != PLAIT_OK)
        prt_log(PRT_LOG_ERROR, "%s a send: %s", what, prt_err_text());
    req->zc_pending = 0;
}

/* A send whose DATA the transport holds whole (zero copy: it still reads
 * the caller's buffer for its retransmissions) is as good as sent, as a
 * copied one is once handed over: the transport takes a copy, the caller
 * its buffer, and the send completes. (Withdrawn instead, its receiver got
 * the message all the same while the sender reported a failure.) */
static void send_let_go(ppt_state_t *s, plait_request_t req)
{
    send_detach(s, req, "completing");
    ppt_req_unregister(s, req);
    ppt_req_complete(s, req, PLAIT_OK);
}

/* A rendezvous send whose call failed, where the receiver reads the
 * sender's memory (reads_sender: a pull, or a copy made together): the
 * receiver may have matched its RTS and be reading the buffer the failed
 * call is about to give back, or be about to (a pull runs at the end of
 * the pass that matched; a WDRAW posted after that pass read its ring
 * cannot stop it). The sender asks (WDRAW) and waits for the answer, which
 * the receiver's ring brings behind anything it sent before: its FIN (it
 * took the message: the send succeeded after all) or a FIN saying
 * PPT_FIN_WITHDRAWN (it will not read). Only a receiver inside a progress
 * pass can be reading: one in no call finds the RTS and the WDRAW together
 * when it next makes one, and reads nothing. So the wait is bounded by
 * PPT_WITHDRAW_WAIT_S (a pass, its pull included, ends well within it) or
 * PLAIT_TIMEOUT if shorter: a receiver silent that long is busy elsewhere
 * (or stopped halfway through a pass: a warning says the buffer goes back
 * all the same), and the next withdrawals to it (a failed collective's
 * sends) do not wait until it answers one. Returns 1 when the send
 * succeeded after all. */
#define PPT_WITHDRAW_WAIT_S 10.0

static int send_withdraw(ppt_state_t *s, plait_request_t req)
{
    int was, rc;
    control_ctx(s, req->world, PPT_WDRAW, req->mq->ctx, req->id, 0);
    req->withdrawing = 1;
    if (s->txq[req->world].mute)
        return 0;
    was = prt_err_divert();   /* the caller's message stays the failure's */
    rc = ppt_wait_for_locked(s, req, "withdrawing a send",
                             s->cfg.timeout_s < PPT_WITHDRAW_WAIT_S ? s->cfg.timeout_s
                                                                    : PPT_WITHDRAW_WAIT_S);
    prt_err_undivert(was);
    if (atomic_load(&req->done))
        return rc == PLAIT_OK;
    s->txq[req->world].mute = 1;
    prt_log(PRT_LOG_WARN, "rank %d did not answer the withdrawal of a send to it: its buffer "
            "goes back to the caller (that rank reads it only if it stopped halfway through a "
            "progress pass)", req->peer);
    return 0;
}

int ppt_cancel_locked(ppt_state_t *s, plait_request_t req)
{
    int live = req->world >= 0 && s->tl_of[req->world] != NULL;
    if (atomic_load(&req->done))
        return 0;
    if (req->kind == PPT_REQ_SEND && live && req->zc_pending && req->zc_streamed &&
        req->zc_rc == PLAIT_OK) {
        send_let_go(s, req);
        return 1;
    }
    if (req->kind == PPT_REQ_SEND && live && req->id && !req->withdrawing &&
        reads_sender(s, req->world)) {
        if (send_withdraw(s, req))
            return 1;
        if (atomic_load(&req->done))
            return 0;   /* withdrawn: rx_fin took it out */
    }
    if (req->kind == PPT_REQ_RECV && req->coop) {
        coop_end(s, req);
    } else if (req->kind == PPT_REQ_RECV && req->get_pending) {
        get_unlink(s, req);
    } else if (req->kind == PPT_REQ_RECV && req->early) {   /* the transport writes buf: stop it */
        ptl_tl_t *tl = s->tl_of[req->world];
        tl->ops->rx_early_revoke(tl, req->world);
        s->early[req->world] = NULL;
        req->early = 0;
    } else if (req->kind == PPT_REQ_RECV && !req->id)
        ppt_mq_unpost(req->mq, req);
    if (req->kind == PPT_REQ_SEND && req->zc_pending)   /* the transport reads buf: stop it */
        send_detach(s, req, "cancelling");
    /* The peer holds or works on this rendezvous: tell it (rx_wdraw, rx_fin),
     * so that its receive neither reads this buffer later nor waits for
     * data that never comes, and a sender stops streaming to a receive
     * that gave up. */
    if (req->kind == PPT_REQ_SEND && req->id && live && !req->withdrawing)
        control_ctx(s, req->world, PPT_WDRAW, req->mq->ctx, req->id, 0);
    else if (req->kind == PPT_REQ_RECV && req->id && req->sid)
        control(s, req->world, PPT_FIN, req->sid, PPT_FIN_GAVE_UP);
    ppt_req_unregister(s, req);
    if (req->kind == PPT_REQ_SEND && live)
        txq_remove_req(s, req);
    if (req->kind == PPT_REQ_COLL) {
        ppt_coll_unlink_locked(s, req);
        if (req->destroy) {
            req->destroy(req);      /* cancels and frees the inner requests */
            req->destroy = NULL;
        }
    }
    req->rc = PLAIT_ERR_INTERNAL;
    atomic_store(&req->done, 1);
    return 0;
}
