#!/bin/bash
# udp-collision.sh -- issue-4 measurements on the two-path namespace testbed
# (tests/udp/udp-bed.sh, each path shaped to 1 Gbit/s) that udp-netns.sh
# does not make:
#   collision: two rank pairs A -> B streaming at once (plaitrun --host a:2,b:2,
#            bench/udp-pairs: ranks 0 -> 2 and 1 -> 3), plait udp against plait
#            tcp with both TCP connections on one path. Two tcp variants:
#            "tcp pinned": plait tcp as it is (it connects to B's first
#            interface address, a per-path address: both connections take R1);
#            "tcp ecmp": PLAIT_TCP_IF=lo, so it connects to B's service address
#            and the ECMP port hash places each connection (the kernel picks the
#            source port): each trial is classed by the routers' packet
#            counters as "one path" or "split".
#   single:  one connection A -> B, plait-bench pt2pt bw (4 MB, window 16,
#            every byte checked) for plait udp and tcp, and the same benchmark
#            code over Open MPI's TCP BTL (bench/osu_mpi_pt2pt, mpirun --mca btl
#            self,tcp launched into the namespaces by an rsh agent): on all
#            interfaces (its default) and pinned to path 1 (btl_tcp_if_include).
#   cpu:     user+sys CPU seconds of both ranks (all threads) per delivered byte,
#            one pair, no checking (udp-pairs -q): plait udp vs plait tcp.
# Each cell: median of REPS runs, the transports interleaved within each run.
#
# Usage: bench/udp-collision.sh [-r REPS] [-t SECONDS] [-m collision|single|cpu|all]
#                               [-p stream|window] [-e FILE] [BUILDDIR]
#   -r REPS  repetitions (default 5)  -t SECONDS  streaming time of a udp-pairs run (default 5)
#   -m WHAT  which measurement (default all; collision-udp: the collision, plait udp only)
#   -p HOW   udp-pairs' method (default stream: a sliding window; window: a window
#            of sends, then a go message, which empties each pair's pipe once a window)
#   -e FILE  append every plait job's stderr to FILE (e.g. its PLAIT_STATS=1 counters)
# Needs root, ip netns, tc, unshare. Prints a markdown report on stdout, every run on stderr.
set -u
reps=5 secs=5 what=all errlog= how=stream
while getopts "r:t:m:p:e:h" o; do
    case $o in
    r) reps=$OPTARG ;; t) secs=$OPTARG ;; m) what=$OPTARG ;; e) errlog=$OPTARG ;;
    p) how=$OPTARG ;;
    *) sed -n '2,/^# Needs/s/^# \{0,1\}//p' "$0"; exit 2 ;;
    esac
done
case $how in stream|window) ;; *) echo "udp-collision.sh: -p takes stream or window, not '$how'" >&2; exit 2 ;; esac
shift $((OPTIND - 1))
B=${1:-${PLAIT_BUILDDIR:-.}}
S=$(cd "$(dirname "$0")/.." && pwd)
BED=$S/tests/udp/udp-bed.sh
PLAITRUN=$B/launcher/plaitrun BENCH=$B/tools/plait-bench PAIRS=$B/bench/udp-pairs
OSU=$B/bench/osu_mpi_pt2pt
[ "$(id -u)" = 0 ] || { echo "udp-collision.sh: needs root" >&2; exit 1; }
for c in ip tc unshare; do
    command -v $c >/dev/null || { echo "udp-collision.sh: needs the $c command" >&2; exit 1; }
done
[ -x "$PLAITRUN" ] && [ -x "$BENCH" ] && [ -x "$PAIRS" ] ||
    { echo "udp-collision.sh: build first ($B, make -C bench)" >&2; exit 1; }
PFX=uc$$
work=$(mktemp -d /tmp/udp-collision.XXXXXX) || exit 1
export TMPDIR=$work/tmp
mkdir -p "$TMPDIR"
trap '"$BED" down $PFX; rm -rf "$work"' EXIT
trap 'exit 1' INT TERM
"$BED" up $PFX && "$BED" rate $PFX 1gbit 1gbit || exit 1
# plait udp binds its paths to the host's service address (ECMP between the VIPs)
cat > "$work/vip-run" <<'EOF'
#!/bin/sh
PLAIT_UDP_IF=$(ip -4 -o addr show dev lo | awk '{print $4}' | grep '^198\.18\.' | head -1 | cut -d/ -f1)
export PLAIT_UDP_IF
exec "$@"
EOF
# Open MPI's rsh agent: "agent [-opts] HOST CMD": CMD in namespace PFX-HOST,
# with its own hostname so ORTE sees two nodes.
cat > "$work/rsh-agent" <<EOF
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
h=\$1; shift
exec ip netns exec $PFX-\$h unshare --uts sh -c "hostname \$h; \$*"
EOF
chmod +x "$work/vip-run" "$work/rsh-agent"

