"""From the intent to what every switch must do, in the fabric's own terms (routes, groups,
pins, slices, multicast trees, aggregation jobs, port liveness, the ECMP hash's salt, ECN
thresholds).

`plan_switches(intent)` is pure and target-independent; `encode_fabric` encodes it as
fabric.p4 entries. `intended_states(intent, schema)` chains the two: the whole desired state
of every switch, which `p4rt.Device.sync` reconciles.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from controller import multicast
from controller.intent import GroupIntent, Intent, IntentError, JobIntent
from controller.netreduce import NetReduceJob, down_qpn, up_qpn
from fabricmodel import hashing
from fabricmodel.rocev2 import nr_aggregator_qpns, nr_worker_qpns
from fabricmodel.routing import Route
from fabricmodel.topology import Topology


@dataclass(frozen=True)
class NextHop:
    port: int
    dmac: str                     # the neighbour's MAC on that cable (host MAC on host ports)
    smac: str                     # our port's MAC


@dataclass(frozen=True)
class RouteEntry:
    slice_id: int
    prefix: str                   # "a.b.c.d/len"
    hops: tuple[NextHop, ...]     # one = direct; several = ECMP group, in member order


@dataclass(frozen=True)
class PinEntry:
    src_ip: str
    dst_ip: str
    sport: int
    dport: int
    hop: NextHop


@dataclass(frozen=True)
class McastEntry:
    slice_id: int
    address: str
    group_id: int
    replicas: tuple[multicast.Replica, ...]
    loss: float = 0.0             # drop rate of the replicas toward member hosts


@dataclass(frozen=True)
class AggEntry:
    job_id: int
    result_ip: str                # the result group's address
    slot_base: int
    slots: int
    workers: int
    group_id: int
    generation: int


@dataclass(frozen=True)
class NrChild:
    """A child of a NetReduce stage (a worker on a leaf, a leaf on the spine): the QPs its
    packets arrive on at the stage's address, and where the stage's result replica for it
    goes."""
    conn: int                     # the connection's index (its anchor on the switch)
    data_qpn: int                 # its contributions (a leaf's partial sums) arrive on this
    reply_qpn: int                # the QP the stage's answers to them name
    port: int                     # the result replica leaves by this port,
    dst_ip: str                   # to this address,
    dst_qpn: int                  # on this QP
    ack_qpn: int | None = None    # a worker's ACKs of results arrive on this QP,
    ack_reply_qpn: int = 0        # and leave as ACKs of its contributions on this one


@dataclass(frozen=True)
class NrParent:
    """The spine above a NetReduce leaf stage."""
    address: str                  # the spine's aggregator address
    qpn: int                      # the leaf's up QP: its partial sums go there on it
    port: int                     # straight out of this port (no route)
    down_qpn: int                 # the spine's sums arrive at the leaf on this QP


@dataclass(frozen=True)
class NrStageEntry:
    """One switch's part of a NetReduce job."""
    address: str                  # the aggregator address on this switch
    job_id: int                   # the rkey the workers' WRITEs carry
    job_index: int
    generation: int
    credits: int                  # messages in flight
    slots: int                    # the job's window: credits x packets per message
    slot_base: int
    msg_base: int
    group_id: int                 # the PRE group the result leaves by, a replica per child
    children: tuple[NrChild, ...]
    parent: NrParent | None       # None: the top stage, which multicasts the sum


@dataclass
class SwitchPlan:
    """Everything one switch must hold, independent of how a P4 program encodes it."""
    name: str
    routes: list[RouteEntry] = field(default_factory=list)
    pins: list[PinEntry] = field(default_factory=list)
    slice_ports: dict[int, int] = field(default_factory=dict)    # ingress port -> slice id
    groups: list[McastEntry] = field(default_factory=list)
    jobs: list[AggEntry] = field(default_factory=list)
    netreduce: list[NrStageEntry] = field(default_factory=list)
    ports_up: dict[int, bool] = field(default_factory=dict)
    ecmp_mode: str = "hash"
    ecmp_salt: int = 0                 # the hash's bit offset (fabricmodel.hashing.switch_salt)
    ecn_threshold: dict[int, int] = field(default_factory=dict)     # packets queued
    ecn_delay_us: dict[int, int] = field(default_factory=dict)      # or queueing delay


def _next_hop(topo: Topology, switch: str, port: int) -> NextHop:
    return NextHop(port, topo.peer_mac(switch, port), topo.switch(switch).port_mac(port))


def _routes(intent: Intent):
    """(slice id, Route) for every switch: unsliced traffic over the links no slice holds,
    each slice over its own links toward its own hosts."""
    held = set()
    if intent.allocator.isolation == "switch":   # slices own their switches outright
        held = {sw for s in intent.slices.values() for sw in (*s.leaves, *s.spines)}
    unsliced = intent.routing()
    yield from ((0, r) for sw in intent.topo.switches if sw not in held
                for r in unsliced.routes(sw, hosts=intent.unsliced_hosts()))
    for sl in intent.slices.values():
        yield from ((sl.slice_id, r) for r in sl.routes(intent.topo, intent.failed))


