/*
 * udp-pairs -- concurrent point-to-point streams: with N ranks, rank r < N/2
 * streams to rank r + N/2 while every other pair does the same, so with
 * `plaitrun --host a:2,b:2` two connections A -> B share the network at once
 * (issue 4's flow-collision case). plait-bench pt2pt only drives ranks 0 -> 1.
 *
 * Two methods (-m):
 *   stream (default): a sliding window. The sender keeps W non-blocking sends
 *     of SIZE bytes in flight, the receiver W receives posted; each completes
 *     oldest first and its slot is posted again at once, so a pair's pipe
 *     never empties while it streams. After SECONDS by its own clock the
 *     sender stops (the end is explained above stream_sender); the rate
 *     counts the messages the receiver completed by SECONDS on its clock.
 *   window: OSU bandwidth style, as plait-bench pt2pt bw: the sender posts a
 *     window of W sends, the receiver W receives, and after each window the
 *     receiver answers go-on or stop. Each pair's pipe drains at every window
 *     end for a round trip (the go message, then the next messages' rendezvous
 *     through the queue the other pairs keep), which the other pairs fill:
 *     shares measured this way carry that stop-and-wait.
 * Either way the end comes from a clock started at a common barrier, so all
 * pairs stream over the same interval instead of a fast pair finishing
 * early and leaving the links to the others. Every received byte is checked
 * against the sender's pattern (messages posted in order reuse slot m % W on
 * both sides, so message m lands in the slot whose pattern it carries).
 *
 * Output (world rank 0): one line per pair "pair I: R -> R' GBIT Gbit/s BYTES
 * bytes pass|FAIL", then "total", then "cpu": user+sys seconds of all ranks
 * (every thread) over the streaming interval and ns per delivered byte.
 *
 * Usage: udp-pairs [-m stream|window] [-s SIZE_MB] [-W WINDOW] [-t SECONDS] [-q]
 *   -q: no checking ("unchecked" in the pair lines): CPU per byte of the transfer alone
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "plait.h"

#define TAG_DATA 1
#define TAG_GO   2

typedef struct {
    size_t size;
    int    window;
    double seconds;
    int    check;       /* 0 (-q): no clearing and checking, for CPU per byte */
    int    stream;      /* 1: sliding window (-m stream), 0: window then go (-m window) */
} pairs_opts_t;

typedef struct {        /* what each rank reports to rank 0 */
    double gbit, bytes, cpu_s, bad;
} pairs_result_t;

static void die(const char *what, int rc)
{
    fprintf(stderr, "udp-pairs: %s: %s: %s\n", what, plait_strerror(rc), plait_last_error());
    exit(1);
}

/* Byte k of message i from sender `seed`: the 256-byte block number is hashed
 * in, so a chunk placed at the wrong offset (or in the wrong message) shows. */
static unsigned char pattern(size_t k, int i, int seed)
{
    uint32_t blk = (uint32_t)(k >> 8) * 2654435761u;
    return (unsigned char)(k * 7 + (blk >> 24) + (size_t)i * 131 + (size_t)seed * 17);
}

static void fill(unsigned char *b, size_t n, int i, int seed)
{
    for (size_t k = 0; k < n; k++)
        b[k] = pattern(k, i, seed);
}

static size_t count_bad(const unsigned char *b, size_t n, int i, int seed)
{
    size_t bad = 0;
    for (size_t k = 0; k < n; k++)
        bad += b[k] != pattern(k, i, seed);
    return bad;
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);     /* every thread of the process */
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/* The pattern's seed is the sender's rank. */
static void sender(const pairs_opts_t *o, unsigned char **buf, int peer, int me, plait_comm_t w)
{
    plait_request_t *req = calloc((size_t)o->window, sizeof *req);
    int go = 1, rc;
    for (int i = 0; i < o->window; i++)
        fill(buf[i], o->size, i, me);
    while (go) {
        for (int i = 0; i < o->window; i++)
            if ((rc = plait_isend(buf[i], o->size, PLAIT_BYTE, peer, TAG_DATA, w, &req[i])))
                die("isend", rc);
        if ((rc = plait_waitall(o->window, req, NULL)))
            die("waitall (send)", rc);
        if ((rc = plait_recv(&go, 1, PLAIT_INT32, peer, TAG_GO, w, NULL)))
            die("recv (go)", rc);
    }
    free(req);
}

