#!/bin/bash
# t-tools.sh -- behaviour of the user tools: plait_info (settings table, errors
# naming a malformed variable, output formats, topology) and plait-bench
# (option errors, pt2pt under plaitrun with data verification), the MPI twin
# of the pt2pt benchmark when it was built, and bench/compare-coll.sh (its
# option errors, and a small table of plait beside Open MPI).
#
# Env: PLAIT_BUILDDIR (top build dir), PLAIT_SRCDIR (top source dir).
# Prints TAP-style lines; exits 1 if any case failed.

B=${PLAIT_BUILDDIR:?PLAIT_BUILDDIR must name the top build directory}
S=${PLAIT_SRCDIR:?PLAIT_SRCDIR must name the top source directory}
INFO=$B/tools/plait_info
BENCH=$B/tools/plait-bench
PLAITRUN=$B/launcher/plaitrun
OSU=$B/bench/osu_mpi_pt2pt

T=$(mktemp -d /tmp/t-tools.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT
failed=0

# The tests set PLAIT_* variables themselves; a stray one from the caller's
# environment would change what plait_info reports.
for v in $(env | sed -n 's/^\(PLAIT_[A-Z0-9_]*\)=.*/\1/p'); do
    case $v in PLAIT_BUILDDIR|PLAIT_SRCDIR) ;; *) unset "$v" ;; esac
done

ok()   { echo "ok - $1"; }
skip() { echo "ok - $1 # SKIP $2"; }
# not_ok NAME [FILE...]: the files' heads follow as diagnostics
not_ok() {
    local name=$1; shift
    echo "not ok - $name"
    failed=1
    for f in "$@"; do
        [ -s "$f" ] && sed -n '1,15s/^/# /p' "$f"
    done
}
# check NAME COND-COMMAND... : ok when the command succeeds
check() {
    local name=$1; shift
    if "$@"; then ok "$name"; else not_ok "$name" "$T/out" "$T/err"; fi
}
# run_rc EXPECTED CMD...: runs with a hang guard, output to $T/out, $T/err
run_rc() {
    local want=$1; shift
    timeout 60 "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    [ "$rc" -eq "$want" ] || { echo "exit status $rc, expected $want" >>"$T/err"; return 1; }
}

if [ ! -x "$INFO" ] || [ ! -x "$BENCH" ]; then
    not_ok "tools are built ($INFO, $BENCH)"
    exit 1
fi

# ------------------------------------------------------------------ plait_info

check "plait_info runs without a launcher" \
    eval 'run_rc 0 "$INFO" && grep -q "^plait [0-9]" "$T/out" && grep -q "^Settings" "$T/out"'

# Names declared in the source table, compared both ways with the listing.
grep -o '"PLAIT_[A-Z0-9][A-Z0-9_]*"' "$S/runtime/config.c" | tr -d '"' | sort -u >"$T/src-names"
run_rc 0 "$INFO" --settings --parsable
sed -n 's/^setting:\(PLAIT_[A-Z0-9_]*\):type:.*/\1/p' "$T/out" | sort -u >"$T/listed"
if [ -s "$T/src-names" ] && diff "$T/src-names" "$T/listed" >"$T/diff"; then
    ok "plait_info --settings lists every setting of the table ($(wc -l <"$T/src-names"))"
else
    not_ok "plait_info --settings lists every setting of the table" "$T/diff" "$T/err"
fi

# Every listed setting carries a type and a doc line, and a default and a
# current value (which a string setting may leave empty).
missing=""
for n in $(cat "$T/listed"); do
    for k in type doc; do
        grep -q "^setting:$n:$k:." "$T/out" || missing="$missing $n:$k"
    done
    for k in default current; do
        grep -q "^setting:$n:$k:" "$T/out" || missing="$missing $n:$k"
    done
done
if [ -z "$missing" ]; then ok "every setting has type, default, current value and doc"
else echo "missing:$missing" >"$T/diff"; not_ok "every setting has type, default, current value and doc" "$T/diff"; fi

# The text listing names each setting too (not only the parsable one).
run_rc 0 "$INFO" --settings
miss=$(for n in $(cat "$T/listed"); do grep -q "^  $n " "$T/out" || echo "$n"; done)
check "plait_info --settings text shows every setting" test -z "$miss"

