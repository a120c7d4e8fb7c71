#!/bin/bash
# slurm-up.sh: start a private single-node Slurm cluster on this machine for tests.
#
# Everything lives in one directory, $PLAIT_SLURM_DIR (default /tmp/plait-slurm-$UID):
# a munge key, a private munged socket, slurm.conf, cgroup.conf, state, spool, pid and
# log files. Nothing under /etc or /run is touched, so it cannot clash with a system
# Slurm or munge, and several test runs can coexist when they use different dirs.
# Daemons are started directly (no systemd) and the ports are picked free at start.
#
# On success it prints one line to stdout:
#     export SLURM_CONF=<dir>/slurm.conf
# and exits 0. Exit status 2 means "cannot run here" (missing binaries); 1 means it
# tried and failed (the log tails go to stderr). Running it again while the cluster
# is up and healthy prints the same line and does nothing else. slurm-down.sh undoes it.
#
# Settings (environment):
#   PLAIT_SLURM_DIR   the private directory (created if missing)
#   PLAIT_SLURM_CPUS  CPUs the node claims (default 8: enough for 8 tasks on 2 cores)
#   PLAIT_SLURM_WAIT  seconds to wait for the node to become idle (default 60)
set -u

dir=${PLAIT_SLURM_DIR:-/tmp/plait-slurm-$(id -u)}
cpus=${PLAIT_SLURM_CPUS:-8}
wait_s=${PLAIT_SLURM_WAIT:-60}
here=$(cd "$(dirname "$0")" && pwd)

# die: report, then stop whatever this run already started (never leave half a
# cluster behind); the callers print the log tails first.
die() {
    echo "slurm-up: $*" >&2
    [ -f "${dir:-}/.plait-slurm" ] && PLAIT_SLURM_DIR=$dir "$here/slurm-down.sh" >/dev/null 2>&1
    exit 1
}
cannot() { echo "slurm-up: $*" >&2; exit 2; }

for b in munged munge slurmctld slurmd sinfo srun scontrol; do
    command -v "$b" >/dev/null 2>&1 || cannot "$b not installed"
done
# The daemons find slurmstepd and plugins on their own; check the PMIx plugin is there
# because MpiDefault=pmix makes every srun fail without it.
plugdir=""
for d in /usr/lib/x86_64-linux-gnu/slurm-wlm /usr/lib64/slurm /usr/lib/slurm \
         /usr/local/lib/slurm /usr/lib/"$(uname -m)"-linux-gnu/slurm-wlm; do
    [ -e "$d/mpi_pmix.so" ] && { plugdir=$d; break; }
done
[ -n "$plugdir" ] || cannot "Slurm mpi_pmix plugin not found"

