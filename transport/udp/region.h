/*
 * region.h -- the receive buffers this rank exposed to one peer for direct
 * placement (ptl expose), and the lookup pp's place hook makes for every
 * placed packet. A table per peer, guarded by the peer's lock (udp.c).
 * Header-only, so that bench/pp-rx times the same lookup.
 *
 * plait-bench's window posts 64 receives: 64 regions exposed, in no useful
 * order once completions have swapped entries around, and a scan of half
 * of them on every 1.4 KB packet. A message's packets come in a run, so
 * the table remembers where the last lookup found its id and looks there
 * first. That entry is always the first one with its id (what the scan
 * would find): it was found by a scan, adding appends behind it, and
 * removing (which moves the last entry into the gap) forgets it.
 */
#ifndef PLAIT_TRANSPORT_UDP_REGION_H
#define PLAIT_TRANSPORT_UDP_REGION_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct {
    uint64_t id;
    uint8_t *buf;
    size_t   len;
} udp_region_t;

/* Zeroed, an empty table (last 0: entry 0, when it has the id looked up,
 * is the first with it). */
typedef struct {
    udp_region_t *r;
    int           n, cap;
    int           last;   /* where the last lookup found its id; -1: forgotten */
} udp_regions_t;

static inline void udp_regions_fini(udp_regions_t *t)
{
    free(t->r);
    *t = (udp_regions_t){0};
}

/* Exposes len bytes at buf as id: 0, or -1 when out of memory. */
static inline int udp_region_add(udp_regions_t *t, uint64_t id, void *buf, size_t len)
{
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 8;
        udp_region_t *r = realloc(t->r, (size_t)cap * sizeof *r);
        if (!r)
            return -1;
        t->r = r;
        t->cap = cap;
    }
    t->r[t->n++] = (udp_region_t){id, buf, len};
    return 0;
}

/* Withdraws the first region exposed as id: 1, or 0 when there is none. */
static inline int udp_region_remove(udp_regions_t *t, uint64_t id)
{
    for (int i = 0; i < t->n; i++)
        if (t->r[i].id == id) {
            t->r[i] = t->r[--t->n];
            t->last = -1;
            return 1;
        }
    return 0;
}

/* pp's place hook on this table: the address for *len bytes at offset off
 * of the region exposed as id, *len cut to what the region has from there;
 * NULL when off is past its end or no region is exposed as id. */
static inline void *udp_region_place(udp_regions_t *t, uint64_t id, uint64_t off, size_t *len)
{
    int i = t->last;
    udp_region_t *r;
    if (i < 0 || i >= t->n || t->r[i].id != id) {
        for (i = 0; i < t->n && t->r[i].id != id; i++)
            ;
        if (i == t->n)
            return NULL;
        t->last = i;
    }
    r = &t->r[i];
    if (off >= r->len)
        return NULL;   /* past a (truncating) receive buffer: discarded */
    if (*len > r->len - off)
        *len = r->len - off;
    return r->buf + off;
}

#endif
