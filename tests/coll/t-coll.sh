#!/bin/bash
# timeout: 1200
# t-coll.sh -- collectives under plaitrun: coll_check (tests/coll/coll_check.c)
# with 1..8 ranks, once with automatic selection and once per forced algorithm
# set (PLAIT_<COLL>_ALGO, four sets cover every algorithm of every
# collective, set d the shared-memory ones); each job checks every collective x datatype x op x in-place
# on the world and on a split communicator, several non-blocking collectives
# in flight, and bitwise-identical allreduce results across ranks. Plus:
# different reduction kernels per rank (PLAIT_REDUCE_ISA), argument errors and
# mismatched counts across ranks (error or timeout, never a hang), and a bad
# algorithm name refused by plait_init. Automatic selection runs small
# blocking collectives on the shared-memory area (coll/shm_small.c); jobs with
# PLAIT_COLL_SHM_SMALL=0 and over tcp keep the message paths tested.
# 1..4 ranks run all 11 datatypes; 5..8 ranks (oversubscribing the cores) run
# 6 of them (every size class, signedness and float kind).
# Env: PLAIT_BUILDDIR, PLAIT_SRCDIR (set by run-all.sh), PLAIT_TIMEOUT
# (default 60), PLAIT_TEST_SEED, PLAIT_TEST_QUICK=1 (no MiB sizes, fewer
# jobs), PLAIT_TEST_NP="1 2" (restrict the rank counts).
set -u

here=$(cd "$(dirname "$0")" && pwd)
B=${PLAIT_BUILDDIR:-$(cd "$here/../.." && pwd)}
PROG=$B/tests/coll/coll_check
PLAITRUN=$B/launcher/plaitrun
export PLAIT_TIMEOUT=${PLAIT_TIMEOUT:-60}
export PLAIT_TEST_SEED=${PLAIT_TEST_SEED:-20261121}
export PLAIT_TEST_QUICK=${PLAIT_TEST_QUICK:-0}
NPS=${PLAIT_TEST_NP:-"1 2 3 4 5 6 7 8"}
JOB_LIMIT=150
source "$here/../tap-lib.sh" coll

# job NAME N TIMEOUT_S ENV_ASSIGNMENTS -- ARGS...: one plaitrun job that must succeed.
# job NAME N TIMEOUT [VAR=VAL...] -- ARGS: coll_check on N ranks; N may be a
# host list ("h1:2,h2:2": hosts that are names only, every rank on this
# machine, which plait then treats as separate hosts).
job() {
    local name=$1 n=$2 tmo=$3 t0 rc where
    shift 3
    local envs=()
    while [ "$1" != "--" ]; do envs+=(-x "$1"); shift; done
    shift
    where=(-n "$n")
    case $n in *:*) where=(--host "$n" --launch-agent "env PLAIT_TEST_HOST={host}") ;; esac
    t0=$(date +%s)
    timeout -k 5 "$JOB_LIMIT" "$PLAITRUN" "${where[@]}" --bind-to none --timeout $((JOB_LIMIT - 10)) \
        -x "PLAIT_TIMEOUT=$tmo" -x PLAIT_TEST_SEED -x PLAIT_TEST_QUICK "${envs[@]}" \
        "$PROG" "$@" > "$out" 2>&1 < /dev/null
    rc=$?
    if [ "$rc" = 0 ]; then
        pass "$name ($(( $(date +%s) - t0 ))s)"
    elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        fail "$name" "hung: killed after ${JOB_LIMIT}s (seed $PLAIT_TEST_SEED)"
    else
        fail "$name" "exit status $rc after $(( $(date +%s) - t0 ))s (seed $PLAIT_TEST_SEED)" \
             "rerun: PLAIT_TEST_SEED=$PLAIT_TEST_SEED $PLAITRUN ${where[*]} ${envs[*]} $PROG $*"
    fi
    [ "$rc" = 0 ]   # (a caller may look at $out further)
}

