/*
 * shm.c -- collectives inside one host that read the other ranks' buffers
 * directly (the shm transport's get: process_vm_readv, one copy, no message
 * per byte) instead of passing the data along a ring or tree.
 *
 * Every schedule starts with an address exchange: each rank sends every other
 * rank a small record (where its input is, where its result will be) over
 * pt2pt. Then each rank does its share of the work by reading peers' memory,
 * and zero-byte "done" messages to every peer fence the phases, so that no
 * rank reads a buffer its owner may already have changed or returned:
 *
 *  allreduce (n slices of the vector, slice i reduced by rank i only):
 *    1. exchange addresses; rank i reduces slice i over ranks i+1, .., n-1,
 *       0, .., i in that order (pcoll_reduce_turn: the readers spread over
 *       the owners), reading each peer's part in L2-sized chunks; AVG
 *       divides there (float16 AVG scales each part as it is read:
 *       pcoll_prescaled). The result goes to
 *       its own recvbuf slice (in place: to scratch, since peers still read
 *       that slice of its input).
 *    2. done; rank i copies every other slice from its reducer's result.
 *    3. done (peers have read this rank's result; it may return).
 *  Each element is reduced once, by one rank, in a fixed order, so every rank
 *  holds bitwise the same bytes (and the same as the next call's). Traffic
 *  per rank: reads (n-1)/n of the vector twice, writes nothing remote: the
 *  same bytes as a ring, in one copy and no pipeline of n-1 steps.
 *  reduce_scatter: step 1 with slice = block i; in place the result is copied
 *    to the front of recvbuf after step 2 (peers read block 0 until then).
 *  reduce: step 1, then the root alone reads the slices (pcoll_reduce_shm).
 *  allgather: rank i reads block j from rank j's input into place; step 2's
 *    done keeps inputs alive until every rank has read them.
 * Requires every rank of the communicator on this host with direct reads
 * permitted (pcoll_shm_usable); a read refused halfway fails the collective.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "coll/pcoll.h"

/* Reads and reduces this much of a peer's slice at a time: the operand and
 * the accumulator chunk both stay in L2. */
#define SHM_CHUNK ((size_t)128 << 10)

typedef struct {
    uint64_t src;      /* the rank's input (its slice / block 0 at this address + offset) */
    uint64_t res;      /* its reduced slice (allreduce) */
    uint64_t count;    /* its count, element size and call signature (pcoll_call_sig): */
    uint32_t es;       /* mismatches are caught before any read, which would otherwise */
    uint32_t sig;      /* go past a peer's buffer or mix operators */
} shm_addr_t;

typedef struct {
    pcoll_args_t a;
    shm_addr_t  *addr;       /* by comm rank; own entry filled at build time */
    char        *mine;       /* where this rank's reduced slice goes */
    char        *chunk;      /* SHM_CHUNK bytes of scratch */
    size_t       off, cnt;   /* this rank's slice: element offset and count */
    char         token;      /* payload of the zero-byte done messages */
} shm_ctx_t;

int pcoll_shm_usable(ppt_state_t *s, plait_comm_t comm)
{
    if (!s->cfg.shm_cma || !s->shm.ops || !s->shm.ops->get)
        return 0;
    for (int i = 0; i < comm->size; i++) {
        int w = comm->world_of[i];
        if (i != comm->rank && s->tl_of[w] != &s->shm)
            return 0;
    }
    return 1;
}

static int shm_read(pcoll_sched_t *sc, int peer, uint64_t addr, void *buf, size_t len)
{
    return pcoll_direct_read(sc->s, sc->comm, peer, addr, buf, len);
}

int pcoll_direct_read(ppt_state_t *s, plait_comm_t comm, int peer, uint64_t addr, void *buf,
                      size_t len)
{
    int w = comm->world_of[peer];
    ptl_tl_t *tl = s->tl_of[w];
    int rc;
    if (len == 0)
        return PLAIT_OK;
    rc = tl && tl->ops->get ? tl->ops->get(tl, w, addr, buf, len) : PLAIT_ERR_UNSUPPORTED;
    if (rc == PLAIT_ERR_PEER)
        return rc;   /* the peer is gone: the transport's message names it */
    if (rc != PLAIT_OK)
        return prt_err(rc == PLAIT_ERR_UNSUPPORTED ? PLAIT_ERR_TRANSPORT : rc,
                       "shared-memory collective: reading %zu bytes of rank %d failed (%s); "
                       "set PLAIT_<COLL>_ALGO to a message-based algorithm or PLAIT_SHM_CMA=0",
                       len, peer, plait_strerror(rc));
    return PLAIT_OK;
}

