/*
 * lb.c -- load-balancing policies: which of the connection's paths (UDP port
 * pairs, so ECMP hashes them apart) the next chunk takes.
 *
 *  spray    : uniformly random path per chunk, skipping paths that lost a
 *             packet in the last few RTTs.
 *  p2c      : power of two choices: sample two paths, take the one with the
 *             lower smoothed RTT (an unmeasured path wins, so all get probed);
 *             no per-path limit.
 *  ackclock : ACK-clocked: an ACK that came back fast (RTT near the
 *             connection's minimum) clocks out two more chunks on its path,
 *             a moderately slow one one chunk, a slow one none; with nothing
 *             clocked, a random path. Needs no per-path window.
 *  pwin     : per-path windows (uncoupled, MPTCP / UEC style): each path has
 *             its own Reno-like window (slow start, one MTU per window per
 *             RTT, halved on a loss on that path, at most once per that
 *             path's RTT, and only when that path's packets see a queue or
 *             stopped coming back: an isolated random loss on a queue-free
 *             path cuts nothing); a chunk goes to the cheapest (p2c's cost)
 *             of four random paths with room, and waits when none has. A loss on one
 *             path shrinks that path only, so a slow or lossy path takes its
 *             own share and no more, without slowing the others; the CC's
 *             connection window stays as a cap (its loss reaction is off).
 *             A path whose packets queue PP_QUEUE_SPREAD_NS longer than
 *             those of the least queued path shrinks its window too (by
 *             delay, as Swift does, but against that path rather than a
 *             fixed target): the windows, not the cost of stale RTTs, then
 *             steer traffic from a loaded link to an idle one.
 */
#include "transport/proto/pp.h"

static int lb_random(pp_conn_t *c, uint64_t now)
{
    int n = (int)c->cfg.npaths, p = 0;
    for (int tries = 0; tries < 4; tries++) {
        p = (int)(pp_rand(c) % (uint64_t)n);
        if (c->paths[p].penalty_until <= now && pp_path_free(c, p) && pp_path_live(c, p, now))
            break;
    }
    return p;
}

const pp_lb_ops_t pp_lb_spray = {.name = "spray", .select_path = lb_random};

/* A path's expected send-to-ACK time: its queue-inclusive RTT (send to ACK
 * of its recent packets); a path with no sample yet counts the
 * connection's minimum, so it gets tried. */
static uint64_t path_delay(const pp_conn_t *c, int p)
{
    const pp_path_t *pa = &c->paths[p];
    return pa->qrtt_ns ? pa->qrtt_ns : pa->st.srtt_ns ? pa->st.srtt_ns : c->min_rtt_ns;
}

/* Expected delay of a new chunk on path p: its delay, scaled up by what is
 * already in flight on it, so a slow or congested path looks as bad as it
 * is; recently lossy paths are avoided. */
static uint64_t path_cost(const pp_conn_t *c, int p, uint64_t now)
{
    const pp_path_t *pp = &c->paths[p];
    uint64_t rtt = path_delay(c, p);
    uint64_t cost = (rtt ? rtt : 1) * (1 + pp->inflight / (c->cfg.chunk ? c->cfg.chunk : 1));
    if (pp->penalty_until > now || !pp_path_free(c, p) || !pp_path_live(c, p, now))
        cost += 1000000000ull;
    return cost;
}

/* Power of two choices, with up to two more draws when the better of the
 * two still costs over four times the cheapest path seen lately: with half
 * the paths slow, plain p2c would still put a quarter of the chunks on them. */
static int p2c_select(pp_conn_t *c, uint64_t now)
{
    int n = (int)c->cfg.npaths, best = 0;
    uint64_t best_cost = UINT64_MAX, floor = c->min_rtt_ns ? c->min_rtt_ns : 1;
    for (int draw = 0; draw < 4; draw++) {
        int p = (int)(pp_rand(c) % (uint64_t)n);
        uint64_t cost = path_cost(c, p, now);
        if (cost < best_cost) {
            best = p;
            best_cost = cost;
        }
        if (draw >= 1 && best_cost <= 4 * floor + floor / 2)
            break;
    }
    return best;
}

const pp_lb_ops_t pp_lb_p2c = {.name = "p2c", .select_path = p2c_select};

/* ------------------------------------------------------- per-path windows */

