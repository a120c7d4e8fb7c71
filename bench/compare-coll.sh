#!/bin/bash
# compare-coll.sh -- plait next to Open MPI (coll/tuned) on the nccl-tests
# style collective benchmarks, on this machine, in one run. Both sides run the
# same benchmark code (tools/ptool_coll.c): `plait-bench coll` under plaitrun,
# bench/nccltests_mpi under mpirun with shared memory (btl self,vader, Open
# MPI's default collective selection: coll/tuned). Runs are interleaved (the
# order flips every repetition) so drifting machine load hits both sides
# alike; every cell is the median busbw (out-of-place, GB/s) or time over
# the repetitions, with the busbw min-max beside it. The ratio is Open MPI's
# median time / plait's (= busbw ratio, but exact at sizes where busbw
# rounds to 0.00).
#
# Usage: bench/compare-coll.sh [options] [BUILDDIR]
#   BUILDDIR   top build dir (default: $PLAIT_BUILDDIR, else the current dir)
#   -n "2 4"   rank counts (default "2 4"; above the core count both run unbound)
#   -C LIST    collectives (default "allreduce allgather reduce_scatter alltoall bcast")
#   -r REPS    repetitions of every run (default 3)
#   -i "N W N W N W"  timed and warm-up iterations below 64 KiB, from 64 KiB
#              to 1 MiB, and from 2 MiB (default "2000 200 100 10 20 5": 200
#              calls of a microsecond read 0.7-0.9 of Open MPI where 4000 read
#              0.95-1.3, and 20 of the 4-rank allreduce of 1 MiB 1.16 where 100
#              read 1.44, session 43)
#   -b SIZE    smallest size (default 8), -e SIZE largest (default 64M)
#   -d TYPE    datatype (default float), -o OP reduction (default sum)
#   -I         also time in-place calls (tables still show out-of-place)
#   -k DIR     keep every raw output in DIR
#   -c         correctness cross-check first (tests/coll/t-ompi-cross.sh): both
#              libraries on the same inputs must give the same results
#   -H "2x1 2x2"  across hosts instead of on this machine: layouts HOSTSxRANKS
#              on network-namespace hosts (tests/netns/netns.sh, needs root):
#              plaitrun --host h1:R,h2:R.. --launch-agent (default transports:
#              shm inside a host), mpirun --host .. --mca plm_rsh_agent with
#              btl self,vader,tcp and mpi_yield_when_idle 1 (every host has
#              R slots, so ORTE would busy-poll, yet all hosts share this
#              machine's cores; plait's waits yield by design); -n is ignored,
#              ranks run unbound. Extra settings for plait: -x VAR=VAL
#              (repeatable)
# Prints a markdown report on stdout; exit 1 if a run or the check failed.

set -u
nps="2 4"
colls="allreduce allgather reduce_scatter alltoall bcast"
reps=3
iters="2000 200 100 10 20 5"
minb=8
maxb=64M
dtype=float
op=sum
inplace=0
keep=""
cross=0
layouts=""
pxs=()
usage() { sed -n '2,/^# Prints/s/^# \{0,1\}//p' "$0"; }
while getopts "n:C:r:i:b:e:d:o:Ik:cH:x:h" opt; do
    case $opt in
    n) nps=$OPTARG ;;
    C) colls=$OPTARG ;;
    r) reps=$OPTARG ;;
    i) iters=$OPTARG ;;
    b) minb=$OPTARG ;;
    e) maxb=$OPTARG ;;
    d) dtype=$OPTARG ;;
    o) op=$OPTARG ;;
    I) inplace=2 ;;
    k) keep=$OPTARG ;;
    c) cross=1 ;;
    H) layouts=$OPTARG ;;
    x) pxs+=(-x "$OPTARG") ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
B=$(cd "${1:-${PLAIT_BUILDDIR:-.}}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
case $reps in ''|*[!0-9]*|0) echo "compare-coll.sh: -r needs a number >= 1" >&2; exit 2 ;; esac
read -r -a it <<<"$iters"
if [ "${#it[@]}" -ne 6 ] || [[ "${it[*]}" =~ [^0-9\ ] ]]; then
    echo "compare-coll.sh: -i needs six numbers (\"N W N W N W\"), got \"$iters\"" >&2
    exit 2
fi

PLAITRUN=$B/launcher/plaitrun
BENCH=$B/tools/plait-bench
NCCLT=$B/bench/nccltests_mpi
for f in "$PLAITRUN" "$BENCH" "$NCCLT"; do
    [ -x "$f" ] || { echo "compare-coll.sh: $f not built (BUILDDIR=$B)" >&2; exit 1; }
