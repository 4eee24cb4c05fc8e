"""The install plan as p4src/fabric.p4 entries (table and counter names from p4src/README.md),
and the counters read back in the plan's terms. Only what both targets serve over P4Runtime
is written: table entries and replication groups, never registers."""
from __future__ import annotations

import zlib
from dataclasses import dataclass

from controller.intent import IntentError
from controller.netreduce import NetReduceJob
from controller.p4rt import MulticastGroup, State, TableEntry, sync, values
from controller.p4rt.schema import Schema
from controller.switch_plan import NrStageEntry, SwitchPlan, netreduce_stages, plan_switches
from fabricmodel import rocev2
from fabricmodel.topology import Topology

MAX_ECMP_GROUPS = rocev2.GROUP_IDS   # ecmp group ids are below this (docs/fabric-p4.md)
ECMP_MODES = {"hash": 0, "round-robin": 1, "random": 2}   # ecmp_groups' mode parameter
CLASSIFY_PRIORITY = 10
PORT_MASK = 0x1FF


def ecmp_groups(plan: SwitchPlan) -> dict[tuple[int, tuple[int, ...]], int]:
    """A group id per distinct (slice, member ports): slices never share a group, routes of
    one slice with the same members do. The id is a hash of the key (probing on collision),
    so a change elsewhere, e.g. a failed link, does not renumber unrelated groups."""
    keys = sorted({(r.slice_id, tuple(h.port for h in r.hops)) for r in plan.routes
                   if len(r.hops) > 1})
    ids = MAX_ECMP_GROUPS - 1
    if len(keys) > ids:
        raise IntentError("RESOURCE_EXHAUSTED", f"{plan.name} would need {len(keys)} ECMP "
                          f"groups; fabric.p4 holds {ids}")
    groups: dict[tuple[int, tuple[int, ...]], int] = {}
    taken: set[int] = set()
    for key in keys:
        gid = zlib.crc32(repr(key).encode()) % ids + 1
        while gid in taken:
            gid = gid % ids + 1
        taken.add(gid)
        groups[key] = gid
    return groups


def port_liveness(plan: SwitchPlan) -> TableEntry:
    """Every port's liveness in one default action (bit p = port p dead): first in the
    entries, so that a failover takes effect before the routes that avoid the port change."""
    dead = sum(1 << port for port, up in plan.ports_up.items() if not up)
    return TableEntry("FabricIngress.port_liveness", {}, "FabricIngress.set_dead_ports",
                      {"ports": dead}, default=True)


def ecmp_salt(plan: SwitchPlan) -> TableEntry:
    """The switch's ECMP salt, a default action: the model's paths (fabricmodel.hashing)
    assume it, and a write changes it without recompiling fabric.p4."""
    return TableEntry("FabricIngress.ecmp_salt", {}, "FabricIngress.set_ecmp_salt",
                      {"salt": plan.ecmp_salt}, default=True)


def loss_threshold(rate: float) -> int:
    """fabric.p4 drops a replica when a 16-bit random draw is below this."""
    return min(0xFFFF, round(rate * 0x10000))


