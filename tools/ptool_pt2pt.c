/*
 * ptool_pt2pt.c -- OSU-style point-to-point benchmarks over a backend table
 * (see ptool_pt2pt.h). The method follows the OSU micro-benchmarks so that
 * numbers can be read next to published OSU results:
 *
 *  latency  rank 0 sends `size` bytes to rank 1, which sends them back; the
 *           reported latency is the half round trip, averaged over the timed
 *           iterations (warm-up iterations run first and are not timed).
 *  bw       rank 0 posts a window of non-blocking sends to rank 1 (which posts
 *           as many receives, all into one buffer, as OSU does), completes
 *           them, then waits for a 4-byte ack; bandwidth = bytes moved in the
 *           timed windows / time, in MB/s (10^6 bytes per second).
 *
 * --check fills the send buffer with random bytes; after timing, a few
 * verification rounds send fresh random data that the receiver compares byte
 * for byte (bw rounds use one receive buffer per message, so a mix-up of
 * messages inside a window is caught too). Verification is never timed.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ptool_args.h"
#include "ptool_pt2pt.h"

/* OSU switches to fewer iterations above this size. */
#define PTOOL_LARGE_SIZE   8192
#define PTOOL_LAT_ITERS    10000
#define PTOOL_LAT_ITERS_L  1000
#define PTOOL_LAT_WARMUP   100
#define PTOOL_LAT_WARMUP_L 10
#define PTOOL_BW_ITERS     100
#define PTOOL_BW_ITERS_L   20
#define PTOOL_BW_WARMUP    10
#define PTOOL_BW_WARMUP_L  2
#define PTOOL_BW_WINDOW    64
#define PTOOL_LAT_MAX      ((size_t)4 << 20)
#define PTOOL_BW_MAX       ((size_t)16 << 20)
#define PTOOL_SIZE_LIMIT   ((size_t)1 << 30)
#define PTOOL_ACK_BYTES    4
#define PTOOL_CHECK_ROUNDS 3
/* bw verification gives each message of a window its own buffer, up to this much. */
#define PTOOL_CHECK_SPAN   ((size_t)64 << 20)

enum { TAG_DATA = 1, TAG_ACK = 2, TAG_SYNC = 3, TAG_RESULT = 4 };

#define PTOOL_CALL(be, expr, what)              \
    do {                                        \
        int ptool_rc_ = (expr);                 \
        if (ptool_rc_ != 0)                     \
            (be)->fail((what), ptool_rc_);      \
    } while (0)

/* ------------------------------------------------------------ option parsing */

void ptool_pt2pt_usage(FILE *out, const char *prog)
{
    fprintf(out,
        "Usage: %s [latency|bw|both] [options]\n"
        "OSU-style point-to-point benchmarks between rank 0 and rank 1 (other ranks idle).\n"
        "Run with at least 2 ranks, e.g. plaitrun -n 2 plait-bench pt2pt latency.\n"
        "\n"
        "  -m, --mode MODE     latency, bw or both (default: both)\n"
        "  -b, --min SIZE      smallest message size (default 1); sizes double up to --max\n"
        "  -e, --max SIZE      largest message size (default 4M for latency, 16M for bw)\n"
        "  -n, --iters N       timed iterations for every size (default: latency %d,\n"
        "                      %d above %d B; bw %d windows, %d above %d B)\n"
        "  -w, --warmup N      untimed iterations first (default: latency %d, %d above\n"
        "                      %d B; bw %d, %d above %d B)\n"
        "  -W, --window N      bw: messages in flight per window (default %d, max %d)\n"
        "  -c, --check         random data, verified by the receiver (adds a Check column;\n"
        "                      exit status 1 when any byte is wrong)\n"
        "  -j, --json FILE     also write the results as JSON to FILE\n"
        "  -h, --help          this text\n"
        "SIZE takes a K, M or G suffix (powers of 1024), e.g. 64K, 16M.\n",
        prog, PTOOL_LAT_ITERS, PTOOL_LAT_ITERS_L, PTOOL_LARGE_SIZE, PTOOL_BW_ITERS,
        PTOOL_BW_ITERS_L, PTOOL_LARGE_SIZE, PTOOL_LAT_WARMUP, PTOOL_LAT_WARMUP_L,
        PTOOL_LARGE_SIZE, PTOOL_BW_WARMUP, PTOOL_BW_WARMUP_L, PTOOL_LARGE_SIZE,
        PTOOL_BW_WINDOW, PTOOL_MAX_WINDOW);
}



