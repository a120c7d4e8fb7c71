#!/bin/bash
# timeout: 600
# t-udp.sh -- the multipath UDP transport under plaitrun on loopback
# (PLAIT_TRANSPORT=udp forces it between ranks of one host): the
# point-to-point programs of tests/integration (they check every byte of
# seeded random data), each congestion control and load balancer, several
# engines, one path, 1500-byte datagrams, and the PLAIT_STATS=1 counters.
# Env: PLAIT_BUILDDIR, PLAIT_SRCDIR, PLAIT_TIMEOUT (default 60),
# PLAIT_TEST_SEED.
set -u

here=$(cd "$(dirname "$0")" && pwd)
B=${PLAIT_BUILDDIR:-$(cd "$here/../.." && pwd)}
BIN=$B/tests/integration
PLAITRUN=${PLAIT_UDP_PLAITRUN:-$B/launcher/plaitrun}
export PLAIT_TIMEOUT=${PLAIT_TIMEOUT:-60}
export PLAIT_TEST_SEED=${PLAIT_TEST_SEED:-20261122}
export PLAIT_TEST_QUICK=1
JOB_LIMIT=120          # hang guard per job, seconds
source "$here/../tap-lib.sh" udp

# job NAME N "VAR=val ..." PROG ARGS...: a job under plaitrun with
# PLAIT_TRANSPORT=udp plus the given settings; must exit 0.
job() {
    local name=$1 n=$2 vars=$3 t0 rc secs
    shift 3
    local L=("$PLAITRUN" -n "$n" --bind-to none --timeout $((JOB_LIMIT - 10))
             -x PLAIT_TRANSPORT=udp -x PLAIT_TIMEOUT -x PLAIT_TEST_SEED -x PLAIT_TEST_QUICK)
    for v in $vars; do L+=(-x "$v"); done
    t0=$(date +%s)
    timeout -k 5 "$JOB_LIMIT" "${L[@]}" "$@" > "$out" 2>&1 < /dev/null
    rc=$?
    secs=$(( $(date +%s) - t0 ))
    if [ "$rc" = 0 ]; then
        pass "$name (${secs}s)"
    else
        fail "$name" "exit status $rc after ${secs}s (seed $PLAIT_TEST_SEED)" "command: ${L[*]} $*"
    fi
    return $rc
}

if [ ! -x "$PLAITRUN" ] || [ ! -x "$BIN/pt2pt_sizes" ]; then
    echo "not ok - plaitrun and tests/integration built"
    echo "# build first: make && make check TESTS="
    exit 1
fi
if ! "$B/tools/plait_info" 2>/dev/null | grep -q "PLAIT_UDP_PATHS"; then
    echo "ok - udp transport # SKIP plait_info does not list PLAIT_UDP_PATHS"
    exit 0
fi

for prog in pt2pt_sizes pt2pt_match pt2pt_trunc pt2pt_many comm_split pt2pt_threads pt2pt_late; do
    for n in 2 3; do
        job "udp loopback: $prog -n $n" "$n" "" "$BIN/$prog"
    done
done
# The rendezvous head (pt2pt/proto.c; off by default): 64 KiB, and its largest.
for head in 64K 1M; do
    job "udp loopback: pt2pt_late -n 2, PLAIT_NET_HEAD=$head" 2 "PLAIT_NET_HEAD=$head" "$BIN/pt2pt_late"
done

# Every collective over udp between ranks of one host (no shm, no shared
# area): the pt2pt and schedule paths all ride on the multipath transport,
# including a bcast root streaming ahead of its receivers (flow control).
COLL=$B/tests/coll/coll_check
if [ -x "$COLL" ]; then
    for n in 3 8; do
        job "udp loopback: coll_check -n $n, reduced matrix" "$n" "" "$COLL" suite reduced
    done
    # and with rendezvous heads (not quick: its MiB-sized calls are rendezvous)
    job "udp loopback: coll_check -n 4, reduced matrix with MiB calls, PLAIT_NET_HEAD=64K" 4 \
        "PLAIT_NET_HEAD=64K PLAIT_TEST_QUICK=0" "$COLL" suite reduced
