#!/bin/bash
# t-hosts.sh -- plaitrun across hosts built from network namespaces
# (tests/netns/netns.sh): 2 hosts x 2 ranks and 3 hosts x 2 ranks, the
# daemons started with --launch-agent "ip netns exec PREFIX-{host}" from a
# head that itself runs in host h1.
#
# Cases: PMIx job view and modex with 1000 keys per rank (+ direct modex),
# the pt2pt integration programs across hosts (TCP between hosts), output
# forwarding, exit codes, a rank killed on host 2, a daemon killed, the head
# killed, SIGINT to the head, plait_abort on another host, a foreign
# connection to the head, hostfile parsing errors.  After every case: no
# process left in any host namespace, nothing left in $TMPDIR (the daemons'
# PMIx directories), no new /dev/shm/plait-* file.
# Env: PLAIT_BUILDDIR, PLAIT_SRCDIR.  Needs root and `ip netns` (else SKIP).
# TAP lines; exit 0 when no case failed.
set -u

here=$(cd "$(dirname "$0")" && pwd)
SRCDIR=${PLAIT_SRCDIR:-$(cd "$here/../.." && pwd)}
BUILDDIR=${PLAIT_BUILDDIR:-$SRCDIR}
PLAITRUN=$BUILDDIR/launcher/plaitrun
BIN=$BUILDDIR/tests/integration
NETNS=$SRCDIR/tests/netns/netns.sh
GUARD=60            # seconds: hang guard for every job, never a pass criterion

failed=0
ok()    { echo "ok - $1"; }
notok() { echo "not ok - $1"; shift; for l in "$@"; do echo "# $l"; done; failed=1; }
skip()  { echo "ok - $1 # SKIP $2"; }

if [ ! -x "$PLAITRUN" ]; then
    skip "plaitrun across hosts" "plaitrun not built ($PLAITRUN)"
    exit 0
fi
if ! why=$("$NETNS" check 2>&1); then
    skip "plaitrun across hosts" "no network namespaces here: $why"
    exit 0
fi

PFX="plt$$"
WORK=$(mktemp -d /tmp/t-hosts.XXXXXX)
export TMPDIR=$WORK/tmp           # the daemons' PMIx temp dirs land here
mkdir -p "$TMPDIR"
NHOSTS=3
AGENT="ip netns exec $PFX-{host}"

