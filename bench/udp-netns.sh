#!/bin/bash
# udp-netns.sh -- the issue-4 measurements that a namespace testbed can give:
# two hosts joined by two routed paths (tests/udp/udp-bed.sh), one rank on
# each, plait-bench pt2pt bw from A to B with 4 MB messages (every byte
# checked). Scenarios:
#   shaped:  each path 1 Gbit/s: plait udp (one connection sprayed over both
#            paths) vs plait tcp (one TCP connection: ECMP holds it to one path);
#   loss:    the same with 0.01% and 1% random loss on both paths;
#   slow:    path 2 slowed to 100 Mbit/s (10% of path 1);
#   dead:    path 2 drops everything (plait udp only);
#   cc x lb: every congestion control and load balancer, shaped, no loss;
#   unshaped: plait udp and tcp, and the raw UDP ceiling between the hosts
#            (bench/udp-raw.c, one sender and one receiver, GSO/GRO), with
#            the CPU each spent: user+sys seconds of every process and thread
#            (plait: both ranks, their engine threads and the launchers,
#            waiting included) per byte of payload, in cycles at the
#            nominal clock of /proc/cpuinfo.
# Goodput is the benchmark's MB/s (payload only). Each cell: median of REPS.
#
# Usage: bench/udp-netns.sh [-r REPS] [-n ITERS] [-q] [BUILDDIR]
#   -r REPS   repetitions (default 3)   -n ITERS  bandwidth windows (default 6)
#   -q        quick: skip the cc x lb matrix
# Needs root, ip netns, tc, nft. Prints a markdown report on stdout.
set -u
reps=3 iters=6 quick=0
while getopts "r:n:qh" o; do
    case $o in
    r) reps=$OPTARG ;; n) iters=$OPTARG ;; q) quick=1 ;;
    *) sed -n '2,/^# Needs/s/^# \{0,1\}//p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
B=${1:-${PLAIT_BUILDDIR:-.}}
S=$(cd "$(dirname "$0")/.." && pwd)
BED=$S/tests/udp/udp-bed.sh
PLAITRUN=$B/launcher/plaitrun BENCH=$B/tools/plait-bench
[ "$(id -u)" = 0 ] || { echo "udp-netns.sh: needs root" >&2; exit 1; }
for c in ip tc nft; do
    command -v $c >/dev/null || { echo "udp-netns.sh: needs the $c command" >&2; exit 1; }
done
[ -x "$PLAITRUN" ] && [ -x "$BENCH" ] || { echo "udp-netns.sh: build first ($B)" >&2; exit 1; }
PFX=ub$$
work=$(mktemp -d /tmp/udp-netns.XXXXXX) || exit 1
export TMPDIR=$work/tmp
mkdir -p "$TMPDIR"
trap '"$BED" down $PFX; rm -rf "$work"' EXIT
trap 'exit 1' INT TERM
"$BED" up $PFX || exit 1
cc -O2 -o "$work/udp-raw" "$S/bench/udp-raw.c" -lpthread || exit 1
cat > "$work/vip-run" <<'EOF'
#!/bin/sh
PLAIT_UDP_IF=$(ip -4 -o addr show dev lo | awk '{print $4}' | grep '^198\.18\.' | head -1 | cut -d/ -f1)
export PLAIT_UDP_IF
exec "$@"
EOF
chmod +x "$work/vip-run"

