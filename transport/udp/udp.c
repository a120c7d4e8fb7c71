/*
 * udp.c -- the UDP datapath of the software multipath transport.
 *
 * Each rank opens P UDP sockets (PLAIT_UDP_PATHS), one per path: path i from A
 * to B goes from A's socket i to B's socket i, so every path has its own
 * source and destination ports and ECMP hashes the paths apart. The protocol
 * (transport/proto: chunks, SACK, loss recovery, CC, LB) runs in engine
 * threads (PLAIT_ENGINES): engine e receives on the sockets i with
 * i % E == e and transmits for the peers r with r % E == e, so one
 * connection's receive work is split across every engine. recvmmsg /
 * sendmmsg move packets in batches.
 *
 * Threads: each peer's pp_conn_t is guarded by its own mutex. The caller's
 * send() copies the frame into the connection (or returns 1: back-pressure)
 * and kicks the engine; engines wake blocked callers through the shm
 * transport's wake-up word (ptl_shm_wake_self) when a message is ready or
 * send space freed up. progress() takes complete messages in order.
 *
 * Addresses: a PMIx card {magic, epoch, MTU, IPv4 addresses, P ports}. The
 * epoch is this process's random incarnation number; packets carry it, so
 * those of an earlier process with the same rank and ports are dropped.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "transport/udp/udp.h"
#include "transport/proto/pp.h"

#define UDP_MAGIC     0x31504455544c50ull   /* "PLTUDP1" */
#define UDP_CARD_KEY  "plait.udp"
#define UDP_MAX_ADDRS 8
#define UDP_BATCH     32
#define UDP_MAX_ENG   16
#define UDP_MAX_FRAME (1u << 20)            /* ptl frame: one protocol message */
#define UDP_RXBUF     65536

typedef struct {
    uint64_t magic;
    uint32_t epoch;
    uint32_t mtu;
    uint16_t npaths, naddr;
    uint32_t addrs[UDP_MAX_ADDRS];           /* network order */
    uint16_t ports[PP_MAX_PATHS];            /* network order */
} udp_card_t;

typedef struct {
    pthread_mutex_t    lock;
    pp_conn_t          conn;
    int                up;
    struct sockaddr_in dst[PP_MAX_PATHS];
} udp_peer_t;

typedef struct udp udp_t;

typedef struct {
    udp_t      *u;
    int         id, epfd;
    int         kickfd;                      /* eventfd: callers -> this engine */
    _Atomic int sleeping;
    pthread_t   thread;
    int         started;
} udp_engine_t;

struct udp {
    prt_job_t     *job;
    ptl_tl_t      *waker;
    prt_config_t   cfg;
    int            npaths, neng;
    int            fds[PP_MAX_PATHS];
    uint16_t       ports[PP_MAX_PATHS];
    uint32_t       epoch, mtu;
    udp_card_t     card;
    udp_peer_t    *peers;                    /* by world rank */
    udp_engine_t   eng[UDP_MAX_ENG];
    _Atomic int    stop, rx_ready;
    _Atomic uint64_t drops[PP_DROP_N];       /* packets no connection could take */
};

static udp_t *udp_of(ptl_tl_t *tl) { return tl->priv; }

/* PLAIT_CC / PLAIT_LB choices, in the order of their enums in config.c. */
static const char *const udp_cc_names[] = {"cubic", "swift", "dgpool", "eqds"};
static const char *const udp_lb_names[] = {"p2c", "spray", "ackclock"};

/* IPv4 addresses of the chosen interface (or every up one, loopback last)
 * and the MTU of the first. */
