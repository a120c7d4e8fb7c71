/*
 * trace.c -- an event timeline of one process (PLAIT_TRACE=DIR), to see
 * where a message's time goes: each layer marks the moments that matter
 * (a rendezvous announced, answered, its data handed to the transport; a
 * system call that sends or receives packets; a batch's placement copies;
 * a frame delivered) with the clock, two numbers and an id, and plait_finalize
 * writes them to DIR/plait-trace.RANK.txt. bench/timeline.py merges the
 * ranks' files into per-message timelines (CLOCK_MONOTONIC: the ranks of
 * one host, namespace hosts included, share that clock).
 *
 * Off (the default) it costs each marked place one relaxed load of
 * prt_trace_on. On, an event is an atomic increment and a 32-byte store;
 * the buffer holds PRT_TRACE_CAP events, later ones are counted as dropped.
 *
 * The file lists each thread by number and name (engine threads are
 * plait-udpN). Events (code: a, b, id). The ids tie a rendezvous together
 * across the two ranks: sid is the sender's request id, rid the receiver's
 * (each process numbers its requests once, never reusing one).
 *   R  RTS sent (bytes, destination world rank, sid)
 *   r  RTS received (bytes, source, sid)
 *   C  CTS sent (rid, source, sid)              c  CTS received (rid, source, sid)
 *   D  DATA frame to the transport (bytes, peer, rid)
 *   d  ... returned (bytes, status, rid)
 *   F  DATA frame delivered (bytes, source, rid)
 *   Z  zero-copy part of a send done (parts left, 0, sid)
 *   S  sendmmsg called (payload bytes, packets, 0)
 *   s  ... returned (messages sent, path, 0)
 *   V  recvmmsg returned data (bytes, datagrams, ns the call took)
 *   T  a timer scan marked packets lost by timeout (packets, peer, 0)
 *   p  placement copies of a batch begin (copies, 0, 0)
 *   P  ... done (copies, 0, 0)
 * Only rendezvous messages are marked (RTS and CTS); with the shared-memory
 * transport (a single copy by the receiver) there is no CTS or DATA.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/prt.h"

#define PRT_TRACE_CAP (1u << 20)
#define PRT_TRACE_NAMES 64   /* threads whose names the file lists */

typedef struct {
    uint64_t t;
    int64_t  a;
    uint64_t id;
    int32_t  b;
    uint16_t tid;
    char     ev;
} prt_trace_ev_t;

/* Process-wide by nature: every layer and thread marks events into one
 * buffer, and the switch is read on hot paths without a handle to pass.
 * The count has a cache line of its own: every marking thread bumps it. */
_Atomic int prt_trace_on;
static struct {
    prt_trace_ev_t  *ev;
    _Atomic int      ntid;
    char             names[PRT_TRACE_NAMES][16];   /* by thread number, set at its first event */
    int              rank;
    char             job[48];
    char             path[512];
    _Alignas(64) _Atomic uint64_t n;
} trace;
static _Thread_local int trace_tid = -1;

int prt_trace_start(const char *dir, int rank, const char *job)
{
    FILE *f;
    if (!dir || !dir[0] || atomic_load(&prt_trace_on))
        return PLAIT_OK;
    if (snprintf(trace.path, sizeof trace.path, "%s/plait-trace.%d.txt", dir, rank) >=
        (int)sizeof trace.path)
        return prt_err(PLAIT_ERR_ARG, "setting PLAIT_TRACE=%s: the directory name is too long", dir);
    f = fopen(trace.path, "w");   /* fail now, not at finalize after the run */
    if (!f)
        return prt_err(PLAIT_ERR_ARG, "setting PLAIT_TRACE=%s: cannot write %s: %s", dir,
                       trace.path, strerror(errno));
    fclose(f);
    trace.ev = calloc(PRT_TRACE_CAP, sizeof *trace.ev);   /* (zero: slots not yet written) */
    if (!trace.ev)
        return prt_err(PLAIT_ERR_NOMEM, "PLAIT_TRACE: no memory for %u events", PRT_TRACE_CAP);
    trace.rank = rank;
    snprintf(trace.job, sizeof trace.job, "%s", job && job[0] ? job : "-");
    atomic_store(&trace.n, 0);
    atomic_store(&prt_trace_on, 1);
    return PLAIT_OK;
}

void prt_trace_event(char ev, int64_t a, int32_t b, uint64_t id)
{
    uint64_t i = atomic_fetch_add_explicit(&trace.n, 1, memory_order_relaxed);
    prt_trace_ev_t *e;
    if (i >= PRT_TRACE_CAP)
        return;   /* counted as dropped */
    if (trace_tid < 0) {
        trace_tid = atomic_fetch_add(&trace.ntid, 1);
        if (trace_tid < PRT_TRACE_NAMES &&
            pthread_getname_np(pthread_self(), trace.names[trace_tid], sizeof trace.names[0]))
            trace.names[trace_tid][0] = '\0';
    }
    e = &trace.ev[i];
    e->t = prt_now_ns();
    e->a = a;
    e->id = id;
    e->b = b;
    e->tid = (uint16_t)trace_tid;
    e->ev = ev;
}

/* Writes the events (every thread that marks them has stopped) and frees
 * the buffer. */
void prt_trace_stop(void)
{
    uint64_t n = atomic_load(&trace.n), kept = n < PRT_TRACE_CAP ? n : PRT_TRACE_CAP;
    char host[256] = "";
    FILE *f;
    if (!atomic_exchange(&prt_trace_on, 0))
        return;
    f = fopen(trace.path, "w");
    if (!f) {
        prt_log(PRT_LOG_WARN, "PLAIT_TRACE: cannot write %s: %s", trace.path, strerror(errno));
    } else {
        int bad;
        gethostname(host, sizeof host - 1);
        fprintf(f, "# plait trace: rank %d pid %d host %s job %s clock CLOCK_MONOTONIC events %llu "
                "dropped %llu\n# t_ns thread event a b id\n", trace.rank, (int)getpid(), host,
                trace.job, (unsigned long long)kept, (unsigned long long)(n - kept));
        for (int t = 0; t < atomic_load(&trace.ntid) && t < PRT_TRACE_NAMES; t++)
            fprintf(f, "# thread %d %s\n", t, trace.names[t][0] ? trace.names[t] : "?");
        for (uint64_t i = 0; i < kept; i++) {
            const prt_trace_ev_t *e = &trace.ev[i];
            if (e->ev)   /* (a slot claimed but not yet written: none once threads stopped) */
                fprintf(f, "%llu %u %c %lld %d %llu\n", (unsigned long long)e->t, e->tid, e->ev,
                        (long long)e->a, e->b, (unsigned long long)e->id);
        }
        bad = ferror(f);
        if (fclose(f) != 0 || bad)
            prt_log(PRT_LOG_WARN, "PLAIT_TRACE: writing %s failed (disk full?): the timeline is "
                    "cut short", trace.path);
    }
    free(trace.ev);
    trace.ev = NULL;
    memset(trace.names, 0, sizeof trace.names);
    atomic_store(&trace.ntid, 0);
}
