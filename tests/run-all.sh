#!/bin/bash
# run-all.sh [--quick] -- runs every test of plait and prints one summary.
#
# Runs (a) every unit-test binary $PLAIT_BUILDDIR/tests/unit/test_* and
# (b) every script $PLAIT_SRCDIR/tests/*/t-*.sh (sorted), each under `timeout`
# (600 s, or N from a "# timeout: N" comment in a script's first 5 lines;
# PLAIT_TEST_TIMEOUT overrides the default). Every line they print is echoed
# with the test's name in front; TAP lines are counted:
#   "ok ..." passed, "ok ... # SKIP ..." skipped, "not ok ..." failed.
# A test that exits non-zero without a "not ok" line, or times out, counts as
# one failure named after it. Before the last line, each failure is named
# again with the "# " lines it printed (its reasons and output tail; at most
# PLAIT_CI_DETAIL_LINES, default 60), since a CI log is often read from its
# tail. The last line is "N passed, N failed, N skipped"; the exit status is
# 1 if anything failed.
#
# Environment given to every test: PLAIT_BUILDDIR, PLAIT_SRCDIR (default: the
# tree this script is in, built in place), PLAIT_TIMEOUT=60 unless set (a
# deadlock in the library becomes an error instead of a hung CI job), and with
# --quick PLAIT_TEST_QUICK=1 (tests may shrink their slowest cases).
set -u

here=$(cd "$(dirname "$0")" && pwd)
export PLAIT_SRCDIR=${PLAIT_SRCDIR:-$(cd "$here/.." && pwd)}
export PLAIT_BUILDDIR=${PLAIT_BUILDDIR:-$PLAIT_SRCDIR}
export PLAIT_TIMEOUT=${PLAIT_TIMEOUT:-60}
export PLAIT_TEST_QUICK=${PLAIT_TEST_QUICK:-0}
default_timeout=${PLAIT_TEST_TIMEOUT:-600}

for arg in "$@"; do
    case $arg in
        --quick) PLAIT_TEST_QUICK=1 ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "run-all.sh: unknown argument '$arg' (use --quick)" >&2; exit 2 ;;
    esac
done

passed=0 failed=0 skipped=0
failures=()
details=()   # each failure's name and the "# " lines it printed (see run_one)
DETAIL_MAX=${PLAIT_CI_DETAIL_LINES:-60}

# Seconds allowed for a script: "# timeout: N" in its first 5 lines, else the default.
script_timeout() {
    local t
    t=$(head -n 5 "$1" | sed -n 's/^#[[:space:]]*timeout:[[:space:]]*\([0-9][0-9]*\).*/\1/p' | head -n 1)
    echo "${t:-$default_timeout}"
}

# run_one NAME SECONDS CMD...: runs CMD, echoes and counts its lines.
run_one() {
    local name=$1 limit=$2 line rc="" nfail=0 t0 shm_before left ndetail=-1
    shift 2
    echo "=== $name (timeout ${limit}s)"
    t0=$(date +%s)
    shm_before=$(shm_list)
    # The command's exit status comes last, on a marker line of its own.
    while IFS= read -r line; do
        case $line in
            "@@run-all-rc@@ "*) rc=${line#@@run-all-rc@@ }; continue ;;
        esac
        echo "[$name] $line"
        # The "# " lines right after a "not ok" say why: kept (up to
        # DETAIL_MAX per failure) for the summary, which is what a CI log's
        # tail shows.
        if [ "$ndetail" -ge 0 ] && [[ $line == "#"* ]]; then
            if [ "$ndetail" -lt "$DETAIL_MAX" ]; then
                details+=("    [$name] $line")
            elif [ "$ndetail" = "$DETAIL_MAX" ]; then
                details+=("    [$name] # (more above, in the suite's output)")
            fi
            ndetail=$((ndetail + 1))
            continue
        fi
        ndetail=-1
        case $line in
            "not ok"|"not ok "*)
                failed=$((failed + 1)); nfail=$((nfail + 1))
                local what=${line#not ok}; what=${what# }; what=${what#- }
                failures+=("$name: $what")
                details+=("  $name: $what"); ndetail=0 ;;
            "ok"|"ok "*)
                shopt -s nocasematch
                if [[ $line == *"# skip"* ]]; then skipped=$((skipped + 1)); else passed=$((passed + 1)); fi
                shopt -u nocasematch ;;
        esac
    done < <(cd "$PLAIT_BUILDDIR" && timeout -k 10 "$limit" "$@" 2>&1 < /dev/null; echo "@@run-all-rc@@ $?")
    # 124/137 from `timeout` itself (a test may exit 124 on its own: check the clock)
    if { [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && [ $(( $(date +%s) - t0 )) -ge "$limit" ]; then
        failed=$((failed + 1))
        failures+=("$name: timed out after ${limit}s")
        details+=("  $name: timed out after ${limit}s")
        echo "[$name] not ok - $name timed out after ${limit}s"
    elif [ "$rc" != 0 ] && [ "$nfail" = 0 ]; then
        failed=$((failed + 1))
        failures+=("$name: exited with status $rc without a 'not ok' line")
        details+=("  $name: exited with status $rc without a 'not ok' line")
        echo "[$name] not ok - $name exited with status $rc"
    fi
    # Not counted (other jobs on a shared machine may own them), but shown.
    left=$(comm -13 <(echo "$shm_before") <(shm_list) | tr '\n' ' ')
    [ -z "${left// /}" ] || echo "[$name] # note: new files left in /dev/shm: $left"
    echo "=== $name: exit $rc, $(( $(date +%s) - t0 ))s"
}

# The library's shared-memory files (names contain "plait").
shm_list() {
    local f
    for f in /dev/shm/*plait*; do [ -e "$f" ] && echo "${f#/dev/shm/}"; done | LC_ALL=C sort
}

# (a) unit-test binaries
for t in "$PLAIT_BUILDDIR"/tests/unit/test_*; do
    if [ ! -f "$t" ] || [ ! -x "$t" ]; then continue; fi
    run_one "unit/$(basename "$t")" "$default_timeout" "$t"
done

# (b) scripts of every area, in sorted order
while IFS= read -r s; do
    [ -f "$s" ] || continue
    rel=${s#"$PLAIT_SRCDIR"/tests/}
    run_one "$rel" "$(script_timeout "$s")" bash "$s"
done < <(printf '%s\n' "$PLAIT_SRCDIR"/tests/*/t-*.sh | LC_ALL=C sort)

if [ ${#failures[@]} -gt 0 ]; then
    echo "--- failures, with what each printed:"
    for f in "${details[@]}"; do echo "$f"; done
    echo "--- failures:"
    for f in "${failures[@]}"; do echo "  $f"; done
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
