/*
 * select.c -- which algorithm a collective call runs. A PLAIT_<COLL>_ALGO
 * setting other than auto forces one; otherwise the first rule of the table
 * below that matches the call wins. Sizes are those the rule's collective
 * moves per call: the whole vector for allreduce, reduce and bcast, the
 * whole result (n blocks) for allgather and reduce_scatter, one block (per
 * peer) for alltoall. Thresholds were set for shared memory on one host;
 * rules carry a host-count condition so inter-host rows can be added. The
 * shared-memory algorithms (coll/shm.c) apply only where every rank of the
 * communicator is reached through shm with direct reads (pcoll_shm_usable):
 * elsewhere their rows are skipped, and forcing one falls back to ring.
 * Before the table: a blocking call where nothing is forced, on a
 * communicator inside one host, whose per-rank contribution is at most
 * PLAIT_COLL_SHM_SMALL bytes runs on the communicator's shared-memory area
 * (coll/shm_small.c, every collective but alltoallv; 2 ranks: up to 1 KiB,
 * above that coll/pair.c's direct exchange); then 2-rank calls go to
 * coll/pair.c (pcoll_pair_use).
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "coll/pcoll.h"

typedef struct {
    int         coll;
    size_t      max_bytes;     /* SIZE_MAX: any size */
    int         min_ranks;
    int         max_ranks;     /* 0: any */
    int         pof2;          /* 1: only power-of-two communicators */
    int         min_hosts;     /* 1: any */
    int         algo;
} pcoll_rule_t;

