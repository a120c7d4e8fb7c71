/*
 * tcp.c -- the kernel-TCP transport: ranks on other hosts (and any rank when
 * PLAIT_TRANSPORT=tcp). The fallback and baseline under the multipath transport.
 *
 * Connections are made lazily, one per direction: frames from A to B travel on
 * the connection A opened to B, so there is no connect race and order per pair
 * is the stream's order. A new connection starts with a hello {magic, rank,
 * proof}; anything else is closed unread. The proof is pp_tag(job key, rank,
 * us) (transport/proto: SipHash keyed with the job's secret; the key itself
 * never travels, as in the udp transport's packets), and each rank's
 * connection is taken once: a second hello from the same rank is a replay
 * (a hello once sent the key in the clear, and a captured stream replayed
 * later was taken as that rank's: old frames reached the program, or a
 * malformed one ended the job). Frames on the stream are
 * [u32 hlen][u32 plen][header][payload], each length checked before use.
 * There is no one-sided get(): large messages use pt2pt's CTS/DATA stream.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "transport/proto/pp.h"
#include "transport/tcp/tcp.h"

#define TCP_MAGIC      0x3150435454494c50ull   /* "PLITTCP1" */
#define TCP_CARD_KEY   "plait.tcp"
#define TCP_MAX_ADDRS  8
#define TCP_FRAME_MAX  (256 * 1024)            /* header + payload of one frame */
#define TCP_PREFIX     8                       /* the two u32 lengths */
#define TCP_CONNECT_MS 10000
/* Connections not past their hello yet: at most TCP_UNKNOWN_MAX at once,
 * each for TCP_CONNECT_MS (the time a peer has to connect), and a buffer
 * of one hello each. A port scanner or a stray client then holds neither
 * the rank's descriptors (accept failing with EMFILE leaves the listening
 * socket ready: every progress pass would spin on it, and real peers
 * could not connect) nor a frame buffer per connection. */
#define TCP_UNKNOWN_MAX 64

typedef struct {
    uint64_t magic;
    uint16_t port;
    uint16_t naddr;
    uint32_t addrs[TCP_MAX_ADDRS];             /* IPv4, network order */
} tcp_card_t;

typedef struct {
    uint64_t magic, proof;                     /* proof: pp_tag(key, rank, the acceptor) */
    int32_t  rank, rsv;
} tcp_hello_t;

typedef struct {
    int            fd;
    int            rank;        /* -1 until the hello arrived (incoming) */
    unsigned char *buf;         /* incoming: bytes read, not yet delivered (one hello's
                                 * room until it arrived, then a frame's) */
    size_t         have;
    uint64_t       since_ns;    /* accepted then (its hello is due TCP_CONNECT_MS later) */
} tcp_in_t;

typedef struct {
    int            fd;          /* -1: not connected yet */
    int            dead;
    unsigned char *pend;        /* outgoing: the unsent tail of one accepted frame */
    size_t         pend_len, pend_off;
} tcp_out_t;

typedef struct {
    prt_job_t  *job;
    int         lfd, efd;
    uint16_t    port;
    tcp_out_t  *out;            /* by world rank */
    int        *dead_in;        /* by world rank: its connection to us ended */
    uint64_t   *moved;          /* by world rank: bytes read from it and written to it */
    uint8_t    *taken_in;       /* by world rank: its connection was accepted (once a job) */
    tcp_in_t  **in;             /* incoming connections (accepted) */
    int         nin, capin;
    int         nunknown;       /* of them, before their hello */
    uint64_t    refused;        /* connections refused (not this job's, replays, too many) */
    int         npend;          /* outgoing connections with a pending tail */
    char        ifname[32];
} tcp_t;

static tcp_t *tcp_of(ptl_tl_t *tl) { return tl->priv; }

/* The IPv4 addresses peers may reach us at: the named interface, else every
 * up non-loopback interface, with loopback last (one host, tests). */
static int tcp_local_addrs(const char *ifname, uint32_t *addrs)
{
    struct ifaddrs *ifs, *i;
    int n = 0;
    uint32_t lo = 0;
    if (getifaddrs(&ifs) != 0)
        return 0;
    for (i = ifs; i && n < TCP_MAX_ADDRS; i = i->ifa_next) {
        uint32_t a;
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP))
            continue;
        if (ifname[0] && strcmp(ifname, i->ifa_name) != 0)
            continue;
        a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
        if (i->ifa_flags & IFF_LOOPBACK)
            lo = a;
        else
            addrs[n++] = a;
    }
    freeifaddrs(ifs);
    if (lo && n < TCP_MAX_ADDRS)
        addrs[n++] = lo;
    return n;
}

