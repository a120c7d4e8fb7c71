/*
 * pt2pt_errors -- every error code for bad arguments and bad state.
 * Each failing call must return the documented code, leave a non-empty
 * plait_last_error() that names the offending argument, leave user buffers
 * untouched and the library usable. Covers calls before plait_init and after
 * plait_finalize (PLAIT_ERR_STATE), double init, bad ranks, tags, buffers,
 * datatypes, communicators and request pointers, freeing the world, split with
 * a negative color, per-thread last_error, plait_strerror of every code,
 * plait_dtype_size and plait_version.
 * With --stale it only checks that using a copy of a freed communicator handle
 * fails with PLAIT_ERR_STATE or PLAIT_ERR_ARG (kept apart: a library that does
 * not detect it may crash). With --unreceived rank 0 sends three 100-byte
 * messages (tag 9) that the last rank never receives; finalize still returns
 * PLAIT_OK and the last rank warns of them (t-pt2pt.sh checks the words);
 * so does its plait_comm_free of a dup holding two 50-byte messages (tag 4),
 * and its finalize of one of 60 bytes (tag 5) that came on a dup it had
 * freed already; rank 0's finalize warns of a receive it posted and never
 * completed.
 */
#include "common.h"

#include <limits.h>
#include <pthread.h>

static int rank, size;

/*
 * rc must be one of want1/want2; last_error must be non-empty and, when
 * `names` is given, contain one of its '|'-separated words (any case).
 */
static void expect_err(int rc, int want1, int want2, const char *names, const char *call,
                       const char *file, int line)
{
    const char *m = plait_last_error();
    if (rc != want1 && rc != want2)
        t_fail(file, line, "%s returned %d (%s), expected %d (%s); last_error: %s", call, rc,
               plait_strerror(rc), want1, plait_strerror(want1), m ? m : "(NULL)");
    if (!m || !*m) t_fail(file, line, "%s failed but plait_last_error() is empty", call);
    if (names) {
        char words[128], *save = NULL;
        snprintf(words, sizeof words, "%s", names);
        for (char *w = strtok_r(words, "|", &save); w; w = strtok_r(NULL, "|", &save))
            if (strcasestr(m, w)) return;
        t_fail(file, line, "%s: plait_last_error() \"%s\" does not name the argument (%s)", call, m, names);
    }
}

#define EXPECT_ERR(call, want, names)        expect_err((call), (want), (want), (names), #call, __FILE__, __LINE__)
#define EXPECT_ERR2(call, w1, w2, names)     expect_err((call), (w1), (w2), (names), #call, __FILE__, __LINE__)

static void before_init(void)
{
    int flag = -1, ma = -1, mi = -1, pa = -1;
    unsigned char buf[8];
    plait_request_t req = NULL;
    plait_comm_t c = NULL;
    t_case = "before plait_init";
    CHECK_RC(plait_initialized(&flag));
    CHECK(flag == 0, "plait_initialized before init: %d", flag);
    CHECK(plait_comm_world() == NULL, "plait_comm_world() before init is not NULL");
    CHECK_RC(plait_version(&ma, &mi, &pa));
    EXPECT_ERR(plait_send(buf, 1, PLAIT_BYTE, 0, 0, plait_comm_world()), PLAIT_ERR_STATE, NULL);
    EXPECT_ERR(plait_recv(buf, 1, PLAIT_BYTE, 0, 0, plait_comm_world(), NULL), PLAIT_ERR_STATE, NULL);
    EXPECT_ERR(plait_isend(buf, 1, PLAIT_BYTE, 0, 0, plait_comm_world(), &req), PLAIT_ERR_STATE, NULL);
    EXPECT_ERR(plait_irecv(buf, 1, PLAIT_BYTE, 0, 0, plait_comm_world(), &req), PLAIT_ERR_STATE, NULL);
    EXPECT_ERR(plait_barrier(plait_comm_world()), PLAIT_ERR_STATE, NULL);
    EXPECT_ERR(plait_comm_dup(plait_comm_world(), &c), PLAIT_ERR_STATE, NULL);
    EXPECT_ERR(plait_comm_rank(plait_comm_world(), &flag), PLAIT_ERR_STATE, NULL);
    EXPECT_ERR(plait_finalize(), PLAIT_ERR_STATE, NULL);
}

