/* plaitrun process binding (see binding.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "launcher/binding.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

int plr_bind_parse(const char *s, plr_bind_policy_t *out)
{
    if (strcmp(s, "core") == 0) { *out = PLR_BIND_CORE; return 0; }
    if (strcmp(s, "numa") == 0) { *out = PLR_BIND_NUMA; return 0; }
    if (strcmp(s, "none") == 0) { *out = PLR_BIND_NONE; return 0; }
    return -1;
}

const char *plr_bind_name(plr_bind_policy_t pol)
{
    switch (pol) {
    case PLR_BIND_CORE: return "core";
    case PLR_BIND_NUMA: return "numa";
    default:            return "none";
    }
}

int plr_bind_apply(const plr_cpuset_t *c)
{
    if (!c->bound)
        return 0;
    return sched_setaffinity(0, sizeof(c->set), &c->set);
}

/* ------------------------------------------- hosts sharing one machine */

/* The claim file: "<next free slot> <hosts holding a claim>\n", then a line
 * "<first slot> <CPU list>" for each host that bound its ranks
 * (plr_bind_record): the library keeps its threads off every listed CPU
 * (runtime/affinity.c, through PLAIT_LAUNCH_CPUS_FILE). */
int plr_bind_path(const char *dir, const char *job, char *path, size_t len)
{
    int n = snprintf(path, len, "%s/plaitrun-bind.%s", dir, job);
    return n < 0 || (size_t)n >= len || strchr(job, '/') ? -1 : 0;
}

static int plr_bind_file(const char *dir, const char *job)
{
    char path[PATH_MAX];
    if (plr_bind_path(dir, job, path, sizeof(path)) != 0)
        return -1;
    return open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
}

/* The whole file into buf (NUL-terminated), its header into next and refs
 * (0 0 when new or unreadable); returns where the host lines start. */
static const char *plr_bind_file_read(int fd, char *buf, size_t cap, int *next, int *refs)
{
    ssize_t n = pread(fd, buf, cap - 1, 0);
    const char *nl;
    buf[n > 0 ? n : 0] = '\0';
    if (n <= 0 || sscanf(buf, "%d %d", next, refs) != 2 || *next < 0 || *refs < 0)
        *next = *refs = 0;
    nl = strchr(buf, '\n');
    return nl ? nl + 1 : buf + strlen(buf);
}

/* The header "next refs", the host lines kept, then extra (NULL: none). */
static int plr_bind_file_write(int fd, int next, int refs, const char *lines, const char *extra)
{
    char head[64];
    int n = snprintf(head, sizeof(head), "%d %d\n", next, refs);
    size_t ll = strlen(lines), el = extra ? strlen(extra) : 0;
    if (ftruncate(fd, 0) != 0 || pwrite(fd, head, (size_t)n, 0) != n ||
        pwrite(fd, lines, ll, n) != (ssize_t)ll)
        return -1;
    return !extra || pwrite(fd, extra, el, n + (off_t)ll) == (ssize_t)el ? 0 : -1;
}

/* The claim, record and release steps: each a read-modify-write of the
 * file under its lock. CLAIM takes nranks slots (*first: where they
 * start), RECORD appends the line extra, RELEASE gives a claim back (the
 * last one removes the file). Returns 0, or -1 when the file could not be
 * used. */
typedef enum { PLR_BIND_CLAIM, PLR_BIND_RECORD, PLR_BIND_RELEASE } plr_bind_op_t;

static int plr_bind_update(const char *dir, const char *job, plr_bind_op_t op, int nranks,
                           const char *extra, int *first)
{
    static char buf[PLR_BIND_FILE_MAX];   /* (the launcher is one thread here) */
    char path[PATH_MAX];
    int fd = plr_bind_file(dir, job), next = 0, refs = 0, rc = -1;
    const char *lines;
    if (fd < 0)
        return -1;
    if (flock(fd, LOCK_EX) != 0) {
        close(fd);
        return -1;
    }
    lines = plr_bind_file_read(fd, buf, sizeof(buf), &next, &refs);
    if (op == PLR_BIND_CLAIM) {
        *first = next;
        rc = plr_bind_file_write(fd, next + nranks, refs + 1, lines, NULL);
    } else if (op == PLR_BIND_RECORD) {
        if (strlen(lines) + strlen(extra) + 64 < sizeof(buf))
            rc = plr_bind_file_write(fd, next, refs, lines, extra);
    } else if (refs <= 1) {   /* the last host of this machine leaves */
        rc = plr_bind_path(dir, job, path, sizeof(path)) == 0 ? unlink(path) : -1;
    } else {
        rc = plr_bind_file_write(fd, next, refs - 1, lines, NULL);
    }
    flock(fd, LOCK_UN);
    close(fd);
    return rc;
}

int plr_bind_claim(const char *dir, const char *job, int nranks, bool *claimed)
{
    int first = 0;
    *claimed = plr_bind_update(dir, job, PLR_BIND_CLAIM, nranks, NULL, &first) == 0;
    return *claimed ? first : 0;
}

int plr_bind_record(const char *dir, const char *job, int first, const char *cpus)
{
    char line[PLR_BIND_LINE_MAX];
    if (snprintf(line, sizeof(line), "%d %s\n", first, cpus) >= (int)sizeof(line))
        return -1;
    return plr_bind_update(dir, job, PLR_BIND_RECORD, 0, line, NULL);
}

void plr_bind_release(const char *dir, const char *job)
{
    plr_bind_update(dir, job, PLR_BIND_RELEASE, 0, NULL, NULL);
}

