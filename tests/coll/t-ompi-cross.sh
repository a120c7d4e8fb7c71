#!/bin/bash
# timeout: 300
# t-ompi-cross.sh -- plait and Open MPI give the same results on the same
# inputs. Both run the same benchmark core (tools/ptool_coll.c: `plait-bench
# coll` and bench/nccltests_mpi) with -c 1 -H: every rank fills its inputs
# with the same deterministic integers, runs each collective out-of-place and
# in-place, checks every element against a locally computed reference, and
# hashes its output; the hash over all ranks must be identical for the two
# libraries (integer and float results of small integers: bitwise), for every
# size of the sweep. Skips when Open MPI's mpirun or nccltests_mpi is missing.
# Env: PLAIT_BUILDDIR, PLAIT_TEST_QUICK=1 (fewer cases).
set -u
here=$(cd "$(dirname "$0")" && pwd)
B=${PLAIT_BUILDDIR:-$(cd "$here/../.." && pwd)}
PLAITRUN=$B/launcher/plaitrun
BENCH=$B/tools/plait-bench
NCCLT=$B/bench/nccltests_mpi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failures=0
tmp=$(mktemp -d /tmp/plait-t-ompi-cross.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

if [ ! -x "$PLAITRUN" ] || [ ! -x "$BENCH" ] || [ ! -x "$NCCLT" ] || ! command -v mpirun >/dev/null; then
    echo "ok - plait vs Open MPI cross-check # SKIP plaitrun, plait-bench, nccltests_mpi or mpirun missing"
    exit 0
fi

# case NP COLL TYPE OP [ROOT]
case1() {
    local np=$1 coll=$2 t=$3 op=$4 root=${5:-0} name args rc1 rc2
    name="$coll $t $op, $np ranks${5:+, root $root}"
    args=("$coll" -b 8 -e 256K -f 8 -d "$t" -o "$op" -r "$root" -n 1 -w 1 -c 1 -H)
    timeout -k 5 120 "$PLAITRUN" -n "$np" --bind-to none "$BENCH" coll "${args[@]}" \
        >"$tmp/p" 2>&1 </dev/null
    rc1=$?
    timeout -k 5 120 mpirun -np "$np" --oversubscribe --bind-to none --mca btl self,vader \
        "$NCCLT" "${args[@]}" >"$tmp/m" 2>&1 </dev/null
    rc2=$?
    grep '^# hash' "$tmp/p" >"$tmp/ph"
    grep '^# hash' "$tmp/m" >"$tmp/mh"
    if [ $rc1 = 0 ] && [ $rc2 = 0 ] && [ -s "$tmp/ph" ] && cmp -s "$tmp/ph" "$tmp/mh"; then
        echo "ok - $name: same results ($(wc -l <"$tmp/ph") size x placement hashes)"
        return
    fi
    echo "not ok - $name"
    echo "# plait exit $rc1, Open MPI exit $rc2; differing hashes (plait <, Open MPI >):"
    diff "$tmp/ph" "$tmp/mh" | head -10 | sed 's/^/#   /'
    tail -5 "$tmp/p" "$tmp/m" | sed 's/^/#   /'
    failures=$((failures + 1))
}

nps="2 3 4"
[ "${PLAIT_TEST_QUICK:-0}" = 1 ] && nps="3"
for np in $nps; do
    case1 "$np" allreduce int32 sum
    case1 "$np" allreduce int64 max
    case1 "$np" allreduce double sum
    case1 "$np" reduce_scatter int32 sum
    case1 "$np" reduce_scatter float min
    case1 "$np" allgather uint8 sum
    case1 "$np" alltoall int32 sum
    case1 "$np" alltoallv int64 sum
    case1 "$np" bcast int32 sum $((np - 1))
    case1 "$np" reduce int32 prod 1
    case1 "$np" gather int32 sum 1
    case1 "$np" scatter double sum $((np - 1))
done
[ "$failures" = 0 ]
