#!/bin/bash
# Behaviour tests of plaitrun (launcher/plaitrun) with a raw PMIx client
# (tests/launcher/pmix_client.c, compiled here) and plain shell programs.
# Env: PLAIT_BUILDDIR (where launcher/plaitrun is), PLAIT_SRCDIR.
# Prints one TAP-style line per case; exit 0 when no case failed.
# After every case: no new /dev/shm/plait-* file, no plaitrun temp dir left
# in $TMPDIR, no process of the case still alive.

here=$(cd "$(dirname "$0")" && pwd)
SRCDIR=${PLAIT_SRCDIR:-$(cd "$here/../.." && pwd)}
BUILDDIR=${PLAIT_BUILDDIR:-$SRCDIR}
PLAITRUN=$BUILDDIR/launcher/plaitrun
GUARD=60            # seconds: hang guard for every job, never a pass criterion

failed=0
ok()      { echo "ok - $1"; }
notok()   { echo "not ok - $1"; shift; for l in "$@"; do echo "# $l"; done; failed=1; }
skip()    { echo "ok - $1 # SKIP $2"; }

if [ ! -x "$PLAITRUN" ]; then
    skip "plaitrun" "not built ($PLAITRUN)"
    exit 0
fi

WORK=$(mktemp -d /tmp/t-plaitrun.XXXXXX)
export TMPDIR=$WORK/tmp          # plaitrun makes its PMIx temp dir here
mkdir -p "$TMPDIR"
# Processes of this script's jobs: their command line names a file under $WORK.
kill_ours() {
    local pids; pids=$(pgrep -f "$WORK/")
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
}
cleanup() {
    kill_ours
    rm -rf "$WORK"
}
trap cleanup EXIT

CLIENT=$WORK/pmix_client
if ! cc -O1 -o "$CLIENT" "$SRCDIR/tests/launcher/pmix_client.c" \
        $(pkg-config --cflags --libs pmix) 2>"$WORK/cc.err"; then
    notok "compile pmix_client" "$(cat "$WORK/cc.err")"
    exit 1
fi
# Programs run as ranks live under $WORK so that survivors can be found by path.
cp /bin/sleep "$WORK/sleeper"
printf '#!/bin/sh\necho not run\n' >"$WORK/not-executable"; chmod -x "$WORK/not-executable"
printf 'no interpreter line\n' >"$WORK/bad-format"; chmod +x "$WORK/bad-format"

shm_list() { ls /dev/shm 2>/dev/null | grep '^plait-' | sort; }

# run NAME ARGS...: runs plaitrun with the guard; sets rc, out, err, elapsed.
run() {
    local name=$1; shift
    out=$WORK/$name.out; err=$WORK/$name.err
    shm_before=$(shm_list)
    local t0=$SECONDS
    timeout -s KILL $GUARD "$PLAITRUN" "$@" >"$out" 2>"$err" </dev/null
    rc=$?
    elapsed=$((SECONDS - t0))
}

# Problems left behind by the last case, one per line (empty: clean).
leftovers() {
    local i
    for i in $(seq 50); do            # killed processes may take a moment to vanish
        pgrep -f "$WORK/" >/dev/null || break
        sleep 0.1
    done
    pgrep -af "$WORK/" | sed 's/^/process still alive: /'
    comm -13 <(echo "$shm_before") <(shm_list) | sed 's/^/left in \/dev\/shm: /'
    ls -A "$TMPDIR" | sed 's/^/left in TMPDIR: /'
}

