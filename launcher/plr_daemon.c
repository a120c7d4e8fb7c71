/* plaitrun --daemon: the per-host part of a job on several hosts.
 *
 *   plaitrun --daemon --parent ADDR:PORT --node N     (the job secret on stdin)
 *
 * Started by the head through the launch agent.  It connects to its parent
 * in the daemon tree (the head or another daemon), proves the job secret,
 * receives the job, becomes the PMIx server of its host's ranks and runs
 * the usual main loop; ranks' output, exits and failures go up to the head,
 * which alone decides the job's fate.  It serves its own children in the
 * tree (they connect to the address it reaches its parent from), relays
 * messages, and runs its part of the fence allgather: its ranks' blob plus
 * its children's go up in one message, the full result comes back down.
 *
 * Nothing may outlive it: a watchdog process, forked before anything else
 * exists, kills the ranks and removes the PMIx temp directory and the job's
 * /dev/shm segments if the daemon dies without saying goodbye (SIGKILL).
 * Losing its parent connection ends the local ranks within about a second. */
#include "config.h"

#include "launcher/plr_net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define PLR_DMAX_PENDING 16

typedef struct plr_dfence {
    uint32_t   seq;
    bool       have_local;
    void      *fn, *cbdata;        /* the local PMIx fence to complete (NULL: done) */
    double     deadline;           /* its ranks' PMIX_TIMEOUT ends then (0: none) */
    char      *local;
    size_t     nlocal;
    int        got;                /* children heard from */
    char     **cblob;              /* [fanout] children's blobs, in child order */
    size_t    *cn;
    struct plr_dfence *next;
} plr_dfence_t;

typedef struct plr_dreq {          /* a direct modex this daemon asked for */
    uint32_t id;
    void    *fn, *cbdata;
    struct plr_dreq *next;
} plr_dreq_t;

typedef struct plr_dctx {          /* a direct modex asked of this daemon */
    uint32_t id;
    int      requester;
} plr_dctx_t;

typedef struct plr_daemon {
    char        secret[PLR_SECRET_LEN + 1];
    plr_conn_t *parent;
    plr_conn_t **child;            /* [fanout]: child number k is node (me+1)*fanout+k */
    int         nchildren;
    int         lfd;
    plr_conn_t *pending[PLR_DMAX_PENDING];
    plr_pack_t  jobmsg;            /* passed on to the children as received */
    uint32_t    fence_seq, next_req;
    plr_dfence_t *fences;
    plr_dreq_t  *reqs;
    int         watchdog;          /* write end: rank pids, 0 for "clean exit" */
    bool        ended, abandoned;
    bool        pmix_stuck;        /* PMIx did not let go at the end (plr_server_fini) */
    uint32_t    join_who;          /* last reported to the head (plr_daemon_report_join) */
    bool        join_waiting;
    int         slot_kind[2 + PLR_DMAX_PENDING + 4096], slot_idx[2 + PLR_DMAX_PENDING + 4096];
} plr_daemon_t;

static plr_job_t *plr_djob;         /* for the stream sink */

static plr_daemon_t *plr_d(plr_job_t *job)
{
    return job->net;
}

/* ------------------------------------------------------------ sending */

static void plr_d_up(plr_job_t *job, int type, const void *p, size_t n)
{
    plr_daemon_t *d = plr_d(job);
    if (d->parent)
        plr_conn_send(d->parent, type, job->mynode, PLR_NODE_HEAD, p, n);
}

static void plr_d_sink(plr_stream_t *s, const char *p, size_t n)
{
    plr_pack_t b = { 0 };
    plr_put_u32(&b, (uint32_t)s->rank);
    plr_put_u32(&b, (uint32_t)s->out_fd);
    plr_put_bytes(&b, p, n);
    if (!b.bad)
        plr_d_up(plr_djob, PLR_MSG_IO, b.p, b.len);
    free(b.p);
}

void plr_daemon_fail(plr_job_t *job, int code, const char *text)
{
    plr_pack_t b = { 0 };
    plr_put_u32(&b, (uint32_t)code);
    plr_put_str(&b, text);
    if (!b.bad)
        plr_d_up(job, PLR_MSG_FAIL, b.p, b.len);
    free(b.p);
}

void plr_daemon_report_exit(plr_job_t *job, plr_rank_t *rk)
{
    uint32_t be = htonl((uint32_t)rk->rank);
    rk->reported = true;
    plr_d_up(job, PLR_MSG_EXIT, &be, 4);
}

void plr_daemon_report_join(plr_job_t *job, const plr_rank_t *unjoined, bool waiting)
{
    plr_daemon_t *d = plr_d(job);
    uint32_t who = unjoined ? (uint32_t)unjoined->rank + 1 : 0;
    plr_pack_t b = { 0 };
    if (who == d->join_who && waiting == d->join_waiting)
        return;                        /* said already */
    d->join_who = who;
    d->join_waiting = waiting;
    plr_put_u32(&b, who);
    plr_put_u32(&b, unjoined ? (uint32_t)unjoined->pid : 0);
    plr_put_u32(&b, waiting ? 1 : 0);
    if (!b.bad)
        plr_d_up(job, PLR_MSG_JOINSTATE, b.p, b.len);
    free(b.p);
}

