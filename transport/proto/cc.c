/*
 * cc.c -- congestion-control policies of the multipath protocol, each a table
 * of hooks (pp_cc_ops_t). Windows are in bytes and decided per chunk.
 *
 *  cubic  : loss-based; slow start, then W(t) = C (t - K)^3 + Wmax with t in
 *           milliseconds (datacenter RTTs are ~1000x shorter than the WAN ones
 *           CUBIC's constants were tuned for), never below the Reno estimate;
 *           holds (and slowly yields) at a standing queue, and grows one
 *           chunk per RTT near one.
 *  swift  : delay-based; additive increase while the RTT is under a target
 *           (base RTT plus headroom), multiplicative decrease proportional to
 *           the excess, at most once per RTT.
 *  dgpool : delay gradient with a connection-level token pool (UDMP): every
 *           ACKed byte returns a token, scaled up while the RTT gradient is
 *           flat or falling and down while it rises; a chunk leaves when the
 *           pool covers it. No per-path window, so paths only need RTTs.
 *  eqds   : receiver-driven credits (EQDS-style): the sender spends an
 *           initial speculative window, after which every byte it sends was
 *           granted by the receiver, which grants one byte per byte arrived
 *           (retransmissions included), paced by arrivals.
 */
#include "transport/proto/pp.h"

#include <math.h>
#include <string.h>

static double max_window(const pp_conn_t *c) { return (double)PP_WIN * c->cfg.mtu; }
static double min_window(const pp_conn_t *c) { return (double)c->cfg.chunk; }

static double clampw(const pp_conn_t *c, double w)
{
    if (w < min_window(c))
        return min_window(c);
    return w > max_window(c) ? max_window(c) : w;
}

static uint32_t cc_chunk(pp_conn_t *c) { return c->cfg.chunk; }

static uint64_t cc_no_pacing(pp_conn_t *c, uint32_t bytes)
{
    (void)c;
    (void)bytes;
    return 0;
}

static int win_can_send(pp_conn_t *c, uint32_t bytes)
{
    return (double)c->inflight + bytes <= c->cc.cwnd;
}

static int win_allow_retx(pp_conn_t *c, uint32_t bytes)
{
    return c->inflight == 0 || (double)c->inflight + bytes <= c->cc.cwnd + c->cfg.chunk;
}

static void win_init(pp_conn_t *c)
{
    memset(&c->cc, 0, sizeof c->cc);
    c->cc.cwnd = clampw(c, (double)c->cfg.init_cwnd);
    c->cc.ssthresh = max_window(c);
}

/* ------------------------------------------------------------------ CUBIC */

#define CUBIC_BETA 0.7
#define CUBIC_C    0.4     /* chunks / ms^3 */

/* CUBIC stops growing at PP_QUEUE_TARGET_NS of queue. Loss alone would
 * have it fill every bottleneck queue until it overflows: past a 5 ms tbf
 * queue each probe dropped a burst (10% of the packets on 2 x 1 Gbit/s),
 * and the retransmissions and timeouts that followed left the links idle
 * 10% of the time. Holding the window while every recent packet shows
 * that much queue keeps a standing queue, so the links stay busy and
 * nothing overflows; losses still cut it as CUBIC does. */

/* The queue a window holds at: PP_QUEUE_TARGET_NS, raised for a window
 * under CUBIC_FAIR_WINDOW by the square root of how far under (at most
 * CUBIC_FAIR_MAX times), as Swift's flow scaling does. Why: connections
 * sharing links do not see the same queue. ECMP gives each connection its
 * own split of paths over the links (21 of 32 on one link, 17 of 32 on the
 * other's), so one connection's packets meet the more loaded link more
 * often, its recent samples' least holds more often, and it grows less:
 * with one target for all, the same connection kept the smaller share in
 * every seed of a path map (plait-sim, two colliding pairs, map seed 0:
 * 0.875-0.897 of 0.94 Gbit/s against 0.978-1.000 for the other). A smaller
 * window now tolerates a little more queue before it holds, so it grows
 * while the larger one yields: the windows' gap closes whatever the maps.
 * plait-sim, two colliding pairs over map seeds 4-9 and seeds 1-2, the
 * worse pair's Gbit/s: 0.897-0.934 (median 0.917) -> 0.922-0.937 (median
 * 0.931); three pairs, scaled to two: 0.845-0.930 (0.899) -> 0.901-0.934
 * (0.920). A fixed 1.3 ms target for all did not help (median 0.922 on
 * map seeds 0-3), nor did a longer sample ring. A window above
 * CUBIC_FAIR_WINDOW (one connection alone on 2 x 1 Gbit/s) keeps the
 * plain target: lowering it there cost 1% loss 1-3% of its goodput. */
