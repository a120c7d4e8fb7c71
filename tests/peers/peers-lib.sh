# peers-lib.sh: shared by t-mpirun.sh and t-srun.sh (sourced, not run).
#
# The script that sources it defines launch_cmd N [fault], which sets the array L to
# the launcher command line for N ranks (the program and its arguments are appended;
# "fault" for a job that is meant to fail),
# and LNAME, the launcher's name for TAP lines. Then it calls the case groups:
#   probe_cases, probe_fault_cases   raw PMIx client (tests the launcher's PMIx service)
#   plait_cases, bench_case, plait_fault_cases   plait programs (need the build)
# and finally peers_finish, which prints nothing but returns the exit status.
#
# Every job runs under `timeout -k` (a hang guard, not a pass criterion) with the
# environment variable PLAIT_PEERS_TAG set to a value unique to this run; processes
# carrying the tag after a job are leftovers: reported, then killed by pid. (Found by
# environment, not by program path, so a concurrent run of the same binaries, e.g.
# t-pt2pt.sh, is never touched.)
#
# Env: PLAIT_BUILDDIR, PLAIT_SRCDIR, PLAIT_TIMEOUT (default 60), PLAIT_TEST_SEED,
# PLAIT_TEST_QUICK, PLAIT_TEST_NP (rank counts, default "1 2 4 8").

peers_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
S=${PLAIT_SRCDIR:-$(cd "$peers_here/../.." && pwd)}
B=${PLAIT_BUILDDIR:-$S}
BIN=$B/tests/integration
export PLAIT_TIMEOUT=${PLAIT_TIMEOUT:-60}
export PLAIT_TEST_SEED=${PLAIT_TEST_SEED:-20261121}
export PLAIT_TEST_QUICK=${PLAIT_TEST_QUICK:-0}
NPS=${PLAIT_TEST_NP:-"1 2 4 8"}
JOB_LIMIT=120        # hang guard per job, seconds
FAULT_LIMIT=40       # a failing job must be ended well before this
failures=0