/* The head names the ranks that had not joined when a job ends early. */
void plr_daemon_report_connected(plr_job_t *job, const plr_rank_t *rk)
{
    plr_pack_t b = { 0 };
    plr_put_u32(&b, (uint32_t)rk->rank);
    if (!b.bad)
        plr_d_up(job, PLR_MSG_JOINED, b.p, b.len);
    free(b.p);
}

/* Along the tree: to a child whose subtree holds dest, else up. */
static void plr_d_route(plr_job_t *job, int type, int src, int dest, const void *p, size_t n)
{
    plr_daemon_t *d = plr_d(job);
    int hop = plr_tree_next_hop(job->mynode, dest, job->opts.fanout);
    if (hop >= 0) {
        int k = hop - (job->mynode + 1) * job->opts.fanout;
        if (k >= 0 && k < d->nchildren && d->child[k])
            plr_conn_send(d->child[k], type, src, dest, p, n);
    } else if (d->parent) {
        plr_conn_send(d->parent, type, src, dest, p, n);
    }
}

static void plr_d_to_children(plr_job_t *job, int type, const void *p, size_t n)
{
    plr_daemon_t *d = plr_d(job);
    for (int k = 0; k < d->nchildren; k++)
        if (d->child[k])
            plr_conn_send(d->child[k], type, PLR_NODE_HEAD, PLR_NODE_ALL, p, n);
}

/* ------------------------------------------------------------ fences */

static plr_dfence_t *plr_d_fence(plr_job_t *job, uint32_t seq)
{
    plr_daemon_t *d = plr_d(job);
    plr_dfence_t **pp = &d->fences;
    while (*pp && (*pp)->seq != seq)
        pp = &(*pp)->next;
    if (*pp == NULL && (*pp = calloc(1, sizeof(plr_dfence_t))) != NULL) {
        (*pp)->seq = seq;
        (*pp)->cblob = calloc((size_t)d->nchildren + 1, sizeof(char *));
        (*pp)->cn = calloc((size_t)d->nchildren + 1, sizeof(size_t));
    }
    return *pp;
}

/* The subtree is complete: local blob then the children's, up in one message. */
static void plr_d_fence_try(plr_job_t *job, plr_dfence_t *f)
{
    plr_daemon_t *d = plr_d(job);
    if (!f->have_local || f->got < d->nchildren || f->nlocal == (size_t)-1)
        return;
    size_t total = f->nlocal;
    for (int k = 0; k < d->nchildren; k++)
        total += f->cn[k];
    plr_pack_t b = { 0 };
    plr_put_u32(&b, f->seq);
    plr_put_u32(&b, (uint32_t)total);
    for (size_t off = 0, k = 0; k <= (size_t)d->nchildren && !b.bad; k++) {
        const char *src = k == 0 ? f->local : f->cblob[k - 1];
        size_t n = k == 0 ? f->nlocal : f->cn[k - 1];
        if (b.cap - b.len < n) {
            char *p = realloc(b.p, b.len + n);
            if (p == NULL) {
                b.bad = true;
                break;
            }
            b.p = p;
            b.cap = b.len + n;
        }
        if (n)
            memcpy(b.p + b.len, src, n);
        b.len += n;
        off += n;
    }
    if (!b.bad)
        plr_conn_send(d->parent, PLR_MSG_FENCE_UP, job->mynode, PLR_NODE_HEAD, b.p, b.len);
    else
        plr_daemon_fail(job, 1, PLR_NAME ": out of memory in a fence");
    free(b.p);
    f->nlocal = (size_t)-1;                /* sent; waiting for the result */
    free(f->local);
    f->local = NULL;
}

static void plr_d_fence_local(plr_job_t *job, plr_event_t *ev)
{
    plr_daemon_t *d = plr_d(job);
    plr_dfence_t *f = plr_d_fence(job, d->fence_seq++);
    if (f == NULL || f->cblob == NULL || f->cn == NULL) {
        plr_server_complete(ev->fn, ev->cbdata, -1 /* PMIX_ERROR */, NULL, 0);
        return;
    }
    f->have_local = true;
    f->fn = ev->fn;
    f->cbdata = ev->cbdata;
    f->deadline = ev->code > 0 ? plr_now() + ev->code : 0;
    f->local = ev->data;
    f->nlocal = ev->ndata;
    ev->data = NULL;
    plr_d_fence_try(job, f);
}