/* Receives windows until o->seconds passed; returns bytes, counts bad ones. */
static double receiver(const pairs_opts_t *o, unsigned char **buf, int peer, plait_comm_t w,
                       double t0, double *bad)
{
    plait_request_t *req = calloc((size_t)o->window, sizeof *req);
    double bytes = 0;
    int go = 1, rc;
    while (go) {
        for (int i = 0; i < o->window; i++) {
            if (o->check)       /* a chunk never written must not pass as old data */
                memset(buf[i], 0, o->size);
            if ((rc = plait_irecv(buf[i], o->size, PLAIT_BYTE, peer, TAG_DATA, w, &req[i])))
                die("irecv", rc);
        }
        if ((rc = plait_waitall(o->window, req, NULL)))
            die("waitall (recv)", rc);
        bytes += (double)o->size * o->window;
        go = plait_wtime() - t0 < o->seconds;
        if ((rc = plait_send(&go, 1, PLAIT_INT32, peer, TAG_GO, w)))
            die("send (go)", rc);
        for (int i = 0; i < o->window && o->check; i++)
            *bad += (double)count_bad(buf[i], o->size, i, peer);
    }
    free(req);
    return bytes;
}

/*
 * Sliding window (-m stream). Message m uses slot m % W on both sides and each
 * side completes its oldest request first, so the k-th send matches the k-th
 * receive and lands in the slot holding its pattern.
 *
 * The end, with blocking waits only (the API has no cancel, and a poll loop
 * would spin): at SECONDS by its own clock the sender stops posting data and
 * sends W empty messages. The receiver keeps up to W receives posted until it
 * completes the first empty one, at message P; then it posts up to P + W in
 * all, which is every message the sender sends, and each side has a partner
 * for every request it waits on. The rate counts the data messages completed
 * by SECONDS on the receiver's clock, over the time of the last of them.
 */
typedef struct {
    plait_request_t *req;
    long long posted, done;         /* messages posted / completed (oldest first) */
} pairs_ring_t;

static void ring_post(const pairs_opts_t *o, pairs_ring_t *g, unsigned char **buf, int peer,
                      int send, plait_comm_t w)
{
    int i = (int)(g->posted % o->window), rc;
    if (send)
        rc = plait_isend(buf[i], o->size, PLAIT_BYTE, peer, TAG_DATA, w, &g->req[i]);
    else {
        if (o->check)       /* a chunk never written must not pass as old data */
            memset(buf[i], 0, o->size);
        rc = plait_irecv(buf[i], o->size, PLAIT_BYTE, peer, TAG_DATA, w, &g->req[i]);
    }
    if (rc)
        die(send ? "isend" : "irecv", rc);
    g->posted++;
}

/* Waits for the oldest outstanding request; returns its slot. */
static int ring_wait(pairs_ring_t *g, int window, plait_status_t *st)
{
    int i = (int)(g->done % window), rc;
    if ((rc = plait_wait(&g->req[i], st)))
        die("wait (data)", rc);
    g->done++;
    return i;
}

static void stream_sender(const pairs_opts_t *o, unsigned char **buf, int peer, int me,
                          plait_comm_t w, double t0)
{
    pairs_ring_t g = {calloc((size_t)o->window, sizeof *g.req), 0, 0};
    plait_request_t *ends = calloc((size_t)o->window, sizeof *ends);
    int rc;
    for (int i = 0; i < o->window; i++)
        fill(buf[i], o->size, i, me);
    for (int i = 0; i < o->window; i++)
        ring_post(o, &g, buf, peer, 1, w);
    while (plait_wtime() - t0 < o->seconds) {
        ring_wait(&g, o->window, NULL);
        ring_post(o, &g, buf, peer, 1, w);
    }
    for (int i = 0; i < o->window; i++)
        if ((rc = plait_isend(NULL, 0, PLAIT_BYTE, peer, TAG_DATA, w, &ends[i])))
            die("isend (end)", rc);
    while (g.done < g.posted)
        ring_wait(&g, o->window, NULL);
    if ((rc = plait_waitall(o->window, ends, NULL)))
        die("waitall (end)", rc);
    free(ends);
    free(g.req);
}

static double stream_receiver(const pairs_opts_t *o, unsigned char **buf, int peer,
                              plait_comm_t w, double t0, double *bad, double *elapsed)
{
    pairs_ring_t g = {calloc((size_t)o->window, sizeof *g.req), 0, 0};
    long long end = -1, counted = 0;    /* end: index of the first empty message */
    plait_status_t st;
    double now;
    for (int k = 0; k < o->window; k++)
        ring_post(o, &g, buf, peer, 0, w);
    while (g.done < g.posted) {
        int i = ring_wait(&g, o->window, &st);
        if (st.bytes == 0 && end < 0)
            end = g.done - 1;
        if (st.bytes != 0) {
            if (o->check)
                *bad += (double)count_bad(buf[i], o->size, i, peer);
            if ((now = plait_wtime() - t0) <= o->seconds || counted == 0) {
                counted++;
                *elapsed = now;
            }
        }
        if (end < 0 || g.posted < end + o->window)
            ring_post(o, &g, buf, peer, 0, w);
    }
    free(g.req);
    return (double)counted * (double)o->size;
}

