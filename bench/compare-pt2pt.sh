#!/bin/bash
# compare-pt2pt.sh -- plait next to Open MPI on the OSU-style pt2pt benchmarks,
# on this machine, in one run. Both sides run the same benchmark code
# (tools/ptool_pt2pt.c): plait-bench under plaitrun, bench/osu_mpi_pt2pt under
# mpirun with shared memory (btl self,vader), 2 ranks bound to cores. The runs
# are interleaved (and the order flips every repetition) so drifting machine
# load hits both sides alike; each cell is the median over the repetitions.
#
# Usage: bench/compare-pt2pt.sh [-r REPS] [-k DIR] [BUILDDIR]
#   BUILDDIR  top build dir (default: $PLAIT_BUILDDIR, else the current dir)
#   -r REPS   repetitions of every run (default 3)
#   -k DIR    keep every raw output in DIR
# Prints a markdown report on stdout; exit 1 if a run failed.

set -u
reps=3
keep=""
usage() { sed -n '2,/^# Prints/s/^# \{0,1\}//p' "$0"; }
while getopts "r:k:h" opt; do
    case $opt in
    r) reps=$OPTARG ;;
    k) keep=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
B=${1:-${PLAIT_BUILDDIR:-.}}
case $reps in ''|*[!0-9]*|0) echo "compare-pt2pt.sh: -r needs a number >= 1" >&2; exit 2 ;; esac

PLAITRUN=$B/launcher/plaitrun
BENCH=$B/tools/plait-bench
OSU=$B/bench/osu_mpi_pt2pt
for f in "$PLAITRUN" "$BENCH" "$OSU"; do
    [ -x "$f" ] || { echo "compare-pt2pt.sh: $f not built (BUILDDIR=$B)" >&2; exit 1; }
done
command -v mpirun >/dev/null || { echo "compare-pt2pt.sh: mpirun not found" >&2; exit 1; }

# Open MPI refuses root without these; harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
RUN_PLAIT=("$PLAITRUN" -n 2 --bind-to core "$BENCH" pt2pt)
RUN_MPI=(mpirun -np 2 --mca btl self,vader --bind-to core "$OSU")
LAT_ARGS=(latency -b 1 -e 4K)
BW_ARGS=(bw -b 64K -e 16M)
LAT_SIZES="1 8 64 512 4096"
BW_SIZES="65536 1048576 16777216"

raw=$(mktemp -d /tmp/compare-pt2pt.XXXXXX) || exit 1
trap 'rm -rf "$raw"' EXIT

# one LIB MODE REP: runs a benchmark, appends "size value" rows to $raw/LIB.MODE
one() {
    local lib=$1 mode=$2 rep=$3 args out=$raw/$1.$2.$3
    if [ "$mode" = lat ]; then args=("${LAT_ARGS[@]}"); else args=("${BW_ARGS[@]}"); fi
    if [ "$lib" = plait ]; then
        timeout 300 "${RUN_PLAIT[@]}" "${args[@]}" >"$out" 2>"$out.err"
    else
        timeout 300 "${RUN_MPI[@]}" "${args[@]}" >"$out" 2>"$out.err"
    fi
    local rc=$?
    if [ $rc -ne 0 ]; then
        echo "compare-pt2pt.sh: $lib $mode (repetition $rep) failed with status $rc:" >&2
        sed 's/^/  /' "$out.err" "$out" | head -20 >&2
        return 1
    fi
    awk '!/^#/ && NF >= 2 { print $1, $2 }' "$out" >>"$raw/$lib.$mode"
}

# shellcheck source=table-lib.sh
. "$(dirname "$0")/table-lib.sh"     # median, spread, human, ratio

table() {   # MODE SIZES
    local s p m
    echo "| Size | plait | Open MPI | plait / Open MPI | plait min-max | Open MPI min-max |"
    echo "|-----:|------:|---------:|-----------------:|--------------:|-----------------:|"
    for s in $2; do
        p=$(median "$raw/plait.$1" "$s"); m=$(median "$raw/mpi.$1" "$s")
        echo "| $(human "$s") | $p | $m | $(ratio "$p" "$m") | $(spread "$raw/plait.$1" "$s") |" \
             "$(spread "$raw/mpi.$1" "$s") |"
    done
}

for rep in $(seq 1 "$reps"); do
    # flip the order every repetition so neither side always runs first
    if [ $((rep % 2)) -eq 1 ]; then order="plait mpi"; else order="mpi plait"; fi
    for mode in lat bw; do
        for lib in $order; do
            one "$lib" "$mode" "$rep" || exit 1
        done
    done
done

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
plait_ver=$(sed -n 's/^# library: plait | version: \([^ ]*\).*/\1/p' "$raw/plait.lat.1" | head -1)
mpi_ver=$(sed -n 's/^# library: MPI | version: \(.*\) | ranks.*/\1/p' "$raw/mpi.lat.1" | head -1)
echo "## pt2pt: plait vs Open MPI ($(date -u +%Y-%m-%dT%H:%MZ))"
echo
echo "- machine: $(hostname), $(nproc) cores ($cpu), $(uname -sr)"
echo "- libraries: plait $plait_ver; $mpi_ver"
echo "- plait: \`${RUN_PLAIT[*]##*/} ...\`; Open MPI: \`mpirun -np 2 --mca btl self,vader --bind-to core osu_mpi_pt2pt ...\`"
echo "- latency: \`${LAT_ARGS[*]}\`; bandwidth: \`${BW_ARGS[*]}\` (OSU default iterations, window 64)"
echo "- median of $reps repetitions (min-max beside it), runs interleaved"
echo
echo "### Latency (us, half round trip; ratio < 1: plait faster)"
echo
table lat "$LAT_SIZES"
echo
echo "### Bandwidth (MB/s; ratio > 1: plait faster)"
echo
table bw "$BW_SIZES"

if [ -n "$keep" ]; then
    mkdir -p "$keep" && cp "$raw"/* "$keep"/
fi
