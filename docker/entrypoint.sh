#!/bin/sh
# Entry point of the mlfabric image: makes a capability-only container behave like a
# privileged one for what the emulation needs, then runs the command. Harmless (a no-op) in
# a privileged container.
set -e
# Docker mounts /proc/sys and /sys read-only unless --privileged; Mininet's hosts set sysctls
# (no IPv6 on the fabric) and tools write under /sys. CAP_SYS_ADMIN may remount them.
if grep -qs ' /proc/sys proc ro,' /proc/self/mounts; then
    mount -o remount,rw,bind /proc/sys 2>/dev/null || echo "entrypoint: /proc/sys stays read-only" >&2
fi
if grep -qs ' /sys sysfs ro,' /proc/self/mounts; then
    mount -o remount,rw /sys 2>/dev/null || echo "entrypoint: /sys stays read-only" >&2
fi
# bcc compiles against /lib/modules/$(uname -r)/build: the image has Debian's headers, linked
# here for the kernel this container happens to run on (as scripts/setup.sh does on a host).
moddir=/lib/modules/$(uname -r)
if [ ! -e "$moddir/build" ]; then
    hdr=$(ls -d /usr/src/linux-headers-*-amd64 2>/dev/null | sort -V | tail -1)
    common=$(ls -d /usr/src/linux-headers-*-common 2>/dev/null | sort -V | tail -1)
    if [ -n "$hdr" ]; then
        mkdir -p "$moddir" && ln -sfn "$hdr" "$moddir/build" && ln -sfn "$common" "$moddir/source"
    fi
fi
exec "$@"
