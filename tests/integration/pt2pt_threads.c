/*
 * pt2pt_threads -- 8 threads per rank doing point-to-point at the same time.
 *  1. one communicator (world): thread t exchanges with thread t of every rank
 *     (itself included) using tags owned by t (specific and ANY_SOURCE
 *     receives), blocking and non-blocking calls mixed;
 *  2. one dup'ed communicator per thread: every receive is (ANY_SOURCE,
 *     ANY_TAG), so only communicator isolation keeps the threads' messages
 *     apart; per-source order is checked too.
 * Sizes are mixed up to 128 KiB, so eager and rendezvous paths run concurrently.
 *  3. error details stay with their thread: a receive of thread A truncates
 *     while A sleeps and the main thread's progress (exchanges that succeed)
 *     completes it; the main thread's plait_last_error must still be its own
 *     last failure, and A's wait reports the truncation.
 */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#define NTHREADS 8
#define MAXLEN   (128 * 1024)

#define TAG(t, k, j) (100000 * (t) + 1000 * (k) + (j))

static int rank, size, per;   /* per: messages per (thread, peer) */
static plait_comm_t tcomm[NTHREADS];

static size_t msg_len(uint64_t key)
{
    t_rng_t r;
    t_rng_init(&r, key);
    return t_msg_size(&r, MAXLEN);
}

/*
 * Phase 1, thread t: tag 100000*t + 1000*k + j is used only by thread t for
 * its j-th message to offset k, so even ANY_SOURCE receives have one match.
 */
static void shared_comm(int t)
{
    static _Thread_local char name[64];
    snprintf(name, sizeof name, "thread %d on world", t);
    t_case = name;
    for (int k = 0; k < size; k++) {
        int dst = (rank + k) % size, src = (rank + size - k) % size;
        plait_request_t sreq[64];
        unsigned char *sbuf[64];
        for (int j = 0; j < per; j++) {
            size_t len = msg_len(t_key(1, (uint64_t)rank * 64 + (uint64_t)t, (uint64_t)dst, (uint64_t)j));
            sbuf[j] = t_malloc(len);
            t_fill(sbuf[j], len, t_key(2, (uint64_t)rank * 64 + (uint64_t)t, (uint64_t)dst, (uint64_t)j));
            CHECK_RC(plait_isend(sbuf[j], len, PLAIT_BYTE, dst, TAG(t, k, j), plait_comm_world(), &sreq[j]));
        }
        for (int j = 0; j < per; j++) {
            size_t len = msg_len(t_key(1, (uint64_t)src * 64 + (uint64_t)t, (uint64_t)rank, (uint64_t)j));
            unsigned char *buf = t_malloc(len + T_GUARD);
            plait_status_t st;
            int s = (j % 2) ? PLAIT_ANY_SOURCE : src;
            t_poison(buf, len + T_GUARD);
            CHECK_RC(plait_recv(buf, len, PLAIT_BYTE, s, TAG(t, k, j), plait_comm_world(), &st));
            CHECK(st.source == src && st.tag == TAG(t, k, j) && st.bytes == len,
                  "peer offset %d msg %d: status {%d, %d, %zu}, expected {%d, %d, %zu}", k, j,
                  st.source, st.tag, st.bytes, src, TAG(t, k, j), len);
            CHECK_RECV(buf, len, len, t_key(2, (uint64_t)src * 64 + (uint64_t)t, (uint64_t)rank, (uint64_t)j),
                       "thread %d msg %d from %d", t, j, src);
            free(buf);
        }
        CHECK_RC(plait_waitall(per, sreq, NULL));
        for (int j = 0; j < per; j++) free(sbuf[j]);
    }
}

