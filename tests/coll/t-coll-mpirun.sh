#!/bin/bash
# timeout: 240
# t-coll-mpirun.sh -- the collectives' correctness suite (coll_check, see its
# header) under Open MPI's mpirun, plait as a PMIx client of ORTE: automatic
# selection at 2, 3 and 4 ranks, and the two-level allreduce forced at 3 ranks
# (one host: it degenerates to its intra-host steps). PLAIT_TEST_QUICK=1 and
# the reduced datatype set keep each job short (about 20 s on 2 cores).
# Skips (one SKIP line) when mpirun is not installed or is not Open MPI.
# Env: see tests/peers/peers-lib.sh (PLAIT_BUILDDIR, PLAIT_SRCDIR,
# PLAIT_TEST_NP: rank counts, default "2 3 4"; PLAIT_TEST_QUICK default 1).
set -u
here=$(cd "$(dirname "$0")" && pwd)
PLAIT_TEST_NP=${PLAIT_TEST_NP:-"2 3 4"}
export PLAIT_TEST_QUICK=${PLAIT_TEST_QUICK:-1}
# shellcheck source=../peers/peers-lib.sh
. "$here/../peers/peers-lib.sh"
trap 'peers_cleanup' EXIT
trap 'exit 1' INT TERM
LNAME=mpirun
PROG=$B/tests/coll/coll_check

have_ompi_mpirun "coll_check under mpirun" || exit 0
have_prog "$PROG" "coll_check under mpirun" || exit 0

# As in tests/peers/t-mpirun.sh: session directory under our temp dir, root
# allowed, ranks not pinned (2 cores); local ranks inherit PLAIT_* from here.
export OMPI_MCA_orte_tmpdir_base=$peers_tmp
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
launch_cmd() {
    L=(mpirun --oversubscribe --bind-to none -np "$1")
}

echo "# $(timeout 20 mpirun --version 2>&1 | head -n1), ranks: $NPS"
for n in $NPS; do
    job "mpirun: coll_check suite reduced -n $n" "$n" "" "$PROG" suite reduced
    [ "$rc" = 0 ] && ! grep -q "calls ok on $n ranks" "$out" &&
        fail "mpirun: coll_check -n $n reported its calls" "no 'calls ok on $n ranks' from rank 0"
done
PLAIT_ALLREDUCE_ALGO=two_level job "mpirun: coll_check suite reduced -n 3 (two_level forced)" \
    3 "" "$PROG" suite reduced
# one rank refuses a call, or runs another kind of call: with no timeout the
# others fail at once (pt2pt/notice.c), under mpirun too
if [ -x "$B/tests/coll/coll_refuse" ]; then
    PLAIT_TIMEOUT=0 job "mpirun: one rank refuses a call, the others fail at once -n 4" \
        4 "" "$B/tests/coll/coll_refuse"
    PLAIT_TIMEOUT=0 job "mpirun: another kind of call on one rank, all fail at once -n 3" \
        3 "" "$B/tests/coll/coll_refuse" diverge
    PLAIT_TIMEOUT=0 job "mpirun: mismatches no message shows, stalled ranks' probes find them -n 4" \
        4 "" "$B/tests/coll/coll_refuse" silent
fi
# the root alone refuses for its buffer: the communicator stays in step
if [ -x "$B/tests/coll/coll_rootbuf" ]; then
    PLAIT_TIMEOUT=0 job "mpirun: the root refuses for its buffer alone, the communicator stays usable -n 3" \
        3 "" "$B/tests/coll/coll_rootbuf"
fi
# non-blocking calls on the shared area in every order, under mpirun too
if [ -x "$B/tests/coll/coll_nb_area" ]; then
    job "mpirun: non-blocking calls on the shared area, in flight in every order -n 3" \
        3 "" "$B/tests/coll/coll_nb_area" stress
fi
# the edge cases of every collective (tests/coll/coll_edges.c), under mpirun too
if [ -x "$B/tests/coll/coll_edges" ]; then
    job "mpirun: edge cases of every collective -n 4" 4 "" "$B/tests/coll/coll_edges"
fi
if [ -x "$B/tests/coll/coll_threads" ]; then
    job "mpirun: collectives from threads on their own communicators -n 3" 3 "" \
        "$B/tests/coll/coll_threads" churn
fi
peers_finish