static int udp_local_addrs(const char *ifname, uint32_t *addrs, uint32_t *mtu)
{
    struct ifaddrs *ifs, *i;
    int n = 0;
    uint32_t lo = 0;
    char first[IFNAMSIZ] = "lo";
    if (getifaddrs(&ifs) != 0)
        return 0;
    for (i = ifs; i && n < UDP_MAX_ADDRS - 1; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP))
            continue;
        if (ifname[0] && strcmp(ifname, i->ifa_name) != 0)
            continue;
        if (i->ifa_flags & IFF_LOOPBACK) {
            lo = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
            continue;
        }
        if (n == 0)
            snprintf(first, sizeof first, "%s", i->ifa_name);
        addrs[n++] = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
    }
    freeifaddrs(ifs);
    if (lo)
        addrs[n++] = lo;
    *mtu = 1500;
    {
        struct ifreq r;
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        memset(&r, 0, sizeof r);
        snprintf(r.ifr_name, sizeof r.ifr_name, "%s", first);
        if (fd >= 0 && ioctl(fd, SIOCGIFMTU, &r) == 0 && r.ifr_mtu > 576)
            *mtu = (uint32_t)r.ifr_mtu;
        if (fd >= 0)
            close(fd);
    }
    return n;
}

static int udp_open_paths(udp_t *u, uint32_t bind_addr)
{
    int big = 8 << 20;
    for (int i = 0; i < u->npaths; i++) {
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = bind_addr};
        socklen_t len = sizeof sa;
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        u->fds[i] = fd;
        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
            getsockname(fd, (struct sockaddr *)&sa, &len) != 0)
            return prt_err(PLAIT_ERR_TRANSPORT, "udp: cannot open path socket %d: %s", i,
                           strerror(errno));
        /* Large buffers absorb bursts of a whole window; the FORCE variant
         * passes the sysctl cap when we may (root). */
        if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big) != 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
        if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof big) != 0)
            setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
        u->ports[i] = sa.sin_port;
    }
    return PLAIT_OK;
}

int ptl_udp_setup(ptl_tl_t *tl, prt_job_t *job, const prt_config_t *cfg, ptl_tl_t *waker)
{
    udp_t *u = calloc(1, sizeof *u);
    if (!u)
        return prt_err(PLAIT_ERR_NOMEM, "no memory for the udp transport");
    tl->ops = &ptl_udp_ops;
    tl->name = "udp";
    tl->priv = u;
    u->job = job;
    u->waker = waker;
    u->cfg = *cfg;
    for (int e = 0; e < UDP_MAX_ENG; e++)
        u->eng[e].kickfd = u->eng[e].epfd = -1;
    for (int i = 0; i < PP_MAX_PATHS; i++)
        u->fds[i] = -1;
    u->npaths = cfg->udp_paths < 1 ? 1 : cfg->udp_paths > PP_MAX_PATHS ? PP_MAX_PATHS
                                                                       : (int)cfg->udp_paths;
    u->neng = cfg->engines < 1 ? 1 : cfg->engines > UDP_MAX_ENG ? UDP_MAX_ENG : (int)cfg->engines;
    if (u->neng > u->npaths)
        u->neng = u->npaths;
    if (getrandom(&u->epoch, sizeof u->epoch, 0) != sizeof u->epoch)
        u->epoch = (uint32_t)(prt_now_ns() ^ ((uint64_t)getpid() << 16));
    u->card.magic = UDP_MAGIC;
    u->card.epoch = u->epoch;
    u->card.naddr = (uint16_t)udp_local_addrs(cfg->udp_if, u->card.addrs, &u->card.mtu);
    if (u->card.naddr == 0)
        return prt_err(PLAIT_ERR_ARG, "udp: no IPv4 address on %s (PLAIT_UDP_IF)",
                       cfg->udp_if[0] ? cfg->udp_if : "any interface");
    PRT_CHECK(udp_open_paths(u, cfg->udp_if[0] ? u->card.addrs[0] : htonl(INADDR_ANY)));
    u->card.npaths = (uint16_t)u->npaths;
    memcpy(u->card.ports, u->ports, sizeof u->ports);
    return prt_boot_put(job, UDP_CARD_KEY, &u->card, sizeof u->card);
}