static void init_twice(void)
{
    int flag = 0;
    t_case = "double plait_init";
    EXPECT_ERR(plait_init(), PLAIT_ERR_STATE, "init");
    CHECK_RC(plait_initialized(&flag));
    CHECK(flag == 1, "plait_initialized after init: %d", flag);
    CHECK(plait_comm_world() != NULL, "plait_comm_world() NULL after init");
}

static void bad_p2p_args(void)
{
    unsigned char buf[64];
    plait_request_t req = NULL;
    plait_comm_t w = plait_comm_world();
    t_case = "bad send arguments";
    EXPECT_ERR(plait_send(buf, 1, PLAIT_BYTE, -2, 0, w), PLAIT_ERR_ARG, "dest");
    {   /* a stream that cannot be written: the failure shows (black-box test) */
        FILE *full = fopen("/dev/full", "w");
        if (full) {
            EXPECT_ERR(plait_stats_print(full), PLAIT_ERR_ARG, "writing to f failed");
            fclose(full);
        }
    }
    EXPECT_ERR(plait_send(buf, 1, PLAIT_BYTE, PLAIT_ANY_SOURCE, 0, w), PLAIT_ERR_ARG, "dest");
    EXPECT_ERR(plait_send(buf, 1, PLAIT_BYTE, size, 0, w), PLAIT_ERR_ARG, "dest");
    EXPECT_ERR(plait_send(buf, 1, PLAIT_BYTE, INT_MAX, 0, w), PLAIT_ERR_ARG, "dest");
    EXPECT_ERR(plait_send(buf, 1, PLAIT_BYTE, 0, PLAIT_ANY_TAG, w), PLAIT_ERR_ARG, "tag");
    EXPECT_ERR(plait_send(buf, 1, PLAIT_BYTE, 0, -7, w), PLAIT_ERR_ARG, "tag");
    EXPECT_ERR(plait_send(buf, 1, PLAIT_BYTE, 0, INT_MIN, w), PLAIT_ERR_ARG, "tag");
    EXPECT_ERR(plait_send(NULL, 5, PLAIT_BYTE, 0, 0, w), PLAIT_ERR_ARG, "buf");
    EXPECT_ERR(plait_send(buf, 1, (plait_dtype_t)99, 0, 0, w), PLAIT_ERR_ARG, "type|dt");
    EXPECT_ERR(plait_send(buf, 1, (plait_dtype_t)-1, 0, 0, w), PLAIT_ERR_ARG, "type|dt");
    EXPECT_ERR(plait_send(buf, 1, PLAIT_BYTE, 0, 0, NULL), PLAIT_ERR_ARG, "comm");
    /* an int -1 passed as count: 1-byte elements do not overflow, yet no
     * buffer is that large (it crashed udp, broke a tcp connection, and
     * sent a bogus size over shm) */
    EXPECT_ERR(plait_send(buf, (size_t)-1, PLAIT_BYTE, size - 1, 0, w), PLAIT_ERR_ARG, "count");
    EXPECT_ERR(plait_send(buf, (size_t)-1, PLAIT_BYTE, rank, 0, w), PLAIT_ERR_ARG, "count");
    EXPECT_ERR(plait_isend(buf, (size_t)-1 / 2, PLAIT_INT32, size - 1, 0, w, &req), PLAIT_ERR_ARG,
               "count");
    EXPECT_ERR(plait_irecv(buf, (size_t)-1, PLAIT_BYTE, 0, 0, w, &req), PLAIT_ERR_ARG, "count");
    t_case = "bad isend arguments";
    EXPECT_ERR(plait_isend(buf, 1, PLAIT_BYTE, 0, 0, w, NULL), PLAIT_ERR_ARG, "req");
    EXPECT_ERR(plait_isend(buf, 1, PLAIT_BYTE, size, 0, w, &req), PLAIT_ERR_ARG, "dest");
    EXPECT_ERR(plait_isend(buf, 1, PLAIT_BYTE, 0, -3, w, &req), PLAIT_ERR_ARG, "tag");
    EXPECT_ERR(plait_isend(NULL, 1, PLAIT_INT32, 0, 0, w, &req), PLAIT_ERR_ARG, "buf");
    EXPECT_ERR(plait_isend(buf, 1, PLAIT_BYTE, 0, 0, NULL, &req), PLAIT_ERR_ARG, "comm");

    t_case = "bad recv arguments (buffer must stay untouched)";
    t_poison(buf, sizeof buf);
    EXPECT_ERR(plait_recv(buf, 8, PLAIT_BYTE, -2, 0, w, NULL), PLAIT_ERR_ARG, "source|src");
    EXPECT_ERR(plait_recv(buf, 8, PLAIT_BYTE, size, 0, w, NULL), PLAIT_ERR_ARG, "source|src");
    EXPECT_ERR(plait_recv(buf, 8, PLAIT_BYTE, 0, -2, w, NULL), PLAIT_ERR_ARG, "tag");
    EXPECT_ERR(plait_recv(buf, 8, PLAIT_BYTE, 0, INT_MIN, w, NULL), PLAIT_ERR_ARG, "tag");
    EXPECT_ERR(plait_recv(NULL, 8, PLAIT_BYTE, 0, 0, w, NULL), PLAIT_ERR_ARG, "buf");
    EXPECT_ERR(plait_recv(buf, 8, (plait_dtype_t)42, 0, 0, w, NULL), PLAIT_ERR_ARG, "type|dt");
    EXPECT_ERR(plait_recv(buf, 8, PLAIT_BYTE, 0, 0, NULL, NULL), PLAIT_ERR_ARG, "comm");
    t_case = "bad irecv arguments";
    EXPECT_ERR(plait_irecv(buf, 8, PLAIT_BYTE, 0, 0, w, NULL), PLAIT_ERR_ARG, "req");
    EXPECT_ERR(plait_irecv(buf, 8, PLAIT_BYTE, size + 1, 0, w, &req), PLAIT_ERR_ARG, "source|src");
    EXPECT_ERR(plait_irecv(buf, 8, PLAIT_BYTE, 0, -9, w, &req), PLAIT_ERR_ARG, "tag");
    EXPECT_ERR(plait_irecv(buf, 8, PLAIT_BYTE, 0, 0, NULL, &req), PLAIT_ERR_ARG, "comm");
    CHECK(t_check_poison(buf, 0, sizeof buf) == T_NO_ERROR, "a failed receive wrote byte %zu",
          t_check_poison(buf, 0, sizeof buf));

    t_case = "bad request arguments";
    int done = -1;
    EXPECT_ERR(plait_test(NULL, &done, NULL), PLAIT_ERR_ARG, "req");
    req = NULL;
    EXPECT_ERR(plait_test(&req, NULL, NULL), PLAIT_ERR_ARG, "done|flag");
    EXPECT_ERR(plait_wait(NULL, NULL), PLAIT_ERR_ARG, "req");
    {   /* a NULL request: complete, with an empty status (plait.h) */
        plait_status_t st = {.source = 77, .tag = 77, .bytes = 77};
        CHECK_RC(plait_wait(&req, &st));
        CHECK(req == NULL && st.source == PLAIT_ANY_SOURCE && st.tag == PLAIT_ANY_TAG && st.bytes == 0,
              "plait_wait(NULL request): status {%d, %d, %zu}", st.source, st.tag, st.bytes);
        st.bytes = 77;
        CHECK_RC(plait_waitall(1, &req, &st));
        CHECK(st.bytes == 0, "plait_waitall(NULL request): status bytes %zu", st.bytes);
    }
    EXPECT_ERR(plait_waitall(2, NULL, NULL), PLAIT_ERR_ARG, "req");
    EXPECT_ERR(plait_waitall(-1, &req, NULL), PLAIT_ERR_ARG, NULL);
    EXPECT_ERR(plait_ibarrier(w, NULL), PLAIT_ERR_ARG, "req");
    EXPECT_ERR(plait_barrier(NULL), PLAIT_ERR_ARG, "comm");
}

