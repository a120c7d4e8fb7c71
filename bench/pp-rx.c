/*
 * pp-rx -- the receiver's protocol work per data packet, timed alone.
 *
 * A sender pp_conn_t streams placed messages (pt2pt's large frames) to a
 * receiver through a scripted loop (ACKs fed back), and every data packet
 * is captured. The capture is then laid out as a UDP receive pass sees it:
 * batches of -b packets, each cut into GRO datagrams (up to 44 equal
 * segments, as the kernel coalesces a 64 KB run), and replayed -r times into
 * a fresh receiver the way udp.c's receive pass drives it: pp_parse and
 * pp_rx_parsed per segment under the peer's lock (taken once per datagram),
 * placement copies deferred (pp_rx_copy_defer / take / done, the copies
 * themselves left out unless -c), complete messages delivered and released,
 * and one ACK (pp_ack_next) per batch. Loopback timings on a small VM are
 * noisy; this is the part of the receiving thread's time that is CPU alone.
 *
 * Output: ns per packet (least and median over the runs but the last) and
 * the receiver's counters with a hash of the last run's ACKs and placement
 * copies (offsets and length; that run is not timed), which must read the same
 * before and after any change of the receive path (no behaviour change).
 *
 * Usage: pp-rx [-m PAYLOAD] [-b BATCH] [-n PACKETS] [-r RUNS] [-R REGIONS] [-o K] [-c]
 *   -m  bytes of payload per message (placed; default 262144)
 *   -R  receive regions exposed at a time (default 64: plait-bench's window)
 *   -b  packets per receive batch (one ACK each; default 64)
 *   -n  packets captured and replayed per run (default 16384)
 *   -o  reorder: each block of K packets reversed (SACK bits, holes)
 *   -c  make the placement copies too
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "transport/proto/pp.h"
#include "transport/udp/region.h"
#include "tests/unit/pp_pair.h"

#define KEY      0x5eed5eed12345678ull
#define HLEN     40                       /* a ptl + pt2pt header's size */
#define SEG_MAX  44                       /* GRO: segments per 64 KB datagram */

typedef struct {
    uint8_t *buf;          /* the packets, back to back (a GRO datagram's layout) */
    size_t  *len;          /* per packet */
    size_t  *at;           /* its offset in buf */
    int      n;
} capture_t;

static void die(const char *what)
{
    fprintf(stderr, "pp-rx: %s\n", what);
    exit(1);
}

/* The receive buffers exposed for placement, kept as udp.c keeps a peer's
 * (transport/udp/region.h): message k (from 0) goes to region id k + 1,
 * and -R of them are exposed at a time (plait-bench's window of posted
 * receives); a delivered message's region is withdrawn (udp_unexpose) and
 * the next id exposed. */
typedef struct {
    udp_regions_t t;
    uint8_t      *mem;       /* backing memory: region id i at (i % nmax) * len */
    int           nmax;
    size_t        len;
} regions_t;

static void region_expose(regions_t *g, uint64_t id)
{
    if (udp_region_add(&g->t, id, g->mem + (id % (uint64_t)g->nmax) * g->len, g->len))
        die("no memory");
}

/* udp_place (udp.c). */
static void *place(void *arg, uint64_t id, uint64_t off, size_t *len)
{
    regions_t *g = arg;
    return udp_region_place(&g->t, id, off, len);
}

static void cfg_make(pp_cfg_t *c, int me, regions_t *reg)
{
    pp_pair_cfg(c, KEY, me);
    c->tx_isn = me ? 77 : 0xfffff000u;   /* the PSNs wrap during the run */
    c->rx_isn = me ? 0xfffff000u : 77;
    c->chunk = 32768;
    c->mtu = 1500 - 28 - (uint32_t)PP_DATA_HDR_MAX;   /* as udp_conn_cfg */
    c->npaths = 32;
    c->max_msg = 1u << 20;
    c->cc = pp_cc_find("cubic");
    c->lb = pp_lb_find("pwin");
    c->place = place;
    c->place_arg = reg;
    c->seed = 1 + (uint64_t)me;
}

/* Streams messages of plen payload bytes until n data packets were sent
 * (each captured), ACKs going back every step. */
