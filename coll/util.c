/*
 * util.c -- pieces several algorithms share: block partitions, the folding of
 * non-power-of-two communicators, and the recursive halving / doubling phases
 * (used by Rabenseifner allreduce and reduce, recursive-halving
 * reduce_scatter and recursive-doubling allgather); the names of datatypes
 * and operators for messages, and the call signature the shared-memory paths
 * compare across ranks (pcoll_call_sig).
 */
#include "config.h"

#include "coll/pcoll.h"

size_t pcoll_blk_off(size_t count, int n, int i)
{
    size_t q = count / (size_t)n, r = count % (size_t)n;
    return (size_t)i * q + ((size_t)i < r ? (size_t)i : r);
}

size_t pcoll_blk_cnt(size_t count, int n, int i)
{
    return count / (size_t)n + ((size_t)i < count % (size_t)n);
}

int pcoll_pof2(int n)
{
    int p = 1;
    while (p * 2 <= n)
        p *= 2;
    return p;
}

int pcoll_fold_newrank(int rank, int rem)
{
    if (rank < 2 * rem)
        return rank % 2 ? rank / 2 : -1;
    return rank - rem;
}

int pcoll_fold_real(int newrank, int rem)
{
    return newrank < rem ? 2 * newrank + 1 : newrank + rem;
}

void pcoll_halving(pcoll_sched_t *sc, char *acc, char *in, const size_t *edge, size_t unit,
                   int pof2, int nr, int rem)
{
    int r = sc->comm->rank;
    size_t es = plait_dtype_size(sc->dt);
    for (int d = pof2 / 2; d >= 1; d /= 2) {
        int pnr = nr ^ d, p = pcoll_fold_real(pnr, rem);
        int klo = nr & ~(d - 1), glo = pnr & ~(d - 1);
        char *keep = acc + edge[klo] * unit, *give = acc + edge[glo] * unit;
        size_t kbytes = (edge[klo + d] - edge[klo]) * unit;
        size_t gbytes = (edge[glo + d] - edge[glo]) * unit;
        pcoll_sched_send(sc, p, give, gbytes);
        pcoll_sched_recv(sc, p, in, kbytes);
        pcoll_sched_reduce(sc, keep, p < r ? in : keep, p < r ? keep : in, kbytes / es);
        pcoll_sched_end_round(sc);
    }
}

void pcoll_doubling(pcoll_sched_t *sc, char *buf, const size_t *edge, size_t unit, int pof2,
                    int nr, int rem)
{
    for (int d = 1; d < pof2; d *= 2) {
        int pnr = nr ^ d, p = pcoll_fold_real(pnr, rem);
        int mlo = nr & ~(d - 1), tlo = pnr & ~(d - 1);
        pcoll_sched_send(sc, p, buf + edge[mlo] * unit, (edge[mlo + d] - edge[mlo]) * unit);
        pcoll_sched_recv(sc, p, buf + edge[tlo] * unit, (edge[tlo + d] - edge[tlo]) * unit);
        pcoll_sched_end_round(sc);
    }
}

const char *pcoll_dtype_name(plait_dtype_t dt)
{
    static const char *const names[] = {"PLAIT_BYTE", "PLAIT_INT8", "PLAIT_UINT8", "PLAIT_INT32",
                                        "PLAIT_UINT32", "PLAIT_INT64", "PLAIT_UINT64",
                                        "PLAIT_FLOAT16", "PLAIT_BFLOAT16", "PLAIT_FLOAT32",
                                        "PLAIT_FLOAT64"};
    return (unsigned)dt < sizeof names / sizeof names[0] ? names[dt] : "?";
}

const char *pcoll_op_name(plait_op_t op)
{
    static const char *const names[] = {"PLAIT_SUM", "PLAIT_PROD", "PLAIT_MIN", "PLAIT_MAX",
                                        "PLAIT_AVG"};
    return (unsigned)op < sizeof names / sizeof names[0] ? names[op] : "?";
}

uint32_t pcoll_call_sig(const pcoll_args_t *a)
{
    uint32_t sig = (uint32_t)a->coll & 0xffu;
    if (pcoll_is_reduction(a->coll))
        sig |= 1u << 24 | ((uint32_t)a->dt & 0xffu) << 8 | ((uint32_t)a->op & 0xffu) << 16;
    return sig;
}

int pcoll_sig_mismatch(const char *fn, int p, uint32_t theirs, uint32_t mine)
{
    if ((theirs & 0xffu) != (mine & 0xffu))
        return prt_err(PLAIT_ERR_ARG, "%s: rank %d called %s where this rank called %s: every "
                       "rank must start the same collectives in the same order", fn, p,
                       pcoll_coll_name((int)(theirs & 0xffu)),
                       pcoll_coll_name((int)(mine & 0xffu)));
    if (((theirs >> 8) & 0xffu) != ((mine >> 8) & 0xffu))
        return prt_err(PLAIT_ERR_ARG, "%s: rank %d passed datatype %s where this rank passed %s",
                       fn, p, pcoll_dtype_name((plait_dtype_t)((theirs >> 8) & 0xffu)),
                       pcoll_dtype_name((plait_dtype_t)((mine >> 8) & 0xffu)));
    return prt_err(PLAIT_ERR_ARG, "%s: rank %d passed operator %s where this rank passed %s", fn,
                   p, pcoll_op_name((plait_op_t)((theirs >> 16) & 0xffu)),
                   pcoll_op_name((plait_op_t)((mine >> 16) & 0xffu)));
}

