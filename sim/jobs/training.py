"""Several training jobs at once on one fabric, packet by packet: each job a workload DAG
(generated or read from traces) with its own ranks on its own hosts, run alone and then all
together in one simulation, on vClos slices or shared under a load-balancing policy.

- Shared: a scheduler that knows hosts but not links places the jobs
  (`sim.tenants.unaware_placement`, `spread`: rack by rack), and every flow goes out under the
  policy (hash ECMP, spraying, REPS, Ethereal) over the whole fabric.
- `vclos`: the controller's allocator (`VClosAllocator(topo, "link")`, as fabricd) gives
  each job a slice: hosts, and cables held exclusively; every connection of the job is
  pinned to the path its slice's ECMP groups hash it onto (`sim.tenants.slice_pins`, the
  entries fabric.p4's slice tables would pick), so no cable carries two jobs.
A job's iteration is the latest finish of its ranks; the links it uses are those its run
alone puts payload on (directed switch-to-switch links), and a link is shared when two jobs'
runs alone both use it.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, replace
from pathlib import Path

import click

from controller.vclos import AllocationError
from fabricmodel import policies
from fabricmodel.topology import Topology
from figures.text import format_table
from results.record import save_output
from sim import sweep
from sim.dag_run import DagRun, training_transport
from sim.fabric import MODES, LinkSpec
from sim.tenants import slice_pins, unaware_placement, vclos_slices
from workloads.dag import Workload

SHARED = policies.names()
SCHEMES = ("vclos", *SHARED)


@dataclass(frozen=True)
class TrainJob:
    name: str
    workload: Workload
    hosts: tuple[str, ...]          # the fabric host of each of the workload's hosts
    slice: object | None = None     # vClos: the job's slice


def host_count(wl: Workload) -> int:
    return -(-wl.n // wl.gpus_per_host)


def place(topo: Topology, scheme: str, workloads: list[Workload]) -> list[TrainJob]:
    """Hosts for each job: a vClos slice each (`vclos`), or the network-unaware scheduler."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r}; choose from {list(SCHEMES)}")
    names = [f"job{i + 1}" for i in range(len(workloads))]
    sizes = [host_count(w) for w in workloads]
    if scheme == "vclos":
        return [TrainJob(n, w, tuple(sl.hosts), sl) for n, w, sl in
                zip(names, workloads, vclos_slices(topo, names, sizes), strict=True)]
    return [TrainJob(n, w, tuple(h)) for n, w, h in
            zip(names, workloads, unaware_placement(topo, sizes), strict=True)]


def merge(jobs: list[TrainJob]) -> tuple[Workload, list[str], list[range]]:
    """One workload of every job's ranks (each job's ranks, groups and peers offset), the
    fabric host of each of its hosts, and each job's ranks."""
    g = {j.workload.gpus_per_host for j in jobs}
    if len(g) != 1:
        raise ValueError(f"the jobs' hosts hold different numbers of GPUs: {sorted(g)}")
    gph = g.pop()
    ranks, hosts, spans, base = [], [], [], 0
    for j in jobs:
        wl = j.workload
        if wl.n % gph:
            raise ValueError(f"{j.name}: {wl.n} ranks do not fill hosts of {gph}")
        for ops in wl.ranks:
            ranks.append([replace(o, group=tuple(r + base for r in o.group),
                                  peer=o.peer + base if o.peer >= 0 else -1) for o in ops])
        hosts += j.hosts
        spans.append(range(base, base + wl.n))
        base += wl.n
    return Workload(" + ".join(j.workload.name for j in jobs), ranks, gph), hosts, spans


class SliceSender:
    """Sends every flow of a job on the path of its vClos slice (pinned, one QP per flow;
    a timeout resends on the same path: the slice's routing does not re-hash)."""

    def __init__(self, run: DagRun, jobs: list[TrainJob]) -> None:
        self.run, self.fab, self.topo = run, run.fab, run.topo
        self.slice_of = {h: j.slice for j in jobs for h in j.hosts}
        self.routing = {id(j.slice): j.slice.routing(run.topo) for j in jobs}
        self.pinned: set[tuple] = set()

    def open(self, job: int, node: int, step: int, flows) -> None:
        e, mtu = self.fab.engine, self.fab.transport.mtu
        for f in flows:
            key = (f.src, f.dst, f.connection_sport)
            if key not in self.pinned:
                sl = self.slice_of[f.src]
                for switch, port in slice_pins(self.topo, sl, self.routing[id(sl)], *key):
                    self.fab.add_pin(switch, self.topo.host(f.src).ip,
                                     self.topo.host(f.dst).ip, key[2], port)
                self.pinned.add(key)
            e.add_qp(job, node, self.fab.index[f.dst], step, f.bytes, mtu, key[2],
                     MODES["pinned"])

    def timeout(self, qp: int) -> None:
        """The engine resends on the QP's own path."""


