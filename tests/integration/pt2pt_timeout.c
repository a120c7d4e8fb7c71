/*
 * pt2pt_timeout -- run with PLAIT_TIMEOUT=2 and at least 2 ranks.
 * Rank 0 receives from the last rank, which sends nothing yet: the receive
 * must fail with PLAIT_ERR_TIMEOUT, name that rank in plait_last_error() and
 * leave the buffer untouched; an ANY_SOURCE receive times out the same way.
 * Meanwhile every other rank waits in an ibarrier polled with plait_test (a
 * poll never times out), so the job stays in step. Afterwards the last rank
 * sends the message: the timed-out receive must have been withdrawn, so a
 * fresh receive gets it whole. A non-blocking receive whose waitall timed
 * out stays posted (plait.h: the request is left as it was), and the
 * timeout is what waitall returns though a request before it was truncated:
 * waited on again after the send, it completes with the message.
 * Then the other way round, for a rendezvous-sized message: the last rank's
 * blocking send to rank 0, which posts nothing yet (it polls an ibarrier),
 * times out and is withdrawn; the sender overwrites its buffer. Rank 0's
 * receive posted afterwards must not get the withdrawn message nor the
 * overwritten bytes: it gets the second send, whole. Once more with rank 0
 * asleep (no progress at all) while the send times out, for 192 KiB (inside
 * a host: a pull) and 1 MiB (a cooperative copy): its next receive either fails (it matched the
 * withdrawn message, whose withdrawal came right behind it) or gets the
 * second send; never the overwritten bytes. Then an ibarrier that the last
 * rank joins 3 s late: the others' wait times out naming the open
 * transfers, and waited on again it completes. Then a normal barrier and
 * finalize.
 */
#include "common.h"

#include <ctype.h>
#include <unistd.h>

static int rank, size;

/* 1 if text contains the decimal number n as a token of its own. */
static int names_number(const char *text, int n)
{
    for (const char *p = text; *p; p++) {
        if (!isdigit((unsigned char)*p) || (p > text && isdigit((unsigned char)p[-1]))) continue;
        if (strtol(p, NULL, 10) == n) return 1;
    }
    return 0;
}

static void ibarrier_poll(void)
{
    plait_request_t req;
    int done = 0;
    CHECK_RC(plait_ibarrier(plait_comm_world(), &req));
    while (!done) CHECK_RC(plait_test(&req, &done, NULL));
}