static int ptool_parse_mode(const char *s, int *modes)
{
    if (strcmp(s, "latency") == 0 || strcmp(s, "lat") == 0)
        *modes = PTOOL_MODE_LATENCY;
    else if (strcmp(s, "bw") == 0 || strcmp(s, "bandwidth") == 0)
        *modes = PTOOL_MODE_BW;
    else if (strcmp(s, "both") == 0)
        *modes = PTOOL_MODE_BOTH;
    else
        return -1;
    return 0;
}

static int ptool_parse_error(FILE *err, const char *prog, const char *fmt, const char *arg)
{
    ptool_arg_error(err, prog, fmt, arg);
    return PTOOL_PARSE_ERROR;
}

/* One option letter with its argument; PTOOL_PARSE_* */
static int ptool_parse_opt(int c, const char *arg, ptool_pt2pt_opts_t *o, int *mode_set,
                           const char *prog, FILE *err)
{
    long v;

    switch (c) {
    case 'm':
        if (ptool_parse_mode(arg, &o->modes) != 0)
            return ptool_parse_error(err, prog, "unknown mode '%s' (latency, bw or both)", arg);
        *mode_set = 1;
        return PTOOL_PARSE_RUN;
    case 'b':
        if (ptool_parse_size(arg, PTOOL_SIZE_LIMIT, &o->min_size) != 0)
            return ptool_parse_error(err, prog, "invalid --min size '%s' (0 .. 1G, suffix K/M/G)", arg);
        return PTOOL_PARSE_RUN;
    case 'e':
        if (ptool_parse_size(arg, PTOOL_SIZE_LIMIT, &o->max_size) != 0 || o->max_size == 0)
            return ptool_parse_error(err, prog, "invalid --max size '%s' (1 .. 1G, suffix K/M/G)", arg);
        return PTOOL_PARSE_RUN;
    case 'n':
        if (ptool_parse_long(arg, 1, 100000000L, &v) != 0)
            return ptool_parse_error(err, prog, "invalid --iters '%s' (a number >= 1)", arg);
        o->iters = v;
        return PTOOL_PARSE_RUN;
    case 'w':
        if (ptool_parse_long(arg, 0, 100000000L, &v) != 0)
            return ptool_parse_error(err, prog, "invalid --warmup '%s' (a number >= 0)", arg);
        o->warmup = v;
        return PTOOL_PARSE_RUN;
    case 'W':
        if (ptool_parse_long(arg, 1, PTOOL_MAX_WINDOW, &v) != 0)
            return ptool_parse_error(err, prog, "invalid --window '%s' (1 .. 1024)", arg);
        o->window = (int)v;
        return PTOOL_PARSE_RUN;
    case 'c':
        o->check = 1;
        return PTOOL_PARSE_RUN;
    case 'j':
        o->json_path = arg;
        return PTOOL_PARSE_RUN;
    case 'h':
        return PTOOL_PARSE_HELP;
    default:
        return ptool_parse_error(err, prog, "%s", "internal error: unhandled option");
    }
}