/* Round: every other rank gets len bytes at sbuf_of(me), rbuf[p] gets theirs. */
static void shm_exchange(pcoll_sched_t *sc, shm_ctx_t *c)
{
    int n = sc->comm->size, r = sc->comm->rank;
    for (int p = 0; p < n; p++) {
        if (p == r)
            continue;
        pcoll_sched_send(sc, p, &c->addr[r], sizeof *c->addr);
        pcoll_sched_recv(sc, p, &c->addr[p], sizeof *c->addr);
    }
}

/* Zero-byte done messages to and from every other rank (the phase fence). */
static void shm_fence(pcoll_sched_t *sc, shm_ctx_t *c)
{
    int n = sc->comm->size, r = sc->comm->rank;
    for (int p = 0; p < n; p++) {
        if (p == r)
            continue;
        pcoll_sched_send(sc, p, &c->token, 0);
        pcoll_sched_recv(sc, p, &c->token, 0);
    }
}

static const char *shm_input(const pcoll_args_t *a)
{
    return a->sbuf;      /* in place sbuf == rbuf: the input is there too */
}

/* Peer p's call against this rank's: ranks that passed different counts or
 * datatype sizes would read past each other's buffers. */
static int shm_check_peer(const shm_ctx_t *c, int p, const char *what)
{
    const shm_addr_t *x = &c->addr[p];
    if (x->sig != pcoll_call_sig(&c->a))
        return pcoll_sig_mismatch(what, p, x->sig, pcoll_call_sig(&c->a));
    if (x->count != c->a.count || x->es != c->a.es)
        return prt_err(PLAIT_ERR_ARG, "%s: rank %d passed %llu elements of %u bytes where this "
                       "rank passed %zu of %zu: ranks passed different counts or datatypes",
                       what, p, (unsigned long long)x->count, x->es, c->a.count, c->a.es);
    return PLAIT_OK;
}

static int shm_check_counts(pcoll_sched_t *sc, const shm_ctx_t *c)
{
    int rc;
    for (int p = 0; p < sc->comm->size; p++)
        if ((rc = shm_check_peer(c, p, "shared-memory collective")) != PLAIT_OK)
            return rc;
    return PLAIT_OK;
}

int pcoll_reduce_step(ppt_state_t *s, plait_comm_t comm, const pcoll_args_t *a, int p, int first,
                      const char *own, uint64_t addr, char *acc, char *scratch, size_t m)
{
    const char *src = own;
    char *to = first ? acc : scratch;
    int rc;
    if (!src) {
        if ((rc = pcoll_direct_read(s, comm, p, addr, to, m * a->es)) != PLAIT_OK)
            return rc;
        src = to;
    }
    if (first)
        pcoll_take_input(acc, src, m, a->dt, a->op, comm->size);
    else if (pcoll_prescaled(a->dt, a->op))
        pcoll_add_scaled16(acc, acc, src, m, 1.0f / (float)comm->size);
    else
        pcoll_reduce(acc, acc, src, m, a->dt, a->op);
    return PLAIT_OK;
}

/* Reduces this rank's slice over all ranks into c->mine (step 1). */
static int shm_reduce_slice(pcoll_sched_t *sc, void *arg)
{
    shm_ctx_t *c = arg;
    int n = sc->comm->size, r = sc->comm->rank, rc;
    size_t es = c->a.es, len = c->cnt * es, base = c->off * es;
    if ((rc = shm_check_counts(sc, c)) != PLAIT_OK)
        return rc;
    for (size_t pos = 0; pos < len; pos += SHM_CHUNK) {
        size_t m = len - pos < SHM_CHUNK ? len - pos : SHM_CHUNK;
        for (int k = 0; k < n; k++) {
            int p = pcoll_reduce_turn(sc->comm, k);
            if ((rc = pcoll_reduce_step(sc->s, sc->comm, &c->a, p, k == 0,
                                        p == r ? shm_input(&c->a) + base + pos : NULL,
                                        c->addr[p].src + base + pos, c->mine + pos, c->chunk,
                                        m / es)) != PLAIT_OK)
                return rc;
        }
    }
    if (pcoll_divides(c->a.dt, c->a.op))
        pcoll_scale(c->mine, c->cnt, c->a.dt, n);
    return PLAIT_OK;
}