check "plait_info --help prints usage, exit 0" \
    eval 'run_rc 0 "$INFO" --help && grep -q "^Usage: plait_info" "$T/out"'

maj=$(sed -n 's/^#define PLAIT_VERSION_MAJOR \([0-9]*\).*/\1/p' "$S/include/plait.h")
min=$(sed -n 's/^#define PLAIT_VERSION_MINOR \([0-9]*\).*/\1/p' "$S/include/plait.h")
pat=$(sed -n 's/^#define PLAIT_VERSION_PATCH \([0-9]*\).*/\1/p' "$S/include/plait.h")
check "plait_info --version matches plait.h ($maj.$min.$pat)" \
    eval 'run_rc 0 "$INFO" --version && grep -qx "plait_info (plait) $maj.$min.$pat" "$T/out"'

check "plait_info rejects an unknown option (exit 2)" \
    eval 'run_rc 2 "$INFO" --no-such-option && grep -q "help" "$T/err"'

check "plait_info warns of a misspelt setting, naming the one meant (exit 0)" \
    eval 'PLAIT_TIMEOUTT=5 run_rc 0 "$INFO" -s && grep -q "PLAIT_TIMEOUTT .*did you mean PLAIT_TIMEOUT?" "$T/err"'

check "plait_info --algorithms: the table, and still exit 1 on a malformed setting" \
    eval 'run_rc 0 "$INFO" --algorithms && grep -q "^  allreduce " "$T/out" &&
          PLAIT_ALLREDUCE_ALGO=bogus run_rc 1 "$INFO" -a && grep -q "PLAIT_ALLREDUCE_ALGO" "$T/err"'
check "plait_info -a does not combine with -j (exit 2)" \
    eval 'run_rc 2 "$INFO" -a -j && grep -q "does not combine" "$T/err"'

check "malformed PLAIT_TIMEOUT=abc: exit 1, error names the variable" \
    eval 'PLAIT_TIMEOUT=abc run_rc 1 "$INFO" &&
          grep -q "PLAIT_TIMEOUT" "$T/err" && grep -q "abc" "$T/err" &&
          grep -q "PLAIT_TIMEOUT .*current abc (INVALID)" "$T/out"'

# "inf" and 1e30 parse as numbers; as nanoseconds or PMIx's whole seconds
# they overflowed (plait_init timed out at once): refused, 0 means forever.
check "PLAIT_TIMEOUT=inf and 1e30 are refused naming the limit; 1e9 is accepted" \
    eval 'PLAIT_TIMEOUT=inf run_rc 1 "$INFO" && grep -q "PLAIT_TIMEOUT=inf is invalid: expected 0 (no limit)" "$T/err" &&
          PLAIT_TIMEOUT=1e30 run_rc 1 "$INFO" && grep -q "PLAIT_TIMEOUT=1e+30 is invalid" "$T/err" &&
          PLAIT_TIMEOUT=1e9 run_rc 0 "$INFO"'

check "malformed value is marked invalid in --parsable output too" \
    eval 'PLAIT_SHM_CMA=maybe run_rc 1 "$INFO" --settings --parsable &&
          grep -qx "setting:PLAIT_SHM_CMA:source:invalid" "$T/out" &&
          grep -q "^setting:PLAIT_SHM_CMA:error:.*PLAIT_SHM_CMA" "$T/out" &&
          grep -q "PLAIT_SHM_CMA" "$T/err"'

# A value each parser accepts but the table's limits refuse (ring slots must be
# a power of two): plait_init would refuse it, so plait_info must too.
check "PLAIT_SHM_RING_SLOTS=3 (not a power of two) is refused, naming the variable" \
    eval 'PLAIT_SHM_RING_SLOTS=3 run_rc 1 "$INFO" --settings --parsable &&
          grep -qx "setting:PLAIT_SHM_RING_SLOTS:source:invalid" "$T/out" &&
          grep -q "PLAIT_SHM_RING_SLOTS" "$T/err"'

