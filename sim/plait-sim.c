/*
 * plait-sim.c -- a deterministic packet-level simulator that drives the
 * multipath protocol (transport/proto: conn.c, cc.c, lb.c) unchanged.
 *
 * Model (one run = one seed = one result, no clock is read, nothing sleeps):
 *  - F flows (1, or 2 for the collision scenario); flow f has endpoints A_f
 *    (sender) and B_f (receiver), each a pp_conn_t: A->B data, B->A ACKs and
 *    the benchmark's small control messages.
 *  - cfg.npaths paths per flow, mapped onto L links by a hash of the path
 *    index (like ECMP over UDP source ports; --map rr: path i on link i % L).
 *    The flow index is part of the hash, so two flows' paths land differently;
 *    --map-seed N changes the hash (the default 0 puts 17 of flow 0's 32
 *    paths and 21 of flow 1's on link 0: the collision scenario's shares
 *    depend on that split, so compare policies over several map seeds).
 *  - A link is a Linux tbf at L2 in each direction: a token bucket of `rate`
 *    bit/s and depth `burst` bytes, packets counted with 28 (IP+UDP) + 14
 *    (Ethernet) bytes on top of the datagram; a FIFO in front of it that
 *    drops a packet arriving when its backlog would exceed rate x latency +
 *    burst bytes (tbf's limit); then the propagation delay; then random loss
 *    (seeded RNG), in both directions, like nft's drop of forwarded UDP.
 *    Data goes A->B on the forward side of its path's link, ACKs and B's
 *    messages on the reverse side of the link their path index maps to.
 *  - The sender host's NIC serializes at --nic bit/s (0: infinitely fast).
 *  - The engine (as transport/udp/udp.c): on every event touching an
 *    endpoint, pp_poll, then pp_tx_next for as long as it gives packets (one
 *    at a time through the NIC), and the ACK (pp_ack_next) after --ack-every
 *    received packets or --ack-delay after the first unacknowledged one. A
 *    timer tick every rto_min/4 (and at the pacing point) while anything is
 *    outstanding stands in for the engine's wake-ups.
 *  - The application is `plait-bench pt2pt -m bw -W <W>`: per window an RTS
 *    (small message A->B), a CTS back, then W messages of M bytes, each cut
 *    into frames of at most 1 MB sent with pp_send_placed (the rendezvous
 *    data: the receiver's cfg.place hook points into its receive buffer),
 *    then the receiver's window ACK (small message B->A). Every payload byte
 *    is a function of (message, offset) and is checked at the receiver.
 *  - Goodput: payload bytes of the windows after the first (warm-up),
 *    divided by their time, as the benchmark reports it.
 * Output: goodput, header-bound ceiling, per link utilization / drops / idle
 * time while the sender had data queued, retransmissions, and why the sender
 * was not sending (time shares). See sim/README.md.
 */
#include "transport/proto/pp.h"

#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_MAX_LINKS 16
#define SIM_MAX_FLOWS 4
#define SIM_FRAME     (1u << 20)   /* udp.c's UDP_MAX_FRAME */
#define SIM_L2        42u          /* 28 IP + UDP, 14 Ethernet */
#define SIM_KEY       0x5111a7e5u
#define SIM_HLEN      16           /* the application's frame header */

/* ------------------------------------------------------------ utilities */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t rng_state;
static double rng_unit(void)
{
    rng_state = mix64(rng_state);
    return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "plait-sim: out of memory\n");
        exit(2);
    }
    return p;
}

/* ------------------------------------------------------------ events */

enum { EV_ARRIVE = 1, EV_TICK, EV_ACKT, EV_NIC };

typedef struct {
    uint64_t t, seq;
    int      type, ep;
    uint8_t *pkt;
    size_t   len;
} ev_t;

static ev_t *heap;
static size_t nheap, capheap;
static uint64_t evseq;

static int ev_less(const ev_t *a, const ev_t *b) { return a->t < b->t || (a->t == b->t && a->seq < b->seq); }

static void ev_push(uint64_t t, int type, int ep, uint8_t *pkt, size_t len)
{
    size_t i;
    if (nheap == capheap) {
        capheap = capheap ? 2 * capheap : 4096;
        heap = realloc(heap, capheap * sizeof *heap);
        if (!heap) {
            fprintf(stderr, "plait-sim: out of memory\n");
            exit(2);
        }
    }
    i = nheap++;
    heap[i] = (ev_t){t, evseq++, type, ep, pkt, len};
    while (i && ev_less(&heap[i], &heap[(i - 1) / 2])) {
        ev_t tmp = heap[i];
        heap[i] = heap[(i - 1) / 2];
        heap[(i - 1) / 2] = tmp;
        i = (i - 1) / 2;
    }
}

static ev_t ev_pop(void)
{
    ev_t top = heap[0];
    size_t i = 0;
    heap[0] = heap[--nheap];
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < nheap && ev_less(&heap[l], &heap[m])) m = l;
        if (r < nheap && ev_less(&heap[r], &heap[m])) m = r;
        if (m == i) break;
        ev_t tmp = heap[i];
        heap[i] = heap[m];
        heap[m] = tmp;
        i = m;
    }
    return top;
}

/* ------------------------------------------------------------ links */

typedef struct {          /* one direction of a link: tbf + delay + loss */
    uint64_t *dep;        /* departure times of packets still in the queue (ring) */
    uint32_t *sz;
    size_t    head, n, cap;
    uint64_t  backlog;    /* bytes with departure > now */
    uint64_t  last_dep;   /* busy until */
    double    tokens;     /* bytes, at time last_dep */
    uint64_t  tx_bytes, tx_pkts, qdrops, ldrops;
    uint64_t  idle_ns;    /* idle while a sender had data queued (forward side) */
} lq_t;

typedef struct {
    uint64_t rate_bps, delay_ns;
    double   loss;
    uint64_t limit, burst;
    lq_t     d[2];        /* 0: A->B, 1: B->A */
} link_t;

