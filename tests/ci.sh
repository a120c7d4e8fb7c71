#!/bin/bash
# ci.sh -- the one command CI and developers run on a fresh Debian 12 machine
# (as root): installs the build/test packages (skipped when all are present),
# builds plait in place with warnings as errors, builds the check programs and
# runs tests/run-all.sh. Extra arguments go to run-all.sh (e.g. --quick).
# The output ends with run-all's line "N passed, N failed, N skipped"; the exit
# status is run-all's (or 1 with "0 passed, 1 failed, 0 skipped" when a setup
# or build step fails).
set -u
cd "$(dirname "$0")/.." || exit 1

JOBS=${JOBS:-2}

# A failed step still ends with a summary line, so every consumer can parse it.
step_failed() {
    echo "ci.sh: $1 failed" >&2
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
}

# The package list lives in one place, shared with bench/quickstart.sh.
scripts/install-deps.sh || step_failed "package installation"

echo "=== ci.sh: ./autogen.sh"
./autogen.sh || step_failed "./autogen.sh"
echo "=== ci.sh: ./configure --enable-werror"
./configure --enable-werror || step_failed "./configure"
echo "=== ci.sh: make -j$JOBS"
make -j"$JOBS" || step_failed "make"
echo "=== ci.sh: make -j$JOBS check TESTS= (check programs)"
make -j"$JOBS" check TESTS= || step_failed "make check TESTS="
echo "=== ci.sh: tests/run-all.sh $*"
tests/run-all.sh "$@"
exit $?
