"""One NetReduce job on leaf1 of a 2x2 leaf-spine, as the benchmarks drive it: the P4Runtime
updates the controller writes for the leaf (its routes and port MACs, then the job's entries
and multicast groups) and the contributions of its four workers h1..h4 (ports 1..4), packet
after packet of their RC connections (a FIRST with RETH every NR_MSG_PKTS packets), numbered
on forever so that no round repeats. Every 4th contribution completes a slot, which the leaf
multicasts to the 4 workers as RDMA WRITE ONLY with a new ICRC."""
from __future__ import annotations

from p4.v1 import p4runtime_pb2

from collectives import netreduce as nr
from collectives import wire
from controller import encode_fabric
from controller.intent import Intent
from controller.netreduce import NetReducePlanner
from controller.p4rt import Schema
from controller.switch_plan import plan_switches
from fabricmodel import rocev2

TOPOLOGY = "name: bench\nkind: leaf-spine\nleaves: 2\nspines: 2\nhosts_per_leaf: 4\n"
WORKERS = ("h1", "h2", "h3", "h4")
JOB = 7
AGGREGATOR = "10.0.1.253"
PAYLOAD = bytes(range(256)) * 4


class Job:
    def __init__(self):
        intent = Intent.from_yaml(TOPOLOGY, slot_capacity=1024, max_workers=32)
        self.topo = intent.topo
        self.intent = intent
        self.job = NetReducePlanner(self.topo).create(JOB, "bench", list(WORKERS), credits=8)
        self.hosts = [self.topo.host(w) for w in WORKERS]

    def updates(self, p4info) -> list[p4runtime_pb2.Update]:
        """leaf1's P4Runtime updates (ids from `p4info`, the target's own P4Info)."""
        schema = Schema(p4info)
        state = encode_fabric.switch_state(self.topo, plan_switches(self.intent)["leaf1"])
        tables, groups = encode_fabric.netreduce_entries(self.topo, self.job)["leaf1"]
        out = []
        for e in [*state.table_entries, *tables]:
            kind = p4runtime_pb2.Update.MODIFY if e.default else p4runtime_pb2.Update.INSERT
            out.append(p4runtime_pb2.Update(type=kind, entity=e.to_proto(schema)))
        for g in [*state.multicast_groups, *groups]:
            out.append(p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT,
                                            entity=g.to_proto()))
        return out

    def contribution(self, rank: int, g: int) -> bytes:
        """Worker `rank`'s packet number g (an Ethernet frame)."""
        qpn, _ = rocev2.nr_aggregator_qpns(rank, JOB)
        psn = g & wire.PSN_MASK
        if g % rocev2.NR_MSG_PKTS == 0:
            roce = wire.bth(rocev2.WRITE_FIRST, qpn, psn) + \
                wire.reth(g * nr.PKT_BYTES, JOB, nr.MSG_BYTES)
        else:
            roce = wire.bth(rocev2.WRITE_MIDDLE, qpn, psn)
        return frame(self.hosts[rank], AGGREGATOR, roce + PAYLOAD)


def frame(h, dst, roce):
    ip = bytearray(wire.frame(bytes(map(int, h.ip.split("."))), bytes(map(int, dst.split("."))),
                              0xC001, 1, 0, roce))
    total = sum(int.from_bytes(ip[i:i + 2], "big") for i in range(0, 20, 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    ip[10:12] = (~total & 0xFFFF).to_bytes(2, "big")
    return bytes.fromhex(h.gateway_mac.replace(":", "") + h.mac.replace(":", "")) + \
        b"\x08\x00" + bytes(ip)
