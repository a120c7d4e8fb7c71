/*
 * pp_pair.h -- the identity of side me (0 or 1) of a two-rank connection of
 * transport/proto, as the protocol tests and the protocol benchmarks
 * (bench/proto-tx, bench/pp-rx) build it: the defaults, then who talks to
 * whom under which job key and incarnation numbers. Each caller sets the
 * rest (MTU, chunk, paths, PSNs, CC and LB).
 */
#ifndef PLAIT_TESTS_PP_PAIR_H
#define PLAIT_TESTS_PP_PAIR_H

#include <stdint.h>

#include "transport/proto/pp.h"

static inline void pp_pair_cfg(pp_cfg_t *c, uint64_t key, int me)
{
    pp_cfg_default(c);
    c->key = key;
    c->me = (uint32_t)me;
    c->peer = (uint32_t)!me;
    c->my_epoch = me ? 0xbbbb : 0xaaaa;
    c->peer_epoch = me ? 0xaaaa : 0xbbbb;
}

#endif
