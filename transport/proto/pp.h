/*
 * pp.h -- plait's software reliable multipath protocol, pure logic.
 *
 * No syscalls, no clock reads, no sockets: time and packets go in, packets and
 * decisions come out, so every datapath (UDP today, verbs later) and the
 * simulator run the same code, and unit tests script it packet by packet.
 *
 * One pp_conn_t is one ordered pair (me -> peer and peer -> me): it carries
 * frames ("messages": a ptl header followed by a payload) reliably and in
 * order. A message is cut into chunks (the unit of every decision: congestion
 * window, pacing, path choice) and chunks into packets that fit the path MTU.
 * Every packet has a packet sequence number (PSN); the receiver returns a
 * cumulative ACK plus a SACK bitmap of PP_WIN packets, places each payload
 * straight at its offset in the message's buffer, and hands complete messages
 * up in message order. Loss is found by a large duplicate count (spraying
 * reorders) or by a retransmission timeout from the smoothed RTT; a packet
 * unacknowledged for cfg.give_up_ns fails the connection.
 *
 * Congestion control (pp_cc_ops_t) and load balancing (pp_lb_ops_t) are hook
 * tables chosen at run time. Wire format is host byte order (one job runs on
 * one endianness); every field is checked on receipt and anything foreign,
 * stale, truncated or out of bounds is dropped and counted by reason.
 */
#ifndef PLAIT_TRANSPORT_PP_H
#define PLAIT_TRANSPORT_PP_H

#include <stddef.h>
#include <stdint.h>

#define PP_MAGIC     0x3250u         /* bytes "P2" (little-endian host): plait, wire version 2;
                                      * version 1 ("PUD1", 72-byte data header) reads as
                                      * not-plait, and so does a byte-swapped host's */
#define PP_WIN       8192            /* SACK bitmap / receive window, packets: covers
                                      * 2 x 1 Gbit/s with 20 ms of queue on a path at
                                      * 1500-byte MTU (1024 capped that at ~0.6 Gbit/s),
                                      * and a slow path's loss found after its 20 ms
                                      * queue while the fast path keeps sending (4096
                                      * stalled the sender there); the ACK (1 KB of
                                      * bitmap) still fits a 1500-byte datagram */
#define PP_MAX_PATHS 256
#define PP_RTT_RING  64    /* RTT samples pp_recent_min_rtt looks at */
#define PP_QUEUE_TARGET_NS 1000000   /* the standing queue the window may build (cubic
                                      * holds above it: cc.c); a loss on a path queueing
                                      * less than twice this is taken as random, not
                                      * congestion (pwin: lb.c) */
#define PP_RTO_FLOOR_HOLD_NS 1000000000ull   /* a raised RTO floor halves after this
                                               * long without spurious timeouts */
#define PP_RUNT_TAIL(c) ((c)->cfg.chunk / 4)   /* a message's last bytes shorter than this
                                                 * join the chunk before them (chunk_start) */
#define PP_REO_QUIET 16   /* loss events without needless retransmissions that take the
                           * fast-retransmit reordering window back to its least */
#define PP_RATE_WINDOW_NS  500000     /* delivery-rate sample length (pp_conn_t.rate_Bps) */
#define PP_QUEUE_SPREAD_NS PP_QUEUE_TARGET_NS   /* pwin: a path queueing this much more
                                      * than the least queued one slows down (lb.c) */
