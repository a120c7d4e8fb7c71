/* Unit test of the id map (runtime/map.c) against a plain array, with random
 * inserts, overwrites and deletes (seeded; the seed is printed). */
#include "config.h"

#include <stdlib.h>

#include "runtime/prt.h"
#include "tests/unit/tap.h"

#define KEYS 5000

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return *s;
}

int main(void)
{
    static void *ref[KEYS];
    prt_map_t m;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int bad = 0, count = 0;
    tap_diag("seed 0x%llx", (unsigned long long)seed);
    TAP_OK(prt_map_init(&m, 16) == PLAIT_OK, "init");
    TAP_OK(prt_map_put(&m, 0, &m) == PLAIT_ERR_INTERNAL && prt_map_put(&m, 1, &m) != PLAIT_OK,
           "reserved keys 0 and 1 refused");
    for (int step = 0; step < 200000; step++) {
        uint64_t k = rng(&seed) % KEYS;
        void *v = (void *)(uintptr_t)(rng(&seed) | 1);
        switch (rng(&seed) % 3) {
        case 0: case 1:
            if (prt_map_put(&m, k + 2, v) != PLAIT_OK) bad++;
            count += ref[k] == NULL;
            ref[k] = v;
            break;
        default:
            if (prt_map_del(&m, k + 2) != ref[k]) bad++;
            count -= ref[k] != NULL;
            ref[k] = NULL;
        }
    }
    for (int k = 0; k < KEYS; k++)
        if (prt_map_get(&m, (uint64_t)k + 2) != ref[k])
            bad++;
    TAP_OK(bad == 0, "200000 random operations agree with the reference (%d mismatches)", bad);
    TAP_OK((int)m.count == count, "count %zu == %d", m.count, count);
    TAP_OK(prt_map_get(&m, KEYS + 1000) == NULL, "absent key gives NULL");
    TAP_OK(m.cap <= 4 * 4 * KEYS, "tombstones do not grow the table without bound (cap %zu)", m.cap);
    prt_map_fini(&m);
    return tap_done();
}