static void capture(capture_t *cap, int n, size_t plen, regions_t *reg)
{
    pp_conn_t s, r;
    pp_cfg_t cs, cr;
    pp_out_t o;
    uint8_t hdr[HLEN] = {0}, *payload = calloc(1, plen), *pkt = malloc(70000);
    uint64_t now = 1000000000ull, id = 1;
    size_t used = 0;
    cfg_make(&cs, 0, reg);
    cfg_make(&cr, 1, reg);
    if (!payload || !pkt || pp_conn_init(&s, &cs) || pp_conn_init(&r, &cr))
        die("no memory");
    cap->buf = malloc((size_t)n * 1500);
    cap->len = malloc((size_t)n * sizeof *cap->len);
    cap->at = malloc((size_t)n * sizeof *cap->at);
    cap->n = 0;
    while (cap->n < n) {
        pp_msg_t *m;
        while (pp_send_placed(&s, hdr, sizeof hdr, payload, plen, id, 0) == 0)
            id++;
        for (int k = 0; k < 64 && cap->n < n && pp_tx_next(&s, now, &o); k++) {
            size_t len = o.hdr_len + o.len + o.len2;
            memcpy(pkt, o.hdr, o.hdr_len);
            memcpy(pkt + o.hdr_len, o.payload, o.len);
            if (o.len2)
                memcpy(pkt + o.hdr_len + o.len, o.payload2, o.len2);
            if (pkt[offsetof(pp_hdr_t, type)] != PP_T_DATA || len > 1500)
                die("unexpected packet");
            memcpy(cap->buf + used, pkt, len);
            cap->at[cap->n] = used;
            cap->len[cap->n++] = len;
            used += len;
            pp_rx(&r, now, pkt, len);
        }
        while ((m = pp_deliver(&r)) != NULL)
            pp_msg_release(&r, m);
        now += 20000;
        while (pp_ack_next(&r, now, &o))
            pp_rx(&s, now, o.hdr, o.hdr_len);
        pp_poll(&s, now);
    }
    pp_conn_fini(&s);
    pp_conn_fini(&r);
    free(payload);
    free(pkt);
}

/* The order the receiver sees: as sent, or each block of k packets
 * reversed (-o k; 2 swaps pairs, more than a batch leaves holes at ACKs). */
static int *order_make(int n, int k)
{
    int *ord = malloc((size_t)n * sizeof *ord);
    for (int i = 0; i < n; i++) {
        int b = k > 1 ? i / k * k : i, e = b + k <= n ? b + k : n;
        ord[i] = k > 1 ? e - 1 - (i - b) : i;
    }
    return ord;
}

/* A batch laid out as recvmmsg returns it: datagrams of up to SEG_MAX equal
 * segments (a shorter one ends its datagram, as GRO ends a run). Before
 * its turn it is copied into the one receive buffer (untimed), as the
 * kernel's copy leaves a batch in the cache of the core that reads it. */
typedef struct {
    uint8_t *buf;          /* n datagrams back to back */
    size_t   bytes;
    size_t   dlen[64], dseg[64], doff[64];
    int      nd, npkt;
} batch_t;

static void batch_make(batch_t *b, const capture_t *cap, const int *ord, int first, int npkt)
{
    size_t used = 0;
    b->nd = 0;
    b->npkt = npkt;
    for (int i = 0; i < npkt; i++) {
        int p = ord[first + i];
        size_t len = cap->len[p];
        int d = b->nd - 1;
        if (d < 0 || b->dseg[d] != len || b->dlen[d] % len || b->dlen[d] / len >= SEG_MAX) {
            d = b->nd++;
            b->doff[d] = used;
            b->dseg[d] = len;
            b->dlen[d] = 0;
        }
        memcpy(b->buf + used, cap->buf + cap->at[p], len);
        b->dlen[d] += len;
        used += len;
    }
    b->bytes = used;
}

typedef struct {
    pp_conn_t       c;
    regions_t      *reg;
    pthread_mutex_t lock;
    pp_copy_t      *copies;
    uint64_t        msgs;
    uint64_t        hash;        /* of every ACK's bytes and copy (dst, src, len) made */
} rx_t;

