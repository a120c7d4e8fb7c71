/* Raw PMIx client for multi-host plaitrun tests (tests/netns/t-hosts.sh).
 *
 *   pmix_hosts [NKEYS]
 *   pmix_hosts nojoin R   rank R (by $PMIX_RANK) exits 0 at once, without
 *                         PMIx_Init; the others run as above and wait for
 *                         it in the first fence (plaitrun must end the job)
 *
 * Every rank:
 *  - checks the job view: PMIX_LOCAL_PEERS lists exactly the ranks whose
 *    PMIX_HOSTNAME is this rank's host, PMIX_LOCAL_SIZE counts them, and
 *    PMIX_LOCAL_RANK is this rank's place in that list;
 *  - modex at scale: puts NKEYS (default 1000) string keys plus a byte
 *    object, commits, fences with data collection, and reads every key of
 *    every rank back;
 *  - direct modex: puts one more key, fences without data collection, and
 *    reads that key from the next rank (on another host, the daemons fetch
 *    it on demand).
 * Prints "rank R of N on HOST: LOCALSIZE local, NKEYS keys ok" and exits 0;
 * exits 10+ with a message on stderr when a check fails. */
#include <pmix.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pmix_proc_t me;

#define CHECK(cond, code, ...)                                              \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "pmix_hosts[%u]: ", me.rank);                   \
            fprintf(stderr, __VA_ARGS__);                                   \
            fputc('\n', stderr);                                            \
            exit(code);                                                     \
        }                                                                   \
    } while (0)

static pmix_value_t *get(const pmix_proc_t *who, const char *key)
{
    pmix_value_t *v = NULL;
    pmix_status_t rc = PMIx_Get(who, key, NULL, 0, &v);
    CHECK(rc == PMIX_SUCCESS && v, 11, "PMIx_Get(%s) of rank %u: %s", key, who->rank,
          PMIx_Error_string(rc));
    return v;
}

static uint32_t get_u32(const pmix_proc_t *who, const char *key)
{
    pmix_value_t *v = get(who, key);
    uint32_t out = v->type == PMIX_UINT32 ? v->data.uint32
                 : v->type == PMIX_UINT16 ? v->data.uint16
                 : v->type == PMIX_PROC_RANK ? v->data.rank : (uint32_t)-1;
    CHECK(out != (uint32_t)-1, 11, "PMIx_Get(%s): unexpected type %d", key, (int)v->type);
    PMIX_VALUE_RELEASE(v);
    return out;
}

static char *get_str(const pmix_proc_t *who, const char *key)
{
    pmix_value_t *v = get(who, key);
    CHECK(v->type == PMIX_STRING, 12, "PMIx_Get(%s): type %d, not a string", key, (int)v->type);
    char *s = strdup(v->data.string);
    PMIX_VALUE_RELEASE(v);
    return s;
}

static void fence(bool collect)
{
    pmix_info_t info;
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    pmix_status_t rc = PMIx_Fence(NULL, 0, &info, 1);
    CHECK(rc == PMIX_SUCCESS, 14, "PMIx_Fence(collect=%d): %s", collect, PMIx_Error_string(rc));
    PMIX_INFO_DESTRUCT(&info);
}

/* Local peers must be exactly the ranks on my host. */
static uint32_t check_locality(uint32_t size, const char *host)
{
    pmix_proc_t wild;
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    uint32_t lsize = get_u32(&wild, PMIX_LOCAL_SIZE), lrank = get_u32(&me, PMIX_LOCAL_RANK);
    char *peers = get_str(&wild, PMIX_LOCAL_PEERS), *save = NULL;
    uint32_t n = 0, mypos = (uint32_t)-1;
    for (char *t = strtok_r(peers, ",", &save); t; t = strtok_r(NULL, ",", &save), n++) {
        pmix_proc_t p;
        PMIX_LOAD_PROCID(&p, me.nspace, (pmix_rank_t)atoi(t));
        char *h = get_str(&p, PMIX_HOSTNAME);
        CHECK(strcmp(h, host) == 0, 16, "local peer %s is on host %s, I am on %s", t, h, host);
        free(h);
        if (p.rank == me.rank)
            mypos = n;
    }
    uint32_t onhost = 0;
    for (uint32_t r = 0; r < size; r++) {
        pmix_proc_t p;
        PMIX_LOAD_PROCID(&p, me.nspace, r);
        char *h = get_str(&p, PMIX_HOSTNAME);
        onhost += strcmp(h, host) == 0;
        free(h);
    }
    free(peers);
    CHECK(n == lsize && n == onhost, 16, "%u local peers, local size %u, %u ranks on %s", n,
          lsize, onhost, host);
    CHECK(mypos == lrank, 16, "local rank %u but place %u in the local peers", lrank, mypos);
    return lsize;
}

