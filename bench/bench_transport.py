"""Transport goodput between two namespaces (veth, MTU 9000): Mbit/s, packets/s and CPU time
per packet of the native transport (collectives/native, C) and the Python one (its reference),
side by side: go-back-N, selective repeat and the reorder-tolerant receiver (ooo), IBTA MTU 1024
and 4096; the load-balancing policies' tc eBPF programs attached (spray, reps, ethereal's pin)
next to none (ecmp); and the NAK modes again with 1% of packets dropped on the wire
(ebpf/impair).

Each row is a 2-rank all-to-all of 64 MiB vectors: 32 MiB each way at once, so both
directions are loaded. Mbit/s counts both directions; CPU time per packet is both rank
processes' CPU (user and kernel: sending, receiving, ACKs, the sockets, ring and veth) divided by
the data packets, "user" only its user-space part (the transport's own work, where C replaces
Python). Last line: the geometric mean over the rows of Python's CPU per packet over the native
one's. Needs root. `--rows gbn/1024/ecmp/0,ooo/1024/reps/0` runs only those rows (mode/MTU/
policy/loss %), `--transports native` only that transport (no ratio then): for profiling."""
from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from collectives.launch import LaunchError, launch  # noqa: E402
from collectives.runner import elements_of  # noqa: E402
from ebpf.impair import Impair  # noqa: E402
from fabricmodel import policies  # noqa: E402

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


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _measure(ips, ns, rel: str, mtu: int, policy: str, backend: str):
    """(Mbit/s, packets/s, CPU us/packet, user CPU us/packet, retransmissions) of one row;
    None when the policy's eBPF cannot run here."""
    run = {"collective": "alltoall", "algo": "direct", "dtype": "int32",
           "elements": elements_of(64 * MiB, "int32")}
    try:
        rows = launch(ips, [run], namespaces=ns, timeout=600, policy=policy,
                      transport={"reliability": rel, "mtu": mtu, "window": 128,
                                 "backend": backend})
    except LaunchError as exc:           # no eBPF here: the rows without it stand
        print(f"({policy} skipped: {exc})")
        return None
    cct = max(r["cct_s"] for r in rows)
    pkts = sum(r["data_packets"] for r in rows)
    return (64 * MiB * 8 / cct / 1e6, pkts / cct,
            sum(r["cpu_s"] for r in rows) / pkts * 1e6,
            sum(r["cpu_user_s"] for r in rows) / pkts * 1e6,
            sum(r["packets_retransmitted"] for r in rows))


def _cases() -> list[tuple[str, int, str, float]]:
    base = policies.BASELINE
    cases = [(rel, mtu, base, 0.0) for rel in ("gbn", "sr", "ooo") for mtu in (1024, 4096)]
    cases += [("ooo", 1024, policy, 0.0) for policy in policies.names() if policy != base]
    return cases + [(rel, 1024, base, 0.01) for rel in ("gbn", "sr", "ooo")]


def _name(case: tuple[str, int, str, float]) -> str:
    rel, mtu, policy, drop = case
    return f"{rel}/{mtu}/{policy}/{drop * 100:g}"


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    names = [_name(c) for c in _cases()]
    parser.add_argument("--rows", help=f"comma-separated rows of {', '.join(names)}")
    parser.add_argument("--transports", default="python,native",
                        help="comma-separated: python, native (default both)")
    args = parser.parse_args(argv)
    for field, known in (("rows", names), ("transports", ["python", "native"])):
        value = getattr(args, field)
        chosen = value.split(",") if value else list(known)
        unknown = [v for v in chosen if v not in known]
        if unknown:
            parser.error(f"--{field}: unknown {', '.join(unknown)}; known: {', '.join(known)}")
        setattr(args, field, chosen)
    return args


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
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
        print(f"{'mode':<6} {'mtu':>5} {'policy':<9} {'loss':>5} {'transport':<9} {'Mbit/s':>9} "
              f"{'pkt/s':>9} {'CPU us/pkt':>11} {'user us/pkt':>12} {'retx':>6} {'py/native':>10}")
        cases = [c for c in _cases() if _name(c) in args.rows]
        impair = None
        ratios, user_ratios = [], []
        for rel, mtu, policy, drop in cases:
            if drop and impair is None:
                impair = _impair(ns, tag, drop)
                if impair is None:
                    break
            measured = {}
            for backend in args.transports:
                row = _measure(ips, ns, rel, mtu, policy, backend)
                if row is None:
                    break
                measured[backend] = row
                goodput, pps, cpu, user, retx = row
                ratio = measured["python"][2] / cpu if len(measured) == 2 else None
                print(f"{rel:<6} {mtu:>5} {policy:<9} {drop:>5.0%} {backend:<9} {goodput:>9.1f} "
                      f"{pps:>9.0f} {cpu:>11.2f} {user:>12.2f} {retx:>6} "
                      f"{f'{ratio:.1f}x' if ratio else '':>10}", flush=True)
            if len(measured) == 2:
                ratios.append(measured["python"][2] / measured["native"][2])
                user_ratios.append(measured["python"][3] / measured["native"][3])
        if impair is not None:
            impair.close()
        if ratios:
            print(f"native vs python user-space CPU per packet: {_geomean(user_ratios):.1f}x")
            print(f"native vs python CPU per packet: {_geomean(ratios):.1f}x")
    finally:
        for n in ns:
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
