/*
 * conn.c -- one connection of the multipath protocol: sender (messages ->
 * chunks -> packets, SACK scoreboard, fast retransmit, RTO, give-up) and
 * receiver (checks, placement at offset, cumulative ACK + SACK bitmap,
 * in-order delivery, flow control). Pure logic: see pp.h.
 */
#include "transport/proto/pp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Signed distance a - b in PSN / message-id space (both wrap at 2^32). */
static inline int32_t sdiff(uint32_t a, uint32_t b) { return (int32_t)(a - b); }

/* The in-flight index (infl_bits): set when a packet goes out or is resent,
 * cleared when it is acknowledged or marked lost, by PP_WIN slot. */
static inline void infl_set(pp_conn_t *c, uint32_t slot)
{
    c->infl_bits[slot % PP_WIN / 64] |= 1ull << (slot % 64);
}

static inline void infl_clr(pp_conn_t *c, uint32_t slot)
{
    c->infl_bits[slot % PP_WIN / 64] &= ~(1ull << (slot % 64));
}

/* Bit i % PP_WIN of a PP_WIN-bit byte bitmap: the receive bitmap
 * (rcv_bits, by PSN) and the SACKed index (sack_bits, by slot: set when a
 * packet is SACKed, cleared when the cumulative ACK passes it). */
static inline int bit_get(const uint8_t *b, uint32_t i) { return b[(i % PP_WIN) / 8] >> (i % 8) & 1; }
static inline void bit_set(uint8_t *b, uint32_t i) { b[(i % PP_WIN) / 8] |= (uint8_t)(1u << (i % 8)); }
static inline void bit_clr(uint8_t *b, uint32_t i) { b[(i % PP_WIN) / 8] &= (uint8_t)~(1u << (i % 8)); }

/* The first PSN in [psn, end) whose packet is in flight, or end: a word
 * of the index at a time (in a window of thousands of SACKed packets after
 * a hole, a slow path's few in flight are found without visiting the rest). */
static uint32_t next_inflight(const pp_conn_t *c, uint32_t psn, uint32_t end)
{
    while (sdiff(end, psn) > 0) {
        uint32_t slot = psn % PP_WIN;
        uint64_t w = c->infl_bits[slot / 64] >> (slot % 64);
        if (w) {
            psn += (uint32_t)__builtin_ctzll(w);
            return sdiff(end, psn) > 0 ? psn : end;
        }
        psn += 64 - slot % 64;
    }
    return end;
}

static const char *const drop_names[PP_DROP_N] = {
    "truncated", "not-plait", "foreign-job-or-wrong-dst", "wrong-conn", "stale-epoch",
    "out-of-window", "out-of-bounds", "inconsistent", "no-buffer", "bad-ack", "duplicate"};

const char *pp_drop_name(int r) { return r >= 0 && r < PP_DROP_N ? drop_names[r] : "?"; }

static const char *const wait_names[PP_WAIT_N] = {"none", "cc-window", "receiver-window",
                                                  "path-windows", "pacing", "psn-window",
                                                  "caller (queue ran dry)"};

const char *pp_wait_name(int r) { return r >= 0 && r < PP_WAIT_N ? wait_names[r] : "?"; }

void pp_cfg_default(pp_cfg_t *c)
{
    memset(c, 0, sizeof *c);
    c->chunk = 32768;
    c->mtu = 1400;
    c->npaths = 32;
    c->dupthresh = 128;
    c->small = 8192;
    c->rto_min_ns = 500000;
    c->rto_max_ns = 50000000;
    c->give_up_ns = 30000000000ull;
    c->tx_buf_max = 16u << 20;
    c->rx_buf_max = 32u << 20;
    c->max_msg = 4u << 20;
    c->init_cwnd = 256u << 10;
    c->seed = 0x9e3779b97f4a7c15ull;
    c->cc = &pp_cc_cubic;
    c->lb = &pp_lb_pwin;   /* as PLAIT_LB's default (runtime/config.c), so plait-sim runs what users get */
}

/* SipHash-2-4 (Aumasson, Bernstein) of one 64-bit word, keyed with
 * (k0, k1): a pseudo-random function, so the tags seen on the wire tell
 * nothing about the key, and any change of key, src or dst changes the tag. */
static inline uint64_t rotl64(uint64_t x, int b) { return x << b | x >> (64 - b); }

#define SIPROUND(v0, v1, v2, v3)                                                         \
    do {                                                                                  \
        v0 += v1; v1 = rotl64(v1, 13); v1 ^= v0; v0 = rotl64(v0, 32);                   \
        v2 += v3; v3 = rotl64(v3, 16); v3 ^= v2;                                        \
        v0 += v3; v3 = rotl64(v3, 21); v3 ^= v0;                                        \
        v2 += v1; v1 = rotl64(v1, 17); v1 ^= v2; v2 = rotl64(v2, 32);                   \
    } while (0)

