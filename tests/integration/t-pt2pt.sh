#!/bin/bash
# timeout: 600
# t-pt2pt.sh -- point-to-point and communicator integration tests under plaitrun.
# Runs each program of tests/integration with 1, 2, 3, 4 and 8 ranks (where it
# makes sense) and prints one TAP line per (program, ranks); plus the 2 GiB
# message (2 ranks), the shared-memory variants (no CMA; tiny eager limit and
# rings), a singleton run without plaitrun, PLAIT_TIMEOUT, rank death,
# plait_abort and exit without finalize (plaitrun must end those jobs within
# 20 s, exit non-zero, name the rank and leave no process behind).
# Env: PLAIT_BUILDDIR, PLAIT_SRCDIR (set by run-all.sh), PLAIT_TIMEOUT (default
# 60), PLAIT_TEST_SEED (random data seed), PLAIT_TEST_QUICK=1 (skip the 2 GiB
# case, shrink loops), PLAIT_TEST_NP="1 2" (restrict the rank counts).
set -u

here=$(cd "$(dirname "$0")" && pwd)
B=${PLAIT_BUILDDIR:-$(cd "$here/../.." && pwd)}
BIN=$B/tests/integration
PLAITRUN=$B/launcher/plaitrun
export PLAIT_TIMEOUT=${PLAIT_TIMEOUT:-60}
export PLAIT_TEST_SEED=${PLAIT_TEST_SEED:-20261121}
export PLAIT_TEST_QUICK=${PLAIT_TEST_QUICK:-0}
NPS=${PLAIT_TEST_NP:-"1 2 3 4 8"}
JOB_LIMIT=150          # hang guard per job, seconds (plaitrun --timeout just below it)
TAP_TAIL=${TAP_TAIL:-40}
source "$here/../tap-lib.sh" pt2pt
skip() { echo "ok - $1 # SKIP $2"; }
# ok_if_zero NAME: one TAP line from the last run's exit status.
ok_if_zero() {
    if [ "$rc" = 0 ]; then pass "$1"; else fail "$1" "exit status $rc after ${secs}s (seed $PLAIT_TEST_SEED)"; fi
}

