/* The control network of a multi-host job: framed messages over TCP
 * between plaitrun (the head) and its daemons, along the daemon tree.
 *
 * Every message has a header {type, length, source node, destination node};
 * nodes are daemon numbers, PLR_NODE_HEAD the head, PLR_NODE_ALL everyone
 * (a broadcast down the tree).  Sockets are non-blocking; what cannot be
 * written at once waits in the connection's queue. */
#ifndef PLR_NET_H
#define PLR_NET_H

#include "launcher/plr.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PLR_NODE_HEAD (-1)
#define PLR_NODE_ALL  (-2)
#define PLR_SECRET_LEN 64           /* hex characters */
#define PLR_HELLO_TIMEOUT 30.0      /* seconds a new connection has to authenticate: a
                                     * daemon's first segments over a lossy network may
                                     * need several retransmissions (with 5% loss on every
                                     * link of 3 namespace hosts, one start in 11 missed a
                                     * 5 s window and the job failed); a malformed or
                                     * wrong HELLO is refused at once whatever this is */
#define PLR_MSG_MAX (1u << 30)

typedef enum {
    PLR_MSG_HELLO = 1,   /* child -> parent: secret, node number */
    PLR_MSG_JOB,         /* parent -> child: the job (same for every daemon) */
    PLR_MSG_READY,       /* daemon -> head: its listening address and port for its children */
    PLR_MSG_IO,          /* daemon -> head: rank, stream (1/2), bytes (whole lines) */
    PLR_MSG_EXIT,        /* daemon -> head: rank */
    PLR_MSG_FAIL,        /* daemon -> head: exit code, message */
    PLR_MSG_LOST,        /* daemon -> head: a child daemon's connection broke: node */
    PLR_MSG_KILL,        /* head -> all: signal the ranks */
    PLR_MSG_END,         /* head -> all: the job is over, clean up and exit */
    PLR_MSG_FENCE_UP,    /* child -> parent: fence number, the subtree's blobs */
    PLR_MSG_FENCE_DOWN,  /* head -> all: fence number, every blob */
    PLR_MSG_DMDX_REQ,    /* daemon -> daemon of rank: request id, rank */
    PLR_MSG_DMDX_RESP,   /* back: request id, status, blob */
    PLR_MSG_JOINSTATE,   /* daemon -> head: a rank that exited without joining (rank + 1,
                          * 0: none) and its pid; whether joined ranks wait (0/1) */
    PLR_MSG_JOINED,      /* daemon -> head: a rank that called plait_init (PMIx_Init) */
} plr_msg_type_t;

typedef struct plr_msg_hdr {
    uint32_t type, len;
    int32_t  src, dest;
} plr_msg_hdr_t;

typedef struct plr_conn {
    int      fd;
    int      node;          /* peer's node number (PLR_NODE_HEAD for the parent head) */
    bool     authed;        /* HELLO checked (accepted side) or sent (connecting side) */
    double   deadline;      /* for HELLO */
    char    *in;
    size_t   inlen, incap;
    size_t   taken;         /* bytes of the message handed out last */
    char    *out;
    size_t   outlen, outoff, outcap;
} plr_conn_t;

/* Serialization: little helpers over a growing buffer / a bounded reader. */
typedef struct plr_pack {
    char  *p;
    size_t len, cap;
    bool   bad;
} plr_pack_t;
typedef struct plr_unpack {
    const char *p;
    size_t len, off;
    bool   bad;
} plr_unpack_t;

void plr_put_u32(plr_pack_t *b, uint32_t v);
void plr_put_bytes(plr_pack_t *b, const void *p, size_t n);   /* length, then bytes */
void plr_put_str(plr_pack_t *b, const char *s);
uint32_t plr_get_u32(plr_unpack_t *u);
const char *plr_get_bytes(plr_unpack_t *u, size_t *n);
const char *plr_get_str(plr_unpack_t *u);                   /* NUL-terminated in place */

plr_conn_t *plr_conn_new(int fd, int node);
void plr_conn_free(plr_conn_t *c);
/* Queues a message and writes what the socket takes now.  -1: connection broken. */
int  plr_conn_send(plr_conn_t *c, int type, int src, int dest, const void *p, size_t n);
int  plr_conn_flush(plr_conn_t *c);
/* Waits (at most secs) until the queue is written; -1 on error or timeout. */
int  plr_conn_flush_wait(plr_conn_t *c, double secs);
bool plr_conn_pending(const plr_conn_t *c);
/* Reads what is available: 0, or -1 at EOF/error. */
int  plr_conn_read(plr_conn_t *c);
/* Takes the next complete message out (payload valid until the next call). */
bool plr_conn_next(plr_conn_t *c, plr_msg_hdr_t *h, const char **payload);

int  plr_tcp_listen(const char *addr, int *port);
int  plr_tcp_connect(const char *addr, int port, double secs);
int  plr_tcp_local_addr(int fd, char *addr, size_t len);
void plr_secret_new(char out[PLR_SECRET_LEN + 1]);
bool plr_secret_eq(const char *a, const char *b);
int  plr_hello_take(plr_conn_t *c, const char *secret, uint32_t *node);
/* The first free slot of pending[0..n), or -1. */
int  plr_pending_room(plr_conn_t *const *pending, int n);
void plr_accept_pending(int lfd, plr_conn_t **pending, int n);

/* Head and daemon parts of the main loop's network hooks. */
int  plr_head_fill(plr_job_t *job, struct pollfd *fds, int max);
void plr_head_handle(plr_job_t *job, struct pollfd *fds, int n);
void plr_head_tick(plr_job_t *job);
int  plr_head_maxfds(plr_job_t *job);
int  plr_daemon_fill(plr_job_t *job, struct pollfd *fds, int max);
void plr_daemon_handle(plr_job_t *job, struct pollfd *fds, int n);
void plr_daemon_tick(plr_job_t *job);
int  plr_daemon_maxfds(plr_job_t *job);

#endif /* PLR_NET_H */