/* A window below one chunk still carries chunks, one at a time, spaced so
 * that the path averages its window per RTT: a path that can only take a
 * fraction of a chunk per RTT (100 Mbit/s beside 1 Gbit/s, 32 KB chunks)
 * then neither overflows its queue nor starves. */
static int pwin_room(const pp_conn_t *c, int p, uint64_t now)
{
    const pp_path_t *pa = &c->paths[p];
    if (!pp_path_free(c, p))
        return 0;   /* another thread is sending its packets */
    if (pa->down)
        return pp_path_live(c, p, now);   /* its probe (conn.c, path quarantine) */
    if (pa->cwnd >= (double)c->cfg.chunk)
        return (double)pa->inflight + c->cfg.chunk <= pa->cwnd;
    return pa->inflight == 0 && now >= pa->idle_until;
}

/* A path's first window, and a revived one's (path_up): it starts over. */
static void pwin_path_up(pp_conn_t *c, int p)
{
    pp_path_t *pa = &c->paths[p];
    pa->cwnd = 2.0 * c->cfg.chunk;
    pa->ssthresh = (double)PP_WIN * c->cfg.mtu;
    pa->cut_ns = 0;
    pa->idle_until = 0;
}

static void pwin_init(pp_conn_t *c)
{
    for (uint32_t p = 0; p < c->cfg.npaths; p++)
        pwin_path_up(c, (int)p);
}

/* Earliest completion at the tail: a chunk on a path slower than the
 * fastest by more than the connection needs to send everything still
 * unsent arrives after all of it could have gone the fast way. Beside a
 * 1 Gbit/s path, a 100 Mbit/s path's 25 ms queue made every window of a
 * bandwidth test wait for its last chunks there (in the simulator the
 * sender then sat with nothing to send 4% of the time). Such a path is
 * skipped, and the chunk waits for room on a fast one. Only a path at
 * least twice as slow as the fastest counts as slow: among paths alike,
 * skipping the more queued ones at the tail cost 1% loss 3-4% on the
 * namespace bed. Mid-stream, with megabytes unsent, the rule never bites. */
static int pwin_too_late(const pp_conn_t *c, int p, uint64_t fastest)
{
    uint64_t d = path_delay(c, p);
    if (!fastest || c->rate_Bps <= 0 || d <= 2 * fastest)
        return 0;   /* paths alike (even apart by their queues): spread the tail over all */
    return (double)(d - fastest) > (double)c->tx_unsent * 1e9 / c->rate_Bps;
}

/* The cheapest of PWIN_CHOICES random paths with room (and not too late:
 * above), from up to four times as many draws, else the cheapest of all with
 * room; -1 when none has. A path on a sub-chunk window that takes this
 * chunk rests for chunk / cwnd of its RTTs from now.
 * Why four choices, not two: candidates are drawn by path, and ECMP gives
 * the links unequal shares of a connection's paths. One that got 21 of 32
 * on one link drew both candidates there 43% of the time and sent the chunk
 * there, however queued that link; a pair beside it with 17 of 32 put less
 * on the queued link and got the larger share. With four choices that is
 * 19%. plait-sim, two colliding pairs, 20 seeds, each seed its own
 * path-to-link hash: the worse pair's share of the fair 0.938 Gbit/s rose
 * from 0.72-0.93 (median 0.87) to 0.84-0.93 (median 0.91) together with
 * CUBIC's additive growth near a hold (cc.c), and did not move with either
 * alone (four choices: median 0.86; additive growth: 0.90). The bed's own
 * hash (the kernel's, of the ports) gained no fairness from the two
 * together, but far fewer losses (cc.c). */
#define PWIN_CHOICES 4
static int pwin_select(pp_conn_t *c, uint64_t now)
{
    int n = (int)c->cfg.npaths, best = -1, found = 0;
    uint64_t best_cost = UINT64_MAX, fastest = pp_least_qrtt(c, now);
    for (int draw = 0; draw < 4 * PWIN_CHOICES && found < PWIN_CHOICES; draw++) {
        int p = (int)(pp_rand(c) % (uint64_t)n);
        uint64_t cost;
        if (!pwin_room(c, p, now) || pwin_too_late(c, p, fastest))
            continue;
        found++;
        cost = path_cost(c, p, now);
        if (cost < best_cost) {
            best = p;
            best_cost = cost;
        }
    }
    for (int p = 0; !found && p < n; p++)
        if (pwin_room(c, p, now) && !pwin_too_late(c, p, fastest) &&
            path_cost(c, p, now) < best_cost) {
            best = p;
            best_cost = path_cost(c, p, now);
        }
    if (best >= 0 && c->paths[best].cwnd < (double)c->cfg.chunk) {
        pp_path_t *pa = &c->paths[best];
        uint64_t rtt = pa->qrtt_ns ? pa->qrtt_ns : c->srtt_ns;
        pa->idle_until = now + (uint64_t)((double)rtt * (double)c->cfg.chunk / pa->cwnd);
    }
    return best;
}