# run LIMIT CMD...: runs CMD with its output in $out; sets rc, secs and hung
# (1 when `timeout` ended it: told by the clock, since plaitrun itself
# legitimately exits 124 for --timeout and 137 for a rank killed by SIGKILL).
run() {
    local limit=$1 t0
    shift
    t0=$(date +%s)
    timeout -k 5 "$limit" "$@" > "$out" 2>&1 < /dev/null
    rc=$?
    secs=$(( $(date +%s) - t0 ))
    hung=0
    if { [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && [ "$secs" -ge "$limit" ]; then hung=1; fi
}

# launcher N [TIMEOUT_VALUE]: sets the array L to the plaitrun command line
# (plus "-x VAR=val" for every word of $VARIANT).
VARIANT=""
launcher() {
    local v
    L=("$PLAITRUN" -n "$1" --bind-to none --timeout $((JOB_LIMIT - 10))
       -x "PLAIT_TIMEOUT=${2:-$PLAIT_TIMEOUT}" -x PLAIT_TEST_SEED -x PLAIT_TEST_QUICK)
    for v in $VARIANT; do L+=(-x "$v"); done
}

# job NAME N PROG ARGS...: a job that must succeed.
job() {
    local name=$1 n=$2
    shift 2
    launcher "$n"
    run "$JOB_LIMIT" "${L[@]}" "$@"
    if [ "$rc" = 0 ]; then
        pass "$name"
    elif [ "$hung" = 1 ]; then
        fail "$name" "hung: killed after ${JOB_LIMIT}s (seed $PLAIT_TEST_SEED)" "command: ${L[*]} $*"
    else
        fail "$name" "exit status $rc after ${secs}s (seed $PLAIT_TEST_SEED)" "command: ${L[*]} $*"
    fi
}

# Leftover processes of a job are a launcher bug; report and end them.
no_leftovers() {
    local name=$1 prog=$2 pids
    sleep 1
    pids=$(pgrep -f "^$prog( |$)" || true)
    if [ -n "$pids" ]; then
        fail "$name: no processes left behind" "still running: $(echo "$pids" | tr '\n' ' ')"
        for p in $pids; do kill -9 "$p" 2>/dev/null; done
    else
        pass "$name: no processes left behind"
    fi
}

# fault NAME N MODE EXPECT_REGEX...: a job that must fail (non-zero, not hung)
# and whose output must match every regex (extended, case-insensitive).
fault() {
    local name=$1 n=$2 mode=$3 limit=20 missing=()
    shift 3
    launcher "$n"
    run "$limit" "${L[@]}" "$BIN/pt2pt_fault" "$mode"
    for re in "$@"; do grep -Eiq -- "$re" "$out" || missing+=("output does not match /$re/"); done
    if [ "$hung" = 1 ]; then
        fail "$name" "plaitrun still running after ${limit}s: the job was not ended"
    elif [ "$rc" = 0 ]; then
        fail "$name" "plaitrun exited 0 although the job failed"
    elif [ ${#missing[@]} -gt 0 ]; then
        fail "$name" "plaitrun exited $rc after ${secs}s" "${missing[@]}"
    else
        pass "$name (plaitrun exit $rc after ${secs}s)"
        [ "$mode" = abort ] && [ "$rc" != 7 ] && echo "# note: plaitrun exited $rc; plait_abort asked for 7"
    fi
    no_leftovers "$name" "$BIN/pt2pt_fault"
}

# ------------------------------------------------------------------ preflight
if [ ! -x "$PLAITRUN" ]; then
    echo "not ok - plaitrun built"
    echo "# $PLAITRUN is missing: build first (make && make check TESTS=)"
    exit 1
fi
for p in pt2pt_match pt2pt_trunc pt2pt_self pt2pt_sizes pt2pt_many pt2pt_threads comm_split \
         pt2pt_errors pt2pt_timeout pt2pt_fault pt2pt_late; do
    if [ ! -x "$BIN/$p" ]; then
        echo "not ok - $p built"
        echo "# $BIN/$p is missing: run make check TESTS= first"
        exit 1
    fi
done
echo "# seed $PLAIT_TEST_SEED, PLAIT_TIMEOUT=$PLAIT_TIMEOUT, ranks: $NPS"

# ------------------------------------------------------------------ singleton
run 60 "$BIN/pt2pt_self" --singleton
ok_if_zero "singleton: pt2pt_self without plaitrun"
run 60 "$BIN/pt2pt_errors"
ok_if_zero "singleton: pt2pt_errors without plaitrun"

# ------------------------------------------------------------------ correctness
for prog in pt2pt_self pt2pt_sizes pt2pt_trunc pt2pt_match pt2pt_many comm_split pt2pt_errors \
            pt2pt_threads pt2pt_late; do
    for n in $NPS; do
        job "$prog -n $n" "$n" "$BIN/$prog"
    done
done
# A stale handle is detected by reading the freed request's mark: the
# program's own use after free, which AddressSanitizer stops (tests/asan).
if [ -n "${PLAIT_TEST_SANITIZED:-}" ]; then
    skip "pt2pt_errors --stale -n 2" "reads freed memory on purpose (sanitized build)"
else
    job "pt2pt_errors --stale (use of a freed communicator) -n 2" 2 "$BIN/pt2pt_errors" --stale
fi

# Messages nobody received: finalize succeeds and the receiver says so.
launcher 3
run 30 "${L[@]}" "$BIN/pt2pt_errors" --unreceived
if [ "$rc" = 0 ] && grep -q "3 messages sent to this rank on communicator world (3 ranks) were never received (the first: 100 bytes from rank 0, tag 9)" "$out"; then
    pass "finalize warns of 3 messages nobody received (-n 3)"
else
    fail "finalize warns of 3 messages nobody received (-n 3)" "exit $rc"
fi
if grep -q "plait_comm_free: 2 messages sent to this rank on communicator .* were never received (the first: 50 bytes from rank 0, tag 4); dropped" "$out"; then
    pass "plait_comm_free warns of 2 messages nobody received on the dup it frees (-n 3)"
else
    fail "plait_comm_free warns of 2 messages nobody received on the dup it frees (-n 3)" "exit $rc"
fi
if grep -q "plait_finalize: 1 message sent to this rank on a communicator this rank had freed (context .*) was never received (the first: 60 bytes from rank 0, tag 5); dropped" "$out"; then
    pass "finalize warns of a message that came on a communicator freed before (-n 3)"
else
    fail "finalize warns of a message that came on a communicator freed before (-n 3)" "exit $rc"
fi
if [ -n "${PLAIT_TEST_SANITIZED:-}" ]; then
    skip "finalize warns of a receive posted and never completed (-n 3)" \
         "its request leaks on purpose (sanitized build)"
elif grep -q "plait\[0\] warning: plait_finalize: 1 request was never completed with plait_wait or plait_test (0 sends, 1 receive, 0 collectives); dropped" "$out"; then
    pass "finalize warns of a receive posted and never completed (-n 3)"
else
    fail "finalize warns of a receive posted and never completed (-n 3)" "exit $rc"
fi

# The same traffic through the library's other shared-memory paths: no
# single-copy (CMA), and a tiny eager limit with 2-slot rings (rendezvous and
# ring-full back-pressure everywhere). Run only where plait_info lists the
# setting, since these are the library's tunables, not its API.
settings=$("$B/tools/plait_info" 2>/dev/null)
for VARIANT in "PLAIT_SHM_CMA=0" "PLAIT_SHM_EAGER_LIMIT=256 PLAIT_SHM_RING_SLOTS=2"; do
    for case in "pt2pt_match 3" "pt2pt_many 2" "pt2pt_threads 3" "pt2pt_trunc 2" "pt2pt_sizes 3"; do
        read -r prog n <<< "$case"
        unknown=""
        for v in $VARIANT; do grep -q "^ *${v%%=*} " <<< "$settings" || unknown="$unknown ${v%%=*}"; done
        if [ -n "$unknown" ]; then
            skip "$prog -n $n with $VARIANT" "plait_info does not list$unknown"
        else
            job "$prog -n $n with $VARIANT" "$n" "$BIN/$prog"
        fi
    done
done
VARIANT=""

# 2 GiB + 1 byte: about 4.5 GiB for the pair.
avail_kb=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
if [ "$PLAIT_TEST_QUICK" != 0 ]; then
    skip "pt2pt_sizes --big (2 GiB + 1 byte) -n 2" "quick mode"
elif [ "${avail_kb:-0}" -lt $((6 * 1024 * 1024)) ]; then
    skip "pt2pt_sizes --big (2 GiB + 1 byte) -n 2" "needs 6 GiB available, have $((avail_kb / 1024)) MiB"
else
    job "pt2pt_sizes --big (2 GiB + 1 byte) -n 2" 2 "$BIN/pt2pt_sizes" --big
fi

# ------------------------------------------------------------------ timeout
for n in 2 4; do
    launcher "$n" 2
    run "$JOB_LIMIT" "${L[@]}" "$BIN/pt2pt_timeout"
    ok_if_zero "pt2pt_timeout (PLAIT_TIMEOUT=2) -n $n"
done
# A send timing out while its receive is posted: the two always agree, and
# nothing reads the buffer the failed send gave back (each transport; inside
# a host both the pull and the copy made together).
for v in "" PLAIT_SHM_COOP_MIN=0 PLAIT_TRANSPORT=tcp PLAIT_TRANSPORT=udp; do
    launcher 2 0.2
    [ -n "$v" ] && L+=(-x "$v")
    run "$JOB_LIMIT" "${L[@]}" "$BIN/pt2pt_withdraw"
    ok_if_zero "pt2pt_withdraw (PLAIT_TIMEOUT=0.2${v:+, $v}): send and receive agree"
done

# ------------------------------------------------------------------ faults
# plaitrun must end the job, exit non-zero and say which rank failed and why.
RANK_RE='rank[^0-9]{0,3}'
fault "rank 2 killed by SIGKILL while others wait for it -n 3" 3 kill "${RANK_RE}2([^0-9]|$)"
fault "plait_abort(7) on rank 1 -n 3" 3 abort "${RANK_RE}1([^0-9]|$)" "test abort"
fault "plait_abort(256) on rank 1 -n 3 (status 1, not 0; plaitrun names 256)" 3 abort256 \
    "called plait_abort\\(256\\)" "test abort"
fault "rank 1 exits without plait_finalize -n 3" 3 noexit "${RANK_RE}1([^0-9]|$)"
fault "plait_abort before plait_init on rank 0 -n 2" 2 early-abort "abort before init"
# plait_init's fence cannot say whom it waited for; plaitrun knows which
# ranks never connected and names them when the job ends.
PLAIT_TIMEOUT=2 fault "plait_init times out on a late rank 2 -n 3: plaitrun names it" 3 late-init \
    "timed out after 2 s" "rank 2 had not called plait_init"

# ------------------------------------------------------------------ tcp hello
# A captured hello replayed over a connection of its own, with random frames
# behind it, while two ranks stream checked data over tcp: refused (each
# rank's connection is taken once a job), the data intact, the refusal
# logged. (The hello once carried the job key and was taken again.)
replay_name="tcp: a replayed hello with random frames is refused, data intact"
if [ "$(id -u)" = 0 ] && command -v python3 >/dev/null; then
    python3 "$here/tcp_replay.py" 20 "$PLAIT_TEST_SEED" > "$out.replay" 2>&1 &
    sniffer=$!
    sleep 0.5   # (the sniffer's socket is open before the job connects)
    launcher 2
    run "$JOB_LIMIT" "${L[@]}" -x PLAIT_TRANSPORT=tcp "$B/tools/plait-bench" pt2pt -m bw \
        -b 1K -e 1M -n 200 -c
    wait $sniffer; src=$?
    cat "$out.replay" >> "$out"
    if [ "$rc" = 0 ] && [ "$src" = 0 ] && grep -q "refused a connection as rank [0-9]* a second time" "$out"; then
        pass "$replay_name"
    else
        fail "$replay_name" "job exit $rc, replay exit $src"
    fi
    rm -f "$out.replay"
else
    echo "ok - $replay_name # SKIP needs root and python3"
fi

# ------------------------------------------------------------------ tcp flood
# 150 connections that never say hello and 30 that send random bytes, at a
# rank's tcp port while two ranks stream checked data: the rank keeps 64 of
# the silent ones at most and closes the rest at once (a scanner must not
# take its descriptors), the data stays intact, and the refusals are logged
# at powers of two only (a few lines, not 180).
flood_name="tcp: a flood of silent and random connections is shed, logged sparingly, data intact"
if [ "$(id -u)" = 0 ] && command -v python3 >/dev/null; then
    python3 "$here/tcp_flood.py" 20 "$PLAIT_TEST_SEED" > "$out.flood" 2>&1 &
    sniffer=$!
    sleep 0.5
    launcher 2
    run "$JOB_LIMIT" "${L[@]}" -x PLAIT_TRANSPORT=tcp "$B/tools/plait-bench" pt2pt -m bw \
        -b 1K -e 1M -n 200 -c
    wait $sniffer; src=$?
    cat "$out.flood" >> "$out"
    said=$(grep -c "tcp: refused a connection" "$out")
    if [ "$rc" = 0 ] && [ "$src" = 0 ] && [ "$said" -ge 1 ] && [ "$said" -le 12 ]; then
        pass "$flood_name ($said warnings)"
    else
        fail "$flood_name" "job exit $rc, flood exit $src, $said refusal warnings"
    fi
    rm -f "$out.flood"
else
    echo "ok - $flood_name # SKIP needs root and python3"
fi

# ------------------------------------------------------------ stale segments
# A job killed inside plait_init (under mpirun: a rank that never came, the
# launcher aborting) leaves its ranks' /dev/shm names; the next job on the
# host removes those of this user whose creating process is gone and that are
# over a minute old, and nothing else (a live process's, a young one).
stale_name="shm: the next job removes /dev/shm names of gone processes, keeps live and young ones"
sh -c 'exit 0' & dead=$!
wait $dead
tagx="t$$x"
old="/dev/shm/plait-$tagx-0-$dead-0badcafe"
live="/dev/shm/plait-$tagx-1-$$-0badcafe"
young="/dev/shm/plait-$tagx-2-$dead-1badcafe"
if [ -d /dev/shm ] && ! kill -0 "$dead" 2>/dev/null; then
    : > "$old"; : > "$live"; : > "$young"
    touch -d "-2 minutes" "$old" "$live"
    launcher 2
    run "$JOB_LIMIT" "${L[@]}" -x PLAIT_LOG_LEVEL=info "$B/tools/plait-bench" pt2pt -m lat -b 8 -e 8 -n 10
    if [ "$rc" = 0 ] && [ ! -e "$old" ] && [ -e "$live" ] && [ -e "$young" ] &&
       grep -q "removed [0-9]* shared-memory segment" "$out"; then
        pass "$stale_name"
    else
        fail "$stale_name" "exit $rc; left: $(ls /dev/shm | grep -c "plait-$tagx") of 3 (want 2)"
    fi
    rm -f "$old" "$live" "$young"
else
    skip "$stale_name" "no /dev/shm, or the pid $dead came back"
fi

exit $((failures > 0))
