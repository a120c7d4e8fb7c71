/*
 * proto-tx.c -- the sender's CPU cost per packet in transport/proto: time
 * spent in pp_tx_next from a queued message to its packets (chunking, the
 * CC / LB decisions, header fill and seal), without sockets or the noise of
 * a loopback run. A sender and a receiver connection in one process: each
 * round queues one message (pp_send_ref, as pt2pt's large sends), cuts it
 * into packets in batches of 64 (as udp_tx_peer), and only then, untimed,
 * hands the packets to the receiver and its ACK back, with simulated time.
 * Deterministic: the digest of every packet header is printed, so two
 * builds can be checked to emit the same packets.
 *
 *   bench/proto-tx [-m BYTES] [-u MTU] [-r ROUNDS] [-p PATHS] [-c CC] [-l LB] [-P]
 *
 * MTU is the datagram size as PLAIT_UDP_MTU (payload = MTU - 28 - 52); -P
 * sends placed messages (pt2pt's rendezvous: the 52-byte data header).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "transport/proto/pp.h"
#include "tests/unit/pp_pair.h"

#define BATCH 64
#define KEY   0x1234abcd5678ef00ull

/* The receiver's exposed region (placed messages land here). */
static uint8_t *region;
static size_t region_len;

static void *place(void *arg, uint64_t id, uint64_t off, size_t *len)
{
    (void)arg;
    (void)id;
    if (off >= region_len)
        return NULL;
    if (*len > region_len - off)
        *len = region_len - off;
    return region + off;
}

static uint64_t clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void cfg_make(pp_cfg_t *c, int me, uint32_t mtu, uint32_t paths, const char *cc,
                     const char *lb)
{
    pp_pair_cfg(c, KEY, me);
    c->tx_isn = c->rx_isn = 1000;
    c->mtu = mtu - 28 - (uint32_t)PP_DATA_HDR_MAX;   /* as udp_conn_cfg */
    if (c->mtu > c->chunk)
        c->mtu = c->chunk;
    c->npaths = paths;
    c->max_msg = 1u << 20;
    c->seed = 7 + (uint64_t)me;
    c->cc = pp_cc_find(cc);
    c->lb = pp_lb_find(lb);
    c->place = place;
}

/* FNV-1a over the bytes: the digest of everything the sender emitted. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

int main(int argc, char **argv)
{
    size_t msg = 256u << 10;
    uint32_t mtu = 1500, paths = 32;
    int rounds = 20000, opt, placed = 0;
    const char *cc = "cubic", *lb = "pwin";
    static pp_conn_t tx, rx;
    static pp_out_t out[BATCH];
    static uint8_t pkt[70000];
    pp_cfg_t a, b;
    uint8_t hdr[32] = {0}, *payload;
    uint64_t now = 1000000, tx_ns = 0, pkts = 0, digest = 0xcbf29ce484222325ull, warm = 0;
    while ((opt = getopt(argc, argv, "m:u:r:p:c:l:P")) != -1) {
        switch (opt) {
        case 'm': msg = strtoul(optarg, NULL, 0); break;
        case 'u': mtu = (uint32_t)strtoul(optarg, NULL, 0); break;
        case 'r': rounds = atoi(optarg); break;
        case 'p': paths = (uint32_t)strtoul(optarg, NULL, 0); break;
        case 'c': cc = optarg; break;
        case 'l': lb = optarg; break;
        case 'P': placed = 1; break;
        default:
            fprintf(stderr, "usage: %s [-m BYTES] [-u MTU] [-r ROUNDS] [-p PATHS] [-c CC] [-l LB] [-P]\n",
                    argv[0]);
            return 2;
        }
    }
    cfg_make(&a, 0, mtu, paths, cc, lb);
    cfg_make(&b, 1, mtu, paths, cc, lb);
    if (!a.cc || !a.lb || pp_conn_init(&tx, &a) || pp_conn_init(&rx, &b)) {
        fprintf(stderr, "proto-tx: bad configuration\n");
        return 2;
    }
    payload = calloc(1, msg);
    region = malloc(msg);
    region_len = msg;
    for (int r = 0; r < rounds + rounds / 10; r++) {
        uint64_t t0, t1, n = 0;
        pp_msg_t *m;
        int k;
        if (r == rounds / 10) {   /* the first tenth warms up (windows open, caches fill) */
            warm = pkts;
            tx_ns = 0;
        }
        if (pp_send_ref(&tx, hdr, sizeof hdr, payload, msg, placed ? 5 : UINT64_MAX, 0,
                        (uint64_t)r + 1) != 0)
            break;
        do {
            t0 = clock_ns();
            for (k = 0; k < BATCH && pp_tx_next(&tx, now, &out[k]); k++)
                ;
            t1 = clock_ns();
            tx_ns += t1 - t0;
            pkts += (uint64_t)k;
            n += (uint64_t)k;
            for (int i = 0; i < k; i++) {   /* untimed: the wire */
                size_t len = out[i].hdr_len + out[i].len + out[i].len2;
                memcpy(pkt, out[i].hdr, out[i].hdr_len);
                memcpy(pkt + out[i].hdr_len, out[i].payload, out[i].len);
                if (out[i].len2)
                    memcpy(pkt + out[i].hdr_len + out[i].len, out[i].payload2, out[i].len2);
                digest = fnv(digest, out[i].hdr, out[i].hdr_len);
                digest = fnv(digest, &out[i].path, sizeof out[i].path);
                digest = fnv(digest, &len, sizeof len);
                pp_rx(&rx, now + 10000, pkt, len);
            }
            now += 20000;
            while (pp_ack_next(&rx, now, &out[0]))
                pp_rx(&tx, now + 10000, out[0].hdr, out[0].hdr_len);
            now += 10000;
            while ((m = pp_deliver(&rx)) != NULL)
                pp_msg_release(&rx, m);
            pp_poll(&tx, now);
        } while (k > 0 || !pp_idle(&tx));
        {
            pp_zc_t z[4];
            while (pp_zc_reap(&tx, z, 4) > 0)
                ;
        }
        if (n == 0 || tx.failed)
            break;
        now += 50000;
    }
    pkts -= warm;
    printf("%zu-byte %smessages, %u-byte datagrams, %u paths, %s/%s: %llu packets, "
           "%.1f ns/packet in pp_tx_next (digest %016llx)\n",
           msg, placed ? "placed " : "", mtu, paths, cc, lb, (unsigned long long)pkts,
           pkts ? (double)tx_ns / (double)pkts : 0.0, (unsigned long long)digest);
    pp_conn_fini(&tx);
    pp_conn_fini(&rx);
    free(payload);
    free(region);
    return 0;
}