static void plr_d_fence_child(plr_job_t *job, int k, plr_unpack_t *u)
{
    uint32_t seq = plr_get_u32(u);
    size_t n;
    const char *blob = plr_get_bytes(u, &n);
    plr_dfence_t *f = u->bad ? NULL : plr_d_fence(job, seq);
    if (f == NULL || f->cblob == NULL || f->cblob[k] || f->cn[k])
        return;
    if (n > 0 && (f->cblob[k] = malloc(n)) == NULL)
        return;
    if (n)
        memcpy(f->cblob[k], blob, n);
    f->cn[k] = n;
    f->got++;
    plr_d_fence_try(job, f);
}

static void plr_d_fence_free(plr_daemon_t *d, plr_dfence_t *f)
{
    for (int k = 0; k < d->nchildren && f->cblob; k++)
        free(f->cblob[k]);
    free(f->cblob);
    free(f->cn);
    free(f->local);
    free(f);
}

static void plr_d_fence_down(plr_job_t *job, const char *p, size_t len)
{
    plr_daemon_t *d = plr_d(job);
    plr_unpack_t u = { p, len, 0, false };
    uint32_t seq = plr_get_u32(&u);
    size_t n;
    const char *blob = plr_get_bytes(&u, &n);
    if (u.bad)
        return;
    plr_d_to_children(job, PLR_MSG_FENCE_DOWN, p, len);
    plr_dfence_t **pp = &d->fences;
    while (*pp && (*pp)->seq != seq)
        pp = &(*pp)->next;
    plr_dfence_t *f = *pp;
    if (f == NULL)
        return;
    *pp = f->next;
    char *copy = n ? malloc(n) : NULL;
    if (copy)
        memcpy(copy, blob, n);
    plr_server_complete(f->fn, f->cbdata, n && !copy ? -1 : 0, copy, copy ? n : 0);
    plr_d_fence_free(d, f);
}

/* ------------------------------------------------------------ direct modex */

static void plr_d_dmdx_ask(plr_job_t *job, plr_event_t *ev)
{
    plr_daemon_t *d = plr_d(job);
    plr_dreq_t *q = calloc(1, sizeof(*q));
    if (q == NULL) {
        plr_server_complete(ev->fn, ev->cbdata, -1, NULL, 0);
        return;
    }
    q->id = d->next_req++;
    q->fn = ev->fn;
    q->cbdata = ev->cbdata;
    q->next = d->reqs;
    d->reqs = q;
    uint32_t m[2] = { htonl(q->id), htonl((uint32_t)ev->rank) };
    plr_d_route(job, PLR_MSG_DMDX_REQ, job->mynode, job->rank_node[ev->rank], m, sizeof(m));
}

static void plr_d_dmdx_reply(plr_job_t *job, int requester, uint32_t id, int status,
                             const char *data, size_t n)
{
    plr_pack_t b = { 0 };
    plr_put_u32(&b, id);
    plr_put_u32(&b, (uint32_t)status);
    plr_put_bytes(&b, data, n);
    if (!b.bad)
        plr_d_route(job, PLR_MSG_DMDX_RESP, job->mynode, requester, b.p, b.len);
    free(b.p);
}

static void plr_d_dmdx_request(plr_job_t *job, int src, plr_unpack_t *u)
{
    uint32_t id = plr_get_u32(u), rank = plr_get_u32(u);
    plr_dctx_t *ctx = malloc(sizeof(*ctx));
    if (u->bad)
        return free(ctx);
    if (ctx == NULL || rank >= (uint32_t)job->size) {
        free(ctx);
        plr_d_dmdx_reply(job, src, id, -46 /* PMIX_ERR_NOT_FOUND */, NULL, 0);
        return;
    }
    ctx->id = id;
    ctx->requester = src;
    int rc = plr_server_dmodex_request(job, (int)rank, ctx);
    if (rc != 0) {
        free(ctx);
        plr_d_dmdx_reply(job, src, id, rc, NULL, 0);
    }
}

static void plr_d_dmdx_response(plr_job_t *job, plr_unpack_t *u)
{
    plr_daemon_t *d = plr_d(job);
    uint32_t id = plr_get_u32(u);
    int status = (int)plr_get_u32(u);
    size_t n;
    const char *blob = plr_get_bytes(u, &n);
    plr_dreq_t **pp = &d->reqs;
    while (*pp && (*pp)->id != id)
        pp = &(*pp)->next;
    if (u->bad || *pp == NULL)
        return;
    plr_dreq_t *q = *pp;
    *pp = q->next;
    char *copy = n ? malloc(n) : NULL;
    if (copy)
        memcpy(copy, blob, n);
    plr_server_complete(q->fn, q->cbdata, status, copy, copy ? n : 0);
    free(q);
}

void plr_daemon_event(plr_job_t *job, plr_event_t *ev)
{
    if (ev->type == PLR_EV_FENCE) {
        plr_d_fence_local(job, ev);
    } else if (ev->type == PLR_EV_DMDX) {
        plr_d_dmdx_ask(job, ev);
    } else if (ev->type == PLR_EV_DMDX_DATA) {
        plr_dctx_t *ctx = ev->cbdata;
        plr_d_dmdx_reply(job, ctx->requester, ctx->id, ev->code, ev->data, ev->ndata);
        free(ctx);
    }
    plr_event_free(ev);
}

