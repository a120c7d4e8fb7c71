/*
 * pt2pt_slow -- messages that take longer than PLAIT_TIMEOUT to cross a slow
 * link. Run with 2 ranks on two hosts whose link carries the message in a
 * few PLAIT_TIMEOUTs (t-netns: 2 x 5 Mbit/s, PLAIT_TIMEOUT=2, 4 MiB).
 *
 * PLAIT_TIMEOUT bounds how long a wait goes without its transfer moving, not
 * the transfer: both ends must complete with PLAIT_OK and every byte intact.
 * Round 1: rank 0 sends, rank 1 has its receive posted first; round 2: the
 * other way round, with the receive posted after the RTS arrived; round 3:
 * both ways at once (non-blocking, then plait_waitall). Between rounds the
 * ranks meet in a polled ibarrier. Elapsed times are printed, for the
 * record only.
 * Usage: pt2pt_slow [BYTES]   (default 4 MiB)
 */
#include "common.h"

#include <unistd.h>

static int rank, size;

/* Both ranks between rounds: a sender whose bytes sit in kernel buffers
 * (tcp) finishes long before its receiver, and any wait of its own would
 * time out meanwhile; a poll (plait_test) never does. */
static void sync_poll(void)
{
    plait_request_t req;
    int done = 0;
    CHECK_RC(plait_ibarrier(plait_comm_world(), &req));
    while (!done)
        CHECK_RC(plait_test(&req, &done, NULL));
}

static void one_way(int from, size_t len, int late, int tag)
{
    unsigned char *buf = t_malloc(len + T_GUARD);
    uint64_t key = t_key(5, (uint64_t)from, len, (uint64_t)tag);
    double t0 = plait_wtime();
    plait_status_t st;
    if (rank == from) {
        t_fill(buf, len, key);
        CHECK_RC(plait_send(buf, len, PLAIT_BYTE, 1 - rank, tag, plait_comm_world()));
    } else {
        if (late)
            usleep(200000);   /* the RTS is in: a rendezvous matched on arrival of the receive */
        t_poison(buf, len + T_GUARD);
        CHECK_RC(plait_recv(buf, len, PLAIT_BYTE, from, tag, plait_comm_world(), &st));
        CHECK(st.bytes == len, "status.bytes %zu, expected %zu", st.bytes, len);
        CHECK_RECV(buf, len, len, key, "%zu bytes from rank %d", len, from);
    }
    printf("pt2pt_slow rank %d: %s %zu bytes %s rank %d in %.2f s\n", rank,
           rank == from ? "sent" : "received", len, rank == from ? "to" : "from", 1 - rank,
           plait_wtime() - t0);
    free(buf);
}

static void both_ways(size_t len, int tag)
{
    unsigned char *s = t_malloc(len), *r = t_malloc(len + T_GUARD);
    plait_request_t req[2];
    double t0 = plait_wtime();
    t_fill(s, len, t_key(6, (uint64_t)rank, len, (uint64_t)tag));
    t_poison(r, len + T_GUARD);
    CHECK_RC(plait_irecv(r, len, PLAIT_BYTE, 1 - rank, tag, plait_comm_world(), &req[0]));
    CHECK_RC(plait_isend(s, len, PLAIT_BYTE, 1 - rank, tag, plait_comm_world(), &req[1]));
    CHECK_RC(plait_waitall(2, req, NULL));
    CHECK_RECV(r, len, len, t_key(6, (uint64_t)(1 - rank), len, (uint64_t)tag),
               "%zu bytes both ways", len);
    printf("pt2pt_slow rank %d: exchanged %zu bytes each way in %.2f s\n", rank, len,
           plait_wtime() - t0);
    free(s);
    free(r);
}

int main(int argc, char **argv)
{
    size_t len = argc > 1 ? strtoull(argv[1], NULL, 0) : (size_t)4 << 20;
    t_init(&rank, &size);
    t_case = "setup";
    CHECK(size == 2, "needs 2 ranks, got %d", size);
    t_case = "one way, receive posted first";
    one_way(0, len, 0, 1);
    sync_poll();
    t_case = "one way, receive posted after the RTS";
    one_way(1, len, 1, 2);
    sync_poll();
    t_case = "both ways at once";
    both_ways(len / 2, 3);
    sync_poll();
    if (rank == 0)
        printf("pt2pt_slow: 3 transfers of %zu bytes completed on both sides\n", len);
    t_finalize();
    return 0;
}
