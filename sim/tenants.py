"""Several jobs on one fabric, packet by packet: vClos's claim (tenants collide in ECMP) at the
scale of the papers, in one simulated run per case.

Each job is a collective (sim.workloads) on its own hosts. Every job runs alone, then all of
them at once (the engine's jobs: each has its own steps per host, all start at t = 0), on the
same hosts with the same source ports, so the only difference is the other jobs. Schemes:
- `ecmp`: a scheduler that knows hosts but not links places the jobs (`spread`: in turn over
  the racks, one host of a job per leaf before the next, as the demo's shared case; `random`:
  a seeded sample of the free hosts), every QP on its connection's port, hash ECMP.
- `ethereal`: the same placement; every rank plans its flows with Ethereal (within its job:
  the planner knows nothing of the other jobs).
- `vclos`: `controller.vclos.VClosAllocator(topo, "link")`, the allocator fabricd uses, gives
  each job a slice (hosts, leaves, spines, cables held exclusively); its routing is the
  slice's (`Slice.routing`: ECMP groups over the slice's cables only, hashed as fabric.p4
  hashes), installed as the pin entries of the job's connections, the entries fabric.p4's
  slice tables would pick for them. A slice's QP keeps its port on a timeout.
- `vclos-ethereal`: the same slices, and every rank plans its flows with Ethereal over its
  slice's routing (every hop pinned: the switches' own groups are the whole fabric's), the
  combination of isolation between jobs and balance within one.
Which links a job uses comes from its run alone (payload bytes per directed switch-to-switch
link): its ports and hence its paths are the same alone and together, except where a timeout
re-hashes an ECMP QP (the rows count timeouts).
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass

from controller.vclos import Slice, VClosAllocator
from fabricmodel import hashing, rocev2
from fabricmodel.ethereal import EtherealRank, Flow
from fabricmodel.topology import Topology
from sim.collective import Policy
from sim.fabric import MODES, LinkSpec, SimFabric, Transport
from sim.workloads import steps as make_steps

SCHEMES = ("ecmp", "ethereal", "vclos", "vclos-ethereal")
PLACEMENTS = ("spread", "random")


@dataclass(frozen=True)
class Job:
    name: str
    hosts: tuple[str, ...]          # rank order
    algorithm: str
    size: int                       # bytes per rank
    slice: Slice | None = None      # vClos: the job's slice (its routing)


def unaware_placement(topo: Topology, sizes: list[int], placement: str = "spread",
                      seed: int = 0) -> list[tuple[str, ...]]:
    """Hosts for jobs of `sizes` ranks, in arrival order, from a scheduler that knows hosts
    and racks but not links: `spread` deals hosts out rack by rack (the first host of every
    leaf, then the second, ...), `random` samples the free hosts (rank order = host order)."""
    if placement not in PLACEMENTS:
        raise ValueError(f"unknown placement {placement!r}; choose from {list(PLACEMENTS)}")
    if sum(sizes) > len(topo.hosts):
        raise ValueError(f"{sum(sizes)} ranks do not fit {len(topo.hosts)} hosts")
    if placement == "spread":
        per_leaf = [[h.name for h in topo.hosts_of(lf.name)] for lf in topo.leaves]
        order = [hosts[i] for i in range(max(map(len, per_leaf)))
                 for hosts in per_leaf if i < len(hosts)]
    else:
        rank = {h.name: h.rank for h in topo.hosts.values()}
        order = random.Random(seed).sample(sorted(rank, key=rank.get), len(rank))
    out, at = [], 0
    for n in sizes:
        mine = order[at:at + n]
        at += n
        if placement == "random":
            mine.sort(key=lambda h: topo.host(h).rank)
        out.append(tuple(mine))
    return out


def vclos_slices(topo: Topology, names: list[str], sizes: list[int]) -> list[Slice]:
    """A slice per job from the controller's allocator (link isolation); AllocationError
    says why a job does not fit."""
    alloc = VClosAllocator(topo, "link")
    return [alloc.allocate(name, n) for name, n in zip(names, sizes, strict=True)]


def slice_pins(topo: Topology, sl: Slice, routing, src: str, dst: str,
               sport: int) -> list[tuple[str, int]]:
    """(switch, egress port) along the path the slice's ECMP groups hash the connection
    (src, dst, sport) onto, from the source's leaf to the destination's."""
    s, d = topo.host(src), topo.host(dst)
    out, here = [], s.leaf
    while here != d.leaf:
        group = routing.group(here, d.leaf)
        if not group:
            raise ValueError(f"slice of {sl.job} has no path {here} -> {d.leaf}")
        hop = group[hashing.ecmp_member(s.ip, d.ip, rocev2.UDP, sport, rocev2.ROCEV2_PORT,
                                        len(group), hashing.switch_salt(here))]
        out.append((here, hop.src_port))
        here = hop.dst
    return out


class SharedRun:
    """The jobs `jobs` at once on one simulated fabric (a list of one: that job alone)."""

    def __init__(self, topo: Topology, jobs: list[Job], scheme: str, *,
                 link: LinkSpec | None = None, transport: Transport | None = None,
                 seed: int = 0) -> None:
        if scheme not in SCHEMES:
            raise ValueError(f"unknown scheme {scheme!r}; choose from {list(SCHEMES)}")
        self.topo, self.jobs, self.scheme, self.seed = topo, jobs, scheme, seed
        self.fab = SimFabric(topo, link, transport, seed=seed + 1)
        self.policy = Policy(self.fab, "ecmp" if scheme in ("ecmp", "vclos") else "ethereal",
                             seed)
        e = self.fab.engine
        self.ids: list[int] = []
        # per engine job: host node index -> step -> its flows of that step
        self.out: dict[int, dict[int, list[list[Flow]]]] = {}
        self.fixed: set[int] = set()          # QPs on a slice's path: keep their port
        for job in jobs:
            jid = e.add_job()
            self.ids.append(jid)
            self.out[jid] = self._steps(jid, job)
            if scheme == "vclos":
                self._install_slice(jid, job)
            elif scheme == "vclos-ethereal":
                routing = job.slice.routing(topo)
                for h in job.hosts:
                    self.policy.planners[h] = EtherealRank(topo, h, routing=routing,
                                                           mtu=self.fab.transport.mtu,
                                                           pin_all=True)
        e.on_arrive = self._arrive
        e.on_timeout = self._timeout

    def _steps(self, jid: int, job: Job) -> dict[int, list[list[Flow]]]:
        steps = make_steps(job.algorithm, len(job.hosts), job.size)
        nodes = [self.fab.index[h] for h in job.hosts]
        out = {i: [[] for _ in steps] for i in nodes}
        expect = {i: [0] * len(steps) for i in nodes}
        for s, step in enumerate(steps):
            for f in step.flows:
                out[nodes[f.src]][s].append(Flow(job.hosts[f.src], job.hosts[f.dst], f.bytes,
                                                 dst_qp=self.seed))
                expect[nodes[f.dst]][s] += f.bytes
        for i in nodes:
            for s in range(len(steps)):
                self.fab.engine.add_step(jid, i, expect[i][s])
        return out

    def _install_slice(self, jid: int, job: Job) -> None:
        routing = job.slice.routing(self.topo)
        pairs = {(f.src, f.dst, f.connection_sport) for by_step in self.out[jid].values()
                 for flows in by_step for f in flows}
        for src, dst, sport in pairs:
            for switch, port in slice_pins(self.topo, job.slice, routing, src, dst, sport):
                self.fab.add_pin(switch, self.topo.host(src).ip, self.topo.host(dst).ip, sport,
                                 port)

    def _arrive(self, jid: int, node: int, step: int) -> None:
        flows = self.out[jid][node][step]
        if self.scheme != "vclos":
            self.policy.open(jid, node, step, flows)
            return
        e, mtu = self.fab.engine, self.fab.transport.mtu
        for f in flows:
            self.fixed.add(e.add_qp(jid, node, self.fab.index[f.dst], step, f.bytes, mtu,
                                    f.connection_sport, MODES["pinned"]))

    def _timeout(self, qp: int) -> None:
        if qp not in self.fixed:       # a slice's path is its routing's: resend on the same
            self.policy.timeout(qp)

    def run(self, limit_s: float = 10.0) -> dict:
        """Runs every job from t = 0; returns each job's CCT (None if it did not finish), the
        payload bytes per directed switch-to-switch link and the run's counters."""
        e = self.fab.engine
        wall = time.perf_counter()
        for jid, job in zip(self.ids, self.jobs, strict=True):
            for h in job.hosts:
                e.start_rank(jid, self.fab.index[h])
        self.fab.run(limit_s)
        cct = {}
        for jid, job in zip(self.ids, self.jobs, strict=True):
            done = [e.rank_done(jid, self.fab.index[h]) for h in job.hosts]
            cct[job.name] = max(done) if min(done) >= 0 else None
        out = {"cct_s": cct, "links": self._fabric_link_bytes(),
               "timeouts": int(e.timeouts), "retransmitted": int(e.retransmitted),
               "max_queue_kb": int(e.max_queue_bytes) / 1e3,
               "events": self.fab.events(), "wall_s": time.perf_counter() - wall}
        self.fab.close()
        return out

    def _fabric_link_bytes(self) -> dict[str, int]:
        """Payload bytes on every directed switch-to-switch link ("leaf1>spine2")."""
        out = {}
        for lk in self.topo.links:
            if lk.a in self.topo.switches and lk.b in self.topo.switches:
                for a, b in ((lk.a, lk.b), (lk.b, lk.a)):
                    got = self.fab.port_bytes(a, lk.port_of(a))
                    if got:
                        out[f"{a}>{b}"] = out.get(f"{a}>{b}", 0) + got
        return out


