# shellcheck shell=bash
# hosts-lib.sh -- sourced by the bench scripts that run plaitrun and Open MPI's
# mpirun across hosts made of network namespaces (tests/netns/netns.sh: hosts
# h1..hN, 198.18.0.I on eth0, one bridge; /tmp and /dev/shm shared).
#
#   hosts_up PFX N DIR   builds the hosts and writes into DIR
#                          DIR/in-hI    runs its arguments in host hI
#                          DIR/head-hI  the same under hostname hI (own UTS
#                                       namespace), for mpirun, which tells
#                                       its own node from the others by name
#                          DIR/rsh-agent  Open MPI's plm_rsh_agent: "agent
#                                       [-opts] HOST CMD" runs CMD (ORTE's
#                                       daemon) in HOST under its hostname
#   hosts_down PFX       removes them (and any process left in them)
#   hosts_plaitrun DIR HOSTLIST   the plaitrun arguments (head in h1, unbound)
#   hosts_mpirun DIR HOSTLIST     the mpirun arguments (head in h1)
# HOSTLIST: "h1:2,h2:2" (slots per host). The caller sets PLAITRUN.
# NETNS_MTU=9000 in the environment gives the hosts jumbo-frame links
# (tests/netns/netns.sh), e.g. NETNS_MTU=9000 bench/ab-hosts.sh.
# Needs root and iproute2 (unshare for mpirun).

hosts_lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
HOSTS_NETNS=$hosts_lib_dir/../tests/netns/netns.sh

hosts_up() {
    local pfx=$1 n=$2 dir=$3 i why
    why=$("$HOSTS_NETNS" check 2>&1) || { echo "network namespaces unavailable: $why" >&2; return 1; }
    "$HOSTS_NETNS" up "$pfx" "$n" || return 1
    for i in $(seq 1 "$n"); do
        printf '#!/bin/sh\nexec ip netns exec %s-h%d "$@"\n' "$pfx" "$i" > "$dir/in-h$i"
        printf '#!/bin/sh\nexec ip netns exec %s-h%d unshare --uts sh -c '\''hostname h%d; exec "$@"'\'' sh "$@"\n' \
            "$pfx" "$i" "$i" > "$dir/head-h$i"
        chmod +x "$dir/in-h$i" "$dir/head-h$i"
    done
    cat > "$dir/rsh-agent" <<EOF
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
h=\$1; shift
exec "$dir/head-\$h" sh -c "\$*"
EOF
    chmod +x "$dir/rsh-agent"
}

hosts_down() {
    "$HOSTS_NETNS" down "$1"
}

# --bind-to none: the hosts are namespaces of one machine. plaitrun gives
# each its own block of cores when bound, but a bound rank shares its core
# with its udp engine thread, and unbound ran a little faster here
# (docs/USER-GUIDE.md, binding).
hosts_plaitrun() {
    echo "$1/in-h1 $PLAITRUN --host $2 --bind-to none --launch-agent $1/in-{host}"
}

# plm rsh: an environment may preset another launcher (OMPI_MCA_plm=isolated
# starts local processes only, and mpirun then finds "not enough slots").
hosts_mpirun() {
    echo "$1/head-h1 mpirun --host $2 --mca plm rsh --mca plm_rsh_agent $1/rsh-agent"
}