/* ------------------------------------------------------------ messages */

/* The parent is gone (head killed, network broken): end the local ranks
 * (SIGTERM, SIGKILL a second later) and leave. */
static void plr_d_abandon(plr_job_t *job, const char *why)
{
    plr_daemon_t *d = plr_d(job);
    if (d->abandoned || d->ended)
        return;
    d->abandoned = true;
    fprintf(stderr, PLR_NAME ": host %s: %s; ending this host's ranks\n", job->hostname, why);
    fflush(stderr);
    plr_conn_free(d->parent);
    d->parent = NULL;
    job->stay = false;
    job->exit_code = 1;
    if (!job->ending) {
        job->ending = true;
        plr_proc_signal_all(job, SIGTERM);
        job->kill_at = plr_now() + 1.0;
    }
}

static void plr_d_local(plr_job_t *job, const plr_msg_hdr_t *h, const char *p)
{
    plr_daemon_t *d = plr_d(job);
    plr_unpack_t u = { p, h->len, 0, false };
    switch (h->type) {
    case PLR_MSG_KILL: {
        uint32_t sig = plr_get_u32(&u);
        if (!u.bad && sig > 0 && sig < 65)
            plr_proc_signal_all(job, (int)sig);
        break;
    }
    case PLR_MSG_END:
        d->ended = true;
        job->stay = false;
        if (job->nlive > 0)                /* cannot happen: the head waits for every exit */
            plr_proc_signal_all(job, SIGKILL);
        break;
    case PLR_MSG_FENCE_DOWN:
        plr_d_fence_down(job, p, h->len);
        break;
    case PLR_MSG_DMDX_REQ:
        plr_d_dmdx_request(job, h->src, &u);
        break;
    case PLR_MSG_DMDX_RESP:
        plr_d_dmdx_response(job, &u);
        break;
    default:
        break;
    }
}

static void plr_d_from_parent(plr_job_t *job, const plr_msg_hdr_t *h, const char *p)
{
    if (h->dest == PLR_NODE_ALL) {
        if (h->type != PLR_MSG_FENCE_DOWN)     /* that one relays itself */
            plr_d_to_children(job, (int)h->type, p, h->len);
        plr_d_local(job, h, p);
    } else if (h->dest == job->mynode) {
        plr_d_local(job, h, p);
    } else {
        plr_d_route(job, (int)h->type, h->src, h->dest, p, h->len);
    }
}

static void plr_d_from_child(plr_job_t *job, int k, const plr_msg_hdr_t *h, const char *p)
{
    plr_unpack_t u = { p, h->len, 0, false };
    if (h->type == PLR_MSG_FENCE_UP)
        plr_d_fence_child(job, k, &u);
    else if (h->dest == job->mynode)
        plr_d_local(job, h, p);
    else if (h->dest == PLR_NODE_HEAD && plr_d(job)->parent)   /* keeps its source */
        plr_conn_send(plr_d(job)->parent, (int)h->type, h->src, PLR_NODE_HEAD, p, h->len);
    else
        plr_d_route(job, (int)h->type, h->src, h->dest, p, h->len);
}

static void plr_d_refuse(plr_job_t *job, int slot)
{
    plr_daemon_t *d = plr_d(job);
    fprintf(stderr, PLR_NAME ": host %s: refused a connection that did not prove the job secret\n",
            job->hostname);
    plr_conn_free(d->pending[slot]);
    d->pending[slot] = NULL;
}

/* A child's first message must be HELLO with the secret and a node number
 * that is one of this daemon's children. */
static void plr_d_hello(plr_job_t *job, int slot)
{
    plr_daemon_t *d = plr_d(job);
    plr_conn_t *c = d->pending[slot];
    uint32_t node = 0;
    int rc = plr_hello_take(c, d->secret, &node);
    int k = (int)node - (job->mynode + 1) * job->opts.fanout;
    if (rc == 0)
        return;
    if (rc < 0 || k < 0 || k >= d->nchildren || d->child[k]) {
        plr_d_refuse(job, slot);
        return;
    }
    d->pending[slot] = NULL;
    c->authed = true;
    c->node = (job->mynode + 1) * job->opts.fanout + k;
    d->child[k] = c;
    plr_conn_send(c, PLR_MSG_JOB, PLR_NODE_HEAD, c->node, d->jobmsg.p, d->jobmsg.len);
}

static void plr_d_accept(plr_daemon_t *d)
{
    plr_accept_pending(d->lfd, d->pending, PLR_DMAX_PENDING);
}

