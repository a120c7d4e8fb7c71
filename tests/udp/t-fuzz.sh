#!/bin/bash
# timeout: 120
# t-fuzz.sh -- a short, bounded libFuzzer run over the multipath protocol's
# packet path (tests/fuzz/fuzz_pp.c: parser, per-field checks, ACK scoreboard,
# delivery) with AddressSanitizer and UBSan. SKIPs without clang's libFuzzer.
# Env: PLAIT_SRCDIR, PLAIT_FUZZ_SECONDS (default 20).
set -u
here=$(cd "$(dirname "$0")" && pwd)
S=${PLAIT_SRCDIR:-$(cd "$here/../.." && pwd)}
secs=${PLAIT_FUZZ_SECONDS:-20}
name="fuzz: packet parser and receive path (${secs}s, ASan+UBSan)"
work=$(mktemp -d /tmp/plait-t-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT

if ! command -v clang > /dev/null; then
    echo "ok - $name # SKIP clang is not installed (scripts/install-deps.sh installs it)"
    exit 0
fi
if ! clang -g -O1 -fsanitize=fuzzer,address,undefined -I"$S" -I"$S/include" \
        "$S/tests/fuzz/fuzz_pp.c" "$S"/transport/proto/conn.c "$S"/transport/proto/cc.c \
        "$S"/transport/proto/lb.c -lm -o "$work/fuzz_pp" > "$work/build.log" 2>&1; then
    if grep -qi "fuzzer" "$work/build.log"; then
        echo "ok - $name # SKIP this clang has no libFuzzer"
        exit 0
    fi
    echo "not ok - $name"
    sed 's/^/# /' "$work/build.log" | tail -20
    exit 1
fi
cd "$work" || exit 1
timeout -k 5 $((secs + 60)) ./fuzz_pp -max_total_time="$secs" -seed=1 -rss_limit_mb=1024 \
    > run.log 2>&1
rc=$?
if [ "$rc" = 0 ]; then
    echo "ok - $name: $(grep -o 'Done [0-9]* runs' run.log)"
else
    echo "not ok - $name"
    echo "# libFuzzer exit $rc; crash inputs would be in $work (removed)"
    tail -30 run.log | sed 's/^/# /'
    exit 1
fi
