"""The engine on an htsim connection matrix: the same flows htsim runs (`-tm FILE`), on the
same fabric, so that docs/simulator.md can put both side by side.

A connection matrix is text: `Nodes N`, `Connections C`, then one line per flow,
`SRC->DST [id I] start T size BYTES` (T in picoseconds; here every flow starts at 0, as
htsim's generators write it). Host i is the engine's rank i (hosts numbered leaf by leaf in
both). Prints one line of JSON: CCT (the last flow's end), mean FCT, data packets, events, the
process CPU of the run, the aggregation-to-core links that carried nothing, and the busiest
directed link's data in flows' worth (a permutation's CCT under hash ECMP is about that many
flows' time at line rate). `--seed K` draws the QPs' source ports anew (a NIC picks them at
random), so the hash puts the same flows on other paths: the engine's counterpart of htsim's
`-seed`, which redraws its switches' hash salts.

    python bench/compare_htsim.py --fabric fattree-8 --cm perm.cm --policy spray
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

from fabricmodel import hashing
from fabricmodel.topology import Topology, fat_tree, leaf_spine
from sim.fabric import MODES, LinkSpec, SimFabric, Transport

FABRICS = {"leafspine-16x8": lambda: leaf_spine(16, 8, 8),
           "leafspine-32x32": lambda: leaf_spine(32, 32, 32),
           "fattree-8": lambda: fat_tree(8)}
FLOW = re.compile(r"^(\d+)->(\d+)(?:\s+id\s+\d+)?\s+start\s+(\d+)\s+size\s+(\d+)")


def read_cm(path: Path) -> list[tuple[int, int, int]]:
    """(src, dst, bytes) per flow; a line that is neither a header nor a flow is an error."""
    flows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(("Nodes", "Connections", "Triggers", "Failures")):
            continue
        m = FLOW.match(line)
        if not m:
            raise ValueError(f"{path}:{n}: not a flow line: {line!r}")
        src, dst, start, size = map(int, m.groups())
        if start != 0:
            raise ValueError(f"{path}:{n}: flows start at 0 here (got {start} ps)")
        flows.append((src, dst, size))
    return flows


def core_links_idle(fab: SimFabric, topo: Topology) -> tuple[int, int]:
    """(idle, all) directed aggregation-to-core links; (0, 0) on a two-tier fabric."""
    ups = [(lk.a, lk.a_port) for lk in topo.links if lk.a.startswith("agg") and
           lk.b.startswith("core")] + [(lk.b, lk.b_port) for lk in topo.links
                                       if lk.b.startswith("agg") and lk.a.startswith("core")]
    return sum(1 for node, port in ups if fab.port_bytes(node, port) == 0), len(ups)


def run(topo: Topology, flows, policy: str, transport: Transport, link: LinkSpec,
        seed: int = 0) -> dict:
    fab = SimFabric(topo, link, transport)
    e = fab.engine
    job = e.add_job()
    n = len(topo.hosts)
    expect = [0] * n
    for _, dst, size in flows:
        expect[dst] += size
    for r in range(n):
        e.add_step(job, r, expect[r])
    qps = []
    for i, (src, dst, size) in enumerate(flows):
        key = (fab.names[src], fab.names[dst], i) + ((seed,) if seed else ())
        sport = hashing.connection_sport(*key)
        qps.append(e.add_qp(job, src, dst, 0, size, transport.mtu, sport, MODES[policy]))
    cpu, wall = time.process_time(), time.perf_counter()
    for r in range(n):
        e.start_rank(job, r)
    fab.run()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    ends = [e.qp_finished(q) for q in qps]
    idle, core = core_links_idle(fab, topo)
    busiest = max(fab.fabric_loads().values()) / (sum(size for *_, size in flows) / len(flows))
    return {"fabric": topo.name, "hosts": n, "flows": len(flows), "policy": policy, "seed": seed,
            "receiver": transport.receiver_of(policy), "pfc": transport.pfc,
            "host_window": transport.host_window,
            "dcqcn": transport.cc, "done": all(t >= 0 for t in ends),
            "cct_us": max(ends) * 1e6, "mean_fct_us": sum(ends) / len(ends) * 1e6,
            "packets": e.packets_sent, "events": e.events(), "cpu_s": cpu, "wall_s": wall,
            "cpu_us_per_packet": cpu * 1e6 / max(e.packets_sent, 1),
            "retransmitted": e.retransmitted, "timeouts": e.timeouts, "dropped": e.dropped,
            "pfc_pauses": e.pauses, "max_queue_kb": e.max_queue_bytes / 1e3,
            "core_links_idle": idle, "core_links": core, "busiest_link_flows": busiest}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fabric", choices=FABRICS, required=True)
    ap.add_argument("--cm", type=Path, required=True, help="an htsim connection matrix")
    ap.add_argument("--policy", choices=("ecmp", "spray"), required=True)
    ap.add_argument("--seed", type=int, default=0,
                    help="draw the source ports anew (0: the connection's own port)")
    ap.add_argument("--gbps", type=float, default=400.0)
    ap.add_argument("--delay-ns", type=float, default=500.0)
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--rto-us", type=float, default=100.0)
    ap.add_argument("--host-window", type=int, default=0,
                    help="data packets in flight per NIC over all its QPs (0: no cap)")
    ap.add_argument("--receiver", choices=("auto", "gbn", "sr"), default="auto")
    ap.add_argument("--pfc", action=argparse.BooleanOptionalAction, default=False,
                    help="PFC (off: deep queues, as htsim's EQDS runs)")
    ap.add_argument("--dcqcn", action=argparse.BooleanOptionalAction, default=False)
    ap.add_argument("--pfc-thresholds", type=int, nargs=2, metavar=("XON", "XOFF"),
                    help="static PFC thresholds per ingress in packets (htsim_roce's "
                         "-pfc_thresholds low high)")
    a = ap.parse_args()
    try:
        flows = read_cm(a.cm)
    except (OSError, ValueError) as err:
        sys.exit(f"compare_htsim: {err}")
    topo = FABRICS[a.fabric]()
    if max(max(s, d) for s, d, _ in flows) >= len(topo.hosts):
        sys.exit(f"compare_htsim: {a.cm} names hosts beyond {a.fabric}'s {len(topo.hosts)}")
    xon, xoff = a.pfc_thresholds or (0, 0)
    transport = Transport(window=a.window, host_window=a.host_window, receiver=a.receiver,
                          rto_s=a.rto_us * 1e-6,
                          pfc=a.pfc, cc=a.dcqcn, pfc_xoff_packets=xoff,
                          pfc_xon_packets=xoff - xon if a.pfc_thresholds else 2)
    row = run(topo, flows, a.policy, transport, LinkSpec(a.gbps, a.delay_ns), a.seed)
    print(json.dumps(row))


if __name__ == "__main__":
    main()