int main(void)
{
    int silent;
    unsigned char buf[100 + T_GUARD], kept[64 + T_GUARD];
    plait_request_t req = NULL;
    const char *to = getenv("PLAIT_TIMEOUT");
    t_init(&rank, &size);
    silent = size - 1;
    t_case = "setup";
    CHECK(size >= 2, "needs 2 or more ranks, got %d", size);
    CHECK(to && strcmp(to, "2") == 0, "run with PLAIT_TIMEOUT=2 (got %s)", to ? to : "unset");
    if (rank == 0) {
        double t0 = plait_wtime();
        t_case = "receive from a silent rank times out";
        t_poison(buf, sizeof buf);
        CHECK_RC_IS(plait_recv(buf, 100, PLAIT_BYTE, silent, 5, plait_comm_world(), NULL), PLAIT_ERR_TIMEOUT);
        CHECK(names_number(plait_last_error(), silent), "plait_last_error() \"%s\" does not name "
              "rank %d, the rank waited for", plait_last_error(), silent);
        CHECK(t_check_poison(buf, 0, sizeof buf) == T_NO_ERROR, "timed-out receive wrote byte %zu",
              t_check_poison(buf, 0, sizeof buf));
        printf("rank 0: timed out after %.1f s: %s\n", plait_wtime() - t0, plait_last_error());
        t_case = "ANY_SOURCE receive times out";
        CHECK_RC_IS(plait_recv(buf, 100, PLAIT_BYTE, PLAIT_ANY_SOURCE, 6, plait_comm_world(), NULL),
                    PLAIT_ERR_TIMEOUT);
        CHECK(plait_last_error()[0] != '\0', "empty last_error after a timeout");
        t_case = "waitall on a receive times out and leaves it posted, after a truncated one";
        {
            unsigned char eight[8] = {0}, four[4];
            plait_request_t two[2], sreq;
            t_poison(kept, sizeof kept);
            CHECK_RC(plait_isend(eight, 8, PLAIT_BYTE, 0, 8, plait_comm_world(), &sreq));
            CHECK_RC(plait_irecv(four, 4, PLAIT_BYTE, 0, 8, plait_comm_world(), &two[0]));
            CHECK_RC(plait_irecv(kept, 64, PLAIT_BYTE, silent, 7, plait_comm_world(), &two[1]));
            /* the timeout wins over reqs[0]'s truncation: reqs[1] is still posted */
            CHECK_RC_IS(plait_waitall(2, two, NULL), PLAIT_ERR_TIMEOUT);
            CHECK(two[0] == NULL && two[1] != NULL, "requests %p %p: the truncated one is freed, "
                  "the timed-out one stays", (void *)two[0], (void *)two[1]);
            CHECK(strstr(plait_last_error(), "reqs[1]") != NULL, "plait_last_error() \"%s\" does "
                  "not name reqs[1]", plait_last_error());
            CHECK_RC(plait_wait(&sreq, NULL));
            req = two[1];
        }
    }
    t_case = "ibarrier polled while rank 0 times out";
    ibarrier_poll();

    t_case = "late message after a timed-out receive";
    if (rank == silent) {
        t_fill(buf, 100, t_key(1, 0, 0, 0));
        CHECK_RC(plait_send(buf, 100, PLAIT_BYTE, 0, 5, plait_comm_world()));
        t_fill(kept, 64, t_key(2, 0, 0, 0));
        CHECK_RC(plait_send(kept, 64, PLAIT_BYTE, 0, 7, plait_comm_world()));
    } else if (rank == 0) {
        plait_status_t st;
        t_poison(buf, sizeof buf);
        CHECK_RC(plait_recv(buf, 100, PLAIT_BYTE, silent, 5, plait_comm_world(), &st));
        CHECK(st.bytes == 100 && st.source == silent, "status {%d, %d, %zu}", st.source, st.tag, st.bytes);
        CHECK_RECV(buf, 100, 100, t_key(1, 0, 0, 0), "message sent after the timeout");
        t_case = "the receive left posted by the timed-out waitall completes";
        CHECK_RC(plait_wait(&req, &st));
        CHECK(req == NULL && st.bytes == 64 && st.tag == 7, "request %p, status {%d, %d, %zu}",
              (void *)req, st.source, st.tag, st.bytes);
        CHECK_RECV(kept, 64, 64, t_key(2, 0, 0, 0), "message for the kept receive");
    }
    t_case = "a rendezvous send that timed out is withdrawn";
    {
        size_t big = 1u << 20;
        unsigned char *b = t_malloc(big + T_GUARD);
        if (rank == silent) {
            t_fill(b, big, t_key(3, 0, 0, 0));
            CHECK_RC_IS(plait_send(b, big, PLAIT_BYTE, 0, 9, plait_comm_world()), PLAIT_ERR_TIMEOUT);
            CHECK(names_number(plait_last_error(), 0), "plait_last_error() \"%s\" does not name "
                  "rank 0, the rank waited for", plait_last_error());
            memset(b, 0xee, big);   /* the buffer is ours again */
        }
        ibarrier_poll();   /* rank 0 polls here while the send times out */
        if (rank == silent) {
            t_fill(b, big, t_key(4, 0, 0, 0));
            CHECK_RC(plait_send(b, big, PLAIT_BYTE, 0, 9, plait_comm_world()));
        } else if (rank == 0) {
            plait_status_t st;
            t_poison(b, big + T_GUARD);
            CHECK_RC(plait_recv(b, big, PLAIT_BYTE, silent, 9, plait_comm_world(), &st));
            CHECK(st.bytes == big, "status {%d, %d, %zu}", st.source, st.tag, st.bytes);
            CHECK_RECV(b, big, big, t_key(4, 0, 0, 0), "the send after a withdrawn one");
        }
        free(b);
    }
    t_case = "a send withdrawn while its receiver slept";
    for (int k = 0; k < 2; k++) {
        size_t big = k ? 1u << 20 : 192u << 10;   /* above every eager limit; shm: pull, coop */
        unsigned char *b = t_malloc(big + T_GUARD);
        ibarrier_poll();
        if (rank == silent) {
            t_fill(b, big, t_key(5, 0, 0, big));
            CHECK_RC_IS(plait_send(b, big, PLAIT_BYTE, 0, 10, plait_comm_world()), PLAIT_ERR_TIMEOUT);
            memset(b, 0xee, big);   /* the buffer is ours again */
            t_fill(b, big, t_key(6, 0, 0, big));
            CHECK_RC(plait_send(b, big, PLAIT_BYTE, 0, 10, plait_comm_world()));
        } else if (rank == 0) {
            plait_status_t st;
            int rc;
            sleep(3);   /* longer than the sender's PLAIT_TIMEOUT, making no progress */
            t_poison(b, big + T_GUARD);
            rc = plait_recv(b, big, PLAIT_BYTE, silent, 10, plait_comm_world(), &st);
            if (rc == PLAIT_ERR_TRANSPORT) {   /* it matched the withdrawn one: fails, says so */
                CHECK(strstr(plait_last_error(), "withdrew") != NULL, "plait_last_error() \"%s\" "
                      "does not say the message was withdrawn", plait_last_error());
                t_poison(b, big + T_GUARD);
                rc = plait_recv(b, big, PLAIT_BYTE, silent, 10, plait_comm_world(), &st);
            }
            CHECK_RC(rc);
            CHECK_RECV(b, big, big, t_key(6, 0, 0, big), "%zu bytes, the send after one withdrawn "
                       "while the receiver slept", big);
        }
        free(b);
    }
    ibarrier_poll();   /* (the other ranks wait here meanwhile: a poll never times out) */

    /* A collective schedule whose rank is late: the wait times out and says
     * which transfers are still open (rank 0's first receive of the
     * dissemination barrier is from the last rank), and the request, left
     * as it was, completes once the late rank joins. */
    t_case = "a collective waiting for a late rank times out naming what is open";
    if (rank == silent) {
        sleep(3);
        CHECK_RC(plait_ibarrier(plait_comm_world(), &req));
    } else {
        CHECK_RC(plait_ibarrier(plait_comm_world(), &req));
        CHECK_RC_IS(plait_wait(&req, NULL), PLAIT_ERR_TIMEOUT);
        CHECK(strstr(plait_last_error(), "still open"), "plait_last_error() \"%s\" does not say "
              "what the collective waits for", plait_last_error());
        CHECK(rank != 0 || names_number(strstr(plait_last_error(), "still open"), silent),
              "plait_last_error() \"%s\" does not name rank %d", plait_last_error(), silent);
        if (rank == 0)
            printf("rank 0: %s\n", plait_last_error());
    }
    CHECK_RC(plait_wait(&req, NULL));
    t_case = "barrier after the timeouts";
    CHECK_RC(plait_barrier(plait_comm_world()));
    if (rank == 0) printf("pt2pt_timeout: %d ranks ok\n", size);
    t_finalize();
    return 0;
}