# bw TRANSPORT [VAR=VAL...]: MB/s of 4 MB messages A -> B (median of reps).
# With CPU set, each run's user+sys seconds go to the file $CPU.
# --bind-to none: both "hosts" are namespaces of this one machine; bound,
# each rank would share its core with its udp engine thread, where the raw
# UDP ceiling below runs sender and receiver on a core each.
bw() {
    local t=$1 r v vals=""
    shift
    local xs=()
    for v in "$@"; do xs+=(-x "$v"); done
    for r in $(seq "$reps"); do
        v=$(/usr/bin/time -f "%U %S" -a -o "${CPU:-/dev/null}" \
            timeout 300 ip netns exec $PFX-a "$PLAITRUN" --host a:1,b:1 --bind-to none \
                --launch-agent "ip netns exec $PFX-{host}" --head-address 198.18.1.1 \
                -x PLAIT_TRANSPORT=$t "${xs[@]}" "$work/vip-run" "$BENCH" pt2pt \
                -m bw -b 4M -e 4M -n "$iters" -w 1 -W 16 -c 2>"$work/err" </dev/null |
            awk '$1 == 4194304 { print ($3 == "pass" || $3 == "") ? $2 : "FAIL" }')
        [ -n "$v" ] || { v=n/a; tail -3 "$work/err" >&2; }
        vals="$vals $v"
    done
    echo $vals | tr ' ' '\n' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
# cpb SECONDS-FILE BYTES: median cycles per byte of the runs in the file.
cpb() {
    awk -v b="$2" -v hz="$mhz" 'NF == 2 && $1 ~ /^[0-9.]+$/ { print ($1 + $2) * hz * 1e6 / b }' \
        "$1" 2>/dev/null | sort -g |
        awk '{ v[NR] = $1 } END { if (NR) printf "%.2f", v[int((NR + 1) / 2)]; else print "n/a" }'
}
mhz=$(awk -F: '/^cpu MHz/ { printf "%d", $2; exit }' /proc/cpuinfo)
[ -n "$mhz" ] || mhz=0
gbit() { awk -v m="$1" 'BEGIN { if (m + 0 > 0) printf "%.2f", m * 8 / 1000; else print "n/a" }'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.0f%%", 100 * a / b; else print "n/a" }'; }

echo "## udp-netns.sh: $(date -u +%F) on $(hostname), $(nproc) cores, kernel $(uname -r)"
echo
echo "Two paths A-R1-B and A-R2-B (veth + tbf), 1 rank per host, 4 MB messages, window 16,"
echo "median of $reps runs of $iters windows. Goodput in Gbit/s (payload, every byte checked)."
echo
"$BED" rate $PFX 1gbit 1gbit
u0=$(bw udp) t0=$(bw tcp)
echo "| scenario | plait udp | plait tcp | udp vs goal |"
echo "|---|---:|---:|---|"
echo "| 2 x 1 Gbit/s, no loss | $(gbit "$u0") | $(gbit "$t0") | $(pct "$(gbit "$u0")" 2.0) of 2 Gbit/s (goal 90%) |"
for l in 0.01 1; do
    "$BED" loss $PFX $l $l
    u=$(bw udp) t=$(bw tcp)
    goal=97; [ "$l" = 1 ] && goal=80
    echo "| 2 x 1 Gbit/s, $l% loss | $(gbit "$u") | $(gbit "$t") | $(pct "$u" "$u0") of lossless (goal $goal%) |"
done
"$BED" loss $PFX 0 0
"$BED" rate $PFX 1gbit 100mbit
u=$(bw udp) t=$(bw tcp)
echo "| 1 Gbit/s + 100 Mbit/s | $(gbit "$u") | $(gbit "$t") | $(pct "$(gbit "$u")" 1.1) of 1.1 Gbit/s (goal 90%) |"
# A dead path (R2 drops every UDP packet): what is left is R1's 1 Gbit/s.
# tcp is not run: its one connection hashes onto R2 half the time and hangs.
"$BED" rate $PFX 1gbit 1gbit
"$BED" loss $PFX 0 100
u=$(bw udp)
"$BED" loss $PFX 0 0
echo "| 1 Gbit/s + a dead path | $(gbit "$u") | - | $(pct "$(gbit "$u")" 1.0) of 1 Gbit/s |"
"$BED" rate $PFX none none
u=$(CPU=$work/cpu.udp bw udp) t=$(CPU=$work/cpu.tcp bw tcp)
moved=$(( (iters + 1) * 16 * 4194304 ))   # payload bytes of one run: timed windows and the warm-up
# The raw ceiling moves a lot between runs (6.0 to 10.4 Gbit/s on the 16-core
# machine, 2026-11-22): take the median of three, and show their range.
raws=""
for r in 1 2 3; do
    /usr/bin/time -f "%U %S" -o "$work/cpu.recv" \
        ip netns exec $PFX-b "$work/udp-raw" -r recv -a 198.18.100.1 -g -s 1472 -t 3 >"$work/raw" &
    sleep 0.3
    /usr/bin/time -f "%U %S" -o "$work/cpu.send" \
        ip netns exec $PFX-a "$work/udp-raw" -r send -d 198.18.100.1 -g -s 1472 -t 3 >/dev/null
    wait
    raws="$raws $(awk '{ print $8 }' "$work/raw")"
    # cycles per byte of this run: sender + receiver seconds over the bytes received
    cat "$work/cpu.send" "$work/cpu.recv" | awk -v b="$(awk '{ print $2 }' "$work/raw")" \
        -v hz="$mhz" 'NF == 2 && $1 ~ /^[0-9.]+$/ { s += $1 + $2 }
                      END { if (b > 0) print s * hz * 1e6 / b }' >> "$work/cpb.raw"
done
rawg=$(echo $raws | tr ' ' '\n' | sort -g | sed -n 2p)
rawr=$(echo $raws | tr ' ' '\n' | sort -g | sed -n '1p;3p' | paste -sd-)
echo "| unshaped | $(gbit "$u") | $(gbit "$t") | $(pct "$(gbit "$u")" "$rawg") of raw UDP $rawg Gbit/s (median of 3: $rawr; goal 70%) |"
echo
echo "CPU, unshaped (user+sys of every process and thread, waiting included; cycles per byte of"
echo "payload at the nominal $mhz MHz): plait udp $(cpb "$work/cpu.udp" "$moved"),"\
     "plait tcp $(cpb "$work/cpu.tcp" "$moved"), raw UDP" \
     "$(sort -g "$work/cpb.raw" | awk '{ v[NR] = $1 } END { if (NR) printf "%.2f", v[int((NR + 1) / 2)] }')"

if [ $quick = 0 ]; then
    echo
    echo "CC x LB, 2 x 1 Gbit/s, no loss (Gbit/s):"
    echo
    echo "| | p2c | spray | ackclock | pwin |"
    echo "|---|---:|---:|---:|---:|"
    "$BED" rate $PFX 1gbit 1gbit
    for cc in cubic swift dgpool eqds; do
        row="| $cc"
        for lb in p2c spray ackclock pwin; do
            row="$row | $(gbit "$(bw udp PLAIT_CC=$cc PLAIT_LB=$lb)")"
        done
        echo "$row |"
    done
fi
