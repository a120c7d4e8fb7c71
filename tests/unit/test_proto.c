/*
 * test_proto.c -- the multipath protocol (transport/proto) fed with scripted
 * packet sequences: loss, reordering, duplication, corruption, PSN
 * wrap-around, timeouts and give-up, flow control, every CC x LB policy.
 * Deterministic: simulated time, seeded random data, fixed filters.
 */
#include <stddef.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/tap.h"
#include "tests/unit/test_proto_net.h"

#define MAX_STEPS 400000

/* A packet's type and flags (common header, pp.h). */
#define PKT_TYPE(p)  ((p)[offsetof(pp_hdr_t, type)])
#define PKT_FLAGS(p) ((p)[offsetof(pp_hdr_t, flags)])

/* The body of message i (header 32 bytes + payload), from a seed. */
static size_t msg_len(uint64_t seed, int i)
{
    static const size_t sizes[] = {40, 1, 999, 1000, 1001, 3999, 4000, 4001, 8193, 65536, 100003};
    (void)seed;
    return sizes[i % (int)(sizeof sizes / sizeof sizes[0])];
}

static void msg_fill(uint8_t *b, size_t len, uint64_t seed, int i)
{
    uint64_t x = seed * 1000003u + (uint64_t)i + 1;
    for (size_t k = 0; k < len; k++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        b[k] = (uint8_t)x;
    }
}

typedef struct {
    int sent, delivered, bad, order_bad, steps, blocked;
} xfer_t;

/* Sends nmsg messages 0 -> 1 and checks each one delivered intact, in order.
 * consume: 0 = the receiver never takes messages (flow-control test), 1 =
 * it takes every message each step, k > 1: one message every k steps (a
 * receiver slower than its sender), -k: none for k steps, then every one. */
static xfer_t transfer(net_t *n, int nmsg, int burst, int consume)
{
    xfer_t x = {0};
    uint8_t *buf = malloc(200000), hdr[32];
    while (x.steps < MAX_STEPS && (x.delivered < nmsg || !pp_idle(&n->c[0]))) {
        pp_msg_t *m;
        while (x.sent < nmsg) {
            size_t len = msg_len(7, x.sent);
            int rc;
            msg_fill(buf, len, 7, x.sent);
            memset(hdr, 0, sizeof hdr);
            memcpy(hdr, &x.sent, sizeof x.sent);
            rc = pp_send(&n->c[0], hdr, sizeof hdr, buf, len);
            if (rc == 1) {
                x.blocked++;
                break;
            }
            x.sent++;
        }
        net_step(n, burst);
        x.steps++;
        if (n->c[0].failed)
            break;
        for (int took = 0; consume && (consume == 1 || (consume < 0 && x.steps > -consume) ||
                                       (consume > 1 && x.steps % consume == 0 && !took)) &&
                           (m = pp_deliver(&n->c[1])) != NULL; took++) {
            int id;
            size_t len = msg_len(7, x.delivered);
            memcpy(&id, m->data, sizeof id);
            if (id != x.delivered)
                x.order_bad++;
            msg_fill(buf, len, 7, x.delivered);
            if (m->len != len + 32 || m->hlen != 32 || memcmp(m->data + 32, buf, len))
                x.bad++;
            x.delivered++;
            pp_msg_release(&n->c[1], m);
        }
        if (!consume && x.steps > 3000)
            break;
    }
    free(buf);
    return x;
}

static int xfer_ok(const char *name, xfer_t x, int nmsg)
{
    return TAP_OK(x.delivered == nmsg && x.bad == 0 && x.order_bad == 0,
                  "%s: %d/%d messages intact and in order (%d corrupt, %d out of order, %d steps)",
                  name, x.delivered, nmsg, x.bad, x.order_bad, x.steps);
}

static uint64_t retx(const net_t *n) { return n->c[0].st.retx_fast + n->c[0].st.retx_timeout; }

/* ------------------------------------------------------------- filters */

static int f_drop_every_7th_data(net_t *n, int from, const uint8_t *p, size_t len, uint64_t seq)
{
    (void)n; (void)len;
    return from == 0 && PKT_TYPE(p) == PP_T_DATA && seq % 7 == 3 ? NET_DROP : NET_PASS;
}

static int f_drop_acks_half(net_t *n, int from, const uint8_t *p, size_t len, uint64_t seq)
{
    (void)n; (void)len;
    return from == 1 && PKT_TYPE(p) == PP_T_ACK && seq % 2 == 0 ? NET_DROP : NET_PASS;
}

static int f_dup_all(net_t *n, int from, const uint8_t *p, size_t len, uint64_t seq)
{
    (void)n; (void)from; (void)p; (void)len; (void)seq;
    return NET_DUP;
}

static int f_corrupt_some(net_t *n, int from, const uint8_t *p, size_t len, uint64_t seq)
{
    (void)n; (void)from; (void)p; (void)len;
    return seq % 11 == 5 ? NET_CORRUPT : NET_PASS;
}

static int f_drop_all(net_t *n, int from, const uint8_t *p, size_t len, uint64_t seq)
{
    (void)n; (void)p; (void)len; (void)seq;
    return from == 0 ? NET_DROP : NET_PASS;
}

/* Drops the last data packet of the first transmission (a tail loss: no
 * later packets to SACK it, only the timeout recovers it). */
static int f_tail_once(net_t *n, int from, const uint8_t *p, size_t len, uint64_t seq)
{
    int *done = n->arg;
    (void)seq;
    if (from == 0 && PKT_TYPE(p) == PP_T_DATA && !*done && (PKT_FLAGS(p) & PP_F_CHUNK_END)) {
        pp_data_t d;
        memcpy(&d, p, sizeof d);
        if (d.off + (len - pp_data_hdr_len(d.h.flags)) == d.msg_len) {
            *done = 1;
            return NET_DROP;
        }
    }
    return NET_PASS;
}

/* Random loss from a fixed seed (per mille). */
static int f_random_loss(net_t *n, int from, const uint8_t *p, size_t len, uint64_t seq)
{
    uint64_t x = (seq + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)from << 40;
    int permille = *(int *)n->arg;
    (void)p; (void)len;
    x ^= x >> 31; x *= 0xbf58476d1ce4e5b9ull; x ^= x >> 29;
    return (int)(x % 1000) < permille ? NET_DROP : NET_PASS;
}

/* --------------------------------------------------------------- cases */

static void t_clean(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    xfer_t x;
    net_cfg(&a, 0, 100, 200);
    net_cfg(&b, 1, 100, 200);
    TAP_OK(net_init(n, &a, &b) == 0, "clean: connections initialize");
    x = transfer(n, 60, 64, 1);
    xfer_ok("clean", x, 60);
    TAP_OK(retx(n) == 0, "clean: no retransmissions (%llu)", (unsigned long long)retx(n));
    TAP_OK(n->c[1].st.rx_msgs == 60 && n->c[0].st.tx_msgs == 60, "clean: message counters");
    net_fini(n);
    free(n);
}

static void t_loss(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    xfer_t x;
    net_cfg(&a, 0, 5, 9);
    net_cfg(&b, 1, 5, 9);
    net_init(n, &a, &b);
    n->filter = f_drop_every_7th_data;
    x = transfer(n, 40, 64, 1);
    xfer_ok("loss 1/7", x, 40);
    TAP_OK(n->c[0].st.retx_fast > 0, "loss: fast retransmits happen (%llu fast, %llu timeout)",
           (unsigned long long)n->c[0].st.retx_fast, (unsigned long long)n->c[0].st.retx_timeout);
    TAP_OK(n->c[0].st.retx_fast_order > 0 && n->c[0].st.retx_fast_order <= n->c[0].st.retx_fast,
           "loss: the path-order rule's share is counted (%llu of %llu)",
           (unsigned long long)n->c[0].st.retx_fast_order, (unsigned long long)n->c[0].st.retx_fast);
    net_fini(n);
    free(n);
}

static void t_reorder(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    xfer_t x;
    net_cfg(&a, 0, 1, 2);
    net_cfg(&b, 1, 1, 2);
    net_init(n, &a, &b);
    n->reverse = 1;   /* every batch of 16 arrives backwards: reordering < dupthresh */
    x = transfer(n, 40, 16, 1);
    xfer_ok("reorder", x, 40);
    TAP_OK(retx(n) == 0, "reorder: below the duplicate threshold nothing is retransmitted "
           "(%llu)", (unsigned long long)retx(n));
    net_fini(n);
    free(n);
}

/* Holds every 100th original data packet two steps (a receiving thread
 * that took it and worked through it after the next batch was ACKed): a
 * later packet of its path is acknowledged first, and the same-path rule
 * resends it needlessly until the peer's duplicate count widens the
 * reordering window. Counts the packets held in *(int *)n->arg. */
static int f_hold_some(net_t *n, int from, const uint8_t *p, size_t len, uint64_t seq)
{
    (void)len;
    if (from != 0 || PKT_TYPE(p) != PP_T_DATA || (PKT_FLAGS(p) & PP_F_RETX) || seq % 100 != 50)
        return NET_PASS;
    ++*(int *)n->arg;
    return NET_HOLD;
}

static void t_reo_adapt(void)
{
    net_t *n = net_new(7, 9, f_hold_some);
    int held = 0, loss = 143;
    pp_stats_t st;
    xfer_t x;
    n->arg = &held;
    x = transfer(n, 220, 64, 1);
    xfer_ok("receiver reordering", x, 220);
    pp_stats(&n->c[0], &st);
    TAP_OK(st.spurious > 0 && st.spurious * 4 < (uint64_t)held,
           "receiver reordering: needless retransmissions (%llu) stop once the window widens "
           "(%d packets held)", (unsigned long long)st.spurious, held);
    TAP_OK(st.reo_ns > st.min_rtt_ns / 4, "receiver reordering: the window widened "
           "(%.1f us, least RTT %.1f us)", st.reo_ns / 1e3, st.min_rtt_ns / 1e3);
    n->filter = f_random_loss;   /* real losses, nothing needless: it narrows again */
    n->arg = &loss;
    x = transfer(n, 330, 64, 1);
    xfer_ok("receiver reordering, then loss", x, 330);
    pp_stats(&n->c[0], &st);
    TAP_OK(st.loss_events >= PP_REO_QUIET && st.reo_ns == st.min_rtt_ns / 4,
           "receiver reordering, then loss: %llu loss events without duplicates take the window "
           "back (%.1f us)", (unsigned long long)st.loss_events, st.reo_ns / 1e3);
    net_fini(n);
    free(n);
}

static void t_dup(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    xfer_t x;
    net_cfg(&a, 0, 1, 2);
    net_cfg(&b, 1, 1, 2);
    net_init(n, &a, &b);
    n->filter = f_dup_all;
    x = transfer(n, 30, 64, 1);
    xfer_ok("duplication", x, 30);
    TAP_OK(n->c[1].st.drops[PP_DROP_DUP] >= n->c[1].st.rx_pkts,
           "duplication: every duplicate dropped and counted (%llu dup, %llu unique)",
           (unsigned long long)n->c[1].st.drops[PP_DROP_DUP], (unsigned long long)n->c[1].st.rx_pkts);
    net_fini(n);
    free(n);
}

static void t_corrupt(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    xfer_t x;
    uint64_t dropped = 0;
    net_cfg(&a, 0, 1, 2);
    net_cfg(&b, 1, 1, 2);
    net_init(n, &a, &b);
    n->filter = f_corrupt_some;
    x = transfer(n, 30, 64, 1);
    /* Corruption of payload bytes is not detected by the protocol (the UDP
     * checksum does that on a real wire); header corruption must be. Here
     * the flipped byte sits in the middle of the packet: in the payload for
     * data packets, in the SACK bitmap for ACKs. So data may differ, but the
     * transfer must finish and bad ACKs be caught. */
    for (int s = 0; s < 2; s++)
        for (int r = 0; r < PP_DROP_N; r++)
            dropped += n->c[s].st.drops[r];
    for (int r = 0; r < PP_DROP_N; r++)
        dropped += n->parse_drops[r];
    TAP_OK(x.delivered == 30 && x.order_bad == 0, "corruption: transfer completes in order "
           "(%d delivered, %d payloads differ as expected without a checksum)", x.delivered, x.bad);
    TAP_OK(n->parse_drops[PP_DROP_KEY] > 0 && n->c[1].st.drops[PP_DROP_BOUNDS] == 0 &&
           n->c[1].st.drops[PP_DROP_INCONS] == 0,
           "corruption: corrupt headers fail the seal (%llu), none reaches the message checks "
           "(%llu dropped in all)", (unsigned long long)n->parse_drops[PP_DROP_KEY],
           (unsigned long long)dropped);
    net_fini(n);
    free(n);
}

