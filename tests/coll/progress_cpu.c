/*
 * progress_cpu.c -- where the library's threads run (PLAIT_THREAD_CPU).
 *
 *   progress_cpu moved|stay [selfbind]
 *
 * selfbind: every rank binds itself to the first CPU it may use before
 * plait_init (as a user or a launcher might), so the ranks of the host leave
 * the other CPUs spare. Then each rank in turn starts a non-blocking
 * allreduce the others join late, and watches its output without calling
 * plait until the sum arrives: its progress thread made that happen, so it
 * has placed itself by then (and so have the udp engine threads, which do
 * it before their first packet). fromthread: those allreduces start on a
 * thread of the program's own, pinned to a CPU the rank is not bound to;
 * the progress thread must still start on the rank's CPUs.
 * The threads (named plait-progress, plait-udpN) are found in
 * /proc/self/task and their CPU lists read from there, independently of the
 * library; the progress thread must be among them:
 *   moved   each must share no CPU with any rank of the host (their masks
 *           are gathered with plait_allgather) and have at least one
 *   stay    each must have exactly the CPUs of the rank
 * Exit 0 when so, 1 otherwise (with the masks printed).
 */
#define _GNU_SOURCE 1
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "plait.h"
#include "selfbind.h"

static int fail(int rank, const char *what, int rc)
{
    fprintf(stderr, "rank %d: %s: %s (%s)\n", rank, what, plait_strerror(rc), plait_last_error());
    return 1;
}

/* "0-3,8" -> set; 0 when the text made sense. */
static int cpus_parse(const char *text, cpu_set_t *set)
{
    CPU_ZERO(set);
    while (*text && *text != '\n') {
        char *end;
        long a = strtol(text, &end, 10), b = a;
        if (end == text || a < 0 || a >= CPU_SETSIZE)
            return -1;
        if (*end == '-') {
            text = end + 1;
            b = strtol(text, &end, 10);
            if (end == text || b < a || b >= CPU_SETSIZE)
                return -1;
        }
        for (long c = a; c <= b; c++)
            CPU_SET((int)c, set);
        text = *end == ',' ? end + 1 : end;
    }
    return 0;
}

static void cpus_print(const char *name, const cpu_set_t *set)
{
    fprintf(stderr, "  %s:", name);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, set))
            fprintf(stderr, " %d", c);
    fprintf(stderr, "\n");
}

/* The library's threads (plait-progress, plait-udpN): their names and CPU
 * lists, at most cap; returns how many were found. */
static int library_threads(char names[][20], cpu_set_t *sets, int cap)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;
    while (d && n < cap && (e = readdir(d)) != NULL) {
        char path[300], line[512];
        FILE *f;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        if (!(f = fopen(path, "r")))
            continue;
        if (!fgets(line, sizeof line, f) || (strcmp(line, "plait-progress\n") != 0 &&
                                             strncmp(line, "plait-udp", 9) != 0)) {
            fclose(f);
            continue;
        }
        fclose(f);
        line[strcspn(line, "\n")] = '\0';
        snprintf(names[n], sizeof names[n], "%.19s", line);
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        if (!(f = fopen(path, "r")))
            continue;
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "Cpus_allowed_list:", 18) == 0 &&
                cpus_parse(line + 18 + strspn(line + 18, " \t"), &sets[n]) == 0)
                n++;
        fclose(f);
    }
    if (d)
        closedir(d);
    return n;
}

/* Rank k starts an allreduce the others join 50 ms later, so it cannot
 * finish inside the start (a peer's data already there would let it), and
 * watches its output: the sum arrives only by its progress thread, which
 * has placed itself by then. Once per rank. */
typedef struct {
    int rank, size, bad;
} rounds_t;

