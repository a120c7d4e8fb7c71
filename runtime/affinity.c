/*
 * affinity.c -- where the library's own threads run.
 *
 * A launcher that binds each rank to a core (plaitrun --bind-to core, srun
 * --cpu-bind=cores, mpirun --bind-to core) binds every thread the rank
 * creates to that core too: the progress thread then takes turns with the
 * program it should run beside (a non-blocking collective hides little of
 * its time), and a udp engine thread with the caller it should help. When
 * the ranks of this host are bound and the CPUs they may use (the cgroup's
 * cpuset) include cores no rank of the host is bound to, such a spare core
 * is where a library thread belongs (PLAIT_THREAD_CPU=auto).
 *
 * How a rank learns the others' bindings: each puts its affinity mask
 * (PRT_CPUS_KEY) with its transport cards before the first fence
 * (prt_affinity_put); after it, prt_affinity_gather ORs the masks of the
 * host's ranks together into the job. A thread places itself when it starts
 * (prt_affinity_place): it first leaves those CPUs for all the others it
 * may use (no topology needed: the kernel keeps what the cgroup allows),
 * then hwloc picks it one core among them. The topology load costs
 * milliseconds of CPU, which a program that never starts such a thread
 * should not pay, and which, made on the rank's own core, held the
 * program's first non-blocking collectives up (2 ranks on the 16-core
 * machine: 64 KiB allreduces 25 -> 150 us over the first 40 calls). The
 * core: among the spare cores in the package of the rank's own first CPU if
 * there are any, else among all, the one at (slot mod count); callers give
 * each thread of each local rank its own slot, so they spread. A rank bound
 * to two cores or more (a socket, a block) keeps its threads inside its own
 * binding (affinity_room), and unbound ranks (each may use every allowed
 * CPU) leave no spare CPU: threads stay put there.
 * Built without hwloc, a thread still leaves the ranks' CPUs, for all the
 * others.
 */
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#ifdef PLAIT_HAVE_HWLOC
#include <hwloc.h>
#include <hwloc/glibc-sched.h>
#endif

#include "runtime/prt.h"

#define PRT_CPUS_KEY "plait.cpus"

void prt_affinity_own(prt_job_t *job)
{
    job->cpus_own_known = sched_getaffinity(0, sizeof job->cpus_own, &job->cpus_own) == 0;
}

int prt_affinity_put(prt_job_t *job)
{
    if (!job->cpus_own_known)
        return prt_err(PLAIT_ERR_INTERNAL, "sched_getaffinity failed");
    return prt_boot_put(job, PRT_CPUS_KEY, &job->cpus_own, sizeof job->cpus_own);
}

/* "0-3,8" -> set; 0 when the text made sense. */
static int affinity_parse(const char *text, cpu_set_t *set)
{
    CPU_ZERO(set);
    while (*text && *text != '\n') {
        char *end;
        long a = strtol(text, &end, 10), b = a;
        if (end == text || a < 0 || a >= CPU_SETSIZE)
            return -1;
        if (*end == '-') {
            b = strtol(end + 1, &end, 10);
            if (b < a || b >= CPU_SETSIZE)
                return -1;
        }
        for (long c = a; c <= b; c++)
            CPU_SET((int)c, set);
        text = *end == ',' ? end + 1 : end;
    }
    return CPU_COUNT(set) > 0 ? 0 : -1;
}

/* The CPUs the job may use on this host: those of the process that started
 * this rank (plaitrun or its daemon, orted, slurmstepd, a shell), whose mask
 * a `taskset` or a launcher's CPU set restricts. A rank's own binding says
 * nothing of it: `taskset -c 0 plaitrun -n 2` leaves the ranks "unbound" on
 * CPU 0, and their threads on CPU 1 would run outside what the user gave
 * the job (a black-box test). Unknown (no /proc): every CPU, the kernel
 * keeping what the cgroup allows. mpirun --cpu-set restricts the ranks, not
 * its daemon, and says so only in the ranks' environment, in its own CPU
 * numbering: there the ranks' CPUs are all the job has (no spare core). */
static void affinity_job_cpus(const prt_job_t *job, cpu_set_t *set)
{
    char path[64], line[512];
    FILE *f;
    int ok = 0;
    if (getenv("OMPI_MCA_hwloc_base_cpu_set")) {
        *set = job->cpus_taken;
        return;
    }
    snprintf(path, sizeof path, "/proc/%d/status", (int)getppid());
    if ((f = fopen(path, "r")) != NULL) {
        while (!ok && fgets(line, sizeof line, f))
            if (strncmp(line, "Cpus_allowed_list:", 18) == 0)
                ok = affinity_parse(line + 18 + strspn(line + 18, " \t"), set) == 0;
        fclose(f);
    }
    if (!ok)
        for (int c = 0; c < CPU_SETSIZE; c++)
            CPU_SET(c, set);
}

