"""NetReduce jobs: the aggregation tree of a job and the resources it takes on each switch.

A job whose workers share one leaf aggregates on that leaf. A job spanning several leaves
aggregates on each of its leaves (over that leaf's workers) and then on one spine (over the
leaves); the spine multicasts the sum down to the leaves, and each leaf multicasts it to
its workers. The spine is the one with the fewest NetReduce jobs (ties: the lowest device
id), so jobs spread over the spines. Only leaf-spine fabrics get a spine stage.

Every switch of the tree holds one `Stage` of the job: its aggregator address, job index,
slots, message entries, connections and the multicast group its result leaves by.
`controller.switch_plan` turns a stage into what the switch must hold (the connections of its
children, its parent, its replicas) and `controller.encode_fabric` writes that as fabric.p4's
`nr_*` tables and a PRE group (docs/fabric-p4.md, "NetReduce"). The switch keeps its
aggregation state in registers that only the data plane writes; stale register state of an
earlier job in the same slots is told apart by the job's generation (8 bits, never 0).

Resources per switch, from fabric.p4's sizes: slots = credits x NR_MSG_PKTS of NR_SLOTS,
message entries = credits of NR_MSGS, connections of NR_CONNS, job indices of NR_JOBS.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from controller import multicast
from controller.aggregation import workers_problem
from controller.allocate import first_fit
from fabricmodel.rocev2 import (
    KIND_DOWN,
    KIND_UP,
    NR_CONNS,
    NR_JOBS,
    NR_MSG_PKTS,
    NR_MSGS,
    NR_SLOTS,
    QPN_PEER_MASK,
    nr_qp_index,
    qpn,
)
from fabricmodel.topology import Topology

MAX_CHILDREN = 32                     # the slot bitmaps are 32 bits


class NetReduceError(Exception):
    """An invalid or unsatisfiable NetReduce job; the message says why."""


def spine_address(spine_index: int) -> str:
    """A spine's aggregator address. Leaves send partial sums straight out of the port to
    the spine, so the address needs no route; it only names the spine in nr_conns."""
    return f"10.255.{spine_index & 0xFF}.253"


@dataclass(frozen=True)
class Stage:
    """One switch of a job's tree."""
    switch: str
    address: str                      # the aggregator address on this switch
    job_index: int                    # nr_jobs key
    slot_base: int
    msg_base: int
    conn_base: int
    group_id: int
    children: tuple[str, ...]         # worker hosts (leaf) or leaves (spine)
    parent: str | None                # the spine above a leaf, if any


@dataclass(frozen=True)
class NetReduceJob:
    job_id: int
    name: str
    workers: tuple[str, ...]          # worker w = rank w of the communicator
    credits: int
    generation: int
    stages: tuple[Stage, ...]         # leaves first, then the spine (if any)

    @property
    def spine(self) -> str | None:
        top = self.stages[-1]
        return top.switch if len(self.stages) > 1 else None

    def address_of(self, worker: str, topo: Topology) -> str:
        """Where `worker` sends: its own leaf's aggregator address."""
        return topo.switch(topo.host(worker).leaf).service_ip

    @property
    def slots(self) -> int:
        return self.credits * NR_MSG_PKTS


def next_generation(previous: int) -> int:
    """The generation after `previous` (8 bits, never 0: fresh registers hold 0). SwitchML
    jobs take theirs from the same sequence (controller.intent)."""
    return previous % 255 + 1


