/*
 * config.c -- the one table of PLAIT_* settings. Every setting the library
 * reads is declared here with its type, default and a one-line doc; plait_info
 * prints this table. A malformed value is an error naming the variable, never a
 * silent default.
 */
#include "config.h"

#include <ctype.h>
#include <stddef.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/prt.h"

#define PRT_CFG_SECONDS_MAX 1e9   /* about 31 years */
#define CFG_AT(field) offsetof(prt_config_t, field), sizeof(((prt_config_t *)0)->field)

static const prt_cfg_entry_t prt_cfg_entries[] = {
    {"PLAIT_TIMEOUT", PRT_CFG_DOUBLE, "0", NULL,
     "seconds any blocking wait may last before failing with PLAIT_ERR_TIMEOUT (0 = forever; "
     "between hosts, a point-to-point wait lasts while data keeps moving with that rank)",
     CFG_AT(timeout_s)},
    {"PLAIT_LOG_LEVEL", PRT_CFG_ENUM, "warn", "none|error|warn|info|debug|trace",
     "how much the library writes to stderr", CFG_AT(log_level)},
    {"PLAIT_TRANSPORT", PRT_CFG_ENUM, "auto", "auto|shm|tcp|udp",
     "transport between ranks: auto = shared memory inside a host, udp (multipath) between hosts; "
     "tcp or udp (multipath) = that transport for every pair (loopback inside a host)",
     CFG_AT(transport)},
    {"PLAIT_TCP_IF", PRT_CFG_STRING, "", NULL,
     "network interface for the tcp transport (empty: every IPv4 interface that is up)",
     CFG_AT(tcp_if)},
    {"PLAIT_UDP_IF", PRT_CFG_STRING, "", NULL,
     "network interface or IPv4 address for the udp transport (empty: every IPv4 interface "
     "that is up, a service address on the loopback device first: peers send to it)",
     CFG_AT(udp_if)},
    {"PLAIT_UDP_PATHS", PRT_CFG_INT, "32", NULL,
     "paths per pair of ranks for the udp transport (UDP port pairs that ECMP hashes apart; 1..256)",
     CFG_AT(udp_paths)},
    {"PLAIT_ENGINES", PRT_CFG_INT, "1", NULL,
     "engine threads of the udp transport (TX, RX, pacing, timers; 1..16)", CFG_AT(engines)},
    {"PLAIT_CHUNK_SIZE", PRT_CFG_SIZE, "32K", NULL,
     "bytes per chunk, the unit of congestion-control and path decisions (udp transport)",
     CFG_AT(chunk_size)},
    {"PLAIT_CC", PRT_CFG_ENUM, "cubic", "cubic|swift|dgpool|eqds",
     "congestion control of the udp transport (dgpool: delay gradient with a token pool; "
     "eqds: receiver credits)", CFG_AT(cc)},
    {"PLAIT_LB", PRT_CFG_ENUM, "pwin", "p2c|spray|ackclock|pwin",
     "path choice per chunk of the udp transport (p2c: power of two choices on path RTT; "
     "pwin: p2c among paths with room in their own windows, a congestion loss or a "
     "queue 1 ms above the least queued path's shrinks its path only)", CFG_AT(lb)},
    {"PLAIT_UDP_DUPACK", PRT_CFG_INT, "128", NULL,
     "later packets SACKed before a packet counts as lost (large: spraying reorders)",
     CFG_AT(udp_dupthresh)},
    {"PLAIT_UDP_SMALL", PRT_CFG_SIZE, "8K", NULL,
     "messages below this size stay on one path (latency) instead of being sprayed",
     CFG_AT(udp_small)},
    {"PLAIT_UDP_RTO_MIN_US", PRT_CFG_INT, "500", NULL,
     "floor of the udp retransmission timeout, microseconds (the RTO is srtt + 4 rttvar, backed off)",
     CFG_AT(udp_rto_min_us)},
    {"PLAIT_UDP_GIVE_UP", PRT_CFG_DOUBLE, "30", NULL,
     "seconds a udp packet may stay unacknowledged before the peer is declared unreachable",
     CFG_AT(udp_give_up_s)},
    {"PLAIT_UDP_MTU", PRT_CFG_SIZE, "0", NULL,
     "udp datagram size limit in bytes (0: the interface MTU; 65535 inside a host)", CFG_AT(udp_mtu)},
    {"PLAIT_UDP_GSO", PRT_CFG_BOOL, "1", NULL,
     "udp: send batches with segmentation offload (UDP_SEGMENT) when the kernel offers it",
     CFG_AT(udp_gso)},
    {"PLAIT_UDP_GRO", PRT_CFG_BOOL, "1", NULL,
     "udp: receive coalesced datagrams (UDP_GRO) where the kernel offers it (0: one packet per "
     "datagram, GSO datagrams cut into their segments by the receiving kernel)",
     CFG_AT(udp_gro)},
    {"PLAIT_UDP_RUNS", PRT_CFG_BOOL, "1", NULL,
     "udp: a GSO datagram of one message's packets carries one header for all of them (the "
     "receiver's kernel hands it over whole on veth and bridges; where a path cuts it, the "
     "receiver says so and the sender goes back to a header per packet)",
     CFG_AT(udp_runs)},
    {"PLAIT_UDP_ZCOPY_MIN", PRT_CFG_SIZE, "64K", NULL,
     "udp: rendezvous data frames from this size are sent from the user's buffer, not copied "
     "(the send completes once every packet is acknowledged; 0 = always copy)",
     CFG_AT(udp_zcopy_min)},
    {"PLAIT_UDP_TX_HELP", PRT_CFG_ENUM, "auto", "auto|on|off",
     "udp: while the application waits on a bulk transfer, the engine thread sends it (alongside the "
     "caller, or alone while the caller receives; auto = on where the process may use two cores, "
     "or its engine a core no rank of the host is bound to: PLAIT_THREAD_CPU)",
     CFG_AT(udp_tx_help)},
    {"PLAIT_STATS", PRT_CFG_BOOL, "0", NULL,
     "print the collectives' paths (calls on the shared area, direct exchange, schedule "
     "engine) and per-connection and per-path transport counters to stderr at plait_finalize",
     CFG_AT(stats)},
    {"PLAIT_TRACE", PRT_CFG_STRING, "", NULL,
     "directory to write an event timeline of each rank to at plait_finalize "
     "(plait-trace.RANK.txt; bench/timeline.py reads them; empty: off)", CFG_AT(trace)},
    {"PLAIT_SHM_EAGER_LIMIT", PRT_CFG_SIZE, "16K", NULL,
     "largest message sent eagerly through the shared-memory ring (larger: rendezvous, one copy)", CFG_AT(shm_eager_limit)},
    {"PLAIT_NET_EAGER_LIMIT", PRT_CFG_SIZE, "128K", NULL,
     "largest message sent eagerly to a rank on another host (tcp, udp; larger: rendezvous)", CFG_AT(net_eager_limit)},
    {"PLAIT_NET_HEAD", PRT_CFG_SIZE, "0", NULL,
     "bytes a rendezvous to a rank on another host sends with its announcement, before the "
     "receiver answers (at most half the message, at most 1M; 0 = none; 64K helps one-way "
     "transfers such as bcast, slows exchanges)", CFG_AT(net_head)},
    {"PLAIT_COLL_EAGER_LIMIT", PRT_CFG_SIZE, "4K", NULL,
     "the shared-memory eager limit of the blocking collectives' own messages (a larger "
     "value is capped at PLAIT_SHM_EAGER_LIMIT, which non-blocking ones use)",
     CFG_AT(coll_eager_limit)},
    {"PLAIT_SHM_RING_SLOTS", PRT_CFG_SIZE, "64", NULL,
     "slots per shared-memory ring (one ring per ordered pair of local ranks; power of two)", CFG_AT(shm_ring_slots)},
    {"PLAIT_SHM_CMA", PRT_CFG_BOOL, "1", NULL,
     "single-copy large messages with process_vm_readv when permitted (0: copy through the ring)", CFG_AT(shm_cma)},
    {"PLAIT_SHM_COOP_MIN", PRT_CFG_SIZE, "256K", NULL,
     "from this size a waiting sender helps copy its message (two cores copy at once; 0: never)",
     CFG_AT(shm_coop_min)},
    {"PLAIT_WAIT_SPIN_US", PRT_CFG_INT, "20", NULL,
     "microseconds a blocked call busy-polls before yielding the CPU", CFG_AT(spin_us)},
    {"PLAIT_WAIT_YIELD_US", PRT_CFG_INT, "2000", NULL,
     "microseconds without progress a blocked call polls with sched_yield before sleeping on a wake-up",
     CFG_AT(yield_us)},
    {"PLAIT_PROGRESS_THREAD", PRT_CFG_BOOL, "1", NULL,
     "a library thread moves non-blocking collectives on while the program computes (started "
     "at the first one, asleep while none is in flight; 0: only inside plait calls)",
     CFG_AT(progress_thread)},
    {"PLAIT_PROGRESS_POLL", PRT_CFG_BOOL, "1", NULL,
     "the progress thread, on a core no rank is bound to (PLAIT_THREAD_CPU), polls while a "
     "non-blocking collective is in flight and drives it as soon as the program leaves plait "
     "(0: looks every 20 us)",
     CFG_AT(progress_poll)},
    {"PLAIT_THREAD_CPU", PRT_CFG_ENUM, "auto", "auto|rank",
     "where the library's threads (progress thread, udp engines) run: auto = cores no rank of "
     "the host is bound to, when the ranks are bound and some are left (else as rank); "
     "rank = the rank's own CPUs",
     CFG_AT(thread_cpu)},
    {"PLAIT_SINGLETON", PRT_CFG_BOOL, "1", NULL,
     "run as a job of size 1 when no PMIx server is reachable (0: fail plait_init instead)", CFG_AT(singleton_ok)},
    /* collectives: the choices' order is coll/pcoll.h's algorithm ids */
    {"PLAIT_ALLREDUCE_ALGO", PRT_CFG_ENUM, "auto", "auto|recursive_doubling|ring|rabenseifner|shm|two_level",
     "allreduce algorithm (auto: by message and communicator size, see plait_info)", CFG_AT(allreduce_algo)},
    {"PLAIT_ALLGATHER_ALGO", PRT_CFG_ENUM, "auto", "auto|ring|recursive_doubling|bruck|shm|two_level",
     "allgather algorithm (auto: by message and communicator size)", CFG_AT(allgather_algo)},
    {"PLAIT_REDUCE_SCATTER_ALGO", PRT_CFG_ENUM, "auto", "auto|ring|recursive_halving|shm|two_level",
     "reduce_scatter algorithm (auto: by message and communicator size)", CFG_AT(reduce_scatter_algo)},
    {"PLAIT_BCAST_ALGO", PRT_CFG_ENUM, "auto", "auto|binomial|scatter_allgather|chain|shm",
     "bcast algorithm (auto: by message and communicator size)", CFG_AT(bcast_algo)},
    {"PLAIT_REDUCE_ALGO", PRT_CFG_ENUM, "auto", "auto|binomial|rabenseifner|shm",
     "reduce algorithm (auto: by message and communicator size)", CFG_AT(reduce_algo)},
    {"PLAIT_ALLTOALL_ALGO", PRT_CFG_ENUM, "auto", "auto|pairwise|bruck|scattered|shm",
     "alltoall algorithm; alltoallv follows it (bruck: pairwise there, shm: scattered)", CFG_AT(alltoall_algo)},
    /* one algorithm each: declared so that a wrong name fails as for the others */
    {"PLAIT_GATHER_ALGO", PRT_CFG_ENUM, "auto", "auto|binomial",
     "gather algorithm (one: binomial)", CFG_AT(gather_algo)},
    {"PLAIT_SCATTER_ALGO", PRT_CFG_ENUM, "auto", "auto|binomial",
     "scatter algorithm (one: binomial)", CFG_AT(scatter_algo)},
    {"PLAIT_BARRIER_ALGO", PRT_CFG_ENUM, "auto", "auto|dissemination",
     "barrier algorithm (one: dissemination)", CFG_AT(barrier_algo)},
    {"PLAIT_REDUCE_ISA", PRT_CFG_ENUM, "auto", "auto|scalar|avx2|avx512",
     "reduction kernels (auto: the widest this CPU has; all give bitwise-equal results)", CFG_AT(reduce_isa)},
    {"PLAIT_COLL_SHM_SMALL", PRT_CFG_SIZE, "128K", NULL,
     "blocking collectives of a one-host communicator that move at most this many bytes per rank "
     "(allgather: the whole result; above 64K only with blocks of at most 16K) run on a "
     "shared-memory area with flags, no messages (0 = off; at most 1M)",
     CFG_AT(coll_shm_small)},
    {"PLAIT_COLL_PIPE", PRT_CFG_SIZE, "1M", NULL,
     "the allreduce of two ranks on two hosts moves a vector of two or more such chunks chunk by "
     "chunk and reduces each as it arrives, while the next ones move (0 = one message, reduced "
     "at the end)",
     CFG_AT(coll_pipe)},
};

