#!/usr/bin/env bash
# Idempotent machine + venv setup. Each step checks before it acts, so a second run is fast.
set -euo pipefail
cd "$(dirname "$0")/.."

# g++: the simulator's engine (sim/engine.cpp) is compiled on first use; a fresh Debian has none.
APT_PACKAGES=(mininet bridge-utils iproute2 iputils-ping python3-bpfcc bpfcc-tools bpftool
              linux-headers-amd64 python3-venv python3-dev cpp g++ libbpf1 tcpdump ethtool)
# What only the host's tests use: chromium (the live view's browser test), tshark (the pcap
# test decodes RoCEv2), docker.io, docker-compose and debootstrap (the compose test). The
# image (docker/Dockerfile sets MLFABRIC_IMAGE) runs neither and stays without them.
if [[ -z ${MLFABRIC_IMAGE:-} ]]; then
    APT_PACKAGES+=(chromium tshark docker.io docker-compose debootstrap)
fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "setup: installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
else
    echo "setup: Debian packages present"
fi

sh scripts/link-kernel-headers.sh

# Debian's python sees Debian's bcc and mininet modules through --system-site-packages.
if [[ ! -x .venv/bin/python ]]; then
    echo "setup: creating .venv"
    /usr/bin/python3 -m venv --system-site-packages .venv
fi
stamp=.venv/.installed
want=$(cat pyproject.toml | sha256sum | cut -d' ' -f1)
if [[ ! -f $stamp || "$(cat $stamp)" != "$want" ]]; then
    echo "setup: installing the project into .venv"
    # pip's own chatter goes to a log; it is shown only when the install fails.
    # ns3 and cppyy: the simulator no longer uses them; a .venv made before goes without them.
    if ! { .venv/bin/pip install -q --upgrade pip && .venv/bin/pip install -q -e '.[dev]' &&
           .venv/bin/pip uninstall -q -y ns3 cppyy cppyy-backend cppyy-cling CPyCppyy; } \
            > .venv/pip.log 2>&1; then
        cat .venv/pip.log; echo "setup: pip install failed" >&2; exit 1
    fi
    # PyTorch's CPU build for collectives' torch.distributed backend; without it the
    # PyTorch tests skip, saying so. The image goes without: PyPI's torch==2.13.0 for Linux is
    # the CUDA build (gigabytes of NVIDIA libraries), and the CPU build is a file on the host.
    if [[ -n ${MLFABRIC_IMAGE:-} ]]; then
        echo "setup: the image goes without torch (the PyTorch parts skip, saying so)"
    else
        .venv/bin/pip install -q -e '.[torch]' >> .venv/pip.log 2>&1 \
            || echo "setup: torch==2.13.0 (CPU) not installed: the PyTorch tests will skip"
    fi
    echo "$want" > $stamp
else
    echo "setup: .venv up to date"
fi
