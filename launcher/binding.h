/* plaitrun process binding: which CPUs each rank runs on.
 *
 * The mapping (rank -> cpuset for a given topology) is a pure function,
 * plr_bind_map(), so tests can check it on synthetic hwloc topologies;
 * applying it in the child is a single sched_setaffinity() call, which is
 * safe between fork and exec in a multi-threaded parent. */
#ifndef PLR_BINDING_H
#define PLR_BINDING_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

#ifdef PLAIT_HAVE_HWLOC
#include <hwloc.h>
#include <hwloc/glibc-sched.h>
#endif

typedef enum { PLR_BIND_NONE, PLR_BIND_CORE, PLR_BIND_NUMA } plr_bind_policy_t;

typedef struct plr_cpuset {
    bool      bound;
    cpu_set_t set;
    char      where[32];      /* "core 3", "numa 1" */
    char      cpus[256];      /* "0-3,8" (OS indexes), also given to the rank as PMIX_CPUSET */
} plr_cpuset_t;

/* "core", "numa", "none" -> policy; returns -1 for anything else. */
int plr_bind_parse(const char *s, plr_bind_policy_t *out);
const char *plr_bind_name(plr_bind_policy_t pol);

/* Number of cores this process may use (hwloc when built with it, else online CPUs). */
int plr_bind_ncores(void);

/* Fills out[0..nranks) for the policy on this machine's topology, this
 * host's ranks taking slots first .. first + nranks - 1 (core r: core
 * first + r). Returns 0, or -1 with a message in err (e.g. built without
 * hwloc). */
int plr_bind_compute(plr_bind_policy_t pol, int nranks, int first, plr_cpuset_t *out,
                     char *err, size_t errlen);

/* Several hosts of one job can be one machine (network namespaces, or
 * containers sharing /dev/shm): each binding from core 0 would put their
 * first ranks on one core. Each host's launcher claims the next free block
 * of nranks slots in dir/plaitrun-bind.<job> (under a file lock) and binds
 * from there; a separate machine never sees another's file, so starts at
 * 0. Returns the block's first slot; *claimed says whether a claim was
 * recorded (to be released at the end: the last host removes the file). */
int plr_bind_claim(const char *dir, const char *job, int nranks, bool *claimed);
void plr_bind_release(const char *dir, const char *job);
/* After binding: records this host's block (its first slot, the CPU list
 * its ranks are bound to) in the claim file, so that every host's library
 * threads keep off every host's ranks (the ranks get the file's path,
 * plr_bind_path, as PLAIT_LAUNCH_CPUS_FILE). 0 on success. */
int plr_bind_record(const char *dir, const char *job, int first, const char *cpus);
int plr_bind_path(const char *dir, const char *job, char *path, size_t len);
#define PLR_BIND_FILE_MAX 65536   /* a claim file's bytes (64 hosts of 1000-character lists) */
#define PLR_BIND_LINE_MAX 1024    /* one host's line */

/* In the child between fork and exec: async-signal-safe. */
int plr_bind_apply(const plr_cpuset_t *c);

#ifdef PLAIT_HAVE_HWLOC
/* The mapping itself.  core: rank r gets core (r mod ncores), in logical order
 * (compact, like mpirun --map-by core), whole core (all its PUs).
 * numa: ranks are split into contiguous, balanced blocks over the NUMA nodes:
 * node = r * nnuma / nranks, so 8 ranks on 4 nodes put ranks 0-1 on node 0,
 * 2-3 on node 1, ...; with fewer ranks than nodes every rank gets its own.
 * A topology without cores (or NUMA nodes) falls back to PUs (the machine).
 * Writes the cpuset into set and the object's logical index into *index.
 * Returns 0, 1 for PLR_BIND_NONE (set untouched), -1 on error. */
int plr_bind_map(hwloc_topology_t topo, plr_bind_policy_t pol, int nranks, int rank,
                 hwloc_bitmap_t set, int *index);
#endif

#endif /* PLR_BINDING_H */