/* Allreduce step 2: every other slice from its reducer. */
static int shm_gather_slices(pcoll_sched_t *sc, void *arg)
{
    shm_ctx_t *c = arg;
    int n = sc->comm->size, r = sc->comm->rank, rc;
    size_t es = c->a.es, cnt = c->a.count;
    char *R = c->a.rbuf;
    for (int k = 1; k < n; k++) {
        int p = (r + k) % n;    /* start at different peers: spread the readers */
        size_t off = pcoll_blk_off(cnt, n, p) * es;
        if ((rc = shm_read(sc, p, c->addr[p].res, R + off, pcoll_blk_cnt(cnt, n, p) * es)) !=
            PLAIT_OK)
            return rc;
    }
    if (c->mine != R + c->off * es)
        memcpy(R + c->off * es, c->mine, c->cnt * es);
    return PLAIT_OK;
}

static shm_ctx_t *shm_ctx(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int n = sc->comm->size;
    shm_ctx_t *c = pcoll_sched_tmp(sc, sizeof *c);
    shm_addr_t *addr = pcoll_sched_tmp(sc, (size_t)n * sizeof *addr);
    char *chunk = pcoll_sched_tmp(sc, SHM_CHUNK);
    if (sc->err)
        return NULL;
    memset(c, 0, sizeof *c);
    memset(addr, 0, (size_t)n * sizeof *addr);
    c->a = *a;
    c->addr = addr;
    c->chunk = chunk;
    addr[sc->comm->rank].src = (uint64_t)(uintptr_t)a->sbuf;
    addr[sc->comm->rank].count = a->count;
    addr[sc->comm->rank].es = (uint32_t)a->es;
    addr[sc->comm->rank].sig = pcoll_call_sig(a);
    return c;
}

/* Step 1 of allreduce and reduce: the address exchange, then this rank's
 * slice reduced into its recvbuf (in_rbuf) or into scratch. */
static shm_ctx_t *shm_slices(pcoll_sched_t *sc, const pcoll_args_t *a, int in_rbuf)
{
    int n = sc->comm->size, r = sc->comm->rank;
    shm_ctx_t *c = shm_ctx(sc, a);
    if (!c)
        return NULL;
    c->off = pcoll_blk_off(a->count, n, r);
    c->cnt = pcoll_blk_cnt(a->count, n, r);
    c->mine = in_rbuf ? (char *)a->rbuf + c->off * a->es : pcoll_sched_tmp(sc, c->cnt * a->es);
    if (sc->err)
        return NULL;
    c->addr[r].res = (uint64_t)(uintptr_t)c->mine;
    shm_exchange(sc, c);
    pcoll_sched_func(sc, shm_reduce_slice, c);
    pcoll_sched_end_round(sc);
    return c;
}

int pcoll_allreduce_shm(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int n = sc->comm->size;
    size_t es = a->es;
    shm_ctx_t *c;
    if (n == 1) {
        pcoll_sched_copy(sc, a->rbuf, a->sbuf, a->count * es);
        pcoll_sched_end_round(sc);
        pcoll_sched_scale(sc, a->rbuf, a->count);
        return sc->err;
    }
    if (!(c = shm_slices(sc, a, a->sbuf != a->rbuf)))
        return sc->err;
    shm_fence(sc, c);
    pcoll_sched_func(sc, shm_gather_slices, c);
    pcoll_sched_end_round(sc);
    shm_fence(sc, c);
    pcoll_sched_end_round(sc);
    return sc->err;
}

