"""Reliability under hostile or unlucky input, one table: each row is one check, how much of
it ran, what it measured and how many failures it saw (crashes, divergences, lost or
duplicated entries, inexact results); the run exits 1 when any row has a failure.

Sections (each a function returning rows; `--only NAME` runs some of them):
  fuzz          fabric.p4 configured as the demo configures it (tests/p4switch/fabric_fuzz.py:
                routes, ECMP hashed and sprayed, pins, a slice, a lossy multicast group,
                SwitchML and NetReduce jobs) on a leaf, a spine and a spraying leaf; frames
                made from valid packets of every kind, kept, truncated or mutated, through the
                Python and the native backend frame by frame: per backend, frames, crashes,
                divergences from the Python backend (outputs, then counters and registers),
                the process's memory growth after a fifth of the frames
  bad_packets   truncated, mutated and re-signed RoCEv2 / 0xC0 / 0xC1 packets sent to 4
                namespaced ranks during ring, halving-doubling, multicast Allgather and
                all-to-all (tests/collectives/malformed.py): packets sent, counted by the
                ranks (bad_packets + icrc_errors), ranks that died, results exact (root)
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "collectives"))
sys.path.insert(0, str(ROOT / "tests" / "p4switch"))

from tabulate import tabulate  # noqa: E402

from collectives.launch import LaunchError, launch  # noqa: E402


@dataclass
class Row:
    check: str          # what ran
    amount: str         # how much of it
    result: str         # what it measured
    failures: int       # crashes, divergences, lost/duplicated entries, inexact results


def bad_packets(args) -> list[Row]:
    """Malformed packets to the ranks of running collectives (needs root)."""
    if os.geteuid() != 0:
        return [Row("bad packets to ranks", "skipped", "needs root for namespaces", 0)]
    from conftest import make_bridge_net  # noqa: PLC0415  (tests/collectives, needs pytest)

    from tests.conftest import NetnsFactory  # noqa: PLC0415

    factory = NetnsFactory()
    try:
        net = make_bridge_net(factory, 4)
        count, rate = args.bad_packets, 4000
        algos = [("allreduce", "ring"), ("allreduce", "halving-doubling"),
                 ("allgather", "multicast"), ("alltoall", "direct")]
        # a first all-reduce, then enough collectives to outlast the stream, which runs from
        # the end of the first to the end of the last
        repeats = max(1, round(count / rate / 1.5))
        plan = [{"collective": "allreduce", "algo": "ring", "dtype": "int32",
                 "elements": 1000}] + \
            [{"collective": c, "algo": a, "dtype": "int32", "elements": 250_001}
             for _ in range(repeats) for c, a in algos]
        with tempfile.TemporaryDirectory(prefix="bench-rel-") as tmp:
            spec = Path(tmp) / "inject.json"
            spec.write_text(json.dumps({"seed": 11, "ranks": net.ips, "count": count,
                                        "rate": rate, "via": net.bridge_ip,
                                        "start_when": f"{tmp}/run0_rank0.npy",
                                        "stop_when": f"{tmp}/run{len(plan) - 1}_rank0.npy"}))
            injector = []

            def during():
                injector.append(subprocess.Popen(
                    ["ip", "netns", "exec", net.bridge_ns, sys.executable,
                     str(ROOT / "tests" / "collectives" / "malformed.py"), str(spec)],
                    stdout=subprocess.PIPE, text=True))

            t0 = time.monotonic()
            try:
                rows = launch(net.ips, plan, namespaces=net.namespaces, timeout=600,
                              during=during, out_dir=tmp)
                died = 0
            except LaunchError as err:
                print(f"bad_packets: {err}", file=sys.stderr)
                rows, died = [], 1
            out, _ = injector[0].communicate(timeout=600)
            elapsed = time.monotonic() - t0
        sent = int(out or 0)
        counted = sum(r["bad_packets"] + r["icrc_errors"] for r in rows)
        inexact = sum(not r["ok"] for r in rows)
        return [Row("bad packets to ranks",
                    f"{sent:,} packets to 4 ranks, {len(plan)} collectives, {elapsed:.0f} s",
                    f"{counted:,} counted, {died} crashed, "
                    f"{len(rows) - inexact}/{len(rows)} results exact", died + inexact)]
    finally:
        factory.cleanup()


def fuzz(args) -> list[Row]:
    """fabric.p4 configured, fuzzed on both p4switch backends."""
    import fabric_fuzz  # noqa: PLC0415  (tests/p4switch)

    import p4switch  # noqa: PLC0415
    from p4switch.native import available  # noqa: PLC0415

    backends = ("python", "native") if available() else ("python",)
    compiled = p4switch.compile_program(str(fabric_fuzz.FABRIC_P4))
    per = -(-args.fuzz_frames // len(fabric_fuzz.SWITCHES))
    reports = []
    for mode, name in fabric_fuzz.SWITCHES:
        reports.append(fabric_fuzz.fuzz(compiled, mode, name, per, seed=args.seed,
                                        backends=backends))
        r = reports[-1]
        if r.first_divergence:
            kind, port, frame, outs = r.first_divergence
            print(f"fuzz: {r.switch}: first divergence: {kind} frame on port {port}: {frame}\n"
                  f"      outputs: {outs}", file=sys.stderr)
    frames = sum(r.frames for r in reports)
    rows = []
    for b in backends:
        crashes = sum(r.crashes[b] for r in reports)
        divergences = sum(r.divergences for r in reports) if b != backends[0] else 0
        unequal = sum(not r.state_equal for r in reports) if b != backends[0] else 0
        seconds = sum(r.seconds[b] for r in reports)
        growth = max(r.rss_growth_kib[b] for r in reports)
        rows.append(Row(f"fuzz configured fabric.p4 ({b})",
                        f"{frames:,} frames on {len(reports)} switches",
                        f"{crashes} crashed, {divergences} diverged, "
                        f"{unequal} with other counters/registers, RSS +{growth:,} KiB, "
                        f"{frames / seconds:,.0f} frames/s", crashes + divergences + unequal))
    if len(backends) == 1:
        rows.append(Row("fuzz configured fabric.p4 (native)", "skipped",
                        "no C compiler for the native backend", 0))
    return rows


SECTIONS: dict[str, Callable[[argparse.Namespace], list[Row]]] = {
    "fuzz": fuzz,
    "bad_packets": bad_packets,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=sorted(SECTIONS), help="sections to run")
    ap.add_argument("--bad-packets", type=int, default=20_000,
                    help="malformed packets sent to the ranks")
    ap.add_argument("--fuzz-frames", type=int, default=100_000,
                    help="frames through each backend of the configured fabric.p4")
    ap.add_argument("--seed", type=int, default=1, help="the fuzz frames' seed")
    args = ap.parse_args(argv)
    rows: list[Row] = []
    for name, section in SECTIONS.items():
        if args.only and name not in args.only:
            continue
        print(f"bench_reliability: {name} ...", flush=True)
        rows += section(args)
    print(tabulate([(r.check, r.amount, r.result, r.failures, "yes" if r.failures == 0 else "NO")
                    for r in rows], headers=["check", "amount", "result", "failures", "ok"],
                   tablefmt="simple", disable_numparse=True))
    return 1 if any(r.failures for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