#define PP_CHUNK_TIME_NS   150000     /* a chunk spanning several lasts at most this long at
                                       * the delivery rate (pwin's chunk_span: lb.c) */
#define PP_DOWN_TIMEOUTS  2          /* a path's timeouts in a row, with nothing it
                                      * carried since acknowledged: it is down (conn.c) */
#define PP_DOWN_PROBE_NS  10000000ull   /* a down path's first probe after this ... */
#define PP_DOWN_PROBE_MAX_NS 1000000000ull   /* ... doubling up to this */
#define PP_MAX_HLEN  64              /* largest ptl header inside a message */
/* Message buffers kept per connection for reuse: freed, the heap goes back
 * to the kernel and every new buffer costs a page fault per 4 KiB (a stream
 * of 32 KiB eager messages, 64 in flight, faulted 7 pages per message). */
#define PP_MSG_CACHE       64        /* buffers */
#define PP_MSG_CACHE_BYTES (8u << 20) /* ... and their bytes */
#define PP_MSG_BIG         4096      /* from this size a message buffer is cached */

enum { PP_T_DATA = 1, PP_T_ACK = 2 };
enum { PP_F_RETX = 1, PP_F_CHUNK_END = 2, PP_F_PLACED = 4, PP_F_ACK = 8, PP_F_RUN = 16 };
#define PP_F_ALL (PP_F_RETX | PP_F_CHUNK_END | PP_F_PLACED | PP_F_ACK | PP_F_RUN)   /* others:
                                                                                   * not-plait */

/*
 * Wire format, version 2. Every byte of a data packet's header is paid on
 * every 1.5 KB frame, so nothing travels that the receiver knows or can
 * derive; what remains is what the receiver cannot trust without seeing it.
 *
 *   common header (every packet), 24 bytes
 *     magic    2  protocol and version: anything else is not-plait
 *     type     1  DATA or ACK
 *     flags    1  PP_F_*; unknown bits are not-plait (room for version 3)
 *     path     2  the sender's index of the path this packet takes (an
 *                 ACK's acked packet's path is its echo_path)
 *     hlen     1  DATA: the ptl header length at the start of the message
 *                 (in the byte alignment leaves free here); else 0
 *     ack_via  1  DATA: 1 + an index of the receiver's paths on which the
 *                 sender heard from it lately, for the receiver's ACKs
 *                 (ack_path), or 0; sent only while the sender has paths
 *                 down (see "path quarantine" in conn.c). ACK: 0
 *     src      4  sending rank: which connection (the receiver is the other end)
 *     epoch    4  sender's incarnation (its address card): a restarted
 *                 rank's old packets are stale, not merged
 *     tag      8  pp_tag(job key, src, dst): SipHash-2-4 keyed with the job
 *                 key over the two ranks. Another job's packet, or one meant
 *                 for another rank (dst does not travel: it is in the tag),
 *                 mismatches but for a 2^-64 chance. Unlike the key it
 *                 replaces, the tag does not reveal the key to a listener
 *                 (the key also authenticates the tcp transport); it is not
 *                 a MAC over the packet: it guards against accidents
 *                 (strays, restarts, misrouting), not a forger on the path.
 *                 On the wire it is sealed with the header (pp_seal): the
 *                 field holds the tag XOR pp_hdr_sum of every header byte
 *                 (DATA: up to the payload; ACK: the whole packet) with
 *                 the field itself as 0, so a corrupt header (a flipped PSN,
 *                 offset or length the UDP checksum did not catch) fails
 *                 the tag check instead of being acknowledged as some other
 *                 packet; the payload is the UDP checksum's.
 *   DATA, 40 bytes: common header, then
 *     psn      4  packet sequence number (window, SACK, duplicates)
 *     msg      4  message id (consecutive, wraps)
 *     off      4  this packet's bytes start here in the message
 *     msg_len  4  whole message: ptl header + payload (first packet to arrive
 *                 sizes the buffer; later ones must agree)
 *     payload: the rest of the datagram. Its length is the datagram's, not
 *     a field: the datapath hands pp_parse / pp_rx the datagram's length,
 *     checked against the MTU and the message (UDP's length and checksum
 *     guard it on the wire; udp.c drops what the kernel truncated). No
 *     chunk number (the receiver needs none: chunks are the sender's unit)
 *     and no timestamp: RTT samples come from the sender's own send times,
 *     found by the PSN the ACK echoes.
 *   placed DATA (PP_F_PLACED), 52 bytes: the data header, then
 *     place_id   8  the region the receiver exposed (pt2pt: its request id,
 *                   a 64-bit counter: 32 bits would alias after 2^32
 *                   requests of a long job)
 *     place_off  4  where in the region the message's payload starts (pt2pt:
 *                   bytes of the receive streamed before this frame); a
 *                   frame starting 4 GiB or more into a region goes
 *                   unplaced (udp.c), copied once on receipt. The place
 *                   hook bounds-checks every write: nothing lands outside
 *                   an exposed region, whatever the offset says.
 *   unplaced DATA with PP_F_ACK, 44 bytes: the data header, then
 *     ack        4  the cumulative ACK of the other direction (everything
 *                   before it arrived, nothing after it did): a reply
 *                   carries the ACK of the request, so request-reply and
 *                   exchange patterns send no ACK packet at all. Only when
 *                   the ACK has nothing more to say (no SACK bit, no new
 *                   credit or duplicate count); never on placed packets.
 *   run (PP_F_RUN, DATA), the data header as above, then
 *     bytes      4  payload bytes of the run: packets psn, psn + 1, ... of
 *                   seg bytes each (the last may be shorter), back to back
 *                   after this header, at off, off + seg, ... of the message
 *     seg        2  payload bytes per packet (<= the receiver's cfg.mtu)
 *     rsv        2  0
 *     One header for a whole GSO datagram instead of one per segment: where
 *     the kernel hands the receiver the datagram whole (GRO; on veth and the
 *     bridge a GSO datagram is never cut up), the sender's 2-4 us per
 *     datagram of header iovecs and the receiver's per-packet parsing go.
 *     Where the path cuts it (a NIC's segmentation offload, a receiver
 *     without GRO), the segments after the first carry no header: they are
 *     dropped as not-plait, the receiver keeps the whole packets the header's
 *     segment holds and flags its ACKs (PP_F_RUN on an ACK), and the sender
 *     sends no run to it again; what was cut is resent as any loss.
 *   ACK, 48-1072 bytes: common header (hlen 0; flags 0, or PP_F_RUN: the
 *     receiver found a run cut, see above), then cum, echo_psn (the PSN
 *     of the packet that triggered the ACK), rwnd, credit, echo_path,
 *     echo_flags (that packet's flags: RETX tells which copy arrived), dups,
 *     and the SACK bitmap of PP_WIN bits up to its last 64-bit word with a
 *     bit set: PP_ACK_SHORT (48) + 8 k bytes, k = 0 (no bit set) .. PP_WIN /
 *     64; the bits after it read as 0 (not arrived).
 *
 * Byte order is the host's: one job runs on one endianness, and the layers
 * above (ptl and pt2pt headers, user data) are host order as well, so
 * converting here alone would buy nothing; a byte-swapped peer's packets
 * fail the magic check. Fields are aligned at their size (no packing).
 */
typedef struct {
    uint16_t magic;
    uint8_t  type;
    uint8_t  flags;
    uint16_t path;      /* sender's index of the path it takes */
    uint8_t  hlen;      /* DATA: ptl header length at the start of the message; else 0 */
    uint8_t  ack_via;   /* DATA: 1 + a path of the receiver's for its ACKs, or 0; ACK: 0 */
    uint32_t src;       /* sending rank: the connection is (src -> the receiver) */
    uint32_t epoch;     /* sender's incarnation, from its address card */
    uint64_t tag;       /* pp_tag(key, src, dst): foreign jobs and misrouted packets mismatch */
} pp_hdr_t;

typedef struct {
    pp_hdr_t h;
    uint32_t psn;
    uint32_t msg;       /* message id (consecutive, wraps) */
    uint32_t off;       /* this packet's bytes start here in the message */
    uint32_t msg_len;   /* whole message: ptl header + payload */
} pp_data_t;

/* After pp_data_t when PP_F_PLACED: the payload (bytes after hlen) goes to
 * the region the receiver exposed as place_id, from place_off on. 32-bit
 * words only, so it packs to 12 bytes (place_id low word first). */
typedef struct {
    uint32_t place_id[2];
    uint32_t place_off;
} pp_place_t;

typedef struct {
    pp_hdr_t h;
    uint32_t cum;       /* next PSN expected: everything before it arrived */
    uint32_t echo_psn;  /* PSN of the packet that triggered this ACK (the sender's RTT sample) */
    uint32_t rwnd;      /* bytes the receiver can still buffer */
    uint32_t credit;    /* receiver-granted bytes (EQDS), cumulative: a lost ACK loses none */
    uint16_t echo_path;
    uint8_t  echo_flags;
    uint8_t  rsv;       /* 0 */
    uint32_t dups;      /* duplicates received so far, cumulative: tells the sender its
                         * retransmissions were spurious (like D-SACK) */
    uint8_t  sack[PP_WIN / 8];   /* bit i: PSN cum + 1 + i arrived */
} pp_ack_t;

/* An ACK with no SACK bit set (everything arrived in order: the common case
 * of small messages) ends before the bitmap: 48 bytes instead of 1072 to
 * copy through both stacks and scan, on the latency path of every message. */
#define PP_ACK_SHORT offsetof(pp_ack_t, sack)

/* After the data header (and its place or piggybacked ACK) when PP_F_RUN. */
typedef struct {
    uint32_t bytes;     /* the run's payload bytes */
    uint16_t seg;       /* payload bytes per packet */
    uint16_t rsv;       /* 0 */
} pp_run_t;

#define PP_DATA_HDR     sizeof(pp_data_t)                         /* 40 */
#define PP_PLACE_LEN    sizeof(pp_place_t)                        /* 12 */
#define PP_DATA_HDR_MAX (PP_DATA_HDR + PP_PLACE_LEN)              /* 52: size cfg.mtu by this */
#define PP_ACK_LEN      sizeof(pp_ack_t)                          /* 1072 */

#define PP_PIGGY_LEN    sizeof(uint32_t)                          /* 4 */
#define PP_RUN_LEN      sizeof(pp_run_t)                          /* 8 */
#define PP_RUN_HDR_MAX  (PP_DATA_HDR_MAX + PP_RUN_LEN)            /* 60 */

/* The header length of a data packet with these flags (PP_F_ACK and
 * PP_F_PLACED never come together: a piggybacked ACK rides on unplaced
 * packets only, so PP_DATA_HDR_MAX still bounds every packet's header; a
 * run's, PP_RUN_HDR_MAX, is one per datagram). */
static inline size_t pp_data_hdr_len(unsigned flags)
{
    return PP_DATA_HDR + ((flags & PP_F_PLACED) ? PP_PLACE_LEN : 0) +
           ((flags & PP_F_ACK) ? PP_PIGGY_LEN : 0) + ((flags & PP_F_RUN) ? PP_RUN_LEN : 0);
}

/* The tag of packets from rank src to rank dst of the job with this key. */
uint64_t pp_tag(uint64_t key, uint32_t src, uint32_t dst);
/* A 64-bit sum of a packet's first len header bytes, the tag field counted
 * as 0; pp_seal writes tag XOR that sum into the field (what every packet
 * carries). Tests and fuzzers that build packets by hand seal them last. */
uint64_t pp_hdr_sum(const void *hdr, size_t len);
void pp_seal(void *hdr, size_t len, uint64_t tag);
/* The header bytes pp_seal covers in a packet of len bytes of this type
 * and flags: DATA up to its payload, an ACK whole. */
static inline size_t pp_seal_len(unsigned type, unsigned flags, size_t len)
{
    return type == PP_T_DATA ? pp_data_hdr_len(flags) : len;
}
/* The same for a packet whose common header is h. */
static inline size_t pp_sealed_len(const pp_hdr_t *h, size_t len)
{
    return pp_seal_len(h->type, h->flags, len);
}

/* Why a packet was dropped (counted per connection or per endpoint). */
enum {
    PP_DROP_TRUNC = 0,  /* shorter than its header (ACK: not its fields and whole bitmap words) */
    PP_DROP_MAGIC,      /* not this protocol / version / type; unknown flags, reserved
                         * bytes not 0 */
    PP_DROP_KEY,        /* tag mismatch: another job's packet, meant for another rank, or
                         * a corrupt header (pp_seal) */
    PP_DROP_CONN,       /* from this rank itself, or from an unknown rank */
    PP_DROP_STALE,      /* an old incarnation (epoch) of the peer */
    PP_DROP_WINDOW,     /* PSN or message id outside the receive window */
    PP_DROP_BOUNDS,     /* offset / length / sizes out of bounds */
    PP_DROP_INCONS,     /* disagrees with earlier packets of the same message */
    PP_DROP_NOBUF,      /* receiver out of buffer space (flow control) */
    PP_DROP_BADACK,     /* acknowledges what was never sent */
    PP_DROP_DUP,        /* a duplicate of a packet already received */
    PP_DROP_N
};
const char *pp_drop_name(int reason);

/* Why the sender had data queued but sent none (time is counted per reason
 * in pp_stats_t.wait_ns, from the first refused send to the next one). */
enum {
    PP_WAIT_NONE = 0,
    PP_WAIT_CWND,       /* the CC's window, tokens or credit */
    PP_WAIT_RWND,       /* the receiver's advertised buffer */
    PP_WAIT_PATH,       /* no path had room (per-path windows) */
    PP_WAIT_PACING,     /* the CC's pacing gap */
    PP_WAIT_PSN,        /* PP_WIN packets outstanding: an old hole holds the window */
    PP_WAIT_EMPTY,      /* everything queued was sent while earlier messages are still
                         * unacknowledged: the caller did not keep the queue full */
    PP_WAIT_N
};
const char *pp_wait_name(int reason);

/* ---------------------------------------------------------- statistics */

typedef struct {
    uint64_t tx_pkts, tx_bytes, retx_pkts, lost;
    uint64_t srtt_ns, min_rtt_ns, rtt_samples;
    uint64_t chunks;
    uint64_t downs;      /* times it was taken out of use as dead (pp_path_live) */
} pp_path_stats_t;

typedef struct {
    uint64_t tx_msgs, tx_bytes, tx_pkts, tx_chunks;
    uint64_t rx_msgs, rx_bytes, rx_pkts;
    uint64_t retx_fast, retx_timeout;        /* retransmissions by cause */
    uint64_t retx_fast_order;                /* ... of retx_fast: a later packet of its path
                                              * acknowledged first (detect_dup_loss; the rest
                                              * by the duplicate count) */
    uint64_t loss_events, timeouts;
    uint64_t acks_tx, acks_rx;
    uint64_t acks_piggy;                     /* ACKs that rode on data packets (in acks_tx) */
    uint64_t chunks_cut;                     /* chunks ended early: another thread held the path */
    uint64_t drops[PP_DROP_N];
    uint64_t srtt_ns, min_rtt_ns;
    uint64_t cwnd, credit;                   /* bytes, at the time of reading */
    double   rate_Bps;                       /* delivery rate, bytes/s (smoothed) */
    uint64_t tx_blocked;                     /* sends refused: buffer full */
    uint64_t rx_placed;                      /* payload bytes placed straight into exposed regions */
    uint64_t rx_discarded;                   /* placed bytes outside any exposed region: dropped */
    uint64_t rx_early;                       /* messages given their destination early (pp_msg_early) */
    uint64_t rx_runs;                        /* runs received (PP_F_RUN: one header, many packets) */
    uint64_t rx_runs_cut;                    /* ... of them cut: shorter than their header said */
    uint64_t spurious;                       /* duplicates the peer reported (our needless retx) */
    uint64_t rto_floor_ns;                   /* the RTO floor as adapted to spurious timeouts */
    uint64_t reo_ns;                         /* the fast-retransmit reordering window now */
    uint64_t tx_ref_msgs;                    /* messages sent from the caller's buffer (zero copy) */
    uint64_t wait_ns[PP_WAIT_N];             /* sender stalled with data queued, by reason */
} pp_stats_t;

/* ------------------------------------------------------ configuration */

typedef struct pp_conn pp_conn_t;
/* A placed payload's copy into the receiver's exposed region, left to the
 * datapath to make outside its connection lock (pp_rx_copy_defer). */
typedef struct {
    void       *dst;
    const void *src;
    size_t      len;
} pp_copy_t;
typedef struct pp_cc_ops pp_cc_ops_t;
typedef struct pp_lb_ops pp_lb_ops_t;

typedef struct {
    uint64_t key;
    uint32_t me, peer;
    uint32_t my_epoch, peer_epoch;
    uint32_t tx_isn, rx_isn;     /* first PSN and message id each way (both sides agree) */
    uint32_t chunk;              /* bytes per chunk (PLAIT_CHUNK_SIZE) */
    uint32_t mtu;                /* largest packet payload (datagram minus headers: size it
                                  * with PP_DATA_HDR_MAX, so placed packets fit as well) */
    uint32_t npaths;
    uint32_t dupthresh;          /* fast retransmit after this many later packets SACKed */
    uint32_t small;              /* messages below this go on one path */
    uint64_t rto_min_ns, rto_max_ns, give_up_ns;
    size_t   tx_buf_max;         /* bytes of unacknowledged messages kept (back-pressure) */
    size_t   rx_buf_max;         /* bytes of incomplete/undelivered messages buffered */
    size_t   max_msg;            /* largest message */
    uint64_t init_cwnd;          /* bytes */
    uint64_t line_rate_bps;      /* for pacing and receiver credits; 0: unknown */
    /* Receiver: where the payload of a placed message (pp_send_placed) goes:
     * the address of offset off of the region exposed as id, with *len (in:
     * bytes wanted) cut to the bytes the region still has from there; NULL
     * when off is outside any exposed region. Bytes not given room are
     * discarded and counted (a receive buffer shorter than the message).
     * NULL hook: placed packets are dropped as out of bounds. */
    void    *(*place)(void *arg, uint64_t id, uint64_t off, size_t *len);
    void     *place_arg;
    /* Receiver: unplaced messages of at least this many payload bytes may
     * be given a destination before they are complete (pp_early_next);
     * 0: never. */
    uint32_t early_min;
    uint64_t seed;
    const pp_cc_ops_t *cc;
    const pp_lb_ops_t *lb;
} pp_cfg_t;

/* Fills c with the defaults (the caller sets key, ranks, epochs, isn). */
void pp_cfg_default(pp_cfg_t *c);

/* -------------------------------------------- congestion control, LB */

typedef struct {
    uint64_t now;
    uint32_t acked;       /* bytes newly acknowledged (cumulative or SACK) */
    uint64_t rtt_ns;      /* sample from the echoed packet's send time, 0 if none */
    int      path;        /* path the sample belongs to */
    uint64_t inflight;    /* bytes in flight after this ACK */
} pp_ack_info_t;

struct pp_cc_ops {
    const char *name;
    void     (*init)(pp_conn_t *c);
    uint32_t (*chunk_size)(pp_conn_t *c);
    uint64_t (*pacing_ns)(pp_conn_t *c, uint32_t bytes);   /* gap after a chunk */
    int      (*select_path)(pp_conn_t *c, uint64_t now);   /* NULL: the LB's choice */
    int      (*can_send)(pp_conn_t *c, uint32_t bytes);    /* window / tokens / credit */
    int      (*allow_retx)(pp_conn_t *c, uint32_t bytes);
    void     (*on_sent)(pp_conn_t *c, uint32_t bytes);
    void     (*on_unsent)(pp_conn_t *c, uint32_t bytes);   /* a chunk ended short: give back */
    void     (*on_rx_chunk)(pp_conn_t *c, uint32_t bytes, uint64_t now);   /* receiver */
    void     (*on_rx_retx)(pp_conn_t *c, uint32_t bytes, uint64_t now);    /* receiver */
    void     (*on_ack)(pp_conn_t *c, const pp_ack_info_t *a);
    void     (*on_loss)(pp_conn_t *c, int timeout, uint64_t now);
    void     (*on_credit)(pp_conn_t *c, uint32_t bytes);
};

struct pp_lb_ops {
    const char *name;
    /* -1: no path may take a chunk now (per-path windows full): wait for ACKs */
    int  (*select_path)(pp_conn_t *c, uint64_t now);
    void (*on_ack)(pp_conn_t *c, int path, uint64_t rtt_ns);
    void (*on_loss)(pp_conn_t *c, int path);
    void (*init)(pp_conn_t *c);                                  /* may be NULL */
    void (*on_acked)(pp_conn_t *c, int path, uint32_t bytes);    /* path's bytes newly acked */
    void (*path_up)(pp_conn_t *c, int path);   /* a down path delivered again; may be NULL */
    /* Chunks (of cfg.chunk) the next one on path may span, >= 1; NULL: 1. */
    uint32_t (*chunk_span)(const pp_conn_t *c, int path);
    int  path_loss;   /* the LB reacts to loss per path: the CC's on_loss is not called
                       * (its window stays a cap for the connection) */
};

extern const pp_cc_ops_t pp_cc_cubic, pp_cc_swift, pp_cc_dgpool, pp_cc_eqds;
extern const pp_lb_ops_t pp_lb_spray, pp_lb_p2c, pp_lb_ackclock, pp_lb_pwin;
/* By name ("cubic", "swift", "dgpool", "eqds" / "spray", "p2c", "ackclock", "pwin"); NULL if unknown. */
const pp_cc_ops_t *pp_cc_find(const char *name);
const pp_lb_ops_t *pp_lb_find(const char *name);

/* ---------------------------------------------------- connection state */

typedef struct pp_msg {
    struct pp_msg *next, *prev;
    uint32_t id, len, hlen;
    uint32_t queued;     /* sender: bytes cut into packets so far */
    uint32_t acked;      /* sender: bytes acknowledged */
    uint32_t got;        /* receiver: bytes placed */
    uint32_t hi;         /* receiver: end of the furthest packet arrived (bytes of data used) */
    uint32_t cap;        /* bytes allocated after the header (large ones are reused) */
    int      placed;     /* the payload goes to the receiver's region place_id (data: header only) */
    /* Receiver, unplaced message: early, when the layer above matched it
     * before it was complete (pp_msg_early), is where its payload goes
     * from then on; head_in: its first packet (the ptl header) is here;
     * early_asked: offered to the layer above once (pp_early_next). */
    uint8_t *early;
    uint8_t  head_in, early_asked;
    uint64_t place_id, place_off;
    uint8_t *data;       /* the message bytes (ptl header, then payload) */
    /* Sender, referenced message (pp_send_ref): data holds the ptl header
     * only, the payload is read from ref (the caller's buffer) until the
     * last byte is acknowledged; then cookie is reported by pp_zc_reap.
     * ref_owned: a copy made by pp_zc_detach, freed with the message. */
    const uint8_t *ref;
    uint64_t cookie;
    int      ref_owned;
} pp_msg_t;

enum { PP_PK_FREE = 0, PP_PK_INFLIGHT, PP_PK_LOST, PP_PK_SACKED };

typedef struct {
    pp_msg_t *msg;
    uint32_t  off;
    uint16_t  len;
    uint16_t  path;
    uint8_t   state, retx, chunk_end, rsv;
    uint16_t  silent_path;             /* 1 + the path of its last timeout that found the peer
                                        * silent, not counted then (path quarantine); or 0 */
    uint64_t  sent_ns, first_ns;   /* last and first transmission (RTT samples) */
} pp_pkt_t;

typedef struct {
    pp_path_stats_t st;
    uint64_t rttvar_ns;
    uint64_t penalty_until;   /* recently lost: avoid */
    uint64_t acked_sent_ns;   /* latest send time of a packet acknowledged on this path */
    uint64_t inflight;        /* bytes sent on this path, not yet acknowledged or lost */
    uint64_t qrtt_ns;         /* smoothed send-to-ack time of its packets (every ACK, any
                               * packet: includes the path's queue), 0 before a sample */
    uint64_t qvar_ns;         /* its mean deviation: the path's own RTO is qrtt + 4 qvar */
    uint64_t qmax_ns;         /* its largest recent send-to-ack time (each sample: the
                               * larger of it and qmax less 1/64): see path_rto */
    /* Per-path window (LB pwin): loss on this path shrinks this path only. */
    double   cwnd, ssthresh;  /* bytes */
    uint64_t cut_ns;          /* last cut: at most one per path RTT */
    uint64_t idle_until;      /* a window below one chunk: next chunk not before this */
    uint32_t held;            /* its packets in pinned batches (pp_tx_pin): another
                               * thread is handing them to the kernel */
    /* Quarantine (conn.c, path_timeout): a path whose packets stopped coming
     * back is down and takes one probe packet per down_gap until one of its
     * packets is acknowledged. */
    uint32_t tmo_row;         /* timeouts since it last delivered (PP_DOWN_TIMEOUTS) */
    uint64_t tmo_ns;          /* the last of them */
    uint8_t  down;
    uint64_t down_until;      /* down: its next probe not before this */
    uint64_t down_gap;        /* down: the wait before the probe after that */
} pp_path_t;

/* Congestion-control state shared by the policies (each uses what it needs). */
typedef struct {
    double   cwnd, ssthresh, wmax, k;     /* bytes; k in seconds (CUBIC) */
    uint64_t epoch_ns, last_dec_ns;
    uint64_t held_ns;                     /* CUBIC: when it last saw a standing queue */
    double   w_est;                       /* CUBIC's Reno-friendly estimate */
    double   prev_rtt, grad;              /* delay gradient (ns, normalized) */
    double   tokens;                      /* dgpool: connection-level token pool, bytes */
    double   credit;                      /* eqds: sender's unspent credit, bytes */
    double   rx_owed;                     /* eqds: receiver's credit to grant, bytes */
    uint64_t rate_bps;                    /* pacing rate, 0 = unpaced */
} pp_ccstate_t;

struct pp_conn {
    pp_cfg_t  cfg;
    uint64_t  tx_tag, rx_tag;     /* pp_tag(key, me, peer) and pp_tag(key, peer, me) */
    int       failed;             /* give-up reached: the error text is in why */
    uint64_t  now;                /* time of the latest call (for hooks without one) */
    char      why[256];
    uint64_t  rng;
    pp_stats_t st;
    pp_path_t *paths;

    /* sender */
    pp_msg_t *tx_head, *tx_tail;  /* messages not fully acknowledged, in id order */
    pp_msg_t *tx_cut;             /* first message with bytes not yet packetized */
    uint32_t  tx_next_msg;
    size_t    tx_buffered;
    uint64_t  tx_unsent;          /* bytes queued, not yet cut into packets (pwin's tail rule) */
    int       tx_was_blocked;     /* a send was refused: wake the sender when space frees */
    uint32_t  snd_una, snd_nxt, recover;
    uint32_t  highest_sacked;
    uint64_t  hs_sent_ns;         /* when the highest SACKed packet was sent */
    uint64_t  acked_ns;           /* when a packet was last newly acknowledged (path
                                   * quarantine: conn.c) */
    uint32_t  ndown;              /* paths down now */
    int       have_sack;
    uint64_t  inflight;           /* bytes in flight (not acked, not marked lost) */
    uint64_t  lost_bytes;         /* bytes marked lost, not resent (conn.c: fc_unacked) */
    uint64_t  rwnd;               /* receiver's last advertisement */
    uint64_t  rwnd_ns;            /* when it arrived (zero-window probe: chunk_start) */
    pp_pkt_t *pk;                 /* PP_WIN slots by PSN */
    uint64_t  infl_bits[PP_WIN / 64];   /* bit psn % PP_WIN: that packet is PP_PK_INFLIGHT
                                         * (the per-ACK loss scan visits only these) */
    uint8_t   sack_bits[PP_WIN / 8];    /* bit psn % PP_WIN: that packet is PP_PK_SACKED (an
                                         * ACK's bitmap is read for its news only) */
    uint32_t  nlost;              /* packets marked lost, not resent */
    uint32_t  lost_scan;          /* PSN to start looking for lost packets */
    uint32_t  chunk_left, chunk_id;
    int       chunk_path;
    uint64_t  next_chunk_ns;      /* pacing */
    int       wait_why;           /* PP_WAIT_*: why the last send was refused */
    uint64_t  wait_since;         /* when that began */
    uint64_t  srtt_ns, rttvar_ns, min_rtt_ns;
    /* Delivery rate: bytes acknowledged over windows of PP_RATE_WINDOW_NS
     * while data is in flight (rate_start_ns 0: idle). */
    uint64_t  rate_start_ns, rate_bytes;
    double    rate_Bps;           /* smoothed, bytes per second; 0: no sample yet */
    uint64_t  last_rto_scan;
    uint64_t  rto_floor_ns;       /* cfg.rto_min_ns, raised by spurious timeouts */
    uint32_t  dups_seen;          /* the peer's duplicate count last received */
    uint64_t  timeouts_seen;      /* st.retx_timeout when the floor last moved */
    uint64_t  floor_moved_ns;     /* when it last rose or decayed */
    uint32_t  reo_steps;          /* the reordering window in quarters of min RTT (reo_window) */
    uint32_t  reo_quiet;          /* loss events since the peer last reported duplicates */
    uint64_t  reo_moved_ns;       /* when reo_steps last rose */
    uint64_t  reo_fast_seen;      /* st.retx_fast then */
    pp_ccstate_t cc;
    uint16_t  clock_ring[512];    /* ackclock: paths whose ACKs came back fast */
    uint32_t  clock_head, clock_tail;
    uint64_t  least_qrtt_ns, least_qrtt_at;   /* pwin: pp_least_qrtt as of least_qrtt_at
                                               * (one scan per ACK, not per packet) */
    uint32_t  rtt_ring[PP_RTT_RING];  /* the latest RTT samples (ns, saturated), any path */
    uint32_t  rtt_ring_n;             /* samples taken (the next goes to n % PP_RTT_RING) */

    /* receiver */
    uint32_t  rcv_cum, rcv_msg;   /* next PSN expected; next message to hand up */
    uint8_t   rcv_bits[PP_WIN / 8];   /* by PSN mod PP_WIN, for [rcv_cum, rcv_cum + PP_WIN) */
    pp_msg_t *rmsg[PP_WIN];       /* by message id mod PP_WIN */
    size_t    rx_buffered;
    size_t    rwnd_said;          /* the room the last ACK advertised */
    int       ack_pending;
    int       ack_no_echo;        /* the pending ACK is a window update: no RTT echo */
    int       ack_urgent;         /* it may not wait (pp_ack_due): a message completed, a
                                   * duplicate came, a window to say */
    uint32_t  ack_owed_bytes;     /* data bytes it covers that no ACK said yet */
    uint64_t  ack_owed_ns;        /* when the first of them came (0: none) */
    uint32_t  ack_echo_psn;
    uint16_t  ack_echo_path;
    uint8_t   ack_echo_flags;
    uint16_t  ack_via;            /* the peer's last data's hint for our ACKs (pp_hdr_t) */
    uint16_t  heard_path;         /* 1 + the peer's path its last packet took (0: none yet) */
    uint64_t  heard_ns;           /* when that packet came */
    int       ack_new_dups;       /* the ACK being read reports new duplicates (pkt_acked) */
    uint32_t  credit_grant;       /* EQDS: bytes granted so far (cumulative, wraps) */
    uint32_t  credit_seen;        /* EQDS sender: the grant total last received */
    uint32_t  rcv_ahead;          /* bits set in rcv_bits: packets past a hole (SACK to say) */
    uint32_t  credit_said, dups_said;   /* grant total and duplicate count of the last ACK */
    pp_copy_t *copy_q;            /* placed payload copies left to the caller (pp_rx_copy_defer) */
    uint32_t  copy_n, copy_cap;
    uint32_t  copies_out;         /* copies taken, not yet reported done: no delivery until 0 */
    int       early_hint;         /* a header pp_early_next may offer arrived (the datapath clears it) */
    int       run_cut;            /* receiver: a run arrived cut (its ACKs say so: PP_F_RUN) */
    int       runs_off;           /* sender: the peer found a run cut; send it none (pp_run_count) */

    /* Large message buffers freed lately, reused: a fresh megabyte from
     * malloc is a fresh mmap, and its page faults cost more than the copy. */
    pp_msg_t *cache[PP_MSG_CACHE];
    int       ncache;
    size_t    cache_bytes;

    /* referenced messages (pp_send_ref) */
    pp_msg_t *zc_done, *zc_done_tail;   /* fully acknowledged, cookie not yet reaped */
    uint32_t  zc_refs;                  /* in tx_head.. still reading a caller's buffer */
    /* pp_tx_pin: packets handed out may be read with the connection
     * unlocked; messages acknowledged meanwhile wait in retired. */
    uint32_t  tx_pins;
    pp_msg_t *retired;
};

/* A packet the datapath should transmit: hdr (hdr_len bytes) followed by
 * payload (len bytes, may point into a message), then payload2 (len2 bytes,
 * 0 but for the first packet of a referenced message: its ptl header is in
 * the message, the payload in the caller's buffer), on path `path`. */
typedef struct {
    uint8_t     hdr[PP_ACK_LEN > PP_DATA_HDR_MAX ? PP_ACK_LEN : PP_DATA_HDR_MAX];
    size_t      hdr_len;
    const void *payload;
    size_t      len;
    const void *payload2;
    size_t      len2;
    int         path;
} pp_out_t;

int  pp_conn_init(pp_conn_t *c, const pp_cfg_t *cfg);
void pp_conn_fini(pp_conn_t *c);

/* Queues one message (copied). 0 queued, 1 back-pressure (nothing queued,
 * try later), -1 invalid (too large). */
int  pp_send(pp_conn_t *c, const void *hdr, size_t hlen, const void *payload, size_t plen);
/* The same, but the receiver puts the payload straight at offset place_off
 * of the region it exposed as place_id (its cfg.place hook) instead of into
 * the message: pp_deliver's message then holds the header only. place_off
 * travels in 32 bits: beyond UINT32_MAX the message is invalid (-1; send
 * it unplaced). place_id UINT64_MAX is "not placed". */
int  pp_send_placed(pp_conn_t *c, const void *hdr, size_t hlen, const void *payload, size_t plen,
                    uint64_t place_id, uint64_t place_off);
/* Zero copy: as pp_send_placed (place_id UINT64_MAX: not placed), but the
 * payload (plen > 0) is referenced, not copied: it must stay unchanged
 * until pp_zc_reap reports cookie. It counts against tx_buf_max like a copy. */
int  pp_send_ref(pp_conn_t *c, const void *hdr, size_t hlen, const void *payload, size_t plen,
                 uint64_t place_id, uint64_t place_off, uint64_t cookie);
/* A referenced message whose buffer the protocol no longer reads. */
typedef struct {
    uint64_t cookie;
    int      failed;   /* 0: every byte acknowledged; 1: the connection failed */
} pp_zc_t;
/* Fills up to max finished referenced messages into out; returns how many.
 * After a failure every referenced message is reported (failed), once, and
 * its buffer never read again. */
int  pp_zc_reap(pp_conn_t *c, pp_zc_t *out, int max);
/* 1 when pp_zc_reap has something to report. */
int  pp_zc_ready(const pp_conn_t *c);
/* The caller withdraws cookie's buffer early (a cancelled send): the
 * unacknowledged messages naming it get a private copy of their payload
 * and are never reported. 0, -1 when out of memory (nothing changed
 * for the messages not yet copied), or PP_BUSY while pinned (retry once
 * the pin is released: a thread may be reading the buffer). */
int  pp_zc_detach(pp_conn_t *c, uint64_t cookie);
/* A datapath that hands packets from pp_tx_next to the kernel after
 * releasing the connection's lock (so that several threads transmit at
 * once) pins it with the batch (out[0..n-1]) first and unpins it with the
 * same batch, locked again, once the kernel has them: while pinned, a
 * message acknowledged meanwhile is neither freed nor reported to
 * pp_zc_reap (the packets point into it), a failed connection does not
 * report its referenced buffers free, and pp_zc_detach refuses (PP_BUSY).
 * Pins nest (one per thread). The batch's paths count as held meanwhile:
 * another thread's pp_tx_next puts nothing on them (it ends the chunk it
 * continues there and picks another path), so each path's packets reach
 * the kernel in the order they were stamped; two threads interleaving one
 * path's packets made later ones overtake, and the same-path loss rule
 * (detect_dup_loss) took the earlier ones for lost. */
void pp_tx_pin(pp_conn_t *c, const pp_out_t *out, int n);
void pp_tx_unpin(pp_conn_t *c, const pp_out_t *out, int n);
/* 1 when path p may take packets now: no other thread holds it (pp_tx_pin). */
static inline int pp_path_free(const pp_conn_t *c, int p) { return !c->paths[p].held; }
/* 1 when path p may take a chunk: it is not down, or its probe is due
 * (down, nothing of it in flight, down_until passed). Every LB asks. */
static inline int pp_path_live(const pp_conn_t *c, int p, uint64_t now)
{
    const pp_path_t *pa = &c->paths[p];
    return !pa->down || (!pa->inflight && now >= pa->down_until);
}
#define PP_BUSY (-2)
/* The next packet to transmit now (retransmission first), or 0: none now. */
int  pp_tx_next(pp_conn_t *c, uint64_t now, pp_out_t *out);
/* The ACK to send if one is owed (after a batch of received packets), or 0. */
int  pp_ack_next(pp_conn_t *c, uint64_t now, pp_out_t *out);
/* 1 when the ACK owed should leave now; 0 when it may wait for more data
 * (in order, no message completed, under bytes bytes and delay_ns old):
 * a datapath that ACKs every receive pass sends fewer that way. */
int  pp_ack_due(const pp_conn_t *c, uint64_t now, uint32_t bytes, uint64_t delay_ns);
/* Timers (RTO, give-up): returns 1 when the connection just failed. */
int  pp_poll(pp_conn_t *c, uint64_t now);
/* Handles one received packet (len: the whole datagram) that pp_parse
 * accepted from this conn's peer; its header is checked again against the
 * connection (rank, tag, epoch) and its fields against the window and
 * bounds. */
void pp_rx(pp_conn_t *c, uint64_t now, const void *pkt, size_t len);
/* The same for a packet pp_parse accepted with this connection's key and
 * ranks a moment ago: the seal is not summed a second time (a datapath's
 * receive loop; pp_rx re-checks everything for callers that did not). */
void pp_rx_parsed(pp_conn_t *c, uint64_t now, const void *pkt, size_t len);
/* Runs (PP_F_RUN, wire format above). How many of out[0..n) (from
 * pp_tx_next, in order) may leave as one run of at most cap payload bytes:
 * first transmissions of one message, consecutive PSNs and offsets, their
 * payloads back to back in memory, on one path, every one as long as the
 * first but a shorter last; 1 when none may join out[0]. The datapath asks
 * only while the connection's runs_off is 0 (read under its lock). */
int    pp_run_count(const pp_conn_t *c, const pp_out_t *out, int n, size_t cap);
/* Writes the header of the run out[0..k) to hdr (PP_RUN_HDR_MAX bytes),
 * sealed; returns its length. Reads only the connection's constant fields
 * (the datapath builds runs with the connection unlocked). */
size_t pp_run_hdr(const pp_conn_t *c, const pp_out_t *out, int k, uint8_t *hdr);
/* The bytes of a received datagram, from pkt on (len of them), that the
 * run at pkt spans (its header and payload, at most len); 0 when pkt is no
 * run. A datagram of GRO may hold a run and more behind it. */
size_t pp_run_span(const void *pkt, size_t len);
/* Deferred placement. Between pp_rx_copy_defer and pp_rx_copy_take, pp_rx
 * queues the copies of placed payloads into the receiver's exposed regions
 * (up to cap in q; past that it copies at once) instead of making them: the
 * datapath makes them after releasing its lock on the connection, so a
 * thread sending on the same connection is not held up by the bulk of the
 * receive work. pp_rx_copy_take ends the deferral and returns how many are
 * queued in q; until pp_rx_copy_done reports them made, pp_deliver hands up
 * nothing. The packets themselves are accounted (and acknowledged) at once,
 * so the copies must be made before the datapath reads its socket again.
 * The payload sources (the datagram buffers) must stay until then too. */
void pp_rx_copy_defer(pp_conn_t *c, pp_copy_t *q, uint32_t cap);
uint32_t pp_rx_copy_take(pp_conn_t *c);
void pp_rx_copy_done(pp_conn_t *c, uint32_t n);
/* Early placement of an unplaced message, in order: pp_early_next returns
 * the next message to deliver when its header is in but not all of it (at
 * least cfg.early_min payload bytes, not offered before), marked offered,
 * else NULL; early_hint (set by pp_rx when such a header arrives) says one
 * may be there. pp_msg_early gives m a destination for its payload (what
 * arrived so far is copied there, later packets go there too, and
 * pp_deliver hands m up with m->early set: nothing left in m->data after
 * the header). pp_msg_unearly takes it back (copied into m->data): m is
 * then delivered as if never given one. Neither may run while copies the
 * datapath took (pp_rx_copy_take) are not made. */
pp_msg_t *pp_early_next(pp_conn_t *c);
void pp_msg_early(pp_conn_t *c, pp_msg_t *m, void *dst);
void pp_msg_unearly(pp_conn_t *c, pp_msg_t *m);
/* The next message to deliver, complete or not, or NULL. */
pp_msg_t *pp_rx_next(pp_conn_t *c);
/* The next message in order, complete, or NULL; free it with pp_msg_release. */
pp_msg_t *pp_deliver(pp_conn_t *c);
/* 1 when pp_deliver would return a message. */
int  pp_deliver_ready(const pp_conn_t *c);
/* 1: the freed room is news the sender needs (a window update: the last ACK
 * advertised less than a quarter of the buffer, and a chunk more is free
 * now): send the ACK now pending (pp_ack_next). */
int pp_msg_release(pp_conn_t *c, pp_msg_t *m);
/* pp_msg_release without freeing: the message leaves the connection's
 * receive buffer (and flow control) but its memory stays the caller's,
 * until pp_msg_free gives it back. Same return. */
int pp_msg_detach(pp_conn_t *c, pp_msg_t *m);
void pp_msg_free(pp_conn_t *c, pp_msg_t *m);
/* Nothing is left to send or acknowledge. */
int  pp_idle(const pp_conn_t *c);
/* Fills st (cwnd etc. as of now). */
void pp_stats(const pp_conn_t *c, pp_stats_t *st);

/* Structural check of a packet (len: the whole datagram) before any
 * connection is looked up: returns -1 when it is well formed and its tag is
 * pp_tag(key, src, me) sealed with its header (pp_seal; then *src and *type
 * are set), else a PP_DROP_* reason. me and key: this endpoint's rank and
 * the job key. */
int  pp_parse(const void *pkt, size_t len, uint64_t key, uint32_t me, uint32_t *src, int *type);

/* Random numbers for policies (xorshift64*), deterministic from cfg.seed. */
uint64_t pp_rand(pp_conn_t *c);

/* The smallest queue-inclusive RTT among the connection's paths acknowledged
 * lately (0: none), for the policies (CUBIC's hold, pwin's tail rule). */
uint64_t pp_least_qrtt(const pp_conn_t *c, uint64_t now);
uint64_t pp_recent_min_rtt(const pp_conn_t *c);
/* 1 when path pa's queue estimate is fresh: a packet it sent within twice
 * its own RTO (qrtt + 4 qvar) plus slack before now was acknowledged. An
 * idle path keeps the estimate of its last use; one whose packets all
 * stopped coming back has a stale one. */
static inline int pp_qrtt_fresh(const pp_path_t *pa, uint64_t now, uint64_t slack)
{
    return now <= pa->acked_sent_ns + 2 * (pa->qrtt_ns + 4 * pa->qvar_ns) + slack;
}

#endif
