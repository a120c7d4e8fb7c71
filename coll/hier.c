/*
 * hier.c -- two-level collectives for communicators spread over several
 * hosts: shared memory inside a host, the network only between hosts.
 * allreduce below; allgather and reduce_scatter (the same host map and
 * columns) at the end of the file.
 *
 * The hosts of a communicator are numbered by their lowest comm rank; host h
 * has k_h members L_h[0] < L_h[1] < ... (comm ranks), and this rank is member
 * li of its host. The vector is cut into k_h slices (pcoll_blk_off/cnt).
 *
 *  1. local reduce-scatter (one round): every rank sends slice j of its input
 *     to L[j] and receives slice li from every other member; it reduces them
 *     in local index order into slice li of its recvbuf. Each element of a
 *     host's partial sum is computed by one rank only.
 *  2. between hosts, two forms:
 *     uniform (every host has the same k): member li of every host holds the
 *       host's partial slice li; the "column" li (member li of host 0, 1, ..)
 *       allreduces that slice: recursive doubling for small slices (every
 *       member applies the same operations to the same operands in the same
 *       order: the lower column index is the left operand), ring for large
 *       ones (each element reduced at one member, then copied). The k columns
 *       run side by side, each carrying 1/k of the vector across the network.
 *     uneven: the slices are gathered to the host's leader L[0] (one round)
 *       and the leaders ("column" 0) allreduce the whole vector as above.
 *  3. AVG: the rank that holds the final value divides it (identical inputs
 *     give identical quotients in a column), in a round of its own so that
 *     the copies of step 4 carry the quotient.
 *  4. local allgather (one round): uniform: every rank sends its slice to
 *     every other member of its host; uneven: the leader sends the whole
 *     vector to each member.
 * Every element is thus computed once per column by deterministic steps and
 * copied from there, so all ranks end with bitwise the same bytes. With one
 * rank per host it is a flat allreduce over the column of everyone; on one
 * host (forced) steps 1, 3 and 4 remain.
 *
 * Which comm ranks share a host: PMIx tells a process only its own host's
 * ranks (prt_job_t local_peers), so the hosts of a communicator are learnt
 * once by an allgather of each rank's host key (the lowest world rank on its
 * host) and kept until plait_init, keyed by the communicator's context. The
 * allgather is blocking, so it runs inside a blocking two-level collective
 * (all ranks take part in it there); a non-blocking one on a communicator
 * whose hosts are not known yet runs a flat algorithm instead. Both decisions
 * depend only on what every rank of the communicator has done before, so
 * all ranks build matching schedules. A communicator all on this host needs
 * no exchange.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll/pcoll.h"

/* Column slices up to this size are allreduced by recursive doubling (one
 * whole-slice exchange per step), larger ones by a ring. */
#define HIER_RD_MAX ((size_t)64 << 10)

typedef struct {
    int  n, nhosts, uniform;
    int *host_of;   /* comm rank -> host index */
    int *first;     /* host h's members: member[first[h] .. first[h+1]) */
    int *member;    /* comm ranks grouped by host, increasing within each */
} hier_map_t;

/* The communicator owns its map (comm->hier), freed with it. */
static void hier_map_free(void *p)
{
    hier_map_t *m = p;
    if (m) {
        free(m->host_of);
        free(m->first);
        free(m->member);
    }
    free(m);
}

/* For selection: 0 once the hosts are known to hold one rank each (the
 * algorithm would be a flat allreduce), else 1. Depends only on earlier
 * blocking allreduces of the communicator, so it is the same on every rank. */
int pcoll_hier_useful(const ppt_state_t *s, plait_comm_t comm)
{
    const hier_map_t *m = comm->hier;
    return !m || m->nhosts < comm->size;
}