static link_t links[SIM_MAX_LINKS];
static int nlinks;

/* Enqueues len bytes (datagram) at now; returns the departure time or 0 when dropped. */
static uint64_t lq_send(link_t *l, lq_t *q, uint64_t now, size_t len)
{
    uint64_t wire = len + SIM_L2, t0, d;
    double tok, rate_Bns = (double)l->rate_bps / 8e9;   /* bytes per ns */
    while (q->n && q->dep[q->head] <= now) {
        q->backlog -= q->sz[q->head];
        q->head = (q->head + 1) % q->cap;
        q->n--;
    }
    if (q->backlog + wire > l->limit) {
        q->qdrops++;
        return 0;
    }
    t0 = now > q->last_dep ? now : q->last_dep;
    tok = q->tokens + (double)(t0 - q->last_dep) * rate_Bns;
    if (tok > (double)l->burst)
        tok = (double)l->burst;
    if (q->last_dep == 0)
        tok = (double)l->burst;
    d = t0;
    if (tok < (double)wire) {
        d = t0 + (uint64_t)ceil(((double)wire - tok) / rate_Bns);
        tok = (double)wire;
    }
    q->tokens = tok - (double)wire;
    q->last_dep = d;
    if (q->n == q->cap) {
        size_t nc = q->cap ? 2 * q->cap : 1024;
        uint64_t *nd = xmalloc(nc * sizeof *nd);
        uint32_t *ns = xmalloc(nc * sizeof *ns);
        for (size_t i = 0; i < q->n; i++) {
            nd[i] = q->dep[(q->head + i) % q->cap];
            ns[i] = q->sz[(q->head + i) % q->cap];
        }
        free(q->dep);
        free(q->sz);
        q->dep = nd;
        q->sz = ns;
        q->head = 0;
        q->cap = nc;
    }
    q->dep[(q->head + q->n) % q->cap] = d;
    q->sz[(q->head + q->n) % q->cap] = (uint32_t)wire;
    q->n++;
    q->backlog += wire;
    q->tx_bytes += wire;
    q->tx_pkts++;
    return d;
}

/* ------------------------------------------------------------ endpoints */

enum { WHY_SEND = 0, WHY_APP, WHY_NIC, WHY_PPWIN, WHY_PACING, WHY_RWND, WHY_CWND, WHY_NOPATH,
       WHY_N };
static const char *const why_names[WHY_N] = {"sending", "app (nothing queued)", "nic busy",
                                             "PP_WIN", "pacing", "rwnd", "cwnd full", "no path"};
static const char *const why_keys[WHY_N] = {"sending", "app", "nic", "pp_win", "pacing", "rwnd",
                                            "cwnd", "no_path"};

enum { APP_RTS = 1, APP_CTS, APP_DATA, APP_WACK };

typedef struct {
    uint32_t kind, msg, frame, rsv;
} app_hdr_t;

typedef struct {
    pp_conn_t c;
    int       flow, side;            /* side 0: A (sender), 1: B */
    uint64_t  nic_free;
    int       nic_ev;                /* an EV_NIC is pending */
    uint64_t  tick_at;               /* pending EV_TICK time, 0: none */
    uint64_t  ackt_at;               /* pending EV_ACKT time, 0: none */
    uint32_t  rx_unacked;            /* packets received since the last ACK */
    int       why;                   /* sender state since why_t */
    uint64_t  why_t, why_ns[WHY_N];
} ep_t;

typedef struct {
    /* sender */
    uint64_t win;                    /* current window */
    int      phase;                  /* 0: RTS sent, waiting CTS; 1: data; 2: waiting window ACK */
    uint32_t next_msg, next_frame;   /* next frame to queue in this window */
    /* receiver */
    uint8_t **rbuf;                  /* W receive buffers of M bytes */
    uint32_t *frames_got;
    uint32_t  rx_done;               /* messages of the current window complete */
    /* results */
    uint64_t  win_done_ns[4096];
    uint64_t  nwin;
    uint64_t  bad_bytes, msgs_ok, last_progress;
    uint64_t  rx_bytes;              /* payload bytes of the data frames delivered */
    uint64_t  rx_mark;               /* rx_bytes at the common mark (several flows) */
} flow_t;

typedef struct {
    uint64_t trace_ns, trace_at;
    uint64_t msg_size, duration_ns, delay_ns, seed, nic_bps, ack_delay_ns, latency_ns, burst;
    uint32_t window, npaths, ack_every, max_windows, chunk, mtu;
    int      nflows, map_rr, json, quiet;
    uint64_t map_seed;
    double   loss;
    const char *cc, *lb, *scenario;
} opts_t;

static opts_t O;
static ep_t eps[2 * SIM_MAX_FLOWS];
static flow_t flows[SIM_MAX_FLOWS];
static int pmap[SIM_MAX_FLOWS][PP_MAX_PATHS];   /* path -> link */
static uint64_t now_ns, stat_t;
static uint64_t mark_ns;      /* several flows: goodput is measured from here to the end */
static int      marked;
static int have_data[SIM_MAX_FLOWS];
static uint8_t *scratch;

static uint32_t frames_per_msg(void) { return (uint32_t)((O.msg_size + SIM_FRAME - 1) / SIM_FRAME); }

static uint64_t pat_word(uint32_t flow, uint64_t msg, uint64_t word)
{
    return mix64(((uint64_t)flow << 56) ^ (msg << 28) ^ word);
}

static void pat_fill(uint8_t *dst, uint32_t flow, uint64_t msg, uint64_t off, size_t len)
{
    /* off is a multiple of 8 (frames are 1 MB apart) */
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w = pat_word(flow, msg, (off + i) / 8);
        memcpy(dst + i, &w, 8);
    }
    if (i < len) {
        uint64_t w = pat_word(flow, msg, (off + i) / 8);
        memcpy(dst + i, &w, len - i);
    }
}

