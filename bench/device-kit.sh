#!/bin/bash
# device-kit.sh DIR -- copies this machine's ip, tc, nft, ethtool, perf and strace,
# with every shared library they load, into DIR, and writes DIR/bin/NAME
# wrappers that start each through the copied dynamic loader.
#
# Why: the GPU machines (the device tool) lack iproute2, nftables and perf,
# and cannot install packages, while the namespace testbeds need them. A
# kit made here (Debian 12) runs there on any x86_64 Linux kernel:
#     bench/device-kit.sh kit && make dist      # here; carry kit + tarball
#     PATH=$PWD/kit/bin:$PATH bench/udp-netns.sh ...   # there
# `ip netns exec` execs the command it is given by path, so wrapped tools
# and the host's own programs mix freely. The real binaries are NAME.real:
# perf puts the folder of its own binary first in PATH for the commands it
# starts, where a bare `ip` would then be found without its libraries.
# DIR should be git-ignored.
set -eu
[ $# = 1 ] || { sed -n '2,12p' "$0"; exit 2; }
dir=$1
tools="ip tc nft ethtool perf strace"
mkdir -p "$dir/bin" "$dir/lib" "$dir/libexec"
for t in $tools; do
    p=$(command -v "$t") || { echo "device-kit.sh: $t not found here" >&2; exit 1; }
    cp -L "$p" "$dir/libexec/$t.real"
    ldd "$p" | awk '/=>/ && $3 ~ /^\// { print $3 } /^[[:space:]]*\/.*ld-linux/ { print $1 }' |
        while read -r lib; do cp -Lu "$lib" "$dir/lib/"; done
    cat > "$dir/bin/$t" <<W
#!/bin/sh
k=\$(dirname "\$(dirname "\$(readlink -f "\$0")")")
exec "\$k/lib/ld-linux-x86-64.so.2" --library-path "\$k/lib" "\$k/libexec/$t.real" "\$@"
W
    chmod +x "$dir/bin/$t"
done
echo "device-kit.sh: $(du -sh "$dir" | cut -f1) in $dir ($tools)"
