#!/bin/bash
# device-ab.sh -- sourced on a GPU machine of the device tool to compare two
# builds of plait in one call (base against new, interleaved): builds both
# from `make dist` tarballs, starts namespace hosts, and defines helpers.
#
#   here:   bench/device-kit.sh kit; make dist; cp OLD-TARBALL kit/base.tar.gz
#   there:  source bench/device-ab.sh [BASE-TARBALL [NEW-TARBALL]]
#           for b in base new; do $(ab_run $b h1:1,h2:1) $(ab_bench $b) pt2pt -m bw; done
#
# Defaults: kit/base.tar.gz and plait-0.1.0.tar.gz, built under /tmp/base and
# /tmp/new (kept between calls on a warm machine: remove them to rebuild).
#   ab_run BUILD HOSTS   the plaitrun command line of BUILD across the
#                        namespace hosts (HOSTS: "h1:1,h2:1", slots per host)
#   ab_bench BUILD       BUILD's plait-bench, by absolute path. Always use it:
#                        plaitrun starts a relative program from its working
#                        directory, so "tools/plait-bench" would run the same
#                        program for both builds (session 11's base runs did).
#   ab_mpirun HOSTS NP   mpirun across the hosts (Open MPI, TCP BTL)
#   ab_sweep REPS HOSTS "ARGS" VARIANT...
#                        REPS rounds; in each, every VARIANT runs the benchmark
#                        once, interleaved: VARIANT is BUILD, BUILD:VAR=VAL:...
#                        (environment for plaitrun -x), or ompi (Open MPI's
#                        twin: osu_mpi_pt2pt for "pt2pt ...", nccltests_mpi for
#                        "coll NAME ..."). ARGS: plait-bench's arguments. One
#                        line per run: "LABEL ROUND: size time | ...";
#                        bench/ab-table.py turns them into a median table.
# Needs root, iproute2 (kit/bin on PATH) and the build tools of a fresh tree.
ab_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PATH=$ab_root/kit/bin:$PATH OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

ab_build() {   # ab_build NAME TARBALL
    [ -x "/tmp/$1/plait-0.1.0/tools/plait-bench" ] && return 0
    mkdir -p "/tmp/$1" && (cd "/tmp/$1" && tar xf "$2" && cd plait-0.1.0 &&
        ./configure -q >/dev/null && make -j"$(nproc)" >/dev/null 2>&1 &&
        make -C bench nccltests_mpi osu_mpi_pt2pt >/dev/null 2>&1 &&
        { make -C bench nb-overlap-mpi >/dev/null 2>&1 || true; })   # (not in older trees)
}
ab_run() { echo "/tmp/h/in-h1 /tmp/$1/plait-0.1.0/launcher/plaitrun --host $2 --bind-to none --launch-agent /tmp/h/in-{host}"; }
ab_bench() { echo "/tmp/$1/plait-0.1.0/tools/plait-bench"; }
ab_mpirun() {
    echo "$(hosts_mpirun /tmp/h "$1") -np $2 --oversubscribe --bind-to none --mca btl self,vader,tcp --mca mpi_yield_when_idle 1"
}

ab_abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }   # (ab_build cds away)
ab_build base "$(ab_abs "${1:-$ab_root/kit/base.tar.gz}")" & ab_build new "$(ab_abs "${2:-$ab_root/plait-0.1.0.tar.gz}")" & wait
for b in base new; do
    [ -x "$(ab_bench $b)" ] || { echo "device-ab.sh: the $b build failed" >&2; return 1 2>/dev/null || exit 1; }
done
PLAITRUN=/tmp/new/plait-0.1.0/launcher/plaitrun
# shellcheck source=bench/hosts-lib.sh
source "$ab_root/bench/hosts-lib.sh"
mkdir -p /tmp/h
hosts_up ab 2 /tmp/h >/dev/null 2>&1 || true

# ab_rounds ROUNDS "BUILDS" "CELLS" FN: ROUNDS rounds, the builds in the
# given order in odd rounds and reversed in even ones; for each build and
# cell prints "== CELL" and "BUILD ROUND: $(FN BUILD CELL)".
ab_rounds() {
    local rounds=$1 builds=$2 cells=$3 fn=$4 r b c order
    for r in $(seq 1 "$rounds"); do
        order=$builds
        [ $((r % 2)) = 0 ] && order=$(echo "$builds" | tr ' ' '\n' | tac | tr '\n' ' ')
        for b in $order; do
            for c in $cells; do
                echo "== $c"
                echo "$b $r: $("$fn" "$b" "$c")"
            done
        done
    done
}

# The "size time" pairs of a plait-bench / nccl-tests style output.
ab_cells() { grep -v '^#' | awk 'NF >= 2 && $1 ~ /^[0-9]+$/ {printf "%s %s | ", $1, ($2 ~ /^[0-9]+$/ ? $6 : $2)} END {print ""}'; }

ab_sweep() {
    local reps=$1 hosts=$2 args=$3 np r v b env cmd
    shift 3
    np=$(echo "$hosts" | tr ',' '\n' | awk -F: '{n += $2} END {print n}')
    for r in $(seq 1 "$reps"); do
        for v in "$@"; do
            if [ "$v" = ompi ]; then
                case $args in
                    pt2pt*) cmd="$(ab_mpirun "$hosts" "$np") /tmp/new/plait-0.1.0/bench/osu_mpi_pt2pt ${args#pt2pt }" ;;
                    coll*) cmd="$(ab_mpirun "$hosts" "$np") /tmp/new/plait-0.1.0/bench/nccltests_mpi ${args#coll }" ;;
                esac
            else
                b=${v%%:*}
                env=$(echo "${v#"$b"}" | tr ':' ' ' | awk '{for (i = 1; i <= NF; i++) printf "-x %s ", $i}')
                cmd="$(ab_run "$b" "$hosts") $env $(ab_bench "$b") $args"
            fi
            echo "$v $r: $($cmd 2>&1 | ab_cells)"
        done
    done
}
