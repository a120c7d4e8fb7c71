/* Framed messages over TCP for the head and its daemons (see plr_net.h),
 * sockets, the job secret, and the main loop's network hooks. */
#include "config.h"

#include "launcher/plr_net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

/* ------------------------------------------------------------ packing */

static void plr_pack_grow(plr_pack_t *b, size_t n)
{
    if (b->bad || b->cap - b->len >= n)
        return;
    size_t cap = b->cap ? b->cap * 2 : 256;
    while (cap - b->len < n)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL) {
        b->bad = true;
        return;
    }
    b->p = p;
    b->cap = cap;
}

void plr_put_u32(plr_pack_t *b, uint32_t v)
{
    uint32_t be = htonl(v);
    plr_pack_grow(b, 4);
    if (b->bad)
        return;
    memcpy(b->p + b->len, &be, 4);
    b->len += 4;
}

void plr_put_bytes(plr_pack_t *b, const void *p, size_t n)
{
    plr_put_u32(b, (uint32_t)n);
    plr_pack_grow(b, n);
    if (b->bad || n == 0)
        return;
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

void plr_put_str(plr_pack_t *b, const char *s)
{
    plr_put_bytes(b, s, strlen(s) + 1);
}

uint32_t plr_get_u32(plr_unpack_t *u)
{
    uint32_t be;
    if (u->bad || u->len - u->off < 4) {
        u->bad = true;
        return 0;
    }
    memcpy(&be, u->p + u->off, 4);
    u->off += 4;
    return ntohl(be);
}

const char *plr_get_bytes(plr_unpack_t *u, size_t *n)
{
    *n = plr_get_u32(u);
    if (u->bad || u->len - u->off < *n) {
        u->bad = true;
        *n = 0;
        return NULL;
    }
    const char *p = u->p + u->off;
    u->off += *n;
    return p;
}

const char *plr_get_str(plr_unpack_t *u)
{
    size_t n;
    const char *s = plr_get_bytes(u, &n);
    if (s == NULL || n == 0 || s[n - 1] != '\0') {
        u->bad = true;
        return "";
    }
    return s;
}

/* ------------------------------------------------------------ connections */

plr_conn_t *plr_conn_new(int fd, int node)
{
    plr_conn_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->fd = fd;
    c->node = node;
    int fl = fcntl(fd, F_GETFL), one = 1;
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return c;
}

void plr_conn_free(plr_conn_t *c)
{
    if (c == NULL)
        return;
    if (c->fd >= 0)
        close(c->fd);
    free(c->in);
    free(c->out);
    free(c);
}

bool plr_conn_pending(const plr_conn_t *c)
{
    return c->outoff < c->outlen;
}

int plr_conn_flush(plr_conn_t *c)
{
    while (c->outoff < c->outlen) {
        ssize_t w = send(c->fd, c->out + c->outoff, c->outlen - c->outoff, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (w <= 0)
            return -1;
        c->outoff += (size_t)w;
    }
    c->outoff = c->outlen = 0;
    return 0;
}

int plr_conn_send(plr_conn_t *c, int type, int src, int dest, const void *p, size_t n)
{
    if (c == NULL || c->fd < 0)
        return -1;
    plr_msg_hdr_t h = { htonl((uint32_t)type), htonl((uint32_t)n), (int32_t)htonl((uint32_t)src),
                        (int32_t)htonl((uint32_t)dest) };
    size_t need = c->outlen + sizeof(h) + n;
    if (need > c->outcap) {
        size_t cap = c->outcap ? c->outcap : 4096;
        while (cap < need)
            cap *= 2;
        char *o = realloc(c->out, cap);
        if (o == NULL)
            return -1;
        c->out = o;
        c->outcap = cap;
    }
    memcpy(c->out + c->outlen, &h, sizeof(h));
    if (n)
        memcpy(c->out + c->outlen + sizeof(h), p, n);
    c->outlen += sizeof(h) + n;
    return plr_conn_flush(c);
}

int plr_conn_flush_wait(plr_conn_t *c, double secs)
{
    double until = plr_now() + secs;
    while (plr_conn_pending(c)) {
        if (plr_conn_flush(c) != 0)
            return -1;
        double left = until - plr_now();
        if (left <= 0)
            return -1;
        struct pollfd p = { .fd = c->fd, .events = POLLOUT };
        poll(&p, 1, (int)(left * 1000) + 1);
    }
    return 0;
}

int plr_conn_read(plr_conn_t *c)
{
    for (;;) {
        if (c->incap - c->inlen < 65536) {
            char *b = realloc(c->in, c->incap + 65536);
            if (b == NULL)
                return -1;
            c->in = b;
            c->incap += 65536;
        }
        ssize_t n = recv(c->fd, c->in + c->inlen, c->incap - c->inlen, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n <= 0)
            return -1;
        c->inlen += (size_t)n;
    }
}

/* A message is consumed by moving the rest down at the next call, so the
 * payload pointer stays valid until then. */
bool plr_conn_next(plr_conn_t *c, plr_msg_hdr_t *h, const char **payload)
{
    if (c->taken > 0) {                    /* the previous message: drop it now */
        memmove(c->in, c->in + c->taken, c->inlen - c->taken);
        c->inlen -= c->taken;
        c->taken = 0;
    }
    if (c->inlen < sizeof(*h))
        return false;
    plr_msg_hdr_t raw;
    memcpy(&raw, c->in, sizeof(raw));
    h->type = ntohl(raw.type);
    h->len = ntohl(raw.len);
    h->src = (int32_t)ntohl((uint32_t)raw.src);
    h->dest = (int32_t)ntohl((uint32_t)raw.dest);
    if (h->len > PLR_MSG_MAX) {
        h->type = 0;                       /* garbage: the caller drops the connection */
        return true;
    }
    if (c->inlen - sizeof(raw) < h->len)
        return false;
    *payload = c->in + sizeof(raw);
    c->taken = sizeof(raw) + h->len;
    return true;
}

/* ------------------------------------------------------------ sockets */

int plr_tcp_listen(const char *addr, int *port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET };
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
        return -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    socklen_t len = sizeof(sa);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 128) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    *port = ntohs(sa.sin_port);
    return fd;
}

