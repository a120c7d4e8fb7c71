/*
 * ptl.h -- plait transport layer: moves opaque frames between ranks.
 *
 * The layer above (pt2pt) owns every protocol (eager, rendezvous, acks); a
 * transport only delivers frames in order per (sender, receiver) pair and, when
 * it can, reads a peer's memory directly (one-sided get, e.g. CMA on one host).
 * Each transport is an ops table (libfabric/UCX style); pt2pt never knows which
 * one carries a peer.
 */
#ifndef PLAIT_TRANSPORT_PTL_H
#define PLAIT_TRANSPORT_PTL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "runtime/prt.h"

/* Largest frame header a transport must carry in front of a payload. */
#define PTL_MAX_HDR 64

/* Receive callback: one whole frame (header + payload), valid only during the
 * call. Frames from one peer arrive in the order they were sent. payload is
 * NULL (plen > 0) for a frame sent with send_placed: its bytes are already in
 * the region the receiver exposed. */
typedef void (*ptl_rx_fn)(void *ctx, int src, const void *hdr, size_t hlen,
                          const void *payload, size_t plen);

/* Early placement: a frame's header arrived before the rest of it (a
 * transport reassembling large frames from packets); where should its plen
 * payload bytes go? Returns an address with room for all of them (the
 * receive the frame matches), or NULL: delivered as usual. */
typedef void *(*ptl_early_fn)(void *ctx, int src, const void *hdr, size_t hlen, size_t plen);

/* Zero-copy completion: the send that passed cookie no longer needs its
 * buffer; rc PLAIT_OK (every byte acknowledged) or the error. */
typedef void (*ptl_zc_fn)(void *ctx, uint64_t cookie, int rc);

/* send_placed_zc's answer: the payload is referenced, its cookie comes back
 * through zc_reap. */
#define PTL_PENDING 2

typedef struct ptl_ops ptl_ops_t;

/* A transport instance inside one process. */
typedef struct ptl_tl {
    const ptl_ops_t *ops;
    const char      *name;
    void            *priv;
} ptl_tl_t;

struct ptl_ops {
    /* Sends one frame to world rank dst. Returns PLAIT_OK, or PLAIT_ERR_NOMEM-free
     * back-pressure as 1 ("try again later", nothing was sent). */
    int  (*send)(ptl_tl_t *tl, int dst, const void *hdr, size_t hlen,
                 const void *payload, size_t plen);
    /* Largest hlen + plen a single frame may carry. */
    size_t (*max_frame)(ptl_tl_t *tl);
    /* Reads len bytes at the peer's virtual address raddr into buf. Returns
     * PLAIT_OK, PLAIT_ERR_UNSUPPORTED when this pair cannot (caller falls back
     * to a copy protocol), or another error. NULL when the transport has none. */
    int  (*get)(ptl_tl_t *tl, int peer, uint64_t raddr, void *buf, size_t len);
    /* Delivers pending frames through rx; returns the work done: frames
     * delivered, plus packets moved where the transport has packets (0: idle). */
    int  (*progress)(ptl_tl_t *tl, ptl_rx_fn rx, void *ctx);
    /* Checks that peer is alive: PLAIT_OK or PLAIT_ERR_PEER (with message). */
    int  (*peer_alive)(ptl_tl_t *tl, int peer);
    /* Optional (NULL: absent): a value that changes whenever data moves
     * between this rank and peer (arrives from it, or it acknowledges ours;
     * nothing else, no keep-alive), so that a wait on a transfer under way
     * tells a slow link from a stalled one. */
    uint64_t (*moved)(ptl_tl_t *tl, int peer);
    /* Cooperative copy (optional, NULL when absent): the receiver of a large
     * message opens a shared descriptor for moving len bytes from the peer's
     * address saddr into buf and tells the peer the handle; then both call
     * coop_work, the receiver (owner = 1) until it returns 1 (every byte in),
     * the sender (owner = 0) once, to help; the receiver closes it.
     * coop_open returns PLAIT_ERR_UNSUPPORTED when it cannot (use get). */
    int  (*coop_open)(ptl_tl_t *tl, int peer, uint64_t saddr, void *buf, size_t len,
                      uint64_t *handle);
    int  (*coop_work)(ptl_tl_t *tl, int peer, uint64_t handle, int owner);
    void (*coop_close)(ptl_tl_t *tl, int peer, uint64_t handle);
    /* Pushes out bytes accepted by send() but not yet handed to the kernel or
     * the peer; returns 1 while some remain. NULL: send() never keeps any. */
    int  (*flush)(ptl_tl_t *tl);
    void (*fini)(ptl_tl_t *tl);
    /* Direct placement (optional, all three NULL when absent): the receiver
     * exposes buf[0..len) under id for frames from peer; the peer's
     * send_placed frames naming id put their payload at offset off of it
     * (no copy into a frame buffer) and arrive with payload NULL; bytes
     * outside the region are dropped. unexpose before buf goes away. */
    int  (*expose)(ptl_tl_t *tl, int peer, uint64_t id, void *buf, size_t len);
    void (*unexpose)(ptl_tl_t *tl, int peer, uint64_t id);
    int  (*send_placed)(ptl_tl_t *tl, int dst, const void *hdr, size_t hlen, const void *payload,
                        size_t plen, uint64_t id, uint64_t off);
    /* Zero-copy placed send (optional, all three NULL when absent): as
     * send_placed, but the transport may read payload from the caller's
     * buffer until the peer acknowledged it, instead of copying it. Returns
     * what send_placed returns (PLAIT_OK: copied, buffer free now), or
     * PTL_PENDING: referenced, the buffer must stay unchanged until zc_reap
     * reports cookie (nonzero, chosen by the caller). zc_reap calls done for
     * every finished cookie (with an error when the peer became unreachable:
     * nothing reads the buffer after) and returns how many. zc_detach: the
     * caller withdraws cookie's buffer early (a cancelled send); the
     * transport copies what it still needs, and reports cookie no more.
     * id UINT64_MAX: not placed (the frame arrives with its payload, as
     * from send), still referenced. */
    int  (*send_placed_zc)(ptl_tl_t *tl, int dst, const void *hdr, size_t hlen,
                           const void *payload, size_t plen, uint64_t id, uint64_t off,
                           uint64_t cookie);
    int  (*zc_reap)(ptl_tl_t *tl, ptl_zc_fn done, void *ctx);
    int  (*zc_detach)(ptl_tl_t *tl, int peer, uint64_t cookie);
    /* Keeping a received frame (optional, both NULL when absent): called
     * inside rx for the frame being delivered, rx_keep hands its buffer to
     * the receiver instead of reusing it: the payload pointer rx was given
     * stays valid until rx_free(peer, handle) (peer: the frame's source).
     * NULL: not this frame (copy the payload). An unexpected eager message
     * is kept this way rather than copied once more. */
    void *(*rx_keep)(ptl_tl_t *tl);
    void  (*rx_free)(ptl_tl_t *tl, int peer, void *handle);
    /* Early placement (optional, both NULL when absent). rx_early_set:
     * inside progress, the transport asks early(ctx, ...) once about each
     * frame large enough that is the next to deliver from its source, when
     * its header is in but not all of its payload; a frame given an
     * address arrives through rx with payload equal to it, every byte
     * there (the transport wrote them as they came: no copy at delivery).
     * rx_early_revoke(peer): the frame from peer given an address (not yet
     * delivered) gives it back: the transport stops writing there, copies
     * what came into its own buffer, and delivers the frame as usual. */
    void (*rx_early_set)(ptl_tl_t *tl, ptl_early_fn early, void *ctx);
    void (*rx_early_revoke)(ptl_tl_t *tl, int peer);
};

