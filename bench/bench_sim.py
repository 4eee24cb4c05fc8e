"""The ns-3 simulator's cost: importing ns-3 and compiling the engine, then the Ethereal table
at 256 hosts (16x16 leaf-spine, 400 Gbps, 500 ns links; all-to-all and halving-doubling at
1 MiB per rank; hash ECMP, spraying, REPS and Ethereal; with and without a failed link),
exactly what `python -m sim ethereal --hosts 256` runs. Prints wall time and simulated
events per second per run, and the whole table's wall time.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from figures.text import format_table
from sim.cli import fabric, failed_links, run_cases
from sim.fabric import LinkSpec, Transport

PROBES = {
    "the wheel's `from ns import ns` (every ns-3 module)": "from ns import ns",
    "sim.fabric.ns3() (3 modules + compiling engine.cpp)": "from sim.fabric import ns3; ns3()",
}


def import_seconds(code: str) -> float:
    """Seconds `code` takes in a fresh interpreter."""
    probe = f"import time\nt = time.perf_counter()\n{code}\nprint(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parent.parent)
    return float(out.stdout.split()[-1])


def main() -> None:
    cost = {what: import_seconds(code) for what, code in PROBES.items()}
    wheel, ours = cost.values()
    for what, seconds in cost.items():
        print(f"import {what}: {seconds:.1f} s")
    print(f"the simulator's loader is {wheel / ours:.1f}x faster than the wheel's import\n")

    topo = fabric(None, 256, None)
    cases = [(a, 1 << 20, failed_links(topo, k), p, 0)
             for a in ("all-to-all", "halving-doubling") for k in (0, 1)
             for p in ("ecmp", "spray", "reps", "ethereal")]
    wall = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        rows = run_cases(topo, cases, LinkSpec(400, 500), Transport(), Path(tmp) / "b.jsonl",
                         workers=0).rows
    wall = time.perf_counter() - wall
    head = ["collective", "failed", "policy", "sim CCT us", "events", "run wall s",
            "events/s", "python share"]
    lines = [[r["collective"], ",".join(r["failed_links"]) or "-", r["policy"],
              f"{r['cct_s'] * 1e6:.1f}" if r["ok"] else "unfinished", f"{r['events']:,}",
              f"{r['wall_s']:.1f}", f"{r['events_per_s']:,.0f}",
              f"{r['python_s'] / r['wall_s']:.0%}"] for r in rows]
    print(format_table(head, lines))
    events = sum(r["events"] for r in rows)
    run_wall = sum(r["wall_s"] for r in rows)
    print(f"\nthe 256-host Ethereal table: {len(rows)} runs, {wall:.0f} s wall in all "
          f"({run_wall:.0f} s simulating, {wall - run_wall:.0f} s building fabrics), "
          f"{events:,} events, {events / run_wall:,.0f} events/s while simulating")
    if not all(r["ok"] for r in rows):
        sys.exit("some runs did not finish")


if __name__ == "__main__":
    main()