int ptool_pt2pt_parse(int argc, char **argv, ptool_pt2pt_opts_t *o, const char *prog, FILE *err)
{
    static const struct option longopts[] = {
        {"mode", required_argument, NULL, 'm'},  {"min", required_argument, NULL, 'b'},
        {"max", required_argument, NULL, 'e'},   {"iters", required_argument, NULL, 'n'},
        {"warmup", required_argument, NULL, 'w'}, {"window", required_argument, NULL, 'W'},
        {"check", no_argument, NULL, 'c'},       {"json", required_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0}};
    int mode_set = 0, c, rc;

    memset(o, 0, sizeof(*o));
    o->modes = PTOOL_MODE_BOTH;
    o->min_size = 1;
    o->warmup = -1;
    o->window = PTOOL_BW_WINDOW;
    o->prog = prog;

    opterr = 0;     /* our own messages, printed on one rank only */
    optind = 1;
    while ((c = getopt_long(argc, argv, ":m:b:e:n:w:W:cj:h", longopts, NULL)) != -1) {
        if (c == '?')
            return ptool_parse_error(err, prog, "unknown option '%s'", argv[optind - 1]);
        if (c == ':')
            return ptool_parse_error(err, prog, "option '%s' needs a value", argv[optind - 1]);
        rc = ptool_parse_opt(c, optarg, o, &mode_set, prog, err);
        if (rc != PTOOL_PARSE_RUN)
            return rc;
    }
    if (optind < argc) {
        if (mode_set || optind + 1 < argc)
            return ptool_parse_error(err, prog, "unexpected argument '%s' (give one mode)",
                                     argv[mode_set ? optind : optind + 1]);
        if (ptool_parse_mode(argv[optind], &o->modes) != 0)
            return ptool_parse_error(err, prog, "unknown mode '%s' (latency, bw or both)",
                                     argv[optind]);
    }
    if (o->max_size != 0 && o->min_size > o->max_size)
        return ptool_parse_error(err, prog, "%s", "--min is larger than --max");
    return PTOOL_PARSE_RUN;
}

/* ------------------------------------------------------------- random data */

/* splitmix64: every (size, round, message) gets its own reproducible stream,
 * so the receiver regenerates what the sender sent without shipping it. */
static uint64_t ptool_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static uint64_t ptool_seed(size_t size, int round, int msg)
{
    return ptool_mix(((uint64_t)size << 24) ^ ((uint64_t)round << 12) ^ (uint64_t)msg);
}

static void ptool_fill(unsigned char *buf, size_t len, uint64_t seed)
{
    uint64_t state = seed, word = 0;

    for (size_t i = 0; i < len; i++) {
        if (i % 8 == 0)
            word = ptool_mix(state++);
        buf[i] = (unsigned char)(word >> (8 * (i % 8)));
    }
}

/* Number of bytes of buf that differ from the stream of seed. */
static uint64_t ptool_verify(const unsigned char *buf, size_t len, uint64_t seed)
{
    uint64_t state = seed, word = 0, wrong = 0;

    for (size_t i = 0; i < len; i++) {
        if (i % 8 == 0)
            word = ptool_mix(state++);
        wrong += buf[i] != (unsigned char)(word >> (8 * (i % 8)));
    }
    return wrong;
}

/* ----------------------------------------------------------------- helpers */

typedef struct {
    const ptool_pt2pt_opts_t    *o;
    const ptool_pt2pt_backend_t *be;
    unsigned char *sbuf, *rbuf;
    size_t         cap;          /* bytes in each of sbuf, rbuf */
    int            peer;
    FILE          *json;         /* rank 0 with --json only */
    int            json_first;
    uint64_t       wrong_total;
} ptool_ctx_t;

static long ptool_iters(const ptool_pt2pt_opts_t *o, int mode, size_t size)
{
    int large = size > PTOOL_LARGE_SIZE;

    if (o->iters > 0)
        return o->iters;
    if (mode == PTOOL_MODE_LATENCY)
        return large ? PTOOL_LAT_ITERS_L : PTOOL_LAT_ITERS;
    return large ? PTOOL_BW_ITERS_L : PTOOL_BW_ITERS;
}

static long ptool_warmup(const ptool_pt2pt_opts_t *o, int mode, size_t size)
{
    int large = size > PTOOL_LARGE_SIZE;

    if (o->warmup >= 0)
        return o->warmup;
    if (mode == PTOOL_MODE_LATENCY)
        return large ? PTOOL_LAT_WARMUP_L : PTOOL_LAT_WARMUP;
    return large ? PTOOL_BW_WARMUP_L : PTOOL_BW_WARMUP;
}

