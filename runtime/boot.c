/*
 * boot.c -- joining the job: PMIx client (plaitrun, srun --mpi=pmix, mpirun)
 * or a singleton when the process was not started by a PMIx launcher.
 *
 * Business cards go through PMIx Put/Commit/Fence/Get. The per-job key is made
 * by rank 0 from getrandom() and read by everyone after the first fence.
 */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <pmix.h>

#include "runtime/prt.h"

#define PRT_BOOT_KEY_NAME "plait.jobkey"

/* A blob a singleton put for itself (no server to hold it). */
typedef struct boot_blob {
    struct boot_blob *next;
    char             *key;
    void             *data;
    size_t            len;
} boot_blob_t;

typedef struct {
    pmix_proc_t  self;
    boot_blob_t *local;    /* singleton store */
} boot_pmix_t;

static int boot_pmix_err(pmix_status_t rc, const char *what)
{
    return prt_err(PLAIT_ERR_TRANSPORT, "PMIx %s failed: %s", what, PMIx_Error_string(rc));
}

/* Integer value of any PMIx integer type. */
static int boot_value_int(const pmix_value_t *v, long *out)
{
    switch (v->type) {
    case PMIX_UINT8:  *out = v->data.uint8;  return 0;
    case PMIX_UINT16: *out = v->data.uint16; return 0;
    case PMIX_UINT32: *out = v->data.uint32; return 0;
    case PMIX_UINT64: *out = (long)v->data.uint64; return 0;
    case PMIX_INT:    *out = v->data.integer; return 0;
    case PMIX_INT32:  *out = v->data.int32;  return 0;
    case PMIX_UINT:   *out = v->data.uint;   return 0;
    case PMIX_PROC_RANK: *out = v->data.rank; return 0;
    default: return -1;
    }
}

static int boot_get_int(const pmix_proc_t *proc, const char *key, long *out)
{
    pmix_value_t *v = NULL;
    pmix_status_t rc = PMIx_Get(proc, key, NULL, 0, &v);
    int bad;
    if (rc != PMIX_SUCCESS)
        return boot_pmix_err(rc, key);
    bad = boot_value_int(v, out);
    PMIX_VALUE_RELEASE(v);
    return bad ? prt_err(PLAIT_ERR_TRANSPORT, "PMIx key %s has an unexpected type", key) : PLAIT_OK;
}

/* Parses "0,3,5" into job->local_peers; checks every entry and our presence. */
static int boot_parse_peers(prt_job_t *job, const char *list)
{
    int n = 1, found = 0;
    for (const char *c = list; *c; c++)
        n += (*c == ',');
    job->local_peers = calloc((size_t)n, sizeof(int));
    if (!job->local_peers)
        return prt_err(PLAIT_ERR_NOMEM, "no memory for %d local peers", n);
    job->local_size = 0;
    for (const char *c = list; *c;) {
        char *end;
        long r = strtol(c, &end, 10);
        if (end == c || r < 0 || r >= job->size)
            return prt_err(PLAIT_ERR_TRANSPORT, "PMIx local peer list '%s' is malformed", list);
        found |= (r == job->rank);
        job->local_peers[job->local_size++] = (int)r;
        c = (*end == ',') ? end + 1 : end;
        if (*end && *end != ',')
            return prt_err(PLAIT_ERR_TRANSPORT, "PMIx local peer list '%s' is malformed", list);
    }
    return found ? PLAIT_OK : prt_err(PLAIT_ERR_TRANSPORT, "PMIx local peers '%s' lack rank %d",
                                      list, job->rank);
}

static int boot_local_peers(prt_job_t *job, const pmix_proc_t *wild)
{
    char self[24];
    pmix_value_t *v = NULL;
    pmix_status_t rc = PMIx_Get(wild, PMIX_LOCAL_PEERS, NULL, 0, &v);
    int ret;
    if (rc == PMIX_SUCCESS && v->type == PMIX_STRING) {
        ret = boot_parse_peers(job, v->data.string);
        PMIX_VALUE_RELEASE(v);
        return ret;
    }
    if (rc == PMIX_SUCCESS)
        PMIX_VALUE_RELEASE(v);
    /* A launcher that does not say: treat every other rank as remote. */
    prt_log(PRT_LOG_WARN, "PMIx gives no local peer list; assuming no other rank shares this host");
    snprintf(self, sizeof self, "%d", job->rank);
    return boot_parse_peers(job, self);
}

