"""The FSDP case of Multicast Allgather (the paper's motivation): an Allgather and a
Reduce-Scatter posted at once on the same 8 ranks compete for the hosts' links. The
Reduce-Scatter (ring) runs alone, then next to a ring Allgather, then next to a multicast
Allgather; its completion time shows what injecting each shard once leaves for it.

Sizes as in FSDP: the Reduce-Scatter reduces S bytes per rank to S/N, the Allgather gathers
N shards of S/N. The two collectives are two rank processes per host (their own rendezvous
port and RoCE UDP port) told to start at the same wall-clock instant.

Each case also reads the bytes on every host link in each direction (switch counters): the
busiest direction at the link rate bounds the case. Multicast halves what a host sends
(its shard once instead of N-1 ring steps) but not what it receives (N-1 shards either way),
so where the receiving direction is the busiest, both Allgathers leave the Reduce-Scatter
the same bound."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import click
from fidelity_watch import column, rerun_unfaithful
from idea_mcast import spread

from figures.text import format_table

AG_PORT, RS_PORT = 18520, 18521
RS_UDP = 4792                   # the Reduce-Scatter's RoCE port: the Allgather keeps 4791


@dataclass
class Case:
    label: str
    rs_cct_s: float
    ag_cct_s: float | None
    exact: bool
    link_bytes: dict[str, int] = field(default_factory=dict)   # directed link -> bytes
    faithful: str = "unmeasured"         # the fidelity verdict of its launches

    def busiest(self, direction: str) -> tuple[str, int]:
        """The busiest host link sending ("up": host>leaf) or receiving ("down": leaf>host)."""
        mine = {k: b for k, b in self.link_bytes.items()
                if k.startswith("h" if direction == "up" else "leaf") and "spine" not in k}
        return max(mine.items(), key=lambda kv: kv[1], default=("-", 0))

    def busiest_s(self, link_mbps: float) -> float:
        """The busiest link's bytes at the link rate. They include the launch's own traffic
        (rendezvous, barrier), which a rank's CCT, timed from its barrier, does not."""
        return max(self.link_bytes.values(), default=0) * 8 / (link_mbps * 1e6)


def _launch(fab, names, run, port, transport_extra=None):
    return fab.ranks.launch(names, [run], transport=transport_extra, port=port)


def experiment(fab, elements: int, spread_ranks: bool = False) -> list[Case]:
    """elements: the Reduce-Scatter's int32 per rank (S/4); the Allgather's shard is 1/N.
    spread_ranks: both jobs' ranks over the racks in turn (idea_mcast.spread)."""
    names = spread(fab.topo) if spread_ranks else [h.name for h in fab.ranks.hosts]
    n = len(names)
    shard = max(1, elements // n)
    rs = {"collective": "reduce-scatter", "algo": "ring", "dtype": "int32",
          "elements": shard * n}
    group = fab.fabricd.ctl_json("group", "create", "demo-fsdp", *names)
    ag = {"ring": {"collective": "allgather", "algo": "ring", "dtype": "int32",
                   "elements": shard},
          "multicast": {"collective": "allgather", "algo": "multicast", "dtype": "int32",
                        "elements": shard, "options": {"group": group["address"],
                                                       "link_mbps": fab.link_mbps}}}
    cases = []

    setup = 0.0

    def both(run):
        # two jobs' ranks start up at once on the same CPUs: twice one job's start-up, plus
        # slack, measured on this machine now (a fixed lead let a busy machine start one job late)
        start = time.time() + 2 * setup + 1.0
        with ThreadPoolExecutor(2) as pool:
            f_rs = pool.submit(_launch, fab, names, rs | {"start_at": start}, RS_PORT,
                               {"dport": RS_UDP})
            f_ag = pool.submit(_launch, fab, names, run | {"start_at": start}, AG_PORT)
            return f_rs.result(), f_ag.result()

    def alone():
        nonlocal setup
        t0 = time.monotonic()
        got = fab.links_carrying(lambda: _launch(fab, names, rs, RS_PORT, {"dport": RS_UDP}),
                                 hosts=True)
        setup = time.monotonic() - t0 - max(r["cct_s"] for r in got[0])
        return got

    try:
        rows, links = rerun_unfaithful(alone, lambda got: got[0], "reduce-scatter alone",
                                       fab.retries)
        cases.append(Case("reduce-scatter alone", max(r["cct_s"] for r in rows), None,
                          all(r["ok"] for r in rows), links, column(rows)))
        for algo, run in ag.items():
            (rs_rows, ag_rows), links = rerun_unfaithful(
                lambda run=run: fab.links_carrying(lambda: both(run), hosts=True),
                lambda got: got[0][0] + got[0][1], f"reduce-scatter + {algo} allgather",
                fab.retries)
            cases.append(Case(f"reduce-scatter + {algo} allgather at once",
                              max(r["cct_s"] for r in rs_rows),
                              max(r["cct_s"] for r in ag_rows),
                              all(r["ok"] for r in rs_rows + ag_rows), links,
                              column(rs_rows + ag_rows)))
    finally:
        fab.fabricd.ctl("group", "delete", "demo-fsdp")
    for c in cases:
        click.echo(f"demo: fsdp {c.label:<45} reduce-scatter {c.rs_cct_s * 1e3:7.1f} ms"
                   + (f", allgather {c.ag_cct_s * 1e3:7.1f} ms" if c.ag_cct_s else ""))
    return cases


def table(cases: list[Case], link_mbps: float) -> str:
    """CCTs, the busiest host link sending and receiving, and the busiest link's bytes at the
    link rate (the counters include the other collective's traffic and the launches' own)."""
    alone = cases[0].rs_cct_s
    head = ["run", "reduce-scatter CCT ms", "vs alone", "allgather CCT ms",
            "busiest host>leaf KB", "busiest leaf>host KB", "bound ms (busiest link)",
            "vs bound", "exact", "faithful"]
    lines = []
    for c in cases:
        up, down = c.busiest("up"), c.busiest("down")
        lines.append([c.label, f"{c.rs_cct_s * 1e3:.1f}", f"{c.rs_cct_s / alone:.2f}x",
                      f"{c.ag_cct_s * 1e3:.1f}" if c.ag_cct_s else "-",
                      f"{up[1] / 1e3:.1f} ({up[0]})", f"{down[1] / 1e3:.1f} ({down[0]})",
                      f"{c.busiest_s(link_mbps) * 1e3:.0f}",
                      f"{c.rs_cct_s / c.busiest_s(link_mbps):.2f}x" if c.busiest_s(link_mbps)
                      else "-", "yes" if c.exact else "NO",
                      c.faithful])
    return format_table(head, lines)
