/*
 * comm.c -- communicators: creation, context ids, dup, split, free.
 *
 * A communicator's context id is derived, identically on every member, from
 * its parent's id, the number of communicators derived from that parent so far
 * and the split color (splitmix64 mixing), so dup/split need no agreement
 * round beyond split's exchange of (color, key). Frames for a context this
 * process has not created yet wait in a queue made on demand.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "pt2pt/ppt.h"

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t ppt_ctx_derive(uint64_t parent, uint64_t seq, uint64_t color)
{
    uint64_t c = mix64(parent ^ mix64(seq ^ mix64(color)));
    c &= ~(uint64_t)1;            /* low bit set marks the collective context */
    return c < 4 ? c + 4 : c;     /* keys 0..1 are reserved by the map; 2 is world */
}

ppt_mq_t *ppt_mq_lookup(ppt_state_t *s, uint64_t ctx, int create)
{
    ppt_mq_t *mq = prt_map_get(&s->mqs, ctx);
    if (mq || !create)
        return mq;
    mq = calloc(1, sizeof *mq);
    if (!mq)
        return NULL;
    mq->ctx = ctx;
    if (prt_map_put(&s->mqs, ctx, mq) != PLAIT_OK) {
        free(mq);
        return NULL;
    }
    return mq;
}

int ppt_comm_check(plait_comm_t comm, const char *fn)
{
    if (comm == NULL)
        return prt_err(PLAIT_ERR_ARG, "%s: comm is NULL", fn);
    if (comm->magic == PPT_COMM_FREED)
        return prt_err(PLAIT_ERR_STATE, "%s: comm was freed (plait_comm_free)", fn);
    if (comm->magic != PPT_COMM_MAGIC)
        return prt_err(PLAIT_ERR_ARG, "%s: comm is not a communicator", fn);
    return PLAIT_OK;
}

/* Takes ownership of world_of. */
int ppt_comm_create(ppt_state_t *s, uint64_t ctx, int rank, int size, int *world_of,
                    plait_comm_t *out)
{
    plait_comm_t c;
    ppt_comm_sweep_locked(s);
    for (c = s->all_comms; c; c = c->all_next)
        if (c->ctx == ctx && c->magic == PPT_COMM_MAGIC)
            goto collide;
    c = calloc(1, sizeof *c);
    if (!c) {
        free(world_of);
        return prt_err(PLAIT_ERR_NOMEM, "no memory for a communicator");
    }
    c->rank = rank;
    c->size = size;
    c->world_of = world_of;
    c->ctx = ctx;
    c->mq = ppt_mq_lookup(s, ctx, 1);
    c->cmq = ppt_mq_lookup(s, ctx | 1, 1);
    if (!c->mq || !c->cmq) {
        free(world_of);
        free(c);
        return prt_err(PLAIT_ERR_NOMEM, "no memory for a communicator's queues");
    }
    c->magic = PPT_COMM_MAGIC;
    c->all_next = s->all_comms;
    s->all_comms = c;
    *out = c;
    return PLAIT_OK;
collide:
    free(world_of);
    return prt_err(PLAIT_ERR_INTERNAL, "communicator context id collision (0x%llx)",
                   (unsigned long long)ctx);
}

static void mq_destroy(ppt_state_t *s, ppt_mq_t *mq)
{
    if (!mq)
        return;
    while (mq->unexp_head) {
        ppt_umsg_t *u = mq->unexp_head;
        mq->unexp_head = u->next;
        ppt_umsg_put(s, u);
    }
    if (s->mq_last == mq)
        s->mq_last = NULL;
    prt_map_del(&s->mqs, mq->ctx);
    ppt_mq_fini(mq);
    free(mq);
}

/* The collectives layer's state of c (area, host map): released when the
 * user frees c (only blocking collectives, none in flight then, and the
 * building of schedules use it). */
static void comm_coll_free(plait_comm_t c)
{
    if (c->area_free)
        c->area_free(c->area);
    if (c->hier_free)
        c->hier_free(c->hier);
    c->area = c->hier = NULL;
    c->area_free = c->hier_free = NULL;
}

/*
 * Releases a freed communicator that no request refers to any more (c is
 * out of all_comms): its queues (with any message nobody received on it)
 * and rank table. The handle itself stays readable as a tombstone, so a
 * stale copy of it still fails with PLAIT_ERR_STATE, for the last
 * PPT_COMM_TOMBS released; older ones are freed. Without this a program
 * that makes and frees communicators in a loop grew by ~350 bytes each
 * (black-box test, session 20). A frame that arrives later for its context
 * gets a queue made on demand, as one for a context not made yet does.
 */
