"""One collective under one load-balancing policy, simulated; the result as one JSON row.

Each rank starts step s+1 once it has sent (all acknowledged) and received everything of step
s. On that arrival the engine calls `Run._arrive`, which turns the rank's flows of the step
into queue pairs the way the policy does:
- ecmp: one QP per flow on the per-connection source port the emulation's NICs use
  (`fabricmodel.ethereal.Flow.connection_sport`); after a timeout it re-hashes to a random port.
- spray: one QP per flow, a random source port per packet.
- reps: one QP per flow, REPS's recycled entropy (engine.cpp).
- ethereal: that rank's `fabricmodel.ethereal.EtherealRank` plans the step's flows (split and
  pinned by source port, pins installed where the port cannot steer); a QP per sub-flow; on a
  timeout the same object's `on_timeout` re-picks the path.
Per-packet work stays in C++; Python runs once per (rank, step) and once per Ethereal timeout.
"""
from __future__ import annotations

import bisect
import functools
import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from fabricmodel import ethereal, hashing, policies
from fabricmodel.topology import Topology
from sim.fabric import MODES, LinkSpec, SimFabric, Transport, add_qps
from sim.workloads import steps as make_steps

DEFAULT_LINK, DEFAULT_TRANSPORT = LinkSpec(), Transport()


class Policy:
    """Opens a rank's flows of a step as queue pairs the way `policy` does (the module doc;
    a policy of `fabricmodel.policies`, simulated by its mechanism), and re-picks an Ethereal
    path on a timeout; shared by every collective of a run."""

    def __init__(self, fab: SimFabric, policy: str, seed: int = 0) -> None:
        self.mechanism = policies.get(policy).mechanism
        self.fab, self.policy = fab, policy
        self.planners = {}
        if self.mechanism == "pinned":
            self.planners = {h.name: ethereal.EtherealRank(fab.topo, h.name, routing=fab.routing,
                                                           mtu=fab.transport.mtu)
                             for h in fab.hosts}
        self.subflows = SubFlows()

    def open(self, job: int, rank: int, step: int, flows: list[ethereal.Flow]) -> None:
        """One engine call per (rank, step): the QPs of its flows, in order."""
        if not flows:
            return
        if len({f.dst_qp for f in flows}) == 1:
            self.open_ranks(job, rank, step, [self.fab.index[f.dst] for f in flows],
                            [f.bytes for f in flows], flows[0].dst_qp)
        elif self.mechanism == "pinned":
            e = self.fab.engine
            subs = self.planners[flows[0].src].plan(flows)
            for sub in subs:
                self._pins(sub)
            first = e.qp_count()
            add_qps(e, job, rank, step, [self.fab.index[sub.flow.dst] for sub in subs],
                    [sub.bytes for sub in subs], self.fab.transport.mtu,
                    [sub.sport for sub in subs],
                    [MODES["pinned"] if sub.path is not None else MODES["ecmp"] for sub in subs])
            for k, sub in enumerate(subs):
                self.subflows[first + k] = sub
        else:
            add_qps(self.fab.engine, job, rank, step, [self.fab.index[f.dst] for f in flows],
                    [f.bytes for f in flows], self.fab.transport.mtu,
                    [f.connection_sport for f in flows], [MODES[self.mechanism]])

    def open_ranks(self, job: int, rank: int, step: int, dsts, sizes, dst_qp: int) -> None:
        """`open` for flows from host `rank` to host ranks `dsts` of `sizes` bytes, all on NIC
        queue pair `dst_qp`, given as arrays: no object per flow."""
        e, mtu = self.fab.engine, self.fab.transport.mtu
        if not len(dsts):
            return
        if self.mechanism == "pinned":
            plan = self.planners[self.fab.names[rank]].plan_ranks(dsts, sizes, dst_qp=dst_qp)
            for i in plan.pinned_rows():
                for pin in plan.pins(int(i)):
                    self.fab.add_pin(pin.switch, pin.src_ip, pin.dst_ip, pin.sport, pin.port)
            self.subflows.add(e.qp_count(), plan)
            add_qps(e, job, rank, step, plan.dst, plan.bytes, mtu, plan.sport,
                    np.where(plan.path >= 0, MODES["pinned"], MODES["ecmp"]))
            return
        if self.mechanism == "ecmp":
            names = self.fab.names
            sports = hashing.connection_sports(names[rank], [names[d] for d in dsts], dst_qp)
        else:
            # spraying and REPS draw a port per packet: the connection's port is never read
            sports = np.zeros(len(dsts), dtype=np.int64)
        add_qps(e, job, rank, step, dsts, sizes, mtu, sports, [MODES[self.mechanism]])

    def timeout(self, qp: int) -> None:
        sub = self.subflows[qp]
        new = self.planners[sub.flow.src].on_timeout(sub)
        self._pins(new)
        self.subflows[qp] = new
        self.fab.engine.repath(qp, new.sport)

    def _pins(self, sub: ethereal.SubFlow) -> None:
        for pin in sub.pins:
            self.fab.add_pin(pin.switch, pin.src_ip, pin.dst_ip, pin.sport, pin.port)


