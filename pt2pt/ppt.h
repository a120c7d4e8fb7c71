/*
 * ppt.h -- point-to-point layer: communicators, requests, MPI matching and the
 * eager / rendezvous protocols over the transports of transport/ptl.h.
 *
 * Concurrency: one process-wide mutex (ppt_state_t.lock) guards every structure
 * here; functions named *_locked expect it held. Blocked callers release it
 * while they back off (see ppt_wait_locked).
 */
#ifndef PLAIT_PT2PT_PPT_H
#define PLAIT_PT2PT_PPT_H

#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>

#include "plait.h"
#include "runtime/prt.h"
#include "transport/ptl.h"

/* ------------------------------------------------------------ wire format */

enum { PPT_EAGER = 1, PPT_RTS, PPT_CTS, PPT_DATA, PPT_FIN, PPT_COOP, PPT_HEAD, PPT_WDRAW };

/* FIN's aux: 0 the receive is done; PPT_FIN_GAVE_UP the receive was
 * cancelled before the message came whole (its call failed);
 * PPT_FIN_WITHDRAWN the answer to a send's withdrawal (WDRAW): nothing here
 * reads its buffer any more (proto.c, send_withdraw). */
#define PPT_FIN_GAVE_UP   1
#define PPT_FIN_WITHDRAWN 2

/* Header of every pt2pt frame. EAGER frames carry only its first
 * PPT_HDR_EAGER bytes (so header and a small payload share one cache line of
 * a ring slot); the rest matters to rendezvous frames only. */
typedef struct {
    uint8_t  type;
    uint8_t  rsv[3];
    int32_t  src;    /* sender's rank in the communicator */
    int32_t  tag;
    uint32_t head;   /* RTS: bytes its HEAD frame carries (0: none; proto.c) */
    uint64_t ctx;    /* matching context (communicator) */
    uint64_t len;    /* whole message length */
    uint64_t sid;    /* sender's request id (RTS, CTS, FIN, HEAD, WDRAW) */
    uint64_t aux;    /* RTS: sender address; CTS, WDRAW: receiver request id (WDRAW: 0 if
                      * none known); DATA: offset; FIN: 0 or PPT_FIN_GAVE_UP or
                      * PPT_FIN_WITHDRAWN */
    uint64_t rid;    /* DATA: receiver request id */
} ppt_hdr_t;

#define PPT_HDR_EAGER 32
_Static_assert(sizeof(ppt_hdr_t) <= PTL_MAX_HDR, "pt2pt header exceeds the transport limit");
_Static_assert(offsetof(ppt_hdr_t, sid) == PPT_HDR_EAGER, "eager header layout");

static inline size_t ppt_hdr_len(int type) { return type == PPT_EAGER ? PPT_HDR_EAGER : sizeof(ppt_hdr_t); }

/* -------------------------------------------------------------- requests */

enum { PPT_REQ_SEND = 1, PPT_REQ_RECV, PPT_REQ_COLL };
#define PPT_REQ_MAGIC 0x52514c50u   /* "PLQR" */
#define PPT_REQ_DEAD  0xdeadbeefu

typedef struct ppt_mq ppt_mq_t;

