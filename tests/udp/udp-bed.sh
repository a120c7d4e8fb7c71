#!/bin/bash
# udp-bed.sh -- two hosts joined by two routed paths, made of network
# namespaces (after shared/tools/netns-testbed.sh), for the udp transport's
# test (tests/udp/t-netns.sh) and benchmark (bench/udp-netns.sh):
#
#        A [a-r1]--[r1-a] R1 [r1-b]--[b-r1] B
#        A [a-r2]--[r2-a] R2 [r2-b]--[b-r2] B
#
# Namespaces PFX-a, PFX-b (hosts), PFX-r1, PFX-r2 (routers). Each host has a
# service address on lo (A 198.18.200.1, B 198.18.100.1); the routes between
# them are ECMP over both routers hashed on the UDP ports (policy 1), so
# flows with different ports spread over both links. Per-link addresses
# (A 198.18.1.1 / 198.18.2.1, B 198.18.3.2 / 198.18.4.2) pin one path.
# Hosts segment UDP GSO batches at their egress (tx-udp-segmentation off,
# when ethtool exists), so loss and shaping on the routers act per datagram.
#
#   udp-bed.sh up PFX            build (no shaping, no loss)
#   udp-bed.sh rate PFX R1 R2    tbf rate per path, e.g. 1gbit 100mbit; none: unshaped
#   udp-bed.sh loss PFX P1 P2    random drop of forwarded UDP, percent (0..100, may be
#                                fractional down to 0.01)
#   udp-bed.sh fwd PFX           packets each router forwarded toward B: "R1 R2"
#   udp-bed.sh down PFX          remove everything
# Needs root, iproute2, nft (loss), tc (rate).
set -u
[ $# -ge 2 ] || { sed -n '2,/^# Needs/s/^# \{0,1\}//p' "$0"; exit 2; }
cmd=$1 PFX=$2
shift 2
A=$PFX-a; NB=$PFX-b; R1=$PFX-r1; R2=$PFX-r2
A_VIP=198.18.200.1; B_VIP=198.18.100.1
nx() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

# tbf queue bound: 5 ms by default, as in shared/tools/netns-testbed.sh (the
# reference bed); UDP_BED_TBF_LATENCY overrides it (e.g. 20ms: deeper queues).
set_rate() {   # set_rate ROUTER RATE|none
    local r=$1 rate=$2 dev
    for dev in $(nx "$r" ls /sys/class/net | grep -v '^lo$'); do
        nx "$r" tc qdisc del dev "$dev" root 2>/dev/null
        [ "$rate" = none ] || nx "$r" tc qdisc add dev "$dev" root tbf rate "$rate" burst 256kb \
            latency "${UDP_BED_TBF_LATENCY:-5ms}"
    done
}
set_loss() {   # set_loss ROUTER PERCENT: random drop of forwarded UDP (1/10000 steps)
    local r=$1 pct=$2 per10k
    nx "$r" nft delete table ip impair 2>/dev/null
    per10k=$(awk -v p="$pct" 'BEGIN { printf "%d", p * 100 + 0.5 }')
    [ "$per10k" = 0 ] && return 0
    local rule="numgen random mod 10000 < $per10k"
    [ "$per10k" -ge 10000 ] && rule=""   # 100%: a dead path (numgen's bound is 9999)
    nx "$r" nft -f - <<EOF
table ip impair {
  chain lossfwd {
    type filter hook forward priority 0; policy accept;
    meta l4proto udp $rule counter drop
  }
}
EOF
}
# UDP packets a router forwarded toward B (its qdisc's count on r?-b).
fwd_pkts() { nx "$1" ip -s -j link show "$2" | python3 -c \
    'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["tx"]["packets"])'; }

build_bed() {
    local ns d
    for ns in $A $NB $R1 $R2; do
        ip netns add "$ns" || return 1
        nx "$ns" ip link set lo up
        nx "$ns" sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
    done
    mk() { ip link add "$1" netns "$2" type veth peer name "$3" netns "$4"; }
    mk a-r1 $A r1-a $R1 && mk a-r2 $A r2-a $R2 && mk b-r1 $NB r1-b $R1 && mk b-r2 $NB r2-b $R2 ||
        return 1
    nx $A ip addr add 198.18.1.1/24 dev a-r1;  nx $R1 ip addr add 198.18.1.2/24 dev r1-a
    nx $A ip addr add 198.18.2.1/24 dev a-r2;  nx $R2 ip addr add 198.18.2.2/24 dev r2-a
    nx $R1 ip addr add 198.18.3.1/24 dev r1-b; nx $NB ip addr add 198.18.3.2/24 dev b-r1
    nx $R2 ip addr add 198.18.4.1/24 dev r2-b; nx $NB ip addr add 198.18.4.2/24 dev b-r2
    nx $A ip addr add $A_VIP/32 dev lo
    nx $NB ip addr add $B_VIP/32 dev lo
    for ns in $A $NB $R1 $R2; do
        for d in $(nx "$ns" ls /sys/class/net); do
            nx "$ns" sysctl -qw "net.ipv4.conf.$d.rp_filter=0"
            nx "$ns" ip link set "$d" up
        done
    done
    nx $R1 sysctl -qw net.ipv4.ip_forward=1
    nx $R2 sysctl -qw net.ipv4.ip_forward=1
    nx $R1 ip route add $B_VIP/32 via 198.18.3.2; nx $R1 ip route add $A_VIP/32 via 198.18.1.1
    nx $R2 ip route add $B_VIP/32 via 198.18.4.2; nx $R2 ip route add $A_VIP/32 via 198.18.2.1
    nx $A ip route add 198.18.3.0/24 via 198.18.1.2 dev a-r1
    nx $A ip route add 198.18.4.0/24 via 198.18.2.2 dev a-r2
    nx $NB ip route add 198.18.1.0/24 via 198.18.3.1 dev b-r1
    nx $NB ip route add 198.18.2.0/24 via 198.18.4.1 dev b-r2
    for ns in $A $NB; do
        nx $ns sysctl -qw net.ipv4.fib_multipath_hash_policy=1   # hash on the ports
        nx $ns sysctl -qw net.ipv4.fib_multipath_hash_seed=1 2>/dev/null
    done
    nx $A ip route add $B_VIP/32 src $A_VIP \
        nexthop via 198.18.1.2 dev a-r1 weight 1 nexthop via 198.18.2.2 dev a-r2 weight 1 || return 1
    nx $NB ip route add $A_VIP/32 src $B_VIP \
        nexthop via 198.18.3.1 dev b-r1 weight 1 nexthop via 198.18.4.1 dev b-r2 weight 1 || return 1
    # Hosts segment GSO batches at their own egress, like a NIC: loss and
    # shaping on the routers then act per datagram.
    if command -v ethtool >/dev/null; then
        for d in a-r1 a-r2; do nx $A ethtool -K $d tx-udp-segmentation off >/dev/null 2>&1; done
        for d in b-r1 b-r2; do nx $NB ethtool -K $d tx-udp-segmentation off >/dev/null 2>&1; done
    fi
    return 0
}


down() {
    local ns
    for ns in $A $NB $R1 $R2; do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
        ip netns del "$ns" 2>/dev/null
    done
    return 0
}

case $cmd in
up)   build_bed || { down; exit 1; } ;;
down) down ;;
rate) set_rate $R1 "${1:?rate of path 1}" && set_rate $R2 "${2:-$1}" ;;
loss) set_loss $R1 "${1:?loss of path 1}" && set_loss $R2 "${2:-$1}" ;;
fwd)  echo "$(fwd_pkts $R1 r1-b) $(fwd_pkts $R2 r2-b)" ;;
*)    echo "udp-bed.sh: unknown command $cmd" >&2; exit 2 ;;
esac
