/*
 * lifecycle.c -- plait_init, plait_finalize, plait_abort and friends. They sit
 * in the collectives layer because finalize is a barrier over the world.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll/pcoll.h"

static pthread_mutex_t lifecycle_lock = PTHREAD_MUTEX_INITIALIZER;

_Static_assert(PCOLL_ST_N <= sizeof ((ppt_state_t *)0)->coll_stats / sizeof(uint64_t),
               "ppt_state_t.coll_stats holds every counter");

/* PLAIT_STATS' line of the collectives: which paths the calls took, to see
 * whether small ones stay off messages. */
static void coll_stats_print(ppt_state_t *s, FILE *f)
{
    uint64_t n[PCOLL_ST_N];
    pthread_mutex_lock(&s->lock);   /* (counted under it) */
    memcpy(n, s->coll_stats, sizeof n);
    pthread_mutex_unlock(&s->lock);
    fprintf(f, "plait stats, rank %d: collectives: %llu on the shared-memory area (%llu of them "
            "non-blocking), %llu as a direct exchange of 2 ranks, %llu on the schedule engine "
            "(%llu of them non-blocking)\n", s->job.rank,
            (unsigned long long)(n[PCOLL_ST_AREA] + n[PCOLL_ST_AREA_NB]),
            (unsigned long long)n[PCOLL_ST_AREA_NB], (unsigned long long)n[PCOLL_ST_PAIR],
            (unsigned long long)(n[PCOLL_ST_SCHED] + n[PCOLL_ST_SCHED_NB]),
            (unsigned long long)n[PCOLL_ST_SCHED_NB]);
}

/* World's collective state that a blocking collective would otherwise make
 * at its first call: the shared-memory area of a one-host world and the
 * host map of one that spans hosts. Both take every rank (a few small
 * messages), which a non-blocking call may not wait for, so a program whose
 * first collectives on world are non-blocking ran them on the slower message
 * paths until its first blocking one. Every rank is here, just past the
 * launcher's fence. A failure of these messages (a peer died, PLAIT_TIMEOUT)
 * fails plait_init. */
static int world_prepare(void)
{
    ppt_state_t *s = ppt_get();
    int rc;
    pthread_mutex_lock(&s->lock);
    rc = pcoll_area_prepare_locked(s, s->world, "plait_init");
    if (rc == PLAIT_OK)
        rc = pcoll_hier_prepare_locked(s, s->world, "plait_init");
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int plait_init(void)
{
    int rc;
    pthread_mutex_lock(&lifecycle_lock);
    rc = ppt_init();
    if (rc == PLAIT_OK) {
        pcoll_select_reset();
        ppt_get()->coll_stats_print = coll_stats_print;
        if ((rc = world_prepare()) != PLAIT_OK) {
            char why[512];
            snprintf(why, sizeof why, "%s", prt_err_text());
            ppt_fini();
            prt_err(rc, "%s", why);
        }
    }
    pthread_mutex_unlock(&lifecycle_lock);
    return rc;
}

int plait_finalize(void)
{
    ppt_state_t *s;
    int rc, brc;
    pthread_mutex_lock(&lifecycle_lock);
    if (!(s = ppt_enter(&rc, "plait_finalize"))) {
        pthread_mutex_unlock(&lifecycle_lock);
        return rc;
    }
    ppt_async_stop(s);   /* (before the lock: it may be waiting for it) */
    /* Nobody may tear down while a peer still needs its memory or frames. */
    pthread_mutex_lock(&s->lock);
    brc = pcoll_barrier_locked(s, s->world, "plait_finalize", PPT_TAG_FINALIZE);
    if (brc == PLAIT_OK)
        brc = ppt_quiesce_locked(s, s->cfg.timeout_s > 0 ? s->cfg.timeout_s : 30);
    if (brc == PLAIT_OK)   /* every rank's sends are in by now */
        ppt_report_unreceived_locked(s);
    ppt_notice_sweep_locked(s, 1);
    ppt_report_requests(s);
    pthread_mutex_unlock(&s->lock);
    rc = ppt_fini();
    pcoll_pool_drain();
    pthread_mutex_unlock(&lifecycle_lock);
    return brc != PLAIT_OK ? brc : rc;
}

int plait_initialized(int *flag)
{
    if (!flag)
        return prt_err(PLAIT_ERR_ARG, "plait_initialized: flag is NULL");
    *flag = ppt_get() != NULL;
    return PLAIT_OK;
}

void plait_abort(int exit_code, const char *reason)
{
    ppt_state_t *s = ppt_get();
    const char *env_rank = getenv("PMIX_RANK");   /* before init / after finalize */
    char line[600], who[32];
    int n;
    if (!reason || !reason[0])
        reason = "(no reason given)";   /* here and in the launcher's message alike */
    if (s)
        snprintf(who, sizeof who, "%d", s->job.rank);
    else
        snprintf(who, sizeof who, "%.16s", env_rank && env_rank[0] ? env_rank : "?");
    n = snprintf(line, sizeof line, "plait[%s]: plait_abort(%d): %s\n", who, exit_code, reason);
    if (write(STDERR_FILENO, line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1)) < 0) {
        /* stderr is gone: the exit status still tells */
    }
    prt_boot_abort(s ? &s->job : NULL, exit_code, reason);
}

int plait_version(int *major, int *minor, int *patch)
{
    if (!major || !minor || !patch)
        return prt_err(PLAIT_ERR_ARG, "plait_version: %s is NULL",
                       !major ? "major" : !minor ? "minor" : "patch");
    *major = PLAIT_VERSION_MAJOR;
    *minor = PLAIT_VERSION_MINOR;
    *patch = PLAIT_VERSION_PATCH;
    return PLAIT_OK;
}
