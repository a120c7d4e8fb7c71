/* pmix_probe: a raw PMIx client that shows what a launcher's PMIx server provides.
 *
 * Run it under any PMIx launcher (plaitrun, srun --mpi=pmix, mpirun). Each rank:
 *   1. PMIx_Init, then reads the job/node keys the plait bootstrap relies on and prints
 *      them; a key the launcher does not provide is printed as "missing KEY (status)".
 *   2. Puts a string and a 512-byte blob, commits, fences with data collection and reads
 *      both from every rank, checking the contents (the "collected modex").
 *   3. Puts another key, fences WITHOUT data collection and reads it from every rank
 *      (the "direct modex": the server must fetch remote data on demand).
 *   4. Finalizes and prints "pmix_probe rank R/N ok".
 * PMIX_PROBE_FORMS=1 also prints, on rank 0, which lookup forms each key answers to;
 * PMIX_PROBE_ABORT_RANK=r makes rank r call PMIx_Abort(7) right after init;
 * PMIX_PROBE_EXIT_RANK=r makes rank r exit(1) there without finalizing.
 * Exit status 0 when every check passed. Missing informational keys do not fail the
 * run (they are facts about the launcher), but a missing rank or job size does.
 *
 * Build: cc -o pmix_probe pmix_probe.c $(pkg-config --cflags --libs pmix)
 */
#include <pmix.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOB_LEN 512

static pmix_proc_t me;

/* blob_byte: the pattern rank r puts at offset i, so every reader can check it. */
static uint8_t blob_byte(pmix_rank_t r, size_t i)
{
    return (uint8_t)(r * 131u + i * 7u + 1u);
}

/* probe_get: PMIx_Get that never waits for data that will not come (PMIX_OPTIONAL). */
static pmix_status_t probe_get(pmix_rank_t rank, const char *key, pmix_value_t **val)
{
    pmix_proc_t p;
    pmix_info_t info;
    bool yes = true;
    pmix_status_t rc;

    PMIX_PROC_LOAD(&p, me.nspace, rank);
    PMIX_INFO_LOAD(&info, PMIX_OPTIONAL, &yes, PMIX_BOOL);
    rc = PMIx_Get(&p, key, &info, 1, val);
    PMIX_INFO_DESTRUCT(&info);
    return rc;
}

/* get_u32: a uint32-like key, tried first at job level (wildcard) then on this rank,
 * because launchers differ in where they store node/job information. Returns false and
 * prints "missing" when neither has it. */
static bool get_u32(const char *key, uint32_t *out)
{
    pmix_rank_t tries[2] = { PMIX_RANK_WILDCARD, me.rank };
    pmix_status_t rc = PMIX_ERR_NOT_FOUND;

    for (int t = 0; t < 2; t++) {
        pmix_value_t *v = NULL;
        rc = probe_get(tries[t], key, &v);
        if (rc != PMIX_SUCCESS)
            continue;
        bool ok = true;
        switch (v->type) {
        case PMIX_UINT32: *out = v->data.uint32; break;
        case PMIX_UINT16: *out = v->data.uint16; break;
        case PMIX_INT:    *out = (uint32_t)v->data.integer; break;
        case PMIX_PROC_RANK: *out = v->data.rank; break;
        default: ok = false; break;
        }
        if (!ok)
            printf("pmix_probe rank %u key %s has unexpected type %s\n", me.rank, key,
                   PMIx_Data_type_string(v->type));
        PMIX_VALUE_RELEASE(v);
        if (ok)
            return true;
    }
    printf("pmix_probe rank %u missing %s (%s)\n", me.rank, key, PMIx_Error_string(rc));
    return false;
}