def switch_state(topo: Topology, plan: SwitchPlan) -> State:
    state = State()
    entries = state.table_entries
    entries.append(port_liveness(plan))
    entries.append(ecmp_salt(plan))
    me = topo.switch(plan.name)
    for port in sorted(topo.ports(plan.name)):
        entries.append(TableEntry("FabricEgress.port_mac", {"standard_metadata.egress_port": port},
                                  "FabricEgress.set_port_macs", {"smac": me.port_mac(port),
                                                           "dmac": topo.peer_mac(plan.name, port)}))
    groups = ecmp_groups(plan)
    for (_, ports), gid in groups.items():
        entries.append(TableEntry("FabricIngress.ecmp_groups", {"meta.ecmp_group": gid},
                                  "FabricIngress.set_group",
                                  {"size": len(ports), "mode": ECMP_MODES[plan.ecmp_mode]}))
        for i, port in enumerate(ports):
            # The backup is the next member's port: one hop of fast failover, no chains.
            entries.append(TableEntry(
                "FabricIngress.ecmp_members", {"meta.ecmp_group": gid, "meta.ecmp_member": i},
                "FabricIngress.set_member", {"port": port, "backup_port": ports[(i + 1) % len(ports)]}))
    for r in plan.routes:
        addr, plen = r.prefix.split("/")
        match = {"meta.slice_id": r.slice_id, "hdr.ipv4.dstAddr": (addr, int(plen))}
        if len(r.hops) == 1:
            entries.append(TableEntry("FabricIngress.ipv4_route", match, "FabricIngress.route_to_port",
                                      {"port": r.hops[0].port}))
        else:
            gid = groups[(r.slice_id, tuple(h.port for h in r.hops))]
            entries.append(TableEntry("FabricIngress.ipv4_route", match, "FabricIngress.route_to_group",
                                      {"group": gid}))
    for p in plan.pins:
        entries.append(TableEntry(
            "FabricIngress.path_pin", {"hdr.ipv4.srcAddr": p.src_ip, "hdr.ipv4.dstAddr": p.dst_ip,
                                 "meta.l4_sport": p.sport, "meta.l4_dport": p.dport},
            "FabricIngress.pin_path", {"port": p.hop.port}))
    for port, slice_id in sorted(plan.slice_ports.items()):
        entries.append(TableEntry(
            "FabricIngress.slice_classify", {"standard_metadata.ingress_port": (port, PORT_MASK)},
            "FabricIngress.set_slice", {"slice_id": slice_id}, priority=CLASSIFY_PRIORITY))
    for g in plan.groups:
        entries.append(TableEntry("FabricIngress.mcast_route", {"meta.slice_id": g.slice_id,
                                                          "hdr.ipv4.dstAddr": g.address},
                                  "FabricIngress.set_mcast_group", {"group": g.group_id}))
        state.multicast_groups.append(
            MulticastGroup(g.group_id, tuple((r.port, r.rid) for r in g.replicas)))
        for r in g.replicas:
            if r.rewrite is not None:
                entries.append(TableEntry(
                    "FabricEgress.mcast_rewrite", {"meta.mcast_grp": g.group_id,
                                             "standard_metadata.egress_rid": r.rid},
                    "FabricEgress.rewrite_replica", {"smac": r.rewrite.src_mac,
                                               "dmac": r.rewrite.dst_mac,
                                               "dst_ip": r.rewrite.dst_ip}))
        if g.loss and any(r.rewrite is not None for r in g.replicas):
            entries.append(TableEntry("FabricEgress.mcast_loss", {"meta.mcast_grp": g.group_id},
                                      "FabricEgress.set_mcast_loss",
                                      {"threshold": loss_threshold(g.loss)}))
    for j in plan.jobs:
        entries.append(TableEntry(
            "FabricIngress.switchml_jobs", {"hdr.ipv4.dstAddr": me.service_ip, "hdr.sml.jobId": j.job_id},
            "FabricIngress.switchml_job", {"gen": j.generation, "result_ip": j.result_ip,
                                           "slot_base": j.slot_base, "num_slots": j.slots,
                                           "num_workers": j.workers}))
    for stage in plan.netreduce:
        tables, group = netreduce_stage(stage)
        entries.extend(tables)
        state.multicast_groups.append(group)
    for port, threshold in sorted(plan.ecn_threshold.items()):
        entries.append(TableEntry("FabricEgress.ecn_mark", {"standard_metadata.egress_port": port},
                                  "FabricEgress.set_ecn_threshold", {"threshold": threshold}))
    for port, delay_us in sorted(plan.ecn_delay_us.items()):
        entries.append(TableEntry("FabricEgress.ecn_mark", {"standard_metadata.egress_port": port},
                                  "FabricEgress.set_ecn_delay", {"delay_us": delay_us}))
    return state


