"""NetReduce aggregation jobs: where the sum is computed, in which register slots, for whom.

The aggregating leaf is the one with the most workers (fewest bytes cross the fabric); its
service address (`.253` of its subnet, routed to it like its hosts) is the job's aggregator
IP. Slots are a contiguous range of the leaf's register pool, so jobs on one leaf never
share a slot. The result goes back to every worker through a multicast group whose tree
includes the aggregating leaf. Field limits follow the aggregation header (p4src/README.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from controller.allocate import first_fit
from controller.multicast import MulticastError, MulticastGroup, MulticastPlanner
from fabricmodel.routing import Routing
from fabricmodel.topology import Topology

DEFAULT_SLOTS_PER_SWITCH = 1024
MAX_WORKERS = 255                # num_workers is a u8
MAX_JOB_ID = 0xFFFF              # job_id is a u16


def aggregating_leaf(topo: Topology, workers) -> str:
    """The leaf with the most workers (fewest bytes cross the fabric); ties: lowest device id."""
    leaves = [topo.host(w).leaf for w in workers]
    return min(dict.fromkeys(leaves), key=lambda lf: (-leaves.count(lf), topo.switch(lf).device_id))


def workers_problem(topo: Topology, workers, most: int = MAX_WORKERS) -> str | None:
    """Why `workers` cannot be the workers of one job (2..most distinct hosts of the
    topology), or None."""
    if not 2 <= len(workers) <= most or len(set(workers)) != len(workers):
        return f"needs 2..{most} distinct workers, got {len(workers)}"
    unknown = [w for w in workers if w not in topo.hosts]
    if unknown:
        return f"unknown host {', '.join(map(repr, unknown))}"
    return None


class AggregationError(Exception):
    """An invalid or unsatisfiable aggregation request; the message says why."""


@dataclass(frozen=True)
class Worker:
    worker_id: int               # 0-based, the header's worker_id
    host: str
    ip: str
    leaf: str


@dataclass(frozen=True)
class AggregationJob:
    job_id: int
    leaf: str                    # the aggregating switch
    aggregator_ip: str
    slot_base: int
    slots: int
    workers: tuple[Worker, ...]
    result_group: MulticastGroup

    @property
    def num_workers(self) -> int:
        return len(self.workers)

    @property
    def slot_range(self) -> range:
        return range(self.slot_base, self.slot_base + self.slots)


@dataclass
class AggregationPlanner:
    topo: Topology
    multicast: MulticastPlanner
    slots_per_switch: int = DEFAULT_SLOTS_PER_SWITCH
    jobs: dict[int, AggregationJob] = field(default_factory=dict)

    def create(self, job_id: int, workers: list[str], slots: int, *, leaf: str | None = None,
               routing: Routing | None = None) -> AggregationJob:
        self._check(job_id, workers, slots, leaf)
        leaf = leaf or aggregating_leaf(self.topo, workers)
        base = first_fit(((j.slot_base, j.slot_base + j.slots) for j in self.jobs.values()
                          if j.leaf == leaf), slots, self.slots_per_switch)
        if base is None:
            free = self.slots_per_switch - sum(j.slots for j in self.jobs.values()
                                               if j.leaf == leaf)
            raise AggregationError(f"aggregation job {job_id}: {leaf} has no run of {slots} "
                                   f"free slots ({free} of {self.slots_per_switch} free)")
        try:
            group = self.multicast.create(f"netreduce-{job_id}", "result", list(workers),
                                          routing=routing, extra_leaves=[leaf])
        except MulticastError as exc:
            raise AggregationError(f"aggregation job {job_id}: result group: {exc}") from None
        ordered = sorted(workers, key=lambda w: self.topo.host(w).rank)
        job = AggregationJob(
            job_id, leaf, self.topo.switch(leaf).service_ip, base, slots,
            tuple(Worker(i, w, self.topo.host(w).ip, self.topo.host(w).leaf)
                  for i, w in enumerate(ordered)),
            group)
        self.jobs[job_id] = job
        return job

    def delete(self, job_id: int) -> AggregationJob:
        try:
            job = self.jobs.pop(job_id)
        except KeyError:
            raise AggregationError(f"no aggregation job {job_id}") from None
        self.multicast.delete(job.result_group.job, job.result_group.communicator)
        return job

    def _check(self, job_id, workers, slots, leaf) -> None:
        if isinstance(job_id, bool) or not isinstance(job_id, int) or not 1 <= job_id <= MAX_JOB_ID:
            raise AggregationError(f"job_id must be an integer in 1..{MAX_JOB_ID}, got {job_id!r}")
        if job_id in self.jobs:
            raise AggregationError(f"aggregation job {job_id} already exists")
        problem = workers_problem(self.topo, workers)
        if problem:
            raise AggregationError(f"aggregation job {job_id}: {problem}")
        if isinstance(slots, bool) or not isinstance(slots, int) or not 1 <= slots <= self.slots_per_switch:
            raise AggregationError(f"aggregation job {job_id}: slots must be an integer in "
                                   f"1..{self.slots_per_switch}, got {slots!r}")
        if leaf is not None and (leaf not in self.topo.switches
                                 or self.topo.switches[leaf].tier != "leaf"):
            raise AggregationError(f"aggregation job {job_id}: {leaf!r} is not a leaf")