#define CUBIC_FAIR_WINDOW 400000.0   /* bytes: the two pairs' windows are 200-300 KB */
#define CUBIC_FAIR_MAX    1.5
static uint64_t cubic_queue_target(const pp_conn_t *c)
{
    double f = sqrt(CUBIC_FAIR_WINDOW / c->cc.cwnd);
    if (f < 1)
        f = 1;
    if (f > CUBIC_FAIR_MAX)
        f = CUBIC_FAIR_MAX;
    return (uint64_t)(PP_QUEUE_TARGET_NS * f);
}

/* The least of the latest PP_RTT_RING RTT samples when even it queues
 * more than the target, else 0: every recent packet met a queue, on
 * whichever path it took. The least of a fixed number of samples, not the
 * least queued path: a minimum over paths is taken over as many values as
 * the connection has paths acknowledged lately, so a connection with a
 * large window (packets on every path) nearly always found one path in a
 * momentary dip and never held, while one with a small window, on a few
 * paths, held and yielded on: the small one yielded down to a chunk (two
 * colliding pairs in plait-sim, streaming: 0.10-0.74 of a fair share for
 * the worse pair over 8 seeds; with the samples 0.81-0.98). On the issue-4
 * bed (16-core machine, four calls, 23 interleaved rounds, udp-pairs
 * streaming) the worse pair read 0.80-0.92 Gbit/s (median 0.883) with
 * paths, 0.80-0.92 (median 0.902) with samples; with pairs that pause at
 * every window end (udp-pairs -m window) the totals were 1.59-1.78 against
 * 1.64-1.84 (10 runs each): the smaller standing queue carries less across
 * the other pair's pause. A slow path's queue (1 Gbit/s + 100 Mbit/s)
 * still does not hold the window as long as one in PP_RTT_RING packets
 * goes the fast way. */
static uint64_t cubic_standing_queue(const pp_conn_t *c)
{
    uint64_t q = pp_recent_min_rtt(c);
    return q && c->min_rtt_ns && q > c->min_rtt_ns + cubic_queue_target(c) ? q : 0;
}

/* Holding alone keeps whatever share of a shared bottleneck each
 * connection grabbed (nothing overflows, so no loss ever evens them out:
 * two colliding pairs split 2 x 1 Gbit/s 0.78 : 1.2). While holding, the
 * window gives up CUBIC_QUEUE_YIELD of itself once per queued RTT, more
 * bytes for a larger window, so shares converge; the queue, kept near
 * the target by the hold, keeps the links busy meanwhile. How fast they
 * converge is set by the yield: the gap between two windows shrinks by
 * it at each yield. With 3% the colliding pairs' 4 s runs on the issue-4
 * bed still ended 0.82-0.93 Gbit/s for the worse pair (their 12 s runs
 * 0.90-0.93: the split of a short run was the start's, not yet evened
 * out); with 6%, in the same calls (two, 15 interleaved runs each), 0.89-0.93
 * (median 0.910 against 0.897), the bed's other rows unchanged (1% loss 97%
 * of lossless, 1 Gbit/s + 100 Mbit/s 94% of 1.1). The queue stays above
 * the target through a yield: at 1 Gbit/s a 1 ms queue is 125 KB, 6% of
 * the held window 15-25 KB. */
#define CUBIC_QUEUE_YIELD 0.06

static void cubic_queue_yield(pp_conn_t *c, uint64_t now, uint64_t q)
{
    pp_ccstate_t *s = &c->cc;
    if (now - s->last_dec_ns <= q)
        return;
    s->cwnd = clampw(c, s->cwnd * (1 - CUBIC_QUEUE_YIELD));
    s->ssthresh = s->cwnd;   /* no slow start back up once the queue drains */
    s->last_dec_ns = now;
}

