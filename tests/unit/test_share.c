/*
 * test_share.c -- the placement-copy hand-over between a udp engine's
 * driver and its thread (transport/udp/share.h): every copy is made exactly
 * once, by one of the two, whoever claims a posted half; nothing is left
 * out or made twice; a driver alone (no helper) makes everything itself.
 * Random sizes and contents from a fixed seed (printed); destinations are
 * poisoned before each round.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/udp/share.h"
#include "tests/unit/tap.h"

#define NCOPY  96
#define MAXLEN 1500
#define ROUNDS 3000

static uint64_t rng = 0x5eed1234abcdull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

typedef struct {
    udp_share_t     *s;
    _Atomic int      stop;
    _Atomic uint64_t made;
} helper_t;

static void *helper_main(void *arg)
{
    helper_t *h = arg;
    while (!atomic_load(&h->stop))
        atomic_fetch_add(&h->made, udp_share_help(h->s));
    return NULL;
}

/* One round: n copies of random lengths from src to disjoint places in dst
 * (poisoned first; the gaps between them keep the poison), the second half
 * posted. Returns 1 when dst matches the expected image (want: the poison
 * with the copies made independently); *drv gets the posted copies the
 * driver made itself. */
static int round_ok(udp_share_t *s, const uint8_t *src, uint8_t *dst, uint8_t *want, size_t cap,
                    uint32_t n, uint32_t *drv)
{
    pp_copy_t q[NCOPY];
    size_t off = 0;
    uint32_t h = n / 2;
    memset(dst, 0xA5, cap);
    memset(want, 0xA5, cap);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len = 1 + rnd() % MAXLEN;
        q[i] = (pp_copy_t){dst + off, src + off, len};
        for (uint32_t b = 0; b < len; b++)
            want[off + b] = src[off + b];
        off += len + 1 + rnd() % 8;
    }
    udp_share_post(s, q + h, n - h, 1);
    *drv = udp_share_finish(s, q, h);
    return memcmp(dst, want, cap) == 0;
}

int main(void)
{
    size_t cap = (size_t)NCOPY * (MAXLEN + 9);
    uint8_t *src = malloc(cap), *dst = malloc(cap), *want = malloc(cap);
    udp_share_t s;
    helper_t h;
    pthread_t t;
    uint64_t posted = 0, by_driver = 0;
    int bad = 0;
    uint32_t drv;

    printf("# seed 0x%llx\n", (unsigned long long)rng);
    if (!src || !dst || !want)
        return 1;
    for (size_t i = 0; i < cap; i++)
        src[i] = (uint8_t)rnd();
    memset(&s, 0, sizeof s);

    /* No helper: the driver takes back every posted half. */
    for (int r = 0; r < 200; r++) {
        uint32_t n = 2 + rnd() % (NCOPY - 1);
        bad += !round_ok(&s, src, dst, want, cap, n, &drv);
        bad += drv != n - n / 2;
    }
    TAP_OK(bad == 0, "no helper: every copy made by the driver, nothing else written (%d bad)", bad);
    TAP_OK(atomic_load(&s.state) == UDP_SHARE_IDLE && atomic_load(&s.helped) == 0,
       "no helper: the share is idle again and counts no help");

    /* A helper thread claiming whatever it sees posted. */
    h.s = &s;
    atomic_store(&h.stop, 0);
    atomic_store(&h.made, 0);
    if (pthread_create(&t, NULL, helper_main, &h) != 0)
        return 1;
    bad = 0;
    for (int r = 0; r < ROUNDS; r++) {
        uint32_t n = 2 + rnd() % (NCOPY - 1);
        bad += !round_ok(&s, src, dst, want, cap, n, &drv);
        posted += n - n / 2;
        by_driver += drv;
    }
    atomic_store(&h.stop, 1);
    pthread_join(t, NULL);
    TAP_OK(bad == 0, "with a helper: %d rounds, every byte copied and nothing else written (%d bad)",
       ROUNDS, bad);
    TAP_OK(by_driver + atomic_load(&h.made) == posted,
       "each posted copy made once: driver %llu + helper %llu = posted %llu",
       (unsigned long long)by_driver, (unsigned long long)atomic_load(&h.made),
       (unsigned long long)posted);
    TAP_OK(atomic_load(&s.helped) == atomic_load(&h.made), "the share counts the helper's copies");
    TAP_OK(udp_share_recent(&s, 2, 10) && !udp_share_recent(&s, 100, 10),
       "recent: within the window after a post, not after it");
    free(src);
    free(dst);
    free(want);
    return tap_done();
}