static size_t ptool_max_size(const ptool_pt2pt_opts_t *o, int mode)
{
    if (o->max_size != 0)
        return o->max_size;
    return mode == PTOOL_MODE_LATENCY ? PTOOL_LAT_MAX : PTOOL_BW_MAX;
}

/* 0, 1, 2, 4, ... : the size after s in the doubling sequence. */
static size_t ptool_next_size(size_t s)
{
    return s == 0 ? 1 : 2 * s;
}

/* Rank 0 and 1 meet before every size, so a slow previous size (or rank 1
 * still verifying) never leaks into the next measurement. */
static void ptool_sync(ptool_ctx_t *c)
{
    const ptool_pt2pt_backend_t *be = c->be;
    unsigned char b = 0;

    if (be->rank == 0) {
        PTOOL_CALL(be, be->send(&b, 1, c->peer, TAG_SYNC), "sync send");
        PTOOL_CALL(be, be->recv(&b, 1, c->peer, TAG_SYNC), "sync recv");
    } else {
        PTOOL_CALL(be, be->recv(&b, 1, c->peer, TAG_SYNC), "sync recv");
        PTOOL_CALL(be, be->send(&b, 1, c->peer, TAG_SYNC), "sync send");
    }
}

/* Rank 0's verdict (0 or 1) handed to rank 1, so both stop together. */
static unsigned char ptool_share_verdict(ptool_ctx_t *c, unsigned char v)
{
    const ptool_pt2pt_backend_t *be = c->be;
    if (be->rank == 0)
        PTOOL_CALL(be, be->send(&v, 1, c->peer, TAG_SYNC), "verdict send");
    else
        PTOOL_CALL(be, be->recv(&v, 1, c->peer, TAG_SYNC), "verdict recv");
    return v;
}

/* Both ranks learn the sum of wrong bytes seen by either, so both exit 1. */
static uint64_t ptool_gather_wrong(ptool_ctx_t *c, uint64_t mine)
{
    const ptool_pt2pt_backend_t *be = c->be;
    uint64_t theirs = 0;

    if (be->rank == 1) {
        PTOOL_CALL(be, be->send(&mine, sizeof(mine), c->peer, TAG_RESULT), "check result send");
        PTOOL_CALL(be, be->recv(&theirs, sizeof(theirs), c->peer, TAG_RESULT), "check result recv");
        return theirs;
    }
    PTOOL_CALL(be, be->recv(&theirs, sizeof(theirs), c->peer, TAG_RESULT), "check result recv");
    theirs += mine;
    PTOOL_CALL(be, be->send(&theirs, sizeof(theirs), c->peer, TAG_RESULT), "check result send");
    return theirs;
}

/* ----------------------------------------------------------------- latency */

static void ptool_pingpong(ptool_ctx_t *c, size_t size, unsigned char *rbuf)
{
    const ptool_pt2pt_backend_t *be = c->be;

    if (be->rank == 0) {
        PTOOL_CALL(be, be->send(c->sbuf, size, c->peer, TAG_DATA), "latency send");
        PTOOL_CALL(be, be->recv(rbuf, size, c->peer, TAG_DATA), "latency recv");
    } else {
        PTOOL_CALL(be, be->recv(rbuf, size, c->peer, TAG_DATA), "latency recv");
        PTOOL_CALL(be, be->send(rbuf, size, c->peer, TAG_DATA), "latency send");
    }
}

/* Half round trip in microseconds (meaningful on rank 0). */
static double ptool_latency_time(ptool_ctx_t *c, size_t size)
{
    long iters = ptool_iters(c->o, PTOOL_MODE_LATENCY, size);
    long warm = ptool_warmup(c->o, PTOOL_MODE_LATENCY, size);
    double t0 = 0.0;

    for (long i = 0; i < warm + iters; i++) {
        if (i == warm)
            t0 = c->be->wtime();
        ptool_pingpong(c, size, c->rbuf);
    }
    return (c->be->wtime() - t0) * 1e6 / (2.0 * (double)iters);
}

/* Rank 1 echoes what it received, so rank 0 checks the data after two hops
 * and rank 1 after one. */