static uint64_t pat_check(const uint8_t *src, uint32_t flow, uint64_t msg, size_t len)
{
    uint64_t bad = 0;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w = pat_word(flow, msg, i / 8), g;
        memcpy(&g, src + i, 8);
        bad += g != w;
    }
    if (i < len) {
        uint64_t w = pat_word(flow, msg, i / 8);
        bad += memcmp(src + i, &w, len - i) != 0;
    }
    return bad;
}

static void *sim_place(void *arg, uint64_t id, uint64_t off, size_t *len)
{
    flow_t *f = arg;
    if (id >= O.window || off >= O.msg_size)
        return NULL;
    if (*len > O.msg_size - off)
        *len = O.msg_size - off;
    return f->rbuf[id] + off;
}

/* ------------------------------------------------------------ the engine */

static void emit(ep_t *e, const pp_out_t *o)
{
    size_t len = o->hdr_len + o->len + o->len2;
    int li = pmap[e->flow][(uint32_t)o->path % e->c.cfg.npaths];
    link_t *l = &links[li];
    lq_t *q = &l->d[e->side];
    uint64_t d;
    uint8_t *pkt;
    d = lq_send(l, q, now_ns, len);
    if (!d)
        return;
    if (l->loss > 0 && rng_unit() < l->loss) {
        q->ldrops++;
        return;
    }
    pkt = xmalloc(len);
    memcpy(pkt, o->hdr, o->hdr_len);
    if (o->len)
        memcpy(pkt + o->hdr_len, o->payload, o->len);
    if (o->len2)
        memcpy(pkt + o->hdr_len + o->len, o->payload2, o->len2);
    ev_push(d + l->delay_ns, EV_ARRIVE, (int)(e - eps) ^ 1, pkt, len);
}

static void small_send(ep_t *e, uint32_t kind, uint32_t msg)
{
    app_hdr_t h = {kind, msg, 0, 0};
    if (pp_send(&e->c, &h, sizeof h, NULL, 0) != 0) {
        fprintf(stderr, "plait-sim: control message refused\n");
        exit(2);
    }
}

/* The sender application: queues the frames of the current window while the
 * protocol's buffer takes them (udp.c wakes a blocked sender at half). */
static void app_fill(ep_t *e)
{
    flow_t *f = &flows[e->flow];
    uint32_t nf = frames_per_msg();
    while (f->phase == 1 && f->next_msg < O.window) {
        uint64_t off = (uint64_t)f->next_frame * SIM_FRAME;
        size_t len = O.msg_size - off < SIM_FRAME ? (size_t)(O.msg_size - off) : SIM_FRAME;
        uint64_t gmsg = f->win * O.window + f->next_msg;
        app_hdr_t h = {APP_DATA, f->next_msg, f->next_frame, 0};
        if (e->c.tx_head && e->c.tx_buffered + len + sizeof h > e->c.cfg.tx_buf_max)
            return;
        pat_fill(scratch, (uint32_t)e->flow, gmsg, off, len);
        if (pp_send_placed(&e->c, &h, sizeof h, scratch, len, f->next_msg, off) != 0)
            return;
        if (++f->next_frame == nf) {
            f->next_frame = 0;
            f->next_msg++;
        }
    }
    if (f->phase == 1 && f->next_msg == O.window)
        f->phase = 2;
}

static void app_start_window(ep_t *a)
{
    flow_t *f = &flows[a->flow];
    f->phase = 0;
    f->next_msg = f->next_frame = 0;
    small_send(a, APP_RTS, (uint32_t)f->win);
}

static void app_deliver(ep_t *e)
{
    flow_t *f = &flows[e->flow];
    pp_msg_t *m;
    while ((m = pp_deliver(&e->c)) != NULL) {
        app_hdr_t h;
        memcpy(&h, m->data, sizeof h);
        if (e->side == 1 && h.kind == APP_RTS) {
            f->rx_done = 0;
            memset(f->frames_got, 0, O.window * sizeof *f->frames_got);
            small_send(e, APP_CTS, h.msg);
        } else if (e->side == 1 && h.kind == APP_DATA) {
            f->rx_bytes += m->len - m->hlen;
            if (h.msg < O.window && ++f->frames_got[h.msg] == frames_per_msg()) {
                uint64_t gmsg = f->win * O.window + h.msg;
                f->bad_bytes += pat_check(f->rbuf[h.msg], (uint32_t)e->flow, gmsg, O.msg_size);
                memset(f->rbuf[h.msg], 0, O.msg_size);   /* a stale byte must not pass next time */
                f->msgs_ok++;
                f->last_progress = now_ns;
                if (++f->rx_done == O.window)
                    small_send(e, APP_WACK, (uint32_t)f->win);
            }
        } else if (e->side == 0 && h.kind == APP_CTS && f->phase == 0) {
            f->phase = 1;
        } else if (e->side == 0 && h.kind == APP_WACK && f->phase == 2) {
            if (f->nwin < sizeof f->win_done_ns / sizeof f->win_done_ns[0])
                f->win_done_ns[f->nwin] = now_ns;
            f->nwin++;
            f->win++;
            if (!O.max_windows || f->nwin < O.max_windows)
                app_start_window(e);
            else
                f->phase = 3;   /* done */
        }
        pp_msg_release(&e->c, m);
    }
    if (e->side == 0)
        app_fill(e);
}

/* Why the sender does not send now (it has just been refused by pp_tx_next). */
static int why_blocked(ep_t *e)
{
    pp_conn_t *c = &e->c;
    if (!c->tx_cut && !c->nlost)
        return WHY_APP;
    if (c->nlost && c->cfg.cc->allow_retx && !c->cfg.cc->allow_retx(c, c->cfg.mtu))
        return WHY_CWND;
    if (!c->tx_cut)
        return WHY_NOPATH;   /* a repair waits for a path */
    if ((int32_t)(c->snd_nxt - c->snd_una) >= PP_WIN)
        return WHY_PPWIN;
    if (c->chunk_left)
        return WHY_NOPATH;
    if (now_ns < c->next_chunk_ns)
        return WHY_PACING;
    if (c->inflight && c->inflight + c->cfg.chunk > c->rwnd)
        return WHY_RWND;
    if (c->inflight && !c->cfg.cc->can_send(c, c->cfg.chunk))
        return WHY_CWND;
    return WHY_NOPATH;
}

