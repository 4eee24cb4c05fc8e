"""A training iteration (a `workloads` DAG) in the packet simulator: compute on the clock,
every collective and pipeline transfer through the simulated fabric, several of them in
flight at once.

Python decides when each op starts (`workloads.schedule.Scheduler`: dependencies and streams)
and the engine moves the bytes: each collective's network phase is one engine job (its own
steps per host, a rank entering it when the collective's members on that host have issued
it), each pipeline transfer a one-step job; compute and intra-host phases are engine timers.
On G GPUs per host, a collective is planned by `workloads.hierarchy` (flat or hierarchical
ring, NetReduce, SwitchML, multicast): the hosts' network phase is simulated per packet,
the intra-host phases are timed by formula at the intra-host bandwidth.

Packets are `segment` bytes (64 KiB by default; `Transport.mtu`): at the gigabytes of one
iteration, 4 KiB packets would cost hours on this machine. The window keeps 256 KiB in flight
plus a segment per hop, the ECN ramp no fewer than 2-8 segments; sim/README.md measures what
the coarser packets change.
"""
from __future__ import annotations

import time
from collections import defaultdict, deque

from controller.aggregation import AggregationPlanner
from controller.multicast import MulticastPlanner
from fabricmodel.ethereal import Flow
from fabricmodel.topology import Topology
from sim.collective import Policy
from sim.engine import MCAST
from sim.fabric import LinkSpec, SimFabric, Transport, ip_int
from sim.workloads import steps as make_steps
from workloads import hierarchy
from workloads.dag import COLLECTIVE, COMPUTE, SEND, Op, Workload
from workloads.schedule import Scheduler, compute_bound

SEGMENT = 64 * 1024
WINDOW_BYTES = 256 * 1024
RINGS = {"ring": 2, "ring-allgather": 1, "ring-reducescatter": 1}   # steps per rank, x