#define PRT_CFG_COUNT (sizeof prt_cfg_entries / sizeof prt_cfg_entries[0])

const prt_cfg_entry_t *prt_cfg_table(size_t *n)
{
    *n = PRT_CFG_COUNT;
    return prt_cfg_entries;
}

const char *prt_cfg_type_name(prt_cfg_type_t t)
{
    static const char *names[] = {"int", "size", "bool", "double", "string", "enum"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

static int cfg_bad(const prt_cfg_entry_t *e, const char *text, const char *want)
{
    return prt_err(PLAIT_ERR_ARG, "setting %s='%s' is invalid: expected %s", e->name, text, want);
}

static int cfg_parse_size(const prt_cfg_entry_t *e, const char *text, size_t *out)
{
    char *end;
    unsigned long long v;
    unsigned shift = 0;
    errno = 0;
    if (!isdigit((unsigned char)text[0]))
        return cfg_bad(e, text, "a size such as 4096, 16K, 8M or 1G");
    v = strtoull(text, &end, 10);
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    default: break;
    }
    if (v > (SIZE_MAX >> shift))   /* 17179869184G wrapped round to 0 */
        errno = ERANGE;
    v <<= shift;
    if (errno || *end != '\0')
        return cfg_bad(e, text, "a size such as 4096, 16K, 8M or 1G");
    *out = (size_t)v;
    return PLAIT_OK;
}

static int cfg_parse_bool(const prt_cfg_entry_t *e, const char *text, int *out)
{
    static const char *yes[] = {"1", "yes", "true", "on"}, *no[] = {"0", "no", "false", "off"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(text, yes[i])) { *out = 1; return PLAIT_OK; }
        if (!strcasecmp(text, no[i]))  { *out = 0; return PLAIT_OK; }
    }
    return cfg_bad(e, text, "1/0, yes/no, true/false or on/off");
}