/* k: child number, or -1 for the parent. */
static void plr_d_conn_io(plr_job_t *job, int k, short revents)
{
    plr_daemon_t *d = plr_d(job);
    plr_conn_t *c = k < 0 ? d->parent : d->child[k];
    bool broken = false;
    if (revents & POLLOUT)
        broken = plr_conn_flush(c) != 0;
    if (revents & (POLLIN | POLLHUP | POLLERR))
        broken = plr_conn_read(c) != 0 || broken;
    plr_msg_hdr_t h;
    const char *p;
    /* Whole messages that came before a close are handled all the same: the
     * parent's END followed by its close (a daemon of a tree's middle level
     * leaving) is the end of the job, not a lost parent (a black-box test
     * saw "lost the connection" after every job of two levels). */
    while (plr_conn_next(c, &h, &p)) {
        if (h.type == 0) {
            broken = true;
            break;
        }
        if (k < 0)
            plr_d_from_parent(job, &h, p);
        else
            plr_d_from_child(job, k, &h, p);
        if (k < 0 ? d->parent != c : d->child[k] != c)
            return;                        /* dropped while handling */
    }
    if (!broken)
        return;
    if (k < 0) {
        plr_d_abandon(job, "lost the connection to plaitrun");
        return;
    }
    int node = (job->mynode + 1) * job->opts.fanout + k;
    plr_conn_free(c);
    d->child[k] = NULL;
    if (!d->ended) {
        uint32_t be = htonl((uint32_t)node);
        plr_d_up(job, PLR_MSG_LOST, &be, 4);
    }
}

/* ------------------------------------------------------------ loop hooks */

int plr_daemon_maxfds(plr_job_t *job)
{
    return 2 + PLR_DMAX_PENDING + job->opts.fanout;
}

static void plr_d_slot(plr_daemon_t *d, struct pollfd *fds, int *n, plr_conn_t *c, int kind, int idx)
{
    fds[*n] = (struct pollfd){ .fd = c->fd, .events = POLLIN | (plr_conn_pending(c) ? POLLOUT : 0) };
    d->slot_kind[*n] = kind;
    d->slot_idx[(*n)++] = idx;
}

int plr_daemon_fill(plr_job_t *job, struct pollfd *fds, int max)
{
    plr_daemon_t *d = plr_d(job);
    int n = 0;
    (void)max;
    if (d->parent)
        plr_d_slot(d, fds, &n, d->parent, 0, -1);
    if (d->lfd >= 0) {
        fds[n] = (struct pollfd){ .fd = d->lfd,   /* (a full pending table: backlog) */
                                  .events = plr_pending_room(d->pending, PLR_DMAX_PENDING) >= 0
                                                ? POLLIN : 0 };
        d->slot_kind[n++] = 1;
    }
    for (int s = 0; s < PLR_DMAX_PENDING; s++)
        if (d->pending[s])
            plr_d_slot(d, fds, &n, d->pending[s], 2, s);
    for (int k = 0; k < d->nchildren; k++)
        if (d->child[k])
            plr_d_slot(d, fds, &n, d->child[k], 0, k);
    return n;
}

void plr_daemon_handle(plr_job_t *job, struct pollfd *fds, int n)
{
    plr_daemon_t *d = plr_d(job);
    for (int i = 0; i < n; i++) {
        if (!fds[i].revents)
            continue;
        int idx = d->slot_idx[i];
        if (d->slot_kind[i] == 1)
            plr_d_accept(d);
        else if (d->slot_kind[i] == 2 && d->pending[idx])
            plr_d_hello(job, idx);
        else if (d->slot_kind[i] == 0 && (idx < 0 ? d->parent != NULL : d->child[idx] != NULL) &&
                 (idx < 0 ? d->parent->fd : d->child[idx]->fd) == fds[i].fd)
            plr_d_conn_io(job, idx, fds[i].revents);
    }
}

void plr_daemon_tick(plr_job_t *job)
{
    plr_daemon_t *d = plr_d(job);
    double now = plr_now();
    for (int s = 0; s < PLR_DMAX_PENDING; s++)
        if (d->pending[s] && now > d->pending[s]->deadline)
            plr_d_refuse(job, s);
    /* This host's ranks gave up on a fence (their PMIX_TIMEOUT): they get
     * the timeout now; the fence stays listed for its result, if it ever
     * comes, to be dropped (plr_d_fence_down). */
    for (plr_dfence_t *f = d->fences; f; f = f->next)
        if (f->fn && f->deadline > 0 && now > f->deadline) {
            plr_server_timed_out(f->fn, f->cbdata);
            f->fn = NULL;
        }
}

/* ------------------------------------------------------------ the job */

static char *plr_d_strdup(const char *s, bool *bad)
{
    char *c = strdup(s);
    if (c == NULL)
        *bad = true;
    return c;
}