/* Every header field of a valid data packet, altered, is dropped by reason. */
static void t_field_checks(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    pp_out_t o;
    uint8_t pkt[2000];
    pp_data_t d;
    size_t len;
    uint32_t src;
    int type;
    net_cfg(&a, 0, 1, 2);
    net_cfg(&b, 1, 1, 2);
    net_init(n, &a, &b);
    pp_send(&n->c[0], "h", 1, "payload", 7);
    TAP_OK(pp_tx_next(&n->c[0], n->now, &o) == 1, "fields: one packet to send");
    TAP_OK(o.hdr_len == 40 && PP_DATA_HDR == 40 && sizeof(pp_hdr_t) == 24 &&
           PP_DATA_HDR_MAX == 52 && PP_ACK_LEN <= 1472,
           "fields: headers of 24 (common), 40 (data), 52 (placed data) bytes; ACK %zu bytes "
           "fits a 1500-byte MTU", (size_t)PP_ACK_LEN);
    memset(pkt, 0, sizeof pkt);
    memcpy(pkt, o.hdr, o.hdr_len);
    memcpy(pkt + o.hdr_len, o.payload, o.len);
    len = o.hdr_len + o.len;
    memcpy(&d, pkt, sizeof d);
    TAP_OK(d.h.tag == (pp_tag(NET_KEY, 0, 1) ^ pp_hdr_sum(pkt, PP_DATA_HDR)) &&
           pp_tag(NET_KEY, 0, 1) != pp_tag(NET_KEY, 1, 0) &&
           pp_tag(NET_KEY, 0, 1) != pp_tag(NET_KEY + 1, 0, 1) &&
           pp_tag(NET_KEY, 0, 1) != pp_tag(NET_KEY, 0, 2) && d.h.hlen == 1 && d.h.ack_via == 0,
           "fields: the tag depends on key, source and destination (direction too), sealed "
           "with the header");
    d.h.tag = pp_tag(NET_KEY, 0, 1);   /* unsealed: PUT seals each altered copy */
    /* SipHash-2-4 (checked against the reference implementation's vectors
     * when written): a change here changes the wire format */
    TAP_OK(pp_tag(NET_KEY, 0, 1) == 0x4035358061dee471ull,
           "fields: the tag of rank 0 -> 1 is the pinned SipHash-2-4 value");
#define PARSE(p, l) pp_parse(p, l, NET_KEY, 1, &src, &type)
#define PUT(e) (memcpy(pkt, &(e), sizeof(e)), pp_seal(pkt, sizeof(e), (e).h.tag))
#define RX(l) pp_rx(&n->c[1], n->now, pkt, l)
#define SEAL_ACK(l) pp_seal(&k, l, pp_tag(NET_KEY, 1, 0))
#define DROPS(r) n->c[1].st.drops[r]
    TAP_OK(PARSE(pkt, len) == -1 && src == 0 && type == PP_T_DATA, "fields: the valid packet parses");
    TAP_OK(PARSE(pkt, 10) == PP_DROP_TRUNC, "fields: truncated common header");
    TAP_OK(PARSE(pkt, PP_DATA_HDR - 1) == PP_DROP_TRUNC, "fields: truncated data header");
    {
        pp_data_t e = d;
        e.h.magic ^= 1; PUT(e);
        TAP_OK(PARSE(pkt, len) == PP_DROP_MAGIC, "fields: bad magic");
        e = d; e.h.magic = 0x5550; PUT(e);   /* the start of version 1's "PUD1" */
        TAP_OK(PARSE(pkt, len) == PP_DROP_MAGIC, "fields: a version-1 packet is not-plait");
        e = d; e.h.type = 9; PUT(e);
        TAP_OK(PARSE(pkt, len) == PP_DROP_MAGIC, "fields: unknown type");
        e = d; e.h.flags |= 0x80; PUT(e);
        TAP_OK(PARSE(pkt, len) == PP_DROP_MAGIC, "fields: unknown flag bit");
        e = d; e.h.ack_via = 200; PUT(e);
        TAP_OK(PARSE(pkt, len) == -1, "fields: data may name a path for the ACKs (any value)");
        e = d; e.h.flags |= PP_F_PLACED; PUT(e);
        TAP_OK(PARSE(pkt, PP_DATA_HDR_MAX - 1) == PP_DROP_TRUNC,
               "fields: placed flag on a datagram shorter than the placed header");
        e = d; e.h.flags |= PP_F_PLACED | PP_F_ACK; PUT(e);
        TAP_OK(PARSE(pkt, len) == PP_DROP_MAGIC, "fields: a piggybacked ACK on a placed packet");
        e = d; e.h.flags |= PP_F_ACK; PUT(e);
        TAP_OK(PARSE(pkt, PP_DATA_HDR + PP_PIGGY_LEN - 1) == PP_DROP_TRUNC,
               "fields: ACK flag on a datagram shorter than the data header and its ACK");
        e = d; e.h.tag = pp_tag(NET_KEY ^ 1, 0, 1); PUT(e);
        TAP_OK(PARSE(pkt, len) == PP_DROP_KEY, "fields: another job's tag");
        e = d; e.h.tag ^= 1ull << 40; PUT(e);
        TAP_OK(PARSE(pkt, len) == PP_DROP_KEY, "fields: wrong tag (one bit)");
        for (size_t i = 0; i < PP_DATA_HDR; i++) {   /* every header byte is sealed */
            int bad = 0;
            e = d; PUT(e);
            pkt[i] ^= 0x10;
            bad = PARSE(pkt, len) >= 0;
            pkt[i] ^= 0x10;
            if (!bad) {
                TAP_OK(0, "fields: header byte %zu flipped is dropped", i);
                break;
            }
            if (i == PP_DATA_HDR - 1)
                TAP_OK(1, "fields: any header byte flipped (PSN, offset, length...) is dropped");
        }
        e = d; PUT(e);
        TAP_OK(pp_parse(pkt, len, NET_KEY, 5, &src, &type) == PP_DROP_KEY,
               "fields: a packet meant for another rank (its tag names rank 1)");
        e = d; e.h.src = 1; e.h.tag = pp_tag(NET_KEY, 1, 1); PUT(e);
        TAP_OK(PARSE(pkt, len) == PP_DROP_CONN, "fields: from this rank itself");
        e = d; e.h.src = 7; e.h.tag = pp_tag(NET_KEY, 7, 1); PUT(e);
        TAP_OK(PARSE(pkt, len) == -1 && src == 7, "fields: another rank's packet parses ...");
        RX(len);
        TAP_OK(DROPS(PP_DROP_CONN) == 1, "fields: ... and the connection to rank 0 refuses it");
        e = d; e.h.tag = pp_tag(NET_KEY ^ 1, 0, 1); PUT(e);
        RX(len);
        TAP_OK(DROPS(PP_DROP_KEY) == 1, "fields: the connection checks the tag as well");
        e = d; e.h.epoch ^= 1; PUT(e);
        RX(len);
        TAP_OK(DROPS(PP_DROP_STALE) == 1, "fields: stale epoch dropped");
        e = d; e.off = 5; PUT(e);
        RX(len);
        TAP_OK(DROPS(PP_DROP_BOUNDS) == 1, "fields: offset + length beyond the message");
        e = d; e.msg_len = 0xffffffffu; PUT(e);
        RX(len);
        TAP_OK(DROPS(PP_DROP_BOUNDS) == 2, "fields: message larger than allowed");
        e = d; e.h.hlen = 0; PUT(e);
        RX(len);
        TAP_OK(DROPS(PP_DROP_BOUNDS) == 3, "fields: zero header length");
        e = d; e.h.hlen = 9; PUT(e);
        RX(len);
        TAP_OK(DROPS(PP_DROP_BOUNDS) == 4, "fields: header longer than the message");
        e = d; PUT(e);
        RX(PP_DATA_HDR);
        TAP_OK(DROPS(PP_DROP_BOUNDS) == 5, "fields: a datagram of the header alone (no payload)");
        RX(len + 1);
        TAP_OK(DROPS(PP_DROP_BOUNDS) == 6,
               "fields: a datagram one byte longer than the message (trailing bytes)");
        e = d; e.msg_len = 4000; PUT(e);
        RX(PP_DATA_HDR + a.mtu + 1);
        TAP_OK(DROPS(PP_DROP_BOUNDS) == 7, "fields: a payload longer than the MTU");
        e = d; e.h.flags |= PP_F_PLACED; PUT(e);
        RX(len);
        TAP_OK(DROPS(PP_DROP_TRUNC) == 1, "fields: the connection checks lengths as well");
        e = d; e.psn += PP_WIN; PUT(e);
        RX(len);
        TAP_OK(DROPS(PP_DROP_WINDOW) == 1, "fields: PSN beyond the window");
        e = d; e.msg += PP_WIN; PUT(e);
        RX(len);
        TAP_OK(DROPS(PP_DROP_WINDOW) == 2, "fields: message id beyond the window");
        e = d; PUT(e);
        RX(len);
        {
            pp_msg_t *m = pp_deliver(&n->c[1]);
            TAP_OK(m && m->len == 8 && !memcmp(m->data, "hpayload", 8),
                   "fields: the valid packet after all that is delivered intact");
            if (m)
                pp_msg_release(&n->c[1], m);
        }
        TAP_OK(n->c[1].rcv_cum == 2, "fields: only the valid packet advanced the window");
        RX(len);
        TAP_OK(DROPS(PP_DROP_DUP) == 1, "fields: the same packet again is a duplicate");
        e = d; e.psn += 1; e.msg_len = 9; PUT(e);
        RX(len);
        TAP_OK(DROPS(PP_DROP_INCONS) == 1, "fields: new PSN for a delivered message");
    }
    {
        /* ACKs: one for a PSN never sent, malformed ones */
        pp_ack_t k;
        memset(&k, 0, sizeof k);
        k.h.magic = PP_MAGIC; k.h.type = PP_T_ACK; k.h.src = 1; k.h.epoch = 0xbbbb;
        k.cum = 50; k.echo_psn = 1;
        SEAL_ACK(sizeof k);
        TAP_OK(pp_parse(&k, sizeof k, NET_KEY, 0, &src, &type) == -1 && type == PP_T_ACK,
               "fields: a well-formed ACK parses");
        pp_rx(&n->c[0], n->now, &k, sizeof k);
        TAP_OK(n->c[0].st.drops[PP_DROP_BADACK] == 1, "fields: cumulative ACK beyond what was sent");
        k.cum = 1; k.sack[10] = 1;
        SEAL_ACK(sizeof k);
        pp_rx(&n->c[0], n->now, &k, sizeof k);
        TAP_OK(n->c[0].st.drops[PP_DROP_BADACK] == 2, "fields: SACK bit beyond what was sent");
        SEAL_ACK(PP_ACK_SHORT + 16);
        pp_rx(&n->c[0], n->now, &k, PP_ACK_SHORT + 16);
        TAP_OK(n->c[0].st.drops[PP_DROP_BADACK] == 3,
               "fields: SACK bit beyond what was sent, in a bitmap cut after its second word");
        k.sack[10] = 0;
        SEAL_ACK(sizeof k);
        k.sack[3] ^= 4;
        TAP_OK(pp_parse(&k, sizeof k, NET_KEY, 0, &src, &type) == PP_DROP_KEY,
               "fields: a flipped SACK bit fails the seal");
        k.sack[3] ^= 4;
        TAP_OK(pp_parse(&k, sizeof k - 1, NET_KEY, 0, &src, &type) == PP_DROP_TRUNC &&
               pp_parse(&k, PP_ACK_SHORT + 1, NET_KEY, 0, &src, &type) == PP_DROP_TRUNC &&
               pp_parse(&k, PP_ACK_SHORT - 1, NET_KEY, 0, &src, &type) == PP_DROP_TRUNC,
               "fields: ACKs cut inside the bitmap or the header refused by the parser");
        SEAL_ACK(PP_ACK_SHORT);
        TAP_OK(pp_parse(&k, PP_ACK_SHORT, NET_KEY, 0, &src, &type) == -1 && type == PP_T_ACK,
               "fields: an ACK without its bitmap (%zu bytes) parses", (size_t)PP_ACK_SHORT);
        {
            int words_ok = 1;
            for (size_t w = 1; w <= PP_WIN / 64; w++) {
                SEAL_ACK(PP_ACK_SHORT + 8 * w);
                words_ok &= pp_parse(&k, PP_ACK_SHORT + 8 * w, NET_KEY, 0, &src, &type) == -1;
            }
            TAP_OK(words_ok && pp_parse(&k, PP_ACK_SHORT + 12, NET_KEY, 0, &src, &type) ==
                                   PP_DROP_TRUNC,
                   "fields: an ACK with 1..%d whole bitmap words parses, half a word does not",
                   PP_WIN / 64);
        }
        k.rsv = 1;
        TAP_OK(pp_parse(&k, sizeof k, NET_KEY, 0, &src, &type) == PP_DROP_MAGIC,
               "fields: ACK with its reserved byte set");
        k.rsv = 0; k.h.ack_via = 1;
        TAP_OK(pp_parse(&k, sizeof k, NET_KEY, 0, &src, &type) == PP_DROP_MAGIC,
               "fields: ACK naming a path for ACKs");
        k.h.ack_via = 0; k.h.hlen = 3;
        TAP_OK(pp_parse(&k, sizeof k, NET_KEY, 0, &src, &type) == PP_DROP_MAGIC,
               "fields: ACK with a header length");
        k.h.hlen = 0; k.h.flags = PP_F_RETX;
        TAP_OK(pp_parse(&k, sizeof k, NET_KEY, 0, &src, &type) == PP_DROP_MAGIC,
               "fields: ACK with flags");
    }
#undef PARSE
#undef PUT
#undef RX
#undef SEAL_ACK
#undef DROPS
    net_fini(n);
    free(n);
}

static void t_wrap(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    xfer_t x;
    net_cfg(&a, 0, 0xffffff00u, 0xfffffff0u);
    net_cfg(&b, 1, 0xffffff00u, 0xfffffff0u);
    net_init(n, &a, &b);
    n->filter = f_drop_every_7th_data;
    x = transfer(n, 60, 64, 1);
    xfer_ok("wrap-around (PSN and message ids cross 2^32, with loss)", x, 60);
    TAP_OK(n->c[0].snd_una < 0x1000, "wrap: sequence wrapped (snd_una %u)", n->c[0].snd_una);
    net_fini(n);
    free(n);
}

static void t_ack_loss(void)
{
    net_t *n = net_new(1, 2, f_drop_acks_half);
    xfer_ok("half the ACKs lost", transfer(n, 30, 64, 1), 30);
    net_fini(n);
    free(n);
}

static void t_tail_timeout(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    int done = 0;
    net_cfg(&a, 0, 1, 2);
    net_cfg(&b, 1, 1, 2);
    net_init(n, &a, &b);
    n->filter = f_tail_once;
    n->arg = &done;
    xfer_ok("tail loss", transfer(n, 1, 64, 1), 1);
    TAP_OK(done && n->c[0].st.retx_timeout == 1 && n->c[0].st.retx_fast == 0,
           "tail loss: recovered by exactly one timeout (%llu timeout, %llu fast)",
           (unsigned long long)n->c[0].st.retx_timeout, (unsigned long long)n->c[0].st.retx_fast);
    net_fini(n);
    free(n);
}

static void t_give_up(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    xfer_t x;
    net_cfg(&a, 0, 1, 2);
    net_cfg(&b, 1, 1, 2);
    net_init(n, &a, &b);
    n->filter = f_drop_all;
    x = transfer(n, 3, 64, 1);
    TAP_OK(n->c[0].failed && x.delivered == 0, "give-up: a dead peer fails the connection "
           "(after %d steps = %.2f s simulated)", x.steps, x.steps * 1e-5);
    TAP_OK(strstr(n->c[0].why, "rank 1") != NULL && !strstr(n->c[0].why, "still arrive"),
           "give-up: the error names the peer, no path-MTU hint (nothing came): %s", n->c[0].why);
    TAP_OK(n->c[0].st.retx_timeout > 3 && n->c[0].st.retx_timeout < 200,
           "give-up: timeouts back off (%llu retransmissions in 2 s)",
           (unsigned long long)n->c[0].st.retx_timeout);
    net_fini(n);
    free(n);
}

/* Drops the large packets of rank 0 only: a path that loses datagrams
 * above its MTU without telling, while small ones pass. */
static int f_drop_large(net_t *n, int from, const uint8_t *p, size_t len, uint64_t seq)
{
    (void)n; (void)p; (void)seq;
    return from == 0 && len > 400 ? NET_DROP : NET_PASS;
}

/* A peer alive (its small messages keep coming) that never acknowledges
 * our large packets: the give-up message says where to look (the path
 * MTU) instead of only blaming the peer. */
static void t_give_up_black_hole(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    static uint8_t big[20000];
    uint8_t hdr[32] = {0}, small[8] = {0};
    int step;
    net_cfg(&a, 0, 1, 2);
    net_cfg(&b, 1, 1, 2);
    net_init(n, &a, &b);
    n->filter = f_drop_large;
    TAP_OK(pp_send(&n->c[0], hdr, sizeof hdr, big, sizeof big) == 0, "black hole: queued");
    for (step = 0; step < 1000000 && !n->c[0].failed; step++) {
        pp_msg_t *m;
        if (step % 1000 == 0)
            pp_send(&n->c[1], hdr, sizeof hdr, small, sizeof small);
        net_step(n, 64);
        while ((m = pp_deliver(&n->c[0])) != NULL)
            pp_msg_release(&n->c[0], m);
    }
    TAP_OK(n->c[0].failed && strstr(n->c[0].why, "rank 1") &&
           strstr(n->c[0].why, "its packets still arrive") &&
           strstr(n->c[0].why, "PLAIT_UDP_MTU"),
           "black hole: the give-up message points at the path MTU (%d steps): %s", step,
           n->c[0].why);
    net_fini(n);
    free(n);
}

static void t_flow_control(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    xfer_t x;
    net_cfg(&a, 0, 1, 2);
    net_cfg(&b, 1, 1, 2);
    a.tx_buf_max = 256u << 10;
    b.rx_buf_max = 200u << 10;
    net_init(n, &a, &b);
    x = transfer(n, 1000, 64, 0);   /* the receiver never takes a message */
    TAP_OK(x.blocked > 0 && n->c[0].tx_buffered <= a.tx_buf_max + a.max_msg,
           "flow control: sender pushes back (%d refusals, %zu bytes buffered)", x.blocked,
           n->c[0].tx_buffered);
    TAP_OK(n->c[1].rx_buffered <= b.rx_buf_max + b.max_msg,
           "flow control: receiver buffers at most its cap plus one message (%zu)",
           n->c[1].rx_buffered);
    {
        pp_stats_t st;
        pp_stats(&n->c[0], &st);
        TAP_OK(st.wait_ns[PP_WAIT_RWND] > 0 && st.wait_ns[PP_WAIT_RWND] <= n->now &&
               st.wait_ns[PP_WAIT_NONE] == 0 && !strcmp(pp_wait_name(PP_WAIT_RWND), "receiver-window"),
               "flow control: the sender's stall is counted as a receiver-window wait (%.1f ms)",
               st.wait_ns[PP_WAIT_RWND] / 1e6);
    }
    net_fini(n);
    free(n);
}

/* Both ends of a connection with a 300 KiB receive buffer (first PSNs isn,
 * isn + 1): a window small enough for the flow-control tests to close. */
static void small_window_cfg(pp_cfg_t *a, pp_cfg_t *b, uint32_t isn)
{
    net_cfg(a, 0, isn, isn + 1);
    net_cfg(b, 1, isn, isn + 1);
    b->rx_buf_max = a->rx_buf_max = 300u << 10;
}

/* Every ACK is lost from 2 ms to 6 ms of simulated time: the sender times
 * out packets its receiver holds (spurious timeouts). */
static int f_ack_blackout(net_t *n, int from, const uint8_t *p, size_t len, uint64_t seq)
{
    (void)len; (void)seq;
    return from == 1 && PKT_TYPE(p) == PP_T_ACK && n->now >= 2000000 && n->now < 6000000
               ? NET_DROP : NET_PASS;
}

/* A receiver slower than its sender, and spurious timeouts: bytes timed out
 * stay charged against the receiver's window until acknowledged, so the
 * sender never sends more than the receiver has room for (no packet dropped
 * for want of buffer: each such drop is a real loss, repaired only after an
 * RTO). Then a receiver that stops taking messages and resumes: its window
 * update restarts the sender, which meanwhile probed with one packet at a
 * time, its resends backed off from the RTO floor. */
static void t_flow_spurious(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    xfer_t x;
    uint64_t probes;
    small_window_cfg(&a, &b, 1);
    net_init(n, &a, &b);
    n->filter = f_ack_blackout;
    x = transfer(n, 600, 64, 3);
    xfer_ok("flow control, slow receiver, spurious timeouts", x, 600);
    TAP_OK(n->c[0].st.retx_timeout > 0 && n->c[1].st.drops[PP_DROP_NOBUF] == 0,
           "flow control: %llu timeouts, %llu packets dropped for want of receiver buffer (0)",
           (unsigned long long)n->c[0].st.retx_timeout,
           (unsigned long long)n->c[1].st.drops[PP_DROP_NOBUF]);
    net_fini(n);

    net_init(n, &a, &b);
    x = transfer(n, 300, 64, -3000);   /* 30 ms with nothing taken: the window closes */
    xfer_ok("flow control: the sender resumes when the receiver takes messages", x, 300);
    probes = n->c[1].st.drops[PP_DROP_NOBUF];
    {
        /* one packet per probe, and a refused probe's resends back off
         * from the RTO floor: at most twice the doublings that fit in 30 ms
         * (a probe of a whole chunk made 32 here) */
        uint64_t most = 0;
        for (uint64_t gap = a.rto_min_ns; gap <= 30000000ull; gap *= 2)
            most += 2;
        TAP_OK(probes > 0 && probes <= most,
               "flow control: a closed window is probed one packet at a time, not flooded (%llu "
               "packets refused in 30 ms, at most %llu)", (unsigned long long)probes,
               (unsigned long long)most);
    }
    net_fini(n);
    free(n);
}

/* The window update: a receiver whose last ACK advertised little room says
 * so again, unasked, once delivery frees a chunk more: an ACK with the new
 * window and no RTT echo (its echoed packet is old news). */
static void t_window_update(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    pp_out_t o;
    pp_ack_t ack;
    pp_msg_t *m;
    int owed = 0, taken = 0;
    size_t said;
    small_window_cfg(&a, &b, 5);
    net_init(n, &a, &b);
    transfer(n, 300, 64, 0);   /* nothing taken: the window closes */
    said = n->c[1].rwnd_said;
    while (!owed && (m = pp_deliver(&n->c[1])) != NULL) {
        owed = pp_msg_release(&n->c[1], m);
        taken++;
    }
    memset(&ack, 0, sizeof ack);
    if (owed && pp_ack_next(&n->c[1], n->now, &o))
        memcpy(&ack, o.hdr, o.hdr_len < sizeof ack ? o.hdr_len : sizeof ack);
    TAP_OK(said < b.rx_buf_max / 4 && owed && ack.rwnd >= said + b.chunk &&
               ack.echo_path == UINT16_MAX,
           "window update: after %d messages taken the receiver owes an ACK (%d) advertising "
           "%u B (was %zu), without an RTT echo", taken, owed, ack.rwnd, said);
    net_fini(n);
    free(n);
}