/* ENUM: the index of text among "a|b|c" choices. */
static int cfg_enum_index(const char *choices, const char *text)
{
    const char *c = choices;
    size_t len = strlen(text);
    for (int i = 0; c && *c; i++) {
        const char *bar = strchr(c, '|');
        size_t clen = bar ? (size_t)(bar - c) : strlen(c);
        if (clen == len && !strncasecmp(c, text, len))
            return i;
        c = bar ? bar + 1 : c + clen;
    }
    return -1;
}

/* A choice by name; where the choices have "on" and "off", 1 and 0 stand
 * for them too, as for the boolean settings (a black-box test set
 * PLAIT_UDP_TX_HELP=0 and was refused). */
static int cfg_parse_enum(const prt_cfg_entry_t *e, const char *text, int *out)
{
    int i = cfg_enum_index(e->choices, text);
    if (i < 0 && (!strcmp(text, "1") || !strcmp(text, "0")))
        i = cfg_enum_index(e->choices, text[0] == '1' ? "on" : "off");
    if (i < 0)
        return cfg_bad(e, text, e->choices);
    *out = i;
    return PLAIT_OK;
}

int prt_cfg_parse(const prt_cfg_entry_t *e, const char *text, void *out, size_t outlen)
{
    char *end;
    switch (e->type) {
    case PRT_CFG_INT: {
        long v;
        errno = 0;
        if (!isdigit((unsigned char)text[0]))   /* (strtol skips blanks, takes a sign) */
            return cfg_bad(e, text, "a non-negative integer");
        v = strtol(text, &end, 10);
        if (errno || end == text || *end || v < 0)
            return cfg_bad(e, text, "a non-negative integer");
        *(long *)out = v;
        return PLAIT_OK;
    }
    case PRT_CFG_DOUBLE: {
        double v;
        errno = 0;
        /* strtod also skips leading blanks (trailing ones failed) and reads
         * hex ("0x10" was 16 s): neither is a number a user means here */
        if (isspace((unsigned char)text[0]) || strpbrk(text, "xX"))
            return cfg_bad(e, text, "a non-negative decimal number");
        v = strtod(text, &end);
        if (errno || end == text || *end || !(v >= 0))
            return cfg_bad(e, text, "a non-negative number");
        *(double *)out = v;
        return PLAIT_OK;
    }
    case PRT_CFG_SIZE:   return cfg_parse_size(e, text, out);
    case PRT_CFG_BOOL:   return cfg_parse_bool(e, text, out);
    case PRT_CFG_ENUM:   return cfg_parse_enum(e, text, out);
    case PRT_CFG_STRING:
        if (strlen(text) >= outlen)
            return cfg_bad(e, text, "a shorter string");
        strcpy(out, text);
        return PLAIT_OK;
    }
    return PLAIT_ERR_INTERNAL;
}