ns_pids() {   # every process in our host namespaces
    local i
    for i in $(seq 1 $NHOSTS); do ip netns pids "$PFX-h$i" 2>/dev/null; done
}
cleanup() {
    ns_pids | xargs -r kill -KILL 2>/dev/null
    pgrep -f "$WORK/" | xargs -r kill -KILL 2>/dev/null
    "$NETNS" down "$PFX"
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

if ! err=$("$NETNS" up "$PFX" $NHOSTS 2>&1); then
    notok "build $NHOSTS namespace hosts" "$err"
    exit 1
fi

CLIENT=$BUILDDIR/tests/netns/pmix_hosts
if [ ! -x "$CLIENT" ]; then
    CLIENT=$WORK/pmix_hosts
    if ! cc -O1 -o "$CLIENT" "$SRCDIR/tests/netns/pmix_hosts.c" $(pkg-config --cflags --libs pmix) \
            2>"$WORK/cc.err"; then
        notok "compile pmix_hosts" "$(cat "$WORK/cc.err")"
        exit 1
    fi
fi
cp /bin/sleep "$WORK/sleeper"      # ranks that wait, findable by path
# Segments of plaitrun jobs (plait-<namespace>-<rank>, namespace plait.<pid>)
# and the core claims of hosts sharing this machine (plaitrun-bind.<namespace>);
# other people's jobs may come and go meanwhile, but ours are removed.
shm_list() { ls /dev/shm 2>/dev/null | grep -E '^(plait-|plaitrun-bind\.)plait\.' | sort; }

# run NAME PLAITRUN-ARGS...: the head in host h1, guarded; sets rc, out, err.
run() {
    local name=$1; shift
    out=$WORK/$name.out; err=$WORK/$name.err
    shm_before=$(shm_list)
    timeout -s KILL $GUARD "$NETNS" exec "$PFX" h1 "$PLAITRUN" --launch-agent "$AGENT" "$@" \
        >"$out" 2>"$err" </dev/null
    rc=$?
}

# start NAME ARGS...: the same in the background (pid in $job); waits until
# N ranks ($want) run the sleeper.
start() {
    local name=$1 i; shift
    out=$WORK/$name.out; err=$WORK/$name.err
    shm_before=$(shm_list)
    "$NETNS" exec "$PFX" h1 "$PLAITRUN" --launch-agent "$AGENT" "$@" >"$out" 2>"$err" </dev/null &
    job=$!
    ( sleep $GUARD; kill -KILL $job 2>/dev/null ) &
    guard=$!
    for i in $(seq 200); do
        [ "$(pgrep -f "^$WORK/sleeper" | wc -l)" -ge "$want" ] && break
        sleep 0.1
    done
}
finish() {   # waits for the background head; sets rc
    wait $job 2>/dev/null; rc=$?
    kill $guard 2>/dev/null; wait $guard 2>/dev/null
}

# Problems left behind, one per line (empty: clean).  Processes get 5 s.
leftovers() {
    local i
    for i in $(seq 50); do
        [ -z "$(ns_pids)" ] && ! pgrep -f "$WORK/" >/dev/null && break
        sleep 0.1
    done
    for p in $(ns_pids) $(pgrep -f "$WORK/"); do
        echo "process still alive: $(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null)"
    done
    comm -13 <(echo "$shm_before") <(shm_list) | sed 's/^/left in \/dev\/shm: /'
    ls -A "$TMPDIR" | sed 's/^/left in TMPDIR: /'
}

check() {   # NAME GOOD MESSAGES...
    local name=$1 good=$2; shift 2
    local left; left=$(leftovers)
    if [ "$good" = 0 ] && [ -z "$left" ]; then
        ok "$name"
    else
        local l=(); [ "$good" = 0 ] || l=("$@")
        l+=("exit status $rc" "stderr: $(head -c 800 "$err")")
        while IFS= read -r x; do [ -n "$x" ] && l+=("$x"); done <<<"$left"
        notok "$name" "${l[@]}"
        ns_pids | xargs -r kill -KILL 2>/dev/null
        rm -rf "${TMPDIR:?}"/* 2>/dev/null
    fi
}
has() { grep -qE -- "$1" "$2"; }

# pid of the process running rank R of the sleeper job
rank_pid() {
    local p
    for p in $(pgrep -f "^$WORK/sleeper"); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "PMIX_RANK=$1" && { echo "$p"; return; }
    done
}
is_daemon() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q -- '--daemon'; }
daemon_pid() {   # the daemon of host $1 (not its watchdog, a child with the same command line)
    local p
    for p in $(ip netns pids "$PFX-$1"); do
        is_daemon "$p" && ! is_daemon "$(awk '/^PPid:/ { print $2 }' /proc/$p/status 2>/dev/null)" \
            && { echo "$p"; return; }
    done
}
SLEEPJOB=(sh -c "exec $WORK/sleeper 300")

# ---------------------------------------------------------------- PMIx
run pmix22 --host h1:2,h2:2 "$CLIENT" 1000
[ $rc = 0 ] && [ "$(grep -c 'keys ok' "$out")" = 4 ] && has '^rank 2 of 4 on h2: 2 local' "$out"
check "2 hosts x 2: PMIx locality, modex of 1000 keys per rank, direct modex" $? "stdout: $(cat "$out")"

run pmix32 --host h1:2,h2:2,h3:2 --fanout 2 --map-by node "$CLIENT" 1000
[ $rc = 0 ] && [ "$(grep -c 'keys ok' "$out")" = 6 ] && has '^rank 5 of 6 on h3: 2 local' "$out"
check "3 hosts x 2, daemon tree of fan-out 2, --map-by node: modex of 1000 keys" $? "stdout: $(cat "$out")"

# ------------------------------------- pt2pt between hosts: udp (the default), then tcp forced
export PLAIT_TEST_QUICK=1 PLAIT_TIMEOUT=40
for hosts in h1:2,h2:2 h1:2,h2:2,h3:2 tcp:h1:2,h2:2; do
    tl=()
    case $hosts in tcp:*) hosts=${hosts#tcp:}; tl=(-x PLAIT_TRANSPORT=tcp) ;; esac
    for prog in pt2pt_match pt2pt_sizes pt2pt_many pt2pt_trunc comm_split pt2pt_late; do
        if [ ! -x "$BIN/$prog" ]; then
            skip "$prog on $hosts${tl[*]:+, tcp}" "$BIN/$prog not built"
            continue
        fi
        run "$prog" --host "$hosts" --bind-to none --timeout $((GUARD - 10)) "${tl[@]}" "$BIN/$prog"
        [ $rc = 0 ]; check "$prog on $hosts${tl[*]:+, tcp}" $? "output: $(tail -5 "$out")"
    done
    # the rendezvous head between hosts (pt2pt/proto.c; off by default)
    if [ -x "$BIN/pt2pt_late" ]; then
        run pt2pt_late --host "$hosts" --bind-to none --timeout $((GUARD - 10)) "${tl[@]}" \
            -x PLAIT_NET_HEAD=64K "$BIN/pt2pt_late"
        [ $rc = 0 ]; check "pt2pt_late on $hosts${tl[*]:+, tcp}, PLAIT_NET_HEAD=64K" $? \
            "output: $(tail -5 "$out")"
    fi
done

# ---------------------------------------------------------------- output, exit codes, bindings
run tag --host h1:2,h2:2 --tag-output sh -c 'i=0; while [ $i -lt 2000 ]; do echo "$PMIX_RANK:$i"; i=$((i+1)); done; printf "tail$PMIX_RANK"'
p=$(awk '{ if (!match($0, /^\[[0-9]+\] /)) { print "untagged: " $0; next }
           r = substr($0, 2, RLENGTH - 3); rest = substr($0, RLENGTH + 1)
           if (rest == "tail" r) { tails++; next }
           split(rest, f, ":"); if (f[1] != r || f[2] != n[r]) print "bad line " NR ": " $0; n[r]++ }
         END { for (r = 0; r < 4; r++) if (n[r] != 2000) print "rank " r ": " n[r] " lines"; if (tails != 4) print tails " tails" }' "$out" | head -5)
[ $rc = 0 ] && [ -z "$p" ]; check "--tag-output across hosts: whole lines, in order, partial tails flushed" $? "$p"

run exit3 --host h1:2,h2:2 sh -c '[ $PMIX_RANK = 3 ] && exit 3; exec sleep 300'
[ $rc = 3 ] && has '^plaitrun: host h2: rank 3 \(pid [0-9]+\) exited with status 3$' "$err"
check "a rank's exit status 3 on host 2: job ended, exit 3, host and rank named" $?

# A rank alone on its host exits 0 without joining while the other host's
# ranks wait in the fence: only the head sees both halves.
run nojoinhosts --host h1:3,h2:1 "$CLIENT" nojoin 3
[ $rc = 1 ] &&
    has '^plaitrun: host h2: rank 3 \(pid [0-9]+\) exited without joining the job \(it never called plait_init\)' "$err"
check "rank 3 alone on host h2 exits 0 without joining while host h1's ranks wait: job ended, naming it" $?

run bind --host h1:2,h2:2 --report-bindings true
[ $rc = 0 ] && [ "$(grep -cE '^plaitrun: host h[12]: rank [0-3] \(pid [0-9]+\) (bound to|not bound)' "$err")" = 4 ]
check "--report-bindings: one line per rank, naming its host" $?

# The namespace hosts are one machine: with the default binding each host's
# first rank must not land on core 0 (they would share it).
if [ "$(nproc)" -ge 2 ]; then
    run bindcoloc --host h1:1,h2:1 --report-bindings true
    cores=$(sed -n 's/^plaitrun: host h[12]: rank [01] (pid [0-9]*) bound to core \([0-9]*\) .*/\1/p' "$err" |
            sort -u | wc -l)
    [ $rc = 0 ] && [ "$cores" = 2 ]
    check "hosts on one machine, default binding: their ranks on different cores" $? \
        "stderr: $(cat "$err")"
else
    skip "hosts on one machine, default binding" "one core"
fi

run noprog --host h1:1,h2:1 "$WORK/no-such-program"
[ $rc = 127 ] && has "cannot execute '$WORK/no-such-program'" "$err"
check "missing program: exit 127 with the host named" $?

# ---------------------------------------------------------------- failures
want=4; start killrank --host h1:2,h2:2 "${SLEEPJOB[@]}"
victim=$(rank_pid 2); [ -n "$victim" ] && kill -KILL "$victim"; finish
[ -n "$victim" ] && [ $rc = 137 ] && has '^plaitrun: host h2: rank 2 \(pid [0-9]+\) was killed by signal 9' "$err"
check "rank 2 on host h2 killed: job ended, 137, host and rank named" $?

want=4; start killdaemon --host h1:2,h2:2 "${SLEEPJOB[@]}"
victim=$(daemon_pid h2); [ -n "$victim" ] && kill -KILL "$victim"; finish
[ -n "$victim" ] && [ $rc != 0 ] && has 'lost the daemon on host h2 \(ranks 2,3\)' "$err"
check "daemon of host h2 killed: job ended, host and ranks named, its ranks and files gone" $?

want=6; start killhead --host h1:2,h2:2,h3:2 --fanout 2 "${SLEEPJOB[@]}"
kill -KILL $job; finish
[ $rc = 137 ]; check "head killed: every daemon ends its ranks and cleans up" $?

want=4; start sigint --host h1:2,h2:2 "${SLEEPJOB[@]}"
kill -INT $job; finish
[ $rc = 130 ] && has 'received signal 2' "$err"; check "SIGINT to the head: ranks ended, exit 130" $?

if [ -x "$BIN/pt2pt_fault" ]; then
    # The ranks of host h1 time out in plait_init's fence (their daemon
    # answers the timeout: the fence waits on another host); only the head
    # knows (from the daemons) that rank 2, on h2, never connected.
    run lateinit --host h1:2,h2:1 --bind-to none -x PLAIT_TIMEOUT=2 "$BIN/pt2pt_fault" late-init
    [ $rc = 1 ] && has 'PMIx Fence timed out after 2 s' "$err" &&
        has '^plaitrun: when the job ended, rank 2 had not called plait_init yet$' "$err"
    check "plait_init times out on h1 while rank 2 on h2 sleeps: plaitrun names rank 2" $?
    run abort --host h1:1,h2:2 --map-by node --bind-to none "$BIN/pt2pt_fault" abort
    [ $rc = 7 ] && has '^plaitrun: host h2: rank 1 called plait_abort\(7\)' "$err"
    check "plait_abort(7) on host h2: exit 7, host and rank named" $?
else
    skip "plait_init timeout across hosts" "$BIN/pt2pt_fault not built"
    skip "plait_abort across hosts" "$BIN/pt2pt_fault not built"
fi

# A connection without the secret is refused and the job goes on; the
# daemons' command lines carry no secret.
want=2; start foreign --host h1:1,h2:1 sh -c "$WORK/sleeper 3"
args=$(for i in 1 2; do d=$(daemon_pid h$i); [ -n "$d" ] && tr '\0' ' ' </proc/$d/cmdline; echo; done)
# the head's port is the one its daemons connect to (a daemon listens too: do not guess with ss)
port=$(sed -n 's/.*--parent [0-9.]*:\([0-9]*\) .*/\1/p' <<<"$args" | head -n 1)
[ -n "$port" ] && ip netns exec "$PFX-h2" bash -c "exec 3<>/dev/tcp/198.18.0.1/$port; echo intruder >&3; sleep 0.5" 2>/dev/null
finish
bad_args=$(grep -vE -- '--daemon --parent [0-9.]+:[0-9]+ --node [0-9]+ $' <<<"$args")
[ -n "$port" ] && [ $rc = 0 ] && has 'refused a connection' "$err" && [ -z "$bad_args" ]
check "a foreign connection to the head is refused; no secret on daemon command lines" $? \
    "port '$port'" "daemon command lines: $args"

# ---------------------------------------------------------------- hostfiles
hf=$WORK/hostfile
printf '# two namespace hosts\nh1 slots=2   # first\n\nh2 slots=2\n' >"$hf"
run hfok --hostfile "$hf" "$CLIENT" 10
[ $rc = 0 ] && [ "$(grep -c 'keys ok' "$out")" = 4 ]; check "hostfile with comments and blank lines" $?

hf_case() {   # NAME CONTENT EXPECTED_REGEX
    printf "$2" >"$hf"
    run hferr --hostfile "$hf" true
    [ $rc = 2 ] && has "$3" "$err"
    check "hostfile error: $1" $? "expected /$3/"
}
hf_case "bad slot count" 'h1 slots=2\nh2 slots=x\n' "hostfile:2: invalid slot count.*'h2 slots=x'"
hf_case "unknown keyword" 'h1\nh2 max=3\n' "hostfile:2: expected 'slots=N'"
hf_case "too many words" 'h1 slots=1 slots=2\n' "hostfile:1: expected 'host \[slots=N\]'"
hf_case "bad host name" '# x\nh/1 slots=1\n' "hostfile:2: invalid host name"
hf_case "no hosts" '# nothing\n\n' "no hosts in the hostfile"
run hfmissing --hostfile "$WORK/none" true
[ $rc = 2 ] && has "cannot read hostfile" "$err"; check "missing hostfile" $?
run toomany --host h1:1,h2:1 -n 3 true
[ $rc = 2 ] && has "3 ranks asked for but the hosts have 2 slots" "$err"; check "more ranks than slots" $?

exit $failed