/* Chunks the next one on path may span: as many as the connection
 * delivers in PP_CHUNK_TIME_NS, at most PWIN_SPAN_MAX and what half
 * of the path's free window holds. Spraying stays fine-grained where it
 * balances load (2 x 1 Gbit/s: 32 KB chunks; 256 KB ones lost 6-10% of
 * the aggregate), and a fast path (a 2 GB/s bridge) gets fewer, larger
 * chunks, so fewer system calls. */
#define PWIN_SPAN_MAX 8
static uint32_t pwin_chunk_span(const pp_conn_t *c, int path)
{
    const pp_path_t *pa = &c->paths[path];
    double room = (pa->cwnd - (double)pa->inflight) / (2.0 * c->cfg.chunk);
    double fast = c->rate_Bps * PP_CHUNK_TIME_NS * 1e-9 / c->cfg.chunk;
    double span = room < fast ? room : fast;
    if (span < 1)
        return 1;
    return span > PWIN_SPAN_MAX ? PWIN_SPAN_MAX : (uint32_t)span;
}

/* The least queued path's RTT, scanned once per ACK (every packet an ACK
 * covers comes here with the same clock). */
static uint64_t pwin_least_qrtt(pp_conn_t *c)
{
    if (c->least_qrtt_at != c->now) {
        c->least_qrtt_at = c->now;
        c->least_qrtt_ns = pp_least_qrtt(c, c->now);
    }
    return c->least_qrtt_ns;
}

/* A per-link signal, free of the hosts' own delay. Every path of a peer
 * pair shares the hosts (their sockets, threads, the receiver's backlog),
 * so what tells one path's queue from another's is the difference of
 * their RTTs, not either RTT against a base: on the 16-core namespace bed
 * the host part alone was 1-2 ms, as much as the links' queues. A path
 * queueing over PP_QUEUE_SPREAD_NS longer than the least queued one cuts
 * its window in proportion to the excess (at most by half, once per its
 * RTT, never below one chunk: below that only losses cut), and the chunks
 * it no longer takes go to paths with room, on the less loaded link. The
 * LB's cost alone could not do this: its RTTs are an RTT old, and when the
 * hash gives one link 22 of 32 paths, two random candidates are both
 * there half the time. 2 x 1 Gbit/s on the 16-core namespace bed, MB/s
 * (interleaved runs, three machines): without 220.7-226.9, 212.6-225.1,
 * 218.8-226.8; with 222.0-233.5, 228.7-230.3, 231.1-232.4 (the header
 * bound is 234.5). A spread of 500 us did as well on one machine and cut
 * some runs to 209 on another; requiring twice the path's RTT deviation
 * on top changed nothing measurable. Two colliding pairs: unchanged.
 * plait-sim: 1 Gbit/s + 100 Mbit/s 94.7 -> 96.2% of the header bound, 1%
 * loss 96.2 -> 97.9%, the other scenarios within 0.4%. */
static int pwin_queue_cut(pp_conn_t *c, pp_path_t *pa)
{
    uint64_t least, excess, now = c->now;
    double f;
    if (!pa->qrtt_ns || pa->cwnd <= (double)c->cfg.chunk || now - pa->cut_ns < pa->qrtt_ns)
        return 0;
    least = pwin_least_qrtt(c);
    if (!least || pa->qrtt_ns <= least + PP_QUEUE_SPREAD_NS)
        return 0;
    excess = pa->qrtt_ns - least - PP_QUEUE_SPREAD_NS;
    f = 1 - 0.8 * (double)excess / (double)pa->qrtt_ns;
    pa->cwnd *= f < 0.5 ? 0.5 : f;
    if (pa->cwnd < (double)c->cfg.chunk)
        pa->cwnd = c->cfg.chunk;
    pa->ssthresh = pa->cwnd;
    pa->cut_ns = now;
    return 1;
}