# Absolute and canonical, as the daemons' command lines will show it.
case "$dir" in /*) ;; *) dir=$PWD/$dir ;; esac
[ -d "$dir" ] && dir=$(cd "$dir" && pwd -P)
conf=$dir/slurm.conf
host=$(hostname -s 2>/dev/null || hostname)
[ -n "$host" ] || die "no hostname"

# node_state: print the node's state as sinfo sees it ("" when the controller is unreachable).
node_state() {
    SLURM_CONF=$conf timeout 10 sinfo -h -N -n "$host" -o '%T' 2>/dev/null | head -n1
}

# daemon_alive NAME: the pid in NAME.pid runs a program started with our directory.
daemon_alive() {
    local pid
    pid=$(head -n1 "$dir/$1.pid" 2>/dev/null)
    case "$pid" in ''|*[!0-9]*) return 1 ;; esac
    tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline" | grep -qF -- "$dir"
}

# Already up? Then this is a no-op (idempotent). The controller takes a minute to
# notice a dead slurmd, so the daemons themselves are checked too.
if [ -f "$conf" ] && daemon_alive munged && daemon_alive slurmctld && daemon_alive slurmd; then
    case "$(node_state)" in
    idle|mixed|allocated|completing)
        echo "export SLURM_CONF=$conf"
        exit 0 ;;
    esac
fi
if [ -f "$dir/.plait-slurm" ]; then
    # Stale or half-started: clear it out and start over.
    PLAIT_SLURM_DIR=$dir "$here/slurm-down.sh" >/dev/null 2>&1
elif [ -d "$dir" ] && [ -n "$(ls -A "$dir")" ]; then
    # Never take over (and later delete) a directory this script did not make.
    die "$dir exists and is not empty; PLAIT_SLURM_DIR must be new or made by slurm-up.sh"
fi

mkdir -p "$dir" || die "cannot create $dir"
dir=$(cd "$dir" && pwd -P)
conf=$dir/slurm.conf
# The mark slurm-down.sh looks for before it deletes anything.
echo "private Slurm cluster of tests/peers/slurm-up.sh" > "$dir/.plait-slurm"
# munged refuses a socket whose directory or any directory above it is not
# searchable by everyone; say so instead of letting it fail with a log line.
d=$(dirname "$dir")
while [ "$d" != / ]; do
    mode=$(stat -c %a "$d") || die "cannot stat $d"
    [ $(( 8#$mode & 1 )) = 1 ] || die "$d is not searchable by all (mode $mode): munged needs o+x on every directory above its socket; choose another PLAIT_SLURM_DIR"
    d=$(dirname "$d")
done
# munged wants execute permission for all on its socket's directory and nothing
# writable by others along the key's path.
chmod 711 "$dir" || die "chmod $dir"
mkdir -p "$dir/state" "$dir/spool" "$dir/munge" || die "mkdir under $dir"
chmod 700 "$dir/state" "$dir/spool" "$dir/munge"

# port_free PORT: true when nothing listens on TCP PORT (bash's /dev/tcp, no ss needed).
port_free() {
    ! timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}
# Two consecutive free ports in a range few services use, varied by PID so
# parallel clusters usually pick different ones on the first try.
pick_ports() {
    local base try
    for try in $(seq 1 50); do
        base=$(( 20000 + ( ($$ * 7 + try * 131) % 20000 ) * 2 ))
        if port_free "$base" && port_free $((base + 1)); then
            echo "$base"; return 0
        fi
    done
    return 1
}
port=$(pick_ports) || die "no free TCP ports found"

# ---------------------------------------------------------------- munge
key=$dir/munge/munge.key
if [ ! -s "$key" ]; then
    umask 077
    head -c 1024 /dev/urandom > "$key" || die "cannot write munge key"
    chmod 400 "$key"
fi
sock=$dir/munge.sock
timeout 20 munged --key-file="$key" --socket="$sock" --pid-file="$dir/munged.pid" \
    --log-file="$dir/munged.log" --seed-file="$dir/munge/munged.seed" \
    || { tail -n 20 "$dir/munged.log" >&2 2>/dev/null; die "munged failed to start"; }
timeout 10 munge -S "$sock" -n </dev/null | timeout 10 unmunge -S "$sock" >/dev/null 2>&1 \
    || { tail -n 20 "$dir/munged.log" >&2; die "munge credential round trip failed"; }

# ---------------------------------------------------------------- slurm config
# CPUs/cores are declared, not detected: config_overrides makes slurmd accept more
# CPUs than the machine has, so 8-task jobs fit on a 2-core box.
cat > "$conf" <<EOF
# Private test cluster written by tests/peers/slurm-up.sh; removed by slurm-down.sh.
ClusterName=plaittest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=$(id -un)
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$dir/plugstack.conf
PluginDir=$plugdir
SwitchType=switch/none
MpiDefault=pmix
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
SlurmdParameters=config_overrides
ReturnToService=2
MaxJobCount=10000
# Job ids (and so PMIx nspaces, slurm.pmix.<job>.<step>) differ from run to run, so
# leftovers of an earlier cluster cannot collide with this one's jobs.
FirstJobId=$(( ( $(date +%s) % 600000 ) * 100 + 1000 ))
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
MinJobAge=5
TmpFS=$dir
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus Boards=1 SocketsPerBoard=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=1 State=UNKNOWN
PartitionName=plait Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
# No cgroups: linuxproc tracks processes, task/none binds nothing.
cat > "$dir/cgroup.conf" <<EOF
CgroupPlugin=autodetect
IgnoreSystemd=yes
ConstrainCores=no
ConstrainRAMSpace=no
ConstrainDevices=no
EOF
: > "$dir/plugstack.conf"

# ---------------------------------------------------------------- daemons
export SLURM_CONF=$conf
# -c: fresh state (no jobs from an earlier run); -i: ignore unreadable state.
timeout 30 slurmctld -f "$conf" -c -i \
    || { tail -n 30 "$dir/slurmctld.log" >&2 2>/dev/null; die "slurmctld failed to start"; }
timeout 30 slurmd -f "$conf" -N "$host" \
    || { tail -n 30 "$dir/slurmd.log" >&2 2>/dev/null; die "slurmd failed to start"; }

# Wait (bounded) for the node to register and turn idle.
state=""
for _ in $(seq 1 "$wait_s"); do
    state=$(node_state)
    case "$state" in
    idle) break ;;
    down*|drain*|fail*)
        # A node that registered as down (e.g. after a restart) can be resumed.
        timeout 10 scontrol update nodename="$host" state=resume >/dev/null 2>&1 ;;
    esac
    sleep 1
done
if [ "$state" != idle ]; then
    echo "slurm-up: node '$host' not idle after ${wait_s}s (state: '${state:-unreachable}')" >&2
    echo "--- slurmctld.log" >&2; tail -n 20 "$dir/slurmctld.log" >&2 2>/dev/null
    echo "--- slurmd.log" >&2; tail -n 20 "$dir/slurmd.log" >&2 2>/dev/null
    die "cluster did not come up"
fi
echo "export SLURM_CONF=$conf"
