/*
 * pt2pt_withdraw -- a blocking send that times out against a receive posted
 * at about its deadline. Run with 2 ranks and a short PLAIT_TIMEOUT (0.2).
 *
 * Rank 0 sends a message of seeded bytes to rank 1 and, the moment its call
 * returns, overwrites the buffer (it is the caller's again, whatever the
 * result). Rank 1 posts the matching receive after a delay spread around
 * the sender's deadline (0.6 to 1.4 PLAIT_TIMEOUT), so the receive matches
 * the message while the send times out, before, or after. Then rank 0 tells
 * rank 1 its send's result. Whatever the timing, the two must agree:
 *  - a receive that completed holds every byte of the message (never the
 *    overwritten ones: nothing may read a buffer a failed call gave back),
 *    and the send reported success (the message was taken);
 *  - a receive that failed (withdrawn, or timed out: nothing came) belongs
 *    to a send that failed.
 * Sizes: 192 KiB and 8 MiB (inside a host: a pull, and a copy made together
 * with the sender; between hosts a stream). Outcomes are counted and printed.
 */
#include "common.h"

#include <unistd.h>

#define ROUNDS 8

static int rank, size;

/* A small control message, sent or received again while the peer is late
 * (each attempt may time out on its own). */
static void ctl_send(int *v, int tag)
{
    int rc;
    while ((rc = plait_send(v, 1, PLAIT_INT32, 1 - rank, tag, plait_comm_world())) ==
           PLAIT_ERR_TIMEOUT)
        ;
    CHECK_RC(rc);
}

static void ctl_recv(int *v, int tag)
{
    int rc;
    while ((rc = plait_recv(v, 1, PLAIT_INT32, 1 - rank, tag, plait_comm_world(), NULL)) ==
           PLAIT_ERR_TIMEOUT)
        ;
    CHECK_RC(rc);
}

int main(void)
{
    static const size_t sizes[] = {192u << 10, 8u << 20};
    const char *to = getenv("PLAIT_TIMEOUT");
    double T = to ? atof(to) : 0;
    int count[3] = {0, 0, 0};   /* taken, withdrawn, nothing came */
    unsigned char *buf;
    t_init(&rank, &size);
    t_case = "setup";
    CHECK(size == 2, "needs 2 ranks, got %d", size);
    CHECK(T > 0 && T <= 1, "run with a short PLAIT_TIMEOUT (0.2; got %s)", to ? to : "unset");
    buf = t_malloc(sizes[1] + T_GUARD);
    for (int i = 0; i < 2 * ROUNDS; i++) {
        size_t len = sizes[i % 2];
        int tag = 100 + i, sent = PLAIT_OK, got, go = 0;
        uint64_t key = t_key(9, (uint64_t)i, len, 0);
        if (rank == 0) {
            t_case = "send against a receive at its deadline";
            t_fill(buf, len, key);
            sent = plait_send(buf, len, PLAIT_BYTE, 1, tag, plait_comm_world());
            memset(buf, 0xEE, len);   /* the caller's buffer again */
            CHECK(sent == PLAIT_OK || sent == PLAIT_ERR_TIMEOUT, "send: %s",
                  plait_strerror(sent));
            ctl_send(&sent, 1);
            ctl_recv(&go, 2);
            continue;
        }
        t_case = "receive at the sender's deadline";
        usleep((useconds_t)(T * 1e6 * (0.6 + 0.8 * (double)(t_key(8, (uint64_t)i, 0, 0) % 1000) /
                                              1000.0)));
        t_poison(buf, len + T_GUARD);
        got = plait_recv(buf, len, PLAIT_BYTE, 0, tag, plait_comm_world(), NULL);
        ctl_recv(&sent, 1);
        if (got == PLAIT_OK) {
            CHECK(sent == PLAIT_OK, "round %d (%zu B): the receive completed but the send "
                  "reported %s", i, len, plait_strerror(sent));
            CHECK_RECV(buf, len, len, key, "round %d: %zu bytes of a send that succeeded", i, len);
            count[0]++;
        } else {
            CHECK(got == PLAIT_ERR_TRANSPORT || got == PLAIT_ERR_TIMEOUT, "round %d: receive: %s",
                  i, plait_strerror(got));
            CHECK(sent != PLAIT_OK, "round %d (%zu B): the send succeeded but the receive "
                  "failed (%s)", i, len, plait_strerror(got));
            CHECK(t_check_poison(buf, len, len + T_GUARD) == T_NO_ERROR, "round %d: wrote past the "
                  "buffer", i);
            count[got == PLAIT_ERR_TRANSPORT ? 1 : 2]++;
        }
        ctl_send(&go, 2);
    }
    if (rank == 1)
        printf("pt2pt_withdraw: %d taken, %d withdrawn after matching, %d withdrawn before "
               "(seed %llu)\n", count[0], count[1], count[2], (unsigned long long)t_seed);
    free(buf);
    CHECK_RC(plait_finalize());
    return 0;
}