/* A transport kind, listed by plait_info. */
typedef struct ptl_component {
    const char *name;
    const char *desc;
    /* 1 if usable on this machine; else 0 and why is filled. */
    int (*usable)(char *why, size_t len);
} ptl_component_t;

const ptl_component_t *const *ptl_components(size_t *n);

/* ------------------------------------------------------------ shared memory */

/* Publishes this rank's card (segment name, pid) via PMIx; call before the fence. */
int  ptl_shm_setup(ptl_tl_t *tl, prt_job_t *job, const prt_config_t *cfg);
/* Maps every local peer's segment; call after the fence. */
int  ptl_shm_connect(ptl_tl_t *tl, prt_job_t *job);
/* After the second fence: every peer's segment carries this job's key. */
int  ptl_shm_verify(ptl_tl_t *tl);
/* Unlinks this rank's segment name (after every peer mapped it: second fence). */
void ptl_shm_unlink(ptl_tl_t *tl);
/* 1 when world rank peer is reachable through this shm instance. */
int  ptl_shm_reaches(ptl_tl_t *tl, int peer);
/* Sleeps up to timeout_us on this process's wake-up word (senders and
 * completing threads bump it) unless a frame is pending or *done is set. */
void ptl_shm_sleep(ptl_tl_t *tl, long timeout_us, _Atomic int *done);
/* Wakes this process's own sleeping threads (after completing their work). */
void ptl_shm_wake_self(ptl_tl_t *tl);

/* -------------------------------------------------------------------- tcp */

/* Listens and publishes this rank's addresses via PMIx; call before the fence. */
int  ptl_tcp_setup(ptl_tl_t *tl, prt_job_t *job, const prt_config_t *cfg);

/* -------------------------------------------------------------------- udp */

/* Opens the path sockets and publishes this rank's card via PMIx; call
 * before the fence. waker: the shm instance whose wake-up word the engine
 * threads bump when a message is ready or send space freed up. */
int  ptl_udp_setup(ptl_tl_t *tl, prt_job_t *job, const prt_config_t *cfg, ptl_tl_t *waker);
/* After the fence: reads every peer's card, makes the connections, starts
 * the engine threads. */
int  ptl_udp_connect(ptl_tl_t *tl);
/* Per-connection and per-path counters (PLAIT_STATS=1, plait_stats_print). */
void ptl_udp_stats_print(ptl_tl_t *tl, FILE *f);

#endif
