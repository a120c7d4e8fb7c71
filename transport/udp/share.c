/* share.c -- placement copies shared between a udp engine's driver and its
 * thread (share.h has the protocol). */
#include "config.h"

#include <string.h>

#include "runtime/prt.h"
#include "transport/udp/share.h"


void udp_share_copies(const pp_copy_t *q, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        memcpy(q[i].dst, q[i].src, q[i].len);
}

void udp_share_post(udp_share_t *s, const pp_copy_t *q, uint32_t n, uint64_t now)
{
    s->q = q;
    s->n = n;
    atomic_store_explicit(&s->posted_ns, now, memory_order_relaxed);
    atomic_store_explicit(&s->state, UDP_SHARE_POSTED, memory_order_release);
}

uint32_t udp_share_finish(udp_share_t *s, const pp_copy_t *q, uint32_t n)
{
    int st = UDP_SHARE_POSTED;
    uint32_t made = 0;
    udp_share_copies(q, n);
    if (atomic_compare_exchange_strong_explicit(&s->state, &st, UDP_SHARE_TAKEN,
                                                memory_order_acquire, memory_order_relaxed)) {
        udp_share_copies(s->q, s->n);   /* the helper did not come */
        made = s->n;
    } else {
        /* The helper claimed it: its copies land before it stores DONE
         * (release), and are the caller's to read after this (acquire). */
        while (atomic_load_explicit(&s->state, memory_order_acquire) != UDP_SHARE_DONE)
            prt_cpu_relax();
    }
    atomic_store_explicit(&s->state, UDP_SHARE_IDLE, memory_order_relaxed);
    return made;
}

uint32_t udp_share_help(udp_share_t *s)
{
    int st = UDP_SHARE_POSTED;
    uint32_t n;
    if (atomic_load_explicit(&s->state, memory_order_relaxed) != UDP_SHARE_POSTED ||
        !atomic_compare_exchange_strong_explicit(&s->state, &st, UDP_SHARE_TAKEN,
                                                 memory_order_acquire, memory_order_relaxed))
        return 0;
    n = s->n;
    udp_share_copies(s->q, n);
    atomic_fetch_add_explicit(&s->helped, n, memory_order_relaxed);
    atomic_store_explicit(&s->state, UDP_SHARE_DONE, memory_order_release);
    return n;
}