static void modex(uint32_t size, int nkeys)
{
    char key[64], val[96];
    for (int k = 0; k < nkeys; k++) {
        snprintf(key, sizeof(key), "t.key.%d", k);
        snprintf(val, sizeof(val), "rank-%u-key-%d", me.rank, k);
        pmix_value_t v;
        PMIX_VALUE_LOAD(&v, val, PMIX_STRING);
        CHECK(PMIx_Put(PMIX_GLOBAL, key, &v) == PMIX_SUCCESS, 13, "PMIx_Put(%s)", key);
        PMIX_VALUE_DESTRUCT(&v);
    }
    unsigned char card[300];
    for (size_t i = 0; i < sizeof(card); i++)
        card[i] = (unsigned char)(me.rank * 7 + i);
    pmix_value_t bv;
    PMIX_VALUE_CONSTRUCT(&bv);
    bv.type = PMIX_BYTE_OBJECT;
    bv.data.bo.bytes = (char *)card;
    bv.data.bo.size = sizeof(card);
    CHECK(PMIx_Put(PMIX_GLOBAL, "t.card", &bv) == PMIX_SUCCESS, 13, "PMIx_Put(t.card)");
    CHECK(PMIx_Commit() == PMIX_SUCCESS, 13, "PMIx_Commit");
    fence(true);
    for (uint32_t r = 0; r < size; r++) {
        pmix_proc_t p;
        PMIX_LOAD_PROCID(&p, me.nspace, r);
        for (int k = 0; k < nkeys; k++) {
            snprintf(key, sizeof(key), "t.key.%d", k);
            snprintf(val, sizeof(val), "rank-%u-key-%d", r, k);
            char *got = get_str(&p, key);
            CHECK(strcmp(got, val) == 0, 15, "rank %u %s is '%s', expected '%s'", r, key, got, val);
            free(got);
        }
        pmix_value_t *v = get(&p, "t.card");
        CHECK(v->type == PMIX_BYTE_OBJECT && v->data.bo.size == sizeof(card), 15,
              "rank %u t.card: type %d size %zu", r, (int)v->type, v->data.bo.size);
        for (size_t i = 0; i < sizeof(card); i++)
            CHECK((unsigned char)v->data.bo.bytes[i] == (unsigned char)(r * 7 + i), 15,
                  "rank %u t.card byte %zu differs", r, i);
        PMIX_VALUE_RELEASE(v);
    }
}

static void direct_modex(uint32_t size)
{
    char val[64];
    snprintf(val, sizeof(val), "late-%u", me.rank);
    pmix_value_t v;
    PMIX_VALUE_LOAD(&v, val, PMIX_STRING);
    CHECK(PMIx_Put(PMIX_GLOBAL, "t.late", &v) == PMIX_SUCCESS, 13, "PMIx_Put(t.late)");
    PMIX_VALUE_DESTRUCT(&v);
    CHECK(PMIx_Commit() == PMIX_SUCCESS, 13, "PMIx_Commit");
    fence(false);
    pmix_proc_t p;
    PMIX_LOAD_PROCID(&p, me.nspace, (me.rank + 1) % size);
    snprintf(val, sizeof(val), "late-%u", p.rank);
    char *got = get_str(&p, "t.late");
    CHECK(strcmp(got, val) == 0, 15, "rank %u t.late is '%s', expected '%s'", p.rank, got, val);
    free(got);
}

int main(int argc, char **argv)
{
    int nkeys = argc > 1 ? atoi(argv[1]) : 1000;
    if (argc > 2 && strcmp(argv[1], "nojoin") == 0) {
        const char *r = getenv("PMIX_RANK");
        if (r && strcmp(r, argv[2]) == 0)
            return 0;
        nkeys = 10;     /* the others stop in the first fence: keep the puts short */
    }
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    CHECK(rc == PMIX_SUCCESS, 10, "PMIx_Init: %s", PMIx_Error_string(rc));
    pmix_proc_t wild;
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    uint32_t size = get_u32(&wild, PMIX_JOB_SIZE);
    char *host = get_str(&me, PMIX_HOSTNAME);
    uint32_t lsize = check_locality(size, host);
    modex(size, nkeys);
    direct_modex(size);
    printf("rank %u of %u on %s: %u local, %d keys ok\n", me.rank, size, host, lsize, nkeys);
    free(host);
    fence(false);                          /* nobody leaves while others still ask */
    PMIx_Finalize(NULL, 0);
    return 0;
}
