/*
 * udp.c -- the UDP datapath of the software multipath transport.
 *
 * Each rank opens P UDP sockets (PLAIT_UDP_PATHS), one per path: path i from A
 * to B goes from A's socket i to B's socket i % R, where R (B's card: one
 * receive socket per engine of B) is small. Every path has its own source
 * port, so ECMP (hashing the 5-tuple) still spreads the paths, while B finds
 * the data of all paths in R sockets: one recvmmsg takes a batch of every
 * path's packets, where P receive sockets would each hold a packet or two
 * of a pass (a chunk's packets sprayed over 32 ports). ACKs go back the
 * same way (B's socket i to A's socket i % R_A).
 * A peer on the same host gets UDP_LOCAL_PATHS: loopback has no ECMP. The protocol
 * (transport/proto: chunks, SACK, loss recovery, CC, LB) runs in "engines"
 * (PLAIT_ENGINES): engine e owns the sockets i with i % E == e and the peers
 * r with r % E == e, so one connection's receive work is split across every
 * engine. recvmmsg / sendmmsg move packets in batches, UDP GSO sends runs of
 * equal packets on one path as one datagram, UDP GRO may hand several back.
 *
 * Who runs an engine: whoever holds its drive lock. An application thread
 * inside send() or progress() runs it itself (transmit right away, receive
 * what the sockets hold), so the latency path has no thread hand-off; each
 * engine's thread stands by while an application thread polled within
 * UDP_HANDOFF_NS and takes over when it stops polling (computing, or asleep
 * on the shm wake-up word, which the thread bumps when a message is ready or
 * send space freed up). While the caller drives and a bulk transfer is under
 * way to a peer (a frame of UDP_HELP_MIN bytes queued, until nothing is left
 * to send: udp_bulk), the engine thread transmits for that peer from scratch
 * of its own (udp_tx_help, PLAIT_UDP_TX_HELP), and where bulk data arrives
 * too the caller's passes leave the sending to it (udp_tx_budget): a sender
 * spends most of its time in the kernel's copy and in the path to the peer's
 * socket, and in an exchange the caller receives meanwhile, so each direction
 * gets a core. With nothing (left) to send, the engine thread receives
 * beside the caller while bulk data is expected or arriving (udp_rx_help):
 * two threads read the socket, so the kernel's copies out of it run in
 * parallel. Packets go to the kernel with the peer unlocked and its
 * connection pinned (pp_tx_pin), and a receive pass copies placed payloads
 * into the user's buffer with the peer unlocked (pp_rx_copy_defer), so
 * sending and receiving one connection overlap. A receive pass takes about
 * UDP_RX_BYTES per recvmmsg (udp_rx_vlen) and makes that batch's placement
 * copies at its end; a caller's pass shares a large batch's copies with the
 * engine thread when it has nothing to send (udp_copy_split): a one-way
 * stream's receiving thread then gets help with the second copy of every
 * byte.
 *
 * Locks: each peer's pp_conn_t (and its exposed receive regions) is guarded by
 * the peer's mutex; an engine's scratch buffers by its drive lock (but txh,
 * the engine thread's alone). Order: drive, then peer; the pt2pt lock is
 * never taken here. The engine thread never sleeps on a drive lock a caller
 * holds: it helps or stands by instead.
 *
 * Large DATA frames of pt2pt go with send_placed: the receiver exposed the
 * destination buffer (expose), so the protocol places each packet's payload
 * there at its offset and hands up only the header (payload NULL).
 * From PLAIT_UDP_ZCOPY_MIN bytes they go with send_placed_zc: the protocol
 * message references the sender's buffer (no copy; packets are gathered from
 * it by sendmmsg), and pt2pt's send completes when zc_reap reports the
 * message acknowledged. Whoever sees a referenced message finish (an ACK, a
 * failure) raises zc_ready and wakes the application threads.
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
#include <netinet/udp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "transport/udp/region.h"
#include "transport/udp/share.h"
#include "transport/udp/udp.h"
#include "transport/proto/pp.h"

#define UDP_MAGIC     0x32504455544c50ull   /* "PLTUDP2" */
#define UDP_CARD_KEY  "plait.udp"
#define UDP_MAX_ADDRS 8
#define UDP_BATCH     64                    /* packets per sendmmsg / recvmmsg */
#define UDP_GSO_SEGS  64                    /* most segments the kernel takes in one GSO send */
#define UDP_GSO_BYTES 65000                 /* one IPv4 datagram's payload, with margin */
#define UDP_TOUCH     64                    /* peers owed an ACK within one receive pass */
#define UDP_LOCAL_PATHS 1                   /* paths to a peer on the same host */
#define UDP_KICK_TAG  0xffffffffu           /* epoll tag of an engine's kick eventfd */
#define UDP_HANDOFF_NS    200000            /* a caller that polled this recently drives */
#define UDP_ACK_DEFER_NS  30000             /* a held-back ACK leaves by then at the latest */
#define UDP_ACK_ORDER_NS  200000            /* an ACK owed by the receive order (udp_rx_order) */
#define UDP_ACK_HOLD_BYTES (64u << 10)      /* a caller's pass holds an in-order ACK back */
#define UDP_ACK_HOLD_NS   20000             /* ... below these (udp_ack_split) */
#define UDP_ENGINE_SPIN_NS 20000            /* an engine spins this long after work */
#define UDP_MAX_ENG   16
#define UDP_MAX_FRAME (1u << 20)            /* ptl frame: one protocol message */
#define UDP_RXBUF     65536
#define UDP_HELP_MIN  (128u << 10)          /* a message this large still to send: bulk.
                                             * 128K, the eager limit's messages too: 2 hosts
                                             * x 1 rank, alltoall and allgather of 128 KiB
                                             * blocks 87-89 -> 69-78 us, 2 x 2 alltoall 512
                                             * KiB 260 -> 206 (256K before; 64K: about the
                                             * same, but one 64 KiB bcast 32 -> 38 us) */
#define UDP_SEND_RX_NS 50000                /* a sender reads its ACKs at least this often */
#define UDP_ACK_BYTES (256u << 10)          /* a receive pass ACKs at least this often */
#define UDP_TX_BUDGET (4 * UDP_BATCH)       /* packets per peer per pass: then the others run */
#define UDP_BATCH_BYTES (96u << 10)         /* payload one transmit batch takes: udp_tx_fill */
#define UDP_RX_BYTES  (256u << 10)          /* bytes one recvmmsg should take: udp_rx_vlen */
#define UDP_RX_SHARED 4                     /* most datagrams per recvmmsg while two threads
                                             * may read the socket (udp_rx_help) and GRO
                                             * coalesces: after ACK-sized ones, udp_rx_vlen
                                             * asks for 64, and one thread took a whole 512
                                             * KiB message (uncoalesced, 4 packets per call
                                             * would be a syscall per 6 KB) */
#define UDP_RX_FULL   1200                  /* a datagram this long is data, not an ACK */
#define UDP_RX_COPIES (UDP_BATCH * UDP_GSO_SEGS)   /* placement copies one batch may leave */
#define UDP_EARLY_MIN (16u << 10)           /* payload bytes from which a message is worth
                                             * placing before it is complete (ptl.h) */
#define UDP_SPLIT_MIN 128                   /* copies worth sharing with the engine thread
                                             * (fewer: the hand-over costs what it saves) */

typedef struct {
    uint64_t magic;
    uint32_t epoch;
    uint32_t mtu;
    uint16_t npaths, naddr;
    uint16_t nrx, rsv;                       /* peers send data to ports[0..nrx) only */
    uint32_t addrs[UDP_MAX_ADDRS];           /* network order */
    uint16_t ports[PP_MAX_PATHS];            /* network order */
} udp_card_t;

typedef struct {
    pthread_mutex_t    lock;
    pp_conn_t          conn;
    int                up;
    struct sockaddr_in dst[PP_MAX_PATHS];
    udp_regions_t      regions;              /* exposed by us for this peer's frames */
    _Atomic int        bulk_hint;            /* a bulk message was queued (udp_tx_help) */
    _Atomic int        copying;              /* placement copies under way, unlocked */
    _Atomic int        early_hint;           /* a header udp_early_pass may offer came */
    int                runs;                 /* data to it may go as runs (PLAIT_UDP_RUNS) */
} udp_peer_t;

typedef struct udp udp_t;

/* Transmit scratch: a batch of packets, their iovecs (header, payload in
 * up to two pieces) and the messages (datagrams or GSO runs) built from them. */
#define UDP_IOV 3
typedef struct {
    pp_out_t       out[UDP_BATCH];
    struct iovec   iov[UDP_BATCH][UDP_IOV];
    struct mmsghdr m[UDP_BATCH];
    char           ctl[UDP_BATCH][CMSG_SPACE(sizeof(uint16_t))];
    int            mpath[UDP_BATCH], mfirst[UDP_BATCH], mcount[UDP_BATCH];
    int            n;
    int            runs;                      /* the packets may go as runs (udp_tx_fill) */
    struct iovec   riov[UDP_BATCH][2];        /* a run message's: its header, the payload */
    uint8_t        rhdr[UDP_BATCH][PP_RUN_HDR_MAX];
} udp_txb_t;

/* Receive scratch: a recvmmsg batch with room for GRO's coalesced datagrams,
 * and the placement copies its packets left (udp_rx_flush): copies[0..ncopy)
 * in runs, run k being run_copies[k] of them for peer run_peer[k]. */
typedef struct {
    struct mmsghdr m[UDP_BATCH];
    struct iovec   iov[UDP_BATCH];
    char           ctl[UDP_BATCH][CMSG_SPACE(sizeof(int))];
    uint8_t        bufs[UDP_BATCH][UDP_RXBUF];
    pp_copy_t      copies[UDP_RX_COPIES];
    int            run_peer[UDP_BATCH];
    uint32_t       run_copies[UDP_BATCH];
    uint32_t       ncopy;
    int            nrun;
    int            vlen;                      /* datagrams per recvmmsg (udp_rx_vlen) */
    int            gro;                       /* the last full-size datagram was coalesced */
} udp_rxb_t;

/* One receive pass: its scratch (r for the batch, b for the ACKs it
 * sends), the peers owed an ACK, and what it found (ready: 1 a message
 * deliverable, 2 zero-copy sends done, 4 placed data arrived). helper: the
 * engine thread reading beside a caller (udp_rx_help): it makes its copies
 * alone (the share is the driver's). early: see below. */
typedef struct udp_engine udp_engine_t;
typedef struct {
    udp_engine_t *g;
    udp_rxb_t *r;
    udp_txb_t *b;
    int        touched[UDP_TOUCH], nt;
    int        ready;
    int        helper;
    int        early;   /* the engine thread reads (helping, or driving while no caller
                         * does): a deliverable message is published after each batch,
                         * before the pass's ACKs and sends (a 256 KiB ping-pong's CTS
                         * waited 17 us for them: PLAIT_TRACE, session 16) */
} udp_rxp_t;

/* An engine: a share of the sockets (i % E == id) and peers (r % E == id).
 * Whoever holds drive (the engine thread, or an application thread inside
 * send / progress) runs that share and uses its scratch. */
struct udp_engine {
    udp_t          *u;
    int             id, epfd;
    int             kickfd;                  /* eventfd: callers -> this engine */
    _Atomic int     sleeping;
    pthread_mutex_t drive;
    /* Peers whose ACK a caller's pass held back (udp_rx_pass), under drive;
     * defer_ns: when the oldest was held (0: none), for the engine thread. */
    int             defer[UDP_TOUCH], ndefer;
    _Atomic uint64_t defer_ns;
    _Atomic int     idle;                    /* asleep in udp_engine_idle */
    _Atomic uint64_t rx_ns;                  /* the last receive pass ended (udp_pass) */
    udp_txb_t      *txb;
    udp_txb_t      *txh;                     /* the engine thread's own, for udp_tx_help */
    udp_rxb_t      *rxb;
    udp_rxb_t      *rxh;                     /* ... and for udp_rx_help */
    udp_share_t     share;                   /* copies a caller shares with the thread */
    pthread_t       thread;
    int             started;
    /* Receive order (udp_rx_order): the read tick at which each reader
     * (0: the drive holder, 1: the engine thread in udp_rx_help) began the
     * recvmmsg whose datagrams it is working through, 0 when none; the
     * tick at which its last recvmmsg returned (written by that reader
     * only); and the peers whose ACK a reader left to the other (owed,
     * under owed_lock; owed_ns: since when, 0: none). */
    _Atomic uint64_t rd_tick, rd_start[2];
    uint64_t        rd_taken[2];
    pthread_mutex_t owed_lock;
    int             owed[UDP_TOUCH], nowed;
    _Atomic uint64_t owed_ns;
};

