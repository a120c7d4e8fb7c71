/*
 * pt2pt_match -- MPI matching semantics, checked against an independent model.
 *
 * Every rank sends M messages to every rank (itself included) per phase; each
 * message's tag (from {0, 1, 7, PLAIT_TAG_MAX}), size (0 B .. 1 MiB, many
 * near the eager/rendezvous thresholds) and bytes come from msg_desc(), so the
 * receiver knows what must arrive and in which order:
 *   A  receives posted after the sends (sequential blocking receives from one
 *      source; each either ANY_TAG -> earliest remaining message, or a chosen
 *      tag -> earliest remaining message with that tag);
 *   B  all receives pre-posted before any send, a random mix of ANY_TAG and
 *      specific tags; the expected pairing is the MPI rule "each arriving
 *      message takes the first posted eligible receive";
 *   C  ANY_SOURCE receives (ANY_TAG or a chosen tag): per source the earliest
 *      remaining eligible message, whatever the interleaving of sources;
 *   D  send/isend and recv/irecv mixed, receives posted both before and after
 *      the matching sends;
 *   E  the same tags on world and two dup'ed communicators never match across
 *      communicators;
 *   F  named-source and ANY_SOURCE receives interleaved (they are queued
 *      apart: the earliest posted must still win), pre-posted and late.
 */
#include "common.h"

#define MAXMSG   (1u << 20)
#define NTAGS    4
#define SLACK    97            /* receive buffers are up to this much larger than the message */

static const int tags[NTAGS] = { 0, 1, 7, PLAIT_TAG_MAX };

static int rank, size, M;

typedef struct {
    int      tag;
    size_t   len;
    uint64_t key;    /* key of the payload stream */
} msg_t;

/* The j-th message from src to dst in a phase on communicator cid. */
static msg_t msg_desc(int phase, int cid, int src, int dst, int j)
{
    t_rng_t r;
    msg_t m;
    t_rng_init(&r, t_key((uint64_t)phase, (uint64_t)cid, (uint64_t)src * 4096 + (uint64_t)dst,
                         (uint64_t)j));
    m.tag = tags[t_rng_below(&r, NTAGS)];
    m.len = t_msg_size(&r, MAXMSG);
    m.key = t_rng_next(&r);
    return m;
}

/* Send buffers of one phase: M per destination, freed after the waitall. */
typedef struct {
    void           **bufs;
    plait_request_t *reqs;
    int              n;
} sends_t;

static void sends_start(sends_t *s, int phase, int cid, plait_comm_t comm, int count)
{
    s->bufs = t_malloc(sizeof(void *) * (size_t)(size * count));
    s->reqs = t_malloc(sizeof(plait_request_t) * (size_t)(size * count));
    s->n = 0;
    for (int k = 0; k < size; k++) {
        int dst = (rank + k) % size;
        for (int j = 0; j < count; j++) {
            msg_t m = msg_desc(phase, cid, rank, dst, j);
            void *b = t_malloc(m.len);
            t_fill(b, m.len, m.key);
            s->bufs[s->n] = b;
            CHECK_RC(plait_isend(b, m.len, PLAIT_BYTE, dst, m.tag, comm, &s->reqs[s->n]));
            s->n++;
        }
    }
}

static void sends_finish(sends_t *s)
{
    CHECK_RC(plait_waitall(s->n, s->reqs, NULL));
    for (int i = 0; i < s->n; i++) {
        CHECK(s->reqs[i] == NULL, "waitall left request %d non-NULL", i);
        free(s->bufs[i]);
    }
    free(s->bufs);
    free(s->reqs);
}

/* Receives one message with a blocking recv and checks it is `m` from src. */
static void recv_check(const msg_t *m, int src, int rtag, plait_comm_t comm, int cid, int j,
                       size_t cap)
{
    unsigned char *buf = t_malloc(cap + T_GUARD);
    plait_status_t st;
    t_poison(buf, cap + T_GUARD);
    CHECK_RC(plait_recv(buf, cap, PLAIT_BYTE, src, rtag, comm, &st));
    CHECK(st.source == src, "status.source %d, expected %d (msg %d, comm %d)", st.source, src, j, cid);
    CHECK(st.tag == m->tag, "status.tag %d, expected %d (msg %d from %d, recv tag %d, comm %d)",
          st.tag, m->tag, j, src, rtag, cid);
    CHECK(st.bytes == m->len, "status.bytes %zu, expected %zu (msg %d from %d, recv tag %d, comm %d)",
          st.bytes, m->len, j, src, rtag, cid);
    CHECK_RECV(buf, m->len, cap, m->key, "msg %d from %d (recv tag %d, comm %d)", j, src, rtag, cid);
    free(buf);
}

