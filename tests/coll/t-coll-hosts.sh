#!/bin/bash
# timeout: 300
# t-coll-hosts.sh -- the collectives' correctness suite (coll_check, see its
# header: every collective x datatype x op x in-place, on the world and on a
# split communicator, non-blocking ones in flight, bitwise-identical
# allreduce results) across hosts made of network namespaces
# (tests/netns/netns.sh), under plaitrun with --launch-agent:
#   2 hosts x 1 rank, 2 x 2, 3 hosts x (2,1,2) uneven, 3 x (2,1,2) placed
#   round-robin (--map-by node: a host's ranks are not consecutive), and
#   3 x 2 and 3 x 3 (by node) for the two-level schedules' several columns;
#   default transports (shm inside a host, udp between), PLAIT_TRANSPORT=udp
#   (udp for every pair, loopback inside a host), PLAIT_TRANSPORT=tcp,
#   and two_level forced for allreduce, allgather and reduce_scatter (the
#   split communicator of the suite then spans fewer hosts, or one; uneven
#   hosts run the ring for the latter two); and coll_check mixed (a different
#   reduction kernel family per rank, results bitwise identical) with it.
# First, without namespaces: two_level forced on one host (3 and 4 ranks: it
# degenerates to its intra-host steps). Each job runs `suite reduced` with
# PLAIT_TEST_QUICK=1 (no MiB sizes).
# Env: PLAIT_BUILDDIR, PLAIT_SRCDIR, PLAIT_TEST_SEED, PLAIT_TEST_QUICK
# (default 1). Needs root and `ip netns` (else SKIP). TAP; exit 0 when no case
# failed.
set -u

here=$(cd "$(dirname "$0")" && pwd)
SRCDIR=${PLAIT_SRCDIR:-$(cd "$here/../.." && pwd)}
B=${PLAIT_BUILDDIR:-$SRCDIR}
PROG=$B/tests/coll/coll_check
PLAITRUN=$B/launcher/plaitrun
NETNS=$SRCDIR/tests/netns/netns.sh
JOB_LIMIT=90        # seconds: hang guard per job, never a pass criterion
export PLAIT_TEST_SEED=${PLAIT_TEST_SEED:-20261121}
export PLAIT_TEST_QUICK=${PLAIT_TEST_QUICK:-1}
source "$here/../tap-lib.sh" coll-hosts

if [ ! -x "$PROG" ] || [ ! -x "$PLAITRUN" ]; then
    echo "ok - collectives across hosts # SKIP coll_check or plaitrun not built (make check TESTS=)"
    exit 0
fi
# verdict NAME RC T0 RERUN: TAP line for a finished job
verdict() {
    if [ "$2" = 0 ] && grep -q "${OK:-calls ok}" "$out"; then
        pass "$1 ($(( $(date +%s) - $3 ))s)"
    elif [ "$2" = 124 ] || [ "$2" = 137 ]; then
        fail "$1" "hung: killed after ${JOB_LIMIT}s (seed $PLAIT_TEST_SEED)"
    else
        fail "$1" "exit status $2 (seed $PLAIT_TEST_SEED)" "rerun: $4"
    fi
}

for n in 3 4; do
    t0=$(date +%s)
    timeout -k 5 $JOB_LIMIT "$PLAITRUN" -n $n --bind-to none --timeout $((JOB_LIMIT - 10)) \
        -x PLAIT_TIMEOUT=60 -x PLAIT_TEST_SEED -x PLAIT_TEST_QUICK -x PLAIT_ALLREDUCE_ALGO=two_level \
        -x PLAIT_ALLGATHER_ALGO=two_level -x PLAIT_REDUCE_SCATTER_ALGO=two_level \
        "$PROG" suite reduced > "$out" 2>&1 < /dev/null
    verdict "1 host x $n ranks, two_level" $? "$t0" \
        "plaitrun -n $n -x PLAIT_{ALLREDUCE,ALLGATHER,REDUCE_SCATTER}_ALGO=two_level $PROG suite reduced"
done

if ! why=$("$NETNS" check 2>&1); then
    echo "ok - collectives across hosts # SKIP no network namespaces here: $why"
    exit 0
fi