static int cfg_check_limits(const prt_config_t *c)
{
    struct stat st;
    if (c->shm_ring_slots < 2 || c->shm_ring_slots > 65536 ||
        (c->shm_ring_slots & (c->shm_ring_slots - 1)))
        return prt_err(PLAIT_ERR_ARG, "setting PLAIT_SHM_RING_SLOTS=%zu is invalid: expected a power "
                       "of two in 2..65536", c->shm_ring_slots);
    if (c->shm_eager_limit < 64 || c->shm_eager_limit > (1u << 20))
        return prt_err(PLAIT_ERR_ARG, "setting PLAIT_SHM_EAGER_LIMIT=%zu is invalid: expected 64 .. 1M "
                       "bytes", c->shm_eager_limit);
    if (c->net_head > (1u << 20))
        return prt_err(PLAIT_ERR_ARG, "setting PLAIT_NET_HEAD=%zu is invalid: expected 0 .. 1M",
                       c->net_head);
    if (c->udp_paths < 1 || c->udp_paths > 256)
        return prt_err(PLAIT_ERR_ARG, "setting PLAIT_UDP_PATHS=%ld is invalid: expected 1..256",
                       c->udp_paths);
    if (c->engines < 1 || c->engines > 16)
        return prt_err(PLAIT_ERR_ARG, "setting PLAIT_ENGINES=%ld is invalid: expected 1..16",
                       c->engines);
    if (c->chunk_size < 1024 || c->chunk_size > (1u << 20))
        return prt_err(PLAIT_ERR_ARG, "setting PLAIT_CHUNK_SIZE=%zu is invalid: expected 1K .. 1M",
                       c->chunk_size);
    if (c->udp_dupthresh < 1 || c->udp_dupthresh > 1000)
        return prt_err(PLAIT_ERR_ARG, "setting PLAIT_UDP_DUPACK=%ld is invalid: expected 1..1000",
                       c->udp_dupthresh);
    if (c->udp_rto_min_us < 10)
        return prt_err(PLAIT_ERR_ARG, "setting PLAIT_UDP_RTO_MIN_US=%ld is invalid: expected >= 10",
                       c->udp_rto_min_us);
    if (c->coll_shm_small > (1u << 20))
        return prt_err(PLAIT_ERR_ARG, "setting PLAIT_COLL_SHM_SMALL=%zu is invalid: expected 0 .. "
                       "1M", c->coll_shm_small);
    if (c->coll_pipe && c->coll_pipe < (16u << 10))
        return prt_err(PLAIT_ERR_ARG, "setting PLAIT_COLL_PIPE=%zu is invalid: expected 0 (off) or "
                       "at least 16K", c->coll_pipe);
    /* Seconds become nanoseconds in 64 bits and whole seconds in an int
     * (PMIx): beyond about 31 years both overflowed ("inf" made plait_init
     * time out at once, after -2147483648 s). 0 is the way to say forever. */
    if (c->timeout_s > PRT_CFG_SECONDS_MAX)
        return prt_err(PLAIT_ERR_ARG, "setting PLAIT_TIMEOUT=%g is invalid: expected 0 (no limit) "
                       "or at most %g seconds", c->timeout_s, PRT_CFG_SECONDS_MAX);
    if (c->udp_give_up_s > PRT_CFG_SECONDS_MAX)
        return prt_err(PLAIT_ERR_ARG, "setting PLAIT_UDP_GIVE_UP=%g is invalid: expected at most %g "
                       "seconds", c->udp_give_up_s, PRT_CFG_SECONDS_MAX);
    if (c->udp_mtu && (c->udp_mtu < 576 || c->udp_mtu > 65535))
        return prt_err(PLAIT_ERR_ARG, "setting PLAIT_UDP_MTU=%zu is invalid: expected 0 or "
                       "576..65535", c->udp_mtu);
    /* (also here, not only when plait_init opens the file: plait_info then
     * refuses what plait_init would) */
    if (c->trace[0] && (stat(c->trace, &st) != 0 || !S_ISDIR(st.st_mode) ||
                        access(c->trace, W_OK | X_OK) != 0))
        return prt_err(PLAIT_ERR_ARG, "setting PLAIT_TRACE=%s is invalid: expected a directory "
                       "this process can write", c->trace);
    return PLAIT_OK;
}

