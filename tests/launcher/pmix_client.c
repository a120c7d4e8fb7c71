/* Raw PMIx client used by t-plaitrun.sh to exercise plaitrun without libplait.
 *
 *   pmix_client [-r RANK|all] [-o sleep] ACTION [ARGS]
 *
 * Every rank: PMIx_Init, checks job size/local size/local rank and
 * PLAIT_LAUNCHER, puts a value, fences, and checks the value of every other
 * rank.  Then the selected rank(s) (-r, default 0) do ACTION; the others
 * finalize and exit 0, or with "-o sleep" sleep 300 s first (so the test
 * sees whether plaitrun ends them).
 *
 * ACTION: ok | exit CODE (after finalize) | signal SIG | nofinalize |
 *         abort CODE | spam LINES LEN | sleep | env VAR VALUE | stdin |
 *         nojoin (exit 0 before PMIx_Init: the others wait in the fence) |
 *         late (no PMIx_Init before 300 s: the others say "rank N joined" and wait
 *         in the fence)
 * Exit 10+ on a failed check, with a message on stderr. */
#include <pmix.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pmix_proc_t me;

#define CHECK(cond, code, ...)                                              \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "pmix_client[%u]: ", me.rank);                  \
            fprintf(stderr, __VA_ARGS__);                                   \
            fputc('\n', stderr);                                            \
            exit(code);                                                     \
        }                                                                   \
    } while (0)

static uint32_t get_u32(const pmix_proc_t *who, const char *key)
{
    pmix_value_t *v = NULL;
    pmix_status_t rc = PMIx_Get(who, key, NULL, 0, &v);
    CHECK(rc == PMIX_SUCCESS && v, 11, "PMIx_Get(%s): %s", key, PMIx_Error_string(rc));
    uint32_t out = 0;
    if (v->type == PMIX_UINT32)
        out = v->data.uint32;
    else if (v->type == PMIX_UINT16)
        out = v->data.uint16;
    else if (v->type == PMIX_PROC_RANK)
        out = v->data.rank;
    else
        CHECK(0, 11, "PMIx_Get(%s): unexpected type %d", key, (int)v->type);
    PMIX_VALUE_RELEASE(v);
    return out;
}

static char *get_str(const pmix_proc_t *who, const char *key)
{
    pmix_value_t *v = NULL;
    pmix_status_t rc = PMIx_Get(who, key, NULL, 0, &v);
    CHECK(rc == PMIX_SUCCESS && v && v->type == PMIX_STRING, 12, "PMIx_Get(%s) from rank %u: %s",
          key, who->rank, PMIx_Error_string(rc));
    char *s = strdup(v->data.string);
    PMIX_VALUE_RELEASE(v);
    return s;
}

/* Put/Commit/Fence/Get: every rank checks every other rank's value. */
static void modex(uint32_t size)
{
    char mine[320];
    snprintf(mine, sizeof(mine), "value-of-rank-%u-in-%s", me.rank, me.nspace);
    pmix_value_t val;
    PMIX_VALUE_LOAD(&val, mine, PMIX_STRING);
    CHECK(PMIx_Put(PMIX_GLOBAL, "plait.test.key", &val) == PMIX_SUCCESS, 13, "PMIx_Put");
    PMIX_VALUE_DESTRUCT(&val);
    CHECK(PMIx_Commit() == PMIX_SUCCESS, 13, "PMIx_Commit");
    pmix_info_t info;
    bool yes = true;
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    pmix_status_t rc = PMIx_Fence(NULL, 0, &info, 1);
    CHECK(rc == PMIX_SUCCESS, 14, "PMIx_Fence: %s", PMIx_Error_string(rc));
    for (uint32_t r = 0; r < size; r++) {
        pmix_proc_t peer;
        PMIX_LOAD_PROCID(&peer, me.nspace, r);
        char want[320];
        snprintf(want, sizeof(want), "value-of-rank-%u-in-%s", r, me.nspace);
        char *got = get_str(&peer, "plait.test.key");
        CHECK(strcmp(got, want) == 0, 15, "rank %u's value is '%s', expected '%s'", r, got, want);
        free(got);
    }
}

