/*
 * match.c -- MPI matching: a posted-receive list and an unexpected-message
 * list per context, both in order. An arriving message takes the first posted
 * receive it matches; a new receive takes the first unexpected message it
 * matches. Frames from one sender arrive in order, so non-overtaking holds.
 */
#include "config.h"

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

plait_request_t ppt_mq_match_posted(ppt_mq_t *mq, int src, int tag)
{
    for (plait_request_t r = mq->posted_head; r; r = r->next) {
        if (match(r->peer, r->tag, src, tag)) {
            ppt_mq_unpost(mq, r);
            return r;
        }
    }
    return NULL;
}

ppt_umsg_t *ppt_mq_match_unexp(ppt_mq_t *mq, int src, int tag)
{
    for (ppt_umsg_t *u = mq->unexp_head; u; u = u->next) {
        if (!match(src, tag, u->src, u->tag))
            continue;
        if (u->prev)
            u->prev->next = u->next;
        else
            mq->unexp_head = u->next;
        if (u->next)
            u->next->prev = u->prev;
        else
            mq->unexp_tail = u->prev;
        return u;
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
