"""The simulator's cost: the commands as a user types them, the sweeps, CPU per packet.

1. `python -m sim ethereal --hosts 256 --collectives all-to-all --sizes 1MiB --failures 0
   --policies ecmp,ethereal` as typed (a new process: it loads the engine's cached build,
   simulates 2 runs, writes the table and plot), twice after one untimed run that may build;
2. `python -m sim ethereal --hosts 256` as typed: the 16-run Ethereal table (all-to-all and
   halving-doubling at 1 MiB per rank; hash ECMP, spraying, REPS and Ethereal; with and
   without a failed link), with the per-run events and wall times;
3. the same table at 1,024 hosts in one process and on a local Dask cluster of 2 workers;
4. the CPU time per simulated data packet of the 128-host all-to-all of 1 MiB per flow under
   hash ECMP
   (process CPU over the run, ACKs and retransmissions included in the work, divided by the
   data packets sent), beside htsim's when `--htsim-us-per-packet` gives it (docs/simulator.md
   measures it the same way).
5. `python -m sim train` as typed (GPT-3 13B, 256 GPUs on DGX A100 hosts, one policy) at
   its default segment, and again at a quarter of it: the wall time and the segment size's
   effect on the simulated iteration.
`--quick` runs 16 and 64 hosts (and 64 GPUs) instead (a smoke test of the bench itself).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fabricmodel.policies import names as policy_names
from fabricmodel.topology import leaf_spine
from figures.text import format_table
from sim.cli import fabric, failed_links, run_cases
from sim.collective import Run
from sim.fabric import LinkSpec, Transport

ROOT = Path(__file__).resolve().parent.parent
A2A = ["--collectives", "all-to-all", "--sizes", "1MiB", "--failures", "0",
       "--policies", "ecmp,ethereal"]


def cases_of(topo) -> list[tuple]:
    return [(a, 1 << 20, failed_links(topo, k), p, 0) for a in ("all-to-all", "halving-doubling")
            for k in (0, 1) for p in policy_names()]


def as_typed(argv: list[str]) -> float:
    """Wall seconds of `python -m sim ARGV` in a new process."""
    with tempfile.TemporaryDirectory() as tmp:
        wall = time.perf_counter()
        subprocess.run([sys.executable, "-m", "sim", *argv, "--out", tmp], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - wall


def gpt_iteration(gpus: int, segment: str | None = None) -> tuple[float, dict]:
    """`python -m sim train --gpus N` as typed: wall seconds and its row."""
    extra = ["--segment", segment] if segment else []
    with tempfile.TemporaryDirectory() as tmp:
        wall = time.perf_counter()
        subprocess.run([sys.executable, "-m", "sim", "train", "--gpus", str(gpus), *extra,
                        "--out", tmp], cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - wall
        row = json.loads((Path(tmp) / "train-gpt3-13b-3d.jsonl").read_text().splitlines()[0])
    return wall, row


def table(topo, workers: int) -> tuple[float, list[dict]]:
    wall = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        outcome = run_cases(topo, cases_of(topo), LinkSpec(400, 500), Transport(),
                            Path(tmp) / "b.jsonl", workers=workers)
    if outcome.failures:
        sys.exit(f"{len(outcome.failures)} runs failed")
    return time.perf_counter() - wall, outcome.rows


def per_run(rows: list[dict]) -> str:
    head = ["collective", "failed", "policy", "sim CCT us", "events", "events/packet",
            "run wall s", "events/s"]
    lines = [[r["collective"], ",".join(r["failed_links"]) or "-", r["policy"],
              f"{r['cct_s'] * 1e6:.1f}" if r["ok"] else "unfinished", f"{r['events']:,}",
              f"{r['events'] / max(r['packets'], 1):.1f}", f"{r['wall_s']:.2f}",
              f"{r['events_per_s']:,.0f}"] for r in rows]
    return format_table(head, lines)


def cpu_per_packet(hosts: int) -> tuple[float, dict]:
    """Microseconds of process CPU per data packet sent, the all-to-all of 1 MiB per flow
    under ECMP (htsim's figure is for the same flows), on a leaf-spine of 8 hosts per leaf and
    8 spines (htsim's 16x8 at 128 hosts)."""
    topo = leaf_spine(hosts // 8, 8, 8)
    run = Run(topo, "all-to-all", (hosts - 1) << 20, "ecmp", link=LinkSpec(400, 500))
    cpu = time.process_time()
    row = run.run()
    return (time.process_time() - cpu) * 1e6 / row["packets"], row


def train_iterations(gpus: int) -> None:
    wall, row = gpt_iteration(gpus)
    seg = row["segment"]
    print(f"GPT-3 13B, {gpus} GPUs, one policy: {wall:.1f} s wall (iteration "
          f"{row['iteration_s'] * 1e3:.1f} ms at {seg // 1024} KiB segments, "
          f"{row['events']:,} events; target at most 60 s)")
    fine_wall, fine = gpt_iteration(gpus, f"{seg // 4 // 1024}KiB")
    print(f"  at {seg // 4 // 1024} KiB segments: iteration {fine['iteration_s'] * 1e3:.1f} ms "
          f"({row['iteration_s'] / fine['iteration_s'] - 1:+.2%} from it), {fine_wall:.1f} s "
          f"wall")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="16 and 64 hosts instead")
    ap.add_argument("--no-1024", action="store_true", help="skip the 1,024-host tables")
    ap.add_argument("--no-train", action="store_true", help="skip the GPT-3 iterations")
    ap.add_argument("--htsim-us-per-packet", type=float,
                    help="htsim's CPU microseconds per data packet on the same all-to-all")
    args = ap.parse_args()
    hosts, big, small = (16, 64, 16) if args.quick else (256, 1024, 128)

    as_typed(["ethereal", "--hosts", str(hosts), *A2A])          # may build the engine
    walls = [as_typed(["ethereal", "--hosts", str(hosts), *A2A]) for _ in range(2)]
    print(f"command as typed ({hosts}-host a2a, 2 runs): {max(walls):.2f} s wall "
          f"(each: {', '.join(f'{w:.2f}' for w in walls)}; target at most 3 s at 256 hosts)")
    typed_table = as_typed(["ethereal", "--hosts", str(hosts)])
    print(f"command as typed ({hosts}-host table, 16 runs): {typed_table:.1f} s wall "
          f"(target at most 10 s at 256 hosts)")

    summary = []
    wall, rows = table(fabric(None, hosts, None), 0)
    summary.append((f"{hosts} hosts, 1 process", wall, rows))
    print(per_run(rows))
    if not args.no_1024:
        for workers in (0, 2):
            wall_b, rows_b = table(fabric(None, big, None), workers)
            summary.append((f"{big} hosts, " + ("1 process" if workers == 0 else
                                                f"Dask {workers} workers"), wall_b, rows_b))
    head = ["table (16 runs)", "wall s", "simulating s", "events", "events/s simulating",
            "events/data packet"]
    lines = []
    for what, w, rs in summary:
        sim_s = sum(r["wall_s"] for r in rs)
        events = sum(r["events"] for r in rs)
        lines.append([what, f"{w:.1f}", f"{sim_s:.1f}", f"{events:,}", f"{events / sim_s:,.0f}",
                      f"{events / sum(r['packets'] for r in rs):.1f}"])
    print("\n" + format_table(head, lines))
    if not args.no_1024:
        one, two = summary[1][1], summary[2][1]
        print(f"the {big}-host table: Dask on 2 workers {two:.0f} s, one process {one:.0f} s "
              f"({one / two:.2f}x; target at least 1.00x)")

    if not args.no_train:
        train_iterations(64 if args.quick else 256)

    us, row = cpu_per_packet(small)
    line = (f"CPU per simulated data packet ({small}-host all-to-all, 1 MiB per flow, ecmp): "
            f"{us:.3f} us "
            f"({row['packets']:,} data packets, {row['events'] / row['packets']:.1f} events each)")
    if args.htsim_us_per_packet:
        line += (f"; htsim {args.htsim_us_per_packet:.3f} us: "
                 f"{args.htsim_us_per_packet / us:.1f}x less here (target at least 5x)")
    print(line)


if __name__ == "__main__":
    main()
