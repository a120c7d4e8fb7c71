#!/bin/bash
# hosts-lat.sh -- point-to-point latency between two network-namespace hosts
# (tests/netns/netns.sh: one bridge, unshaped), one rank on each: plait over
# udp (the default between hosts) and tcp, and the same benchmark code over
# Open MPI's TCP BTL (bench/osu_mpi_pt2pt), interleaved. Each line: the half
# round trip in us for 8 16 32 64 bytes (sizes -b/-e of the benchmarks).
#
# Usage: bench/hosts-lat.sh [-r REPS] [-n ITERS] [-e MAXSIZE] [BUILDDIR]
#   -r REPS   repetitions (default 3)   -n ITERS  iterations (default 10000)
#   -e SIZE   largest size (default 64)
# Needs root and iproute2 (unshare and Open MPI for the Open MPI row).
set -u
reps=3 iters=10000 maxb=64
while getopts "r:n:e:h" o; do
    case $o in
    r) reps=$OPTARG ;; n) iters=$OPTARG ;; e) maxb=$OPTARG ;;
    *) sed -n '2,/^# Needs/s/^# \{0,1\}//p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
B=$(cd "${1:-${PLAIT_BUILDDIR:-.}}" && pwd)
S=$(cd "$(dirname "$0")/.." && pwd)
PLAITRUN=$B/launcher/plaitrun
[ "$(id -u)" = 0 ] || { echo "hosts-lat.sh: needs root" >&2; exit 1; }
[ -x "$PLAITRUN" ] || { echo "hosts-lat.sh: build first ($B)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PLAITRUN
# shellcheck source=bench/hosts-lib.sh
source "$S/bench/hosts-lib.sh"
D=$(mktemp -d /tmp/hosts-lat.XXXXXX) || exit 1
PFX=hl$$
trap 'hosts_down $PFX >/dev/null 2>&1; rm -rf "$D"' EXIT
hosts_up $PFX 2 "$D" || exit 1
cols() { awk '/^[0-9]/ { printf "%s ", $2 }'; }
pl() { timeout 120 $(hosts_plaitrun "$D" h1:1,h2:1) "$@" "$B/tools/plait-bench" \
           pt2pt -m lat -b 8 -e "$maxb" -n "$iters" 2>&1 </dev/null | cols; }
om() { timeout 120 $(hosts_mpirun "$D" h1:1,h2:1) -np 2 --bind-to none --mca btl self,tcp \
           "$B/bench/osu_mpi_pt2pt" lat -b 8 -e "$maxb" -n "$iters" 2>&1 </dev/null | cols; }
echo "# hosts-lat.sh $(date -u +%FT%TZ) on $(hostname), $(nproc) cores: half round trip, us, sizes 8..$maxb B"
for r in $(seq "$reps"); do
    echo "plait udp: $(pl)"
    echo "plait tcp: $(pl -x PLAIT_TRANSPORT=tcp)"
    if [ -x "$B/bench/osu_mpi_pt2pt" ] && command -v mpirun >/dev/null; then
        echo "Open MPI tcp: $(om)"
    fi
done