struct udp {
    prt_job_t     *job;
    ptl_tl_t      *waker;
    prt_config_t   cfg;
    int            npaths, neng;
    int            tx_help;                  /* engine threads send beside a waiting caller */
    int            fds[PP_MAX_PATHS];
    uint16_t       ports[PP_MAX_PATHS];
    uint32_t       epoch, mtu;
    udp_card_t     card;
    udp_peer_t    *peers;                    /* by world rank */
    udp_engine_t   eng[UDP_MAX_ENG];
    _Atomic int    stop, rx_ready;
    _Atomic int    exposed;                  /* receive regions exposed (bulk data to come) */
    /* The message udp_deliver is handing up, and whether rx kept it
     * (udp_rx_keep). One at a time: pt2pt calls progress, and so rx, under
     * its lock. */
    pp_msg_t      *rx_cur;
    int            rx_kept;
    /* Early placement (ptl.h rx_early_set): the layer above's hook, and a
     * hint from the receive path that some message's header came in. */
    ptl_early_fn   early;
    void          *early_ctx;
    _Atomic int    early_hint;
    _Atomic int    zc_ready;                 /* some connection has zero-copy sends to report */
    _Atomic int    gso;                      /* UDP_SEGMENT works (cleared on refusal) */
    _Atomic int    frag;                     /* datagrams go fragmented (udp_pmtu_fallback) */
    _Atomic uint64_t caller_ns;              /* last time an application thread polled */
    _Atomic uint64_t rx_bulk_ns;             /* last pass that received placed (bulk) data */
    _Atomic uint64_t st_syscalls, st_sleeps; /* datapath counters (PLAIT_STATS) */
    _Atomic uint64_t st_kept;                /* messages rx kept instead of copying */
    _Atomic uint64_t st_send_rx;             /* receive passes a send ran (udp_send_drive) */
    _Atomic uint64_t st_sndbuf;              /* packets the kernel refused (socket buffer full) */
    _Atomic uint64_t st_helped;              /* packets the engine sent beside a caller (udp_tx_help) */
    _Atomic uint64_t st_rx_helped;           /* datagrams it received beside one (udp_rx_help) */
    _Atomic uint64_t drops[PP_DROP_N];       /* packets no connection could take */
};

static udp_t *udp_of(ptl_tl_t *tl) { return tl->priv; }

/* Counters bumped by whichever thread drives: relaxed, only read for stats. */
static inline void udp_count(_Atomic uint64_t *c) { atomic_fetch_add_explicit(c, 1, memory_order_relaxed); }

/* PLAIT_CC / PLAIT_LB choices, in the order of their enums in config.c. */
static const char *const udp_cc_names[] = {"cubic", "swift", "dgpool", "eqds"};
static const char *const udp_lb_names[] = {"p2c", "spray", "ackclock", "pwin"};

/* The smallest MTU of the up, non-loopback interfaces (what a route out of
 * this host passes), 1500 when there is none. */
static uint32_t udp_min_mtu(const struct ifaddrs *ifs)
{
    uint32_t best = 0;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    for (const struct ifaddrs *i = ifs; i && fd >= 0; i = i->ifa_next) {
        struct ifreq r;
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) ||
            (i->ifa_flags & IFF_LOOPBACK))
            continue;
        memset(&r, 0, sizeof r);
        snprintf(r.ifr_name, sizeof r.ifr_name, "%s", i->ifa_name);
        if (ioctl(fd, SIOCGIFMTU, &r) == 0 && r.ifr_mtu > 576 && (!best || (uint32_t)r.ifr_mtu < best))
            best = (uint32_t)r.ifr_mtu;
    }
    if (fd >= 0)
        close(fd);
    return best ? best : 1500;
}

/* A host's service address: an IPv4 address on the loopback device outside
 * 127/8. Multipath fabrics give hosts one (e.g. BGP to the host, anycast):
 * the routes to it are ECMP over every link, where an interface's own
 * address pins the one link it sits on. Peers send to it when present. */
static uint32_t udp_service_addr(const struct ifaddrs *ifs)
{
    for (const struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        uint32_t a;
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) ||
            !(i->ifa_flags & IFF_LOOPBACK))
            continue;
        a = ((const struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
        if ((ntohl(a) >> 24) != 127)
            return a;
    }
    return 0;
}

/* IPv4 addresses of the chosen interface (or every up one: the service
 * address first, other loopback addresses last) and the MTU of the first.
 * PLAIT_UDP_IF may also name one IPv4 address: then exactly that one is
 * used, e.g. a service address (the MTU is then the smallest of the real
 * interfaces, where the routes from it leave). */
static int udp_local_addrs(const char *ifname, uint32_t *addrs, uint32_t *mtu)
{
    struct ifaddrs *ifs, *i;
    int n = 0;
    uint32_t lo = 0;
    struct in_addr want;
    char first[IFNAMSIZ] = "lo";
    if (!ifname[0]) {
        if (getifaddrs(&ifs) != 0)
            return 0;
        want.s_addr = udp_service_addr(ifs);
        freeifaddrs(ifs);
        if (want.s_addr) {
            char text[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &want, text, sizeof text);
            return udp_local_addrs(text, addrs, mtu);
        }
    }
    if (ifname[0] && inet_pton(AF_INET, ifname, &want) == 1) {
        int found = 0;
        if (getifaddrs(&ifs) != 0)
            return 0;
        for (i = ifs; i; i = i->ifa_next)
            found |= i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
                     ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == want.s_addr;
        *mtu = udp_min_mtu(ifs);
        freeifaddrs(ifs);
        addrs[0] = want.s_addr;
        return found;
    }
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
    for (int i = 0; i < u->npaths; i++) {
        /* the receive sockets take every path's data: room for a window */
        int big = i < u->neng ? 32 << 20 : 8 << 20;
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
        /* GRO: the kernel may hand several equal packets as one buffer
         * (split again by segment size on receipt), and a GSO datagram
         * whole (runs: pp.h PP_F_RUN); absent or off (PLAIT_UDP_GRO=0), the
         * kernel cuts every GSO datagram into its segments */
        if (u->cfg.udp_gro)
            setsockopt(fd, SOL_UDP, UDP_GRO, &(int){1}, sizeof(int));
        u->ports[i] = sa.sin_port;
    }
    return PLAIT_OK;
}

/* PLAIT_UDP_TX_HELP: a helping engine thread needs a core of its own (bound
 * to one core, it would take turns with the caller instead). */
static int udp_tx_help_wanted(int mode)
{
    cpu_set_t set;
    if (mode != PRT_TX_HELP_AUTO)
        return mode == PRT_TX_HELP_ON;
    return sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) >= 2;
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
    u->gso = cfg->udp_gso;
    for (int i = 0; i < PP_MAX_PATHS; i++)
        u->fds[i] = -1;
    u->npaths = cfg->udp_paths < 1 ? 1 : cfg->udp_paths > PP_MAX_PATHS ? PP_MAX_PATHS
                                                                       : (int)cfg->udp_paths;
    u->neng = cfg->engines < 1 ? 1 : cfg->engines > UDP_MAX_ENG ? UDP_MAX_ENG : (int)cfg->engines;
    if (u->neng > u->npaths)
        u->neng = u->npaths;
    u->tx_help = udp_tx_help_wanted(cfg->udp_tx_help);
    if (getrandom(&u->epoch, sizeof u->epoch, 0) != sizeof u->epoch)
        u->epoch = (uint32_t)(prt_now_ns() ^ ((uint64_t)getpid() << 16));
    u->card.magic = UDP_MAGIC;
    u->card.epoch = u->epoch;
    u->card.naddr = (uint16_t)udp_local_addrs(cfg->udp_if, u->card.addrs, &u->card.mtu);
    if (u->card.naddr == 0)
        return prt_err(PLAIT_ERR_ARG, "udp: no IPv4 address matches '%s' (PLAIT_UDP_IF)",
                       cfg->udp_if[0] ? cfg->udp_if : "any interface");
    if (cfg->udp_mtu > u->card.mtu && u->job->local_size < u->job->size && u->job->local_rank == 0)
        prt_log(PRT_LOG_WARN, "udp: PLAIT_UDP_MTU=%zu is above this host's interface MTU (%u): "
                "datagrams between hosts will go fragmented, which is slower", cfg->udp_mtu,
                u->card.mtu);
    PRT_CHECK(udp_open_paths(u, cfg->udp_if[0] ? u->card.addrs[0] : htonl(INADDR_ANY)));
    u->card.npaths = (uint16_t)u->npaths;
    u->card.nrx = (uint16_t)u->neng;   /* engine e owns socket e: one receive socket each */
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

/* pp's place hook (runs under the peer's lock, inside pp_rx): the address
 * for len bytes at offset off of the region exposed as id, if inside it. */
static void *udp_place(void *arg, uint64_t id, uint64_t off, size_t *len)
{
    udp_peer_t *p = arg;
    return udp_region_place(&p->regions, id, off, len);
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
    /* IPv4 + UDP headers, and the largest data header (a placed packet's):
     * every packet of a chunk but its last has this payload, placed or not,
     * so GSO runs stay equal-sized and no datagram passes the MTU */
    c->mtu = mtu - 28 - (uint32_t)PP_DATA_HDR_MAX;
    if (c->mtu > c->chunk)
        c->mtu = c->chunk;
    if (c->mtu > 65000)
        c->mtu = 65000;
    /* pp_conn_init rounds the chunk down to whole packets */
    c->npaths = (uint32_t)(card->npaths < u->npaths ? card->npaths : u->npaths);
    /* Inside a host every path is the same loopback: no ECMP to spread
     * over, only reordering and receive syscalls to pay (measured on 16
     * cores, 1 MB messages: 1 path 2.8-3.0 GB/s, 4 paths 2.2-2.5). */
    if (udp_same_host(u, peer) && c->npaths > UDP_LOCAL_PATHS)
        c->npaths = UDP_LOCAL_PATHS;
    c->dupthresh = (uint32_t)g->udp_dupthresh;
    c->small = (uint32_t)g->udp_small;
    c->rto_min_ns = (uint64_t)g->udp_rto_min_us * 1000;
    c->give_up_ns = (uint64_t)(g->udp_give_up_s * 1e9);
    c->max_msg = UDP_MAX_FRAME;
    c->seed = ((uint64_t)u->epoch << 32) ^ (uint64_t)peer;
    c->cc = pp_cc_find(udp_cc_names[g->cc]);
    c->lb = pp_lb_find(udp_lb_names[g->lb]);
    c->place = udp_place;
    c->place_arg = &u->peers[peer];
    c->early_min = UDP_EARLY_MIN;
}

static int udp_connect_peer(udp_t *u, int peer)
{
    udp_peer_t *p = &u->peers[peer];
    udp_card_t *card = NULL;
    size_t len = 0;
    pp_cfg_t cfg;
    PRT_CHECK(prt_boot_get(u->job, peer, UDP_CARD_KEY, (void **)&card, &len));
    if (len != sizeof *card || card->magic != UDP_MAGIC || card->naddr == 0 ||
        card->naddr > UDP_MAX_ADDRS || card->npaths == 0 || card->npaths > PP_MAX_PATHS ||
        card->nrx == 0 || card->nrx > card->npaths) {
        free(card);
        return prt_err(PLAIT_ERR_TRANSPORT, "udp: the address card of rank %d is malformed", peer);
    }
    udp_conn_cfg(u, peer, card, &cfg);
    for (int i = 0; i < (int)cfg.npaths; i++) {
        p->dst[i].sin_family = AF_INET;
        p->dst[i].sin_addr.s_addr = card->addrs[0];
        p->dst[i].sin_port = card->ports[i % card->nrx];
    }
    free(card);
    p->runs = u->cfg.udp_runs;
    if (pp_conn_init(&p->conn, &cfg) != 0)
        return prt_err(PLAIT_ERR_ARG, "udp: invalid protocol settings for rank %d (chunk %u, "
                       "packet payload %u)", peer, cfg.chunk, cfg.mtu);
    p->up = 1;
    return PLAIT_OK;
}

/* Points the receive batch's headers at its buffers, once: recvmmsg only
 * changes the lengths (msg_controllen is restored after each use), so an
 * empty poll costs the syscall alone. */
static void udp_rxb_init(udp_rxb_t *r)
{
    memset(r->m, 0, sizeof r->m);
    r->ncopy = 0;
    r->nrun = 0;
    r->vlen = UDP_BATCH;
    r->gro = 0;   /* (read by udp_rx_vlen before the first datagram sets it) */
    for (int i = 0; i < UDP_BATCH; i++) {
        r->iov[i].iov_base = r->bufs[i];
        r->iov[i].iov_len = UDP_RXBUF;
        r->m[i].msg_hdr.msg_iov = &r->iov[i];
        r->m[i].msg_hdr.msg_iovlen = 1;
        r->m[i].msg_hdr.msg_control = r->ctl[i];
        r->m[i].msg_hdr.msg_controllen = sizeof r->ctl[i];
    }
}

