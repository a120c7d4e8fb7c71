/* Unit test of communicator context ids (pt2pt/comm.c): derived ids are even
 * (odd is the collective context), never reserved, and distinct across a large
 * tree of dup/split derivations. */
#include "config.h"

#include <stdlib.h>

#include "pt2pt/ppt.h"
#include "tests/unit/tap.h"

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(void)
{
    enum { N = 100000 };
    uint64_t *ids = malloc(N * sizeof *ids);
    int odd = 0, reserved = 0, dups = 0, n = 0;
    ids[n++] = 2;   /* world */
    /* breadth-first: each id derives children by (seq, color) */
    for (int i = 0; n < N; i++)
        for (uint64_t seq = 0; seq < 3 && n < N; seq++)
            for (uint64_t color = 0; color < 4 && n < N; color++)
                ids[n++] = ppt_ctx_derive(ids[i], seq, color == 3 ? UINT64_MAX : color);
    for (int i = 0; i < N; i++) {
        odd += (int)(ids[i] & 1);
        reserved += ids[i] < 2;
    }
    qsort(ids, N, sizeof *ids, cmp);
    for (int i = 1; i < N; i++)
        dups += ids[i] == ids[i - 1];
    TAP_OK(odd == 0, "every derived context id is even (%d odd)", odd);
    TAP_OK(reserved == 0, "no reserved ids (%d)", reserved);
    TAP_OK(dups == 0, "%d derived ids are distinct (%d duplicates)", N, dups);
    TAP_OK(ppt_ctx_derive(2, 0, 1) == ppt_ctx_derive(2, 0, 1), "derivation is deterministic");
    free(ids);
    return tap_done();
}
