#!/bin/bash
# netns.sh -- hosts made of network namespaces, for multi-host plaitrun tests.
#
#   netns.sh up   PREFIX N     # hosts h1..hN: namespaces PREFIX-h1..PREFIX-hN
#   netns.sh down PREFIX       # removes every namespace and link of PREFIX
#   netns.sh exec PREFIX HOST CMD...   # runs CMD in host HOST (h1, h2, ...)
#   netns.sh check             # exit 0 when namespaces can be made here
#
# NETNS_MTU=BYTES sets the MTU of every link and the bridge (default: the
# kernel's, 1500), e.g. 9000 for a jumbo-frame fabric.
#
# Layout: a switch namespace PREFIX-sw holds a bridge; host hI has one veth
# link "eth0" to it with address 198.18.0.I/24 (198.18.0.0/15 is the
# benchmarking range: these addresses exist only inside the namespaces) and
# loopback up.  Nothing is added to the caller's own namespace, so several
# test runs with different prefixes can coexist.  The namespaces share the
# file system, /tmp and /dev/shm with the caller: programs are at the same
# paths on every host.  Needs root and iproute2.
#
# Launch plaitrun's daemons into them with:
#   plaitrun --host h1:2,h2:2 --launch-agent "ip netns exec PREFIX-{host}" ...
set -eu

die() { echo "netns.sh: $*" >&2; exit 1; }

# Veth names are global while the pair is created: derive short unique ones.
tag() { printf '%s' "$1" | cksum | awk '{ printf "%x", $1 % 1048576 }'; }

up() {
    local pfx=$1 n=$2 t i
    [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 250 ] || die "bad host count '$n'"
    [[ ${NETNS_MTU:-1500} =~ ^[0-9]+$ ]] && [ "${NETNS_MTU:-1500}" -ge 1280 ] &&
        [ "${NETNS_MTU:-1500}" -le 65535 ] || die "NETNS_MTU must be 1280..65535, not '$NETNS_MTU'"
    t=$(tag "$pfx")
    ip netns add "$pfx-sw"
    ip -n "$pfx-sw" link add br0 type bridge
    [ -z "${NETNS_MTU:-}" ] || ip -n "$pfx-sw" link set br0 mtu "$NETNS_MTU"
    ip -n "$pfx-sw" link set br0 up
    ip -n "$pfx-sw" link set lo up
    for i in $(seq 1 "$n"); do
        ip netns add "$pfx-h$i"
        ip link add "v${t}h$i" type veth peer name "v${t}s$i"
        ip link set "v${t}h$i" netns "$pfx-h$i"
        ip link set "v${t}s$i" netns "$pfx-sw"
        ip -n "$pfx-h$i" link set "v${t}h$i" name eth0
        if [ -n "${NETNS_MTU:-}" ]; then
            ip -n "$pfx-h$i" link set eth0 mtu "$NETNS_MTU"
            ip -n "$pfx-sw" link set "v${t}s$i" mtu "$NETNS_MTU"
        fi
        ip -n "$pfx-h$i" addr add "198.18.0.$i/24" dev eth0
        ip -n "$pfx-h$i" link set eth0 up
        ip -n "$pfx-h$i" link set lo up
        ip -n "$pfx-sw" link set "v${t}s$i" master br0
        ip -n "$pfx-sw" link set "v${t}s$i" up
    done
}

down() {
    local pfx=$1 ns
    # Deleting a namespace deletes its links (and their peers).
    for ns in $(ip netns list | awk '{ print $1 }' | grep -E "^$pfx-(sw|h[0-9]+)$" || true); do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
    done
}

check() {
    [ "$(id -u)" = 0 ] || { echo "not root"; return 1; }
    command -v ip >/dev/null || { echo "no ip command (iproute2)"; return 1; }
    local probe="plaitprobe$$"
    ip netns add "$probe" 2>/dev/null || { echo "ip netns add fails"; return 1; }
    ip netns del "$probe"
}

cmd=${1:-}
case "$cmd" in
    up)    [ $# = 3 ] || die "usage: netns.sh up PREFIX N"; up "$2" "$3" ;;
    down)  [ $# = 2 ] || die "usage: netns.sh down PREFIX"; down "$2" ;;
    exec)  [ $# -ge 4 ] || die "usage: netns.sh exec PREFIX HOST CMD..."
           pfx=$2 host=$3; shift 3; exec ip netns exec "$pfx-$host" "$@" ;;
    check) check ;;
    *)     die "usage: netns.sh up|down|exec|check ..." ;;
esac