static void *udp_engine_main(void *arg);

/* A peer's lock is held for short steps (a batch cut into packets, a
 * datagram's headers) by up to two threads at once: spinning a moment before
 * sleeping saves the futex sleep and wake-up (glibc's adaptive mutex). */
static void udp_lock_init(pthread_mutex_t *m)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP);
#endif
    pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
}

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
        udp_lock_init(&u->peers[r].lock);
        if (r != u->job->rank)
            PRT_CHECK(udp_connect_peer(u, r));
    }
    /* A rank bound to one core helps with its engine threads after all when
     * they can run off the host's ranks' CPUs (udp_engine_main). */
    if (u->cfg.udp_tx_help == PRT_TX_HELP_AUTO && !u->tx_help && prt_affinity_spare_exists(u->job))
        u->tx_help = 1;
    for (int e = 0; e < u->neng; e++) {
        udp_engine_t *g = &u->eng[e];
        g->u = u;
        g->id = e;
        g->epfd = epoll_create1(EPOLL_CLOEXEC);
        g->kickfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        pthread_mutex_init(&g->drive, NULL);
        pthread_mutex_init(&g->owed_lock, NULL);
        /* zeroed: a GSO control message leaves padding the kernel reads */
        g->txb = calloc(1, sizeof *g->txb);
        g->txh = u->tx_help ? calloc(1, sizeof *g->txh) : NULL;
        g->rxb = malloc(sizeof *g->rxb);
        g->rxh = u->tx_help ? malloc(sizeof *g->rxh) : NULL;
        if (!g->txb || !g->rxb || (u->tx_help && (!g->txh || !g->rxh)))
            return prt_err(PLAIT_ERR_NOMEM, "udp: no memory for engine %d's buffers", e);
        udp_rxb_init(g->rxb);
        if (g->rxh)
            udp_rxb_init(g->rxh);
        ev.data.u32 = UDP_KICK_TAG;
        if (g->epfd < 0 || g->kickfd < 0 || epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->kickfd, &ev) != 0)
            return prt_err(PLAIT_ERR_TRANSPORT, "udp: epoll: %s", strerror(errno));
        /* Peers send to sockets 0..nrx-1 only (the card), socket e is
         * engine e's: the others only send (a stray packet there waits
         * unread until the socket buffer drops it). */
        ev.data.u32 = (uint32_t)e;
        if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, u->fds[e], &ev) != 0)
            return prt_err(PLAIT_ERR_TRANSPORT, "udp: epoll: %s", strerror(errno));
        /* started before the thread starts: it reads the flag (udp_rx_pass),
         * and a store after pthread_create would race with that read. */
        g->started = 1;
        if (pthread_create(&g->thread, NULL, udp_engine_main, g) != 0) {
            g->started = 0;
            return prt_err(PLAIT_ERR_TRANSPORT, "udp: cannot start engine thread %d", e);
        }
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

/* Packets i..i+k-1 of the batch that can leave as one GSO datagram: same
 * path, every segment as long as the first except a shorter last one, and
 * the whole within one IP datagram. */
static int udp_gso_run(const udp_txb_t *b, int i, int n)
{
    size_t seg = b->out[i].hdr_len + b->out[i].len + b->out[i].len2, total = seg;
    int k = 1;
    while (i + k < n && k < UDP_GSO_SEGS && b->out[i + k].path == b->out[i].path) {
        size_t l = b->out[i + k].hdr_len + b->out[i + k].len + b->out[i + k].len2;
        if (l > seg || total + l > UDP_GSO_BYTES)
            break;
        total += l;
        k++;
        if (l < seg)
            break;   /* only the last segment may be short */
    }
    return k;
}

/* Builds message m of the batch for packets i..i+k-1 (one GSO datagram when
 * k > 1; run: with one header for all, pp.h's PP_F_RUN, out of riov and
 * rhdr, so that iov still holds each packet whole for udp_flush's
 * fallbacks). The GSO segment size stays a packet's: the segments of a run
 * need not line up with its packets, only with the path's MTU. */
static void udp_msg_build(udp_txb_t *b, udp_peer_t *p, int m, int i, int k, int run)
{
    struct msghdr *h = &b->m[m].msg_hdr;
    int path = b->out[i].path;
    memset(h, 0, sizeof *h);
    h->msg_name = &p->dst[path];
    h->msg_namelen = sizeof p->dst[path];
    h->msg_iov = b->iov[i];
    h->msg_iovlen = (size_t)(UDP_IOV * k);
    b->mpath[m] = path;
    if (run) {   /* (its payloads lie back to back: pp_run_count) */
        const pp_out_t *last = &b->out[i + k - 1];
        b->riov[m][0].iov_base = b->rhdr[m];
        b->riov[m][0].iov_len = pp_run_hdr(&p->conn, &b->out[i], k, b->rhdr[m]);
        b->riov[m][1].iov_base = (void *)b->out[i].payload;
        b->riov[m][1].iov_len = (size_t)((const uint8_t *)last->payload + last->len -
                                         (const uint8_t *)b->out[i].payload);
        h->msg_iov = b->riov[m];
        h->msg_iovlen = 2;
    }
    if (k > 1) {
        struct cmsghdr *cm;
        h->msg_control = b->ctl[m];
        h->msg_controllen = sizeof b->ctl[m];
        cm = CMSG_FIRSTHDR(h);
        cm->cmsg_level = SOL_UDP;
        cm->cmsg_type = UDP_SEGMENT;
        cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        *(uint16_t *)(void *)CMSG_DATA(cm) =
            (uint16_t)(b->out[i].hdr_len + b->out[i].len + b->out[i].len2);
    }
}

/* PLAIT_TRACE: the payload bytes and packets of messages m..m+k-1 of b
 * (one sendmmsg), counted only while tracing. */
static void udp_trace_send(const udp_txb_t *b, int m, int k)
{
    int64_t bytes = 0;
    int first, end;
    if (!atomic_load_explicit(&prt_trace_on, memory_order_relaxed))
        return;
    first = b->mfirst[m];
    end = b->mfirst[m + k - 1] + b->mcount[m + k - 1];
    for (int j = first; j < end; j++)
        bytes += (int64_t)(b->out[j].len + b->out[j].len2);
    prt_trace_event('S', bytes, end - first, 0);
}

/* The kernel refused a datagram as larger than the path MTU (EMSGSIZE): a
 * route or a router's link on the way has a smaller MTU than the interface
 * the datagram size came from (an ICMP "fragmentation needed" lowered the
 * kernel's path MTU for the peer's address, on every path at once), or
 * PLAIT_UDP_MTU is set above the network's. Retrying at the same size would
 * fail until the peer is given up as unreachable. Instead every path socket
 * stops setting don't-fragment (IP_PMTUDISC_DONT): the kernel and the routers
 * then fragment what does not fit, and the receiver's kernel reassembles it.
 * GSO stops too: the kernel refuses segments larger than the path MTU
 * whatever the don't-fragment setting (EMSGSIZE, on the 6.18 kernel here).
 * Slower, but every byte arrives; the warning says how to get the speed back.
 * The refused packets are lost here and resent like any loss. */
static void udp_pmtu_fallback(udp_t *u, const udp_peer_t *p)
{
    int peer = (int)(p - u->peers);
    if (atomic_exchange(&u->frag, 1))
        return;
    atomic_store(&u->gso, 0);
    for (int i = 0; i < u->npaths; i++)
        setsockopt(u->fds[i], IPPROTO_IP, IP_MTU_DISCOVER, &(int){IP_PMTUDISC_DONT}, sizeof(int));
    prt_log(PRT_LOG_WARN, "udp: datagrams of %u bytes to rank %d do not fit the path MTU (the "
            "kernel refused them: %s); they go fragmented from now on, which is slower: set "
            "PLAIT_UDP_MTU to the network's MTU (or fix the route or link MTU)",
            p->conn.cfg.mtu + 28 + (uint32_t)PP_DATA_HDR_MAX, peer, strerror(EMSGSIZE));
}

/* Hands the batch's packets (all for peer p) to the kernel: runs of equal
 * packets on one path go as one GSO datagram where the kernel takes them,
 * runs of datagrams on one path in one sendmmsg. A full socket buffer loses
 * the rest, which the protocol repairs like any loss. */
static void udp_flush(udp_t *u, udp_txb_t *b, udp_peer_t *p)
{
    int nm = 0, npaths = (int)p->conn.cfg.npaths;
    for (int i = 0; i < b->n; i++) {
        pp_out_t *o = &b->out[i];
        if ((unsigned)o->path >= (unsigned)npaths)   /* (a division per packet otherwise) */
            o->path %= npaths;
        b->iov[i][0].iov_base = o->hdr;
        b->iov[i][0].iov_len = o->hdr_len;
        b->iov[i][1].iov_base = (void *)o->payload;
        b->iov[i][1].iov_len = o->len;
        b->iov[i][2].iov_base = (void *)o->payload2;   /* empty but for a split packet */
        b->iov[i][2].iov_len = o->len2;
    }
    for (int i = 0; i < b->n;) {
        int gso = atomic_load_explicit(&u->gso, memory_order_relaxed), k = 1, run = 0;
        if (gso && b->runs) {
            int most = b->n - i < UDP_GSO_SEGS ? b->n - i : UDP_GSO_SEGS;
            k = pp_run_count(&p->conn, &b->out[i], most, UDP_GSO_BYTES - PP_RUN_HDR_MAX);
            run = k > 1;
        }
        if (gso && !run)
            k = udp_gso_run(b, i, b->n);
        udp_msg_build(b, p, nm, i, k, run);
        b->mfirst[nm] = i;
        b->mcount[nm++] = k;
        i += k;
    }
    for (int m = 0; m < nm;) {
        int path = b->mpath[m], k = 1, rc;
        while (m + k < nm && b->mpath[m + k] == path)
            k++;
        udp_trace_send(b, m, k);
        rc = sendmmsg(u->fds[path], &b->m[m], (unsigned)k, MSG_DONTWAIT);
        if (rc < 0 && b->m[m].msg_hdr.msg_controllen && (errno == EIO || errno == EINVAL ||
                                                         errno == EOPNOTSUPP)) {
            /* this kernel or device cannot segment: send the packets one by one from now on */
            atomic_store(&u->gso, 0);
            prt_log(PRT_LOG_DEBUG, "udp: UDP_SEGMENT refused (%s): no GSO", strerror(errno));
            for (int j = b->mfirst[m]; j < b->mfirst[m] + b->mcount[m]; j++) {
                struct msghdr h = {.msg_name = &p->dst[path], .msg_namelen = sizeof p->dst[path],
                                   .msg_iov = b->iov[j], .msg_iovlen = UDP_IOV};
                if (sendmsg(u->fds[path], &h, MSG_DONTWAIT) < 0) {
                    if (errno == EMSGSIZE)
                        udp_pmtu_fallback(u, p);
                    break;
                }
            }
            rc = 1;
        } else if (rc < 0 && errno == EMSGSIZE) {
            udp_pmtu_fallback(u, p);
        } else if (rc < 0 && errno != EAGAIN && errno != ENOBUFS) {
            prt_log(PRT_LOG_DEBUG, "udp: sendmmsg on path %d: %s", path, strerror(errno));
        } else if (rc < 0) {   /* the packets are lost here: repaired like any loss */
            uint64_t pkts = 0;
            for (int j = 0; j < k; j++)
                pkts += (uint64_t)b->mcount[m + j];
            atomic_fetch_add_explicit(&u->st_sndbuf, pkts, memory_order_relaxed);
        }
        prt_trace('s', rc, path, 0);   /* (after the checks of errno) */
        m += rc > 0 ? rc : k;
        udp_count(&u->st_syscalls);
    }
}

/* 1 when peer r is among list[0..n) (the short peer lists of ACKs owed). */
static int udp_listed(const int *list, int n, int r)
{
    for (int k = 0; k < n; k++)
        if (list[k] == r)
            return 1;
    return 0;
}

/* 1 when a caller's pass holds back peer r's ACK (g->defer). */
static int udp_deferred(const udp_engine_t *g, int r)
{
    return udp_listed(g->defer, g->ndefer, r);
}

/* Peer r's ACK is no longer held back. Caller holds g->drive. */
static void udp_undefer(udp_engine_t *g, int r)
{
    for (int k = 0; k < g->ndefer; k++)
        if (g->defer[k] == r) {
            g->defer[k] = g->defer[--g->ndefer];
            break;
        }
    if (!g->ndefer)
        atomic_store_explicit(&g->defer_ns, 0, memory_order_relaxed);
}

