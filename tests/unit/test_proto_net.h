/*
 * test_proto_net.h -- a scripted two-node "network" for the protocol unit
 * tests: two pp_conn_t (rank 0 -> rank 1 and back), a packet queue, and a
 * filter callback that decides per packet whether to deliver, drop,
 * duplicate or corrupt it. Time is a counter advanced by fixed steps, so
 * every run is deterministic.
 */
#ifndef TEST_PROTO_NET_H
#define TEST_PROTO_NET_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/proto/pp.h"
#include "tests/unit/pp_pair.h"

#define NET_MAXQ 8192
#define NET_KEY  0x1234abcd5678ef00ull

typedef struct {
    uint8_t *buf;
    size_t   len;
    int      to;          /* 0 or 1 */
} net_pkt_t;

/* NET_HOLD: the packet arrives four steps late, after the ACKs of the next
 * steps' packets (as if a receiving thread held it meanwhile). */
enum { NET_PASS = 0, NET_DROP, NET_DUP, NET_CORRUPT, NET_HOLD };
#define NET_MAXHOLD 256

typedef struct net net_t;
/* Decides the fate of the n-th packet ever sent (per direction counters in n). */
typedef int (*net_filter_fn)(net_t *n, int from, const uint8_t *pkt, size_t len, uint64_t seq);

struct net {
    pp_conn_t     c[2];
    net_pkt_t     q[NET_MAXQ];
    int           nq;
    uint64_t      now;
    uint64_t      seq[2];      /* packets sent by each side */
    net_filter_fn filter;
    int           reverse;     /* deliver each batch in reverse order */
    net_pkt_t     held[NET_MAXHOLD];   /* NET_HOLD: delivered when their steps reach 0 */
    int           held_steps[NET_MAXHOLD], nheld;
    uint64_t      parse_drops[PP_DROP_N];
    void         *arg;
    /* Runs (pp.h PP_F_RUN), as udp.c sends them: 0 packet by packet; 1 a
     * step's packets grouped by pp_run_count into runs; 2 the same, but the
     * path cuts every run into segments of the size of its first packet
     * (a NIC's segmentation offload), as a receiver without GRO sees them. */
    int           runs;
};

static inline void net_cfg(pp_cfg_t *cfg, int me, uint32_t isn_a, uint32_t isn_b)
{
    pp_pair_cfg(cfg, NET_KEY, me);
    cfg->tx_isn = me ? isn_b : isn_a;
    cfg->rx_isn = me ? isn_a : isn_b;
    cfg->mtu = 1000;
    cfg->chunk = 4000;
    cfg->npaths = 8;
    cfg->dupthresh = 32;
    cfg->small = 2000;
    cfg->rto_min_ns = 200000;
    cfg->give_up_ns = 2000000000ull;
    cfg->tx_buf_max = 1u << 20;
    cfg->rx_buf_max = 1u << 20;
    cfg->max_msg = 1u << 20;
    cfg->init_cwnd = 64000;
    cfg->seed = 42 + (uint64_t)me;
}

static inline int net_init(net_t *n, const pp_cfg_t *a, const pp_cfg_t *b)
{
    memset(n, 0, sizeof *n);
    n->now = 1000000;
    return pp_conn_init(&n->c[0], a) || pp_conn_init(&n->c[1], b);
}

/* A net of two default connections (initial PSNs isn_a, isn_b) whose
 * packets go through filter f (NULL: all pass); net_fini and free it. */
static inline net_t *net_new(uint32_t isn_a, uint32_t isn_b, net_filter_fn f)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    if (!n)
        abort();
    net_cfg(&a, 0, isn_a, isn_b);
    net_cfg(&b, 1, isn_a, isn_b);
    net_init(n, &a, &b);
    n->filter = f;
    return n;
}

static inline void net_fini(net_t *n)
{
    for (int i = 0; i < n->nq; i++)
        free(n->q[i].buf);
    for (int i = 0; i < n->nheld; i++)
        free(n->held[i].buf);
    pp_conn_fini(&n->c[0]);
    pp_conn_fini(&n->c[1]);
}

/* A copy of len bytes at p, bound for side to. */
static inline net_pkt_t net_pkt(int to, const uint8_t *p, size_t len)
{
    net_pkt_t k = {.buf = malloc(len), .len = len, .to = to};
    memcpy(k.buf, p, len);
    return k;
}

static inline void net_enqueue(net_t *n, int to, const uint8_t *p, size_t len)
{
    if (n->nq == NET_MAXQ)
        return;   /* the wire is full: a drop */
    n->q[n->nq++] = net_pkt(to, p, len);
}