/* Near a standing queue the window grows one chunk per RTT, and CUBIC's
 * curve resumes only after CUBIC_NEAR_RTTS smoothed RTTs without one.
 * Why: after a hold the curve (t in ms, and t starts one queued RTT in)
 * sets a target chunks above the window within an RTT or two, and the
 * window follows it per ACKed byte: a growth of the same order as the
 * window, so each connection kept its share between holds, while the
 * yields take the same share of each. Equal additive steps against equal
 * shares yielded is AIMD: the shares converge. Far from any queue (a
 * link freed, the first probe) the curve's fast growth still applies.
 * plait-sim, two colliding pairs, 20 seeds: see pwin_select (lb.c); the
 * single-connection scenarios moved by under 1%. On the issue-4 bed
 * (16-core machine, PLAIT_STATS, 6 runs each) the colliding pairs went
 * from a loss regime to a held one: timeout retransmissions 2200-3500 ->
 * 56-195 per connection in 4 s, loss events 55-77 -> 8-14, the window
 * 0.3-11 MB -> 0.25-0.46 MB, the sender waiting on pwin's path windows
 * 1.1-1.7 s -> under 10 ms; the worse pair's share did not move (median
 * 0.90 either way), the total rose (1.81-1.85 -> 1.84-1.85 Gbit/s). */
#define CUBIC_NEAR_RTTS 8

static int cubic_near_queue(const pp_conn_t *c, uint64_t now)
{
    const pp_ccstate_t *s = &c->cc;
    return s->held_ns && now - s->held_ns < CUBIC_NEAR_RTTS * c->srtt_ns;
}

static void cubic_on_ack(pp_conn_t *c, const pp_ack_info_t *a)
{
    pp_ccstate_t *s = &c->cc;
    double chunk = c->cfg.chunk, t, target;
    uint64_t q;
    if (!a->acked)
        return;
    if ((q = cubic_standing_queue(c)) != 0) {
        if (s->cwnd < s->ssthresh)
            s->ssthresh = s->cwnd;   /* leave slow start: the pipe is full */
        s->epoch_ns = 0;             /* the curve restarts from here (K = 0), once far */
        s->held_ns = a->now;
        cubic_queue_yield(c, a->now, q);
        return;
    }
    if (s->cwnd < s->ssthresh) {
        s->cwnd = clampw(c, s->cwnd + a->acked);
        return;
    }
    if (cubic_near_queue(c, a->now)) {
        s->cwnd = clampw(c, s->cwnd + chunk * a->acked / s->cwnd);
        s->epoch_ns = 0;
        return;
    }
    if (!s->epoch_ns) {
        s->epoch_ns = a->now;
        s->wmax = s->cwnd;
        s->k = 0;
        s->w_est = s->cwnd;
    }
    t = (double)(a->now - s->epoch_ns) * 1e-6 + (double)c->srtt_ns * 1e-6;
    target = (CUBIC_C * pow(t - s->k, 3) * chunk) + s->wmax;
    s->w_est += 3 * (1 - CUBIC_BETA) / (1 + CUBIC_BETA) * a->acked / s->cwnd * chunk;
    if (target < s->w_est)
        target = s->w_est;
    if (target > s->cwnd)
        s->cwnd += (target - s->cwnd) / s->cwnd * a->acked;
    s->cwnd = clampw(c, s->cwnd);
}

static void cubic_on_loss(pp_conn_t *c, int timeout, uint64_t now)
{
    pp_ccstate_t *s = &c->cc;
    (void)timeout;
    s->wmax = s->cwnd;
    s->cwnd = clampw(c, s->cwnd * CUBIC_BETA);
    s->ssthresh = s->cwnd;
    s->w_est = s->cwnd;
    s->epoch_ns = now;
    s->k = cbrt(s->wmax / c->cfg.chunk * (1 - CUBIC_BETA) / CUBIC_C);
}

const pp_cc_ops_t pp_cc_cubic = {
    .name = "cubic", .init = win_init, .chunk_size = cc_chunk, .pacing_ns = cc_no_pacing,
    .can_send = win_can_send, .allow_retx = win_allow_retx, .on_ack = cubic_on_ack,
    .on_loss = cubic_on_loss,
};

/* ------------------------------------------------------------------ Swift */

#define SWIFT_BETA    0.8
#define SWIFT_MAX_MDF 0.5

/* Base RTT plus headroom: half the base, at least 25 us, and at least two
 * chunks' time at the delivery rate (a chunk leaves as one burst: its last
 * packets wait behind its first at the bottleneck, 262 us for 32 KB at
 * 1 Gbit/s, so a target under that read every chunk as a queue). */
