/*
 * pt2pt_stall -- a wait on a rank of another host ends one PLAIT_TIMEOUT
 * after the traffic with it stopped, not up to two (run with PLAIT_TIMEOUT=T
 * and 2 ranks on two hosts; t-netns.sh runs it over udp and tcp).
 *
 * After a barrier rank 1 sleeps 5 T, making no plait call. Rank 0 sends it a
 * 64 KiB message (non-blocking: it moves early in the wait's first window,
 * acknowledged by the peer's transport) and then waits in a blocking receive
 * from rank 1 for a message that comes only after the sleep. The receive
 * must fail with PLAIT_ERR_TIMEOUT within 1.6 T (before: 2 T over udp, the
 * early traffic buying a whole second window) and at least T. Rank 1 then
 * receives the 64 KiB message whole and sends the awaited one, which a fresh
 * receive on rank 0 gets. Prints "pt2pt_stall rank 0: ..." and exits 0 when
 * all of that held.
 */
#include "common.h"

#include <unistd.h>

#define BIG (64 * 1024)

int main(void)
{
    int rank, size, rc, token = 0;
    double t = 2.0, t0, waited;
    const char *e = getenv("PLAIT_TIMEOUT");
    unsigned char *buf;
    plait_comm_t w;
    plait_request_t q, r;
    if (e && atof(e) > 0)
        t = atof(e);
    CHECK_RC(plait_init());
    w = plait_comm_world();
    plait_comm_rank(w, &rank);
    plait_comm_size(w, &size);
    t_rank = rank;
    if (size != 2) {
        fprintf(stderr, "pt2pt_stall: run with 2 ranks\n");
        return 2;
    }
    buf = malloc(BIG);
    for (int i = 0; i < BIG; i++)
        buf[i] = (unsigned char)(i * 7 + 3);
    CHECK_RC(plait_barrier(w));
    if (rank == 1) {
        unsigned char *in = calloc(1, BIG);
        usleep((useconds_t)(5 * t * 1e6));   /* no plait call meanwhile */
        CHECK_RC(plait_recv(in, BIG, PLAIT_BYTE, 0, 7, w, NULL));
        CHECK(memcmp(in, buf, BIG) == 0, "the 64 KiB message arrived whole");
        token = 42;
        CHECK_RC(plait_send(&token, 1, PLAIT_INT32, 0, 8, w));
        free(in);
    } else {
        CHECK_RC(plait_isend(buf, BIG, PLAIT_BYTE, 1, 7, w, &q));
        t0 = plait_wtime();
        rc = plait_recv(&token, 1, PLAIT_INT32, 1, 8, w, NULL);
        waited = plait_wtime() - t0;
        printf("pt2pt_stall rank 0: receive ended after %.1f s with PLAIT_TIMEOUT=%.1f: %s\n",
               waited, t, rc == PLAIT_OK ? "ok" : plait_last_error());
        CHECK(rc == PLAIT_ERR_TIMEOUT, "the receive times out (rank 1 sleeps)");
        CHECK(waited >= 0.95 * t && waited < 1.6 * t,
                "it ends one PLAIT_TIMEOUT after the traffic stopped, not two");
        token = 0;   /* (polled: a plait_test never times out, rank 1 still sleeps) */
        CHECK_RC(plait_irecv(&token, 1, PLAIT_INT32, 1, 8, w, &r));
        for (int done = 0; !done && plait_wtime() - t0 < 20 * t;)
            CHECK_RC(plait_test(&r, &done, NULL));
        CHECK(token == 42, "the awaited message comes to a fresh receive");
        CHECK_RC(plait_wait(&q, NULL));
    }
    CHECK_RC(plait_barrier(w));
    free(buf);
    CHECK_RC(plait_finalize());
    return 0;
}