fi

# A bcast root streaming eager messages never waits (each send completes at
# once), so only its sends can read the ACKs: they run a receive pass when
# none ran lately (udp_send_drive; counted), every byte checked.
name="udp loopback: bcast root streaming 4-64 KiB eager messages (checked)"
if job "$name" 2 "PLAIT_STATS=1" "$B/tools/plait-bench" coll bcast -b 4K -e 64K -n 2000 -c 1; then
    if grep -Eq "rank 0: .*receive passes run by sends [1-9]" "$out"; then
        pass "udp loopback: a sender that never waits reads its ACKs from its sends"
    else
        fail "udp loopback: a sender that never waits reads its ACKs from its sends" \
            "$(grep -o 'rank 0: .*receive passes run by sends [0-9]*' "$out" | tr '\n' ' ')"
    fi
fi

# A bulk exchange both ways (alltoall of 2 x 2 MiB, every byte checked) with
# the engine thread helping: it sends the bulk transfers (counted) while the
# callers receive, their payload copies made with the connection unlocked.
name="udp loopback: bulk exchange with the engine thread sending (checked alltoall 4 MiB)"
if job "$name" 2 "PLAIT_STATS=1 PLAIT_UDP_TX_HELP=on" "$B/tools/plait-bench" coll alltoall \
    -b 4M -e 4M -n 20 -w 2 -c 1; then
    if [ "$(grep -Ec "packets the engine thread sent beside a caller [1-9]" "$out")" = 2 ]; then
        pass "udp loopback: the engine thread sends bulk data beside both callers"
    else
        fail "udp loopback: the engine thread sends bulk data beside both callers" \
            "$(grep -o 'rank [0-9]: .*sent beside a caller [0-9]*' "$out" | tr '\n' ' ')"
    fi
fi

# A one-way bulk stream (checked): the receiver's engine thread, with nothing
# to send, reads the socket beside the caller while data is expected.
name="udp loopback: one-way bulk stream, engine thread helping (checked pt2pt bw 1-4 MiB)"
if job "$name" 2 "PLAIT_STATS=1 PLAIT_UDP_TX_HELP=on" "$B/tools/plait-bench" pt2pt -m bw \
    -b 1M -e 4M -n 10 -W 8 -c; then
    if grep -Eq "rank 1: .*datagrams it received beside a caller [1-9]" "$out"; then
        pass "udp loopback: the receiver's engine thread receives beside its caller"
    else
        fail "udp loopback: the receiver's engine thread receives beside its caller" \
            "$(grep -o 'rank [0-9]: .*received beside a caller [0-9]*' "$out" | tr '\n' ' ')"
    fi
fi

for cc in cubic swift dgpool eqds; do
    job "udp loopback: PLAIT_CC=$cc pt2pt_sizes -n 2" 2 "PLAIT_CC=$cc" "$BIN/pt2pt_sizes"
done
for lb in spray p2c ackclock pwin; do
    job "udp loopback: PLAIT_LB=$lb pt2pt_many -n 2" 2 "PLAIT_LB=$lb" "$BIN/pt2pt_many"
done
job "udp loopback: PLAIT_ENGINES=2 pt2pt_sizes -n 2" 2 "PLAIT_ENGINES=2" "$BIN/pt2pt_sizes"
job "udp loopback: PLAIT_UDP_TX_HELP=on PLAIT_ENGINES=2 pt2pt_threads -n 3" 3 \
    "PLAIT_UDP_TX_HELP=on PLAIT_ENGINES=2" "$BIN/pt2pt_threads"
job "udp loopback: PLAIT_UDP_PATHS=1 pt2pt_sizes -n 2" 2 "PLAIT_UDP_PATHS=1" "$BIN/pt2pt_sizes"
job "udp loopback: 1500-byte datagrams, 4K chunks pt2pt_sizes -n 2" 2 \
    "PLAIT_UDP_MTU=1500 PLAIT_CHUNK_SIZE=4K" "$BIN/pt2pt_sizes"

