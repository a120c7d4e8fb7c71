/*
 * coll_rootbuf.c -- the root alone refuses a rooted collective for a NULL
 * buffer that only the root needs (reduce's and gather's recvbuf, scatter's
 * sendbuf; bcast's buf, which every rank needs, passed NULL by the root
 * only), the others pass good arguments. The root must get PLAIT_ERR_ARG
 * naming the buffer, the others PLAIT_OK or PLAIT_ERR_ARG (or, over
 * messages, PLAIT_ERR_TRANSPORT for a message a failing peer withdrew, as
 * coll_refuse allows), nobody may wait
 * for ever (run with PLAIT_TIMEOUT=0), and the communicator must stay
 * usable: the next allreduce of seeded random data on it must match a
 * local reference on every rank.
 *
 * Each case runs on three communicators: world (its shared-memory area made
 * in plait_init), a duplicate used once before (its area set up then) and a
 * fresh duplicate (the refused call is its first, in which the others set
 * its area up); blocking and non-blocking forms, 16 elements (the area
 * inside a host) and 65536 (messages), twice each. A test written against
 * API.md alone found the root's refusal leaving the area a call out of
 * step: world's next area call failed on every rank, and 3 ranks of a fresh
 * duplicate hung in their next call. Written against plait.h only; run by t-coll.sh and
 * t-coll-mpirun.sh. The seed: argv[1], else PLAIT_TEST_SEED, else a fixed
 * one; printed. Exit 0 when all held.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plait.h"

static int me, np, failures;

#define FAIL(...) do { fprintf(stderr, "rank %d: FAIL: ", me); fprintf(stderr, __VA_ARGS__); \
                       fputc('\n', stderr); failures++; } while (0)

static const char *kinds[] = {"reduce", "gather", "scatter", "bcast"};

/* The refused call (root: its NULL buffer); non-blocking ones are waited for. */
static int rooted_call(int kind, int nb, size_t count, int root, plait_comm_t c, int32_t *in,
                       int32_t *out)
{
    int at_root = me == root, rc;
    plait_request_t q = NULL;
    int32_t *rb = at_root ? NULL : out, *sb = at_root ? NULL : in;
    switch (kind) {
    case 0:
        rc = nb ? plait_ireduce(in, rb, count, PLAIT_INT32, PLAIT_SUM, root, c, &q)
                : plait_reduce(in, rb, count, PLAIT_INT32, PLAIT_SUM, root, c);
        break;
    case 1:
        rc = nb ? plait_igather(in, rb, count, PLAIT_INT32, root, c, &q)
                : plait_gather(in, rb, count, PLAIT_INT32, root, c);
        break;
    case 2:
        rc = nb ? plait_iscatter(sb, out, count, PLAIT_INT32, root, c, &q)
                : plait_scatter(sb, out, count, PLAIT_INT32, root, c);
        break;
    default:
        rc = nb ? plait_ibcast(rb, count, PLAIT_INT32, root, c, &q)
                : plait_bcast(rb, count, PLAIT_INT32, root, c);
        break;
    }
    return rc == PLAIT_OK && nb ? plait_wait(&q, NULL) : rc;
}

/* Value i of rank r's input of round k (the allreduce after a case). */
static int32_t val(unsigned seed, int k, int r, size_t i)
{
    uint32_t x = seed * 2654435761u ^ (uint32_t)k * 40503u ^ (uint32_t)r * 2246822519u ^
                 (uint32_t)i * 3266489917u;
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    return (int32_t)(x % 100000u);
}