static void pwin_on_acked(pp_conn_t *c, int path, uint32_t bytes)
{
    pp_path_t *pa = &c->paths[path];
    double maxw = (double)PP_WIN * c->cfg.mtu;
    if (pwin_queue_cut(c, pa))
        return;
    if (pa->cwnd < pa->ssthresh)
        pa->cwnd += bytes;
    else
        pa->cwnd += (double)bytes * c->cfg.mtu / pa->cwnd;
    if (pa->cwnd > maxw)
        pa->cwnd = maxw;
}

/* A loss on a path whose packets see no more than the standing queue the
 * CC keeps is a random loss, not congestion, and the path's window stays:
 * its send-to-ACK time is within twice PP_QUEUE_TARGET_NS (or half its base
 * RTT) of that base, and that time is fresh (a packet sent within about two
 * of its RTTs was acknowledged). A path whose queue has built up beyond it
 * (a full tbf, a slow link), or whose packets all stopped coming back
 * (every one dropped: its delay estimate is stale), is cut. Measured on the
 * 16-core namespace bed against 500 us: 1% loss 1.56-1.61 -> 1.66-1.68
 * Gbit/s, 2 x 1 Gbit/s 1.74-1.81 -> 1.82-1.85. */
static int pwin_congested(const pp_conn_t *c, const pp_path_t *pa, uint64_t now)
{
    uint64_t base = pa->st.min_rtt_ns ? pa->st.min_rtt_ns : c->min_rtt_ns;
    uint64_t slack = base / 2 > 2 * PP_QUEUE_TARGET_NS ? base / 2 : 2 * PP_QUEUE_TARGET_NS;
    if (!base || !pa->qrtt_ns || pa->qrtt_ns > base + slack)
        return 1;
    return !pp_qrtt_fresh(pa, now, slack);
}

static void pwin_on_loss(pp_conn_t *c, int path)
{
    pp_path_t *pa = &c->paths[path];
    uint64_t now = c->now, rtt = pa->qrtt_ns ? pa->qrtt_ns : c->srtt_ns;
    if (pa->cut_ns && now - pa->cut_ns < rtt)
        return;   /* one cut per loss episode of this path */
    if (!pwin_congested(c, pa, now))
        return;
    pa->cut_ns = now;
    pa->cwnd /= 2;
    if (pa->cwnd < c->cfg.mtu)
        pa->cwnd = c->cfg.mtu;
    pa->ssthresh = pa->cwnd;
}

const pp_lb_ops_t pp_lb_pwin = {.name = "pwin", .select_path = pwin_select, .init = pwin_init,
                                .chunk_span = pwin_chunk_span,
                                .on_acked = pwin_on_acked, .on_loss = pwin_on_loss,
                                .path_up = pwin_path_up, .path_loss = 1};


#define CLOCK_RING (sizeof(((pp_conn_t *)0)->clock_ring) / sizeof(uint16_t))

static int clock_select(pp_conn_t *c, uint64_t now)
{
    while (c->clock_head != c->clock_tail) {
        int p = c->clock_ring[c->clock_tail++ % CLOCK_RING];
        if (pp_path_free(c, p) && !c->paths[p].down)
            return p;
    }
    return lb_random(c, now);
}

static void clock_push(pp_conn_t *c, int path)
{
    if (c->clock_head - c->clock_tail < CLOCK_RING)
        c->clock_ring[c->clock_head++ % CLOCK_RING] = (uint16_t)path;
}

static void clock_on_ack(pp_conn_t *c, int path, uint64_t rtt_ns)
{
    uint64_t base = c->min_rtt_ns ? c->min_rtt_ns : rtt_ns;
    if (rtt_ns <= base + base / 4) {
        clock_push(c, path);
        clock_push(c, path);
    } else if (rtt_ns <= 2 * base) {
        clock_push(c, path);
    }
}

const pp_lb_ops_t pp_lb_ackclock = {.name = "ackclock", .select_path = clock_select,
                                    .on_ack = clock_on_ack};

const pp_lb_ops_t *pp_lb_find(const char *name)
{
    static const pp_lb_ops_t *const all[] = {&pp_lb_spray, &pp_lb_p2c, &pp_lb_ackclock,
                                             &pp_lb_pwin};
    for (unsigned i = 0; i < sizeof all / sizeof all[0]; i++) {
        const char *a = all[i]->name, *b = name;
        while (*a && *a == *b) a++, b++;
        if (!*a && !*b)
            return all[i];
    }
    return NULL;
}