/* ---------------------------------------------------------------- phase A */

static void phase_a(void)
{
    sends_t s;
    char *taken = t_malloc((size_t)M);
    t_case = "A: receives after sends, specific source";
    sends_start(&s, 1, 0, plait_comm_world(), M);
    CHECK_RC(plait_barrier(plait_comm_world()));
    for (int k = 0; k < size; k++) {
        int src = (rank + size - k) % size;
        t_rng_t r;
        t_rng_init(&r, t_key(100, (uint64_t)rank, (uint64_t)src, 0));
        memset(taken, 0, (size_t)M);
        for (int step = 0; step < M; step++) {
            int want = -1, rtag = PLAIT_ANY_TAG;
            if (t_rng_below(&r, 2)) {   /* tag of a random remaining message */
                int pick = (int)t_rng_below(&r, (uint64_t)(M - step));
                for (int j = 0; j < M; j++)
                    if (!taken[j] && pick-- == 0) { rtag = msg_desc(1, 0, src, rank, j).tag; break; }
            }
            for (int j = 0; j < M && want < 0; j++)
                if (!taken[j] && (rtag == PLAIT_ANY_TAG || msg_desc(1, 0, src, rank, j).tag == rtag))
                    want = j;
            msg_t m = msg_desc(1, 0, src, rank, want);
            recv_check(&m, src, rtag, plait_comm_world(), 0, want, m.len + t_rng_below(&r, SLACK));
            taken[want] = 1;
        }
    }
    sends_finish(&s);
    free(taken);
}

/* ---------------------------------------------------------------- phase B */

/*
 * Plans the receive tags for the M messages from one source, all posted before
 * the first send: rtag[i] is ANY_TAG or a tag, match[i] the message that must
 * land in receive i under "each message in send order takes the first open
 * eligible receive". Random plans that leave a message or receive unmatched
 * are redrawn; the identity plan (rtag[i] = tag of message i) always works.
 */
static void plan_preposted(int src, int *rtag, int *match)
{
    t_rng_t r;
    int *owner = t_malloc(sizeof(int) * (size_t)M);
    t_rng_init(&r, t_key(200, (uint64_t)rank, (uint64_t)src, 0));
    for (int attempt = 0; attempt < 50; attempt++) {
        int ok = 1;
        for (int i = 0; i < M; i++) {
            int j = (int)t_rng_below(&r, (uint64_t)M);
            rtag[i] = (attempt < 49 && t_rng_below(&r, 3) == 0) ? PLAIT_ANY_TAG
                      : msg_desc(2, 0, src, rank, attempt < 49 ? j : i).tag;
            owner[i] = -1;
        }
        for (int j = 0; j < M && ok; j++) {
            int tag = msg_desc(2, 0, src, rank, j).tag, got = -1;
            for (int i = 0; i < M && got < 0; i++)
                if (owner[i] < 0 && (rtag[i] == PLAIT_ANY_TAG || rtag[i] == tag)) got = i;
            if (got < 0) ok = 0;
            else { owner[got] = j; match[got] = j; }
        }
        if (ok) break;
        CHECK(attempt < 49, "identity plan failed to match (test bug)");
    }
    free(owner);
}