int plr_tcp_connect(const char *addr, int port, double secs)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
        errno = EINVAL;
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 && errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    struct pollfd p = { .fd = fd, .events = POLLOUT };
    int err = 0;
    socklen_t elen = sizeof(err);
    if (poll(&p, 1, (int)(secs * 1000)) != 1)
        err = ETIMEDOUT;
    else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
        err = errno;
    if (err) {
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

int plr_tcp_local_addr(int fd, char *addr, size_t len)
{
    struct sockaddr_in sa;
    socklen_t slen = sizeof(sa);
    if (getsockname(fd, (struct sockaddr *)&sa, &slen) != 0 ||
        inet_ntop(AF_INET, &sa.sin_addr, addr, (socklen_t)len) == NULL)
        return -1;
    return 0;
}

void plr_secret_new(char out[PLR_SECRET_LEN + 1])
{
    unsigned char raw[PLR_SECRET_LEN / 2];
    size_t got = 0;
    while (got < sizeof(raw)) {
        ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
        if (n > 0)
            got += (size_t)n;
        else if (errno != EINTR)
            abort();                       /* no randomness: no safe secret */
    }
    for (size_t i = 0; i < sizeof(raw); i++)
        sprintf(out + 2 * i, "%02x", raw[i]);
}

/* Constant time, so a foreign peer learns nothing from how fast it is refused. */
bool plr_secret_eq(const char *a, const char *b)
{
    if (strlen(a) != PLR_SECRET_LEN || strlen(b) != PLR_SECRET_LEN)
        return false;
    unsigned char d = 0;
    for (int i = 0; i < PLR_SECRET_LEN; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

/* Reads a pending connection's first message. 1: a HELLO proving `secret`,
 * with the node number it claims in *node; 0: not complete yet; -1: refuse it
 * (closed, not a HELLO, wrong secret, malformed). */
int plr_hello_take(plr_conn_t *c, const char *secret, uint32_t *node)
{
    plr_msg_hdr_t h;
    const char *p;
    bool gone = plr_conn_read(c) != 0;
    if (!plr_conn_next(c, &h, &p))
        return gone ? -1 : 0;
    plr_unpack_t u = { p, h.len, 0, false };
    const char *got = h.type == PLR_MSG_HELLO ? plr_get_str(&u) : "";
    *node = plr_get_u32(&u);
    return !u.bad && plr_secret_eq(got, secret) ? 1 : -1;
}

int plr_pending_room(plr_conn_t *const *pending, int n)
{
    for (int s = 0; s < n; s++)
        if (!pending[s])
            return s;
    return -1;
}

/* Accepts waiting connections on lfd into free slots of pending[n], each
 * with a deadline for its HELLO, while a slot is free; the rest wait in the listen backlog
 * (the callers poll the listening socket only while a slot is free). Closing
 * them instead failed daemons at random: 32 children connecting at once to
 * the head's 16 slots on a loaded machine (a black-box test, 33 hosts). */
void plr_accept_pending(int lfd, plr_conn_t **pending, int n)
{
    int fd, s;
    while ((s = plr_pending_room(pending, n)) >= 0 &&
           (fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
        if ((pending[s] = plr_conn_new(fd, -3)) == NULL) {
            close(fd);                     /* no memory */
            continue;
        }
        pending[s]->deadline = plr_now() + PLR_HELLO_TIMEOUT;
    }
}

/* ------------------------------------------------------------ loop hooks */

int plr_net_fill(plr_job_t *job, struct pollfd *fds, int max)
{
    if (job->mode == PLR_MODE_HEAD)
        return plr_head_fill(job, fds, max);
    if (job->mode == PLR_MODE_DAEMON)
        return plr_daemon_fill(job, fds, max);
    return 0;
}

void plr_net_handle(plr_job_t *job, struct pollfd *fds, int n)
{
    if (job->mode == PLR_MODE_HEAD)
        plr_head_handle(job, fds, n);
    else if (job->mode == PLR_MODE_DAEMON)
        plr_daemon_handle(job, fds, n);
}

void plr_net_tick(plr_job_t *job)
{
    if (job->mode == PLR_MODE_HEAD)
        plr_head_tick(job);
    else if (job->mode == PLR_MODE_DAEMON)
        plr_daemon_tick(job);
}

int plr_net_maxfds(plr_job_t *job)
{
    if (job->mode == PLR_MODE_HEAD)
        return plr_head_maxfds(job);
    if (job->mode == PLR_MODE_DAEMON)
        return plr_daemon_maxfds(job);
    return 0;
}

int plr_rank_index(plr_job_t *job, int rank)
{
    if (job->mode != PLR_MODE_DAEMON)
        return rank >= 0 && rank < job->opts.nranks ? rank : -1;
    for (int i = 0; i < job->opts.nranks; i++)
        if (job->ranks[i].rank == rank)
            return i;
    return -1;
}