/* Several hosts of one job on one machine (plaitrun's daemons in network
 * namespaces) each gather only their own ranks' masks: their threads would
 * land on each other's ranks' cores. plaitrun records every host's bound
 * CPUs, one line "<first core slot> <CPU list>" per host after a header
 * line, in the file PLAIT_LAUNCH_CPUS_FILE names (launcher/binding.c). The
 * lists join taken; the return is this host's first slot (the line with
 * the rank's own CPUs), which spreads the hosts' threads over the spare
 * cores as the local ranks' slots do. Read once, by prt_affinity_gather
 * after plait_init's fence: by then every host has bound its ranks. */
static int affinity_cohosts(const prt_job_t *job, cpu_set_t *taken)
{
    const char *path = getenv("PLAIT_LAUNCH_CPUS_FILE");
    char line[1100];
    int base = 0, head = 1;
    FILE *f;
    if (!path || !*path || !(f = fopen(path, "r")))
        return 0;
    flock(fileno(f), LOCK_SH);
    while (fgets(line, sizeof line, f)) {
        cpu_set_t set;
        char *list;
        long first = strtol(line, &list, 10);
        if (head || first < 0 || first > 1 << 20 || affinity_parse(list + strspn(list, " "), &set))
            head = 0;   /* (the header, or a line cut short: skipped) */
        else {
            CPU_OR(taken, taken, &set);
            if (CPU_COUNT(&job->cpus_own) > 0) {
                cpu_set_t mine;
                CPU_AND(&mine, &set, &job->cpus_own);
                if (CPU_EQUAL(&mine, &job->cpus_own))
                    base = (int)first;
            }
        }
    }
    flock(fileno(f), LOCK_UN);
    fclose(f);
    return base;
}

int prt_affinity_gather(prt_job_t *job)
{
    job->cpus_known = 0;
    CPU_ZERO(&job->cpus_taken);
    for (int i = 0; i < job->local_size; i++) {
        void *blob = NULL;
        size_t len = 0;
        int rc = prt_boot_get(job, job->local_peers[i], PRT_CPUS_KEY, &blob, &len);
        if (rc != PLAIT_OK)
            return rc;
        if (len != sizeof job->cpus_taken) {   /* another build of the library */
            free(blob);
            return prt_err(PLAIT_ERR_INTERNAL, "rank %d's CPU mask has %zu bytes, expected %zu",
                           job->local_peers[i], len, sizeof job->cpus_taken);
        }
        CPU_OR(&job->cpus_taken, &job->cpus_taken, (cpu_set_t *)blob);
        free(blob);
    }
    job->cpus_slot_base = affinity_cohosts(job, &job->cpus_taken);
    affinity_job_cpus(job, &job->cpus_job);
    job->cpus_known = CPU_COUNT(&job->cpus_taken) > 0;
    return PLAIT_OK;
}

/* Moves the calling thread to the job's CPUs that no rank is bound to
 * (the kernel also keeps only what the cgroup allows); none: no move. */
static int affinity_leave(const prt_job_t *job)
{
    cpu_set_t rest;
    CPU_ZERO(&rest);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &job->cpus_job) && !CPU_ISSET(c, &job->cpus_taken))
            CPU_SET(c, &rest);
    return CPU_COUNT(&rest) > 0 &&
           pthread_setaffinity_np(pthread_self(), sizeof rest, &rest) == 0;
}

/* 1 when mine spans two cores or more: the rank's threads have room
 * inside its own binding (a rank bound to a socket, or to several cores),
 * and the scheduler places them there; moving them would only take them
 * away from the rank's caches (to another package, often). Two CPUs are
 * one core when they are hardware threads of it (sysfs's sibling list). */
static int affinity_room(const cpu_set_t *mine)
{
    char path[96], line[256];
    int first = -1, second = -1, n = CPU_COUNT(mine);
    cpu_set_t sib;
    FILE *f;
    if (n != 2)
        return n > 2;
    for (int c = 0; c < CPU_SETSIZE && second < 0; c++)
        if (CPU_ISSET(c, mine)) {
            if (first < 0)
                first = c;
            else
                second = c;
        }
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list",
             first);
    if (!(f = fopen(path, "r")))
        return 1;
    n = fgets(line, sizeof line, f) != NULL && affinity_parse(line, &sib) == 0;   /* "0,64" */
    fclose(f);
    if (!n)
        return 1;
    return !CPU_ISSET(second, &sib);
}

/* 1 when this rank's threads are candidates for a move at all: the
 * host's bindings are known (PLAIT_THREAD_CPU=auto gathered them) and the
 * rank has no room of its own. */
static int affinity_movable(const prt_job_t *job)
{
    return job->cpus_known && job->cpus_own_known && !affinity_room(&job->cpus_own);
}

int prt_affinity_spare_exists(const prt_job_t *job)
{
    cpu_set_t own;
    int yes;
    if (!affinity_movable(job) || pthread_getaffinity_np(pthread_self(), sizeof own, &own) != 0)
        return 0;
    yes = affinity_leave(job);
    if (yes)
        pthread_setaffinity_np(pthread_self(), sizeof own, &own);
    return yes;
}

#ifdef PLAIT_HAVE_HWLOC
/* The allowed cores that share no CPU with taken, into list[0..return);
 * with near set, only those in near's package. */