/* A map from every comm rank's host key; NULL when out of memory. */
static hier_map_t *hier_map_make(ppt_state_t *s, plait_comm_t comm, const int32_t *key)
{
    int n = comm->size, h = 0;
    hier_map_t *m = calloc(1, sizeof *m);
    if (!m || !(m->host_of = malloc((size_t)n * sizeof(int))) ||
        !(m->first = calloc((size_t)n + 1, sizeof(int))) ||
        !(m->member = malloc((size_t)n * sizeof(int)))) {
        hier_map_free(m);
        return NULL;
    }
    for (int i = 0; i < n; i++) {     /* hosts numbered by their lowest comm rank */
        int j = 0;
        while (j < i && key[j] != key[i])
            j++;
        m->host_of[i] = j < i ? m->host_of[j] : h++;
    }
    m->nhosts = h;
    for (int j = 0, at = 0; j < h; j++) {   /* members host by host, ranks increasing */
        m->first[j] = at;
        for (int i = 0; i < n; i++)
            if (m->host_of[i] == j)
                m->member[at++] = i;
        m->first[j + 1] = at;
    }
    m->uniform = 1;
    for (int j = 1; j < h; j++)
        m->uniform &= m->first[j + 1] - m->first[j] == m->first[1];
    m->n = n;
    comm->hier = m;
    comm->hier_free = hier_map_free;
    return m;
}

static int hier_all_local(ppt_state_t *s, plait_comm_t comm)
{
    for (int i = 0; i < comm->size; i++) {
        int w = comm->world_of[i], local = 0;
        for (int j = 0; j < s->job.local_size && !local; j++)
            local = s->job.local_peers[j] == w;
        if (!local)
            return 0;
    }
    return 1;
}

/* Every rank's host key, by a blocking allgather (all ranks are in the same
 * blocking collective, see the header, or in plait_init for world). */
static int hier_exchange_keys(ppt_state_t *s, plait_comm_t comm, int32_t *keys, const char *fn)
{
    pcoll_sched_t sc;               /* blocking: schedule and request on this stack */
    struct plait_request storage;
    plait_request_t req = NULL;
    int32_t mine = s->job.local_peers[0];     /* lowest world rank on this host */
    pcoll_args_t a = {.coll = PCOLL_ALLGATHER, .sbuf = &mine, .rbuf = keys, .count = 1,
                      .dt = PLAIT_INT32, .es = sizeof mine};
    char what[96];                  /* the user's call first: a timeout here is its timeout */
    int rc;
    snprintf(what, sizeof what, "%s (learning the communicator's hosts)",
             fn ? fn : "two-level collective");
    pcoll_sched_init(&sc, s, comm);
    if ((rc = pcoll_allgather_bruck(&sc, &a)) != PLAIT_OK) {
        comm->coll_seq++;            /* the others' numbering goes on */
        pcoll_sched_free(&sc);
        return rc;
    }
    PRT_CHECK(pcoll_sched_start_locked(&sc, what, &storage, &req));
    return pcoll_wait_free_locked(s, req, what);
}

/* The communicator's host map; NULL with *rc = PLAIT_OK when it is not known
 * yet and this call may not block to learn it (may_block 0: a non-blocking
 * call's schedule). Learning it is a collective step (hier_exchange_keys). */
static const hier_map_t *hier_map_learn(ppt_state_t *s, plait_comm_t comm, int may_block,
                                        const char *fn, int *rc)
{
    int n = comm->size;
    int32_t *keys;
    hier_map_t *m;
    const hier_map_t *known = comm->hier;
    *rc = PLAIT_OK;
    if (known)
        return known;
    if (!(keys = malloc((size_t)n * sizeof *keys))) {
        *rc = prt_err(PLAIT_ERR_NOMEM, "two-level collective: no memory for the host map");
        return NULL;
    }
    if (hier_all_local(s, comm)) {
        for (int i = 0; i < n; i++)
            keys[i] = 0;
    } else if (!may_block) {
        free(keys);
        return NULL;
    } else if ((*rc = hier_exchange_keys(s, comm, keys, fn)) != PLAIT_OK) {
        free(keys);
        return NULL;
    }
    if (!(m = hier_map_make(s, comm, keys)))
        *rc = prt_err(PLAIT_ERR_NOMEM, "two-level collective: no memory for the host map");
    else
        prt_log(PRT_LOG_DEBUG, "two-level collectives: communicator \"%s\" (%d ranks) spans %d "
                "hosts%s", comm->name, n, m->nhosts, m->uniform ? "" : " of different rank counts");
    free(keys);
    return m;
}