check "a valid value from the environment is shown as current" \
    eval 'PLAIT_TIMEOUT=12.5 run_rc 0 "$INFO" --settings --parsable &&
          grep -qx "setting:PLAIT_TIMEOUT:current:12.5" "$T/out" &&
          grep -qx "setting:PLAIT_TIMEOUT:source:environment" "$T/out"'

if command -v jq >/dev/null; then
    check "plait_info --json is valid JSON with every setting" \
        eval 'run_rc 0 "$INFO" --json &&
              test "$(jq ".settings | length" "$T/out")" -eq "$(wc -l <"$T/listed")" &&
              jq -e ".version and .transports and .topology" "$T/out" >/dev/null'
    check "plait_info --json marks a malformed value invalid" \
        eval 'PLAIT_TIMEOUT=-1 run_rc 1 "$INFO" --json &&
              test "$(jq -r ".settings[] | select(.name==\"PLAIT_TIMEOUT\") | .source" "$T/out")" = invalid'
else
    skip "plait_info --json is valid JSON with every setting" "jq not installed"
    skip "plait_info --json marks a malformed value invalid" "jq not installed"
fi

run_rc 0 "$INFO" --parsable
if ! grep -q '^transport:' "$T/out"; then
    not_ok "plait_info lists the transports" "$T/out"
else
    ok "plait_info lists the transports ($(sed -n 's/^transport:\([^:]*\):usable:\(.*\)/\1=\2/p' "$T/out" | tr '\n' ' '))"
fi

if grep -qx 'topology:available:yes' "$T/out"; then
    # a synthetic machine gives known counts whatever this host is
    check "plait_info topology summary (synthetic 2 packages x 2 NUMA x 4 cores x 2 PUs)" \
        eval 'HWLOC_SYNTHETIC="pack:2 numa:2 core:4 pu:2" run_rc 0 "$INFO" --parsable &&
              grep -qx "topology:packages:2" "$T/out" && grep -qx "topology:numa_nodes:4" "$T/out" &&
              grep -qx "topology:cores:16" "$T/out" && grep -qx "topology:pus:32" "$T/out"'
else
    skip "plait_info topology summary" "built without hwloc"
fi

# ----------------------------------------------------------------- plait-bench

check "plait-bench --help, exit 0" \
    eval 'run_rc 0 "$BENCH" --help && grep -q "pt2pt" "$T/out"'
check "plait-bench pt2pt --help, exit 0" \
    eval 'run_rc 0 "$BENCH" pt2pt --help && grep -q -- "--check" "$T/out"'
check "plait-bench without a family: usage error (exit 2)" \
    eval 'run_rc 2 "$BENCH" && grep -q "Usage" "$T/err"'
check "plait-bench unknown family: clear error" \
    eval 'run_rc 2 "$BENCH" nosuch && grep -q "unknown benchmark .nosuch." "$T/err"'
check "plait-bench pt2pt unknown option: clear error" \
    eval 'run_rc 2 "$BENCH" pt2pt --bogus && grep -q "unknown option .--bogus." "$T/err"'
check "plait-bench pt2pt bad size: clear error" \
    eval 'run_rc 2 "$BENCH" pt2pt -e 12Q && grep -q "invalid --max size .12Q." "$T/err"'
check "plait-bench pt2pt bad mode: clear error" \
    eval 'run_rc 2 "$BENCH" pt2pt fast && grep -q "unknown mode .fast." "$T/err"'
check "plait-bench pt2pt --min above --max: clear error" \
    eval 'run_rc 2 "$BENCH" pt2pt -b 1M -e 1K && grep -q "min.*larger" "$T/err"'
check "plait-bench pt2pt missing value: clear error" \
    eval 'run_rc 2 "$BENCH" pt2pt --iters && grep -q "needs a value" "$T/err"'
check "plait-bench pt2pt window out of range: clear error" \
    eval 'run_rc 2 "$BENCH" pt2pt -W 0 && grep -q "invalid --window" "$T/err"'
# Buffers that do not fit: out of memory and the size, not "invalid argument".
check "plait-bench coll, buffers beyond the memory limit: out of memory, the size named" \
    eval '(ulimit -v 2000000; run_rc 1 "$BENCH" coll allreduce -b 1G -e 1G -n 1 -w 0) &&
          grep -q "cannot allocate two buffers of [0-9]* bytes (-e 1073741824): out of memory" "$T/err" &&
          ! grep -q "invalid argument" "$T/err"'