static void bad_comm_args(void)
{
    plait_comm_t w = plait_comm_world(), c = NULL, d = NULL;
    int r;
    t_case = "bad communicator arguments";
    EXPECT_ERR(plait_comm_rank(NULL, &r), PLAIT_ERR_ARG, "comm");
    EXPECT_ERR(plait_comm_size(NULL, &r), PLAIT_ERR_ARG, "comm");
    EXPECT_ERR(plait_comm_rank(w, NULL), PLAIT_ERR_ARG, "rank");
    EXPECT_ERR(plait_comm_size(w, NULL), PLAIT_ERR_ARG, "size");
    EXPECT_ERR(plait_comm_dup(NULL, &c), PLAIT_ERR_ARG, "comm");
    EXPECT_ERR(plait_comm_dup(w, NULL), PLAIT_ERR_ARG, "comm");
    EXPECT_ERR(plait_comm_free(NULL), PLAIT_ERR_ARG, "comm");
    c = NULL;
    EXPECT_ERR(plait_comm_free(&c), PLAIT_ERR_ARG, "comm");

    t_case = "split with a negative color (every rank, so nobody waits)";
    c = w;
    EXPECT_ERR(plait_comm_split(w, -5, 0, &c), PLAIT_ERR_ARG, "color");
    EXPECT_ERR(plait_comm_split(w, 0, 0, NULL), PLAIT_ERR_ARG, "comm");
    EXPECT_ERR(plait_comm_split(NULL, 0, 0, &c), PLAIT_ERR_ARG, "comm");

    t_case = "freeing the world";
    c = w;
    EXPECT_ERR2(plait_comm_free(&c), PLAIT_ERR_ARG, PLAIT_ERR_STATE, "world");
    CHECK(c == w, "a failed free of the world changed the handle to %p", (void *)c);
    CHECK(plait_comm_world() == w, "plait_comm_world() changed after a failed free");

    t_case = "a freed communicator";
    CHECK_RC(plait_comm_dup(w, &d));
    CHECK_RC(plait_comm_free(&d));
    CHECK(d == NULL, "comm_free left the handle %p", (void *)d);
    EXPECT_ERR(plait_send(&r, 1, PLAIT_INT32, 0, 0, d), PLAIT_ERR_ARG, "comm");
    EXPECT_ERR(plait_comm_free(&d), PLAIT_ERR_ARG, "comm");
}