static const hier_map_t *hier_map_get(pcoll_sched_t *sc, int *rc)
{
    return hier_map_learn(sc->s, sc->comm, sc->on_stack, sc->fn, rc);
}

int pcoll_hier_prepare_locked(ppt_state_t *s, plait_comm_t comm, const char *fn)
{
    int rc = PLAIT_OK;
    if (comm->size >= 2 && !hier_all_local(s, comm))
        hier_map_learn(s, comm, 1, fn, &rc);
    return rc;
}

/* A set of comm ranks (g[0..m-1]) allreducing cnt elements of buf; this rank
 * is g[gi]. Recursive doubling with the non-power-of-two fold (util.c). */
static void hier_group_rd(pcoll_sched_t *sc, const int *g, int m, int gi, char *buf, size_t cnt,
                          size_t es)
{
    int pof2 = pcoll_pof2(m), rem = m - pof2, nr = pcoll_fold_newrank(gi, rem);
    size_t bytes = cnt * es;
    char *in = pcoll_sched_tmp(sc, bytes);
    if (gi < 2 * rem) {
        if (gi % 2 == 0) {
            pcoll_sched_send(sc, g[gi + 1], buf, bytes);
        } else {
            pcoll_sched_recv(sc, g[gi - 1], in, bytes);
            pcoll_sched_reduce(sc, buf, in, buf, cnt);
        }
        pcoll_sched_end_round(sc);
    }
    for (int d = 1; nr >= 0 && d < pof2; d *= 2) {
        int pi = pcoll_fold_real(nr ^ d, rem);
        pcoll_sched_send(sc, g[pi], buf, bytes);
        pcoll_sched_recv(sc, g[pi], in, bytes);
        pcoll_sched_reduce(sc, buf, pi < gi ? in : buf, pi < gi ? buf : in, cnt);
        pcoll_sched_end_round(sc);
    }
    if (gi < 2 * rem) {
        if (gi % 2)
            pcoll_sched_send(sc, g[gi - 1], buf, bytes);
        else
            pcoll_sched_recv(sc, g[gi + 1], buf, bytes);
        pcoll_sched_end_round(sc);
    }
}

static void hier_group_allreduce(pcoll_sched_t *sc, const int *g, int m, int gi, char *buf,
                                 size_t cnt, size_t es)
{
    if (m < 2 || cnt == 0)
        return;
    if (cnt * es <= HIER_RD_MAX || cnt < (size_t)m)
        hier_group_rd(sc, g, m, gi, buf, cnt, es);
    else
        pcoll_ring_allreduce(sc, g, m, gi, buf, cnt, es, 0);   /* allreduce.c */
}

/* dst = x[0] op x[1] op ... op x[c-1] over cnt elements (dst is none of
 * x[1..]); c == 1 copies. */
static void hier_reduce_chain(pcoll_sched_t *sc, char *dst, char *const *x, int c, size_t cnt,
                              size_t es)
{
    if (c == 1) {
        pcoll_sched_copy(sc, dst, x[0], cnt * es);
        return;
    }
    pcoll_sched_reduce(sc, dst, x[0], x[1], cnt);
    for (int i = 2; i < c; i++)
        pcoll_sched_reduce(sc, dst, dst, x[i], cnt);
}