/* Reads the job written by plr_head_jobmsg(). */
static int plr_d_job_parse(plr_job_t *job, const char *p, size_t len, char *cwd, size_t cwdlen)
{
    plr_unpack_t u = { p, len, 0, false };
    plr_opts_t *o = &job->opts;
    job->size = (int)plr_get_u32(&u);
    job->nnodes = (int)plr_get_u32(&u);
    o->fanout = (int)plr_get_u32(&u);
    if (u.bad || job->size < 1 || job->size > 1 << 20 || job->nnodes < 1 ||
        job->nnodes > job->size || o->fanout < 1 || job->mynode >= job->nnodes)
        return -1;
    job->node_names = calloc((size_t)job->nnodes, sizeof(*job->node_names));
    job->rank_node = calloc((size_t)job->size, sizeof(int));
    job->rank_lrank = calloc((size_t)job->size, sizeof(int));
    int *count = calloc((size_t)job->nnodes, sizeof(int));
    if (!job->node_names || !job->rank_node || !job->rank_lrank || !count) {
        free(count);
        return -1;
    }
    for (int n = 0; n < job->nnodes; n++)
        snprintf(job->node_names[n], sizeof(job->node_names[n]), "%s", plr_get_str(&u));
    for (int r = 0; r < job->size && !u.bad; r++) {
        uint32_t nd = plr_get_u32(&u);
        if (nd >= (uint32_t)job->nnodes)
            u.bad = true;
        else
            job->rank_lrank[r] = count[job->rank_node[r] = (int)nd]++;
    }
    o->nranks = u.bad ? 0 : count[job->mynode];
    free(count);
    uint32_t flags = plr_get_u32(&u);
    o->report_bindings = flags & 1;
    o->bind_given = flags & 2;
    o->bind = (plr_bind_policy_t)plr_get_u32(&u);
    snprintf(job->nspace, sizeof(job->nspace), "%s", plr_get_str(&u));
    snprintf(cwd, cwdlen, "%s", plr_get_str(&u));
    uint32_t argc = plr_get_u32(&u);
    if (u.bad || argc < 1 || argc > 1 << 16 || o->nranks < 1)
        return -1;
    o->argv = calloc(argc + 1, sizeof(char *));
    for (uint32_t i = 0; o->argv && i < argc && !u.bad; i++)
        o->argv[i] = plr_d_strdup(plr_get_str(&u), &u.bad);
    uint32_t nx = plr_get_u32(&u);
    if (u.bad || o->argv == NULL || nx > 1 << 16)
        return -1;
    o->xvars = calloc(nx + 1, sizeof(char *));
    for (uint32_t i = 0; o->xvars && i < nx && !u.bad; i++)
        o->xvars[o->nxvars++] = plr_d_strdup(plr_get_str(&u), &u.bad);
    return u.bad || o->xvars == NULL ? -1 : 0;
}

static int plr_d_ranks_init(plr_job_t *job)
{
    job->ranks = calloc((size_t)job->opts.nranks, sizeof(plr_rank_t));
    if (job->ranks == NULL)
        return -1;
    snprintf(job->hostname, sizeof(job->hostname), "%s", job->node_names[job->mynode]);
    int i = 0;
    for (int r = 0; r < job->size; r++) {
        if (job->rank_node[r] != job->mynode)
            continue;
        job->ranks[i].rank = r;
        plr_stream_init(&job->ranks[i].out, -1, 1, r);
        plr_stream_init(&job->ranks[i].err, -1, 2, r);
        i++;
    }
    return 0;
}

/* ------------------------------------------------------------ watchdog */

/* Forked while the daemon is single-threaded.  Reads rank pids; a 0 means
 * the daemon cleaned up itself; EOF without it means the daemon died:
 * then it kills the ranks' process groups and removes the job's files. */
static void plr_d_watchdog_run(int rd, const char *tmpdir, const char *nspace, bool claimed)
{
    pid_t pids[4096];
    int n = 0;
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    setsid();
    for (;;) {
        pid_t p;
        ssize_t r = read(rd, &p, sizeof(p));
        if (r < 0 && errno == EINTR)
            continue;
        if (r == (ssize_t)sizeof(p) && p == 0)
            _exit(0);
        if (r != (ssize_t)sizeof(p))
            break;
        if (n < 4096)
            pids[n++] = p;
    }
    for (int i = 0; i < n; i++) {
        kill(-pids[i], SIGKILL);
        kill(pids[i], SIGKILL);
    }
    usleep(200000);                        /* let the kernel release what they held */
    plr_tmpdir_remove(tmpdir);
    plr_shm_remove(nspace);
    if (claimed)   /* the daemon's block of cores, for hosts sharing this machine */
        plr_bind_release(PLR_BIND_DIR, nspace);
    _exit(0);
}

static int plr_d_watchdog(plr_job_t *job)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(p[1]);
        if (p[0] != 3) {
            dup2(p[0], 3);
            close(p[0]);
        }
        close_range(4, ~0U, 0);
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {                   /* hold no one's pipe open */
            dup2(null, 0);
            dup2(null, 1);
            dup2(null, 2);
            close(null);
        }
        plr_d_watchdog_run(3, job->tmpdir, job->nspace, job->bind_claimed);
    }
    close(p[0]);
    return p[1];
}