static uint64_t swift_target(const pp_conn_t *c)
{
    uint64_t base = c->min_rtt_ns ? c->min_rtt_ns : 20000, head = base / 2;
    if (c->rate_Bps > 0) {
        double burst = 2e9 * c->cfg.chunk / c->rate_Bps;
        if (burst > (double)head)
            head = burst > 1e9 ? 1000000000u : (uint64_t)burst;
    }
    return base + (head < 25000 ? 25000 : head);
}

/* The delay an RTT sample (or the smoothed RTT) stands for: itself, or the
 * least queued path's RTT when that is lower. One connection window spans
 * every path; a slow path's queue (the load balancer's to avoid, lb.c)
 * must not shrink what the fast paths may carry: 1 Gbit/s + 100 Mbit/s in
 * plait-sim went from 0.54 to 0.91-0.97 Gbit/s over seeds 1-4; at 1% loss
 * 1.75 -> 1.79-1.84). */
static uint64_t swift_delay(const pp_conn_t *c, uint64_t rtt, uint64_t now)
{
    uint64_t q = pp_least_qrtt(c, now);
    return q && q < rtt ? q : rtt;
}

static void swift_on_ack(pp_conn_t *c, const pp_ack_info_t *a)
{
    pp_ccstate_t *s = &c->cc;
    uint64_t target = swift_target(c), rtt = a->rtt_ns ? swift_delay(c, a->rtt_ns, a->now) : 0;
    if (!rtt || rtt < target) {
        s->cwnd += (double)a->acked / s->cwnd * c->cfg.chunk;
    } else if (a->now - s->last_dec_ns >= c->srtt_ns) {
        double f = 1 - SWIFT_BETA * (double)(rtt - target) / (double)rtt;
        s->cwnd *= f < 1 - SWIFT_MAX_MDF ? 1 - SWIFT_MAX_MDF : f;
        s->last_dec_ns = a->now;
    }
    s->cwnd = clampw(c, s->cwnd);
}

/* A loss cuts the window (at most once per RTT) only where the delay shows
 * a queue: a delay-based window that also halves on every random loss sank
 * to one chunk at 1% loss and stayed there, where a large duplicate
 * threshold leaves timeouts to find every loss (plait-sim, 2 x 1 Gbit/s:
 * 0.64 Gbit/s at 1% loss, 0.54 at 5%, against 1.6 for the other
 * policies). */
static void swift_on_loss(pp_conn_t *c, int timeout, uint64_t now)
{
    pp_ccstate_t *s = &c->cc;
    uint64_t rtt = swift_delay(c, c->srtt_ns, now);
    (void)timeout;
    if (rtt && rtt < swift_target(c))
        return;
    if (now - s->last_dec_ns >= c->srtt_ns) {
        s->cwnd = clampw(c, s->cwnd * (1 - SWIFT_MAX_MDF));
        s->last_dec_ns = now;
    }
}

const pp_cc_ops_t pp_cc_swift = {
    .name = "swift", .init = win_init, .chunk_size = cc_chunk, .pacing_ns = cc_no_pacing,
    .can_send = win_can_send, .allow_retx = win_allow_retx, .on_ack = swift_on_ack,
    .on_loss = swift_on_loss,
};

/* ---------------------------------------------- delay gradient, token pool */

#define DG_BETA 0.5

static void dg_init(pp_conn_t *c)
{
    win_init(c);
    c->cc.tokens = c->cc.cwnd;
}

static int dg_can_send(pp_conn_t *c, uint32_t bytes) { return c->cc.tokens >= bytes; }
static int dg_allow_retx(pp_conn_t *c, uint32_t bytes) { (void)bytes; return c->inflight == 0 || c->cc.tokens > 0; }
static void dg_on_sent(pp_conn_t *c, uint32_t bytes) { c->cc.tokens -= bytes; }
static void dg_on_unsent(pp_conn_t *c, uint32_t bytes) { c->cc.tokens += bytes; }

