#!/bin/bash
# install-deps.sh -- installs (apt, Debian 12, as root) what building and testing
# plait needs; does nothing when every package is already installed.
set -u
PACKAGES="autoconf automake libtool pkg-config libpmix-dev libpmix-bin libhwloc-dev hwloc
          libibverbs-dev openmpi-bin libopenmpi-dev slurm-wlm slurmd slurmctld munge nftables
          iptables ethtool iproute2 psmisc procps clang"

missing=""
for p in $PACKAGES; do
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] || missing="$missing $p"
done
if [ -z "$missing" ]; then
    echo "=== install-deps: all packages present"
    exit 0
fi
echo "=== install-deps: installing$missing"
if [ "$(id -u)" != 0 ]; then
    echo "install-deps: needs root to install:$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q || exit 1
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing
