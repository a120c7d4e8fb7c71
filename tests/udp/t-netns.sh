#!/bin/bash
# timeout: 300
# t-netns.sh -- the multipath UDP transport between two hosts made of
# network namespaces, joined by two routed paths (tests/udp/udp-bed.sh,
# built under a private prefix): routes between the hosts' service addresses
# are ECMP over both routers hashed on the UDP ports, so the transport's
# paths (port pairs) spread over both links. The ranks bind their paths to
# that address (PLAIT_UDP_IF=<address>).
#
# Cases (one rank on A, one on B unless said, PLAIT_TRANSPORT=udp, jobs
# launched with plaitrun --host a:1,b:1 --launch-agent 'ip netns exec NS-{host}'):
#   0% loss: pt2pt_sizes and pt2pt_many (checksummed random data), and both
#            routers forwarded the job's packets (the paths really spread);
#            runs (one header per GSO datagram) cut by the hosts' software
#            segmentation are found and stopped (ethtool present);
#   1% and 5% random loss of UDP on both routers (nftables): every byte
#            intact, and the transport reports retransmissions;
#   one path rate-limited hard (tbf 10 Mbit/s on R2, R1 unshaped): intact;
#   one path dead (R2 drops all UDP): intact, and paths were taken down;
#   a path MTU of 1280 (route): intact (sent fragmented), and the job says so;
#   2 x 5 Mbit/s: an early-placed receive cancelled mid-message gives the
#            message back whole; messages slower than PLAIT_TIMEOUT complete
#            on both sides, over udp and tcp (pt2pt_slow).
# After every job: no process left in the namespaces, no /dev/shm segment of
# the job left, nothing left in the job's TMPDIR. Timeouts are hang guards only.
# Env: PLAIT_BUILDDIR, PLAIT_SRCDIR, PLAIT_TEST_SEED. Needs root, ip netns,
# tc and nft (else SKIP); ethtool optional (host-side UDP segmentation off).
set -u

here=$(cd "$(dirname "$0")" && pwd)
SRCDIR=${PLAIT_SRCDIR:-$(cd "$here/../.." && pwd)}
B=${PLAIT_BUILDDIR:-$SRCDIR}
PLAITRUN=$B/launcher/plaitrun
BIN=$B/tests/integration
GUARD=100                 # seconds: hang guard per job, never a pass criterion
export PLAIT_TEST_SEED=${PLAIT_TEST_SEED:-20261122}

failures=0
pass() { echo "ok - $1"; }
fail() {
    echo "not ok - $1"; shift
    for l in "$@"; do echo "# $l"; done
    failures=$((failures + 1))
}
skip_all() { echo "ok - udp across namespace hosts # SKIP $1"; exit 0; }

[ "$(id -u)" = 0 ] || skip_all "not root"
for c in ip tc nft; do command -v $c >/dev/null || skip_all "no $c command"; done
probe="pudp$$probe"
ip netns add "$probe" 2>/dev/null || skip_all "ip netns add fails here"
ip netns del "$probe"
[ -x "$PLAITRUN" ] && [ -x "$BIN/pt2pt_sizes" ] && [ -x "$BIN/pt2pt_many" ] &&
    [ -x "$BIN/pt2pt_slow" ] ||
    skip_all "plaitrun or tests/integration not built under $B"

PFX="pu$$"
A=$PFX-a; NB=$PFX-b; R1=$PFX-r1; R2=$PFX-r2
A_VIP=198.18.200.1; B_VIP=198.18.100.1
WORK=$(mktemp -d /tmp/t-netns-udp.XXXXXX)
export TMPDIR=$WORK/tmp   # the daemons' PMIx directories land here
mkdir -p "$TMPDIR"

