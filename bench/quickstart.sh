#!/bin/bash
# quickstart.sh -- the README's "main job": on a fresh Debian 12 machine installs
# the dependencies (apt, as root), builds plait in place if not built yet, and runs
# a 4-rank point-to-point benchmark under plaitrun (ranks 0 and 1 measure; the
# others wait in a barrier). Extra arguments go to plait-bench pt2pt.
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if [ ! -x launcher/plaitrun ] || [ ! -x tools/plait-bench ]; then
    [ -x configure ] || ./autogen.sh
    [ -f Makefile ] || ./configure
    make -j"$(nproc)"
fi
exec launcher/plaitrun -n 4 --timeout 600 tools/plait-bench pt2pt "$@"
