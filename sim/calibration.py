"""The `make demo` scenario in the simulator, CCT per policy next to the emulation's.

The demo (mininet/demo.py) runs leafspine-2x2 (4 hosts), 512 KiB per rank, links paced at
16 Mbit/s, MTU 1024, a window of 16 packets per QP, selective repeat, 256-packet queues and a
retransmission timeout of twice a full queue's drain time. The simulator runs the same with
no propagation delay (veths have none to speak of) and without DCQCN, whose 55 us timers mean
nothing at 16 Mbit/s. The emulation's numbers come from `out/demo.jsonl` when a demo has run
here, else from the table of the README's demo run.
"""
from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

from fabricmodel.policies import BASELINE
from fabricmodel.policies import names as policy_names
from figures.text import format_table

# (demo collective/algo, simulator collective)
CASES = (("allreduce/ring", "ring"), ("allreduce/halving-doubling", "halving-doubling"),
         ("alltoall/direct", "all-to-all"))
SIZE = 512 * 1024
LINK_MBPS = 16.0
MTU, WINDOW, QUEUE = 1024, 16, 256
RTO_S = max(0.1, 2 * QUEUE * 1100 * 8 / (LINK_MBPS * 1e6))   # mininet/demo_options.py's drain_rto

# README.md, "The demo": CCT median ms of one `make demo` run (3 seeds).
README_CCT_MS = {
    ("allreduce/ring", "ecmp"): 795.5, ("allreduce/ring", "spray"): 896.8,
    ("allreduce/ring", "reps"): 933.0, ("allreduce/ring", "ethereal"): 694.6,
    ("allreduce/halving-doubling", "ecmp"): 941.0,
    ("allreduce/halving-doubling", "spray"): 1237.1,
    ("allreduce/halving-doubling", "reps"): 1082.8,
    ("allreduce/halving-doubling", "ethereal"): 674.5,
    ("alltoall/direct", "ecmp"): 346.3, ("alltoall/direct", "spray"): 572.4,
    ("alltoall/direct", "reps"): 548.0, ("alltoall/direct", "ethereal"): 304.7,
}


def emulation_cct_ms(demo_jsonl: Path | None) -> tuple[dict, str]:
    """Median over seeds of the slowest rank's CCT, per (collective/algo, policy)."""
    if demo_jsonl is None or not demo_jsonl.exists():
        return README_CCT_MS, "README.md's demo table"
    per_run: dict[tuple, float] = defaultdict(float)
    for line in demo_jsonl.read_text().splitlines():
        r = json.loads(line)
        key = (f"{r['collective']}/{r['algo']}", r["policy"], r["seed"], r["run"])
        per_run[key] = max(per_run[key], r["cct_s"])
    out: dict[tuple, list[float]] = defaultdict(list)
    for (coll, policy, _, _), cct in per_run.items():
        out[(coll, policy)].append(cct * 1e3)
    return {k: statistics.median(v) for k, v in out.items()}, str(demo_jsonl)


def ideal_ms(collective: str, n: int = 4) -> float:
    """Bandwidth bound: bytes a rank sends (with 58 header bytes a packet) at the link rate."""
    per_rank = {"ring": 2 * (n - 1) / n, "halving-doubling": 2 * (n - 1) / n,
                "all-to-all": (n - 1) / n}[collective] * SIZE
    wire = per_rank * (MTU + 58) / MTU
    return wire * 8 / (LINK_MBPS * 1e6) * 1e3


def table(sim_rows: list[dict], emu: dict) -> str:
    sim = {(r["collective"], r["policy"]): r["cct_s"] * 1e3 for r in sim_rows if r["ok"]}
    head = ["collective", "policy", "sim CCT ms", "emulation CCT ms", "emulation / sim",
            "bandwidth bound ms", f"sim vs {BASELINE}", f"emulation vs {BASELINE}"]
    lines = []
    for demo_name, coll in CASES:
        for policy in policy_names():
            s, e = sim.get((coll, policy)), emu.get((demo_name, policy))
            se, ee = sim.get((coll, BASELINE)), emu.get((demo_name, BASELINE))
            lines.append([demo_name, policy, f"{s:.1f}" if s else "-",
                          f"{e:.1f}" if e else "-", f"{e / s:.2f}x" if s and e else "-",
                          f"{ideal_ms(coll):.1f}", f"{s / se:.2f}x" if s and se else "-",
                          f"{e / ee:.2f}x" if e and ee else "-"])
    return format_table(head, lines)