static int udp_rx_order(udp_engine_t *g, int me);
static void udp_owe(udp_t *u, udp_engine_t *g, udp_txb_t *b, int me, const int *touched, int nt);

/* 1 when peer r's ACK waits for the receive order (udp_rx_order). */
static int udp_owed(udp_engine_t *g, int r)
{
    int found;
    if (!atomic_load_explicit(&g->owed_ns, memory_order_relaxed))
        return 0;
    pthread_mutex_lock(&g->owed_lock);
    found = udp_listed(g->owed, g->nowed, r);
    pthread_mutex_unlock(&g->owed_lock);
    return found;
}

/* Takes peer p's next packets into batch b: up to UDP_BATCH of them, and
 * while a bulk transfer is under way (bulk_hint: two threads may send it),
 * up to UDP_BATCH_BYTES of payload. The byte cap is for large datagrams: at
 * a 9000-byte MTU, 64 packets are 570 KB, so the thread that filled the
 * first batch of a 256 KiB message took all of it (ten chunks, ten
 * sendmmsg calls on ten paths, one after another) and the engine thread,
 * kicked to send beside it (udp_tx_help), found nothing left: it sent no
 * packet of such a message in a 2 x 1 ping-pong between namespace hosts.
 * Without bulk nobody helps, and a capped batch only splits a message into
 * more passes. At 1500 bytes the packet count binds first (64 x 1420 = 91
 * KB), as before. Returns the packets taken. Caller holds the peer's lock. */
static int udp_tx_fill(udp_peer_t *p, udp_txb_t *b, uint64_t now)
{
    size_t bytes = 0, cap = atomic_load_explicit(&p->bulk_hint, memory_order_relaxed)
                               ? UDP_BATCH_BYTES : SIZE_MAX;
    b->n = 0;
    b->runs = p->runs && !p->conn.runs_off;
    while (b->n < UDP_BATCH && bytes < cap && pp_tx_next(&p->conn, now, &b->out[b->n])) {
        bytes += b->out[b->n].len + b->out[b->n].len2;
        b->n++;
    }
    return b->n;
}

/* Timers and transmission for one peer, from scratch b: g's under
 * g->drive, or (g NULL) the engine thread's own while it helps a caller
 * (udp_tx_help). The packets go to the kernel with the peer unlocked and
 * its connection pinned (pp_tx_pin: what they point into stays), so a
 * second thread can transmit or take ACKs meanwhile: the kernel's copy and
 * its path to the peer's socket are most of a sender's time. Returns the
 * packets sent. */
static int udp_tx_peer(udp_t *u, udp_engine_t *g, udp_txb_t *b, int r, uint64_t now, int budget)
{
    udp_peer_t *p = &u->peers[r];
    int sent = 0, wake = 0;
    uint64_t timeouts;
    pthread_mutex_lock(&p->lock);
    timeouts = p->conn.st.timeouts;
    if (pp_poll(&p->conn, now))
        wake = 1;   /* failed: let blocked callers see it */
    if (p->conn.st.timeouts != timeouts)
        prt_trace('T', (int64_t)(p->conn.st.timeouts - timeouts), r, 0);
    while (sent < budget) {
        if (udp_tx_fill(p, b, now) == 0)
            break;
        pp_tx_pin(&p->conn, b->out, b->n);
        pthread_mutex_unlock(&p->lock);
        udp_flush(u, b, p);
        pthread_mutex_lock(&p->lock);
        pp_tx_unpin(&p->conn, b->out, b->n);
        sent += b->n;
    }
    if (sent && g && g->ndefer && !p->conn.ack_pending)
        udp_undefer(g, r);   /* the held-back ACK rode on the data */
    /* An ACK owed outside a receive pass (a window update: pp_msg_release)
     * goes now, unless a caller's pass holds it back to ride on a reply, or
     * the receive order holds it (udp_rx_order: then it is owed). */
    if (g && p->conn.ack_pending && !udp_deferred(g, r) && !udp_owed(g, r)) {
        if (!udp_rx_order(g, 0)) {
            pthread_mutex_unlock(&p->lock);   /* (udp_owe may lock it again to send) */
            udp_owe(u, g, b, 0, &r, 1);
            pthread_mutex_lock(&p->lock);
        } else if (pp_ack_next(&p->conn, now, &b->out[0])) {
            b->n = 1;
            udp_flush(u, b, p);
        }
    }
    if (p->conn.tx_was_blocked && p->conn.tx_buffered <= p->conn.cfg.tx_buf_max / 2) {
        p->conn.tx_was_blocked = 0;
        wake = 1;
    }
    /* zero-copy sends acknowledged while pinned, or a failure's */
    if (pp_zc_ready(&p->conn) && !atomic_load_explicit(&u->zc_ready, memory_order_relaxed)) {
        atomic_store(&u->zc_ready, 1);
        wake = 1;
    }
    pthread_mutex_unlock(&p->lock);
    if (wake)
        ptl_shm_wake_self(u->waker);
    return sent;
}

/* A bulk transfer to this peer is under way, for udp_tx_help: set (bulk_hint)
 * when a frame of UDP_HELP_MIN bytes or more is queued, it lasts while
 * anything is left to send, lost packets included, so the engine thread,
 * once helping, finishes it (in an exchange it sends alone: udp_tx_budget).
 * (Two threads sending one stream of 32 KiB messages used to reorder it into
 * spurious fast retransmissions; since pp_tx_pin holds the paths of a batch,
 * one thread's packets on a path never overtake another's.) */
static int udp_bulk(const pp_conn_t *c)
{
    return c->tx_unsent > 0 || c->nlost;
}

/* Placed (bulk) data arrived within UDP_HANDOFF_NS. */
static int udp_rx_bulk(udp_t *u)
{
    return prt_now_ns() - atomic_load_explicit(&u->rx_bulk_ns, memory_order_relaxed) < UDP_HANDOFF_NS;
}

/* A receive region is exposed: its bulk data is on the way (a CTS went). */
static int udp_rx_expected(udp_t *u)
{
    return atomic_load_explicit(&u->exposed, memory_order_relaxed) > 0;
}

/* The engine thread's share while an application thread drives: it sends
 * for its peers with a bulk transfer under way alongside the caller, each
 * from its own scratch. Returns 1 while some peer has one (the window may
 * be shut for now: the thread keeps at it rather than sleep). */
static int udp_tx_help(udp_t *u, udp_engine_t *g)
{
    int any = 0;
    for (int r = g->id; r < u->job->size; r += u->neng) {
        udp_peer_t *p = &u->peers[r];
        int bulk;
        if (!p->up || !atomic_load_explicit(&p->bulk_hint, memory_order_relaxed))
            continue;   /* (no lock taken for the peers without one) */
        pthread_mutex_lock(&p->lock);
        bulk = !p->conn.failed && udp_bulk(&p->conn);
        if (!bulk)      /* cleared under the lock; a sender sets it after queueing one */
            atomic_store_explicit(&p->bulk_hint, 0, memory_order_relaxed);
        pthread_mutex_unlock(&p->lock);
        if (bulk) {
            int n = udp_tx_peer(u, NULL, g->txh, r, prt_now_ns(), UDP_TX_BUDGET);
            atomic_fetch_add_explicit(&u->st_helped, (uint64_t)n, memory_order_relaxed);
            if (n == 0)
                sched_yield();   /* window shut: the caller's ACKs open it */
        }
        any |= bulk;
    }
    return any;
}

/* Sends the ACK owed to each peer in touched[0..nt) (one per peer per pass:
 * it carries the whole SACK state), from scratch b. */
static void udp_ack_touched(udp_t *u, udp_txb_t *b, const int *touched, int nt)
{
    for (int k = 0; k < nt; k++) {
        udp_peer_t *p = &u->peers[touched[k]];
        pthread_mutex_lock(&p->lock);
        b->n = 0;
        if (pp_ack_next(&p->conn, prt_now_ns(), &b->out[0])) {
            b->n = 1;
            udp_flush(u, b, p);
        }
        pthread_mutex_unlock(&p->lock);
    }
}

/* Moves the peers of list[0..*n) whose ACK may wait (pp_ack_due) to out
 * (at most cap); returns how many moved. A caller's pass ACKed every peer
 * it had data from, so a bulk stream read a few datagrams per pass drew an
 * ACK per pass, each a sendmmsg of 4-5 us on the receiving thread
 * (PLAIT_TRACE: four per 256 KiB message). In-order data of a message not
 * yet complete now waits for UDP_ACK_HOLD_BYTES or UDP_ACK_HOLD_NS (the
 * next pass, or the engine thread after UDP_ACK_DEFER_NS, sends it); a
 * hole, a completed message, a duplicate or a window to say goes at once.
 * 16-core machine, 2 hosts, one call, 4 rounds in two orders: pt2pt bw
 * 256 KiB-4 MiB 3.97-5.95 -> 4.78-6.73 GB/s, 2 x 1 alltoall and 2 x 2
 * allreduce faster at every size in 2 of 2 paired rounds, the 2-rank
 * bcast either way; the issue-4 bed unchanged but unshaped 12.5 -> 14.0
 * Gbit/s (docs/PERFORMANCE.md, session 17). */
static int udp_ack_split(udp_t *u, int *list, int *n, int *out, int cap)
{
    uint64_t now = prt_now_ns();
    int kept = 0, moved = 0;
    for (int k = 0; k < *n; k++) {
        udp_peer_t *p = &u->peers[list[k]];
        int due;
        pthread_mutex_lock(&p->lock);
        due = pp_ack_due(&p->conn, now, UDP_ACK_HOLD_BYTES, UDP_ACK_HOLD_NS);
        pthread_mutex_unlock(&p->lock);
        if (due || moved == cap)
            list[kept++] = list[k];
        else
            out[moved++] = list[k];
    }
    *n = kept;
    return moved;
}

/* Sends the ACKs the last caller pass held back (those that did not ride
 * on data since), but those that may wait still (udp_ack_split) unless
 * all must go (force: the list is full). Caller holds g->drive. */
static void udp_ack_deferred(udp_t *u, udp_engine_t *g, int force)
{
    int wait[UDP_TOUCH], nwait = 0;
    if (!g->ndefer)
        return;
    if (!force)
        nwait = udp_ack_split(u, g->defer, &g->ndefer, wait, UDP_TOUCH);
    if (g->ndefer && udp_rx_order(g, 0))
        udp_ack_touched(u, g->txb, g->defer, g->ndefer);
    else if (g->ndefer)   /* the engine thread is inside a batch that may hold earlier packets */
        udp_owe(u, g, g->txb, 0, g->defer, g->ndefer);
    memcpy(g->defer, wait, (size_t)nwait * sizeof *wait);
    g->ndefer = nwait;
    if (!nwait)
        atomic_store_explicit(&g->defer_ns, 0, memory_order_relaxed);
}

/* Holds back the ACKs owed to touched[0..nt): see udp_rx_pass. */
static void udp_defer_acks(udp_t *u, udp_engine_t *g, const int *touched, int nt)
{
    if (g->ndefer + nt > UDP_TOUCH)
        udp_ack_deferred(u, g, 1);   /* (room for all of touched) */
    for (int k = 0; k < nt; k++)
        if (!udp_listed(g->defer, g->ndefer, touched[k]))
            g->defer[g->ndefer++] = touched[k];
    if (g->ndefer && !atomic_load_explicit(&g->defer_ns, memory_order_relaxed))
        atomic_store_explicit(&g->defer_ns, prt_now_ns(), memory_order_relaxed);
    /* An engine thread asleep in udp_engine_idle (the caller was away) would
     * not look for up to 20 ms: wake it, it stands by and sends the ACK if
     * the caller does not within UDP_ACK_DEFER_NS. Standing by already, it
     * looks within UDP_HANDOFF_NS. */
    if (atomic_load_explicit(&g->idle, memory_order_relaxed))
        udp_kick(u, g->id);
}

/* Makes a receive batch's placement copies q[0..n), sharing them with
 * engine g's thread when a caller drives (share.h: the caller posts the
 * second half, makes the first, and takes the second back unless the
 * engine thread claimed it; then it waits a few tens of us). A thread
 * that was asleep or busy sending costs nothing: the caller copies alone.
 * A one-way stream is bound by its receiving thread, which makes two
 * copies of every byte (the kernel's into the batch, this one into the
 * user's buffer): on the 16-core machine, leaving this one out entirely
 * took one rank per namespace host from 2.7-3.2 to 4.1-4.8 GB/s. With the
 * sharing (and udp_rx_vlen), in one call, 3 interleaved runs: plait-bench
 * pt2pt bw 1-4 MiB 2.38-2.58 -> 2.65-3.66 GB/s, 16 MiB bcast 6.8-8.0 ->
 * 5.0-6.5 ms. */