struct plait_request {
    int              kind;
    int              on_stack;      /* a blocking call's own request: never freed */
    _Atomic int      done;
    int              rc;
    uint32_t         magic;         /* not in the first 16 bytes, which the allocator
                                     * overwrites on free: a stale copy of a freed
                                     * request's handle usually still reads DEAD */
    char             why[256];      /* rc's detail, kept at completion: the thread that
                                     * completed it (progress from another caller) may
                                     * not be the one that waits on it */
    plait_status_t   st;
    plait_comm_t     comm;
    ppt_mq_t        *mq;
    int              peer;          /* comm rank or PLAIT_ANY_SOURCE */
    int              world;         /* world rank of peer, -1 for any */
    int              tag;
    void            *buf;           /* recv: destination; send: source */
    size_t           len;           /* recv: capacity; send: message length */
    uint64_t         id;            /* registered in ppt_state_t.reqs while a frame may name it */
    size_t           got;           /* recv, copy path: bytes arrived so far */
    size_t           head;          /* send: bytes its HEAD frame carries (DATA starts there) */
    size_t           total;         /* recv, copy path: message length */
    uint64_t         sid;           /* recv, rendezvous matched: the sender's request id */
    uint64_t         raddr;         /* recv, pull pending: the sender's buffer address */
    int              get_pending;   /* recv: in ppt_state_t.get_head (ppt_get_progress) */
    uint64_t         coop;          /* recv, cooperative copy: the transport's handle */
    int              placed;        /* recv, copy path: buf exposed to the transport (id) */
    int              early;         /* recv: matched by an EAGER frame from world still
                                     * arriving, written into buf by the transport
                                     * (ppt_rx_early); ppt_state_t.early[world] is it */
    int              zc_pending;    /* send, DATA stream: frames the transport still reads
                                     * from buf (zero copy); completes when 0 and streamed */
    int              zc_streamed;   /* send: every DATA frame handed over (or refused) */
    int              zc_rc;         /* send: the stream's result (a transport failure wins) */
    int              rts_open;      /* send: RTS out, neither CTS nor FIN back yet (the
                                     * receiver has not matched it: probe.c) */
    int              withdrawing;   /* send: its call failed, WDRAW sent, its answer awaited
                                     * (proto.c, send_withdraw) */
    struct plait_request *prev, *next;   /* posted-receive list or active-collective list */
    uint64_t         post_seq;      /* recv: its posting order while posted, else 0 */
    struct ppt_bin  *bin;           /* recv, posted: its source's queue (NULL: any source) */
    /* collectives: progressed by ppt_progress_locked until done */
    int            (*progress)(struct plait_request *req);
    void           (*destroy)(struct plait_request *req);
    /* PLAIT_ERR_PEER if a rank it still waits for has died (a member that
     * finished its part and exited is no failure); NULL: check every member */
    int            (*check_peers)(struct plait_request *req);
    /* the ranks it still waits for, as text for timeout messages (e.g. "a
     * message from rank 1, rank 2 to receive one"); NULL: not known */
    void           (*wait_peers)(struct plait_request *req, char *out, size_t len);
    /* a wait's sleep, lock held (dropped while asleep); NULL: on the shm
     * transport's wake-up word (a shared-area call waits on the area's) */
    void           (*sleep)(struct plait_request *req);
    void            *coll;
    const char      *what;          /* for timeout messages: "plait_barrier" ... */
    uint32_t         call;          /* a collective call's wait: that call's number
                                     * (plait_comm.coll_calls), which a peer's refusal
                                     * names (notice.c); 0: none */
};

/* ------------------------------------------------------- matching queues */

typedef struct ppt_umsg {
    struct ppt_umsg *prev, *next;   /* the context's unexpected list, arrival order */
    struct ppt_umsg *sprev, *snext; /* its source's bin (match.c) */
    int              type;          /* PPT_EAGER or PPT_RTS */
    int              src, tag, world;
    size_t           len;
    void            *data;          /* EAGER: a copy of the payload, or the frame itself */
    size_t           cap;           /* bytes data can hold (ppt_umsg_get) */
    void            *kept;          /* data is a frame the transport handed over (rx_keep):
                                     * its handle for rx_free, else NULL */
    uint64_t         sid, addr;     /* RTS */
    size_t           head;          /* RTS: bytes of its HEAD frame (0: none) */
    int              head_in;       /* RTS: the HEAD arrived: data holds it */
} ppt_umsg_t;

/* Matching queues of one context (match.c): receives and unexpected
 * messages binned by source rank, so a receive from one rank never walks
 * past the backlog of another. */
typedef struct ppt_bin {
    plait_request_t posted_head, posted_tail;   /* receives from this source */
    ppt_umsg_t     *unexp_head, *unexp_tail;    /* its unexpected messages */
} ppt_bin_t;

struct ppt_mq {
    uint64_t        ctx;
    plait_request_t any_head, any_tail;         /* PLAIT_ANY_SOURCE receives */
    ppt_umsg_t     *unexp_head, *unexp_tail;    /* every unexpected message, arrival order */
    prt_map_t       bins;                       /* source + 2 -> ppt_bin_t */
    ppt_bin_t      *last_bin;                   /* the last one looked up (most traffic */
    int             last_src;                   /* comes from the same source), or NULL */
    uint64_t        post_seq;                   /* receives posted so far */
    struct ppt_notice *notices;                 /* collective context: the peers' refusals
                                                 * that came (notice.c), or NULL */
    unsigned        notice_next;
    struct ppt_probe *probes;                   /* collective context: the peers' stall
                                                 * probes and answers (probe.c), or NULL */
    unsigned        probe_next;
};

/* ---------------------------------------------------------- communicators */