def _run(topo, jobs, scheme, link, segment, **kw) -> tuple[dict, DagRun, list[range]]:
    wl, hosts, spans = merge(jobs)
    run = DagRun(wl, topo, "ecmp" if scheme == "vclos" else scheme, link=link,
                 transport=training_transport(segment),
                 placement=[topo.host(h).rank for h in hosts], **kw)
    if scheme == "vclos":
        run.sender = SliceSender(run, jobs)
    row = run.run()
    return row, run, spans


def _links(run: DagRun) -> set[str]:
    out = set()
    for lk in run.topo.links:
        if lk.a in run.topo.switches and lk.b in run.topo.switches:
            for a, b in ((lk.a, lk.b), (lk.b, lk.a)):
                if run.fab.port_bytes(a, lk.port_of(a)):
                    out.add(f"{a}>{b}")
    return out


def compare(topo: Topology, jobs: list[TrainJob], scheme: str, *,
            link: LinkSpec | None = None, segment: int = 64 * 1024, **kw) -> list[dict]:
    """Each job alone, then all at once: a row per job with both iteration times, the
    slowdown, the links it used and those another job used too."""
    alone, used = {}, {}
    for j in jobs:
        row, run, spans = _run(topo, [j], scheme, link, segment, **kw)
        alone[j.name] = max(run.finish_at) if row["ok"] else None
        used[j.name] = _links(run)
    row, run, spans = _run(topo, jobs, scheme, link, segment, **kw)
    together = {j.name: max(run.finish_at[r] for r in span) if row["ok"] else None
                for j, span in zip(jobs, spans, strict=True)}
    on: dict[str, set] = {}
    for name, links in used.items():
        for lk in links:
            on.setdefault(lk, set()).add(name)
    shared = sorted(lk for lk, names in on.items() if len(names) > 1)
    out = []
    for j in jobs:
        a, t = alone[j.name], together[j.name]
        out.append({"scheme": scheme, "job": j.name, "workload": j.workload.name,
                    "gpus": j.workload.n, "hosts": list(j.hosts),
                    "leaves": len({topo.host(h).leaf for h in j.hosts}),
                    "alone_s": a, "together_s": t, "ok": a is not None and t is not None,
                    "slowdown": t / a if a and t else None, "links": len(used[j.name]),
                    "links_shared": len(used[j.name] & set(shared)),
                    "scheme_shared_links": shared, "together_events": row["events"],
                    "together_wall_s": row["wall_s"]})
    return out


def table(rows: list[dict]) -> str:
    head = ["scheme", "job", "workload", "GPUs", "leaves", "alone ms", "together ms",
            "slowdown", "links", "shared links", "done"]
    lines = [[r["scheme"], r["job"], r["workload"], str(r["gpus"]), str(r["leaves"]),
              f"{r['alone_s'] * 1e3:.2f}" if r["alone_s"] else "-",
              f"{r['together_s'] * 1e3:.2f}" if r["together_s"] else "-",
              f"{r['slowdown']:.3f}x" if r["slowdown"] else "-", str(r["links"]),
              str(r["links_shared"]), "yes" if r["ok"] else "NO"] for r in rows]
    return format_table(head, lines)


def run_table(topo: Topology, workloads: list[Workload], schemes: list[str], link: LinkSpec,
              out_dir: Path, title: str, *, workers: int | None = None,
              scheduler: str | None = None) -> list[dict]:
    """`python -m sim jobs-packet --train`: every scheme's rows (a sim/sweep.py task per
    scheme, on Dask if asked), printed and saved."""
    placed = {}
    for scheme in schemes:
        try:
            placed[scheme] = place(topo, scheme, workloads)
        except (AllocationError, ValueError) as err:
            raise click.ClickException(f"{scheme} cannot place the jobs: {err}") from None
    packets = (len(workloads) + 1) * sum(op.bytes for w in workloads
                                         for _, op in w.ops()) // (64 << 10)
    tasks = [sweep.Task(functools.partial(compare, link=link), (topo, placed[s], s), s,
                        packets) for s in schemes]
    outcome = sweep.run(tasks, workers=workers, scheduler=scheduler,
                        desc="sim jobs-packet --train")
    if outcome.failures:
        task, error = outcome.failures[0]
        raise click.ClickException(f"{task.label}: {error.strip().splitlines()[-1]}")
    rows = outcome.rows
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "jobs-packet-train.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows))
    click.echo(f"\n{title}\n\n{table(rows)}")
    save_output(out_dir / "tables", "jobs-packet-train", title, table(rows))
    shared = {r["scheme"]: r["scheme_shared_links"] for r in rows}
    for scheme, links in shared.items():
        if links:
            click.echo(f"{scheme}: links carrying both jobs: {', '.join(links)}")
    return rows
