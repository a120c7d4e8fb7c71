/* Unit test of MPI matching (pt2pt/match.c): posted receives are taken in
 * post order, unexpected messages in arrival order, wildcards match the
 * earliest eligible entry. */
#include "config.h"

#include <stdlib.h>

#include "pt2pt/ppt.h"
#include "tests/unit/tap.h"

static struct plait_request reqs[8];

static plait_request_t post(ppt_mq_t *mq, int i, int src, int tag)
{
    reqs[i].peer = src;
    reqs[i].tag = tag;
    ppt_mq_post(mq, &reqs[i]);
    return &reqs[i];
}

static ppt_umsg_t *unexp(ppt_mq_t *mq, int src, int tag, size_t len)
{
    ppt_umsg_t *u = calloc(1, sizeof *u);
    u->src = src;
    u->tag = tag;
    u->len = len;
    ppt_mq_add_unexp(mq, u);
    return u;
}

/* Unexpected-message buffers are kept for reuse, within a byte budget. */
static void umsg_keep(void)
{
    ppt_state_t *s = calloc(1, sizeof *s);
    ppt_umsg_t *a = ppt_umsg_get(s, 30000), *none = ppt_umsg_get(s, 0), *b, *c, *big[64];
    void *data = a->data;
    int kept = 0;
    TAP_OK(a->data && a->cap >= 30000 && none->data == NULL,
           "umsg: a buffer with room for the payload; none for an announcement");
    ppt_umsg_put(s, none);
    a->src = 7;
    ppt_umsg_put(s, a);
    b = ppt_umsg_get(s, 20000);
    TAP_OK(b == a && b->data == data && b->src == 0 && s->umsg_keep == NULL,
           "umsg: a kept buffer comes back for a smaller message, the record cleared");
    ppt_umsg_put(s, b);
    c = ppt_umsg_get(s, 40000);
    TAP_OK(c != a && s->umsg_keep == a,
           "umsg: a message larger than every kept buffer gets a new one");
    ppt_umsg_put(s, c);
    for (int i = 0; i < 64; i++)
        big[i] = ppt_umsg_get(s, 256u << 10);
    for (int i = 0; i < 64; i++)
        ppt_umsg_put(s, big[i]);
    for (ppt_umsg_t *u = s->umsg_keep; u; u = u->next)
        kept++;
    TAP_OK(kept > 1 && kept < 64 && s->umsg_kept <= (8u << 20),
           "umsg: kept buffers stay within 8 MiB (%d kept, %zu bytes)", kept, s->umsg_kept);
    ppt_umsg_drain(s);
    TAP_OK(s->umsg_keep == NULL && s->umsg_kept == 0, "umsg: drained at finalize");
    free(s);
}

int main(void)
{
    ppt_mq_t mq = {0};
    ppt_umsg_t *u;
    /* posted: (1,5) (ANY,5) (1,ANY) (2,7) */
    post(&mq, 0, 1, 5);
    post(&mq, 1, PLAIT_ANY_SOURCE, 5);
    post(&mq, 2, 1, PLAIT_ANY_TAG);
    post(&mq, 3, 2, 7);
    TAP_OK(ppt_mq_match_posted(&mq, 1, 5) == &reqs[0], "exact receive posted first wins");
    TAP_OK(ppt_mq_match_posted(&mq, 1, 5) == &reqs[1], "then the any-source receive");
    TAP_OK(ppt_mq_match_posted(&mq, 2, 5) == NULL, "no receive for (2,5)");
    TAP_OK(ppt_mq_match_posted(&mq, 1, 99) == &reqs[2], "any-tag receive takes (1,99)");
    TAP_OK(ppt_mq_match_posted(&mq, 2, 7) == &reqs[3], "(2,7)");
    TAP_OK(ppt_mq_find_posted(&mq, 1, 5) == NULL && ppt_mq_find_posted(&mq, 2, 7) == NULL &&
           mq.any_head == NULL, "nothing left posted");
    post(&mq, 4, 3, 1);
    post(&mq, 5, 3, 2);
    ppt_mq_unpost(&mq, &reqs[4]);
    ppt_mq_unpost(&mq, &reqs[4]);   /* twice: the second is a no-op */
    TAP_OK(ppt_mq_match_posted(&mq, 3, 1) == NULL && ppt_mq_find_posted(&mq, 3, 2) == &reqs[5],
           "a withdrawn receive no longer matches");
    ppt_mq_unpost(&mq, &reqs[5]);
    /* the source's queue and the any-source queue: the earlier posted wins
     * either way round */
    post(&mq, 6, PLAIT_ANY_SOURCE, PLAIT_ANY_TAG);
    post(&mq, 7, 4, 9);
    TAP_OK(ppt_mq_match_posted(&mq, 4, 9) == &reqs[6] &&
           ppt_mq_match_posted(&mq, 4, 9) == &reqs[7], "any-source posted first, then named");
    post(&mq, 7, 4, 9);
    post(&mq, 6, PLAIT_ANY_SOURCE, PLAIT_ANY_TAG);
    TAP_OK(ppt_mq_match_posted(&mq, 4, 9) == &reqs[7] &&
           ppt_mq_match_posted(&mq, 4, 9) == &reqs[6], "named posted first, then any-source");
    /* unexpected: (1,5,a) (2,5,b) (1,6,c) */
    unexp(&mq, 1, 5, 10);
    unexp(&mq, 2, 5, 20);
    unexp(&mq, 1, 6, 30);
    u = ppt_mq_match_unexp(&mq, PLAIT_ANY_SOURCE, 5);
    TAP_OK(u && u->len == 10, "any-source takes the earliest (1,5)");
    free(u);
    u = ppt_mq_match_unexp(&mq, 1, PLAIT_ANY_TAG);
    TAP_OK(u && u->len == 30, "(1,any) skips (2,5) and takes (1,6)");
    free(u);
    TAP_OK(ppt_mq_match_unexp(&mq, 1, 5) == NULL, "nothing left from rank 1");
    u = ppt_mq_match_unexp(&mq, PLAIT_ANY_SOURCE, PLAIT_ANY_TAG);
    TAP_OK(u && u->len == 20 && mq.unexp_head == NULL && mq.unexp_tail == NULL,
           "full wildcard takes the last one, list empty");
    free(u);
    /* a backlog from one source is not in the way of another's */
    for (int i = 0; i < 1000; i++)
        unexp(&mq, 1, 5, 100 + (size_t)i);
    unexp(&mq, 2, 5, 7);
    u = ppt_mq_match_unexp(&mq, 2, 5);
    TAP_OK(u && u->len == 7, "(2,5) behind 1000 messages from rank 1");
    free(u);
    u = ppt_mq_match_unexp(&mq, 1, 5);
    TAP_OK(u && u->len == 100, "rank 1's backlog in arrival order");
    free(u);
    while ((u = ppt_mq_match_unexp(&mq, PLAIT_ANY_SOURCE, PLAIT_ANY_TAG)) != NULL)
        free(u);
    ppt_mq_fini(&mq);
    umsg_keep();
    return tap_done();
}