/* Step 1: slice li of the host's partial result into R (k members L). */
static void hier_local_rs(pcoll_sched_t *sc, const pcoll_args_t *a, const int *L, int k, int li)
{
    size_t es = a->es, off = pcoll_blk_off(a->count, k, li) * es;
    size_t cnt = pcoll_blk_cnt(a->count, k, li);
    const char *S = a->sbuf, *own = S + off;
    char *mine = (char *)a->rbuf + off, **in;
    if (k == 1) {
        pcoll_sched_copy(sc, a->rbuf, a->sbuf, a->count * es);
        pcoll_sched_end_round(sc);
        return;
    }
    if (!(in = pcoll_sched_tmp(sc, (size_t)k * sizeof *in)))
        return;
    for (int j = 0; j < k; j++) {
        if (j == li)
            continue;
        in[j] = pcoll_sched_tmp(sc, cnt * es);
        pcoll_sched_send(sc, L[j], S + pcoll_blk_off(a->count, k, j) * es,
                         pcoll_blk_cnt(a->count, k, j) * es);
        pcoll_sched_recv(sc, L[j], in[j], cnt * es);
    }
    if (own == mine && li >= 2) {    /* in place: the chain would overwrite it first */
        char *keep = pcoll_sched_tmp(sc, cnt * es);
        pcoll_sched_copy(sc, keep, own, cnt * es);
        own = keep;
    }
    in[li] = (char *)own;
    hier_reduce_chain(sc, mine, in, k, cnt, es);
    pcoll_sched_end_round(sc);
}

/* A flat algorithm, for a non-blocking call whose hosts are not known yet
 * (the choice the table makes between hosts). */
static int hier_flat(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int n = sc->comm->size;
    if (a->count * a->es <= (16 << 10))
        return pcoll_allreduce_rd(sc, a);
    return (n & (n - 1)) ? pcoll_allreduce_ring(sc, a) : pcoll_allreduce_rabenseifner(sc, a);
}

/* This rank's place in map m: host h, local index li of the k members L
 * of its host, H hosts; col[j] (scratch of sc) the member of host j in its
 * column: member li where every host has k members, else host j's leader
 * (member 0). */
typedef struct {
    int h, k, li, H;
    const int *L;
    int *col;
} hier_pos_t;

/* Comm rank of member li of host j. */
static int hier_member(const hier_map_t *m, int j, int li)
{
    return m->member[m->first[j] + li];
}

static int hier_place(pcoll_sched_t *sc, const hier_map_t *m, hier_pos_t *p)
{
    int r = sc->comm->rank;
    p->h = m->host_of[r];
    p->L = m->member + m->first[p->h];
    p->k = m->first[p->h + 1] - m->first[p->h];
    for (p->li = 0; p->L[p->li] != r; p->li++)
        ;
    p->H = m->nhosts;
    if (!(p->col = pcoll_sched_tmp(sc, (size_t)p->H * sizeof *p->col)))
        return sc->err;
    for (int j = 0; j < p->H; j++)
        p->col[j] = hier_member(m, j, m->uniform ? p->li : 0);
    return PLAIT_OK;
}

/* *mp: the host map where a uniform two-level schedule applies (hosts
 * known and of one rank count), p filled in; NULL where the flat one runs
 * instead. */
static int hier_columns(pcoll_sched_t *sc, const hier_map_t **mp, hier_pos_t *p)
{
    int rc;
    const hier_map_t *m = hier_map_get(sc, &rc);
    *mp = NULL;
    if (!m || !m->uniform)
        return rc;
    *mp = m;
    return hier_place(sc, m, p);
}

