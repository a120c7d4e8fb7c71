/*
 * match.c -- MPI matching per context: posted receives and unexpected
 * messages, both in order. An arriving message takes the first posted
 * receive it matches; a new receive takes the first unexpected message it
 * matches. Frames from one sender arrive in order, so non-overtaking holds.
 *
 * Both are binned by source rank (a hash map, bins made on first use): a
 * receive from rank 3 looks only at rank 3's unexpected messages, and a
 * message from rank 3 only at receives naming rank 3 and at the
 * PLAIT_ANY_SOURCE ones, taking whichever was posted first (post_seq).
 * A PLAIT_ANY_SOURCE receive walks the context's whole unexpected list,
 * which keeps arrival order across sources. With one list each, a rank
 * with thousands of messages from one peer unreceived made every receive
 * from another peer walk past them: 20000 outstanding messages per peer
 * took 5.5 s where 10000 took 1.4 (black-box test, session 20).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "pt2pt/ppt.h"

static int match(int want_src, int want_tag, int src, int tag)
{
    return (want_src == PLAIT_ANY_SOURCE || want_src == src) &&
           (want_tag == PLAIT_ANY_TAG || want_tag == tag);
}

#define MQ_BINS_INIT 16

/* The bin of source src, made if create; NULL if absent or out of memory. */
static ppt_bin_t *mq_bin(ppt_mq_t *mq, int src, int create)
{
    uint64_t key = (uint64_t)(uint32_t)src + 2;
    ppt_bin_t *b;
    if (mq->last_bin && mq->last_src == src)
        return mq->last_bin;
    if (!mq->bins.cap) {
        if (!create || prt_map_init(&mq->bins, MQ_BINS_INIT) != PLAIT_OK)
            return NULL;
    }
    if ((b = prt_map_get(&mq->bins, key)) == NULL) {
        if (!create || !(b = calloc(1, sizeof *b)))
            return NULL;
        if (prt_map_put(&mq->bins, key, b) != PLAIT_OK) {
            free(b);
            return NULL;
        }
    }
    mq->last_bin = b;
    mq->last_src = src;
    return b;
}

void ppt_mq_fini(ppt_mq_t *mq)
{
    mq->last_bin = NULL;
    for (size_t i = 0; i < mq->bins.cap; i++)
        if (mq->bins.keys[i] > 1)
            free(mq->bins.vals[i]);
    if (mq->bins.cap)
        prt_map_fini(&mq->bins);
    free(mq->notices);
    mq->notices = NULL;
    free(mq->probes);
    mq->probes = NULL;
}

static void req_link(plait_request_t *head, plait_request_t *tail, plait_request_t req)
{
    req->next = NULL;
    req->prev = *tail;
    if (*tail)
        (*tail)->next = req;
    else
        *head = req;
    *tail = req;
}

static void req_unlink(plait_request_t *head, plait_request_t *tail, plait_request_t req)
{
    if (req->prev)
        req->prev->next = req->next;
    else
        *head = req->next;
    if (req->next)
        req->next->prev = req->prev;
    else
        *tail = req->prev;
    req->prev = req->next = NULL;
}

int ppt_mq_post(ppt_mq_t *mq, plait_request_t req)
{
    ppt_bin_t *b = NULL;
    if (req->peer != PLAIT_ANY_SOURCE && !(b = mq_bin(mq, req->peer, 1)))
        return prt_err(PLAIT_ERR_NOMEM, "no memory to post a receive");
    req->post_seq = ++mq->post_seq;
    req->bin = b;
    if (b)
        req_link(&b->posted_head, &b->posted_tail, req);
    else
        req_link(&mq->any_head, &mq->any_tail, req);
    return PLAIT_OK;
}

void ppt_mq_unpost(ppt_mq_t *mq, plait_request_t req)
{
    ppt_bin_t *b = req->bin;
    if (!req->post_seq)
        return;             /* not posted (matched already) */
    req->post_seq = 0;
    req->bin = NULL;
    if (b)
        req_unlink(&b->posted_head, &b->posted_tail, req);
    else
        req_unlink(&mq->any_head, &mq->any_tail, req);
}

static plait_request_t first_posted(plait_request_t r, int src, int tag)
{
    for (; r; r = r->next)
        if (match(r->peer, r->tag, src, tag))
            return r;
    return NULL;
}

plait_request_t ppt_mq_find_posted(ppt_mq_t *mq, int src, int tag)
{
    ppt_bin_t *b = mq_bin(mq, src, 0);
    plait_request_t r = b ? first_posted(b->posted_head, src, tag) : NULL;
    plait_request_t w = first_posted(mq->any_head, src, tag);
    if (!r || (w && w->post_seq < r->post_seq))
        return w;
    return r;
}

plait_request_t ppt_mq_match_posted(ppt_mq_t *mq, int src, int tag)
{
    plait_request_t r = ppt_mq_find_posted(mq, src, tag);
    if (r)
        ppt_mq_unpost(mq, r);
    return r;
}

/* A message sits in two lists: the context's (next / prev, arrival order)
 * and its source's (snext / sprev); bin selects which links to use. */