static void udp_copy_split(udp_t *u, udp_engine_t *g, const pp_copy_t *q, uint32_t n)
{
    uint32_t h = n / 2;
    if (n < UDP_SPLIT_MIN || !u->tx_help || !g->started || pthread_equal(pthread_self(), g->thread)) {
        udp_share_copies(q, n);
        return;
    }
    udp_share_post(&g->share, q + h, n - h, prt_now_ns());
    udp_kick(u, g->id);   /* (a system call only when the thread sleeps) */
    udp_share_finish(&g->share, q, h);
}

/* Makes the placement copies the batch's packets left (udp_rx_done), with
 * every connection unlocked, then tells each connection its copies are
 * made: only then may a message they complete be handed up. */
static void udp_rx_flush(udp_t *u, udp_engine_t *g, udp_rxp_t *x)
{
    udp_rxb_t *r = x->r;
    if (!r->nrun)
        return;
    prt_trace('p', r->ncopy, 0, 0);
    if (x->helper)
        udp_share_copies(r->copies, r->ncopy);
    else
        udp_copy_split(u, g, r->copies, r->ncopy);
    prt_trace('P', r->ncopy, 0, 0);
    for (int k = 0; k < r->nrun; k++) {
        udp_peer_t *p = &u->peers[r->run_peer[k]];
        atomic_fetch_sub(&p->copying, 1);
        pthread_mutex_lock(&p->lock);
        pp_rx_copy_done(&p->conn, r->run_copies[k]);
        if (pp_deliver_ready(&p->conn))
            x->ready |= 1;
        pthread_mutex_unlock(&p->lock);
    }
    r->ncopy = 0;
    r->nrun = 0;
}

/* After a run of packets from peer p (its lock held): the placement copies
 * the run left (pp_rx_copy_defer) join the batch's, made with every lock
 * released (udp_rx_flush), so that a thread sending to p meanwhile is not
 * held up by them; what the pass must report; then the lock is released. */
static void udp_rx_done(udp_t *u, udp_rxp_t *x, udp_peer_t *p, int acks)
{
    udp_rxb_t *r = x->r;
    uint32_t n = pp_rx_copy_take(&p->conn);
    int peer = (int)(p - u->peers);
    if (n && r->nrun && r->run_peer[r->nrun - 1] == peer) {   /* the same peer's run goes on */
        r->run_copies[r->nrun - 1] += n;
        r->ncopy += n;
    } else if (n && r->nrun < UDP_BATCH) {
        atomic_fetch_add(&p->copying, 1);   /* unexpose waits for these */
        r->run_peer[r->nrun] = peer;
        r->run_copies[r->nrun++] = n;
        r->ncopy += n;
    } else if (n) {   /* no run left (a datagram naming many peers): made now */
        atomic_fetch_add(&p->copying, 1);
        pthread_mutex_unlock(&p->lock);
        udp_share_copies(r->copies + r->ncopy, n);
        atomic_fetch_sub(&p->copying, 1);
        pthread_mutex_lock(&p->lock);
        pp_rx_copy_done(&p->conn, n);
    }
    if (pp_deliver_ready(&p->conn))
        x->ready |= 1;
    if (p->conn.early_hint) {   /* a header the caller may place early (udp_early_pass) */
        p->conn.early_hint = 0;
        atomic_store(&p->early_hint, 1);   /* (before the transport's: see udp_early_pass) */
        atomic_store(&u->early_hint, 1);
        x->ready |= 1;
    }
    if (acks && pp_zc_ready(&p->conn) && !atomic_load_explicit(&u->zc_ready,
                                                               memory_order_relaxed)) {
        atomic_store(&u->zc_ready, 1);
        x->ready |= 2;   /* a sender may sleep on its send request */
    }
    pthread_mutex_unlock(&p->lock);
}

/* Peer src owes an ACK at the end of the pass. */
static void udp_touch(udp_rxp_t *x, int src)
{
    if (!udp_listed(x->touched, x->nt, src))
        x->touched[x->nt++] = src;
}

/* Two threads read one socket (udp_rx_help): one may take a batch of a
 * path's datagrams, the other the next batch of that path, and finish its
 * protocol work first. An ACK sent then shows the later packets received
 * and the earlier not: the sender's same-path rule (detect_dup_loss) takes
 * them for lost. Session 15's device runs: 0.03-1.2% of packets resent
 * needlessly, 9-24 window cuts per run; one thread at a time between
 * recvmmsg and protocol work (0 resent) cost a third of the one-way
 * bandwidth, the kernel's copies being serial again. So the reads stay
 * parallel and the ACK waits instead: a reader may ACK when the other is in
 * no batch, or began its recvmmsg after this reader's returned (all it
 * holds came later); else its peers are owed, and the other sends them at
 * its next ACK point, or anyone once they are UDP_ACK_ORDER_NS old. On the
 * device, 1-4 MiB: pt2pt bw 3911 -> 0 fast retransmissions, alltoall 1233 ->
 * 44, the reads' parallel speed kept (docs/PERFORMANCE.md, session 16). */
static int udp_rx_order(udp_engine_t *g, int me)
{
    uint64_t other = atomic_load(&g->rd_start[!me]), since;
    if (!other || other > g->rd_taken[me])
        return 1;
    since = atomic_load_explicit(&g->owed_ns, memory_order_relaxed);
    return since && prt_now_ns() - since > UDP_ACK_ORDER_NS;
}

/* Sends what is owed (udp_rx_order), but the peers in skip[0..ns). */
static void udp_owed_send(udp_t *u, udp_engine_t *g, udp_txb_t *b, const int *skip, int ns)
{
    int take[UDP_TOUCH], n = 0;
    pthread_mutex_lock(&g->owed_lock);
    for (int k = 0; k < g->nowed; k++)
        if (!udp_listed(skip, ns, g->owed[k]))
            take[n++] = g->owed[k];
    g->nowed = 0;
    atomic_store(&g->owed_ns, 0);
    pthread_mutex_unlock(&g->owed_lock);
    udp_ack_touched(u, b, take, n);
}

/* Leaves touched[0..nt) to the other reader; then looks again (the other
 * may have passed its ACK point meanwhile: both look after their own
 * store, so one of them sees the other's). */
static void udp_owe(udp_t *u, udp_engine_t *g, udp_txb_t *b, int me, const int *touched, int nt)
{
    pthread_mutex_lock(&g->owed_lock);
    for (int k = 0; k < nt; k++) {
        if (udp_listed(g->owed, g->nowed, touched[k]))
            continue;
        if (g->nowed < UDP_TOUCH) {
            g->owed[g->nowed++] = touched[k];
        } else {   /* full (many peers): this one goes now */
            pthread_mutex_unlock(&g->owed_lock);
            udp_ack_touched(u, b, &touched[k], 1);
            pthread_mutex_lock(&g->owed_lock);
        }
    }
    if (g->nowed && !atomic_load(&g->owed_ns))
        atomic_store(&g->owed_ns, prt_now_ns());
    pthread_mutex_unlock(&g->owed_lock);
    if (udp_rx_order(g, me))
        udp_owed_send(u, g, b, NULL, 0);
}

/* Sends the ACKs the pass owes so far, with those left to it, when the
 * receive order allows (udp_rx_order). */
static void udp_rx_ack(udp_t *u, udp_rxp_t *x)
{
    udp_engine_t *g = x->g;
    if (!udp_rx_order(g, x->helper)) {
        udp_owe(u, g, x->b, x->helper, x->touched, x->nt);
        x->nt = 0;
        return;
    }
    /* the owed first: one owed after our ACKs went must not be dropped as sent */
    if (atomic_load(&g->owed_ns))
        udp_owed_send(u, g, x->b, x->touched, x->nt);
    udp_ack_touched(u, x->b, x->touched, x->nt);
    x->nt = 0;
}

/* The packets of one datagram: seg bytes each (GRO coalesced them), the
 * last may be shorter. They nearly always come from one peer, whose lock
 * is taken once for the run, not once per packet (a 64 KB datagram holds
 * 44). */
static void udp_rx_dgram(udp_t *u, udp_rxp_t *x, const uint8_t *buf, size_t len, size_t seg,
                         uint64_t now)
{
    udp_peer_t *held = NULL;
    int acks = 0;
    if (len == 0) {   /* an empty datagram is no packet: counted with the truncated ones */
        atomic_fetch_add(&u->drops[PP_DROP_TRUNC], 1);
        return;
    }
    for (size_t off = 0, l, span; off < len; off += l) {
        const uint8_t *pkt = buf + off;
        uint32_t src;
        int type, why;
        udp_peer_t *p;
        l = len - off < seg ? len - off : seg;
        why = pp_parse(pkt, l, u->job->key, (uint32_t)u->job->rank, &src, &type);
        if (why < 0 && (src >= (uint32_t)u->job->size || !u->peers[src].up))
            why = PP_DROP_CONN;
        if (why >= 0) {
            atomic_fetch_add(&u->drops[why], 1);
            continue;
        }
        if (type == PP_T_DATA && (span = pp_run_span(pkt, len - off)) != 0)
            l = span;   /* a run (pp.h): one header, its packets behind it */
        p = &u->peers[src];
        if (p != held) {
            if (held)
                udp_rx_done(u, x, held, acks);
            pthread_mutex_lock(&p->lock);
            pp_rx_copy_defer(&p->conn, x->r->copies + x->r->ncopy, UDP_RX_COPIES - x->r->ncopy);
            held = p;
            acks = 0;
        }
        pp_rx_parsed(&p->conn, now, pkt, l);   /* (pp_parse checked the seal) */
        if (type == PP_T_ACK) {
            acks = 1;
            continue;
        }
        if (pkt[offsetof(pp_hdr_t, flags)] & PP_F_PLACED)   /* (a GRO segment may be unaligned) */
            x->ready |= 4;   /* bulk data: its sender waits for the ACK, no reply comes */
        if (x->nt >= UDP_TOUCH - 1) {   /* (a forged datagram may name many peers) */
            udp_rx_done(u, x, held, acks);
            held = NULL;
            udp_rx_ack(u, x);
        }
        udp_touch(x, (int)src);
    }
    if (held)
        udp_rx_done(u, x, held, acks);
}

/* GRO: the segment size the kernel coalesced this datagram with, or 0. */
static size_t udp_gro_size(struct msghdr *h)
{
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(h); cm; cm = CMSG_NXTHDR(h, cm))
        if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
            int v;
            memcpy(&v, CMSG_DATA(cm), sizeof v);
            return v > 0 ? (size_t)v : 0;
        }
    return 0;
}

/* How many datagrams the next recvmmsg asks for: about UDP_RX_BYTES at the
 * size the last call's datagrams had. The kernel's copy into the batch
 * buffers and the placement copies out of them then work on data that is
 * still in the core's cache: GRO hands up 32-64 KB datagrams, and a batch
 * of 64 of them (2-4 MB) was evicted before its placement copies ran. One
 * rank per host on two namespace hosts of the 16-core machine, plait-bench
 * pt2pt bw of 256 KiB-4 MiB, interleaved: 64 datagrams per call 2.7-3.2
 * GB/s, 8 per call 3.3-4.4 (the receiver's thread is the bottleneck of a
 * one-way stream: data waited 1.2 ms on average in its socket). Small
 * datagrams keep the full batch (fewer system calls per message). */
static int udp_rx_vlen(int n, size_t bytes)
{
    size_t want = bytes ? UDP_RX_BYTES * (size_t)n / bytes : UDP_BATCH;
    return want < 1 ? 1 : want > UDP_BATCH ? UDP_BATCH : (int)want;
}

/* Receives what one socket holds (a few batches at most); returns packets.
 * The ACKs owed leave at the end of the pass, and within it at the end of a
 * batch once UDP_ACK_BYTES have arrived since the last ones (not within a
 * batch: its unprocessed tail would show as a hole, udp_rx_order): a pass
 * can drain megabytes
 * (a bulk exchange both ways lets the socket fill while its thread sends),
 * and ACKs held for all of it made the peer's timers fire on packets that
 * had arrived (2 hosts x 1 rank, alltoall 16 MiB, 25 calls: 104-144
 * spurious timeouts, which raised the peer's RTO floor to 2-4 ms; 8-16 with
 * this and the changes of udp_tx_budget). */