static void phase_b(void)
{
    int n = size * M, idx = 0;
    int *rtag = t_malloc(sizeof(int) * (size_t)n), *match = t_malloc(sizeof(int) * (size_t)n);
    int *srcs = t_malloc(sizeof(int) * (size_t)n);
    size_t *caps = t_malloc(sizeof(size_t) * (size_t)n);
    unsigned char **bufs = t_malloc(sizeof(void *) * (size_t)n);
    plait_request_t *reqs = t_malloc(sizeof(plait_request_t) * (size_t)n);
    plait_status_t *st = t_malloc(sizeof(plait_status_t) * (size_t)n);
    t_rng_t r;
    t_case = "B: all receives pre-posted";
    t_rng_init(&r, t_key(201, (uint64_t)rank, 0, 0));
    for (int k = 0; k < size; k++) {
        int src = (rank + size - k) % size;
        plan_preposted(src, rtag + idx, match + idx);
        for (int i = 0; i < M; i++, idx++) {
            msg_t m = msg_desc(2, 0, src, rank, match[idx]);
            srcs[idx] = src;
            caps[idx] = m.len + t_rng_below(&r, SLACK);
            bufs[idx] = t_malloc(caps[idx] + T_GUARD);
            t_poison(bufs[idx], caps[idx] + T_GUARD);
            CHECK_RC(plait_irecv(bufs[idx], caps[idx], PLAIT_BYTE, src, rtag[idx],
                                 plait_comm_world(), &reqs[idx]));
        }
    }
    CHECK_RC(plait_barrier(plait_comm_world()));
    /* Every receive is posted, so blocking sends complete; mix them with isends. */
    sends_t s = { t_malloc(sizeof(void *) * (size_t)n), t_malloc(sizeof(plait_request_t) * (size_t)n), 0 };
    for (int k = 0; k < size; k++) {
        int dst = (rank + k) % size;
        for (int j = 0; j < M; j++) {
            msg_t m = msg_desc(2, 0, rank, dst, j);
            void *b = t_malloc(m.len);
            t_fill(b, m.len, m.key);
            if (t_rng_below(&r, 2)) {
                CHECK_RC(plait_send(b, m.len, PLAIT_BYTE, dst, m.tag, plait_comm_world()));
                free(b);
            } else {
                s.bufs[s.n] = b;
                CHECK_RC(plait_isend(b, m.len, PLAIT_BYTE, dst, m.tag, plait_comm_world(), &s.reqs[s.n]));
                s.n++;
            }
        }
    }
    CHECK_RC(plait_waitall(n, reqs, st));
    for (int i = 0; i < n; i++) {
        msg_t m = msg_desc(2, 0, srcs[i], rank, match[i]);
        CHECK(reqs[i] == NULL, "waitall left request %d non-NULL", i);
        CHECK(st[i].source == srcs[i] && st[i].tag == m.tag && st[i].bytes == m.len,
              "receive %d (src %d, tag %d): status {source %d, tag %d, bytes %zu}, expected msg %d "
              "{%d, %d, %zu}", i % M, srcs[i], rtag[i], st[i].source, st[i].tag, st[i].bytes,
              match[i], srcs[i], m.tag, m.len);
        CHECK_RECV(bufs[i], m.len, caps[i], m.key, "pre-posted receive %d from %d (tag %d) = msg %d",
                   i % M, srcs[i], rtag[i], match[i]);
        free(bufs[i]);
    }
    sends_finish(&s);
    free(rtag); free(match); free(srcs); free(caps); free(bufs); free(reqs); free(st);
}

/* ---------------------------------------------------------------- phase C */

/* Earliest remaining message from src with tag (or any tag), -1 if none. */
static int earliest(const char *taken, int src, int tag)
{
    for (int j = 0; j < M; j++)
        if (!taken[src * M + j] && (tag == PLAIT_ANY_TAG || msg_desc(3, 0, src, rank, j).tag == tag))
            return j;
    return -1;
}

