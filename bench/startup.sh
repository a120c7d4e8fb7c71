#!/bin/bash
# startup.sh -- how long a trivial job takes from launch to exit: N ranks that
# only initialize and finalize (bench/hello_plait under plaitrun, bench/hello_mpi
# under mpirun). Runs alternate between the two launchers; each cell is over
# REPS runs. Ranks may outnumber cores (mpirun gets --oversubscribe); neither
# side binds ranks, so both place them the same way.
#
# Usage: bench/startup.sh [-n RANKS] [-r REPS] [BUILDDIR]
#   BUILDDIR  top build dir (default: $PLAIT_BUILDDIR, else the current dir)
#   -n RANKS  ranks per job (default 8)
#   -r REPS   runs per launcher (default 5)
# Prints a markdown report on stdout; exit 1 if a run failed.

set -u
ranks=8
reps=5
usage() { sed -n '2,/^# Prints/s/^# \{0,1\}//p' "$0"; }
while getopts "n:r:h" opt; do
    case $opt in
    n) ranks=$OPTARG ;;
    r) reps=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
B=${1:-${PLAIT_BUILDDIR:-.}}
for v in "$ranks" "$reps"; do
    case $v in ''|*[!0-9]*|0) echo "startup.sh: -n and -r need numbers >= 1" >&2; exit 2 ;; esac
done

PLAITRUN=$B/launcher/plaitrun
HELLO_PLAIT=$B/bench/hello_plait
HELLO_MPI=$B/bench/hello_mpi
for f in "$PLAITRUN" "$HELLO_PLAIT" "$HELLO_MPI"; do
    [ -x "$f" ] || { echo "startup.sh: $f not built (BUILDDIR=$B)" >&2; exit 1; }
done
command -v mpirun >/dev/null || { echo "startup.sh: mpirun not found" >&2; exit 1; }

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
RUN_PLAIT=("$PLAITRUN" -n "$ranks" --bind-to none "$HELLO_PLAIT")
RUN_MPI=(mpirun -np "$ranks" --oversubscribe --bind-to none --mca btl self,vader "$HELLO_MPI")

raw=$(mktemp -d /tmp/startup.XXXXXX) || exit 1
trap 'rm -rf "$raw"' EXIT

# one LIB: runs one job, appends its wall time in ms to $raw/LIB
one() {
    local lib=$1 t0 t1 rc
    t0=$(date +%s%N)
    if [ "$lib" = plait ]; then
        timeout 120 "${RUN_PLAIT[@]}" >"$raw/out" 2>&1
    else
        timeout 120 "${RUN_MPI[@]}" >"$raw/out" 2>&1
    fi
    rc=$?
    t1=$(date +%s%N)
    if [ $rc -ne 0 ]; then
        echo "startup.sh: $lib job failed with status $rc:" >&2
        head -20 "$raw/out" | sed 's/^/  /' >&2
        return 1
    fi
    echo $(((t1 - t0) / 1000)) | awk '{ printf "%.1f\n", $1 / 1000 }' >>"$raw/$lib"
}

# stats LIB: "median min max"
stats() {
    sort -g "$raw/$1" | awk '{ v[NR] = $1 } END {
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR/2] + v[NR/2 + 1]) / 2
        printf "%.1f %.1f %.1f\n", m, v[1], v[NR] }'
}

# one untimed job each first: page cache and dynamic loading warm for both
one plait && one mpi || exit 1
: >"$raw/plait"; : >"$raw/mpi"
for rep in $(seq 1 "$reps"); do
    if [ $((rep % 2)) -eq 1 ]; then order="plait mpi"; else order="mpi plait"; fi
    for lib in $order; do one "$lib" || exit 1; done
done

read -r pm pmin pmax < <(stats plait)
read -r mm mmin mmax < <(stats mpi)
echo "## Job start-up and teardown: $ranks ranks, init + finalize ($(date -u +%Y-%m-%dT%H:%MZ))"
echo
echo "- machine: $(hostname), $(nproc) cores, $(uname -sr)"
echo "- plait: \`plaitrun -n $ranks --bind-to none hello_plait\`"
echo "- Open MPI: \`mpirun -np $ranks --oversubscribe --bind-to none --mca btl self,vader hello_mpi\` ($(mpirun --version 2>/dev/null | head -1))"
echo "- wall time from launch to launcher exit, $reps runs each, interleaved, after one untimed run each"
echo
echo "| Launcher | median (ms) | min (ms) | max (ms) |"
echo "|----------|------------:|---------:|---------:|"
echo "| plaitrun | $pm | $pmin | $pmax |"
echo "| mpirun   | $mm | $mmin | $mmax |"
echo
awk -v a="$pm" -v b="$mm" 'BEGIN { if (b > 0) printf "plait / Open MPI (median): %.2f\n", a / b }'
