#!/bin/bash
# ab-hosts.sh -- the cross-host comparison of plait builds and settings with
# Open MPI on the device machine: ping-pong latency and the five nccl-tests
# collectives on 2 namespace hosts x 1 rank, three collectives on 2 x 2;
# every variant runs once per round, interleaved (bench/device-ab.sh,
# ab_sweep), then bench/ab-table.py prints median tables with the ratio of
# each variant against Open MPI (time ratio: > 1 is faster than Open MPI).
#
# Usage (on the device, from the tree root, after bench/device-kit.sh kit
# and make dist here):
#   bench/ab-hosts.sh [-r ROUNDS] [-o RAWFILE] [VARIANT...]
#     VARIANT: base, new, BUILD:VAR=VAL[:VAR=VAL] (plaitrun -x), or ompi
#     (default: ompi base new); -r: rounds (default 3); -o: keep the raw
#     lines (default: a temporary file). With base and new among the
#     variants, each table is followed by new / base of every round.
# Builds base from kit/base.tar.gz and new from plait-0.1.0.tar.gz.
set -u
rounds=3 raw=
while getopts r:o:h opt; do
    case $opt in
        r) rounds=$OPTARG ;;
        o) raw=$OPTARG ;;
        *) sed -n '2,16p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || set -- ompi base new
case $rounds in ''|*[!0-9]*|0) echo "ab-hosts.sh: -r needs a number >= 1" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
# (explicit arguments: a sourced script would see this one's variants)
# shellcheck source=bench/device-ab.sh
source "$here/device-ab.sh" "$here/../kit/base.tar.gz" "$here/../plait-0.1.0.tar.gz" || exit 1
[ -n "$raw" ] || raw=$(mktemp /tmp/ab-hosts.XXXXXX)
{
    echo "== ping-pong latency, 2 x 1 (us)"
    ab_sweep "$rounds" h1:1,h2:1 "pt2pt -m latency -b 32K -e 1M -n 500" "$@"
    for c in bcast alltoall allreduce allgather reduce_scatter; do
        echo "== $c, 2 x 1 (us)"
        ab_sweep "$rounds" h1:1,h2:1 "coll $c -b 64K -e 4M -f 2 -n 40 -w 5" "$@"
    done
    for c in alltoall allreduce bcast; do
        echo "== $c, 2 x 2 (us)"
        ab_sweep "$rounds" h1:2,h2:2 "coll $c -b 64K -e 4M -f 4 -n 40 -w 5" "$@"
    done
} > "$raw" 2>&1
hosts_down ab >/dev/null 2>&1
echo "# raw lines: $raw ($(date -u +%FT%TZ), $(nproc) cores, rounds $rounds)"
# base against new round by round too, where both ran (ab-table.py --paired)
case " $* " in *" base "*" new "*|*" new "*" base "*) pair="--paired base new" ;; *) pair= ;; esac
# shellcheck disable=SC2086
python3 "$here/ab-table.py" $pair "$raw"