int pcoll_reduce_scatter_shm(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int n = sc->comm->size, r = sc->comm->rank;
    size_t es = a->es;
    shm_ctx_t *c;
    if (!(c = shm_ctx(sc, a)))
        return sc->err;
    c->off = (size_t)r * a->count;
    c->cnt = a->count;
    c->mine = a->sbuf == a->rbuf && n > 1 ? pcoll_sched_tmp(sc, c->cnt * es) : a->rbuf;
    if (sc->err)
        return sc->err;
    shm_exchange(sc, c);
    pcoll_sched_func(sc, shm_reduce_slice, c);
    pcoll_sched_end_round(sc);
    shm_fence(sc, c);
    pcoll_sched_end_round(sc);
    if (c->mine != a->rbuf)
        pcoll_sched_copy(sc, a->rbuf, c->mine, c->cnt * es);
    return sc->err;
}

/*
 * reduce: step 1 of allreduce (rank i reduces slice i, into scratch where
 * it is not the root), then the root reads every other slice from its
 * reducer. A fence in two halves instead of all-to-all: each rank tells
 * the root its slice is ready (which also says it has read every input,
 * so after the last one no rank's input is read again); the root gathers,
 * then tells each rank it may return (its scratch slice was read).
 * recvbuf of a non-root is never touched (it may be NULL).
 */
/* Zero-byte done messages between the root and every other rank: towards
 * the root (up) or from it. */
static void shm_root_fence(pcoll_sched_t *sc, shm_ctx_t *c, int up)
{
    int n = sc->comm->size, root = c->a.root;
    if (sc->comm->rank != root) {
        if (up)
            pcoll_sched_send(sc, root, &c->token, 0);
        else
            pcoll_sched_recv(sc, root, &c->token, 0);
        return;
    }
    for (int p = 0; p < n; p++) {
        if (p == root)
            continue;
        if (up)
            pcoll_sched_recv(sc, p, &c->token, 0);
        else
            pcoll_sched_send(sc, p, &c->token, 0);
    }
}

static int shm_gather_at_root(pcoll_sched_t *sc, void *arg)
{
    shm_ctx_t *c = arg;
    return sc->comm->rank == c->a.root ? shm_gather_slices(sc, arg) : PLAIT_OK;
}

int pcoll_reduce_shm(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int n = sc->comm->size, r = sc->comm->rank, root = a->root;
    shm_ctx_t *c;
    if (n == 1)
        return pcoll_reduce_binomial(sc, a);
    /* the root's own slice in place, unless peers still read it there */
    if (!(c = shm_slices(sc, a, r == root && a->sbuf != a->rbuf)))
        return sc->err;
    shm_root_fence(sc, c, 1);
    pcoll_sched_end_round(sc);
    pcoll_sched_func(sc, shm_gather_at_root, c);
    pcoll_sched_end_round(sc);
    shm_root_fence(sc, c, 0);
    pcoll_sched_end_round(sc);
    return sc->err;
}

/*
 * Block p of the result from every other rank p: at offset `at` of its
 * exposed input (allgather: 0, its one block; alltoall: r * blk, the block
 * meant for this rank), then this rank's own block from its input.
 */
static int shm_read_each(pcoll_sched_t *sc, shm_ctx_t *c, size_t at)
{
    int n = sc->comm->size, r = sc->comm->rank, rc;
    size_t blk = c->a.count * c->a.es;
    char *R = c->a.rbuf;
    if ((rc = shm_check_counts(sc, c)) != PLAIT_OK)
        return rc;
    for (int k = 1; k < n; k++) {
        int p = (r + k) % n;
        if ((rc = shm_read(sc, p, c->addr[p].src + at, R + (size_t)p * blk, blk)) != PLAIT_OK)
            return rc;
    }
    if (c->a.sbuf != c->a.rbuf)
        memcpy(R + (size_t)r * blk, (const char *)c->a.sbuf + at, blk);
    return PLAIT_OK;
}

/* Allgather step 1: every other rank's block into place. */
static int shm_read_blocks(pcoll_sched_t *sc, void *arg)
{
    return shm_read_each(sc, arg, 0);
}

int pcoll_allgather_shm(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int r = sc->comm->rank;
    size_t blk = a->count * a->es;
    shm_ctx_t *c;
    if (!(c = shm_ctx(sc, a)))
        return sc->err;
    if (a->sbuf == a->rbuf)    /* in place: this rank's block sits at block r */
        c->addr[r].src = (uint64_t)(uintptr_t)((char *)a->rbuf + (size_t)r * blk);
    shm_exchange(sc, c);
    pcoll_sched_func(sc, shm_read_blocks, c);
    pcoll_sched_end_round(sc);
    shm_fence(sc, c);
    pcoll_sched_end_round(sc);
    return sc->err;
}

