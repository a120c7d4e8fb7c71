#!/bin/bash
# udp-loopback.sh -- the multipath UDP transport on one host (loopback), side
# by side in one run with its peers: plait's tcp transport, Open MPI's TCP BTL
# (mpirun --mca btl self,tcp, the same benchmark code: bench/osu_mpi_pt2pt)
# and the raw UDP ceiling of the datapath (bench/udp-raw.c: one sender and one
# receiver thread, sendmmsg/recvmmsg, no protocol). Runs are interleaved and
# repeated; each cell is the median. CPU: user+sys seconds of the whole job
# per GB moved (cycles per byte = that x the clock; no hardware counters are
# needed), for the bandwidth runs.
#
# Usage: bench/udp-loopback.sh [-r REPS] [-n ITERS] [-x VAR=VAL]... [BUILDDIR]
#   -r REPS   repetitions (default 3)
#   -n ITERS  bandwidth windows per size (default 40)
#   -x        extra setting for the plait udp runs (e.g. -x PLAIT_CC=dgpool)
# Prints a markdown report on stdout.
set -u
reps=3 iters=40
extra=()
while getopts "r:n:x:h" o; do
    case $o in
    r) reps=$OPTARG ;;
    n) iters=$OPTARG ;;
    x) extra+=("$OPTARG") ;;
    *) sed -n '2,/^# Prints/s/^# \{0,1\}//p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
B=${1:-${PLAIT_BUILDDIR:-.}}
S=$(cd "$(dirname "$0")/.." && pwd)
PLAITRUN=$B/launcher/plaitrun BENCH=$B/tools/plait-bench OSU=$B/bench/osu_mpi_pt2pt
for f in "$PLAITRUN" "$BENCH"; do
    [ -x "$f" ] || { echo "udp-loopback.sh: $f not built" >&2; exit 1; }
done
raw=$(mktemp -d /tmp/udp-loopback.XXXXXX) || exit 1
trap 'rm -rf "$raw"' EXIT
cc -O2 -o "$raw/udp-raw" "$S/bench/udp-raw.c" -lpthread || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bind=core
[ "$(nproc)" -ge 2 ] || bind=none
LAT=(-m latency -b 8 -e 64K -n 2000)
BW=(-m bw -b 64K -e 4M -n "$iters" -w 2 -W 16)
xs=()
for v in "${extra[@]}"; do xs+=(-x "$v"); done

# run LABEL MODE: one job, rows "size value" appended to $raw/LABEL.MODE,
# "cpu_seconds" to $raw/LABEL.MODE.cpu
run() {
    local label=$1 mode=$2 out=$raw/$1.$2.out args
    if [ "$mode" = lat ]; then args=("${LAT[@]}"); else args=("${BW[@]}"); fi
    case $label in
    udp|tcp) cmd=(env PLAIT_TRANSPORT=$label "$PLAITRUN" -n 2 --bind-to $bind -x PLAIT_TRANSPORT
                  "${xs[@]}" "$BENCH" pt2pt "${args[@]}") ;;
    ompi-tcp) [ -x "$OSU" ] && command -v mpirun >/dev/null || return 0
              cmd=(mpirun -np 2 --oversubscribe --bind-to $bind --mca btl self,tcp
                   --mca btl_tcp_if_include lo "$OSU" "${args[@]}") ;;
    esac
    /usr/bin/time -f "%U %S" -o "$raw/time" timeout 300 "${cmd[@]}" >"$out" 2>&1 </dev/null ||
        { echo "udp-loopback.sh: $label $mode failed:" >&2; tail -5 "$out" >&2; return 1; }
    awk '!/^#/ && NF >= 2 && $1 ~ /^[0-9]+$/ { print $1, $2 }' "$out" >>"$raw/$label.$mode"
    awk '{ print $1 + $2 }' "$raw/time" >>"$raw/$label.$mode.cpu"
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (!NR) print "n/a"; else if (NR % 2)
    print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
cell() { awk -v s="$3" '$1 == s { print $2 }' "$raw/$1.$2" 2>/dev/null | median; }

for r in $(seq "$reps"); do
    for l in udp tcp ompi-tcp; do run $l lat; run $l bw; done
    "$raw/udp-raw" -t 2 -s 32768 | awk '{ print $8 }' >>"$raw/raw32k"
    "$raw/udp-raw" -t 2 -s 65000 | awk '{ print $8 }' >>"$raw/raw64k"
    "$raw/udp-raw" -t 2 -s 1472 -g | awk '{ print $8 }' >>"$raw/rawgso"
done

echo "## udp-loopback.sh: $(date -u +%F) on $(hostname), $(nproc) cores, kernel $(uname -r)"
echo
echo "Median of $reps interleaved runs. plait udp settings: ${extra[*]:-defaults}."
echo
echo "| latency (us) | udp | tcp | Open MPI tcp | udp / tcp |"
echo "|---:|---:|---:|---:|---:|"
for s in 8 1024 8192 65536; do
    u=$(cell udp lat $s) t=$(cell tcp lat $s) o=$(cell ompi-tcp lat $s)
    echo "| $s | $u | $t | $o | $(awk -v a="$u" -v b="$t" 'BEGIN { if (b > 0) printf "%.2f", a / b }') |"
done
echo
echo "| bandwidth (MB/s) | udp | tcp | Open MPI tcp | udp / tcp |"
echo "|---:|---:|---:|---:|---:|"
for s in 65536 262144 1048576 4194304; do
    u=$(cell udp bw $s) t=$(cell tcp bw $s) o=$(cell ompi-tcp bw $s)
    echo "| $s | $u | $t | $o | $(awk -v a="$u" -v b="$t" 'BEGIN { if (b > 0) printf "%.2f", a / b }') |"
done
echo
echo "CPU seconds (user+sys, both ranks and all threads) per bandwidth job: udp $(median <"$raw/udp.bw.cpu"),"\
     "tcp $(median <"$raw/tcp.bw.cpu")$( [ -s "$raw/ompi-tcp.bw.cpu" ] && echo ", Open MPI tcp $(median <"$raw/ompi-tcp.bw.cpu")")"
echo
echo "Raw UDP ceiling (udp-raw, Gbit/s): 32 KB datagrams $(median <"$raw/raw32k"),"\
     "64 KB datagrams $(median <"$raw/raw64k"), 1472-byte segments with GSO/GRO $(median <"$raw/rawgso")"