def netreduce_stage(st: NrStageEntry) -> tuple[list[TableEntry], MulticastGroup]:
    """A NetReduce stage as fabric.p4's nr_conns, nr_replicas and nr_jobs entries and the PRE
    group of its result (docs/fabric-p4.md, "NetReduce"); child i is replica rid i + 1."""
    tables = []
    for child_no, c in enumerate(st.children):
        tables.append(TableEntry("FabricIngress.nr_conns",
                                 {"hdr.ipv4.dstAddr": st.address, "hdr.bth.dqpn": c.data_qpn},
                                 "FabricIngress.nr_data",
                                 {"conn": c.conn, "job": st.job_index, "child": child_no,
                                  "reply_qpn": c.reply_qpn}))
        if c.ack_qpn is not None:
            tables.append(TableEntry("FabricIngress.nr_conns",
                                     {"hdr.ipv4.dstAddr": st.address, "hdr.bth.dqpn": c.ack_qpn},
                                     "FabricIngress.nr_ack",
                                     {"conn": c.conn, "gen": st.generation,
                                      "reply_qpn": c.ack_reply_qpn}))
        tables.append(TableEntry("FabricEgress.nr_replicas",
                                 {"meta.mcast_grp": st.group_id,
                                  "standard_metadata.egress_rid": child_no + 1},
                                 "FabricEgress.nr_replica",
                                 {"src_ip": st.address, "dst_ip": c.dst_ip, "dqpn": c.dst_qpn}))
    parent = {"parent_ip": "0.0.0.0", "parent_qpn": 0, "parent_port": 0}
    if st.parent is not None:
        tables.append(TableEntry("FabricIngress.nr_conns",
                                 {"hdr.ipv4.dstAddr": st.address,
                                  "hdr.bth.dqpn": st.parent.down_qpn},
                                 "FabricIngress.nr_down", {"group": st.group_id}))
        parent = {"parent_ip": st.parent.address, "parent_qpn": st.parent.qpn,
                  "parent_port": st.parent.port}
    tables.append(TableEntry("FabricIngress.nr_jobs", {"meta.nr_job": st.job_index},
                             "FabricIngress.nr_job",
                             {"gen": st.generation, "children": len(st.children),
                              "slot_base": st.slot_base, "window_mask": st.slots - 1,
                              "window_shift": st.slots.bit_length() - 1,
                              "msg_base": st.msg_base, "credits": st.credits,
                              "rkey": st.job_id, "top": int(st.parent is None),
                              "group": st.group_id} | parent))
    replicas = tuple((c.port, rid) for rid, c in enumerate(st.children, start=1))
    return tables, MulticastGroup(st.group_id, replicas)


def netreduce_entries(topo: Topology, job: NetReduceJob) -> dict[str, tuple[list[TableEntry],
                                                                             list[MulticastGroup]]]:
    """One job's fabric.p4 entries and PRE groups per switch of its tree, as fabricd plans
    and encodes them (for a switch given one job alone: tests, the STF files, a benchmark)."""
    out = {}
    for switch, stage in netreduce_stages(topo, job).items():
        tables, group = netreduce_stage(stage)
        out[switch] = (tables, [group])
    return out


def slot_capacity(schema: Schema) -> int:
    """Aggregation slots per switch: each slot has two register sets."""
    return schema.register("FabricIngress.switchml_count").size // 2


def max_workers(schema: Schema) -> int:
    """The contribution bitmap has one bit per worker."""
    return schema.register("FabricIngress.switchml_bitmap").bitwidth


@dataclass(frozen=True)
class PinCount:
    src_ip: str
    dst_ip: str
    sport: int
    dport: int
    port: int


PORT_COUNTERS = (("FabricIngress.port_rx", "rx"), ("FabricEgress.port_tx", "tx"))


def read_counters(topo: Topology, device) -> tuple[dict[int, dict], list[tuple]]:
    """Per-port counters of the switch's cabled ports, and every pin's hits."""
    ports = {p: {} for p in topo.ports(device.name)}
    for name, prefix in PORT_COUNTERS:
        for cell in device.read_counter(name):
            if cell.index in ports:
                ports[cell.index][f"{prefix}_packets"] = cell.packets
                ports[cell.index][f"{prefix}_bytes"] = cell.bytes
    for cell in device.read_counter("FabricIngress.port_drops"):
        if cell.index in ports:
            ports[cell.index]["drops"] = cell.packets
    pins = []
    for entry, packets, nbytes in device.read_direct_counters("FabricIngress.path_pin"):
        m = entry.match
        pins.append((PinCount(values.ipv4(m["hdr.ipv4.srcAddr"]),
                              values.ipv4(m["hdr.ipv4.dstAddr"]), m["meta.l4_sport"],
                              m["meta.l4_dport"], entry.params["port"]), packets, nbytes))
    return ports, pins


def intended_states(intent, schema: Schema) -> dict[str, State]:
    """Every switch's complete fabric.p4 state, validated against the P4Info (a value that
    does not fit raises here, before anything is written)."""
    plans = plan_switches(intent)
    states = {name: switch_state(intent.topo, plan) for name, plan in plans.items()}
    for state in states.values():
        state.table_entries = [sync.canonical(schema, e) for e in state.table_entries]
    return states