static int udp_rx_sock(udp_t *u, udp_engine_t *g, udp_rxp_t *x, int fd, int most)
{
    udp_rxb_t *r = x->r;
    int total = 0, n, vlen;
    size_t unacked = 0;
    do {
        uint64_t now, t0 = atomic_load_explicit(&prt_trace_on, memory_order_relaxed) ? prt_now_ns() : 0;
        size_t bytes = 0;
        vlen = r->vlen;
        if (vlen > UDP_RX_SHARED && r->gro && u->tx_help && udp_rx_expected(u))
            vlen = UDP_RX_SHARED;
        atomic_store(&g->rd_start[x->helper], atomic_fetch_add(&g->rd_tick, 1) + 1);
        n = recvmmsg(fd, r->m, (unsigned)vlen, MSG_DONTWAIT, NULL);
        g->rd_taken[x->helper] = atomic_fetch_add(&g->rd_tick, 1) + 1;
        udp_count(&u->st_syscalls);
        if (n <= 0) {
            atomic_store(&g->rd_start[x->helper], 0);
            break;
        }
        now = prt_now_ns();
        for (int i = 0; i < n; i++)
            bytes += r->m[i].msg_len;
        prt_trace('V', (int64_t)bytes, n, t0 ? now - t0 : 0);   /* (the call's ns: its copies) */
        r->vlen = udp_rx_vlen(n, bytes);
        for (int i = 0; i < n; i++) {
            size_t len = r->m[i].msg_len, seg = udp_gro_size(&r->m[i].msg_hdr);
            r->m[i].msg_hdr.msg_controllen = sizeof r->ctl[i];   /* the kernel shrank it */
            if (r->m[i].msg_hdr.msg_flags & MSG_TRUNC) {   /* lengths come from the datagram */
                atomic_fetch_add(&u->drops[PP_DROP_TRUNC], 1);
                continue;
            }
            if (!seg || seg > len)
                seg = len;
            if (seg < len)
                r->gro = 1;
            else if (len >= UDP_RX_FULL)
                r->gro = 0;
            udp_rx_dgram(u, x, r->bufs[i], len, seg, now);
            unacked += len;
            if (x->nt >= UDP_TOUCH - 1) {   /* (forged: many peers) */
                udp_rx_ack(u, x);
                unacked = 0;
            }
        }
        atomic_store(&g->rd_start[x->helper], 0);   /* its packets are in the state now */
        /* Mid-batch, an ACK would show this batch's unprocessed tail as a
         * hole behind what the other reader took later: ACK at its end. */
        if (unacked >= UDP_ACK_BYTES && x->nt) {
            udp_rx_ack(u, x);   /* (sends the owed too when the order allows) */
            unacked = 0;
        } else if (atomic_load(&g->owed_ns) && udp_rx_order(g, x->helper))   /* the other's, held for these */
            udp_owed_send(u, g, x->b, NULL, 0);
        udp_rx_flush(u, g, x);   /* before the next batch reuses the buffers */
        if (x->early && (x->ready & 1)) {   /* the caller may be spinning for it */
            atomic_store(&u->rx_ready, 1);
            ptl_shm_wake_self(u->waker);
            x->ready &= ~1;
        }
        total += n;
    } while (n == vlen && total < most);
    return total;
}

/* The receive half of a pass: engine g's receive socket, read directly (no
 * readiness syscall first), then one ACK per peer that sent data. A
 * caller's pass (defer) that made a message deliverable holds those ACKs
 * back: the caller gets its message one syscall sooner, and the ACK rides
 * on the reply it is likely to send (pp.h: PP_F_ACK), or leaves at the
 * start of its next pass, or from the engine thread after UDP_ACK_DEFER_NS.
 * (Held back but sent as a packet of its own after the reply, it cost the
 * peer 3-4 us: it arrived with the reply. Riding on it, it costs nothing.) */
static int udp_rx_pass(udp_t *u, udp_engine_t *g, int *ready, int defer)
{
    udp_rxp_t x = {.g = g, .r = g->rxb, .b = g->txb,
                   .early = g->started && pthread_equal(pthread_self(), g->thread)};
    int work = udp_rx_sock(u, g, &x, u->fds[g->id], 4 * UDP_BATCH);
    if (defer && (x.ready & 5) == 1) {
        udp_defer_acks(u, g, x.touched, x.nt);
        x.nt = 0;
        udp_rx_ack(u, &x);   /* (those left to it) */
    } else {
        int wait[UDP_TOUCH], nwait = 0;
        if (defer)   /* in-order data, little of it yet: the ACK may wait (udp_ack_split) */
            nwait = udp_ack_split(u, x.touched, &x.nt, wait, UDP_TOUCH);
        if (nwait)
            udp_defer_acks(u, g, wait, nwait);
        udp_rx_ack(u, &x);
    }
    *ready |= x.ready;
    return work;
}

/* A receive on engine g ended at now: its ACKs were read (udp_send_drive),
 * and placed (bulk) data came in if ready has 4 (udp_tx_budget). */
static void udp_rx_stamp(udp_t *u, udp_engine_t *g, int ready, uint64_t now)
{
    atomic_store_explicit(&g->rx_ns, now, memory_order_relaxed);
    if (ready & 4)
        atomic_store_explicit(&u->rx_bulk_ns, now, memory_order_relaxed);
}

/* The engine thread receives beside a caller that drives, while bulk data
 * is expected or arrives: up to UDP_BATCH datagrams into scratch of its own
 * (rxh), their protocol work under each peer's lock as a caller's pass
 * does, their placement copies and ACKs. The kernel's copy out of the
 * socket is most of a receiver's time, and two threads reading one socket
 * make it in parallel (each datagram goes to one of them whole). A
 * PLAIT_TRACE timeline of a 2 x 1 exchange of 512 KiB on the 16-core
 * machine showed both threads of a rank sending until 111 us, then the
 * caller alone receiving the peer's 543 KB until 264 us (recvmmsg 66 us,
 * protocol work 35, copies 30) while the engine thread stood by. One ACK
 * per call (or per UDP_ACK_BYTES): with one per recvmmsg of 4 uncoalesced
 * packets, one udp-netns.sh call had the unshaped routed bed at 6.0 Gbit/s
 * against 9.6 for the base; as now, 5 interleaved runs were within the
 * spread. Returns the datagrams received. */
static int udp_rx_help(udp_t *u, udp_engine_t *g)
{
    udp_rxp_t x = {.g = g, .r = g->rxh, .b = g->txh, .helper = 1, .early = 1};
    int n;
    if (!udp_rx_expected(u) && !udp_rx_bulk(u))
        return 0;
    n = udp_rx_sock(u, g, &x, u->fds[g->id], UDP_BATCH);
    udp_rx_ack(u, &x);
    if (n <= 0)
        return 0;
    atomic_fetch_add_explicit(&u->st_rx_helped, (uint64_t)n, memory_order_relaxed);
    udp_rx_stamp(u, g, x.ready, prt_now_ns());
    if (x.ready & 2)
        ptl_shm_wake_self(u->waker);
    return n;
}

/* Packets a pass may send to peer r. While the engine thread sends a bulk
 * transfer to r beside an application thread (udp_tx_help) and bulk data
 * arrives too (an exchange: placed data within UDP_HANDOFF_NS), the
 * caller's passes leave the sending to it and keep to receiving, timers and
 * ACKs: one thread per direction. (Both sending, the caller spent most of its
 * time in the kernel's send path while its receiving waited: 2 hosts x 1
 * rank on 16 cores, alltoall 16 MiB, 2 s of rank 0: the caller 742 ms in
 * sendmmsg, the engine thread 87; now 435 and 500.) A caller with nothing
 * arriving sends beside the engine thread: a one-way stream then has two
 * sending threads. */
static int udp_tx_budget(const udp_t *u, int r, int defer, uint64_t now)
{
    if (defer && u->tx_help &&
        atomic_load_explicit(&u->peers[r].bulk_hint, memory_order_relaxed) &&
        now - atomic_load_explicit(&u->rx_bulk_ns, memory_order_relaxed) < UDP_HANDOFF_NS)
        return 0;
    return UDP_TX_BUDGET;
}

/* One run of engine g's share of the datapath: the ACKs the last caller
 * pass held back, receive, then timers and transmission for its peers. The
 * caller holds g->drive. */
static int udp_pass(udp_t *u, udp_engine_t *g, int *ready, int defer)
{
    int work;
    uint64_t now;
    udp_ack_deferred(u, g, 0);
    work = udp_rx_pass(u, g, ready, defer);
    now = prt_now_ns();
    udp_rx_stamp(u, g, *ready, now);
    for (int r = g->id; r < u->job->size; r += u->neng)
        if (u->peers[r].up)
            work += udp_tx_peer(u, g, g->txb, r, now, udp_tx_budget(u, r, defer, now));
    if (*ready & 1)
        atomic_store(&u->rx_ready, 1);
    return work;
}

/* 1 when engine g's peers have packets to send now or timers to watch. */
static int udp_busy(udp_t *u, int e, int *unsent)
{
    int busy = 0;
    *unsent = 0;
    for (int r = e; r < u->job->size; r += u->neng) {
        udp_peer_t *p = &u->peers[r];
        if (!p->up)
            continue;
        pthread_mutex_lock(&p->lock);
        if (!p->conn.failed) {
            busy |= p->conn.tx_head != NULL || p->conn.nlost;
            *unsent |= p->conn.tx_cut != NULL || p->conn.nlost || p->conn.ack_pending;
        }
        pthread_mutex_unlock(&p->lock);
    }
    return busy;
}

/* Sleeps until a packet, a kick or a timer. */
static void udp_engine_idle(udp_engine_t *g)
{
    udp_t *u = g->u;
    struct epoll_event ev[8];
    /* With data in flight the timers need us within a quarter RTO; idle, only
     * a packet or a caller's kick creates work (the 20 ms bound is a guard). */
    struct timespec busy = {0, (long)(u->cfg.udp_rto_min_us * 250)}, idle = {0, 20000000};
    int n, unsent, b;
    atomic_store(&g->sleeping, 1);
    b = udp_busy(u, g->id, &unsent);   /* after sleeping = 1: a later send kicks us */
    if (!unsent) {
        atomic_store_explicit(&g->idle, 1, memory_order_relaxed);
        n = epoll_pwait2(g->epfd, ev, 8, b ? &busy : &idle, NULL);
        atomic_store_explicit(&g->idle, 0, memory_order_relaxed);
        for (int i = 0; i < n; i++)
            if (ev[i].data.u32 == UDP_KICK_TAG) {   /* drain the kick; the pass does the work */
                uint64_t junk;
                ssize_t rd = read(g->kickfd, &junk, sizeof junk);
                (void)rd;
            }
        udp_count(&u->st_sleeps);
    }
    atomic_store(&g->sleeping, 0);
}

/* While an application thread drives the datapath (it polled within the
 * last UDP_HANDOFF_NS), the engine stays off the CPU: it waits on its kick
 * only, so it neither steals the packets the caller is spinning for nor
 * competes for a core; when the caller stops polling it takes over. While
 * bulk data is expected (a region exposed) it waits on the receive socket
 * too: a datagram the caller has not taken yet is one for udp_rx_help. */
static void udp_engine_stand_by(udp_t *u, udp_engine_t *g)
{
    struct pollfd pf[2] = {{.fd = g->kickfd, .events = POLLIN},
                           {.fd = u->fds[g->id], .events = POLLIN}};
    struct timespec ts = {0, atomic_load_explicit(&g->defer_ns, memory_order_relaxed)
                                 ? UDP_ACK_DEFER_NS : UDP_HANDOFF_NS};
    uint64_t junk;
    atomic_store(&g->sleeping, 1);
    if (ppoll(pf, u->tx_help && udp_rx_expected(u) ? 2 : 1, &ts, NULL) > 0 &&
        (pf[0].revents & POLLIN) && read(g->kickfd, &junk, sizeof junk) < 0)
        junk = 0;
    atomic_store(&g->sleeping, 0);
}

/* A held-back ACK the caller did not send within UDP_ACK_DEFER_NS (it went
 * on computing), or one owed by the receive order for UDP_ACK_ORDER_NS: the
 * engine thread sends it. */
static void udp_ack_overdue(udp_t *u, udp_engine_t *g)
{
    uint64_t since = atomic_load_explicit(&g->owed_ns, memory_order_relaxed);
    if (since && prt_now_ns() - since > UDP_ACK_ORDER_NS)   /* (udp_rx_order) */
        udp_owed_send(u, g, g->txh, NULL, 0);
    since = atomic_load_explicit(&g->defer_ns, memory_order_relaxed);
    if (!since || prt_now_ns() - since < UDP_ACK_DEFER_NS || pthread_mutex_trylock(&g->drive))
        return;
    udp_ack_deferred(u, g, 0);
    pthread_mutex_unlock(&g->drive);
}