static void codes(void)
{
    static const int all[] = { PLAIT_OK, PLAIT_ERR_ARG, PLAIT_ERR_NOMEM, PLAIT_ERR_TRUNCATE,
                               PLAIT_ERR_TIMEOUT, PLAIT_ERR_PEER, PLAIT_ERR_TRANSPORT,
                               PLAIT_ERR_UNSUPPORTED, PLAIT_ERR_STATE, PLAIT_ERR_INTERNAL };
    static const int unknown[] = { 1, -10, -1000, INT_MIN, INT_MAX };
    const int n = (int)(sizeof all / sizeof all[0]);
    int ma, mi, pa;
    t_case = "plait_strerror of every code";
    for (int i = 0; i < n; i++) {
        const char *s = plait_strerror(all[i]);
        CHECK(s && *s, "plait_strerror(%d) is empty", all[i]);
        CHECK(!strcasestr(s, "unknown"), "plait_strerror(%d) = \"%s\"", all[i], s);
        for (int j = 0; j < i; j++)
            CHECK(strcmp(s, plait_strerror(all[j])) != 0, "codes %d and %d share the text \"%s\"",
                  all[i], all[j], s);
    }
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *s = plait_strerror(unknown[i]);
        CHECK(s && strcasestr(s, "unknown"), "plait_strerror(%d) = \"%s\", expected \"unknown error\"",
              unknown[i], s ? s : "(NULL)");
    }
    t_case = "plait_dtype_size and plait_version";
    CHECK(plait_dtype_size((plait_dtype_t)99) == 0 && plait_dtype_size((plait_dtype_t)-1) == 0,
          "unknown dtype size %zu", plait_dtype_size((plait_dtype_t)99));
    CHECK(plait_dtype_size(PLAIT_BFLOAT16) == 2 && plait_dtype_size(PLAIT_UINT64) == 8, "dtype sizes");
    CHECK_RC(plait_version(&ma, &mi, &pa));
    CHECK(ma == PLAIT_VERSION_MAJOR && mi == PLAIT_VERSION_MINOR && pa == PLAIT_VERSION_PATCH,
          "plait_version %d.%d.%d, header %d.%d.%d", ma, mi, pa, PLAIT_VERSION_MAJOR,
          PLAIT_VERSION_MINOR, PLAIT_VERSION_PATCH);
}