static void why_set(ep_t *e, int why)
{
    if (why == e->why)
        return;
    e->why_ns[e->why] += now_ns - e->why_t;
    e->why = why;
    e->why_t = now_ns;
}

static void drive(ep_t *e)
{
    pp_out_t o;
    pp_conn_t *c = &e->c;
    int sent = 0;
    if (pp_poll(c, now_ns)) {
        fprintf(stderr, "plait-sim: flow %d side %c failed: %s\n", e->flow, "AB"[e->side], c->why);
        exit(3);
    }
    if (e->side == 0)
        app_fill(e);
    while (e->nic_free <= now_ns) {
        if (!pp_tx_next(c, now_ns, &o))
            break;
        sent = 1;
        emit(e, &o);
        if (O.nic_bps) {
            e->nic_free = now_ns + (o.hdr_len + o.len + o.len2 + SIM_L2) * 8 * 1000000000ull / O.nic_bps;
            if (!e->nic_ev) {
                e->nic_ev = 1;
                ev_push(e->nic_free, EV_NIC, (int)(e - eps), NULL, 0);
            }
        }
        if (e->side == 0)
            app_fill(e);
    }
    if (e->side == 0)
        why_set(e, e->nic_free > now_ns ? WHY_NIC : sent && c->tx_cut ? WHY_SEND : why_blocked(e));
    if (c->ack_pending && e->rx_unacked >= O.ack_every) {
        if (pp_ack_next(c, now_ns, &o))
            emit(e, &o);
        e->rx_unacked = 0;
    } else if (c->ack_pending && !e->ackt_at) {
        e->ackt_at = now_ns + O.ack_delay_ns;
        ev_push(e->ackt_at, EV_ACKT, (int)(e - eps), NULL, 0);
    }
    /* timers: the RTO scan, pacing, a sub-chunk path's rest (pwin) */
    if (c->tx_head || c->nlost) {
        uint64_t t = now_ns + (c->cfg.rto_min_ns / 4 ? c->cfg.rto_min_ns / 4 : 1);
        if (c->next_chunk_ns > now_ns && c->next_chunk_ns < t)
            t = c->next_chunk_ns;
        if (!e->tick_at || t < e->tick_at) {
            e->tick_at = t;
            ev_push(t, EV_TICK, (int)(e - eps), NULL, 0);
        }
    }
}

/* Idle accounting: link forward sides idle while their flows' senders had data. */
static void account(uint64_t t)
{
    int any = 0;
    for (int f = 0; f < O.nflows; f++)
        any |= have_data[f];
    if (any && t > stat_t)
        for (int i = 0; i < nlinks; i++) {
            lq_t *q = &links[i].d[0];
            uint64_t from = q->last_dep > stat_t ? q->last_dep : stat_t;
            if (t > from)
                q->idle_ns += t - from;
        }
    stat_t = t;
}

static void note_data(void)
{
    for (int f = 0; f < O.nflows; f++) {
        pp_conn_t *c = &eps[2 * f].c;
        have_data[f] = (c->tx_cut || c->nlost || flows[f].phase == 1) && flows[f].phase != 3;
    }
}

/* ------------------------------------------------------------ options */

/* A number with an optional k/m/g suffix in powers of unit (1000: rates,
 * 1024: sizes); *end is left after the suffix. */
static double parse_scaled(const char *s, double unit, char **end)
{
    double v = strtod(s, end);
    switch (**end) {
    case 'k': case 'K': v *= unit; break;
    case 'm': case 'M': v *= unit * unit; break;
    case 'g': case 'G': v *= unit * unit * unit; break;
    default: return v;
    }
    (*end)++;
    return v;
}

static uint64_t parse_rate(const char *s)
{
    char *end;
    double v = parse_scaled(s, 1e3, &end);
    if (!strncmp(end, "bit", 3)) end += 3;
    if (end == s || *end || v <= 0) {
        fprintf(stderr, "plait-sim: bad rate '%s' (e.g. 1g, 100m, 2.5g)\n", s);
        exit(2);
    }
    return (uint64_t)v;
}

static uint64_t parse_time(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (!strcmp(end, "ns")) ;
    else if (!strcmp(end, "us")) v *= 1e3;
    else if (!strcmp(end, "ms")) v *= 1e6;
    else if (!strcmp(end, "s") || !*end) v *= 1e9;
    else {
        fprintf(stderr, "plait-sim: bad time '%s' (e.g. 5ms, 50us, 2s)\n", s);
        exit(2);
    }
    if (end == s || v < 0) {
        fprintf(stderr, "plait-sim: bad time '%s'\n", s);
        exit(2);
    }
    return (uint64_t)v;
}

static uint64_t parse_size(const char *s)
{
    char *end;
    double v = parse_scaled(s, 1024, &end);
    if (*end == 'b' || *end == 'B') end++;
    if (end == s || *end || v < 0) {
        fprintf(stderr, "plait-sim: bad size '%s' (e.g. 4M, 256k)\n", s);
        exit(2);
    }
    return (uint64_t)v;
}

/* --link RATE[,DELAY[,LOSS%]] */
static void add_link(const char *spec)
{
    char buf[128], *d, *p;
    link_t *l;
    if (nlinks == SIM_MAX_LINKS) {
        fprintf(stderr, "plait-sim: at most %d links\n", SIM_MAX_LINKS);
        exit(2);
    }
    snprintf(buf, sizeof buf, "%s", spec);
    l = &links[nlinks++];
    memset(l, 0, sizeof *l);
    l->loss = -1;
    l->delay_ns = UINT64_MAX;
    d = strchr(buf, ',');
    if (d) *d++ = 0;
    l->rate_bps = parse_rate(buf);
    if (d) {
        p = strchr(d, ',');
        if (p) *p++ = 0;
        if (*d) l->delay_ns = parse_time(d);
        if (p) l->loss = strtod(p, NULL) / 100;
    }
}

