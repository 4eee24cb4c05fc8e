#!/usr/bin/env bash
# No registry image can be pulled on these machines, so the Debian base image is made locally:
# debootstrap a minimal bookworm and import it as `mlfabric-base:bookworm`. Idempotent.
set -euo pipefail
IMAGE=mlfabric-base:bookworm
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "base image $IMAGE present"; exit 0
fi
command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
echo "debootstrapping bookworm into $root (a few minutes)"
debootstrap --variant=minbase --include=ca-certificates bookworm "$root" >/dev/null
# The image trusts what the building host trusts (hosts behind a TLS-inspecting proxy add
# their CA to this bundle), so apt and pip inside the build reach the same registries.
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
tar -C "$root" -c . | docker import - "$IMAGE"