/*
 * alltoall: every rank exposes its input (in place: a snapshot of it, since
 * this rank overwrites its blocks while peers still read them), then reads
 * block r of every peer p's input into block p of its result; the done fence
 * keeps inputs alive until everybody has read. One copy per block and 2
 * (n - 1) small messages per rank, against a rendezvous handshake per block
 * for pairwise exchange.
 */
static int shm_read_mine(pcoll_sched_t *sc, void *arg)
{
    shm_ctx_t *c = arg;
    return shm_read_each(sc, c, (size_t)sc->comm->rank * c->a.count * c->a.es);
}

int pcoll_alltoall_shm(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int n = sc->comm->size, r = sc->comm->rank;
    size_t blk = a->count * a->es;
    shm_ctx_t *c;
    if (!(c = shm_ctx(sc, a)))
        return sc->err;
    if (a->sbuf == a->rbuf && n > 1) {   /* own block r stays where it is */
        char *snap = pcoll_sched_tmp(sc, (size_t)n * blk);
        if (sc->err)
            return sc->err;
        memcpy(snap, a->rbuf, (size_t)n * blk);
        c->addr[r].src = (uint64_t)(uintptr_t)snap;
    }
    shm_exchange(sc, c);
    pcoll_sched_func(sc, shm_read_mine, c);
    pcoll_sched_end_round(sc);
    shm_fence(sc, c);
    pcoll_sched_end_round(sc);
    return sc->err;
}

/*
 * bcast: the root sends its buffer's address to every rank; each reads the
 * whole vector straight from the root's buffer (no relay through other
 * ranks, all readers at once: the host's memory bandwidth, not a chain of
 * hops, bounds it) and tells the root it is done, so the root returns only
 * after the last read. Readers start at different offsets so they do not
 * all pin the same pages at the same moment.
 */
#define SHM_BCAST_PIECE ((size_t)1 << 20)

static int shm_read_root(pcoll_sched_t *sc, void *arg)
{
    shm_ctx_t *c = arg;
    int n = sc->comm->size, r = sc->comm->rank, root = c->a.root, rc;
    size_t len = c->a.count * c->a.es;
    size_t pieces = (len + SHM_BCAST_PIECE - 1) / SHM_BCAST_PIECE;
    size_t first = pieces * (size_t)((r - root + n) % n - 1) / (size_t)(n - 1);
    char *buf = c->a.rbuf;
    if ((rc = shm_check_peer(c, root, "shared-memory bcast")) != PLAIT_OK)
        return rc;
    for (size_t k = 0; k < pieces; k++) {
        size_t off = ((first + k) % pieces) * SHM_BCAST_PIECE;
        size_t m = len - off < SHM_BCAST_PIECE ? len - off : SHM_BCAST_PIECE;
        if ((rc = shm_read(sc, root, c->addr[root].src + off, buf + off, m)) != PLAIT_OK)
            return rc;
    }
    return PLAIT_OK;
}

int pcoll_bcast_shm(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int n = sc->comm->size, r = sc->comm->rank, root = a->root;
    shm_ctx_t *c;
    if (n == 1)
        return PLAIT_OK;
    if (!(c = shm_ctx(sc, a)))
        return sc->err;
    if (r == root) {
        for (int p = 0; p < n; p++)
            if (p != root)
                pcoll_sched_send(sc, p, &c->addr[root], sizeof *c->addr);
        pcoll_sched_end_round(sc);
        for (int p = 0; p < n; p++)
            if (p != root)
                pcoll_sched_recv(sc, p, &c->token, 0);
    } else {
        pcoll_sched_recv(sc, root, &c->addr[root], sizeof *c->addr);
        pcoll_sched_end_round(sc);
        pcoll_sched_func(sc, shm_read_root, c);
        pcoll_sched_end_round(sc);
        pcoll_sched_send(sc, root, &c->token, 0);
    }
    pcoll_sched_end_round(sc);
    return sc->err;
}