def routes_of(intent: Intent, switch: str) -> list[tuple[int, Route]]:
    return [(sid, r) for sid, r in _routes(intent) if r.switch == switch]


def group_tree(intent: Intent, members, slice_id: int, extra_leaves=(),
               group_id: int = 1) -> dict[str, tuple[multicast.Replica, ...]]:
    """Per switch, the replicas of a group's tree over the links its slice may use."""
    sl = next((s for s in intent.slices.values() if s.slice_id == slice_id), None)
    try:
        found = multicast.tree(intent.topo, intent.routing(sl), list(members), group_id,
                               extra_leaves)
    except multicast.MulticastError as err:
        raise IntentError("FAILED_PRECONDITION", str(err)) from None
    return found.replicas


def plan_switches(intent: Intent) -> dict[str, SwitchPlan]:
    topo = intent.topo
    plans = {name: SwitchPlan(name, ecmp_mode=intent.ecmp_mode,
                              ecmp_salt=hashing.switch_salt(name)) for name in topo.switches}
    for sid, route in _routes(intent):
        plans[route.switch].routes.append(RouteEntry(
            sid, route.prefix, tuple(_next_hop(topo, route.switch, p) for p in route.ports)))
    for sl in intent.slices.values():
        for sw, ports in sl.ingress_ports(topo).items():
            for port in ports:
                plans[sw].slice_ports[port] = sl.slice_id
    for step in intent.steps.values():
        for pin in intent.step_plan(step).pins:
            plans[pin.switch].pins.append(PinEntry(pin.src_ip, pin.dst_ip, pin.sport, pin.dport,
                                                   _next_hop(topo, pin.switch, pin.port)))
    for group in intent.groups.values():
        _add_group(intent, plans, group)
    for job in intent.jobs.values():
        _add_job(intent, plans, job)
    for nr_job in intent.nr_jobs.values():
        for sw, stage in netreduce_stages(topo, nr_job).items():
            plans[sw].netreduce.append(stage)
    for name in topo.switches:
        for port, link in topo.ports(name).items():
            plans[name].ports_up[port] = link.index not in intent.failed
            if intent.ecn_delay_us:
                plans[name].ecn_delay_us[port] = intent.ecn_delay_us
            else:
                plans[name].ecn_threshold[port] = intent.ecn_threshold
    for plan in plans.values():
        plan.pins = list(dict.fromkeys(plan.pins))
    return plans


def _add_group(intent: Intent, plans, group: GroupIntent) -> None:
    tree = group_tree(intent, group.members, group.slice_id, group_id=group.group_id)
    for sw, replicas in tree.items():
        plans[sw].groups.append(McastEntry(group.slice_id, group.address, group.group_id,
                                           replicas, group.loss))


def _add_job(intent: Intent, plans, job: JobIntent) -> None:
    tree = group_tree(intent, job.workers, job.slice_id, extra_leaves=(job.leaf,),
                      group_id=job.group_id)
    address = job.result_ip
    for sw, replicas in tree.items():
        plans[sw].groups.append(McastEntry(job.slice_id, address, job.group_id, replicas))
    plans[job.leaf].jobs.append(AggEntry(job.job_id, address, job.slot_base, job.slots,
                                         len(job.workers), job.group_id, job.generation))


def netreduce_stages(topo: Topology, job: NetReduceJob) -> dict[str, NrStageEntry]:
    """Per switch of the job's tree (controller.netreduce), what it must hold."""
    rank = {w: r for r, w in enumerate(job.workers)}
    result_qpn, ack_reply_qpn = nr_worker_qpns(len(job.workers), job.job_id)
    top = job.stages[-1]
    out = {}
    for st in job.stages:
        children = []
        for conn, child in enumerate(st.children, start=st.conn_base):
            if child in topo.hosts:
                host = topo.host(child)
                data_qpn, ack_qpn = nr_aggregator_qpns(rank[child], job.job_id)
                children.append(NrChild(conn, data_qpn, result_qpn, host.leaf_port, host.ip,
                                        result_qpn, ack_qpn, ack_reply_qpn))
            else:                                     # a leaf under this spine
                down = down_qpn(topo, child, job.job_id)
                port = topo.links_between(child, st.switch)[0].port_of(st.switch)
                children.append(NrChild(conn, up_qpn(topo, child, job.job_id), down, port,
                                        topo.switch(child).service_ip, down))
        parent = None
        if st.parent is not None:
            parent = NrParent(top.address, up_qpn(topo, st.switch, job.job_id),
                              topo.links_between(st.switch, st.parent)[0].port_of(st.switch),
                              down_qpn(topo, st.switch, job.job_id))
        out[st.switch] = NrStageEntry(st.address, job.job_id, st.job_index, job.generation,
                                      job.credits, job.slots, st.slot_base, st.msg_base,
                                      st.group_id, tuple(children), parent)
    return out