static void *udp_engine_main(void *arg)
{
    udp_engine_t *g = arg;
    udp_t *u = g->u;
    uint64_t idle_since = 0;
    char name[16];
    snprintf(name, sizeof name, "plait-udp%d", g->id);   /* (top -H, perf, gdb, PLAIT_TRACE) */
    pthread_setname_np(pthread_self(), name);
    /* off the ranks' cores where the host leaves some (PLAIT_THREAD_CPU): the
     * slots after the progress threads' (one per local rank) */
    prt_affinity_place(u->job, u->job->local_size * (1 + g->id) + u->job->local_rank, name);
    while (!atomic_load(&u->stop)) {
        int work, ready = 0;
        uint64_t now = prt_now_ns();
        int caller = now - atomic_load_explicit(&u->caller_ns, memory_order_relaxed) < UDP_HANDOFF_NS;
        /* A caller that polled lately, or one in a pass or a send now (a
         * pass that drains a full socket outlasts UDP_HANDOFF_NS), drives:
         * the engine helps send, or stands by, or (the lock held a moment)
         * yields; it never sleeps on the drive lock (in a bulk exchange
         * both ways it sat there half the time instead of sending). */
        if (caller || pthread_mutex_trylock(&g->drive) != 0) {
            /* Sending comes first (in an exchange the caller leaves it to
             * this thread, udp_tx_budget); with nothing to send, it receives
             * beside the caller while bulk data comes (udp_rx_help); else,
             * while the caller shares copies (udp_copy_split posted some
             * lately) it stays at hand for them instead of asleep. (Taking
             * turns, one batch sent then one received, slowed 2 x 1
             * alltoalls of 512 KiB-4 MiB: the peer waited on this thread's
             * sending.) Only then: spinning
             * beside a caller that receives 128 KiB messages cost 256 KiB
             * alltoalls 111 -> 150 us (2 x 1 ranks, 16-core machine). */
            if (!u->tx_help || (!udp_tx_help(u, g) && udp_rx_help(u, g) == 0)) {
                if (udp_share_help(&g->share))
                    continue;
                if (caller && !udp_share_recent(&g->share, now, UDP_HANDOFF_NS))
                    udp_engine_stand_by(u, g);
                else
                    sched_yield();
            }
            udp_ack_overdue(u, g);
            idle_since = 0;
            continue;
        }
        work = udp_pass(u, g, &ready, 0);
        pthread_mutex_unlock(&g->drive);
        if (ready & 3)
            ptl_shm_wake_self(u->waker);
        if (work) {
            idle_since = 0;
            continue;
        }
        if (!idle_since)
            idle_since = now;
        if (now - idle_since > UDP_ENGINE_SPIN_NS)
            udp_engine_idle(g);
    }
    return NULL;
}

/* ------------------------------------------------------------ ptl ops */

/* The calling thread drives the datapath itself where no engine is at it:
 * no thread hand-off on the latency path. */
static int udp_drive(udp_t *u, int e, int defer)
{
    udp_engine_t *g = &u->eng[e];
    int ready = 0, work;
    if (pthread_mutex_trylock(&g->drive) != 0)
        return 0;
    work = udp_pass(u, g, &ready, defer);
    pthread_mutex_unlock(&g->drive);
    return work;
}

/* A sender's own transmission (it holds g->drive): peer dst's packets, and
 * a whole pass (receive first) when nobody read engine g's socket for
 * UDP_SEND_RX_NS. A program that only sends (a bcast root running ahead:
 * each eager send completes at once, so it never waits, never calls
 * progress) kept the engine thread standing by (the caller looks active)
 * and read no ACK itself: on a 16-core machine, 4 KiB bcast between
 * namespace hosts, the root went up to 27 ms without a receive pass, its
 * timers fired on packets long acknowledged (4167 spurious timeouts in
 * 40108 messages; now 8) and every RTO floor raise went to the ceiling. */
static void udp_send_drive(udp_t *u, udp_engine_t *g, int dst)
{
    uint64_t now = prt_now_ns();
    int ready = 0;
    if (now - atomic_load_explicit(&g->rx_ns, memory_order_relaxed) < UDP_SEND_RX_NS) {
        udp_tx_peer(u, g, g->txb, dst, now, UDP_TX_BUDGET);
        return;
    }
    udp_count(&u->st_send_rx);
    udp_pass(u, g, &ready, 0);
    if (ready & 3)
        ptl_shm_wake_self(u->waker);   /* a message or send space for a sleeping thread */
}

/* Queues a frame (referenced when cookie is nonzero and the payload is
 * large enough: then PTL_PENDING) and transmits what it can right away. */
static int udp_send_any(ptl_tl_t *tl, int dst, const void *hdr, size_t hlen, const void *payload,
                        size_t plen, uint64_t place_id, uint64_t place_off, uint64_t cookie)
{
    udp_t *u = udp_of(tl);
    udp_peer_t *p = &u->peers[dst];
    udp_engine_t *g;
    int rc, ref, bulk;
    if (!p->up)
        return prt_err(PLAIT_ERR_INTERNAL, "udp: no connection to rank %d", dst);
    pthread_mutex_lock(&p->lock);
    if (p->conn.failed) {
        pthread_mutex_unlock(&p->lock);
        return prt_err(PLAIT_ERR_PEER, "udp: %s", p->conn.why);
    }
    if (place_off > UINT32_MAX) {   /* the wire's place_off has 32 bits (pp.h): this frame */
        place_id = UINT64_MAX;      /* goes unplaced, copied once by the receiver's pt2pt */
        place_off = 0;
    }
    ref = cookie && u->cfg.udp_zcopy_min && plen >= u->cfg.udp_zcopy_min;
    rc = ref ? pp_send_ref(&p->conn, hdr, hlen, payload, plen, place_id, place_off, cookie)
             : pp_send_placed(&p->conn, hdr, hlen, payload, plen, place_id, place_off);
    pthread_mutex_unlock(&p->lock);
    if (rc < 0)
        return prt_err(PLAIT_ERR_INTERNAL, "udp: frame of %zu+%zu bytes too large", hlen, plen);
    if (rc != 0)
        return rc;
    /* transmit from this thread; if an engine is mid-pass, it (or our next
     * progress call) sends it, and the kick covers an engine about to sleep */
    atomic_store_explicit(&u->caller_ns, prt_now_ns(), memory_order_relaxed);
    g = &u->eng[dst % u->neng];
    bulk = u->tx_help && plen >= UDP_HELP_MIN;
    if (bulk) {
        /* The engine thread helps (udp_tx_help), woken before this thread
         * starts: kicked after it, it woke when a 256 KiB frame had gone
         * (the caller's budget covers one), so it never sent a packet of
         * one (a timeline of one message on the 16-core machine). Kicked
         * first, it takes chunks on other paths meanwhile: 2 hosts x 1
         * rank, the 2-rank bcast of 256 KiB-1 MiB was faster in every
         * round of three calls (9 of 9; e.g. 101 -> 81 us at 256 KiB);
         * ping-pong gained in two calls and lost in the third, noisier one
         * (docs/PERFORMANCE.md, session 14). */
        atomic_store_explicit(&p->bulk_hint, 1, memory_order_relaxed);
        udp_kick(u, g->id);
    }
    if (pthread_mutex_trylock(&g->drive) == 0) {
        udp_send_drive(u, g, dst);
        pthread_mutex_unlock(&g->drive);
    } else if (!bulk) {
        udp_kick(u, g->id);
    }
    return ref ? PTL_PENDING : PLAIT_OK;
}

static int udp_send(ptl_tl_t *tl, int dst, const void *hdr, size_t hlen, const void *payload,
                    size_t plen)
{
    return udp_send_any(tl, dst, hdr, hlen, payload, plen, UINT64_MAX, 0, 0);
}

/* The payload lands straight in the region the receiver exposed as id:
 * no frame buffer there, no second copy by the layer above. */
static int udp_send_placed(ptl_tl_t *tl, int dst, const void *hdr, size_t hlen,
                           const void *payload, size_t plen, uint64_t id, uint64_t off)
{
    if (id == UINT64_MAX)
        return prt_err(PLAIT_ERR_INTERNAL, "udp: placement id %llu is reserved",
                       (unsigned long long)id);
    return udp_send_any(tl, dst, hdr, hlen, payload, plen, id, off, 0);
}

/* The same without the copy from PLAIT_UDP_ZCOPY_MIN bytes (PTL_PENDING). */
static int udp_send_placed_zc(ptl_tl_t *tl, int dst, const void *hdr, size_t hlen,
                              const void *payload, size_t plen, uint64_t id, uint64_t off,
                              uint64_t cookie)
{
    if (cookie == 0)
        return prt_err(PLAIT_ERR_INTERNAL, "udp: zero-copy cookie 0 is reserved");
    return udp_send_any(tl, dst, hdr, hlen, payload, plen, id, id == UINT64_MAX ? 0 : off, cookie);
}

/* Reports the zero-copy sends every connection finished (acknowledged, or
 * failed); done runs without any udp lock held. */
static int udp_zc_reap(ptl_tl_t *tl, ptl_zc_fn done, void *ctx)
{
    udp_t *u = udp_of(tl);
    int total = 0;
    if (!u->peers || !atomic_load_explicit(&u->zc_ready, memory_order_relaxed) ||
        !atomic_exchange(&u->zc_ready, 0))
        return 0;
    for (int r = 0; r < u->job->size; r++) {
        udp_peer_t *p = &u->peers[r];
        pp_zc_t z[32];
        int n;
        if (!p->up)
            continue;
        do {
            pthread_mutex_lock(&p->lock);
            n = pp_zc_reap(&p->conn, z, 32);
            pthread_mutex_unlock(&p->lock);
            for (int i = 0; i < n; i++)
                done(ctx, z[i].cookie, z[i].failed ? prt_err(PLAIT_ERR_TRANSPORT, "udp: %s",
                                                               p->conn.why) : PLAIT_OK);
            total += n;
        } while (n == 32);
    }
    return total;
}