#define PPT_COMM_MAGIC 0x4d4f434cu   /* alive */
#define PPT_COMM_FREED 0x46524545u   /* freed: memory kept until finalize to detect reuse */

/* Tags on a collective context: a collective's are (7-bit hash of its call
 * << 24 | its sequence number), the hash never PPT_TAG_LIFE_H
 * (pcoll_next_tag). Communicator construction (| sequence) and finalize's
 * barrier (PPT_TAG_FINALIZE, no sequence) use that top byte, so they never
 * pair with a collective's traffic: after a failed collective the ranks'
 * sequences may differ, and finalize must still meet only finalize. */
#define PPT_TAG_LIFE_H   127u
#define PPT_TAG_CONSTRUCT(seq) ((int)(PPT_TAG_LIFE_H << 24 | ((seq) & 0x7fffffu)))
#define PPT_TAG_FINALIZE ((int)(PPT_TAG_LIFE_H << 24 | 0x800000u))
#define PPT_TAG_NOTICE   ((int)(PPT_TAG_LIFE_H << 24 | 0x800001u))   /* notice.c */
#define PPT_TAG_PROBE    ((int)(PPT_TAG_LIFE_H << 24 | 0x800002u))   /* probe.c */

struct plait_comm {
    uint32_t     magic;
    int          rank, size;
    int         *world_of;          /* comm rank -> world rank */
    uint64_t     ctx;               /* user traffic; ctx | 1 is the collective context */
    uint64_t     nchild;            /* communicators derived so far (same on every rank) */
    uint32_t     coll_seq;          /* collectives started so far (tags of internal traffic) */
    uint32_t     coll_calls;        /* collective calls made on it, every kind and path (the
                                     * shared area checks that slots it reads are of this call) */
    uint32_t     coll_blocking;     /* the blocking collective call running on it, 0: none
                                     * (a peer's probe must not read it as finished) */
    uint32_t     coll_told;         /* the last call whose failure the members heard of from
                                     * this rank, or that failed here on a peer's notice
                                     * (notice.c): one notice per call, no echoes */
    ppt_mq_t    *mq, *cmq;
    char         name[32];
    struct plait_comm *all_next;
    _Atomic int  refs;              /* requests made on it and not yet freed: a freed
                                     * communicator is released once none is left */
    /* the collectives layer's state of this communicator, or NULL: its
     * shared-memory area (coll/shm_small.c) and host map (coll/hier.c);
     * each *_free releases it when the communicator is freed */
    void        *area;
    void       (*area_free)(void *area);
    void        *hier;
    void       (*hier_free)(void *hier);
};

/* ------------------------------------------------------- outgoing queue */

typedef struct ppt_tx {
    struct ppt_tx  *next;
    ppt_hdr_t       hdr;
    const void     *payload;
    size_t          plen;
    plait_request_t req;            /* EAGER: completed once sent; DATA stream: the send */
} ppt_tx_t;

typedef struct {
    ppt_tx_t *head, *tail;
    int       mute;   /* the peer left a withdrawal unanswered for PLAIT_TIMEOUT; the next
                       * ones do not wait for it until it answers one (proto.c) */
} ppt_txq_t;

/* Receiver, per peer: the HEAD frame the peer's last RTS announced (it
 * comes next from that peer: proto.c). rid: the receive it belongs to once
 * matched (0: the RTS waits unexpected). */
typedef struct {
    uint64_t sid, rid;
    size_t   len;
} ppt_head_t;


/* ------------------------------------------------------------ the state */

