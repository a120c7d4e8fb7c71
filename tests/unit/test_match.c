/* Unit test of MPI matching (pt2pt/match.c): posted receives are taken in
 * post order, unexpected messages in arrival order, wildcards match the
 * earliest eligible entry. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

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

/* A collective call's refusal notice (pt2pt/notice.c), fed by hand. */
static size_t notice_code(unsigned char *buf, uint32_t call, int32_t code, const char *why)
{
    memcpy(buf, &call, sizeof call);
    memcpy(buf + sizeof call, &code, sizeof code);
    memcpy(buf + 8, why, strlen(why));
    return 8 + strlen(why);
}

static size_t notice(unsigned char *buf, uint32_t call, const char *why)
{
    return notice_code(buf, call, PLAIT_ERR_ARG, why);
}

static int printable(const char *s)
{
    for (; *s; s++)
        if (*s < 0x20 || *s > 0x7e)
            return 0;
    return 1;
}

static void notices(void)
{
    ppt_mq_t cmq = {.ctx = 0x41};
    int world_of[4] = {0, 1, 2, 3};
    struct plait_comm c = {.rank = 0, .size = 4, .world_of = world_of, .ctx = 0x40, .cmq = &cmq};
    unsigned char buf[600];
    unsigned seed = 20261128u;
    int bad = 0, rc;
    TAP_OK(ppt_coll_noticed(&c, 5) == PLAIT_OK, "notice: none came, nothing refused");
    ppt_notice_rx(&cmq, 2, buf, notice(buf, 5, "plait_bcast: root 9 is out of range"));
    TAP_OK(ppt_coll_noticed(&c, 5) == PLAIT_ERR_ARG && strstr(plait_last_error(), "rank 2 ") &&
           strstr(plait_last_error(), "failed this call") &&
           strstr(plait_last_error(), "root 9 is out of range"),
           "notice: call 5 refused, naming rank 2 and quoting it ('%s')", plait_last_error());
    TAP_OK(ppt_coll_noticed(&c, 4) == PLAIT_OK && ppt_coll_noticed(&c, 6) == PLAIT_OK &&
           ppt_coll_noticed(&c, 0) == PLAIT_OK, "notice: other calls (and 0, none) unaffected");
    ppt_notice_rx(&cmq, 1, buf, notice(buf, 0, "call zero"));
    ppt_notice_rx(&cmq, 1, buf, 3);
    ppt_notice_rx(&cmq, 1, buf, 7);   /* (a call number, no code) */
    ppt_notice_rx(&cmq, 0, buf, notice(buf, 7, "from this rank itself"));
    ppt_notice_rx(&cmq, 9, buf, notice(buf, 8, "from no member"));
    ppt_notice_rx(&cmq, -1, buf, notice(buf, 8, "negative source"));
    TAP_OK(ppt_coll_noticed(&c, 7) == PLAIT_OK && ppt_coll_noticed(&c, 8) == PLAIT_OK,
           "notice: call 0, a short one, this rank's own and a non-member's are ignored");
    ppt_notice_rx(&cmq, 3, buf, notice_code(buf, 20, PLAIT_ERR_TIMEOUT, "timed out"));
    ppt_notice_rx(&cmq, 3, buf, notice_code(buf, 21, PLAIT_ERR_NOMEM, "no memory"));
    ppt_notice_rx(&cmq, 3, buf, notice_code(buf, 22, PLAIT_ERR_TRUNCATE, "sent more"));
    ppt_notice_rx(&cmq, 3, buf, notice_code(buf, 23, 12345, "a code not known"));
    TAP_OK(ppt_coll_noticed(&c, 20) == PLAIT_ERR_TIMEOUT && ppt_coll_noticed(&c, 21) ==
           PLAIT_ERR_NOMEM && ppt_coll_noticed(&c, 22) == PLAIT_ERR_ARG &&
           ppt_coll_noticed(&c, 23) == PLAIT_ERR_ARG,
           "notice: a timeout and no memory keep their codes, the rest reads PLAIT_ERR_ARG");
    for (uint32_t k = 10; k < 14; k++)
        ppt_notice_rx(&cmq, 3, buf, notice(buf, k, "later"));
    TAP_OK(ppt_coll_noticed(&c, 5) == PLAIT_OK && ppt_coll_noticed(&c, 13) == PLAIT_ERR_ARG,
           "notice: the ring keeps the latest four");
    /* random payloads: whatever comes, the message stays short and printable */
    for (int i = 0; i < 5000; i++) {
        size_t len = (size_t)(rand_r(&seed) % 400);
        int src = rand_r(&seed) % 8 - 2;
        uint32_t call = (uint32_t)(rand_r(&seed) % 6);
        for (size_t j = 0; j < len; j++)
            buf[j] = (unsigned char)rand_r(&seed);
        if (len >= sizeof call)
            memcpy(buf, &call, sizeof call);
        ppt_notice_rx(&cmq, src, buf, len);
        rc = ppt_coll_noticed(&c, call);
        if (rc != PLAIT_OK && ((rc != PLAIT_ERR_ARG && rc != PLAIT_ERR_TIMEOUT &&
                                rc != PLAIT_ERR_NOMEM) ||
                               strlen(plait_last_error()) > 500 || !printable(plait_last_error())))
            bad++;
    }
    TAP_OK(bad == 0, "notice: 5000 random payloads (seed 20261128), known codes, messages "
           "bounded and printable (%d not)", bad);
    ppt_mq_fini(&cmq);
    TAP_OK(cmq.notices == NULL, "notice: ring freed with its context");
}