/*
 * A collective's messages are tagged with the communicator's collective
 * count (its low 24 bits: a tag recurs after 16M collectives) and 7 bits
 * hashed from the call's signature (pcoll_tag_sig). Ranks that passed
 * different datatypes or operators to a reduction -- which a message
 * schedule cannot otherwise see: the bytes arrive, the sizes agree -- then
 * send messages the others never match, and the call times out naming the
 * rank it waits for instead of returning wrong data (a mismatch goes unseen
 * with probability 1/128). The root of a rooted collective is XORed in
 * whole (roots that differ by less than 128 always give different tags): a
 * chain or scatter + allgather bcast whose ranks disagree on the root
 * otherwise handed some of them another root's data, or a mix, with
 * PLAIT_OK (a black-box test).
 * Internal schedules (sig 0) keep the plain count. The hash PPT_TAG_LIFE_H is
 * left to communicator construction and finalize (pt2pt/ppt.h).
 */
uint32_t pcoll_tag_sig(const pcoll_args_t *a)
{
    return pcoll_call_sig(a) | (pcoll_is_rooted(a->coll) ? ((uint32_t)a->root & 0x7fu) << 25 : 0);
}

int pcoll_next_tag(plait_comm_t comm, uint32_t sig)
{
    uint32_t h = sig ? (((sig & 0x1ffffffu) * 0x9E3779B1u) >> 25) ^ (sig >> 25) : 0;
    if (h == PPT_TAG_LIFE_H)   /* reserved: communicator construction, finalize */
        h--;
    return (int)(h << 24 | (comm->coll_seq++ & 0xffffffu));
}

/* A finished transfer of a collective's schedule: PLAIT_OK, or the error
 * the collective reports for it. The request's own detail says what went
 * wrong (a peer that withdrew its message because its call failed, a dead
 * rank, a truncation); only a truncated or short message points at
 * arguments that differ between ranks. */
int pcoll_xfer_check(plait_request_t r, int is_recv, size_t want, int peer, const char *fn)
{
    const char *why = r->why[0] ? r->why : plait_strerror(r->rc);
    int told;
    if (r->rc == PLAIT_ERR_TRUNCATE)
        return prt_err(PLAIT_ERR_ARG, "%s: rank %d sent more than the %zu bytes expected: "
                       "ranks passed different counts or roots", fn, peer, want);
    if (r->rc != PLAIT_OK && r->comm && (told = ppt_coll_noticed(r->comm, r->call)) != PLAIT_OK)
        return prt_err(told, "%s: %s", fn, prt_err_text());   /* the peer's reason */
    if (r->rc != PLAIT_OK)
        return prt_err(r->rc, "%s: a transfer with rank %d failed: %s", fn, peer, why);
    if (is_recv && r->st.bytes != want)
        return prt_err(PLAIT_ERR_ARG, "%s: rank %d sent %zu bytes where %zu were expected: "
                       "ranks passed different counts or roots", fn, peer, r->st.bytes, want);
    return PLAIT_OK;
}

/* A collective call that failed here for a cause of its own -- its
 * arguments, a mismatch it saw (a truncated or short message, another
 * call's data in the shared area), no memory -- tells the other members
 * (pt2pt/notice.c), who may be waiting for its part. Not a dead peer or a
 * timeout, which every waiting rank meets by itself (PLAIT_TIMEOUT is the
 * job's), nor a failure a peer's notice caused (one notice per call at
 * most). The error stays this thread's last. */
void pcoll_fail_tell_locked(ppt_state_t *s, plait_comm_t comm, uint32_t call, int rc)
{
    char why[256];
    if (rc != PLAIT_ERR_ARG && rc != PLAIT_ERR_TRUNCATE && rc != PLAIT_ERR_NOMEM)
        return;
    snprintf(why, sizeof why, "%s", prt_err_text());
    ppt_coll_notify_locked(s, comm, call, rc, why);
    prt_err(rc, "%s", why);
}

/* A call whose arguments fail the checks here (rc, its message set) starts
 * nothing, but it counts as the communicator's next call all the same, and
 * the other members hear of it (pt2pt/notice.c): those waiting in it fail
 * at once quoting this rank's message, instead of waiting for its part for
 * ever (PLAIT_TIMEOUT 0) or until the timeout. Counted, the call keeps this
 * rank's later calls numbered as the others' are, and their messages'
 * tags in step (where every rank refuses the call alike, every rank counts
 * it). */
int pcoll_refuse(ppt_state_t *s, plait_comm_t comm, int rc)
{
    pthread_mutex_lock(&s->lock);
    comm->coll_calls++;
    comm->coll_seq++;
    pcoll_fail_tell_locked(s, comm, comm->coll_calls, rc);
    pthread_mutex_unlock(&s->lock);
    return rc;
}
