/* peer_check [MODE]: a plait program for tests/peers/t-*.sh, run under mpirun or srun.
 *
 *   (no MODE)  checks that plait's world rank and size are the ones the launcher gave
 *              this process (OMPI_COMM_WORLD_RANK/SIZE under mpirun, SLURM_PROCID/
 *              SLURM_NTASKS under srun, PMIX_RANK anywhere), then passes a token
 *              around the ring, does a barrier and prints "peer_check rank R/N ok".
 *              A mismatch means the library's PMIx bootstrap misread the launcher.
 *   exit1      after a barrier, the last rank exits 1 without finalizing while the
 *              others block in a receive from it: the launcher must end the job and
 *              exit non-zero (t-*.sh checks that it does, and promptly).
 * Exit status 0 on success, 1 on any failed check.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plait.h"

static int rank = -1, size = -1;

static void fail(const char *what, int rc) __attribute__((noreturn));
static void fail(const char *what, int rc)
{
    fprintf(stderr, "peer_check rank %d: %s failed: %s: %s\n", rank, what,
            plait_strerror(rc), plait_last_error());
    exit(1);
}

#define TRY(call) do { int rc_ = (call); if (rc_ != PLAIT_OK) fail(#call, rc_); } while (0)

/* env_int: the integer in environment variable NAME, or -1 when unset. */
static int env_int(const char *name)
{
    const char *s = getenv(name);
    return s && *s ? atoi(s) : -1;
}

/* check_env: the launcher's view of this process must match plait's. */
static int check_env(void)
{
    static const char *const pairs[][2] = {
        { "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE" },
        { "SLURM_PROCID", "SLURM_NTASKS" },
        { "PMIX_RANK", NULL },
    };
    int bad = 0;

    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        int r = env_int(pairs[i][0]);
        int n = pairs[i][1] ? env_int(pairs[i][1]) : -1;
        if (r >= 0 && r != rank) {
            fprintf(stderr, "peer_check: plait rank %d but %s=%d\n", rank, pairs[i][0], r);
            bad = 1;
        }
        if (n >= 0 && n != size) {
            fprintf(stderr, "peer_check rank %d: plait size %d but %s=%d\n", rank, size,
                    pairs[i][1], n);
            bad = 1;
        }
    }
    return bad;
}

/* ring: each rank sends (rank * 1000 + size) to its right neighbour and checks what
 * its left neighbour sent, so every rank has really talked to another one. */
static int ring(void)
{
    plait_comm_t w = plait_comm_world();
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int out = rank * 1000 + size, in = -1;
    plait_request_t req;

    TRY(plait_irecv(&in, 1, PLAIT_INT32, left, 42, w, &req));
    TRY(plait_send(&out, 1, PLAIT_INT32, right, 42, w));
    TRY(plait_wait(&req, NULL));
    if (in != left * 1000 + size) {
        fprintf(stderr, "peer_check rank %d: got %d from rank %d, expected %d\n", rank, in,
                left, left * 1000 + size);
        return 1;
    }
    return 0;
}

/* exit1: the last rank leaves with status 1; the others wait for it forever. */
static void exit1(void)
{
    plait_comm_t w = plait_comm_world();
    int buf;

    if (rank == size - 1) {
        fprintf(stderr, "peer_check rank %d: exiting 1 without plait_finalize\n", rank);
        exit(1);
    }
    int rc = plait_recv(&buf, 1, PLAIT_INT32, size - 1, 7, w, NULL);
    /* Only reached when the library notices the death before the launcher ends us. */
    fprintf(stderr, "peer_check rank %d: receive from dead rank returned %s\n", rank,
            plait_strerror(rc));
    exit(rc == PLAIT_ERR_PEER ? 3 : 1);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int bad;

    TRY(plait_init());
    TRY(plait_comm_rank(plait_comm_world(), &rank));
    TRY(plait_comm_size(plait_comm_world(), &size));
    bad = check_env();
    TRY(plait_barrier(plait_comm_world()));
    if (strcmp(mode, "exit1") == 0) {
        if (size < 2) {
            fprintf(stderr, "peer_check: exit1 needs 2 or more ranks\n");
            return 1;
        }
        exit1();
    }
    bad |= ring();
    TRY(plait_barrier(plait_comm_world()));
    TRY(plait_finalize());
    printf("peer_check rank %d/%d %s\n", rank, size, bad ? "FAILED" : "ok");
    return bad;
}