class Run:
    def __init__(self, topo: Topology, algorithm: str, size: int, policy: str, *,
                 link: LinkSpec = DEFAULT_LINK, transport: Transport = DEFAULT_TRANSPORT,
                 failed: tuple[int, ...] = (), seed: int = 0) -> None:
        self.topo, self.algorithm, self.size, self.policy = topo, algorithm, size, policy
        self.seed = seed
        n = len(topo.hosts)
        self.schedule = _schedule(algorithm, n, size)
        self.fab = SimFabric(topo, link, transport, failed, seed=seed + 1)
        self.names = [h.name for h in self.fab.hosts]
        e = self.fab.engine
        self.job = e.add_job()
        for r, expect in enumerate(self.schedule.expect.tolist()):
            for want in expect:
                e.add_step(self.job, r, want)
        self.sender = Policy(self.fab, policy, seed)
        self.planners = self.sender.planners        # each rank's EtherealRank
        self.subflows = self.sender.subflows        # QP -> its Ethereal sub-flow
        self.python_s = 0.0
        e.on_arrive = self._arrive
        e.on_timeout = self._timeout

    # ---- callbacks from the engine --------------------------------------------------------
    def _arrive(self, job: int, rank: int, s: int) -> None:
        start = time.perf_counter()
        dst, size = self.schedule.flows_of(rank, s)
        self.sender.open_ranks(job, rank, s, dst, size, self.seed)
        self.python_s += time.perf_counter() - start

    def _timeout(self, qp: int) -> None:
        start = time.perf_counter()
        self.sender.timeout(qp)
        self.python_s += time.perf_counter() - start

    # ---- the run ---------------------------------------------------------------------------
    def run(self, limit_s: float = 10.0) -> dict:
        e = self.fab.engine
        wall = time.perf_counter()
        for r in range(len(self.names)):
            e.start_rank(self.job, r)
        end = self.fab.run(limit_s)
        wall = time.perf_counter() - wall
        n = len(self.names)
        done = [e.rank_done(self.job, r) for r in range(n)]
        ok = all(t >= 0 for t in done)
        up = self.fab.uplink_bytes()
        mean = sum(up.values()) / len(up) if up else 0
        events = self.fab.events()
        row = {
            "topology": self.topo.name, "hosts": n, "collective": self.algorithm,
            "size_bytes": self.size, "policy": self.policy,
            "failed_links": [self.topo.links[i].name for i in self.fab.failed],
            "seed": self.seed, "ok": ok,
            "receiver": self.fab.transport.receiver_of(self.policy),
            "pfc": self.fab.transport.pfc, "dcqcn": self.fab.transport.cc,
            "cct_s": max(done) if ok else None, "sim_end_s": end,
            "gbps": self.fab.link.gbps, "mtu": self.fab.transport.mtu,
            "qps": int(e.qp_count()), "packets": int(e.packets_sent),
            "retransmitted": int(e.retransmitted), "timeouts": int(e.timeouts),
            "dropped": int(e.dropped), "ecn_marked": int(e.marked),
            "drops": {c: int(getattr(e, f"drop_{c}"))
                      for c in ("failed", "queue", "buffer", "noroute", "injected")},
            "naks": int(e.naks), "out_of_order": int(e.out_of_order), "cnps": int(e.cnps),
            "pfc_pauses": int(e.pauses),
            "max_queue_kb": int(e.max_queue_bytes) / 1e3,
            "uplink_imbalance": max(up.values()) / mean if mean else 0.0,
            "events": events, "wall_s": wall, "events_per_s": events / wall if wall else 0.0,
            "python_s": self.python_s,
        }
        self.fab.close()
        return row