static int affinity_spare_cores(hwloc_topology_t topo, hwloc_const_bitmap_t taken,
                                hwloc_const_bitmap_t near, hwloc_obj_t *list, int cap)
{
    hwloc_const_bitmap_t allowed = hwloc_topology_get_allowed_cpuset(topo);
    hwloc_obj_t core = NULL;
    int n = 0;
    hwloc_obj_type_t type = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE
                                                                              : HWLOC_OBJ_PU;
    while (n < cap && (core = hwloc_get_next_obj_by_type(topo, type, core)) != NULL) {
        if (!core->cpuset || !hwloc_bitmap_intersects(core->cpuset, allowed) ||
            hwloc_bitmap_intersects(core->cpuset, taken))
            continue;
        if (near && !hwloc_bitmap_intersects(core->cpuset, near))
            continue;
        list[n++] = core;
    }
    return n;
}

/* The package (or the whole machine) that holds own's first CPU. */
static hwloc_const_bitmap_t affinity_home(hwloc_topology_t topo, hwloc_const_bitmap_t own)
{
    int first = hwloc_bitmap_first(own);
    hwloc_obj_t pu = first >= 0 ? hwloc_get_pu_obj_by_os_index(topo, (unsigned)first) : NULL;
    hwloc_obj_t pkg = pu ? hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, pu) : NULL;
    return pkg ? pkg->cpuset : NULL;
}

static int affinity_pick(hwloc_topology_t topo, int slot, const cpu_set_t *taken,
                         const cpu_set_t *mine, cpu_set_t *out)
{
    hwloc_bitmap_t tk = hwloc_bitmap_alloc(), own = hwloc_bitmap_alloc(), set = NULL;
    hwloc_obj_t list[1024];
    int n = 0, rc = 0;
    if (!tk || !own)
        goto out_free;
    hwloc_cpuset_from_glibc_sched_affinity(topo, tk, taken, sizeof *taken);
    hwloc_cpuset_from_glibc_sched_affinity(topo, own, mine, sizeof *mine);
    n = affinity_spare_cores(topo, tk, affinity_home(topo, own), list, 1024);
    if (n == 0)
        n = affinity_spare_cores(topo, tk, NULL, list, 1024);
    if (n == 0)
        goto out_free;
    set = hwloc_bitmap_dup(list[slot % n]->cpuset);
    if (set) {
        hwloc_bitmap_and(set, set, hwloc_topology_get_allowed_cpuset(topo));
        rc = hwloc_cpuset_to_glibc_sched_affinity(topo, set, out, sizeof *out) == 0 &&
             CPU_COUNT(out) > 0;
        hwloc_bitmap_free(set);
    }
out_free:
    hwloc_bitmap_free(tk);
    hwloc_bitmap_free(own);
    return rc;
}
#endif

/* 1: *out is the slot-th spare core (see prt_affinity_place); mine: the
 * rank's CPUs, whose package comes first. */
static int affinity_spare(int slot, const cpu_set_t *taken, const cpu_set_t *mine, cpu_set_t *out)
{
#ifdef PLAIT_HAVE_HWLOC
    hwloc_topology_t topo;
    int rc;
    if (hwloc_topology_init(&topo) != 0)
        return 0;
    if (hwloc_topology_load(topo) != 0) {
        hwloc_topology_destroy(topo);
        return 0;
    }
    rc = affinity_pick(topo, slot, taken, mine, out);
    hwloc_topology_destroy(topo);
    return rc;
#else
    (void)slot; (void)taken; (void)mine; (void)out;
    return 0;   /* built without hwloc: no notion of cores; the thread stays off the ranks' */
#endif
}

/* "0-3,8", or cut short with "...". */
static void affinity_text(const cpu_set_t *set, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE && at + 1 < len; c++) {
        int end = c, w;
        if (!CPU_ISSET(c, set))
            continue;
        while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, set))
            end++;
        w = end > c ? snprintf(buf + at, len - at, "%s%d-%d", at ? "," : "", c, end)
                    : snprintf(buf + at, len - at, "%s%d", at ? "," : "", c);
        if (w < 0 || (size_t)w >= len - at) {
            snprintf(buf + (len > 4 ? len - 4 : 0), len > 4 ? 4 : len, "...");
            return;
        }
        at += (size_t)w;
        c = end;
    }
}

int prt_affinity_place(const prt_job_t *job, int slot, const char *what)
{
    cpu_set_t set;
    char text[64];
    if (!affinity_movable(job) || !affinity_leave(job))
        return 0;
    /* (a host's threads: 2 per rank, a progress thread and an engine) */
    if (!affinity_spare(2 * job->cpus_slot_base + slot, &job->cpus_taken, &job->cpus_own, &set) ||
        pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
        prt_log(PRT_LOG_INFO, "%s on the job's CPUs no rank of this host was bound to at "
                "plait_init", what);
        return 1;
    }
    affinity_text(&set, text, sizeof text);
    prt_log(PRT_LOG_INFO, "%s on CPU %s (no rank of this host was bound there at plait_init)",
            what, text);
    return 1;
}