static void t_policies(void)
{
    static const char *ccs[] = {"cubic", "swift", "dgpool", "eqds"};
    static const char *lbs[] = {"spray", "p2c", "ackclock", "pwin"};
    int permille = 20;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            net_t *n = malloc(sizeof *n);
            pp_cfg_t a, b;
            char name[64];
            net_cfg(&a, 0, 1, 2);
            a.cc = b.cc = NULL;
            net_cfg(&b, 1, 1, 2);
            a.cc = b.cc = pp_cc_find(ccs[i]);
            a.lb = b.lb = pp_lb_find(lbs[j]);
            net_init(n, &a, &b);
            n->filter = f_random_loss;
            n->arg = &permille;
            snprintf(name, sizeof name, "%s+%s with 2%% loss", ccs[i], lbs[j]);
            xfer_ok(name, transfer(n, 40, 64, 1), 40);
            TAP_OK(retx(n) > 0 && n->c[0].st.tx_chunks > 0, "%s: losses were repaired (%llu "
                   "retransmissions)", name, (unsigned long long)retx(n));
            net_fini(n);
            free(n);
        }
    TAP_OK(pp_cc_find("nope") == NULL && pp_lb_find("nope") == NULL, "unknown policy names");
}

static void t_small_one_path(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    pp_out_t o;
    int others = 0;
    net_cfg(&a, 0, 1, 2);
    net_cfg(&b, 1, 1, 2);
    net_init(n, &a, &b);
    for (int i = 0; i < 20; i++)
        pp_send(&n->c[0], "hdr", 3, "x", 1);
    while (pp_tx_next(&n->c[0], n->now, &o))
        others += o.path != 0;
    TAP_OK(others == 0, "small messages stay on one path (%d elsewhere)", others);
    net_fini(n);
    free(n);
}

/* The receiver's exposed region for the placement tests: id 77, 300000 bytes. */
typedef struct {
    uint8_t *buf;
    size_t   len;
} region_t;

static void *place_in_region(void *arg, uint64_t id, uint64_t off, size_t *len)
{
    region_t *r = arg;
    if (id != 77 || off >= r->len)
        return NULL;
    if (*len > r->len - off)
        *len = r->len - off;
    return r->buf + off;
}

/* Two connections whose receiver places into rg (id 77). */
static void placed_net_init(net_t *n, region_t *rg)
{
    pp_cfg_t a, b;
    net_cfg(&a, 0, 5, 6);
    net_cfg(&b, 1, 5, 6);
    b.place = place_in_region;
    b.place_arg = rg;
    net_init(n, &a, &b);
}

/* Placed messages: the payload lands in the exposed region at its offset
 * (under loss and reordering), the delivered message holds the header only,
 * and bytes outside the region are discarded, never written. */
static void t_placed(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    region_t rg = {calloc(1, 300000 + 64), 300000};
    uint8_t *src = calloc(1, 300000 + 500), hdr[40] = {9, 8, 7};   /* + the last send's tail */
    int permille = 30, bad = 0, steps = 0, got = 0;
    size_t parts[3] = {100000, 150000, 50000}, off = 0;
    pp_msg_t *m;
    placed_net_init(n, &rg);
    n->filter = f_random_loss;
    n->arg = &permille;
    n->reverse = 1;
    msg_fill(src, 300000, 3, 1);
    for (int i = 0; i < 3; i++) {
        if (pp_send_placed(&n->c[0], hdr, sizeof hdr, src + off, parts[i], 77, off) != 0)
            bad++;
        off += parts[i];
    }
    /* one more that reaches past the region's end: the 500 bytes inside it
     * land (a truncating receive), the rest is discarded, never written */
    bad += pp_send_placed(&n->c[0], hdr, sizeof hdr, src + 299500, 1000, 77, 299500) != 0;
    while (steps++ < MAX_STEPS && (got < 4 || !pp_idle(&n->c[0]))) {
        net_step(n, 64);
        while ((m = pp_deliver(&n->c[1])) != NULL) {
            bad += m->len != sizeof hdr + (got < 3 ? parts[got] : 1000) || !m->placed ||
                   memcmp(m->data, hdr, sizeof hdr) != 0;
            got++;
            pp_msg_release(&n->c[1], m);
        }
    }
    TAP_OK(got == 4 && bad == 0, "placed: 4 messages delivered with their headers (%d bad)", bad);
    TAP_OK(memcmp(rg.buf, src, 300000) == 0 && rg.buf[300000] == 0,
           "placed: 300000 bytes in the region intact under 3%% loss and reordering, nothing "
           "written past it");
    TAP_OK(n->c[1].st.rx_placed == 300500 && n->c[1].st.rx_discarded == 500,
           "placed: counters (placed %llu, discarded %llu)",
           (unsigned long long)n->c[1].st.rx_placed, (unsigned long long)n->c[1].st.rx_discarded);
    TAP_OK(n->c[1].rx_buffered == 0, "placed: receive buffer accounting back to 0");
    net_fini(n);
    /* a receiver without a place hook drops placed packets as out of bounds */
    net_cfg(&a, 0, 5, 6);
    net_cfg(&b, 1, 5, 6);
    net_init(n, &a, &b);
    pp_send_placed(&n->c[0], hdr, sizeof hdr, src, 5000, 77, 0);
    for (int i = 0; i < 5; i++)
        net_step(n, 64);
    TAP_OK(n->c[1].st.drops[PP_DROP_BOUNDS] > 0 && !pp_deliver_ready(&n->c[1]),
           "placed: no place hook, packets dropped (%llu)",
           (unsigned long long)n->c[1].st.drops[PP_DROP_BOUNDS]);
    net_fini(n);
    free(n);
    free(src);
    free(rg.buf);
}

/* Deferred placement (pp_rx_copy_defer): the copies into the exposed region
 * are queued for the datapath to make unlocked (past the queue's room they
 * are made at once); the packets are acknowledged at once, but the message
 * is not handed up until the datapath reports its copies made. */
static void t_placed_deferred(void)
{
    net_t *n = malloc(sizeof *n);
    region_t rg = {calloc(1, 8192), 8000};
    uint8_t src[5000], hdr[8] = {8, 7, 6, 5, 4, 3, 2, 1}, pkt[8][1100], zero[1100] = {0};
    size_t plen[8];
    pp_copy_t q[2];
    pp_out_t o, ack;
    pp_msg_t *m;
    int np = 0, queued_unwritten = 1;
    uint32_t nq;
    placed_net_init(n, &rg);
    msg_fill(src, sizeof src, 5, 3);
    pp_send_placed(&n->c[0], hdr, 8, src, sizeof src, 77, 100);
    while (np < 8 && pp_tx_next(&n->c[0], n->now, &o) == 1) {
        memcpy(pkt[np], o.hdr, o.hdr_len);
        memcpy(pkt[np] + o.hdr_len, o.payload, o.len);
        if (o.len2)
            memcpy(pkt[np] + o.hdr_len + o.len, o.payload2, o.len2);
        plen[np++] = o.hdr_len + o.len + o.len2;
    }
    pp_rx_copy_defer(&n->c[1], q, 2);
    for (int k = 0; k < np; k++)
        pp_rx(&n->c[1], n->now, pkt[k], plen[k]);
    nq = pp_rx_copy_take(&n->c[1]);
    for (uint32_t i = 0; i < nq; i++)
        queued_unwritten &= memcmp(q[i].dst, zero, q[i].len) == 0 && q[i].len <= sizeof zero;
    TAP_OK(np == 6 && nq == 2 && queued_unwritten,
           "placed deferred: 6 packets, 2 copies queued (the queue's room), their bytes not "
           "written yet");
    TAP_OK(!pp_deliver_ready(&n->c[1]) && pp_deliver(&n->c[1]) == NULL,
           "placed deferred: complete, but not handed up while copies are outstanding");
    TAP_OK(pp_ack_next(&n->c[1], n->now, &ack) == 1 &&
               ((const pp_ack_t *)(const void *)ack.hdr)->cum == 5 + (uint32_t)np,
           "placed deferred: every packet acknowledged at once");
    for (uint32_t i = 0; i < nq; i++)
        memcpy(q[i].dst, q[i].src, q[i].len);
    pp_rx_copy_done(&n->c[1], nq);
    m = pp_deliver(&n->c[1]);
    TAP_OK(m && m->len == 8 + sizeof src && !memcmp(m->data, hdr, 8) &&
               !memcmp(rg.buf + 100, src, sizeof src) && rg.buf[99] == 0 &&
               rg.buf[100 + sizeof src] == 0,
           "placed deferred: handed up once the copies are made; region intact, nothing "
           "written around it");
    if (m)
        pp_msg_release(&n->c[1], m);
    pp_rx(&n->c[1], n->now, pkt[0], plen[0]);   /* no deferral now: a duplicate, dropped */
    TAP_OK(n->c[1].st.drops[PP_DROP_DUP] == 1 && n->c[1].copy_q == NULL,
           "placed deferred: deferral ended by pp_rx_copy_take");
    net_fini(n);
    free(n);
    free(rg.buf);
}

/* Early placement (pp_early_next, pp_msg_early, pp_msg_unearly): unplaced
 * messages of at least cfg.early_min payload bytes are offered once, in
 * order, when their header is in and more is to come; one given a
 * destination gets every payload byte there (those before the switch
 * copied, later ones written straight) under loss and reordering, one
 * declined is delivered from its own buffer, and one taken back
 * (unearly) has every byte in its buffer again. */
static void t_early(void)
{
    enum { NM = 4, PAD = 64 };
    static const size_t plen[NM] = {50000, 80000, 30000, 9000};   /* the last: below early_min */
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    uint8_t *src[NM], *dst[NM], hdr[40];
    int permille = 30, steps = 0, got = 0, bad = 0, offered[NM] = {0}, early_order = 1;
    int revoked = 0;
    pp_msg_t *m;
    net_cfg(&a, 0, 5, 6);
    net_cfg(&b, 1, 5, 6);
    b.early_min = 16384;
    net_init(n, &a, &b);
    n->filter = f_random_loss;
    n->arg = &permille;
    n->reverse = 1;
    for (int i = 0; i < NM; i++) {
        src[i] = malloc(plen[i]);
        dst[i] = malloc(plen[i] + PAD);
        memset(dst[i], 0xa5, plen[i] + PAD);   /* poison: unwritten bytes show */
        msg_fill(src[i], plen[i], 11, i);
        memset(hdr, i + 1, sizeof hdr);
        if (pp_send(&n->c[0], hdr, sizeof hdr, src[i], plen[i]) != 0)
            bad++;
    }
    while (steps++ < MAX_STEPS && (got < NM || !pp_idle(&n->c[0]))) {
        net_step(n, 8);
        n->c[1].early_hint = 0;
        if ((m = pp_early_next(&n->c[1])) != NULL) {
            int i = m->data[0] - 1;
            early_order &= i >= 0 && i < NM && i == got && m->head_in && m->got < m->len;
            if (i >= 0 && i < NM && offered[i]++ == 0 && i != 1)   /* message 1 declined */
                pp_msg_early(&n->c[1], m, dst[i]);
        }
        if (got == 2 && !revoked && (m = pp_rx_next(&n->c[1])) && m->early && m->got > 0) {
            pp_msg_unearly(&n->c[1], m);   /* message 2 taken back mid-way */
            revoked = 1;
        }
        while ((m = pp_deliver(&n->c[1])) != NULL) {
            const uint8_t *pay = m->early ? m->early : m->data + m->hlen;
            int want_early = got == 0;
            bad += m->len != sizeof hdr + plen[got] || m->data[0] != got + 1 ||
                   !m->early != !want_early || (m->early && m->early != dst[got]) ||
                   memcmp(pay, src[got], plen[got]) != 0 || dst[got][plen[got]] != 0xa5;
            got++;
            pp_msg_release(&n->c[1], m);
        }
    }
    TAP_OK(got == NM && bad == 0, "early: %d messages delivered, payloads intact where they "
           "should be, nothing written past a destination (%d bad)", got, bad);
    TAP_OK(early_order && offered[0] == 1 && offered[1] == 1 && offered[2] == 1 && offered[3] == 0,
           "early: each large message offered once, in order, header in and incomplete; the "
           "small one never (offers %d %d %d %d)", offered[0], offered[1], offered[2], offered[3]);
    TAP_OK(revoked && n->c[1].st.rx_early == 2 && n->c[1].rx_buffered == 0,
           "early: 2 placed early, 1 taken back; receive buffer accounting back to 0");
    net_fini(n);
    for (int i = 0; i < NM; i++) {
        free(src[i]);
        free(dst[i]);
    }
    free(n);
}

/* Placed packets' own fields: the 52-byte header, the 32-bit region
 * offset, a reserved id, disagreeing packets, offsets outside the region. */
/* Seals a packet of the test net (rank 0 <-> 1) altered by hand. */
static void reseal(uint8_t *p, size_t len)
{
    pp_hdr_t h;
    memcpy(&h, p, sizeof h);
    pp_seal(p, pp_sealed_len(&h, len), pp_tag(NET_KEY, h.src, !h.src));
}

/* Early placement trusts no short first packet: one that carries only part
 * of the ptl header (a peer's bug or a crafted packet, sealed) must not get
 * its message offered, which would hand the layer above a header half
 * made of bytes that never came. */
static void t_early_short_head(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    uint8_t *src = malloc(40000), hdr[40], pkt[2048];
    pp_out_t o;
    size_t hl;
    net_cfg(&a, 0, 5, 6);
    net_cfg(&b, 1, 5, 6);
    b.early_min = 16384;
    net_init(n, &a, &b);
    msg_fill(src, 40000, 12, 0);
    memset(hdr, 7, sizeof hdr);
    pp_send(&n->c[0], hdr, sizeof hdr, src, 40000);
    if (pp_tx_next(&n->c[0], n->now, &o) == 1 && o.hdr_len + 20 <= sizeof pkt) {
        hl = o.hdr_len;
        memcpy(pkt, o.hdr, hl);
        memcpy(pkt + hl, o.payload, 20);   /* 20 of the 40 header bytes */
        reseal(pkt, hl + 20);
        pp_rx(&n->c[1], n->now, pkt, hl + 20);
    }
    TAP_OK(n->c[1].st.rx_pkts == 1 && !n->c[1].early_hint && pp_early_next(&n->c[1]) == NULL,
           "early: a first packet shorter than the ptl header is taken (%llu packets) but its "
           "message is not offered", (unsigned long long)n->c[1].st.rx_pkts);
    net_fini(n);
    free(n);
    free(src);
}

static void t_placed_fields(void)
{
    net_t *n = malloc(sizeof *n);
    region_t rg = {calloc(1, 8192), 8000};
    uint8_t *snap = malloc(8192), src[3000], hdr[8] = {1, 2, 3, 4, 5, 6, 7, 8}, pkt[2][1100];
    size_t plen[2] = {0, 0};
    pp_out_t o;
    pp_msg_t *m;
    int ok = 1, got = 0;
    placed_net_init(n, &rg);
    msg_fill(src, sizeof src, 4, 2);
    TAP_OK(pp_send_placed(&n->c[0], hdr, 8, src, 100, 77, (uint64_t)UINT32_MAX + 1) == -1,
           "placed fields: a region offset beyond 32 bits is refused (the datapath sends "
           "unplaced)");
    TAP_OK(pp_send_placed(&n->c[0], hdr, 8, src, 1500, 77, 1000) == 0,
           "placed fields: 1508 bytes to region offset 1000 queued");
    for (int k = 0; k < 2; k++) {
        ok &= pp_tx_next(&n->c[0], n->now, &o) == 1 && o.hdr_len == PP_DATA_HDR_MAX &&
              (o.hdr[offsetof(pp_hdr_t, flags)] & PP_F_PLACED);
        memcpy(pkt[k], o.hdr, o.hdr_len);
        memcpy(pkt[k] + o.hdr_len, o.payload, o.len);
        plen[k] = o.hdr_len + o.len;
    }
    TAP_OK(ok && plen[0] == 52 + 1000 && plen[1] == 52 + 508,
           "placed fields: two packets with 52-byte headers (%zu, %zu bytes)", plen[0], plen[1]);
    {
        uint8_t e[1100];
        pp_place_t pl;
        uint64_t id = UINT64_MAX;
        memcpy(e, pkt[0], plen[0]);
        memcpy(&pl, e + PP_DATA_HDR, sizeof pl);
        memcpy(pl.place_id, &id, sizeof id);
        memcpy(e + PP_DATA_HDR, &pl, sizeof pl);
        reseal(e, plen[0]);
        pp_rx(&n->c[1], n->now, e, plen[0]);
        TAP_OK(n->c[1].st.drops[PP_DROP_BOUNDS] == 1, "placed fields: the reserved id dropped");
        pp_rx(&n->c[1], n->now, pkt[0], plen[0]);
        memcpy(e, pkt[1], plen[1]);
        memcpy(&pl, e + PP_DATA_HDR, sizeof pl);
        pl.place_off++;
        memcpy(e + PP_DATA_HDR, &pl, sizeof pl);
        reseal(e, plen[1]);
        pp_rx(&n->c[1], n->now, e, plen[1]);
        TAP_OK(n->c[1].st.drops[PP_DROP_INCONS] == 1,
               "placed fields: a packet disagreeing on the region offset dropped");
        memcpy(e, pkt[1], plen[1]);
        e[offsetof(pp_hdr_t, flags)] &= (uint8_t)~PP_F_PLACED;   /* the same bytes, unplaced */
        reseal(e, plen[1] - PP_PLACE_LEN);
        pp_rx(&n->c[1], n->now, e, plen[1] - PP_PLACE_LEN);
        TAP_OK(n->c[1].st.drops[PP_DROP_INCONS] == 2,
               "placed fields: an unplaced packet of a placed message dropped");
        pp_rx(&n->c[1], n->now, pkt[1], plen[1]);
    }
    m = pp_deliver(&n->c[1]);
    TAP_OK(m && m->placed && m->len == 1508 && !memcmp(m->data, hdr, 8) &&
           !memcmp(rg.buf + 1000, src, 1500),
           "placed fields: the message lands at region offset 1000, header delivered");
    if (m)
        pp_msg_release(&n->c[1], m);
    /* offsets past the region (the largest the wire carries) and an id never
     * exposed: every byte discarded and counted, nothing written */
    memcpy(snap, rg.buf, 8192);
    pp_send_placed(&n->c[0], hdr, 8, src, 2500, 77, UINT32_MAX);
    pp_send_placed(&n->c[0], hdr, 8, src, 300, 78, 0);
    pp_send_placed(&n->c[0], hdr, 8, src, 700, 77, 7900);   /* 100 bytes fit */
    for (int i = 0; i < 50 && got < 3; i++) {
        net_step(n, 64);
        while ((m = pp_deliver(&n->c[1])) != NULL) {
            got++;
            pp_msg_release(&n->c[1], m);
        }
    }
    TAP_OK(got == 3 && n->c[1].st.rx_discarded == 2500 + 300 + 600 &&
           !memcmp(rg.buf, snap, 7900) && !memcmp(rg.buf + 7900, src, 100) &&
           !memcmp(rg.buf + 8000, snap + 8000, 192),
           "placed fields: offsets outside the region and an unknown id: %llu bytes discarded, "
           "nothing written outside (%d delivered)",
           (unsigned long long)n->c[1].st.rx_discarded, got);
    net_fini(n);
    free(n);
    free(snap);
    free(rg.buf);
}