static void phase_c(void)
{
    int n = size * M;
    char *taken = t_malloc((size_t)n);
    sends_t s;
    t_rng_t r;
    t_case = "C: ANY_SOURCE receives";
    memset(taken, 0, (size_t)n);
    t_rng_init(&r, t_key(300, (uint64_t)rank, 0, 0));
    sends_start(&s, 3, 0, plait_comm_world(), M);
    for (int step = 0; step < n; step++) {
        int rtag = PLAIT_ANY_TAG, pick = (int)t_rng_below(&r, (uint64_t)(n - step));
        size_t cap = 0;
        if (t_rng_below(&r, 2))
            for (int i = 0; i < n; i++)
                if (!taken[i] && pick-- == 0) { rtag = msg_desc(3, 0, i / M, rank, i % M).tag; break; }
        for (int src = 0; src < size; src++) {   /* room for whichever source matches */
            int j = earliest(taken, src, rtag);
            if (j >= 0 && msg_desc(3, 0, src, rank, j).len > cap) cap = msg_desc(3, 0, src, rank, j).len;
        }
        cap += t_rng_below(&r, SLACK);
        unsigned char *buf = t_malloc(cap + T_GUARD);
        plait_status_t st;
        t_poison(buf, cap + T_GUARD);
        CHECK_RC(plait_recv(buf, cap, PLAIT_BYTE, PLAIT_ANY_SOURCE, rtag, plait_comm_world(), &st));
        CHECK(st.source >= 0 && st.source < size, "status.source %d out of range", st.source);
        int j = earliest(taken, st.source, rtag);
        CHECK(j >= 0, "receive (ANY_SOURCE, tag %d) got a message from %d, which has none left "
              "with that tag", rtag, st.source);
        msg_t m = msg_desc(3, 0, st.source, rank, j);
        CHECK(st.tag == m.tag && st.bytes == m.len, "receive (ANY_SOURCE, tag %d) from %d: "
              "status tag %d bytes %zu, expected msg %d (tag %d, %zu bytes)", rtag, st.source,
              st.tag, st.bytes, j, m.tag, m.len);
        CHECK_RECV(buf, m.len, cap, m.key, "ANY_SOURCE receive %d (tag %d) = msg %d from %d",
                   step, rtag, j, st.source);
        taken[st.source * M + j] = 1;
        free(buf);
    }
    sends_finish(&s);
    free(taken);
}

/* ---------------------------------------------------------------- phase D */

/*
 * One step of a shifted exchange (send to rank+k, receive from rank-k). The
 * receive plan is the identity (receive i takes message i, tag ANY or exact),
 * which is the same whether the message arrives before or after the receive.
 * First half: irecvs posted before sending, so the peer may use blocking
 * sends; second half: posted after our sends, by recv or irecv.
 */
static void phase_d_step(int k, t_rng_t *r)
{
    int dst = (rank + k) % size, src = (rank + size - k) % size, half = M / 2;
    unsigned char **bufs = t_malloc(sizeof(void *) * (size_t)M);
    size_t *caps = t_malloc(sizeof(size_t) * (size_t)M);
    int *rtag = t_malloc(sizeof(int) * (size_t)M);
    plait_request_t *rreqs = t_malloc(sizeof(plait_request_t) * (size_t)M);
    plait_status_t *st = t_malloc(sizeof(plait_status_t) * (size_t)M);
    sends_t s = { t_malloc(sizeof(void *) * (size_t)M), t_malloc(sizeof(plait_request_t) * (size_t)M), 0 };

    for (int i = 0; i < M; i++) {
        msg_t m = msg_desc(4, 0, src, rank, i);
        caps[i] = m.len + t_rng_below(r, SLACK);
        rtag[i] = t_rng_below(r, 2) ? PLAIT_ANY_TAG : m.tag;
        bufs[i] = t_malloc(caps[i] + T_GUARD);
        t_poison(bufs[i], caps[i] + T_GUARD);
        rreqs[i] = NULL;
        if (i < half)
            CHECK_RC(plait_irecv(bufs[i], caps[i], PLAIT_BYTE, src, rtag[i], plait_comm_world(), &rreqs[i]));
    }
    for (int j = 0; j < M; j++) {
        msg_t m = msg_desc(4, 0, rank, dst, j);
        void *b = t_malloc(m.len);
        t_fill(b, m.len, m.key);
        if (j < half && t_rng_below(r, 2)) {
            CHECK_RC(plait_send(b, m.len, PLAIT_BYTE, dst, m.tag, plait_comm_world()));
            free(b);
        } else {
            s.bufs[s.n] = b;
            CHECK_RC(plait_isend(b, m.len, PLAIT_BYTE, dst, m.tag, plait_comm_world(), &s.reqs[s.n]));
            s.n++;
        }
    }
    for (int i = half; i < M; i++) {
        if (t_rng_below(r, 2)) {
            CHECK_RC(plait_recv(bufs[i], caps[i], PLAIT_BYTE, src, rtag[i], plait_comm_world(), &st[i]));
        } else {
            CHECK_RC(plait_irecv(bufs[i], caps[i], PLAIT_BYTE, src, rtag[i], plait_comm_world(), &rreqs[i]));
        }
    }
    /* Blocking receives filled st[i] already; wait for the irecvs one by one. */
    for (int i = 0; i < M; i++) {
        if (rreqs[i] != NULL) CHECK_RC(plait_wait(&rreqs[i], &st[i]));
        msg_t m = msg_desc(4, 0, src, rank, i);
        CHECK(st[i].source == src && st[i].tag == m.tag && st[i].bytes == m.len,
              "shift %d receive %d (tag %d, %s): status {%d, %d, %zu}, expected {%d, %d, %zu}", k, i,
              rtag[i], i < half ? "posted early" : "posted late", st[i].source, st[i].tag,
              st[i].bytes, src, m.tag, m.len);
        CHECK_RECV(bufs[i], m.len, caps[i], m.key, "shift %d receive %d from %d", k, i, src);
        free(bufs[i]);
    }
    sends_finish(&s);
    free(bufs); free(caps); free(rtag); free(rreqs); free(st);
}