static void usage(FILE *o)
{
    fprintf(o,
"Usage: plait-sim [options]\n"
"A deterministic packet-level simulation of plait's multipath protocol\n"
"(transport/proto, unchanged) between two hosts joined by L links, running\n"
"`plait-bench pt2pt -m bw -W <window>`. Simulated time, no sleeping.\n"
"\n"
"  --scenario NAME    two | slow | loss1 | loss001 | collision (the links of\n"
"                     bench/udp-netns.sh: 2 x 1g; 1g + 100m; 2 x 1g with 1%% or\n"
"                     0.01%% loss; 2 x 1g shared by two connections); options\n"
"                     given after it override its settings\n"
"  --link R[,D[,L]]   a link of rate R bit/s (1g, 100m), one-way delay D\n"
"                     (default --delay) and random loss L percent (default\n"
"                     --loss); repeat for more links\n"
"  --delay D          one-way propagation delay of every link (default 20us)\n"
"  --loss P           random loss in percent, both directions (default 0)\n"
"  --latency D        tbf queue bound in time (default 5ms)\n"
"  --burst B          tbf bucket depth in bytes (default 256k, as udp-bed.sh)\n"
"  --nic R            sender NIC rate (default 10g; 0: infinite)\n"
"  --cc NAME          cubic | swift | dgpool | eqds (default cubic)\n"
"  --lb NAME          p2c | spray | ackclock | pwin (default: the protocol's)\n"
"  --paths N          paths per connection (default 32)\n"
"  --map hash|rr      path -> link: hash of the path index (ECMP) or round robin\n"
"  --map-seed N       another hash (default 0; the collision's shares depend on it)\n"
"  --chunk B          bytes per chunk (default 32k)   --mtu B   packet payload\n"
"                     (default 1400: 1500 - 28 - the data header)\n"
"  -m, --size B       message size (default 4M; frames of at most 1 MB)\n"
"  -W, --window N     messages per window (default 16)\n"
"  -t, --time D       simulated time (default 3s)   -n, --windows N  stop after N\n"
"  --ack-every N      the receiver ACKs after N packets (default 8) or\n"
"  --ack-delay D      D after the first unacknowledged one (default 20us)\n"
"  --flows N          connections sharing the links (default 1)\n"
"  --trace D          sender state on stderr every D of simulated time\n"
"  -s, --seed N       seed (default 1)   --json  JSON report   -q  goodput only\n"
"  -h, --help\n");
}

static void scenario(const char *name)
{
    nlinks = 0;
    O.nflows = 1;
    O.loss = 0;
    if (!strcmp(name, "two")) {
        add_link("1g");
        add_link("1g");
    } else if (!strcmp(name, "slow")) {
        add_link("1g");
        add_link("100m");
    } else if (!strcmp(name, "loss1")) {
        add_link("1g");
        add_link("1g");
        O.loss = 0.01;
    } else if (!strcmp(name, "loss001")) {
        add_link("1g");
        add_link("1g");
        O.loss = 0.0001;
    } else if (!strcmp(name, "collision")) {
        add_link("1g");
        add_link("1g");
        O.nflows = 2;
    } else {
        fprintf(stderr, "plait-sim: unknown scenario '%s'\n", name);
        exit(2);
    }
    O.scenario = name;
}

/* ------------------------------------------------------------ main */

/* --trace: one line per flow's sender (and its paths with SIM_TRACE_PATHS set). */
static void trace_sender(uint64_t t, int f, uint64_t nwin, const pp_conn_t *c)
{
    fprintf(stderr, "t %.4f flow %d cwnd %.0f ssth %.0f infl %" PRIu64 " nlost %u srtt %" PRIu64
            " minrtt %" PRIu64 " una..nxt %d retx %" PRIu64 "/%" PRIu64 " win %" PRIu64 " sent %" PRIu64 " q",
            (double)t * 1e-9, f, c->cc.cwnd, c->cc.ssthresh, c->inflight, c->nlost, c->srtt_ns,
            c->min_rtt_ns, (int)(c->snd_nxt - c->snd_una), c->st.retx_fast, c->st.retx_timeout, nwin, c->st.tx_bytes);
    for (int i = 0; i < nlinks; i++)
        fprintf(stderr, " %" PRIu64, links[i].d[0].backlog);
    fprintf(stderr, "\n");
    if (getenv("SIM_TRACE_PATHS"))
        for (uint32_t p = 0; p < c->cfg.npaths; p++)
            fprintf(stderr, "  path %u link %d cwnd %.0f infl %" PRIu64 " qrtt %" PRIu64
                    " min %" PRIu64 " lost %" PRIu64 " pkts %" PRIu64 "\n", p, pmap[f][p],
                    c->paths[p].cwnd, c->paths[p].inflight, c->paths[p].qrtt_ns,
                    c->paths[p].st.min_rtt_ns, c->paths[p].st.lost, c->paths[p].st.tx_pkts);
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"scenario", 1, 0, 'S'}, {"link", 1, 0, 'L'}, {"delay", 1, 0, 'D'}, {"loss", 1, 0, 'P'},
        {"latency", 1, 0, 'T'}, {"burst", 1, 0, 'B'}, {"nic", 1, 0, 'N'}, {"cc", 1, 0, 'C'},
        {"lb", 1, 0, 'b'}, {"paths", 1, 0, 'p'}, {"map", 1, 0, 'M'}, {"map-seed", 1, 0, 'H'},
        {"chunk", 1, 0, 'k'},
        {"mtu", 1, 0, 'u'}, {"size", 1, 0, 'm'}, {"window", 1, 0, 'W'}, {"time", 1, 0, 't'},
        {"windows", 1, 0, 'n'}, {"ack-every", 1, 0, 'a'}, {"ack-delay", 1, 0, 'd'},
        {"flows", 1, 0, 'F'}, {"trace", 1, 0, 'x'}, {"seed", 1, 0, 's'}, {"json", 0, 0, 'j'}, {"help", 0, 0, 'h'},
        {0, 0, 0, 0}};
    int opt, own_links = 0;
    uint64_t end_ns;
