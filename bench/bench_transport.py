"""Transport goodput between two namespaces (veth, MTU 9000): Mbit/s, packets/s and CPU time
per packet, for go-back-N, selective repeat and the reorder-tolerant receiver (ooo), IBTA MTU
1024 and 4096, side by side; the load-balancing policies' tc eBPF programs attached (spray,
reps, ethereal's pin) next to none (ecmp) in the same run; and the NAK modes again with 1% of
packets dropped on the wire (ebpf/impair).

Each row is a 2-rank all-to-all of 64 MiB vectors: 32 MiB each way at once, so both
directions are loaded. Mbit/s counts both directions; CPU time per packet is both rank
processes' CPU (sending, receiving, ACKs) divided by the data packets. Needs root."""
from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from collectives.launch import LaunchError, launch  # noqa: E402
from ebpf.impair import Impair  # noqa: E402

MiB = 1 << 20


def sh(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True)


def _impair(ns: list[str], tag: str, drop: float):
    """ebpf/impair on both ranks' ingress (real drops); None when eBPF is unavailable."""
    try:
        prog = Impair.load()
    except Exception as exc:  # bcc missing or no kernel headers: the lossless rows stand
        print(f"(loss rows skipped: {exc})")
        return None
    prog.configure(drop=drop, udp_dport=4791, seed=5)
    for i, n in enumerate(ns):
        prog.attach(f"bt{tag}{i}", n, directions=("ingress",))
    return prog


def main() -> int:
    if os.geteuid() != 0:
        print("bench_transport: needs root for network namespaces; skipped")
        return 0
    tag = uuid.uuid4().hex[:6]
    ns = [f"bt{tag}a", f"bt{tag}b"]
    try:
        for n in ns:
            sh("ip", "netns", "add", n)
            sh("ip", "-n", n, "link", "set", "lo", "up")
        sh("ip", "link", "add", f"bt{tag}0", "netns", ns[0], "type", "veth", "peer", "name",
           f"bt{tag}1", "netns", ns[1])
        for i, n in enumerate(ns):
            dev = f"bt{tag}{i}"
            sh("ip", "-n", n, "addr", "add", f"10.78.0.{i + 1}/24", "dev", dev)
            sh("ip", "-n", n, "link", "set", dev, "mtu", "9000", "up")
        ips = ["10.78.0.1", "10.78.0.2"]
        print(f"{'mode':<6} {'mtu':>5} {'policy':<9} {'loss':>5} {'Mbit/s':>9} {'pkt/s':>9} "
              f"{'CPU us/pkt':>11} {'retx':>6} {'vs gbn-1024':>12}")
        base = None
        cases = [(rel, mtu, "ecmp", 0.0) for rel in ("gbn", "sr", "ooo") for mtu in (1024, 4096)]
        cases += [("ooo", 1024, policy, 0.0) for policy in ("spray", "reps", "ethereal")]
        cases += [(rel, 1024, "ecmp", 0.01) for rel in ("gbn", "sr", "ooo")]
        impair = None
        for rel, mtu, policy, drop in cases:
            if drop and impair is None:
                impair = _impair(ns, tag, drop)
                if impair is None:
                    break
            run = {"collective": "alltoall", "algo": "direct", "dtype": "int32",
                   "elements": 64 * MiB // 4}
            try:
                rows = launch(ips, [run], namespaces=ns, timeout=600, policy=policy,
                              transport={"reliability": rel, "mtu": mtu, "window": 128})
            except LaunchError as exc:           # no eBPF here: the rows without it stand
                print(f"({policy} skipped: {exc})")
                continue
            cct = max(r["cct_s"] for r in rows)
            pkts = sum(r["data_packets"] for r in rows)
            cpu = sum(r["cpu_s"] for r in rows)
            goodput = 64 * MiB * 8 / cct / 1e6          # both directions together
            base = base or goodput
            print(f"{rel:<6} {mtu:>5} {policy:<9} {drop:>5.0%} {goodput:>9.1f} {pkts / cct:>9.0f} "
                  f"{cpu / pkts * 1e6:>11.2f} "
                  f"{sum(r['packets_retransmitted'] for r in rows):>6} "
                  f"{goodput / base:>11.2f}x", flush=True)
        if impair is not None:
            impair.close()
    finally:
        for n in ns:
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