/* Parses every setting from the environment (or its default) into c. A
 * variable set to the empty string counts as unset (`PLAIT_TRANSPORT= prog`
 * runs with the default, as shells and most tools read it). */
int prt_cfg_load(prt_config_t *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < PRT_CFG_COUNT; i++) {
        const prt_cfg_entry_t *e = &prt_cfg_entries[i];
        const char *text = getenv(e->name);
        PRT_CHECK(prt_cfg_parse(e, text && *text ? text : e->defval, (char *)c + e->offset,
                                e->size));
    }
    return cfg_check_limits(c);
}

/* Edit distance of a and b (each at most 63 characters), stopping at 3. */
static int cfg_distance(const char *a, const char *b)
{
    int la = (int)strlen(a), lb = (int)strlen(b), row[64], best;
    if (la > 63 || lb > 63 || abs(la - lb) > 2)
        return 3;
    for (int j = 0; j <= lb; j++)
        row[j] = j;
    for (int i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = i;
        best = row[0];
        for (int j = 1; j <= lb; j++) {
            int up = row[j], v = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < v)
                v = up + 1;
            if (row[j - 1] + 1 < v)
                v = row[j - 1] + 1;
            row[j] = v;
            diag = up;
            if (v < best)
                best = v;
        }
        if (best > 2)
            return 3;
    }
    return row[lb];
}