def training_transport(segment: int = SEGMENT, rto_s: float = Transport.rto_s) -> Transport:
    """The default transport with `segment`-byte packets: the default's bytes in flight per QP
    plus one segment per hop of a 6-hop path, because each switch stores and forwards a whole
    segment (at 64 KiB and 400 Gbps, 1.3 us per hop: without them one QP could not fill its
    link)."""
    return Transport(mtu=segment, window=-(-WINDOW_BYTES // segment) + 6, rto_s=rto_s,
                     ecn_kmin=max(100_000, 2 * segment), ecn_kmax=max(400_000, 8 * segment))


class _Net:
    """One engine job: `arrive(host, step)` opens the host's sends, `done(host)` is called when
    the host has finished every step."""

    def __init__(self, arrive, done) -> None:
        self.arrive, self.done = arrive, done


class DagRun:
    def __init__(self, wl: Workload, topo: Topology, policy: str = "ecmp", *,
                 allreduce: str = "ring", allgather: str = "ring",
                 intra_bytes_s: float = 300e9, link: LinkSpec | None = None,
                 transport: Transport | None = None, seed: int = 0, progress=None,
                 placement: list[int] | None = None) -> None:
        hosts = -(-wl.n // wl.gpus_per_host)
        # the fabric host of each of the workload's hosts (rank // gpus_per_host)
        self.place = list(placement) if placement is not None else list(range(hosts))
        if len(self.place) != hosts or len(set(self.place)) != hosts:
            raise ValueError(f"placement {self.place} must give {hosts} distinct fabric hosts")
        if len(topo.hosts) < hosts or max(self.place) >= len(topo.hosts):
            raise ValueError(f"{wl.name} needs {hosts} hosts of {wl.gpus_per_host} GPUs; "
                             f"{topo.name} has {len(topo.hosts)}")
        if allreduce not in hierarchy.ALLREDUCE:
            raise ValueError(f"unknown all-reduce algorithm {allreduce!r} "
                             f"(known: {', '.join(hierarchy.ALLREDUCE)})")
        if allgather not in hierarchy.ALLGATHER:
            raise ValueError(f"unknown all-gather algorithm {allgather!r} "
                             f"(known: {', '.join(hierarchy.ALLGATHER)})")
        self.wl, self.topo, self.policy = wl, topo, policy
        self.algorithms = {"all-reduce": allreduce, "all-gather": allgather}
        self.intra, self.progress, self.seed = intra_bytes_s, progress, seed
        self.fab = SimFabric(topo, link, transport or training_transport(), seed=seed + 1)
        self.sender = Policy(self.fab, policy, seed)
        self.sched = Scheduler(wl)
        self.bound = compute_bound(wl)      # before the fabric runs: a deadlock is refused here
        self.names = [h.name for h in self.fab.hosts]
        e = self.e = self.fab.engine
        e.on_arrive, e.on_done = self._arrive, self._done
        e.on_timer, e.on_timeout = self._timer, self._timeout
        self.nets: dict[int, _Net] = {}
        self.timers: dict[int, object] = {}
        self.tid = 0
        self.colls: dict[tuple, _Collective] = {}
        self.p2p: dict[tuple, object] = {}       # message -> its posted receive, or "arrived"
        self.finish_at = [0.0] * wl.n
        self.done_q: deque = deque()
        self.draining = False
        self.mcast: dict[tuple, int] = {}
        self.aggs: dict[tuple, int] = {}
        self.mcast_planner = MulticastPlanner(topo)
        self.agg_planner = AggregationPlanner(topo, self.mcast_planner)
        self.python_s = 0.0

    # ---- the clock and the engine's callbacks -------------------------------------------------
    def now(self) -> float:
        return float(self.fab.engine.now_s())

    def at(self, delay: float, fn) -> None:
        self.tid += 1
        self.timers[self.tid] = fn
        self.e.timer(max(0.0, delay), self.tid)

    def _timer(self, tid: int) -> None:
        self._python(self.timers.pop(tid))

    def _arrive(self, job: int, host: int, step: int) -> None:
        self._python(lambda: self.nets[job].arrive(host, step))

    def _done(self, job: int, host: int) -> None:
        self._python(lambda: self.nets[job].done(host))

    def _timeout(self, qp: int) -> None:
        self._python(lambda: self.sender.timeout(qp))

    def _python(self, fn) -> None:
        if self.draining:                # called back from inside Python: counted there
            return fn()
        start = time.perf_counter()
        fn()
        self._drain()
        self.python_s += time.perf_counter() - start

    # ---- ops ------------------------------------------------------------------------------------
    def finish(self, rank: int, op: Op) -> None:
        self.finish_at[rank] = self.now()
        self.done_q.append((rank, op))

    def _drain(self) -> None:
        if self.draining:
            return
        self.draining = True
        try:
            while self.done_q:
                rank, op = self.done_q.popleft()
                if self.progress is not None:
                    self.progress.update(1)
                for r, o in self.sched.finish(rank, op):
                    self._begin(r, o)
        finally:
            self.draining = False

    def _begin(self, rank: int, op: Op) -> None:
        if op.kind == COMPUTE:
            self.at(op.duration_s, lambda: self.finish(rank, op))
        elif op.kind == COLLECTIVE:
            inst = self.sched.instance(rank, op)
            coll = self.colls.get(inst)
            if coll is None:
                coll = self.colls[inst] = _Collective(self, inst, op)
            coll.arrive(rank, op)
        elif op.kind == SEND:
            self._send(rank, op)
        else:
            key = self.sched.message(rank, op)
            if self.p2p.pop(key, None) == "arrived":
                self.finish(rank, op)
            else:
                self.p2p[key] = (rank, op)

    def _delivered(self, key: tuple) -> None:
        """A message's bytes arrived: its receive finishes now if posted, else when it is."""
        posted = self.p2p.pop(key, None)
        if posted is None:
            self.p2p[key] = "arrived"
        else:
            self.finish(*posted)

    def _send(self, rank: int, op: Op) -> None:
        g = self.wl.gpus_per_host
        src, dst = self.place[rank // g], self.place[op.peer // g]
        key = self.sched.message(rank, op)
        if src == dst or op.bytes == 0:
            def copied():
                self.finish(rank, op)
                self._delivered(key)
            self.at(op.bytes / self.intra, copied)
            return
        job = self.e.add_job()
        self.e.add_step(job, src, 0)
        self.e.add_step(job, dst, op.bytes)

        def arrive(host, step):
            if host == src:
                self.sender.open(job, src, 0, [Flow(self.names[src], self.names[dst], op.bytes,
                                                    dst_qp=job)])

        def done(host):
            if host == src:
                self.finish(rank, op)
            else:
                self._delivered(key)

        self.nets[job] = _Net(arrive, done)
        self.e.start_rank(job, src)
        self.e.start_rank(job, dst)

    # ---- network phases -------------------------------------------------------------------------
    def net_job(self, phase: hierarchy.Phase, sp: hierarchy.Span, done) -> int:
        """An engine job for one collective's network phase over the span's hosts."""
        job = self.e.add_job()
        hosts, per = sp.hosts, phase.ranks // sp.k
        if phase.algorithm in RINGS:
            arrive = self._ring(job, phase, hosts)
        elif phase.algorithm in ("netreduce", "switchml"):
            arrive = self._aggregate(job, phase, hosts, per)
        elif phase.algorithm == "multicast":
            arrive = self._multicast(job, phase, hosts, per)
        else:
            arrive = self._steps(job, phase, hosts, per)
        self.nets[job] = _Net(arrive, done)
        return job

    def _ring(self, job, phase, hosts):
        """A ring over phase.ranks ranks laid host by host: each step, each host's last rank
        sends one chunk to the next host's first."""
        n, k = phase.ranks, len(hosts)
        chunk = max(1, phase.bytes // n)     # a buffer smaller than the ring still moves
        for h in hosts:
            for _ in range(RINGS[phase.algorithm] * (n - 1)):
                self.e.add_step(job, h, chunk)
        nxt = {hosts[i]: hosts[(i + 1) % k] for i in range(k)}

        def arrive(host, step):
            self.sender.open(job, host, step, [Flow(self.names[host], self.names[nxt[host]],
                                                    chunk, dst_qp=job)])
        return arrive

    def _steps(self, job, phase, hosts, per):
        """Any collective of sim/workloads.py over the ranks; flows inside a host left out."""
        steps = make_steps(phase.algorithm, phase.ranks, phase.bytes)
        out = defaultdict(list)
        for s, step in enumerate(steps):
            expect = dict.fromkeys(hosts, 0)
            for f in step.flows:
                a, b = hosts[f.src // per], hosts[f.dst // per]
                if a != b:
                    expect[b] += f.bytes
                    out[(a, s)].append(Flow(self.names[a], self.names[b], f.bytes, dst_qp=job))
            for h in hosts:
                self.e.add_step(job, h, expect[h])
        return lambda host, step: self.sender.open(job, host, step, out.get((host, step), []))

    def _aggregate(self, job, phase, hosts, per):
        """Every rank's buffer to the aggregating switch, the sum back to every host."""
        agg_ip = self._aggregator(hosts, phase.ranks)
        mtu = hierarchy.SWITCHML_PAYLOAD if phase.algorithm == "switchml" else \
            self.fab.transport.mtu
        for h in hosts:
            self.e.add_step(job, h, phase.bytes)

        def arrive(host, step):
            for _ in range(per):
                self.e.raw_send(job, host, 0, agg_ip, 0, phase.bytes, mtu, self.fab.link.bps)
        return arrive

    def _multicast(self, job, phase, hosts, per):
        """Every host multicasts its ranks' shards once to the group, at 1/(k-1) of the line
        rate: when all k send at once each receiver's link is exactly full (the paper bounds
        injection with a token passed along a ring, two roots at a time; multicast has no
        congestion control, so unpaced it would queue k-1 senders on every downlink)."""
        gip = self._group(hosts)
        shard = phase.bytes * per // phase.ranks
        for h in hosts:
            self.e.add_step(job, h, shard * (len(hosts) - 1))

        def arrive(host, step):
            self.e.raw_send(job, host, 0, gip, MCAST, shard,
                            self.fab.transport.mtu, self.fab.link.bps / (len(hosts) - 1))
        return arrive

    def _group(self, hosts: tuple[int, ...]) -> int:
        if hosts not in self.mcast:
            group = self.mcast_planner.create("train", f"allgather-{len(self.mcast)}",
                                              [self.names[h] for h in hosts])
            gip = ip_int(group.group_ip)
            for sw, replicas in group.replicas.items():
                self.e.add_mcast(gip, self.fab.index[sw], [r.port for r in replicas])
            self.mcast[hosts] = gip
        return self.mcast[hosts]

    def _aggregator(self, hosts: tuple[int, ...], contributions: int) -> int:
        key = (hosts, contributions)
        if key not in self.aggs:
            agg = self.agg_planner.create(len(self.aggs) + 1, [self.names[h] for h in hosts], 64)
            ip = ip_int(agg.aggregator_ip)
            if ip in self.aggs.values():
                raise ValueError(f"two NetReduce groups aggregate in {agg.leaf}: the simulator "
                                 f"keeps one group per aggregating switch")
            gip = ip_int(agg.result_group.group_ip)
            for sw, replicas in agg.result_group.replicas.items():
                self.e.add_mcast(gip, self.fab.index[sw], [r.port for r in replicas])
            self.e.set_agg(self.fab.index[agg.leaf], ip, [ip] * contributions, gip)
            self.aggs[key] = ip
        return self.aggs[key]

    # ---- the run --------------------------------------------------------------------------------
    def run(self, limit_s: float = 1000.0) -> dict:
        wall = time.perf_counter()
        for r, op in self.sched.start():
            self._begin(r, op)
        self._drain()
        self.fab.run(limit_s)
        wall = time.perf_counter() - wall
        e, n_hosts = self.e, len(self.place)
        nic = [self.fab.port_bytes(self.names[h], 0) for h in self.place]
        iteration = max(self.finish_at)
        bound = self.bound
        events = self.fab.events()
        row = {
            "workload": self.wl.name, "gpus": self.wl.n, "gpus_per_host": self.wl.gpus_per_host,
            "hosts": n_hosts, "topology": self.topo.name, "policy": self.policy,
            "allreduce": self.algorithms["all-reduce"],
            "allgather": self.algorithms["all-gather"],
            "intra_gbytes_s": self.intra / 1e9, "ok": self.sched.left == 0,
            "iteration_s": iteration if self.sched.left == 0 else None,
            "compute_bound_s": bound, "exposed_comm_s": iteration - bound,
            "ops_left": self.sched.left, "nic_bytes_max": max(nic), "nic_bytes_mean":
                sum(nic) / len(nic), "jobs": len(self.nets), "packets": int(e.packets_sent),
            "retransmitted": int(e.retransmitted), "timeouts": int(e.timeouts),
            "ecn_marked": int(e.marked), "max_queue_kb": int(e.max_queue_bytes) / 1e3,
            "segment": self.fab.transport.mtu, "gbps": self.fab.link.gbps,
            "events": events, "wall_s": wall, "python_s": self.python_s,
            "facts": self.wl.facts,
        }
        self.fab.close()
        return row


class _Collective:
    """One collective instance: per host, once its members have issued it, the phases of
    `hierarchy.plan` in turn; the members' ops finish when the host's last phase ends."""

    def __init__(self, run: DagRun, inst: tuple, op: Op) -> None:
        self.run, self.inst = run, inst
        sp = hierarchy.span(op.group, run.wl.gpus_per_host)
        self.sp = hierarchy.Span(tuple(run.place[h] for h in sp.hosts), sp.m)  # fabric hosts
        algo = run.algorithms.get(op.coll, "ring")
        self.phases = hierarchy.plan(op.coll, op.bytes, self.sp, algo, run.intra)
        self.waiting: dict[int, list] = defaultdict(list)
        self.job, self.net_start, self.left = None, {}, self.sp.k

    def arrive(self, rank: int, op: Op) -> None:
        h = self.run.place[rank // self.run.wl.gpus_per_host]
        self.waiting[h].append((rank, op))
        if op.bytes == 0:               # nothing to move: a barrier over the whole group
            if sum(map(len, self.waiting.values())) == self.sp.n:
                for host in list(self.waiting):
                    self.phase(host, len(self.phases))
        elif len(self.waiting[h]) == self.sp.m:
            self.phase(h, 0)

    def phase(self, h: int, i: int) -> None:
        run = self.run
        if i == len(self.phases):
            for rank, op in self.waiting.pop(h):
                run.finish(rank, op)
            self.left -= 1
            if not self.left:
                del run.colls[self.inst]
            return
        p = self.phases[i]
        if p.where == "intra":
            delay = p.seconds
            if p.algorithm == "overlap":
                delay = self.net_start[h] + p.seconds - run.now()
            if delay <= 0:
                self.phase(h, i + 1)
            else:
                run.at(delay, lambda: self.phase(h, i + 1))
            return
        if self.job is None:
            self.job = run.net_job(p, self.sp, lambda host: self.phase(host, i + 1))
        self.net_start[h] = run.now()
        run.e.start_rank(self.job, h)
