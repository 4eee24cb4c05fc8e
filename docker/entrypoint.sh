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
# bcc's kernel headers (the jobs image has them), for the kernel this container runs on.
if ls -d /usr/src/linux-headers-*-amd64 >/dev/null 2>&1; then
    sh /opt/mlfabric/scripts/link-kernel-headers.sh || true
fi
exec "$@"