# Runs (pp.h PP_F_RUN: one header per GSO datagram) at 1500-byte datagrams:
# taken whole (runs counted, none cut); and with the receiving kernel cutting
# every GSO datagram (PLAIT_UDP_GRO=0): the cut is found, the senders go back
# to a header per packet, and every byte still arrives (checked).
name="udp loopback: runs in 1500-byte datagrams"
if job "$name: pt2pt_sizes -n 2" 2 "PLAIT_STATS=1 PLAIT_UDP_MTU=1500" "$BIN/pt2pt_sizes"; then
    if [ "$(grep -Ec "runs rx [1-9][0-9]* \(0 cut\)" "$out")" = 2 ] && ! grep -q "runs off" "$out"; then
        pass "$name: every run taken whole"
    else
        fail "$name: every run taken whole" "$(grep -o 'runs rx.*' "$out" | tr '\n' ' ')"
    fi
fi
name="udp loopback: runs cut by the receiving kernel (PLAIT_UDP_GRO=0)"
if job "$name: pt2pt_sizes -n 2" 2 "PLAIT_STATS=1 PLAIT_UDP_MTU=1500 PLAIT_UDP_GRO=0" \
       "$BIN/pt2pt_sizes"; then
    if [ "$(grep -c "runs off (the peer found one cut)" "$out")" = 2 ]; then
        pass "$name: both senders stopped sending runs"
    else
        fail "$name: both senders stopped sending runs" "$(grep -o 'runs rx.*' "$out" | tr '\n' ' ')"
    fi
fi
job "udp loopback: PLAIT_UDP_RUNS=0 at 1500-byte datagrams, pt2pt_many -n 2" 2 \
    "PLAIT_UDP_RUNS=0 PLAIT_UDP_MTU=1500" "$BIN/pt2pt_many"

# Zero copy (PLAIT_UDP_ZCOPY_MIN, default on): a send buffer overwritten right
# after plait_wait must not reach the receiver; small datagrams make many
# packets to repair; and the copy path stays covered with it off.
REUSE=$B/tests/udp/udp_reuse
if [ -x "$REUSE" ]; then
    job "udp loopback: send buffer reused after plait_wait, udp_reuse -n 2" 2 "" "$REUSE"
    job "udp loopback: udp_reuse -n 3" 3 "" "$REUSE"
    job "udp loopback: 1500-byte datagrams, udp_reuse -n 2" 2 \
        "PLAIT_UDP_MTU=1500 PLAIT_CHUNK_SIZE=4K" "$REUSE"
    job "udp loopback: PLAIT_UDP_ZCOPY_MIN=0 (copy) udp_reuse -n 2" 2 "PLAIT_UDP_ZCOPY_MIN=0" "$REUSE"
    # The engine thread sends beside the waiting caller (bulk messages):
    # zero-copy buffers are read by two threads, with ACKs arriving meanwhile.
    job "udp loopback: PLAIT_UDP_TX_HELP=on udp_reuse -n 3" 3 "PLAIT_UDP_TX_HELP=on" "$REUSE"
    job "udp loopback: PLAIT_UDP_TX_HELP=off udp_reuse -n 2" 2 "PLAIT_UDP_TX_HELP=off" "$REUSE"
    # A rendezvous head is read from the send buffer too (zero copy): the
    # send must not complete before it is acknowledged.
    job "udp loopback: PLAIT_NET_HEAD=64K udp_reuse -n 3" 3 "PLAIT_NET_HEAD=64K" "$REUSE"
    # The receiver stops (SIGSTOP) mid-message: the zero-copy send must end
    # with PLAIT_ERR_TRANSPORT after PLAIT_UDP_GIVE_UP, not hang.
    name="udp loopback: send to a stopped rank fails with PLAIT_ERR_TRANSPORT (give-up 1 s)"
    timeout -k 5 60 "$PLAITRUN" -n 2 --bind-to none --timeout 50 -x PLAIT_TRANSPORT=udp \
        -x PLAIT_UDP_GIVE_UP=1 -x PLAIT_TIMEOUT=30 "$REUSE" giveup > "$out" 2>&1 < /dev/null
    rc=$?
    if [ "$rc" != 124 ] &&
        grep -Eq "stopped rank: PLAIT_ERR_TRANSPORT \((plait_wait: )?udp: rank 1 stopped" "$out"
    then
        pass "$name"
    else
        fail "$name" "exit status $rc"
    fi
    for p in $(pgrep -f "^$REUSE giveup" || true); do kill -9 "$p" 2>/dev/null; done