/* A stall probe (pt2pt/probe.c) as it travels: call, tag, low, kind (1 ask,
 * 2 answer), context, rank (answers), padding. */
static size_t probe_msg(unsigned char *buf, uint32_t call, int32_t tag, uint32_t low,
                        uint32_t kind, uint64_t ctx, int32_t rank)
{
    int32_t pad = 0;
    memcpy(buf, &call, 4);
    memcpy(buf + 4, &tag, 4);
    memcpy(buf + 8, &low, 4);
    memcpy(buf + 12, &kind, 4);
    memcpy(buf + 16, &ctx, 8);
    memcpy(buf + 24, &rank, 4);
    memcpy(buf + 28, &pad, 4);
    return 32;
}

static void probes(void)
{
    ppt_state_t *s = calloc(1, sizeof *s);
    ppt_mq_t *cmq = ppt_mq_lookup(s, 0x41, 1);
    int world_of[4] = {0, 1, 2, 3}, bad = 0, rc;
    struct plait_comm c = {.rank = 0, .size = 4, .world_of = world_of, .ctx = 0x40, .cmq = cmq};
    unsigned char buf[64];
    unsigned seed = 20261129u;
    const int tag = 3 << 24 | 7;
    TAP_OK(ppt_coll_probed(&c, tag) == PLAIT_OK && ppt_coll_passed(&c, 1, 5, 0) == PLAIT_OK,
           "probe: none came, nothing found");
    ppt_probe_rx(s, cmq, 2, 2, buf, probe_msg(buf, 5, tag, 5, 1, 0, 0));
    TAP_OK(s->probes_due == 1, "probe: an ask wants an answer");
    TAP_OK(ppt_coll_probed(&c, tag) == PLAIT_OK && ppt_coll_probed(&c, 9 << 24 | 8) == PLAIT_OK,
           "probe: the same tag, or another call's, is no divergence");
    TAP_OK(ppt_coll_probed(&c, 9 << 24 | 7) == PLAIT_ERR_ARG &&
           strstr(plait_last_error(), "rank 2 runs this call"),
           "probe: the same call under another hash diverged, naming rank 2 ('%s')",
           plait_last_error());
    TAP_OK(ppt_coll_passed(&c, 2, 5, 0) == PLAIT_OK, "probe: a peer still in the call did not pass it");
    ppt_probe_rx(s, cmq, 1, 1, buf, probe_msg(buf, 7, 0, 7, 1, 0, 0));
    TAP_OK(ppt_coll_passed(&c, 1, 5, 0) == PLAIT_ERR_ARG &&
           strstr(plait_last_error(), "rank 1 finished this call") &&
           strstr(plait_last_error(), "without sending") && ppt_coll_passed(&c, 1, 7, 0) ==
           PLAIT_OK && ppt_coll_passed(&c, 3, 5, 0) == PLAIT_OK,
           "probe: a peer whose oldest open call is later passed the earlier ones, only it");
    TAP_OK(ppt_coll_probed(&c, 9 << 24 | 0) == PLAIT_OK, "probe: an area call's ask (tag 0) "
           "never reads as another kind of call");
    /* answers come on the world's context and name theirs */
    ppt_probe_rx(s, NULL, 3, 3, buf, probe_msg(buf, 9, 0, UINT32_MAX, 2, 0x41, 3));
    TAP_OK(ppt_coll_passed(&c, 3, 9, 1) == PLAIT_ERR_ARG &&
           strstr(plait_last_error(), "without receiving") && strstr(plait_last_error(), "freed"),
           "probe: an answer from a rank that freed the communicator ('%s')", plait_last_error());
    ppt_probe_rx(s, NULL, 3, 3, buf, probe_msg(buf, 9, 0, UINT32_MAX, 2, 0x41, 2));
    ppt_probe_rx(s, NULL, 0, 0, buf, probe_msg(buf, 9, 0, UINT32_MAX, 2, 0x41, 0));
    ppt_probe_rx(s, NULL, 3, 3, buf, probe_msg(buf, 9, 0, UINT32_MAX, 2, 0x41, 9));
    TAP_OK(ppt_coll_passed(&c, 2, 100, 0) == PLAIT_OK && ppt_coll_passed(&c, 0, 100, 0) ==
           PLAIT_OK, "probe: answers naming another rank than their sender, this rank or a "
           "non-member count for nothing");
    ppt_probe_rx(s, NULL, 3, 3, buf, probe_msg(buf, 9, 0, 50, 2, 0x999, 3));
    TAP_OK(ppt_mq_lookup(s, 0x999, 0) == NULL, "probe: an answer for a context not known makes none");
    s->probes_due = 0;
    ppt_probe_rx(s, cmq, 2, 2, buf, 31);
    ppt_probe_rx(s, cmq, 2, 2, buf, probe_msg(buf, 0, tag, 50, 1, 0, 0));
    ppt_probe_rx(s, cmq, 2, 2, buf, probe_msg(buf, 11, tag, 50, 7, 0, 0));
    ppt_probe_rx(s, cmq, -1, 2, buf, probe_msg(buf, 11, tag, 50, 1, 0, 0));
    TAP_OK(s->probes_due == 0 && ppt_coll_passed(&c, 2, 11, 0) == PLAIT_OK,
           "probe: short ones, call 0, a kind not known, a negative source are dropped");
    for (int i = 0; i < 5000; i++) {   /* random payloads: never a crash, known codes */
        size_t len = rand_r(&seed) % 4 ? 32 : (size_t)(rand_r(&seed) % 64);
        uint32_t call = (uint32_t)(rand_r(&seed) % 4);
        for (size_t j = 0; j < len; j++)
            buf[j] = (unsigned char)rand_r(&seed);
        if (len >= 16) {
            uint32_t kind = (uint32_t)(rand_r(&seed) % 3);
            memcpy(buf, &call, 4);
            memcpy(buf + 12, &kind, 4);
        }
        ppt_probe_rx(s, rand_r(&seed) % 2 ? cmq : NULL, rand_r(&seed) % 8 - 2,
                     rand_r(&seed) % 8 - 2, buf, len);
        rc = ppt_coll_probed(&c, (int)((unsigned)rand_r(&seed) % 128u << 24 | call));
        if (rc == PLAIT_OK)
            rc = ppt_coll_passed(&c, rand_r(&seed) % 4, call, rand_r(&seed) % 2);
        if ((rc != PLAIT_OK && rc != PLAIT_ERR_ARG) ||
            (rc != PLAIT_OK && (strlen(plait_last_error()) > 400 || !printable(plait_last_error()))))
            bad++;
    }
    TAP_OK(bad == 0, "probe: 5000 random payloads (seed 20261129), PLAIT_OK or PLAIT_ERR_ARG with "
           "a bounded message (%d not)", bad);
    ppt_mq_fini(cmq);
    TAP_OK(cmq->probes == NULL, "probe: ring freed with its context");
    free(cmq);
    prt_map_fini(&s->mqs);
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
    notices();
    probes();
    return tap_done();
}