#define ANY SIZE_MAX
static const pcoll_rule_t pcoll_rules[] = {
    {PCOLL_ALLREDUCE, 16 << 10, 1, 0, 0, 1, PCOLL_AR_RD},
    /* Two ranks on two hosts, every size: recursive doubling is one swap of
     * the whole vector, rabenseifner two of half of it: the same bytes, one
     * rendezvous instead of two (each rank reduces the whole vector). 2 x 1
     * namespace hosts of the 16-core machine, medians of 5 rounds
     * (docs/PERFORMANCE.md, session 18): 512 KiB 236 -> 197 us, 1 MiB 426 ->
     * 387, 2 MiB 832 -> 814, 4 MiB 1610 -> 1569; 256 KiB 113 -> 119. */
    {PCOLL_ALLREDUCE, ANY, 2, 2, 0, 2, PCOLL_AR_RD},
    /* Between hosts: shm inside each, 1/k of the vector per rank on the
     * network. Against rabenseifner / ring over all ranks on namespace hosts
     * (2 x 2 and 3 x 2 ranks sharing 2 loaded cores, medians of 3 and 5):
     * faster in most cells from 32 KiB to 64 MiB (1.05-2.9x; 2 x 2 at 256 KiB
     * and 3 x 2 at 128 KiB-4 MiB also lost, 0.37-0.9x, in one of two runs);
     * recursive doubling stays ahead up to 16 KiB (fewer rounds). Skipped
     * once the hosts are known to hold one rank each (pcoll_hier_useful). */
    {PCOLL_ALLREDUCE, ANY, 3, 0, 0, 2, PCOLL_AR_TWO_LEVEL},
    {PCOLL_ALLREDUCE, ANY, 2, 0, 0, 1, PCOLL_AR_SHM},
    {PCOLL_ALLREDUCE, ANY, 1, 0, 1, 1, PCOLL_AR_RABENSEIFNER},
    {PCOLL_ALLREDUCE, ANY, 1, 0, 0, 1, PCOLL_AR_RING},
    {PCOLL_ALLGATHER, 4 << 10, 1, 0, 1, 1, PCOLL_AG_RD},
    {PCOLL_ALLGATHER, 4 << 10, 1, 0, 0, 1, PCOLL_AG_BRUCK},
    /* Between hosts: each block crosses the network once per other host,
     * the k ranks of a host side by side, then the host shares them over
     * shared memory (two rounds; the ring has n - 1 dependent ones, and
     * recursive doubling / Bruck send whole halves across). 2 namespace hosts
     * of the 16-core machine, median us, 3 rounds (docs/PERFORMANCE.md,
     * session 27): 2 x 4 ranks 16 KiB 71.6 -> 22.5, 64 KiB 68.2 -> 47.3,
     * 1 MiB 590 -> 342; 2 x 2 ranks 4 KiB 16.1 -> 13.0, 512 KiB 231 -> 152,
     * 8 MiB 5065 (ring) -> 1783; at 1-4 KiB on 2 x 4 Bruck is a little ahead.
     * Uneven hosts run the rows below (coll/hier.c, hier_allgather_flat). */
    {PCOLL_ALLGATHER, ANY, 3, 0, 0, 2, PCOLL_AG_TWO_LEVEL},
    {PCOLL_ALLGATHER, 32 << 10, 1, 0, 1, 1, PCOLL_AG_RD},
    {PCOLL_ALLGATHER, 32 << 10, 1, 0, 0, 1, PCOLL_AG_BRUCK},
    {PCOLL_ALLGATHER, ANY, 2, 0, 0, 1, PCOLL_AG_SHM},
    {PCOLL_ALLGATHER, ANY, 1, 0, 0, 1, PCOLL_AG_RING},
    {PCOLL_REDUCE_SCATTER, 4 << 10, 1, 0, 0, 1, PCOLL_RS_HALVING},
    /* Between hosts, the same shape: reduce inside each host, then one
     * exchange of partial sums per column. Same machine and session, median
     * us: 2 x 2 ranks 4 KiB 15.9 -> 12.9, 32 KiB 34.4 -> 24.3, 512 KiB 256 ->
     * 196, 8 MiB 3025 (ring) -> 2730 (16-32 MiB: the ring 4-7% ahead, 64 MiB
     * 20% behind); 2 x 4 ranks 32 KiB 36.1 -> 28.1, 256 KiB 208 -> 81, but
     * 4-16 KiB 0-7% behind halving. Uneven hosts: hier_rs_flat. */
    {PCOLL_REDUCE_SCATTER, ANY, 3, 0, 0, 2, PCOLL_RS_TWO_LEVEL},
    {PCOLL_REDUCE_SCATTER, 64 << 10, 1, 0, 0, 1, PCOLL_RS_HALVING},
    {PCOLL_REDUCE_SCATTER, ANY, 2, 0, 0, 1, PCOLL_RS_SHM},
    {PCOLL_REDUCE_SCATTER, ANY, 1, 0, 0, 1, PCOLL_RS_RING},
    /* Binomial at every size: above the eager limit each hop is one
     * single-copy rendezvous read, and log2(n) such hops beat the chain's
     * per-segment synchronisation and scatter + allgather's 2 + (n - 1)
     * rounds at 2-8 ranks (16-core machine, 8 KiB-32 MiB, bound to cores;
     * also 4 ranks on 2 cores). The shm direct read from the root ties with
     * it from 8 MiB and is left to PLAIT_BCAST_ALGO=shm. */
    {PCOLL_BCAST, ANY, 1, 0, 0, 1, PCOLL_BC_BINOMIAL},
    {PCOLL_REDUCE_C, 64 << 10, 1, 0, 0, 1, PCOLL_RE_BINOMIAL},
    /* Inside one host above that: every rank reduces a slice, the root
     * reads the slices (coll/shm.c), where rabenseifner moved every byte
     * through rendezvous messages. 16-core machine, median us, rabenseifner
     * -> shm (Open MPI): 2 ranks 512 KiB 114.9 -> 71.8 (77.5), 4 ranks 1 MiB
     * 377.5 -> 247.3 (482.6), 8 ranks 4 MiB 2055 -> 1223 (6244)
     * (docs/PERFORMANCE.md, session 19). */
    {PCOLL_REDUCE_C, ANY, 2, 0, 0, 1, PCOLL_RE_SHM},
    {PCOLL_REDUCE_C, ANY, 1, 0, 0, 1, PCOLL_RE_RABENSEIFNER},
    {PCOLL_ALLTOALL, 256, 8, 0, 0, 1, PCOLL_AA_BRUCK},
    {PCOLL_ALLTOALL, 64 << 10, 1, 0, 0, 1, PCOLL_AA_SCATTERED},
    /* Between hosts, every block size up to 8 ranks: the rendezvous
     * handshakes of all peers overlap instead of one per pairwise round.
     * 2 namespace hosts of the 16-core machine, medians of 6 rounds in two
     * orders: 2 x 2 ranks 1 MiB 458 -> 347 us, 4 MiB 1252 -> 1139; 2 x 3
     * ranks 1 MiB 647 -> 452, 4 MiB 1397 -> 1051 (docs/PERFORMANCE.md,
     * session 16). With 2 ranks both schedules are the same exchange.
     * Larger communicators keep pairwise: up to 7 senders at once into one
     * receiver is an incast this could not be measured on. */
    {PCOLL_ALLTOALL, ANY, 1, 8, 0, 2, PCOLL_AA_SCATTERED},
    {PCOLL_ALLTOALL, ANY, 1, 0, 0, 1, PCOLL_AA_PAIRWISE},
    {PCOLL_ALLTOALLV, ANY, 1, 0, 0, 1, PCOLL_AA_SCATTERED},
    {PCOLL_BARRIER, ANY, 1, 0, 0, 1, PCOLL_ONLY},
    {PCOLL_GATHER, ANY, 1, 0, 0, 1, PCOLL_ONLY},
    {PCOLL_SCATTER, ANY, 1, 0, 0, 1, PCOLL_ONLY},
};
#define PCOLL_NRULES (sizeof pcoll_rules / sizeof pcoll_rules[0])