static uint64_t rtt_samples(const pp_conn_t *c)
{
    uint64_t k = 0;
    for (uint32_t p = 0; p < c->cfg.npaths; p++)
        k += c->paths[p].st.rtt_samples;
    return k;
}

/* An ACK from rank 1 to rank 0 echoing psn with flags, at time now. */
static void ack_echo(pp_conn_t *c, uint64_t now, uint32_t psn, int flags)
{
    pp_ack_t k;
    memset(&k, 0, sizeof k);
    k.h.magic = PP_MAGIC;
    k.h.type = PP_T_ACK;
    k.h.src = 1;
    k.h.epoch = 0xbbbb;
    k.h.tag = pp_tag(NET_KEY, 1, 0);
    k.cum = c->snd_una;
    k.echo_psn = psn;
    k.echo_path = c->pk[psn % PP_WIN].path;
    k.echo_flags = (uint8_t)flags;
    pp_seal(&k, sizeof k, k.h.tag);
    pp_rx(c, now, &k, sizeof k);
}

/* RTT samples come from the sender's send times through the echoed PSN:
 * the original's or the only retransmission's, none when ambiguous (Karn)
 * or when the slot does not hold that PSN. */
static void t_rtt_echo(void)
{
    pp_conn_t c;
    pp_cfg_t cfg;
    pp_out_t o;
    static uint8_t buf[3000];
    uint64_t t0 = 1000000, t1 = 3000000, k;
    int nretx = 0;
    net_cfg(&cfg, 0, 100, 200);
    pp_conn_init(&c, &cfg);
    pp_send(&c, "h", 1, buf, sizeof buf - 1);
    while (pp_tx_next(&c, t0, &o))
        ;
    TAP_OK(c.snd_nxt == 103, "rtt: three packets out (PSN 100..102)");
    ack_echo(&c, t0 + 50000, 101, 0);
    TAP_OK(rtt_samples(&c) == 1 && c.srtt_ns == 50000,
           "rtt: the echo of PSN 101 gives 50 us from its send time (%llu ns)",
           (unsigned long long)c.srtt_ns);
    k = rtt_samples(&c);
    ack_echo(&c, t0 + 60000, 103, 0);
    ack_echo(&c, t0 + 60000, 99, 0);
    ack_echo(&c, t0 + 60000, 100 - PP_WIN, 0);
    ack_echo(&c, t0 + 60000, 100, PP_F_RETX);
    TAP_OK(rtt_samples(&c) == k, "rtt: no sample from PSNs not sent, a slot not holding the "
           "PSN, or a retransmission never made");
    pp_poll(&c, t1);   /* every packet times out */
    while (pp_tx_next(&c, t1, &o))
        nretx++;
    TAP_OK(nretx >= 1 && c.pk[100 % PP_WIN].retx == 1, "rtt: %d packets retransmitted", nretx);
    k = rtt_samples(&c);
    ack_echo(&c, t1 + 30000, 100, PP_F_RETX);
    TAP_OK(rtt_samples(&c) == k + 1 && c.min_rtt_ns == 30000,
           "rtt: the retransmission's echo measures from the retransmission (min %llu ns)",
           (unsigned long long)c.min_rtt_ns);
    ack_echo(&c, t1 + 40000, 100, 0);
    TAP_OK(rtt_samples(&c) == k + 2 && c.paths[c.pk[100 % PP_WIN].path].st.srtt_ns > 30000,
           "rtt: a late original's echo measures from the first send");
    c.pk[100 % PP_WIN].retx = 2;
    k = rtt_samples(&c);
    ack_echo(&c, t1 + 50000, 100, PP_F_RETX);
    TAP_OK(rtt_samples(&c) == k, "rtt: which of two retransmissions arrived is unknown: no "
           "sample (Karn)");
    pp_conn_fini(&c);
}

/* Drops every ACK for a while: the sender's timeouts resend packets the
 * receiver already has; its ACKs then report the duplicates and the RTO
 * floor rises above the configured one. */
static int f_acks_lost_early(net_t *n, int from, const uint8_t *p, size_t len, uint64_t seq)
{
    (void)len; (void)seq;
    return from == 1 && PKT_TYPE(p) == PP_T_ACK && n->now < 1000000 + 3000000 ? NET_DROP
                                                                              : NET_PASS;
}

static void t_spurious_rto(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    xfer_t x;
    net_cfg(&a, 0, 11, 12);
    net_cfg(&b, 1, 11, 12);
    net_init(n, &a, &b);
    n->filter = f_acks_lost_early;
    x = transfer(n, 10, 64, 1);
    xfer_ok("spurious timeouts", x, 10);
    TAP_OK(n->c[0].st.spurious > 0 && n->c[0].rto_floor_ns > a.rto_min_ns,
           "spurious timeouts: duplicates reported (%llu), RTO floor raised %llu -> %llu ns",
           (unsigned long long)n->c[0].st.spurious, (unsigned long long)a.rto_min_ns,
           (unsigned long long)n->c[0].rto_floor_ns);
    TAP_OK(n->c[0].rto_floor_ns <= a.rto_max_ns / 4, "spurious timeouts: floor bounded");
    {
        uint64_t raised = n->c[0].rto_floor_ns, t0 = n->now, after1 = 0;
        for (int i = 1; i <= 100; i++) {   /* 10 s quiet, polled every 100 ms */
            n->now = t0 + (uint64_t)i * 100000000ull;
            pp_poll(&n->c[0], n->now);
            if (i == 9)
                after1 = n->c[0].rto_floor_ns;
        }
        TAP_OK(after1 == raised && n->c[0].rto_floor_ns == a.rto_min_ns,
               "spurious timeouts: the floor holds for a second, then decays back to %llu ns "
               "(from %llu)", (unsigned long long)n->c[0].rto_floor_ns,
               (unsigned long long)raised);
    }
    net_fini(n);
    free(n);
}

/* Per-path RTO: a packet on a path whose send-to-ACK time is long (a slow
 * path's full queue) is not timed out at the connection's short RTO, while
 * the same packet on a path with no such history is; nor before twice the
 * longest send-to-ACK time the path showed lately (qmax), when its smoothed
 * figure has fallen behind a queue that filled. */
static int path_rto_fired_q(uint64_t qrtt_ns, uint64_t qmax_ns, uint64_t after_ns)
{
    pp_conn_t c;
    pp_cfg_t cfg;
    pp_out_t o;
    uint8_t hdr[32] = {0}, pay[3000] = {0};
    int fired;
    net_cfg(&cfg, 0, 1, 2);
    pp_conn_init(&c, &cfg);
    pp_send(&c, hdr, sizeof hdr, pay, sizeof pay);
    while (pp_tx_next(&c, 1000000, &o))
        ;
    c.paths[c.pk[1 % PP_WIN].path].qrtt_ns = qrtt_ns;
    c.paths[c.pk[1 % PP_WIN].path].qvar_ns = qrtt_ns / 8;
    c.paths[c.pk[1 % PP_WIN].path].qmax_ns = qmax_ns;
    pp_poll(&c, 1000000 + after_ns);
    fired = c.st.retx_timeout > 0;
    pp_conn_fini(&c);
    return fired;
}

static int path_rto_fired(uint64_t qrtt_ns, uint64_t after_ns)
{
    return path_rto_fired_q(qrtt_ns, 0, after_ns);
}

static void t_path_rto(void)
{
    TAP_OK(path_rto_fired(0, 2000000), "path RTO: no path history, timed out after 2 ms "
           "(connection RTO)");
    TAP_OK(!path_rto_fired(20000000, 2000000), "path RTO: path with a 20 ms queue, not timed "
           "out after 2 ms");
    TAP_OK(path_rto_fired(20000000, 40000000), "path RTO: that path timed out after 40 ms");
    TAP_OK(!path_rto_fired_q(2000000, 15000000, 25000000), "path RTO: smoothed 2 ms but 15 ms "
           "lately: not timed out after 25 ms");
    TAP_OK(path_rto_fired_q(2000000, 15000000, 35000000), "path RTO: that path timed out after "
           "35 ms (twice 15 ms)");
}

/* The sender's in-flight and SACKed indexes (infl_bits, sack_bits) against
 * its packet states, at every packet the network carries; drops 1 in 13
 * data packets and the reverse order of delivery (reverse) keeps SACK holes
 * open. */
static int infl_mismatch;
static int f_infl_check(net_t *n, int from, const uint8_t *p, size_t len, uint64_t seq)
{
    const pp_conn_t *c = &n->c[0];
    (void)len;
    for (uint32_t slot = 0; slot < PP_WIN; slot++) {
        int bit = (int)(c->infl_bits[slot / 64] >> (slot % 64) & 1);
        int sbit = c->sack_bits[slot / 8] >> (slot % 8) & 1;
        if (bit != (c->pk[slot].state == PP_PK_INFLIGHT) ||
            sbit != (c->pk[slot].state == PP_PK_SACKED))
            infl_mismatch++;
    }
    return from == 0 && PKT_TYPE(p) == PP_T_DATA && seq % 13 == 5 ? NET_DROP : NET_PASS;
}

static void t_infl_index(void)
{
    net_t *n = net_new(31, 32, f_infl_check);
    n->reverse = 1;
    infl_mismatch = 0;
    xfer_ok("in-flight index, 1 in 13 dropped, reordered", transfer(n, 40, 64, 1), 40);
    TAP_OK(infl_mismatch == 0 && n->c[0].st.retx_fast + n->c[0].st.retx_timeout > 0,
           "in-flight and SACKed indexes: match every packet's state throughout (%d "
           "mismatches, %llu retransmissions)", infl_mismatch,
           (unsigned long long)(n->c[0].st.retx_fast + n->c[0].st.retx_timeout));
    net_fini(n);
    free(n);
}

/* Drops every first transmission on path 3 while the first 30 messages go. */
static int f_drop_path3(net_t *n, int from, const uint8_t *p, size_t len, uint64_t seq)
{
    pp_data_t d;
    (void)n; (void)seq;
    if (from != 0 || len < sizeof d || PKT_TYPE(p) != PP_T_DATA)
        return NET_PASS;
    memcpy(&d, p, sizeof d);
    return d.h.path == 3 && !(d.h.flags & PP_F_RETX) ? NET_DROP : NET_PASS;
}

/* pwin: losses on one path shrink that path's window only; the CC's
 * connection window is not cut; everything arrives. */
static void t_pwin_loss(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    int others_ok = 1;
    double w0;
    net_cfg(&a, 0, 21, 22);
    net_cfg(&b, 1, 21, 22);
    a.lb = b.lb = &pp_lb_pwin;
    net_init(n, &a, &b);
    w0 = n->c[0].paths[3].cwnd;
    n->filter = f_drop_path3;
    xfer_ok("pwin, path 3 drops everything", transfer(n, 40, 64, 1), 40);
    for (int p = 0; p < 8; p++)
        if (p != 3 && n->c[0].paths[p].cwnd < w0)
            others_ok = 0;
    TAP_OK(n->c[0].paths[3].st.lost > 0 && n->c[0].paths[3].cwnd < w0,
           "pwin: path 3 lost %llu packets, its window shrank %.0f -> %.0f B",
           (unsigned long long)n->c[0].paths[3].st.lost, w0, n->c[0].paths[3].cwnd);
    TAP_OK(others_ok, "pwin: no other path's window shrank");
    TAP_OK(n->c[0].cc.ssthresh == (double)PP_WIN * a.mtu && n->c[0].st.loss_events > 0,
           "pwin: the connection's CC window was not cut (%llu loss events)",
           (unsigned long long)n->c[0].st.loss_events);
    net_fini(n);
    free(n);
}

/* Path quarantine (conn.c): dead_path's data packets vanish while *dead
 * (see t_path_down); those sent while the sender had it down are counted
 * in probes. */
typedef struct {
    int dead, dead_path, probes;
} dead_t;

static int f_dead_path(net_t *n, int from, const uint8_t *p, size_t len, uint64_t seq)
{
    dead_t *x = n->arg;
    pp_data_t d;
    (void)seq;
    if (from != 0 || len < sizeof d || PKT_TYPE(p) != PP_T_DATA)
        return NET_PASS;
    memcpy(&d, p, sizeof d);
    if (d.h.path != x->dead_path && x->dead_path >= 0)
        return NET_PASS;
    if (n->c[0].paths[d.h.path].down)
        x->probes++;
    return x->dead ? NET_DROP : NET_PASS;
}

/* Runs transfers of 40 messages until at least ns of simulated time passed. */
static int transfer_for(net_t *n, uint64_t ns, const char *name)
{
    uint64_t end = n->now + ns;
    int ok = 1;
    while (n->now < end) {
        xfer_t x = transfer(n, 40, 64, 1);
        ok &= x.delivered == 40 && !x.bad && !x.order_bad;
    }
    return TAP_OK(ok, "%s: every message intact and in order", name);
}

/* A path that drops everything is taken down after two timeouts, takes
 * one-packet probes at growing gaps and nothing else, and comes back once
 * a probe arrives; the other paths carry the data meanwhile. */
static void t_path_down(void)
{
    net_t *n = net_new(31, 32, f_dead_path);
    dead_t x = {.dead = 1, .dead_path = 5};
    pp_path_t *pa = &n->c[0].paths[5];
    uint64_t before;
    n->arg = &x;
    transfer_for(n, 100000000ull, "path 5 dead");
    TAP_OK(pa->down && pa->st.downs == 1 && pa->down_gap > PP_DOWN_PROBE_NS,
           "path 5 dead: down (%u, %llu times), probe gap grew to %.0f ms", pa->down,
           (unsigned long long)pa->st.downs, pa->down_gap / 1e6);
    TAP_OK(x.probes >= 2 && x.probes <= 5, "path 5 dead: %d probes in 100 ms, one packet each, "
           "at doubling gaps from 10 ms", x.probes);
    before = pa->st.tx_pkts;
    x.dead = 0;
    transfer_for(n, 200000000ull, "path 5 back");
    TAP_OK(!pa->down && pa->st.tx_pkts > before + 100 && pa->cwnd >= 2.0 * n->c[0].cfg.chunk,
           "path 5 back: up after a probe arrived, carries data again (%llu packets) with a "
           "fresh window (%.0f B)", (unsigned long long)(pa->st.tx_pkts - before), pa->cwnd);
    net_fini(n);
    free(n);
}

/* Takes every message side 1 has for the layer above; returns how many. */
static int drain(net_t *n)
{
    pp_msg_t *m;
    int k = 0;
    for (; (m = pp_deliver(&n->c[1])) != NULL; k++)
        pp_msg_release(&n->c[1], m);
    return k;
}

static int live_down(const pp_conn_t *c)
{
    int k = 0;
    for (uint32_t p = 0; p < c->cfg.npaths; p++)
        k += c->paths[p].down;
    return k;
}

/* Every path silent for a while (a peer descheduled, or the network gone):
 * no path is to blame, none is taken down; then the last live path is never
 * taken down either (two paths, one dead and then the other). */
static void t_path_down_all(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    dead_t x = {.dead = 1, .dead_path = -1};
    int most = 0, got = 0, early = 0;
    net_cfg(&a, 0, 41, 42);
    net_cfg(&b, 1, 41, 42);
    a.npaths = b.npaths = 2;
    net_init(n, &a, &b);
    n->filter = f_dead_path;
    n->arg = &x;
    for (int k = 0; k < 8000; k++) {   /* 80 ms: the backed-off timeouts run out */
        if (k == 1500)
            x.dead = 0;
        if (k < 100)
            pp_send(&n->c[0], "hdr", 3, "payload of a kind", 17 + (size_t)k);
        net_step(n, 64);
        got += drain(n);
        if (k == 1499)
            early = got;
        if (live_down(&n->c[0]) > most)
            most = live_down(&n->c[0]);
    }
    TAP_OK(most == 0 && early == 0 && got == 100,
           "two paths, both silent for 15 ms: neither was taken down; all 100 messages arrived "
           "after (%d down at most, %d arrived before, %d in all)", most, early, got);
    x.dead_path = 0;   /* path 0 dead: it goes down */
    x.dead = 1;
    transfer_for(n, 50000000ull, "two paths, path 0 dead");
    x.dead_path = -1;   /* then path 1 as well: it stays up, the last one */
    for (int k = 0; k < 3000; k++) {
        if (k < 100)
            pp_send(&n->c[0], "hdr", 3, "more", 4);
        net_step(n, 64);
        drain(n);
    }
    TAP_OK(n->c[0].paths[0].down && !n->c[0].paths[1].down,
           "two paths, path 0 dead, then path 1: path 0 down, path 1 (the last) kept up");
    net_fini(n);
    free(n);
}