# A singleton has nobody to talk to: a clear error, not a hang.
check "plait-bench pt2pt as a singleton: needs 2 ranks (exit 2)" \
    eval 'run_rc 2 "$BENCH" pt2pt latency -e 8 && grep -q "at least 2 ranks" "$T/err"'

# rows_ok FILE HEADER-REGEX NROWS: a header line and NROWS "size value pass" rows after it
rows_ok() {
    awk -v hdr="$2" -v want="$3" '
        $0 ~ hdr { on = 1; next }
        on && /^#/ { on = 0 }
        on && NF == 3 && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9.]+$/ && $3 == "pass" { n++ }
        on && NF == 3 && $3 != "pass" { bad++ }
        END { exit !(n == want && !bad) }' "$1"
}

if [ -x "$PLAITRUN" ]; then
    # 1 B .. 1 MiB crosses the eager limit and the rendezvous path; 21 sizes
    run_rc 0 "$PLAITRUN" -n 2 "$BENCH" pt2pt --check -b 1 -e 1M -n 20 -w 2 --json "$T/r.json"
    rc=$?
    if [ $rc -eq 0 ] && rows_ok "$T/out" '^# Size +Latency \(us\) +Check$' 21 &&
       rows_ok "$T/out" '^# Size +Bandwidth \(MB/s\) +Check$' 21 &&
       grep -q '^# library: plait | version: .*ranks: 2' "$T/out"; then
        ok "plait-bench pt2pt --check, 2 ranks, 1 B..1 MiB: OSU columns, every size verified"
    else
        not_ok "plait-bench pt2pt --check, 2 ranks, 1 B..1 MiB: OSU columns, every size verified" "$T/out" "$T/err"
    fi
    if command -v jq >/dev/null; then
        check "plait-bench --json holds every measured size" \
            eval 'test "$(jq "[.results[] | select(.wrong_bytes == 0)] | length" "$T/r.json")" -eq 42 &&
                  test "$(jq -r ".library" "$T/r.json")" = plait'
    else
        check "plait-bench --json file written" grep -q '"bandwidth_MBps"' "$T/r.json"
    fi

    # the copy path (no CMA) for large messages, and a third rank idling in the barrier
    run_rc 0 env PLAIT_SHM_CMA=0 "$PLAITRUN" -n 3 "$BENCH" pt2pt bw --check -b 4K -e 512K -n 5 -w 1 -W 8
    if [ $? -eq 0 ] && rows_ok "$T/out" '^# Size +Bandwidth \(MB/s\) +Check$' 8 &&
       ! grep -q 'Latency' "$T/out"; then
        ok "plait-bench pt2pt bw --check, 3 ranks (rank 2 idle), PLAIT_SHM_CMA=0"
    else
        not_ok "plait-bench pt2pt bw --check, 3 ranks (rank 2 idle), PLAIT_SHM_CMA=0" "$T/out" "$T/err"
    fi

    # nccl-tests columns: count is the per-rank count (allgather 1 MiB of floats on 4 ranks:
    # 65536); redop and root are none / -1 where the collective has none, in the JSON too
    run_rc 0 "$PLAITRUN" -n 4 "$BENCH" coll allgather -b 1M -e 1M -n 2 -w 1 -o max -r 1 \
        --json "$T/ag.json"
    check "plait-bench coll allgather: count column per rank, redop none, root -1 (text and JSON)" \
        eval 'grep -Eq "^ +1048576 +65536 +float +none +-1 " "$T/out" &&
              python3 -c "import json, sys; d = json.load(open(sys.argv[1]));