def run_case(topo: Topology, algorithm: str, size: int, failed: tuple[int, ...], policy: str,
             seed: int, link: LinkSpec = DEFAULT_LINK,
             transport: Transport = DEFAULT_TRANSPORT) -> dict:
    """One seeded run, start to finish: what a sweep's task is (sim/sweep.py)."""
    return Run(topo, algorithm, size, policy, link=link, transport=transport, failed=failed,
               seed=seed).run()


@dataclass(frozen=True)
class _Schedule:
    """A collective's steps as arrays: per step its flows by sending rank (destination ranks
    and bytes), and what each rank receives per step. Built once per (algorithm, ranks, size)
    and process: a 1,024-host all-to-all has a million flows, and a Dask worker runs the same
    collective under every policy."""
    starts: list[np.ndarray]       # per step: rank r's flows are rows starts[r]:starts[r + 1]
    dst: list[np.ndarray]
    size: list[np.ndarray]
    expect: np.ndarray             # [rank, step]: bytes to receive

    def flows_of(self, rank: int, step: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = self.starts[step][rank], self.starts[step][rank + 1]
        return self.dst[step][a:b], self.size[step][a:b]


@functools.lru_cache(maxsize=4)
def _schedule(algorithm: str, n: int, size: int) -> _Schedule:
    starts, dsts, sizes = [], [], []
    expect = np.zeros((n, 0), dtype=np.int64)
    for step in make_steps(algorithm, n, size):
        m = len(step.flows)
        cols = np.fromiter((x for f in step.flows for x in (f.src, f.dst, f.bytes)),
                           dtype=np.int64, count=3 * m).reshape(m, 3)
        order = np.argsort(cols[:, 0], kind="stable")     # each rank's flows in step order
        src, dst, nbytes = (cols[order, k] for k in range(3))
        starts.append(np.searchsorted(src, np.arange(n + 1)))
        dsts.append(dst)
        sizes.append(nbytes)
        got = np.zeros(n, dtype=np.int64)
        np.add.at(got, dst, nbytes)
        expect = np.column_stack((expect, got))
    for a in (*starts, *dsts, *sizes, expect):
        a.setflags(write=False)
    return _Schedule(starts, dsts, sizes, expect)


class SubFlows(Mapping):
    """QP id -> the Ethereal sub-flow it carries, built from the planner's columns only when
    asked for (on a timeout, or by a test): a 1,024-host all-to-all has a million of them."""

    def __init__(self) -> None:
        self._first: list[int] = []
        self._plans: list[ethereal.RankPlan] = []
        self._set: dict[int, ethereal.SubFlow] = {}

    def add(self, first_qp: int, plan: ethereal.RankPlan) -> None:
        if len(plan):
            self._first.append(first_qp)
            self._plans.append(plan)

    def _planned(self, qp: int) -> tuple[ethereal.RankPlan, int] | None:
        k = bisect.bisect_right(self._first, qp) - 1
        if k < 0 or qp - self._first[k] >= len(self._plans[k]):
            return None
        return self._plans[k], qp - self._first[k]

    def __getitem__(self, qp: int) -> ethereal.SubFlow:
        if qp in self._set:
            return self._set[qp]
        got = self._planned(qp)
        if got is None:
            raise KeyError(qp)
        return got[0].subflow(got[1])

    def __setitem__(self, qp: int, sub: ethereal.SubFlow) -> None:
        self._set[qp] = sub

    def __iter__(self):
        for first, plan in zip(self._first, self._plans, strict=True):
            yield from range(first, first + len(plan))
        yield from (qp for qp in self._set if self._planned(qp) is None)

    def __len__(self) -> int:
        return sum(1 for _ in self)