static const char *const coll_names[PCOLL_NCOLL] = {
    "barrier", "bcast", "reduce", "allreduce", "allgather", "reduce_scatter", "alltoall",
    "alltoallv", "gather", "scatter"};

/* Algorithm names by collective; index = algorithm id (0 = auto). */
static const char *const *algo_names(int coll)
{
    static const char *const ar[] = {"auto", "recursive_doubling", "ring", "rabenseifner", "shm",
                                     "two_level", NULL};
    static const char *const ag[] = {"auto", "ring", "recursive_doubling", "bruck", "shm",
                                     "two_level", NULL};
    static const char *const rs[] = {"auto", "ring", "recursive_halving", "shm", "two_level",
                                     NULL};
    static const char *const bc[] = {"auto", "binomial", "scatter_allgather", "chain", "shm", NULL};
    static const char *const re[] = {"auto", "binomial", "rabenseifner", "shm", NULL};
    static const char *const aa[] = {"auto", "pairwise", "bruck", "scattered", "shm", NULL};
    static const char *const ba[] = {"auto", "dissemination", NULL};
    static const char *const bi[] = {"auto", "binomial", NULL};
    switch (coll) {
    case PCOLL_ALLREDUCE:      return ar;
    case PCOLL_ALLGATHER:      return ag;
    case PCOLL_REDUCE_SCATTER: return rs;
    case PCOLL_BCAST:          return bc;
    case PCOLL_REDUCE_C:       return re;
    case PCOLL_ALLTOALL:
    case PCOLL_ALLTOALLV:      return aa;
    case PCOLL_BARRIER:        return ba;
    default:                   return bi;
    }
}

const char *pcoll_coll_name(int coll)
{
    return coll >= 0 && coll < PCOLL_NCOLL ? coll_names[coll] : "?";
}

const char *pcoll_algo_name(int coll, int algo)
{
    const char *const *names = algo_names(coll);
    for (int i = 0; names[i]; i++)
        if (i == algo)
            return names[i];
    return "?";
}

/* The forced algorithm (0 = auto) of a collective. */
int pcoll_forced(const prt_config_t *c, int coll)
{
    switch (coll) {
    case PCOLL_ALLREDUCE:      return c->allreduce_algo;
    case PCOLL_ALLGATHER:      return c->allgather_algo;
    case PCOLL_REDUCE_SCATTER: return c->reduce_scatter_algo;
    case PCOLL_BCAST:          return c->bcast_algo;
    case PCOLL_REDUCE_C:       return c->reduce_algo;
    case PCOLL_ALLTOALLV:      /* Bruck needs equal blocks: pairwise instead; no shm variant */
        return c->alltoall_algo == PCOLL_AA_BRUCK ? PCOLL_AA_PAIRWISE
             : c->alltoall_algo == PCOLL_AA_SHM ? PCOLL_AA_SCATTERED : c->alltoall_algo;
    case PCOLL_ALLTOALL:       return c->alltoall_algo;
    case PCOLL_GATHER:         return c->gather_algo;
    case PCOLL_SCATTER:        return c->scatter_algo;
    case PCOLL_BARRIER:        return c->barrier_algo;
    default:                   return PCOLL_AUTO;
    }
}