static void phase_d(void)
{
    t_rng_t r;
    t_case = "D: mixed send/isend/recv/irecv";
    t_rng_init(&r, t_key(400, (uint64_t)rank, 0, 0));
    for (int k = 0; k < size; k++) phase_d_step(k, &r);
}

/* ---------------------------------------------------------------- phase E */

static void phase_e(void)
{
    plait_comm_t comms[3];
    int order[3] = { 1, 0, 2 };   /* receive on dup1 first, then world, then dup2 */
    int dst = (rank + 1) % size, src = (rank + size - 1) % size, n = M < 8 ? M : 8;
    sends_t s[3];
    t_case = "E: dup'ed communicators isolate traffic";
    comms[0] = plait_comm_world();
    CHECK_RC(plait_comm_dup(plait_comm_world(), &comms[1]));
    CHECK_RC(plait_comm_dup(plait_comm_world(), &comms[2]));
    for (int c = 1; c < 3; c++) {
        int r2 = -1, s2 = -1;
        CHECK(comms[c] != NULL && comms[c] != comms[0], "dup %d returned %p", c, (void *)comms[c]);
        CHECK_RC(plait_comm_rank(comms[c], &r2));
        CHECK_RC(plait_comm_size(comms[c], &s2));
        CHECK(r2 == rank && s2 == size, "dup %d: rank %d size %d, world %d %d", c, r2, s2, rank, size);
    }
    /* Send in the order dup2, world, dup1: the opposite of the receive order. */
    for (int c = 2; c >= 0; c--) {
        s[c].bufs = t_malloc(sizeof(void *) * (size_t)n);
        s[c].reqs = t_malloc(sizeof(plait_request_t) * (size_t)n);
        s[c].n = 0;
        for (int j = 0; j < n; j++) {
            msg_t m = msg_desc(5, c, rank, dst, j);
            m.tag = 7;  /* same tag everywhere: only the communicator tells them apart */
            s[c].bufs[j] = t_malloc(m.len);
            t_fill(s[c].bufs[j], m.len, m.key);
            CHECK_RC(plait_isend(s[c].bufs[j], m.len, PLAIT_BYTE, dst, m.tag, comms[c], &s[c].reqs[j]));
            s[c].n++;
        }
    }
    for (int o = 0; o < 3; o++) {
        int c = order[o];
        for (int j = 0; j < n; j++) {
            msg_t m = msg_desc(5, c, src, rank, j);
            m.tag = 7;
            unsigned char *buf = t_malloc(MAXMSG + T_GUARD);
            plait_status_t st;
            t_poison(buf, MAXMSG + T_GUARD);
            CHECK_RC(plait_recv(buf, MAXMSG, PLAIT_BYTE, PLAIT_ANY_SOURCE, PLAIT_ANY_TAG, comms[c], &st));
            CHECK(st.source == src && st.tag == 7 && st.bytes == m.len,
                  "comm %d msg %d: status {%d, %d, %zu}, expected {%d, 7, %zu} (a message of "
                  "another communicator?)", c, j, st.source, st.tag, st.bytes, src, m.len);
            CHECK_RECV(buf, m.len, (size_t)MAXMSG, m.key, "comm %d msg %d from %d", c, j, src);
            free(buf);
        }
    }
    for (int c = 0; c < 3; c++) sends_finish(&s[c]);
    CHECK_RC(plait_comm_free(&comms[1]));
    CHECK_RC(plait_comm_free(&comms[2]));
    CHECK(comms[1] == NULL && comms[2] == NULL, "comm_free did not set the handle to NULL");
}