else
    fail "udp loopback: udp_reuse built" "missing $REUSE (make check TESTS=)"
fi
job "udp loopback: PLAIT_UDP_ZCOPY_MIN=0 (copy) pt2pt_sizes -n 2" 2 "PLAIT_UDP_ZCOPY_MIN=0" \
    "$BIN/pt2pt_sizes"

# Unexpected eager messages (pt2pt_match sends ahead of its receives) stay
# in the transport's frame instead of being copied (rx_keep): the path is
# taken, and every byte checked by the program.
if job "udp loopback: PLAIT_STATS=1 pt2pt_match -n 2" 2 "PLAIT_STATS=1" "$BIN/pt2pt_match"; then
    if grep -Eq "messages kept unexpected [1-9]" "$out"; then
        pass "udp loopback: unexpected eager messages are kept in their frames, not copied"
    else
        fail "udp loopback: unexpected eager messages are kept in their frames, not copied" \
            "$(grep -o 'messages kept unexpected [0-9]*' "$out" | tr '\n' ' ')"
    fi
fi

# Early placement: eager messages of up to 1 MiB in 9000-byte datagrams
# (many packets each), most with their receive posted before they are
# complete: those are written straight into the receive buffer as they
# come (ptl.h rx_early_set); every byte checked by the programs, the path
# taken (counted at finalize).
name="udp loopback: eager messages placed early into posted receives"
if job "$name: udp_reuse -n 3" 3 "PLAIT_STATS=1 PLAIT_NET_EAGER_LIMIT=1M PLAIT_UDP_MTU=9000" \
       "$REUSE"; then
    if grep -Eq "placed early [1-9]" "$out"; then
        pass "$name: the path is taken"
    else
        fail "$name: the path is taken" "$(grep -o 'placed early [0-9]* msgs' "$out" | tr '\n' ' ')"
    fi
fi
job "$name: pt2pt_match -n 2" 2 "PLAIT_NET_EAGER_LIMIT=1M PLAIT_UDP_MTU=9000" "$BIN/pt2pt_match"
job "$name: pt2pt_many -n 3" 3 "PLAIT_NET_EAGER_LIMIT=1M PLAIT_UDP_MTU=9000" "$BIN/pt2pt_many"

# Counters at finalize: per connection and per path.
if job "udp loopback: PLAIT_STATS=1 pt2pt_sizes -n 2" 2 "PLAIT_STATS=1" "$BIN/pt2pt_sizes"; then
    if grep -q "conn 0->1: tx [1-9]" "$out" && grep -q "conn 1->0: tx [1-9]" "$out" &&
       grep -Eq "^    path +[0-9]+ \(port [0-9]+->[0-9]+\): [1-9]" "$out"; then
        pass "udp loopback: PLAIT_STATS=1 prints connection and path counters"
    else
        fail "udp loopback: PLAIT_STATS=1 prints connection and path counters" "no counters found"
    fi
fi

# PLAIT_UDP_TX_HELP: auto turns the engine thread's help on where a rank may
# run on two cores or more, off where it is bound to one (they would take
# turns); on and off are obeyed. The counters' header says which it is.
tx_help_is() {   # tx_help_is WANT NAME PLAITRUN-ARGS...
    local want=$1 name=$2
    shift 2
    timeout 60 "$PLAITRUN" -n 2 -x PLAIT_TRANSPORT=udp -x PLAIT_STATS=1 "$@" \
        "$BIN/pt2pt_sizes" > "$out" 2>&1 < /dev/null
    if [ $? = 0 ] && [ "$(grep -c "tx help $want," "$out")" = 2 ]; then
        pass "$name"
    else
        fail "$name" "$(grep -o 'tx help [a-z]*' "$out" | sort | uniq -c | tr '\n' ' ')"
    fi
}
if [ "$(nproc)" -ge 2 ]; then
    tx_help_is on "udp: PLAIT_UDP_TX_HELP=auto, unbound: the engine thread helps" --bind-to none
    tx_help_is off "udp: PLAIT_UDP_TX_HELP=auto, bound to one core each: no help" --bind-to core