static int tcp_listen(tcp_t *t, uint32_t bind_addr)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = bind_addr};
    socklen_t len = sizeof sa;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    t->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (t->lfd < 0 || bind(t->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(t->lfd, 512) != 0 || getsockname(t->lfd, (struct sockaddr *)&sa, &len) != 0)
        return prt_err(PLAIT_ERR_TRANSPORT, "tcp: cannot listen: %s", strerror(errno));
    t->port = ntohs(sa.sin_port);
    t->efd = epoll_create1(EPOLL_CLOEXEC);
    if (t->efd < 0 || epoll_ctl(t->efd, EPOLL_CTL_ADD, t->lfd, &ev) != 0)
        return prt_err(PLAIT_ERR_TRANSPORT, "tcp: epoll: %s", strerror(errno));
    return PLAIT_OK;
}

int ptl_tcp_setup(ptl_tl_t *tl, prt_job_t *job, const prt_config_t *cfg)
{
    tcp_t *t = calloc(1, sizeof *t);
    tcp_card_t card;
    if (!t)
        return prt_err(PLAIT_ERR_NOMEM, "no memory for the tcp transport");
    tl->ops = &ptl_tcp_ops;
    tl->name = "tcp";
    tl->priv = t;
    t->job = job;
    t->lfd = t->efd = -1;
    snprintf(t->ifname, sizeof t->ifname, "%s", cfg->tcp_if);
    t->out = calloc((size_t)job->size, sizeof *t->out);
    t->dead_in = calloc((size_t)job->size, sizeof *t->dead_in);
    t->moved = calloc((size_t)job->size, sizeof *t->moved);
    t->taken_in = calloc((size_t)job->size, sizeof *t->taken_in);
    if (!t->out || !t->dead_in || !t->taken_in || !t->moved)
        return prt_err(PLAIT_ERR_NOMEM, "no memory for %d tcp peers", job->size);
    for (int r = 0; r < job->size; r++)
        t->out[r].fd = -1;
    memset(&card, 0, sizeof card);
    card.magic = TCP_MAGIC;
    card.naddr = (uint16_t)tcp_local_addrs(t->ifname, card.addrs);
    if (card.naddr == 0)
        return prt_err(PLAIT_ERR_ARG, "tcp: no IPv4 address on %s (PLAIT_TCP_IF)",
                       t->ifname[0] ? t->ifname : "any interface");
    PRT_CHECK(tcp_listen(t, t->ifname[0] ? card.addrs[0] : htonl(INADDR_ANY)));
    card.port = htons(t->port);
    return prt_boot_put(job, TCP_CARD_KEY, &card, sizeof card);
}

/* Blocking connect with a bound wait; the socket is made non-blocking after. */
static int tcp_connect_addr(uint32_t addr, uint16_t port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = port, .sin_addr.s_addr = addr};
    struct pollfd p;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), err = 0;
    socklen_t el = sizeof err;
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno != EINPROGRESS)
        goto fail;
    p.fd = fd;
    p.events = POLLOUT;
    if (poll(&p, 1, TCP_CONNECT_MS) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 ||
        err != 0)
        goto fail;
    return fd;
fail:
    close(fd);
    return -1;
}

static int tcp_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            struct pollfd pf = {fd, POLLOUT, 0};
            poll(&pf, 1, 100);
            continue;
        }
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int tcp_connect(tcp_t *t, int peer)
{
    tcp_card_t *card = NULL;
    size_t len = 0;
    tcp_hello_t hello = {TCP_MAGIC, pp_tag(t->job->key, (uint32_t)t->job->rank, (uint32_t)peer),
                         t->job->rank, 0};
    int one = 1, fd = -1;
    PRT_CHECK(prt_boot_get(t->job, peer, TCP_CARD_KEY, (void **)&card, &len));
    if (len != sizeof *card || card->magic != TCP_MAGIC || card->naddr == 0 ||
        card->naddr > TCP_MAX_ADDRS) {
        free(card);
        return prt_err(PLAIT_ERR_TRANSPORT, "tcp: the address card of rank %d is malformed", peer);
    }
    for (int i = 0; i < card->naddr && fd < 0; i++)
        fd = tcp_connect_addr(card->addrs[i], card->port);
    if (fd < 0) {
        char a[INET_ADDRSTRLEN] = "?";
        unsigned port = ntohs(card->port), others = card->naddr - 1u;
        inet_ntop(AF_INET, &card->addrs[0], a, sizeof a);
        free(card);
        t->out[peer].dead = 1;
        return prt_err(PLAIT_ERR_PEER, "tcp: cannot connect to rank %d at %s:%u (nor at its %u "
                       "other addresses)", peer, a, port, others);
    }
    free(card);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (tcp_write_all(fd, &hello, sizeof hello) != 0) {
        close(fd);
        t->out[peer].dead = 1;
        return prt_err(PLAIT_ERR_PEER, "tcp: rank %d closed the connection at hello", peer);
    }
    t->out[peer].fd = fd;
    return PLAIT_OK;
}