if [ ! -x "$PROG" ] || [ ! -x "$PLAITRUN" ]; then
    echo "ok - collectives # SKIP coll_check or plaitrun not built (make check TESTS=)"
    exit 0
fi

# Four sets that together force every algorithm of every collective.
SET_auto=()
SET_a=(PLAIT_ALLREDUCE_ALGO=recursive_doubling PLAIT_ALLGATHER_ALGO=ring
       PLAIT_REDUCE_SCATTER_ALGO=ring PLAIT_BCAST_ALGO=binomial PLAIT_REDUCE_ALGO=binomial
       PLAIT_ALLTOALL_ALGO=pairwise)
SET_b=(PLAIT_ALLREDUCE_ALGO=ring PLAIT_ALLGATHER_ALGO=recursive_doubling
       PLAIT_REDUCE_SCATTER_ALGO=recursive_halving PLAIT_BCAST_ALGO=scatter_allgather
       PLAIT_REDUCE_ALGO=rabenseifner PLAIT_ALLTOALL_ALGO=bruck)
SET_c=(PLAIT_ALLREDUCE_ALGO=rabenseifner PLAIT_ALLGATHER_ALGO=bruck
       PLAIT_REDUCE_SCATTER_ALGO=ring PLAIT_BCAST_ALGO=chain PLAIT_REDUCE_ALGO=rabenseifner
       PLAIT_ALLTOALL_ALGO=scattered)
# the shared-memory (direct read) algorithms, with every size and count
SET_d=(PLAIT_ALLREDUCE_ALGO=shm PLAIT_ALLGATHER_ALGO=shm PLAIT_REDUCE_SCATTER_ALGO=shm
       PLAIT_BCAST_ALGO=shm PLAIT_ALLTOALL_ALGO=shm PLAIT_REDUCE_ALGO=shm)

sets="auto a b c d"
[ "$PLAIT_TEST_QUICK" = 1 ] && sets="auto b c d"
for n in $NPS; do
    matrix=full
    [ "$n" -gt 4 ] && matrix=reduced
    for set in $sets; do
        # the shm set beyond 4 ranks: covered by auto (large sizes) and the mixed job
        [ "$set" = d ] && [ "$n" -gt 4 ] && continue
        eval "vars=(\"\${SET_$set[@]}\")"
        label="algorithms $set"
        [ "$set" = auto ] && label="automatic selection"
        job "coll_check $n ranks, $label, $matrix matrix" "$n" "$PLAIT_TIMEOUT" \
            "${vars[@]}" -- suite "$matrix"
    done
done

# Small blocking collectives run on the shared-memory area by default
# (coll/shm_small.c); the message paths they replace (engine schedules in
# automatic selection, coll/pair.c at 2 ranks) stay tested here, and with
# PLAIT_TRANSPORT=tcp no communicator gets an area (the peers are not all
# reached through shm): every rank must agree to use messages.
for n in 2 5; do
    job "coll_check $n ranks, automatic selection, no shared area (PLAIT_COLL_SHM_SMALL=0)" \
        "$n" "$PLAIT_TIMEOUT" PLAIT_COLL_SHM_SMALL=0 -- suite reduced
done
job "coll_check 3 ranks over tcp: no shared area, message fallback" 3 "$PLAIT_TIMEOUT" \
    PLAIT_TRANSPORT=tcp PLAIT_TEST_QUICK=1 -- suite reduced
# The pipelined two-rank allreduce (coll/allreduce.c, ar_pair_pipelined: by
# default between two hosts from 2 MiB): 16 KiB chunks put every vector of
# 32 KiB or more through it, with the schedule posting rounds ahead of the
# one it reduces (coll/sched.c); in shm, over udp, with different kernels per
# rank, and with mismatched counts (chunks of different lengths).
PIPE=(PLAIT_ALLREDUCE_ALGO=recursive_doubling PLAIT_COLL_PIPE=16K)
job "coll_check 2 ranks, pipelined two-rank allreduce (PLAIT_COLL_PIPE=16K)" 2 "$PLAIT_TIMEOUT" \
    "${PIPE[@]}" -- suite full