int pcoll_allreduce_two_level(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int rc, h, k, li, H, *col;
    const int *L;
    size_t es = a->es, cnt = a->count;
    char *R = a->rbuf;
    hier_pos_t p;
    const hier_map_t *m = hier_map_get(sc, &rc);
    if (!m)
        return rc != PLAIT_OK ? rc : hier_flat(sc, a);
    if ((rc = hier_place(sc, m, &p)) != PLAIT_OK)
        return rc;
    h = p.h, L = p.L, k = p.k, li = p.li, H = p.H, col = p.col;
    hier_local_rs(sc, a, L, k, li);
    if (m->uniform) {
        size_t off = pcoll_blk_off(cnt, k, li), n = pcoll_blk_cnt(cnt, k, li);
        hier_group_allreduce(sc, col, H, h, R + off * es, n, es);
        pcoll_sched_scale(sc, R + off * es, n);
        pcoll_sched_end_round(sc);
        for (int j = 0; j < k; j++) {
            if (j == li)
                continue;
            pcoll_sched_send(sc, L[j], R + off * es, n * es);
            pcoll_sched_recv(sc, L[j], R + pcoll_blk_off(cnt, k, j) * es,
                             pcoll_blk_cnt(cnt, k, j) * es);
        }
        pcoll_sched_end_round(sc);
        return sc->err;
    }
    /* uneven hosts: gather to the leader, leaders allreduce, leader sends out */
    for (int j = 1; j < k; j++) {
        if (li == 0)
            pcoll_sched_recv(sc, L[j], R + pcoll_blk_off(cnt, k, j) * es,
                             pcoll_blk_cnt(cnt, k, j) * es);
        else if (j == li)
            pcoll_sched_send(sc, L[0], R + pcoll_blk_off(cnt, k, li) * es,
                             pcoll_blk_cnt(cnt, k, li) * es);
    }
    pcoll_sched_end_round(sc);
    if (li == 0) {
        hier_group_allreduce(sc, col, H, h, R, cnt, es);
        pcoll_sched_scale(sc, R, cnt);
        pcoll_sched_end_round(sc);
    }
    for (int j = 1; j < k; j++)
        if (li == 0)
            pcoll_sched_send(sc, L[j], R, cnt * es);
    if (li > 0)
        pcoll_sched_recv(sc, L[0], R, cnt * es);
    pcoll_sched_end_round(sc);
    return sc->err;
}

/* The flat algorithms of coll/select.c's rows after the two-level ones
 * (there: 32 KiB and 64 KiB of the whole vector). */
static int hier_allgather_flat(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int n = sc->comm->size;
    if (a->count * a->es * (size_t)n > (32 << 10))
        return pcoll_allgather_ring(sc, a);
    return (n & (n - 1)) ? pcoll_allgather_bruck(sc, a) : pcoll_allgather_rd(sc, a);
}

static int hier_rs_flat(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    if (a->count * a->es * (size_t)sc->comm->size > (64 << 10))
        return pcoll_reduce_scatter_ring(sc, a);
    return pcoll_reduce_scatter_halving(sc, a);
}

/*
 * Two-level allgather (hosts with the same rank count k; H hosts). Block b
 * is rank b's block; member li of host h:
 *  1. one round: own block into place; own block to every other member of
 *     its column (member li of each other host: the network) and to every
 *     other member of its host (shared memory); their own blocks in return.
 *     Each block crosses the network once per other host, k columns side by
 *     side, where a ring over all ranks sends n - 1 blocks one after another
 *     and n - H of its steps wait for a network hop.
 *  2. one round: the H - 1 blocks got from the column go to every other
 *     member of the host; from member m come the blocks of column m.
 * Blocks are only copied, so every rank ends with the same bytes. Uneven
 * hosts, or a non-blocking call whose hosts are not known yet: the flat
 * algorithm the selection table names below the two-level row.
 */
int pcoll_allgather_two_level(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int rc, r = sc->comm->rank;
    size_t blk = a->count * a->es;
    char *R = a->rbuf;
    const char *own = a->sbuf == a->rbuf ? R + (size_t)r * blk : a->sbuf;
    hier_pos_t p;
    const hier_map_t *m;
    if ((rc = hier_columns(sc, &m, &p)) != PLAIT_OK || !m)
        return rc != PLAIT_OK ? rc : hier_allgather_flat(sc, a);
    pcoll_sched_copy_posted(sc, R + (size_t)r * blk, own, blk);
    for (int j = 0; j < p.H; j++) {
        if (j == p.h)
            continue;
        pcoll_sched_send(sc, p.col[j], own, blk);
        pcoll_sched_recv(sc, p.col[j], R + (size_t)p.col[j] * blk, blk);
    }
    for (int i = 0; i < p.k; i++) {
        if (i == p.li)
            continue;
        pcoll_sched_send(sc, p.L[i], own, blk);
        pcoll_sched_recv(sc, p.L[i], R + (size_t)p.L[i] * blk, blk);
    }
    pcoll_sched_end_round(sc);
    for (int i = 0; p.H > 1 && i < p.k; i++) {
        if (i == p.li)
            continue;
        for (int j = 0; j < p.H; j++) {
            if (j == p.h)
                continue;
            pcoll_sched_send(sc, p.L[i], R + (size_t)p.col[j] * blk, blk);
            pcoll_sched_recv(sc, p.L[i], R + (size_t)hier_member(m, j, i) * blk, blk);
        }
    }
    pcoll_sched_end_round(sc);
    return sc->err;
}

