/*
 * comm_split -- communicator split / dup / free.
 * For every new communicator the expected membership is computed here from the
 * split rule (color, then (key, parent rank)); the test checks rank and size,
 * runs a ring exchange on it (status.source must be the rank in that
 * communicator, the payload tells which world rank sent it) while a message
 * with the same tag is pending on the parent (isolation), and runs
 * plait_barrier and plait_ibarrier on it. Barriers are checked for real with a
 * counter in shared memory (all ranks are on this host): after the k-th
 * barrier on a communicator of n ranks the counter is in [k*n, k*n + n - 1].
 * Cases: color rank%3 with reversed keys, PLAIT_UNDEFINED -> NULL, one color
 * with tied keys, nested split, dup of a split, 100 dup/split/free cycles, a
 * receive still posted when its communicator is freed, and 10000
 * dup/use/free cycles whose memory must stay flat.
 */
#include "common.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAXR   64
#define NSLOTS 64

static int rank, size;
static _Atomic long *counters;     /* NSLOTS barrier counters shared by all ranks */
static int rounds[NSLOTS];

typedef struct { int n; int world[MAXR]; } members_t;   /* world ranks, in new-rank order */

/* --------------------------------------------------------- shared counters */

static void counters_map(void)
{
    char name[64];
    int fd;
    t_case = "shared-memory barrier counters";
    if (rank == 0) {
        snprintf(name, sizeof name, "/plait-test-split-%d", (int)getpid());
        fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
        CHECK(fd >= 0, "shm_open(%s) failed", name);
        CHECK(ftruncate(fd, 4096) == 0, "ftruncate");
        for (int r = 1; r < size; r++) CHECK_RC(plait_send(name, sizeof name, PLAIT_BYTE, r, 1, plait_comm_world()));
    } else {
        CHECK_RC(plait_recv(name, sizeof name, PLAIT_BYTE, 0, 1, plait_comm_world(), NULL));
        fd = shm_open(name, O_RDWR, 0600);
        CHECK(fd >= 0, "shm_open(%s) failed", name);
    }
    counters = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(counters != MAP_FAILED, "mmap");
    close(fd);
    CHECK_RC(plait_barrier(plait_comm_world()));
    if (rank == 0) shm_unlink(name);   /* every rank has it mapped now */
}

/* One barrier (blocking or ibarrier + test loop) on comm of n ranks, checked. */
static void barrier_check(plait_comm_t comm, int slot, int n, int nonblocking)
{
    long k = ++rounds[slot], v;
    atomic_fetch_add(&counters[slot], 1);
    if (nonblocking) {
        plait_request_t req;
        int done = 0;
        CHECK_RC(plait_ibarrier(comm, &req));
        while (!done) CHECK_RC(plait_test(&req, &done, NULL));
        CHECK(req == NULL, "ibarrier request not NULL after completion");
    } else {
        CHECK_RC(plait_barrier(comm));
    }
    v = atomic_load(&counters[slot]);
    CHECK(v >= k * n && v <= k * n + n - 1, "%s #%ld on %d ranks returned with the entry counter "
          "at %ld: expected %ld..%ld", nonblocking ? "ibarrier" : "barrier", k, n, v, k * n, k * n + n - 1);
}

/* ---------------------------------------------------------------- helpers */

/* Members of my color after split of parent (members p) with color[i], key[i] per parent rank i. */
static void expect_split(const members_t *p, const int *color, const int *key, int mycolor, members_t *out)
{
    out->n = 0;
    for (int i = 0; i < p->n; i++)   /* insertion sort by (key, parent rank) */
        if (color[i] == mycolor) {
            int j = out->n++;
            while (j > 0) {
                int prev = -1;
                for (int q = 0; q < p->n; q++) if (p->world[q] == out->world[j - 1]) prev = q;
                if (key[prev] <= key[i]) break;
                out->world[j] = out->world[j - 1];
                j--;
            }
            out->world[j] = p->world[i];
        }
}