static uint64_t ptool_latency_check(ptool_ctx_t *c, size_t size)
{
    uint64_t wrong = 0;

    for (int r = 0; r < PTOOL_CHECK_ROUNDS; r++) {
        uint64_t seed = ptool_seed(size, r, 0);

        if (c->be->rank == 0)
            ptool_fill(c->sbuf, size, seed);
        memset(c->rbuf, 0x5a, size);
        ptool_pingpong(c, size, c->rbuf);
        wrong += ptool_verify(c->rbuf, size, seed);
    }
    return ptool_gather_wrong(c, wrong);
}

/* ---------------------------------------------------------------- bandwidth */

/* One window: rank 0 sends n messages (message i from sbuf + i*stride), rank 1
 * receives them (into rbuf + i*stride) and acks. stride 0 = one buffer, OSU's way. */
static void ptool_window(ptool_ctx_t *c, size_t size, int n, size_t stride)
{
    const ptool_pt2pt_backend_t *be = c->be;
    unsigned char ack[PTOOL_ACK_BYTES] = {0};

    if (be->rank == 0) {
        for (int i = 0; i < n; i++)
            PTOOL_CALL(be, be->isend(c->sbuf + (size_t)i * stride, size, c->peer, TAG_DATA, i),
                       "bw isend");
        PTOOL_CALL(be, be->waitall(n), "bw waitall (sends)");
        PTOOL_CALL(be, be->recv(ack, sizeof(ack), c->peer, TAG_ACK), "bw ack recv");
    } else {
        for (int i = 0; i < n; i++)
            PTOOL_CALL(be, be->irecv(c->rbuf + (size_t)i * stride, size, c->peer, TAG_DATA, i),
                       "bw irecv");
        PTOOL_CALL(be, be->waitall(n), "bw waitall (receives)");
        PTOOL_CALL(be, be->send(ack, sizeof(ack), c->peer, TAG_ACK), "bw ack send");
    }
}

/* MB/s (10^6 bytes per second), meaningful on rank 0. */
static double ptool_bw_time(ptool_ctx_t *c, size_t size)
{
    long iters = ptool_iters(c->o, PTOOL_MODE_BW, size);
    long warm = ptool_warmup(c->o, PTOOL_MODE_BW, size);
    double t0 = 0.0, t;

    for (long i = 0; i < warm + iters; i++) {
        if (i == warm)
            t0 = c->be->wtime();
        ptool_window(c, size, c->o->window, 0);
    }
    t = c->be->wtime() - t0;
    return (double)size * (double)c->o->window * (double)iters / 1e6 / t;
}

/* Each message of a window carries its own random stream and lands in its own
 * buffer (as many as fit in the buffers), so lost, duplicated or reordered
 * messages show up as wrong bytes. */
static uint64_t ptool_bw_check(ptool_ctx_t *c, size_t size)
{
    size_t fit = size == 0 ? (size_t)c->o->window : c->cap / size;
    int n = fit < (size_t)c->o->window ? (int)fit : c->o->window;
    uint64_t wrong = 0;

    for (int r = 0; r < PTOOL_CHECK_ROUNDS; r++) {
        for (int i = 0; i < n; i++) {
            uint64_t seed = ptool_seed(size, r, i + 1);

            if (c->be->rank == 0)
                ptool_fill(c->sbuf + (size_t)i * size, size, seed);
            else
                memset(c->rbuf + (size_t)i * size, 0x5a, size);
        }
        ptool_window(c, size, n, size);
        for (int i = 0; i < n && c->be->rank == 1; i++)
            wrong += ptool_verify(c->rbuf + (size_t)i * size, size, ptool_seed(size, r, i + 1));
    }
    return ptool_gather_wrong(c, wrong);
}

/* ------------------------------------------------------------------ output */