fi
tx_help_is off "udp: PLAIT_UDP_TX_HELP=off is obeyed" --bind-to none -x PLAIT_UDP_TX_HELP=off
tx_help_is on "udp: PLAIT_UDP_TX_HELP=on is obeyed, also bound to one core" --bind-to core \
    -x PLAIT_UDP_TX_HELP=on

# Foreign datagrams at a live job's sockets: 10 empty, 10 of one byte and
# 10 of random bytes (1-1400) at every UDP port of both ranks while they
# stream checked data. Nothing reaches the program (every byte checked), no
# crash, and each short one is counted as a truncated drop (PLAIT_STATS;
# empty ones were not counted at all).
descendants() {   # every process below pid $1
    local c
    for c in $(pgrep -P "$1"); do echo "$c"; descendants "$c"; done
}
foreign_udp() {
    local pid pids ports= i sum
    "$PLAITRUN" -n 2 --bind-to none -x PLAIT_TRANSPORT=udp -x PLAIT_STATS=1 -x PLAIT_TIMEOUT \
        "$B/tools/plait-bench" pt2pt -m bw -b 64K -e 1M -n 100 -c > "$out" 2>&1 < /dev/null &
    pid=$!
    # The header comes after plait_init, whose fence waits for every rank's
    # udp sockets: then both ranks' ports are bound (not just some of one's).
    for i in $(seq 400); do
        grep -q "^# Size" "$out" && break
        sleep 0.05
    done
    pids=$(descendants $pid | paste -sd'|')   # (plait-bench may be a libtool wrapper)
    ports=$(ss -Hunap 2>/dev/null | grep -E "pid=($pids)," | awk '{print $4}' | sed 's/.*://' |
            sort -u)
    python3 - $ports <<'PY'
import os, random, socket, sys
random.seed(20261127)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for port in map(int, sys.argv[1:]):
    for k in range(30):
        n = 0 if k < 10 else 1 if k < 20 else random.randint(1, 1400)
        s.sendto(os.urandom(n), ("127.0.0.1", port))
PY
    wait $pid || return 1
    sum=$(sed -n 's/.*dropped before any connection, truncated: \([0-9]*\).*/\1/p' "$out" |
          awk '{n += $1} END {print n + 0}')
    echo "# foreign datagrams at $(echo "$ports" | grep -c .) ports; truncated drops counted: $sum"
    # Each rank reads one socket here (one engine; a loopback peer takes one
    # path): 20 short datagrams each at least; the other ports are bound
    # for paths and never read.
    [ "$(echo "$ports" | grep -c .)" -ge 2 ] && [ "$sum" -ge 40 ]
}
if command -v python3 >/dev/null && command -v ss >/dev/null; then
    if foreign_udp; then
        pass "udp: foreign datagrams (empty, 1 byte, random) at a live job: data intact, counted as drops"
    else
        fail "udp: foreign datagrams (empty, 1 byte, random) at a live job: data intact, counted as drops" \
             "$(tail -5 "$out")"
    fi
else
    echo "ok - udp: foreign datagrams at a live job # SKIP python3 or ss missing"
fi

# A malformed setting is an error naming the variable.
PLAIT_UDP_PATHS=0 timeout 30 "$PLAITRUN" -n 2 --bind-to none -x PLAIT_TRANSPORT=udp \
    -x PLAIT_UDP_PATHS "$BIN/pt2pt_sizes" > "$out" 2>&1 < /dev/null
if [ $? != 0 ] && grep -q "PLAIT_UDP_PATHS" "$out"; then
    pass "udp: PLAIT_UDP_PATHS=0 fails plait_init naming the setting"
else
    fail "udp: PLAIT_UDP_PATHS=0 fails plait_init naming the setting"
fi

exit $((failures > 0))