/* Small messages (one path, 0) go to another path while path 0 is down. */
static void t_path_down_small(void)
{
    net_t *n = net_new(51, 52, f_dead_path);
    dead_t x = {.dead = 1, .dead_path = 0};
    pp_out_t o;
    int on0 = 0, got = 0;
    n->arg = &x;
    for (int k = 0; k < 600; k++) {
        pp_send(&n->c[0], "hdr", 3, "small", 5);
        net_step(n, 64);
        got += drain(n);
    }
    TAP_OK(n->c[0].paths[0].down && got == 600,
           "path 0 dead: down, and all 600 small messages arrived (%d)", got);
    for (int i = 0; i < 20; i++)
        pp_send(&n->c[0], "hdr", 3, "x", 1);
    while (pp_tx_next(&n->c[0], n->now, &o))
        on0 += o.path == 0;
    TAP_OK(on0 == 0, "path 0 down: small messages take another path (%d on path 0)", on0);
    net_fini(n);
    free(n);
}

/* One small message at a time (a ping-pong's side, a sequence of blocking
 * sends): nothing else is in flight when one times out on a dead path 0,
 * so no ACK came after it went; its copy arriving elsewhere with no
 * duplicate reported blames path 0 then. Two such messages take it down,
 * and the rest leave it but for its probes: 2 timeouts in 20 messages, not
 * 20. */
static void t_path_down_serial(void)
{
    net_t *n = net_new(53, 54, f_dead_path);
    dead_t x = {.dead = 1, .dead_path = 0};
    int got = 0;
    uint64_t tmo = 0;
    n->arg = &x;
    for (int k = 0; k < 20; k++) {
        pp_send(&n->c[0], "hdr", 3, "small", 5);
        for (int i = 0; i < 100000 && !(got > k && pp_idle(&n->c[0])); i++) {
            net_step(n, 64);
            got += drain(n);
        }
        if (k == 1)
            tmo = n->c[0].st.retx_timeout;
    }
    TAP_OK(got == 20 && n->c[0].paths[0].down && tmo == 2 &&
               n->c[0].st.retx_timeout == 2 + (uint64_t)x.probes,
           "one message at a time, path 0 dead: all 20 arrived (%d), path 0 down after the "
           "first two timed out there (%llu), then only its %d probes did (%llu in all)", got,
           (unsigned long long)tmo, x.probes, (unsigned long long)n->c[0].st.retx_timeout);
    net_fini(n);
    free(n);
}

/* A down path: its probe times out after the RTO from the RTT, not after
 * an RTO floor raised by spurious timeouts; our ACKs leave it for a live
 * path even when the peer's last data came on it. */
static void t_path_down_probe_ack(void)
{
    net_t *n = net_new(61, 62, NULL);
    pp_conn_t *c = &n->c[0];
    static uint8_t msg[20000];
    pp_out_t o;
    uint64_t t;
    int k = 0, probe = -1;
    transfer(n, 5, 64, 1);   /* an RTT estimate */
    for (int p = 0; p < 8; p++)
        c->paths[p].inflight = (uint64_t)c->paths[p].cwnd;   /* every window full ... */
    c->paths[6].inflight = 0;
    c->paths[6].down = 1;                                     /* ... but a down path's */
    c->ndown = 1;
    c->paths[6].down_until = n->now;
    c->paths[6].down_gap = PP_DOWN_PROBE_NS;
    c->rto_floor_ns = 12500000;
    pp_send(c, "hdr", 3, msg, sizeof msg);
    while (pp_tx_next(c, n->now, &o) && k++ < 100)
        if (probe < 0)
            probe = o.path;
    TAP_OK(probe == 6 && c->paths[6].inflight > 0 && c->paths[6].inflight <= c->cfg.mtu &&
           c->paths[6].down_until == n->now + PP_DOWN_PROBE_NS,
           "down path: its probe is one packet (%llu B on it), the next one %.0f ms later",
           (unsigned long long)c->paths[6].inflight, (c->paths[6].down_until - n->now) / 1e6);
    for (t = n->now; t < n->now + 12500000 && !c->nlost; t += 50000)
        pp_poll(c, t);
    TAP_OK(c->nlost == 1 && t - n->now < 5000000,
           "down path: the probe timed out after %.1f ms (RTO floor 12.5 ms, srtt %.0f us)",
           (t - n->now) / 1e6, c->srtt_ns / 1e3);
    n->c[1].paths[3].down = 1;   /* the receiver's data found port pair 3 dead */
    n->c[1].ndown = 1;
    n->c[1].ack_echo_path = 3;
    n->c[1].ack_pending = 1;
    k = pp_ack_next(&n->c[1], n->now, &o);
    TAP_OK(k == 1 && o.path == 4,
           "down path: an ACK the peer's data on it asked for goes on the next live path (%d)",
           o.path);
    n->c[1].paths[3].down = 0;
    n->c[1].ndown = 0;
    n->c[1].ack_pending = 1;
    k = pp_ack_next(&n->c[1], n->now, &o);
    TAP_OK(k == 1 && o.path == 3, "live path: the ACK goes on the peer's data's path (%d)", o.path);
    net_fini(n);
    free(n);
}

/* Forward dead on side 0's paths 0 and 1 (its data), reverse dead on side
 * 1's paths 2..5 (everything it sends there): counts what the reverse
 * dropped and the data that named a path for the ACKs. */
typedef struct {
    int acks_lost, data_via, data;
} split_dead_t;

static int f_split_dead(net_t *n, int from, const uint8_t *p, size_t len, uint64_t seq)
{
    split_dead_t *x = n->arg;
    pp_hdr_t h;
    (void)seq;
    if (len < sizeof h)
        return NET_PASS;
    memcpy(&h, p, sizeof h);
    if (from == 1) {
        if (h.path < 2 || h.path > 5)
            return NET_PASS;
        x->acks_lost += h.type == PP_T_ACK;
        return NET_DROP;
    }
    if (h.type != PP_T_DATA)
        return NET_PASS;
    x->data++;
    x->data_via += h.ack_via != 0;
    return h.path < 2 ? NET_DROP : NET_PASS;
}

/* A one-way transfer across a dead link whose reverse port pairs are other
 * ones (ECMP hashes each direction on its own): once the sender has taken
 * its dead paths down, its data names a path it heard the receiver on, and
 * the receiver's ACKs take it instead of dying on the reverse of the data's
 * path. Then the header's hint itself: sent only with a path down and
 * something heard within an RTO, and a receiver's ACK follows it unless
 * its own data found that path dead. */
static void t_ack_via(void)
{
    net_t *n = net_new(71, 72, f_split_dead);
    split_dead_t x = {0};
    pp_conn_t *c = &n->c[0], *r = &n->c[1];
    uint64_t tmo;
    pp_out_t o;
    int k;
    n->arg = &x;
    transfer_for(n, 100000000ull, "split dead link");
    TAP_OK(c->paths[0].down && c->paths[1].down && c->ndown == 2,
           "split dead link: the sender took its two dead paths down (%u)", c->ndown);
    x = (split_dead_t){0};
    tmo = c->st.retx_timeout;
    transfer_for(n, 100000000ull, "split dead link, paths down");
    TAP_OK(x.data > 1000 && x.data_via > x.data * 9 / 10 && x.acks_lost == 0 &&
               c->st.retx_timeout - tmo <= 5,
           "split dead link, paths down: %d of %d data packets named a path for the ACKs, %d "
           "ACKs lost on dead reverse pairs, %llu timeouts besides probes' in 100 ms", x.data_via,
           x.data, x.acks_lost, (unsigned long long)(c->st.retx_timeout - tmo));
    net_fini(n);
    free(n);

    n = net_new(73, 74, NULL);
    c = &n->c[0];
    r = &n->c[1];
    transfer(n, 5, 64, 1);   /* an RTT estimate, and something heard */
    c->heard_path = 1 + 6;
    c->heard_ns = n->now;
    pp_send(c, "hdr", 3, "x", 1);
    k = pp_tx_next(c, n->now, &o);
    TAP_OK(k == 1 && o.hdr[offsetof(pp_hdr_t, ack_via)] == 0,
           "ack_via: no path down, the data names none");
    net_emit(n, 0, &o);
    c->paths[3].down = 1;
    c->ndown = 1;
    c->paths[3].down_until = n->now + 1000000000ull;
    pp_send(c, "hdr", 3, "y", 1);
    k = pp_tx_next(c, n->now, &o);
    TAP_OK(k == 1 && o.hdr[offsetof(pp_hdr_t, ack_via)] == 7,
           "ack_via: a path down, the data names the path last heard (%u)",
           o.hdr[offsetof(pp_hdr_t, ack_via)]);
    r->ack_pending = 0;
    pp_rx(r, n->now, o.hdr, o.hdr_len + o.len);   /* (payload follows the header in o) */
    k = pp_ack_next(r, n->now, &o);
    TAP_OK(k == 1 && o.path == 6 && r->ack_echo_path != 6,
           "ack_via: the receiver's ACK takes the path named (%d), not the data's (%u)", o.path,
           r->ack_echo_path);
    r->paths[6].down = 1;
    r->ndown = 1;
    r->ack_pending = 1;
    k = pp_ack_next(r, n->now, &o);
    TAP_OK(k == 1 && o.path != 6, "ack_via: not where the receiver's own data found it dead (%d)",
           o.path);
    c->heard_ns = n->now - c->srtt_ns - 4 * c->rttvar_ns - 2 * c->cfg.rto_min_ns - 1;
    pp_send(c, "hdr", 3, "z", 1);
    k = pp_tx_next(c, n->now, &o);
    TAP_OK(k == 1 && o.hdr[offsetof(pp_hdr_t, ack_via)] == 0,
           "ack_via: nothing heard for an RTO, the data names none");
    net_fini(n);
    free(n);
}

/* pwin: chunks go only to paths with room in their windows; none: wait. */
static void t_pwin_steer(void)
{
    pp_conn_t c;
    pp_cfg_t cfg;
    int only5 = 1, r;
    net_cfg(&cfg, 0, 1, 2);
    cfg.lb = &pp_lb_pwin;
    pp_conn_init(&c, &cfg);
    for (int p = 0; p < 8; p++)
        c.paths[p].inflight = (uint64_t)c.paths[p].cwnd;   /* full */
    c.paths[5].inflight = 0;
    for (int k = 0; k < 200; k++)
        only5 &= c.cfg.lb->select_path(&c, 2000000) == 5;
    TAP_OK(only5, "pwin: 200 choices with only path 5 open all took path 5");
    c.paths[5].inflight = (uint64_t)c.paths[5].cwnd;
    r = c.cfg.lb->select_path(&c, 2000000);
    TAP_OK(r == -1, "pwin: every window full, no path (%d)", r);
    /* a window below one chunk: one chunk, then a rest of chunk / cwnd RTTs */
    c.paths[5].inflight = 0;
    c.paths[5].cwnd = cfg.chunk / 4.0;
    c.paths[5].qrtt_ns = 1000000;
    r = c.cfg.lb->select_path(&c, 2000000);
    TAP_OK(r == 5 && c.cfg.lb->select_path(&c, 2000000 + 3000000) == -1 &&
           c.cfg.lb->select_path(&c, 2000000 + 4000000) == 5,
           "pwin: a quarter-chunk window sends a chunk every 4 RTTs");
    pp_conn_fini(&c);
}

/* A lone sender-side connection (no peer) with pwin, delivering rate B/s. */
static void pwin_conn(pp_conn_t *c, double rate)
{
    pp_cfg_t cfg;
    net_cfg(&cfg, 0, 1, 2);
    cfg.lb = &pp_lb_pwin;
    pp_conn_init(c, &cfg);
    c->rate_Bps = rate;
}

/* The first chunk a fresh pwin connection starts for a 100000-byte message,
 * with this delivery rate (bytes/s) and every path's window at pathwin. */
static uint32_t span_chunk(double rate, double pathwin)
{
    static uint8_t msg[100000];
    pp_conn_t c;
    pp_out_t o;
    uint32_t bytes = 0;
    pwin_conn(&c, rate);
    for (uint32_t p = 0; p < c.cfg.npaths; p++)
        c.paths[p].cwnd = pathwin;
    pp_send(&c, "hdr", 3, msg, sizeof msg);
    if (pp_tx_next(&c, 1000, &o))
        bytes = c.pk[(c.snd_nxt - 1) % PP_WIN].len + c.chunk_left;
    pp_conn_fini(&c);
    return bytes;
}

/* Chunks pwin puts on the odd (second) half of the paths in 400 choices,
 * the even paths' queue RTT 1 ms and the odd ones' odd_qrtt, the
 * connection delivering 125 MB/s with unsent bytes left to send. */
static int tail_picks_odd(uint64_t odd_qrtt, uint64_t unsent)
{
    pp_conn_t c;
    int odd = 0;
    pwin_conn(&c, 125e6);
    for (uint32_t p = 0; p < c.cfg.npaths; p++)
        c.paths[p].qrtt_ns = p % 2 ? odd_qrtt : 1000000;
    c.tx_unsent = unsent;
    for (int i = 0; i < 400; i++) {
        int p = c.cfg.lb->select_path(&c, 1000);
        odd += p >= 0 && p % 2;
    }
    pp_conn_fini(&c);
    return odd;
}

/* pwin's tail rule: the last bytes of a transfer avoid a path so slow that
 * they would land after everything could have gone the fast way. */
static void t_pwin_tail(void)
{
    int tail = tail_picks_odd(25000000, 32768), stream = tail_picks_odd(25000000, 100000000);
    int alike = tail_picks_odd(1500000, 32768);
    TAP_OK(tail == 0, "pwin tail: 32 KB left, 25 ms path vs 1 ms: the slow paths take none (%d)",
           tail);
    TAP_OK(stream > 0 && alike > 0,
           "pwin tail: with 100 MB left, or paths alike (1.5 ms vs 1 ms), all paths take chunks "
           "(%d, %d of 400 on the odd ones)", stream, alike);
}

/* A chunk spans what the connection delivers in PP_CHUNK_TIME_NS (at most
 * 8 chunks, and half its path's free window): net_cfg's chunk is 4000 B. */
static void t_pwin_chunk_span(void)
{
    uint32_t none = span_chunk(0, 1e6), fast = span_chunk(1e9, 1e6), slow = span_chunk(5e7, 1e6);
    uint32_t mid = span_chunk(1e8, 1e6), tight = span_chunk(1e9, 8000);
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    TAP_OK(none == 4000 && slow == 4000,
           "chunk span: no rate yet, or 50 MB/s (7.5 KB per 150 us): one chunk (%u, %u B)", none, slow);
    TAP_OK(mid == 12000, "chunk span: 100 MB/s (15 KB per 150 us): three chunks (%u B)", mid);
    TAP_OK(fast == 32000, "chunk span: 1 GB/s: at most eight chunks (%u B)", fast);
    TAP_OK(tight == 4000, "chunk span: a path window of two chunks: one chunk (%u B)", tight);
    /* the rate itself: measured while data is in flight */
    net_cfg(&a, 0, 100, 200);
    net_cfg(&b, 1, 100, 200);
    a.lb = &pp_lb_pwin;
    net_init(n, &a, &b);
    xfer_ok("chunk span", transfer(n, 60, 64, 1), 60);
    TAP_OK(n->c[0].rate_Bps > 0 && n->c[1].rate_Bps == 0,
           "delivery rate: the sender measured one (%.0f B/s), the receiver sent nothing to measure",
           n->c[0].rate_Bps);
    net_fini(n);
    free(n);
}

/* Records the length of every ACK side 1 sends (arg: size_t[3] {short,
 * with a bitmap, the longest}). */
static int f_ack_sizes(net_t *n, int from, const uint8_t *p, size_t len, uint64_t seq)
{
    size_t *count = n->arg;
    (void)seq;
    if (from == 1 && PKT_TYPE(p) == PP_T_ACK) {
        count[len == PP_ACK_SHORT ? 0 : 1]++;
        if (len > count[2])
            count[2] = len;
    }
    return NET_PASS;
}

/* Drops side 0's 5th data packet once (a hole: SACK bits to report). */
static int f_ack_sizes_hole(net_t *n, int from, const uint8_t *p, size_t len, uint64_t seq)
{
    if (from == 0 && seq == 4 && PKT_TYPE(p) == PP_T_DATA)
        return NET_DROP;
    return f_ack_sizes(n, from, p, len, seq);
}

/* In-order arrivals are acknowledged without the SACK bitmap; a hole brings
 * the bitmap up to its last word with a bit set; both kinds are understood
 * (everything delivered). */
static void t_short_ack(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    size_t count[3] = {0, 0, 0};
    net_cfg(&a, 0, 31, 32);
    net_cfg(&b, 1, 31, 32);
    net_init(n, &a, &b);
    n->arg = count;
    n->filter = f_ack_sizes;
    xfer_ok("short ACKs, no loss", transfer(n, 20, 64, 1), 20);
    TAP_OK(count[0] > 0 && count[1] == 0, "short ACKs: in order, %zu short and %zu full ACKs",
           count[0], count[1]);
    net_fini(n);
    count[0] = count[1] = count[2] = 0;
    net_init(n, &a, &b);
    n->arg = count;
    n->filter = f_ack_sizes_hole;
    xfer_ok("short ACKs, one hole", transfer(n, 20, 64, 1), 20);
    TAP_OK(count[1] > 0, "short ACKs: a hole brings SACK bitmaps (%zu short, %zu with one)",
           count[0], count[1]);
    TAP_OK(count[2] > PP_ACK_SHORT && count[2] < PP_ACK_LEN && (count[2] - PP_ACK_SHORT) % 8 == 0,
           "short ACKs: the bitmap past one hole ends after its last word with a bit set "
           "(longest ACK %zu bytes, the whole window's %zu)", count[2], (size_t)PP_ACK_LEN);
    net_fini(n);
    free(n);
}

