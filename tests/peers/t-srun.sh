#!/bin/bash
# timeout: 400
# t-srun.sh: plait programs and a raw PMIx client under Slurm's `srun --mpi=pmix`, on a
# private single-node cluster this script starts (slurm-up.sh) and always stops
# (slurm-down.sh, from the EXIT trap).
#   - pmix_probe at 1, 2, 4, 8 ranks: slurmstepd's PMIx service itself (job info,
#     fence with and without data collection), and two failing jobs (exit, PMIx_Abort);
#   - peer_check and the tests/integration pt2pt programs at 1, 2, 4, 8 ranks (the
#     node declares 8 CPUs, so 8 tasks fit on a 2-core machine);
#   - plait-bench pt2pt latency, 2 ranks, short and checked;
#   - failing plait jobs: srun must end them and exit non-zero.
# Skips everything (one SKIP line, with the reason) when Slurm, munge or Slurm's PMIx
# plugin is not installed, or when the cluster cannot start.
# Env: see peers-lib.sh (PLAIT_BUILDDIR, PLAIT_SRCDIR, PLAIT_TEST_NP, ...).
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=peers-lib.sh
. "$here/peers-lib.sh"
LNAME=srun

# The cluster lives in its own directory next to our temp files, so this run never
# meets another test's or a developer's cluster.
export PLAIT_SLURM_DIR=$peers_tmp/slurm
chmod 711 "$peers_tmp"       # munged needs every directory above its socket searchable
slurm_stop() {
    kill_tagged
    timeout 60 "$here/slurm-down.sh" >/dev/null 2>&1
    peers_cleanup
}
trap 'slurm_stop' EXIT
trap 'exit 1' INT TERM

up_log=$peers_tmp/slurm-up.log
timeout 120 "$here/slurm-up.sh" > "$peers_tmp/slurm.env" 2> "$up_log"
up_rc=$?
if [ "$up_rc" = 2 ]; then
    skip "srun" "$(tail -n 1 "$up_log")"
    exit 0
elif [ "$up_rc" != 0 ]; then
    # Installed but not startable here (sandbox without the needed privileges,
    # ports, ...): not a plait failure, so a SKIP with the daemon's last words.
    skip "srun" "Slurm cluster did not start (slurm-up.sh exit $up_rc): $(grep -v '^---' "$up_log" | tail -n 1)"
    sed 's/^/# /' "$up_log" | tail -n 30
    exit 0
fi
# shellcheck source=/dev/null
. "$peers_tmp/slurm.env"     # export SLURM_CONF=...
pass "srun: private Slurm cluster up ($(timeout 10 sinfo -h -o '%N %c CPUs %T' 2>/dev/null))"

# launch_cmd N [fault]: srun with the PMIx plugin (named explicitly although it is
# the cluster's default). --time is Slurm's own hang guard (minutes); srun passes this
# environment (PLAIT_*, PLAIT_PEERS_TAG) to the tasks by default.
# Jobs get --kill-on-bad-exit: without it srun lets the other tasks run on when one
# exits non-zero outside PMIx's sight (before PMIx_Init, or after a clean
# PMIx_Finalize in a failed plait_init), and they wait in the bootstrap fence until
# Slurm's PMIx timeout (300 s). mpirun and plaitrun end the job on any non-zero exit
# by default; sites set KillOnBadExit=1. Two cases at the end run without it.
kill_on_bad_exit=1
launch_cmd() {
    L=(srun --mpi=pmix -n "$1" --time=3 --job-name=plait-peers)
    [ "$kill_on_bad_exit" = 1 ] && L+=(--kill-on-bad-exit=1)
    return 0
}

echo "# $(srun --version 2>&1 | head -n1), ranks: $NPS, build: $B"
probe_cases
probe_fault_cases
plait_cases
bench_case
plait_fault_cases
# Without --kill-on-bad-exit a rank that joined PMIx and then dies must still end the
# job: Slurm's PMIx plugin sees the client go without finalizing and cancels the step.
kill_on_bad_exit=0
if [ -x "$B/tests/peers/peer_check" ]; then
    fault_job "srun (no --kill-on-bad-exit): plait rank exits 1 while others wait -n 3" 3 \
        "$B/tests/peers/peer_check" exit1
fi
if [ -x "$BIN/pt2pt_fault" ]; then
    fault_job "srun (no --kill-on-bad-exit): pt2pt_fault kill -n 3" 3 "$BIN/pt2pt_fault" kill
fi
peers_finish