/* First PSN and message id of the direction from -> to: both ends compute it
 * from the sender's epoch, so a new incarnation starts elsewhere in the space. */
static uint32_t udp_isn(uint32_t epoch, int from, int to)
{
    uint64_t x = (uint64_t)epoch * 0x9e3779b97f4a7c15ull ^ (uint64_t)from << 32 ^ (uint64_t)to;
    x ^= x >> 29;
    return (uint32_t)(x * 0xbf58476d1ce4e5b9ull >> 32);
}

static int udp_same_host(const udp_t *u, int peer)
{
    for (int i = 0; i < u->job->local_size; i++)
        if (u->job->local_peers[i] == peer)
            return 1;
    return 0;
}

static void udp_conn_cfg(udp_t *u, int peer, const udp_card_t *card, pp_cfg_t *c)
{
    const prt_config_t *g = &u->cfg;
    uint32_t mtu = udp_same_host(u, peer) ? 65535 : (card->mtu < u->card.mtu ? card->mtu
                                                                             : u->card.mtu);
    if (g->udp_mtu)
        mtu = (uint32_t)g->udp_mtu;
    pp_cfg_default(c);
    c->key = u->job->key;
    c->me = (uint32_t)u->job->rank;
    c->peer = (uint32_t)peer;
    c->my_epoch = u->epoch;
    c->peer_epoch = card->epoch;
    c->tx_isn = udp_isn(u->epoch, u->job->rank, peer);
    c->rx_isn = udp_isn(card->epoch, peer, u->job->rank);
    c->chunk = (uint32_t)g->chunk_size;
    c->mtu = mtu - 28 - (uint32_t)PP_DATA_HDR;          /* IPv4 + UDP headers */
    if (c->mtu > c->chunk)
        c->mtu = c->chunk;
    if (c->mtu > 65000)
        c->mtu = 65000;
    c->npaths = (uint32_t)(card->npaths < u->npaths ? card->npaths : u->npaths);
    c->dupthresh = (uint32_t)g->udp_dupthresh;
    c->small = (uint32_t)g->udp_small;
    c->rto_min_ns = (uint64_t)g->udp_rto_min_us * 1000;
    c->give_up_ns = (uint64_t)(g->udp_give_up_s * 1e9);
    c->max_msg = UDP_MAX_FRAME;
    c->seed = ((uint64_t)u->epoch << 32) ^ (uint64_t)peer;
    c->cc = pp_cc_find(udp_cc_names[g->cc]);
    c->lb = pp_lb_find(udp_lb_names[g->lb]);
}

static int udp_connect_peer(udp_t *u, int peer)
{
    udp_peer_t *p = &u->peers[peer];
    udp_card_t *card = NULL;
    size_t len = 0;
    pp_cfg_t cfg;
    PRT_CHECK(prt_boot_get(u->job, peer, UDP_CARD_KEY, (void **)&card, &len));
    if (len != sizeof *card || card->magic != UDP_MAGIC || card->naddr == 0 ||
        card->naddr > UDP_MAX_ADDRS || card->npaths == 0 || card->npaths > PP_MAX_PATHS) {
        free(card);
        return prt_err(PLAIT_ERR_TRANSPORT, "udp: the address card of rank %d is malformed", peer);
    }
    udp_conn_cfg(u, peer, card, &cfg);
    for (int i = 0; i < (int)cfg.npaths; i++) {
        p->dst[i].sin_family = AF_INET;
        p->dst[i].sin_addr.s_addr = card->addrs[0];
        p->dst[i].sin_port = card->ports[i];
    }
    free(card);
    if (pp_conn_init(&p->conn, &cfg) != 0)
        return prt_err(PLAIT_ERR_ARG, "udp: invalid protocol settings for rank %d (chunk %u, "
                       "packet payload %u)", peer, cfg.chunk, cfg.mtu);
    p->up = 1;
    return PLAIT_OK;
}