/* A placed message of 8000 bytes in 9 packets: the ACK is not due before its
 * last packet, and due at it. */
static int t_ack_due_placed(void)
{
    net_t *n = malloc(sizeof *n);
    region_t rg = {calloc(1, 8000), 8000};
    static uint8_t src[8000];
    uint8_t hdr[8] = {1};
    pp_out_t o[16];
    int k = 0, ok;
    placed_net_init(n, &rg);
    pp_send_placed(&n->c[0], hdr, sizeof hdr, src, sizeof src, 77, 0);
    while (k < 16 && pp_tx_next(&n->c[0], n->now, &o[k]))
        k++;
    for (int i = 0; i < k - 1; i++)
        net_emit(n, 0, &o[i]);
    net_deliver(n);
    ok = k > 2 && !pp_ack_due(&n->c[1], n->now, 65536, 20000);
    net_emit(n, 0, &o[k - 1]);
    net_deliver(n);
    ok &= pp_ack_due(&n->c[1], n->now, 65536, 20000);
    net_fini(n);
    free(n);
    free(rg.buf);
    return ok;
}

/* pp_ack_due: in-order data of an unfinished message may wait for more
 * (bytes, delay); a hole or the delay make the ACK due, and so does the
 * last packet of a placed message (not of an unplaced one); sent, nothing
 * is owed. */
static void t_ack_due(void)
{
    net_t *n = net_new(100, 200, NULL);
    static uint8_t buf[8000];
    pp_out_t o[16];   /* (o[15]: scratch for the receiver's ACKs) */
    pp_conn_t *rx = &n->c[1];
    int k = 0, held, late, hole, last, said;
    memset(buf, 7, sizeof buf);
    pp_send(&n->c[0], "h", 1, buf, sizeof buf);   /* 9 packets of at most 1000 bytes */
    while (k < 15 && pp_tx_next(&n->c[0], n->now, &o[k]))
        k++;
    net_emit(n, 0, &o[0]);
    net_deliver(n);
    held = !pp_ack_due(rx, n->now, 65536, 20000) && pp_ack_due(rx, n->now, 500, 20000);
    late = pp_ack_due(rx, n->now + 20000, 65536, 20000);
    net_emit(n, 0, &o[2]);   /* o[1] missing: a hole */
    net_deliver(n);
    hole = pp_ack_due(rx, n->now, 65536, 20000);
    net_emit(n, 0, &o[1]);
    net_deliver(n);
    pp_ack_next(rx, n->now, &o[15]);   /* (said: the next ones start owing afresh) */
    for (int i = 3; i < k - 1; i++)
        net_emit(n, 0, &o[i]);
    net_deliver(n);
    last = !pp_ack_due(rx, n->now, 65536, 20000);
    net_emit(n, 0, &o[k - 1]);
    net_deliver(n);
    last &= !pp_ack_due(rx, n->now, 65536, 20000) && pp_ack_due(rx, n->now + 20000, 65536, 20000);
    said = pp_ack_next(rx, n->now, &o[15]) && !pp_ack_due(rx, n->now, 0, 0);
    TAP_OK(k == 9 && held && late,
           "ack due: in-order data of an unfinished message waits below its bytes and delay");
    TAP_OK(hole, "ack due: a hole makes the ACK due at once");
    TAP_OK(last, "ack due: an unplaced message's last packet still waits (its sender is done), "
                 "up to the delay");
    TAP_OK(said, "ack due: once sent, no ACK is owed");
    net_fini(n);
    free(n);
    TAP_OK(t_ack_due_placed(), "ack due: a placed message's last packet makes it due (a "
                               "zero-copy sender waits for it)");
}

/* Side s sends a 100-byte message numbered id and transmits it (and any
 * ACK it still owes, which finds nothing to say once it rode on the data). */
static void piggy_send(net_t *n, int s, int id)
{
    uint8_t hdr[8] = {0}, body[100];
    pp_out_t o;
    memcpy(hdr, &id, sizeof id);
    memset(body, id & 0xff, sizeof body);
    pp_send(&n->c[s], hdr, sizeof hdr, body, sizeof body);
    while (pp_tx_next(&n->c[s], n->now, &o))
        net_emit(n, s, &o);
}

/* Side s takes the message it expects (id); 1 when intact. */
static int piggy_take(net_t *n, int s, int id)
{
    pp_msg_t *m = pp_deliver(&n->c[s]);
    int got = -1, ok;
    if (!m)
        return 0;
    memcpy(&got, m->data, sizeof got);
    ok = got == id && m->len == 108 && m->data[8] == (uint8_t)(id & 0xff) &&
         m->data[107] == (uint8_t)(id & 0xff);
    pp_msg_release(&n->c[s], m);
    return ok;
}

/* Request-reply: each reply carries the ACK of its request and each
 * request the ACK of the last reply, so no ACK packet is needed; the
 * sender's window empties through the piggybacked ACKs alone. */
static void t_piggyback(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    pp_out_t o;
    int ok = 1, acks_alone = 0;
    net_cfg(&a, 0, 41, 42);
    net_cfg(&b, 1, 41, 42);
    net_init(n, &a, &b);
    for (int i = 0; i < 50; i++) {
        piggy_send(n, 0, i);
        net_deliver(n);
        ok &= piggy_take(n, 1, i);
        piggy_send(n, 1, 1000 + i);
        acks_alone += pp_ack_next(&n->c[1], n->now, &o);
        net_deliver(n);
        ok &= piggy_take(n, 0, 1000 + i);
    }
    TAP_OK(ok, "piggyback: 50 requests and replies intact and in order");
    TAP_OK(acks_alone == 0 && n->c[1].st.acks_piggy == 50 && n->c[0].st.acks_piggy == 49,
           "piggyback: every ACK rode on data (%llu + %llu on data, %d left to send alone)",
           (unsigned long long)n->c[0].st.acks_piggy, (unsigned long long)n->c[1].st.acks_piggy,
           acks_alone);
    TAP_OK(n->c[0].snd_una == n->c[0].snd_nxt && n->c[1].snd_nxt - n->c[1].snd_una == 1,
           "piggyback: every request acknowledged, every reply but the last (nothing carried "
           "its ACK yet)");
    net_fini(n);
    free(n);
}

#define PIGGY_REPLY 4000   /* bytes of piggy_reply's reply (8-byte header before them) */

/* A fresh net (initial PSNs isn, isn + 1) where side 0 sent a request and
 * side 1, owing its ACK, replies with PIGGY_REPLY bytes of 7s: the reply's
 * packets (at most 8, *k of them) are in o, not yet sent; *ok: the request
 * came intact. net_fini and free it. */
static net_t *piggy_reply(uint32_t isn, pp_out_t *o, int *k, int *ok)
{
    net_t *n = net_new(isn, isn + 1, NULL);
    uint8_t hdr[8] = {0}, body[PIGGY_REPLY];
    piggy_send(n, 0, 1);
    net_deliver(n);
    *ok = piggy_take(n, 1, 1);   /* side 1 now owes the ACK of the request */
    memset(body, 7, sizeof body);
    pp_send(&n->c[1], hdr, sizeof hdr, body, sizeof body);
    for (*k = 0; *k < 8 && pp_tx_next(&n->c[1], n->now, &o[*k]); ++*k)
        ;
    return n;
}

/* A reply of several packets that carries the ACK of its request still
 * makes one GSO run: every packet but the last has the first one's size,
 * the last is no longer, and the ACK rides on the last (t_piggyback's
 * replies are one packet each). */
static void t_piggyback_gso(void)
{
    pp_out_t o[8];
    size_t sz[8];
    int k, runs = 1, ack_at = -1, ok;
    net_t *n = piggy_reply(43, o, &k, &ok);
    for (int i = 0; i < k; i++) {
        sz[i] = o[i].hdr_len + o[i].len + o[i].len2;
        if (PKT_FLAGS(o[i].hdr) & PP_F_ACK)
            ack_at = i;
    }
    for (int i = 1; i < k - 1; i++)
        runs += sz[i] != sz[0];
    runs += k > 1 && sz[k - 1] > sz[0];
    TAP_OK(ok && k >= 3 && runs == 1 && ack_at == k - 1 && n->c[1].st.acks_piggy == 1,
           "piggyback: a %d-packet reply stays one GSO run (%d) with the ACK on its last packet "
           "(packet %d)", k, runs, ack_at);
    net_fini(n);
    free(n);
}

/* ---------------------------------------------------------------- runs */

/* Runs (pp.h PP_F_RUN): a step's packets go grouped as udp.c sends them,
 * every message intact and in order, runs counted, none cut, nothing
 * resent; then with whole runs lost (5%); then over a path that cuts every
 * run into its segments (a receiver without GRO): the receiver keeps what
 * the header's segment holds and says so in its ACKs, the sender sends no
 * run from then on, and every message still arrives. */
static void t_runs(void)
{
    net_t *n = net_new(11, 12, NULL);
    int permille = 50;
    uint64_t cut;
    xfer_t x;
    n->runs = 1;
    x = transfer(n, 66, 64, 1);
    xfer_ok("runs", x, 66);
    TAP_OK(n->c[1].st.rx_runs > 10 && n->c[1].st.rx_runs_cut == 0 && !n->c[0].runs_off &&
           retx(n) == 0, "runs: %llu runs received, none cut, nothing resent (%llu)",
           (unsigned long long)n->c[1].st.rx_runs, (unsigned long long)retx(n));
    n->filter = f_random_loss;
    n->arg = &permille;
    x = transfer(n, 66, 64, 1);
    xfer_ok("runs, 5% of the datagrams lost", x, 66);
    TAP_OK(retx(n) > 0 && !n->c[0].runs_off, "runs, 5%% lost: repaired by retransmission (%llu)",
           (unsigned long long)retx(n));
    net_fini(n);
    free(n);

    n = net_new(13, 14, NULL);
    n->runs = 2;
    x = transfer(n, 66, 64, 1);
    xfer_ok("runs cut by the path", x, 66);
    cut = n->c[1].st.rx_runs_cut;
    TAP_OK(cut > 0 && n->c[0].runs_off && n->parse_drops[PP_DROP_MAGIC] + n->parse_drops[PP_DROP_KEY] > 0,
           "runs cut by the path: the receiver found %llu cut, the sender stopped sending runs, "
           "the headerless segments were dropped (%llu)", (unsigned long long)cut,
           (unsigned long long)(n->parse_drops[PP_DROP_MAGIC] + n->parse_drops[PP_DROP_KEY]));
    x = transfer(n, 66, 64, 1);
    xfer_ok("runs cut by the path, later messages", x, 66);
    TAP_OK(n->c[1].st.rx_runs_cut == cut, "runs cut by the path: no run sent after the sender "
           "heard (%llu cut in all)", (unsigned long long)n->c[1].st.rx_runs_cut);
    net_fini(n);
    free(n);
}

/* Placed messages in runs (rendezvous data: every packet of a chunk one
 * region's consecutive bytes) under loss and reordering: the region is
 * intact, and the receiver's placement copies of a run merged into one
 * per run (pp_rx_copy_defer: a run's payloads lie back to back). */
static void t_runs_placed(void)
{
    net_t *n = malloc(sizeof *n);
    region_t rg = {calloc(1, 200000), 200000};
    uint8_t *src = malloc(200000), hdr[40] = {9, 8, 7};
    int permille = 30, steps = 0, got = 0;
    pp_copy_t q[256];
    uint32_t nq;
    pp_out_t o[64];
    int k = 0, r;
    pp_msg_t *m;
    placed_net_init(n, &rg);
    n->runs = 1;
    msg_fill(src, 200000, 5, 1);
    /* one chunk by hand, deferred copies: one copy for the run */
    pp_send_placed(&n->c[0], hdr, sizeof hdr, src, 3500, 77, 0);
    while (k < 64 && pp_tx_next(&n->c[0], n->now, &o[k]))
        k++;
    r = pp_run_count(&n->c[0], o, k, 60000);
    pp_rx_copy_defer(&n->c[1], q, 256);
    net_emit_run(n, 0, &n->c[0], o, r);
    net_deliver(n);
    nq = pp_rx_copy_take(&n->c[1]);
    TAP_OK(r == k && k >= 3 && nq == 1 && q[0].len == 3500 && q[0].src != NULL,
           "runs, placed: a %d-packet chunk is one run (%d) and one placement copy (%u, %zu B)",
           k, r, nq, nq ? q[0].len : 0);
    for (uint32_t i = 0; i < nq; i++)
        memcpy(q[i].dst, q[i].src, q[i].len);
    pp_rx_copy_done(&n->c[1], nq);
    /* the rest under loss and reordering */
    n->filter = f_random_loss;
    n->arg = &permille;
    n->reverse = 1;
    pp_send_placed(&n->c[0], hdr, sizeof hdr, src + 3500, 200000 - 3500, 77, 3500);
    while (steps++ < MAX_STEPS && (got < 2 || !pp_idle(&n->c[0]))) {
        net_step(n, 64);
        while ((m = pp_deliver(&n->c[1])) != NULL) {
            got++;
            pp_msg_release(&n->c[1], m);
        }
    }
    TAP_OK(got == 2 && memcmp(rg.buf, src, 200000) == 0 && n->c[1].st.rx_runs > 5,
           "runs, placed: 200000 bytes intact in the region under 3%% loss and reordering "
           "(%llu runs)", (unsigned long long)n->c[1].st.rx_runs);
    net_fini(n);
    free(n);
    free(rg.buf);
    free(src);
}

/* A reply that carries the ACK of its request on its last packet (pp.h
 * PP_F_ACK) still leaves as one run: the run's header takes the ACK over,
 * and the requester's window empties by it. */
static void t_runs_piggy(void)
{
    pp_out_t o[8];
    int k, r, ok;
    net_t *n = piggy_reply(45, o, &k, &ok);
    pp_msg_t *m;
    r = pp_run_count(&n->c[1], o, k, 60000);
    net_emit_run(n, 1, &n->c[1], o, r);
    net_deliver(n);
    m = pp_deliver(&n->c[0]);
    ok &= m && m->len == 8 + PIGGY_REPLY && m->data[8 + PIGGY_REPLY - 1] == 7;
    if (m)
        pp_msg_release(&n->c[0], m);
    TAP_OK(ok && k >= 3 && r == k && (PKT_FLAGS(o[k - 1].hdr) & PP_F_ACK) &&
           n->c[0].snd_una == n->c[0].snd_nxt,
           "runs: a %d-packet reply with the ACK on its last packet is one run (%d), delivered "
           "intact, and the ACK it carried emptied the requester's window", k, r);
    net_fini(n);
    free(n);
}

/* A run's header is checked like a packet's: a segment size of 0 or above
 * the MTU, a run of one packet or less, a reserved field not 0, a datagram
 * longer than its run, are dropped (out of bounds) and deliver nothing; a
 * run received twice is dropped as duplicates the second time; pp_run_count
 * joins no retransmission and no packet of another path. */
static void t_run_fields(void)
{
    net_t *n = net_new(21, 22, NULL);
    static uint8_t pkt[70000], good[70000];
    uint8_t body[5000], hdr[8] = {1};
    pp_out_t o[16];
    size_t hl, len = 0, at;
    uint64_t tag = pp_tag(NET_KEY, 0, 1), before;
    int k = 0, bad = 0;
    pp_run_t run;
    msg_fill(body, sizeof body, 9, 1);
    pp_send(&n->c[0], hdr, sizeof hdr, body, sizeof body);
    while (k < 16 && pp_tx_next(&n->c[0], n->now, &o[k]))
        k++;
    hl = pp_run_hdr(&n->c[0], o, k, good);
    at = hl - PP_RUN_LEN;
    len = hl;
    for (int i = 0; i < k; i++) {
        memcpy(good + len, o[i].payload, o[i].len);
        len += o[i].len;
    }
    for (int c = 0; c < 5; c++) {
        size_t l = len;
        memcpy(pkt, good, len);
        memcpy(&run, pkt + at, sizeof run);
        if (c == 0)
            run.seg = 0;
        else if (c == 1)
            run.seg = (uint16_t)(n->c[1].cfg.mtu + 1);
        else if (c == 2)
            run.bytes = run.seg;
        else if (c == 3)
            run.rsv = 1;
        else
            l = len + 10;   /* ten bytes more than the run */
        memcpy(pkt + at, &run, sizeof run);
        pp_seal(pkt, hl, tag);
        before = n->c[1].st.drops[PP_DROP_BOUNDS];
        pp_rx(&n->c[1], n->now, pkt, l);
        bad += n->c[1].st.drops[PP_DROP_BOUNDS] != before + 1 || n->c[1].st.rx_pkts != 0;
    }
    TAP_OK(bad == 0 && k >= 4, "run fields: 5 malformed runs of %d packets dropped out of bounds, "
           "nothing taken (%d wrong)", k, bad);
    pp_rx(&n->c[1], n->now, good, len);
    before = n->c[1].st.drops[PP_DROP_DUP];
    pp_rx(&n->c[1], n->now, good, len);
    TAP_OK(pp_deliver_ready(&n->c[1]) && n->c[1].st.rx_pkts == (uint64_t)k &&
           n->c[1].st.drops[PP_DROP_DUP] == before + (uint64_t)k,
           "run fields: the good run delivers its message, again it is %d duplicates", k);
    /* what pp_run_count joins */
    o[2].hdr[offsetof(pp_hdr_t, flags)] |= PP_F_RETX;
    TAP_OK(pp_run_count(&n->c[0], o, k, 60000) == 2, "run fields: a retransmission ends a run");
    TAP_OK(pp_run_count(&n->c[0], &o[2], k - 2, 60000) == 1, "run fields: a retransmission "
           "starts none");
    o[2].hdr[offsetof(pp_hdr_t, flags)] &= (uint8_t)~PP_F_RETX;
    o[3].path = o[0].path + 1;
    TAP_OK(pp_run_count(&n->c[0], o, k, 60000) == 3, "run fields: another path ends a run");
    TAP_OK(pp_run_count(&n->c[0], o, k, 2 * o[0].len) == 2, "run fields: the byte cap ends a run");
    net_fini(n);
    free(n);
}