/* get_str: like get_u32 for string keys; returns a malloc'd copy or NULL. */
static char *get_str(const char *key)
{
    pmix_rank_t tries[2] = { me.rank, PMIX_RANK_WILDCARD };
    pmix_status_t rc = PMIX_ERR_NOT_FOUND;

    for (int t = 0; t < 2; t++) {
        pmix_value_t *v = NULL;
        rc = probe_get(tries[t], key, &v);
        if (rc != PMIX_SUCCESS)
            continue;
        char *s = NULL;
        if (v->type == PMIX_STRING && v->data.string)
            s = strdup(v->data.string);
        else
            printf("pmix_probe rank %u key %s has unexpected type %s\n", me.rank, key,
                   PMIx_Data_type_string(v->type));
        PMIX_VALUE_RELEASE(v);
        if (s)
            return s;
    }
    printf("pmix_probe rank %u missing %s (%s)\n", me.rank, key, PMIx_Error_string(rc));
    return NULL;
}

/* check_peers: PMIX_LOCAL_PEERS is a comma-separated rank list; it must hold
 * local_size entries including this rank. Returns false only on an inconsistency. */
static bool check_peers(const char *peers, uint32_t local_size, bool have_local_size)
{
    uint32_t n = 0;
    bool found = false;
    char *copy = strdup(peers), *save = NULL;

    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        n++;
        if (strtoul(tok, NULL, 10) == me.rank)
            found = true;
    }
    free(copy);
    if (!found || (have_local_size && n != local_size)) {
        printf("pmix_probe rank %u bad PMIX_LOCAL_PEERS '%s' (local size %u)\n", me.rank,
               peers, local_size);
        return false;
    }
    return true;
}

/* report_info: print what the launcher told this rank. Returns false when the job
 * size cannot be read (nothing else can work then). */
static bool report_info(uint32_t *size)
{
    uint32_t local_rank = 0, local_size = 0, node_rank = 0, univ = 0, nodeid = 0;
    bool ok = true;

    if (!get_u32(PMIX_JOB_SIZE, size))
        return false;
    bool have_lr = get_u32(PMIX_LOCAL_RANK, &local_rank);
    bool have_ls = get_u32(PMIX_LOCAL_SIZE, &local_size);
    bool have_nr = get_u32(PMIX_NODE_RANK, &node_rank);
    bool have_us = get_u32(PMIX_UNIV_SIZE, &univ);
    bool have_ni = get_u32(PMIX_NODEID, &nodeid);
    char *host = get_str(PMIX_HOSTNAME);
    char *peers = get_str(PMIX_LOCAL_PEERS);
    char *tmpdir = get_str(PMIX_TMPDIR);
    char *nsdir = get_str(PMIX_NSDIR);

    if (peers)
        ok = check_peers(peers, local_size, have_ls);
    if (have_lr && have_ls && local_rank >= local_size) {
        printf("pmix_probe rank %u local rank %u >= local size %u\n", me.rank, local_rank,
               local_size);
        ok = false;
    }
    printf("pmix_probe rank %u nspace=%s size=%u local_rank=%s%u local_size=%s%u "
           "node_rank=%s%u univ_size=%s%u nodeid=%s%u host=%s peers=%s tmpdir=%s nsdir=%s\n",
           me.rank, me.nspace, *size, have_lr ? "" : "?", local_rank, have_ls ? "" : "?",
           local_size, have_nr ? "" : "?", node_rank, have_us ? "" : "?", univ,
           have_ni ? "" : "?", nodeid, host ? host : "?", peers ? peers : "?",
           tmpdir ? tmpdir : "?", nsdir ? nsdir : "?");
    free(host);
    free(peers);
    free(tmpdir);
    free(nsdir);
    return ok;
}