#define PPT_COMM_TOMBS 256

static void comm_release(ppt_state_t *s, plait_comm_t c)
{
    plait_comm_t *pp = &s->tombs;
    mq_destroy(s, c->mq);
    mq_destroy(s, c->cmq);
    free(c->world_of);
    c->mq = c->cmq = NULL;
    c->world_of = NULL;
    c->all_next = s->tombs;
    s->tombs = c;
    if (++s->ntombs <= PPT_COMM_TOMBS)
        return;
    for (int i = 0; i < PPT_COMM_TOMBS; i++)
        pp = &(*pp)->all_next;
    free(*pp);          /* the oldest: one beyond the bound */
    *pp = NULL;
    s->ntombs = PPT_COMM_TOMBS;
}

void ppt_comm_sweep_locked(ppt_state_t *s)
{
    plait_comm_t *pp = &s->all_comms;
    while (*pp) {
        plait_comm_t c = *pp;
        if (c->magic == PPT_COMM_FREED && atomic_load(&c->refs) == 0) {
            *pp = c->all_next;
            comm_release(s, c);
        } else {
            pp = &c->all_next;
        }
    }
}

/* Warns of the messages waiting unreceived in mq (none: silent). fn: the
 * call that drops them; where: which communicator, as the user knows it. */
static size_t count_unexp(const ppt_mq_t *mq)
{
    size_t n = 0;
    for (const ppt_umsg_t *u = mq ? mq->unexp_head : NULL; u; u = u->next)
        n++;
    return n;
}

static void report_unexp(const char *fn, const ppt_mq_t *mq, const char *where)
{
    size_t n = count_unexp(mq);
    if (n)
        prt_log(PRT_LOG_WARN, "%s: %zu message%s sent to this rank on %s %s never received "
                "(the first: %zu bytes from rank %d, tag %d); dropped", fn, n, n == 1 ? "" : "s",
                where, n == 1 ? "was" : "were", mq->unexp_head->len, mq->unexp_head->src,
                mq->unexp_head->tag);
}

/* The same for a communicator's collectives: their messages all match
 * within the call that sent them, so leftovers mean a call that failed (its
 * error said so) or ranks that passed different arguments and did not all
 * see it (a count of 0 on some ranks only: they send nothing and wait for
 * nothing). The tag's low 24 bits number the call (coll/util.c). */
static void report_unexp_coll(const char *fn, const ppt_mq_t *mq, const char *where)
{
    size_t n = count_unexp(mq);
    if (n)
        prt_log(PRT_LOG_WARN, "%s: %zu message%s of collectives on %s %s never received (the "
                "first: %zu bytes from rank %d for this communicator's collective call %d): a "
                "collective that failed, a non-blocking one never completed with plait_wait or "
                "plait_test, or ranks that passed different counts or roots to one (a count of 0 "
                "on some ranks only goes unseen there); dropped", fn, n,
                n == 1 ? "" : "s", where, n == 1 ? "was" : "were", mq->unexp_head->len,
                mq->unexp_head->src, (mq->unexp_head->tag & 0xffffff) + 1);
}

/* 1 when a communicator not yet released owns mq (its pt2pt queue, or its
 * collectives' queue, whose leftovers a failed collective explains). */
static int mq_owned(const ppt_state_t *s, const ppt_mq_t *mq)
{
    for (plait_comm_t c = s->all_comms; c; c = c->all_next)
        if (c->mq == mq || c->cmq == mq)
            return 1;
    return 0;
}

void ppt_report_unreceived_locked(ppt_state_t *s)
{
    char where[200], cl[160];
    for (plait_comm_t c = s->all_comms; c; c = c->all_next)
        if (c->magic == PPT_COMM_MAGIC) {
            snprintf(where, sizeof where, "communicator %s", ppt_comm_label(c, cl, sizeof cl));
            report_unexp("plait_finalize", c->mq, where);
            report_unexp_coll("plait_finalize", c->cmq, where);
        }
    /* A queue no live communicator owns: its messages came after this
     * rank freed the communicator (plait_comm_free reported what was there
     * then), so nothing could receive them. */
    for (size_t i = 0; i < s->mqs.cap; i++)
        if (s->mqs.keys[i] > 1 && !mq_owned(s, s->mqs.vals[i])) {
            const ppt_mq_t *mq = s->mqs.vals[i];
            snprintf(where, sizeof where, "a communicator this rank had freed (context %#llx)",
                     (unsigned long long)mq->ctx);
            report_unexp("plait_finalize", mq, where);
        }
}

