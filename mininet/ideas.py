"""The demo's second part (run by part2.py on its own fabric): the ranks, NetReduce set up
through fabricctl next to its baselines, and the ideas table. Multicast Allgather and vClos
are in idea_mcast.py and idea_vclos.py."""
from __future__ import annotations

import click

from collectives.launch import launch
from collectives.results import format_table


class Ranks:
    """The hosts of the fabric in rank order and their named namespaces."""

    def __init__(self, topo, namespaces: list[str], transport: dict):
        self.hosts = sorted(topo.hosts.values(), key=lambda h: h.rank)
        self.ns = dict(zip((h.name for h in self.hosts), namespaces, strict=True))
        self.ip = {h.name: h.ip for h in self.hosts}
        self.transport = transport

    def launch(self, names: list[str], run: dict, **kwargs) -> list[dict]:
        """One run on the ranks `names` (rank order); kwargs go to collectives.launch."""
        return launch([self.ip[n] for n in names], [run], namespaces=[self.ns[n] for n in names],
                      transport=self.transport, timeout=600, step_timeout=120, **kwargs)

    def run(self, names: list[str], collective: str, algo: str, elements: int,
            options: dict | None = None, port: int = 18515) -> list[dict]:
        return self.launch(names, {"collective": collective, "algo": algo, "dtype": "int32",
                                   "elements": elements, "options": options or {}}, port=port)


def summary(idea: str, what: str, rows: list[dict]) -> list[str]:
    per_rank = sum(r["bytes_injected"] for r in rows) / len(rows)
    return [idea, what, str(len(rows)), f"{max(r['cct_s'] for r in rows) * 1e3:.1f}",
            f"{per_rank / 1e6:.3f}", "yes" if all(r["ok"] for r in rows) else "NO"]


def fabric_link_bytes(fabricd, topo) -> dict[str, int]:
    """Bytes sent so far on every switch-to-switch link, both directions, from the
    switches' port_tx counters (fabricctl counters)."""
    tx = {}
    for sw in topo.switches:
        for p in fabricd.ctl_json("counters", sw)["ports"]:
            tx[sw, p["port"]] = int(p["tx_bytes"])
    return {lk.name: tx.get((lk.a, lk.a_port), 0) + tx.get((lk.b, lk.b_port), 0)
            for lk in topo.links if lk.a not in topo.hosts}


def netreduce(fabricd, ranks: Ranks, elements: int, slots: int = 128, link_bytes=None):
    """Ring all-reduce, the SwitchML baseline, and NetReduce on one leaf and across the
    leaves (each leaf, then a spine), set up through fabricctl. Returns the idea rows and,
    with `link_bytes` (a callable: link name -> bytes so far), one row per run of the bytes
    it put on every fabric link: [run, total MB, MB per link in sorted link order]."""
    names = [h.name for h in ranks.hosts]
    first_leaf = [h.name for h in ranks.hosts if h.leaf == ranks.hosts[0].leaf]
    rows, links = [], []

    def measured(what: str, run) -> None:
        before = link_bytes() if link_bytes else {}
        got = run()
        rows.append(summary("NetReduce", what, got))
        if link_bytes:
            after = link_bytes()
            per_link = [after[k] - before[k] for k in sorted(after)]
            links.append([what, f"{sum(per_link) / 1e6:.3f}"]
                         + [f"{b / 1e6:.3f}" for b in per_link])

    measured("allreduce ring (baseline)",
             lambda: ranks.run(names, "allreduce", "ring", elements))
    job = fabricd.ctl_json("job", "create", "demo-sml", *names, "--kind", "switchml",
                           "--slots", str(slots))
    click.echo(f"demo: fabricctl job create demo-sml --kind switchml ... -> {job['leaf']} "
               f"sums at {job['address']}, slots {job['slot_base']}.."
               f"{job['slot_base'] + slots - 1}")
    try:
        measured(f"allreduce switchml in {job['leaf']}",
                 lambda: ranks.run(names, "allreduce", "switchml", elements,
                                   {"aggregator": job["address"], "job_id": job["job_id"],
                                    "slots": slots, "slot_base": job["slot_base"],
                                    "rto": ranks.transport["min_rto"]}))
    finally:
        fabricd.ctl("job", "delete", "demo-sml")
    for name, workers in (("demo-nr1", first_leaf), ("demo-nr2", names)):
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
    return rows, links


def link_table(topo, lines: list[list[str]]) -> str:
    """NetReduce's runs: MB on the fabric links (switch counters, both directions)."""
    names = sorted(lk.name for lk in topo.links if lk.a not in topo.hosts)
    return format_table(["NetReduce run", "MB on fabric links"] + names, lines)


def table(lines: list[list[str]]) -> str:
    head = ["idea", "run", "ranks", "CCT ms", "MB injected/rank", "exact"]
    return format_table(head, lines)

