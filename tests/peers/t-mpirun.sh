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

# mpirun killed with SIGKILL cannot pass the signal on: its ranks must notice
# their PMIx server gone and end themselves (runtime/boot.c, boot_lost_server).
launcher_kill_case() {
    local name="mpirun: killed with SIGKILL while 3 ranks run barriers: the ranks end themselves"
    local mp i left
    have_prog "$BIN/pt2pt_fault" "$name" || return
    (PLAIT_PEERS_TAG=$peers_tag exec mpirun "${asroot[@]}" --oversubscribe --bind-to none -np 3 \
         "$BIN/pt2pt_fault" loop > "$peers_tmp/lk.out" 2>&1 < /dev/null) &
    mp=$!
    for i in $(seq 300); do
        [ "$(grep -c looping "$peers_tmp/lk.out" 2>/dev/null)" -ge 3 ] && break
        sleep 0.1
    done
    kill -KILL "$mp" 2>/dev/null
    wait "$mp" 2>/dev/null
    for i in $(seq 150); do
        left=$(tagged_pids)
        [ -z "$left" ] && break
        sleep 0.1
    done
    if [ -z "$left" ]; then
        pass "$name (gone within $(( i / 10 )).$(( i % 10 )) s)"
    else
        fail "$name" "still running 15 s after mpirun was killed: $left" "$(cat "$peers_tmp/lk.out")"
        kill_tagged
    fi
}
launcher_kill_case

# With --enable-recovery mpirun leaves the survivors of a dead rank running:
# over udp inside one host they must see the death themselves (the process
# is watched as the shm transport watches its peers) and fail their receive
# with PLAIT_ERR_PEER (pt2pt_fault exits 3), where they waited for ever.
recovery_case() {
    local name="mpirun --enable-recovery: rank 2 killed, survivors over udp see it themselves -n 3"
    have_prog "$BIN/pt2pt_fault" "$name" || return
    launch_cmd() {
        L=(mpirun "${asroot[@]}" --oversubscribe --bind-to none --enable-recovery
           -x PLAIT_TRANSPORT -np "$1")
    }
    launch_cmd 3
    PLAIT_TRANSPORT=udp run "$FAULT_LIMIT" "${L[@]}" "$peers_tmp/nswrap" "$BIN/pt2pt_fault" kill
    # (mpirun --enable-recovery exits 0 whatever its ranks did: the survivors tell)
    if [ -n "$hung" ]; then
        fail "$name" "still running after ${FAULT_LIMIT}s: the survivors did not notice"
    elif [ "$(grep -c "failed as expected" "$out")" != 2 ]; then
        fail "$name" "both survivors' receives should fail with PLAIT_ERR_PEER"
    else
        pass "$name (after ${secs}s)"
    fi
    no_leftovers "$name"
}
recovery_case
peers_finish