static void *udp_engine_main(void *arg);

int ptl_udp_connect(ptl_tl_t *tl)
{
    udp_t *u = udp_of(tl);
    struct epoll_event ev = {.events = EPOLLIN};
    if (!pp_cc_find(udp_cc_names[u->cfg.cc]) || !pp_lb_find(udp_lb_names[u->cfg.lb]))
        return prt_err(PLAIT_ERR_ARG, "udp: unknown PLAIT_CC '%s' or PLAIT_LB '%s'",
                       udp_cc_names[u->cfg.cc], udp_lb_names[u->cfg.lb]);
    u->peers = calloc((size_t)u->job->size, sizeof *u->peers);
    if (!u->peers)
        return prt_err(PLAIT_ERR_NOMEM, "no memory for %d udp peers", u->job->size);
    for (int r = 0; r < u->job->size; r++) {
        pthread_mutex_init(&u->peers[r].lock, NULL);
        if (r != u->job->rank)
            PRT_CHECK(udp_connect_peer(u, r));
    }
    for (int e = 0; e < u->neng; e++) {
        udp_engine_t *g = &u->eng[e];
        g->u = u;
        g->id = e;
        g->epfd = epoll_create1(EPOLL_CLOEXEC);
        g->kickfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        ev.data.fd = g->kickfd;
        if (g->epfd < 0 || g->kickfd < 0 || epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->kickfd, &ev) != 0)
            return prt_err(PLAIT_ERR_TRANSPORT, "udp: epoll: %s", strerror(errno));
        for (int i = e; i < u->npaths; i += u->neng) {
            ev.data.fd = u->fds[i];
            epoll_ctl(g->epfd, EPOLL_CTL_ADD, u->fds[i], &ev);
        }
        if (pthread_create(&g->thread, NULL, udp_engine_main, g) != 0)
            return prt_err(PLAIT_ERR_TRANSPORT, "udp: cannot start engine thread %d", e);
        g->started = 1;
    }
    return PLAIT_OK;
}

/* ------------------------------------------------------------- engines */

/* Wakes engine e if it sleeps (seq_cst: pairs with the engine's store of
 * sleeping before its last look for work, so no kick is lost). */
static void udp_kick(udp_t *u, int e)
{
    udp_engine_t *g = &u->eng[e];
    if (atomic_load(&g->sleeping)) {
        uint64_t one = 1;
        ssize_t n = write(g->kickfd, &one, sizeof one);
        (void)n;
    }
}

/* Sends the packets in m[0..n) (each on its own path socket); a full socket
 * buffer loses the rest, which the protocol then repairs like any loss. */
static void udp_flush(udp_t *u, struct mmsghdr *m, int n)
{
    for (int i = 0; i < n; i++) {
        int path = (int)(intptr_t)m[i].msg_hdr.msg_control;
        int k = 1;
        m[i].msg_hdr.msg_control = NULL;
        /* runs of packets on the same path go out in one sendmmsg */
        while (i + k < n && (int)(intptr_t)m[i + k].msg_hdr.msg_control == path) {
            m[i + k].msg_hdr.msg_control = NULL;
            k++;
        }
        if (sendmmsg(u->fds[path], &m[i], (unsigned)k, MSG_DONTWAIT) < 0 && errno != EAGAIN)
            prt_log(PRT_LOG_DEBUG, "udp: sendmmsg on path %d: %s", path, strerror(errno));
        i += k - 1;
    }
}

typedef struct {
    struct mmsghdr m[UDP_BATCH];
    struct iovec   iov[UDP_BATCH][2];
    pp_out_t       out[UDP_BATCH];
    int            n;
} udp_txb_t;