static inline void net_emit(net_t *n, int from, const pp_out_t *o)
{
    uint8_t pkt[70000];
    size_t len = o->hdr_len + o->len + o->len2;
    int fate;
    memcpy(pkt, o->hdr, o->hdr_len);
    if (o->len)
        memcpy(pkt + o->hdr_len, o->payload, o->len);
    if (o->len2)   /* a referenced message's first packet: header, then payload */
        memcpy(pkt + o->hdr_len + o->len, o->payload2, o->len2);
    fate = n->filter ? n->filter(n, from, pkt, len, n->seq[from]) : NET_PASS;
    n->seq[from]++;
    if (fate == NET_DROP)
        return;
    if (fate == NET_CORRUPT)
        pkt[len / 2] ^= 0x5a;
    if (fate == NET_HOLD && n->nheld < NET_MAXHOLD) {
        n->held[n->nheld] = net_pkt(!from, pkt, len);
        n->held_steps[n->nheld++] = 4;
        return;
    }
    net_enqueue(n, !from, pkt, len);
    if (fate == NET_DUP)
        net_enqueue(n, !from, pkt, len);
}

/* Delivers every queued packet (parsed first, as a datapath does) after 10 us,
 * then the held ones whose time came. */
static inline void net_deliver(net_t *n)
{
    static net_pkt_t q[NET_MAXQ + NET_MAXHOLD];
    int nq, kept = 0;
    memcpy(q, n->q, sizeof(net_pkt_t) * (size_t)n->nq);
    nq = n->nq;
    n->nq = 0;
    for (int i = 0; i < n->nheld; i++) {
        if (--n->held_steps[i] > 0) {
            n->held_steps[kept] = n->held_steps[i];
            n->held[kept++] = n->held[i];
        } else {
            q[nq++] = n->held[i];
        }
    }
    n->nheld = kept;
    n->now += 10000;   /* 10 us of wire */
    for (int i = 0; i < nq; i++) {
        net_pkt_t *p = &q[n->reverse ? nq - 1 - i : i];
        uint32_t src;
        int type, r = pp_parse(p->buf, p->len, NET_KEY, (uint32_t)p->to, &src, &type);
        if (r >= 0)
            n->parse_drops[r]++;
        else if (src == (uint32_t)!p->to)
            pp_rx(&n->c[p->to], n->now, p->buf, p->len);
        else
            n->parse_drops[PP_DROP_CONN]++;
        free(p->buf);
    }
}

/* The run o[0..k) as one datagram (net.runs): its header, the payloads
 * behind it; the filter decides its fate whole; cut (runs 2), the first
 * segment keeps the header and the others arrive alone. */
static inline void net_emit_run(net_t *n, int from, const pp_conn_t *c, const pp_out_t *o, int k)
{
    static uint8_t pkt[70000];
    size_t len = pp_run_hdr(c, o, k, pkt), seg = o[0].hdr_len + o[0].len;
    int fate;
    for (int i = 0; i < k; i++) {
        memcpy(pkt + len, o[i].payload, o[i].len);
        len += o[i].len;
    }
    fate = n->filter ? n->filter(n, from, pkt, len, n->seq[from]) : NET_PASS;
    n->seq[from] += (uint64_t)k;
    if (fate == NET_DROP)
        return;
    for (size_t at = 0; at < len; at += n->runs == 2 ? seg : len)
        net_enqueue(n, !from, pkt + at, n->runs == 2 && len - at > seg ? seg : len - at);
}

/* Side s's next packets, up to burst: one by one, or in runs (net.runs)
 * while the peer has not asked for none (runs_off). */
static inline void net_send(net_t *n, int s, int burst)
{
    static pp_out_t o[64];
    int k = 0;
    while (burst > 0) {
        int want = burst < 64 ? burst : 64;
        for (k = 0; k < want && pp_tx_next(&n->c[s], n->now, &o[k]); k++)
            ;
        for (int i = 0, r; i < k; i += r) {
            r = n->runs && !n->c[s].runs_off ? pp_run_count(&n->c[s], &o[i], k - i, 60000) : 1;
            if (r > 1)
                net_emit_run(n, s, &n->c[s], &o[i], r);
            else
                net_emit(n, s, &o[i]);
        }
        if (k < want)
            return;
        burst -= k;
    }
}

/* One step: each side sends what it may (up to burst packets), every queued
 * packet is delivered, then each side sends the ACK it owes. */
static inline void net_step(net_t *n, int burst)
{
    pp_out_t o;
    for (int s = 0; s < 2; s++) {
        pp_poll(&n->c[s], n->now);
        net_send(n, s, burst);
    }
    net_deliver(n);
    for (int s = 0; s < 2; s++)
        while (pp_ack_next(&n->c[s], n->now, &o))
            net_emit(n, s, &o);
}

#endif
