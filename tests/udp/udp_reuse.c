/*
 * udp_reuse -- a send buffer is the caller's again the moment its send
 * completes. Each rank sends windows of large messages (around
 * PLAIT_UDP_ZCOPY_MIN and across several transport frames) to rank+1 and
 * receives from rank-1; as soon as plait_wait returns for a send, its buffer
 * is overwritten. A transport that still read it after completion (zero
 * copy: unsent or retransmitted packets) would deliver the overwrite, which
 * the receiver's check of the seeded random bytes catches.
 * Some rounds post their receives late, so sends wait on the rendezvous.
 *
 * udp_reuse giveup (2 ranks, PLAIT_UDP_GIVE_UP small): rank 1 stops itself
 * (SIGSTOP) while rank 0's large send is in flight; rank 0's plait_wait must
 * return PLAIT_ERR_TRANSPORT once the transport gives up (not hang); it says
 * so, kills rank 1 and exits 3 (only finalize/abort are promised then).
 *
 * udp_reuse revoke (2 ranks on two hosts, PLAIT_TIMEOUT=2,
 * PLAIT_NET_EAGER_LIMIT=1M): rank 0 sends one eager message of REVOKE_LEN
 * bytes; rank 1's blocking receive for it is placed early (the transport
 * writes into it as the packets come). A thread of rank 1 watches that
 * buffer and stops rank 0 (SIGSTOP) at the first byte placed, so the
 * receive times out mid-message and is cancelled: the transport must take
 * the message back (nothing written into that buffer after the receive
 * returned) and, once rank 0 continues, hand it whole to a later receive.
 * Fails if no byte was placed before the timeout (the path under test not
 * taken) or if the message completed first.
 */
#include "../integration/common.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#define WIN 4

static const size_t sizes[] = {
    65535, 65536, 65537, 300001, (1u << 20) - 64, (1u << 20) + 17, 3 * (1u << 20) + 5,
};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* One round: WIN messages each way; k-th size of the round from the list. */
static void round_trip(int rank, int size, int round, unsigned char **sbuf, unsigned char **rbuf)
{
    int dst = (rank + 1) % size, src = (rank + size - 1) % size;
    plait_request_t sreq[WIN], rreq[WIN];
    size_t len[WIN], rlen[WIN];
    for (int k = 0; k < WIN; k++) {
        len[k] = sizes[(size_t)(round * WIN + k + rank) % NSIZES];
        rlen[k] = sizes[(size_t)(round * WIN + k + src) % NSIZES];
        t_fill(sbuf[k], len[k], t_key(7, (uint64_t)rank, (uint64_t)round, (uint64_t)k));
        t_poison(rbuf[k], rlen[k] + T_GUARD);
    }
    if (round % 3 == 1 && rank % 2 == 0)
        pause_ms(20);   /* late receives: the peer's sends wait for the CTS */
    for (int k = 0; k < WIN; k++)
        CHECK_RC(plait_irecv(rbuf[k], rlen[k], PLAIT_BYTE, src, k, plait_comm_world(), &rreq[k]));
    for (int k = 0; k < WIN; k++)
        CHECK_RC(plait_isend(sbuf[k], len[k], PLAIT_BYTE, dst, k, plait_comm_world(), &sreq[k]));
    for (int k = 0; k < WIN; k++) {
        CHECK_RC(plait_wait(&sreq[k], NULL));
        memset(sbuf[k], 0x5a, len[k]);   /* the buffer is ours again: scribble */
    }
    for (int k = 0; k < WIN; k++) {
        plait_status_t st;
        CHECK_RC(plait_wait(&rreq[k], &st));
        CHECK(st.bytes == rlen[k], "round %d message %d: %zu bytes, expected %zu", round, k,
              st.bytes, rlen[k]);
        CHECK_RECV(rbuf[k], rlen[k], rlen[k],
                   t_key(7, (uint64_t)src, (uint64_t)round, (uint64_t)k),
                   "round %d message %d from rank %d", round, k, src);
    }
}