r = d[\"results\"][0]; assert (d[\"op\"], d[\"root\"], r[\"count\"]) == (\"none\", -1, 65536), d" \
              "$T/ag.json"'
    check "plait-bench coll: a --json file that cannot be written fails before measuring (exit 2)" \
        eval 'run_rc 2 "$PLAITRUN" -n 2 "$BENCH" coll allreduce -e 8 -n 1 -J /nonexistent/x.json &&
              grep -q "cannot write" "$T/err" && ! grep -q "Avg bus bandwidth" "$T/out"'
    check "plait-bench coll -o avg with an integer type: usage error (exit 2)" \
        eval 'run_rc 2 "$PLAITRUN" -n 2 "$BENCH" coll allreduce -e 8 -n 1 -d int32 -o avg &&
              grep -q "floating type" "$T/err"'
    check "plait-bench coll -a with an unknown name: usage error naming the choices (exit 2)" \
        eval 'run_rc 2 "$PLAITRUN" -n 2 "$BENCH" coll allreduce -e 8 -n 1 -a 1 &&
              grep -q "recursive_doubling" "$T/err"'
    # per-rank blocks are cut to whole 16-byte units as nccl-tests does: 2 floats a rank
    # (16 bytes in all) is 0, so 0 .. 16 bytes are one row, then 32 and 64
    check "plait-bench coll -b 0: sizes that round to one count give one row (0, 32, 64 bytes)" \
        eval 'run_rc 0 "$PLAITRUN" -n 2 "$BENCH" coll allgather -b 0 -e 64 -n 1 -w 0 &&
              test "$(grep -v "^#" "$T/out" | awk "NF > 8 {print \$1}" | tr "\n" " ")" = "0 32 64 "'
    check "plait-bench coll: unknown collective, datatype and op names list the valid ones (exit 2)" \
        eval 'run_rc 2 "$BENCH" coll nosuch && grep -q "(allreduce .* barrier)" "$T/err" &&
              run_rc 2 "$BENCH" coll allreduce -d nosuch &&
              grep -q "(int8 .* double; or char .* float64)" "$T/err" &&
              run_rc 2 "$BENCH" coll allreduce -o nosuch && grep -q "(sum prod max min avg)" "$T/err"'
    check "plait-bench coll -n 0: usage error naming the flag and its range (exit 2)" \
        eval 'run_rc 2 "$PLAITRUN" -n 2 "$BENCH" coll allreduce -n 0 &&
              grep -q "^plait-bench coll: -n .0.: expected a whole number from 1 to" "$T/err"'
    check "plait-bench pt2pt: a --json file that cannot be written fails before measuring (exit 2)" \
        eval 'run_rc 2 "$PLAITRUN" -n 2 "$BENCH" pt2pt latency -e 8 -n 2 -j /nonexistent/x.json &&
              grep -q "cannot write" "$T/err" && ! grep -q "^8 " "$T/out"'
    check "plait-bench coll: an algorithm forced by PLAIT_ALLREDUCE_ALGO shows in the header" \
        eval 'run_rc 0 "$PLAITRUN" -n 2 -x PLAIT_ALLREDUCE_ALGO=ring "$BENCH" coll allreduce -e 8 -n 1 &&
              grep -q "algorithm: ring" "$T/out"'

    # bench/udp-pairs (issue 4's collision benchmark): both methods end cleanly with every
    # byte checked; the sliding window's end (empty messages) leaves nothing unmatched
    PAIRS=$B/bench/udp-pairs
    if [ -x "$PAIRS" ]; then
        check "udp-pairs -m stream, 2 pairs (shm), window 3: both pairs pass, clean end" \
            eval 'run_rc 0 "$PLAITRUN" -n 4 "$PAIRS" -m stream -s 1 -W 3 -t 0.5 &&
                  test "$(grep -c "^pair [01]: .* pass$" "$T/out")" -eq 2 && grep -q "^total: " "$T/out"'
        check "udp-pairs -m stream over udp, window 1" \
            eval 'run_rc 0 "$PLAITRUN" -n 2 -x PLAIT_TRANSPORT=udp "$PAIRS" -s 1 -W 1 -t 0.5 &&
                  grep -q "^pair 0: 0 -> 1 .* pass$" "$T/out"'
        check "udp-pairs -m window over tcp" \
            eval 'run_rc 0 "$PLAITRUN" -n 2 -x PLAIT_TRANSPORT=tcp "$PAIRS" -m window -s 1 -W 2 -t 0.5 &&
                  grep -q "^pair 0: 0 -> 1 .* pass$" "$T/out"'
        check "udp-pairs -m with an unknown method: usage error (exit 2)" \
            eval '! timeout 60 "$PLAITRUN" -n 2 "$PAIRS" -m bogus >"$T/out" 2>"$T/err" &&
                  grep -q "takes stream or window" "$T/err"'
    else
        skip "udp-pairs" "bench/udp-pairs not built"
    fi

    check "plait-bench pt2pt option error under plaitrun is printed once" \
        eval '! timeout 60 "$PLAITRUN" -n 2 "$BENCH" pt2pt --bogus >"$T/out" 2>"$T/err" &&
              test "$(grep -c "unknown option" "$T/err")" -eq 1'
else
    for c in "plait-bench pt2pt --check, 2 ranks" "plait-bench --json" "plait-bench pt2pt bw, 3 ranks" \
             "plait-bench option error under plaitrun"; do
        skip "$c" "launcher/plaitrun not built"
    done
fi

# ------------------------------------- the device comparison helpers (bench/)

# ab_cells turns plait-bench output into the "size time" pairs ab_sweep
# prints (coll: the out-of-place time column, pt2pt: the value column).
eval "$(sed -n '/^ab_cells()/p' "$S/bench/device-ab.sh")"
if [ -x "$PLAITRUN" ] && declare -F ab_cells >/dev/null; then
    timeout 60 "$PLAITRUN" -n 2 "$BENCH" coll allreduce -b 1K -e 4K -f 2 -n 2 -w 1 >"$T/coll" 2>&1
    cells=$(ab_cells <"$T/coll")
    check "ab_cells: one 'size time' pair per coll row (1K, 2K, 4K)" \
        eval 'echo "$cells" | grep -Eq "^1024 [0-9.]+ \| 2048 [0-9.]+ \| 4096 [0-9.]+ \| $"'
    timeout 60 "$PLAITRUN" -n 2 "$BENCH" pt2pt -m latency -b 8 -e 16 -n 10 >"$T/lat" 2>&1
    cells=$(ab_cells <"$T/lat")
    check "ab_cells: one 'size time' pair per pt2pt row (8, 16)" \
        eval 'echo "$cells" | grep -Eq "^8 [0-9.]+ \| 16 [0-9.]+ \| $"'
else
    skip "ab_cells on plait-bench output" "launcher/plaitrun not built"
fi

# ab-table.py: medians of each variant's runs and ratios against ompi.
if command -v python3 >/dev/null; then
    printf '%s\n' "== demo (us)" "ompi 1: 8 100 | 16 10 | " "new 1: 8 50 | 16 40 | " \
        "ompi 2: 8 600 | 16 30 | " "new 2: 8 400 | " "garbage line" "ompi 3: 8 200 | " \
        "new 3: 8 100 | 16 20 | " >"$T/ab.txt"
    python3 "$S/bench/ab-table.py" "$T/ab.txt" >"$T/ab.md" 2>"$T/err"
    check "ab-table.py: medians with run counts, ratio ompi/new (8: 200/100, 16: 20/30)" \
        eval 'grep -q "^| 8 | 200.0 (3) | 100.0 (3) | 2.00 |$" "$T/ab.md" &&
              grep -q "^| 16 | 20.0 (2) | 30.0 (2) | 0.67 |$" "$T/ab.md" &&
              grep -q "^### demo (us)$" "$T/ab.md"'
    python3 "$S/bench/ab-table.py" --bw "$T/ab.txt" >"$T/ab.md" 2>"$T/err"
    check "ab-table.py --bw: ratio new/ompi" grep -q "^| 8 | 200.0 (3) | 100.0 (3) | 0.50 |$" "$T/ab.md"
    sed 's/^== demo (us)$/== demo (MB\/s)/' "$T/ab.txt" | python3 "$S/bench/ab-table.py" >"$T/ab.md" 2>"$T/err"
    check "ab-table.py: a section titled MB/s is bandwidth without --bw (ratio new/ompi)" \
        grep -q "^| 8 | 200.0 (3) | 100.0 (3) | 0.50 |$" "$T/ab.md"
    python3 "$S/bench/ab-table.py" --paired ompi new "$T/ab.txt" >"$T/ab.md" 2>"$T/err"
    check "ab-table.py --paired: new/ompi of each round where both ran (8: 0.50 0.67 0.50; 16: 4.00)" \
        eval 'grep -q "^| 8 | 0.50 0.67 0.50 | 3 of 3 |$" "$T/ab.md" &&
              grep -q "^| 16 | 4.00 | 0 of 1 |$" "$T/ab.md"'
    check "ab-table.py rejects an unknown option (exit 2)" \
        eval 'python3 "$S/bench/ab-table.py" --bogus "$T/ab.txt" >"$T/out" 2>&1; [ $? -eq 2 ] &&
              grep -q "Usage: bench/ab-table.py" "$T/out"'
else
    skip "ab-table.py" "no python3"
fi

# ---------------------------------------------- event timelines (PLAIT_TRACE)

if [ -x "$PLAITRUN" ] && command -v python3 >/dev/null; then
    mkdir -p "$T/trace"
    # over udp on loopback: rendezvous with RTS, CTS and DATA frames
    run_rc 0 env PLAIT_TRACE="$T/trace" PLAIT_TRANSPORT=udp "$PLAITRUN" -n 2 "$BENCH" pt2pt -m lat \
        -b 256K -e 256K -n 20 -w 2
    check "PLAIT_TRACE: a file per rank, header, thread names and events of every layer" \
        eval '( for r in 0 1; do
                  head -1 "$T/trace/plait-trace.$r.txt" | grep -q "^# plait trace: rank $r pid" || exit 1
                  grep -q "^# thread [0-9]* plait-bench$" "$T/trace/plait-trace.$r.txt" || exit 1
              done
              cat "$T"/trace/plait-trace.*.txt | awk "!/^#/ {print \$3}" | sort -u | tr -d "\n" >"$T/evs"
              for e in R r C c D d F S s V; do grep -q "$e" "$T/evs" || exit 1; done )'
    python3 "$S/bench/timeline.py" "$T/trace" --check --message 3 >"$T/out" 2>"$T/err"
    check "timeline.py --check: 44 rendezvous (22 each way), complete, in causal order, phases" \
        eval 'grep -q "^# [0-9]* events, 44 rendezvous messages" "$T/out" &&
              grep -q "^check: every message.s events in causal order" "$T/out" &&
              grep -q "^## rank 0 -> 1, 262144 bytes: 20 messages" "$T/out" &&
              grep -q "^total " "$T/out" &&
              grep -q "^## message [0-9]* (send id) of rank 0 -> 1, 262144 bytes" "$T/out"'
    # receives matched in another order than their announcements came (4 in
    # reverse, some posted late): messages are paired by request id
    mkdir -p "$T/trace3"
    run_rc 0 env PLAIT_TRACE="$T/trace3" PLAIT_TRANSPORT=udp "$PLAITRUN" -n 2 "$B/tests/integration/pt2pt_late"
    python3 "$S/bench/timeline.py" "$T/trace3" --check >"$T/out" 2>"$T/err"
    check "timeline.py --check over pt2pt_late (receives out of order): every message complete" \
        grep -q "^check: every message.s events in causal order" "$T/out"
    # a violation must be caught: rank 1's clock pushed 1 s back
    mkdir -p "$T/trace2"
    cp "$T/trace/plait-trace.0.txt" "$T/trace2/"
    awk '/^#/ {print; next} {$1 = sprintf("%.0f", $1 - 1000000000); print}' "$T/trace/plait-trace.1.txt" \
        >"$T/trace2/plait-trace.1.txt"
    check "timeline.py --check fails on events out of causal order" \
        eval '! python3 "$S/bench/timeline.py" "$T/trace2" --check >"$T/out" 2>"$T/err" &&
              grep -q "^out of order: message [0-9]* from rank [01] to [01]: . at" "$T/out"'
    # a rank that never finalized (an empty file), another's full buffer, a CTS without DATA
    : >"$T/trace2/plait-trace.7.txt"
    cp "$T/trace/plait-trace.1.txt" "$T/trace2/plait-trace.1.txt"
    sed -i '1s/dropped 0/dropped 5/' "$T/trace2/plait-trace.1.txt"
    python3 "$S/bench/timeline.py" "$T/trace2" --check >"$T/out" 2>"$T/err"
    check "timeline.py: an empty file is left out, dropped events are reported" \
        eval 'grep -q "plait-trace.7.txt: no header" "$T/err" &&
              grep -q "rank 1 dropped 5 events" "$T/err" && grep -q "^check: every message" "$T/out"'
    sed -i '1s/dropped 5/dropped 0/; / F /d' "$T/trace2/plait-trace.1.txt"
    check "timeline.py --check fails on a message missing its delivery" \
        eval '! python3 "$S/bench/timeline.py" "$T/trace2" --check >"$T/out" 2>"$T/err" &&
              grep -q "^out of order: message [0-9]* from rank 0 to 1: no F event" "$T/out"'
    check "PLAIT_TRACE naming a directory that cannot be written: plait_init fails naming it" \
        eval '! timeout 60 env PLAIT_TRACE=/nonexistent/dir "$PLAITRUN" -n 1 "$BENCH" pt2pt -n 1 \
                  >"$T/out" 2>"$T/err" &&
              grep -q "PLAIT_TRACE=/nonexistent/dir is invalid: expected a directory" "$T/err"'
    check "PLAIT_TRACE naming no directory: plait_info exits 1 as plait_init would fail" \
        eval 'PLAIT_TRACE=/nonexistent/dir run_rc 1 "$INFO" -s && grep -q "PLAIT_TRACE" "$T/err"'