/*
 * Two-level reduce_scatter (hosts with the same rank count k; H hosts).
 * Block b of every input is reduced into rank b's result; member li of host h:
 *  1. one round over shared memory: to every other member i of its host it
 *     sends the blocks of column i (block of member i of each host, H
 *     blocks), and gets the blocks of its own column from each; it reduces
 *     them in local index order into the host's partial sums P[j], j < H,
 *     of its column's blocks.
 *  2. one round over the network: P[j] goes to member li of host j; from
 *     each it gets that host's partial sum of its own block, and reduces the
 *     H partial sums in host order into recvbuf (then AVG divides).
 * Each block crosses the network once per other host, k columns side by
 * side; a ring over all ranks takes n - 1 dependent steps. In place, the
 * input is only read in step 1 and the result written at the end of step 2.
 * Uneven hosts, or a non-blocking call whose hosts are not known yet: the flat
 * algorithm the selection table names below the two-level row.
 */
int pcoll_reduce_scatter_two_level(pcoll_sched_t *sc, const pcoll_args_t *a)
{
    int rc;
    size_t es = a->es, cnt = a->count, blk = cnt * es;
    const char *S = a->sbuf;
    char **x, **P;
    hier_pos_t p;
    const hier_map_t *m;
    if ((rc = hier_columns(sc, &m, &p)) != PLAIT_OK || !m)
        return rc != PLAIT_OK ? rc : hier_rs_flat(sc, a);
    x = pcoll_sched_tmp(sc, (size_t)(p.k > p.H ? p.k : p.H) * sizeof *x);
    P = pcoll_sched_tmp(sc, (size_t)p.H * sizeof *P);
    if (sc->err)
        return sc->err;
    /* step 1: P[j] = sum over the host's members of block (member li of host j) */
    for (int i = 0; i < p.k; i++) {
        if (i == p.li)
            continue;
        for (int j = 0; j < p.H; j++)
            pcoll_sched_send(sc, p.L[i], S + (size_t)hier_member(m, j, i) * blk, blk);
    }
    for (int j = 0; j < p.H; j++) {
        for (int i = 0; i < p.k; i++) {
            x[i] = i == p.li ? (char *)S + (size_t)p.col[j] * blk : pcoll_sched_tmp(sc, blk);
            if (i != p.li)
                pcoll_sched_recv(sc, p.L[i], x[i], blk);
        }
        P[j] = p.k == 1 ? x[0] : pcoll_sched_tmp(sc, blk);
        if (p.k > 1)
            hier_reduce_chain(sc, P[j], x, p.k, cnt, es);
    }
    pcoll_sched_end_round(sc);
    /* step 2: the column's partial sums of this rank's block, in host order */
    for (int j = 0; j < p.H; j++) {
        x[j] = j == p.h ? P[j] : pcoll_sched_tmp(sc, blk);
        if (j != p.h) {
            pcoll_sched_send(sc, p.col[j], P[j], blk);
            pcoll_sched_recv(sc, p.col[j], x[j], blk);
        }
    }
    if (sc->err)
        return sc->err;
    if (a->sbuf == a->rbuf && p.H > 1 && p.k == 1) {
        /* P[] are the input's own blocks: reduce into scratch, then copy */
        char *acc = pcoll_sched_tmp(sc, blk);
        hier_reduce_chain(sc, acc, x, p.H, cnt, es);
        pcoll_sched_copy(sc, a->rbuf, acc, blk);
    } else {
        hier_reduce_chain(sc, a->rbuf, x, p.H, cnt, es);
    }
    pcoll_sched_end_round(sc);
    pcoll_sched_scale(sc, a->rbuf, cnt);
    return sc->err;
}