/* The giveup mode: see the header. */
static void give_up(int rank)
{
    size_t len = 64u << 20;
    unsigned char *buf = t_malloc(len), go = 1;
    plait_request_t req;
    int pid = getpid(), rc;
    t_case = "giveup: the receiver stops mid-message";
    memset(buf, rank == 1 ? 0x11 : 0x22, len);
    if (rank == 1) {
        volatile const unsigned char *first = buf;
        double t0;
        CHECK_RC(plait_send(&pid, sizeof pid, PLAIT_BYTE, 0, 50, plait_comm_world()));
        CHECK_RC(plait_irecv(buf, len, PLAIT_BYTE, 0, 51, plait_comm_world(), &req));
        CHECK_RC(plait_recv(&go, 1, PLAIT_BYTE, 0, 52, plait_comm_world(), NULL));
        /* Progress until the first data byte is placed: the CTS went out
         * and the sender streams (stopped before that, the sender would
         * have nothing unacknowledged to give up on, and only PLAIT_TIMEOUT
         * could end its wait; a fixed 2 ms here missed the CTS 2-3 times
         * in 25 on a loaded 2-core machine). 64 MiB take far longer. */
        for (t0 = plait_wtime(); *first != 0x22;) {
            int done;
            CHECK_RC(plait_test(&req, &done, NULL));
            CHECK(!done, "64 MiB arrived before its first byte was seen: nothing left to stop");
            CHECK(plait_wtime() - t0 < 20, "no data byte placed within 20 s");
        }
        raise(SIGSTOP);
        FAIL("continued after SIGSTOP");
    }
    CHECK_RC(plait_recv(&pid, sizeof pid, PLAIT_BYTE, 1, 50, plait_comm_world(), NULL));
    CHECK_RC(plait_isend(buf, len, PLAIT_BYTE, 1, 51, plait_comm_world(), &req));
    CHECK_RC(plait_send(&go, 1, PLAIT_BYTE, 1, 52, plait_comm_world()));
    rc = plait_wait(&req, NULL);
    memset(buf, 0, len);   /* the buffer is ours again whatever the outcome */
    fprintf(stderr, "rank 0: send to a stopped rank: %s (%s)\n",
            rc == PLAIT_ERR_TRANSPORT ? "PLAIT_ERR_TRANSPORT" : "another result",
            plait_last_error());
    kill(pid, SIGKILL);
    exit(rc == PLAIT_ERR_TRANSPORT ? 3 : 1);
}

#define REVOKE_LEN 1000000

typedef struct {
    volatile const unsigned char *buf;
    size_t len;
    pid_t sender;
    volatile int quit, stopped;
} revoke_watch_t;

/* Rank 1's watcher: stops the sender at the first byte placed. */
static void *revoke_watch(void *arg)
{
    revoke_watch_t *w = arg;
    while (!w->quit) {
        for (size_t i = 0; i < w->len; i += 4096)
            if (w->buf[i] != T_POISON) {
                kill(w->sender, SIGSTOP);
                w->stopped = 1;
                return NULL;
            }
    }
    return NULL;
}

/* A blocking receive that retries while it times out (the short timeout is
 * for the one receive under test). */
static int recv_retry(void *buf, size_t len, int src, int tag, plait_status_t *st)
{
    int rc;
    while ((rc = plait_recv(buf, len, PLAIT_BYTE, src, tag, plait_comm_world(), st)) ==
           PLAIT_ERR_TIMEOUT)
        ;
    return rc;
}

/* Rank 1, one try of the revoke mode: 1 when the receive timed out
 * mid-message and everything checked out, 0 when the message completed
 * before the stop landed (checked, then tried again). */