job "coll_check 2 ranks, pipelined two-rank allreduce over udp" 2 "$PLAIT_TIMEOUT" \
    "${PIPE[@]}" PLAIT_TRANSPORT=udp -- suite reduced
job "allreduce bitwise identical with mixed kernels, pipelined (2 ranks)" 2 "$PLAIT_TIMEOUT" \
    "${PIPE[@]}" -- mixed
job "argument errors and mismatched counts, pipelined two-rank allreduce (2 ranks)" 2 3 \
    "${PIPE[@]}" -- errors
# Roots running far ahead of lagging readers on the area (slot reuse).
AHEAD=$B/tests/coll/coll_ahead
for n in 2 5; do
    if [ -x "$AHEAD" ]; then
        PROG=$AHEAD job "bcast/scatter roots running ahead of their readers ($n ranks)" \
            "$n" "$PLAIT_TIMEOUT" --
    fi
done
# Non-blocking collectives complete while no rank calls plait (the progress
# thread); with it off they must not (the check is not vacuous).
OVERLAP=$B/tests/coll/coll_overlap
if [ -x "$OVERLAP" ]; then
    for n in 2 3 5; do
        PROG=$OVERLAP job "non-blocking collectives progress while no rank calls plait ($n ranks)" \
            "$n" "$PLAIT_TIMEOUT" -- on
    done
    PROG=$OVERLAP job "non-blocking collectives progress without plait calls, udp inside the host (3 ranks)" \
        3 "$PLAIT_TIMEOUT" PLAIT_TRANSPORT=udp -- on
    PROG=$OVERLAP job "PLAIT_PROGRESS_THREAD=0: no progress outside plait calls (3 ranks)" \
        3 "$PLAIT_TIMEOUT" PLAIT_PROGRESS_THREAD=0 -- off
    # ranks bound to one CPU: the thread polls on a spare one (PLAIT_PROGRESS_POLL);
    # churn: 300 rounds of three collectives started, computed beside for 0-60 us, completed
    PROG=$OVERLAP job "progress thread polling on a spare CPU, and the churn (3 ranks)" \
        3 "$PLAIT_TIMEOUT" -- on selfbind churn
    PROG=$OVERLAP job "progress thread polling on a spare CPU, udp, and the churn (3 ranks)" \
        3 "$PLAIT_TIMEOUT" PLAIT_TRANSPORT=udp -- on selfbind churn
    PROG=$OVERLAP job "progress thread looking every 20 us on a spare CPU, and the churn (3 ranks)" \
        3 "$PLAIT_TIMEOUT" PLAIT_PROGRESS_POLL=0 -- on selfbind churn
    PROG=$OVERLAP job "progress thread on the ranks' CPUs, and the churn (2 ranks)" \
        2 "$PLAIT_TIMEOUT" -- on churn
