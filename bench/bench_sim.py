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

from collectives.results import format_table
from sim.cli import fabric, failed_links, run_cases
from sim.fabric import LinkSpec, Transport

IMPORT_PROBE = """
import time
t0 = time.perf_counter()
from ns import ns
t1 = time.perf_counter()
from sim.fabric import ns3
ns3()
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def import_cost() -> tuple[float, float]:
    """Seconds to import the ns3 wheel and to compile engine.cpp, in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-c", IMPORT_PROBE], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parent.parent)
    first, second = map(float, out.stdout.split()[-2:])
    return first, second


def main() -> None:
    imp, compile_s = import_cost()
    print(f"import ns3 (cppyy, every ns-3 module): {imp:.1f} s; compile sim/engine.cpp: "
          f"{compile_s:.1f} s (fresh interpreter)")

    topo = fabric(None, 256, None)
    cases = [(a, 1 << 20, failed_links(topo, k), p, 0)
             for a in ("all-to-all", "halving-doubling") for k in (0, 1)
             for p in ("ecmp", "spray", "reps", "ethereal")]
    wall = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        rows = run_cases(topo, cases, LinkSpec(400, 500), Transport(), Path(tmp) / "b.jsonl")
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