static void plr_d_watch(plr_daemon_t *d, pid_t pid)
{
    if (d->watchdog >= 0 && write(d->watchdog, &pid, sizeof(pid)) != (ssize_t)sizeof(pid)) {
        /* the watchdog is gone; nothing better to do */
    }
}

/* ------------------------------------------------------------ startup */

/* The secret is the first line of stdin (the launch agent passes it on),
 * read byte by byte so that nothing after it is consumed. */
static int plr_d_read_secret(char *out)
{
    size_t n = 0;
    char c;
    while (n < PLR_SECRET_LEN) {
        ssize_t r = read(0, &c, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r != 1 || c == '\n')
            break;
        out[n++] = c;
    }
    out[n] = '\0';
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) {
        dup2(null, 0);
        close(null);
    }
    return n == PLR_SECRET_LEN ? 0 : -1;
}

/* Blocks until the job arrives from the parent (or it gives up). */
static int plr_d_receive_job(plr_job_t *job, plr_daemon_t *d, char *cwd, size_t cwdlen)
{
    double until = plr_now() + 60.0;
    for (;;) {
        plr_msg_hdr_t h;
        const char *p;
        if (plr_conn_next(d->parent, &h, &p)) {
            if (h.type != PLR_MSG_JOB)
                return -1;
            if ((d->jobmsg.p = malloc(h.len + 1)) == NULL)   /* kept for the children */
                return -1;
            memcpy(d->jobmsg.p, p, h.len);
            d->jobmsg.len = h.len;
            return plr_d_job_parse(job, p, h.len, cwd, cwdlen);
        }
        struct pollfd pf = { .fd = d->parent->fd, .events = POLLIN };
        double left = until - plr_now();
        if (left <= 0 || poll(&pf, 1, (int)(left * 1000) + 1) < 0 || plr_conn_read(d->parent) != 0)
            return -1;
    }
}

static int plr_d_connect(plr_job_t *job, plr_daemon_t *d, const char *parent)
{
    char addr[64];
    const char *colon = strrchr(parent, ':');
    if (colon == NULL || (size_t)(colon - parent) >= sizeof(addr))
        return -1;
    snprintf(addr, sizeof(addr), "%.*s", (int)(colon - parent), parent);
    int fd = plr_tcp_connect(addr, atoi(colon + 1), 10.0);
    if (fd < 0) {
        fprintf(stderr, PLR_NAME ": daemon %d: cannot connect to %s: %s (give plaitrun "
                "--head-address with an address of the head host this host reaches)\n",
                job->mynode, parent, strerror(errno));
        return -1;
    }
    d->parent = plr_conn_new(fd, PLR_NODE_HEAD);
    if (d->parent == NULL)
        return -1;
    plr_pack_t b = { 0 };
    plr_put_str(&b, d->secret);
    plr_put_u32(&b, (uint32_t)job->mynode);
    int rc = b.bad ? -1 : plr_conn_send(d->parent, PLR_MSG_HELLO, job->mynode, PLR_NODE_HEAD,
                                        b.p, b.len);
    free(b.p);
    return rc;
}

/* Children connect to the address this daemon reaches its parent from:
 * the interface that faces the head, and only that one. */
static int plr_d_listen(plr_job_t *job, plr_daemon_t *d, char *addr, int *port)
{
    int first = (job->mynode + 1) * job->opts.fanout;
    d->nchildren = first >= job->nnodes ? 0 : job->nnodes - first;
    if (d->nchildren > job->opts.fanout)
        d->nchildren = job->opts.fanout;
    d->child = calloc((size_t)d->nchildren + 1, sizeof(plr_conn_t *));
    *port = 0;
    if (plr_tcp_local_addr(d->parent->fd, addr, 64) != 0 || d->child == NULL)
        return -1;
    if (d->nchildren == 0)
        return 0;
    return (d->lfd = plr_tcp_listen(addr, port)) < 0 ? -1 : 0;
}

static int plr_d_parse_args(int argc, char **argv, const char **parent, int *node)
{
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--parent"))
            *parent = argv[++i];
        else if (!strcmp(argv[i], "--node"))
            *node = atoi(argv[++i]);
    }
    return *parent && *node >= 0 ? 0 : -1;
}

