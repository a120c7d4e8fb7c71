# tap-lib.sh -- TAP helpers sourced by the tests/<area>/t-*.sh scripts that run
# jobs: `source "$here/../tap-lib.sh" NAME` gives an output file $out (removed
# at exit), a failure count $failures, and
#   pass NAME           -> "ok - NAME"
#   fail NAME [LINE...] -> "not ok - NAME", each LINE as "# LINE", then the last
#                          $TAP_TAIL (default 30) lines of $out
failures=0
out=$(mktemp "/tmp/plait-t-$1.XXXXXX")
trap 'rm -f "$out"' EXIT

pass() { echo "ok - $1"; }
fail() {
    echo "not ok - $1"
    shift
    for l in "$@"; do echo "# $l"; done
    echo "# --- output (last ${TAP_TAIL:-30} lines):"
    tail -n "${TAP_TAIL:-30}" "$out" | sed 's/^/#   /'
    failures=$((failures + 1))
}