typedef struct ppt_state {
    pthread_mutex_t lock;
    prt_config_t    cfg;
    prt_job_t       job;
    ptl_tl_t        shm;             /* also owns the process's wake-up word */
    ptl_tl_t        tcp;             /* every pair when PLAIT_TRANSPORT=tcp */
    ptl_tl_t        udp;             /* ranks on other hosts (or all: PLAIT_TRANSPORT=udp) */
    ptl_tl_t       *tls[4];          /* every transport instance, for progress */
    int             ntl;
    ptl_tl_t      **tl_of;           /* by world rank: its transport; NULL for oneself
                                      * and for ranks no transport reaches */
    ppt_txq_t      *txq;             /* by world rank: frames waiting for ring space */
    ppt_head_t     *heads;           /* by world rank: the HEAD frame expected next */
    plait_request_t *early;          /* by world rank: the receive its next frame fills
                                      * (early placement), else NULL */
    int             ntxq;            /* non-empty queues */
    prt_map_t       mqs;             /* ctx -> ppt_mq_t */
    ppt_mq_t       *mq_last;         /* one-entry cache in front of mqs */
    prt_map_t       reqs;            /* id -> request, while a frame may name it */
    uint64_t        next_id;
    plait_comm_t    world;
    plait_comm_t    all_comms;       /* every communicator alive, or freed by the user
                                      * with requests on it still to be freed */
    plait_comm_t    tombs;           /* released communicators' handles, newest first
                                      * (a stale handle reads PLAIT_ERR_STATE) */
    int             ntombs;
    plait_request_t coll_head;       /* active non-blocking collectives */
    plait_request_t coop_head;       /* receives moving data by cooperative copy */
    plait_request_t get_head;        /* matched receives whose pull waits for the pass's end */
    uint64_t        last_alive_ns;
    uint64_t        net_wait_ns;     /* moving average of waits on other hosts' ranks */
    _Atomic int     net_wait_yield;  /* their spin stage yields (request.c wait_spin_yields;
                                      * read without the lock, while backing off) */
    ppt_umsg_t     *umsg_keep;       /* unexpected-message buffers kept for reuse (match.c) */
    size_t          umsg_kept;       /* their bytes */
    _Atomic long    user_reqs[4];    /* by kind: requests the caller holds (allocated,
                                      * not yet freed by wait/test), for finalize's warning */
    /* the progress thread (async.c) */
    pthread_t        async_thread;
    int              async_started, async_failed;
    _Atomic uint32_t async_gen;      /* futex word the thread sleeps on: bumped to wake it
                                      * from its deep sleep, and at finalize */
    _Atomic int      async_deep;     /* it sleeps until the next one (none in flight) */
    int              async_spare;    /* it runs off the ranks' CPUs (async_main) */
    /* What the polling thread reads, on a cache line of its own: no other
     * field's writes take it from the thread, and its reads take no other
     * field from the program (async.c, PPT_ASYNC_SAMPLE_NS). */
    _Alignas(64)
    _Atomic uint64_t passes;         /* progress passes made (the thread's "program away"
                                      * test; written under the lock, read without) */
    _Atomic int      nb_inflight;    /* non-blocking collectives in coll_head (likewise) */
    _Atomic int      waiters;        /* program threads inside a wait loop: the polling
                                      * thread keeps off the lock (async_poll) */
    _Atomic int      async_stop;     /* finalize: the thread leaves */
    _Alignas(64)
    struct ppt_notice_tx *notice_tx; /* refusals on their way to the peers (notice.c) */
    int             probes_due;     /* probes came that want an answer (probe.c) */
    /* Counters of the collectives layer (coll/), under the lock, and how it
     * prints them: set at plait_init, called first by the stats printing
     * here (PLAIT_STATS, plait_stats_print), which knows nothing of them. */
    uint64_t        coll_stats[8];    /* (PCOLL_ST_N of them used) */
    void          (*coll_stats_print)(struct ppt_state *s, FILE *f);
} ppt_state_t;

/* The library instance between plait_init and plait_finalize, else NULL. */
ppt_state_t *ppt_get(void);
/* Entry check of public calls: the instance, or NULL with PLAIT_ERR_STATE set in *rc. */
ppt_state_t *ppt_enter(int *rc, const char *fn);

/* async.c: the progress thread. A non-blocking collective just put in
 * flight wakes it (starting it the first time); plait_finalize stops it
 * before it takes the lock. */
void ppt_async_kick_locked(ppt_state_t *s);
/* A collective leaves coll_head: a non-blocking one is counted out of nb_inflight. */
static inline void ppt_coll_unlisted_locked(ppt_state_t *s, plait_request_t r)
{
    if (!r->on_stack)   /* (written under the lock only: no read-modify-write) */
        atomic_store_explicit(&s->nb_inflight,
                              atomic_load_explicit(&s->nb_inflight, memory_order_relaxed) - 1,
                              memory_order_relaxed);
}
/* Takes a collective's request out of coll_head if it is there (one
 * completed outside its own progress call, then freed). */
void ppt_coll_unlink_locked(ppt_state_t *s, plait_request_t req);
void ppt_async_stop(ppt_state_t *s);
/* A program thread enters (+1) or leaves (-1) a wait loop. */
static inline void ppt_waiting(ppt_state_t *s, int d)
{
    atomic_fetch_add_explicit(&s->waiters, d, memory_order_relaxed);
}