fi
# Where the library's threads run (PLAIT_THREAD_CPU): on CPUs no rank of the
# host is bound to when the ranks are bound and some are left (here the
# ranks bind themselves to one CPU before plait_init), else on the rank's.
# The progress thread, and with PLAIT_TRANSPORT=udp the engine threads.
PCPU=$B/tests/coll/progress_cpu
if [ -x "$PCPU" ]; then
    ncpu=$(nproc)
    spare=moved
    [ "$ncpu" -ge 2 ] && "$B/tools/plait_info" 2>/dev/null | grep -q "hwloc=yes" || spare=stay
    pcpu() {   # pcpu NAME BIND [VAR=VAL...] -- ARGS (PCPU_PRE: a command to run plaitrun under)
        local name=$1 bind=$2 envs=() rc
        shift 2
        while [ "$1" != "--" ]; do envs+=(-x "$1"); shift; done
        shift
        timeout -k 5 "$JOB_LIMIT" ${PCPU_PRE:-} "$PLAITRUN" -n "${PCPU_NP:-2}" --bind-to "$bind" \
            -x "PLAIT_TIMEOUT=$PLAIT_TIMEOUT" "${envs[@]}" "$PCPU" "$@" > "$out" 2>&1 < /dev/null
        rc=$?
        if [ "$rc" = 0 ]; then pass "$name"
        else fail "$name" "exit status $rc" "rerun: $PLAITRUN -n ${PCPU_NP:-2} --bind-to $bind ${envs[*]} $PCPU $*"; fi
    }
    pcpu "library threads $spare: ranks bound to one CPU, $ncpu CPUs (2 ranks)" none -- "$spare" selfbind
    pcpu "library threads $spare: ranks bound to one CPU, udp engines too (2 ranks)" none \
        PLAIT_TRANSPORT=udp -- "$spare" selfbind
    pcpu "library threads on the rank's CPUs: PLAIT_THREAD_CPU=rank (2 ranks, udp)" none \
        PLAIT_THREAD_CPU=rank PLAIT_TRANSPORT=udp -- stay selfbind
    pcpu "library threads on the rank's CPUs: ranks unbound (2 ranks, udp)" none \
        PLAIT_TRANSPORT=udp -- stay
    # the job's CPUs are its launcher's: taskset -c 0 leaves no spare CPU
    # (threads went to CPU 1 before); a program's thread pinned elsewhere
    # that starts the first non-blocking collective does not take the
    # progress thread along (it did)
    if command -v taskset > /dev/null; then
        PCPU_PRE="taskset -c 0" pcpu "library threads stay inside taskset -c 0 (2 ranks, udp)" none \
            PLAIT_TRANSPORT=udp -- stay
    fi
    pcpu "progress thread on the rank's CPUs though a program thread elsewhere starts it (2 ranks)" \
        none PLAIT_THREAD_CPU=rank -- stay selfbind fromthread
    pcpu "progress thread $spare though a program thread elsewhere starts it (2 ranks)" none \
        -- "$spare" selfbind fromthread
    if [ "$ncpu" -ge 2 ] && [ "$ncpu" -le 8 ]; then
        PCPU_NP=$ncpu pcpu "library threads on the rank's CPUs: every core taken ($ncpu ranks bound)" \
            core -- stay
    fi
fi
# A rooted collective where only some ranks pass a count of 0 (unseen by
# them), then a correct one: that one fails or gets its own data, never the
# first call's (shared area, messages over udp, non-blocking).
ZERO=$B/tests/coll/coll_zero
if [ -x "$ZERO" ]; then
    for c in gather reduce bcast scatter; do
        PROG=$ZERO job "$c after a count-0 mismatch: no earlier call's data (3 ranks)" \
            3 5 -- "$c"
        PROG=$ZERO job "$c after a count-0 mismatch, udp, non-blocking (3 ranks)" \
            3 5 PLAIT_TRANSPORT=udp -- "$c" nb
    done