static void report(const pairs_result_t *all, int n, int check)
{
    double tot = 0, bytes = 0, cpu = 0;
    for (int r = n / 2; r < n; r++) {
        printf("pair %d: %d -> %d %.3f Gbit/s %.0f bytes %s\n", r - n / 2, r - n / 2, r,
               all[r].gbit, all[r].bytes, !check ? "unchecked" : all[r].bad == 0 ? "pass" : "FAIL");
        tot += all[r].gbit;
        bytes += all[r].bytes;
    }
    for (int r = 0; r < n; r++)
        cpu += all[r].cpu_s;
    printf("total: %.3f Gbit/s\n", tot);
    printf("cpu: %.3f s user+sys, %.3f ns/B\n", cpu, bytes > 0 ? cpu * 1e9 / bytes : 0);
}

static void parse(int argc, char **argv, pairs_opts_t *o)
{
    int c;
    o->size = (size_t)4 << 20;
    o->window = 8;
    o->seconds = 5;
    o->stream = 1;
    o->check = 1;
    while ((c = getopt(argc, argv, "m:s:W:t:q")) != -1) {
        switch (c) {
        case 's': o->size = (size_t)atol(optarg) << 20; break;
        case 'W': o->window = atoi(optarg); break;
        case 't': o->seconds = atof(optarg); break;
        case 'q': o->check = 0; break;
        case 'm':
            if (strcmp(optarg, "stream") && strcmp(optarg, "window")) {
                fprintf(stderr, "udp-pairs: -m takes stream or window, not '%s'\n", optarg);
                exit(2);
            }
            o->stream = !strcmp(optarg, "stream");
            break;
        default:
            fprintf(stderr, "usage: udp-pairs [-m stream|window] [-s SIZE_MB] [-W WINDOW] [-t SECONDS] [-q]\n");
            exit(2);
        }
    }
    if (o->size == 0 || o->window < 1 || o->seconds <= 0) {
        fprintf(stderr, "udp-pairs: size, window and seconds must be positive\n");
        exit(2);
    }
}

int main(int argc, char **argv)
{
    pairs_opts_t o;
    pairs_result_t me = {0}, *all = NULL;
    plait_comm_t w;
    unsigned char **buf;
    int rank, n, rc;
    double t0, c0;
    parse(argc, argv, &o);
    if ((rc = plait_init()))
        die("init", rc);
    w = plait_comm_world();
    plait_comm_rank(w, &rank);
    plait_comm_size(w, &n);
    if (n < 2 || n % 2) {
        if (rank == 0)
            fprintf(stderr, "udp-pairs: needs an even number of ranks (>= 2)\n");
        plait_finalize();
        return 2;
    }
    buf = calloc((size_t)o.window, sizeof *buf);
    for (int i = 0; i < o.window; i++)
        if (!(buf[i] = malloc(o.size)))
            return 1;
    plait_barrier(w);
    t0 = plait_wtime();
    c0 = cpu_seconds();
    if (rank < n / 2) {
        if (o.stream)
            stream_sender(&o, buf, rank + n / 2, rank, w, t0);
        else
            sender(&o, buf, rank + n / 2, rank, w);
    } else if (o.stream) {
        double secs = o.seconds;
        me.bytes = stream_receiver(&o, buf, rank - n / 2, w, t0, &me.bad, &secs);
        me.gbit = me.bytes * 8 / secs / 1e9;
    } else {
        me.bytes = receiver(&o, buf, rank - n / 2, w, t0, &me.bad);
        me.gbit = me.bytes * 8 / (plait_wtime() - t0) / 1e9;
    }
    me.cpu_s = cpu_seconds() - c0;
    if (rank == 0)
        all = calloc((size_t)n, sizeof *all);
    if ((rc = plait_gather(&me, all, 4, PLAIT_FLOAT64, 0, w)))
        die("gather", rc);
    if (rank == 0)
        report(all, n, o.check);
    for (int i = 0; i < o.window; i++)
        free(buf[i]);
    free(buf);
    free(all);
    plait_finalize();
    return 0;
}