static void txb_add(udp_t *u, udp_txb_t *b, udp_peer_t *p, int n)
{
    pp_out_t *o = &b->out[n];
    struct msghdr *h = &b->m[n].msg_hdr;
    int path = o->path % (int)p->conn.cfg.npaths;
    (void)u;
    b->iov[n][0].iov_base = o->hdr;
    b->iov[n][0].iov_len = o->hdr_len;
    b->iov[n][1].iov_base = (void *)o->payload;
    b->iov[n][1].iov_len = o->len;
    memset(h, 0, sizeof *h);
    h->msg_name = &p->dst[path];
    h->msg_namelen = sizeof p->dst[path];
    h->msg_iov = b->iov[n];
    h->msg_iovlen = o->len ? 2 : 1;
    h->msg_control = (void *)(intptr_t)path;   /* which socket: read back by udp_flush */
}

/* Timers and transmission for one peer (lock held while the packets, which
 * point into its messages, are handed to the kernel). Returns packets sent. */
static int udp_tx_peer(udp_t *u, int r, uint64_t now, udp_txb_t *b)
{
    udp_peer_t *p = &u->peers[r];
    int sent = 0, wake = 0;
    pthread_mutex_lock(&p->lock);
    if (pp_poll(&p->conn, now))
        wake = 1;   /* failed: let blocked callers see it */
    for (;;) {
        b->n = 0;
        while (b->n < UDP_BATCH && pp_tx_next(&p->conn, now, &b->out[b->n])) {
            txb_add(u, b, p, b->n);
            b->n++;
        }
        if (b->n == 0)
            break;
        udp_flush(u, b->m, b->n);
        sent += b->n;
        if (sent >= 4 * UDP_BATCH)
            break;   /* let the other peers and the receive side run */
    }
    if (p->conn.tx_was_blocked && p->conn.tx_buffered <= p->conn.cfg.tx_buf_max / 2) {
        p->conn.tx_was_blocked = 0;
        wake = 1;
    }
    pthread_mutex_unlock(&p->lock);
    if (wake)
        ptl_shm_wake_self(u->waker);
    return sent;
}

static void udp_ack_peer(udp_t *u, udp_peer_t *p, udp_txb_t *b)
{
    b->n = 0;
    if (pp_ack_next(&p->conn, prt_now_ns(), &b->out[0])) {
        txb_add(u, b, p, 0);
        udp_flush(u, b->m, 1);
    }
}

/* Receives a batch on one socket; returns packets handled. */
static int udp_rx_sock(udp_t *u, int fd, uint8_t (*bufs)[UDP_RXBUF], udp_txb_t *b,
                       int *ready)
{
    struct mmsghdr m[UDP_BATCH];
    struct iovec iov[UDP_BATCH];
    int n, touched[UDP_BATCH], nt = 0;
    uint64_t now;
    memset(m, 0, sizeof m);
    for (int i = 0; i < UDP_BATCH; i++) {
        iov[i].iov_base = bufs[i];
        iov[i].iov_len = UDP_RXBUF;
        m[i].msg_hdr.msg_iov = &iov[i];
        m[i].msg_hdr.msg_iovlen = 1;
    }
    n = recvmmsg(fd, m, UDP_BATCH, MSG_DONTWAIT, NULL);
    if (n <= 0)
        return 0;
    now = prt_now_ns();
    for (int i = 0; i < n; i++) {
        uint32_t src;
        int type, why = pp_parse(bufs[i], m[i].msg_len, u->job->key, (uint32_t)u->job->rank, &src,
                                 &type);
        udp_peer_t *p;
        if (why < 0 && (src >= (uint32_t)u->job->size || !u->peers[src].up))
            why = PP_DROP_CONN;
        if (why >= 0) {
            atomic_fetch_add(&u->drops[why], 1);
            continue;
        }
        p = &u->peers[src];
        pthread_mutex_lock(&p->lock);
        pp_rx(&p->conn, now, bufs[i], m[i].msg_len);
        if (pp_deliver_ready(&p->conn))
            *ready = 1;
        pthread_mutex_unlock(&p->lock);
        if (type == PP_T_DATA) {
            int k = 0;
            while (k < nt && touched[k] != (int)src)
                k++;
            if (k == nt)
                touched[nt++] = (int)src;
        }
    }
    /* one ACK per peer per batch: it carries the whole SACK state */
    for (int k = 0; k < nt; k++) {
        udp_peer_t *p = &u->peers[touched[k]];
        pthread_mutex_lock(&p->lock);
        udp_ack_peer(u, p, b);
        pthread_mutex_unlock(&p->lock);
    }
    return n;
}

