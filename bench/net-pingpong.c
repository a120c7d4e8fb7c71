/*
 * net-pingpong.c -- the kernel's floor for one message between two hosts:
 * a ping-pong of N bytes over raw TCP or raw UDP (GSO on send, GRO on
 * receive), no protocol, no threads, no copy beyond the kernel's unless -c
 * asks for one. It answers "how fast can any library move a 256 KiB message
 * over this path", so that plait's and Open MPI's times have a floor to be
 * read against.
 *
 *   net-pingpong -r server|client -m tcp|udp [-a ADDR] [-p PORT]
 *                [-b MIN] [-e MAX] [-n ITERS] [-w WARMUP] [-s SEG] [-c] [-y]
 *                [-g GSO] [-P PATHS] [-H [-X] [-E|-K]]
 *     -r  server: echoes every message back; client: sends, times, prints
 *     -m  tcp: one connection, TCP_NODELAY; udp: GSO datagrams of whole
 *         -s byte segments (default 1472, a 1500-byte MTU), received with
 *         UDP_GRO straight into the message buffer in arrival order
 *     -a  server's address (client: where to send; server: what to bind)
 *     -c  receive into a staging buffer and copy to the message buffer
 *         afterwards (the second copy a transport with headers makes)
 *     -y  wait in the kernel (blocking recv) instead of polling with
 *         MSG_DONTWAIT
 *   The shape of plait's udp sends, one at a time (udp only):
 *     -g  payload bytes per GSO datagram (default: as many whole segments as
 *         one IP datagram carries; plait's 32 KiB chunk is one datagram)
 *     -P  send through N sockets (plait's paths), datagrams in turn, one
 *         sendmmsg per datagram (the receiver still reads one socket)
 *     -H  a 52-byte header in front of every segment (two iovecs a segment,
 *         as plait's data packets); the receiver then copies each segment's
 *         payload out of a staging buffer, as plait's placement copy does
 *     -X  with -H: the receiver copies each datagram whole instead (the
 *         same bytes, one memcpy; the message's contents are then wrong)
 *     -E  with -H: an empty third iovec a segment (plait's split payload)
 *     -K  with -H: each datagram's headers and payloads copied behind each
 *         other into a buffer first, sent as one iovec
 * Sizes double from -b to -e (default 64K .. 1M). The client prints one line
 * per size: "SIZE  median_us  min_us  send_us" (half a round trip; the median
 * time the client spent in its send calls). UDP has no loss
 * recovery: a receive that sees nothing for 2 s reports the loss and exits 1
 * (the bed's bridge does not drop at these rates).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

enum { NP_GSO_MAX = 65000, NP_VLEN = 64, NP_HDR = 52, NP_PATHS = 64, NP_SEGS = 64 };

typedef struct {
    int server, udp, copy, block, hdr, bulk, empty, pack, paths;
    const char *addr;
    int port;
    size_t min, max, seg, gso;
    int iters, warm;
} np_opts_t;

typedef struct {
    int fd;                      /* tcp: the connection; udp: the receiving socket */
    int tx[NP_PATHS];            /* udp: the sending sockets (-P) */
    struct sockaddr_in peer;     /* udp: where messages go (server: learnt) */
    int have_peer;
    uint8_t *msg, *stage;        /* the message buffer, -c's staging buffer */
    uint8_t *pack;               /* -K: NP_VLEN datagrams of header + payload */
    uint8_t hdr[NP_HDR];         /* -H: every segment's header (contents unread) */
} np_conn_t;

static double np_now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

static void np_die(const char *what)
{
    perror(what);
    exit(1);
}

/* One receive: blocking, or polled (as MPI libraries poll) until data or 2 s. */
static ssize_t np_recv(const np_opts_t *o, np_conn_t *c, void *buf, size_t len)
{
    double deadline = np_now_us() + 2e6;
    struct sockaddr_in from;
    socklen_t fl = sizeof from;
    for (;;) {
        ssize_t n = recvfrom(c->fd, buf, len, o->block ? 0 : MSG_DONTWAIT,
                             o->udp ? (struct sockaddr *)&from : NULL, o->udp ? &fl : NULL);
        if (n > 0) {
            if (o->udp && !c->have_peer) {   /* replies go to the client's receiving port */
                c->peer = from;
                c->peer.sin_port = htons((uint16_t)(o->port + 1));
                c->have_peer = 1;
            }
            return n;
        }
        if (n == 0)
            return 0;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            np_die("net-pingpong: recv");
        if (np_now_us() > deadline) {
            fprintf(stderr, "net-pingpong: nothing received for 2 s (a lost datagram?)\n");
            exit(1);
        }
    }
}

