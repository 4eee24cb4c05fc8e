"""Reliability under hostile or unlucky input, one table: each row is one check, how much of
it ran, what it measured and how many failures it saw (crashes, divergences, lost or
duplicated entries, inexact results); the run exits 1 when any row has a failure.

Sections (each a function returning rows; `--only NAME` runs some of them):
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


SECTIONS: dict[str, Callable[[argparse.Namespace], list[Row]]] = {
    "bad_packets": bad_packets,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=sorted(SECTIONS), help="sections to run")
    ap.add_argument("--bad-packets", type=int, default=20_000,
                    help="malformed packets sent to the ranks")
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