/*
 * F: receives naming the source and PLAIT_ANY_SOURCE ones interleaved, for
 * messages of one sender (the last rank) to rank 0, pre-posted (pre = 1:
 * each arriving message takes the earliest posted eligible receive, whichever
 * queue holds it) or posted after every message arrived (pre = 0: each
 * receive takes the earliest eligible message). Receive j's source is the
 * sender or any, its tag message j's or any, so in both orders receive j
 * must get message j exactly (the payload says which it got).
 */
static void phase_f_run(int pre, int n)
{
    int sender = size - 1, *got = t_malloc(sizeof(int) * (size_t)n);
    plait_request_t *rq = t_malloc(sizeof(plait_request_t) * (size_t)n);
    t_rng_t r;
    t_rng_init(&r, t_seed ^ (0xF0F0u + (uint64_t)pre));
    int *tag = t_malloc(sizeof(int) * (size_t)n), *any_src = t_malloc(sizeof(int) * (size_t)n),
        *any_tag = t_malloc(sizeof(int) * (size_t)n);
    for (int j = 0; j < n; j++) {   /* the same draws on every rank */
        tag[j] = tags[t_rng_below(&r, NTAGS)];
        any_src[j] = (int)t_rng_below(&r, 2);
        any_tag[j] = t_rng_below(&r, 4) == 0;
    }
    if (rank == 0 && !pre)
        CHECK_RC(plait_barrier(plait_comm_world()));   /* the sender has sent */
    if (rank == 0) {
        for (int j = 0; j < n; j++) {
            got[j] = -1;
            CHECK_RC(plait_irecv(&got[j], 1, PLAIT_INT32, any_src[j] ? PLAIT_ANY_SOURCE : sender,
                                 any_tag[j] ? PLAIT_ANY_TAG : tag[j], plait_comm_world(), &rq[j]));
        }
        if (pre)
            CHECK_RC(plait_barrier(plait_comm_world()));
        for (int j = 0; j < n; j++) {
            plait_status_t st;
            CHECK_RC(plait_wait(&rq[j], &st));
            CHECK(got[j] == j && st.source == sender && st.tag == tag[j],
                  "%s receive %d (source %s, tag %s) got message %d from %d tag %d",
                  pre ? "pre-posted" : "late", j, any_src[j] ? "any" : "named",
                  any_tag[j] ? "any" : "named", got[j], st.source, st.tag);
        }
    } else {
        if (pre)
            CHECK_RC(plait_barrier(plait_comm_world()));
        if (rank == sender)
            for (int j = 0; j < n; j++)
                CHECK_RC(plait_send(&j, 1, PLAIT_INT32, 0, tag[j], plait_comm_world()));
        if (!pre)
            CHECK_RC(plait_barrier(plait_comm_world()));
    }
    free(got); free(rq); free(tag); free(any_src); free(any_tag);
}

static void phase_f(void)
{
    if (size < 2)
        return;
    t_case = "F: named-source and any-source receives interleaved, pre-posted";
    phase_f_run(1, 4 * M);
    CHECK_RC(plait_barrier(plait_comm_world()));
    t_case = "F: named-source and any-source receives interleaved, posted late";
    phase_f_run(0, 4 * M);
}

int main(void)
{
    t_init(&rank, &size);
    M = size <= 2 ? 48 : size <= 4 ? 24 : 10;
    if (t_quick()) M = M / 2 + 2;
    /* A barrier after each phase: a rank that finished early must not send the
     * next phase's messages into this phase's wildcard receives. */
    phase_a();
    CHECK_RC(plait_barrier(plait_comm_world()));
    phase_b();
    CHECK_RC(plait_barrier(plait_comm_world()));
    phase_c();
    CHECK_RC(plait_barrier(plait_comm_world()));
    phase_d();
    CHECK_RC(plait_barrier(plait_comm_world()));
    phase_e();
    CHECK_RC(plait_barrier(plait_comm_world()));
    phase_f();
    CHECK_RC(plait_barrier(plait_comm_world()));
    if (rank == 0) printf("pt2pt_match: %d ranks, %d messages per pair and phase: all matched\n", size, M);
    t_finalize();
    return 0;
}