# check NAME COND_STATUS MESSAGES...: reports the case, adding leftovers.
check() {
    local name=$1 good=$2; shift 2
    local left; left=$(leftovers)
    if [ "$good" = 0 ] && [ -z "$left" ]; then
        ok "$name"
    else
        local l=() ; [ "$good" = 0 ] || l=("$@")
        [ "$elapsed" -ge $GUARD ] && l+=("hang: killed by the ${GUARD}s guard")
        l+=("exit status $rc" "stderr: $(head -c 600 "$err")")
        while IFS= read -r x; do [ -n "$x" ] && l+=("$x"); done <<<"$left"
        notok "$name" "${l[@]}"
        kill_ours
        rm -rf "${TMPDIR:?}"/* 2>/dev/null
    fi
}
has() { grep -qE -- "$1" "$2"; }

# ---------------------------------------------------------------- success
for n in 1 2 4 8; do
    run "ok$n" -n $n "$CLIENT"
    want=$(for r in $(seq 0 $((n - 1))); do echo "rank $r of $n ok"; done)
    [ $rc = 0 ] && [ "$(sort "$out")" = "$want" ]; g=$?
    check "$n ranks: PMIx init, job info, modex, finalize, exit 0" $g \
        "stdout: $(head -c 400 "$out")"
done

run np -np 3 "$CLIENT"
[ $rc = 0 ] && [ "$(wc -l <"$out")" = 3 ]; check "-np is accepted like -n" $? "stdout: $(cat "$out")"

# The client checks that every rank sees every other rank's PMIx_Put value.
run modex -n 6 "$CLIENT"
[ $rc = 0 ] && ! has 'pmix_client' "$err"; check "modex: every rank gets every other rank's value" $?

# ---------------------------------------------------------------- environment
export PLAIT_T_FROMENV=inherited
run xset -n 2 -x PLAIT_T_SET=hello "$CLIENT" -r all env PLAIT_T_SET hello
[ $rc = 0 ]; check "-x VAR=value sets VAR in every rank" $?
run xeq -n 2 -x PLAIT_T_EQ=a=b "$CLIENT" -r all env PLAIT_T_EQ a=b
[ $rc = 0 ]; check "-x VAR=value keeps '=' in the value" $?
run xfrom -n 2 -x PLAIT_T_FROMENV "$CLIENT" -r all env PLAIT_T_FROMENV inherited
[ $rc = 0 ]; check "-x VAR exports plaitrun's value" $?
run xlast -n 1 -x PLAIT_T_TWICE=1 -x PLAIT_T_TWICE=2 "$CLIENT" -r all env PLAIT_T_TWICE 2
[ $rc = 0 ]; check "-x given twice: the last one wins" $?
run envsh -n 3 sh -c 'echo "$PMIX_RANK $PMIX_NAMESPACE $PLAIT_LAUNCHER"'
[ $rc = 0 ] && [ "$(cut -d' ' -f1,3 "$out" | sort | tr '\n' ' ')" = "0 plaitrun 1 plaitrun 2 plaitrun " ] \
    && [ "$(cut -d' ' -f2 "$out" | sort -u | grep -c '^plait\.')" = 1 ]
check "ranks get PMIx's fork environment and PLAIT_LAUNCHER" $? "stdout: $(cat "$out")"

# ---------------------------------------------------------------- output
# Every line of 4 ranks x 2 streams x 2000 lines of 300 characters must come
# out whole, once, in order per rank (the client writes through odd-sized
# stdio buffers, so the pipes carry lines cut at arbitrary places).
check_lines() {   # FILE STREAM TAGGED -> prints problems
    awk -v s="$2" -v tagged="$3" -v lines=2000 -v len=300 '
        {
            line = $0; r = -1
            if (tagged) {
                if (!match(line, /^\[[0-9]+\] /)) { print "untagged line " NR ": " substr(line, 1, 60); next }
                r = substr(line, 2, RLENGTH - 3) + 0; line = substr(line, RLENGTH + 1)
            }
            if (length(line) != len) { print "line " NR " has length " length(line); next }
            split(line, f, ":")
            if (f[2] != s || (tagged && f[1] + 0 != r)) { print "bad line " NR ": " substr($0, 1, 60); next }
            if (f[3] + 0 != next_i[f[1]]) { print "rank " f[1] ": line " f[3] " where " next_i[f[1]] " expected"; }
            next_i[f[1]] = f[3] + 1
        }
        END { for (r = 0; r < 4; r++) if (next_i[r] != lines) print "rank " r ": " next_i[r] " lines" }
    ' "$1"
}
run tag --tag-output -n 4 "$CLIENT" -r all spam 2000 300
p=$( [ $rc = 0 ] || echo "exit $rc"; check_lines "$out" out 1; check_lines "$err" err 1 )
[ -z "$p" ]; check "--tag-output: 4x2x2000 lines of 300 chars intact, prefixed, none lost" $? "$(echo "$p" | head -5)"

run notag -n 4 "$CLIENT" -r all spam 2000 300
p=$( [ $rc = 0 ] || echo "exit $rc"; check_lines "$out" out 0; check_lines "$err" err 0 )
[ -z "$p" ]; check "without --tag-output: lines of different ranks never interleave" $? "$(echo "$p" | head -5)"

run tail -n 2 --tag-output sh -c 'printf "no newline at the end"'
[ $rc = 0 ] && [ "$(sort "$out" | tr '\n' '|')" = "[0] no newline at the end|[1] no newline at the end|" ]
check "a partial last line is flushed at EOF" $? "stdout: $(cat "$out")"

run tailnotag -n 3 sh -c 'printf "tail of rank $PMIX_RANK"'
[ $rc = 0 ] && [ "$(sort "$out" | tr '\n' '|')" = "tail of rank 0|tail of rank 1|tail of rank 2|" ]
check "without --tag-output: each rank's unfinished last line ends a line of its own" $? \
    "stdout: $(cat "$out")"

shm_before=$(shm_list)
t0=$SECONDS
echo "hello from stdin" | timeout -s KILL $GUARD "$PLAITRUN" -n 2 "$CLIENT" stdin >"$WORK/stdin.out" 2>"$WORK/stdin.err"
rc=$?; elapsed=$((SECONDS - t0)); out=$WORK/stdin.out; err=$WORK/stdin.err
[ $rc = 0 ] && has '^stdin of rank 0: hello from stdin$' "$out"
check "stdin goes to rank 0" $? "stdout: $(cat "$out")"

# ---------------------------------------------------------------- failures
# The other ranks sleep 300 s: the job ending long before that (under the
# 60 s guard) shows plaitrun ended them.
run exit3 -n 4 "$CLIENT" -r 1 -o sleep exit 3
[ $rc = 3 ] && has '^plaitrun: rank 1 \(pid [0-9]+\) exited with status 3$' "$err"
check "a rank's non-zero exit ends the others and is plaitrun's status" $?

run sig -n 3 "$CLIENT" -r 2 -o sleep signal 9
[ $rc = 137 ] && has '^plaitrun: rank 2 \(pid [0-9]+\) was killed by signal 9 \(Killed\)$' "$err"
check "a rank killed by a signal: 128+signal, others ended" $?

run segv -n 2 "$CLIENT" -r 0 -o sleep signal 11
[ $rc = 139 ] && has 'rank 0 \(pid [0-9]+\) was killed by signal 11' "$err"
check "a rank that crashes (SIGSEGV): 139" $?

run nofin -n 2 "$CLIENT" -r 0 -o sleep nofinalize
[ $rc != 0 ] && has '^plaitrun: rank 0 \(pid [0-9]+\) exited without calling plait_finalize$' "$err"
check "exit 0 without finalize is a failure" $?

run nojoin -n 3 "$CLIENT" -r 1 nojoin
[ $rc = 1 ] && [ $elapsed -lt 20 ] &&
    has '^plaitrun: rank 1 \(pid [0-9]+\) exited without joining the job \(it never called plait_init\)' "$err"
check "exit 0 before joining while the others wait in the fence: ends the job, naming it" $?

# PMIx_server_finalize that never returns (CI once saw plaitrun hang after the
# case above, PMIx having logged "UNREACHABLE" from its connection handler):
# a library interposed with LD_PRELOAD stands in for the hung progress
# thread. plaitrun must leave after its bound (5 s), say so, keep the job's
# status, and leave nothing behind.
if printf '#include <unistd.h>\nint PMIx_server_finalize(void) { for (;;) pause(); }\n' |
       cc -shared -fPIC -x c -o "$WORK/stuck_fini.so" - 2>"$WORK/cc.err"; then
    LD_PRELOAD=$WORK/stuck_fini.so run stuckfini -n 2 "$CLIENT" -r 1 exit 4
    [ $rc = 4 ] && [ $elapsed -lt 20 ] &&
        has '^plaitrun: warning: PMIx did not finalize within 5 s; leaving without it$' "$err"
    check "PMIx_server_finalize that never returns: plaitrun leaves after 5 s with the job's status" $?
else
    notok "compile the PMIx_server_finalize stand-in" "$(cat "$WORK/cc.err")"
fi

run abort -n 3 "$CLIENT" -r 1 -o sleep abort 7
[ $rc = 7 ] && has '^plaitrun: rank 1 called plait_abort\(7\): test abort from rank 1$' "$err"
check "abort: message, every rank ended, exit with the abort code" $?

run abort0 -n 2 "$CLIENT" -r 1 -o sleep abort 0
[ $rc = 1 ] && has 'rank 1 called plait_abort\(0\)' "$err"
check "abort with code 0 exits 1" $?

# an exit status keeps the low 8 bits: PMIx_Abort(256) must not read as success
run abort256 -n 2 "$CLIENT" -r 1 -o sleep abort 256
[ $rc = 1 ] && has 'rank 1 called plait_abort\(256\)' "$err"
check "abort with code 256 exits 1" $?

run false -n 2 sh -c 'exit $PMIX_RANK'
[ $rc = 1 ] && has '^plaitrun: rank 1 \(pid [0-9]+\) exited with status 1$' "$err"
check "a non-PMIx program's exit status is reported" $?

run timeout -n 2 --timeout 2 "$CLIENT" -r all sleep
[ $rc = 124 ] && has 'timed out' "$err"
check "--timeout ends the job with 124" $?

# A rank that leaves a background process behind: the process group goes.
run orphan -n 2 sh -c "$WORK/sleeper 300 & echo started"
[ $rc = 0 ] && [ "$(grep -c started "$out")" = 2 ]
check "processes left by a rank are ended when the job ends" $?

# Segments named after the job (as libplait names them) are removed even
# when the ranks die without removing them.
run shm -n 2 sh -c 'touch "/dev/shm/plait-${PMIX_NAMESPACE}-seg$PMIX_RANK"; kill -9 $$'
[ $rc = 137 ]; check "/dev/shm/plait-<job>-* segments are removed at exit" $?

# ---------------------------------------------------------------- signals to plaitrun
# sig_start NAME SIGNAL CLIENT-ARGS...: runs 3 ranks of the client, waits
# until they run (and, with "late", until the 2 others joined), signals
# plaitrun and waits for it (rc).
sig_start() {
    local name=$1 sig=$2 i; shift 2
    shm_before=$(shm_list)
    out=$WORK/$name.out; err=$WORK/$name.err
    local t0=$SECONDS
    "$PLAITRUN" -n 3 "$CLIENT" "$@" >"$out" 2>"$err" </dev/null &
    local pid=$!
    ( sleep $GUARD; kill -KILL $pid 2>/dev/null ) &
    local guard=$!
    for i in $(seq 200); do
        [ "$(pgrep -f "^$CLIENT" | wc -l)" -ge 3 ] &&
            { [ "${*: -1}" != late ] || [ "$(grep -c joined "$out")" -ge 2 ]; } && break
        sleep 0.1
    done
    kill -"$sig" $pid
    wait $pid; rc=$?
    kill $guard 2>/dev/null; wait $guard 2>/dev/null
    elapsed=$((SECONDS - t0))
}
# sig_case NAME SIGNAL EXPECTED_RC: every rank sleeping, then the signal.
sig_case() {
    sig_start "$1" "$2" -r all sleep
    [ $rc = "$3" ] && has "received signal" "$err" && ! has "plait_init" "$err"
    check "SIG$2 to plaitrun: ranks ended, exit $3" $?
}
sig_case sigint INT 130
sig_case sigterm TERM 143

# Ranks 0 and 1 joined and wait in the fence for rank 2, which never calls
# PMIx_Init: the job ended by hand, plaitrun names rank 2.
sig_start late TERM -r 2 late
[ $rc = 143 ] && has '^plaitrun: when the job ended, rank 2 had not called plait_init yet$' "$err"
check "a job ended while ranks wait for one that never joined names that rank" $?

# SIGKILL to plaitrun (no chance to end the ranks itself): the ranks must
# not run on as orphans; the kernel ends them with their parent.
shm_before=$(shm_list)
t0=$SECONDS
"$PLAITRUN" -n 3 "$WORK/sleeper" 300 >"$WORK/sigkill.out" 2>"$WORK/sigkill.err" </dev/null &
pid=$!
for i in $(seq 200); do
    [ "$(pgrep -f "^$WORK/sleeper" | wc -l)" -ge 3 ] && break
    sleep 0.1
done
kill -KILL $pid
wait $pid 2>/dev/null
for i in $(seq 100); do
    [ -z "$(pgrep -f "^$WORK/sleeper")" ] && break
    sleep 0.1
done
elapsed=$((SECONDS - t0)) rc=137 err=$WORK/sigkill.err
stale=$(ls -A "$TMPDIR")      # a launcher killed outright cannot remove its own temp dir
[ -z "$(pgrep -f "^$WORK/sleeper")" ] && [ -n "$stale" ]
good=$?
# ...the next plaitrun removes it (its owner file names a process that is gone)
shm_kill=$shm_before
run sigkill-next -n 1 "$CLIENT"
shm_before=$shm_kill          # the killed job's segments count too
[ "$good" = 0 ] && [ $rc = 0 ]
check "SIGKILL to plaitrun: its ranks end too (no orphans), the next plaitrun removes its temp dir ($stale)" $?

# ---------------------------------------------------------------- bad command lines
run missing -n 2 "$WORK/no-such-program"
[ $rc = 127 ] && has "cannot execute '$WORK/no-such-program'" "$err"
check "missing program: message, exit 127" $?
run missingpath -n 2 plait-no-such-program-in-path
[ $rc = 127 ] && has "plait-no-such-program-in-path" "$err"
check "program not in PATH: exit 127" $?
run noexec -n 2 "$WORK/not-executable"
[ $rc = 127 ] && has "not-executable" "$err"
check "program not executable: exit 127" $?

run badformat -n 3 "$WORK/bad-format"
[ $rc = 127 ] && has "cannot execute '$WORK/bad-format': Exec format error" "$err"
check "exec fails in the rank (bad format): message, exit 127, no hang" $?

usage_case() {   # NAME EXPECTED_MESSAGE ARGS...
    local name=$1 msg=$2; shift 2
    run usage "$@"
    [ $rc = 2 ] && has "$msg" "$err" && has "plaitrun --help" "$err"
    check "$name: message, usage hint, exit 2" $?
}
usage_case "unknown option" "unknown option '--frob'" --frob "$CLIENT"
usage_case "no program" "no program given" -n 2
usage_case "-n without a number" "needs a number" -n
usage_case "-n 0" "invalid number of ranks" -n 0 "$CLIENT"
usage_case "-n abc" "invalid number of ranks" -n abc "$CLIENT"
usage_case "bad --bind-to" "invalid --bind-to" --bind-to socket "$CLIENT"
usage_case "bad --timeout" "invalid --timeout" --timeout -3 "$CLIENT"
usage_case "bad --head-address" "invalid --head-address" --host a:1,b:1 --head-address 999.1.1.1 "$CLIENT"
usage_case "bad -x" "invalid -x" -x 1BAD=x "$CLIENT"

run help --help
[ $rc = 0 ] && has '^Usage: plaitrun' "$out"; check "--help" $?
version=$(sed -n 's/^AC_INIT(\[plait\], \[\([^]]*\)\].*/\1/p' "$SRCDIR/configure.ac")
run version --version
[ $rc = 0 ] && [ "$(cat "$out")" = "plaitrun (plait) $version" ]
check "--version prints 'plaitrun (plait) $version'" $? "stdout: $(cat "$out")"

# ---------------------------------------------------------------- binding
# Each rank prints the CPUs it may run on; they must be what
# --report-bindings announced.
cpus_of_ranks='echo "$PMIX_RANK $(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"'
ncpu=$(nproc)
nb=$(( ncpu >= 2 ? 2 : 1 ))
run bindcore -n $nb --bind-to core --report-bindings sh -c "$cpus_of_ranks"
p=""
[ $rc = 0 ] || p="exit $rc"
for r in $(seq 0 $((nb - 1))); do
    announced=$(sed -n "s/^plaitrun: rank $r (pid [0-9]*) bound to core [0-9]* (cpus \(.*\))$/\1/p" "$err")
    actual=$(sed -n "s/^$r //p" "$out")
    [ -n "$announced" ] && [ "$announced" = "$actual" ] || p="$p rank $r: announced '$announced', runs on '$actual';"
done
[ "$(cut -d' ' -f2 "$out" | sort -u | wc -l)" = $nb ] || p="$p ranks share CPUs;"
[ -z "$p" ]; check "--bind-to core: each rank on its own core, as reported" $? "$p"

run bindnone -n 2 --bind-to none --report-bindings sh -c "$cpus_of_ranks"
mine=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
[ $rc = 0 ] && [ "$(grep -c 'not bound' "$err")" = 2 ] && [ "$(cut -d' ' -f2 "$out" | sort -u)" = "$mine" ]
check "--bind-to none: ranks keep plaitrun's CPUs" $? "stdout: $(cat "$out")"

# plaitrun started on part of the machine binds within that part (as
# mpirun does under a cpuset): on the last CPU alone, rank 0 goes there.
hi=$(echo "$mine" | tr ',-' '\n\n' | tail -1)
if [ "$ncpu" -ge 2 ] && command -v taskset >/dev/null && [ "$hi" != 0 ]; then
    out=$WORK/bindmask.out; err=$WORK/bindmask.err
    elapsed=0; timeout -s KILL $GUARD taskset -c "$hi" "$PLAITRUN" -n 1 --bind-to core --report-bindings \
        sh -c "$cpus_of_ranks" >"$out" 2>"$err" </dev/null
    rc=$?
    [ $rc = 0 ] && grep -q "bound to core [0-9]* (cpus $hi)$" "$err" && [ "$(cat "$out")" = "0 $hi" ]
    check "started on CPU $hi only (taskset): the rank is bound there, not to core 0" $? \
        "exit $rc, stderr: $(cat "$err"), stdout: $(cat "$out")"
else
    skip "started on one CPU (taskset)" "one CPU or no taskset"
fi

# ------------------------------------------- daemon trees of two levels
# Hosts that are names only (every daemon on this machine, through a launch
# agent that only sets a variable): more hosts than --fanout make a tree of
# daemons below daemons (a black-box test found the three defects below).
AGENT='env PLAIT_T_HOST={host}'
run tree --host n0,n1,n2,n3,n4 --fanout 2 --launch-agent "$AGENT" \
    sh -c 'echo "rank $PMIX_RANK on $PLAIT_T_HOST"'
want=$(for r in 0 1 2 3 4; do echo "rank $r on n$r"; done)
[ $rc = 0 ] && [ "$(sort "$out")" = "$want" ] && ! has "lost the connection" "$err"
check "5 hosts, --fanout 2: exit 0 and no daemon reports a lost connection at the end" $? \
    "stdout: $(head -c 400 "$out")"

run treenox --host a,b,c,d --fanout 1 --launch-agent "$AGENT" "$WORK/no-such-program"
[ $rc = 127 ] && has "cannot execute" "$err"
check "4 hosts in a chain, a program that cannot run: 127, no hang (ranks never started count)" $?

hosts34=$(for i in $(seq 0 33); do printf 'n%d,' "$i"; done)
run many --host "${hosts34%,}" --launch-agent "$AGENT" true
[ $rc = 0 ]; check "34 hosts (more daemons connecting at once than the head's 16 pending slots): exit 0" $?

run bindnuma -n 2 --bind-to numa --report-bindings "$CLIENT"
[ $rc = 0 ] && [ "$(grep -c 'bound to numa' "$err")" = 2 ]; check "--bind-to numa" $?

run bindover -n $((ncpu + 1)) --report-bindings "$CLIENT"
[ $rc = 0 ] && [ "$(grep -c 'not bound' "$err")" = $((ncpu + 1)) ]
check "default binding with more ranks than cores: none" $?

exit $failed