#ifdef PP_DATA_HDR_MAX
    uint64_t hdr = PP_DATA_HDR_MAX;   /* the rendezvous data are placed packets */
#else
    uint64_t hdr = PP_DATA_HDR;
#endif
    double ceiling = 0, goodput = 0, span = 0, sumrate = 0;
    pp_cfg_t base;

    pp_cfg_default(&base);
    O.msg_size = 4u << 20;
    O.window = 16;
    O.npaths = 32;
    O.duration_ns = 3000000000ull;
    O.delay_ns = 20000;
    O.latency_ns = 5000000;
    O.burst = 256 * 1024;
    O.nic_bps = 10000000000ull;
    O.ack_every = 8;
    O.ack_delay_ns = 20000;
    O.seed = 1;
    O.nflows = 1;
    O.chunk = base.chunk;
#ifdef PP_DATA_HDR_MAX
    O.mtu = 1500 - 28 - (uint32_t)PP_DATA_HDR_MAX;   /* as udp.c sizes it */
#else
    O.mtu = 1500 - 28 - (uint32_t)PP_DATA_HDR;
#endif
    O.cc = "cubic";
    O.lb = base.lb->name;
    O.scenario = "custom";
    while ((opt = getopt_long(argc, argv, "m:W:t:n:s:qh", lo, NULL)) != -1) {
        switch (opt) {
        case 'S': scenario(optarg); break;
        case 'L':
            if (!own_links)
                nlinks = 0;   /* the first --link replaces a scenario's links */
            own_links = 1;
            add_link(optarg);
            break;
        case 'D': O.delay_ns = parse_time(optarg); break;
        case 'P': O.loss = strtod(optarg, NULL) / 100; break;
        case 'T': O.latency_ns = parse_time(optarg); break;
        case 'B': O.burst = parse_size(optarg); break;
        case 'N': O.nic_bps = strcmp(optarg, "0") ? parse_rate(optarg) : 0; break;
        case 'C': O.cc = optarg; break;
        case 'b': O.lb = optarg; break;
        case 'p': O.npaths = (uint32_t)atoi(optarg); break;
        case 'M': O.map_rr = !strcmp(optarg, "rr"); break;
        case 'H': {
            char *end;
            O.map_seed = strtoull(optarg, &end, 0);
            if (end == optarg || *end) {
                fprintf(stderr, "plait-sim: bad --map-seed '%s' (a number)\n", optarg);
                exit(2);
            }
            break;
        }
        case 'k': O.chunk = (uint32_t)parse_size(optarg); break;
        case 'u': O.mtu = (uint32_t)parse_size(optarg); break;
        case 'm': O.msg_size = parse_size(optarg); break;
        case 'W': O.window = (uint32_t)atoi(optarg); break;
        case 't': O.duration_ns = parse_time(optarg); break;
        case 'n': O.max_windows = (uint32_t)atoi(optarg); break;
        case 'a': O.ack_every = (uint32_t)atoi(optarg); break;
        case 'd': O.ack_delay_ns = parse_time(optarg); break;
        case 'F': O.nflows = atoi(optarg); break;
        case 'x': O.trace_ns = parse_time(optarg); break;
        case 's': O.seed = strtoull(optarg, NULL, 0); break;
        case 'j': O.json = 1; break;
        case 'q': O.quiet = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "plait-sim: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!nlinks) {
        add_link("1g");
        add_link("1g");
    }
    if (!pp_cc_find(O.cc) || !pp_lb_find(O.lb)) {
        fprintf(stderr, "plait-sim: unknown --cc '%s' or --lb '%s'\n", O.cc, O.lb);
        return 2;
    }
    if (O.nflows < 1 || O.nflows > SIM_MAX_FLOWS || O.window < 1 || O.msg_size < 1 ||
        O.npaths < 1 || O.npaths > PP_MAX_PATHS || O.ack_every < 1) {
        fprintf(stderr, "plait-sim: --flows 1..%d, --window, --size, --ack-every >= 1, --paths 1..%d\n",
                SIM_MAX_FLOWS, PP_MAX_PATHS);
        return 2;
    }
    for (int i = 0; i < nlinks; i++) {
        link_t *l = &links[i];
        if (l->delay_ns == UINT64_MAX) l->delay_ns = O.delay_ns;
        if (l->loss < 0) l->loss = O.loss;
        l->burst = O.burst;
        l->limit = (uint64_t)((double)l->rate_bps / 8e9 * (double)O.latency_ns) + O.burst;
        sumrate += (double)l->rate_bps;
    }
    rng_state = O.seed * 0x9e3779b97f4a7c15ull + 7;
    scratch = xmalloc(SIM_FRAME);

    for (int f = 0; f < O.nflows; f++) {
        for (uint32_t p = 0; p < O.npaths; p++)
            pmap[f][p] = O.map_rr ? (int)(p % (uint32_t)nlinks)
                                  : (int)(mix64(((uint64_t)f << 32 | p) ^ 0x5eedull ^ O.map_seed << 40) %
                                        (uint64_t)nlinks);
        flows[f].rbuf = xmalloc(O.window * sizeof *flows[f].rbuf);
        flows[f].frames_got = xmalloc(O.window * sizeof *flows[f].frames_got);
        for (uint32_t w = 0; w < O.window; w++) {
            flows[f].rbuf[w] = xmalloc(O.msg_size);
            memset(flows[f].rbuf[w], 0, O.msg_size);
        }
        for (int s = 0; s < 2; s++) {
            pp_cfg_t cfg = base;
            ep_t *e = &eps[2 * f + s];
            cfg.key = SIM_KEY;
            cfg.me = (uint32_t)(2 * f + s);
            cfg.peer = (uint32_t)(2 * f + !s);
            cfg.my_epoch = 100 + (uint32_t)s;
            cfg.peer_epoch = 100 + (uint32_t)!s;
            cfg.tx_isn = s ? 0x80000000u : 0x1000u;
            cfg.rx_isn = s ? 0x1000u : 0x80000000u;
            cfg.chunk = O.chunk;
            cfg.mtu = O.mtu;
            cfg.npaths = O.npaths;
            cfg.max_msg = SIM_FRAME + SIM_HLEN;
            cfg.seed = mix64(O.seed * 1000 + (uint64_t)(2 * f + s));
            cfg.cc = pp_cc_find(O.cc);
            cfg.lb = pp_lb_find(O.lb);
            cfg.place = sim_place;
            cfg.place_arg = &flows[f];
            e->flow = f;
            e->side = s;
            if (pp_conn_init(&e->c, &cfg) != 0) {
                fprintf(stderr, "plait-sim: invalid protocol settings (chunk %u, mtu %u)\n",
                        cfg.chunk, cfg.mtu);
                return 2;
            }
        }
        now_ns = 0;
        app_start_window(&eps[2 * f]);
        drive(&eps[2 * f]);
    }

    end_ns = O.duration_ns;
    mark_ns = O.duration_ns / 3;
    for (;;) {
        ev_t ev;
        ep_t *e;
        int done = 1;
        for (int f = 0; f < O.nflows; f++)
            done &= flows[f].phase == 3;
        if (done || !nheap || heap[0].t > end_ns)
            break;
        ev = ev_pop();
        if (O.trace_ns && ev.t >= O.trace_at) {
            O.trace_at = ev.t + O.trace_ns;
            for (int f = 0; f < O.nflows; f++)
                trace_sender(ev.t, f, flows[f].nwin, &eps[2 * f].c);
        }
        account(ev.t);
        if (!marked && ev.t >= mark_ns) {   /* several flows: goodput from here on */
            for (int f = 0; f < O.nflows; f++)
                flows[f].rx_mark = flows[f].rx_bytes;
            marked = 1;
        }
        now_ns = ev.t;
        e = &eps[ev.ep];
        switch (ev.type) {
        case EV_ARRIVE: {
            uint32_t src;
            int type;
            if (pp_parse(ev.pkt, ev.len, SIM_KEY, e->c.cfg.me, &src, &type) < 0) {
                pp_rx(&e->c, now_ns, ev.pkt, ev.len);
                if (type == PP_T_DATA)
                    e->rx_unacked++;
                app_deliver(e);
            }
            free(ev.pkt);
            break;
        }
        case EV_TICK:
            if (e->tick_at != now_ns)
                continue;   /* superseded */
            e->tick_at = 0;
            break;
        case EV_ACKT: {
            pp_out_t o;
            e->ackt_at = 0;
            if (pp_ack_next(&e->c, now_ns, &o))
                emit(e, &o);
            e->rx_unacked = 0;
            break;
        }
        case EV_NIC:
            e->nic_ev = 0;
            break;
        }
        drive(e);
        note_data();
    }
    if (now_ns < end_ns && !nheap)
        end_ns = now_ns;
    {
        int done = 1;
        for (int f = 0; f < O.nflows; f++)
            done &= flows[f].phase == 3;
        if (done)
            end_ns = now_ns;
    }
    account(end_ns);
    now_ns = end_ns;
    for (int f = 0; f < O.nflows; f++) {
        ep_t *a = &eps[2 * f];
        a->why_ns[a->why] += now_ns - a->why_t;
        a->why_t = now_ns;
    }

    /* ------------------------------------------------------------ report */
    ceiling = sumrate * (double)O.mtu / (double)(O.mtu + hdr + SIM_L2);
    {
        uint64_t bad = 0, retx = 0, rto = 0, spur = 0, tx_pkts = 0, nwin = 0;
        double fgood[SIM_MAX_FLOWS] = {0}, why_tot[WHY_N] = {0}, why_sum = 0;
        int stalled = 0;
        span = 0;
        for (int f = 0; f < O.nflows; f++) {
            flow_t *fl = &flows[f];
            pp_conn_t *c = &eps[2 * f].c;
            uint64_t k = fl->nwin < 4096 ? fl->nwin : 4096;
            bad += fl->bad_bytes + eps[2 * f + 1].c.st.rx_discarded;
            retx += c->st.retx_fast + c->st.retx_timeout;
            rto += c->st.retx_timeout;
            spur += c->st.spurious;
            tx_pkts += c->st.tx_pkts;
            nwin += fl->nwin;
            if (O.nflows > 1 && marked && end_ns > mark_ns) {
                /* each flow's own window span would differ from the others',
                 * and their rates would add up past the links (2.05 Gbit/s
                 * on 2 x 1g): every flow is measured over one interval */
                fgood[f] = (double)(fl->rx_bytes - fl->rx_mark) * 8 / ((double)(end_ns - mark_ns) * 1e-9);
                span = (double)(end_ns - mark_ns) * 1e-9;
            } else if (k >= 2) {
                double s = (double)(fl->win_done_ns[k - 1] - fl->win_done_ns[0]) * 1e-9;
                fgood[f] = (double)(k - 1) * (double)O.window * (double)O.msg_size * 8 / s;
                if (s > span) span = s;
            } else if (end_ns) {
                fgood[f] = (double)fl->msgs_ok * (double)O.msg_size * 8 / ((double)end_ns * 1e-9);
            }
            goodput += fgood[f];
            if (fl->phase != 3 && end_ns - fl->last_progress > 1000000000ull && end_ns >= O.duration_ns)
                stalled = 1;
            for (int w = 0; w < WHY_N; w++) {
                why_tot[w] += (double)eps[2 * f].why_ns[w];
                why_sum += (double)eps[2 * f].why_ns[w];
            }
        }
        if (O.quiet) {
            printf("%.4f\n", goodput * 1e-9);
        } else if (O.json) {
            printf("{\"scenario\":\"%s\",\"cc\":\"%s\",\"lb\":\"%s\",\"seed\":%" PRIu64
                   ",\"paths\":%u,\"flows\":%d,\"sim_ns\":%" PRIu64 ",\"windows\":%" PRIu64
                   ",\"goodput_bps\":%.0f,\"ceiling_bps\":%.0f,\"link_sum_bps\":%.0f,"
                   "\"bad_bytes\":%" PRIu64 ",\"retx\":%" PRIu64 ",\"retx_timeout\":%" PRIu64
                   ",\"spurious\":%" PRIu64 ",\"tx_pkts\":%" PRIu64 ",\"stalled\":%d,\"flow_goodput_bps\":[",
                   O.scenario, O.cc, O.lb, O.seed, O.npaths, O.nflows, end_ns, nwin, goodput,
                   ceiling, sumrate, bad, retx, rto, spur, tx_pkts, stalled);
            for (int f = 0; f < O.nflows; f++)
                printf("%s%.0f", f ? "," : "", fgood[f]);
            printf("],\"links\":[");
            for (int i = 0; i < nlinks; i++) {
                link_t *l = &links[i];
                double secs = (double)end_ns * 1e-9;
                printf("%s{\"rate_bps\":%" PRIu64 ",\"util\":%.4f,\"rev_util\":%.4f,\"qdrops\":%" PRIu64
                       ",\"loss_drops\":%" PRIu64 ",\"idle_with_data\":%.4f}",
                       i ? "," : "", l->rate_bps, (double)l->d[0].tx_bytes * 8 / ((double)l->rate_bps * secs),
                       (double)l->d[1].tx_bytes * 8 / ((double)l->rate_bps * secs),
                       l->d[0].qdrops + l->d[1].qdrops, l->d[0].ldrops + l->d[1].ldrops,
                       (double)l->d[0].idle_ns / (double)end_ns);
            }
            printf("],\"sender_time\":{");
            for (int w = 0; w < WHY_N; w++)
                printf("%s\"%s\":%.4f", w ? "," : "", why_keys[w], why_sum ? why_tot[w] / why_sum : 0);
            printf("}}\n");
        } else {
            printf("plait-sim: scenario %s, cc %s, lb %s, %u paths, %d flow(s), seed %" PRIu64 "\n",
                   O.scenario, O.cc, O.lb, O.npaths, O.nflows, O.seed);
            printf("  messages %" PRIu64 " B x window %u, %.3f s simulated, %" PRIu64 " windows\n",
                   O.msg_size, O.window, (double)end_ns * 1e-9, nwin);
            printf("  goodput      %.3f Gbit/s  (%.1f%% of links %.3f, %.1f%% of the header-bound "
                   "ceiling %.3f)\n", goodput * 1e-9, 100 * goodput / sumrate, sumrate * 1e-9,
                   100 * goodput / ceiling, ceiling * 1e-9);
            for (int f = 0; O.nflows > 1 && f < O.nflows; f++)
                printf("  flow %d       %.3f Gbit/s\n", f, fgood[f] * 1e-9);
            printf("  check        %s (%" PRIu64 " bad words)\n", bad ? "FAILED" : "every byte intact",
                   bad);
            printf("  retransmits  %" PRIu64 " (%.3f%% of %" PRIu64 " packets; %" PRIu64
                   " by timeout, %" PRIu64 " spurious)\n", retx,
                   tx_pkts ? 100.0 * (double)retx / (double)tx_pkts : 0, tx_pkts, rto, spur);
            printf("  link      rate   util  rev-util  q-drops  loss-drops  idle-with-data\n");
            for (int i = 0; i < nlinks; i++) {
                link_t *l = &links[i];
                double secs = (double)end_ns * 1e-9;
                printf("  %-4d %8.3gG %6.1f%% %8.1f%% %8" PRIu64 " %11" PRIu64 " %14.1f%%\n", i,
                       (double)l->rate_bps * 1e-9,
                       100 * (double)l->d[0].tx_bytes * 8 / ((double)l->rate_bps * secs),
                       100 * (double)l->d[1].tx_bytes * 8 / ((double)l->rate_bps * secs),
                       l->d[0].qdrops + l->d[1].qdrops, l->d[0].ldrops + l->d[1].ldrops,
                       100 * (double)l->d[0].idle_ns / (double)end_ns);
            }
            printf("  sender time:");
            for (int w = 0; w < WHY_N; w++)
                if (why_tot[w] > 0)
                    printf(" %s %.1f%%,", why_names[w], why_sum ? 100 * why_tot[w] / why_sum : 0);
            printf("\n");
            for (int f = 0; f < O.nflows; f++) {
                pp_conn_t *b = &eps[2 * f + 1].c, *a = &eps[2 * f].c;
                printf("  flow %d: receiver drops:", f);
                for (int r = 0; r < PP_DROP_N; r++)
                    if (b->st.drops[r])
                        printf(" %s %" PRIu64, pp_drop_name(r), b->st.drops[r]);
                printf("; sender: loss events %" PRIu64 ", cwnd %.0f, srtt %.2f ms\n",
                       a->st.loss_events, a->cc.cwnd, (double)a->srtt_ns * 1e-6);
            }
            if (stalled)
                printf("  STALLED: no message completed in the last second\n");
        }
        for (int f = 0; f < O.nflows; f++) {
            for (uint32_t w = 0; w < O.window; w++)
                free(flows[f].rbuf[w]);
            free(flows[f].rbuf);
            free(flows[f].frames_got);
            pp_conn_fini(&eps[2 * f].c);
            pp_conn_fini(&eps[2 * f + 1].c);
        }
        while (nheap)
            free(ev_pop().pkt);
        free(heap);
        free(scratch);
        for (int i = 0; i < nlinks; i++)
            for (int d = 0; d < 2; d++) {
                free(links[i].d[d].dep);
                free(links[i].d[d].sz);
            }
        return bad ? 4 : stalled ? 3 : 0;
    }
}
