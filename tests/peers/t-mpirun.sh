#!/bin/bash
# timeout: 400
# t-mpirun.sh: plait programs and a raw PMIx client under Open MPI's mpirun (ORTE,
# which serves PMIx to the processes it starts), on this machine.
#   - pmix_probe at 1, 2, 4, 8 ranks: the launcher's PMIx service itself (job info,
#     fence with and without data collection), and two failing jobs (exit, PMIx_Abort);
#   - peer_check and the tests/integration pt2pt programs at 1, 2, 4, 8 ranks;
#   - plait-bench pt2pt latency, 2 ranks, short and checked;
#   - failing plait jobs: mpirun must end them and exit non-zero.
# Skips everything (one SKIP line) when mpirun is not installed or is not Open MPI.
# Env: see peers-lib.sh (PLAIT_BUILDDIR, PLAIT_SRCDIR, PLAIT_TEST_NP, ...).
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=peers-lib.sh
. "$here/peers-lib.sh"
trap 'peers_cleanup' EXIT
trap 'exit 1' INT TERM
LNAME=mpirun

have_ompi_mpirun "mpirun" || exit 0

# Open MPI's session directory goes under our temp dir, so a job killed by the hang
# guard leaves nothing in /tmp. Local ranks inherit mpirun's whole environment, so
# PLAIT_* and PLAIT_PEERS_TAG need no -x. Root needs the explicit permission.
export OMPI_MCA_orte_tmpdir_base=$peers_tmp
asroot=()
[ "$(id -u)" = 0 ] && asroot=(--allow-run-as-root)

# launch_cmd N: mpirun for N ranks; --oversubscribe lets 8 ranks run on 2 cores,
# --bind-to none keeps them from being pinned to the same few cores.
launch_cmd() {
    L=(mpirun "${asroot[@]}" --oversubscribe --bind-to none -np "$1")
}

echo "# $(timeout 20 mpirun --version 2>&1 | head -n1), ranks: $NPS, build: $B"
probe_cases
probe_fault_cases
plait_cases
bench_case
plait_fault_cases
peers_finish