/* File-name-safe form of the namespace, shared with plaitrun's cleanup glob. */
static void boot_make_tag(prt_job_t *job)
{
    size_t i;
    for (i = 0; job->nspace[i] && i < 40; i++) {
        char c = job->nspace[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
        job->tag[i] = ok ? c : '_';
    }
    job->tag[i] = '\0';
}

static int boot_random_key(uint64_t *key)
{
    if (getrandom(key, sizeof *key, 0) != (ssize_t)sizeof *key)
        return prt_err(PLAIT_ERR_INTERNAL, "getrandom failed: %s", strerror(errno));
    return PLAIT_OK;
}

static int boot_singleton(prt_job_t *job, boot_pmix_t *bp)
{
    job->singleton = 1;
    job->rank = 0;
    job->size = 1;
    job->local_rank = 0;
    snprintf(job->nspace, sizeof job->nspace, "singleton.%d", (int)getpid());
    boot_make_tag(job);
    PRT_CHECK(boot_parse_peers(job, "0"));
    (void)bp;
    return boot_random_key(&job->key);
}

/* Rank 0 publishes the job key with its first card; everyone reads it after
 * the first fence (prt_boot_read_key). */
static int boot_put_key(prt_job_t *job)
{
    if (job->rank != 0)
        return PLAIT_OK;
    PRT_CHECK(boot_random_key(&job->key));
    return prt_boot_put(job, PRT_BOOT_KEY_NAME, &job->key, sizeof job->key);
}

int prt_boot_read_key(prt_job_t *job)
{
    void *blob = NULL;
    size_t len = 0;
    if (job->singleton)
        return PLAIT_OK;
    PRT_CHECK(prt_boot_get(job, 0, PRT_BOOT_KEY_NAME, &blob, &len));
    if (len != sizeof job->key) {
        free(blob);
        return prt_err(PLAIT_ERR_TRANSPORT, "job key from rank 0 has %zu bytes, expected %zu",
                       len, sizeof job->key);
    }
    memcpy(&job->key, blob, sizeof job->key);
    free(blob);
    return PLAIT_OK;
}

/*
 * The launcher's PMIx server gone while this rank runs (mpirun or its
 * daemon killed with SIGKILL, which cannot pass the signal on): nothing
 * will end this rank, and its peers over shared memory may keep it busy for
 * ever, so it ends itself. plaitrun's ranks also have PR_SET_PDEATHSIG.
 * Not during plait_finalize, whose PMIx_Finalize closes the connection.
 */
static _Atomic int boot_finalizing;
static int boot_rank = -1;

static void boot_lost_server(size_t id, pmix_status_t status, const pmix_proc_t *source,
                             pmix_info_t info[], size_t ninfo, pmix_info_t *results,
                             size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc,
                             void *cbdata)
{
    char msg[160];
    int n;
    (void)id; (void)status; (void)source; (void)info; (void)ninfo; (void)results; (void)nresults;
    if (!atomic_load(&boot_finalizing)) {
        n = snprintf(msg, sizeof msg, "plait: rank %d lost its launcher (the PMIx server closed "
                     "the connection): ending\n", boot_rank);
        if (n > 0 && write(2, msg, (size_t)n) < 0)
            n = 0;
        _exit(1);
    }
    if (cbfunc)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static void boot_watch_server(void)
{
    pmix_status_t codes[] = {PMIX_ERR_LOST_CONNECTION,
#ifdef PMIX_ERR_LOST_CONNECTION_TO_SERVER
                             PMIX_ERR_LOST_CONNECTION_TO_SERVER,
#endif
    };
    pmix_status_t rc = PMIx_Register_event_handler(codes, sizeof codes / sizeof codes[0], NULL, 0,
                                                   boot_lost_server, NULL, NULL);
    if (rc < 0)
        prt_log(PRT_LOG_DEBUG, "PMIx: no handler for a lost server (%s)", PMIx_Error_string(rc));
}

static int boot_pmix(prt_job_t *job, boot_pmix_t *bp)
{
    pmix_proc_t wild;
    long v;
    pmix_status_t rc = PMIx_Init(&bp->self, NULL, 0);
    if (rc != PMIX_SUCCESS)
        return prt_err(PLAIT_ERR_TRANSPORT,
                       "PMIx_Init failed (%s): started by a launcher (PMIX_NAMESPACE is set) but its "
                       "PMIx server cannot be reached", PMIx_Error_string(rc));
    snprintf(job->nspace, sizeof job->nspace, "%s", bp->self.nspace);
    boot_make_tag(job);
    job->rank = (int)bp->self.rank;
    boot_rank = job->rank;
    atomic_store(&boot_finalizing, 0);
    boot_watch_server();
    PMIX_PROC_LOAD(&wild, bp->self.nspace, PMIX_RANK_WILDCARD);
    PRT_CHECK(boot_get_int(&wild, PMIX_JOB_SIZE, &v));
    job->size = (int)v;
    if (boot_get_int(&bp->self, PMIX_LOCAL_RANK, &v) != PLAIT_OK)
        v = -1;
    PRT_CHECK(boot_local_peers(job, &wild));
    job->local_rank = -1;
    for (int i = 0; i < job->local_size; i++)
        if (job->local_peers[i] == job->rank)
            job->local_rank = i;
    if (v >= 0 && v != job->local_rank)
        prt_log(PRT_LOG_DEBUG, "PMIx local rank %ld differs from position %d in local peers",
                v, job->local_rank);
    return boot_put_key(job);
}

int prt_boot_init(prt_job_t *job, int singleton_ok, double timeout_s)
{
    boot_pmix_t *bp = calloc(1, sizeof *bp);
    int rc;
    if (!bp)
        return prt_err(PLAIT_ERR_NOMEM, "no memory for bootstrap state");
    memset(job, 0, sizeof *job);
    job->timeout_s = timeout_s;
    job->pmix = bp;
    if (getenv("PMIX_NAMESPACE") == NULL) {
        if (!singleton_ok) {
            rc = prt_err(PLAIT_ERR_STATE, "not started by a PMIx launcher (plaitrun, srun --mpi=pmix, "
                                          "mpirun) and PLAIT_SINGLETON=0");
            goto err_free;
        }
        rc = boot_singleton(job, bp);
    } else {
        rc = boot_pmix(job, bp);
    }
    if (rc != PLAIT_OK)
        goto err_free;
    return PLAIT_OK;
err_free:
    free(job->local_peers);
    job->local_peers = NULL;
    free(bp);
    job->pmix = NULL;
    return rc;
}

int prt_boot_put(prt_job_t *job, const char *key, const void *blob, size_t len)
{
    boot_pmix_t *bp = job->pmix;
    pmix_value_t val;
    pmix_status_t rc;
    if (job->singleton) {
        boot_blob_t *b = calloc(1, sizeof *b);
        if (!b || !(b->key = strdup(key)) || !(b->data = malloc(len ? len : 1))) {
            if (b) { free(b->key); free(b); }
            return prt_err(PLAIT_ERR_NOMEM, "no memory for a %zu-byte card", len);
        }
        memcpy(b->data, blob, len);
        b->len = len;
        b->next = bp->local;
        bp->local = b;
        return PLAIT_OK;
    }
    PMIX_VALUE_CONSTRUCT(&val);
    val.type = PMIX_BYTE_OBJECT;
    val.data.bo.bytes = (char *)blob;
    val.data.bo.size = len;
    rc = PMIx_Put(PMIX_GLOBAL, key, &val);   /* PMIx copies the value */
    return rc == PMIX_SUCCESS ? PLAIT_OK : boot_pmix_err(rc, "Put");
}

static int boot_fence(prt_job_t *job, bool collect)
{
    boot_pmix_t *bp = job->pmix;
    pmix_proc_t wild;
    pmix_info_t info[2];
    size_t ninfo = 1;
    pmix_status_t rc;
    if (job->singleton)
        return PLAIT_OK;
    PMIX_PROC_LOAD(&wild, bp->self.nspace, PMIX_RANK_WILDCARD);
    PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    int secs = (int)(job->timeout_s + 0.999);   /* PMIx takes whole seconds */
    if (job->timeout_s > 0) {   /* a rank that died before joining must not hang the rest */
        PMIX_INFO_LOAD(&info[ninfo], PMIX_TIMEOUT, &secs, PMIX_INT);
        ninfo++;
    }
    rc = PMIx_Fence(&wild, 1, info, ninfo);
    for (size_t i = 0; i < ninfo; i++)
        PMIX_INFO_DESTRUCT(&info[i]);
    if (rc == PMIX_ERR_TIMEOUT)
        return prt_err(PLAIT_ERR_TIMEOUT, "PMIx Fence timed out after %d s (PLAIT_TIMEOUT, in "
                       "whole seconds): some rank had not called plait_init by then (plaitrun "
                       "names it when the job ends)", secs);
    return rc == PMIX_SUCCESS ? PLAIT_OK : boot_pmix_err(rc, "Fence");
}

int prt_boot_commit_fence(prt_job_t *job)
{
    if (!job->singleton) {
        pmix_status_t rc = PMIx_Commit();
        if (rc != PMIX_SUCCESS)
            return boot_pmix_err(rc, "Commit");
    }
    return boot_fence(job, true);
}

int prt_boot_fence(prt_job_t *job) { return boot_fence(job, false); }

static int boot_get_local(boot_pmix_t *bp, const char *key, void **blob, size_t *len)
{
    for (boot_blob_t *b = bp->local; b; b = b->next) {
        if (strcmp(b->key, key) == 0) {
            *blob = malloc(b->len ? b->len : 1);
            if (!*blob)
                return prt_err(PLAIT_ERR_NOMEM, "no memory for card %s", key);
            memcpy(*blob, b->data, b->len);
            *len = b->len;
            return PLAIT_OK;
        }
    }
    return prt_err(PLAIT_ERR_INTERNAL, "card %s was never put", key);
}

int prt_boot_get(prt_job_t *job, int rank, const char *key, void **blob, size_t *len)
{
    boot_pmix_t *bp = job->pmix;
    pmix_proc_t proc;
    pmix_value_t *v = NULL;
    pmix_status_t rc;
    if (job->singleton)
        return boot_get_local(bp, key, blob, len);
    PMIX_PROC_LOAD(&proc, bp->self.nspace, (pmix_rank_t)rank);
    rc = PMIx_Get(&proc, key, NULL, 0, &v);
    if (rc != PMIX_SUCCESS)
        return prt_err(PLAIT_ERR_TRANSPORT, "PMIx_Get of %s from rank %d failed: %s", key, rank,
                       PMIx_Error_string(rc));
    if (v->type != PMIX_BYTE_OBJECT) {
        PMIX_VALUE_RELEASE(v);
        return prt_err(PLAIT_ERR_TRANSPORT, "PMIx key %s of rank %d has the wrong type", key, rank);
    }
    *len = v->data.bo.size;
    *blob = malloc(*len ? *len : 1);
    if (*blob)
        memcpy(*blob, v->data.bo.bytes, *len);
    PMIX_VALUE_RELEASE(v);
    return *blob ? PLAIT_OK : prt_err(PLAIT_ERR_NOMEM, "no memory for card %s", key);
}

/* An exit status keeps only the code's low 8 bits: 256 would read as 0,
 * success, so a code whose low byte is 0 (0 included) ends with status 1.
 * Other launchers get that status too: Open MPI's mpirun exits with the
 * status PMIx_Abort names, and exited 0 for plait_abort(0) and (256).
 * plaitrun (PLAIT_LAUNCHER) gets the code itself, to name it as the rank
 * passed it, and makes the same status of it. */
void prt_boot_abort(prt_job_t *job, int code, const char *reason)
{
    int status = code & 0xff ? code & 0xff : 1;
    const char *launcher = getenv("PLAIT_LAUNCHER");
    if (job && job->pmix && !job->singleton)
        PMIx_Abort(launcher && strcmp(launcher, "plaitrun") == 0 ? code : status, reason, NULL, 0);
    _exit(status);
}

int prt_boot_finalize(prt_job_t *job)
{
    boot_pmix_t *bp = job->pmix;
    int ret = PLAIT_OK;
    if (!bp)
        return PLAIT_OK;
    if (!job->singleton) {
        pmix_status_t rc;
        atomic_store(&boot_finalizing, 1);
        rc = PMIx_Finalize(NULL, 0);
        if (rc != PMIX_SUCCESS)
            ret = boot_pmix_err(rc, "Finalize");
    }
    while (bp->local) {
        boot_blob_t *b = bp->local;
        bp->local = b->next;
        free(b->key);
        free(b->data);
        free(b);
    }
    free(bp);
    free(job->local_peers);
    job->pmix = NULL;
    job->local_peers = NULL;
    return ret;
}