/* pwin: a loss cuts a path's window only where that path shows congestion:
 * its queue-inclusive RTT above base + max(base / 2, 2 x PP_QUEUE_TARGET_NS), or no fresh
 * acknowledgement (its delay estimate is stale: everything may be dropping). */
static void t_pwin_random_loss(void)
{
    pp_conn_t c;
    pp_cfg_t cfg;
    uint64_t now = 50000000;
    double w;
    net_cfg(&cfg, 0, 1, 2);
    cfg.lb = &pp_lb_pwin;
    pp_conn_init(&c, &cfg);
    c.now = now;
    for (int p = 0; p < 3; p++) {
        c.paths[p].st.min_rtt_ns = 100000;
        c.paths[p].qrtt_ns = 120000;
        c.paths[p].qvar_ns = 10000;
        c.paths[p].acked_sent_ns = now - 100000;
        c.paths[p].cwnd = 64000;
    }
    c.paths[1].qrtt_ns = 100000 + 3 * PP_QUEUE_TARGET_NS;   /* past the standing queue */
    c.paths[2].acked_sent_ns = now - 20000000;           /* nothing back for 20 ms */
    w = c.paths[0].cwnd;
    for (int p = 0; p < 3; p++)
        c.cfg.lb->on_loss(&c, p);
    TAP_OK(c.paths[0].cwnd == w, "pwin: a loss on a path with a short queue keeps its window (%.0f B)",
           c.paths[0].cwnd);
    TAP_OK(c.paths[1].cwnd == w / 2, "pwin: a loss on a path with a 3 ms queue halves it");
    TAP_OK(c.paths[2].cwnd == w / 2, "pwin: a loss on a path with no fresh ACK halves it");
    pp_conn_fini(&c);
}

/* swift: a loss cuts the window only where the delay shows a queue; the
 * target's headroom covers two chunks at the delivery rate (a chunk is one
 * burst, its own packets queue behind each other at the bottleneck). */
static void t_swift_loss(void)
{
    pp_conn_t c;
    pp_cfg_t cfg;
    double w;
    net_cfg(&cfg, 0, 1, 2);
    cfg.cc = &pp_cc_swift;
    pp_conn_init(&c, &cfg);
    c.min_rtt_ns = 40000;
    c.rate_Bps = cfg.chunk / 131e-6;          /* a chunk takes 131 us at the delivery rate */
    c.srtt_ns = 200000;                       /* under 40 + 2 x 131 us */
    c.cc.cwnd = w = 20.0 * cfg.chunk;
    c.cfg.cc->on_loss(&c, 0, 10000000);
    TAP_OK(c.cc.cwnd == w, "swift: a fast-retransmit loss with the RTT under target keeps the "
           "window (%.0f B)", c.cc.cwnd);
    c.cfg.cc->on_loss(&c, 1, 10000000);
    TAP_OK(c.cc.cwnd == w, "swift: so does a timeout with the RTT under target (%.0f B)", c.cc.cwnd);
    c.srtt_ns = 2000000;                      /* a 2 ms queue */
    c.cfg.cc->on_loss(&c, 0, 10000000);
    TAP_OK(c.cc.cwnd == w / 2, "swift: a loss with a 2 ms queue halves the window (%.0f B)", c.cc.cwnd);
    c.cfg.cc->on_loss(&c, 0, 10000000 + 1000);
    TAP_OK(c.cc.cwnd == w / 2, "swift: no second cut within an RTT (%.0f B)", c.cc.cwnd);
    pp_conn_fini(&c);
}

/* pwin: a path queueing more than PP_QUEUE_SPREAD_NS longer than the least
 * queued path shrinks its window on its ACKs (in proportion to the excess,
 * at most half, once per its RTT, never below a chunk); paths within the
 * spread keep growing, whatever their common (host) delay. */
static void t_pwin_queue_spread(void)
{
    pp_conn_t c;
    pp_cfg_t cfg;
    uint64_t now = 80000000, host = 2000000;   /* 2 ms of delay every path shares */
    double w = 400000, w1;
    net_cfg(&cfg, 0, 1, 4);
    cfg.lb = &pp_lb_pwin;
    pp_conn_init(&c, &cfg);
    c.now = now;
    for (int p = 0; p < 4; p++) {
        c.paths[p].qrtt_ns = host + 200000;
        c.paths[p].acked_sent_ns = now - 100000;
        c.paths[p].cwnd = c.paths[p].ssthresh = w;
    }
    c.paths[1].qrtt_ns = host + 200000 + PP_QUEUE_SPREAD_NS / 2;   /* within the spread */
    c.paths[2].qrtt_ns = host + 200000 + 3 * PP_QUEUE_SPREAD_NS;   /* a loaded link */
    c.paths[3].qrtt_ns = host + 200000 + 40 * PP_QUEUE_SPREAD_NS;  /* far worse */
    for (int p = 0; p < 4; p++)
        c.cfg.lb->on_acked(&c, p, 1400);
    TAP_OK(c.paths[0].cwnd > w && c.paths[1].cwnd > w,
           "pwin spread: the least queued path and one within the spread grow (%.0f, %.0f B) "
           "under 2 ms of shared host delay", c.paths[0].cwnd, c.paths[1].cwnd);
    {
        double q = (double)c.paths[2].qrtt_ns, ex = 2.0 * PP_QUEUE_SPREAD_NS;
        double want = w * (1 - 0.8 * ex / q);
        TAP_OK(fabs(c.paths[2].cwnd - want) < 1 && c.paths[2].ssthresh == c.paths[2].cwnd,
               "pwin spread: a path 3 spreads slower cuts in proportion to its excess "
               "(%.0f -> %.0f B, want %.0f) and leaves slow start", w, c.paths[2].cwnd, want);
    }
    TAP_OK(c.paths[3].cwnd == w / 2, "pwin spread: a far slower path is cut by half at most (%.0f B)",
           c.paths[3].cwnd);
    w1 = c.paths[2].cwnd;
    c.now = now + c.paths[2].qrtt_ns / 2;
    c.cfg.lb->on_acked(&c, 2, 1400);
    TAP_OK(c.paths[2].cwnd >= w1, "pwin spread: no second cut within the path's RTT (%.0f B)",
           c.paths[2].cwnd);
    c.paths[3].cwnd = c.paths[3].ssthresh = 1.2 * c.cfg.chunk;
    c.now = now + 2 * c.paths[3].qrtt_ns;
    for (int p = 0; p < 4; p++)
        c.paths[p].acked_sent_ns = c.now - 100000;   /* all still in use */
    c.cfg.lb->on_acked(&c, 3, 1400);
    TAP_OK(c.paths[3].cwnd == (double)c.cfg.chunk,
           "pwin spread: a cut stops at one chunk (%.0f B); below it only losses cut",
           c.paths[3].cwnd);
    c.cfg.lb->on_acked(&c, 3, 1400);
    TAP_OK(c.paths[3].cwnd > (double)c.cfg.chunk, "pwin spread: at one chunk the path grows again");
    pp_conn_fini(&c);
}

/* cubic: the window stops growing (and slow start ends) while every one of
 * the latest PP_RTT_RING RTT samples holds more than 1 ms of queue, and
 * yields 6% per queued RTT; one short sample among them lets it grow. How
 * many paths look short does not count: with every path acknowledged
 * lately and one of them short, the window still holds. */
static void cubic_samples(pp_conn_t *c, int n, uint64_t rtt)
{
    for (int i = 0; i < n; i++)
        c->rtt_ring[c->rtt_ring_n++ % PP_RTT_RING] = (uint32_t)rtt;
}

static void t_cubic_queue_guard(void)
{
    pp_conn_t c;
    pp_cfg_t cfg;
    pp_ack_info_t a = {.now = 60000000, .acked = 4000, .rtt_ns = 1700000, .path = 0};
    double w;
    net_cfg(&cfg, 0, 1, 2);
    cfg.cc = &pp_cc_cubic;
    pp_conn_init(&c, &cfg);
    c.min_rtt_ns = 100000;
    c.srtt_ns = 2000000;
    for (uint32_t p = 0; p < cfg.npaths; p++) {
        c.paths[p].qrtt_ns = p == 6 ? 300000 : 100000 + 1700000;   /* path 6 short */
        c.paths[p].acked_sent_ns = a.now - 300000;                  /* all fresh */
    }
    cubic_samples(&c, PP_RTT_RING / 8 - 1, 1700000);
    TAP_OK(pp_recent_min_rtt(&c) == 0, "cubic: no recent RTT before %d samples", PP_RTT_RING / 8);
    cubic_samples(&c, PP_RTT_RING, 1700000);
    w = c.cc.cwnd;
    for (int k = 0; k < 10; k++)
        c.cfg.cc->on_ack(&c, &a);
    TAP_OK(fabs(c.cc.cwnd - 0.94 * w) < 1 && c.cc.ssthresh == c.cc.cwnd,
           "cubic: the last %d samples queue 1.6 ms: ten ACKs within one queued RTT hold the "
           "window, less one yield of 6%% (%.0f -> %.0f B), and slow start ends, though one of "
           "every path's queue is short", PP_RTT_RING, w, c.cc.cwnd);
    w = c.cc.cwnd;
    a.now += 1800000;   /* one queued RTT later */
    c.cfg.cc->on_ack(&c, &a);
    TAP_OK(fabs(c.cc.cwnd - 0.94 * w) < 1, "cubic: the next queued RTT yields 6%% again (%.0f B)",
           c.cc.cwnd);
    w = c.cc.cwnd;
    cubic_samples(&c, 1, 300000);    /* one packet without the queue */
    a.now += 1800000;
    for (int k = 0; k < 10; k++)
        c.cfg.cc->on_ack(&c, &a);
    TAP_OK(pp_recent_min_rtt(&c) == 300000 && c.cc.cwnd > w,
           "cubic: one recent sample with a short queue: the window grows (%.0f -> %.0f B)",
           w, c.cc.cwnd);
    cubic_samples(&c, PP_RTT_RING, 1700000);
    TAP_OK(pp_recent_min_rtt(&c) == 1700000, "cubic: the short sample ages out after %d more",
           PP_RTT_RING);
    TAP_OK(pp_least_qrtt(&c, 60000000) == 300000 && pp_least_qrtt(&c, 120000000) == 0,
           "least queued path (pwin, swift): the fresh one; none once every estimate is stale");
    pp_conn_fini(&c);
}

/* The queue a window holds at grows as the window shrinks below 400 KB
 * (the square root of how far below, at most 1.5 times the 1 ms target):
 * the smaller of two connections sharing a queue grows on where the larger
 * one holds. */
static int cubic_holds(double cwnd, uint64_t queue_ns)
{
    pp_conn_t c;
    pp_cfg_t cfg;
    pp_ack_info_t a = {.now = 60000000, .acked = 1000, .rtt_ns = 100000 + queue_ns, .path = 0};
    int held;
    net_cfg(&cfg, 0, 1, 2);
    cfg.cc = &pp_cc_cubic;
    pp_conn_init(&c, &cfg);
    c.min_rtt_ns = 100000;
    c.srtt_ns = 100000 + queue_ns;
    c.cc.cwnd = cwnd;
    cubic_samples(&c, PP_RTT_RING, 100000 + queue_ns);
    c.cfg.cc->on_ack(&c, &a);
    held = c.cc.held_ns == a.now;
    pp_conn_fini(&c);
    return held;
}

static void t_cubic_fair_target(void)
{
    TAP_OK(cubic_holds(800000, 1100000) && cubic_holds(400000, 1100000) &&
           !cubic_holds(400000, 900000),
           "cubic target: windows of 400 KB and more hold at 1 ms of queue");
    TAP_OK(!cubic_holds(200000, 1350000) && cubic_holds(200000, 1450000),
           "cubic target: a 200 KB window holds at sqrt(2) ms, not before");
    TAP_OK(!cubic_holds(40000, 1450000) && cubic_holds(40000, 1550000),
           "cubic target: a 40 KB window holds at 1.5 ms (the cap), not before");
}

/* Near a hold CUBIC grows one chunk per RTT (equal steps for every
 * connection, so yields and steps even out shares: AIMD); CUBIC_NEAR_RTTS
 * (8) smoothed RTTs after the last queue its curve grows faster again. */
static double cubic_one_rtt(pp_conn_t *c, pp_ack_info_t *a)
{
    double w = c->cc.cwnd, acked = 0;
    while (acked < w) {
        c->cfg.cc->on_ack(c, a);
        acked += a->acked;
    }
    return c->cc.cwnd - w;
}

static void t_cubic_near_queue(void)
{
    pp_conn_t c;
    pp_cfg_t cfg;
    pp_ack_info_t a = {.now = 60000000, .acked = 1000, .rtt_ns = 300000, .path = 0};
    double g1, g2, g3;
    net_cfg(&cfg, 0, 1, 2);
    cfg.cc = &pp_cc_cubic;
    pp_conn_init(&c, &cfg);
    c.min_rtt_ns = 100000;
    c.srtt_ns = 1000000;
    cubic_samples(&c, PP_RTT_RING, 1700000);   /* a standing queue: hold */
    c.cfg.cc->on_ack(&c, &a);
    TAP_OK(c.cc.held_ns == a.now && c.cc.ssthresh == c.cc.cwnd, "cubic: a standing queue is "
           "remembered (held at %llu ns)", (unsigned long long)c.cc.held_ns);
    cubic_samples(&c, PP_RTT_RING, 300000);    /* the queue drained */
    a.now += 1000000;
    g1 = cubic_one_rtt(&c, &a);
    a.now += 2000000;
    g2 = cubic_one_rtt(&c, &a);
    TAP_OK(fabs(g1 - cfg.chunk) < 0.05 * cfg.chunk && fabs(g2 - cfg.chunk) < 0.05 * cfg.chunk,
           "cubic: 1 and 3 RTTs after a hold, a window's worth of ACKs grows it one chunk "
           "(%.0f, %.0f B; chunk %u)", g1, g2, cfg.chunk);
    a.now += 9 * c.srtt_ns;   /* far from the last queue: the curve again */
    cubic_one_rtt(&c, &a);
    a.now += 3 * c.srtt_ns;
    g3 = cubic_one_rtt(&c, &a);
    TAP_OK(g3 > 2.0 * cfg.chunk, "cubic: %d RTTs without a queue, CUBIC's curve grows faster "
           "(%.0f B in a window of ACKs)", 12, g3);
    pp_conn_fini(&c);
}

/* pwin draws its candidates by path; with more of them a connection whose
 * paths mostly sit on a queued link still finds the cheap ones. */
static void t_pwin_choices(void)
{
    pp_conn_t c;
    int cheap = 0, n = 4000;
    pwin_conn(&c, 0);
    for (uint32_t p = 0; p < c.cfg.npaths; p++) {
        c.paths[p].qrtt_ns = p < c.cfg.npaths / 4 ? 100000 : 2000000;   /* 2 of 8 cheap */
        c.paths[p].acked_sent_ns = 1000;
    }
    for (int i = 0; i < n; i++) {
        int p = c.cfg.lb->select_path(&c, 2000);
        cheap += p >= 0 && (uint32_t)p < c.cfg.npaths / 4;
    }
    /* two choices: 1 - (3/4)^2 = 44%; four: 1 - (3/4)^4 = 68% */
    TAP_OK(cheap > n * 62 / 100 && cheap < n * 75 / 100, "pwin: the cheap quarter of the paths "
           "takes %d of %d chunks (four random choices: 68%%)", cheap, n);
    pp_conn_fini(&c);
}

/* ------------------------------------------------ referenced payloads */

/* Reaps sender c[0]'s finished referenced messages into seen[cookie]
 * (1 acknowledged, 2 failed; a second report counts in *twice). */
static int zc_reap_into(net_t *n, int *seen, int nseen, int *twice)
{
    pp_zc_t z[8];
    int k, total = 0;
    while ((k = pp_zc_reap(&n->c[0], z, 8)) > 0)
        for (int i = 0; i < k; i++, total++) {
            int id = (int)z[i].cookie;
            if (id < 0 || id >= nseen || seen[id])
                (*twice)++;
            else
                seen[id] = z[i].failed ? 2 : 1;
        }
    return total;
}

/* Drops the first transmission of the data packet at message offset 5000
 * (payload bytes 4960.. of t_zc_retx_reads_ref's message); counts in arg. */
static int f_drop_off_once(net_t *n, int from, const uint8_t *p, size_t len, uint64_t seq)
{
    pp_data_t d;
    (void)seq;
    if (from != 0 || len < sizeof d || PKT_TYPE(p) != PP_T_DATA)
        return NET_PASS;
    memcpy(&d, p, sizeof d);
    if (d.off != 5000 || (d.h.flags & PP_F_RETX))
        return NET_PASS;
    ++*(int *)n->arg;
    return NET_DROP;
}

/* A referenced message is not copied: the first packet gathers the header
 * and the payload's start, and a retransmission reads the caller's buffer
 * again (the test rewrites the lost packet's bytes in between: a caller
 * must not, but this shows where the bytes come from). */