const char *prt_cfg_suggest(const char *name)
{
    const char *best = NULL;
    int bestd = strlen(name) < 12 ? 2 : 3;   /* short names: one edit (PLAIT_OK is no PLAIT_CC) */
    if (strncmp(name, "PLAIT_", 6) != 0)
        return NULL;
    for (size_t i = 0; i < PRT_CFG_COUNT; i++) {
        int d = cfg_distance(name, prt_cfg_entries[i].name);
        if (d == 0)
            return NULL;   /* a setting */
        if (d < bestd) {
            bestd = d;
            best = prt_cfg_entries[i].name;
        }
    }
    return best;
}

/* Names only near a setting: the test and benchmark scripts pass their own
 * PLAIT_* variables (PLAIT_BUILDDIR, PLAIT_TEST_NP...), which are not typos. */
void prt_cfg_warn_typos(void)
{
    extern char **environ;
    for (char **e = environ; e && *e; e++) {
        char name[64];
        const char *eq = strchr(*e, '='), *near;
        size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
        if (len >= sizeof name || strncmp(*e, "PLAIT_", 6) != 0)
            continue;
        memcpy(name, *e, len);
        name[len] = '\0';
        if ((near = prt_cfg_suggest(name)) != NULL)
            prt_log(PRT_LOG_WARN, "%s is not a plait setting and is ignored: did you mean %s? "
                    "(plait_info lists the settings)", name, near);
    }
}
