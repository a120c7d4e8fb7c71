#!/bin/bash
# timeout: 2700
# t-asan.sh -- plait built with AddressSanitizer, LeakSanitizer and
# UndefinedBehaviorSanitizer, then the suites that run whole jobs run again
# against that build: t-pt2pt (every transport inside a host, errors,
# timeouts, withdrawals), t-udp (the multipath transport on loopback, every
# CC and LB), t-netns (two namespace hosts with 1% and 5% loss, a slow path,
# a dead path, slow links) and t-coll (the collectives matrix).
#
# Every rank and plaitrun stop at the first invalid memory access or
# undefined behaviour (-fno-sanitize-recover), and at exit report memory
# still allocated but no longer reachable: a leak. Any of these makes the
# process exit non-zero, so the job, and with it the test, fails. Allocations
# made inside libpmix, libevent and libhwloc (their own caches, kept for the
# life of the process) are not plait's and are suppressed (lsan.supp).
# ASan's quarantine is off so that freed memory is reused as with the plain
# allocator (comm_split checks that resident memory stays flat over 10000
# communicators; quarantine would grow it by design). The copy is built from
# the tracked files of the source tree (git ls-files) in a temporary
# directory, -O1, and removed at the end.
#
# Each suite's TAP lines are passed on with "asan: " in front of the name.
# Env: PLAIT_SRCDIR, PLAIT_TIMEOUT, PLAIT_TEST_QUICK (passed on);
# PLAIT_ASAN_SUITES (default "integration/t-pt2pt udp/t-udp udp/t-netns
# coll/t-coll") to run fewer; JOBS (make -j, default 2).
set -u

here=$(cd "$(dirname "$0")" && pwd)
SRCDIR=${PLAIT_SRCDIR:-$(cd "$here/../.." && pwd)}
SUITES=${PLAIT_ASAN_SUITES:-"integration/t-pt2pt udp/t-udp udp/t-netns coll/t-coll"}
JOBS=${JOBS:-2}
SAN="-fsanitize=address,undefined"

skip_all() { echo "ok - asan # SKIP $1"; exit 0; }
command -v git > /dev/null || skip_all "git not found (the copy is made from git ls-files)"
git -C "$SRCDIR" rev-parse --git-dir > /dev/null 2>&1 || skip_all "$SRCDIR is not a git work tree"

W=$(mktemp -d /tmp/plait-asan.XXXXXX) || exit 1
trap 'rm -rf "$W"' EXIT
log=$W/build.log

build() {
    (cd "$SRCDIR" && git ls-files -z | tar --null -T - -c) | tar -x -C "$W" || return 1
    cd "$W" || return 1
    ./autogen.sh && ./configure CFLAGS="-O1 -g $SAN -fno-sanitize-recover=all -fno-omit-frame-pointer" \
        LDFLAGS="$SAN" && make -j"$JOBS" && make -j"$JOBS" check TESTS=
}
t0=$(date +%s)
if ! build > "$log" 2>&1; then
    echo "not ok - asan: build with $SAN"
    tail -n 30 "$log" | sed 's/^/# /'
    exit 1
fi
echo "ok - asan: build with $SAN ($(( $(date +%s) - t0 ))s)"

export ASAN_OPTIONS=quarantine_size_mb=0:thread_local_quarantine_size_kb=0:detect_leaks=1:abort_on_error=0
export LSAN_OPTIONS=suppressions=$here/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1
export PLAIT_TEST_SANITIZED=1
# A sanitizer's report starts with what it found, well before the last 30
# lines of a failed job's output (tap-lib.sh's default tail).
export TAP_TAIL=55

# LeakSanitizer stops the process to scan it; where that is not allowed (some
# containers forbid ptrace) it fails every process at exit: test without it.
probe=$("$W/tools/plait_info" 2>&1 > /dev/null)
if grep -q "LeakSanitizer has encountered a fatal error\|LeakSanitizer does not work" <<< "$probe"; then
    echo "ok - asan: leak checks # SKIP LeakSanitizer cannot run here"
    export ASAN_OPTIONS=${ASAN_OPTIONS/detect_leaks=1/detect_leaks=0}
elif [ -n "$probe" ]; then
    echo "not ok - asan: plait_info under the sanitizers"
    echo "$probe" | tail -n 30 | sed 's/^/# /'
    exit 1
else
    echo "ok - asan: plait_info runs clean (no leak, no error)"
fi

failed=0
for s in $SUITES; do
    script=$SRCDIR/tests/$s.sh
    [ -f "$script" ] || { echo "not ok - asan: no suite $s"; failed=1; continue; }
    # The suites print TAP; the name gets the prefix, the rest passes as is.
    PLAIT_BUILDDIR=$W PLAIT_SRCDIR=$SRCDIR bash "$script" < /dev/null 2>&1 |
        sed -u -e 's/^ok - /ok - asan: /' -e 's/^not ok - /not ok - asan: /'
    rc=${PIPESTATUS[0]}
    [ "$rc" = 0 ] || { echo "# asan: $s exited with status $rc"; failed=1; }
done
exit $failed