/* Writes what it can of the pending tail; 1 while some is left. */
static int tcp_flush_out(tcp_t *t, int peer)
{
    tcp_out_t *o = &t->out[peer];
    while (o->pend_off < o->pend_len) {
        ssize_t n = send(o->fd, o->pend + o->pend_off, o->pend_len - o->pend_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return 1;
        if (n <= 0) {
            o->dead = 1;
            return prt_err(PLAIT_ERR_PEER, "tcp: connection to rank %d failed: %s", peer,
                           n < 0 ? strerror(errno) : "closed");
        }
        o->pend_off += (size_t)n;
        t->moved[peer] += (size_t)n;
    }
    free(o->pend);
    o->pend = NULL;
    o->pend_len = o->pend_off = 0;
    t->npend--;
    return 0;
}

/* Keeps the unsent tail of a frame (from byte `sent` of prefix+hdr+payload). */
static int tcp_keep_tail(tcp_t *t, int peer, const struct iovec *iov, int niov, size_t sent)
{
    tcp_out_t *o = &t->out[peer];
    size_t total = 0, off = 0;
    for (int i = 0; i < niov; i++)
        total += iov[i].iov_len;
    if (sent >= total)
        return PLAIT_OK;
    o->pend = malloc(total - sent);
    if (!o->pend)
        return prt_err(PLAIT_ERR_NOMEM, "tcp: no memory for a %zu-byte frame tail", total - sent);
    for (int i = 0; i < niov; i++) {
        size_t a = off, b = off + iov[i].iov_len;
        if (b > sent) {
            size_t from = sent > a ? sent - a : 0;
            memcpy(o->pend + (a + from - sent), (char *)iov[i].iov_base + from, iov[i].iov_len - from);
        }
        off = b;
    }
    o->pend_len = total - sent;
    o->pend_off = 0;
    t->npend++;
    return PLAIT_OK;
}

static int tcp_send(ptl_tl_t *tl, int dst, const void *hdr, size_t hlen, const void *payload,
                    size_t plen)
{
    tcp_t *t = tcp_of(tl);
    tcp_out_t *o = &t->out[dst];
    uint32_t prefix[2] = {(uint32_t)hlen, (uint32_t)plen};
    struct iovec iov[3] = {{prefix, TCP_PREFIX}, {(void *)hdr, hlen}, {(void *)payload, plen}};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = plen ? 3 : 2};
    ssize_t n;
    if (hlen > PTL_MAX_HDR || hlen + plen > TCP_FRAME_MAX)
        return prt_err(PLAIT_ERR_INTERNAL, "tcp: frame of %zu+%zu bytes too large", hlen, plen);
    if (o->dead)
        return prt_err(PLAIT_ERR_PEER, "tcp: the connection to rank %d has failed", dst);
    if (o->fd < 0)
        PRT_CHECK(tcp_connect(t, dst));
    if (o->pend) {
        int rc = tcp_flush_out(t, dst);
        if (rc != 0)
            return rc;      /* 1: still busy, try later; or the error */
    }
    n = sendmsg(o->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 1;
    if (n < 0) {
        o->dead = 1;
        return prt_err(PLAIT_ERR_PEER, "tcp: sending to rank %d failed: %s", dst, strerror(errno));
    }
    t->moved[dst] += (size_t)n;
    if ((size_t)n < TCP_PREFIX + hlen + plen)
        return tcp_keep_tail(t, dst, iov, (int)mh.msg_iovlen, (size_t)n);
    return PLAIT_OK;
}

static size_t tcp_max_frame(ptl_tl_t *tl) { return TCP_FRAME_MAX; }

static void tcp_close_in(tcp_t *t, int i)
{
    tcp_in_t *c = t->in[i];
    if (c->rank >= 0)
        t->dead_in[c->rank] = 1;
    else
        t->nunknown--;
    epoll_ctl(t->efd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c->buf);
    free(c);
    t->in[i] = t->in[--t->nin];
}

/* A refused connection: said the first time and then at every power of two,
 * with the count, so a scanner or a stray client cannot flood the log. */
static void tcp_refused(tcp_t *t, const char *why)
{
    uint64_t n = ++t->refused;
    if ((n & (n - 1)) == 0)
        prt_log(PRT_LOG_WARN, "tcp: refused a connection %s (%llu refused so far; said again "
                "at %llu)", why, (unsigned long long)n, (unsigned long long)(2 * n));
}

static void tcp_accept(tcp_t *t)
{
    for (;;) {
        int fd = accept4(t->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), one = 1;
        tcp_in_t *c;
        struct epoll_event ev = {.events = EPOLLIN};
        if (fd < 0)
            return;
        if (t->nunknown >= TCP_UNKNOWN_MAX) {
            close(fd);
            tcp_refused(t, "beyond the connections still to say hello");
            continue;
        }
        if (t->nin == t->capin) {
            int cap = t->capin ? 2 * t->capin : 16;
            tcp_in_t **n = realloc(t->in, (size_t)cap * sizeof *n);
            if (!n) { close(fd); return; }
            t->in = n;
            t->capin = cap;
        }
        c = calloc(1, sizeof *c);
        if (!c || !(c->buf = malloc(sizeof(tcp_hello_t)))) {
            free(c);
            close(fd);
            return;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->fd = fd;
        c->rank = -1;
        c->since_ns = prt_now_ns();
        ev.data.ptr = c;
        t->in[t->nin++] = c;
        t->nunknown++;
        epoll_ctl(t->efd, EPOLL_CTL_ADD, fd, &ev);
    }
}

/* Checks a hello: right magic, a rank in range, that rank's proof, and the
 * first connection from it; then gives the connection a frame's buffer. */
static int tcp_take_hello(tcp_t *t, tcp_in_t *c)
{
    tcp_hello_t h;
    unsigned char *buf;
    char why[96];
    memcpy(&h, c->buf, sizeof h);
    if (h.magic != TCP_MAGIC || h.rank < 0 || h.rank >= t->job->size || h.rank == t->job->rank ||
        h.proof != pp_tag(t->job->key, (uint32_t)h.rank, (uint32_t)t->job->rank)) {
        tcp_refused(t, "that is not from this job");
        return -1;
    }
    if (t->taken_in[h.rank]) {
        snprintf(why, sizeof why, "as rank %d a second time (a replay of its hello?)", h.rank);
        tcp_refused(t, why);
        return -1;
    }
    if (!(buf = realloc(c->buf, TCP_PREFIX + TCP_FRAME_MAX))) {
        prt_log(PRT_LOG_ERROR, "tcp: no memory for rank %d's connection", h.rank);
        return -1;
    }
    c->buf = buf;
    t->taken_in[h.rank] = 1;
    c->rank = h.rank;
    t->nunknown--;
    return (int)sizeof h;
}

/* Delivers every whole frame in c->buf; -1 when the stream is malformed. */
static int tcp_deliver(tcp_t *t, tcp_in_t *c, ptl_rx_fn rx, void *ctx, int *nframes)
{
    size_t off = 0;
    if (c->rank < 0) {
        if (c->have < sizeof(tcp_hello_t))
            return 0;
        if (tcp_take_hello(t, c) < 0)
            return -1;
        off = sizeof(tcp_hello_t);
    }
    while (c->have - off >= TCP_PREFIX) {
        uint32_t len[2];
        memcpy(len, c->buf + off, sizeof len);
        if (len[0] == 0 || len[0] > PTL_MAX_HDR || (size_t)len[0] + len[1] > TCP_FRAME_MAX) {
            prt_log(PRT_LOG_ERROR, "tcp: malformed frame from rank %d (%u+%u bytes): closing",
                    c->rank, len[0], len[1]);
            return -1;
        }
        if (c->have - off < TCP_PREFIX + len[0] + len[1])
            break;
        rx(ctx, c->rank, c->buf + off + TCP_PREFIX, len[0], c->buf + off + TCP_PREFIX + len[0],
           len[1]);
        off += TCP_PREFIX + len[0] + len[1];
        (*nframes)++;
    }
    memmove(c->buf, c->buf + off, c->have - off);
    c->have -= off;
    return 0;
}

static int tcp_read(tcp_t *t, int i, ptl_rx_fn rx, void *ctx)
{
    tcp_in_t *c = t->in[i];
    int n = 0;
    for (;;) {
        size_t room = (c->rank < 0 ? sizeof(tcp_hello_t) : TCP_PREFIX + TCP_FRAME_MAX) - c->have;
        ssize_t got = recv(c->fd, c->buf + c->have, room, MSG_DONTWAIT);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && errno == EAGAIN)
            return n;
        if (got > 0 && c->rank >= 0)
            t->moved[c->rank] += (size_t)got;
        if (got <= 0 || (c->have += (size_t)got, tcp_deliver(t, c, rx, ctx, &n) < 0)) {
            tcp_close_in(t, i);
            return n;
        }
    }
}

/* Closes the connections that have not said hello within TCP_CONNECT_MS. */
static void tcp_expire_unknown(tcp_t *t)
{
    uint64_t now = prt_now_ns();
    for (int i = t->nin - 1; i >= 0; i--)
        if (t->in[i]->rank < 0 && now - t->in[i]->since_ns > TCP_CONNECT_MS * 1000000ull) {
            tcp_close_in(t, i);
            tcp_refused(t, "that said no hello in time");
        }
}

static int tcp_progress(ptl_tl_t *tl, ptl_rx_fn rx, void *ctx)
{
    tcp_t *t = tcp_of(tl);
    struct epoll_event ev[32];
    int n = 0, k;
    if (t->nunknown)
        tcp_expire_unknown(t);
    for (int r = 0; t->npend && r < t->job->size; r++)
        if (t->out[r].pend && tcp_flush_out(t, r) < 0)
            prt_log(PRT_LOG_DEBUG, "%s", prt_err_text());
    k = epoll_wait(t->efd, ev, 32, 0);
    for (int e = 0; e < k; e++) {
        if (ev[e].data.ptr == NULL) {
            tcp_accept(t);
            continue;
        }
        for (int i = 0; i < t->nin; i++)
            if (t->in[i] == ev[e].data.ptr) {
                n += tcp_read(t, i, rx, ctx);
                break;
            }
    }
    return n;
}

static int tcp_flush(ptl_tl_t *tl)
{
    tcp_t *t = tcp_of(tl);
    for (int r = 0; t->npend && r < t->job->size; r++)
        if (t->out[r].pend && !t->out[r].dead && tcp_flush_out(t, r) < 0)
            prt_log(PRT_LOG_WARN, "%s", prt_err_text());
    for (int r = 0; r < t->job->size; r++)
        if (t->out[r].pend && !t->out[r].dead)
            return 1;
    return 0;
}

static int tcp_peer_alive(ptl_tl_t *tl, int peer)
{
    tcp_t *t = tcp_of(tl);
    if (t->out[peer].dead || t->dead_in[peer])
        return prt_err(PLAIT_ERR_PEER, "rank %d's connection (tcp) has closed: the process or its "
                       "host is gone", peer);
    return PLAIT_OK;
}

static void tcp_fini(ptl_tl_t *tl)
{
    tcp_t *t = tcp_of(tl);
    if (!t)
        return;
    while (t->nin)
        tcp_close_in(t, 0);
    for (int r = 0; t->out && r < t->job->size; r++) {
        if (t->out[r].fd >= 0)
            close(t->out[r].fd);
        free(t->out[r].pend);
    }
    if (t->lfd >= 0)
        close(t->lfd);
    if (t->efd >= 0)
        close(t->efd);
    free(t->in);
    free(t->out);
    free(t->dead_in);
    free(t->moved);
    free(t->taken_in);
    free(t);
    tl->priv = NULL;
}

/* Bytes read from peer and written to it (kernel buffers in between: a
 * send that the kernel took counts, as tcp's sends complete there too). */
static uint64_t tcp_moved(ptl_tl_t *tl, int peer)
{
    return tcp_of(tl)->moved[peer];
}

const ptl_ops_t ptl_tcp_ops = {
    .send = tcp_send,
    .max_frame = tcp_max_frame,
    .get = NULL,
    .progress = tcp_progress,
    .peer_alive = tcp_peer_alive,
    .moved = tcp_moved,
    .flush = tcp_flush,
    .fini = tcp_fini,
};

static int tcp_usable(char *why, size_t len)
{
    uint32_t addrs[TCP_MAX_ADDRS];
    int n = tcp_local_addrs("", addrs);
    snprintf(why, len, n ? "kernel TCP, one connection per direction per pair (%d IPv4 "
                           "addresses here)"
                         : "no IPv4 address", n);
    return n > 0;
}

const ptl_component_t ptl_tcp_component = {"tcp", "kernel TCP sockets between hosts (fallback)",
                                           tcp_usable};