fi
# One rank refuses a call (a bad argument), the others pass good ones: with no
# PLAIT_TIMEOUT they must fail at once, naming that rank and its reason
# (pt2pt/notice.c), instead of waiting for ever; the library stays usable.
REFUSE=$B/tests/coll/coll_refuse
if [ -x "$REFUSE" ]; then
    PROG=$REFUSE job "one rank refuses a call: the others fail at once naming it, no timeout (4 ranks)" \
        4 0 --
    PROG=$REFUSE job "one rank refuses a call: direct exchange of two ranks, no timeout" 2 0 --
    PROG=$REFUSE job "one rank refuses a call: udp, plait_test loops, no timeout (3 ranks)" \
        3 0 PLAIT_TRANSPORT=udp -- test
    PROG=$REFUSE job "one rank refuses a call: message schedules only, no timeout (5 ranks)" \
        5 0 PLAIT_COLL_SHM_SMALL=0 --
    # one rank passes twice the count: the rank whose transfer shows it tells
    # the others (message schedules: ring, pairwise, binomial)
    MSG=(PLAIT_COLL_SHM_SMALL=0 PLAIT_ALLREDUCE_ALGO=ring PLAIT_ALLGATHER_ALGO=ring
         PLAIT_ALLTOALL_ALGO=pairwise PLAIT_BCAST_ALGO=binomial)
    PROG=$REFUSE job "mismatched counts seen by one rank: the others fail at once, no timeout (5 ranks)" \
        5 0 "${MSG[@]}" -- mismatch
    PROG=$REFUSE job "mismatched counts seen by one rank, udp: the others fail at once, no timeout (3 ranks)" \
        3 0 "${MSG[@]}" PLAIT_TRANSPORT=udp -- mismatch
    # one rank makes another kind of call (operator, collective, a count that
    # picks another algorithm): a message of another kind under the call's
    # number shows it (pt2pt/notice.c ppt_coll_diverged), no timeout
    PROG=$REFUSE job "another kind of call on one rank: all fail, no timeout (4 ranks)" 4 0 -- diverge
    PROG=$REFUSE job "another kind of call on one rank, message schedules: all fail, no timeout (4 ranks)" \
        4 0 "${MSG[@]}" -- diverge
    PROG=$REFUSE job "another kind of call on one rank, udp: all fail, no timeout (3 ranks)" \
        3 0 PLAIT_TRANSPORT=udp -- diverge
    # mismatches that leave no message of another kind (roots differ, a count
    # of 0 on one rank): the stalled ranks ask their peers where they are
    # (pt2pt/probe.c), no timeout
    PROG=$REFUSE job "mismatches no message shows: stalled ranks' probes find them, no timeout (4 ranks)" \
        4 0 -- silent
fi
# The root alone refuses a rooted call for a buffer only it needs (a gather's
# NULL recvbuf): the communicator must stay in step, on the shared area too
# (world's; a new one's, set up in that very call), no timeout.
ROOTBUF=$B/tests/coll/coll_rootbuf
if [ -x "$ROOTBUF" ]; then
    for n in 2 3 5; do
        PROG=$ROOTBUF job "the root refuses for its buffer alone: the communicator stays usable, no timeout ($n ranks)" \
            "$n" 0 --
    done
    PROG=$ROOTBUF job "the root refuses for its buffer alone, udp: the communicator stays usable, no timeout (3 ranks)" \
        3 0 PLAIT_TRANSPORT=udp --
    PROG=$REFUSE job "mismatches no message shows, two ranks (shared area): probes, no timeout" \
        2 0 -- silent
    PROG=$REFUSE job "mismatches no message shows, tcp: probes, no timeout (5 ranks)" \
        5 0 PLAIT_TRANSPORT=tcp -- silent
    PROG=$REFUSE job "mismatches no message shows, udp: probes, no timeout (3 ranks)" \
        3 0 PLAIT_TRANSPORT=udp -- silent