static int revoke_try(pid_t sender, unsigned char *buf, unsigned char *again, unsigned char *snap,
                      size_t len, uint64_t key)
{
    revoke_watch_t w = {buf, len, sender, 0, 0};
    plait_status_t st;
    pthread_t th;
    size_t early = 0;
    unsigned char go = 1;
    int rc;
    t_poison(buf, len + T_GUARD);
    t_poison(again, len + T_GUARD);
    CHECK(pthread_create(&th, NULL, revoke_watch, &w) == 0, "pthread_create");
    CHECK_RC(plait_send(&go, 1, PLAIT_BYTE, 0, 62, plait_comm_world()));
    rc = plait_recv(buf, len, PLAIT_BYTE, 0, 60, plait_comm_world(), &st);
    memcpy(snap, buf, len + T_GUARD);
    w.quit = 1;
    pthread_join(th, NULL);
    kill(sender, SIGCONT);
    if (rc == PLAIT_OK) {   /* all of it came before the stop: the next try */
        CHECK_RECV(buf, len, len, key, "a message that completed before its sender stopped");
        return 0;
    }
    CHECK(w.stopped, "no byte was placed into the receive before it returned (%s): the early "
          "placement path was not taken", plait_strerror(rc));
    CHECK(rc == PLAIT_ERR_TIMEOUT, "the first receive: %s, expected PLAIT_ERR_TIMEOUT (its "
          "sender was stopped mid-message)", plait_strerror(rc));
    for (size_t i = 0; i < len; i++)
        early += snap[i] != T_POISON;
    CHECK_RC(recv_retry(again, len, 0, 60, &st));
    CHECK(st.bytes == len && st.source == 0 && st.tag == 60, "status {%d, %d, %zu}", st.source,
          st.tag, st.bytes);
    CHECK_RECV(again, len, len, key, "the message, after its first receive was cancelled");
    CHECK(memcmp(buf, snap, len + T_GUARD) == 0, "the cancelled receive's buffer was written "
          "after the receive returned");
    printf("udp_reuse revoke: %zu of %zu bytes were placed early before the timeout; the message "
           "came whole to the next receive\n", early, len);
    return 1;
}

/* The revoke mode: see the header. Rank 1 asks for one message per try
 * (1) until a try got the timeout mid-message, then says stop (0). */
static void early_revoke(int rank)
{
    enum { TRIES = 8 };
    size_t len = REVOKE_LEN;
    unsigned char *buf = t_malloc(len + T_GUARD), *again = t_malloc(len + T_GUARD);
    unsigned char *snap = t_malloc(len + T_GUARD), cmd = 1;
    uint64_t key = t_key(9, 0, len, 60);
    int pid = getpid(), done = 0;
    t_case = "revoke: a receive placed early, cancelled mid-message";
    if (rank == 0) {
        t_fill(buf, len, key);
        CHECK_RC(plait_send(&pid, sizeof pid, PLAIT_BYTE, 1, 61, plait_comm_world()));
        for (;;) {
            CHECK_RC(recv_retry(&cmd, 1, 1, 62, NULL));
            if (!cmd)
                break;
            CHECK_RC(plait_send(buf, len, PLAIT_BYTE, 1, 60, plait_comm_world()));
        }
    } else {
        CHECK_RC(recv_retry(&pid, sizeof pid, 0, 61, NULL));
        for (int t = 0; t < TRIES && !done; t++)
            done = revoke_try((pid_t)pid, buf, again, snap, len, key);
        cmd = 0;
        CHECK_RC(plait_send(&cmd, 1, PLAIT_BYTE, 0, 62, plait_comm_world()));
        CHECK(done, "in %d tries, every message completed before its sender stopped", TRIES);
    }
    free(buf);
    free(again);
    free(snap);
    t_finalize();
    exit(0);
}

int main(int argc, char **argv)
{
    int rank, size, rounds;
    unsigned char *sbuf[WIN], *rbuf[WIN];
    size_t max = 3 * (1u << 20) + 5;
    t_init(&rank, &size);
    if (argc > 1 && strcmp(argv[1], "giveup") == 0 && size == 2)
        give_up(rank);
    if (argc > 1 && strcmp(argv[1], "revoke") == 0 && size == 2)
        early_revoke(rank);
    rounds = t_quick() ? 2 * (int)NSIZES : 6 * (int)NSIZES;
    for (int k = 0; k < WIN; k++) {
        sbuf[k] = t_malloc(max);
        rbuf[k] = t_malloc(max + T_GUARD);
    }
    t_case = "send buffer reused right after plait_wait";
    for (int r = 0; r < rounds; r++)
        round_trip(rank, size, r, sbuf, rbuf);
    for (int k = 0; k < WIN; k++) {
        free(sbuf[k]);
        free(rbuf[k]);
    }
    if (rank == 0)
        printf("udp_reuse: %d rounds of %d messages each way intact\n", rounds, WIN);
    t_finalize();
    return 0;
}