static int udp_busy(udp_t *u, int e)
{
    for (int r = e; r < u->job->size; r += u->neng) {
        udp_peer_t *p = &u->peers[r];
        int busy;
        if (!p->up)
            continue;
        pthread_mutex_lock(&p->lock);
        busy = (p->conn.tx_head || p->conn.nlost) && !p->conn.failed;
        pthread_mutex_unlock(&p->lock);
        if (busy)
            return 1;
    }
    return 0;
}

static void udp_engine_idle(udp_engine_t *g)
{
    udp_t *u = g->u;
    struct epoll_event ev[8];
    /* With data in flight the timers need us within a quarter RTO; idle, only
     * a packet or a caller's kick creates work (the 20 ms bound is a guard). */
    struct timespec busy = {0, (long)(u->cfg.udp_rto_min_us * 250)}, idle = {0, 20000000};
    uint64_t junk;
    int n;
    atomic_store(&g->sleeping, 1);
    n = epoll_pwait2(g->epfd, ev, 8, udp_busy(u, g->id) ? &busy : &idle, NULL);
    atomic_store(&g->sleeping, 0);
    for (int i = 0; i < n; i++)
        if (ev[i].data.fd == g->kickfd && read(g->kickfd, &junk, sizeof junk) < 0)
            break;
}

static void *udp_engine_main(void *arg)
{
    udp_engine_t *g = arg;
    udp_t *u = g->u;
    uint8_t (*bufs)[UDP_RXBUF] = malloc(UDP_BATCH * sizeof *bufs);
    udp_txb_t *b = malloc(sizeof *b);
    uint64_t idle_since = 0;
    if (!bufs || !b) {
        prt_log(PRT_LOG_ERROR, "udp: engine %d has no memory", g->id);
        free(bufs);
        free(b);
        return NULL;
    }
    while (!atomic_load(&u->stop)) {
        int work = 0, ready = 0;
        uint64_t now;
        for (int i = g->id; i < u->npaths; i += u->neng)
            work += udp_rx_sock(u, u->fds[i], bufs, b, &ready);
        if (ready) {
            atomic_store(&u->rx_ready, 1);
            ptl_shm_wake_self(u->waker);
        }
        now = prt_now_ns();
        for (int r = g->id; r < u->job->size; r += u->neng)
            if (u->peers[r].up)
                work += udp_tx_peer(u, r, now, b);
        if (work) {
            idle_since = 0;
            continue;
        }
        if (!idle_since)
            idle_since = now;
        if (now - idle_since > 50000)   /* spin 50 us for latency, then sleep */
            udp_engine_idle(g);
    }
    free(bufs);
    free(b);
    return NULL;
}

/* ------------------------------------------------------------ ptl ops */

static int udp_send(ptl_tl_t *tl, int dst, const void *hdr, size_t hlen, const void *payload,
                    size_t plen)
{
    udp_t *u = udp_of(tl);
    udp_peer_t *p = &u->peers[dst];
    int rc;
    if (!p->up)
        return prt_err(PLAIT_ERR_INTERNAL, "udp: no connection to rank %d", dst);
    pthread_mutex_lock(&p->lock);
    if (p->conn.failed) {
        pthread_mutex_unlock(&p->lock);
        return prt_err(PLAIT_ERR_PEER, "udp: %s", p->conn.why);
    }
    rc = pp_send(&p->conn, hdr, hlen, payload, plen);
    pthread_mutex_unlock(&p->lock);
    if (rc < 0)
        return prt_err(PLAIT_ERR_INTERNAL, "udp: frame of %zu+%zu bytes too large", hlen, plen);
    if (rc == 0)
        udp_kick(u, dst % u->neng);
    return rc;
}