fi
# Non-blocking calls on the shared area (coll/shm_small.c, "Non-blocking
# calls"): up to 96 in flight among blocking ones, completed in every order,
# on the world and a split communicator; a root running 150 calls ahead of
# a rank blocked in a receive (publishes wait in the queue, starts never
# wait); calls pending on a freed communicator; mismatches found by the
# area's checks and by stall probes, no timeout.
NBAREA=$B/tests/coll/coll_nb_area
if [ -x "$NBAREA" ]; then
    for n in 2 3 5 8; do
        PROG=$NBAREA job "non-blocking calls on the shared area, in flight in every order ($n ranks)" \
            "$n" "$PLAIT_TIMEOUT" -- stress
    done
    PROG=$NBAREA job "non-blocking calls on the shared area, waits asleep at once (4 ranks)" \
        4 "$PLAIT_TIMEOUT" PLAIT_WAIT_SPIN_US=0 PLAIT_WAIT_YIELD_US=0 -- stress
    for n in 2 4; do
        PROG=$NBAREA job "a root 150 non-blocking calls ahead of a blocked rank ($n ranks)" \
            "$n" "$PLAIT_TIMEOUT" -- behind
    done
    PROG=$NBAREA job "non-blocking calls on the area of a freed communicator (3 ranks)" \
        3 "$PLAIT_TIMEOUT" -- freed
    # World's area is made in plait_init: non-blocking calls before any
    # blocking collective take it (each rank's PLAIT_STATS line counts all 288
    # of them there, none on messages), results checked.
    for n in 2 4; do
        name="non-blocking calls before any blocking one on world's shared area ($n ranks)"
        if PROG=$NBAREA job "$name" "$n" "$PLAIT_TIMEOUT" PLAIT_STATS=1 -- first; then
            want="collectives: 288 on the shared-memory area (288 of them non-blocking), 0 as a"
            want="$want direct exchange of 2 ranks, 0 on the schedule engine (0 of them"
            if [ "$(grep -cF "$want" "$out")" = "$n" ]; then
                pass "$name: PLAIT_STATS counts them there"
            else
                fail "$name: PLAIT_STATS counts them there" "expected $n lines with: $want"
            fi
        fi
    done
    for n in 2 4; do
        PROG=$NBAREA job "non-blocking mismatches on the shared area: checks and probes, no timeout ($n ranks)" \
            "$n" 0 -- diverge
    done
fi
# Edge cases of every collective, written against API.md alone by a reader
# who had not seen this suite (tests/coll/coll_edges.c: counts 0/1/odd/8 MiB,
# NULL buffers at count 0, every root, in-place forms, alltoallv gaps and
# displacements past 2^32, every datatype x op, bitwise-equal floats, splits
# with PLAIT_UNDEFINED, 20 non-blocking calls completed in other orders,
# argument errors naming the argument, size_t overflow, buffers at odd
# addresses, communicator churn, threads).
EDGES=$B/tests/coll/coll_edges
if [ -x "$EDGES" ]; then
    for n in 2 3 5 8; do
        PROG=$EDGES job "edge cases of every collective ($n ranks)" "$n" "$PLAIT_TIMEOUT" --
    done
    PROG=$EDGES job "edge cases of every collective, no shared area (4 ranks)" 4 "$PLAIT_TIMEOUT" \
        PLAIT_COLL_SHM_SMALL=0 --
    PROG=$EDGES job "edge cases of every collective over udp (3 ranks)" 3 "$PLAIT_TIMEOUT" \
        PLAIT_TRANSPORT=udp --
fi
# Collectives on several communicators at once, a thread each, beside
# point-to-point threads, communicators made and freed meanwhile (API.md
# "Threads": different communicators are independent; tests/coll/coll_threads.c).
THREADS=$B/tests/coll/coll_threads
if [ -x "$THREADS" ]; then
    for n in 2 3 8; do
        PROG=$THREADS job "collectives from 5 threads on 5 communicators, pt2pt beside ($n ranks)" \
            "$n" "$PLAIT_TIMEOUT" -- plain -p 2
    done
    PROG=$THREADS job "threads' collectives while the main thread makes and frees communicators (4 ranks)" \
        4 "$PLAIT_TIMEOUT" -- churn
    PROG=$THREADS job "threads' collectives over udp, init and finalize in other threads (3 ranks)" \
        3 "$PLAIT_TIMEOUT" PLAIT_TRANSPORT=udp -- plain -F 1
    PROG=$THREADS job "threads' collectives over tcp, no shared area (4 ranks)" \
        4 "$PLAIT_TIMEOUT" PLAIT_TRANSPORT=tcp -- churn
fi
# Blocked calls go to sleep at once: area waits end on the bell's futex wake.
job "coll_check 5 ranks, blocked calls sleep at once (shared area bell)" 5 "$PLAIT_TIMEOUT" \
    PLAIT_WAIT_SPIN_US=0 PLAIT_WAIT_YIELD_US=0 PLAIT_TEST_QUICK=1 -- suite reduced

# A timed-out plait_wait leaves a non-blocking collective posted: waiting
# again completes it, with the right data (shared memory, udp).
job "iallreduce: a timed-out wait leaves it posted, the next wait completes it (4 ranks)" 4 2 \
    -- rewait