static uint64_t siphash24_word(uint64_t k0, uint64_t k1, uint64_t m)
{
    uint64_t v0 = k0 ^ 0x736f6d6570736575ull, v1 = k1 ^ 0x646f72616e646f6dull;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ull, v3 = k1 ^ 0x7465646279746573ull;
    uint64_t b = (uint64_t)8 << 56;   /* the final block: the message length, 8 bytes */
    v3 ^= m;
    SIPROUND(v0, v1, v2, v3);
    SIPROUND(v0, v1, v2, v3);
    v0 ^= m;
    v3 ^= b;
    SIPROUND(v0, v1, v2, v3);
    SIPROUND(v0, v1, v2, v3);
    v0 ^= b;
    v2 ^= 0xff;
    for (int i = 0; i < 4; i++)
        SIPROUND(v0, v1, v2, v3);
    return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t pp_tag(uint64_t key, uint32_t src, uint32_t dst)
{
    return siphash24_word(key, key ^ 0x706c616974746167ull /* "plaittag" */,
                          (uint64_t)src | (uint64_t)dst << 32);
}

uint64_t pp_rand(pp_conn_t *c)
{
    uint64_t x = c->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    c->rng = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* Only a path acknowledged lately (pp_qrtt_fresh, with twice the queue
 * target as slack) says what its queue is now: a stream that moved to
 * other paths (small messages are not sprayed) must not have swift's delay,
 * pwin's queue cut and its lateness test read an old empty queue there as
 * the least queued path. (CUBIC's hold uses pp_recent_min_rtt instead.) */
uint64_t pp_least_qrtt(const pp_conn_t *c, uint64_t now)
{
    uint64_t best = 0;
    for (uint32_t p = 0; p < c->cfg.npaths; p++) {
        uint64_t q = c->paths[p].qrtt_ns;
        if (q && (!best || q < best) && pp_qrtt_fresh(&c->paths[p], now, 2 * PP_QUEUE_TARGET_NS))
            best = q;
    }
    return best;
}

/* The least of the connection's latest PP_RTT_RING RTT samples (any
 * path), 0 before PP_RTT_RING / 8 of them: a statistic of a fixed number of
 * samples, whatever the number of paths they came from (see CUBIC's hold). */
uint64_t pp_recent_min_rtt(const pp_conn_t *c)
{
    uint32_t n = c->rtt_ring_n < PP_RTT_RING ? c->rtt_ring_n : PP_RTT_RING, least = UINT32_MAX;
    if (n < PP_RTT_RING / 8)
        return 0;
    for (uint32_t i = 0; i < n; i++)
        if (c->rtt_ring[i] < least)
            least = c->rtt_ring[i];
    return least;
}

int pp_conn_init(pp_conn_t *c, const pp_cfg_t *cfg)
{
    memset(c, 0, sizeof *c);
    c->cfg = *cfg;
    if (c->cfg.npaths < 1)
        c->cfg.npaths = 1;
    if (c->cfg.npaths > PP_MAX_PATHS)
        c->cfg.npaths = PP_MAX_PATHS;
    if (c->cfg.mtu < 64 || c->cfg.mtu > 65000 || c->cfg.chunk < c->cfg.mtu / 4 || !c->cfg.cc ||
        !c->cfg.lb || c->cfg.max_msg > UINT32_MAX || c->cfg.dupthresh < 1)
        return -1;
    /* Chunks of whole packets: 32768 bytes at a 1420-byte payload would end
     * every chunk in a 108-byte packet, a full header for a sliver (0.3% of
     * a shaped link's goodput); 32660 bytes are 23 full packets. */
    if (c->cfg.chunk > c->cfg.mtu)
        c->cfg.chunk -= c->cfg.chunk % c->cfg.mtu;
    c->rng = cfg->seed ? cfg->seed : 1;
    c->tx_tag = pp_tag(c->cfg.key, c->cfg.me, c->cfg.peer);
    c->rx_tag = pp_tag(c->cfg.key, c->cfg.peer, c->cfg.me);
    c->paths = calloc(c->cfg.npaths, sizeof *c->paths);
    c->pk = calloc(PP_WIN, sizeof *c->pk);
    if (!c->paths || !c->pk) {
        pp_conn_fini(c);
        return -1;
    }
    c->snd_una = c->snd_nxt = c->recover = cfg->tx_isn;
    c->tx_next_msg = cfg->tx_isn;
    c->rcv_cum = c->rcv_msg = cfg->rx_isn;
    c->rwnd = cfg->rx_buf_max;
    c->rwnd_said = cfg->rx_buf_max;
    c->rto_floor_ns = c->cfg.rto_min_ns;
    c->reo_steps = 1;
    c->cfg.cc->init(c);
    if (c->cfg.lb->init)
        c->cfg.lb->init(c);
    return 0;
}

/* Frees a message and the payload copy it owns (never a caller's buffer). */
static void msg_destroy(pp_msg_t *m)
{
    if (m && m->ref_owned)
        free((void *)m->ref);
    free(m);
}

void pp_conn_fini(pp_conn_t *c)
{
    pp_msg_t *m, *n;
    for (m = c->tx_head; m; m = n) {
        n = m->next;
        msg_destroy(m);
    }
    for (m = c->zc_done; m; m = n) {
        n = m->next;
        msg_destroy(m);
    }
    for (m = c->retired; m; m = n) {
        n = m->next;
        msg_destroy(m);
    }
    c->zc_done = c->zc_done_tail = c->retired = NULL;
    c->tx_pins = 0;
    c->zc_refs = 0;
    for (int i = 0; i < PP_WIN; i++)
        free(c->rmsg[i]);
    while (c->ncache > 0)
        free(c->cache[--c->ncache]);
    c->cache_bytes = 0;
    free(c->paths);
    free(c->pk);
    c->paths = NULL;
    c->pk = NULL;
    c->tx_head = c->tx_tail = c->tx_cut = NULL;
    memset(c->rmsg, 0, sizeof c->rmsg);
}

/* ---------------------------------------------------------------- buffers */

/* A message with room for len bytes, its header cleared. Buffers of PP_MSG_BIG
 * bytes and more come in powers of two from a per-connection cache (best fit);
 * a miss frees the smallest cached one, so buffers of an earlier, smaller
 * message size do not pin the cache while every larger message pays a fresh
 * mmap and its page faults. */
static pp_msg_t *msg_alloc(pp_conn_t *c, size_t len)
{
    pp_msg_t *m = NULL;
    size_t cap = len;
    if (len >= PP_MSG_BIG) {
        int best = -1, small = -1;
        for (cap = PP_MSG_BIG; cap < len; cap *= 2)
            ;
        for (int i = 0; i < c->ncache; i++) {
            uint32_t k = c->cache[i]->cap;
            if (k >= len && (best < 0 || k < c->cache[best]->cap))
                best = i;
            if (small < 0 || k < c->cache[small]->cap)
                small = i;
        }
        if (best >= 0) {
            m = c->cache[best];
            c->cache[best] = c->cache[--c->ncache];
            cap = m->cap;
            c->cache_bytes -= cap;
        } else if (small >= 0) {
            c->cache_bytes -= c->cache[small]->cap;
            free(c->cache[small]);
            c->cache[small] = c->cache[--c->ncache];
        }
    }
    if (!m && !(m = malloc(sizeof *m + cap)))
        return NULL;
    memset(m, 0, sizeof *m);
    m->cap = (uint32_t)cap;
    m->data = (uint8_t *)(m + 1);
    return m;
}

static void msg_free(pp_conn_t *c, pp_msg_t *m)
{
    if (m && m->cap >= PP_MSG_BIG && c->ncache < PP_MSG_CACHE &&
        c->cache_bytes + m->cap <= PP_MSG_CACHE_BYTES) {
        c->cache[c->ncache++] = m;   /* never a referenced one: those hold a header only */
        c->cache_bytes += m->cap;
    } else {
        msg_destroy(m);
    }
}

/* ----------------------------------------------------------------- sender */

int pp_send(pp_conn_t *c, const void *hdr, size_t hlen, const void *payload, size_t plen)
{
    return pp_send_placed(c, hdr, hlen, payload, plen, UINT64_MAX, 0);
}

/* Queues a message; ref: the payload stays in the caller's buffer. */
static int msg_queue(pp_conn_t *c, const void *hdr, size_t hlen, const void *payload, size_t plen,
                     uint64_t place_id, uint64_t place_off, int ref, uint64_t cookie)
{
    size_t len = hlen + plen;
    pp_msg_t *m;
    if (hlen == 0 || hlen > PP_MAX_HLEN || len > c->cfg.max_msg || (ref && plen == 0) ||
        (place_id != UINT64_MAX && place_off > UINT32_MAX))   /* place_off travels in 32 bits */
        return -1;
    /* Bounded buffering: one message always fits, more only below the cap.
     * Referenced bytes count as well: they are the caller's memory pinned
     * by the protocol, and a slow receiver must not pin without bound. */
    if (c->tx_head && c->tx_buffered + len > c->cfg.tx_buf_max) {
        c->st.tx_blocked++;
        c->tx_was_blocked = 1;
        return 1;
    }
    m = msg_alloc(c, ref ? hlen : len);
    if (!m)
        return 1;
    memcpy(m->data, hdr, hlen);
    if (ref && plen) {
        m->ref = payload;
        m->cookie = cookie;
        c->zc_refs++;
        c->st.tx_ref_msgs++;
    } else if (plen) {
        memcpy(m->data + hlen, payload, plen);
    }
    m->id = c->tx_next_msg++;
    m->len = (uint32_t)len;
    m->hlen = (uint32_t)hlen;
    m->placed = place_id != UINT64_MAX;
    m->place_id = place_id;
    m->place_off = place_off;
    m->prev = c->tx_tail;
    if (c->tx_tail)
        c->tx_tail->next = m;
    else
        c->tx_head = m;
    c->tx_tail = m;
    if (!c->tx_cut)
        c->tx_cut = m;
    c->tx_buffered += len;
    c->tx_unsent += len;
    c->st.tx_msgs++;
    return 0;
}

int pp_send_placed(pp_conn_t *c, const void *hdr, size_t hlen, const void *payload, size_t plen,
                   uint64_t place_id, uint64_t place_off)
{
    return msg_queue(c, hdr, hlen, payload, plen, place_id, place_off, 0, 0);
}

int pp_send_ref(pp_conn_t *c, const void *hdr, size_t hlen, const void *payload, size_t plen,
                uint64_t place_id, uint64_t place_off, uint64_t cookie)
{
    return msg_queue(c, hdr, hlen, payload, plen, place_id, place_off, 1, cookie);
}

/* Failed: nothing is sent again (pp_tx_next), so every referenced buffer
 * is free once no thread still hands earlier packets to the kernel. */
static int zc_failed_free(const pp_conn_t *c)
{
    return c->failed && !c->tx_pins && c->zc_refs;
}

int pp_zc_ready(const pp_conn_t *c) { return c->zc_done || zc_failed_free(c); }

int pp_zc_reap(pp_conn_t *c, pp_zc_t *out, int max)
{
    int n = 0;
    while (n < max && c->zc_done) {
        pp_msg_t *m = c->zc_done;
        c->zc_done = m->next;
        if (!c->zc_done)
            c->zc_done_tail = NULL;
        out[n++] = (pp_zc_t){m->cookie, 0};
        msg_destroy(m);
    }
    for (pp_msg_t *m = c->tx_head; zc_failed_free(c) && m && n < max; m = m->next)
        if (m->ref && !m->ref_owned) {
            out[n++] = (pp_zc_t){m->cookie, 1};
            m->ref = NULL;
            c->zc_refs--;
        }
    return n;
}

int pp_zc_detach(pp_conn_t *c, uint64_t cookie)
{
    pp_msg_t **pm = &c->zc_done, *last = NULL;
    if (c->tx_pins)
        return PP_BUSY;
    for (pp_msg_t *m = c->tx_head; m; m = m->next) {
        uint8_t *copy;
        if (!m->ref || m->ref_owned || m->cookie != cookie)
            continue;
        if (!(copy = malloc(m->len - m->hlen)))
            return -1;
        memcpy(copy, m->ref, m->len - m->hlen);
        m->ref = copy;
        m->ref_owned = 1;
        c->zc_refs--;
    }
    while (*pm) {   /* acknowledged already: not reported either */
        pp_msg_t *m = *pm;
        if (m->cookie == cookie) {
            *pm = m->next;
            msg_destroy(m);
            continue;
        }
        last = m;
        pm = &m->next;
    }
    c->zc_done_tail = last;
    return 0;
}

/* Two lanes (even and odd 8-byte words) of one multiply per word, each
 * step a bijection of its lane: any change confined to one word (a flipped
 * byte, a field) changes that lane and so the result; the last mix spreads
 * it over every bit. Two lanes halve the chain of dependent multiplies: a
 * 52-byte header 8.1 ns on the VM (one lane 11.6, the first version with a
 * copy of any length per word 24; a 1072-byte ACK 70 ns). Byte order is the
 * host's (see the wire format above). */
uint64_t pp_hdr_sum(const void *hdr, size_t len)
{
    const uint8_t *p = hdr;
    const uint64_t k = 0xff51afd7ed558ccdull;
    uint64_t h0 = (uint64_t)len * 0x9e3779b97f4a7c15ull, h1 = 0x6a09e667f3bcc908ull, w0, w1;
    uint32_t v;
    size_t i = 0;
    _Static_assert(offsetof(pp_hdr_t, tag) % 16 == 0, "the tag opens a pair of words");
    for (; i + 16 <= len; i += 16) {
        memcpy(&w0, p + i, 8);
        memcpy(&w1, p + i + 8, 8);
        h0 = (h0 ^ (i == offsetof(pp_hdr_t, tag) ? 0 : w0)) * k;
        h1 = (h1 ^ w1) * k;
    }
    if (i + 8 <= len) {
        memcpy(&w0, p + i, 8);
        h0 = (h0 ^ w0) * k;
        i += 8;
    }
    if (i + 4 <= len) {
        memcpy(&v, p + i, 4);
        h1 = (h1 ^ v) * k;
        i += 4;
    }
    for (; i < len; i++)
        h0 = (h0 ^ p[i]) * k;
    h0 ^= h1 * 0xc4ceb9fe1a85ec53ull;
    h0 ^= h0 >> 33;
    h0 *= 0xc4ceb9fe1a85ec53ull;
    return h0 ^ (h0 >> 33);
}

void pp_seal(void *hdr, size_t len, uint64_t tag)
{
    uint64_t v = tag ^ pp_hdr_sum(hdr, len);
    memcpy((uint8_t *)hdr + offsetof(pp_hdr_t, tag), &v, sizeof v);
}

static void fill_common(pp_conn_t *c, pp_hdr_t *h, int type, int path)
{
    h->magic = PP_MAGIC;
    h->type = (uint8_t)type;
    h->flags = 0;
    h->path = (uint16_t)path;
    h->hlen = 0;
    h->ack_via = 0;
    h->src = c->cfg.me;
    h->epoch = c->cfg.my_epoch;
    h->tag = 0;   /* pp_seal writes it once the whole header is built */
}

/* The message bytes [off, off + len) as one or two pieces: a referenced
 * message keeps its header apart from the payload. */
static void out_bytes(const pp_msg_t *m, uint32_t off, uint32_t len, pp_out_t *out)
{
    uint32_t h = off < m->hlen ? m->hlen - off : 0;
    out->payload2 = NULL;
    out->len2 = 0;
    if (!m->ref || h >= len) {
        out->payload = m->data + off;
        out->len = len;
    } else if (h == 0) {
        out->payload = m->ref + (off - m->hlen);
        out->len = len;
    } else {
        out->payload = m->data + off;
        out->len = h;
        out->payload2 = m->ref;
        out->len2 = len - h;
    }
}

/* Whether the ACK owed to the peer can ride on a data packet: nothing but
 * the cumulative ACK to say (no SACK bit past a hole, no new credit grant,
 * no new duplicate count). */
static int ack_piggyable(const pp_conn_t *c)
{
    return c->ack_pending && !c->rcv_ahead && c->credit_grant == c->credit_said &&
           (uint32_t)c->st.drops[PP_DROP_DUP] == c->dups_said;
}

/* The owed ACK went (its own packet, or riding on data). */
static void ack_said(pp_conn_t *c)
{
    c->ack_pending = 0;
    c->ack_urgent = 0;
    c->ack_owed_bytes = 0;
    c->ack_owed_ns = 0;
    c->st.acks_tx++;
}

/* The ACK rides on the last packet of a chunk, and only where the 4 bytes
 * leave it no longer than a full packet: the chunk's packets go to the
 * kernel as one GSO datagram, whose segments must all have the size of the
 * first but for a shorter last one. On the first packet it made that one
 * longer and split every reply of three packets or more into two datagrams
 * (4 KiB ping-pong between namespace hosts: 19 us half round trip against
 * 9 for 2 KiB). */
static int piggy_fits(const pp_conn_t *c, const pp_pkt_t *p)
{
    return !p->msg->placed && p->chunk_end && p->len + PP_PIGGY_LEN <= c->cfg.mtu;
}

static uint8_t ack_via_hint(const pp_conn_t *c);

static void build_data(pp_conn_t *c, uint32_t psn, const pp_pkt_t *p, pp_out_t *out)
{
    pp_data_t d;
    int piggy = piggy_fits(c, p) && ack_piggyable(c);
    memset(&d, 0, sizeof d);
    fill_common(c, &d.h, PP_T_DATA, p->path);
    d.h.flags = (uint8_t)((p->retx ? PP_F_RETX : 0) | (p->chunk_end ? PP_F_CHUNK_END : 0) |
                          (p->msg->placed ? PP_F_PLACED : 0) | (piggy ? PP_F_ACK : 0));
    d.h.hlen = (uint8_t)p->msg->hlen;
    d.h.ack_via = ack_via_hint(c);
    d.psn = psn;
    d.msg = p->msg->id;
    d.off = p->off;
    d.msg_len = p->msg->len;
    memcpy(out->hdr, &d, sizeof d);
    out->hdr_len = sizeof d;
    if (p->msg->placed) {
        pp_place_t pl;
        memcpy(pl.place_id, &p->msg->place_id, sizeof pl.place_id);
        pl.place_off = (uint32_t)p->msg->place_off;   /* checked by msg_queue */
        memcpy(out->hdr + sizeof d, &pl, sizeof pl);
        out->hdr_len += sizeof pl;
    }
    if (piggy) {   /* the owed ACK rides here: no ACK packet for it */
        memcpy(out->hdr + sizeof d, &c->rcv_cum, PP_PIGGY_LEN);
        out->hdr_len += PP_PIGGY_LEN;
        ack_said(c);
        c->st.acks_piggy++;
    }
    pp_seal(out->hdr, out->hdr_len, c->tx_tag);
    out_bytes(p->msg, p->off, p->len, out);
    out->path = p->path;
}

/* ------------------------------------------------- path quarantine
 *
 * A path whose packets stopped arriving (a dead link, a blackholing switch
 * port, a firewall rule on one port pair) would otherwise keep its share of
 * chunks: each one waits out its timeout before it is resent elsewhere, at
 * a window that never falls below one chunk. plait-sim, 2 x 1 Gbit/s with
 * one link dropping everything: 0.06-0.49 Gbit/s of the other link's 0.94
 * (by LB), and on the namespace bed 0.15 Gbit/s.
 *
 * A path is taken down after PP_DOWN_TIMEOUTS timeouts of its packets,
 * each packet sent after the one before had timed out (a burst of losses
 * counts once), each with nothing sent on the path since delivered
 * (acked_sent_ns) while the peer did acknowledge other data after it was
 * sent (acked_ns). A congested path loses part of its packets and
 * delivers the rest; a random loss is found by the packets after it; a
 * peer that stopped acknowledging (descheduled, paused) silences every
 * path at once, and when it answers again the packets sent since arrive,
 * so a stall counts once at most. None of them takes a path down.
 *
 * A down path's packets in flight are marked lost at once (resent on live
 * paths, not each after its own timeout), and it takes no chunk but a
 * probe of one packet, the first PP_DOWN_PROBE_NS later, then at doubling
 * gaps up to PP_DOWN_PROBE_MAX_NS. The probe times out after the RTO of
 * the RTT alone (probe_rto: not the path's own, not the adapted floor, not
 * backed off), so a probe into a still dead path delays its message by
 * about one RTT-based RTO. An original packet of the path acknowledged
 * brings it back (pkt_acked) with a fresh window (the LB's path_up). Small
 * messages and our ACKs leave a down port pair (chunk_start, ack_path).
 * The last live path is never taken down.
 *
 * A rank learns which port pairs are dead from its own data only, and its
 * ACKs take its own path of the index the peer's data came on: in its
 * direction that port pair may cross the dead link although the peer's of
 * that index does not (each direction hashes its own ports). A receiver
 * with little data of its own (one-way traffic) so keeps ACKing on dead
 * pairs, and its peer's timers fire on packets that arrived, raise the RTO
 * floor and resend. So while a sender has paths down, its data names in
 * ack_via (pp_hdr_t) the receiver's path its last packet came on: one that
 * delivers in the receiver's direction, which the receiver's ACKs then
 * take (ack_path). With no path down the header says nothing and ACKs
 * follow the data as before, and so it does when nothing came from the
 * peer for an RTO: the path named may have died since, and the ACKs that
 * follow the data find live ones again. */

static void mark_lost(pp_conn_t *c, uint32_t psn, pp_pkt_t *p, int timeout, uint64_t now);

/* The first path after avoid (cyclically) that is not down; avoid itself
 * when every other one is. */
static int path_fallback(const pp_conn_t *c, int avoid)
{
    int n = (int)c->cfg.npaths;
    for (int i = 1; i < n; i++) {
        int p = (avoid + i) % n;
        if (!c->paths[p].down)
            return p;
    }
    return avoid;
}

static void path_down(pp_conn_t *c, int path, uint64_t now)
{
    pp_path_t *pa = &c->paths[path];
    pa->down = 1;
    c->ndown++;
    pa->tmo_row = 0;
    pa->down_gap = PP_DOWN_PROBE_NS;
    pa->down_until = now + PP_DOWN_PROBE_NS;
    pa->st.downs++;
    for (uint32_t psn = next_inflight(c, c->snd_una, c->snd_nxt); sdiff(c->snd_nxt, psn) > 0;
         psn = next_inflight(c, psn + 1, c->snd_nxt)) {
        pp_pkt_t *p = &c->pk[psn % PP_WIN];
        if (p->path == path)
            mark_lost(c, psn, p, 1, now);
    }
}

/* A packet sent on path at sent, found lost at found (its timeout), was
 * lost there while the peer lived: counted towards taking the path down
 * unless something sent on it later arrived or an earlier loss of the same
 * episode was counted. */
static void path_timeout_found(pp_conn_t *c, int path, uint64_t sent, uint64_t found,
                               uint64_t now)
{
    pp_path_t *pa = &c->paths[path];
    if (pa->down || pa->acked_sent_ns >= sent)
        return;   /* down already, or something sent on it later arrived */
    if (pa->tmo_row && sent <= pa->tmo_ns)
        return;   /* sent before the last one counted: the same episode */
    pa->tmo_ns = found;
    if (++pa->tmo_row >= PP_DOWN_TIMEOUTS && c->ndown + 1 < c->cfg.npaths)
        path_down(c, path, now);
}

/* A timeout of packet p, on its path: see the block above. With no ACK
 * since it went the peer may have stalled (every path silent at once): the
 * path is blamed later, if at all, when p arrives by a copy sent elsewhere
 * and the peer reports no duplicate for it (pkt_acked: the copy that timed
 * out never arrived). Sequential traffic has nothing else in flight, so
 * without this a dead path 0 (every small message's) was never taken down:
 * each message waited out its timeout there. */
static void path_timeout(pp_conn_t *c, pp_pkt_t *p, uint64_t now)
{
    if (c->acked_ns <= p->sent_ns) {
        p->silent_path = (uint16_t)(p->path + 1);
        return;
    }
    path_timeout_found(c, p->path, p->sent_ns, now, now);
}

/* An original packet of path was acknowledged: it delivers. */
static void path_delivered(pp_conn_t *c, int path)
{
    pp_path_t *pa = &c->paths[path];
    pa->tmo_row = 0;
    if (!pa->down)
        return;
    pa->down = 0;
    c->ndown--;
    pa->penalty_until = 0;
    if (c->cfg.lb->path_up)
        c->cfg.lb->path_up(c, path);
}

/* The ceiling of every timeout: the configured one (50 ms: a datacenter's
 * round trips are well under it, and a real loss should not wait longer),
 * or four smoothed RTTs where packets take longer than an eighth of that.
 * A fixed 50 ms under links whose queues hold up to 400 ms (2 x 5 Mbit/s,
 * tbf with a 256 KB bucket: t-netns' pt2pt_slow) timed every packet out
 * before its ACK could come: 91685 timeout retransmissions and 22 times
 * the message's bytes sent, paths taken down as dead over and over, 4 MiB
 * in 6.5-7.7 s where the links carry it in 3.4. Four RTTs, not two: such
 * queues swing between empty and full, and plait-sim (2 x 2 Mbit/s, 1 s
 * queues, seeds 1-3) resent half as much and moved 3.38-3.43 Mbit/s of 4
 * against 2.86-3.27 with two (with 1% loss 3.22-3.36 against 2.77-3.24). */
static uint64_t rto_ceiling(const pp_conn_t *c)
{
    return 4 * c->srtt_ns > c->cfg.rto_max_ns ? 4 * c->srtt_ns : c->cfg.rto_max_ns;
}

/* The RTO from the smoothed RTT (twice floor before a sample), at least
 * floor, at most the ceiling. */
static uint64_t rto_above(const pp_conn_t *c, uint64_t floor)
{
    uint64_t rto = c->srtt_ns ? c->srtt_ns + 4 * c->rttvar_ns : 2 * floor;
    uint64_t ceiling = rto_ceiling(c);
    if (rto < floor)
        rto = floor;
    return rto > ceiling ? ceiling : rto;
}

/* A probe's timeout: the RTO from the RTT alone. Not the adapted floor
 * (rto_floor_ns): a floor raised by spurious timeouts (12.5 ms at most)
 * would hold the probe's message that long at every probe, and a probe
 * declared lost early costs one resent packet. */
static uint64_t probe_rto(const pp_conn_t *c) { return rto_above(c, c->cfg.rto_min_ns); }

/* The path for an ACK of our own: the one the peer's data named in
 * ack_via (it heard from us there lately: see the block above), else the
 * one its last data came on (echo_path: the reverse of a path the peer's
 * packets take), unless our own data found that port pair dead: then a
 * live one. */
static int ack_path(const pp_conn_t *c)
{
    int p = (int)(c->ack_echo_path % c->cfg.npaths);
    if (c->ack_via && !c->paths[c->ack_via - 1].down)
        return c->ack_via - 1;
    return c->paths[p].down ? path_fallback(c, p) : p;
}

/* What our data says in ack_via: see the block above. */
static uint8_t ack_via_hint(const pp_conn_t *c)
{
    if (!c->ndown || !c->heard_path || c->heard_path > UINT8_MAX ||
        c->now - c->heard_ns >= probe_rto(c))
        return 0;
    return (uint8_t)c->heard_path;
}

/* A chunk on a down path is its probe: one packet, and the next probe
 * twice as far off. */
static uint32_t path_probe(pp_conn_t *c, int path, uint32_t bytes, uint64_t now)
{
    pp_path_t *pa = &c->paths[path];
    pa->down_until = now + pa->down_gap;
    pa->down_gap = 2 * pa->down_gap < PP_DOWN_PROBE_MAX_NS ? 2 * pa->down_gap : PP_DOWN_PROBE_MAX_NS;
    return bytes < c->cfg.mtu ? bytes : c->cfg.mtu;
}

static void path_sent(pp_conn_t *c, int path, uint32_t len, int retx)
{
    pp_path_stats_t *ps = &c->paths[path].st;
    ps->tx_pkts++;
    ps->tx_bytes += len;
    ps->retx_pkts += (uint64_t)retx;
    c->st.tx_pkts++;
    c->st.tx_bytes += len;
}

/* Resends the oldest packet marked lost, on another path where there is one. */
static int tx_retransmit(pp_conn_t *c, uint64_t now, pp_out_t *out)
{
    uint32_t psn = c->snd_una;
    for (; sdiff(c->snd_nxt, psn) > 0; psn++) {
        pp_pkt_t *p = &c->pk[psn % PP_WIN];
        int path;
        if (p->state != PP_PK_LOST)
            continue;
        if (c->cfg.cc->allow_retx && !c->cfg.cc->allow_retx(c, p->len))
            return 0;
        path = c->cfg.lb->select_path(c, now);
        if (path < 0 || path >= (int)c->cfg.npaths || c->paths[path].down)
            path = p->path;   /* every window full: a repair still goes, elsewhere */
        if (path == p->path && c->cfg.npaths > 1)
            path = path_fallback(c, path);
        p->path = (uint16_t)path;
        p->state = PP_PK_INFLIGHT;
        infl_set(c, psn);
        p->retx++;
        p->sent_ns = now;
        c->inflight += p->len;
        c->paths[path].inflight += p->len;
        c->lost_bytes -= p->len;
        c->nlost--;
        path_sent(c, path, p->len, 1);
        build_data(c, psn, p, out);
        return 1;
    }
    c->nlost = 0;   /* none found: the count was stale */
    c->lost_bytes = 0;
    return 0;
}

/* Flow control counts every byte sent and not yet acknowledged, lost ones
 * included: what may still land in the receiver's buffer. A timeout takes
 * a packet out of flight for the CC, but a spurious one's original still
 * sits in the receiver's socket queue, and a CC that holds retransmissions
 * back (allow_retx) would otherwise free window for new messages. */
static uint64_t fc_unacked(const pp_conn_t *c)
{
    return c->inflight + c->lost_bytes;
}

/* 1 when bytes more must wait for the receiver's window. With nothing
 * unacknowledged it still goes, as a probe, once the window is an RTO floor
 * old: the receiver announces room that delivery freed (pp_msg_release), and
 * the probe only covers that announcement getting lost (a probe the receiver
 * has no room for is dropped, answered with the window, and resent after
 * its RTO). */
static int rwnd_closed(const pp_conn_t *c, uint64_t bytes, uint64_t now)
{
    uint64_t out = fc_unacked(c);
    if (out + bytes <= c->rwnd)
        return 0;
    return out || now - c->rwnd_ns < c->rto_floor_ns;
}

/* Starts a chunk: the per-chunk decisions (size, window, pacing, path). */
/* A chunk on a path whose window is far larger spans several (the LB's
 * chunk_span), when the CC allows that many bytes: each chunk is one
 * system call on its path's socket, and 32 KB ones cost a 1 MiB message
 * over a bridge a quarter more time than 256 KB ones (veth moves a GSO
 * datagram whole, so it is the calls that count). */
static uint32_t chunk_widen(pp_conn_t *c, const pp_msg_t *m, uint32_t bytes, uint32_t region_end)
{
    uint32_t span, wide;
    uint64_t end;
    if (!c->cfg.lb->chunk_span || region_end - m->queued != bytes || m->len < c->cfg.small)
        return bytes;
    span = c->cfg.lb->chunk_span(c, c->chunk_path);
    if (span <= 1)
        return bytes;
    end = region_end + (uint64_t)(span - 1) * c->cfg.chunk;
    wide = (uint32_t)((end < m->len ? end : m->len) - m->queued);
    if (fc_unacked(c) + wide > c->rwnd || (c->inflight && !c->cfg.cc->can_send(c, wide)))
        return bytes;
    return wide;
}

/* Send-wait accounting: a refused send starts (or switches) a wait, the
 * next send ends it; its time goes to the reason in force at the time. */
static int tx_wait(pp_conn_t *c, int why, uint64_t now)
{
    if (c->wait_why != why) {
        if (c->wait_why)
            c->st.wait_ns[c->wait_why] += now - c->wait_since;
        c->wait_why = why;
        c->wait_since = now;
    }
    return 0;
}

static int chunk_start(pp_conn_t *c, pp_msg_t *m, uint64_t now)
{
    const pp_cc_ops_t *cc = c->cfg.cc;
    uint32_t region_end = (m->queued / c->cfg.chunk + 1) * c->cfg.chunk;
    uint32_t bytes = cc->chunk_size ? cc->chunk_size(c) : c->cfg.chunk;
    uint64_t need;   /* what the receiver's window must hold for this chunk */
    if (region_end > m->len)
        region_end = m->len;
    if (bytes == 0 || bytes > region_end - m->queued)
        bytes = region_end - m->queued;
    /* A runt tail rides with the chunk before it: every power-of-two
     * message (its pt2pt header on top) otherwise ended in a chunk of a
     * few dozen bytes on another path, after a pacing gap, in a system
     * call of its own, and its receiver ACKed the first part separately:
     * a 32 KiB ping-pong between namespace hosts made 3 sendmmsg per
     * message instead of 1 (19.3 us against 10.2 for 16 KiB). */
    if (m->len - m->queued - bytes < PP_RUNT_TAIL(c))
        bytes = m->len - m->queued;
    if (now < c->next_chunk_ns)
        return tx_wait(c, PP_WAIT_PACING, now);
    /* The receiver reserves a whole unplaced message at its first packet:
     * charge the rest of it, not this chunk alone, or a window filled to
     * the byte overflows by the part of the last message not yet sent, and
     * the receiver drops it for want of buffer (PP_DROP_NOBUF), a real loss
     * repaired only after an RTO: 969 such drops in a 64 KiB bcast stream
     * between namespace hosts, where the root runs ahead of its receiver.
     * (A placed message reserves its header only.) */
    need = m->placed ? bytes : m->len - m->queued;
    if (rwnd_closed(c, need, now))
        return tx_wait(c, PP_WAIT_RWND, now);
    /* Past the window (rwnd_closed let it go as a probe) one packet is
     * enough to ask: a whole chunk was dropped at the receiver each time
     * (a receiver that posted its receives 4 s late dropped 1839 packets
     * of 100 KB eager messages, a chunk per probe, one probe per backed-off
     * timeout). */
    if (fc_unacked(c) + need > c->rwnd && bytes > c->cfg.mtu)
        bytes = c->cfg.mtu;
    if (c->inflight && !cc->can_send(c, bytes))
        return tx_wait(c, PP_WAIT_CWND, now);
    if (m->len < c->cfg.small)   /* small messages: one path, no reordering */
        c->chunk_path = c->paths[0].down ? path_fallback(c, 0) : 0;
    else
        c->chunk_path = cc->select_path ? cc->select_path(c, now) : c->cfg.lb->select_path(c, now);
    if (c->chunk_path < 0 && c->inflight)
        return tx_wait(c, PP_WAIT_PATH, now);   /* no path has room: ACKs will open one */
    if (c->chunk_path < 0 || c->chunk_path >= (int)c->cfg.npaths)
        c->chunk_path = path_fallback(c, (int)c->cfg.npaths - 1);
    else if (!pp_path_live(c, c->chunk_path, now))
        c->chunk_path = path_fallback(c, c->chunk_path);   /* an LB's last resort */
    if (c->paths[c->chunk_path].down)
        bytes = path_probe(c, c->chunk_path, bytes, now);
    else
        bytes = chunk_widen(c, m, bytes, region_end);
    c->chunk_left = bytes;
    c->chunk_id++;
    c->st.tx_chunks++;
    c->paths[c->chunk_path].st.chunks++;
    c->next_chunk_ns = cc->pacing_ns ? now + cc->pacing_ns(c, bytes) : 0;
    if (cc->on_sent)
        cc->on_sent(c, bytes);
    return 1;
}

/* Another thread holds the chunk's path (its packets of this chunk are
 * on their way to the kernel, pp_tx_pin): the chunk ends here, and the
 * rest of its bytes start a chunk on a free path. The CC gets back what it
 * charged for the bytes not cut (on_unsent). */
static void chunk_end_early(pp_conn_t *c)
{
    if (c->cfg.cc->on_unsent)
        c->cfg.cc->on_unsent(c, c->chunk_left);
    c->chunk_left = 0;
    c->st.chunks_cut++;
}

/* The connection's clock never goes back: threads of a datapath read the
 * time before they take the connection's lock, so one may come with a time
 * older than what another just stamped on a packet. */
static uint64_t conn_clock(pp_conn_t *c, uint64_t now)
{
    if (now > c->now)
        c->now = now;
    return c->now;
}

int pp_tx_next(pp_conn_t *c, uint64_t now, pp_out_t *out)
{
    pp_msg_t *m = c->tx_cut;
    pp_pkt_t *p;
    uint32_t len;
    now = conn_clock(c, now);
    if (c->failed)
        return 0;
    if (c->nlost && tx_retransmit(c, now, out))
        return 1;
    if (!m)   /* nothing to send: a stall while earlier data is in flight */
        return tx_wait(c, c->tx_head ? PP_WAIT_EMPTY : PP_WAIT_NONE, now);
    if (sdiff(c->snd_nxt, c->snd_una) >= PP_WIN)
        return tx_wait(c, PP_WAIT_PSN, now);
    if (c->chunk_left && !pp_path_free(c, c->chunk_path))
        chunk_end_early(c);
    if (c->chunk_left == 0 && !chunk_start(c, m, now))
        return 0;
    tx_wait(c, PP_WAIT_NONE, now);
    len = c->chunk_left < c->cfg.mtu ? c->chunk_left : c->cfg.mtu;
    p = &c->pk[c->snd_nxt % PP_WIN];
    memset(p, 0, sizeof *p);
    p->msg = m;
    p->off = m->queued;
    p->len = (uint16_t)len;
    p->path = (uint16_t)c->chunk_path;
    p->state = PP_PK_INFLIGHT;
    infl_set(c, c->snd_nxt);
    p->sent_ns = p->first_ns = now;
    m->queued += len;
    c->tx_unsent -= len;
    c->chunk_left -= len;
    p->chunk_end = c->chunk_left == 0;
    if (m->queued == m->len) {
        c->tx_cut = m->next;
        c->chunk_left = 0;   /* a chunk never spans messages */
        p->chunk_end = 1;
    }
    c->inflight += len;
    c->paths[p->path].inflight += len;
    path_sent(c, p->path, len, 0);
    build_data(c, c->snd_nxt, p, out);
    c->snd_nxt++;
    return 1;
}

/* A sent message whose every byte is acknowledged: a referenced one is
 * reported (its caller's buffer is free), an owned one freed. */
static void msg_done(pp_conn_t *c, pp_msg_t *m)
{
    if (m->ref && !m->ref_owned) {
        c->zc_refs--;
        m->next = NULL;
        if (c->zc_done_tail)
            c->zc_done_tail->next = m;
        else
            c->zc_done = m;
        c->zc_done_tail = m;
        return;
    }
    msg_free(c, m);
}

static void msg_acked(pp_conn_t *c, pp_msg_t *m, uint32_t len)
{
    m->acked += len;
    if (m->acked < m->len)
        return;
    if (m->prev) m->prev->next = m->next; else c->tx_head = m->next;
    if (m->next) m->next->prev = m->prev; else c->tx_tail = m->prev;
    if (c->tx_cut == m)
        c->tx_cut = m->next;
    c->tx_buffered -= m->len;
    if (c->tx_pins) {   /* a packet being handed to the kernel may point into it */
        m->next = c->retired;
        c->retired = m;
        return;
    }
    msg_done(c, m);
}

/* Counts the batch's packets on their paths (pp_path_free). */
static void batch_hold(pp_conn_t *c, const pp_out_t *out, int n, int delta)
{
    for (int i = 0; i < n; i++)
        if (out[i].path >= 0 && (uint32_t)out[i].path < c->cfg.npaths)
            c->paths[out[i].path].held += (uint32_t)delta;
}

void pp_tx_pin(pp_conn_t *c, const pp_out_t *out, int n)
{
    c->tx_pins++;
    batch_hold(c, out, n, 1);
}

void pp_tx_unpin(pp_conn_t *c, const pp_out_t *out, int n)
{
    batch_hold(c, out, n, -1);
    if (!c->tx_pins || --c->tx_pins)
        return;
    while (c->retired) {
        pp_msg_t *m = c->retired;
        c->retired = m->next;
        msg_done(c, m);
    }
}

/* A packet leaves flight (acked); returns its bytes if they are newly acked. */
static uint32_t pkt_acked(pp_conn_t *c, pp_pkt_t *p, int sacked, uint64_t now)
{
    uint32_t len = p->len, slot = (uint32_t)(p - c->pk);
    pp_path_t *pa = &c->paths[p->path];
    if (p->state == PP_PK_FREE || p->state == PP_PK_SACKED) {
        if (!sacked) {
            p->state = PP_PK_FREE;
            bit_clr(c->sack_bits, slot);
        }
        return 0;
    }
    if (p->silent_path && !c->ack_new_dups)   /* (resent when it timed out: sent_ns) */
        path_timeout_found(c, p->silent_path - 1, p->first_ns, p->sent_ns, now);
    if (p->state == PP_PK_INFLIGHT) {
        infl_clr(c, slot);
        c->inflight -= len;
        pa->inflight -= len;
        if (!p->retx && now >= p->sent_ns) {   /* unambiguous: a queue-delay sample */
            uint64_t q = now - p->sent_ns;
            pa->qmax_ns = q > pa->qmax_ns ? q : pa->qmax_ns - pa->qmax_ns / 64;
            if (pa->qrtt_ns) {
                uint64_t d = q > pa->qrtt_ns ? q - pa->qrtt_ns : pa->qrtt_ns - q;
                pa->qvar_ns = (3 * pa->qvar_ns + d) / 4;
                pa->qrtt_ns = (7 * pa->qrtt_ns + q) / 8;
            } else {
                pa->qrtt_ns = q;
                pa->qvar_ns = q / 2;
            }
        }
        if (c->cfg.lb->on_acked)
            c->cfg.lb->on_acked(c, p->path, len);
    } else {
        c->lost_bytes -= len;
        c->nlost--;
    }
    /* Only an original transmission says what its path delivered: for a
     * retransmitted packet the copy that arrived may be the first one (on
     * another path), and its resend time on this path would declare every
     * packet queued here before it lost (found with plait-sim: 100k
     * needless retransmissions of 250k packets on 2 x 1 Gbit/s). */
    if (!p->retx && p->sent_ns > pa->acked_sent_ns) {
        pa->acked_sent_ns = p->sent_ns;
        path_delivered(c, p->path);
    }
    c->acked_ns = now;
    p->state = sacked ? PP_PK_SACKED : PP_PK_FREE;
    if (sacked)
        bit_set(c->sack_bits, slot);
    else
        bit_clr(c->sack_bits, slot);
    msg_acked(c, p->msg, len);
    p->msg = NULL;
    return len;
}

static void rtt_sample(pp_conn_t *c, int path, uint64_t rtt)
{
    pp_path_t *pp = &c->paths[path];
    if (!c->srtt_ns) {
        c->srtt_ns = rtt;
        c->rttvar_ns = rtt / 2;
    } else {
        uint64_t d = rtt > c->srtt_ns ? rtt - c->srtt_ns : c->srtt_ns - rtt;
        c->rttvar_ns = (3 * c->rttvar_ns + d) / 4;
        c->srtt_ns = (7 * c->srtt_ns + rtt) / 8;
    }
    if (!c->min_rtt_ns || rtt < c->min_rtt_ns)
        c->min_rtt_ns = rtt;
    c->rtt_ring[c->rtt_ring_n++ % PP_RTT_RING] = rtt > UINT32_MAX ? UINT32_MAX : (uint32_t)rtt;
    pp->st.srtt_ns = pp->st.srtt_ns ? (7 * pp->st.srtt_ns + rtt) / 8 : rtt;
    if (!pp->st.min_rtt_ns || rtt < pp->st.min_rtt_ns)
        pp->st.min_rtt_ns = rtt;
    pp->st.rtt_samples++;
}

/* Marks one packet lost (cause: fast or timeout); a loss event per window. */
static void mark_lost(pp_conn_t *c, uint32_t psn, pp_pkt_t *p, int timeout, uint64_t now)
{
    p->state = PP_PK_LOST;
    infl_clr(c, psn);
    c->inflight -= p->len;
    c->paths[p->path].inflight -= p->len;
    c->lost_bytes += p->len;
    c->nlost++;
    c->paths[p->path].st.lost++;
    c->paths[p->path].penalty_until = now + 4 * (c->srtt_ns ? c->srtt_ns : c->cfg.rto_min_ns);
    if (timeout) {
        c->st.retx_timeout++;
        path_timeout(c, p, now);
    } else {
        c->st.retx_fast++;
    }
    if (c->cfg.lb->on_loss)
        c->cfg.lb->on_loss(c, p->path);
    if (sdiff(psn, c->recover) >= 0) {
        c->recover = c->snd_nxt;
        c->st.loss_events++;
        if (++c->reo_quiet >= PP_REO_QUIET && c->reo_steps > 1) {
            c->reo_steps = 1;   /* the reordering that widened it is gone */
            c->reo_quiet = 0;
        }
        if (!c->cfg.lb->path_loss)
            c->cfg.cc->on_loss(c, timeout, now);
    }
}

/* How much later a packet sent on the same path may be acknowledged first
 * without the earlier one counting as lost: a quarter of the least RTT,
 * times reo_steps, at most the smoothed RTT. Like RACK's adaptive window
 * (RFC 8985 7.2): a receiver may itself reorder one path's datagrams (two
 * threads reading one socket, udp_rx_help), and the peer's duplicate count
 * shows the retransmissions that caused were needless (reo_widen). */
static uint64_t reo_window(const pp_conn_t *c)
{
    uint64_t reo = c->min_rtt_ns / 4 * c->reo_steps;
    return c->srtt_ns && reo > c->srtt_ns ? c->srtt_ns : reo;   /* (srtt >= min RTT) */
}

/* Fast retransmit. Paths differ in delay (spraying reorders by whole queue
 * depths), but each path keeps its own order: a packet is lost when a packet
 * sent later on the same path was acknowledged (beyond a small reordering
 * window), or when dupthresh later packets were SACKed and it is older than
 * the newest SACKed one by more than twice its own path's RTT, or than its
 * path's send-to-ACK time plus four deviations when that is longer (a path
 * whose later packets were all lost too; a slow path's queue is no loss). */
static void detect_dup_loss(pp_conn_t *c, uint64_t now)
{
    uint64_t reo = reo_window(c);
    uint32_t psn;
    if (!c->have_sack)
        return;
    for (psn = next_inflight(c, c->snd_una, c->highest_sacked); sdiff(c->highest_sacked, psn) > 0;
         psn = next_inflight(c, psn + 1, c->highest_sacked)) {
        pp_pkt_t *p = &c->pk[psn % PP_WIN];
        const pp_path_t *pa;
        uint64_t prtt;
        pa = &c->paths[p->path];
        prtt = pa->st.srtt_ns ? pa->st.srtt_ns : c->srtt_ns;
        if (pa->qrtt_ns && 2 * prtt < pa->qrtt_ns + 4 * pa->qvar_ns)
            prtt = (pa->qrtt_ns + 4 * pa->qvar_ns) / 2;   /* its queue: see path_rto */
        if (p->sent_ns + reo < pa->acked_sent_ns) {
            c->st.retx_fast_order++;
            mark_lost(c, psn, p, 0, now);
        } else if (sdiff(c->highest_sacked, psn) >= (int32_t)c->cfg.dupthresh &&
                   p->sent_ns + 2 * prtt + reo < c->hs_sent_ns) {
            mark_lost(c, psn, p, 0, now);
        }
    }
}

/* Word w of a bitmap whose bit i is bit i % 8 of byte i / 8: bit k of the
 * result is bit w * 64 + k, on either byte order. */
static inline uint64_t bits_word(const uint8_t *b, int w)
{
    uint64_t v;
    memcpy(&v, b + (size_t)w * 8, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* Stores v as word w of such a bitmap (the inverse of bits_word). */
static inline void bits_put_word(uint8_t *b, int w, uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    memcpy(b + (size_t)w * 8, &v, sizeof v);
}

/* Word w of a PP_WIN-bit bitmap indexed by PSN mod PP_WIN (rcv_bits, the
 * sender's sack_bits), read from PSN base on: bit k of the result is the bit
 * of PSN base + w * 64 + k. Two words and a shift, not 64 single bits. */
static inline uint64_t bits_rot_word(const uint8_t *b, uint32_t base, int w)
{
    uint32_t s = (base + (uint32_t)w * 64) % PP_WIN, sh = s % 64;
    int lo = (int)(s / 64), hi = (lo + 1) % (PP_WIN / 64);
    uint64_t v = bits_word(b, lo) >> sh;
    return sh ? v | bits_word(b, hi) << (64 - sh) : v;
}

/* 1 when the n bytes at b are all zero (eight at a time: an ACK's bitmap is
 * 1 KB, checked on every ACK). */
static int bytes_zero(const uint8_t *b, size_t n)
{
    uint64_t any = 0, w;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, b + i, sizeof w);
        any |= w;
    }
    for (; i < n; i++)
        any |= b[i];
    return any == 0;
}

/* Checks the ACK's claims against what was sent: nothing at or beyond
 * snd_nxt (sack: its bitmap of slen bytes, the bits after it 0; slen 0 when
 * it has none). */
static int ack_valid(const pp_conn_t *c, const pp_ack_t *a, const uint8_t *sack, size_t slen)
{
    int32_t span;
    if (sdiff(a->cum, c->snd_nxt) > 0)
        return 0;
    span = sdiff(c->snd_nxt, a->cum) - 1;   /* SACK bits that may be set */
    if (span < 0)
        span = 0;
    if ((size_t)span >= 8 * slen)
        return 1;
    if (sack[span / 8] >> (span % 8))          /* the partial byte, then whole ones */
        return 0;
    return bytes_zero(sack + span / 8 + 1, slen - (size_t)(span / 8 + 1));
}

/* Needless fast retransmissions: double the reordering window, at
 * most once per smoothed RTT (the duplicates of one burst arrive over
 * about one), up to the smoothed RTT (reo_window). PP_REO_QUIET loss
 * events without duplicates take it back (mark_lost). */
static void reo_widen(pp_conn_t *c, uint64_t now)
{
    c->reo_quiet = 0;
    if (c->st.retx_fast == c->reo_fast_seen || now - c->reo_moved_ns < c->srtt_ns ||
        !c->srtt_ns || reo_window(c) >= c->srtt_ns)
        return;   /* (no fast retransmission since: a timeout's duplicates) */
    c->reo_fast_seen = c->st.retx_fast;
    c->reo_steps *= 2;
    c->reo_moved_ns = now;
}

/* The peer received duplicates: some retransmissions were needless. When
 * timeouts fired since the floor last moved, the RTO is shorter than the
 * delays this path really has (a descheduled receiver, a slow ACK path):
 * double the floor, up to a quarter of the RTO ceiling. Fast retransmits
 * alone (reordering) leave it. */
static void rx_dups(pp_conn_t *c, uint32_t dups, uint64_t now)
{
    uint32_t delta = dups - c->dups_seen;
    if (delta == 0 || delta >= (1u << 30))   /* none, or an older ACK overtaken */
        return;
    c->dups_seen = dups;
    c->st.spurious += delta;
    reo_widen(c, now);
    if (c->st.retx_timeout == c->timeouts_seen)
        return;
    c->timeouts_seen = c->st.retx_timeout;
    c->floor_moved_ns = now;
    c->rto_floor_ns *= 2;
    if (c->rto_floor_ns > c->cfg.rto_max_ns / 4)
        c->rto_floor_ns = c->cfg.rto_max_ns / 4;
    if (c->rto_floor_ns < c->cfg.rto_min_ns)
        c->rto_floor_ns = c->cfg.rto_min_ns;
}

/* Counts newly acknowledged bytes into the delivery rate, over busy
 * periods only: one starts at the first ACK with data in flight (its bytes
 * left before it), and ends when nothing is left in flight, so idle time
 * between messages does not dilute the rate. */
static void rate_sample(pp_conn_t *c, uint64_t now, uint32_t acked)
{
    uint64_t span;
    if (!acked)
        return;
    if (!c->rate_start_ns) {
        c->rate_start_ns = now;
        c->rate_bytes = 0;
    } else {
        c->rate_bytes += acked;
        span = now - c->rate_start_ns;
        if (span >= PP_RATE_WINDOW_NS || (!c->inflight && span >= PP_RATE_WINDOW_NS / 8)) {
            double r = (double)c->rate_bytes * 1e9 / (double)span;
            c->rate_Bps = c->rate_Bps > 0 ? 0.75 * c->rate_Bps + 0.25 * r : r;
            c->rate_start_ns = now;
            c->rate_bytes = 0;
        }
    }
    if (!c->inflight)
        c->rate_start_ns = 0;
}

/* The packets an ACK's bitmap (bit i: PSN cum + 1 + i) reports arrived that
 * were not known to have: bytes newly acknowledged. The set bits are found
 * eight bytes at a time: a bitmap mostly of zeros (or of a few packets past a
 * hole) costs a pass over 128 words, not a step per PSN in flight; and the
 * bits of packets SACKed before (sack_bits) are masked off a word at a time,
 * since every ACK repeats them: behind one hole, thousands per ACK. */
static uint32_t rx_sack(pp_conn_t *c, uint64_t now, uint32_t cum, const uint8_t *sack,
                        size_t slen)
{
    uint32_t acked = 0;
    int32_t span = sdiff(c->snd_nxt, cum + 1);   /* bits that may name a packet sent */
    if (span > (int32_t)(8 * slen))
        span = (int32_t)(8 * slen);   /* (the bits after the bitmap are 0) */
    for (int w = 0; w * 64 < span; w++) {
        uint64_t v = bits_word(sack, w) & ~bits_rot_word(c->sack_bits, cum + 1, w);
        while (v) {
            int i = w * 64 + __builtin_ctzll(v);
            uint32_t psn = cum + 1 + (uint32_t)i;
            pp_pkt_t *p = &c->pk[psn % PP_WIN];
            v &= v - 1;
            if (i >= span)
                break;
            if (!c->have_sack || sdiff(psn, c->highest_sacked) > 0) {
                c->highest_sacked = psn;
                c->hs_sent_ns = p->sent_ns;
                c->have_sack = 1;
            }
            acked += pkt_acked(c, p, 1, now);
        }
    }
    return acked;
}

/* An ACK: a's fields before the bitmap (PP_ACK_SHORT bytes) are read; the
 * bitmap is sack, slen bytes up to its last nonzero word (pp_ack_next), 0
 * for an ACK without one (short, or riding on data): neither costs a copy,
 * and only the words sent are scanned. */
static void rx_ack(pp_conn_t *c, uint64_t now, const pp_ack_t *a, const uint8_t *sack,
                   size_t slen)
{
    pp_ack_info_t info = {.now = now, .path = -1};
    uint32_t acked = 0;
    int32_t age;
    if (!ack_valid(c, a, sack, slen)) {
        c->st.drops[PP_DROP_BADACK]++;
        return;
    }
    c->st.acks_rx++;
    c->ack_new_dups = a->dups != c->dups_seen;   /* (pkt_acked) */
    if (sdiff(a->cum, c->snd_una) >= 0) {
        for (; sdiff(a->cum, c->snd_una) > 0; c->snd_una++)
            acked += pkt_acked(c, &c->pk[c->snd_una % PP_WIN], 0, now);
        if (slen)
            acked += rx_sack(c, now, a->cum, sack, slen);
        c->rwnd = a->rwnd;
        c->rwnd_ns = now;
    }
    if (c->have_sack && sdiff(c->highest_sacked, c->snd_una) < 0)
        c->have_sack = 0;
    /* The RTT sample: the echoed packet's send time, from its slot while
     * the slot still holds it (PSNs snd_nxt - PP_WIN .. snd_nxt - 1). The
     * echoed flags tell which copy arrived: the original (first_ns), or the
     * only retransmission (sent_ns); after several retransmissions the copy
     * is ambiguous and gives no sample (Karn). */
    age = sdiff(c->snd_nxt, a->echo_psn);
    if (age > 0 && age <= PP_WIN && a->echo_path < c->cfg.npaths) {
        const pp_pkt_t *p = &c->pk[a->echo_psn % PP_WIN];
        uint64_t sent = !(a->echo_flags & PP_F_RETX) ? p->first_ns
                        : p->retx == 1 ? p->sent_ns : 0;
        if (sent && now >= sent && now - sent < 10000000000ull) {
            info.rtt_ns = now - sent ? now - sent : 1;
            info.path = a->echo_path;
            rtt_sample(c, a->echo_path, info.rtt_ns);
            if (c->cfg.lb->on_ack)
                c->cfg.lb->on_ack(c, a->echo_path, info.rtt_ns);
        }
    }
    if (a->credit != c->credit_seen && c->cfg.cc->on_credit) {
        uint32_t delta = a->credit - c->credit_seen;
        if (delta < (1u << 30)) {   /* older ACKs arriving late carry smaller totals */
            c->credit_seen = a->credit;
            c->cfg.cc->on_credit(c, delta);
        }
    }
    rx_dups(c, a->dups, now);
    detect_dup_loss(c, now);
    rate_sample(c, now, acked);
    info.acked = acked;
    info.inflight = c->inflight;
    if (acked || info.rtt_ns)
        c->cfg.cc->on_ack(c, &info);
}

uint64_t pp_rto_ns(const pp_conn_t *c);
uint64_t pp_rto_ns(const pp_conn_t *c) { return rto_above(c, c->rto_floor_ns); }

/* A packet's timeout: the connection's RTO, or its own path's when that is
 * longer. Paths differ by whole queue depths (a slow path's full queue holds
 * tens of ms, while the connection's smoothed RTT follows the fast paths):
 * the connection's RTO alone fires on packets merely queued on a slow path,
 * and those spurious timeouts cost retransmissions and window cuts.
 *
 * The path's own is the larger of its smoothed queue RTT plus four
 * deviations and twice the largest it showed lately (qmax_ns). The paths
 * that hash onto one slow link share its queue, each sampling it a few
 * hundred times a second: the smoothed figure lags a queue that fills
 * (median 7.5 ms where packets spent 13), and three in four of the
 * timeouts on the slow link were spurious (plait-sim --scenario slow -t 4s:
 * 9.5k of 13.2k). With the maximum: 2.6k spurious timeouts, goodput
 * 0.989-1.001 -> 1.009-1.026 Gbit/s over seeds 1-3, the other scenarios
 * within their seed spread. A real loss there is mostly found sooner by a
 * later packet of its path acknowledged (detect_dup_loss). */
static uint64_t path_rto(const pp_conn_t *c, int path, uint64_t rto)
{
    const pp_path_t *pa = &c->paths[path];
    uint64_t own = pa->qrtt_ns ? pa->qrtt_ns + 4 * pa->qvar_ns : 0;
    if (own < 2 * pa->qmax_ns)
        own = 2 * pa->qmax_ns;
    return own > rto ? own : rto;
}

/* The connection gives up on packet psn (unacknowledged for cfg.give_up_ns).
 * Where the peer's own packets still came within the last half of that
 * time, it is alive and this direction's packets vanish on the way: most
 * often a path MTU below the interfaces' that drops the large datagrams
 * without telling (no ICMP "fragmentation needed", which the datapath would
 * act on); the message says so, rather than blame the peer (a black-box
 * test: 41 MB never acknowledged while 32-byte packets came through). */
static void give_up(pp_conn_t *c, uint32_t psn, const pp_pkt_t *p, uint64_t now)
{
    int n;
    c->failed = 1;
    n = snprintf(c->why, sizeof c->why, "rank %u stopped acknowledging (packet %u, %u bytes, "
                 "unacked for %.1f s after %u retransmissions)", c->cfg.peer, psn, p->len,
                 (double)(now - p->first_ns) * 1e-9, p->retx);
    if (c->heard_ns && now - c->heard_ns < c->cfg.give_up_ns / 2 && n > 0 &&
        (size_t)n < sizeof c->why)
        snprintf(c->why + n, sizeof c->why - (size_t)n, "; its packets still arrive: large "
                 "datagrams lost on the way? (path MTU below the interfaces': set PLAIT_UDP_MTU)");
}

/* A raised RTO floor halves back toward the configured one after
 * PP_RTO_FLOOR_HOLD_NS without a further spurious timeout: one
 * descheduled receiver early in a job must not make every later tail
 * loss wait out 12.5 ms (rto_max / 4) for the rest of it. */
static void rto_floor_decay(pp_conn_t *c, uint64_t now)
{
    if (c->rto_floor_ns <= c->cfg.rto_min_ns || now - c->floor_moved_ns < PP_RTO_FLOOR_HOLD_NS)
        return;
    c->rto_floor_ns /= 2;
    if (c->rto_floor_ns < c->cfg.rto_min_ns)
        c->rto_floor_ns = c->cfg.rto_min_ns;
    c->floor_moved_ns = now;
}

int pp_poll(pp_conn_t *c, uint64_t now)
{
    uint64_t rto, young, ceiling;
    int marked = 0;
    now = conn_clock(c, now);
    if (c->failed || now - c->last_rto_scan < c->cfg.rto_min_ns / 4)
        return 0;
    c->last_rto_scan = now;
    rto_floor_decay(c, now);
    rto = pp_rto_ns(c);
    ceiling = rto_ceiling(c);
    young = c->ndown ? probe_rto(c) : rto;   /* the least limit (probe_rto <= rto) */
    for (uint32_t psn = c->snd_una; sdiff(c->snd_nxt, psn) > 0; psn++) {
        pp_pkt_t *p = &c->pk[psn % PP_WIN];
        uint64_t limit;
        if (p->state != PP_PK_INFLIGHT && p->state != PP_PK_LOST)
            continue;
        /* Every packet's limit is at least young (rto, or a probe's), and
         * send times grow with the PSN past a packet never resent: from
         * the first such packet younger than that on, none can time out
         * (nor give up: first send times grow too). The scan stops there
         * rather than walk the window (8192 packets) every rto_min / 4. */
        if (!p->retx && now - p->sent_ns < young)
            break;
        limit = c->paths[p->path].down ? probe_rto(c)
                                       : path_rto(c, p->path, rto) << (p->retx < 8 ? p->retx : 8);
        if (now - p->first_ns > c->cfg.give_up_ns) {
            give_up(c, psn, p, now);
            return 1;
        }
        if (limit > ceiling)
            limit = ceiling;
        /* A timeout marks a few of the oldest packets per scan, not the
         * whole window: a receiver that was merely descheduled would
         * otherwise get the window again (spurious retransmissions). */
        if (p->state == PP_PK_INFLIGHT && now - p->sent_ns >= limit && marked < 8) {
            c->st.timeouts++;
            mark_lost(c, psn, p, 1, now);
            marked++;
        }
    }
    return 0;
}

int pp_idle(const pp_conn_t *c) { return !c->tx_head && !c->ack_pending; }

/* --------------------------------------------------------------- receiver */

/* A packet's fields are read from the packet where they are needed, not
 * from a copy of its header: loads of single fields out of a 16-byte
 * store just made wait for it (store forwarding), and hdr_check's copy of
 * the common header read back that way was most of its time (twice per
 * packet: pp_parse, rx_packet), rx_data's of the data header likewise.
 * at: the field's offset (a packet long enough, checked before). */
#define HDR_AT(f) offsetof(pp_hdr_t, f)
static inline uint8_t pkt_u8(const void *pkt, size_t at) { return ((const uint8_t *)pkt)[at]; }

static inline uint16_t pkt_u16(const void *pkt, size_t at)
{
    uint16_t v;
    memcpy(&v, (const uint8_t *)pkt + at, sizeof v);
    return v;
}

static inline uint32_t pkt_u32(const void *pkt, size_t at)
{
    uint32_t v;
    memcpy(&v, (const uint8_t *)pkt + at, sizeof v);
    return v;
}

static inline uint64_t pkt_u64(const void *pkt, size_t at)
{
    uint64_t v;
    memcpy(&v, (const uint8_t *)pkt + at, sizeof v);
    return v;
}

static int drop(pp_conn_t *c, int why)
{
    c->st.drops[why]++;
    return why;
}

/* Receive-buffer bytes a message holds. */
static size_t rx_cost(int placed, uint32_t len, uint32_t hlen) { return placed ? hlen : len; }

/* A data packet as received: its header fields and the payload's length
 * (the datagram's, less the header). */
typedef struct {
    uint8_t  flags, hlen;
    uint16_t path;
    uint32_t psn, msg, off, msg_len, len;
    int      placed;
    uint64_t place_id, place_off;
} rx_data_t;

static void note_ack(pp_conn_t *c, const rx_data_t *d, int urgent)
{
    c->ack_pending = 1;
    c->ack_urgent |= urgent;
    c->ack_no_echo = 0;
    c->ack_echo_psn = d->psn;
    c->ack_echo_path = d->path;
    c->ack_echo_flags = d->flags;
}

/* The message a packet belongs to, made on its first packet; NULL: dropped. */
static pp_msg_t *rx_msg(pp_conn_t *c, const rx_data_t *d)
{
    int32_t md = sdiff(d->msg, c->rcv_msg);
    pp_msg_t **slot = &c->rmsg[d->msg % PP_WIN], *m;
    if (md < 0)
        return drop(c, PP_DROP_INCONS), NULL;   /* new PSN for a delivered message */
    if (md >= PP_WIN)
        return drop(c, PP_DROP_WINDOW), NULL;
    if ((m = *slot) != NULL) {
        if (m->id != d->msg || m->len != d->msg_len || m->hlen != d->hlen ||
            m->placed != d->placed || (d->placed && (m->place_id != d->place_id ||
                                                     m->place_off != d->place_off)))
            return drop(c, PP_DROP_INCONS), NULL;
        return m;
    }
    /* Flow control: beyond the buffer cap only the next message to deliver
     * may start (so progress is always possible); the sender retransmits.
     * A placed message buffers its header only. */
    if ((md != 0 && c->rx_buffered + rx_cost(d->placed, d->msg_len, d->hlen) > c->cfg.rx_buf_max) ||
        !(m = msg_alloc(c, d->placed ? d->hlen : d->msg_len))) {
        drop(c, PP_DROP_NOBUF);
        note_ack(c, d, 1);   /* tell the sender the window as it is (a probe's answer) */
        return NULL;
    }
    m->placed = d->placed;
    m->place_id = d->place_id;
    m->place_off = d->place_off;
    m->id = d->msg;
    m->len = d->msg_len;
    m->hlen = d->hlen;
    c->rx_buffered += rx_cost(d->placed, m->len, m->hlen);
    *slot = m;
    return m;
}

/* 1 when a copy of src to dst continues q in both buffers. */
static int rx_copy_extends(const pp_copy_t *q, const uint8_t *dst, const uint8_t *src)
{
    return (const uint8_t *)q->dst + q->len == dst && (const uint8_t *)q->src + q->len == src;
}

/* Puts a packet's bytes at their offset: no reorder copy. A placed
 * message keeps its header here and sends the payload to the region the
 * receiver exposed (or discards what falls outside it). */
static void rx_copy(pp_conn_t *c, pp_msg_t *m, const rx_data_t *d, const uint8_t *payload)
{
    uint32_t off = d->off, len = d->len;
    size_t room;
    uint8_t *dst;
    if (!m->placed && !m->early) {
        memcpy(m->data + off, payload, len);
        return;
    }
    if (off < m->hlen) {
        uint32_t h = m->hlen - off < len ? m->hlen - off : len;
        memcpy(m->data + off, payload, h);
        off += h;
        payload += h;
        len -= h;
    }
    if (len == 0)
        return;
    room = len;
    if (m->early)   /* (rx_data bounded off + len by the message's length) */
        dst = m->early + (off - m->hlen);
    else
        dst = c->cfg.place(c->cfg.place_arg, m->place_id, m->place_off + (off - m->hlen), &room);
    if (!dst || room > len)
        room = 0;
    if (room && c->copy_q && c->copy_n && rx_copy_extends(&c->copy_q[c->copy_n - 1], dst, payload)) {
        c->copy_q[c->copy_n - 1].len += room;   /* a run's packets: one copy for all */
    } else if (room && c->copy_q && c->copy_n < c->copy_cap) {
        c->copy_q[c->copy_n++] = (pp_copy_t){dst, payload, room};
        c->copies_out++;
    } else if (room) {
        memcpy(dst, payload, room);
    }
    c->st.rx_placed += room;
    c->st.rx_discarded += len - room;
}

/* Bookkeeping for early placement (pp_early_next): how far the message's
 * bytes reach, whether its header is in (all of it: a first packet shorter
 * than the header, which no sender of ours makes, does not count), and the
 * datapath's hint when an unplaced message large enough to be worth placing
 * early has its header in but more to come. */
static void rx_early_note(pp_conn_t *c, pp_msg_t *m, const rx_data_t *d)
{
    if (d->off + d->len > m->hi)
        m->hi = d->off + d->len;
    if (d->off == 0 && d->len >= m->hlen && !m->placed) {
        m->head_in = 1;
        if (c->cfg.early_min && m->len - m->hlen >= c->cfg.early_min &&
            m->got + d->len < m->len)
            c->early_hint = 1;
    }
}

/* A cumulative ACK that rode on a data packet: an ACK saying nothing else
 * (no SACK bit, the window, credit and duplicate count as last heard, no
 * RTT echo). */
static void rx_piggy(pp_conn_t *c, uint64_t now, uint32_t cum)
{
    pp_ack_t a;   /* the fields rx_ack reads; no bitmap */
    a.cum = cum;
    a.rwnd = c->rwnd > UINT32_MAX ? UINT32_MAX : (uint32_t)c->rwnd;
    a.credit = c->credit_seen;
    a.dups = c->dups_seen;
    a.echo_psn = 0;
    a.echo_path = UINT16_MAX;   /* no echo: no RTT sample */
    a.echo_flags = 0;
    rx_ack(c, now, &a, NULL, 0);
}

/* Marks PSN psn (in the window, not received before) received and moves
 * rcv_cum past every packet now in order. The packet rcv_cum waits for
 * with none past it (a stream in order) touches no bitmap; one that fills
 * a hole clears the run behind it a word at a time. (Bit by bit, each
 * bit's read waited on the store before it, and the counters went back
 * to memory on every bit: byte stores may alias them.) */
static void rcv_mark(pp_conn_t *c, uint32_t psn)
{
    uint32_t cum = psn + 1, ahead = c->rcv_ahead;
    if (psn != c->rcv_cum) {
        bit_set(c->rcv_bits, psn);
        c->rcv_ahead = ahead + 1;
        return;
    }
    while (ahead) {   /* the run of set bits from cum on: every bit set lies past cum */
        uint32_t slot = cum % PP_WIN, sh = slot % 64, n;
        int wi = (int)(slot / 64);
        uint64_t w = bits_word(c->rcv_bits, wi), zeros = ~(w >> sh), mask;
        n = zeros ? (uint32_t)__builtin_ctzll(zeros) : 64;   /* (64: sh 0, a full word) */
        if (!n)
            break;
        mask = n == 64 ? ~0ull : ((1ull << n) - 1) << sh;
        bits_put_word(c->rcv_bits, wi, w & ~mask);
        cum += n;
        ahead -= n;
        if (sh + n < 64)
            break;   /* the run ends inside this word */
    }
    c->rcv_cum = cum;
    c->rcv_ahead = ahead;
}

/* A data packet's header fields (pkt: at least its header, hdr_check);
 * returns the header's length. A piggybacked ACK is taken here, once. */
static size_t rx_data_hdr(pp_conn_t *c, uint64_t now, const uint8_t *pkt, rx_data_t *d)
{
    d->flags = pkt_u8(pkt, HDR_AT(flags));
    d->hlen = pkt_u8(pkt, HDR_AT(hlen));
    d->path = pkt_u16(pkt, HDR_AT(path));
    d->psn = pkt_u32(pkt, offsetof(pp_data_t, psn));
    d->msg = pkt_u32(pkt, offsetof(pp_data_t, msg));
    d->off = pkt_u32(pkt, offsetof(pp_data_t, off));
    d->msg_len = pkt_u32(pkt, offsetof(pp_data_t, msg_len));
    d->placed = (d->flags & PP_F_PLACED) != 0;
    d->place_id = UINT64_MAX;
    d->place_off = 0;
    if (d->placed) {   /* (place_id: two 32-bit words, low first; pp_place_t) */
        d->place_id = pkt_u64(pkt, PP_DATA_HDR + offsetof(pp_place_t, place_id));
        d->place_off = pkt_u32(pkt, PP_DATA_HDR + offsetof(pp_place_t, place_off));
    } else if (d->flags & PP_F_ACK) {
        rx_piggy(c, now, pkt_u32(pkt, PP_DATA_HDR));
    }
    return pp_data_hdr_len(d->flags);
}

/* One data packet: header fields d (d->len: its payload's length), its
 * payload at payload. */
static void rx_data_one(pp_conn_t *c, uint64_t now, const rx_data_t *dp, const uint8_t *payload)
{
    rx_data_t d = *dp;
    int32_t pd;
    pp_msg_t *m;
    if (d.msg_len == 0 || d.msg_len > c->cfg.max_msg || d.hlen == 0 || d.hlen > PP_MAX_HLEN ||
        d.hlen > d.msg_len || d.len == 0 || d.len > c->cfg.mtu ||
        (uint64_t)d.off + d.len > d.msg_len || d.path >= PP_MAX_PATHS ||
        (d.placed && (!c->cfg.place || d.place_id == UINT64_MAX))) {
        drop(c, PP_DROP_BOUNDS);
        return;
    }
    pd = sdiff(d.psn, c->rcv_cum);
    if (pd >= PP_WIN) {
        drop(c, PP_DROP_WINDOW);
        return;
    }
    if (pd < 0 || bit_get(c->rcv_bits, d.psn)) {
        drop(c, PP_DROP_DUP);
        note_ack(c, &d, 1);   /* our ACK may have been lost: say it again */
        return;
    }
    if (!(m = rx_msg(c, &d)))
        return;
    if (m->got + d.len > m->len) {
        drop(c, PP_DROP_INCONS);
        return;
    }
    rx_copy(c, m, &d, payload);
    rx_early_note(c, m, &d);
    m->got += d.len;
    rcv_mark(c, d.psn);
    c->st.rx_pkts++;
    c->st.rx_bytes += d.len;
    /* A completed placed message (rendezvous data, which a zero-copy send
     * waits on: its sender's buffer is lent until this ACK) is ACKed at
     * once. An unplaced one's sender completed at the copy; its ACK may
     * wait (pp_ack_due) for a reply to carry it. Urgent, a 2 x 2 ranks
     * allreduce of 8 bytes sent one ACK of its own per call: the pass that
     * waited for the shared-memory step next sent it, a sendmmsg of 5 us
     * on the critical path, before the cross-host step's data could carry
     * it (16-core machine: 16.8 us against Open MPI's 14.0). */
    note_ack(c, &d, m->got == m->len && m->placed);
    c->ack_owed_bytes += d.len;
    if (!c->ack_owed_ns)
        c->ack_owed_ns = now ? now : 1;
    if ((d.flags & PP_F_RETX) && c->cfg.cc->on_rx_retx)
        c->cfg.cc->on_rx_retx(c, d.len, now);
    else if (c->cfg.cc->on_rx_chunk)
        c->cfg.cc->on_rx_chunk(c, d.len, now);
}

/* A run (PP_F_RUN): its packets one by one, each checked as if it had come
 * alone. avail: the payload bytes the datagram holds after the header. A
 * run cut short (the path segmented the datagram: pp.h) keeps its whole
 * packets and is flagged back to the sender in every ACK from now on. */
static void rx_run(pp_conn_t *c, uint64_t now, rx_data_t *d, const uint8_t *run,
                   const uint8_t *payload, size_t avail)
{
    uint32_t bytes = pkt_u32(run, offsetof(pp_run_t, bytes)), use;
    uint32_t seg = pkt_u16(run, offsetof(pp_run_t, seg)), psn = d->psn, off = d->off;
    if (seg == 0 || seg > c->cfg.mtu || bytes <= seg || bytes / seg >= PP_WIN ||
        pkt_u16(run, offsetof(pp_run_t, rsv)) || avail > bytes) {
        drop(c, PP_DROP_BOUNDS);
        return;
    }
    use = bytes;
    c->st.rx_runs++;
    if (avail < bytes) {
        use = (uint32_t)avail - (uint32_t)avail % seg;
        c->run_cut = 1;
        c->st.rx_runs_cut++;
    }
    d->flags &= (uint8_t)~PP_F_RUN;   /* (each packet's echo: what it would have carried) */
    for (uint32_t at = 0; at < use; at += seg) {
        d->psn = psn++;
        d->off = off + at;
        d->len = use - at < seg ? use - at : seg;
        rx_data_one(c, now, d, payload + at);
    }
}

/* A data packet of len bytes (header included, at least its header). */
static void rx_data(pp_conn_t *c, uint64_t now, const uint8_t *pkt, size_t len)
{
    rx_data_t d;
    size_t hl = rx_data_hdr(c, now, pkt, &d);
    if (d.flags & PP_F_RUN) {
        rx_run(c, now, &d, pkt + hl - PP_RUN_LEN, pkt + hl, len - hl);
        return;
    }
    d.len = len - hl > UINT32_MAX ? UINT32_MAX : (uint32_t)(len - hl);
    rx_data_one(c, now, &d, pkt + hl);
}

size_t pp_run_span(const void *pkt, size_t len)
{
    size_t hl;
    if (len < sizeof(pp_hdr_t) || !(pkt_u8(pkt, HDR_AT(flags)) & PP_F_RUN) ||
        pkt_u8(pkt, HDR_AT(type)) != PP_T_DATA)
        return 0;
    hl = pp_data_hdr_len(pkt_u8(pkt, HDR_AT(flags)));
    if (len < hl)
        return len;
    hl += pkt_u32(pkt, hl - PP_RUN_LEN + offsetof(pp_run_t, bytes));
    return hl < len ? hl : len;
}

/* The header fields two packets of one run share: every byte of the data
 * header but the flags' CHUNK_END, the tag (sealed over the rest), the PSN
 * and the offset; the place. The run's last packet may carry a
 * piggybacked ACK that its first does not (pp.h PP_F_ACK: a chunk's last
 * packet): the run's header takes it over (pp_run_hdr). Left out, such a
 * chunk went as a run and a datagram of one packet, and a 2 x 2 alltoall
 * of 16-64 KiB blocks, every message a chunk with an ACK riding on its end,
 * took 1.3-1.6 times as long. */
static int run_joins(const pp_out_t *a, const pp_out_t *b)
{
    uint8_t fa = a->hdr[HDR_AT(flags)] & ~PP_F_CHUNK_END, fb = b->hdr[HDR_AT(flags)] & ~PP_F_CHUNK_END;
    size_t same = a->hdr_len;   /* header bytes from msg_len on that must match */
    if (fb == (fa | PP_F_ACK) && !(fa & PP_F_ACK) && b->hdr_len == a->hdr_len + PP_PIGGY_LEN)
        fb = fa;   /* (the piggybacked ACK follows the fields compared) */
    else if (b->hdr_len != a->hdr_len)
        return 0;
    return b->path == a->path && !b->len2 && b->len && fa == fb &&
           !memcmp(a->hdr, b->hdr, HDR_AT(flags)) &&
           !memcmp(a->hdr + HDR_AT(path), b->hdr + HDR_AT(path), HDR_AT(tag) - HDR_AT(path)) &&
           pkt_u32(b->hdr, offsetof(pp_data_t, msg)) == pkt_u32(a->hdr, offsetof(pp_data_t, msg)) &&
           !memcmp(a->hdr + offsetof(pp_data_t, msg_len), b->hdr + offsetof(pp_data_t, msg_len),
                   same - offsetof(pp_data_t, msg_len));
}

/* b comes right after a: the next PSN, the next bytes of the message, and
 * in memory right behind a's payload. */
static int run_follows(const pp_out_t *a, const pp_out_t *b)
{
    return pkt_u32(b->hdr, offsetof(pp_data_t, psn)) == pkt_u32(a->hdr, offsetof(pp_data_t, psn)) + 1 &&
           pkt_u32(b->hdr, offsetof(pp_data_t, off)) ==
               pkt_u32(a->hdr, offsetof(pp_data_t, off)) + (uint32_t)a->len &&
           (const uint8_t *)b->payload == (const uint8_t *)a->payload + a->len;
}

int pp_run_count(const pp_conn_t *c, const pp_out_t *out, int n, size_t cap)
{
    size_t total = out[0].len;
    int k = 1;
    uint8_t f = out[0].hdr[HDR_AT(flags)];
    if (n < 2 || out[0].hdr[HDR_AT(type)] != PP_T_DATA || (f & (PP_F_RETX | PP_F_RUN)) ||
        out[0].len2 || !out[0].len || out[0].len > c->cfg.mtu || out[0].len > UINT16_MAX)
        return 1;
    while (k < n && out[k - 1].len == out[0].len && out[k - 1].hdr_len == out[0].hdr_len &&
           total + out[k].len <= cap && out[k].len <= out[0].len && run_joins(&out[0], &out[k]) &&
           run_follows(&out[k - 1], &out[k]))
        total += out[k++].len;
    return k;
}

size_t pp_run_hdr(const pp_conn_t *c, const pp_out_t *out, int k, uint8_t *hdr)
{
    size_t hl = out[k - 1].hdr_len;   /* (the last's: it may carry an ACK, run_joins) */
    pp_run_t run = {.bytes = 0, .seg = (uint16_t)out[0].len, .rsv = 0};
    for (int i = 0; i < k; i++)
        run.bytes += (uint32_t)out[i].len;
    memcpy(hdr, out[0].hdr, out[0].hdr_len);
    memcpy(hdr + out[0].hdr_len, out[k - 1].hdr + out[0].hdr_len, hl - out[0].hdr_len);
    hdr[HDR_AT(flags)] |= PP_F_RUN | (out[k - 1].hdr[HDR_AT(flags)] & PP_F_ACK);
    memcpy(hdr + hl, &run, sizeof run);
    pp_seal(hdr, hl + sizeof run, c->tx_tag);
    return hl + sizeof run;
}

/* pp_seal_len of a packet that passed hdr_check, read from the packet. */
static inline size_t hdr_sealed_len(const void *pkt, size_t len)
{
    return pp_seal_len(pkt_u8(pkt, HDR_AT(type)), pkt_u8(pkt, HDR_AT(flags)), len);
}

/* The checks that need no connection: version, type, flags, reserved
 * bytes, lengths. -1: well formed. */
static int hdr_check(const void *pkt, size_t len)
{
    uint16_t magic;
    uint8_t type, flags;
    if (len < sizeof(pp_hdr_t))
        return PP_DROP_TRUNC;
    magic = pkt_u16(pkt, HDR_AT(magic));
    type = pkt_u8(pkt, HDR_AT(type));
    flags = pkt_u8(pkt, HDR_AT(flags));
    if (magic != PP_MAGIC || (type != PP_T_DATA && type != PP_T_ACK) || (flags & ~PP_F_ALL))
        return PP_DROP_MAGIC;
    if (type == PP_T_ACK) {
        if ((flags & ~PP_F_RUN) || pkt_u8(pkt, HDR_AT(hlen)) || pkt_u8(pkt, HDR_AT(ack_via)))
            return PP_DROP_MAGIC;
        if (len < PP_ACK_SHORT || len > PP_ACK_LEN || (len - PP_ACK_SHORT) % 8)
            return PP_DROP_TRUNC;   /* (the bitmap: whole words, pp_ack_next) */
        if (pkt_u8(pkt, offsetof(pp_ack_t, rsv)))
            return PP_DROP_MAGIC;
    } else if ((flags & PP_F_ACK) && (flags & PP_F_PLACED)) {
        return PP_DROP_MAGIC;
    } else if (len < pp_data_hdr_len(flags)) {
        return PP_DROP_TRUNC;
    }
    return -1;
}

/* The expected tag of packets from src to me: a SipHash costs tens of ns, a
 * packet on a 1500-byte MTU a few hundred at full speed, so each thread
 * keeps the tags of the last senders it saw (by src; a miss recomputes). */
typedef struct {
    uint64_t key, tag;
    uint32_t src, me;
    int      valid;
} tag_memo_t;

static uint64_t tag_expected(uint64_t key, uint32_t src, uint32_t me)
{
    static _Thread_local tag_memo_t memo[16];
    tag_memo_t *e = &memo[src % 16];
    uint64_t tag;
    /* A hit returns at once: merged with the miss's path, the thread-local
     * address was looked up again (__tls_get_addr, twice per packet). */
    if (e->valid && e->key == key && e->src == src && e->me == me)
        return e->tag;
    tag = pp_tag(key, src, me);
    *e = (tag_memo_t){.key = key, .tag = tag, .src = src, .me = me, .valid = 1};
    return tag;
}

int pp_parse(const void *pkt, size_t len, uint64_t key, uint32_t me, uint32_t *src, int *type)
{
    uint32_t from;
    int why = hdr_check(pkt, len);
    if (why >= 0)
        return why;
    from = pkt_u32(pkt, HDR_AT(src));
    if (pkt_u64(pkt, HDR_AT(tag)) !=
        (tag_expected(key, from, me) ^ pp_hdr_sum(pkt, hdr_sealed_len(pkt, len))))
        return PP_DROP_KEY;   /* another job, meant for another rank, or corrupt */
    if (from == me)
        return PP_DROP_CONN;
    *src = from;
    *type = pkt_u8(pkt, HDR_AT(type));
    return -1;
}

/* A packet of the peer's that passed its checks: the path it came on
 * (heard_path: ours to name in ack_via) and, data, its hint for our ACKs
 * (one naming no path of ours is no hint). */
static void rx_heard(pp_conn_t *c, uint64_t now, const void *pkt)
{
    uint32_t path = pkt_u16(pkt, HDR_AT(path)), via = pkt_u8(pkt, HDR_AT(ack_via));
    if (path < c->cfg.npaths) {
        c->heard_path = (uint16_t)(path + 1);
        c->heard_ns = now;
    }
    if (pkt_u8(pkt, HDR_AT(type)) == PP_T_DATA)
        c->ack_via = (uint16_t)(via <= c->cfg.npaths ? via : 0);
}

static void rx_packet(pp_conn_t *c, uint64_t now, const void *pkt, size_t len, int sealed)
{
    int why;
    now = conn_clock(c, now);
    if ((why = hdr_check(pkt, len)) >= 0) {
        drop(c, why);
        return;
    }
    if (pkt_u32(pkt, HDR_AT(src)) != c->cfg.peer) {
        drop(c, PP_DROP_CONN);
        return;
    }
    if (!sealed &&
        pkt_u64(pkt, HDR_AT(tag)) != (c->rx_tag ^ pp_hdr_sum(pkt, hdr_sealed_len(pkt, len)))) {
        drop(c, PP_DROP_KEY);
        return;
    }
    if (pkt_u32(pkt, HDR_AT(epoch)) != c->cfg.peer_epoch) {
        drop(c, PP_DROP_STALE);
        return;
    }
    rx_heard(c, now, pkt);
    if (pkt_u8(pkt, HDR_AT(type)) == PP_T_DATA) {
        rx_data(c, now, pkt, len);
    } else {
        pp_ack_t a;   /* the fields before the bitmap; pp_parse checked the length */
        memcpy(&a, pkt, PP_ACK_SHORT);
        if (a.h.flags & PP_F_RUN)
            c->runs_off = 1;   /* our runs reach the peer cut (pp.h): no more of them */
        rx_ack(c, now, &a, (const uint8_t *)pkt + PP_ACK_SHORT, len - PP_ACK_SHORT);
    }
}

void pp_rx(pp_conn_t *c, uint64_t now, const void *pkt, size_t len)
{
    rx_packet(c, now, pkt, len, 0);
}

void pp_rx_parsed(pp_conn_t *c, uint64_t now, const void *pkt, size_t len)
{
    rx_packet(c, now, pkt, len, 1);
}

/* The SACK bitmap relative to cum (bit i: PSN cum + 1 + i) from the
 * receive bitmap (indexed by PSN mod PP_WIN), written to sack. Returns its
 * length in bytes up to the last word with a bit set (0: none): the ACK
 * ends there, and the peer reads the bits after it as 0. Reordering spans
 * a few hundred PSNs at most, so an ACK past a hole is about 100 bytes, not
 * the 1072 of the whole window: spraying keeps a hole open nearly always,
 * and half a stream's packets drew such an ACK, through both hosts' stacks
 * and the reverse links (1 Gbit/s + 100 Mbit/s on the 16-core bed: 274K
 * ACKs, 290 MB against 814 MB of data). Once the words made hold all
 * rcv_ahead bits set, the scan stops (holes of a multipath stream lie
 * within a few words of cum). */
static size_t sack_fill(const pp_conn_t *c, uint32_t cum, uint8_t *sack)
{
    uint32_t left = c->rcv_ahead;   /* (were it ever too large: every word, as before) */
    int last = -1;
    for (int w = 0; w < PP_WIN / 64 && left; w++) {
        uint64_t v = bits_rot_word(c->rcv_bits, cum + 1, w);
        if (w == PP_WIN / 64 - 1)
            v &= ~(1ull << 63);   /* bit PP_WIN - 1 would be cum itself */
        bits_put_word(sack, w, v);
        if (v)
            last = w;
        left -= (uint32_t)__builtin_popcountll(v);
    }
    return (size_t)(last + 1) * 8;
}

int pp_ack_next(pp_conn_t *c, uint64_t now, pp_out_t *out)
{
    pp_ack_t a;
    size_t room;
    (void)now;   /* ACKs carry no timestamp (pp.h: echo_psn) */
    if (!c->ack_pending)
        return 0;
    /* The bitmap (PP_WIN bits) is scanned only when a packet past a hole
     * arrived: a bulk stream in order sends short ACKs, and clearing and
     * scanning 1 KB for each was 2% of a receiving thread's time. The scan
     * writes it straight into the packet, up to its last word with a bit
     * set: a.sack stays unused, neither cleared nor copied. */
    memset(&a, 0, PP_ACK_SHORT);
    fill_common(c, &a.h, PP_T_ACK, ack_path(c));
    a.h.flags = c->run_cut ? PP_F_RUN : 0;
    a.cum = c->rcv_cum;
    a.echo_psn = c->ack_echo_psn;
    a.echo_path = c->ack_echo_path;
    a.echo_flags = c->ack_echo_flags;
    room = c->rx_buffered < c->cfg.rx_buf_max ? c->cfg.rx_buf_max - c->rx_buffered : 0;
    a.rwnd = room > UINT32_MAX ? UINT32_MAX : (uint32_t)room;
    c->rwnd_said = room;
    if (c->ack_no_echo)
        a.echo_path = UINT16_MAX;   /* a window update: no RTT sample of an old packet */
    c->ack_no_echo = 0;
    a.credit = c->credit_said = c->credit_grant;
    a.dups = c->dups_said = (uint32_t)c->st.drops[PP_DROP_DUP];
    out->hdr_len = PP_ACK_SHORT + (c->rcv_ahead ? sack_fill(c, a.cum, out->hdr + PP_ACK_SHORT) : 0);
    memcpy(out->hdr, &a, PP_ACK_SHORT);
    pp_seal(out->hdr, out->hdr_len, c->tx_tag);
    out->payload = out->payload2 = NULL;
    out->len = out->len2 = 0;
    out->path = a.h.path;
    ack_said(c);
    return 1;
}

int pp_ack_due(const pp_conn_t *c, uint64_t now, uint32_t bytes, uint64_t delay_ns)
{
    if (!c->ack_pending)
        return 0;
    /* a hole: the SACK drives the sender's loss recovery */
    return c->ack_urgent || c->rcv_ahead || c->credit_grant != c->credit_said ||
           c->ack_owed_bytes >= bytes || !c->ack_owed_ns || now - c->ack_owed_ns >= delay_ns;
}

void pp_rx_copy_defer(pp_conn_t *c, pp_copy_t *q, uint32_t cap)
{
    c->copy_q = q;
    c->copy_cap = cap;
    c->copy_n = 0;
}

uint32_t pp_rx_copy_take(pp_conn_t *c)
{
    uint32_t n = c->copy_n;
    c->copy_q = NULL;
    c->copy_n = c->copy_cap = 0;
    return n;
}

void pp_rx_copy_done(pp_conn_t *c, uint32_t n)
{
    c->copies_out -= n <= c->copies_out ? n : c->copies_out;
}

pp_msg_t *pp_rx_next(pp_conn_t *c)
{
    pp_msg_t *m = c->rmsg[c->rcv_msg % PP_WIN];
    return m && m->id == c->rcv_msg ? m : NULL;
}

pp_msg_t *pp_early_next(pp_conn_t *c)
{
    pp_msg_t *m = pp_rx_next(c);
    if (!m || m->placed || m->early || m->early_asked || !m->head_in || m->got == m->len ||
        !c->cfg.early_min || m->len - m->hlen < c->cfg.early_min)
        return NULL;
    m->early_asked = 1;
    return m;
}

/* The payload bytes that arrived so far lie within [hlen, hi): copying that
 * span moves every one of them (and garbage in the holes, which packets
 * still to come overwrite at the new place). */
static size_t msg_span(const pp_msg_t *m)
{
    return m->hi > m->hlen ? m->hi - m->hlen : 0;
}

void pp_msg_early(pp_conn_t *c, pp_msg_t *m, void *dst)
{
    memcpy(dst, m->data + m->hlen, msg_span(m));
    m->early = dst;
    c->st.rx_early++;
}

void pp_msg_unearly(pp_conn_t *c, pp_msg_t *m)
{
    (void)c;
    if (!m->early)
        return;
    memcpy(m->data + m->hlen, m->early, msg_span(m));
    m->early = NULL;
}

pp_msg_t *pp_deliver(pp_conn_t *c)
{
    pp_msg_t **slot = &c->rmsg[c->rcv_msg % PP_WIN], *m = *slot;
    if (!pp_deliver_ready(c))
        return NULL;
    *slot = NULL;
    c->rcv_msg++;
    c->st.rx_msgs++;
    return m;
}

int pp_deliver_ready(const pp_conn_t *c)
{
    const pp_msg_t *m = c->rmsg[c->rcv_msg % PP_WIN];
    return m && m->id == c->rcv_msg && m->got == m->len && !c->copies_out;
}

int pp_msg_release(pp_conn_t *c, pp_msg_t *m)
{
    int update = pp_msg_detach(c, m);
    msg_free(c, m);
    return update;
}

void pp_msg_free(pp_conn_t *c, pp_msg_t *m)
{
    msg_free(c, m);
}

int pp_msg_detach(pp_conn_t *c, pp_msg_t *m)
{
    c->rx_buffered -= rx_cost(m->placed, m->len, m->hlen);
    /* Window update: the last ACK left the sender less than a quarter of
     * the buffer, and delivery has freed a chunk more since. A sender
     * waiting on the window with nothing in flight hears of the room no
     * other way (no data comes, so no ACK would); only its probe, an RTO
     * floor later, would find out (chunk_start). With a wider window the
     * sender is not waiting on it, and the ACKs of its data say the rest. */
    if (c->ack_pending || c->rwnd_said >= c->cfg.rx_buf_max / 4 ||
        c->rx_buffered + c->rwnd_said + c->cfg.chunk > c->cfg.rx_buf_max)
        return 0;
    c->ack_pending = 1;
    c->ack_urgent = 1;
    c->ack_no_echo = 1;
    return 1;
}

void pp_stats(const pp_conn_t *c, pp_stats_t *st)
{
    *st = c->st;
    st->srtt_ns = c->srtt_ns;
    st->min_rtt_ns = c->min_rtt_ns;
    st->cwnd = (uint64_t)c->cc.cwnd;
    st->rate_Bps = c->rate_Bps;
    st->credit = c->cc.credit > 0 ? (uint64_t)c->cc.credit : 0;
    st->rto_floor_ns = c->rto_floor_ns;
    st->reo_ns = reo_window(c);
    if (c->wait_why && c->now > c->wait_since)   /* the wait still open counts so far */
        st->wait_ns[c->wait_why] += c->now - c->wait_since;
}