/* Phase 2, thread t on its own communicator, wildcard receives only. */
static void own_comm(int t)
{
    static _Thread_local char name[64];
    int n = per * size, *next = t_malloc(sizeof(int) * (size_t)size);
    plait_request_t *sreq = t_malloc(sizeof(plait_request_t) * (size_t)n);
    unsigned char **sbuf = t_malloc(sizeof(void *) * (size_t)n);
    unsigned char *buf = t_malloc(MAXLEN + T_GUARD);
    snprintf(name, sizeof name, "thread %d on its dup'ed communicator", t);
    t_case = name;
    memset(next, 0, sizeof(int) * (size_t)size);
    for (int k = 0, i = 0; k < size; k++)
        for (int j = 0; j < per; j++, i++) {
            int dst = (rank + k) % size;
            size_t len = msg_len(t_key(3, (uint64_t)rank * 64 + (uint64_t)t, (uint64_t)dst, (uint64_t)j));
            sbuf[i] = t_malloc(len);
            t_fill(sbuf[i], len, t_key(4, (uint64_t)rank * 64 + (uint64_t)t, (uint64_t)dst, (uint64_t)j));
            CHECK_RC(plait_isend(sbuf[i], len, PLAIT_BYTE, dst, j, tcomm[t], &sreq[i]));
        }
    for (int i = 0; i < n; i++) {
        plait_status_t st;
        t_poison(buf, MAXLEN + T_GUARD);
        CHECK_RC(plait_recv(buf, MAXLEN, PLAIT_BYTE, PLAIT_ANY_SOURCE, PLAIT_ANY_TAG, tcomm[t], &st));
        CHECK(st.source >= 0 && st.source < size, "status.source %d", st.source);
        int s = st.source, j = next[s]++;
        size_t len = msg_len(t_key(3, (uint64_t)s * 64 + (uint64_t)t, (uint64_t)rank, (uint64_t)j));
        CHECK(j < per && st.tag == j && st.bytes == len, "receive %d: {source %d, tag %d, %zu bytes}, "
              "expected message %d of thread %d on %d ({tag %d, %zu bytes}): crossed communicators "
              "or overtook?", i, s, st.tag, st.bytes, j, t, s, j, len);
        CHECK_RECV(buf, len, MAXLEN, t_key(4, (uint64_t)s * 64 + (uint64_t)t, (uint64_t)rank, (uint64_t)j),
                   "thread %d message %d from %d", t, j, s);
    }
    CHECK_RC(plait_waitall(n, sreq, NULL));
    for (int i = 0; i < n; i++) free(sbuf[i]);
    free(sreq); free(sbuf); free(buf); free(next);
}

#define TAG_TRUNC 999999
static atomic_int trunc_posted, trunc_go;

static void *trunc_thread(void *arg)
{
    static char small[64];
    plait_request_t req;
    plait_status_t st;
    (void)arg;
    CHECK_RC(plait_irecv(small, sizeof small, PLAIT_BYTE, (rank + size - 1) % size, TAG_TRUNC,
                         plait_comm_world(), &req));
    atomic_store(&trunc_posted, 1);
    while (!atomic_load(&trunc_go))
        usleep(1000);   /* no plait call: only the main thread's progress runs */
    CHECK_RC_IS(plait_wait(&req, &st), PLAIT_ERR_TRUNCATE);
    CHECK(strstr(plait_last_error(), "truncated") != NULL, "thread A's detail: '%s'",
          plait_last_error());
    return NULL;
}

static void error_detail_per_thread(void)
{
    static char big[1000];
    char mine[512];
    pthread_t a;
    plait_comm_t w = plait_comm_world();
    t_case = "error detail stays with its thread";
    atomic_store(&trunc_posted, 0);
    atomic_store(&trunc_go, 0);
    CHECK(pthread_create(&a, NULL, trunc_thread, NULL) == 0, "pthread_create");
    while (!atomic_load(&trunc_posted))
        usleep(1000);
    CHECK_RC(plait_barrier(w));   /* every thread A has posted */
    CHECK_RC(plait_send(big, sizeof big, PLAIT_BYTE, (rank + 1) % size, TAG_TRUNC, w));
    CHECK_RC_IS(plait_send(big, 1, PLAIT_BYTE, size + 7, 0, w), PLAIT_ERR_ARG);
    snprintf(mine, sizeof mine, "%s", plait_last_error());
    for (int i = 0; i < 50; i++) {   /* progress that succeeds, completing A's receive */
        plait_request_t q[2];
        CHECK_RC(plait_irecv(NULL, 0, PLAIT_BYTE, (rank + size - 1) % size, 5, w, &q[0]));
        CHECK_RC(plait_isend(NULL, 0, PLAIT_BYTE, (rank + 1) % size, 5, w, &q[1]));
        CHECK_RC(plait_waitall(2, q, NULL));
    }
    CHECK(strcmp(plait_last_error(), mine) == 0, "the main thread's detail became '%s' (was '%s')",
          plait_last_error(), mine);
    atomic_store(&trunc_go, 1);
    pthread_join(a, NULL);
}

static void *thread_main(void *arg)
{
    int t = (int)(intptr_t)arg;
    shared_comm(t);
    own_comm(t);
    return NULL;
}

int main(void)
{
    pthread_t th[NTHREADS];
    t_init(&rank, &size);
    per = size <= 2 ? 24 : size <= 4 ? 12 : 6;
    if (t_quick()) per = per / 2 + 1;
    t_case = "dup per thread";
    for (int t = 0; t < NTHREADS; t++) CHECK_RC(plait_comm_dup(plait_comm_world(), &tcomm[t]));
    for (int t = 0; t < NTHREADS; t++)
        CHECK(pthread_create(&th[t], NULL, thread_main, (void *)(intptr_t)t) == 0, "pthread_create");
    for (int t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
    t_case = "after threads";
    CHECK_RC(plait_barrier(plait_comm_world()));
    error_detail_per_thread();
    for (int t = 0; t < NTHREADS; t++) CHECK_RC(plait_comm_free(&tcomm[t]));
    if (rank == 0) printf("pt2pt_threads: %d ranks x %d threads ok\n", size, NTHREADS);
    t_finalize();
    return 0;
}
