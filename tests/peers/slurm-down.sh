#!/bin/bash
# slurm-down.sh: stop the private cluster started by slurm-up.sh and remove its directory.
#
# Uses the same $PLAIT_SLURM_DIR (default /tmp/plait-slurm-$UID). Only processes that
# belong to that directory are signalled: the daemons named by its pid files (checked
# against their command line, so a recycled pid is left alone) and any process that
# still has a file open or its cwd inside it (leftover slurmstepd or job tasks).
# Safe to run when nothing is up; exits 0 unless the directory is not slurm-up.sh's
# or cannot be removed.
set -u

dir=${PLAIT_SLURM_DIR:-/tmp/plait-slurm-$(id -u)}
[ -d "$dir" ] || exit 0
dir=$(cd "$dir" && pwd -P)
conf=$dir/slurm.conf
# Only a directory slurm-up.sh made (it leaves this mark) is ever touched.
if [ ! -f "$dir/.plait-slurm" ]; then
    echo "slurm-down: $dir was not made by slurm-up.sh; leaving it alone" >&2
    exit 1
fi

# Cancel jobs first so slurmd can end its steps cleanly (bounded).
if [ -f "$conf" ] && command -v scancel >/dev/null 2>&1; then
    SLURM_CONF=$conf timeout 10 scancel --quiet --user="$(id -un)" >/dev/null 2>&1
fi

# ours PID PATTERN: true when PID is alive and its command line mentions PATTERN.
ours() {
    local cmd
    cmd=$(tr "\0" " " 2>/dev/null < "/proc/$1/cmdline") || return 1
    case "$cmd" in *"$2"*) return 0 ;; esac
    return 1
}

# stop_pid PID: TERM, wait up to 10 s, then KILL.
stop_pid() {
    local pid=$1
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.2
    done
    kill -KILL "$pid" 2>/dev/null
}

# The daemons, newest first: slurmd ends its steps, slurmctld, then munged.
for d in slurmd:slurmd slurmctld:slurmctld munged:munged; do
    pf=$dir/${d%%:*}.pid
    [ -f "$pf" ] || continue
    pid=$(head -n1 "$pf" 2>/dev/null)
    case "$pid" in ''|*[!0-9]*) continue ;; esac
    if ours "$pid" "$dir"; then stop_pid "$pid"; fi
done

# Anything left that still holds our directory (slurmstepd, orphaned tasks).
# Never this script or its parents.
self_chain=" $$ $PPID "
for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    case "$self_chain" in *" $pid "*) continue ;; esac
    hit=""
    for f in "$p"/cwd "$p"/fd/*; do
        t=$(readlink "$f" 2>/dev/null) || continue
        case "$t" in "$dir"|"$dir"/*) hit=1; break ;; esac
    done
    [ -z "$hit" ] && ours "$pid" "$dir" && hit=1
    [ -n "$hit" ] && stop_pid "$pid"
done

rm -rf "$dir"
[ ! -e "$dir" ]