done
command -v mpirun >/dev/null || { echo "compare-coll.sh: mpirun not found" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

status=0
if [ "$cross" = 1 ]; then
    echo "## Correctness cross-check (plait vs Open MPI, same inputs)"
    echo
    echo '```'
    PLAIT_BUILDDIR=$B "$here/../tests/coll/t-ompi-cross.sh" || status=1
    echo '```'
    echo
fi

raw=$(mktemp -d /tmp/compare-coll.XXXXXX) || exit 1
trap 'rm -rf "$raw"' EXIT
PFX=""
if [ -n "$layouts" ]; then
    # shellcheck source=hosts-lib.sh
    . "$here/hosts-lib.sh"
    nps=$layouts
    nh=0
    for l in $layouts; do
        case $l in [1-9]x[1-9]|[1-9]x[1-9][0-9]) ;; *) echo "compare-coll.sh: -H: bad layout '$l' (HOSTSxRANKS)" >&2; exit 2 ;; esac
        [ "${l%x*}" -gt "$nh" ] && nh=${l%x*}
    done
    PFX=cc$$
    trap 'hosts_down $PFX; rm -rf "$raw"' EXIT
    trap 'exit 1' INT TERM
    export TMPDIR=$raw/tmp OMPI_MCA_orte_tmpdir_base=$raw/tmp
    mkdir -p "$TMPDIR"
    hosts_up "$PFX" "$nh" "$raw" || exit 1
fi
cores=$(nproc)
ARGS=(-d "$dtype" -o "$op" -I "$inplace")   # (each band's job adds its -b / -e)

# Iterations (-i), by size band, each band a job of its own: nccl-tests'
# defaults (20 timed, 5 warm-up) are too few for calls of microseconds on a
# shared machine, and for those of a few hundred.
BANDS=(small medium large)
declare -A ITER=([small]="-n ${it[0]} -w ${it[1]}" [medium]="-n ${it[2]} -w ${it[3]}" [large]="-n ${it[4]} -w ${it[5]}")
declare -A LO=([small]=0 [medium]=65536 [large]=2097152)
declare -A HI=([small]=32768 [medium]=1048576 [large]=0)   # 0: no bound

# hostlist LAYOUT: "2x2" -> "h1:2,h2:2"
hostlist() {
    local i l=""
    for i in $(seq 1 "${1%x*}"); do l="$l${l:+,}h$i:${1#*x}"; done
    echo "$l"
}

# cmd LIB NP: the launcher line (without the benchmark arguments); NP is a
# rank count, or HOSTSxRANKS with -H
cmd() {
    local bind=core
    if [ -n "$layouts" ]; then
        if [ "$1" = plait ]; then
            echo "$(hosts_plaitrun "$raw" "$(hostlist "$2")") ${pxs[*]} $BENCH coll"
        else
            echo "$(hosts_mpirun "$raw" "$(hostlist "$2")") -np $(( ${2%x*} * ${2#*x} ))" \
                 "--oversubscribe --bind-to none --mca btl self,vader,tcp" \
                 "--mca mpi_yield_when_idle 1 $NCCLT"
        fi
        return
    fi
    [ "$2" -gt "$cores" ] && bind=none
    if [ "$1" = plait ]; then
        echo "$PLAITRUN -n $2 --bind-to $bind $BENCH coll"
    elif [ "$bind" = none ]; then
        echo "mpirun -np $2 --oversubscribe --bind-to none --mca btl self,vader $NCCLT"
    else
        echo "mpirun -np $2 --bind-to core --mca btl self,vader $NCCLT"
    fi
}

# one LIB NP COLL REP: every size band of the range; appends "size busbw
# time" rows to $raw/LIB.NP.COLL
one() {
    local lib=$1 np=$2 coll=$3 rep=$4 out band rc b e lo hi
    b=$(bytes "$minb")
    e=$(bytes "$maxb")
    for band in "${BANDS[@]}"; do
        lo=${LO[$band]}
        hi=${HI[$band]}
        # the band's part of the range, if any (-b 128K -e 512K: the medium one only)
        [ "$b" -gt "$lo" ] && lo=$b
        { [ "$hi" -eq 0 ] || [ "$e" -lt "$hi" ]; } && hi=$e
        [ "$lo" -gt "$hi" ] && continue
        out=$raw/$lib.$np.$coll.$rep.$band
        # shellcheck disable=SC2046,SC2086
        timeout 600 $(cmd "$lib" "$np") "$coll" "${ARGS[@]}" -b "$lo" -e "$hi" ${ITER[$band]} \
            >"$out" 2>"$out.err" </dev/null
        rc=$?
        if [ $rc -ne 0 ]; then
            echo "compare-coll.sh: $lib $coll -n $np (repetition $rep, $band sizes) failed ($rc):" >&2
            sed 's/^/  /' "$out.err" "$out" | tail -20 >&2
            return 1
        fi
        awk '!/^#/ && NF >= 9 { print $1, $8, $6 }' "$out" >>"$raw/$lib.$np.$coll"
    done
}