static void t_zc_retx_reads_ref(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    uint8_t *src = malloc(20000), *want = malloc(20000), hdr[40] = {1, 2, 3};
    int seen[4] = {0}, twice = 0, steps = 0, got = 0, bad = 0, dropped = 0;
    pp_out_t o;
    pp_msg_t *m;
    net_cfg(&a, 0, 7, 8);
    net_cfg(&b, 1, 7, 8);
    net_init(n, &a, &b);
    msg_fill(src, 20000, 5, 0);
    TAP_OK(pp_send_ref(&n->c[0], hdr, sizeof hdr, src, 20000, UINT64_MAX, 0, 3) == 0 &&
           n->c[0].tx_buffered == 20040 && pp_send_ref(&n->c[0], hdr, sizeof hdr, src, 0,
                                                       UINT64_MAX, 0, 3) == -1,
           "zero copy: queued by reference, counted in the send buffer; no empty payload");
    /* the first packet: 40 header bytes from the message, 960 from src */
    bad += !pp_tx_next(&n->c[0], n->now, &o) || o.len != 40 || o.len2 != 960 ||
           o.payload2 != src || memcmp(o.payload, hdr, 40) != 0;
    net_emit(n, 0, &o);
    TAP_OK(!bad, "zero copy: the first packet is header + payload in two pieces");
    n->filter = f_drop_off_once;
    n->arg = &dropped;
    net_step(n, 64);        /* everything else goes; offset 5000 is lost */
    TAP_OK(dropped == 1 && n->c[0].tx_cut == NULL, "zero copy: whole message sent once, "
           "packet at offset 5000 lost");
    memcpy(want, src, 20000);
    memset(src + 4960, 0xee, 1000);   /* that packet's payload bytes, changed */
    memcpy(want + 4960, src + 4960, 1000);
    while (steps++ < 20000 && (!got || !pp_idle(&n->c[0]))) {
        net_step(n, 64);
        zc_reap_into(n, seen, 4, &twice);
        while ((m = pp_deliver(&n->c[1])) != NULL) {
            bad += m->len != 20040 || memcmp(m->data, hdr, 40) != 0 ||
                   memcmp(m->data + 40, want, 20000) != 0;
            got++;
            pp_msg_release(&n->c[1], m);
        }
    }
    TAP_OK(got == 1 && !bad && retx(n) > 0, "zero copy: the retransmission read the caller's "
           "buffer (%d delivered, %d bad, %llu retransmissions)", got, bad,
           (unsigned long long)retx(n));
    TAP_OK(seen[3] == 1 && !twice && n->c[0].zc_refs == 0 && n->c[0].tx_buffered == 0,
           "zero copy: cookie reported once, acknowledged; nothing referenced or buffered");
    net_fini(n);
    free(n);
    free(src);
    free(want);
}

/* Every ACK lost until 3 ms: the receiver has the first message long before
 * the sender may give its buffer back; each report comes with the ACK that
 * covers the message's last packet, never while a byte is unacknowledged. */
static void t_zc_after_last_ack(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    region_t rg = {calloc(1, 300000), 300000};
    uint8_t *src = malloc(300000), hdr[40] = {4};
    int seen[4] = {0}, twice = 0, steps = 0, got = 0, early = 0;
    int got_step[3] = {0, 0, 0}, rep_step[3] = {0, 0, 0};
    net_cfg(&a, 0, 9, 10);
    net_cfg(&b, 1, 9, 10);
    b.place = place_in_region;
    b.place_arg = &rg;
    net_init(n, &a, &b);
    n->filter = f_acks_lost_early;
    msg_fill(src, 300000, 6, 0);
    /* the first fits the initial window: all of it arrives in step 1 */
    pp_send_ref(&n->c[0], hdr, sizeof hdr, src, 50000, 77, 0, 1);
    pp_send_ref(&n->c[0], hdr, sizeof hdr, src + 50000, 250000, 77, 50000, 2);
    while (steps++ < MAX_STEPS && (seen[1] == 0 || seen[2] == 0)) {
        pp_msg_t *m;
        net_step(n, 64);
        while ((m = pp_deliver(&n->c[1])) != NULL) {
            got_step[++got < 3 ? got : 0] = steps;
            pp_msg_release(&n->c[1], m);
        }
        zc_reap_into(n, seen, 4, &twice);
        for (int k = 1; k <= 2; k++) {
            if (seen[k] && !rep_step[k])
                rep_step[k] = steps;
            for (pp_msg_t *t = n->c[0].tx_head; t; t = t->next)
                early += seen[k] && t->cookie == (uint64_t)k;   /* reported, bytes unacked */
        }
    }
    TAP_OK(got == 2 && memcmp(rg.buf, src, 300000) == 0, "zero copy: 2 placed messages intact");
    TAP_OK(seen[1] == 1 && seen[2] == 1 && !twice && !early,
           "zero copy: each cookie reported once, never with a byte unacknowledged (%d early)",
           early);
    TAP_OK(got_step[1] == 1 && rep_step[1] > 300 && rep_step[2] > got_step[2] &&
           got_step[2] > 0, "zero copy: message 1 delivered at step %d, its buffer given back "
           "at step %d (ACKs lost until step 300); message 2: %d, %d", got_step[1], rep_step[1],
           got_step[2], rep_step[2]);
    net_fini(n);
    free(n);
    free(src);
    free(rg.buf);
}

/* A dead peer: every referenced message is reported failed, once, and the
 * connection sends nothing more (the buffers are the caller's again). */
static void t_zc_give_up(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    uint8_t *src = malloc(100000), hdr[40] = {0};
    int seen[8] = {0}, twice = 0, steps = 0, before = 0;
    pp_out_t o;
    net_cfg(&a, 0, 1, 2);
    net_cfg(&b, 1, 1, 2);
    net_init(n, &a, &b);
    n->filter = f_drop_all;
    msg_fill(src, 100000, 8, 0);
    pp_send_ref(&n->c[0], hdr, sizeof hdr, src, 60000, UINT64_MAX, 0, 5);
    pp_send(&n->c[0], hdr, sizeof hdr, src, 3000);
    pp_send_ref(&n->c[0], hdr, sizeof hdr, src + 60000, 40000, UINT64_MAX, 0, 6);
    while (steps++ < MAX_STEPS && !n->c[0].failed) {
        before += zc_reap_into(n, seen, 8, &twice);
        net_step(n, 64);
    }
    zc_reap_into(n, seen, 8, &twice);
    TAP_OK(n->c[0].failed && before == 0 && seen[5] == 2 && seen[6] == 2 && !twice,
           "zero copy: give-up reports both referenced messages failed, once (%d steps; "
           "%d before, %d %d, %d twice)", steps, before, seen[5], seen[6], twice);
    TAP_OK(!pp_zc_ready(&n->c[0]) && zc_reap_into(n, seen, 8, &twice) == 0 &&
           !pp_tx_next(&n->c[0], n->now + 1000000000ull, &o),
           "zero copy: nothing more to report or send after the failure");
    net_fini(n);
    free(n);
    free(src);
}

/* Withdrawn early (a cancelled send): the rest is sent from a copy, the
 * caller's buffer may change at once, and the cookie is never reported. */
static void t_zc_detach(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    uint8_t *src = malloc(50000), *want = malloc(50000), hdr[40] = {7};
    int seen[4] = {0}, twice = 0, steps = 0, got = 0, bad = 0;
    pp_msg_t *m;
    net_cfg(&a, 0, 3, 4);
    net_cfg(&b, 1, 3, 4);
    net_init(n, &a, &b);
    msg_fill(src, 50000, 9, 0);
    memcpy(want, src, 50000);
    pp_send_ref(&n->c[0], hdr, sizeof hdr, src, 50000, UINT64_MAX, 0, 2);
    net_step(n, 8);   /* a few packets out */
    TAP_OK(n->c[0].zc_refs == 1 && pp_zc_detach(&n->c[0], 2) == 0 && n->c[0].zc_refs == 0,
           "zero copy: detach copies the unacknowledged message");
    memset(src, 0, 50000);
    while (steps++ < 20000 && (!got || !pp_idle(&n->c[0]))) {
        net_step(n, 64);
        zc_reap_into(n, seen, 4, &twice);
        while ((m = pp_deliver(&n->c[1])) != NULL) {
            bad += m->len != 50040 || memcmp(m->data + 40, want, 50000) != 0;
            got++;
            pp_msg_release(&n->c[1], m);
        }
    }
    TAP_OK(got == 1 && !bad && seen[2] == 0 && !twice,
           "zero copy: after detach the message arrives intact from the copy, unreported");
    net_fini(n);
    free(n);
    free(src);
    free(want);
}

/* Referenced bytes count against tx_buf_max: a receiver that takes nothing
 * pins at most the cap plus one message of the caller's memory. */
static void t_zc_flow_control(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    uint8_t *src = malloc(100000), hdr[40] = {0};
    int queued = 0, refused = 0;
    net_cfg(&a, 0, 1, 2);
    net_cfg(&b, 1, 1, 2);
    a.tx_buf_max = 256u << 10;
    b.rx_buf_max = 200u << 10;
    net_init(n, &a, &b);
    msg_fill(src, 100000, 10, 0);
    for (int step = 0; step < 3000; step++) {
        int rc = pp_send_ref(&n->c[0], hdr, sizeof hdr, src, 100000, UINT64_MAX, 0,
                             (uint64_t)queued + 1);
        queued += rc == 0;
        refused += rc == 1;
        net_step(n, 64);   /* nobody calls pp_deliver */
    }
    TAP_OK(refused > 0 && n->c[0].tx_buffered <= a.tx_buf_max + 100040 &&
           n->c[0].zc_refs * 100040u == n->c[0].tx_buffered,
           "zero copy: referenced bytes hit the send cap (%d queued, %d refused, %zu pinned)",
           queued, refused, n->c[0].tx_buffered);
    net_fini(n);
    free(n);
    free(src);
}

/* A datapath that hands packets to the kernel with the connection unlocked
 * pins it (pp_tx_pin, one pin per thread): messages acknowledged meanwhile
 * are retired, neither freed nor reported, and detach waits (PP_BUSY);
 * the last unpin reports the referenced one once and frees the other. */
static void t_tx_pin(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    uint8_t *src = malloc(20000), hdr[40] = {3};
    int seen[4] = {0}, twice = 0, steps = 0, retired = 0, got = 0, early;
    pp_msg_t *m;
    net_cfg(&a, 0, 5, 6);
    net_cfg(&b, 1, 5, 6);
    net_init(n, &a, &b);
    msg_fill(src, 20000, 11, 0);
    pp_send_ref(&n->c[0], hdr, sizeof hdr, src, 12000, UINT64_MAX, 0, 1);
    pp_send(&n->c[0], hdr, sizeof hdr, src + 12000, 8000);
    pp_tx_pin(&n->c[0], NULL, 0);
    pp_tx_pin(&n->c[0], NULL, 0);
    while (steps++ < 2000 && n->c[0].tx_head) {
        net_step(n, 64);
        while ((m = pp_deliver(&n->c[1])) != NULL) {
            got++;
            pp_msg_release(&n->c[1], m);
        }
    }
    for (m = n->c[0].retired; m; m = m->next)
        retired++;
    early = pp_zc_ready(&n->c[0]) + zc_reap_into(n, seen, 4, &twice);
    TAP_OK(got == 2 && !n->c[0].tx_head && retired == 2 && !early &&
           pp_zc_detach(&n->c[0], 1) == PP_BUSY,
           "tx pin: both messages acknowledged while pinned are retired, unreported "
           "(%d retired, %d reported), detach waits", retired, early);
    pp_tx_unpin(&n->c[0], NULL, 0);
    early = zc_reap_into(n, seen, 4, &twice);
    TAP_OK(n->c[0].retired && !early, "tx pin: pins nest (one of two released: still retired)");
    pp_tx_unpin(&n->c[0], NULL, 0);
    zc_reap_into(n, seen, 4, &twice);
    TAP_OK(!n->c[0].retired && n->c[0].zc_refs == 0 && seen[1] == 1 && !twice &&
           pp_zc_detach(&n->c[0], 1) == 0,
           "tx pin: the last unpin reports the referenced message once, frees the other");
    net_fini(n);
    free(n);
    free(src);
}

/* Two threads transmitting one connection (udp_tx_peer beside
 * udp_tx_help): each takes a batch under the lock, pins it with its packets
 * and hands it to the kernel unlocked. The second batch (stamped later)
 * must not put packets on a path the first still holds: it would reach
 * the wire first, its ACK would come first, and the same-path rule would
 * take the first batch's packets there for lost. Here the later batch
 * always goes first on the wire and its ACK returns before the earlier
 * batch leaves: no fast retransmission, no path shared, the chunk the
 * second batch would have continued cut short, every byte intact. */
static void t_tx_two_threads(void)
{
    enum { LEN = 300000, BATCH = 6 };
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    uint8_t *src = malloc(LEN), hdr[16] = {9};
    pp_out_t *oa = malloc(2 * BATCH * sizeof *oa), *ob = oa + BATCH;
    pp_msg_t *m, *got = NULL;
    int shared = 0, steps = 0, ok = 0;
    net_cfg(&a, 0, 3, 4);
    net_cfg(&b, 1, 3, 4);
    net_init(n, &a, &b);
    msg_fill(src, LEN, 21, 0);
    pp_send(&n->c[0], hdr, sizeof hdr, src, LEN);
    while (steps++ < 5000 && !got) {
        int na = 0, nb = 0;
        pp_out_t o;
        pp_poll(&n->c[0], n->now);
        while (na < BATCH && pp_tx_next(&n->c[0], n->now, &oa[na]))
            na++;
        pp_tx_pin(&n->c[0], oa, na);                  /* thread A: to the kernel, unlocked */
        while (nb < BATCH && pp_tx_next(&n->c[0], n->now + 50000, &ob[nb]))
            nb++;                                     /* thread B, 50 us later */
        pp_tx_pin(&n->c[0], ob, nb);
        for (int i = 0; i < nb; i++)
            for (int j = 0; j < na; j++)
                shared += ob[i].path == oa[j].path;
        for (int i = 0; i < nb; i++)                  /* B's packets reach the wire first */
            net_emit(n, 0, &ob[i]);
        pp_tx_unpin(&n->c[0], ob, nb);
        net_deliver(n);
        while (pp_ack_next(&n->c[1], n->now, &o))
            net_emit(n, 1, &o);
        net_deliver(n);                               /* their ACK is back before A's leave */
        for (int i = 0; i < na; i++)
            net_emit(n, 0, &oa[i]);
        pp_tx_unpin(&n->c[0], oa, na);
        net_step(n, 0);                               /* A's packets, then the ACKs */
        n->now += 100000;
        if ((m = pp_deliver(&n->c[1])) != NULL)
            got = m;
    }
    ok = got && got->len == LEN + sizeof hdr && !memcmp(got->data + sizeof hdr, src, LEN);
    TAP_OK(ok && shared == 0 && n->c[0].st.retx_fast == 0 && n->c[0].st.chunks_cut > 0,
           "two threads: a later batch takes no path an earlier one holds (%d shared), "
           "no fast retransmission (%llu), chunks cut short %llu, message intact %d",
           shared, (unsigned long long)n->c[0].st.retx_fast,
           (unsigned long long)n->c[0].st.chunks_cut, ok);
    if (got)
        pp_msg_release(&n->c[1], got);
    net_fini(n);
    free(n);
    free(src);
    free(oa);
}

/* Threads read the time before they take the connection's lock: a call
 * that comes with a time older than a packet's send stamp must not count
 * backwards (unsigned, "unacknowledged for 584 years": a false give-up). */
static void t_clock_back(void)
{
    net_t *n = malloc(sizeof *n);
    pp_cfg_t a, b;
    uint8_t msg[3000] = {1}, hdr[40] = {0};
    pp_out_t o;
    int sent;
    net_cfg(&a, 0, 1, 2);
    net_cfg(&b, 1, 1, 2);
    net_init(n, &a, &b);
    pp_send(&n->c[0], hdr, sizeof hdr, msg, sizeof msg);
    sent = pp_tx_next(&n->c[0], n->now + 5000000, &o);
    TAP_OK(sent && pp_poll(&n->c[0], n->now) == 0 && !n->c[0].failed &&
           pp_poll(&n->c[0], n->now + 1000000) == 0 && !n->c[0].failed,
           "clock: a time older than the last send stamp fails nothing");
    net_fini(n);
    free(n);
}

int main(void)
{
    t_clean();
    t_loss();
    t_reorder();
    t_reo_adapt();
    t_dup();
    t_corrupt();
    t_field_checks();
    t_wrap();
    t_ack_loss();
    t_tail_timeout();
    t_give_up();
    t_give_up_black_hole();
    t_flow_control();
    t_flow_spurious();
    t_window_update();
    t_policies();
    t_small_one_path();
    t_placed();
    t_placed_fields();
    t_placed_deferred();
    t_early();
    t_early_short_head();
    t_rtt_echo();
    t_spurious_rto();
    t_path_rto();
    t_pwin_loss();
    t_path_down();
    t_path_down_all();
    t_path_down_small();
    t_path_down_serial();
    t_path_down_probe_ack();
    t_ack_via();
    t_infl_index();
    t_pwin_steer();
    t_pwin_chunk_span();
    t_pwin_tail();
    t_pwin_random_loss();
    t_swift_loss();
    t_pwin_queue_spread();
    t_short_ack();
    t_ack_due();
    t_piggyback();
    t_piggyback_gso();
    t_runs();
    t_runs_placed();
    t_runs_piggy();
    t_run_fields();
    t_cubic_queue_guard();
    t_cubic_fair_target();
    t_cubic_near_queue();
    t_pwin_choices();
    t_zc_retx_reads_ref();
    t_zc_after_last_ack();
    t_zc_give_up();
    t_zc_detach();
    t_zc_flow_control();
    t_tx_pin();
    t_tx_two_threads();
    t_clock_back();
    return tap_done();
}