static void check_job(uint32_t *size)
{
    pmix_proc_t wild;
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    *size = get_u32(&wild, PMIX_JOB_SIZE);
    uint32_t lsize = get_u32(&wild, PMIX_LOCAL_SIZE);
    uint32_t lrank = get_u32(&me, PMIX_LOCAL_RANK);
    CHECK(me.rank < *size, 16, "rank %u >= size %u", me.rank, *size);
    CHECK(lsize == *size, 16, "local size %u != job size %u", lsize, *size);
    CHECK(lrank == me.rank, 16, "local rank %u != rank %u", lrank, me.rank);
    char want[4096] = "", *peers = get_str(&wild, PMIX_LOCAL_PEERS);
    for (uint32_t r = 0; r < *size && strlen(want) < sizeof(want) - 16; r++)
        snprintf(want + strlen(want), sizeof(want) - strlen(want), r ? ",%u" : "%u", r);
    CHECK(strcmp(peers, want) == 0, 16, "local peers '%s', expected '%s'", peers, want);
    free(peers);
    const char *l = getenv("PLAIT_LAUNCHER");
    CHECK(l && strcmp(l, "plaitrun") == 0, 17, "PLAIT_LAUNCHER is '%s'", l ? l : "(unset)");
}

static void spam(long lines, long len)
{
    /* An odd stdio buffer size makes the writes split lines mid-way. */
    static char obuf[1000], ebuf[777];
    setvbuf(stdout, obuf, _IOFBF, sizeof(obuf));
    setvbuf(stderr, ebuf, _IOFBF, sizeof(ebuf));
    char *line = malloc((size_t)len + 2);
    for (long i = 0; i < lines; i++) {
        for (int s = 0; s < 2; s++) {
            int n = snprintf(line, (size_t)len + 1, "%u:%s:%ld:", me.rank, s ? "err" : "out", i);
            for (long k = n; k < len; k++)
                line[k] = (char)('a' + (i + k) % 26);
            line[len] = '\n';
            fwrite(line, 1, (size_t)len + 1, s ? stderr : stdout);
        }
    }
    free(line);
    fflush(stdout);
    fflush(stderr);
}

static int act(int argc, char **argv, int i)
{
    const char *a = argv[i];
    if (!strcmp(a, "exit")) {
        PMIx_Finalize(NULL, 0);
        return atoi(argv[i + 1]);
    }
    if (!strcmp(a, "signal")) {
        raise(atoi(argv[i + 1]));
        return 20;
    }
    if (!strcmp(a, "nofinalize"))
        return 0;
    if (!strcmp(a, "abort")) {
        char msg[64];
        snprintf(msg, sizeof(msg), "test abort from rank %u", me.rank);
        PMIx_Abort(atoi(argv[i + 1]), msg, NULL, 0);
        for (;;)
            pause();                       /* plaitrun must end us */
    }
    if (!strcmp(a, "sleep")) {
        sleep(300);
        return 21;
    }
    if (!strcmp(a, "spam"))
        spam(atol(argv[i + 1]), atol(argv[i + 2]));
    if (!strcmp(a, "env")) {
        const char *v = getenv(argv[i + 1]);
        CHECK(v && !strcmp(v, argv[i + 2]), 18, "%s is '%s', expected '%s'", argv[i + 1],
              v ? v : "(unset)", argv[i + 2]);
    }
    if (!strcmp(a, "stdin")) {
        char buf[4096];
        size_t n = fread(buf, 1, sizeof(buf) - 1, stdin);
        buf[n] = '\0';
        printf("stdin of rank %u: %s\n", me.rank, buf);
    }
    PMIx_Finalize(NULL, 0);
    return 0;
}

int main(int argc, char **argv)
{
    const char *sel = "0", *others = "normal";
    int i = 1;
    for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
        if (!strcmp(argv[i], "-r"))
            sel = argv[i + 1];
        else if (!strcmp(argv[i], "-o"))
            others = argv[i + 1];
    }
    const char *action = i < argc ? argv[i] : "ok";
    const char *envrank = getenv("PMIX_RANK");
    if (!strcmp(action, "nojoin") && envrank && atoi(envrank) == atoi(sel))
        return 0;
    if (!strcmp(action, "late") && envrank && atoi(envrank) == atoi(sel)) {
        sleep(300);
        return 21;
    }
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    CHECK(rc == PMIX_SUCCESS, 10, "PMIx_Init: %s", PMIx_Error_string(rc));
    if (!strcmp(action, "late")) {   /* (the test signals plaitrun once all others said it) */
        printf("rank %u joined\n", me.rank);
        fflush(stdout);
    }
    uint32_t size;
    check_job(&size);
    modex(size);
    bool chosen = !strcmp(sel, "all") || (uint32_t)atoi(sel) == me.rank;
    if (chosen && strcmp(action, "ok") != 0)
        return act(argc, argv, i);
    if (!chosen && !strcmp(others, "sleep"))
        sleep(300);
    printf("rank %u of %u ok\n", me.rank, size);
    PMIx_Finalize(NULL, 0);
    return 0;
}
