"""The ns-3 simulator's cost, today's engine beside the one it replaced, in one run.

The Ethereal table (all-to-all and halving-doubling at 1 MiB per rank; hash ECMP, spraying,
REPS and Ethereal; with and without a failed link: 16 runs), exactly what
`python -m sim ethereal --hosts N` runs:
1. at 256 hosts on the old engine (ns-3 PointToPoint devices and simulator, main ab86126,
   extracted with `git archive` and run in a subprocess, one run after another);
2. the same 16 runs on today's engine in this process, one after another (events/s, events
   per data packet, wall per run; their simulated results are equal to 1.'s);
3. the same on a local Dask cluster of 1 and of 2 workers (the speed-up of the second core);
4. the 1,024-host table on 2 workers.
`--quick` runs a 16-host table instead (a smoke test of the bench itself); `--no-old` and
`--no-1024` skip parts 1 and 4.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from figures.text import format_table
from sim.cli import fabric, failed_links, run_cases
from sim.fabric import LinkSpec, Transport

ROOT = Path(__file__).resolve().parent.parent
OLD_ENGINE = "ab86126"       # the last commit whose engine ran on ns-3's devices and simulator
SIMULATED = ("cct_s", "retransmitted", "timeouts", "max_queue_kb", "packets", "ok")
OLD_TABLE = """
import json, sys, tempfile, time
from pathlib import Path
from sim.cli import fabric, failed_links, run_cases
from sim.fabric import LinkSpec, Transport, ns3
ns3()
topo = fabric(None, {hosts}, None)
cases = [(a, 1 << 20, failed_links(topo, k), p, 0) for a in ("all-to-all", "halving-doubling")
         for k in (0, 1) for p in ("ecmp", "spray", "reps", "ethereal")]
wall = time.perf_counter()
with tempfile.TemporaryDirectory() as tmp:
    rows = run_cases(topo, cases, LinkSpec(400, 500), Transport(), Path(tmp) / "b.jsonl")
print(json.dumps({{"wall": time.perf_counter() - wall, "rows": rows}}))
"""


def cases_of(topo) -> list[tuple]:
    return [(a, 1 << 20, failed_links(topo, k), p, 0) for a in ("all-to-all", "halving-doubling")
            for k in (0, 1) for p in ("ecmp", "spray", "reps", "ethereal")]


def old_table(hosts: int) -> tuple[float, list[dict]]:
    """The table on the old engine: its source from git, run with this environment's ns-3."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", OLD_ENGINE],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        out = subprocess.run([sys.executable, "-c", OLD_TABLE.format(hosts=hosts)], cwd=tmp,
                             env={**os.environ, "PYTHONPATH": tmp},
                             capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return got["wall"], got["rows"]


def new_table(topo, workers: int) -> tuple[float, list[dict]]:
    wall = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        outcome = run_cases(topo, cases_of(topo), LinkSpec(400, 500), Transport(),
                            Path(tmp) / "b.jsonl", workers=workers)
    if outcome.failures:
        sys.exit(f"{len(outcome.failures)} runs failed")
    return time.perf_counter() - wall, outcome.rows


def per_run(rows: list[dict], old: list[dict] | None) -> str:
    head = ["collective", "failed", "policy", "sim CCT us", "events", "events/packet",
            "run wall s", "events/s"] + (["old run wall s", "old events/s", "speed-up"] if old
                                         else [])
    lines = []
    for k, r in enumerate(rows):
        line = [r["collective"], ",".join(r["failed_links"]) or "-", r["policy"],
                f"{r['cct_s'] * 1e6:.1f}" if r["ok"] else "unfinished", f"{r['events']:,}",
                f"{r['events'] / max(r['packets'], 1):.1f}", f"{r['wall_s']:.2f}",
                f"{r['events_per_s']:,.0f}"]
        if old:
            o = old[k]
            line += [f"{o['wall_s']:.2f}", f"{o['events_per_s']:,.0f}",
                     f"{o['wall_s'] / r['wall_s']:.1f}x"]
        lines.append(line)
    return format_table(head, lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="16 hosts instead of 256 and 1,024")
    ap.add_argument("--no-old", action="store_true", help="skip the old engine's table")
    ap.add_argument("--no-1024", action="store_true", help="skip the 1,024-host table")
    args = ap.parse_args()
    hosts, big = (16, 64) if args.quick else (256, 1024)
    topo = fabric(None, hosts, None)
    summary = []
    old_rows = None
    if not args.no_old:
        old_wall, old_rows = old_table(hosts)
        summary.append((f"{hosts} hosts, old engine, 1 process", old_wall, old_rows))
    wall, rows = new_table(topo, 0)
    summary.append((f"{hosts} hosts, this engine, 1 process", wall, rows))
    if old_rows:
        same = all(tuple(o[f] for f in SIMULATED) == tuple(r[f] for f in SIMULATED)
                   for o, r in zip(old_rows, rows, strict=True))
        print(f"simulated results of the old and this engine equal: {same}")
    print(per_run(rows, old_rows))
    for workers in (1, 2):
        wall_w, rows_w = new_table(topo, workers)
        summary.append((f"{hosts} hosts, this engine, Dask {workers} worker(s)", wall_w, rows_w))
    if not args.no_1024:
        wall_b, rows_b = new_table(fabric(None, big, None), 2)
        summary.append((f"{big} hosts, this engine, Dask 2 workers", wall_b, rows_b))
    head = ["table (16 runs)", "wall s", "simulating s", "events", "events/s simulating",
            "events/data packet"]
    lines = []
    for what, w, rs in summary:
        sim_s = sum(r["wall_s"] for r in rs)
        events = sum(r["events"] for r in rs)
        lines.append([what, f"{w:.1f}", f"{sim_s:.1f}", f"{events:,}", f"{events / sim_s:,.0f}",
                      f"{events / sum(r['packets'] for r in rs):.1f}"])
    print("\n" + format_table(head, lines))
    walls = {what: w for what, w, _ in summary}
    new1 = walls[f"{hosts} hosts, this engine, 1 process"]
    if old_rows:
        print(f"\nthis engine is {walls[summary[0][0]] / new1:.1f}x faster than the old one "
              f"on the {hosts}-host table (wall, one process each; target at least 5x, aim 10x)")
    d1 = walls[f"{hosts} hosts, this engine, Dask 1 worker(s)"]
    d2 = walls[f"{hosts} hosts, this engine, Dask 2 worker(s)"]
    print(f"2 Dask workers over 1: {d1 / d2:.2f}x")
    if not args.no_1024:
        target = "" if args.quick else " (target under 300 s, aim 120 s)"
        print(f"the {big}-host table on 2 Dask workers: {wall_b:.0f} s wall{target}")
    a2a = [r["wall_s"] for r in rows if r["collective"] == "all-to-all" and not r["failed_links"]
           and r["policy"] in ("ecmp", "ethereal")]
    print(f"all-to-all, no failure, ecmp + ethereal: {sum(a2a):.2f} s of simulating (wall_s; "
          f"target at most 2 s at 256 hosts)")


if __name__ == "__main__":
    main()