/* put_values: publish this rank's string and blob under the given key prefix. */
static bool put_values(const char *prefix)
{
    char key[PMIX_MAX_KEYLEN + 1], str[64];
    uint8_t blob[BLOB_LEN];
    pmix_value_t v;
    pmix_status_t rc;

    for (size_t i = 0; i < BLOB_LEN; i++)
        blob[i] = blob_byte(me.rank, i);
    snprintf(str, sizeof str, "%s-from-%u", prefix, me.rank);
    snprintf(key, sizeof key, "plait.%s.str", prefix);
    PMIX_VALUE_LOAD(&v, str, PMIX_STRING);
    rc = PMIx_Put(PMIX_GLOBAL, key, &v);
    PMIX_VALUE_DESTRUCT(&v);
    if (rc != PMIX_SUCCESS)
        goto fail;

    pmix_byte_object_t bo = { .bytes = (char *)blob, .size = BLOB_LEN };
    snprintf(key, sizeof key, "plait.%s.blob", prefix);
    PMIX_VALUE_LOAD(&v, &bo, PMIX_BYTE_OBJECT);
    rc = PMIx_Put(PMIX_GLOBAL, key, &v);
    PMIX_VALUE_DESTRUCT(&v);
    if (rc != PMIX_SUCCESS)
        goto fail;
    rc = PMIx_Commit();
    if (rc == PMIX_SUCCESS)
        return true;
fail:
    printf("pmix_probe rank %u put/commit %s failed: %s\n", me.rank, prefix,
           PMIx_Error_string(rc));
    return false;
}

/* check_rank_values: read rank r's string and blob (plain PMIx_Get, so a direct modex
 * may ask the server) and compare with what r must have put. */
static bool check_rank_values(const char *prefix, pmix_rank_t r)
{
    char key[PMIX_MAX_KEYLEN + 1], want[64];
    pmix_proc_t p;
    pmix_value_t *v = NULL;
    pmix_status_t rc;
    bool ok;

    PMIX_PROC_LOAD(&p, me.nspace, r);
    snprintf(key, sizeof key, "plait.%s.str", prefix);
    snprintf(want, sizeof want, "%s-from-%u", prefix, r);
    rc = PMIx_Get(&p, key, NULL, 0, &v);
    ok = rc == PMIX_SUCCESS && v->type == PMIX_STRING && strcmp(v->data.string, want) == 0;
    if (rc == PMIX_SUCCESS)
        PMIX_VALUE_RELEASE(v);
    if (!ok) {
        printf("pmix_probe rank %u get %s from rank %u: %s\n", me.rank, key, r,
               rc == PMIX_SUCCESS ? "wrong value" : PMIx_Error_string(rc));
        return false;
    }

    snprintf(key, sizeof key, "plait.%s.blob", prefix);
    rc = PMIx_Get(&p, key, NULL, 0, &v);
    ok = rc == PMIX_SUCCESS && v->type == PMIX_BYTE_OBJECT && v->data.bo.size == BLOB_LEN;
    for (size_t i = 0; ok && i < BLOB_LEN; i++)
        ok = (uint8_t)v->data.bo.bytes[i] == blob_byte(r, i);
    if (rc == PMIX_SUCCESS)
        PMIX_VALUE_RELEASE(v);
    if (!ok)
        printf("pmix_probe rank %u get %s from rank %u: %s\n", me.rank, key, r,
               rc == PMIX_SUCCESS ? "wrong value" : PMIx_Error_string(rc));
    return ok;
}

/* exchange: put, fence (collecting data or not), read every rank's values. */
static bool exchange(const char *prefix, bool collect, uint32_t size)
{
    pmix_info_t info;
    pmix_status_t rc;
    bool ok = put_values(prefix);

    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    rc = PMIx_Fence(NULL, 0, &info, 1);
    PMIX_INFO_DESTRUCT(&info);
    if (rc != PMIX_SUCCESS) {
        printf("pmix_probe rank %u fence (%s) failed: %s\n", me.rank, prefix,
               PMIx_Error_string(rc));
        return false;
    }
    for (uint32_t r = 0; ok && r < size; r++)
        ok = check_rank_values(prefix, r);
    return ok;
}

/* report_forms: for each key, which lookup forms the launcher answers: on the
 * job (wildcard rank), on this rank, on rank 0. Printed by rank 0 only; this is
 * what a bootstrap must know to ask for each key the way every launcher serves it. */
