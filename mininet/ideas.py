"""The demo's second part (run by part2.py on its own fabric): the ranks, NetReduce set up
through fabricctl next to its baselines, and the ideas table. Multicast Allgather and vClos
are in idea_mcast.py and idea_vclos.py."""
from __future__ import annotations

from dataclasses import dataclass

import click
from fidelity_watch import column, watched

from collectives import switchml as sml
from collectives.launch import launch
from figures.text import format_table


class Ranks:
    """The hosts of the fabric in rank order and their named namespaces."""

    def __init__(self, topo, namespaces: list[str], transport: dict, monitor=None):
        self.hosts = sorted(topo.hosts.values(), key=lambda h: h.rank)
        self.ns = dict(zip((h.name for h in self.hosts), namespaces, strict=True))
        self.ip = {h.name: h.ip for h in self.hosts}
        self.transport = transport
        self.monitor = monitor          # fidelity_watch.FabricMonitor: every row's verdict

    def launch(self, names: list[str], run: dict | list[dict], transport: dict | None = None,
               **kwargs) -> list[dict]:
        """One run, or several in one launch, on the ranks `names` (rank order), each row with
        the launch's fidelity verdict; `transport` adds to the ranks' transport options,
        kwargs go to collectives.launch."""
        runs = [run] if isinstance(run, dict) else run
        return watched(self.monitor, launch, [self.ip[n] for n in names], runs,
                       namespaces=[self.ns[n] for n in names],
                       transport=self.transport | (transport or {}), timeout=600,
                       step_timeout=120, **kwargs)

    def run(self, names: list[str], collective: str, algo: str, elements: int,
            options: dict | None = None) -> list[dict]:
        return self.launch(names, {"collective": collective, "algo": algo, "dtype": "int32",
                                   "elements": elements, "options": options or {}})


def summary(idea: str, what: str, rows: list[dict]) -> list[str]:
    per_rank = sum(r["bytes_injected"] for r in rows) / len(rows)
    return [idea, what, str(len(rows)), f"{max(r['cct_s'] for r in rows) * 1e3:.1f}",
            f"{per_rank / 1e6:.3f}", "yes" if all(r["ok"] for r in rows) else "NO", column(rows)]


def fabric_link_bytes(fabricd, topo) -> dict[str, int]:
    """Bytes sent so far on every switch-to-switch link, both directions, from the
    switches' port_tx counters (fabricctl counters)."""
    tx = {}
    for sw in topo.switches:
        for p in fabricd.ctl_json("counters", sw)["ports"]:
            tx[sw, p["port"]] = int(p["tx_bytes"])
    return {lk.name: tx.get((lk.a, lk.a_port), 0) + tx.get((lk.b, lk.b_port), 0)
            for lk in topo.links if lk.a not in topo.hosts}


@dataclass
class FabricRun:
    """One NetReduce-part run's bytes on the fabric (switch-to-switch) links."""
    what: str
    ranks: int
    link_bytes: dict[str, int]          # link name -> bytes, both directions

    @property
    def total(self) -> int:
        return sum(self.link_bytes.values())


def bound(n: int) -> float:
    """NetReduce's fabric bytes over ring all-reduce's at N workers, 2 per leaf: each leaf
    sends its partial sum up once and gets the result down once (2 vectors per leaf), where
    ring's N/2 cross-leaf hops each carry 2(N-1)/N of a vector over 2 links."""
    return n / (2 * (n - 1))


