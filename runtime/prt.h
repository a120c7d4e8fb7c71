/*
 * prt.h -- plait runtime layer (process services): errors, logging, settings,
 * PMIx bootstrap, clocks and the blocking-wait helper. Everything above
 * (transport, pt2pt, coll, tools, launcher) may include this; it includes
 * nothing of theirs.
 */
#ifndef PLAIT_RUNTIME_PRT_H
#define PLAIT_RUNTIME_PRT_H

#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "plait.h"

/* ----------------------------------------------------------------- errors */

/* Records a detailed message for this thread (plait_last_error) and returns code. */
int prt_err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *prt_err_text(void);
/* Work done for others (a progress pass completing any thread's requests)
 * records its errors apart from this thread's plait_last_error, until
 * prt_err_undivert with what prt_err_divert returned; prt_err_text reads
 * the side in use, so a request failed meanwhile copies its own detail. */
int prt_err_divert(void);
void prt_err_undivert(int was);
/* A failed call that went on waiting since t0_ns (prt_now_ns) to clean up
 * after the failure: past half a second, its message adds "; then N s
 * <what>", or "timed out after 3.0 s" would stand for a longer call. */
void prt_err_waited(int code, uint64_t t0_ns, const char *what);

/* The bytes of count elements of esize bytes, nblocks times over, into
 * *bytes; 0 when that passes PTRDIFF_MAX, the largest object there can be:
 * such a count is a negative int converted to size_t, never a buffer. */
static inline int prt_buf_bytes(size_t count, size_t esize, size_t nblocks, size_t *bytes)
{
    size_t b;
    if (__builtin_mul_overflow(count, esize, &b) || __builtin_mul_overflow(b, nblocks, &b) ||
        b > (size_t)PTRDIFF_MAX)
        return 0;
    *bytes = b;
    return 1;
}

/* Internal status check: on failure logs file:line at debug level and returns
 * the status from the enclosing function. */