static ppt_umsg_t **umsg_next(ppt_umsg_t *u, int bin) { return bin ? &u->snext : &u->next; }
static ppt_umsg_t **umsg_prev(ppt_umsg_t *u, int bin) { return bin ? &u->sprev : &u->prev; }

static void umsg_link(ppt_umsg_t **head, ppt_umsg_t **tail, ppt_umsg_t *u, int bin)
{
    *umsg_next(u, bin) = NULL;
    *umsg_prev(u, bin) = *tail;
    if (*tail)
        *umsg_next(*tail, bin) = u;
    else
        *head = u;
    *tail = u;
}

static void umsg_unlink(ppt_umsg_t **head, ppt_umsg_t **tail, ppt_umsg_t *u, int bin)
{
    ppt_umsg_t *next = *umsg_next(u, bin), *prev = *umsg_prev(u, bin);
    if (prev)
        *umsg_next(prev, bin) = next;
    else
        *head = next;
    if (next)
        *umsg_prev(next, bin) = prev;
    else
        *tail = prev;
}

void ppt_mq_del_unexp(ppt_mq_t *mq, ppt_umsg_t *u)
{
    ppt_bin_t *b = mq_bin(mq, u->src, 0);
    umsg_unlink(&mq->unexp_head, &mq->unexp_tail, u, 0);
    if (b)
        umsg_unlink(&b->unexp_head, &b->unexp_tail, u, 1);
}

ppt_umsg_t *ppt_mq_match_unexp(ppt_mq_t *mq, int src, int tag)
{
    ppt_umsg_t *u;
    if (src == PLAIT_ANY_SOURCE) {
        for (u = mq->unexp_head; u && !match(src, tag, u->src, u->tag); u = u->next)
            ;
    } else {
        ppt_bin_t *b = mq_bin(mq, src, 0);
        for (u = b ? b->unexp_head : NULL; u && !match(src, tag, u->src, u->tag); u = u->snext)
            ;
    }
    if (u)
        ppt_mq_del_unexp(mq, u);
    return u;
}

int ppt_mq_add_unexp(ppt_mq_t *mq, ppt_umsg_t *u)
{
    ppt_bin_t *b = mq_bin(mq, u->src, 1);
    if (!b)
        return prt_err(PLAIT_ERR_NOMEM, "no memory to queue an unexpected message");
    umsg_link(&mq->unexp_head, &mq->unexp_tail, u, 0);
    umsg_link(&b->unexp_head, &b->unexp_tail, u, 1);
    return PLAIT_OK;
}

/* Unexpected eager messages come and go at the pace of the traffic (a bcast
 * root runs ahead of its receivers by a hundred messages and more), so their
 * buffers are kept for reuse: up to PPT_UMSG_KEEP_BYTES of them, none over
 * PPT_UMSG_KEEP_MAX bytes. Freed each time, every new one cost a page fault
 * per 4 KiB (malloc hands the freed heap back to the kernel): 7 faults per
 * 32 KiB message on a bcast receiver, which then took 47 us per message
 * instead of 30 (2-core VM, two namespace hosts). */
#define PPT_UMSG_KEEP_BYTES (8u << 20)
#define PPT_UMSG_KEEP_MAX   (256u << 10)
static size_t umsg_cap(size_t len)
{
    size_t cap = 256;
    if (len > PPT_UMSG_KEEP_MAX)
        return len;
    while (cap < len)
        cap *= 2;   /* powers of two: a kept buffer fits the next message of its size */
    return cap;
}

ppt_umsg_t *ppt_umsg_get(ppt_state_t *s, size_t len)
{
    ppt_umsg_t **pu = &s->umsg_keep, *u;
    void *data = NULL;
    size_t cap = 0;
    while (len && *pu && (*pu)->cap < len)
        pu = &(*pu)->next;
    if (len && *pu) {                 /* a kept one that fits */
        u = *pu;
        *pu = u->next;
        s->umsg_kept -= u->cap;
        data = u->data;
        cap = u->cap;
    } else {
        if (!(u = malloc(sizeof *u)))
            return NULL;
        if (len && !(data = malloc(cap = umsg_cap(len)))) {
            free(u);
            return NULL;
        }
    }
    memset(u, 0, sizeof *u);
    u->data = data;
    u->cap = cap;
    return u;
}

void ppt_umsg_put(ppt_state_t *s, ppt_umsg_t *u)
{
    if (u->kept) {   /* the transport's frame goes back to it */
        ptl_tl_t *tl = s->tl_of[u->world];
        tl->ops->rx_free(tl, u->world, u->kept);
        free(u);
        return;
    }
    if (u->data && u->cap <= PPT_UMSG_KEEP_MAX && s->umsg_kept + u->cap <= PPT_UMSG_KEEP_BYTES) {
        u->next = s->umsg_keep;
        s->umsg_keep = u;
        s->umsg_kept += u->cap;
        return;
    }
    free(u->data);
    free(u);
}

void ppt_umsg_drain(ppt_state_t *s)
{
    while (s->umsg_keep) {
        ppt_umsg_t *u = s->umsg_keep;
        s->umsg_keep = u->next;
        free(u->data);
        free(u);
    }
    s->umsg_kept = 0;
}
