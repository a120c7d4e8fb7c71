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
 * it before their first packet).
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
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plait.h"

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

static void bind_first_cpu(void)
{
    cpu_set_t set, one;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return;
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) {
            CPU_SET(c, &one);
            break;
        }
    sched_setaffinity(0, sizeof one, &one);
}

int main(int argc, char **argv)
{
    int rank, size, rc, moved, nthreads, progress = 0, bad = 0;
    cpu_set_t own, *all, taken, threads[16], both;
    char names[16][20];
    volatile float *out;
    float in;
    plait_request_t req;
    if (argc < 2 || (strcmp(argv[1], "moved") != 0 && strcmp(argv[1], "stay") != 0)) {
        fprintf(stderr, "usage: %s moved|stay [selfbind]\n", argv[0]);
        return 2;
    }
    moved = strcmp(argv[1], "moved") == 0;
    if (argc > 2 && strcmp(argv[2], "selfbind") == 0)
        bind_first_cpu();
    if ((rc = plait_init()) != PLAIT_OK)
        return fail(-1, "plait_init", rc);
    plait_comm_rank(plait_comm_world(), &rank);
    plait_comm_size(plait_comm_world(), &size);
    sched_getaffinity(0, sizeof own, &own);
    all = calloc((size_t)size, sizeof *all);
    out = calloc(1, sizeof *out);
    if (!all || !out)
        return fail(rank, "calloc", PLAIT_ERR_NOMEM);
    rc = plait_allgather(&own, all, sizeof own, PLAIT_BYTE, plait_comm_world());
    if (rc != PLAIT_OK)
        return fail(rank, "plait_allgather", rc);
    CPU_ZERO(&taken);
    for (int r = 0; r < size; r++)
        CPU_OR(&taken, &taken, &all[r]);
    /* Rank k starts an allreduce the others join 50 ms later, so it cannot
     * finish inside the start (a peer's data already there would let it),
     * and watches its output: the sum arrives only by its progress thread,
     * which has placed itself by then. Once per rank. */
    for (int k = 0; k < size; k++) {
        struct timespec late = {0, 50000000};
        if (rank != k)
            nanosleep(&late, NULL);
        in = (float)(rank + 1);
        *out = -1.0f;
        rc = plait_iallreduce(&in, (void *)out, 1, PLAIT_FLOAT32, PLAIT_SUM, plait_comm_world(),
                              &req);
        if (rc != PLAIT_OK)
            return fail(rank, "plait_iallreduce", rc);
        for (double t0 = plait_wtime(); *out != (float)size * (float)(size + 1) / 2;) {
            if (plait_wtime() - t0 > 30) {
                fprintf(stderr, "rank %d: the allreduce made no progress in 30 s without "
                        "plait calls\n", rank);
                return 1;
            }
            sched_yield();
        }
        if ((rc = plait_wait(&req, NULL)) != PLAIT_OK)
            return fail(rank, "plait_wait", rc);
    }
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
    free((void *)out);
    return plait_finalize() == PLAIT_OK ? 0 : 1;
}
