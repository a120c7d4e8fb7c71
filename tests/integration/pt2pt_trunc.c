/*
 * pt2pt_trunc -- a message longer than the posted receive: the receive fails
 * with PLAIT_ERR_TRUNCATE, status.bytes is the buffer size, the buffer holds
 * the message's first bytes and nothing past it is written (guard checked);
 * the send succeeds and the pair keeps working (a full-size follow-up message
 * on the same tag must arrive intact). Small, threshold-sized and large
 * messages; blocking recv, irecv+wait, irecv+test, waitall with one truncated
 * request among good ones; ring neighbours (self at 1 rank) and self; and a
 * truncation completed while another thread drives progress.
 */
#include <pthread.h>

#include "common.h"

static int rank, size;

typedef struct { size_t len, cap; } tcase_t;

static const tcase_t cases[] = {
    { 10, 5 }, { 100, 0 }, { 1, 0 }, { 4097, 4096 }, { 8193, 8191 }, { 65536, 1000 },
    { 65537, 65536 }, { 200000, 131071 }, { 1 << 20, 65539 }, { 3 << 20, 7 }, { 5 << 20, 1 << 20 },
    { 1 << 20, 0 }, { 100000, 65535 },
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

enum { VIA_RECV, VIA_WAIT, VIA_TEST, NVIA };
static const char *via_name[NVIA] = { "recv", "irecv+wait", "irecv+test" };

/* Receives into cap bytes with the chosen call; returns the result. */
static int recv_via(int via, void *buf, size_t cap, int src, int tag, plait_status_t *st)
{
    plait_request_t req = NULL;
    int rc, done = 0;
    if (via == VIA_RECV) return plait_recv(buf, cap, PLAIT_BYTE, src, tag, plait_comm_world(), st);
    CHECK_RC(plait_irecv(buf, cap, PLAIT_BYTE, src, tag, plait_comm_world(), &req));
    if (via == VIA_WAIT) {
        rc = plait_wait(&req, st);
    } else {
        do rc = plait_test(&req, &done, st); while (!done && rc == PLAIT_OK);
        CHECK(done, "plait_test failed (%d) before completion", rc);
    }
    CHECK(req == NULL, "request not NULL after completion (%s)", via_name[via]);
    return rc;
}

/*
 * One case: peer sends len bytes (then a full follow-up), we receive cap bytes.
 * wildcard 1: receive with ANY_TAG; 2: ANY_SOURCE and ANY_TAG (only where no
 * other sender can have a message queued for us).
 */
static void one_case(int c, int via, int dst, int src, int wildcard)
{
    const tcase_t *tc = &cases[c];
    int tag = 100 + c * NVIA + via;
    uint64_t skey = t_key(1, (uint64_t)rank, (uint64_t)c, (uint64_t)via);   /* what we send */
    uint64_t rkey = t_key(1, (uint64_t)src, (uint64_t)c, (uint64_t)via);    /* what we get */
    unsigned char *sbuf = t_malloc(tc->len), *rbuf = t_malloc(tc->len + T_GUARD);
    plait_request_t sreq[2];
    plait_status_t st = { -5, -5, 12345 };
    t_fill(sbuf, tc->len, skey);
    CHECK_RC(plait_isend(sbuf, tc->len, PLAIT_BYTE, dst, tag, plait_comm_world(), &sreq[0]));
    CHECK_RC(plait_isend(sbuf, tc->len, PLAIT_BYTE, dst, tag, plait_comm_world(), &sreq[1]));

    t_poison(rbuf, tc->len + T_GUARD);
    CHECK_RC_IS(recv_via(via, rbuf, tc->cap, wildcard == 2 ? PLAIT_ANY_SOURCE : src,
                         wildcard ? PLAIT_ANY_TAG : tag, &st), PLAIT_ERR_TRUNCATE);
    CHECK(st.source == src && st.tag == tag && st.bytes == tc->cap,
          "%zu-byte message into %zu bytes via %s: status {source %d, tag %d, bytes %zu}, "
          "expected {%d, %d, %zu}", tc->len, tc->cap, via_name[via], st.source, st.tag, st.bytes,
          src, tag, tc->cap);
    CHECK_RECV(rbuf, tc->cap, tc->cap, rkey, "%zu-byte message truncated to %zu via %s",
               tc->len, tc->cap, via_name[via]);
    {
        char want[32];
        snprintf(want, sizeof want, "(tag %d)", tag);
        CHECK(strstr(plait_last_error(), want) != NULL, "%zu-byte message truncated via %s: "
              "plait_last_error() \"%s\" does not name %s", tc->len, via_name[via],
              plait_last_error(), want);
    }

    /* The follow-up (same tag) must arrive whole: the truncated message is gone. */
    t_poison(rbuf, tc->len + T_GUARD);
    CHECK_RC(recv_via(via, rbuf, tc->len, src, tag, &st));
    CHECK(st.source == src && st.tag == tag && st.bytes == tc->len,
          "follow-up after truncation: status {%d, %d, %zu}, expected {%d, %d, %zu}",
          st.source, st.tag, st.bytes, src, tag, tc->len);
    CHECK_RECV(rbuf, tc->len, tc->len, rkey, "follow-up %zu-byte message after truncation via %s",
               tc->len, via_name[via]);
    CHECK_RC(plait_waitall(2, sreq, NULL));
    free(sbuf);
    free(rbuf);
}

/* waitall over {good, truncated, good}: returns TRUNCATE, completes all three. */
static void waitall_case(int dst, int src)
{
    size_t len[3] = { 3000, 70000, 17 }, cap[3] = { 3000, 65536, 100 };
    unsigned char *sbuf[3], *rbuf[3];
    plait_request_t sreq[3], rreq[3];
    plait_status_t st[3];
    t_case = "waitall with one truncated request";
    for (int i = 0; i < 3; i++) {
        sbuf[i] = t_malloc(len[i]);
        rbuf[i] = t_malloc(cap[i] + T_GUARD);
        t_fill(sbuf[i], len[i], t_key(2, (uint64_t)rank, (uint64_t)i, 0));
        t_poison(rbuf[i], cap[i] + T_GUARD);
        CHECK_RC(plait_irecv(rbuf[i], cap[i], PLAIT_BYTE, src, 50 + i, plait_comm_world(), &rreq[i]));
    }
    for (int i = 0; i < 3; i++)
        CHECK_RC(plait_isend(sbuf[i], len[i], PLAIT_BYTE, dst, 50 + i, plait_comm_world(), &sreq[i]));
    CHECK_RC_IS(plait_waitall(3, rreq, st), PLAIT_ERR_TRUNCATE);
    for (int i = 0; i < 3; i++) {
        size_t want = len[i] < cap[i] ? len[i] : cap[i];
        CHECK(rreq[i] == NULL, "waitall left request %d non-NULL after a failure", i);
        CHECK(st[i].source == src && st[i].tag == 50 + i && st[i].bytes == want,
              "request %d: status {%d, %d, %zu}, expected {%d, %d, %zu}", i, st[i].source,
              st[i].tag, st[i].bytes, src, 50 + i, want);
        CHECK_RECV(rbuf[i], want, cap[i], t_key(2, (uint64_t)src, (uint64_t)i, 0),
                   "waitall request %d (%zu bytes into %zu)", i, len[i], cap[i]);
    }
    CHECK_RC(plait_waitall(3, sreq, NULL));
    for (int i = 0; i < 3; i++) { free(sbuf[i]); free(rbuf[i]); }
}

/* Element counts: 5 INT32 into room for 3 -> 12 bytes. */
static void dtype_case(int dst, int src)
{
    int32_t out[5] = { 1, 2, 3, 4, 5 }, in[3 + T_GUARD / 4];
    plait_status_t st;
    plait_request_t req;
    t_case = "truncation counted in elements";
    memset(in, T_POISON, sizeof in);
    CHECK_RC(plait_isend(out, 5, PLAIT_INT32, dst, 60, plait_comm_world(), &req));
    CHECK_RC_IS(plait_recv(in, 3, PLAIT_INT32, src, 60, plait_comm_world(), &st), PLAIT_ERR_TRUNCATE);
    CHECK(st.bytes == 12 && in[0] == 1 && in[1] == 2 && in[2] == 3,
          "got bytes %zu, values %d %d %d", st.bytes, in[0], in[1], in[2]);
    CHECK(t_check_poison(in, 12, sizeof in) == T_NO_ERROR, "bytes written past 3 INT32");
    CHECK_RC(plait_wait(&req, NULL));
}

/* Ranks 0 and 1 ping-pong on world until both saw busy_stop: another thread
 * of the process in plait, driving progress. */
static volatile int busy_stop;
static void *busy_pingpong(void *arg)
{
    char out[64] = {0}, in[64] = {0};
    int peer = rank ^ 1;
    (void)arg;
    for (;;) {
        plait_request_t req;
        CHECK_RC(plait_irecv(in, sizeof in, PLAIT_BYTE, peer, 90, plait_comm_world(), &req));
        out[0] = (char)busy_stop;
        CHECK_RC(plait_send(out, sizeof out, PLAIT_BYTE, peer, 90, plait_comm_world()));
        CHECK_RC(plait_wait(&req, NULL));
        if (in[0] && out[0])
            return NULL;
    }
}

/* A truncated receive completed while another thread drives progress: the
 * failure's detail must be the waiting thread's plait_last_error() (it was
 * recorded in whichever thread completed the request, and the waiter read
 * an empty message in up to half of the receives). Rank 0 posts, tells rank
 * 1, which sends 96 bytes into the posted 18. */
static void threaded_case(void)
{
    enum { N = 200 };
    plait_comm_t d;
    pthread_t th;
    char big[96], small[18], none = 0;
    t_case = "truncation while another thread drives progress (plait_last_error)";
    CHECK_RC(plait_comm_dup(plait_comm_world(), &d));
    if (size >= 2 && rank < 2) {
        CHECK(pthread_create(&th, NULL, busy_pingpong, NULL) == 0, "pthread_create");
        memset(big, 7, sizeof big);
        for (int i = 0; i < N; i++) {
            if (rank == 1) {
                CHECK_RC(plait_recv(&none, 0, PLAIT_BYTE, 0, 92, d, NULL));
                CHECK_RC(plait_send(big, sizeof big, PLAIT_BYTE, 0, 91, d));
            } else {
                plait_request_t req;
                const char *why;
                CHECK_RC(plait_irecv(small, sizeof small, PLAIT_BYTE, 1, 91, d, &req));
                CHECK_RC(plait_send(&none, 0, PLAIT_BYTE, 1, 92, d));
                CHECK_RC_IS(plait_wait(&req, NULL), PLAIT_ERR_TRUNCATE);
                why = plait_last_error();
                CHECK(why && strstr(why, "tag 91"), "receive %d of %d: plait_last_error() is "
                      "\"%s\" where it should name the truncated message (tag 91)", i + 1, N,
                      why ? why : "(null)");
            }
        }
        busy_stop = 1;
        CHECK(pthread_join(th, NULL) == 0, "pthread_join");
    }
    CHECK_RC(plait_comm_free(&d));
}

int main(void)
{
    static char name[128];
    t_init(&rank, &size);
    int dst = (rank + 1) % size, src = (rank + size - 1) % size;
    for (int c = 0; c < NCASES; c++)
        for (int via = 0; via < NVIA; via++) {
            snprintf(name, sizeof name, "%zu into %zu via %s (neighbour)", cases[c].len, cases[c].cap,
                     via_name[via]);
            t_case = name;
            one_case(c, via, dst, src, via == VIA_TEST ? 2 : 0);
            snprintf(name, sizeof name, "%zu into %zu via %s (self)", cases[c].len, cases[c].cap,
                     via_name[via]);
            one_case(c, via, rank, rank, via == VIA_WAIT ? 1 : 0);
        }
    waitall_case(dst, src);
    dtype_case(dst, src);
    threaded_case();
    t_finalize();
    return 0;
}