/* Bytes the table compares for this call. */
static size_t select_bytes(const pcoll_args_t *a, int n)
{
    size_t b = a->count * a->es;
    if (a->coll == PCOLL_ALLGATHER || a->coll == PCOLL_REDUCE_SCATTER)
        return b > SIZE_MAX / (size_t)n ? SIZE_MAX : b * (size_t)n;
    return b;
}

/* 1 when every rank of comm shares this host, else 2 (at least). */
static int select_hosts(ppt_state_t *s, plait_comm_t comm)
{
    for (int i = 0; i < comm->size; i++) {
        int w = comm->world_of[i], local = 0;
        for (int j = 0; j < s->job.local_size && !local; j++)
            local = s->job.local_peers[j] == w;
        if (!local)
            return 2;
    }
    return 1;
}

static int rule_matches(const pcoll_rule_t *rl, int coll, size_t bytes, int n, int hosts)
{
    if (rl->coll != coll || bytes > rl->max_bytes || n < rl->min_ranks || hosts < rl->min_hosts)
        return 0;
    if (rl->max_ranks && n > rl->max_ranks)
        return 0;
    return !(rl->pof2 && (n & (n - 1)));
}

int pcoll_shm_algo(int coll, int algo)
{
    return (coll == PCOLL_ALLREDUCE && algo == PCOLL_AR_SHM) ||
           (coll == PCOLL_ALLGATHER && algo == PCOLL_AG_SHM) ||
           (coll == PCOLL_REDUCE_SCATTER && algo == PCOLL_RS_SHM) ||
           (coll == PCOLL_REDUCE_C && algo == PCOLL_RE_SHM) ||
           (coll == PCOLL_BCAST && algo == PCOLL_BC_SHM) ||
           (coll == PCOLL_ALLTOALL && algo == PCOLL_AA_SHM);
}

static int is_two_level(int coll, int algo)
{
    return (coll == PCOLL_ALLREDUCE && algo == PCOLL_AR_TWO_LEVEL) ||
           (coll == PCOLL_ALLGATHER && algo == PCOLL_AG_TWO_LEVEL) ||
           (coll == PCOLL_REDUCE_SCATTER && algo == PCOLL_RS_TWO_LEVEL);
}

/*
 * What selection needs to know of a communicator (host count, shm reach)
 * does not change while it lives, but costs O(n * local ranks) to work out:
 * a few recent communicators' answers are kept (the state lock guards them;
 * keyed by communicator and context, and emptied by plait_init, so a reused
 * address never hits a stale entry).
 */
#define SELECT_CACHE 4
typedef struct {
    const ppt_state_t *s;
    plait_comm_t       comm;
    uint64_t           ctx;
    int                hosts, shm;
} select_comm_t;
static select_comm_t select_cache[SELECT_CACHE];

static const select_comm_t *select_comm(ppt_state_t *s, plait_comm_t comm)
{
    select_comm_t *e = &select_cache[((uintptr_t)comm >> 6) % SELECT_CACHE];
    if (e->s != s || e->comm != comm || e->ctx != comm->ctx) {
        e->s = s;
        e->comm = comm;
        e->ctx = comm->ctx;
        e->hosts = select_hosts(s, comm);
        e->shm = pcoll_shm_usable(s, comm);
    }
    return e;
}

void pcoll_select_reset(void)
{
    memset(select_cache, 0, sizeof select_cache);
}

int pcoll_select(ppt_state_t *s, plait_comm_t comm, const pcoll_args_t *a)
{
    int forced = pcoll_forced(&s->cfg, a->coll), n = comm->size;
    const select_comm_t *c;
    size_t bytes;
    if (forced != PCOLL_AUTO && !pcoll_shm_algo(a->coll, forced))
        return forced;
    c = select_comm(s, comm);
    if (forced != PCOLL_AUTO)
        return c->shm ? forced : a->coll == PCOLL_ALLREDUCE ? PCOLL_AR_RING : 1;   /* ring */
    bytes = select_bytes(a, n);
    for (size_t i = 0; i < PCOLL_NRULES; i++)
        if (rule_matches(&pcoll_rules[i], a->coll, bytes, n, c->hosts) &&
            (c->shm || !pcoll_shm_algo(a->coll, pcoll_rules[i].algo)) &&
            (!is_two_level(a->coll, pcoll_rules[i].algo) || pcoll_hier_useful(s, comm)))
            return pcoll_rules[i].algo;
    return 1;
}