/* api.c: the instance's setup and teardown, driven by plait_init/plait_finalize */
int  ppt_init(void);
int  ppt_fini(void);

/* comm.c */
int  ppt_comm_check(plait_comm_t comm, const char *fn);
int  ppt_comm_create(ppt_state_t *s, uint64_t ctx, int rank, int size, int *world_of,
                     plait_comm_t *out);
uint64_t ppt_ctx_derive(uint64_t parent, uint64_t seq, uint64_t color);
ppt_mq_t *ppt_mq_lookup(ppt_state_t *s, uint64_t ctx, int create);
void ppt_comm_destroy_all(ppt_state_t *s);
/* Warns of messages that arrived on a user's communicator and were never
 * received (finalize drops them): a send without its receive shows. */
void ppt_report_unreceived_locked(ppt_state_t *s);
/* Warns of requests the caller never completed with wait/test (none: silent). */
void ppt_report_requests(ppt_state_t *s);
/* "world (N ranks)", or a derived communicator's id, size and first members. */
const char *ppt_comm_label(plait_comm_t c, char *buf, size_t len);
/* Releases every freed communicator no request refers to any more. */
void ppt_comm_sweep_locked(ppt_state_t *s);

/* request.c */
/* A new request; with storage (a blocking call's stack) it is initialized there. */
plait_request_t ppt_req_new(int kind, plait_comm_t comm, plait_request_t storage);
void ppt_req_free(plait_request_t req);
void ppt_req_complete(ppt_state_t *s, plait_request_t req, int rc);
int  ppt_req_register(ppt_state_t *s, plait_request_t req);
void ppt_req_unregister(ppt_state_t *s, plait_request_t req);
/* Waits (releasing the lock while backing off) until req is done or timeout. */
int  ppt_wait_locked(ppt_state_t *s, plait_request_t req, const char *fn);
/* The same with a time limit of its own instead of PLAIT_TIMEOUT. */
int  ppt_wait_for_locked(ppt_state_t *s, plait_request_t req, const char *fn, double timeout_s);
/* One progress round over every transport and active request; returns the
 * work it did (packets, frames, completions): 0 when nothing moved. */
int  ppt_progress_locked(ppt_state_t *s);
/* PLAIT_OK, or PLAIT_ERR_PEER (with message) when world rank `world` has died. */
int  ppt_peer_alive(ppt_state_t *s, int world);
/* Before teardown: pushes every queued frame and every transport's unsent
 * bytes out, so peers still get what this process sent last. */
int  ppt_quiesce_locked(ppt_state_t *s, double timeout_s);

/* notice.c: a collective call that fails on this rank for a cause of its own
 * (its arguments, a mismatch it saw) fails on the others too, instead of
 * leaving them waiting for its part. */
/* Tells every other member that call `call` of comm failed here with code, why. */
void ppt_coll_notify_locked(ppt_state_t *s, plait_comm_t comm, uint32_t call, int code,
                            const char *why);
/* A peer's notice that reached this rank (rx_eager: tag PPT_TAG_NOTICE). */
void ppt_notice_rx(ppt_mq_t *mq, int src, const void *payload, size_t len);
/* The peer's code (notice.c), quoting it, if a peer failed call `call` of comm. */
int  ppt_coll_noticed(plait_comm_t comm, uint32_t call);
/* PLAIT_ERR_ARG if a message for the collective call tagged `tag` shows that
 * its sender runs another kind of call under that number (any_tag: any
 * message under it, for a call that sends none). */
int  ppt_coll_diverged(plait_comm_t comm, int tag, int any_tag);
/* The text of that failure, naming rank src of comm (the call: comm's latest). */
int  ppt_coll_diverged_err(plait_comm_t comm, int src);
/* Frees the notices sent (all: at finalize, whatever their state). */
void ppt_notice_sweep_locked(ppt_state_t *s, int all);
/* Sends msg (at most 248 bytes) to peer on comm's collective context with a
 * reserved tag, kept until sent (ppt_notice_sweep_locked); PLAIT_ERR_NOMEM. */
int  ppt_notice_send_locked(ppt_state_t *s, plait_comm_t comm, int peer, int tag,
                            const void *msg, size_t len);

/* probe.c: a collective call stalled on some peers asks them where they are,
 * to tell a mismatch that sent no message from a slow peer. */
