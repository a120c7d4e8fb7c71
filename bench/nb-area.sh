#!/bin/bash
# nb-area.sh ROUNDS [RANKS...] -- one host, ranks bound: non-blocking
# allreduce started then waited at once (bench/nb-overlap's nb-wait column),
# next to the blocking call and the share of it hidden behind as much
# computation, for two builds, base against new, rounds in alternating order
# (session 38: non-blocking collectives on the shared-memory area), and Open
# MPI's MPI_Iallreduce + MPI_Wait timed by the same code (bench/nb-overlap-mpi,
# btl self,vader, ranks bound).
# Run on the device machine with the tarballs carried (bench/device-ab.sh):
#   here:  make dist; cp BASE-TARBALL kit/base.tar.gz
#   there: bench/nb-area.sh 4 2 4 8
# Output: "== N" (ranks) then "BUILD ROUND: size blocking nb-wait hidden% | ..."
# lines (us); bench/nb-area-table.py turns them into a median table.
cd "$(dirname "$0")/.." || exit 1
rounds=${1:?rounds}; shift
ranks=${*:-2 4 8}
rm -rf /tmp/new /tmp/base
# shellcheck source=bench/device-ab.sh
source bench/device-ab.sh kit/base.tar.gz plait-0.1.0.tar.gz || exit 1
run() {   # run BUILD N (BUILD base, new or ompi): one line of cells
    local p=/tmp/$1/plait-0.1.0 args=(-b 8 -e 64K -n 2000)
    if [ "$1" = ompi ]; then
        mpirun --allow-run-as-root -np "$2" --bind-to core --mca btl self,vader \
            /tmp/new/plait-0.1.0/bench/nb-overlap-mpi "${args[@]}"
    else
        "$p/launcher/plaitrun" --bind-to core -n "$2" "$p/bench/nb-overlap" "${args[@]}"
    fi 2>&1 | awk '$1 ~ /^[0-9]+$/ {printf "%s %s %s %s | ", $1, $2, $3, $6} END {print ""}'
}
ab_rounds "$rounds" "base new ompi" "$ranks" run