PFX="pch$$"
NHOSTS=3
WORK=$(mktemp -d /tmp/t-coll-hosts.XXXXXX)
export TMPDIR=$WORK/tmp           # the daemons' PMIx temp dirs land here
mkdir -p "$TMPDIR"
ns_pids() {
    local i
    for i in $(seq 1 $NHOSTS); do ip netns pids "$PFX-h$i" 2>/dev/null; done
}
cleanup() {
    ns_pids | xargs -r kill -KILL 2>/dev/null
    "$NETNS" down "$PFX"
    rm -rf "$WORK" "$out"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
if ! err=$("$NETNS" up "$PFX" $NHOSTS 2>&1); then
    echo "not ok - build $NHOSTS namespace hosts"
    echo "# $err"
    exit 1
fi

# job NAME PLAITRUN-ARGS... -- ENV...: coll_check $MODE (default: suite
# reduced), the head in host h1; passes when plaitrun exits 0 and rank 0
# reports its calls.
job() {
    local name=$1 t0 rc args=() envs=()
    shift
    while [ "$1" != "--" ]; do args+=("$1"); shift; done
    shift
    for e in "$@"; do envs+=(-x "$e"); done
    t0=$(date +%s)
    timeout -k 5 $JOB_LIMIT "$NETNS" exec "$PFX" h1 "$PLAITRUN" \
        --launch-agent "ip netns exec $PFX-{host}" --bind-to none --timeout $((JOB_LIMIT - 10)) \
        -x PLAIT_TIMEOUT=60 -x PLAIT_TEST_SEED -x PLAIT_TEST_QUICK "${envs[@]}" "${args[@]}" \
        "$PROG" ${MODE:-suite reduced} > "$out" 2>&1 < /dev/null
    rc=$?
    verdict "$name" "$rc" "$t0" "plaitrun ${args[*]} ${envs[*]} $PROG ${MODE:-suite reduced}"
    ns_pids | xargs -r kill -KILL 2>/dev/null    # nothing may outlive a job
}

TL=PLAIT_TRANSPORT=udp
TWO="PLAIT_ALLREDUCE_ALGO=two_level PLAIT_ALLGATHER_ALGO=two_level PLAIT_REDUCE_SCATTER_ALGO=two_level"
job "2 hosts x 1 rank"                     --host h1:1,h2:1 --
# the pipelined two-rank allreduce (chunks posted ahead) between hosts: 16
# KiB chunks put every vector of 32 KiB or more through it at QUICK sizes
job "2 hosts x 1 rank, pipelined allreduce"  --host h1:1,h2:1 -- PLAIT_COLL_PIPE=16K
job "2 hosts x 2 ranks"                    --host h1:2,h2:2 --
job "3 hosts x (2,1,2)"                    --host h1:2,h2:1,h3:2 --
job "2 hosts x 2 ranks, udp"               --host h1:2,h2:2 -- $TL
job "3 hosts x (2,1,2), udp"               --host h1:2,h2:1,h3:2 -- $TL
job "2 hosts x 2 ranks, tcp"               --host h1:2,h2:2 -- PLAIT_TRANSPORT=tcp
job "3 hosts x (2,1,2), tcp, two_level"    --host h1:2,h2:1,h3:2 -- PLAIT_TRANSPORT=tcp $TWO
job "2 hosts x 1 rank, two_level"          --host h1:1,h2:1 -- $TWO
job "2 hosts x 2 ranks, two_level"         --host h1:2,h2:2 -- $TWO
job "3 hosts x (2,1,2), two_level"         --host h1:2,h2:1,h3:2 -- $TWO
job "3 hosts x 2 ranks, two_level"         --host h1:2,h2:2,h3:2 -- $TWO
job "3 hosts x 3 ranks by node, two_level" --host h1:3,h2:3,h3:3 --map-by node -- $TWO
job "3 hosts x (2,1,2) by node, two_level" --host h1:2,h2:1,h3:2 --map-by node -- $TWO
job "3 hosts x (2,1,2), udp, two_level"    --host h1:2,h2:1,h3:2 -- $TL $TWO
job "2 hosts x 2 ranks by node, udp, two_level" --host h1:2,h2:2 --map-by node -- $TL $TWO
# bitwise-identical results with a different reduction kernel family per rank
MODE=mixed job "3 hosts x (2,1,2), two_level, mixed kernels" --host h1:2,h2:1,h3:2 -- $TWO
MODE=mixed job "2 hosts x 2 ranks, two_level, mixed kernels" --host h1:2,h2:2 -- $TWO
# non-blocking collectives completing while no rank calls plait (progress thread)
PROG=$B/tests/coll/coll_overlap MODE=on job "3 hosts x (2,1,2), no plait calls while in flight" \
    --host h1:2,h2:1,h3:2 --
# Hosts sharing this machine, ranks bound: the library threads (progress,
# udp engines) keep off every host's ranks' cores (plaitrun records them,
# PLAIT_LAUNCH_CPUS_FILE): on a spare core when there is one, else on the
# rank's own (on 2 cores they went to the other host's rank's core before)
spare=stay
[ "$(nproc)" -ge 4 ] && "$B/tools/plait_info" 2>/dev/null | grep -q "hwloc=yes" && spare=moved
OK="library threads" PROG=$B/tests/coll/progress_cpu MODE=$spare job "2 hosts x 1 rank bound: library threads $spare, off the other host's ranks" \
    --host h1:1,h2:1 --bind-to core --
# bound ranks: each host's progress thread polls on a core its ranks left
PROG=$B/tests/coll/coll_overlap MODE="on churn" job "2 hosts x 1 rank bound, polling progress thread, churn" \
    --host h1:1,h2:1 --bind-to core --
# one rank refuses a call (a bad argument): with no PLAIT_TIMEOUT the others,
# on both hosts, fail at once naming it (pt2pt/notice.c) instead of waiting
OK="coll_refuse: ok" PROG=$B/tests/coll/coll_refuse MODE=" " job "2 hosts x 2 ranks, one rank refuses a call: the others fail at once" \
    --host h1:2,h2:2 -- PLAIT_TIMEOUT=0
# mismatches no message shows (roots differ, a count of 0): the stalled ranks'
# probes cross hosts too (pt2pt/probe.c)
OK="coll_refuse: ok" PROG=$B/tests/coll/coll_refuse MODE=silent job "2 hosts x 2 ranks, mismatches no message shows: probes find them" \
    --host h1:2,h2:2 -- PLAIT_TIMEOUT=0
exit $((failures > 0))