/* Thread-local last_error: another thread's failure must not replace ours. */
static void *other_thread(void *arg)
{
    unsigned char b;
    (void)arg;
    t_case = "last_error in a second thread";
    EXPECT_ERR(plait_recv(&b, 1, PLAIT_BYTE, 0, -4, plait_comm_world(), NULL), PLAIT_ERR_ARG, "tag");
    return NULL;
}

static void per_thread_error(void)
{
    pthread_t th;
    unsigned char b;
    t_case = "last_error is per thread";
    EXPECT_ERR(plait_send(&b, 1, PLAIT_BYTE, size + 3, 0, plait_comm_world()), PLAIT_ERR_ARG, "dest");
    CHECK(pthread_create(&th, NULL, other_thread, NULL) == 0, "pthread_create");
    pthread_join(th, NULL);
    CHECK(strcasestr(plait_last_error(), "dest") != NULL, "this thread's last_error changed to \"%s\" "
          "after another thread failed", plait_last_error());
}

/* After all those failures the library must still work: a ring exchange. */
static void still_usable(void)
{
    int out = rank * 3 + 1, in = -1;
    plait_request_t req;
    plait_status_t st;
    t_case = "library usable after errors";
    CHECK_RC(plait_isend(&out, 1, PLAIT_INT32, (rank + 1) % size, 5, plait_comm_world(), &req));
    CHECK_RC(plait_recv(&in, 1, PLAIT_INT32, (rank + size - 1) % size, 5, plait_comm_world(), &st));
    CHECK_RC(plait_wait(&req, NULL));
    CHECK(in == ((rank + size - 1) % size) * 3 + 1 && st.bytes == 4, "got %d (%zu bytes)", in, st.bytes);
    CHECK_RC(plait_barrier(plait_comm_world()));
}

static void after_finalize(void)
{
    int flag = -1;
    unsigned char b = 0;
    t_case = "after plait_finalize";
    CHECK_RC(plait_initialized(&flag));
    CHECK(flag == 0, "plait_initialized after finalize: %d", flag);
    CHECK(plait_comm_world() == NULL, "plait_comm_world() after finalize is not NULL");
    EXPECT_ERR(plait_send(&b, 1, PLAIT_BYTE, 0, 0, plait_comm_world()), PLAIT_ERR_STATE, NULL);
    EXPECT_ERR(plait_barrier(plait_comm_world()), PLAIT_ERR_STATE, NULL);
    EXPECT_ERR(plait_finalize(), PLAIT_ERR_STATE, NULL);
    EXPECT_ERR(plait_init(), PLAIT_ERR_STATE, NULL);
    CHECK(plait_strerror(PLAIT_ERR_STATE)[0] != '\0', "strerror after finalize");
}