/* -H: copies the payload of each -s byte segment of the GRO datagram of n
 * bytes in c->stage to the message at off (room bytes left); returns the
 * payload bytes. */
static size_t np_strip(const np_opts_t *o, np_conn_t *c, size_t n, size_t room, size_t off)
{
    size_t pay = 0;
    for (size_t at = 0; at < n; at += o->seg) {
        size_t l = n - at < o->seg ? n - at : o->seg;
        if (l <= NP_HDR || l - NP_HDR > room - pay) {
            fprintf(stderr, "net-pingpong: a segment of %zu bytes does not fit\n", l);
            exit(1);
        }
        memcpy(c->msg + off + pay, c->stage + at + NP_HDR, l - NP_HDR);
        pay += l - NP_HDR;
    }
    return pay;
}

/* Receives exactly len bytes of one message into c->msg. */
static int np_recv_msg(const np_opts_t *o, np_conn_t *c, size_t len)
{
    size_t got = 0;
    while (got < len) {
        uint8_t *to = o->copy ? c->stage : c->msg + got;
        size_t room = o->udp ? 65536 : len - got;
        ssize_t n;
        if (!o->udp && o->copy && room > 65536)
            room = 65536;
        n = np_recv(o, c, to, room);
        if (n == 0)
            return -1;
        if (o->hdr && !o->bulk) {
            got += np_strip(o, c, (size_t)n, len - got, got);
            continue;
        }
        if (o->hdr)   /* -X: the bytes of the copies, not their places */
            n -= (ssize_t)(((size_t)n + o->seg - 1) / o->seg * NP_HDR);
        if ((size_t)n > len - got) {
            fprintf(stderr, "net-pingpong: %zd bytes beyond the message\n", n - (ssize_t)(len - got));
            exit(1);
        }
        if (o->copy)
            memcpy(c->msg + got, c->stage, (size_t)n);
        got += (size_t)n;
    }
    return 0;
}

static void np_send_tcp(np_conn_t *c, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t n = send(c->fd, c->msg + off, len - off, 0);
        if (n < 0 && errno != EINTR && errno != EAGAIN)
            np_die("net-pingpong: send");
        if (n > 0)
            off += (size_t)n;
    }
}

/* Fills datagram m (iovecs iov) with up to segs segments of the message
 * from off; returns the payload bytes taken. */
static size_t np_dgram(const np_opts_t *o, np_conn_t *c, struct mmsghdr *m, struct iovec *iov,
                       char *ctl, size_t off, size_t len, int segs, uint8_t *pack)
{
    size_t pseg = o->seg - (o->hdr ? NP_HDR : 0), took = 0, packed = 0;
    int v = 0;
    struct cmsghdr *cm;
    for (int s = 0; s < segs && off + took < len; s++) {
        size_t n = len - off - took < pseg ? len - off - took : pseg;
        if (pack) {   /* -K: header and payload copied behind each other */
            memcpy(pack + packed, c->hdr, NP_HDR);
            memcpy(pack + packed + NP_HDR, c->msg + off + took, n);
            packed += NP_HDR + n;
            took += n;
            continue;
        }
        if (o->hdr)
            iov[v++] = (struct iovec){c->hdr, NP_HDR};
        if (!o->hdr && v)   /* no headers: the payload is one contiguous run */
            iov[v - 1].iov_len += n;
        else
            iov[v++] = (struct iovec){c->msg + off + took, n};
        if (o->empty)
            iov[v++] = (struct iovec){NULL, 0};
        took += n;
    }
    if (pack)
        iov[v++] = (struct iovec){pack, packed};
    memset(m, 0, sizeof *m);
    m->msg_hdr.msg_name = &c->peer;
    m->msg_hdr.msg_namelen = sizeof c->peer;
    m->msg_hdr.msg_iov = iov;
    m->msg_hdr.msg_iovlen = (size_t)v;
    m->msg_hdr.msg_control = ctl;
    m->msg_hdr.msg_controllen = CMSG_SPACE(sizeof(uint16_t));
    cm = CMSG_FIRSTHDR(&m->msg_hdr);
    cm->cmsg_level = SOL_UDP;
    cm->cmsg_type = UDP_SEGMENT;
    cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    *(uint16_t *)(void *)CMSG_DATA(cm) = (uint16_t)o->seg;
    return took;
}