static size_t udp_max_frame(ptl_tl_t *tl)
{
    (void)tl;
    return UDP_MAX_FRAME;
}

static int udp_progress(ptl_tl_t *tl, ptl_rx_fn rx, void *ctx)
{
    udp_t *u = udp_of(tl);
    int n = 0;
    if (!atomic_exchange(&u->rx_ready, 0))
        return 0;
    for (int r = 0; r < u->job->size; r++) {
        udp_peer_t *p = &u->peers[r];
        pp_msg_t *m;
        if (!p->up)
            continue;
        for (;;) {
            pthread_mutex_lock(&p->lock);
            m = pp_deliver(&p->conn);
            pthread_mutex_unlock(&p->lock);
            if (!m)
                break;
            rx(ctx, r, m->data, m->hlen, m->data + m->hlen, m->len - m->hlen);
            pthread_mutex_lock(&p->lock);
            pp_msg_release(&p->conn, m);
            pthread_mutex_unlock(&p->lock);
            n++;
        }
    }
    for (int e = 0; n && e < u->neng; e++)
        udp_kick(u, e);   /* buffer space freed: the window may open */
    return n;
}

static int udp_peer_alive(ptl_tl_t *tl, int peer)
{
    udp_t *u = udp_of(tl);
    udp_peer_t *p = &u->peers[peer];
    int failed;
    if (!p->up)
        return PLAIT_OK;
    pthread_mutex_lock(&p->lock);
    failed = p->conn.failed;
    pthread_mutex_unlock(&p->lock);
    if (failed)
        return prt_err(PLAIT_ERR_PEER, "udp: %s", p->conn.why);
    return PLAIT_OK;
}

/* Lets the engines finish sending what callers handed over (a peer still
 * waits for our last frames, e.g. finalize's barrier) until every connection
 * is acknowledged, failed, or a bounded time passed (a peer that already
 * left never acknowledges). */