void ppt_comm_destroy_all(ppt_state_t *s)
{
    while (s->all_comms) {
        plait_comm_t c = s->all_comms;
        s->all_comms = c->all_next;
        comm_coll_free(c);
        free(c->world_of);
        c->magic = 0;
        free(c);
    }
    while (s->tombs) {
        plait_comm_t c = s->tombs;
        s->tombs = c->all_next;
        free(c);
    }
    s->ntombs = 0;
    for (size_t i = 0; i < s->mqs.cap; i++)
        if (s->mqs.keys[i] > 1)
            mq_destroy(s, s->mqs.vals[i]);
    ppt_umsg_drain(s);
}

/* ------------------------------------------------------------- public API */

plait_comm_t plait_comm_world(void)
{
    ppt_state_t *s = ppt_get();
    return s ? s->world : NULL;
}

int plait_comm_rank(plait_comm_t comm, int *rank)
{
    int rc;
    if (!ppt_enter(&rc, "plait_comm_rank"))
        return rc;
    PRT_CHECK(ppt_comm_check(comm, "plait_comm_rank"));
    if (!rank)
        return prt_err(PLAIT_ERR_ARG, "plait_comm_rank: rank is NULL");
    *rank = comm->rank;
    return PLAIT_OK;
}

int plait_comm_size(plait_comm_t comm, int *size)
{
    int rc;
    if (!ppt_enter(&rc, "plait_comm_size"))
        return rc;
    PRT_CHECK(ppt_comm_check(comm, "plait_comm_size"));
    if (!size)
        return prt_err(PLAIT_ERR_ARG, "plait_comm_size: size is NULL");
    *size = comm->size;
    return PLAIT_OK;
}