/* FNV-1a over n bytes, into h. */
static uint64_t hash_add(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* One batch at buf (laid out as b), as udp_rx_sock / udp_rx_dgram /
 * udp_rx_flush / udp_rx_ack do it. */
static void batch_rx(rx_t *x, const batch_t *b, const uint8_t *buf, uint64_t now, int copy)
{
    uint32_t ncopy = 0, n;
    pp_out_t o;
    pp_msg_t *m;
    for (int d = 0; d < b->nd; d++) {
        const uint8_t *dg = buf + b->doff[d];
        pthread_mutex_lock(&x->lock);
        pp_rx_copy_defer(&x->c, x->copies + ncopy, 4096 - ncopy);
        for (size_t off = 0; off < b->dlen[d]; off += b->dseg[d]) {
            size_t l = b->dlen[d] - off < b->dseg[d] ? b->dlen[d] - off : b->dseg[d];
            uint32_t src;
            int type;
            if (pp_parse(dg + off, l, KEY, 1, &src, &type) >= 0 || src != 0)
                die("pp_parse refused a packet");
            pp_rx_parsed(&x->c, now, dg + off, l);
        }
        n = pp_rx_copy_take(&x->c);
        pthread_mutex_unlock(&x->lock);
        ncopy += n;
    }
    for (uint32_t i = 0; i < ncopy; i++) {
        if (copy)
            memcpy(x->copies[i].dst, x->copies[i].src, x->copies[i].len);
        if (x->hash) {   /* (offsets: the addresses move with ASLR) */
            uint64_t v[3] = {(uint64_t)((uint8_t *)x->copies[i].dst - x->reg->mem),
                             (uint64_t)((const uint8_t *)x->copies[i].src - buf),
                             x->copies[i].len};
            x->hash = hash_add(x->hash, v, sizeof v);
        }
    }
    pthread_mutex_lock(&x->lock);
    pp_rx_copy_done(&x->c, ncopy);
    while ((m = pp_deliver(&x->c)) != NULL) {   /* (udp_deliver, pt2pt's completion) */
        pp_msg_release(&x->c, m);
        x->msgs++;
        udp_region_remove(&x->reg->t, x->msgs);
        region_expose(x->reg, x->msgs + (uint64_t)x->reg->nmax);
    }
    if (pp_ack_next(&x->c, now, &o) && x->hash)
        x->hash = hash_add(x->hash, o.hdr, o.hdr_len);
    pthread_mutex_unlock(&x->lock);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    size_t plen = 262144;
    int bsz = 64, npkt = 16384, runs = 50, rev = 0, copy = 0, opt;
    capture_t cap;
    regions_t reg = {0};
    int nreg = 64;
    batch_t *bs;
    int *ord, nb;
    double *t;
    uint8_t *rxbuf;
    pp_cfg_t cr;
    rx_t x;
    pp_stats_t st;
    while ((opt = getopt(argc, argv, "m:b:n:r:R:o:c")) != -1) {
        switch (opt) {
        case 'm': plen = strtoul(optarg, NULL, 0); break;
        case 'b': bsz = atoi(optarg); break;
        case 'n': npkt = atoi(optarg); break;
        case 'r': runs = atoi(optarg); break;
        case 'R': nreg = atoi(optarg); break;
        case 'o': rev = atoi(optarg); break;
        case 'c': copy = 1; break;
        default:
            fprintf(stderr, "usage: pp-rx [-m PAYLOAD] [-b BATCH] [-n PACKETS] [-r RUNS] [-R REGIONS] [-o K] [-c]\n");
            return 2;
        }
    }
    if (bsz < 1 || bsz > 64 || npkt < bsz || runs < 1 || plen < 1 || plen > (1u << 20) - HLEN ||
        nreg < 1)
        die("bad arguments");
    reg.nmax = nreg;
    reg.len = plen;
    reg.mem = malloc((size_t)nreg * plen);
    x.copies = malloc(4096 * sizeof *x.copies);
    rxbuf = malloc(64 * 1500);
    if (!reg.mem || !x.copies || !rxbuf)
        die("no memory");
    memset(reg.mem, 0, (size_t)nreg * plen);   /* (no page faults in the timed copies) */
    for (int i = 0; i < nreg; i++)
        region_expose(&reg, (uint64_t)i + 1);
    capture(&cap, npkt, plen, &reg);
    ord = order_make(npkt, rev);
    nb = npkt / bsz;
    bs = calloc((size_t)nb, sizeof *bs);
    for (int i = 0; i < nb; i++) {
        bs[i].buf = malloc((size_t)bsz * 1500);
        batch_make(&bs[i], &cap, ord, i * bsz, bsz);
    }
    t = malloc((size_t)runs * sizeof *t);
    cfg_make(&cr, 1, &reg);
    pthread_mutex_init(&x.lock, NULL);
    for (int r = 0; r < runs; r++) {
        double sum = 0;
        uint64_t now = 2000000000ull;
        if (pp_conn_init(&x.c, &cr))
            die("pp_conn_init");
        x.msgs = 0;
        x.hash = r == runs - 1 ? 0xcbf29ce484222325ull : 0;   /* the last run: untimed work */
        x.reg = &reg;
        udp_regions_fini(&reg.t);
        for (int i = 0; i < nreg; i++)
            region_expose(&reg, (uint64_t)i + 1);
        for (int i = 0; i < nb; i++, now += 10000) {
            double t0;
            memcpy(rxbuf, bs[i].buf, bs[i].bytes);
            t0 = now_s();
            batch_rx(&x, &bs[i], rxbuf, now, copy);
            sum += now_s() - t0;
        }
        t[r] = sum * 1e9 / ((double)nb * bsz);
        if (r == runs - 1)   /* (hashed: not timed) */
            t[r] = t[0];
        pp_stats(&x.c, &st);
        if (r + 1 < runs)
            pp_conn_fini(&x.c);
    }
    qsort(t, runs > 1 ? (size_t)runs - 1 : 1, sizeof *t, cmp_d);
    printf("pp-rx: payload %zu, batch %d, %d regions, %d packets x %d runs, blocks of %d "
           "reversed%s\n", plen, bsz, nreg, nb * bsz, runs, rev, copy ? ", with copies" : "");
    printf("  ns/packet   least %.1f  median %.1f\n", t[0], t[(runs - 1) / 2]);
    printf("  receiver    pkts %llu bytes %llu msgs %llu placed %llu discarded %llu acks %llu "
           "cum %u hash %016llx drops",
           (unsigned long long)st.rx_pkts, (unsigned long long)st.rx_bytes,
           (unsigned long long)x.msgs, (unsigned long long)st.rx_placed,
           (unsigned long long)st.rx_discarded, (unsigned long long)st.acks_tx, x.c.rcv_cum,
           (unsigned long long)x.hash);
    for (int i = 0; i < PP_DROP_N; i++)
        printf(" %llu", (unsigned long long)st.drops[i]);
    printf("\n");
    pp_conn_fini(&x.c);
    return 0;
}