static int index_of(const members_t *m, int world)
{
    for (int i = 0; i < m->n; i++) if (m->world[i] == world) return i;
    return -1;
}

/*
 * Checks rank/size, ring traffic (isolated from `parent`: the same neighbours
 * exchange a message with the same tag on the parent), barrier + ibarrier.
 */
static void exercise(plait_comm_t comm, const members_t *m, plait_comm_t parent,
                     const members_t *pm, int slot, int tag)
{
    int r = -1, n = -1, me = index_of(m, rank);
    CHECK_RC(plait_comm_rank(comm, &r));
    CHECK_RC(plait_comm_size(comm, &n));
    CHECK(r == me && n == m->n, "rank %d size %d, expected rank %d size %d", r, n, me, m->n);

    int dst = (r + 1) % n, src = (r + n - 1) % n, wsrc = m->world[src];
    /* The same neighbours, addressed by their ranks in the parent (where
     * ranks left out of comm, e.g. by PLAIT_UNDEFINED, take no part). */
    int pdst = index_of(pm, m->world[dst]), psrc = index_of(pm, wsrc);
    unsigned char out[300], pout[300], in[300 + T_GUARD];
    size_t len = 100 + (size_t)tag % 150;
    plait_request_t req[2];
    plait_status_t st;
    /* Same tag on the parent first: a receive on comm must not take it. */
    t_fill(pout, len, t_key(9, (uint64_t)rank, (uint64_t)pm->world[pdst], (uint64_t)tag));
    CHECK_RC(plait_isend(pout, len, PLAIT_BYTE, pdst, tag, parent, &req[0]));
    t_fill(out, len, t_key(8, (uint64_t)rank, (uint64_t)m->world[dst], (uint64_t)tag));
    CHECK_RC(plait_isend(out, len, PLAIT_BYTE, dst, tag, comm, &req[1]));
    t_poison(in, sizeof in);
    CHECK_RC(plait_recv(in, 300, PLAIT_BYTE, PLAIT_ANY_SOURCE, PLAIT_ANY_TAG, comm, &st));
    CHECK(st.source == src && st.tag == tag && st.bytes == len, "ring on the new communicator: "
          "status {%d, %d, %zu}, expected {%d (world %d), %d, %zu}", st.source, st.tag, st.bytes,
          src, wsrc, tag, len);
    CHECK_RECV(in, len, 300, t_key(8, (uint64_t)wsrc, (uint64_t)rank, (uint64_t)tag),
               "ring message from rank %d (world %d) on the new communicator", src, wsrc);
    t_poison(in, sizeof in);
    CHECK_RC(plait_recv(in, 300, PLAIT_BYTE, psrc, tag, parent, &st));
    CHECK_RECV(in, len, 300, t_key(9, (uint64_t)pm->world[psrc], (uint64_t)rank, (uint64_t)tag),
               "parent message from %d", psrc);
    CHECK_RC(plait_waitall(2, req, NULL));
    barrier_check(comm, slot, n, 0);
    barrier_check(comm, slot, n, 1);
    barrier_check(comm, slot, n, 0);
}

/* ------------------------------------------------------------------ cases */

/* Resident set size in KiB (/proc/self/status VmRSS), or -1. */
static long rss_kib(void)
{
    char line[256];
    long v = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &v) == 1) break;
    fclose(f);
    return v;
}

/*
 * A communicator freed while a receive on it is still posted: the receive
 * completes later with the right data (the library may release the
 * communicator only after that request is freed), and a stale copy of the
 * handle still fails with PLAIT_ERR_STATE once it is released.
 */
