#!/bin/bash
# timeout: 120
# t-sim.sh -- the packet-level simulator (sim/plait-sim) on short
# deterministic runs of the canned scenarios: every byte arrives intact, the
# run ends (no stall), the same seed gives the same result, a lossy scenario
# retransmits, two connections sharing the links both finish, a dead
# link's paths are left for the live one, and slow links with deep queues
# keep their goodput (no timeouts before an ACK can come). No wall-clock thresholds (the
# dead-link check reads the simulated goodput, which is deterministic). Env: PLAIT_BUILDDIR.
set -u
here=$(cd "$(dirname "$0")" && pwd)
B=${PLAIT_BUILDDIR:-$(cd "$here/../.." && pwd)}
SIM=$B/sim/plait-sim
n=0
ok() { n=$((n + 1)); echo "ok - $1"; }
nok() { n=$((n + 1)); echo "not ok - $1"; [ $# -gt 1 ] && echo "#   $2"; }
if [ ! -x "$SIM" ]; then
    echo "ok - plait-sim # SKIP not built ($SIM)"
    exit 0
fi
"$SIM" --help | grep -q -- '--scenario' && ok "--help" || nok "--help"
# short runs: 1 MB messages, window 8, 3 windows (24 MB), JSON report
run() { "$SIM" -m 1M -W 8 -n 3 -t 5s --json "$@"; }
field() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p"; }
for sc in two slow loss1 loss001; do
    out=$(run --scenario $sc -s 7); rc=$?
    bad=$(echo "$out" | field bad_bytes) win=$(echo "$out" | field windows)
    if [ $rc = 0 ] && [ "$bad" = 0 ] && [ "$win" = 3 ]; then
        ok "$sc: 3 windows, every byte intact"
    else
        nok "$sc: 3 windows, every byte intact" "rc $rc: $out"
    fi
done
a=$(run --scenario loss1 -s 11) b=$(run --scenario loss1 -s 11)
[ -n "$a" ] && [ "$a" = "$b" ] && ok "same seed, same result" || nok "same seed, same result" "$a / $b"
c=$(run --scenario loss1 -s 12)
[ "$a" != "$c" ] && ok "another seed, another run" || nok "another seed, another run"
retx=$(echo "$a" | field retx)
[ "${retx:-0}" -gt 0 ] && ok "1% loss retransmits ($retx)" || nok "1% loss retransmits" "$a"
for lb in p2c pwin spray ackclock; do
    for cc in cubic swift dgpool eqds; do
        out=$(run --scenario slow --lb $lb --cc $cc -s 3); rc=$?
        [ $rc = 0 ] && [ "$(echo "$out" | field windows)" = 3 ] && ok "slow, $lb / $cc: completes" ||
            nok "slow, $lb / $cc: completes" "rc $rc: $out"
    done
done
# goodput_case NAME WINDOWS MIN_BPS SIM-ARGS...: the run ends with WINDOWS
# windows, every byte intact, and at least MIN_BPS of simulated goodput
# (simulated time: deterministic).
goodput_case() {
    local name=$1 windows=$2 min=$3 out rc gp
    shift 3
    out=$("$SIM" --json "$@"); rc=$?
    gp=$(echo "$out" | field goodput_bps)
    if [ $rc = 0 ] && [ "$(echo "$out" | field windows)" = "$windows" ] &&
       [ "$(echo "$out" | field bad_bytes)" = 0 ] && [ "${gp%.*}" -ge "$min" ] 2>/dev/null; then
        ok "$name: intact, $gp bit/s (>= $min)"
    else
        nok "$name: intact, >= $min bit/s" "rc $rc: $out"
    fi
}
# A dead link (every packet lost both ways): its paths are taken down
# (transport/proto conn.c, path quarantine) and the live link carries the
# data. Before the quarantine these runs got 0.06-0.49 Gbit/s of the live
# link's 0.94.
for lb in p2c pwin spray ackclock; do
    goodput_case "a dead link, $lb: the live link carries it" 3 800000000 \
        -m 1M -W 8 -n 3 -t 5s --link 1g --link 1g,20us,100 --lb $lb -s 4
done
# Slow links with deep queues (2 x 5 Mbit/s, tbf queues of 300 ms): the
# timeouts' ceiling follows the RTT past its configured 50 ms (conn.c,
# rto_ceiling), else every packet timed out before its ACK could come (75%
# of the packets resent, 3.4-4.2 Mbit/s, one window of two in 10 s).
for s in 1 2 3; do
    goodput_case "2 x 5 Mbit/s, 300 ms queues, seed $s" 2 6000000 \
        --link 5m --link 5m --latency 300ms --burst 32k -m 1M -W 4 -n 2 -t 10s -s $s
done
out=$(run --scenario collision -s 5); rc=$?
[ $rc = 0 ] && [ "$(echo "$out" | field windows)" = 6 ] && ok "collision: both connections finish" ||
    nok "collision: both connections finish" "rc $rc: $out"
d=$(run --scenario collision -s 5 --map-seed 3); rc=$?
[ $rc = 0 ] && [ "$(echo "$d" | field windows)" = 6 ] && [ "$(echo "$d" | field bad_bytes)" = 0 ] &&
    [ "$d" != "$out" ] && ok "collision, another path-to-link map (--map-seed): finishes, intact, differs" ||
    nok "collision, another path-to-link map (--map-seed)" "rc $rc: $d"
"$SIM" --map-seed x >/dev/null 2>&1 && nok "--map-seed x is refused" || ok "--map-seed x is refused"
out=$(run --link 1g,50us,0.5 --link 400m,1ms --link 200m --paths 8 --map rr -s 2); rc=$?
[ $rc = 0 ] && [ "$(echo "$out" | field bad_bytes)" = 0 ] && ok "custom links" || nok "custom links" "rc $rc: $out"
echo "1..$n"
