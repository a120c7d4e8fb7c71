/*
 * match.c -- MPI matching: a posted-receive list and an unexpected-message
 * list per context, both in order. An arriving message takes the first posted
 * receive it matches; a new receive takes the first unexpected message it
 * matches. Frames from one sender arrive in order, so non-overtaking holds.
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

void ppt_mq_post(ppt_mq_t *mq, plait_request_t req)
{
    req->next = NULL;
    req->prev = mq->posted_tail;
    if (mq->posted_tail)
        mq->posted_tail->next = req;
    else
        mq->posted_head = req;
    mq->posted_tail = req;
}

void ppt_mq_unpost(ppt_mq_t *mq, plait_request_t req)
{
    if (req->prev)
        req->prev->next = req->next;
    else
        mq->posted_head = req->next;
    if (req->next)
        req->next->prev = req->prev;
    else
        mq->posted_tail = req->prev;
    req->prev = req->next = NULL;
}

plait_request_t ppt_mq_find_posted(ppt_mq_t *mq, int src, int tag)
{
    for (plait_request_t r = mq->posted_head; r; r = r->next)
        if (match(r->peer, r->tag, src, tag))
            return r;
    return NULL;
}

plait_request_t ppt_mq_match_posted(ppt_mq_t *mq, int src, int tag)
{
    plait_request_t r = ppt_mq_find_posted(mq, src, tag);
    if (r)
        ppt_mq_unpost(mq, r);
    return r;
}

void ppt_mq_del_unexp(ppt_mq_t *mq, ppt_umsg_t *u)
{
    if (u->prev)
        u->prev->next = u->next;
    else
        mq->unexp_head = u->next;
    if (u->next)
        u->next->prev = u->prev;
    else
        mq->unexp_tail = u->prev;
}

ppt_umsg_t *ppt_mq_match_unexp(ppt_mq_t *mq, int src, int tag)
{
    for (ppt_umsg_t *u = mq->unexp_head; u; u = u->next) {
        if (match(src, tag, u->src, u->tag)) {
            ppt_mq_del_unexp(mq, u);
            return u;
        }
    }
    return NULL;
}

void ppt_mq_add_unexp(ppt_mq_t *mq, ppt_umsg_t *u)
{
    u->next = NULL;
    u->prev = mq->unexp_tail;
    if (mq->unexp_tail)
        mq->unexp_tail->next = u;
    else
        mq->unexp_head = u;
    mq->unexp_tail = u;
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