static void stale_handle(void)
{
    plait_comm_t d = NULL, stale;
    int r = -1;
    t_case = "stale copy of a freed communicator";
    CHECK_RC(plait_comm_dup(plait_comm_world(), &d));
    stale = d;
    CHECK_RC(plait_comm_free(&d));
    EXPECT_ERR2(plait_comm_rank(stale, &r), PLAIT_ERR_STATE, PLAIT_ERR_ARG, "comm|free");
    EXPECT_ERR2(plait_send(&r, 1, PLAIT_INT32, 0, 0, stale), PLAIT_ERR_STATE, PLAIT_ERR_ARG, "comm|free");

    /* a copy of a request handle after plait_wait freed it: the memory keeps
     * its freed mark until reused (nothing allocates in between here) */
    t_case = "stale copy of a freed request";
    {
        plait_request_t rq = NULL, copy, two[2];
        int v = 5, got = 0;
        CHECK_RC(plait_irecv(&got, 1, PLAIT_INT32, rank, 3, plait_comm_world(), &rq));
        copy = rq;
        CHECK_RC(plait_send(&v, 1, PLAIT_INT32, rank, 3, plait_comm_world()));
        CHECK_RC(plait_wait(&rq, NULL));
        CHECK(rq == NULL && got == 5, "wait: handle %p, got %d", (void *)rq, got);
        EXPECT_ERR2(plait_wait(&copy, NULL), PLAIT_ERR_STATE, PLAIT_ERR_STATE, "freed");
        int done = 0;
        EXPECT_ERR2(plait_test(&copy, &done, NULL), PLAIT_ERR_STATE, PLAIT_ERR_STATE, "freed");
        two[0] = NULL;
        two[1] = copy;
        EXPECT_ERR2(plait_waitall(2, two, NULL), PLAIT_ERR_STATE, PLAIT_ERR_STATE, "reqs[1]|freed");
    }
}

int main(int argc, char **argv)
{
    int stale = argc > 1 && strcmp(argv[1], "--stale") == 0;
    int unreceived = argc > 1 && strcmp(argv[1], "--unreceived") == 0;
    const char *s = getenv("PLAIT_TEST_SEED");
    if (s && *s) t_seed = strtoull(s, NULL, 0);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!stale && !unreceived) before_init();
    t_init(&rank, &size);
    if (unreceived) {
        char msg[100] = {0};
        plait_comm_t d1 = NULL, d2 = NULL;
        int last = size - 1;
        t_case = "sends nobody receives";
        for (int i = 0; i < 3 && rank == 0 && size > 1; i++)
            CHECK_RC(plait_send(msg, sizeof msg, PLAIT_BYTE, last, 9, plait_comm_world()));
        /* on a dup the last rank frees after they arrived (the barrier
         * comes behind them from rank 0): plait_comm_free warns */
        CHECK_RC(plait_comm_dup(plait_comm_world(), &d1));
        CHECK_RC(plait_comm_dup(plait_comm_world(), &d2));
        for (int i = 0; i < 2 && rank == 0 && size > 1; i++)
            CHECK_RC(plait_send(msg, 50, PLAIT_BYTE, last, 4, d1));
        CHECK_RC(plait_barrier(d1));
        CHECK_RC(plait_comm_free(&d1));
        /* on a dup the last rank freed before rank 0 sent: finalize warns */
        if (rank == last)
            CHECK_RC(plait_comm_free(&d2));
        CHECK_RC(plait_barrier(plait_comm_world()));
        if (rank == 0 && size > 1)
            CHECK_RC(plait_send(msg, 60, PLAIT_BYTE, last, 5, d2));
        if (rank != last)
            CHECK_RC(plait_comm_free(&d2));
        /* a receive rank 0 posts and never completes: finalize warns (not
         * in the sanitized build, where its request is a leak on purpose) */
        plait_request_t forgotten = NULL;
        char never[8];
        if (rank == 0 && !getenv("PLAIT_TEST_SANITIZED"))
            CHECK_RC(plait_irecv(never, sizeof never, PLAIT_BYTE, PLAIT_ANY_SOURCE, 77,
                                 plait_comm_world(), &forgotten));
        t_finalize();
        if (rank == 0) printf("pt2pt_errors --unreceived: %d ranks ok\n", size);
        return 0;
    }
    if (stale) {
        stale_handle();
    } else {
        init_twice();
        bad_p2p_args();
        bad_comm_args();
        codes();
        per_thread_error();
        still_usable();
    }
    t_finalize();
    if (!stale) after_finalize();
    if (rank == 0) printf("pt2pt_errors%s: %d ranks ok\n", stale ? " --stale" : "", size);
    return 0;
}