bytes() {
    awk -v s="$1" 'BEGIN { m = 1; u = toupper(substr(s, length(s)));
        if (u == "K") m = 1024; else if (u == "M") m = 1048576; else if (u == "G") m = 1073741824;
        if (m > 1) s = substr(s, 1, length(s) - 1); printf "%d\n", s * m }'
}

label() {    # NP or HOSTSxRANKS, in words
    case $1 in *x*) echo "${1%x*} hosts x ${1#*x} ranks" ;; *) echo "$1 ranks" ;; esac
}
# shellcheck source=table-lib.sh
. "$(dirname "$0")/table-lib.sh"     # median FILE SIZE [COLUMN: 2 busbw, 3 time], spread, human, ratio

for rep in $(seq 1 "$reps"); do
    if [ $((rep % 2)) -eq 1 ]; then order="plait mpi"; else order="mpi plait"; fi
    for np in $nps; do
        for coll in $colls; do
            for lib in $order; do
                one "$lib" "$np" "$coll" "$rep" || exit 1
            done
        done
    done
done

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
first=$(ls "$raw"/plait.*.1.small "$raw"/plait.*.1.large 2>/dev/null | head -1)
plait_ver=$(sed -n '1s/.*: plait \([^ ,]*\).*/\1/p' "$first")
mpi_ver=$(sed -n '1s/.*: MPI \(.*\), [0-9]* ranks on.*/\1/p' "${first/plait./mpi.}")
echo "## Collectives: plait vs Open MPI ($(date -u +%Y-%m-%dT%H:%MZ))"
echo
echo "- machine: $(hostname), $cores cores ($cpu), $(uname -sr), load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "$layouts" ]; then
    echo "- libraries: plait $plait_ver; $mpi_ver (coll/tuned, btl self,vader,tcp," \
         "mpi_yield_when_idle 1)"
    echo "- across network-namespace hosts (veth + bridge, tests/netns/netns.sh): layouts" \
         "HOSTSxRANKS $layouts, all sharing this machine's $cores cores"
else
    echo "- libraries: plait $plait_ver; $mpi_ver (coll/tuned, btl self,vader)"
fi
for np in $nps; do
    echo "- $(label "$np"): \`$(cmd plait "$np" | sed -e "s|$B/||g" -e "s|$raw/|DIR/|g") COLL -b $minb -e $maxb ${ARGS[*]}\` vs"
    echo "  \`$(cmd mpi "$np" | sed -e "s|$B/||g" -e "s|$raw/|DIR/|g") COLL -b $minb -e $maxb ${ARGS[*]}\`"
done
echo "- iterations: ${ITER[small]} below $(human "${LO[medium]}"), ${ITER[medium]} from" \
     "$(human "${LO[medium]}") to $(human "${HI[medium]}"), ${ITER[large]} from $(human "${LO[large]}");" \
     "median of $reps"
echo "  repetitions (min-max beside it), plait and Open MPI interleaved"
echo "- busbw in GB/s, out-of-place, nccl-tests factors; time in us; ratio = Open MPI time /"
echo "  plait time (> 1: plait faster)"
for np in $nps; do
    for coll in $colls; do
        p=$raw/plait.$np.$coll; m=$raw/mpi.$np.$coll
        echo
        echo "### $coll, $(label "$np") (busbw GB/s)"
        echo
        echo "| Size | plait busbw | Open MPI busbw | plait us | Open MPI us | ratio | plait min-max | Open MPI min-max |"
        echo "|-----:|------:|------:|------:|------:|------:|------:|------:|"
        for s in $(awk '{ print $1 }' "$p" | sort -n -u); do
            a=$(median "$p" "$s"); b=$(median "$m" "$s")
            ta=$(median "$p" "$s" 3); tb=$(median "$m" "$s" 3)
            echo "| $(human "$s") | $a | $b | $ta | $tb | $(ratio "$tb" "$ta") | $(spread "$p" "$s") | $(spread "$m" "$s") |"
        done
    done
done
if [ -n "$keep" ]; then
    mkdir -p "$keep" && find "$raw" -maxdepth 1 -type f -exec cp {} "$keep"/ \;
fi
exit $status