int plait_comm_dup(plait_comm_t comm, plait_comm_t *newcomm)
{
    ppt_state_t *s;
    int rc, *world_of;
    if (!(s = ppt_enter(&rc, "plait_comm_dup")))
        return rc;
    PRT_CHECK(ppt_comm_check(comm, "plait_comm_dup"));
    if (!newcomm)
        return prt_err(PLAIT_ERR_ARG, "plait_comm_dup: newcomm is NULL");
    world_of = malloc((size_t)comm->size * sizeof(int));
    if (!world_of)
        return prt_err(PLAIT_ERR_NOMEM, "plait_comm_dup: no memory");
    memcpy(world_of, comm->world_of, (size_t)comm->size * sizeof(int));
    pthread_mutex_lock(&s->lock);
    rc = ppt_comm_create(s, ppt_ctx_derive(comm->ctx, comm->nchild++, UINT64_MAX), comm->rank,
                         comm->size, world_of, newcomm);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

typedef struct { int color, key, rank; } split_ent_t;

static int split_cmp(const void *a, const void *b)
{
    const split_ent_t *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* Everyone's `bytes`-long record into all[] (rank order), over the collective
 * context: each rank sends its record to every other rank. Linear, meant for
 * the small exchanges of communicator creation. */
static int comm_exchange_all(ppt_state_t *s, plait_comm_t comm, const void *mine, void *all,
                             size_t bytes, const char *fn)
{
    int n = comm->size, nreq = 0, rc = PLAIT_OK, tag;
    plait_request_t *reqs = calloc((size_t)(2 * n), sizeof *reqs);
    if (!reqs)
        return prt_err(PLAIT_ERR_NOMEM, "%s: no memory", fn);
    memcpy((char *)all + (size_t)comm->rank * bytes, mine, bytes);
    pthread_mutex_lock(&s->lock);
    tag = PPT_TAG_CONSTRUCT(comm->coll_seq++);
    for (int r = 0; r < n && rc == PLAIT_OK; r++) {
        if (r == comm->rank)
            continue;
        rc = ppt_irecv_locked(s, comm, comm->cmq, (char *)all + (size_t)r * bytes, bytes, r, tag,
                              &reqs[nreq++]);
        if (rc == PLAIT_OK)
            rc = ppt_isend_locked(s, comm, comm->cmq, mine, bytes, r, tag, &reqs[nreq++]);
    }
    for (int i = 0; i < nreq; i++) {
        int one;
        if (!reqs[i])
            continue;
        one = rc == PLAIT_OK ? ppt_wait_locked(s, reqs[i], fn) : rc;
        /* withdrawn before its storage goes (a no-op once done) */
        if (one != PLAIT_OK && ppt_cancel_locked(s, reqs[i]) && rc == PLAIT_OK)
            one = PLAIT_OK;   /* a send the peer took meanwhile */
        if (rc == PLAIT_OK && one != PLAIT_OK)
            rc = one;
        ppt_req_free(reqs[i]);
    }
    pthread_mutex_unlock(&s->lock);
    free(reqs);
    return rc;
}

static int split_build(ppt_state_t *s, plait_comm_t comm, const split_ent_t *all, int color,
                       plait_comm_t *newcomm)
{
    split_ent_t *mine = malloc((size_t)comm->size * sizeof *mine);
    int n = 0, rank = -1, *world_of;
    uint64_t seq = comm->nchild++;
    if (!mine)
        return prt_err(PLAIT_ERR_NOMEM, "plait_comm_split: no memory");
    if (color == PLAIT_UNDEFINED) {
        free(mine);
        *newcomm = NULL;
        return PLAIT_OK;
    }
    for (int r = 0; r < comm->size; r++)
        if (all[r].color == color)
            mine[n++] = all[r];
    qsort(mine, (size_t)n, sizeof *mine, split_cmp);
    world_of = malloc((size_t)n * sizeof(int));
    if (!world_of) {
        free(mine);
        return prt_err(PLAIT_ERR_NOMEM, "plait_comm_split: no memory");
    }
    for (int i = 0; i < n; i++) {
        world_of[i] = comm->world_of[mine[i].rank];
        if (mine[i].rank == comm->rank)
            rank = i;
    }
    free(mine);
    return ppt_comm_create(s, ppt_ctx_derive(comm->ctx, seq, (uint64_t)color), rank, n, world_of,
                           newcomm);
}

int plait_comm_split(plait_comm_t comm, int color, int key, plait_comm_t *newcomm)
{
    ppt_state_t *s;
    split_ent_t me, *all;
    int rc;
    if (!(s = ppt_enter(&rc, "plait_comm_split")))
        return rc;
    PRT_CHECK(ppt_comm_check(comm, "plait_comm_split"));
    if (!newcomm)
        return prt_err(PLAIT_ERR_ARG, "plait_comm_split: newcomm is NULL");
    if (color < 0 && color != PLAIT_UNDEFINED)
        return prt_err(PLAIT_ERR_ARG, "plait_comm_split: color %d is negative (use >= 0 or "
                       "PLAIT_UNDEFINED)", color);
    all = malloc((size_t)comm->size * sizeof *all);
    if (!all)
        return prt_err(PLAIT_ERR_NOMEM, "plait_comm_split: no memory");
    me.color = color;
    me.key = key;
    me.rank = comm->rank;
    rc = comm_exchange_all(s, comm, &me, all, sizeof me, "plait_comm_split");
    for (int r = 0; rc == PLAIT_OK && r < comm->size; r++)
        if (all[r].rank != r || (all[r].color < 0 && all[r].color != PLAIT_UNDEFINED))
            rc = prt_err(PLAIT_ERR_TRANSPORT, "plait_comm_split: malformed entry from rank %d", r);
    if (rc == PLAIT_OK) {
        pthread_mutex_lock(&s->lock);
        rc = split_build(s, comm, all, color, newcomm);
        pthread_mutex_unlock(&s->lock);
    }
    free(all);
    return rc;
}

int plait_comm_free(plait_comm_t *comm)
{
    ppt_state_t *s;
    int rc;
    if (!(s = ppt_enter(&rc, "plait_comm_free")))
        return rc;
    if (!comm)
        return prt_err(PLAIT_ERR_ARG, "plait_comm_free: comm is NULL");
    if (!*comm)   /* (the pointer is fine; the handle it points to is not) */
        return prt_err(PLAIT_ERR_ARG, "plait_comm_free: *comm is NULL (freed already?)");
    PRT_CHECK(ppt_comm_check(*comm, "plait_comm_free"));
    if (*comm == s->world)
        return prt_err(PLAIT_ERR_ARG, "plait_comm_free: comm is the world, which cannot be freed");
    pthread_mutex_lock(&s->lock);
    {   /* a send without its receive shows here, as at plait_finalize */
        char where[200], cl[160];
        snprintf(where, sizeof where, "communicator %s", ppt_comm_label(*comm, cl, sizeof cl));
        report_unexp("plait_comm_free", (*comm)->mq, where);
    }
    (*comm)->magic = PPT_COMM_FREED;   /* queues live on for operations still in flight */
    comm_coll_free(*comm);
    ppt_comm_sweep_locked(s);          /* released now if nothing is in flight */
    pthread_mutex_unlock(&s->lock);
    *comm = NULL;
    return PLAIT_OK;
}
