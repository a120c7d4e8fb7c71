/*
 * pt2pt_fault MODE -- a job that must end badly, and promptly; t-pt2pt.sh
 * checks plaitrun's exit status and what it says on stderr.
 *   kill         rank 2 (of 3) raises SIGKILL while ranks 0 and 1 block in a
 *                receive from it;
 *   abort        rank 1 calls plait_abort(7, "test abort") while the others
 *                block in a receive from it;
 *   abort256     the same with plait_abort(256): an exit status keeps 8 bits,
 *                and the job must still fail;
 *   noexit       rank 1 exits 0 without plait_finalize while the others are
 *                in plait_finalize;
 *   early-abort  rank 0 (PMIX_RANK=0) calls plait_abort(5, "abort before
 *                init") before plait_init while the others are in plait_init;
 *   late-init    rank 2 (PMIX_RANK=2) sleeps 300 s before plait_init: the
 *                others' plait_init times out (run with a short PLAIT_TIMEOUT)
 *                and plaitrun names rank 2 as the one that had not joined;
 *   loop         every rank says "looping" and runs barriers for up to 60 s:
 *                t-mpirun.sh kills mpirun with SIGKILL meanwhile, and the
 *                ranks must end themselves (their PMIx server is gone).
 * A survivor whose receive returns (instead of being ended by plaitrun) must
 * get PLAIT_ERR_PEER; it then exits 3 (only finalize/abort are promised then).
 */
#include "common.h"

#include <signal.h>
#include <unistd.h>

static int rank, size;

/* Blocks in a receive from `from`, which never sends. */
static void survivor_wait(int from)
{
    char buf[16];
    int rc = plait_recv(buf, sizeof buf, PLAIT_BYTE, from, 99, plait_comm_world(), NULL);
    if (rc == PLAIT_ERR_PEER) {
        fprintf(stderr, "rank %d: receive from rank %d failed as expected: %s\n", rank, from,
                plait_last_error());
        exit(3);
    }
    FAIL("receive from rank %d (dead or aborting) returned %d (%s): %s; expected PLAIT_ERR_PEER "
         "or to be ended by the launcher", from, rc, plait_strerror(rc), plait_last_error());
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "early-abort") == 0) {
        const char *r = getenv("PMIX_RANK");   /* set by the PMIx server for each child */
        if (r && strcmp(r, "0") == 0) plait_abort(5, "abort before init");
    }
    if (strcmp(mode, "late-init") == 0) {
        const char *r = getenv("PMIX_RANK");
        if (r && strcmp(r, "2") == 0) sleep(300);
    }
    t_init(&rank, &size);
    t_case = mode;
    CHECK_RC(plait_barrier(plait_comm_world()));
    if (strcmp(mode, "kill") == 0) {
        CHECK(size == 3, "kill mode needs 3 ranks");
        if (rank == 2) {
            usleep(200000);   /* let the others block first (not required for correctness) */
            raise(SIGKILL);
        }
        survivor_wait(2);
    } else if (strcmp(mode, "abort") == 0 || strcmp(mode, "abort256") == 0) {
        CHECK(size == 3, "abort mode needs 3 ranks");
        if (rank == 1) {
            usleep(200000);
            plait_abort(strcmp(mode, "abort") == 0 ? 7 : 256, "test abort");
            FAIL("plait_abort returned");
        }
        survivor_wait(1);
    } else if (strcmp(mode, "noexit") == 0) {
        if (rank == 1) {
            printf("rank 1: exiting without plait_finalize\n");
            fflush(stdout);
            _exit(0);
        }
        int rc = plait_finalize();
        FAIL("plait_finalize returned %d (%s) although rank 1 exited without finalize: %s",
             rc, plait_strerror(rc), plait_last_error());
    } else if (strcmp(mode, "early-abort") == 0) {
        survivor_wait(0);
    } else if (strcmp(mode, "late-init") == 0) {
        FAIL("plait_init returned although rank 2 had not called it");
    } else if (strcmp(mode, "loop") == 0) {
        double t0 = plait_wtime();
        printf("rank %d looping\n", rank);
        fflush(stdout);
        while (plait_wtime() - t0 < 60)
            CHECK_RC(plait_barrier(plait_comm_world()));
        FAIL("still running after 60 s: the launcher was not killed, or its loss went unnoticed");
    } else {
        FAIL("unknown mode '%s' (kill|abort|abort256|noexit|early-abort|late-init|loop)", mode);
    }
    return 0;
}