@dataclass
class NetReducePlanner:
    topo: Topology
    jobs: dict[int, NetReduceJob] = field(default_factory=dict)
    generation: int = 0

    def create(self, job_id: int, name: str, workers: list[str], credits: int = 8, *,
               used_groups: set[int] = frozenset()) -> NetReduceJob:
        self._check(job_id, workers, credits)
        leaves: dict[str, list[str]] = {}
        for w in workers:
            leaves.setdefault(self.topo.host(w).leaf, []).append(w)
        spine = self._spine(sorted(leaves)) if len(leaves) > 1 else None
        groups = self._group_ids(len(leaves) + (spine is not None), used_groups)
        stages = []
        for leaf, local in sorted(leaves.items(), key=lambda kv: self.topo.switch(kv[0]).device_id):
            if len(local) > MAX_CHILDREN:
                raise NetReduceError(f"NetReduce job {job_id}: {len(local)} workers on {leaf}, "
                                     f"at most {MAX_CHILDREN} per switch")
            stages.append(self._stage(leaf, self.topo.switch(leaf).service_ip, credits,
                                      len(local), groups.pop(0),
                                      tuple(local), spine, job_id))
        if spine is not None:
            stages.append(self._stage(spine, spine_address(self.topo.switch(spine).index),
                                      credits, len(leaves), groups.pop(0),
                                      tuple(s.switch for s in stages), None, job_id))
        self.generation = next_generation(self.generation)
        job = NetReduceJob(job_id, name, tuple(workers), credits, self.generation, tuple(stages))
        self.jobs[job_id] = job
        return job

    def delete(self, job_id: int) -> NetReduceJob:
        try:
            return self.jobs.pop(job_id)
        except KeyError:
            raise NetReduceError(f"no NetReduce job {job_id}") from None

    # ---- allocation ---------------------------------------------------------------------
    def _check(self, job_id, workers, credits) -> None:
        if isinstance(job_id, bool) or not isinstance(job_id, int) or not 1 <= job_id <= 0xFFFF:
            raise NetReduceError(f"job_id must be an integer in 1..65535, got {job_id!r}")
        if job_id in self.jobs:
            raise NetReduceError(f"NetReduce job {job_id} already exists")
        if any((j.job_id & 0xFF) == (job_id & 0xFF) for j in self.jobs.values()):
            raise NetReduceError(f"NetReduce job {job_id}: QP index {job_id & 0xFF} is taken by "
                                 f"another job (job ids must differ in their low byte)")
        problem = workers_problem(self.topo, workers)
        if problem:
            raise NetReduceError(f"NetReduce job {job_id}: {problem}")
        if isinstance(credits, bool) or not isinstance(credits, int) or credits < 1 \
                or credits & (credits - 1) or credits * NR_MSG_PKTS > NR_SLOTS:
            raise NetReduceError(f"NetReduce job {job_id}: credits must be a power of two in "
                                 f"1..{NR_SLOTS // NR_MSG_PKTS}, got {credits!r}")
        if len({self.topo.host(w).leaf for w in workers}) > 1 and self.topo.kind != "leaf-spine":
            raise NetReduceError(f"NetReduce job {job_id}: workers on several leaves need a "
                                 f"leaf-spine fabric (this is {self.topo.kind})")

    def _stages_on(self, switch: str) -> list[Stage]:
        return [s for j in self.jobs.values() for s in j.stages if s.switch == switch]

    def _spine(self, leaves: list[str]) -> str:
        spines = [s for s in self.topo.tier("spine")
                  if all(self.topo.links_between(lf, s.name) for lf in leaves)]
        if not spines:
            raise NetReduceError(f"no spine reaches every leaf of {', '.join(leaves)}")
        return min(spines, key=lambda s: (len(self._stages_on(s.name)), s.device_id)).name

    def _group_ids(self, count: int, used: set[int]) -> list[int]:
        taken = set(used) | {s.group_id for j in self.jobs.values() for s in j.stages}
        # From the top of the id space down: groups and SwitchML jobs take them from 1 up.
        try:
            return multicast.group_ids(taken, count, from_top=True)
        except multicast.MulticastError as err:
            raise NetReduceError(str(err)) from None

    def _stage(self, switch, address, credits, conns, group_id, children, parent,
               job_id) -> Stage:
        here = self._stages_on(switch)
        slots = credits * NR_MSG_PKTS
        bases = []
        for what, size, capacity, used in (
                ("slots", slots, NR_SLOTS, [(s.slot_base, s.slot_base + self._slots(s))
                                            for s in here]),
                ("message entries", credits, NR_MSGS,
                 [(s.msg_base, s.msg_base + self._slots(s) // NR_MSG_PKTS) for s in here]),
                ("connections", conns, NR_CONNS,
                 [(s.conn_base, s.conn_base + len(s.children)) for s in here]),
                ("job indices", 1, NR_JOBS, [(s.job_index, s.job_index + 1) for s in here])):
            base = first_fit(used, size, capacity)
            if base is None:
                raise NetReduceError(f"NetReduce job {job_id}: {switch} has no run of {size} "
                                     f"free {what} (of {capacity})")
            bases.append(base)
        slot_base, msg_base, conn_base, job_index = bases
        return Stage(switch, address, job_index, slot_base, msg_base, conn_base, group_id,
                     children, parent)

    def _slots(self, stage: Stage) -> int:
        job = next(j for j in self.jobs.values() if stage in j.stages)
        return job.slots


def up_qpn(topo: Topology, leaf: str, job_id: int) -> int:
    """The QP a leaf sends its partial sums of job `job_id` to its spine on."""
    return qpn(KIND_UP, topo.switch(leaf).index & QPN_PEER_MASK, nr_qp_index(job_id))


def down_qpn(topo: Topology, leaf: str, job_id: int) -> int:
    """The QP the spine sends job `job_id`'s sums down to a leaf on."""
    return qpn(KIND_DOWN, topo.switch(leaf).index & QPN_PEER_MASK, nr_qp_index(job_id))