#ifdef PLAIT_HAVE_HWLOC

/* Object of the given type for slot idx, falling back to PUs when the
 * topology has no objects of that type (some VMs report no cores). */
static hwloc_obj_t plr_bind_obj(hwloc_topology_t topo, hwloc_obj_type_t type, long slot,
                                long nslots_hint, int *index)
{
    int n = hwloc_get_nbobjs_by_type(topo, type);
    if (n <= 0) {
        type = HWLOC_OBJ_PU;
        n = hwloc_get_nbobjs_by_type(topo, type);
        if (n <= 0)
            return NULL;
    }
    long i = nslots_hint > 0 ? slot * n / nslots_hint : slot % n;
    *index = (int)i;
    return hwloc_get_obj_by_type(topo, type, (unsigned)i);
}

int plr_bind_map(hwloc_topology_t topo, plr_bind_policy_t pol, int nranks, int rank,
                 hwloc_bitmap_t set, int *index)
{
    hwloc_obj_t obj;
    if (nranks <= 0 || rank < 0 || rank >= nranks)
        return -1;
    switch (pol) {
    case PLR_BIND_NONE:
        return 1;
    case PLR_BIND_CORE:
        obj = plr_bind_obj(topo, HWLOC_OBJ_CORE, rank, 0, index);
        break;
    case PLR_BIND_NUMA:
        obj = plr_bind_obj(topo, HWLOC_OBJ_NUMANODE, rank, nranks, index);
        break;
    default:
        return -1;
    }
    if (obj == NULL || obj->cpuset == NULL || hwloc_bitmap_iszero(obj->cpuset))
        return -1;
    hwloc_bitmap_copy(set, obj->cpuset);
    return 0;
}

/* The machine as far as this process may use it: restricted to the CPUs
 * plaitrun (or its daemon) was started on, so that a job given part of a
 * node (taskset, a Slurm step's cpuset, a shared node) counts, maps and
 * binds its ranks within that part, as mpirun does, instead of piling every
 * job onto cores 0, 1, ... */
static int plr_bind_topo_load(hwloc_topology_t *topo)
{
    hwloc_bitmap_t allowed;
    if (hwloc_topology_init(topo) != 0)
        return -1;
    if (hwloc_topology_load(*topo) != 0) {
        hwloc_topology_destroy(*topo);
        return -1;
    }
    allowed = hwloc_bitmap_alloc();
    if (allowed && hwloc_get_cpubind(*topo, allowed, HWLOC_CPUBIND_PROCESS) == 0 &&
        !hwloc_bitmap_iszero(allowed) &&
        !hwloc_bitmap_isincluded(hwloc_topology_get_topology_cpuset(*topo), allowed) &&
        hwloc_topology_restrict(*topo, allowed, 0) != 0)
        fprintf(stderr, "plaitrun: warning: cannot restrict the topology to this process's "
                        "CPUs; binding may use others\n");
    hwloc_bitmap_free(allowed);
    return 0;
}

int plr_bind_ncores(void)
{
    hwloc_topology_t topo;
    if (plr_bind_topo_load(&topo) != 0)
        return (int)sysconf(_SC_NPROCESSORS_ONLN);
    int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    if (n <= 0)
        n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    hwloc_topology_destroy(topo);
    return n > 0 ? n : 1;
}

/* hwloc bitmap -> what the child needs (cpu_set_t) and what we print. */
static int plr_bind_fill(hwloc_topology_t topo, hwloc_bitmap_t set, plr_bind_policy_t pol,
                         int index, plr_cpuset_t *c)
{
    CPU_ZERO(&c->set);
    if (hwloc_cpuset_to_glibc_sched_affinity(topo, set, &c->set, sizeof(c->set)) != 0)
        return -1;
    hwloc_bitmap_list_snprintf(c->cpus, sizeof(c->cpus), set);
    snprintf(c->where, sizeof(c->where), "%s %d", plr_bind_name(pol), index);
    c->bound = true;
    return 0;
}

int plr_bind_compute(plr_bind_policy_t pol, int nranks, int first, plr_cpuset_t *out,
                     char *err, size_t errlen)
{
    hwloc_topology_t topo;
    int rc = 0;
    memset(out, 0, sizeof(*out) * (size_t)nranks);
    if (pol == PLR_BIND_NONE)
        return 0;
    if (plr_bind_topo_load(&topo) != 0) {
        snprintf(err, errlen, "cannot read the machine topology (hwloc)");
        return -1;
    }
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    for (int r = 0; r < nranks && rc == 0; r++) {
        int index = 0;
        rc = plr_bind_map(topo, pol, first + nranks, first + r, set, &index);
        if (rc == 0)
            rc = plr_bind_fill(topo, set, pol, index, &out[r]);
        if (rc != 0)
            snprintf(err, errlen, "cannot compute a %s binding for rank %d", plr_bind_name(pol), r);
    }
    hwloc_bitmap_free(set);
    hwloc_topology_destroy(topo);
    return rc == 0 ? 0 : -1;
}

#else /* !PLAIT_HAVE_HWLOC */

int plr_bind_ncores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int plr_bind_compute(plr_bind_policy_t pol, int nranks, int first, plr_cpuset_t *out,
                     char *err, size_t errlen)
{
    (void)first;
    memset(out, 0, sizeof(*out) * (size_t)nranks);
    if (pol == PLR_BIND_NONE)
        return 0;
    snprintf(err, errlen, "--bind-to %s needs hwloc, and this plaitrun was built without it",
             plr_bind_name(pol));
    return -1;
}

#endif /* PLAIT_HAVE_HWLOC */