def place(topo: Topology, scheme: str, sizes: list[int], algorithm: str, size: int,
          placement: str = "spread", seed: int = 0) -> list[Job]:
    """The jobs of a scheme: placed by the network-unaware scheduler (ecmp, ethereal) or in
    vClos slices (vclos, vclos-ethereal)."""
    names = [f"job{i + 1}" for i in range(len(sizes))]
    if scheme.startswith("vclos"):
        return [Job(n, sl.hosts, algorithm, size, sl)
                for n, sl in zip(names, vclos_slices(topo, names, sizes), strict=True)]
    return [Job(n, hosts, algorithm, size)
            for n, hosts in zip(names, unaware_placement(topo, sizes, placement, seed),
                                strict=True)]


def compare(topo: Topology, jobs: list[Job], scheme: str, *, link: LinkSpec | None = None,
            transport: Transport | None = None, seed: int = 0, progress=None) -> list[dict]:
    """Each job alone, then all together: one row per job (CCT alone and together, the
    slowdown, the fabric links it used and those another job used too)."""
    alone, used = {}, {}
    for job in jobs:
        got = SharedRun(topo, [job], scheme, link=link, transport=transport, seed=seed).run()
        alone[job.name] = got["cct_s"][job.name]
        used[job.name] = set(got["links"])
        if progress is not None:
            progress.update(1)
    both = SharedRun(topo, jobs, scheme, link=link, transport=transport, seed=seed).run()
    if progress is not None:
        progress.update(1)
    jobs_on = {}
    for name, links in used.items():
        for lk in links:
            jobs_on.setdefault(lk, set()).add(name)
    shared = sorted(lk for lk, on in jobs_on.items() if len(on) > 1)
    rows = []
    for job in jobs:
        a, t = alone[job.name], both["cct_s"][job.name]
        mine = used[job.name]
        rows.append({
            "scheme": scheme, "job": job.name, "ranks": len(job.hosts),
            "collective": job.algorithm, "size_bytes": job.size, "hosts": list(job.hosts),
            "leaves": len({topo.host(h).leaf for h in job.hosts}),
            "alone_s": a, "together_s": t,
            "slowdown": t / a if a and t else None, "ok": a is not None and t is not None,
            "links": len(mine), "links_shared": len(mine & set(shared)),
            "scheme_shared_links": shared,
            "scheme_max_jobs_on_a_link": max(map(len, jobs_on.values()), default=0),
            "together_timeouts": both["timeouts"], "together_max_queue_kb": both["max_queue_kb"],
            "together_events": both["events"], "together_wall_s": both["wall_s"],
        })
    return rows
