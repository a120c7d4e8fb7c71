/*
 * map.c -- open-addressing hash map from 64-bit ids to pointers (linear
 * probing, tombstones). Used for communicator contexts and request ids that
 * arrive in frames: a lookup of an unknown id simply fails.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/prt.h"

#define MAP_EMPTY 0u
#define MAP_TOMB  1u   /* keys 0 and 1 are reserved */

static uint64_t map_hash(uint64_t k)
{
    k ^= k >> 33; k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33; k *= 0xc4ceb9fe1a85ec53ull;
    return k ^ (k >> 33);
}

int prt_map_init(prt_map_t *m, size_t cap_pow2)
{
    m->cap = cap_pow2 < 16 ? 16 : cap_pow2;
    m->used = m->count = 0;
    m->keys = calloc(m->cap, sizeof *m->keys);
    m->vals = calloc(m->cap, sizeof *m->vals);
    if (!m->keys || !m->vals) {
        prt_map_fini(m);
        return prt_err(PLAIT_ERR_NOMEM, "no memory for a map of %zu entries", cap_pow2);
    }
    return PLAIT_OK;
}

void prt_map_fini(prt_map_t *m)
{
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->cap = m->used = m->count = 0;
}

static size_t map_find(const prt_map_t *m, uint64_t key)
{
    size_t i = map_hash(key) & (m->cap - 1);
    while (m->keys[i] != MAP_EMPTY && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    return i;
}

void *prt_map_get(const prt_map_t *m, uint64_t key)
{
    size_t i;
    if (key <= MAP_TOMB || m->cap == 0)
        return NULL;
    i = map_find(m, key);
    return m->keys[i] == key ? m->vals[i] : NULL;
}

static int map_grow(prt_map_t *m)
{
    prt_map_t n;
    PRT_CHECK(prt_map_init(&n, m->count * 4 > m->cap ? m->cap * 2 : m->cap));
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i] > MAP_TOMB)
            prt_map_put(&n, m->keys[i], m->vals[i]);
    prt_map_fini(m);
    *m = n;
    return PLAIT_OK;
}

int prt_map_put(prt_map_t *m, uint64_t key, void *val)
{
    size_t i;
    if (key <= MAP_TOMB)
        return prt_err(PLAIT_ERR_INTERNAL, "map key %llu is reserved", (unsigned long long)key);
    if ((m->used + 1) * 2 > m->cap)
        PRT_CHECK(map_grow(m));
    i = map_find(m, key);
    if (m->keys[i] != key) {
        /* reuse the first tombstone on the probe path, if any */
        size_t j = map_hash(key) & (m->cap - 1);
        while (m->keys[j] != MAP_TOMB && j != i)
            j = (j + 1) & (m->cap - 1);
        if (j == i)
            m->used++;
        i = j;
        m->keys[i] = key;
        m->count++;
    }
    m->vals[i] = val;
    return PLAIT_OK;
}

void *prt_map_del(prt_map_t *m, uint64_t key)
{
    size_t i;
    void *v;
    if (key <= MAP_TOMB || m->cap == 0)
        return NULL;
    i = map_find(m, key);
    if (m->keys[i] != key)
        return NULL;
    v = m->vals[i];
    m->keys[i] = MAP_TOMB;
    m->vals[i] = NULL;
    m->count--;
    return v;
}