static void pending_across_free(void)
{
    plait_comm_t d, stale, more;
    plait_request_t rq = NULL;
    int got = -1, want, r = -1;
    t_case = "receive posted on a communicator freed before the message comes";
    CHECK_RC(plait_comm_dup(plait_comm_world(), &d));
    stale = d;
    CHECK_RC(plait_irecv(&got, 1, PLAIT_INT32, (rank + size - 1) % size, 7, d, &rq));
    CHECK_RC(plait_barrier(plait_comm_world()));   /* every rank posted */
    want = 1000 + rank;
    CHECK_RC(plait_send(&want, 1, PLAIT_INT32, (rank + 1) % size, 7, d));
    CHECK_RC(plait_comm_free(&d));                 /* the receive may still be open */
    CHECK_RC(plait_comm_dup(plait_comm_world(), &more));
    CHECK_RC(plait_wait(&rq, NULL));
    CHECK(got == 1000 + (rank + size - 1) % size, "received %d, expected %d", got,
          1000 + (rank + size - 1) % size);
    CHECK_RC(plait_comm_free(&more));              /* releases both */
    CHECK(plait_comm_rank(stale, &r) == PLAIT_ERR_STATE,
          "a released communicator's stale handle did not give PLAIT_ERR_STATE");
}

/*
 * Communicators made, used and freed in a loop must not grow the process:
 * each iteration dups the world, runs an allreduce and a ring exchange on
 * the copy and frees it. Memory is compared between iteration CHURN_FROM
 * (warm: allocator and pools settled) and the end; before freed
 * communicators were released it grew by about 350 bytes per iteration
 * (~3 MB here).
 */
#define CHURN_ITERS 10000
#define CHURN_FROM  1000
#define CHURN_MAX_GROWTH_KIB 1024

static void churn(void)
{
    long before = -1, after;
    t_case = "10000 dup/allreduce/ring/free cycles: memory stays flat";
    for (int i = 0; i < CHURN_ITERS; i++) {
        plait_comm_t d;
        int v = rank, sum = -1, in = -1;
        if (i == CHURN_FROM) before = rss_kib();
        CHECK_RC(plait_comm_dup(plait_comm_world(), &d));
        CHECK_RC(plait_allreduce(&v, &sum, 1, PLAIT_INT32, PLAIT_SUM, d));
        CHECK(sum == size * (size - 1) / 2, "iteration %d: allreduce gave %d", i, sum);
        if (size > 1) {
            plait_request_t rq;
            CHECK_RC(plait_irecv(&in, 1, PLAIT_INT32, (rank + size - 1) % size, i % 100, d, &rq));
            CHECK_RC(plait_send(&v, 1, PLAIT_INT32, (rank + 1) % size, i % 100, d));
            CHECK_RC(plait_wait(&rq, NULL));
            CHECK(in == (rank + size - 1) % size, "iteration %d: ring gave %d", i, in);
        }
        CHECK_RC(plait_comm_free(&d));
    }
    after = rss_kib();
    CHECK(before > 0 && after > 0, "VmRSS not readable");
    CHECK(after - before <= CHURN_MAX_GROWTH_KIB,
          "resident memory grew by %ld KiB over %d communicators (%ld -> %ld KiB)",
          after - before, CHURN_ITERS - CHURN_FROM, before, after);
}