/* Everything up to the ranks' start; on failure the head hears why. */
static int plr_d_setup(plr_job_t *job, plr_daemon_t *d)
{
    char cwd[PATH_MAX], addr[64];
    int port;
    if (plr_d_receive_job(job, d, cwd, sizeof(cwd)) != 0 || plr_d_ranks_init(job) != 0) {
        fprintf(stderr, PLR_NAME ": daemon %d: no valid job from plaitrun\n", job->mynode);
        return -1;
    }
    if (chdir(cwd) != 0)
        fprintf(stderr, PLR_NAME ": host %s: warning: cannot change to %s: %s\n", job->hostname,
                cwd, strerror(errno));
    if (plr_d_listen(job, d, addr, &port) != 0) {
        plr_daemon_fail(job, 1, PLR_NAME ": cannot listen for the daemons below it");
        return -1;
    }
    plr_pack_t b = { 0 };
    plr_put_str(&b, addr);
    plr_put_u32(&b, (uint32_t)port);
    plr_d_up(job, PLR_MSG_READY, b.p, b.len);
    free(b.p);
    if (plr_job_bindings(job) != 0 || plr_tmpdir_create(job->tmpdir, sizeof(job->tmpdir)) != 0) {
        job->tmpdir[0] = '\0';
        plr_daemon_fail(job, 1, PLR_NAME ": cannot bind the ranks or create a temporary directory");
        return -1;
    }
    d->watchdog = plr_d_watchdog(job);
    plr_signals_block(true);
    int rc = plr_server_init(job);
    plr_signals_block(false);
    if (rc != 0 || plr_server_register_job(job) != 0) {
        plr_daemon_fail(job, 1, PLR_NAME ": cannot start the PMIx server");
        return -1;
    }
    return 1;                              /* the PMIx server is up */
}

static void plr_d_spawn_all(plr_job_t *job, plr_daemon_t *d)
{
    int err;
    job->exe = plr_find_program(job->opts.argv[0], &err);
    if (job->exe == NULL) {
        char text[PATH_MAX + 128];
        snprintf(text, sizeof(text), PLR_NAME ": cannot execute '%s': %s", job->opts.argv[0],
                 strerror(err));
        plr_daemon_fail(job, PLR_EXIT_NOEXEC, text);
        for (int i = 0; i < job->opts.nranks; i++)
            plr_daemon_report_exit(job, &job->ranks[i]);
        return;
    }
    for (int i = 0; i < job->opts.nranks; i++) {
        if (plr_proc_spawn(job, i) != 0 && job->ranks[i].pid <= 0)
            plr_daemon_report_exit(job, &job->ranks[i]);   /* never started */
        if (job->ranks[i].pid > 0)
            plr_d_watch(d, job->ranks[i].pid);
    }
}

/* What the daemon leaves: nothing.  Queued messages get a moment to leave. */
static void plr_d_teardown(plr_job_t *job, plr_daemon_t *d, int server_up)
{
    for (int k = 0; k < d->nchildren && d->child; k++)
        if (d->child[k]) {
            plr_conn_flush_wait(d->child[k], 2.0);
            plr_conn_free(d->child[k]);
        }
    if (d->parent) {
        plr_conn_flush_wait(d->parent, 2.0);
        shutdown(d->parent->fd, SHUT_WR);
    }
    if (server_up > 0)
        d->pmix_stuck = !plr_server_fini(job);
    if (job->tmpdir[0])
        plr_tmpdir_remove(job->tmpdir);
    plr_shm_remove(job->nspace);
    if (job->bind_claimed)
        plr_bind_release(PLR_BIND_DIR, job->nspace);
    if (d->watchdog >= 0) {
        pid_t zero = 0;
        plr_d_watch(d, zero);
        close(d->watchdog);
    }
    plr_conn_free(d->parent);
    if (d->lfd >= 0)
        close(d->lfd);
}

int plr_daemon_main(int argc, char **argv)
{
    plr_job_t job;
    plr_daemon_t *d = calloc(1, sizeof(*d));
    const char *parent = NULL;
    memset(&job, 0, sizeof(job));
    job.mynode = -1;
    if (d == NULL || plr_d_parse_args(argc, argv, &parent, &job.mynode) != 0 ||
        plr_d_read_secret(d->secret) != 0) {
        fprintf(stderr, PLR_NAME ": --daemon: bad arguments or no job secret on stdin "
                "(started by plaitrun only)\n");
        return PLR_EXIT_USAGE;
    }
    d->lfd = d->watchdog = -1;
    job.mode = PLR_MODE_DAEMON;
    job.net = d;
    job.in.in_fd = job.in.pipe_fd = -1;
    plr_djob = &job;
    plr_stream_sink = plr_d_sink;
    int sig_rd = plr_signals_init();
    signal(SIGHUP, SIG_IGN);               /* an ssh session ending is not our end */
    if (sig_rd < 0 || plr_d_connect(&job, d, parent) != 0)
        return 1;
    int up = plr_d_setup(&job, d);
    if (up > 0) {
        job.stay = true;
        plr_d_spawn_all(&job, d);
        plr_loop_run(&job, sig_rd);
    } else if (job.ranks) {
        for (int i = 0; i < job.opts.nranks; i++)
            plr_daemon_report_exit(&job, &job.ranks[i]);
    }
    plr_d_teardown(&job, d, up);
    if (d->pmix_stuck) {   /* (exit handlers could wait on the PMIx threads left running) */
        fflush(NULL);
        _exit(d->abandoned ? 1 : 0);
    }
    return d->abandoned || up <= 0 ? 1 : 0;
}