else
    skip "PLAIT_TRACE timelines" "launcher/plaitrun not built or no python3"
fi

# ------------------------------------------- the side-by-side collective table

CMP=$S/bench/compare-coll.sh
check "compare-coll.sh -i with five numbers: usage error (exit 2) naming -i" \
    eval 'run_rc 2 "$CMP" -i "20 2 10 1 2" "$B" && grep -q -- "-i needs six numbers" "$T/err"'
check "compare-coll.sh -i with a non-number: usage error (exit 2)" \
    eval 'run_rc 2 "$CMP" -i "20 x 10 1 2 1" "$B" && grep -q -- "-i needs six numbers" "$T/err"'
if [ -x "$B/bench/nccltests_mpi" ] && [ -x "$PLAITRUN" ] && command -v mpirun >/dev/null; then
    # a real table, 2 ranks, sizes in all three iteration bands (16 KiB-4 MiB:
    # 16 and 32 KiB, 64 KiB-1 MiB, 2 and 4 MiB): nine rows, none lost
    # between the bands' jobs, with the iterations -i asked for
    run_rc 0 "$CMP" -n 2 -C allreduce -r 1 -b 16K -e 4M -i "20 2 5 1 2 1" "$B"
    if [ $? -eq 0 ] && grep -q '^### allreduce, 2 ranks' "$T/out" &&
       grep -q '^- iterations: -n 20 -w 2 below 64 KiB, -n 5 -w 1 from 64 KiB to 1 MiB, -n 2 -w 1 from 2 MiB' "$T/out" &&
       [ "$(grep -c '^| [0-9]* [KM]iB |' "$T/out")" -eq 9 ]; then
        ok "compare-coll.sh: plait and Open MPI side by side, the iterations -i set per band"
    else
        not_ok "compare-coll.sh: plait and Open MPI side by side, the iterations -i set per band" "$T/out" "$T/err"
    fi
else
    skip "compare-coll.sh table" "bench/nccltests_mpi, plaitrun or mpirun missing"
fi

# ------------------------------------------------- the MPI twin of the benchmark

if [ -x "$OSU" ] && command -v mpirun >/dev/null; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
    run_rc 0 mpirun -np 2 "$OSU" --check -b 1 -e 64K -n 10 -w 1
    if [ $? -eq 0 ] && rows_ok "$T/out" '^# Size +Latency \(us\) +Check$' 17 &&
       rows_ok "$T/out" '^# Size +Bandwidth \(MB/s\) +Check$' 17; then
        ok "osu_mpi_pt2pt --check under mpirun: same columns as plait-bench"
    else
        not_ok "osu_mpi_pt2pt --check under mpirun: same columns as plait-bench" "$T/out" "$T/err"
    fi
else
    skip "osu_mpi_pt2pt --check under mpirun" "bench/osu_mpi_pt2pt not built or no mpirun"
fi

exit $failed