med() { tr ' ' '\n' | grep -v '^$' | sort -g |
        awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "n/a" }'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.0f%%", 100 * a / b; else print "n/a" }'; }
# --bind-to none: the namespace "hosts" are one machine; bound, each rank
# would share its core with its udp engine thread (Open MPI runs unbound
# below too).
plait_job() {   # plait_job NPAIRS TRANSPORT [VAR=VAL...] -- PROGRAM ARGS
    local n=$1 t=$2 xs=()
    shift 2
    while [ "$1" != -- ]; do xs+=(-x "$1"); shift; done
    shift
    timeout 300 ip netns exec $PFX-a "$PLAITRUN" --host a:$n,b:$n --bind-to none \
        --launch-agent "ip netns exec $PFX-{host}" --head-address 198.18.1.1 \
        -x PLAIT_TRANSPORT=$t "${xs[@]}" "$work/vip-run" "$@" 2>"$work/err" </dev/null
    local rc=$?
    [ -z "$errlog" ] || { echo "### $t ${xs[*]}: $*"; cat "$work/err"; } >>"$errlog"
    return $rc
}
# "R1 R2": packets each router forwarded toward B since the last call
fwd_delta() {
    local now
    now=$("$BED" fwd $PFX)
    set -- $now ${fwd_last:-0 0}
    echo "$(($1 - $3)) $(($2 - $4))"
    fwd_last=$now
}
# pairs NPAIRS TRANSPORT [VAR=VAL...] [-- EXTRA ARGS]: "GBIT0 GBIT1 TOTAL NS/B R1 R2"
pairs() {
    local n=$1 t=$2 vars=() out
    shift 2
    while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    fwd_delta >/dev/null
    out=$(plait_job "$n" "$t" "${vars[@]}" -- "$PAIRS" -m "$how" -t "$secs" "$@")
    if ! grep -q '^total:' <<<"$out" || grep -q FAIL <<<"$out"; then
        { echo "# $t ${vars[*]}: failed"; echo "$out"; tail -3 "$work/err"; } >&2
        echo "n/a n/a n/a n/a $(fwd_delta)"
        return
    fi
    awk '/^pair/ { g[n++] = $6 } /^total:/ { t = $2 } /^cpu:/ { c = $5 }
         END { printf "%s %s %s %s ", g[0], (n > 1 ? g[1] : "-"), t, c }' <<<"$out"
    fwd_delta
}
onepath() {     # onepath R1 R2: "one path" when the smaller router carried < 10%
    awk -v a="$1" -v b="$2" 'BEGIN { s = a + b; m = a < b ? a : b
        print (s > 0 && m < 0.1 * s) ? "one path" : "split" }'
}
col() { awk -v i="$1" '{ print $i }' "$2" | med; }      # median of column i of a file
gb() { awk -v m="$1" 'BEGIN { if (m + 0 > 0) printf "%.2f", m * 8 / 1000; else print "n/a" }'; }

collision() {
    local r v cls
    : >"$work/c-udp"; : >"$work/c-pin"; : >"$work/c-one"; : >"$work/c-split"
    for r in $(seq "$reps"); do
        v=$(pairs 2 udp); echo "# collision run $r: udp $v" >&2; echo "$v" >>"$work/c-udp"
        [ "$what" = collision-udp ] && continue
        v=$(pairs 2 tcp); echo "# collision run $r: tcp pinned $v" >&2; echo "$v" >>"$work/c-pin"
        v=$(pairs 2 tcp PLAIT_TCP_IF=lo); cls=$(onepath $(awk '{ print $5, $6 }' <<<"$v"))
        echo "# collision run $r: tcp ecmp $v ($cls)" >&2
        if [ "$cls" = "one path" ]; then echo "$v" >>"$work/c-one"; else echo "$v" >>"$work/c-split"; fi
    done
    echo "### Flow collision: two pairs A -> B at once, 2 x 1 Gbit/s"
    echo
    echo "udp-pairs -m $how (4 MB messages, window 8, every byte checked), $secs s per run, median of the"
    echo "runs (per column); fair share = 1 Gbit/s per pair. R1/R2: packets forwarded toward B."
    echo
    echo "| transport | runs | pair 0 | pair 1 | total | worse pair vs fair share | CPU ns/B | R1 / R2 pkts |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|"
    row "plait udp" "$work/c-udp"
    row "plait tcp pinned (both on R1)" "$work/c-pin"
    row "plait tcp ecmp, hashed onto one path" "$work/c-one"
    row "plait tcp ecmp, split over both" "$work/c-split"
    echo
}
row() {     # row NAME FILE
    local n worse
    n=$(grep -cv '^n/a' "$2")
    [ -s "$2" ] || { echo "| $1 | 0 | | | | | | |"; return; }
    worse=$(awk '$1 != "n/a" { print ($1 < $2 ? $1 : $2) }' "$2" | med)
    echo "| $1 | $n | $(col 1 "$2") | $(col 2 "$2") | $(col 3 "$2") | $(pct "$worse" 1.0) |" \
         "$(col 4 "$2") | $(col 5 "$2") / $(col 6 "$2") |"
}