static void udp_linger(udp_t *u)
{
    uint64_t end = prt_now_ns() + 3000000000ull;
    int pending = 1;
    while (pending && u->peers && prt_now_ns() < end) {
        pending = 0;
        for (int r = 0; r < u->job->size && !pending; r++) {
            udp_peer_t *p = &u->peers[r];
            if (!p->up)
                continue;
            pthread_mutex_lock(&p->lock);
            pending = p->conn.tx_head && !p->conn.failed;
            pthread_mutex_unlock(&p->lock);
        }
        if (pending) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
}

static void udp_fini(ptl_tl_t *tl)
{
    udp_t *u = udp_of(tl);
    uint64_t one = 1;
    if (!u)
        return;
    udp_linger(u);
    atomic_store(&u->stop, 1);
    for (int e = 0; e < u->neng; e++) {
        udp_engine_t *g = &u->eng[e];
        if (g->kickfd >= 0 && write(g->kickfd, &one, sizeof one) < 0)
            prt_log(PRT_LOG_DEBUG, "udp: kick at finalize: %s", strerror(errno));
        if (g->started)
            pthread_join(g->thread, NULL);
        if (g->epfd >= 0)
            close(g->epfd);
        if (g->kickfd >= 0)
            close(g->kickfd);
    }
    for (int r = 0; u->peers && r < u->job->size; r++) {
        if (u->peers[r].up)
            pp_conn_fini(&u->peers[r].conn);
        pthread_mutex_destroy(&u->peers[r].lock);
    }
    for (int i = 0; i < u->npaths; i++)
        if (u->fds[i] >= 0)
            close(u->fds[i]);
    free(u->peers);
    free(u);
    tl->priv = NULL;
}

/* ------------------------------------------------------------ statistics */

void ptl_udp_stats_print(ptl_tl_t *tl, FILE *f)
{
    udp_t *u = udp_of(tl);
    if (!u || !u->peers)
        return;
    fprintf(f, "plait udp stats, rank %d: %d paths, %d engine(s), cc %s, lb %s\n", u->job->rank,
            u->npaths, u->neng, udp_cc_names[u->cfg.cc], udp_lb_names[u->cfg.lb]);
    for (int r = 0; r < u->job->size; r++) {
        udp_peer_t *p = &u->peers[r];
        pp_stats_t s;
        if (!p->up)
            continue;
        pthread_mutex_lock(&p->lock);
        pp_stats(&p->conn, &s);
        fprintf(f, "  conn %d->%d: tx %llu msgs %llu B %llu pkts %llu chunks; rx %llu msgs %llu B "
                "%llu pkts; retx fast %llu timeout %llu; loss events %llu; acks tx %llu rx %llu; "
                "srtt %.1f us min %.1f us; cwnd %llu B; blocked %llu\n", u->job->rank, r,
                (unsigned long long)s.tx_msgs, (unsigned long long)s.tx_bytes,
                (unsigned long long)s.tx_pkts, (unsigned long long)s.tx_chunks,
                (unsigned long long)s.rx_msgs, (unsigned long long)s.rx_bytes,
                (unsigned long long)s.rx_pkts, (unsigned long long)s.retx_fast,
                (unsigned long long)s.retx_timeout, (unsigned long long)s.loss_events,
                (unsigned long long)s.acks_tx, (unsigned long long)s.acks_rx, s.srtt_ns / 1e3,
                s.min_rtt_ns / 1e3, (unsigned long long)s.cwnd, (unsigned long long)s.tx_blocked);
        for (int d = 0; d < PP_DROP_N; d++)
            if (s.drops[d])
                fprintf(f, "    drop %s: %llu\n", pp_drop_name(d), (unsigned long long)s.drops[d]);
        for (uint32_t i = 0; i < p->conn.cfg.npaths; i++) {
            const pp_path_stats_t *ps = &p->conn.paths[i].st;
            if (!ps->tx_pkts && !ps->rtt_samples)
                continue;
            fprintf(f, "    path %2u (port %u->%u): %llu pkts %llu B %llu chunks, retx %llu, lost "
                    "%llu, srtt %.1f us min %.1f us\n", i, ntohs(u->ports[i]),
                    ntohs(p->dst[i].sin_port), (unsigned long long)ps->tx_pkts,
                    (unsigned long long)ps->tx_bytes, (unsigned long long)ps->chunks,
                    (unsigned long long)ps->retx_pkts, (unsigned long long)ps->lost,
                    ps->srtt_ns / 1e3, ps->min_rtt_ns / 1e3);
        }
        pthread_mutex_unlock(&p->lock);
    }
    for (int d = 0; d < PP_DROP_N; d++)
        if (atomic_load(&u->drops[d]))
            fprintf(f, "  dropped before any connection, %s: %llu\n", pp_drop_name(d),
                    (unsigned long long)atomic_load(&u->drops[d]));
}

const ptl_ops_t ptl_udp_ops = {
    .send = udp_send,
    .max_frame = udp_max_frame,
    .get = NULL,
    .progress = udp_progress,
    .peer_alive = udp_peer_alive,
    .fini = udp_fini,
};

static int udp_usable(char *why, size_t len)
{
    uint32_t addrs[UDP_MAX_ADDRS], mtu;
    int n = udp_local_addrs("", addrs, &mtu);
    snprintf(why, len, n ? "software multipath over UDP: per-chunk CC and path choice, SACK "
                           "(%d IPv4 addresses here)"
                         : "no IPv4 address", n);
    return n > 0;
}

const ptl_component_t ptl_udp_component = {"udp", "software multipath transport over UDP",
                                           udp_usable};
