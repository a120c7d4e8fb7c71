/*
 * pt2pt_many -- thousands of outstanding requests.
 *  1. ring: 4000 irecvs from rank-1 and 4000 isends to rank+1 in flight at
 *     once; sends completed by waitall with NULL statuses, receives by plait_test
 *     sweeps in a shuffled order; every status and payload checked.
 *  2. ANY_SOURCE: 4000 irecvs (ANY_SOURCE, ANY_TAG) posted, every rank sends
 *     4000/size messages to every rank with tag = sequence number; in posting
 *     order, the receives that got messages from one source must hold that
 *     source's messages in sequence (non-overtaking with wildcards).
 *  3. plait_test and plait_wait on a NULL request complete at once; waitall
 *     of 0 requests.
 */
#include "common.h"

#define K      4000
#define MAXLEN 2048

static int rank, size;

static size_t small_size(uint64_t key)
{
    t_rng_t r;
    t_rng_init(&r, key);
    uint64_t p = t_rng_below(&r, 100);
    return p < 50 ? t_rng_below(&r, 17) : p < 97 ? t_rng_below(&r, 1025) : t_rng_below(&r, MAXLEN + 1);
}

static void ring_many(int k)
{
    int dst = (rank + 1) % size, src = (rank + size - 1) % size, left = k;
    unsigned char *sbuf = t_malloc((size_t)k * MAXLEN), *rbuf = t_malloc((size_t)k * (MAXLEN + T_GUARD));
    plait_request_t *sreq = t_malloc(sizeof(plait_request_t) * (size_t)k);
    plait_request_t *rreq = t_malloc(sizeof(plait_request_t) * (size_t)k);
    int *order = t_malloc(sizeof(int) * (size_t)k);
    t_rng_t r;
    t_case = "ring: 4000 irecv + 4000 isend outstanding, test sweeps";
    t_poison(rbuf, (size_t)k * (MAXLEN + T_GUARD));
    for (int i = 0; i < k; i++) {
        size_t len = small_size(t_key(1, (uint64_t)src, (uint64_t)i, 0));
        CHECK_RC(plait_irecv(rbuf + (size_t)i * (MAXLEN + T_GUARD), len, PLAIT_BYTE, src, i % 7,
                             plait_comm_world(), &rreq[i]));
    }
    for (int i = 0; i < k; i++) {
        size_t len = small_size(t_key(1, (uint64_t)rank, (uint64_t)i, 0));
        t_fill(sbuf + (size_t)i * MAXLEN, len, t_key(2, (uint64_t)rank, (uint64_t)i, 0));
        CHECK_RC(plait_isend(sbuf + (size_t)i * MAXLEN, len, PLAIT_BYTE, dst, i % 7,
                             plait_comm_world(), &sreq[i]));
    }
    /* Shuffled sweep order, so completion is polled out of posting order. */
    t_rng_init(&r, t_key(3, (uint64_t)rank, 0, 0));
    for (int i = 0; i < k; i++) order[i] = i;
    for (int i = k - 1; i > 0; i--) {
        int j = (int)t_rng_below(&r, (uint64_t)i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    while (left > 0) {
        for (int n = 0; n < k; n++) {
            int i = order[n], done = 0;
            plait_status_t st;
            if (rreq[i] == NULL) continue;
            CHECK_RC(plait_test(&rreq[i], &done, &st));
            if (!done) continue;
            size_t len = small_size(t_key(1, (uint64_t)src, (uint64_t)i, 0));
            CHECK(rreq[i] == NULL, "plait_test set done but left request %d non-NULL", i);
            CHECK(st.source == src && st.tag == i % 7 && st.bytes == len,
                  "receive %d: status {%d, %d, %zu}, expected {%d, %d, %zu}", i, st.source, st.tag,
                  st.bytes, src, i % 7, len);
            CHECK_RECV(rbuf + (size_t)i * (MAXLEN + T_GUARD), len, len,
                       t_key(2, (uint64_t)src, (uint64_t)i, 0), "ring receive %d", i);
            left--;
        }
    }
    CHECK_RC(plait_waitall(k, sreq, NULL));
    for (int i = 0; i < k; i++) CHECK(sreq[i] == NULL, "waitall left send request %d non-NULL", i);
    free(sbuf); free(rbuf); free(sreq); free(rreq); free(order);
}

static void any_source_many(int per)
{
    int n = per * size;
    unsigned char *sbuf = t_malloc((size_t)n * MAXLEN), *rbuf = t_malloc((size_t)n * (MAXLEN + T_GUARD));
    plait_request_t *sreq = t_malloc(sizeof(plait_request_t) * (size_t)n);
    plait_request_t *rreq = t_malloc(sizeof(plait_request_t) * (size_t)n);
    plait_status_t *st = t_malloc(sizeof(plait_status_t) * (size_t)n);
    int *next = t_malloc(sizeof(int) * (size_t)size);
    memset(next, 0, sizeof(int) * (size_t)size);
    t_case = "ANY_SOURCE: thousands of wildcard receives keep per-source order";
    t_poison(rbuf, (size_t)n * (MAXLEN + T_GUARD));
    for (int i = 0; i < n; i++)
        CHECK_RC(plait_irecv(rbuf + (size_t)i * (MAXLEN + T_GUARD), MAXLEN, PLAIT_BYTE,
                             PLAIT_ANY_SOURCE, PLAIT_ANY_TAG, plait_comm_world(), &rreq[i]));
    /* Everyone has posted before anyone sends, so no message meets an empty queue. */
    CHECK_RC(plait_barrier(plait_comm_world()));
    for (int d = 0, i = 0; d < size; d++)
        for (int j = 0; j < per; j++, i++) {
            int to = (rank + d) % size;
            size_t len = small_size(t_key(4, (uint64_t)rank, (uint64_t)to, (uint64_t)j));
            t_fill(sbuf + (size_t)i * MAXLEN, len, t_key(5, (uint64_t)rank, (uint64_t)to, (uint64_t)j));
            CHECK_RC(plait_isend(sbuf + (size_t)i * MAXLEN, len, PLAIT_BYTE, to, j, plait_comm_world(),
                                 &sreq[i]));
        }
    CHECK_RC(plait_waitall(n, rreq, st));
    for (int i = 0; i < n; i++) {
        int s = st[i].source;
        CHECK(rreq[i] == NULL, "waitall left receive request %d non-NULL", i);
        CHECK(s >= 0 && s < size, "receive %d: status.source %d", i, s);
        int j = next[s]++;
        size_t len = small_size(t_key(4, (uint64_t)s, (uint64_t)rank, (uint64_t)j));
        CHECK(st[i].tag == j && st[i].bytes == len, "receive %d (posting order) got message "
              "{source %d, tag %d, %zu bytes}; expected source %d's message %d ({tag %d, %zu bytes}) "
              "-- overtaking?", i, s, st[i].tag, st[i].bytes, s, j, j, len);
        CHECK_RECV(rbuf + (size_t)i * (MAXLEN + T_GUARD), len, MAXLEN,
                   t_key(5, (uint64_t)s, (uint64_t)rank, (uint64_t)j), "message %d from %d", j, s);
    }
    for (int s = 0; s < size; s++) CHECK(next[s] == per, "got %d messages from %d, expected %d", next[s], s, per);
    CHECK_RC(plait_waitall(n, sreq, NULL));
    free(sbuf); free(rbuf); free(sreq); free(rreq); free(st); free(next);
}

static void null_requests(void)
{
    plait_request_t req = NULL, none[1] = { NULL };
    int done = 0;
    t_case = "NULL requests";
    CHECK_RC(plait_test(&req, &done, NULL));
    CHECK(done == 1, "plait_test on a NULL request: done = %d", done);
    CHECK_RC(plait_wait(&req, NULL));
    CHECK_RC(plait_waitall(0, none, NULL));
}

int main(void)
{
    t_init(&rank, &size);
    null_requests();
    ring_many(t_quick() ? K / 4 : K);
    any_source_many((t_quick() ? K / 4 : K) / size);
    CHECK_RC(plait_barrier(plait_comm_world()));
    if (rank == 0) printf("pt2pt_many: %d ranks ok\n", size);
    t_finalize();
    return 0;
}
