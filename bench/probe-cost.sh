#!/bin/bash
# probe-cost.sh ROUNDS [CELL...] -- one host, small collectives and ping-pong of two
# builds, base against new, rounds in alternating order (session 37: what the
# collectives' error paths -- stall probes, pt2pt/probe.c -- cost a healthy call).
# Run on the device machine with the tarballs carried (bench/device-ab.sh):
#   here:  make dist; cp BASE-TARBALL kit/base.tar.gz
#   there: bench/probe-cost.sh 4                      (kit/s37a.sh)
#          bench/probe-cost.sh 8 bcast nb             (kit/s37b.sh, 32 KiB bcast top)
#          bench/probe-cost.sh 14 nb                  (kit/s37c.sh)
# CELL: allreduce bcast pt2pt nb (default: all). Output: "== CELL" then
# "BUILD ROUND: size us | ..." lines.
cd "$(dirname "$0")/.." || exit 1
rounds=${1:?rounds}; shift
cells=${*:-allreduce bcast pt2pt nb}
rm -rf /tmp/new /tmp/base
# shellcheck source=bench/device-ab.sh
source bench/device-ab.sh kit/base.tar.gz plait-0.1.0.tar.gz || exit 1
P() { echo "/tmp/$1/plait-0.1.0"; }
run() {   # run BUILD CELL
    local b=$1 pr
    pr="$(P "$b")/launcher/plaitrun --bind-to core"
    case $2 in
    allreduce) $pr -n 8 "$(P "$b")/tools/plait-bench" coll allreduce -b 8 -e 64K -f 8 -n 2000 -w 200 ;;
    bcast)     $pr -n 8 "$(P "$b")/tools/plait-bench" coll bcast -b 8 -e 1M -f 8 -n 1000 -w 100 ;;
    pt2pt)     $pr -n 2 "$(P "$b")/tools/plait-bench" pt2pt latency -b 8 -e 1M -n 2000 -w 200 ;;
    nb)        $pr -n 8 "$(P "$b")/bench/nb-overlap" -b 8 -e 64K -n 2000 |
                   awk '$1 ~ /^[0-9]+$/ {print $1, $3}' ;;   # the nb-wait column
    esac 2>&1 | ab_cells
}
ab_rounds "$rounds" "base new" "$cells" run