#define PRT_CHECK(call)                                                        \
    do {                                                                       \
        int prt_check_rc_ = (call);                                            \
        if (prt_check_rc_ != PLAIT_OK) {                                       \
            prt_log(PRT_LOG_DEBUG, "%s:%d: %s failed: %s", __FILE__, __LINE__, \
                    #call, plait_strerror(prt_check_rc_));                     \
            return prt_check_rc_;                                              \
        }                                                                      \
    } while (0)

/* ---------------------------------------------------------------- logging */

enum { PRT_LOG_NONE = 0, PRT_LOG_ERROR, PRT_LOG_WARN, PRT_LOG_INFO, PRT_LOG_DEBUG, PRT_LOG_TRACE };
/* Sets the rank shown in every line ("plait[3] ..."); -1 before bootstrap. */
void prt_log_set_rank(int rank);
void prt_log_set_level(int level);
int  prt_log_level(void);
void prt_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* --------------------------------------------------------------- settings */
/*
 * Every PLAIT_* environment variable is declared once, in config.c's table
 * (name, type, default, one-line doc). prt_cfg_load() parses all of them; a
 * malformed value fails with PLAIT_ERR_ARG naming the variable.
 */
typedef enum { PRT_CFG_INT, PRT_CFG_SIZE, PRT_CFG_BOOL, PRT_CFG_DOUBLE, PRT_CFG_STRING,
               PRT_CFG_ENUM } prt_cfg_type_t;

typedef struct {
    const char    *name;     /* "PLAIT_TIMEOUT" */
    prt_cfg_type_t type;
    const char    *defval;   /* default, as text */
    const char    *choices;  /* PRT_CFG_ENUM: "a|b|c"; NULL otherwise */
    const char    *doc;      /* one line */
    size_t         offset;   /* where the parsed value goes in prt_config_t */
    size_t         size;     /* its size there */
} prt_cfg_entry_t;

const prt_cfg_entry_t *prt_cfg_table(size_t *n);
const char *prt_cfg_type_name(prt_cfg_type_t t);

enum { PRT_TRANSPORT_AUTO = 0, PRT_TRANSPORT_SHM = 1, PRT_TRANSPORT_TCP = 2, PRT_TRANSPORT_UDP = 3 };

/* Parsed values of every setting, filled by prt_cfg_load(). */
/* PLAIT_UDP_TX_HELP: auto = on where the process may use two cores or more */
enum { PRT_TX_HELP_AUTO, PRT_TX_HELP_ON, PRT_TX_HELP_OFF };
/* PLAIT_THREAD_CPU (runtime/affinity.c) */
enum { PRT_THREAD_CPU_AUTO, PRT_THREAD_CPU_RANK };

typedef struct {
    double   timeout_s;        /* PLAIT_TIMEOUT, 0 = forever */
    int      log_level;        /* PLAIT_LOG_LEVEL */
    size_t   shm_eager_limit;  /* PLAIT_SHM_EAGER_LIMIT */
    size_t   net_eager_limit;  /* PLAIT_NET_EAGER_LIMIT */
    size_t   net_head;         /* PLAIT_NET_HEAD */
    size_t   coll_eager_limit; /* PLAIT_COLL_EAGER_LIMIT */
    size_t   shm_ring_slots;   /* PLAIT_SHM_RING_SLOTS */
    int      shm_cma;          /* PLAIT_SHM_CMA: 1 use process_vm_readv when permitted */
    size_t   shm_coop_min;     /* PLAIT_SHM_COOP_MIN: cooperative copy from this size (0 off) */
    long     spin_us;            /* PLAIT_WAIT_SPIN_US */
    long     yield_us;          /* PLAIT_WAIT_YIELD_US */
    int      singleton_ok;     /* PLAIT_SINGLETON: allow size-1 job without PMIx */
    int      transport;        /* PLAIT_TRANSPORT: PRT_TRANSPORT_* */
    char     tcp_if[32];       /* PLAIT_TCP_IF */
    /* the multipath transport over UDP (transport/udp, transport/proto) */
    char     udp_if[32];       /* PLAIT_UDP_IF */
    long     udp_paths;        /* PLAIT_UDP_PATHS */
    long     engines;          /* PLAIT_ENGINES */
    size_t   chunk_size;       /* PLAIT_CHUNK_SIZE */
    int      cc;               /* PLAIT_CC: index into cubic|swift|dgpool|eqds */
    int      lb;               /* PLAIT_LB: index into p2c|spray|ackclock|pwin */
    long     udp_dupthresh;    /* PLAIT_UDP_DUPACK */
    size_t   udp_small;        /* PLAIT_UDP_SMALL */
    long     udp_rto_min_us;   /* PLAIT_UDP_RTO_MIN_US */
    double   udp_give_up_s;    /* PLAIT_UDP_GIVE_UP */
    size_t   udp_mtu;          /* PLAIT_UDP_MTU, 0 = from the interface */
    int      udp_gso;          /* PLAIT_UDP_GSO: UDP segmentation offload when the kernel has it */
    int      udp_gro;          /* PLAIT_UDP_GRO: receive coalesced datagrams (UDP_GRO) */
    int      udp_runs;         /* PLAIT_UDP_RUNS: one header per GSO datagram (pp.h PP_F_RUN) */
    size_t   udp_zcopy_min;    /* PLAIT_UDP_ZCOPY_MIN: reference DATA payloads from this size (0 off) */
    int      udp_tx_help;      /* PLAIT_UDP_TX_HELP: PRT_TX_HELP_* */
    int      stats;            /* PLAIT_STATS: print transport counters at finalize */
    int      progress_thread;  /* PLAIT_PROGRESS_THREAD: non-blocking collectives move on alone */
    int      progress_poll;    /* PLAIT_PROGRESS_POLL: the thread polls on a spare core */
    int      thread_cpu;       /* PLAIT_THREAD_CPU: PRT_THREAD_CPU_* */
    char     trace[256];       /* PLAIT_TRACE: directory for an event timeline ("" off) */
    /* collectives: forced algorithm per collective (0 = auto; the choices'
     * order is coll/pcoll.h's PCOLL_* algorithm ids) and reduction kernels */
    int      allreduce_algo;      /* PLAIT_ALLREDUCE_ALGO */
    int      allgather_algo;      /* PLAIT_ALLGATHER_ALGO */
    int      reduce_scatter_algo; /* PLAIT_REDUCE_SCATTER_ALGO */
    int      bcast_algo;          /* PLAIT_BCAST_ALGO */
    int      reduce_algo;         /* PLAIT_REDUCE_ALGO */
    int      alltoall_algo;       /* PLAIT_ALLTOALL_ALGO */
    int      gather_algo;         /* PLAIT_GATHER_ALGO (one algorithm: PCOLL_ONLY) */
    int      scatter_algo;        /* PLAIT_SCATTER_ALGO */
    int      barrier_algo;        /* PLAIT_BARRIER_ALGO */
    int      reduce_isa;          /* PLAIT_REDUCE_ISA: 0 auto, 1 scalar, 2 avx2, 3 avx512 */
    size_t   coll_shm_small;      /* PLAIT_COLL_SHM_SMALL: shared-area collectives up to (0 off) */
    size_t   coll_pipe;           /* PLAIT_COLL_PIPE: pipelined reduction chunk (0 off) */
} prt_config_t;

int prt_cfg_load(prt_config_t *cfg);
/* The setting a PLAIT_* name not among them was likely meant to be (at
 * most 2 edits away), or NULL (a setting, not PLAIT_*, or nothing near). */
const char *prt_cfg_suggest(const char *name);
/* Warns once for each PLAIT_* variable of the environment that is no
 * setting but is near one (a typo: it would be ignored silently). */
void prt_cfg_warn_typos(void);
/* Parses one value of a declared setting (used by load and by tests). */
int prt_cfg_parse(const prt_cfg_entry_t *e, const char *text, void *out, size_t outlen);

/* ------------------------------------------------------------------- maps */

/* Hash map from 64-bit keys (>= 2) to pointers. */
typedef struct {
    uint64_t *keys;
    void    **vals;
    size_t    cap, used, count;   /* used counts tombstones too */
} prt_map_t;

int   prt_map_init(prt_map_t *m, size_t cap_pow2);
void  prt_map_fini(prt_map_t *m);
void *prt_map_get(const prt_map_t *m, uint64_t key);
int   prt_map_put(prt_map_t *m, uint64_t key, void *val);
void *prt_map_del(prt_map_t *m, uint64_t key);

/* ----------------------------------------------------------------- clocks */

uint64_t prt_now_ns(void);   /* CLOCK_MONOTONIC */

/* ------------------------------------------------------------------ trace */
/*
 * An event timeline of this process (PLAIT_TRACE=DIR, trace.c lists the
 * events): prt_trace marks one; written to DIR/plait-trace.RANK.txt by
 * prt_trace_stop at finalize.
 */
extern _Atomic int prt_trace_on __attribute__((visibility("hidden")));
/* job: a name for this job in the file's header (the PMIx namespace's tag) */
int  prt_trace_start(const char *dir, int rank, const char *job);
void prt_trace_event(char ev, int64_t a, int32_t b, uint64_t id);
void prt_trace_stop(void);
static inline void prt_trace(char ev, int64_t a, int32_t b, uint64_t id)
{
    if (atomic_load_explicit(&prt_trace_on, memory_order_relaxed))
        prt_trace_event(ev, a, b, id);
}

/* --------------------------------------------------------------- bootstrap */
/*
 * The job as seen by this process, from PMIx (or a singleton). local_peers lists
 * the world ranks on this node in increasing order (including self).
 */
typedef struct prt_job {
    int       rank, size;
    int       local_rank, local_size;
    int      *local_peers;      /* local_size entries */
    int       singleton;        /* 1: no PMIx server */
    char      nspace[256];
    char      tag[48];          /* nspace reduced to [A-Za-z0-9._-] for file names */
    uint64_t  key;              /* random per-job secret, same on every rank */
    double    timeout_s;        /* PLAIT_TIMEOUT, for fences (0 = none) */
    void     *pmix;             /* opaque PMIx state */
    int       cpus_known;       /* cpus_taken holds the CPUs the host's ranks are bound to
                                 * (gathered only with PLAIT_THREAD_CPU=auto: with rank,
                                 * prt_affinity_place never moves a thread) */
    cpu_set_t cpus_taken;       /* (prt_affinity_gather; with the other hosts' ranks where
                                 * plaitrun's hosts share this machine) */
    int       cpus_slot_base;   /* this host's first core slot among those hosts (0 alone) */
    cpu_set_t cpus_job;         /* the CPUs of the process that started this rank (likewise) */
    int       cpus_own_known;   /* cpus_own: this rank's CPUs at plait_init (prt_affinity_own) */
    cpu_set_t cpus_own;
} prt_job_t;

/* Joins the job (no fence yet); rank 0 puts the job key for prt_boot_read_key. */
int  prt_boot_init(prt_job_t *job, int singleton_ok, double timeout_s);
/* After the first commit+fence: job->key = the key rank 0 made. */
int  prt_boot_read_key(prt_job_t *job);
int  prt_boot_put(prt_job_t *job, const char *key, const void *blob, size_t len);
int  prt_boot_commit_fence(prt_job_t *job);   /* commit + fence collecting data */
/* Gets a blob another rank put; *blob is malloc'd, caller frees. */
int  prt_boot_get(prt_job_t *job, int rank, const char *key, void **blob, size_t *len);
int  prt_boot_fence(prt_job_t *job);          /* fence without data */
void prt_boot_abort(prt_job_t *job, int code, const char *reason) __attribute__((noreturn));
int  prt_boot_finalize(prt_job_t *job);

/* --------------------------------------------------------------- affinity */
/*
 * Where the library's own threads run (affinity.c): a core no rank of this
 * host is bound to, when there is one.
 */
void prt_affinity_own(prt_job_t *job);      /* at plait_init: job->cpus_own */
int  prt_affinity_put(prt_job_t *job);      /* before the first fence */
int  prt_affinity_gather(prt_job_t *job);   /* after it: job->cpus_taken, cpus_known */
/* 1 when prt_affinity_place would move a thread of the calling one's
 * binding (the calling thread is moved off the ranks' CPUs and back). */
int  prt_affinity_spare_exists(const prt_job_t *job);
/* Moves the calling thread (what: its name in the log) off the host's
 * ranks' CPUs, then onto one spare core, the slot-th of those hwloc finds
 * (mod their count; the rank's package first). 1: moved off the ranks'
 * CPUs; 0: left where it was (unbound ranks, ranks bound to two cores or
 * more, no CPU left, nothing known).
 * Loads the topology: milliseconds, spent off the ranks' CPUs. */
int  prt_affinity_place(const prt_job_t *job, int slot, const char *what);

/* ------------------------------------------------------------ blocking wait */
/*
 * A blocked caller spins for spin_us, then yields (sched_yield) until yield_us
 * have passed without progress, then sleeps on the process's wake-up word (a
 * futex in shared memory that senders bump), so 8 ranks on 2 cores still make
 * progress quickly. A wait that keeps making progress (a bulk transfer's
 * packets arriving) never sleeps: asleep, it handed the datapath to the udp
 * engine thread, one thread at a time driving both directions.
 */
typedef struct {
    uint64_t start_ns;
    uint64_t work_ns;          /* the waiter's latest progress (start_ns at first) */
    uint64_t deadline_ns;      /* 0 = none */
} prt_backoff_t;

void prt_backoff_start(prt_backoff_t *b, double timeout_s);
/* the same, at a time the caller has read already */
void prt_backoff_start_at(prt_backoff_t *b, double timeout_s, uint64_t now);
/* 1 when the deadline passed. */
int  prt_backoff_expired(const prt_backoff_t *b, uint64_t now);
/* The waiter made progress at `now`: the sleep stage starts yield_us later. */
static inline void prt_backoff_progress(prt_backoff_t *b, uint64_t now) { b->work_ns = now; }
/* Which stage the wait is in after `now`: 0 spin, 1 yield, 2 sleep. */
int  prt_backoff_stage(const prt_backoff_t *b, uint64_t now, long spin_us, long yield_us);

/* One pause of a spin loop: lets the sibling hyperthread run and keeps the
 * loop from flooding the memory bus with loads. */
static inline void prt_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* futex helpers on a 32-bit word that may live in shared memory */
void prt_futex_wait(volatile uint32_t *word, uint32_t expected, long timeout_us);
void prt_futex_wake(volatile uint32_t *word);

#endif