/* The communicator must still work: an allreduce of n seeded values. */
static void still_usable(const char *name, plait_comm_t c, unsigned seed, int k)
{
    enum { N = 37 };
    int32_t in[N], out[N];
    int cr, cn, rc;
    plait_comm_rank(c, &cr);
    plait_comm_size(c, &cn);
    for (size_t i = 0; i < N; i++)
        in[i] = val(seed, k, cr, i);
    memset(out, 0xA5, sizeof out);
    if ((rc = plait_allreduce(in, out, N, PLAIT_INT32, PLAIT_SUM, c)) != PLAIT_OK) {
        FAIL("%s: the next allreduce failed: %s", name, plait_last_error());
        return;
    }
    for (size_t i = 0; i < N; i++) {
        int64_t want = 0;
        for (int r = 0; r < cn; r++)
            want += val(seed, k, r, i);
        if (out[i] != (int32_t)want) {
            FAIL("%s: the next allreduce gave %d at %zu, expected %lld", name, (int)out[i], i,
                 (long long)want);
            return;
        }
    }
}

static void one_case(int kind, int nb, size_t count, int comm_kind, unsigned seed, int k)
{
    static const char *comm_names[] = {"world", "used dup", "fresh dup"};
    int root = np - 1, rc;
    size_t cap = count * (size_t)np;
    int32_t *in = calloc(cap, sizeof *in), *out = malloc(cap * sizeof *out);
    plait_comm_t c = plait_comm_world();
    char name[128];
    snprintf(name, sizeof name, "%s%s of %zu, root %d, %s", nb ? "i" : "", kinds[kind], count,
             root, comm_names[comm_kind]);
    if (!in || !out || (comm_kind && plait_comm_dup(plait_comm_world(), &c) != PLAIT_OK)) {
        FAIL("%s: setup: %s", name, plait_last_error());
        exit(1);
    }
    if (comm_kind == 1)
        still_usable(name, c, seed, -k - 1);
    memset(out, 0xA5, cap * sizeof *out);
    rc = rooted_call(kind, nb, count, root, c, in, out);
    if (me == root) {
        const char *word = kind == 2 ? "sendbuf" : kind == 3 ? "buf" : "recvbuf";
        if (rc != PLAIT_ERR_ARG || !strstr(plait_last_error(), word))
            FAIL("%s: the root got %d '%s', expected PLAIT_ERR_ARG naming %s", name, rc,
                 rc ? plait_last_error() : "", word);
    } else if (rc != PLAIT_OK && rc != PLAIT_ERR_ARG &&
               !(rc == PLAIT_ERR_TRANSPORT && strstr(plait_last_error(), "withdrew"))) {
        /* (over messages, a rank whose matched message a failing peer withdrew
         * before the root's notice came may say so instead, as in coll_refuse) */
        FAIL("%s: got %d (%s): %s", name, rc, plait_strerror(rc), plait_last_error());
    }
    still_usable(name, c, seed, k);
    if (comm_kind && plait_comm_free(&c) != PLAIT_OK)
        FAIL("%s: comm_free: %s", name, plait_last_error());
    free(in);
    free(out);
}

int main(int argc, char **argv)
{
    const char *env = getenv("PLAIT_TEST_SEED");
    unsigned seed = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0)
                  : env && *env ? (unsigned)strtoul(env, NULL, 0) : 20261129u;
    int k = 0;
    if (plait_init() != PLAIT_OK) {
        fprintf(stderr, "plait_init: %s\n", plait_last_error());
        return 1;
    }
    plait_comm_rank(plait_comm_world(), &me);
    plait_comm_size(plait_comm_world(), &np);
    if (me == 0)
        printf("coll_rootbuf: %d ranks, seed %u\n", np, seed);
    for (int rep = 0; rep < 2; rep++)
        for (int comm_kind = 0; comm_kind < 3; comm_kind++)
            for (int kind = 0; kind < 4; kind++)
                for (int nb = 0; nb < 2; nb++)
                    for (size_t count = 16; count <= 65536; count *= 4096)
                        one_case(kind, nb, count, comm_kind, seed, k++);
    plait_barrier(plait_comm_world());
    if (failures)
        fprintf(stderr, "rank %d: coll_rootbuf: %d failures\n", me, failures);
    else if (me == 0)
        printf("coll_rootbuf: ok, %d cases on %d ranks\n", k, np);
    plait_finalize();
    return failures ? 1 : 0;
}
