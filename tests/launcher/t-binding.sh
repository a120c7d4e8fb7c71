#!/bin/bash
# Runs the binding unit test (tests/launcher/test_binding.c: plaitrun's
# rank -> cpuset mapping on synthetic hwloc topologies).  Uses the built
# program $PLAIT_BUILDDIR/tests/launcher/test_binding when there is one,
# else compiles it here (it includes launcher/binding.c directly).
here=$(cd "$(dirname "$0")" && pwd)
SRCDIR=${PLAIT_SRCDIR:-$(cd "$here/../.." && pwd)}
BUILDDIR=${PLAIT_BUILDDIR:-$SRCDIR}

prog=$BUILDDIR/tests/launcher/test_binding
if [ ! -x "$prog" ]; then
    if ! pkg-config --exists hwloc; then
        echo "ok - plaitrun binding map # SKIP hwloc not installed"
        exit 0
    fi
    work=$(mktemp -d /tmp/t-binding.XXXXXX)
    trap 'rm -rf "$work"' EXIT
    prog=$work/test_binding
    if ! cc -std=gnu11 -Wall -Wextra -I"$SRCDIR" -o "$prog" "$SRCDIR/tests/launcher/test_binding.c" \
            $(pkg-config --cflags --libs hwloc) 2>"$work/cc.err"; then
        echo "not ok - compile test_binding"
        sed 's/^/# /' "$work/cc.err"
        exit 1
    fi
fi
timeout 60 "$prog"
