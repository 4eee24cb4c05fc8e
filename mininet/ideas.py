"""The demo's second part: Multicast Allgather, NetReduce and vClos on the same running
fabric, each set up through fabricctl the way a user would, each next to its baseline."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

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


def multicast_allgather(fabricd, ranks: Ranks, elements: int) -> list[list[str]]:
    names = [h.name for h in ranks.hosts]
    group = fabricd.ctl_json("group", "create", "demo-ag", *names)
    click.echo(f"demo: fabricctl group create demo-ag {' '.join(names)} -> {group['address']}")
    try:
        ring = ranks.run(names, "allgather", "ring", elements)
        mcast = ranks.run(names, "allgather", "multicast", elements,
                          {"group": group["address"]})
    finally:
        fabricd.ctl("group", "delete", "demo-ag")
    return [summary("Multicast Allgather", "allgather ring (baseline)", ring),
            summary("Multicast Allgather", f"allgather multicast {group['address']}", mcast)]


def netreduce(fabricd, ranks: Ranks, elements: int, slots: int = 128) -> list[list[str]]:
    names = [h.name for h in ranks.hosts]
    job = fabricd.ctl_json("job", "create", "demo-sml", *names, "--kind", "switchml",
                           "--slots", str(slots))
    click.echo(f"demo: fabricctl job create demo-nr ... -> {job['leaf']} aggregates at "
               f"{job['address']}, slots {job['slot_base']}..{job['slot_base'] + slots - 1}")
    try:
        ring = ranks.run(names, "allreduce", "ring", elements)
        nr = ranks.run(names, "allreduce", "switchml", elements,
                       {"aggregator": job["address"], "job_id": job["job_id"],
                        "slots": slots, "slot_base": job["slot_base"],
                        "rto": ranks.transport["min_rto"]})
    finally:
        fabricd.ctl("job", "delete", "demo-sml")
    return [summary("NetReduce", "allreduce ring (baseline)", ring),
            summary("NetReduce", f"allreduce switchml in {job['leaf']}", nr)]


def _reaches(net, src: str, dst_ip: str) -> bool:
    return " 0% packet loss" in net.get(src).cmd(f"ping -c 1 -W 1 {dst_ip}")


def vclos(fabricd, net, ranks: Ranks, elements: int) -> list[list[str]]:
    """Two jobs get isolated slices, run at once, cannot reach each other; a third job that
    does not fit is refused with the allocator's reason."""
    half = len(ranks.hosts) // 2
    slices = [fabricd.ctl_json("slice", "create", job, str(half)) for job in ("jobA", "jobB")]
    try:
        for s in slices:
            click.echo(f"demo: fabricctl slice create {s['name']} {half} -> hosts "
                       f"{','.join(s['hosts'])}, leaves {','.join(s['leaves'])}, spines "
                       f"{','.join(s.get('spines', [])) or '-'}, {len(s.get('links', []))} links")
        refused = fabricd.ctl("slice", "create", "jobC", "1")
        click.echo(f"demo: fabricctl slice create jobC 1 -> exit {refused.returncode}: "
                   f"{(refused.stderr or refused.stdout).strip()}")
        a, b = (s["hosts"] for s in slices)
        isolated = not _reaches(net, a[0], ranks.ip[b[0]])
        click.echo(f"demo: {a[0]} -> {b[0]} across slices: "
                   f"{'no route (isolated)' if isolated else 'REACHABLE'}")
        with ThreadPoolExecutor(2) as pool:
            runs = {s["name"]: pool.submit(ranks.run, s["hosts"], "allreduce", "ring",
                                           elements, port=port)
                    for s, port in zip(slices, (18516, 18517), strict=True)}
            results = {name: f.result() for name, f in runs.items()}
    finally:
        for job in ("jobA", "jobB"):
            fabricd.ctl("slice", "delete", job)
    return [summary("vClos", f"allreduce ring in slice {name} (concurrently)", rows)
            for name, rows in results.items()] + [
        ["vClos", "isolation: ping across slices", "-", "-", "-",
         "yes" if isolated else "NO"]]


def table(lines: list[list[str]]) -> str:
    head = ["idea", "run", "ranks", "CCT ms", "MB injected/rank", "exact"]
    return format_table(head, lines)