static void report_forms(void)
{
    static const char *const keys[] = {
        PMIX_JOB_SIZE, PMIX_UNIV_SIZE, PMIX_LOCAL_SIZE, PMIX_LOCAL_RANK, PMIX_NODE_RANK,
        PMIX_LOCAL_PEERS, PMIX_HOSTNAME, PMIX_NODEID, PMIX_NUM_NODES, PMIX_APPNUM,
        PMIX_TMPDIR, PMIX_NSDIR, PMIX_LOCALITY_STRING, PMIX_CPUSET, PMIX_JOBID,
        PMIX_MAX_PROCS, PMIX_NODE_LIST, PMIX_LOCAL_CPUSETS, PMIX_PROCID,
    };
    static const char *const form_names[] = { "job", "self", "rank0" };
    pmix_rank_t forms[3] = { PMIX_RANK_WILDCARD, me.rank, 0 };

    if (me.rank != 0)
        return;
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        char line[256] = "";
        size_t used = 0;
        for (int f = 0; f < 3; f++) {
            pmix_value_t *v = NULL;
            pmix_status_t rc = probe_get(forms[f], keys[k], &v);
            used += (size_t)snprintf(line + used, sizeof line - used, " %s=%s",
                                     form_names[f],
                                     rc == PMIX_SUCCESS ? PMIx_Data_type_string(v->type) : "-");
            if (rc == PMIX_SUCCESS)
                PMIX_VALUE_RELEASE(v);
            if (used >= sizeof line)
                break;
        }
        printf("pmix_probe key %-26s%s\n", keys[k], line);
    }
}

/* maybe_abort: PMIX_PROBE_ABORT_RANK=r makes rank r call PMIx_Abort(7) while the
 * others wait in a fence; PMIX_PROBE_EXIT_RANK=r makes rank r exit(1) there.
 * Either way the launcher must end them all and exit non-zero. */
static void maybe_abort(void)
{
    const char *s = getenv("PMIX_PROBE_ABORT_RANK");

    const char *e = getenv("PMIX_PROBE_EXIT_RANK");

    if (e && strtoul(e, NULL, 10) == me.rank) {
        /* A rank that dies without finalizing: the launcher must notice by itself. */
        printf("pmix_probe rank %u exiting 1 without finalize\n", me.rank);
        exit(1);
    }
    if (!s || strtoul(s, NULL, 10) != me.rank)
        return;
    printf("pmix_probe rank %u calling PMIx_Abort(7)\n", me.rank);
    PMIx_Abort(7, "pmix_probe: abort requested by PMIX_PROBE_ABORT_RANK", NULL, 0);
    /* PMIx_Abort may return when the server ignores it; still leave with 7. */
    _exit(7);
}

int main(void)
{
    char host[256] = "";
    uint32_t size = 0;
    bool ok;
    pmix_status_t rc;

    setvbuf(stdout, NULL, _IOLBF, 0);
    gethostname(host, sizeof host - 1);
    rc = PMIx_Init(&me, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        printf("pmix_probe PMIx_Init failed on %s: %s\n", host, PMIx_Error_string(rc));
        return 1;
    }
    if (getenv("PMIX_PROBE_FORMS"))
        report_forms();
    maybe_abort();
    ok = report_info(&size);
    if (size > 0) {
        ok = exchange("collect", true, size) && ok;
        ok = exchange("direct", false, size) && ok;
    }
    /* A last fence so no rank finalizes while a peer may still fetch its data. */
    rc = PMIx_Fence(NULL, 0, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        printf("pmix_probe rank %u final fence failed: %s\n", me.rank, PMIx_Error_string(rc));
        ok = false;
    }
    rc = PMIx_Finalize(NULL, 0);
    if (rc != PMIX_SUCCESS) {
        printf("pmix_probe rank %u finalize failed: %s\n", me.rank, PMIx_Error_string(rc));
        ok = false;
    }
    printf("pmix_probe rank %u/%u %s\n", me.rank, size, ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
