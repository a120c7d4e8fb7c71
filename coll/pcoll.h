/*
 * pcoll.h -- collectives layer: a small round-based schedule engine over the
 * pt2pt layer's internal sends and receives (collective context of a
 * communicator), and the collectives built on it.
 */
#ifndef PLAIT_COLL_PCOLL_H
#define PLAIT_COLL_PCOLL_H

#include "pt2pt/ppt.h"

/* One transfer of a schedule round. */
typedef struct {
    int    peer;     /* comm rank */
    int    send;     /* 1 send, 0 receive */
    void  *buf;
    size_t len;
} pcoll_op_t;

/* A schedule: rounds of transfers; round k+1 starts when every transfer of
 * round k has completed. */
typedef struct pcoll_sched {
    ppt_state_t     *s;
    plait_comm_t     comm;
    int              tag;
    int              nrounds, round;
    int             *round_end;      /* ops[round_end[k-1] .. round_end[k]) form round k */
    pcoll_op_t      *ops;
    int              nops, capops;
    plait_request_t *inner;          /* the current round's requests */
    int              ninner;
} pcoll_sched_t;

int  pcoll_sched_new(ppt_state_t *s, plait_comm_t comm, int maxrounds, int maxops,
                     pcoll_sched_t **out);
void pcoll_sched_add(pcoll_sched_t *sc, int peer, int send, void *buf, size_t len);
void pcoll_sched_end_round(pcoll_sched_t *sc);
/* Wraps the schedule into a request progressed by the pt2pt progress loop. */
int  pcoll_sched_start_locked(pcoll_sched_t *sc, const char *what, plait_request_t *req);

/* Blocking barrier with the lock held (finalize uses it). */
int  pcoll_barrier_locked(ppt_state_t *s, plait_comm_t comm, const char *what);

#endif
