/*
 * ring.h -- a single-producer single-consumer ring of fixed-size slots in
 * shared memory (one per ordered pair of local ranks).
 *
 * Each slot carries a sequence word (Vyukov's bounded queue): slot i starts at
 * seq = i; the producer at position p may write the slot when seq == p and
 * publishes it with seq = p + 1 (release); the consumer at position c reads it
 * when seq == c + 1 and frees it with seq = c + nslots. Producer and consumer
 * positions stay private to each side, so the only shared cache lines are the
 * slots themselves: an 8-byte message costs one line transfer each way.
 */
#ifndef PLAIT_TRANSPORT_SHM_RING_H
#define PLAIT_TRANSPORT_SHM_RING_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    _Atomic uint64_t seq;
    uint32_t         hlen;
    uint32_t         plen;
    unsigned char    data[];   /* hlen header bytes, then plen payload bytes */
} shm_slot_t;

#define SHM_SLOT_HDR ((size_t)sizeof(shm_slot_t))

typedef struct {
    unsigned char *base;       /* first slot */
    size_t         slot_size;  /* bytes per slot, multiple of 64 */
    uint64_t       mask;       /* nslots - 1 */
} shm_ring_t;

static inline shm_slot_t *shm_ring_slot(const shm_ring_t *r, uint64_t pos)
{
    return (shm_slot_t *)(r->base + (pos & r->mask) * r->slot_size);
}

static inline void shm_ring_init(shm_ring_t *r)
{
    for (uint64_t i = 0; i <= r->mask; i++)
        atomic_store_explicit(&shm_ring_slot(r, i)->seq, i, memory_order_relaxed);
}

/* Producer: 0 and *pos advanced when written, 1 when the ring is full. */
static inline int shm_ring_push(const shm_ring_t *r, uint64_t *pos, const void *hdr, uint32_t hlen,
                                const void *payload, uint32_t plen)
{
    shm_slot_t *s = shm_ring_slot(r, *pos);
    if (atomic_load_explicit(&s->seq, memory_order_acquire) != *pos)
        return 1;
    s->hlen = hlen;
    s->plen = plen;
    memcpy(s->data, hdr, hlen);
    if (plen)
        memcpy(s->data + hlen, payload, plen);
    atomic_store_explicit(&s->seq, *pos + 1, memory_order_release);
    (*pos)++;
    return 0;
}

/* Consumer: the slot at pos if it holds a frame, else NULL. */
static inline shm_slot_t *shm_ring_peek(const shm_ring_t *r, uint64_t pos)
{
    shm_slot_t *s = shm_ring_slot(r, pos);
    return atomic_load_explicit(&s->seq, memory_order_acquire) == pos + 1 ? s : NULL;
}

static inline void shm_ring_release(const shm_ring_t *r, shm_slot_t *s, uint64_t *pos)
{
    atomic_store_explicit(&s->seq, *pos + r->mask + 1, memory_order_release);
    __atomic_store_n(pos, *pos + 1, __ATOMIC_RELAXED);   /* read unlocked: shm_any_pending */
}

#endif
