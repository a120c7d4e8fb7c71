/*
 * pt2pt_late -- large messages whose receive is posted at a random moment
 * relative to their arrival: before the sender starts, while the message's
 * first frames are in flight, or long after it arrived. Between hosts a
 * rendezvous sends its head with the announcement (pt2pt/proto.c), so the
 * receive can match before the head came, after it came and was kept with
 * the unexpected announcement, or while it arrives; each must give the
 * message intact. Also: several large messages announced at once and
 * received in reverse tag order (each head must stay with its own
 * announcement), and a receive buffer shorter than the head.
 *
 * Pairs: rank r < n/2 sends to r + n/2 (with ranks placed by slot, these
 * pairs span hosts); an odd rank count leaves the last rank idle. Random data (PLAIT_TEST_SEED), poisoned receive buffers with a
 * guard. PLAIT_TEST_QUICK: fewer rounds.
 */
#include "common.h"

#include <time.h>

static int rank, size;

static void sleep_us(uint64_t us)
{
    struct timespec ts = { (time_t)(us / 1000000), (long)(us % 1000000) * 1000 };
    nanosleep(&ts, NULL);
}

/* Keeps the library progressing (plait_test on req) for about us microseconds
 * or until req completes; returns whether it did. */
static int poll_for(plait_request_t *req, uint64_t us)
{
    struct timespec t0, t;
    int done = 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        CHECK_RC(plait_test(req, &done, NULL));
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (!done && (uint64_t)((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec)) <
                          us * 1000);
    return done;
}

/* Round i: peer sends len bytes on tag i, then one byte on tag 1000 + i. The
 * receiver posts its receive for the large one (mode 0) at once, (1) after
 * progressing for delay_us (the announcement, maybe its head, came
 * meanwhile), or (2) once the small one arrived (every frame of the
 * announcement and head came before it: the head waits with it). */
static void one_round(int peer, int i, size_t len, int mode, uint64_t delay_us, int sender)
{
    uint64_t key = t_key(7, (uint64_t)(sender ? rank : peer), (uint64_t)i, len);
    unsigned char *buf = t_malloc(len + T_GUARD), go = 0x5a;
    plait_request_t req, goreq;
    plait_status_t st;
    t_case = "receive posted at a random moment";
    CHECK_RC(plait_barrier(plait_comm_world()));
    if (sender) {
        t_fill(buf, len, key);
        CHECK_RC(plait_isend(buf, len, PLAIT_BYTE, peer, i, plait_comm_world(), &req));
        CHECK_RC(plait_send(&go, 1, PLAIT_BYTE, peer, 1000 + i, plait_comm_world()));
        CHECK_RC(plait_wait(&req, NULL));
        free(buf);
        return;
    }
    t_poison(buf, len + T_GUARD);
    go = 0;
    CHECK_RC(plait_irecv(&go, 1, PLAIT_BYTE, peer, 1000 + i, plait_comm_world(), &goreq));
    if (mode == 1 && poll_for(&goreq, delay_us))
        goreq = NULL;
    if (mode == 2)
        CHECK_RC(plait_wait(&goreq, NULL));
    CHECK_RC(plait_recv(buf, len, PLAIT_BYTE, peer, i, plait_comm_world(), &st));
    if (goreq)
        CHECK_RC(plait_wait(&goreq, NULL));
    CHECK(go == 0x5a, "round %d: the one-byte message is wrong (0x%02x)", i, go);
    CHECK(st.bytes == len && st.source == peer && st.tag == i,
          "round %d: status {%d, %d, %zu}, expected {%d, %d, %zu}", i, st.source, st.tag,
          st.bytes, peer, i, len);
    CHECK_RECV(buf, len, len, key, "round %d: %zu bytes, receive posted in mode %d (%llu us)", i,
               len, mode, (unsigned long long)delay_us);
    free(buf);
}