static int udp_zc_detach(ptl_tl_t *tl, int peer, uint64_t cookie)
{
    udp_t *u = udp_of(tl);
    udp_peer_t *p = &u->peers[peer];
    int rc;
    if (!p->up)
        return PLAIT_OK;
    pthread_mutex_lock(&p->lock);
    while ((rc = pp_zc_detach(&p->conn, cookie)) == PP_BUSY) {
        pthread_mutex_unlock(&p->lock);   /* a thread hands packets to the kernel */
        sched_yield();
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return rc == 0 ? PLAIT_OK : prt_err(PLAIT_ERR_NOMEM, "udp: no memory to copy a withdrawn "
                                        "send buffer");
}

static int udp_expose(ptl_tl_t *tl, int peer, uint64_t id, void *buf, size_t len)
{
    udp_t *u = udp_of(tl);
    udp_peer_t *p = &u->peers[peer];
    int rc = PLAIT_OK;
    if (!p->up || id == UINT64_MAX)
        return PLAIT_ERR_UNSUPPORTED;
    pthread_mutex_lock(&p->lock);
    if (udp_region_add(&p->regions, id, buf, len) == 0)
        atomic_fetch_add(&u->exposed, 1);
    else
        rc = prt_err(PLAIT_ERR_NOMEM, "udp: no memory to expose a receive buffer");
    pthread_mutex_unlock(&p->lock);
    return rc;
}

static void udp_unexpose(ptl_tl_t *tl, int peer, uint64_t id)
{
    udp_t *u = udp_of(tl);
    udp_peer_t *p = &u->peers[peer];
    pthread_mutex_lock(&p->lock);
    if (udp_region_remove(&p->regions, id))
        atomic_fetch_sub(&u->exposed, 1);
    pthread_mutex_unlock(&p->lock);
    /* A receive pass may be copying into it unlocked (udp_rx_done): the
     * buffer goes back to its owner only after that copy. No new one can
     * start: regions are looked up under the lock. */
    while (atomic_load(&p->copying))
        sched_yield();
}

static size_t udp_max_frame(ptl_tl_t *tl)
{
    (void)tl;
    return UDP_MAX_FRAME;
}

/* Early placement (ptl.h): offers peer r's next message to the layer
 * above once its header is in, and gives it the address that comes back.
 * The message cannot leave meanwhile: only this thread (the caller's,
 * under the layer above's lock) delivers. Its bytes so far were copied
 * into its buffer under the lock (unplaced packets are never deferred),
 * so nothing is in flight to the old place. */
static void udp_early_peer(udp_t *u, int r)
{
    udp_peer_t *p = &u->peers[r];
    uint8_t hdr[PP_MAX_HLEN];
    uint32_t id = 0, hlen = 0, plen = 0;
    pp_msg_t *m;
    void *dst;
    pthread_mutex_lock(&p->lock);
    if ((m = pp_early_next(&p->conn)) != NULL) {
        id = m->id;
        hlen = m->hlen;
        plen = m->len - m->hlen;
        memcpy(hdr, m->data, hlen);
    }
    pthread_mutex_unlock(&p->lock);
    if (!m || !(dst = u->early(u->early_ctx, r, hdr, hlen, plen)))
        return;
    pthread_mutex_lock(&p->lock);
    if (pp_rx_next(&p->conn) == m && m->id == id)
        pp_msg_early(&p->conn, m, dst);
    else   /* (cannot happen: see above) */
        prt_log(PRT_LOG_ERROR, "udp: message %u from rank %d left before its early placement",
                id, r);
    pthread_mutex_unlock(&p->lock);
}

/* The peers with a header to offer: only those are locked. A hint set
 * after the transport's flag was taken keeps that flag set for the next
 * pass (the peer's is set first). */
static void udp_early_pass(udp_t *u)
{
    if (!u->early || !atomic_exchange(&u->early_hint, 0))
        return;
    for (int r = 0; r < u->job->size; r++)
        if (u->peers[r].up && atomic_load_explicit(&u->peers[r].early_hint, memory_order_relaxed) &&
            atomic_exchange(&u->peers[r].early_hint, 0))
            udp_early_peer(u, r);
}

static void udp_rx_early_set(ptl_tl_t *tl, ptl_early_fn early, void *ctx)
{
    udp_t *u = udp_of(tl);
    u->early_ctx = ctx;
    u->early = early;
}

/* The early-placed message from peer gives its address back: the copies
 * into it a receive pass made unlocked are done first (udp_unexpose). */
static void udp_rx_early_revoke(ptl_tl_t *tl, int peer)
{
    udp_t *u = udp_of(tl);
    udp_peer_t *p = &u->peers[peer];
    pp_msg_t *m;
    pthread_mutex_lock(&p->lock);
    while (atomic_load(&p->copying))   /* (made without the lock, counted down before taking it) */
        sched_yield();
    if ((m = pp_rx_next(&p->conn)) != NULL)
        pp_msg_unearly(&p->conn, m);
    pthread_mutex_unlock(&p->lock);
}

static int udp_deliver(udp_t *u, ptl_rx_fn rx, void *ctx)
{
    int n = 0;
    unsigned update = 0;   /* engines owing a window update */
    if (!atomic_exchange(&u->rx_ready, 0))
        return 0;
    for (int r = 0; r < u->job->size; r++) {
        udp_peer_t *p = &u->peers[r];
        pp_msg_t *m;
        int delivered = 0;
        if (!p->up)
            continue;
        for (;;) {
            pthread_mutex_lock(&p->lock);
            m = pp_deliver(&p->conn);
            pthread_mutex_unlock(&p->lock);
            if (!m)
                break;
            u->rx_cur = m;
            u->rx_kept = 0;
            rx(ctx, r, m->data, m->hlen,
               m->placed ? NULL : m->early ? m->early : m->data + m->hlen, m->len - m->hlen);
            u->rx_cur = NULL;
            pthread_mutex_lock(&p->lock);
            update |= (u->rx_kept ? pp_msg_detach : pp_msg_release)(&p->conn, m) << (r % u->neng);
            pthread_mutex_unlock(&p->lock);
            n++;
            delivered = 1;
        }
        if (delivered && u->early)   /* the next one's header may have come meanwhile */
            udp_early_peer(u, r);
    }
    /* Room the sender must hear of: its engine's pass sends the ACK now
     * (a sender with nothing in flight would otherwise wait for a probe). */
    for (int e = 0; e < u->neng; e++)
        if (update & (1u << e))
            udp_drive(u, e, 0);
    return n;
}

/* rx keeps the message being delivered: its buffer leaves the connection
 * (udp_deliver detaches it) until udp_rx_free. Placed frames have no
 * payload to keep. */
static void *udp_rx_keep(ptl_tl_t *tl)
{
    udp_t *u = udp_of(tl);
    if (!u->rx_cur || u->rx_cur->placed || u->rx_cur->early)
        return NULL;
    u->rx_kept = 1;
    udp_count(&u->st_kept);
    return u->rx_cur;
}

static void udp_rx_free(ptl_tl_t *tl, int peer, void *handle)
{
    udp_t *u = udp_of(tl);
    udp_peer_t *p = &u->peers[peer];
    pthread_mutex_lock(&p->lock);
    pp_msg_free(&p->conn, handle);   /* back to the connection's buffer cache */
    pthread_mutex_unlock(&p->lock);
}

static int udp_progress(ptl_tl_t *tl, ptl_rx_fn rx, void *ctx)
{
    udp_t *u = udp_of(tl);
    int work = 0;
    atomic_store_explicit(&u->caller_ns, prt_now_ns(), memory_order_relaxed);
    for (int e = 0; e < u->neng; e++)
        work += udp_drive(u, e, 1);
    udp_early_pass(u);
    /* No second pass after delivering: the receive space it frees goes out
     * with the next ACK (one more syscall per message on the latency path
     * bought nothing: windows are far larger than a message or two). */
    return work + udp_deliver(u, rx, ctx);
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

/* Data packets taken in from the peer plus its ACKs: either moves only
 * while data moves between the two (no keep-alive runs on an idle
 * connection). Not the cumulative points: a hole waiting for its
 * retransmission holds them still for a whole backed-off RTO on a slow
 * link (2 x 2 Mbit/s: over a second) while the rest keeps arriving. */
static uint64_t udp_moved(ptl_tl_t *tl, int peer)
{
    udp_t *u = udp_of(tl);
    udp_peer_t *p = &u->peers[peer];
    uint64_t v;
    if (!p->up)
        return 0;
    pthread_mutex_lock(&p->lock);
    v = p->conn.st.rx_pkts + p->conn.st.acks_rx;
    pthread_mutex_unlock(&p->lock);
    return v;
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

/* The ACKs still owed at the end (held back to ride on a reply that will
 * not come, or for the engine thread to send after UDP_ACK_DEFER_NS): the
 * peer would linger for them up to 3 s (udp_linger). A black-box test saw
 * finalize take 3.00 s on one rank in about half of the runs between two
 * namespace hosts with no loss: the other rank, done first, stopped its
 * engine with the ACK of the last frame unsent. Engine threads stopped. */
static void udp_ack_last(udp_t *u)
{
    for (int r = 0; u->peers && u->neng > 0 && r < u->job->size; r++)
        if (u->peers[r].up && u->eng[r % u->neng].txb)
            udp_ack_touched(u, u->eng[r % u->neng].txb, &r, 1);
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
    udp_ack_last(u);
    for (int e = 0; e < u->neng; e++) {
        udp_engine_t *g = &u->eng[e];
        free(g->txb);
        free(g->txh);
        free(g->rxb);
        free(g->rxh);
    }
    for (int r = 0; u->peers && r < u->job->size; r++) {
        if (u->peers[r].up)
            pp_conn_fini(&u->peers[r].conn);
        udp_regions_fini(&u->peers[r].regions);
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
    unsigned long long copied = 0;
    if (!u || !u->peers)
        return;
    for (int e = 0; e < u->neng; e++)
        copied += atomic_load(&u->eng[e].share.helped);
    fprintf(f, "plait udp stats, rank %d: %d paths, %d engine(s), tx help %s, cc %s, lb %s, "
            "gso %s; datapath syscalls %llu, engine sleeps %llu, messages kept unexpected %llu, "
            "receive passes run by sends %llu, packets refused by a full socket buffer %llu, "
            "packets the engine thread sent beside a caller %llu, "
            "datagrams it received beside a caller %llu, "
            "placement copies it made for a caller %llu\n",
            u->job->rank, u->npaths,
            u->neng, u->tx_help ? "on" : "off", udp_cc_names[u->cfg.cc],
            udp_lb_names[u->cfg.lb], atomic_load(&u->gso) ? "on" : "off",
            (unsigned long long)atomic_load(&u->st_syscalls),
            (unsigned long long)atomic_load(&u->st_sleeps),
            (unsigned long long)atomic_load(&u->st_kept),
            (unsigned long long)atomic_load(&u->st_send_rx),
            (unsigned long long)atomic_load(&u->st_sndbuf),
            (unsigned long long)atomic_load(&u->st_helped),
            (unsigned long long)atomic_load(&u->st_rx_helped), copied);
    for (int r = 0; r < u->job->size; r++) {
        udp_peer_t *p = &u->peers[r];
        pp_stats_t s;
        if (!p->up)
            continue;
        pthread_mutex_lock(&p->lock);
        pp_stats(&p->conn, &s);
        fprintf(f, "  conn %d->%d: tx %llu msgs %llu B %llu pkts %llu chunks (%llu cut short); "
                "rx %llu msgs %llu B "
                "%llu pkts; retx fast %llu (path order %llu) timeout %llu; loss events %llu; acks tx %llu (%llu on data) "
                "rx %llu; "
                "srtt %.1f us min %.1f us; cwnd %llu B; rate %.1f MB/s; blocked %llu; "
                "peer saw %llu duplicates; "
                "rto floor %.0f us; reordering window %.1f us; placed %llu B, discarded %llu B; "
                "placed early %llu msgs; zero-copy %llu msgs; runs rx %llu (%llu cut)%s\n",
                u->job->rank, r,
                (unsigned long long)s.tx_msgs, (unsigned long long)s.tx_bytes,
                (unsigned long long)s.tx_pkts, (unsigned long long)s.tx_chunks,
                (unsigned long long)s.chunks_cut, (unsigned long long)s.rx_msgs,
                (unsigned long long)s.rx_bytes,
                (unsigned long long)s.rx_pkts, (unsigned long long)s.retx_fast,
                (unsigned long long)s.retx_fast_order, (unsigned long long)s.retx_timeout, (unsigned long long)s.loss_events,
                (unsigned long long)s.acks_tx, (unsigned long long)s.acks_piggy,
                (unsigned long long)s.acks_rx, s.srtt_ns / 1e3,
                s.min_rtt_ns / 1e3, (unsigned long long)s.cwnd, s.rate_Bps / 1e6,
                (unsigned long long)s.tx_blocked,
                (unsigned long long)s.spurious, s.rto_floor_ns / 1e3, s.reo_ns / 1e3,
                (unsigned long long)s.rx_placed, (unsigned long long)s.rx_discarded,
                (unsigned long long)s.rx_early, (unsigned long long)s.tx_ref_msgs,
                (unsigned long long)s.rx_runs, (unsigned long long)s.rx_runs_cut,
                p->conn.runs_off ? "; runs off (the peer found one cut)" : "");
        for (int d = 0; d < PP_DROP_N; d++)
            if (s.drops[d])
                fprintf(f, "    drop %s: %llu\n", pp_drop_name(d), (unsigned long long)s.drops[d]);
        for (int w = 1; w < PP_WAIT_N; w++)
            if (s.wait_ns[w])
                fprintf(f, "    send waited on %s: %.1f ms\n", pp_wait_name(w), s.wait_ns[w] / 1e6);
        for (uint32_t i = 0; i < p->conn.cfg.npaths; i++) {
            const pp_path_stats_t *ps = &p->conn.paths[i].st;
            char down[64] = "";
            if (!ps->tx_pkts && !ps->rtt_samples)
                continue;
            if (ps->downs)   /* path quarantine (transport/proto conn.c) */
                snprintf(down, sizeof down, ", taken down %llu times%s",
                         (unsigned long long)ps->downs, p->conn.paths[i].down ? " (down now)" : "");
            fprintf(f, "    path %2u (port %u->%u): %llu pkts %llu B %llu chunks, retx %llu, lost "
                    "%llu, srtt %.1f us min %.1f us queue-rtt %.1f us window %.0f KB%s\n", i,
                    ntohs(u->ports[i]),
                    ntohs(p->dst[i].sin_port), (unsigned long long)ps->tx_pkts,
                    (unsigned long long)ps->tx_bytes, (unsigned long long)ps->chunks,
                    (unsigned long long)ps->retx_pkts, (unsigned long long)ps->lost,
                    ps->srtt_ns / 1e3, ps->min_rtt_ns / 1e3, p->conn.paths[i].qrtt_ns / 1e3,
                    p->conn.paths[i].cwnd / 1e3, down);
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
    .moved = udp_moved,
    .fini = udp_fini,
    .expose = udp_expose,
    .unexpose = udp_unexpose,
    .send_placed = udp_send_placed,
    .send_placed_zc = udp_send_placed_zc,
    .zc_reap = udp_zc_reap,
    .zc_detach = udp_zc_detach,
    .rx_keep = udp_rx_keep,
    .rx_free = udp_rx_free,
    .rx_early_set = udp_rx_early_set,
    .rx_early_revoke = udp_rx_early_revoke,
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