/* The message as GSO datagrams of -g bytes: up to NP_VLEN per sendmmsg on
 * one socket, or (-P) one datagram per sendmmsg, the sockets in turn. */
static void np_send_udp(const np_opts_t *o, np_conn_t *c, size_t len)
{
    struct mmsghdr m[NP_VLEN];
    static struct iovec iov[NP_VLEN][3 * NP_SEGS];   /* (single-threaded tool) */
    char ctl[NP_VLEN][CMSG_SPACE(sizeof(uint16_t))];
    int segs = (int)(o->gso / o->seg), path = 0;
    size_t off = 0;
    while (off < len) {
        int v = 0, done = 0;
        for (; v < NP_VLEN && off < len; v++)
            off += np_dgram(o, c, &m[v], iov[v], ctl[v], off, len, segs,
                            o->pack ? c->pack + (size_t)v * 65536 : NULL);
        while (done < v) {
            int fd = c->tx[path], k;
            k = sendmmsg(fd, m + done, o->paths > 1 ? 1u : (unsigned)(v - done), 0);
            if (k < 0 && errno != EINTR && errno != EAGAIN && errno != ENOBUFS)
                np_die("net-pingpong: sendmmsg");
            if (k > 0) {
                done += k;
                path = (path + 1) % o->paths;
            }
        }
    }
}

static void np_send_msg(const np_opts_t *o, np_conn_t *c, size_t len)
{
    if (o->udp)
        np_send_udp(o, c, len);
    else
        np_send_tcp(c, len);
}

static void np_sockopts(int fd, int udp)
{
    int big = 8 << 20, one = 1;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof big);
    if (udp)
        setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof one);
    else
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void np_open(const np_opts_t *o, np_conn_t *c)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    int fd = socket(AF_INET, o->udp ? SOCK_DGRAM : SOCK_STREAM, 0), one = 1;
    if (fd < 0 || inet_pton(AF_INET, o->addr, &sa.sin_addr) != 1)
        np_die("net-pingpong: socket/address");
    np_sockopts(fd, o->udp);
    if (o->server) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
            np_die("net-pingpong: bind");
        if (!o->udp) {
            int l = fd;
            if (listen(l, 1) != 0 || (fd = accept(l, NULL, NULL)) < 0)
                np_die("net-pingpong: listen/accept");
            close(l);
            np_sockopts(fd, 0);
        }
    } else if (o->udp) {   /* replies come to port + 1 */
        struct sockaddr_in me = {.sin_family = AF_INET, .sin_port = htons((uint16_t)(o->port + 1))};
        if (bind(fd, (struct sockaddr *)&me, sizeof me) != 0)
            np_die("net-pingpong: bind");
        c->peer = sa;
        c->have_peer = 1;
    } else {
        for (int t = 0; connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0; t++) {
            if (t == 50)
                np_die("net-pingpong: connect");
            usleep(100000);
        }
    }
    c->fd = c->tx[0] = fd;
    for (int i = 1; o->udp && i < o->paths; i++)
        if ((c->tx[i] = socket(AF_INET, SOCK_DGRAM, 0)) < 0)
            np_die("net-pingpong: socket");
        else
            np_sockopts(c->tx[i], 1);
}

static int np_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Client: per size, warm-up then timed round trips; server: echo forever. */
static void np_run(const np_opts_t *o, np_conn_t *c)
{
    double *t = malloc(sizeof(double) * (size_t)o->iters), *ts = malloc(sizeof(double) * (size_t)o->iters);
    if (!t || !ts)
        np_die("net-pingpong: malloc");
    if (o->server) {
        for (size_t len = o->min; len <= o->max; len *= 2)
            for (int i = 0; i < o->warm + o->iters; i++) {
                if (np_recv_msg(o, c, len) != 0)
                    return;
                np_send_msg(o, c, len);
            }
        free(t);
        free(ts);
        return;
    }
    printf("# net-pingpong %s%s%s%s, segment %zu, datagram %zu, %d socket(s), %d iterations: "
           "size median_us min_us (half round trip) send_us (median time in the send calls)\n", o->udp ? "udp gso/gro" : "tcp",
           o->copy ? ", second copy" : "", o->hdr ? ", 52-byte headers" : "",
           o->block ? ", blocking" : ", polling", o->seg, o->gso, o->paths, o->iters);
    for (size_t len = o->min; len <= o->max; len *= 2) {
        for (int i = 0; i < o->warm + o->iters; i++) {
            double t0 = np_now_us(), t1;
            np_send_msg(o, c, len);
            t1 = np_now_us();
            if (np_recv_msg(o, c, len) != 0) {
                fprintf(stderr, "net-pingpong: the server closed\n");
                exit(1);
            }
            if (i >= o->warm) {
                t[i - o->warm] = (np_now_us() - t0) / 2;
                ts[i - o->warm] = t1 - t0;
            }
        }
        qsort(t, (size_t)o->iters, sizeof *t, np_cmp);
        qsort(ts, (size_t)o->iters, sizeof *ts, np_cmp);
        printf("%8zu %9.1f %9.1f %9.1f\n", len, t[o->iters / 2], t[0], ts[o->iters / 2]);
        fflush(stdout);
    }
    free(t);
    free(ts);
}

