/*
 * pt2pt_self -- sending to oneself, on every rank at once.
 * Blocking sends to self of 1 B, 64 KiB and 16 MiB complete before their
 * receive is posted (the library must buffer them); isend/irecv to self in
 * both orders, completed by wait and by test loops; ANY_SOURCE receives from
 * self report source == own rank; many queued self messages keep their order.
 * With --singleton (run without plaitrun) it also checks the job is size 1.
 */
#include "common.h"

static int rank, size;

static const size_t big_sizes[] = { 1, 64 * 1024, 16u << 20 };

/* Receives len bytes from self (tag, source as given) and checks them. */
static void recv_self(size_t len, int tag, int src_arg, int tag_arg, uint64_t key)
{
    unsigned char *buf = t_malloc(len + T_GUARD);
    plait_status_t st;
    t_poison(buf, len + T_GUARD);
    CHECK_RC(plait_recv(buf, len, PLAIT_BYTE, src_arg, tag_arg, plait_comm_world(), &st));
    CHECK(st.source == rank && st.tag == tag && st.bytes == len,
          "status {%d, %d, %zu}, expected {%d, %d, %zu}", st.source, st.tag, st.bytes, rank, tag, len);
    CHECK_RECV(buf, len, len, key, "self message of %zu bytes, tag %d", len, tag);
    free(buf);
}

static void blocking_before_recv(void)
{
    unsigned char *buf;
    t_case = "blocking send to self before the receive, one at a time";
    for (int i = 0; i < 3; i++) {
        buf = t_malloc(big_sizes[i]);
        t_fill(buf, big_sizes[i], t_key(1, (uint64_t)rank, (uint64_t)i, 0));
        CHECK_RC(plait_send(buf, big_sizes[i], PLAIT_BYTE, rank, 10 + i, plait_comm_world()));
        memset(buf, 0x5A, big_sizes[i]);   /* the send returned: the buffer is ours again */
        free(buf);
        recv_self(big_sizes[i], 10 + i, rank, 10 + i, t_key(1, (uint64_t)rank, (uint64_t)i, 0));
    }
    t_case = "three blocking sends to self, then three receives (ANY_SOURCE, ANY_TAG)";
    for (int i = 0; i < 3; i++) {
        buf = t_malloc(big_sizes[i]);
        t_fill(buf, big_sizes[i], t_key(2, (uint64_t)rank, (uint64_t)i, 0));
        CHECK_RC(plait_send(buf, big_sizes[i], PLAIT_BYTE, rank, 20 + i, plait_comm_world()));
        memset(buf, 0x5A, big_sizes[i]);
        free(buf);
    }
    for (int i = 0; i < 3; i++)
        recv_self(big_sizes[i], 20 + i, PLAIT_ANY_SOURCE, PLAIT_ANY_TAG,
                  t_key(2, (uint64_t)rank, (uint64_t)i, 0));
}

/* isend/irecv to self; order 0: irecv first, 1: isend first. done by wait or test. */
static void nonblocking(int order, int by_test)
{
    static char name[96];
    size_t len = order ? 300000 : 5000;
    unsigned char *sbuf = t_malloc(len), *rbuf = t_malloc(len + T_GUARD);
    plait_request_t sreq = NULL, rreq = NULL;
    plait_status_t st;
    uint64_t key = t_key(3, (uint64_t)rank, (uint64_t)order, (uint64_t)by_test);
    snprintf(name, sizeof name, "isend/irecv to self, %s first, %s", order ? "isend" : "irecv",
             by_test ? "test loop" : "wait");
    t_case = name;
    t_fill(sbuf, len, key);
    t_poison(rbuf, len + T_GUARD);
    if (order == 0) CHECK_RC(plait_irecv(rbuf, len, PLAIT_BYTE, rank, 30, plait_comm_world(), &rreq));
    CHECK_RC(plait_isend(sbuf, len, PLAIT_BYTE, rank, 30, plait_comm_world(), &sreq));
    if (order == 1) CHECK_RC(plait_irecv(rbuf, len, PLAIT_BYTE, rank, 30, plait_comm_world(), &rreq));
    if (by_test) {
        int sdone = 0, rdone = 0;
        while (!sdone || !rdone) {
            if (!rdone) CHECK_RC(plait_test(&rreq, &rdone, &st));
            if (!sdone) CHECK_RC(plait_test(&sreq, &sdone, NULL));
        }
    } else {
        CHECK_RC(plait_wait(&rreq, &st));
        CHECK_RC(plait_wait(&sreq, NULL));
    }
    CHECK(sreq == NULL && rreq == NULL, "requests not NULL after completion");
    CHECK(st.source == rank && st.tag == 30 && st.bytes == len, "status {%d, %d, %zu}",
          st.source, st.tag, st.bytes);
    CHECK_RECV(rbuf, len, len, key, "isend/irecv to self");
    free(sbuf);
    free(rbuf);
}

/* 200 queued messages to self with alternating tags come back in order. */
static void many_queued(void)
{
    enum { N = 200 };
    t_rng_t r;
    size_t len[N];
    t_case = "200 queued self messages keep their order";
    t_rng_init(&r, t_key(4, (uint64_t)rank, 0, 0));
    for (int i = 0; i < N; i++) {
        len[i] = t_msg_size(&r, 100000);
        unsigned char *b = t_malloc(len[i]);
        t_fill(b, len[i], t_key(5, (uint64_t)rank, (uint64_t)i, 0));
        CHECK_RC(plait_send(b, len[i], PLAIT_BYTE, rank, 40 + i % 2, plait_comm_world()));
        free(b);
    }
    for (int i = 0; i < N; i++)
        recv_self(len[i], 40 + i % 2, rank, i % 3 ? PLAIT_ANY_TAG : 40 + i % 2,
                  t_key(5, (uint64_t)rank, (uint64_t)i, 0));
}

int main(int argc, char **argv)
{
    t_init(&rank, &size);
    if (argc > 1 && strcmp(argv[1], "--singleton") == 0) {
        t_case = "singleton";
        CHECK(size == 1 && rank == 0, "run without a launcher: rank %d of %d, expected 0 of 1",
              rank, size);
    }
    blocking_before_recv();
    for (int order = 0; order < 2; order++)
        for (int by_test = 0; by_test < 2; by_test++) nonblocking(order, by_test);
    many_queued();
    CHECK_RC(plait_barrier(plait_comm_world()));
    if (rank == 0) printf("pt2pt_self: %d ranks ok\n", size);
    t_finalize();
    return 0;
}