static void dg_on_ack(pp_conn_t *c, const pp_ack_info_t *a)
{
    pp_ccstate_t *s = &c->cc;
    double gain = 1, room;
    if (a->rtt_ns && c->min_rtt_ns) {
        double rtt = (double)a->rtt_ns;
        if (s->prev_rtt > 0)
            s->grad = 0.875 * s->grad + 0.125 * (rtt - s->prev_rtt) / (double)c->min_rtt_ns;
        s->prev_rtt = rtt;
    }
    if (s->grad <= 0 || (a->rtt_ns && a->rtt_ns < c->min_rtt_ns + c->min_rtt_ns / 4))
        gain = 1 + (double)c->cfg.chunk / (s->tokens + (double)a->inflight + c->cfg.chunk);
    else
        gain = 1 - DG_BETA * (s->grad > 1 ? 1 : s->grad);
    s->tokens += a->acked * gain;
    room = max_window(c) - (double)a->inflight;
    if (s->tokens > room)
        s->tokens = room;
    s->cwnd = clampw(c, s->tokens + (double)a->inflight);
}

static void dg_on_loss(pp_conn_t *c, int timeout, uint64_t now)
{
    pp_ccstate_t *s = &c->cc;
    (void)timeout;
    (void)now;
    s->tokens -= 0.3 * ((double)c->inflight + (s->tokens > 0 ? s->tokens : 0));
    if (s->tokens < -(double)c->inflight)
        s->tokens = -(double)c->inflight;
}

const pp_cc_ops_t pp_cc_dgpool = {
    .name = "dgpool", .init = dg_init, .chunk_size = cc_chunk, .pacing_ns = cc_no_pacing,
    .can_send = dg_can_send, .allow_retx = dg_allow_retx, .on_sent = dg_on_sent,
    .on_unsent = dg_on_unsent,
    .on_ack = dg_on_ack, .on_loss = dg_on_loss,
};

/* ------------------------------------------------------------ EQDS credits */

static void eqds_init(pp_conn_t *c)
{
    win_init(c);
    c->cc.credit = c->cc.cwnd;     /* the speculative first window */
}

static uint64_t eqds_pacing(pp_conn_t *c, uint32_t bytes)
{
    return c->cfg.line_rate_bps ? (uint64_t)bytes * 8 * 1000000000ull / c->cfg.line_rate_bps : 0;
}

static int eqds_can_send(pp_conn_t *c, uint32_t bytes) { return c->cc.credit >= bytes; }
/* Retransmissions replace bytes already credited: no new credit needed. */
static int eqds_allow_retx(pp_conn_t *c, uint32_t bytes) { (void)c; (void)bytes; return 1; }
static void eqds_on_sent(pp_conn_t *c, uint32_t bytes) { c->cc.credit -= bytes; }
static void eqds_on_unsent(pp_conn_t *c, uint32_t bytes) { c->cc.credit += bytes; }
static void eqds_on_credit(pp_conn_t *c, uint32_t bytes)
{
    c->cc.credit += bytes;
    if (c->cc.credit > max_window(c))
        c->cc.credit = max_window(c);
}

/* Receiver: pull one byte for every byte that arrived. */
static void eqds_on_rx(pp_conn_t *c, uint32_t bytes, uint64_t now)
{
    (void)now;
    c->credit_grant += bytes;
}

static void eqds_on_ack(pp_conn_t *c, const pp_ack_info_t *a)
{
    c->cc.cwnd = (double)a->inflight + (c->cc.credit > 0 ? c->cc.credit : 0);
}

static void eqds_on_loss(pp_conn_t *c, int timeout, uint64_t now)
{
    (void)c;
    (void)timeout;
    (void)now;   /* the receiver paces by granting; losses need no reaction here */
}

const pp_cc_ops_t pp_cc_eqds = {
    .name = "eqds", .init = eqds_init, .chunk_size = cc_chunk, .pacing_ns = eqds_pacing,
    .can_send = eqds_can_send, .allow_retx = eqds_allow_retx, .on_sent = eqds_on_sent,
    .on_unsent = eqds_on_unsent,
    .on_rx_chunk = eqds_on_rx, .on_rx_retx = eqds_on_rx, .on_ack = eqds_on_ack,
    .on_loss = eqds_on_loss, .on_credit = eqds_on_credit,
};

const pp_cc_ops_t *pp_cc_find(const char *name)
{
    static const pp_cc_ops_t *const all[] = {&pp_cc_cubic, &pp_cc_swift, &pp_cc_dgpool, &pp_cc_eqds};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!strcmp(all[i]->name, name))
            return all[i];
    return NULL;
}
