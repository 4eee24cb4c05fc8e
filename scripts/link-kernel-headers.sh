#!/bin/sh
# bcc compiles against /lib/modules/$(uname -r)/build. Kernels without their own headers
# package (VM kernels, a container on any host) get Debian's generic headers linked in.
# Used by setup.sh on a host and by docker/entrypoint.sh in the container.
set -e
moddir="/lib/modules/$(uname -r)"
[ -e "$moddir/build" ] && exit 0
hdr=$(ls -d /usr/src/linux-headers-*-amd64 2>/dev/null | sort -V | tail -1)
common=$(ls -d /usr/src/linux-headers-*-common 2>/dev/null | sort -V | tail -1)
if [ -z "$hdr" ]; then
    echo "link-kernel-headers: no /usr/src/linux-headers-*-amd64 (apt install linux-headers-amd64)" >&2
    exit 1
fi
echo "setup: linking kernel headers $hdr into $moddir"
mkdir -p "$moddir"
ln -sfn "$hdr" "$moddir/build"
ln -sfn "$common" "$moddir/source"