job "iallreduce: a timed-out wait leaves it posted, over udp (3 ranks)" 3 2 \
    PLAIT_TRANSPORT=udp -- rewait

# Every rank on a different kernel family: results must still agree bitwise.
job "allreduce bitwise identical with scalar/avx2/avx512 kernels on different ranks (3 ranks)" \
    3 "$PLAIT_TIMEOUT" PLAIT_ALLREDUCE_ALGO=recursive_doubling -- mixed
job "allreduce bitwise identical with mixed kernels, ring (6 ranks)" \
    6 "$PLAIT_TIMEOUT" PLAIT_ALLREDUCE_ALGO=ring -- mixed
job "allreduce bitwise identical with mixed kernels, shm (5 ranks)" \
    5 "$PLAIT_TIMEOUT" PLAIT_ALLREDUCE_ALGO=shm -- mixed
job "allreduce bitwise identical with mixed kernels, automatic: shared area when small (4 ranks)" \
    4 "$PLAIT_TIMEOUT" -- mixed

# Argument errors, then mismatched counts: error or PLAIT_TIMEOUT, no hang.
job "argument errors and mismatched counts (4 ranks)" 4 3 -- errors
job "argument errors and mismatched counts (2 ranks, shared-memory area of coll/shm_small.c)" 2 3 \
    -- errors
job "argument errors and mismatched counts (2 ranks, direct exchange of coll/pair.c)" 2 3 \
    PLAIT_COLL_SHM_SMALL=0 -- errors
job "argument errors and mismatched counts (3 ranks, chain/rabenseifner)" 3 3 \
    PLAIT_BCAST_ALGO=chain PLAIT_ALLREDUCE_ALGO=rabenseifner -- errors
# Finalize meets only finalize: stale traffic of a failed collective (and of
# the shared area's setup) used to pair with it (PLAIT_ERR_ARG / PEER).
job "finalize OK after a bcast with mismatched roots and a barrier (3 ranks)" 3 3 -- rootmismatch
job "finalize OK after a bcast with mismatched roots and a barrier (4 ranks)" 4 3 -- rootmismatch
job "finalize OK after a bcast with mismatched roots and a barrier (3 ranks, udp)" 3 3 \
    PLAIT_TRANSPORT=udp -- rootmismatch
# Mismatched roots in every bcast schedule: a rank either fails or holds
# the data of the root it passed (chain and scatter_allgather used to hand
# the last rank root 0's data with PLAIT_OK: the root is in the tags now).
# PLAIT_TIMEOUT 5: finalize's barrier must meet within it, and once in ~50
# runs on the loaded 2-core CI machine a rank came 3.2-3.9 s late (session
# 36; the same code passed 16 reruns, 6 of them three jobs at once).
for algo in binomial chain scatter_allgather; do
    for n in 3 4; do
        job "bcast $algo, mismatched roots: an error or the passed root's data ($n ranks)" \
            "$n" 5 PLAIT_BCAST_ALGO=$algo -- rootdata
    done
done

# A rank silent through a collective: the others time out; the one whose
# shared-memory send it might have been reading says it waited for it too.
job "a rank asleep in an allreduce: PLAIT_ERR_TIMEOUT, the wait to withdraw sends reported (2 x 2 ranks)" \
    h1:2,h2:2 2 -- hangpeer

# A bad algorithm name fails plait_init with the valid choices (singleton).
t0=$(date +%s)
PLAIT_ALLREDUCE_ALGO=fastest timeout -k 5 60 "$PROG" badalgo > "$out" 2>&1 < /dev/null
rc=$?
if [ "$rc" = 0 ]; then pass "PLAIT_ALLREDUCE_ALGO=fastest refused by plait_init, choices listed"
else fail "PLAIT_ALLREDUCE_ALGO=fastest refused by plait_init" "exit status $rc"; fi

[ "$failures" = 0 ]
