#!/usr/bin/env bash
# No registry image can be pulled on these machines, so the Debian base image is made locally:
# debootstrap a minimal bookworm and import it as `mlfabric-base:bookworm`. Idempotent: an
# existing image is kept (pass --force to rebuild it). Needs root, debootstrap and a running
# docker engine.
set -euo pipefail
IMAGE=mlfabric-base:bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

docker info >/dev/null 2>&1 || {
    echo "build-base: no docker engine answers (start one: nohup dockerd >/tmp/dockerd.log 2>&1 &)" >&2
    exit 1; }
if [[ ${1:-} != --force ]] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "build-base: base image $IMAGE present (--force rebuilds it)"; exit 0
fi
command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null

root=$(mktemp -d /var/tmp/mlfabric-base.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "build-base: debootstrapping bookworm into $root (about a minute)"
debootstrap --variant=minbase --include=ca-certificates bookworm "$root" "$MIRROR" >/dev/null

# The same suites the hosts use, so linux-headers-amd64 etc. resolve to current versions.
cat >"$root/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
# What Debian's own docker images configure: no recommends, no caches or translations kept,
# and no docs/man pages/locales unpacked (like the -slim variants).
cat >"$root/etc/apt/apt.conf.d/docker-defaults" <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
cat >"$root/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
EOF
rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/*
find "$root/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete 2>/dev/null || true
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/log/*.log
# docker supplies these per container; the host's copies do not belong in the image.
: >"$root/etc/hostname"; : >"$root/etc/resolv.conf"

# The image trusts what the building host trusts (hosts behind a TLS-inspecting proxy have
# its CA in this bundle), so apt and pip inside the build reach the same registries. A copy
# in /usr/local/share/ca-certificates keeps it if update-ca-certificates ever regenerates
# the bundle.
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
cp /etc/ssl/certs/ca-certificates.crt "$root/usr/local/share/ca-certificates/host-bundle.crt"

tar -C "$root" -c . | docker import \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' - "$IMAGE" >/dev/null
echo "build-base: $IMAGE ($(docker image inspect -f '{{.Size}}' "$IMAGE" | numfmt --to=iec))"