static void ptool_header(ptool_ctx_t *c, int mode)
{
    const ptool_pt2pt_opts_t *o = c->o;
    const ptool_pt2pt_backend_t *be = c->be;
    char date[64] = "?", host[256] = "?";
    time_t now = time(NULL);
    int lat = mode == PTOOL_MODE_LATENCY;

    strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S%z", localtime(&now));
    if (gethostname(host, sizeof(host)) != 0)
        strcpy(host, "?");
    host[sizeof(host) - 1] = '\0';
    printf("# %s %s: %s\n", o->prog, lat ? "latency" : "bw",
           lat ? "half round trip of a ping-pong between rank 0 and rank 1"
               : "window of non-blocking sends from rank 0 to rank 1, then a 4-byte ack");
    printf("# library: %s | version: %s | ranks: %d | host: %s | date: %s\n", be->name,
           be->version, be->size, host, date);
    if (o->iters > 0)
        printf("# iterations: %ld", o->iters);
    else
        printf("# iterations: %ld (%ld above %d B)", ptool_iters(o, mode, 1),
               ptool_iters(o, mode, PTOOL_LARGE_SIZE + 1), PTOOL_LARGE_SIZE);
    if (o->warmup >= 0)
        printf(" | warmup: %ld", o->warmup);
    else
        printf(" | warmup: %ld (%ld above %d B)", ptool_warmup(o, mode, 1),
               ptool_warmup(o, mode, PTOOL_LARGE_SIZE + 1), PTOOL_LARGE_SIZE);
    if (!lat)
        printf(" | window: %d", o->window);
    printf(" | check: %s\n", o->check ? "on" : "off");
    printf("%-10s%18s%s\n", "# Size", lat ? "Latency (us)" : "Bandwidth (MB/s)",
           o->check ? "     Check" : "");
    fflush(stdout);
}

/* A JSON string (library version texts come from the library itself). */
static void ptool_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;

        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void ptool_json_open(ptool_ctx_t *c)
{
    const ptool_pt2pt_backend_t *be = c->be;
    char date[64] = "?";
    time_t now = time(NULL);

    c->json = fopen(c->o->json_path, "w");
    if (!c->json) {
        fprintf(stderr, "%s: cannot write --json file '%s': %s\n", c->o->prog,
                c->o->json_path, strerror(errno));
        return;
    }
    strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S%z", localtime(&now));
    fprintf(c->json, "{\n  \"benchmark\": \"pt2pt\",\n  \"library\": ");
    ptool_json_str(c->json, be->name);
    fprintf(c->json, ",\n  \"version\": ");
    ptool_json_str(c->json, be->version);
    fprintf(c->json, ",\n  \"ranks\": %d,\n  \"date\": \"%s\",\n  \"check\": %s,\n"
            "  \"results\": [", be->size, date, c->o->check ? "true" : "false");
    c->json_first = 1;
}

static void ptool_row(ptool_ctx_t *c, int mode, size_t size, double value, uint64_t wrong)
{
    const ptool_pt2pt_opts_t *o = c->o;
    int lat = mode == PTOOL_MODE_LATENCY;

    printf("%-10zu%18.2f%s\n", size, value,
           !o->check ? "" : wrong == 0 ? "      pass" : "      FAIL");
    fflush(stdout);
    if (!c->json)
        return;
    fprintf(c->json, "%s\n    {\"test\": \"%s\", \"size\": %zu, \"iterations\": %ld, "
            "\"warmup\": %ld, ", c->json_first ? "" : ",", lat ? "latency" : "bw", size,
            ptool_iters(o, mode, size), ptool_warmup(o, mode, size));
    if (lat)
        fprintf(c->json, "\"latency_us\": %.3f", value);
    else
        fprintf(c->json, "\"window\": %d, \"bandwidth_MBps\": %.3f", o->window, value);
    if (o->check)
        fprintf(c->json, ", \"wrong_bytes\": %llu", (unsigned long long)wrong);
    fputc('}', c->json);
    c->json_first = 0;
}