def netreduce(fabricd, ranks: Ranks, elements: int, link_bytes=None, full: bool = True,
              link_mbps: float | None = None, directed_bytes=None):
    """Ring all-reduce, the SwitchML baseline, and NetReduce on one leaf and across the
    leaves (each leaf, then a spine), set up through fabricctl; full=False: only ring and
    NetReduce across the leaves. Returns the idea rows and, with `link_bytes` (a callable:
    link name -> bytes so far), a FabricRun per run (the ring baseline first).
    SwitchML (full=True) sizes its pool and timer for `link_mbps`; with `directed_bytes`
    (a callable: directed link -> bytes so far, part2.Fabric.link_bytes) it prints its
    busiest link's bound."""
    names = [h.name for h in ranks.hosts]
    first_leaf = [h.name for h in ranks.hosts if h.leaf == ranks.hosts[0].leaf]
    rows, runs = [], []

    def measured(what: str, run) -> None:
        before = link_bytes() if link_bytes else {}
        got = run()
        rows.append(summary("NetReduce", what, got))
        if link_bytes:
            after = link_bytes()
            run = FabricRun(what, len(got), {k: after[k] - before[k] for k in after})
            runs.append(run)
            ring = runs[0]
            click.echo(f"demo: {what}: {run.total / 1e6:.3f} MB on the fabric links" + (
                f", {run.total / ring.total:.3f}x ring's" if run is not ring and ring.total
                and run.ranks == ring.ranks else ""))

    measured("allreduce ring (baseline)",
             lambda: ranks.run(names, "allreduce", "ring", elements))
    if full:
        if not link_mbps:
            raise ValueError("the SwitchML baseline sizes its pool for a link rate: "
                             "pass link_mbps")
        switchml(fabricd, ranks, elements, link_mbps, measured, directed_bytes)
    for name, workers in (("demo-nr1", first_leaf), ("demo-nr2", names))[0 if full else 1:]:
        job = fabricd.ctl_json("job", "create", name, *workers)
        tree = " > ".join(job["switches"])
        click.echo(f"demo: fabricctl job create {name} {' '.join(workers)} -> tree {tree}")
        try:
            measured(f"allreduce netreduce ({tree})",
                     lambda job=job, workers=workers: ranks.run(
                         workers, "allreduce", "netreduce", elements,
                         {"aggregator": job["addresses"], "job_id": job["job_id"]}))
        finally:
            fabricd.ctl("job", "delete", name)
    return rows, runs


def switchml(fabricd, ranks: Ranks, elements: int, link_mbps: float, measured,
             directed_bytes=None) -> None:
    """The SwitchML baseline on every rank, its job set up through fabricctl, run as its
    authors size it: a pool of about twice the bandwidth-delay product per worker
    (sml.pool_slots) and a timer that queueing cannot fire (sml.pool_timeout), not the RC
    transport's window-sized min_rto. The one leaf that sums takes every other leaf's workers
    through its spine ports; the busiest of them bounds the CCT (printed with
    `directed_bytes`)."""
    names = [h.name for h in ranks.hosts]
    slots = sml.pool_slots(link_mbps)
    rto = sml.pool_timeout(len(names), slots, link_mbps)
    job = fabricd.ctl_json("job", "create", "demo-sml", *names, "--kind", "switchml",
                           "--slots", str(slots))
    click.echo(f"demo: fabricctl job create demo-sml --kind switchml ... -> {job['leaf']} "
               f"sums at {job['address']}, slots {job['slot_base']}.."
               f"{job['slot_base'] + slots - 1}, timeout {rto * 1e3:.0f} ms")
    before = directed_bytes() if directed_bytes else {}
    try:
        measured(f"allreduce switchml in {job['leaf']}",
                 lambda: ranks.run(names, "allreduce", "switchml", elements,
                                   {"aggregator": job["address"], "job_id": job["job_id"],
                                    "slots": slots, "slot_base": job["slot_base"],
                                    "rto": rto}))
    finally:
        fabricd.ctl("job", "delete", "demo-sml")
    if directed_bytes:
        after = directed_bytes()
        link, sent = max(((k, after[k] - before[k]) for k in after), key=lambda kv: kv[1])
        click.echo(f"demo: switchml's busiest link {link} carried {sent / 1e3:.1f} KB: "
                   f"{sent * 8 / (link_mbps * 1e3):.0f} ms at {link_mbps:g} Mbit/s bound its CCT")


def link_table(topo, runs: list[FabricRun]) -> str:
    """MB on the fabric links (switch counters, both directions) per run, against ring's
    (the first run) where both ran on the same ranks, with NetReduce's bound beside it."""
    names = sorted(lk.name for lk in topo.links if lk.a not in topo.hosts)
    ring = runs[0]
    lines = []
    for r in runs:
        same = r.ranks == ring.ranks and ring.total
        nr = "netreduce" in r.what
        lines.append([r.what, str(r.ranks), f"{r.total / 1e6:.3f}",
                      f"{r.total / ring.total:.3f}x" if same else "-",
                      f"{bound(r.ranks):.3f}" if nr and same else "-"]
                     + [f"{r.link_bytes.get(k, 0) / 1e6:.3f}" for k in names])
    return format_table(["NetReduce run", "ranks", "MB on fabric links", "vs ring",
                         "bound N/(2(N-1))"] + names, lines)


HEAD = ["idea", "run", "ranks", "CCT ms", "MB injected/rank", "exact", "faithful"]
EXACT = HEAD.index("exact")


def table(lines: list[list[str]]) -> str:
    """The ideas table; a row made without a fidelity verdict says so."""
    return format_table(HEAD, [padded(x) for x in lines])


def padded(line: list[str]) -> list[str]:
    return line + ["unmeasured"] * (len(HEAD) - len(line))