# single-connection bandwidth, MB/s of 4 MB messages
bw_plait() {
    plait_job 1 "$1" -- "$BENCH" pt2pt -m bw -b 4M -e 4M -n 6 -w 1 -W 16 -c |
        awk '$1 == 4194304 { print ($3 == "pass") ? $2 : "FAIL" }'
}
bw_ompi() {     # bw_ompi [MCA NAME VALUE...]
    local mca=(--mca btl self,tcp)
    while [ $# -ge 2 ]; do mca+=(--mca "$1" "$2"); shift 2; done
    timeout 300 ip netns exec $PFX-a unshare --uts sh -c 'hostname a; exec "$@"' sh \
        mpirun --allow-run-as-root --host a:1,b:1 -np 2 --bind-to none \
        --mca plm rsh --mca plm_rsh_agent "$work/rsh-agent" "${mca[@]}" \
        "$OSU" bw -b 4M -e 4M -n 6 -w 1 -W 16 -c 2>"$work/err" </dev/null |
        awk '$1 == 4194304 { print ($3 == "pass") ? $2 : "FAIL" }'
}
single() {
    local r k v have_ompi=0 cases="udp tcp"
    [ -x "$OSU" ] && command -v mpirun >/dev/null && have_ompi=1 && cases="$cases ompi ompi1"
    for k in $cases; do : >"$work/s-$k"; done
    for r in $(seq "$reps"); do
        for k in $cases; do
            fwd_delta >/dev/null
            case $k in
            udp|tcp) v=$(bw_plait $k) ;;
            ompi)    v=$(bw_ompi) ;;
            ompi1)   v=$(bw_ompi btl_tcp_if_include 198.18.1.0/24,198.18.3.0/24) ;;
            esac
            [ -n "$v" ] || { v=n/a; tail -3 "$work/err" >&2; }
            echo "# single run $r: $k $v MB/s, R1 R2 $(fwd_delta)" | tee -a "$work/s-$k.log" >&2
            echo "$v $(tail -1 "$work/s-$k.log" | awk '{ print $(NF - 1), $NF }')" >>"$work/s-$k"
        done
    done
    echo "### One connection A -> B, 2 x 1 Gbit/s"
    echo
    echo "plait-bench pt2pt / osu_mpi_pt2pt bw, 4 MB messages, window 16, 6 windows, every byte"
    echo "checked; median of $reps runs. Ratio: plait udp / that row."
    echo
    echo "| transport | Gbit/s | udp / this | R1 / R2 pkts (median) |"
    echo "|---|---:|---:|---:|"
    local u
    u=$(col 1 "$work/s-udp")
    for k in $cases; do
        case $k in
        udp) n="plait udp" ;; tcp) n="plait tcp" ;;
        ompi) n="Open MPI tcp BTL, all interfaces (default)" ;;
        ompi1) n="Open MPI tcp BTL, path 1 only (btl_tcp_if_include)" ;;
        esac
        v=$(col 1 "$work/s-$k")
        echo "| $n | $(gb "$v") | $(awk -v a="$u" -v b="$v" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "n/a" }') | $(col 2 "$work/s-$k") / $(col 3 "$work/s-$k") |"
    done
    echo
}

cpu() {
    local r v
    : >"$work/p-udp"; : >"$work/p-tcp"
    for r in $(seq "$reps"); do
        for t in udp tcp; do
            v=$(pairs 1 $t -- -q); echo "# cpu run $r: $t $v" >&2; echo "$v" >>"$work/p-$t"
        done
    done
    echo "### CPU per byte, one pair A -> B, 2 x 1 Gbit/s"
    echo
    echo "udp-pairs -m $how -q (no checking), $secs s per run: user+sys seconds of both ranks (all"
    echo "threads; waiting ranks poll, so an upper bound) per delivered byte; median of $reps."
    echo
    echo "| transport | Gbit/s | CPU ns/B |"
    echo "|---|---:|---:|"
    for t in udp tcp; do
        echo "| plait $t | $(col 3 "$work/p-$t") | $(col 4 "$work/p-$t") |"
    done
    echo
}

echo "## udp-collision.sh: $(date -u +%FT%RZ) on $(hostname), $(nproc) cores, kernel $(uname -r)"
echo
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
case $what in
collision|single|cpu) $what ;;
collision-udp) collision ;;
all) collision; single; cpu ;;
*) echo "udp-collision.sh: -m collision|collision-udp|single|cpu|all" >&2; exit 2 ;;
esac
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