/* 0, or -1 when the file could not be completed. */
static int ptool_json_close(ptool_ctx_t *c)
{
    int bad;

    if (!c->json)
        return c->o->json_path && c->be->rank == 0 ? -1 : 0;
    fprintf(c->json, "\n  ]\n}\n");
    bad = ferror(c->json);
    if (fclose(c->json) != 0 || bad) {
        fprintf(stderr, "%s: error writing '%s'\n", c->o->prog, c->o->json_path);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ driver */

static void ptool_run_mode(ptool_ctx_t *c, int mode)
{
    size_t max = ptool_max_size(c->o, mode);

    if (c->be->rank == 0)
        ptool_header(c, mode);
    for (size_t s = c->o->min_size; s <= max; s = ptool_next_size(s)) {
        double value;
        uint64_t wrong = 0;

        ptool_sync(c);
        value = mode == PTOOL_MODE_LATENCY ? ptool_latency_time(c, s) : ptool_bw_time(c, s);
        if (c->o->check)
            wrong = mode == PTOOL_MODE_LATENCY ? ptool_latency_check(c, s) : ptool_bw_check(c, s);
        c->wrong_total += wrong;
        if (c->be->rank == 0)
            ptool_row(c, mode, s, value, wrong);
    }
    if (c->be->rank == 0 && mode == PTOOL_MODE_LATENCY && (c->o->modes & PTOOL_MODE_BW))
        printf("\n");
}

/* Page-aligned buffers, touched once so first-touch page faults stay out of
 * the timed loops. */
static int ptool_alloc(ptool_ctx_t *c)
{
    size_t max = 0, cap;

    if (c->o->modes & PTOOL_MODE_LATENCY)
        max = ptool_max_size(c->o, PTOOL_MODE_LATENCY);
    if ((c->o->modes & PTOOL_MODE_BW) && ptool_max_size(c->o, PTOOL_MODE_BW) > max)
        max = ptool_max_size(c->o, PTOOL_MODE_BW);
    cap = max;
    if (c->o->check && (c->o->modes & PTOOL_MODE_BW)) {
        size_t want = max * (size_t)c->o->window;
        cap = want < PTOOL_CHECK_SPAN ? want : PTOOL_CHECK_SPAN;
        if (cap < max)
            cap = max;
    }
    if (cap == 0)
        cap = 1;
    if (posix_memalign((void **)&c->sbuf, 4096, cap) != 0)
        return -1;
    if (posix_memalign((void **)&c->rbuf, 4096, cap) != 0) {
        free(c->sbuf);
        return -1;
    }
    c->cap = cap;
    /* OSU sends a constant byte; --check switches to random data per size */
    memset(c->sbuf, 'a', cap);
    memset(c->rbuf, 'b', cap);
    return 0;
}

int ptool_pt2pt_run(const ptool_pt2pt_opts_t *o, const ptool_pt2pt_backend_t *be)
{
    ptool_ctx_t c;
    int rc = 0;

    if (be->rank > 1)
        return 0;
    memset(&c, 0, sizeof(c));
    c.o = o;
    c.be = be;
    c.peer = 1 - be->rank;
    if (ptool_alloc(&c) != 0) {
        char why[128];
        snprintf(why, sizeof why, "cannot allocate buffers of %zu bytes: out of memory", c.cap);
        be->fail(why, 0);
        return 1;
    }
    if (o->check && be->rank == 0)
        ptool_fill(c.sbuf, c.cap, ptool_mix(c.cap));
    if (be->rank == 0 && o->json_path)
        ptool_json_open(&c);
    if (o->json_path && ptool_share_verdict(&c, be->rank == 0 && !c.json)) {
        free(c.sbuf);   /* an unwritable --json file: refused before measuring, as coll does */
        free(c.rbuf);
        return 2;
    }
    if (o->modes & PTOOL_MODE_LATENCY)
        ptool_run_mode(&c, PTOOL_MODE_LATENCY);
    if (o->modes & PTOOL_MODE_BW)
        ptool_run_mode(&c, PTOOL_MODE_BW);
    if (ptool_json_close(&c) != 0)
        rc = 1;
    if (c.wrong_total != 0) {
        if (be->rank == 0)
            fprintf(stderr, "%s: --check found %llu wrong bytes\n", o->prog,
                    (unsigned long long)c.wrong_total);
        rc = 1;
    }
    free(c.sbuf);
    free(c.rbuf);
    return rc;
}