static size_t np_size(const char *s)
{
    char *end;
    size_t v = strtoul(s, &end, 0);
    if (*end == 'K' || *end == 'k')
        v <<= 10;
    else if (*end == 'M' || *end == 'm')
        v <<= 20;
    return v;
}

static void np_usage(void)
{
    fprintf(stderr, "usage: net-pingpong -r server|client -m tcp|udp [-a ADDR] [-p PORT] [-b MIN] "
                    "[-e MAX] [-n ITERS] [-w WARMUP] [-s SEG] [-c] [-y] [-g GSO] [-P PATHS] [-H [-X] [-E|-K]]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    np_opts_t o = {.addr = "127.0.0.1", .port = 47100, .min = 65536, .max = 1 << 20,
                   .seg = 1472, .iters = 1000, .warm = 100, .server = -1, .udp = -1,
                   .paths = 1};
    np_conn_t c = {.fd = -1};
    int opt;
    while ((opt = getopt(argc, argv, "r:m:a:p:b:e:n:w:s:g:P:cyHXEKh")) != -1) {
        switch (opt) {
        case 'r': o.server = !strcmp(optarg, "server") ? 1 : !strcmp(optarg, "client") ? 0 : -1; break;
        case 'm': o.udp = !strcmp(optarg, "udp") ? 1 : !strcmp(optarg, "tcp") ? 0 : -1; break;
        case 'a': o.addr = optarg; break;
        case 'p': o.port = atoi(optarg); break;
        case 'b': o.min = np_size(optarg); break;
        case 'e': o.max = np_size(optarg); break;
        case 'n': o.iters = atoi(optarg); break;
        case 'w': o.warm = atoi(optarg); break;
        case 's': o.seg = np_size(optarg); break;
        case 'g': o.gso = np_size(optarg); break;
        case 'P': o.paths = atoi(optarg); break;
        case 'H': o.hdr = o.copy = 1; break;
        case 'X': o.bulk = 1; break;
        case 'E': o.empty = 1; break;
        case 'K': o.pack = 1; break;
        case 'c': o.copy = 1; break;
        case 'y': o.block = 1; break;
        default: np_usage();
        }
    }
    if (o.server < 0 || o.udp < 0 || o.min < 1 || o.max < o.min || o.max > (64u << 20) ||
        o.iters < 1 || o.warm < 0 || o.seg < 64 || o.seg > 8972 || o.port < 1 || o.port > 65534 || o.paths < 1 ||
        o.paths > NP_PATHS)
        np_usage();
    if (((o.empty || o.pack || o.bulk) && !o.hdr) || (o.empty && o.pack) || (o.hdr && !o.udp))
        np_usage();
    if (!o.gso || o.gso > NP_GSO_MAX)   /* as many whole segments as one IP datagram carries */
        o.gso = NP_GSO_MAX;
    o.gso = (o.gso / o.seg) * o.seg;
    if (o.gso < o.seg || o.gso / o.seg > NP_SEGS)
        np_usage();
    c.msg = malloc(o.max);
    c.stage = malloc(65536);
    c.pack = malloc((size_t)NP_VLEN * 65536);
    if (!c.msg || !c.stage || !c.pack)
        np_die("net-pingpong: malloc");
    memset(c.msg, 0x5a, o.max);
    np_open(&o, &c);
    np_run(&o, &c);
    close(c.fd);
    free(c.msg);
    free(c.stage);
    free(c.pack);
    return 0;
}