/* Asks comm rank peer (once per stalled round of call `call`, tag `tag`). */
void ppt_coll_probe_locked(ppt_state_t *s, plait_comm_t comm, int peer, uint32_t call, int tag);
/* A peer's probe or answer that reached this rank (rx_eager: PPT_TAG_PROBE). */
void ppt_probe_rx(ppt_state_t *s, ppt_mq_t *mq, int src, int world, const void *payload,
                  size_t len);
/* End of a progress pass: answers the probes that came (s->probes_due). */
void ppt_probe_answer_locked(ppt_state_t *s);
/* PLAIT_ERR_ARG if a peer's probe shows it runs the call tagged `tag` as
 * another one. */
int  ppt_coll_probed(plait_comm_t comm, int tag);
/* PLAIT_ERR_ARG if comm rank peer said it finished call `call` (and every
 * earlier one), where a receive of that call from it is still unmatched
 * here, or a send (send) to it unanswered: it went past without its part. */
int  ppt_coll_passed(plait_comm_t comm, int peer, uint32_t call, int send);

/* match.c */
int  ppt_mq_post(ppt_mq_t *mq, plait_request_t req);
void ppt_mq_unpost(ppt_mq_t *mq, plait_request_t req);
plait_request_t ppt_mq_match_posted(ppt_mq_t *mq, int src, int tag);
/* The receive ppt_mq_match_posted would take, left posted. */
plait_request_t ppt_mq_find_posted(ppt_mq_t *mq, int src, int tag);
ppt_umsg_t *ppt_mq_match_unexp(ppt_mq_t *mq, int src, int tag);
void ppt_mq_del_unexp(ppt_mq_t *mq, ppt_umsg_t *u);
int  ppt_mq_add_unexp(ppt_mq_t *mq, ppt_umsg_t *u);
void ppt_mq_fini(ppt_mq_t *mq);
/* An unexpected-message record, cleared, with room for len bytes of
 * payload in data (len 0: data NULL), or NULL; ppt_umsg_put gives it back
 * (kept for reuse, a few), ppt_umsg_drain frees the kept ones. */
ppt_umsg_t *ppt_umsg_get(ppt_state_t *s, size_t len);
void ppt_umsg_put(ppt_state_t *s, ppt_umsg_t *u);
void ppt_umsg_drain(ppt_state_t *s);

/* proto.c: start operations (lock held); user or collective context. *out may
 * point to storage for the request (see ppt_req_new) or be NULL. */
int  ppt_isend_locked(ppt_state_t *s, plait_comm_t comm, ppt_mq_t *mq, const void *buf,
                      size_t len, int dest, int tag, plait_request_t *out);
/* The same with flags: PPT_SEND_XCHG marks a collective's message whose
 * receiver posted its receive (or is about to): it goes eagerly up to the
 * user limit, not the collectives' lower one (see eager_limit). */
#define PPT_SEND_XCHG 1
int  ppt_isend_flags_locked(ppt_state_t *s, plait_comm_t comm, ppt_mq_t *mq, const void *buf,
                            size_t len, int dest, int tag, int flags, plait_request_t *out);
int  ppt_irecv_locked(ppt_state_t *s, plait_comm_t comm, ppt_mq_t *mq, void *buf, size_t cap,
                      int src, int tag, plait_request_t *out);
void ppt_rx_frame(void *ctx, int src_world, const void *hdr, size_t hlen, const void *payload,
                  size_t plen);
/* ptl_early_fn (ctx: the state): an EAGER frame's header came before its
 * payload: the posted receive it matches takes it now (early placement). */
void *ppt_rx_early(void *ctx, int src_world, const void *hdr, size_t hlen, size_t plen);
int  ppt_tx_flush_locked(ppt_state_t *s);
/* ptl_zc_fn for zc_reap (ctx: the state): a zero-copy DATA frame finished. */
void ppt_zc_done(void *ctx, uint64_t cookie, int rc);
int  ppt_coop_progress(ppt_state_t *s, plait_request_t r);
/* Runs the pulls (transport get) of rendezvous matched during this pass. */
int  ppt_get_progress(ppt_state_t *s);
/* Withdraws an unfinished request: afterwards it never completes or touches
 * its buffer, and nothing reads a send's buffer. Returns 1 when the request
 * turned out finished meanwhile (a send the peer had taken: the caller's
 * failure may read as success), else 0. */
int  ppt_cancel_locked(ppt_state_t *s, plait_request_t req);

#endif