int main(void)
{
    members_t world, m1, m2, m3, m4;
    int color[MAXR], key[MAXR];
    plait_comm_t c1, c2, c3, c4, c5;
    t_init(&rank, &size);
    CHECK(size <= MAXR, "at most %d ranks", MAXR);
    counters_map();
    world.n = size;
    for (int i = 0; i < size; i++) world.world[i] = i;

    t_case = "world barriers";
    for (int i = 0; i < 3; i++) barrier_check(plait_comm_world(), 0, size, i % 2);

    t_case = "split color rank%3, key -rank (reverse order)";
    for (int i = 0; i < size; i++) { color[i] = i % 3; key[i] = -i; }
    expect_split(&world, color, key, rank % 3, &m1);
    CHECK_RC(plait_comm_split(plait_comm_world(), rank % 3, -rank, &c1));
    CHECK(c1 != NULL, "split returned NULL for a defined color");
    exercise(c1, &m1, plait_comm_world(), &world, 1 + rank % 3, 11);

    t_case = "split with PLAIT_UNDEFINED for rank%4==3, tied keys";
    for (int i = 0; i < size; i++) { color[i] = i % 4 == 3 ? PLAIT_UNDEFINED : 0; key[i] = 0; }
    c2 = (plait_comm_t)&color;   /* must be overwritten */
    CHECK_RC(plait_comm_split(plait_comm_world(), color[rank], 0, &c2));
    if (color[rank] == PLAIT_UNDEFINED) {
        CHECK(c2 == NULL, "color PLAIT_UNDEFINED gave %p, expected NULL", (void *)c2);
    } else {
        expect_split(&world, color, key, 0, &m2);
        CHECK(c2 != NULL, "split returned NULL for color 0");
        exercise(c2, &m2, plait_comm_world(), &world, 4, 12);
    }

    t_case = "nested split of the rank%3 communicator";
    {
        int r1 = index_of(&m1, rank);
        for (int i = 0; i < m1.n; i++) { color[i] = i % 2; key[i] = (i * 7) % 3; }
        expect_split(&m1, color, key, r1 % 2, &m3);
        CHECK_RC(plait_comm_split(c1, r1 % 2, (r1 * 7) % 3, &c3));
        exercise(c3, &m3, c1, &m1, 10 + 2 * (rank % 3) + r1 % 2, 13);
    }

    t_case = "dup of a split communicator";
    CHECK_RC(plait_comm_dup(c1, &c4));
    CHECK(c4 != NULL && c4 != c1, "dup returned %p", (void *)c4);
    exercise(c4, &m1, c1, &m1, 20 + rank % 3, 14);

    t_case = "one color, keys (size - rank) % 3 with ties";
    for (int i = 0; i < size; i++) { color[i] = 5; key[i] = (size - i) % 3; }
    expect_split(&world, color, key, 5, &m4);
    CHECK_RC(plait_comm_split(plait_comm_world(), 5, (size - rank) % 3, &c5));
    exercise(c5, &m4, plait_comm_world(), &world, 30, 15);

    t_case = "barriers interleaved on every communicator";
    for (int i = 0; i < 4; i++) {
        barrier_check(c1, 1 + rank % 3, m1.n, i % 2);
        barrier_check(c3, 10 + 2 * (rank % 3) + index_of(&m1, rank) % 2, m3.n, i % 2);
        barrier_check(plait_comm_world(), 0, size, i % 2);
        barrier_check(c5, 30, m4.n, i % 2);
        barrier_check(c4, 20 + rank % 3, m1.n, i % 2);
    }

    t_case = "free";
    CHECK_RC(plait_comm_free(&c3));
    CHECK_RC(plait_comm_free(&c4));
    CHECK_RC(plait_comm_free(&c1));
    if (c2) CHECK_RC(plait_comm_free(&c2));
    CHECK_RC(plait_comm_free(&c5));
    CHECK(!c1 && !c2 && !c3 && !c4 && !c5, "comm_free did not set every handle to NULL");

    t_case = "100 dup/split/free cycles";
    for (int i = 0; i < 100; i++) {
        plait_comm_t d, s;
        CHECK_RC(plait_comm_dup(plait_comm_world(), &d));
        CHECK_RC(plait_comm_split(d, rank % 2, rank, &s));
        if (i % 25 == 0) {
            for (int q = 0; q < size; q++) { color[q] = q % 2; key[q] = q; }
            expect_split(&world, color, key, rank % 2, &m1);
            exercise(s, &m1, d, &world, 40 + rank % 2, 16 + i);
        }
        CHECK_RC(plait_comm_free(&s));
        CHECK_RC(plait_comm_free(&d));
    }
    pending_across_free();
    churn();
    barrier_check(plait_comm_world(), 0, size, 0);
    if (rank == 0) printf("comm_split: %d ranks ok\n", size);
    munmap((void *)counters, 4096);
    t_finalize();
    return 0;
}