ns_pids() { local ns; for ns in $A $NB $R1 $R2; do ip netns pids "$ns" 2>/dev/null; done; }
teardown() {
    ns_pids | xargs -r kill -KILL 2>/dev/null
    "$here/udp-bed.sh" down $PFX
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap teardown EXIT
trap 'exit 1' INT TERM

BED=$here/udp-bed.sh
if ! err=$("$BED" up $PFX 2>&1); then
    fail "build the two-path namespace testbed" "$err"
    exit 1
fi
pass "build the two-path namespace testbed"

# Each rank binds its paths to its host's service address (the one on lo
# in 198.18.0.0/15), found when it starts.
cat > "$WORK/vip-run" <<'EOF'
#!/bin/sh
PLAIT_UDP_IF=$(ip -4 -o addr show dev lo | awk '{print $4}' | grep '^198\.18\.' | head -1 | cut -d/ -f1)
export PLAIT_UDP_IF
exec "$@"
EOF
chmod +x "$WORK/vip-run"

shm_list() { ls /dev/shm 2>/dev/null | grep '^plait-' | sort; }
leftovers() {   # problems left behind by the last job, one per line
    local i p
    for i in $(seq 50); do
        [ -z "$(ns_pids)" ] && break
        sleep 0.1
    done
    for p in $(ns_pids); do
        echo "process still alive: $(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null)"
    done
    # only this job's segments (namespace plait.<head pid>): other people's
    # jobs share /dev/shm and come and go meanwhile
    comm -13 <(echo "$shm_before") <(shm_list) | grep "^plait-plait\.$(cat "$WORK/head.pid" 2>/dev/null)-" |
        sed 's/^/left in \/dev\/shm: /'
    ls -A "$TMPDIR" | sed 's/^/left in TMPDIR: /'
}

# job NAME "VAR=val ..." PROG: one rank on A, one on B, over udp; must exit 0
# and leave nothing behind. The output stays in $out.
job() {
    local name=$1 vars=$2 prog=$3 rc t0 left
    local L=("$PLAITRUN" --host "${HOSTS:-a:1,b:1}" --launch-agent "ip netns exec $PFX-{host}"
             --head-address 198.18.1.1 --timeout $((GUARD - 10))
             -x PLAIT_TRANSPORT=udp -x PLAIT_TEST_SEED -x PLAIT_TIMEOUT=60
             -x PLAIT_STATS=1)
    local v
    for v in $vars; do L+=(-x "$v"); done
    out=$WORK/$(echo "$name" | tr -c 'A-Za-z0-9\n' '_').out
    shm_before=$(shm_list)
    t0=$(date +%s)
    rm -f "$WORK/head.pid"
    timeout -s KILL $GUARD ip netns exec $A sh -c 'echo $$ > "$0"; shift; exec "$@"' \
        "$WORK/head.pid" - "${L[@]}" "$WORK/vip-run" "$BIN/$prog" ${ARGS:-} >"$out" 2>&1 </dev/null
    rc=$?
    left=$(leftovers)
    if [ $rc = 0 ] && [ -z "$left" ]; then
        pass "$name ($(( $(date +%s) - t0 ))s)"
        return 0
    fi
    fail "$name" "exit status $rc after $(( $(date +%s) - t0 ))s (seed $PLAIT_TEST_SEED)" \
        "command: ip netns exec $A ${L[*]} $WORK/vip-run $BIN/$prog" "$left" \
        "--- output (last 25 lines):" "$(tail -n 25 "$out")"
    return 1
}

# The sum of a counter over every connection line of PLAIT_STATS output.
stat_sum() { grep -o "$1 [0-9]*" "$out" | awk '{ s += $NF } END { print s + 0 }'; }

# ------------------------------------------------------------------ cases
read -r r1_0 r2_0 < <("$BED" fwd $PFX)
job "udp A<->B, no loss: pt2pt_sizes" "" pt2pt_sizes
read -r r1_1 r2_1 < <("$BED" fwd $PFX)
if [ $((r1_1 - r1_0)) -gt 100 ] && [ $((r2_1 - r2_0)) -gt 100 ]; then
    pass "udp A<->B: the paths spread over both routers (R1 $((r1_1 - r1_0)), R2 $((r2_1 - r2_0)) packets to B)"
else
    fail "udp A<->B: the paths spread over both routers" \
        "packets forwarded to B: R1 $((r1_1 - r1_0)), R2 $((r2_1 - r2_0))" "$(grep -m3 'conn\|path' "$out")"
fi
# The bed's hosts segment their UDP in software before the wire (udp-bed.sh,
# with ethtool), as a NIC's segmentation offload would: a run (one header per GSO
# datagram, pp.h PP_F_RUN) arrives cut. The receiver must say so and the
# sender go back to a header per packet, every byte intact (pt2pt_sizes
# checked them).
if command -v ethtool >/dev/null; then
    if grep -q "runs off (the peer found one cut)" "$out" &&
       grep -Eq "runs rx [0-9]+ \([1-9][0-9]* cut\)" "$out"; then
        pass "udp A<->B, datagrams segmented before the wire: runs found cut, the senders stopped them"
    else
        fail "udp A<->B, datagrams segmented before the wire: runs found cut, the senders stopped them" \
            "$(grep -o 'runs rx.*' "$out" | tr '\n' ' ')"
    fi
fi
job "udp A<->B, no loss: pt2pt_many" "" pt2pt_many

for pct in 1 5; do
    "$BED" loss $PFX $pct
    if job "udp A<->B, ${pct}% random loss on both paths: pt2pt_sizes" "" pt2pt_sizes; then
        retx=$(( $(stat_sum "retx fast") + $(stat_sum "timeout") ))
        if [ "$retx" -gt 0 ]; then
            pass "udp A<->B, ${pct}% loss: lost packets were retransmitted ($retx)"
        else
            fail "udp A<->B, ${pct}% loss: lost packets were retransmitted" "no retransmission counted"
        fi
    fi
    job "udp A<->B, ${pct}% random loss on both paths: pt2pt_many" "" pt2pt_many
done
HOSTS=a:2,b:2 job "udp 2+2 ranks, 1% loss, ranks of one host over loopback too: pt2pt_many" "" \
    pt2pt_many
"$BED" loss $PFX 0

"$BED" rate $PFX none 10mbit
job "udp A<->B, path 2 limited to 10 Mbit/s: pt2pt_sizes" "" pt2pt_sizes
job "udp A<->B, path 2 limited to 10 Mbit/s, PLAIT_LB=spray: pt2pt_sizes" "PLAIT_LB=spray" \
    pt2pt_sizes
"$BED" rate $PFX none

# A dead path: R2 drops every UDP packet both ways. The paths hashed onto it
# must be taken out of use (path quarantine, transport/proto conn.c), the
# data resent over R1; the job must finish, every byte intact.
"$BED" loss $PFX 0 100
if job "udp A<->B, path 2 dead (100% loss on R2): pt2pt_sizes" "" pt2pt_sizes; then
    downs=$(stat_sum "taken down")
    if [ "$downs" -gt 0 ]; then
        pass "udp A<->B, path 2 dead: paths were taken down ($downs times)"
    else
        fail "udp A<->B, path 2 dead: paths were taken down" "no path counted down" \
            "$(grep -m5 'path' "$out")"
    fi
fi
"$BED" loss $PFX 0

# A path MTU below the datagram size: A's route to B carries MTU 1280 (as a
# path MTU learnt from a router's "fragmentation needed" would), so A's kernel
# refuses the 1500-byte datagrams (EMSGSIZE), GSO batches included. The
# transport must send them fragmented from then on and say so, not retry them
# until B is given up as unreachable (before: a 30 s stall, then "rank 1
# stopped acknowledging").
route_to_b() {
    ip -n $A route replace $B_VIP/32 src $A_VIP "$@" \
        nexthop via 198.18.1.2 dev a-r1 weight 1 nexthop via 198.18.2.2 dev a-r2 weight 1
}
route_to_b mtu 1280
if job "udp A<->B, path MTU 1280 below the 1500-byte datagrams: pt2pt_sizes" "" pt2pt_sizes; then
    if grep -q "do not fit the path MTU" "$out"; then
        pass "udp A<->B, path MTU 1280: the transport said it went fragmented"
    else
        fail "udp A<->B, path MTU 1280: the transport said it went fragmented" \
            "no 'do not fit the path MTU' warning" "$(grep -m5 'udp' "$out")"
    fi
fi
route_to_b

# A receive placed early and cancelled mid-message (udp_reuse revoke: the
# receiver stops the sender at the first byte placed, so its 2 s timeout
# falls mid-message): the message must come whole to the next receive, and
# nothing may be written into the cancelled one's buffer after it returned.
# 5 Mbit/s per path keeps the transfer long enough for the stop to land
# before the last byte.
"$BED" rate $PFX 5mbit 5mbit
if ARGS=revoke job "udp A<->B: an early-placed receive cancelled mid-message" \
       "PLAIT_NET_EAGER_LIMIT=1M PLAIT_TIMEOUT=2" ../udp/udp_reuse; then
    grep -m1 "placed early before" "$out" | sed 's/^/# /'
fi

# Messages that take longer than PLAIT_TIMEOUT to cross (2 x 5 Mbit/s: 4 MiB
# in about 3.4-4 s; PLAIT_TIMEOUT=2): a wait times out only once its transfer
# stops moving, so send and receive both complete, every byte intact.
# (Before, the receive timed out mid-message, and a sender that had handed
# over every byte reported success: the message was lost.) tcp takes one
# path: 2 MiB. 2 s, not 1: a wait now ends one PLAIT_TIMEOUT after the last
# movement seen (pt2pt_stall below), and the bed's queues swing between full
# and empty for up to a second (the sanitized build failed it once at 1).
if job "udp A<->B: messages slower than PLAIT_TIMEOUT complete" "PLAIT_TIMEOUT=2" \
       pt2pt_slow; then
    grep "pt2pt_slow rank" "$out" | sed 's/^/# /'
fi
if ARGS=2097152 job "tcp A<->B: messages slower than PLAIT_TIMEOUT complete" \
       "PLAIT_TIMEOUT=2 PLAIT_TRANSPORT=tcp" pt2pt_slow; then
    grep "pt2pt_slow rank" "$out" | sed 's/^/# /'
fi
"$BED" rate $PFX none

# A wait whose peer stops answering ends one PLAIT_TIMEOUT after the traffic
# with it stopped (a message that moved early in the first window once
# bought a whole second one over udp: 2 x PLAIT_TIMEOUT, a black-box report).
for tr in udp tcp; do
    if job "$tr A<->B: a stalled peer's wait ends one PLAIT_TIMEOUT after the traffic" \
           "PLAIT_TIMEOUT=2 PLAIT_TRANSPORT=$tr" pt2pt_stall; then
        grep "pt2pt_stall rank" "$out" | sed 's/^/# /'
    fi
done

exit $((failures > 0))
