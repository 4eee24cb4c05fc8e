"""What the operator asked fabricd for, independent of any switch: the topology, failed links,
vClos slices, multicast groups, aggregation jobs and installed Ethereal steps.

Every change validates first and raises `IntentError` (with the gRPC status it maps to)
before touching anything, so a refused request leaves the intent as it was. The intent is
saved as JSON so that a restarted fabricd reconciles to the same state instead of wiping it.
"""
from __future__ import annotations

import copy
import json
from dataclasses import asdict, dataclass, field

import yaml

from controller import aggregation, multicast
from controller.allocate import first_fit
from controller.netreduce import (
    NetReduceError,
    NetReduceJob,
    NetReducePlanner,
    Stage,
    next_generation,
)
from controller.vclos import AllocationError, Slice, VClosAllocator
from fabricmodel import ethereal, topology
from fabricmodel.routing import Routing
from fabricmodel.topology import Topology, TopologyError


class IntentError(Exception):
    """A refused request; `code` is the gRPC status name fabricd answers with."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class GroupIntent:
    name: str
    group_id: int
    members: tuple[str, ...]
    slice_id: int
    loss: float = 0.0             # drop rate of replicas toward members (loss injection)

    @property
    def address(self) -> str:
        return multicast.group_ip(self.group_id)


@dataclass(frozen=True)
class JobIntent:
    name: str
    job_id: int
    workers: tuple[str, ...]
    leaf: str
    slot_base: int
    slots: int
    group_id: int            # the result's multicast group (not a named GroupIntent)
    slice_id: int
    generation: int          # tells the job's slot state from an earlier job's in those slots

    @property
    def result_ip(self) -> str:
        """Results travel as multicast to this address, through group `group_id`."""
        return multicast.group_ip(self.group_id)


@dataclass(frozen=True)
class StepIntent:
    name: str
    flows: tuple[ethereal.Flow, ...]
    pins: bool


@dataclass
class Intent:
    topo: Topology
    topo_yaml: str
    slot_capacity: int = 0                       # aggregation slots per leaf (from the P4Info)
    max_workers: int = aggregation.MAX_WORKERS   # per aggregation job; fabricd: the P4Info's
    # Deployment knobs, set by fabricd's options at start (not saved): the queue depth at
    # which egress marks ECN CE, or (when > 0) the queueing delay in microseconds instead,
    # and how ECMP groups pick a member (the baselines).
    ecn_threshold: int = 32
    ecn_delay_us: int = 0
    ecmp_mode: str = "hash"
    failed: set[int] = field(default_factory=set)
    allocator: VClosAllocator | None = None
    groups: dict[str, GroupIntent] = field(default_factory=dict)
    jobs: dict[str, JobIntent] = field(default_factory=dict)
    nr_jobs: dict[str, NetReduceJob] = field(default_factory=dict)
    generation: int = 0      # the last one given to an aggregation job (netreduce.next_generation)
    steps: dict[str, StepIntent] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.allocator is None:
            self.allocator = VClosAllocator(self.topo)

    @classmethod
    def from_yaml(cls, text: str, slot_capacity: int = 0, source: str = "<request>",
                  max_workers: int = aggregation.MAX_WORKERS) -> Intent:
        return cls(parse_topology(text, source), text, slot_capacity, max_workers)

    def clone(self) -> Intent:
        """A copy to try a change on (the topology itself is immutable and shared)."""
        new = copy.copy(self)
        new.failed = set(self.failed)
        new.allocator = VClosAllocator(self.topo, self.allocator.isolation,
                                       dict(self.allocator.slices))
        new.groups, new.jobs, new.steps = dict(self.groups), dict(self.jobs), dict(self.steps)
        new.nr_jobs = dict(self.nr_jobs)
        return new

    # -- queries ------------------------------------------------------------------------------
    @property
    def slices(self) -> dict[str, Slice]:
        return self.allocator.slices

    def slice_of_host(self, host: str) -> Slice | None:
        return next((s for s in self.slices.values() if host in s.hosts), None)

    def routing(self, sl: Slice | None = None) -> Routing:
        """Routing of a slice over its own links, or of unsliced traffic over the links no
        slice holds."""
        if sl is not None:
            return sl.routing(self.topo, self.failed)
        held = set().union(*(s.links for s in self.slices.values())) if self.slices else set()
        return Routing(self.topo, self.failed, set(range(len(self.topo.links))) - held)

    def unsliced_hosts(self) -> list[str]:
        sliced = {h for s in self.slices.values() for h in s.hosts}
        return [h for h in self.topo.hosts if h not in sliced]

    def step_plan(self, step: StepIntent) -> ethereal.StepPlan:
        sl = self._common_slice(step.flows[0].src, [f.src for f in step.flows]
                                + [f.dst for f in step.flows], "step " + step.name)
        return ethereal.plan_step(self.topo, list(step.flows), failed=self.failed,
                                  routing=self.routing(sl), pin_all=step.pins)

    def _common_slice(self, first: str, hosts, what: str) -> Slice | None:
        sl = self.slice_of_host(first)
        for h in hosts:
            other = self.slice_of_host(h)
            if other != sl:
                raise IntentError("FAILED_PRECONDITION",
                                  f"{what}: {first} is in {_slice_name(sl)} but {h} is in "
                                  f"{_slice_name(other)}; traffic cannot cross slices")
        return sl

    # -- changes ------------------------------------------------------------------------------
    def set_topology(self, text: str) -> None:
        topo = parse_topology(text, "<request>")    # a malformed file is refused as such
        if self.slices or self.groups or self.jobs or self.steps:
            raise IntentError("FAILED_PRECONDITION",
                              "delete every slice, group, job and step before changing the "
                              "topology")
        self.topo = topo
        self.topo_yaml = text
        self.failed = set()
        self.allocator = VClosAllocator(self.topo)

    def set_link(self, name: str, up: bool) -> str:
        link = self._link(name)
        if link.a in self.topo.hosts:
            raise IntentError("INVALID_ARGUMENT",
                              f"link {link.name} is a host link; only fabric links fail over")
        (self.failed.discard if up else self.failed.add)(link.index)
        for step in self.steps.values():
            self._plan_or_refuse(step, f"taking {link.name} down")
        return link.name

    def create_slice(self, name: str, hosts: int) -> Slice:
        _check_name(name, "slice")
        busy = {h for g in self.groups.values() for h in g.members} | {
            h for j in self.jobs.values() for h in j.workers} | {
            h for s in self.steps.values() for f in s.flows for h in (f.src, f.dst)}
        try:
            sl = self.allocator.allocate(name, hosts)
        except AllocationError as err:
            code = "ALREADY_EXISTS" if name in self.slices else (
                "INVALID_ARGUMENT" if not isinstance(hosts, int) or hosts < 1
                else "RESOURCE_EXHAUSTED")
            raise IntentError(code, str(err)) from None
        clash = sorted(set(sl.hosts) & busy)
        if clash:
            self.allocator.release(name)
            raise IntentError("FAILED_PRECONDITION",
                              f"slice {name}: hosts {', '.join(clash)} have groups, jobs or "
                              "steps outside any slice; delete those first")
        return sl

    def delete_slice(self, name: str) -> None:
        sl = self.slices.get(name)
        if sl is None:
            raise IntentError("NOT_FOUND", f"no slice {name!r}")
        users = [g.name for g in self.groups.values() if g.slice_id == sl.slice_id] + [
            j.name for j in self.jobs.values() if j.slice_id == sl.slice_id] + [
            s.name for s in self.steps.values() if self.slice_of_host(s.flows[0].src) == sl]
        if users:
            raise IntentError("FAILED_PRECONDITION",
                              f"slice {name} is used by {', '.join(sorted(users))}")
        self.allocator.release(name)

    def install_step(self, name: str, flows: list[ethereal.Flow], pins: bool) -> StepIntent:
        _check_name(name, "step")
        if name in self.steps:
            raise IntentError("ALREADY_EXISTS", f"step {name!r} is installed")
        if not flows:
            raise IntentError("INVALID_ARGUMENT", f"step {name}: no flows")
        for f in flows:
            for h in (f.src, f.dst):
                self._host(h)
            if f.src == f.dst:
                raise IntentError("INVALID_ARGUMENT", f"step {name}: flow {f.src}->{f.dst} "
                                  "goes nowhere")
            if f.bytes < 1:
                raise IntentError("INVALID_ARGUMENT",
                                  f"step {name}: flow {f.src}->{f.dst} has {f.bytes} bytes")
        step = StepIntent(name, tuple(flows), pins)
        self._plan_or_refuse(step, f"step {name}")
        self.steps[name] = step
        return step

    def _plan_or_refuse(self, step: StepIntent, what: str) -> ethereal.StepPlan:
        try:
            return self.step_plan(step)
        except RuntimeError as err:  # no live path left between two leaves
            raise IntentError("FAILED_PRECONDITION", f"{what}: {err}") from None

    def remove_step(self, name: str) -> None:
        if self.steps.pop(name, None) is None:
            raise IntentError("NOT_FOUND", f"no step {name!r}")

    def create_group(self, name: str, members: list[str], loss: float = 0.0) -> GroupIntent:
        _check_name(name, "multicast group")
        if name in self.groups:
            raise IntentError("ALREADY_EXISTS", f"multicast group {name!r} exists")
        if not 0 <= loss < 1:
            raise IntentError("INVALID_ARGUMENT", f"multicast group {name}: loss must be a "
                              f"drop rate in [0, 1), got {loss!r}")
        members = self._members(members, f"multicast group {name}", 2)
        sl = self._common_slice(members[0], members, f"multicast group {name}")
        group = GroupIntent(name, self._free_group_id(), tuple(members),
                            sl.slice_id if sl else 0, float(loss))
        self.groups[name] = group
        return group

    def delete_group(self, name: str) -> None:
        if self.groups.pop(name, None) is None:
            raise IntentError("NOT_FOUND", f"no multicast group {name!r}")

    def create_job(self, name: str, workers: list[str], slots: int) -> JobIntent:
        _check_name(name, "aggregation job")
        if name in self.jobs:
            raise IntentError("ALREADY_EXISTS", f"aggregation job {name!r} exists")
        workers = self._members(workers, f"aggregation job {name}", 2)
        if slots < 1:
            raise IntentError("INVALID_ARGUMENT", f"aggregation job {name}: slots must be "
                              f"positive, got {slots}")
        if len(workers) > self.max_workers:
            raise IntentError("INVALID_ARGUMENT", f"aggregation job {name}: at most "
                              f"{self.max_workers} workers per job on this data plane")
        sl = self._common_slice(workers[0], workers, f"aggregation job {name}")
        # Worker ids follow rank order; controller.aggregation chooses the leaf.
        workers.sort(key=lambda w: self.topo.host(w).rank)
        leaf = aggregation.aggregating_leaf(self.topo, workers)
        base = self._free_slots(leaf, slots, name)
        job_id = min(set(range(1, len(self.jobs) + 2)) - {j.job_id for j in self.jobs.values()})
        # Job ids and slots are reused and fabricd writes no registers: the generation is
        # what makes the slots' kept state of an earlier job stale to this one.
        group_id = self._free_group_id()
        self.generation = next_generation(self.generation)
        job = JobIntent(name, job_id, tuple(workers), leaf, base, slots, group_id,
                        sl.slice_id if sl else 0, self.generation)
        self.jobs[name] = job
        return job

    def delete_job(self, name: str) -> None:
        if self.jobs.pop(name, None) is None and self.nr_jobs.pop(name, None) is None:
            raise IntentError("NOT_FOUND", f"no aggregation job {name!r}")

    def create_nr_job(self, name: str, workers: list[str], credits: int = 8) -> NetReduceJob:
        """A NetReduce job: controller.netreduce chooses the tree (one leaf, or the workers'
        leaves and a spine) and allocates its resources; worker w is workers[w]."""
        _check_name(name, "aggregation job")
        if name in self.jobs or name in self.nr_jobs:
            raise IntentError("ALREADY_EXISTS", f"aggregation job {name!r} exists")
        workers = self._members(workers, f"aggregation job {name}", 2)
        self._common_slice(workers[0], workers, f"aggregation job {name}")
        taken = {j.job_id & 0xFF for j in self.nr_jobs.values()} | \
            {j.job_id for j in self.jobs.values()}
        job_id = next((i for i in range(1, 256) if i not in taken), None)
        if job_id is None:
            raise IntentError("RESOURCE_EXHAUSTED", "every NetReduce job id (QP index) is in use")
        planner = NetReducePlanner(self.topo, {j.job_id: j for j in self.nr_jobs.values()},
                                   self.generation)
        used = {g.group_id for g in self.groups.values()} | {j.group_id for j in self.jobs.values()}
        try:
            job = planner.create(job_id, name, workers, credits, used_groups=used)
        except NetReduceError as err:
            code = "RESOURCE_EXHAUSTED" if "free" in str(err) or "in use" in str(err) \
                else "INVALID_ARGUMENT"
            raise IntentError(code, str(err)) from None
        self.generation = planner.generation
        self.nr_jobs[name] = job
        return job

    # -- helpers ------------------------------------------------------------------------------
    def _host(self, name: str):
        try:
            return self.topo.host(name)
        except KeyError as err:
            raise IntentError("NOT_FOUND", err.args[0]) from None

    def _link(self, name: str):
        try:
            return self.topo.parse_link(name)
        except KeyError as err:
            code = "INVALID_ARGUMENT" if "expected" in err.args[0] or "integer" in err.args[0] \
                else "NOT_FOUND"
            raise IntentError(code, err.args[0]) from None

    def _members(self, names: list[str], what: str, least: int) -> list[str]:
        for h in names:
            self._host(h)
        if len(set(names)) != len(names):
            raise IntentError("INVALID_ARGUMENT", f"{what}: a host is listed twice")
        if len(names) < least:
            raise IntentError("INVALID_ARGUMENT", f"{what}: needs at least {least} hosts")
        return list(names)

    def _free_group_id(self) -> int:
        used = {g.group_id for g in self.groups.values()} | {j.group_id for j in self.jobs.values()}
        used |= {st.group_id for j in self.nr_jobs.values() for st in j.stages}
        try:
            return multicast.group_ids(used)[0]
        except multicast.MulticastError as err:
            raise IntentError("RESOURCE_EXHAUSTED", str(err)) from None

    def _free_slots(self, leaf: str, slots: int, name: str) -> int:
        taken = sorted((j.slot_base, j.slot_base + j.slots) for j in self.jobs.values()
                       if j.leaf == leaf)
        base = first_fit(taken, slots, self.slot_capacity)
        if base is not None:
            return base
        raise IntentError("RESOURCE_EXHAUSTED",
                          f"aggregation job {name}: {leaf} has no {slots} free slots "
                          f"({self.slot_capacity} in all, "
                          f"{sum(hi - lo for lo, hi in taken)} held by other jobs)")

    # -- persistence ----------------------------------------------------------------------------
    def to_json(self) -> str:
        return json.dumps({
            "topology": self.topo_yaml,
            "failed": sorted(self.failed),
            "slices": [{**asdict(s), "links": sorted(s.links)} for s in self.slices.values()],
            "groups": [asdict(g) for g in self.groups.values()],
            "jobs": [asdict(j) for j in self.jobs.values()],
            "nr_jobs": [asdict(j) for j in self.nr_jobs.values()],
            "generation": self.generation,
            "steps": [asdict(s) for s in self.steps.values()],
        }, indent=1)

    @classmethod
    def from_json(cls, text: str, slot_capacity: int = 0,
                  max_workers: int = aggregation.MAX_WORKERS) -> Intent:
        data = json.loads(text)
        intent = cls.from_yaml(data["topology"], slot_capacity, "<saved state>", max_workers)
        intent.failed = set(data["failed"])
        for s in data["slices"]:
            intent.slices[s["job"]] = Slice(s["job"], s["slice_id"], tuple(s["hosts"]),
                                            tuple(s["leaves"]), tuple(s["spines"]),
                                            frozenset(s["links"]))
        for g in data["groups"]:
            intent.groups[g["name"]] = GroupIntent(**{**g, "members": tuple(g["members"])})
        for j in data["jobs"]:
            intent.jobs[j["name"]] = JobIntent(**{"generation": 0, **j,
                                                  "workers": tuple(j["workers"])})
        for j in data.get("nr_jobs", []):
            stages = tuple(Stage(**{**st, "children": tuple(st["children"])})
                           for st in j["stages"])
            intent.nr_jobs[j["name"]] = NetReduceJob(**{**j, "workers": tuple(j["workers"]),
                                                        "stages": stages})
        intent.generation = data.get("generation", data.get("nr_generation", 0))
        for s in data["steps"]:
            flows = tuple(ethereal.Flow(**f) for f in s["flows"])
            intent.steps[s["name"]] = StepIntent(s["name"], flows, s["pins"])
        return intent


def parse_topology(text: str, source: str) -> Topology:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise IntentError("INVALID_ARGUMENT", f"{source}: malformed YAML: {err}") from None
    try:
        return topology.from_dict(data, source)
    except TopologyError as err:
        raise IntentError("INVALID_ARGUMENT", str(err)) from None


def _check_name(name: str, what: str) -> None:
    if not name or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise IntentError("INVALID_ARGUMENT",
                          f"{what} name {name!r}: use letters, digits, '-', '_' or '.'")


def _slice_name(sl: Slice | None) -> str:
    return f"slice {sl.job}" if sl else "no slice"