int pcoll_pair_use(ppt_state_t *s, plait_comm_t comm, const pcoll_args_t *a)
{
    return comm->size == 2 && pcoll_forced(&s->cfg, a->coll) == PCOLL_AUTO &&
           pcoll_pair_eligible(a);
}

static void size_text(size_t b, char *out, size_t len)
{
    if (b == ANY)
        snprintf(out, len, "any");
    else if (b >= (1u << 20) && b % (1u << 20) == 0)
        snprintf(out, len, "%zuM", b >> 20);
    else if (b >= 1024 && b % 1024 == 0)
        snprintf(out, len, "%zuK", b >> 10);
    else
        snprintf(out, len, "%zu", b);
}

void pcoll_selection_print(FILE *f)
{
    static const char *const setting[PCOLL_NCOLL] = {
        NULL, "PLAIT_BCAST_ALGO", "PLAIT_REDUCE_ALGO", "PLAIT_ALLREDUCE_ALGO",
        "PLAIT_ALLGATHER_ALGO", "PLAIT_REDUCE_SCATTER_ALGO", "PLAIT_ALLTOALL_ALGO",
        "PLAIT_ALLTOALL_ALGO", NULL, NULL};
    fprintf(f, "Collective algorithm selection (first matching row wins; bytes: allreduce, "
               "reduce, bcast: the vector; allgather, reduce_scatter: all n blocks; alltoall: one "
               "block)\n");
    fprintf(f, "  %-15s %-9s %-9s %-6s %-6s %-19s %s\n", "collective", "bytes<=", "ranks",
            "pof2", "hosts", "algorithm", "forced by");
    for (size_t i = 0; i < PCOLL_NRULES; i++) {
        const pcoll_rule_t *rl = &pcoll_rules[i];
        char sz[32], ranks[16];
        size_text(rl->max_bytes, sz, sizeof sz);
        if (rl->max_ranks)
            snprintf(ranks, sizeof ranks, "%d..%d", rl->min_ranks, rl->max_ranks);
        else
            snprintf(ranks, sizeof ranks, ">=%d", rl->min_ranks);
        fprintf(f, "  %-15s %-9s %-9s %-6s %-6s %-19s %s\n", pcoll_coll_name(rl->coll), sz, ranks,
                rl->pof2 ? "yes" : "any", rl->min_hosts > 1 ? ">=2" : "any",
                pcoll_algo_name(rl->coll, rl->algo),
                setting[rl->coll] ? setting[rl->coll] : "-");
    }
    fprintf(f, "  one host, blocking, nothing forced, bytes per rank (allgather: all) <= PLAIT_COLL_SHM_SMALL "
               "(2 ranks: <= 16K; allgather, alltoall, gather, scatter above 64K: blocks <= 16K): "
               "flags on a shared-memory area, no messages (shm_small), before any row\n");
    fprintf(f, "  2 ranks, blocking, nothing forced: bcast <= 64K, allreduce and reduce_scatter "
               "<= 8K, allgather <= 32K, alltoall <= 64K run as one direct exchange (pair)\n");
    fprintf(f, "  recursive_doubling on 2 ranks: a vector of 2 or more PLAIT_COLL_PIPE chunks "
               "moves chunk by chunk, each reduced as it arrives\n");
    fprintf(f, "  two_level: a host map per communicator, world's learnt at plait_init, "
               "another's in its first blocking two-level call (until then non-blocking ones "
               "run the flat rows below theirs, as do hosts of different rank counts)\n");
    fprintf(f, "  shm rows apply only where every rank is on this host with direct reads "
               "(PLAIT_SHM_CMA=1)\n");
    fprintf(f, "  reduction kernels: %s (PLAIT_REDUCE_ISA)\n", pcoll_reduce_isa());
}