/* n messages announced at once, received in reverse tag order. */
static void reverse_case(int peer, int sender)
{
    enum { N = 4 };
    size_t len[N] = { 300001, 1 << 20, 200000, 2 * 1024 * 1024 + 3 };
    unsigned char *buf[N];
    plait_request_t req[N];
    t_case = "reverse order";
    CHECK_RC(plait_barrier(plait_comm_world()));
    for (int k = 0; k < N; k++) {
        uint64_t key = t_key(8, (uint64_t)(sender ? rank : peer), (uint64_t)k, 0);
        buf[k] = t_malloc(len[k] + T_GUARD);
        if (sender) {
            t_fill(buf[k], len[k], key);
            CHECK_RC(plait_isend(buf[k], len[k], PLAIT_BYTE, peer, 200 + k, plait_comm_world(),
                                 &req[k]));
        } else {
            t_poison(buf[k], len[k] + T_GUARD);
        }
    }
    if (sender) {
        CHECK_RC(plait_waitall(N, req, NULL));
    } else {
        sleep_us(20000);   /* every announcement (and most heads) arrived unexpected */
        for (int k = N - 1; k >= 0; k--) {
            CHECK_RC(plait_recv(buf[k], len[k], PLAIT_BYTE, peer, 200 + k, plait_comm_world(),
                                NULL));
            CHECK_RECV(buf[k], len[k], len[k], t_key(8, (uint64_t)peer, (uint64_t)k, 0),
                       "message %d of %zu bytes, received in reverse order", k, len[k]);
        }
    }
    for (int k = 0; k < N; k++)
        free(buf[k]);
}

/* A receive buffer shorter than the head: PLAIT_ERR_TRUNCATE, its bytes right. */
static void short_case(int peer, int sender)
{
    size_t len = 1 << 20, cap = 1000;
    uint64_t key = t_key(9, (uint64_t)(sender ? rank : peer), 0, 0);
    unsigned char *buf = t_malloc(len + T_GUARD);
    plait_status_t st;
    t_case = "buffer shorter than the head";
    CHECK_RC(plait_barrier(plait_comm_world()));
    if (sender) {
        t_fill(buf, len, key);
        CHECK_RC(plait_send(buf, len, PLAIT_BYTE, peer, 300, plait_comm_world()));
    } else {
        t_poison(buf, len + T_GUARD);
        CHECK_RC_IS(plait_recv(buf, cap, PLAIT_BYTE, peer, 300, plait_comm_world(), &st),
                    PLAIT_ERR_TRUNCATE);
        CHECK(st.bytes == cap, "truncated receive: status bytes %zu, expected %zu", st.bytes, cap);
        CHECK_RECV(buf, cap, cap, key, "1 MiB message into %zu bytes", cap);
    }
    free(buf);
}

int main(void)
{
    t_rng_t rng;
    int peer, rounds, sender;
    static const size_t sizes[] = { 200000, 300001, 1 << 20, 3 * 1024 * 1024 + 7 };
    t_init(&rank, &size);
    peer = rank < size / 2 ? rank + size / 2 : rank < 2 * (size / 2) ? rank - size / 2 : size;
    rounds = t_quick() ? 24 : 96;
    t_rng_init(&rng, t_key(t_seed, 7, 0, 0));   /* the same sequence on every rank */
    if (rank == 0)
        printf("pt2pt_late: %d ranks, seed %llu, %d rounds\n", size, (unsigned long long)t_seed,
               rounds);
    if (peer >= size) {   /* the idle rank still takes part in the barriers */
        for (int i = 0; i < rounds + 2; i++)
            CHECK_RC(plait_barrier(plait_comm_world()));
        t_finalize();
        return 0;
    }
    sender = rank < size / 2;
    for (int i = 0; i < rounds; i++) {
        size_t len = sizes[t_rng_below(&rng, sizeof sizes / sizeof sizes[0])];
        int mode = (int)t_rng_below(&rng, 3);
        one_round(peer, i, len, mode, t_rng_below(&rng, 400), sender);
    }
    reverse_case(peer, sender);
    short_case(peer, sender);
    t_finalize();
    return 0;
}
