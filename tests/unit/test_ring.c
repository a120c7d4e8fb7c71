/* Unit test of the shared-memory SPSC ring (transport/shm/ring.h): a producer
 * and a consumer thread pass numbered frames of random lengths through a small
 * ring (many wrap-arounds); every frame arrives once, in order, intact. */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>

#include "transport/shm/ring.h"
#include "tests/unit/tap.h"

#define FRAMES 200000
#define SLOT   256
#define NSLOTS 8

static shm_ring_t ring;

static uint32_t frame_len(uint64_t i) { return (uint32_t)((i * 2654435761u) % (SLOT - SHM_SLOT_HDR - 8)); }

static void *producer(void *arg)
{
    uint64_t pos = 0;
    unsigned char payload[SLOT];
    (void)arg;
    for (uint64_t i = 0; i < FRAMES; i++) {
        uint32_t n = frame_len(i);
        for (uint32_t b = 0; b < n; b++)
            payload[b] = (unsigned char)(i + b);
        while (shm_ring_push(&ring, &pos, &i, sizeof i, payload, n))
            ;   /* full: the consumer frees slots */
    }
    return NULL;
}

int main(void)
{
    pthread_t t;
    uint64_t pos = 0, bad = 0, full_seen = 0;
    void *mem = aligned_alloc(64, SLOT * NSLOTS);
    ring.base = mem;
    ring.slot_size = SLOT;
    ring.mask = NSLOTS - 1;
    shm_ring_init(&ring);
    {
        uint64_t p = 0, x = 1;
        for (int i = 0; i < NSLOTS; i++)
            shm_ring_push(&ring, &p, &x, sizeof x, NULL, 0);
        full_seen = shm_ring_push(&ring, &p, &x, sizeof x, NULL, 0);
        TAP_OK(full_seen == 1, "a full ring refuses a push");
        for (int i = 0; i < NSLOTS; i++)
            shm_ring_release(&ring, shm_ring_peek(&ring, pos), &pos);
        TAP_OK(shm_ring_peek(&ring, pos) == NULL, "an empty ring has nothing to peek");
    }
    shm_ring_init(&ring);   /* both sides start again at position 0 */
    pos = 0;
    pthread_create(&t, NULL, producer, NULL);
    for (uint64_t i = 0; i < FRAMES; i++) {
        shm_slot_t *s;
        uint64_t id;
        while ((s = shm_ring_peek(&ring, pos)) == NULL)
            ;
        memcpy(&id, s->data, sizeof id);
        if (id != i || s->hlen != sizeof id || s->plen != frame_len(i))
            bad++;
        else
            for (uint32_t b = 0; b < s->plen; b++)
                bad += s->data[s->hlen + b] != (unsigned char)(i + b);
        shm_ring_release(&ring, s, &pos);
    }
    pthread_join(t, NULL);
    TAP_OK(bad == 0, "%d frames through an %d-slot ring in order and intact (%llu bad)", FRAMES,
           NSLOTS, (unsigned long long)bad);
    free(mem);
    return tap_done();
}