peers_tmp=$(mktemp -d /tmp/plait-peers.XXXXXX) || { echo "not ok - mktemp"; exit 1; }
out=$peers_tmp/out
# Given to launched jobs only (see run), never exported to this shell's own children.
peers_tag=${peers_tmp##*/}

pass() { echo "ok - $1"; }
skip() { echo "ok - $1 # SKIP $2"; }
fail() {
    echo "not ok - $1"
    shift
    local l
    for l in "$@"; do echo "# $l"; done
    if [ -s "$out" ]; then
        echo "# --- output (last 30 lines):"
        tail -n 30 "$out" | sed 's/^/#   /'
    fi
    failures=$((failures + 1))
}

# run LIMIT CMD...: runs CMD with its output in $out; sets rc, secs and hung.
# Launchers exit 128+signal when a rank was killed (mpirun and srun: 137 after a
# SIGKILL), the same codes `timeout` uses, so a hang is told apart by the clock.
run() {
    local limit=$1 t0
    shift
    t0=$(date +%s)
    # The subshell keeps the shell's "Segmentation fault" notice (a launcher that
    # crashed; its exit status tells) out of the TAP stream.
    : > "$peers_tmp/nspaces"
    (PLAIT_PEERS_TAG=$peers_tag PEERS_NSFILE=$peers_tmp/nspaces \
         timeout -k 5 "$limit" "$@" > "$out" 2>&1 < /dev/null
     r=$?; exit $r) 2>/dev/null
    rc=$?
    secs=$(( $(date +%s) - t0 ))
    hung=""
    if { [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && [ "$secs" -ge "$limit" ]; then
        hung=1
    fi
}

# tagged_pids: processes (other than this shell's) whose environment has our tag.
tagged_pids() {
    local p pid
    for p in /proc/[0-9]*; do
        pid=${p#/proc/}
        [ "$pid" = $$ ] && continue
        if tr '\0' '\n' 2>/dev/null < "$p/environ" | grep -qx "PLAIT_PEERS_TAG=$peers_tag"; then
            echo "$pid"
        fi
    done
}

# kill_tagged: end every leftover of this run (TERM, then KILL), by pid.
kill_tagged() {
    local pids p
    pids=$(tagged_pids)
    [ -z "$pids" ] && return 0
    for p in $pids; do kill -TERM "$p" 2>/dev/null; done
    sleep 1
    for p in $(tagged_pids); do kill -KILL "$p" 2>/dev/null; done
}

# no_leftovers NAME: after a job, nothing carrying our tag may still run. The
# launcher gets a few seconds to finish tearing down (srun's steps end asynchronously).
no_leftovers() {
    local pids i
    for i in 1 2 3 4 5 6 7 8 9 10; do
        pids=$(tagged_pids)
        [ -z "$pids" ] && break
        sleep 0.5
    done
    if [ -n "$pids" ]; then
        fail "$1: no processes left behind" \
             "still running: $(for p in $pids; do tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null; echo "[$p]"; done | tr '\n' ' ')"
        kill_tagged
    fi
}

# Every job's program is started through $peers_tmp/nswrap, which appends the rank's
# PMIx nspace to $peers_tmp/nspaces and execs the program (same process), so the
# segments a job leaves in /dev/shm are known by name: plait-<tag>-<rank>, the tag
# being the nspace as runtime/boot.c makes it. Nobody else's segments are touched.
cat > "$peers_tmp/nswrap" <<'EOF_WRAP'
#!/bin/sh
[ -n "${PEERS_NSFILE:-}" ] && echo "${PMIX_NAMESPACE:-}" >> "$PEERS_NSFILE"
exec "$@"
EOF_WRAP
chmod +x "$peers_tmp/nswrap"

# shm_leaked: segments of this job's nspaces that are still in /dev/shm and that no
# process maps, one name a line.
shm_leaked() {
    local ns tag f
    [ -s "$peers_tmp/nspaces" ] || return 0
    sort -u "$peers_tmp/nspaces" | while read -r ns; do
        [ -n "$ns" ] || continue
        tag=$(printf '%s' "$ns" | cut -c1-40 | sed 's/[^A-Za-z0-9._-]/_/g')
        for f in /dev/shm/plait-"$tag"-*; do
            [ -e "$f" ] || continue
            grep -qs -- "$f" /proc/[0-9]*/maps || echo "${f#/dev/shm/}"
        done
    done
}

# shm_check NAME KIND: after a job, plait must have left nothing in /dev/shm. The
# library unlinks its segments once every local peer mapped them, so a clean run
# leaves none: KIND "ok" makes a leak a failure. A job that dies inside plait_init
# (KIND "fault") can leave its segments: plaitrun removes them, mpirun and srun do
# not, so they are reported as notes. Either way they are removed here.
shm_check() {
    local leaked
    leaked=$(shm_leaked)
    [ -z "$leaked" ] && return 0
    if [ "$2" = ok ]; then
        fail "$1: nothing left in /dev/shm" "left: $(echo "$leaked" | tr '\n' ' ')"
    else
        echo "# note: $1: $LNAME left in /dev/shm: $(echo "$leaked" | tr '\n' ' ')(removed)"
    fi
    (cd /dev/shm && echo "$leaked" | xargs -r rm -f --)
    return 0
}

peers_cleanup() {
    kill_tagged
    rm -rf "$peers_tmp"
}

# count_ok PATTERN N: true when $out holds exactly N lines matching PATTERN
# (the per-rank success lines), so a rank that never reported is a failure.
count_ok() {
    local got
    got=$(grep -Ec -- "$1" "$out")
    [ "$got" = "$2" ]
}

# job NAME N OKPATTERN PROG ARGS...: a job that must succeed on every rank.
# OKPATTERN ("" for none) must match exactly N output lines.
job() {
    local name=$1 n=$2 pat=$3
    shift 3
    launch_cmd "$n"
    run "$JOB_LIMIT" "${L[@]}" "$peers_tmp/nswrap" "$@"
    if [ -n "$hung" ]; then
        fail "$name" "hung: killed after ${JOB_LIMIT}s (seed $PLAIT_TEST_SEED)" "command: ${L[*]} $*"
    elif [ "$rc" != 0 ]; then
        fail "$name" "exit status $rc after ${secs}s (seed $PLAIT_TEST_SEED)" "command: ${L[*]} $*"
    elif [ -n "$pat" ] && ! count_ok "$pat" "$n"; then
        fail "$name" "expected $n lines matching /$pat/, got $(grep -Ec -- "$pat" "$out")" \
             "command: ${L[*]} $*"
    else
        pass "$name"
    fi
    no_leftovers "$name"
    shm_check "$name" "$([ "$rc" = 0 ] && echo ok || echo fault)"
}

# fault_job NAME N PROG ARGS...: a job that must fail: the launcher exits non-zero,
# before FAULT_LIMIT (a hang here means a dead rank went unnoticed).
fault_job() {
    local name=$1 n=$2
    shift 2
    launch_cmd "$n" fault
    run "$FAULT_LIMIT" "${L[@]}" "$peers_tmp/nswrap" "$@"
    if [ -n "$hung" ] && [ "$LNAME" = mpirun ]; then
        # Open MPI 4.1.4's mpirun itself now and then hangs (or segfaults) in its
        # teardown after a rank aborted, with every rank already gone (seen with a
        # raw PMIx client too, ~1 run in 20 here). One retry keeps that launcher bug
        # from failing plait's tests; a second hang fails.
        echo "# note: $name: mpirun hung; retrying once (known mpirun teardown hang)"
        no_leftovers "$name (first try)"
        run "$FAULT_LIMIT" "${L[@]}" "$peers_tmp/nswrap" "$@"
    fi
    if [ -n "$hung" ]; then
        fail "$name" "$LNAME still running after ${FAULT_LIMIT}s: the job was not ended" \
             "command: ${L[*]} $*"
    elif [ "$rc" = 0 ]; then
        fail "$name" "$LNAME exited 0 although a rank failed" "command: ${L[*]} $*"
    else
        pass "$name ($LNAME exit $rc after ${secs}s)"
    fi
    no_leftovers "$name"
    shm_check "$name" fault
}

# ------------------------------------------------------------ raw PMIx client
# The probe is built by `make check TESTS=`; without a build, compile it here.
PROBE=""
probe_build() {
    if [ -x "$B/tests/peers/pmix_probe" ]; then
        PROBE=$B/tests/peers/pmix_probe
        return 0
    fi
    command -v pkg-config >/dev/null 2>&1 && pkg-config --exists pmix 2>/dev/null ||
        { probe_skip_reason="PMIx development files not found (pkg-config pmix)"; return 1; }
    # shellcheck disable=SC2046
    if cc -std=gnu11 -O1 -o "$peers_tmp/pmix_probe" "$peers_here/pmix_probe.c" \
          $(pkg-config --cflags --libs pmix) > "$out" 2>&1; then
        PROBE=$peers_tmp/pmix_probe
        return 0
    fi
    fail "$LNAME: compile pmix_probe" "cc failed"
    return 1
}

# probe_notes: collect the keys this launcher did not provide (facts, not failures).
probe_notes() {
    grep -o 'missing [a-z.]* ([A-Z_-]*)' "$out" >> "$peers_tmp/notes"
}

probe_cases() {
    local n
    probe_skip_reason=""
    if ! probe_build; then
        [ -n "$probe_skip_reason" ] && skip "$LNAME: pmix_probe" "$probe_skip_reason"
        return
    fi
    for n in $NPS; do
        job "$LNAME: pmix_probe (init, job info, collect + direct modex) -n $n" "$n" \
            '^pmix_probe rank [0-9]+/[0-9]+ ok$' "$PROBE"
        probe_notes
    done
    [ -s "$peers_tmp/notes" ] && sort -u "$peers_tmp/notes" | sed "s/^/# note: $LNAME: PMIx key /"
    return 0
}

probe_fault_cases() {
    [ -n "$PROBE" ] || return
    PMIX_PROBE_EXIT_RANK=1 fault_job "$LNAME: pmix_probe rank 1 exits 1 without finalize -n 4" \
        4 "$PROBE"
    PMIX_PROBE_ABORT_RANK=1 fault_job "$LNAME: pmix_probe rank 1 calls PMIx_Abort(7) -n 4" \
        4 "$PROBE"
    [ "$rc" = 7 ] || echo "# note: $LNAME exited $rc after PMIx_Abort(7)"
}

# ------------------------------------------------------------ plait programs
# have_prog PATH NAME: true when PATH is built; otherwise one SKIP line for NAME.
# have_ompi_mpirun NAME: 0 when Open MPI's mpirun is on PATH, else a SKIP line
# for NAME and 1 (another MPI's mpirun takes other options).
have_ompi_mpirun() {
    if ! command -v mpirun >/dev/null 2>&1; then
        skip "$1" "mpirun not installed"
        return 1
    fi
    if ! timeout 20 mpirun --version 2>&1 | grep -q "Open MPI"; then
        skip "$1" "mpirun is not Open MPI's ($(timeout 20 mpirun --version 2>&1 | head -n1))"
        return 1
    fi
}

have_prog() {
    [ -x "$1" ] && return 0
    skip "$2" "$1 not built (make check TESTS=)"
    return 1
}

plait_cases() {
    local prog n
    if have_prog "$B/tests/peers/peer_check" "$LNAME: peer_check"; then
        for n in $NPS; do
            job "$LNAME: peer_check (plait rank/size = launcher's, ring) -n $n" "$n" \
                '^peer_check rank [0-9]+/[0-9]+ ok$' "$B/tests/peers/peer_check"
        done
    fi
    for prog in pt2pt_self pt2pt_sizes pt2pt_trunc pt2pt_match pt2pt_many comm_split \
                pt2pt_errors pt2pt_threads; do
        have_prog "$BIN/$prog" "$LNAME: $prog" || continue
        for n in $NPS; do
            job "$LNAME: $prog -n $n" "$n" "" "$BIN/$prog"
        done
    done
    if have_prog "$BIN/pt2pt_timeout" "$LNAME: pt2pt_timeout"; then
        PLAIT_TIMEOUT=2 job "$LNAME: pt2pt_timeout (PLAIT_TIMEOUT=2) -n 2" 2 "" "$BIN/pt2pt_timeout"
    fi
}

# A short latency run with data checking: sizes 1 B to 4 KiB, one row each.
bench_case() {
    have_prog "$B/tools/plait-bench" "$LNAME: plait-bench pt2pt latency" || return
    job "$LNAME: plait-bench pt2pt latency -n 2 (1 B..4 KiB, checked)" 2 "" \
        "$B/tools/plait-bench" pt2pt latency -e 4K -n 200 -w 10 -c
    if [ "$rc" = 0 ]; then
        local rows
        rows=$(grep -Ec '^[0-9]+ +[0-9.]+ +pass$' "$out")
        [ "$rows" = 13 ] || fail "$LNAME: plait-bench printed 13 checked rows" "got $rows"
    fi
}

plait_fault_cases() {
    if have_prog "$B/tests/peers/peer_check" "$LNAME: peer_check exit1"; then
        fault_job "$LNAME: plait rank exits 1 while others wait for it -n 3" 3 \
            "$B/tests/peers/peer_check" exit1
    fi
    have_prog "$BIN/pt2pt_fault" "$LNAME: pt2pt_fault" || return
    fault_job "$LNAME: pt2pt_fault kill (rank 2 SIGKILL) -n 3" 3 "$BIN/pt2pt_fault" kill
    fault_job "$LNAME: pt2pt_fault abort (plait_abort(7) on rank 1) -n 3" 3 "$BIN/pt2pt_fault" abort
    [ "$rc" = 7 ] || echo "# note: $LNAME exited $rc; plait_abort asked for 7"
    fault_job "$LNAME: pt2pt_fault abort256 (plait_abort(256) on rank 1: not status 0) -n 3" 3 \
        "$BIN/pt2pt_fault" abort256
    fault_job "$LNAME: pt2pt_fault noexit (rank 1 exits 0 without finalize) -n 3" 3 \
        "$BIN/pt2pt_fault" noexit
    fault_job "$LNAME: pt2pt_fault early-abort (plait_abort before init) -n 2" 2 \
        "$BIN/pt2pt_fault" early-abort
}

peers_finish() {
    return $((failures > 0))
}