static void *rounds_main(void *arg)
{
    rounds_t *r = arg;
    volatile float out;
    float in = (float)(r->rank + 1);
    for (int k = 0; k < r->size && !r->bad; k++) {
        struct timespec late = {0, 50000000};
        plait_request_t req;
        int rc;
        if (r->rank != k)
            nanosleep(&late, NULL);
        out = -1.0f;
        rc = plait_iallreduce(&in, (void *)&out, 1, PLAIT_FLOAT32, PLAIT_SUM, plait_comm_world(),
                              &req);
        if (rc != PLAIT_OK) {
            r->bad = fail(r->rank, "plait_iallreduce", rc);
            break;
        }
        for (double t0 = plait_wtime(); out != (float)r->size * (float)(r->size + 1) / 2;) {
            if (plait_wtime() - t0 > 30) {
                fprintf(stderr, "rank %d: the allreduce made no progress in 30 s without "
                        "plait calls\n", r->rank);
                r->bad = 1;
                return NULL;
            }
            sched_yield();
        }
        if ((rc = plait_wait(&req, NULL)) != PLAIT_OK)
            r->bad = fail(r->rank, "plait_wait", rc);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int rank, size, rc, moved, nthreads, progress = 0, bad = 0;
    cpu_set_t own, *all, taken, threads[16], both;
    char names[16][20];
    int fromthread = 0;
    rounds_t r = {0};
    if (argc < 2 || (strcmp(argv[1], "moved") != 0 && strcmp(argv[1], "stay") != 0)) {
        fprintf(stderr, "usage: %s moved|stay [selfbind] [fromthread]\n", argv[0]);
        return 2;
    }
    moved = strcmp(argv[1], "moved") == 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "selfbind") == 0)
            bind_first_cpu();
        fromthread |= strcmp(argv[i], "fromthread") == 0;
    }
    if ((rc = plait_init()) != PLAIT_OK)
        return fail(-1, "plait_init", rc);
    plait_comm_rank(plait_comm_world(), &rank);
    plait_comm_size(plait_comm_world(), &size);
    sched_getaffinity(0, sizeof own, &own);
    all = calloc((size_t)size, sizeof *all);
    r.rank = rank;
    r.size = size;
    if (!all)
        return fail(rank, "calloc", PLAIT_ERR_NOMEM);
    rc = plait_allgather(&own, all, sizeof own, PLAIT_BYTE, plait_comm_world());
    if (rc != PLAIT_OK)
        return fail(rank, "plait_allgather", rc);
    CPU_ZERO(&taken);
    for (int p = 0; p < size; p++)
        CPU_OR(&taken, &taken, &all[p]);
    if (fromthread) {   /* a thread of the program's own, on a CPU the rank is not bound to */
        pthread_t t;
        pthread_attr_t attr;
        cpu_set_t other;
        CPU_ZERO(&other);
        for (int c = 0; c < CPU_SETSIZE && CPU_COUNT(&other) == 0; c++)
            if (!CPU_ISSET(c, &own) && c < sysconf(_SC_NPROCESSORS_ONLN))
                CPU_SET(c, &other);
        pthread_attr_init(&attr);
        if (CPU_COUNT(&other))
            pthread_attr_setaffinity_np(&attr, sizeof other, &other);
        if (pthread_create(&t, &attr, rounds_main, &r) != 0)
            return fail(rank, "pthread_create", PLAIT_ERR_INTERNAL);
        pthread_attr_destroy(&attr);
        pthread_join(t, NULL);
    } else {
        rounds_main(&r);
    }
    if (r.bad)
        return 1;
    nthreads = library_threads(names, threads, 16);
    for (int i = 0; i < nthreads; i++) {
        progress |= strcmp(names[i], "plait-progress") == 0;
        CPU_AND(&both, &threads[i], &taken);
        if (moved ? CPU_COUNT(&threads[i]) > 0 && CPU_COUNT(&both) == 0
                  : CPU_EQUAL(&threads[i], &own))
            continue;
        fprintf(stderr, "rank %d: thread %s should %s\n", rank, names[i],
                moved ? "run on CPUs no rank of the host is bound to" : "run on the rank's CPUs");
        cpus_print("rank", &own);
        cpus_print("all ranks", &taken);
        cpus_print(names[i], &threads[i]);
        bad = 1;
    }
    if (!progress) {
        fprintf(stderr, "rank %d: no thread named plait-progress in /proc/self/task\n", rank);
        return 1;
    }
    if (bad)
        return 1;
    printf("rank %d: %d library threads %s\n", rank, nthreads,
           moved ? "on spare CPUs" : "on the rank's CPUs");
    free(all);
    return plait_finalize() == PLAIT_OK ? 0 : 1;
}
