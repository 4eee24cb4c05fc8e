"""NetReduce in fabric.p4, packet by packet, on leaves and a spine configured with exactly the
entries the controller installs (controller/netreduce.py over P4Runtime protos): the first
packet of a message (RETH) anchors the connection, later packets map by PSN, duplicates are
consumed or answered from the kept sum, the worker's ACK of results becomes the ACK of its
data, credits bound messages, and the spine stage sums the leaves' partial sums. Every
switch-made packet carries a valid ICRC."""
from __future__ import annotations

import random
import socket

import pytest
from p4.v1 import p4runtime_pb2
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether

from collectives import netreduce as nr
from collectives import wire
from controller import encode_fabric
from controller.intent import Intent
from controller.netreduce import NetReducePlanner, down_qpn, up_qpn
from controller.p4rt import Schema
from controller.switch_plan import plan_switches
from fabricmodel import rocev2
from p4switch.runtime.pipeline import Pipeline

pytest_plugins = ["fabric_fixtures"]

TOPO = """name: nr-test
kind: leaf-spine
leaves: 2
spines: 2
hosts_per_leaf: 4
"""
EV_NEW, EV_DUP, EV_KEPT, EV_DONE, EV_STALE, EV_REFUSED, EV_ACK, EV_DOWN, EV_BAD_ICRC = range(9)
JOB = 7


class Fabric:
    """Every switch of the topology as a P4Runtime pipeline with the controller's entries."""

    def __init__(self, fabric_config, workers, credits=2):
        info, config = fabric_config
        self.intent = Intent.from_yaml(TOPO, slot_capacity=1024, max_workers=32)
        self.topo = self.intent.topo
        self.schema = Schema(info)
        self.pipes = {}
        plans = plan_switches(self.intent)
        planner = NetReducePlanner(self.topo)
        self.job = planner.create(JOB, "t", workers, credits)
        nr_entries = encode_fabric.netreduce_entries(self.topo, self.job)
        for name in self.topo.switches:
            pipe = Pipeline(p4runtime_pb2.ForwardingPipelineConfig(
                p4info=info, p4_device_config=config), None)
            state = encode_fabric.switch_state(self.topo, plans[name])
            tables, groups = nr_entries.get(name, ([], []))
            for ent in [*state.table_entries, *tables]:
                kind = p4runtime_pb2.Update.MODIFY if ent.default else p4runtime_pb2.Update.INSERT
                pipe.write(p4runtime_pb2.Update(type=kind, entity=ent.to_proto(self.schema)))
            for g in [*state.multicast_groups, *groups]:
                pipe.write(p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT,
                                                entity=g.to_proto()))
            self.pipes[name] = pipe
        self.workers = workers
        self.ipsn = {w: random.Random(w).randrange(1 << 24) for w in workers}

    def host(self, w):
        return self.topo.host(w)

    def rank(self, w):
        return self.workers.index(w)

    def register(self, switch, name, index):
        ent = p4runtime_pb2.Entity()
        ent.register_entry.register_id = self.schema.register(f"FabricIngress.{name}").id
        ent.register_entry.index.index = index
        (got,) = self.pipes[switch].read(ent)
        return int.from_bytes(got.register_entry.data.bitstring, "big")

    def events(self, switch):
        return [self.pipes[switch].sw.counter_read("FabricIngress.nr_events", i)[0]
                for i in range(9)]

    def send(self, switch, port, frame):
        return self.pipes[switch].sw.process(port, frame)

    def from_host(self, w, roce, *, dst=None, corrupt=None):
        """A frame from worker w into its leaf (the leaf's aggregator address by default);
        `corrupt`: the offset (in the IP packet) of a byte changed after the ICRC was made."""
        h = self.host(w)
        dst = dst or self.topo.switch(h.leaf).service_ip
        ip = bytearray(wire.frame(socket.inet_aton(h.ip), socket.inet_aton(dst), 0xC001, 1, 0,
                                  roce))
        if corrupt is not None:
            ip[corrupt] ^= 0x10
        ip[10:12] = ip_checksum(ip[:20]).to_bytes(2, "big")   # the kernel's job on a host
        frame = bytes.fromhex(h.gateway_mac.replace(":", "")) + \
            bytes.fromhex(h.mac.replace(":", "")) + b"\x08\x00" + ip
        return self.send(h.leaf, h.leaf_port, frame)

    def contribution(self, w, g, values, corrupt=None):
        """Worker w's packet number g (a RETH on the first packet of each message)."""
        data_qpn, _ = rocev2.nr_aggregator_qpns(self.rank(w), JOB)
        psn = (self.ipsn[w] + g) & wire.PSN_MASK
        payload = b"".join(int(v & 0xFFFFFFFF).to_bytes(4, "big") for v in values)
        if g % rocev2.NR_MSG_PKTS == 0:
            roce = wire.bth(rocev2.WRITE_FIRST, data_qpn, psn) + \
                wire.reth(g * nr.PKT_BYTES, JOB, nr.MSG_BYTES) + payload
        else:
            last = g % rocev2.NR_MSG_PKTS == rocev2.NR_MSG_PKTS - 1
            roce = wire.bth(rocev2.WRITE_LAST if last else rocev2.WRITE_MIDDLE, data_qpn, psn) + payload
        return self.from_host(w, roce, corrupt=corrupt)

    def ack(self, w, g, syndrome=rocev2.AETH_ACK, corrupt=None):
        _, ack_qpn = rocev2.nr_aggregator_qpns(self.rank(w), JOB)
        roce = wire.bth(rocev2.ACKNOWLEDGE, ack_qpn, g) + wire.aeth(syndrome, 1)
        return self.from_host(w, bytes(roce), corrupt=corrupt)


def ip_checksum(header: bytes) -> int:
    total = sum(int.from_bytes(header[i:i + 2], "big") for i in range(0, 20, 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def wrap(values):
    return [((v + 2**31) & 0xFFFFFFFF) - 2**31 for v in values]


def vec(rng):
    return [rng.randint(-2**31, 2**31 - 1) for _ in range(nr.VALUES)]


def parse(frame):
    """(IP src, IP dst, opcode, dqpn, psn, ackreq, RETH or None, values, icrc ok)."""
    ip = Ether(frame)[IP]
    raw = bytes(ip)
    roce = raw[28:]
    op, _pad, dqpn, psn, ackreq, _ = wire.parse_bth(roce)
    reth = wire.RETH_HDR.unpack_from(roce, 12) if op in (rocev2.WRITE_FIRST, rocev2.WRITE_ONLY) else None
    body = roce[12 + (16 if reth else 0):-4]
    values = [int.from_bytes(body[i:i + 4], "big", signed=True) for i in range(0, len(body), 4)]
    icrc_ok = wire.icrc(raw[:28], roce[:-4]) == roce[-4:]
    return ip.src, ip.dst, op, dqpn, psn, ackreq, reth, values, icrc_ok


@pytest.mark.parametrize("count", [2, 3, 4])
def test_one_leaf_first_and_later_packets_sum_exactly(fabric_config, count):
    workers = [f"h{i}" for i in range(1, count + 1)]
    fab = Fabric(fabric_config, workers)
    rng = random.Random(count)
    vectors = {w: [vec(rng) for _ in range(rocev2.NR_MSG_PKTS)] for w in workers}
    result_qpn, _ = rocev2.nr_worker_qpns(count, JOB)
    for g in range(rocev2.NR_MSG_PKTS):
        for w in workers[:-1]:
            assert fab.contribution(w, g, vectors[w][g]) == []
        outs = fab.contribution(workers[-1], g, vectors[workers[-1]][g])
        assert sorted(p for p, _ in outs) == sorted(fab.host(w).leaf_port for w in workers)
        want = wrap([sum(c) for c in zip(*(vectors[w][g] for w in workers), strict=True)])
        for port, frame in outs:
            w = next(w for w in workers if fab.host(w).leaf_port == port)
            src, dst, op, dqpn, psn, ackreq, reth, values, icrc_ok = parse(frame)
            assert (src, dst, op, dqpn, psn) == ("10.0.1.253", fab.host(w).ip, rocev2.WRITE_ONLY,
                                                 result_qpn, g)
            assert reth == (g * nr.PKT_BYTES, JOB, nr.PKT_BYTES) and values == want and icrc_ok
            assert ackreq == (g == rocev2.NR_MSG_PKTS - 1)     # one ACK request per message
    ev = fab.events("leaf1")
    assert ev[EV_NEW] == count * rocev2.NR_MSG_PKTS and ev[EV_DONE] == rocev2.NR_MSG_PKTS
    # the message completed: its credit is back, its slots are complete
    assert fab.register("leaf1", "nr_credit", fab.job.stages[0].job_index) & 0xFF == 0


def test_later_packet_without_an_anchor_is_refused_then_mapped(fabric_config):
    fab = Fabric(fabric_config, ["h1", "h2"])
    assert fab.contribution("h1", 1, [1] * nr.VALUES) == []       # MIDDLE before any FIRST
    assert fab.events("leaf1")[EV_REFUSED] == 1
    assert fab.contribution("h1", 0, [1] * nr.VALUES) == []       # FIRST anchors the QP
    assert fab.contribution("h1", 1, [1] * nr.VALUES) == []       # now mapped by PSN
    assert fab.contribution("h2", 0, [2] * nr.VALUES) != []
    (_, frame), *_ = fab.contribution("h2", 1, [2] * nr.VALUES)
    assert parse(frame)[7] == [3] * nr.VALUES


def test_duplicate_before_completion_is_consumed_and_not_counted(fabric_config):
    fab = Fabric(fabric_config, ["h1", "h2", "h3"])
    for _ in range(3):
        assert fab.contribution("h1", 0, [5] * nr.VALUES) == []
    assert fab.contribution("h2", 0, [7] * nr.VALUES) == []
    outs = fab.contribution("h3", 0, [11] * nr.VALUES)
    assert len(outs) == 3 and all(parse(f)[7] == [23] * nr.VALUES for _, f in outs)
    assert fab.events("leaf1")[EV_DUP] == 2


def test_retransmission_after_completion_gets_the_kept_sum_by_unicast(fabric_config):
    fab = Fabric(fabric_config, ["h1", "h2"])
    fab.contribution("h1", 0, [4] * nr.VALUES)
    fab.contribution("h2", 0, [6] * nr.VALUES)
    result_qpn, _ = rocev2.nr_worker_qpns(2, JOB)
    for _ in range(2):   # idempotent: the kept sum does not move
        ((port, frame),) = fab.contribution("h2", 0, [6] * nr.VALUES)
        src, dst, op, dqpn, psn, ackreq, reth, values, icrc_ok = parse(frame)
        assert port == fab.host("h2").leaf_port and dst == fab.host("h2").ip
        assert (op, dqpn, psn, ackreq, values, icrc_ok) == \
            (rocev2.WRITE_ONLY, result_qpn, 0, True, [10] * nr.VALUES, True)
    assert fab.events("leaf1")[EV_KEPT] == 2


def test_ack_of_results_becomes_the_ack_of_contributions(fabric_config):
    fab = Fabric(fabric_config, ["h1", "h2"])
    fab.contribution("h1", 0, [1] * nr.VALUES)
    _, reply_ack_qpn = rocev2.nr_worker_qpns(2, JOB)
    for syndrome in (rocev2.AETH_ACK, rocev2.AETH_NAK_PSN):
        ((port, frame),) = fab.ack("h1", 3, syndrome)
        ip = Ether(frame)[IP]
        raw = bytes(ip)
        op, _, dqpn, psn, _, _ = wire.parse_bth(raw[28:])
        assert (port, ip.src, ip.dst, op, dqpn) == (fab.host("h1").leaf_port, "10.0.1.253",
                                                    fab.host("h1").ip, rocev2.ACKNOWLEDGE,
                                                    reply_ack_qpn)
        assert psn == (fab.ipsn["h1"] + 3) & wire.PSN_MASK
        assert raw[40] == syndrome
        assert wire.icrc(raw[:28], raw[28:-4]) == raw[-4:]


def test_credits_bound_messages_and_stale_copies_are_consumed(fabric_config):
    fab = Fabric(fabric_config, ["h1", "h2"], credits=2)
    window = 2 * rocev2.NR_MSG_PKTS
    # h1 runs ahead: messages 0 and 1 take both credits; message 2 (slot set 1) is refused
    for g in range(window):
        assert fab.contribution("h1", g, [g] * nr.VALUES) == []
    assert fab.contribution("h1", window, [0] * nr.VALUES) == []
    assert fab.events("leaf1")[EV_REFUSED] == 1
    assert fab.register("leaf1", "nr_credit", fab.job.stages[0].job_index) & 0xFF == 2
    for g in range(rocev2.NR_MSG_PKTS):       # message 0 completes: one credit back
        assert fab.contribution("h2", g, [1] * nr.VALUES) != []
    assert fab.register("leaf1", "nr_credit", fab.job.stages[0].job_index) & 0xFF == 1
    for g in range(window, window + rocev2.NR_MSG_PKTS):   # message 2 now starts
        assert fab.contribution("h1", g, [1] * nr.VALUES) == []
    before = fab.events("leaf1")[EV_NEW]
    for g in range(rocev2.NR_MSG_PKTS, window + rocev2.NR_MSG_PKTS):
        fab.contribution("h2", g, [1] * nr.VALUES)
    assert fab.events("leaf1")[EV_NEW] == before + window
    # round 2 * window reused message 0's slots: a late copy of packet 0 is stale
    fab.contribution("h2", 0, [1] * nr.VALUES)
    fab.contribution("h1", 2 * window, [0] * nr.VALUES)
    assert fab.contribution("h2", 0, [1] * nr.VALUES) == []
    assert fab.events("leaf1")[EV_STALE] == 1


def test_spine_stage_sums_the_leaves_and_multicasts_down(fabric_config):
    workers = ["h1", "h2", "h5", "h6", "h7"]          # leaf1: h1, h2; leaf2: h5, h6, h7
    fab = Fabric(fabric_config, workers)
    spine = fab.job.spine
    assert spine and [s.switch for s in fab.job.stages] == ["leaf1", "leaf2", spine]
    rng = random.Random(5)
    vectors = {w: vec(rng) for w in workers}
    partials = {}
    for w in workers:
        for port, frame in fab.contribution(w, 0, vectors[w]):
            partials[fab.host(w).leaf] = (port, frame)
    assert set(partials) == {"leaf1", "leaf2"}
    downs = []
    for leaf, (port, frame) in partials.items():
        src, dst, op, dqpn, psn, _, reth, values, icrc_ok = parse(frame)
        assert (dst, dqpn, psn, op, icrc_ok) == (fab.job.stages[-1].address,
                                                 up_qpn(fab.topo, leaf, JOB), 0,
                                                 rocev2.WRITE_ONLY, True)
        link = fab.topo.links_between(leaf, spine)[0]
        assert port == link.port_of(leaf)
        downs += fab.send(spine, link.port_of(spine), frame)
    assert len(downs) == 2          # only the second leaf's partial completes the spine
    want = wrap([sum(c) for c in zip(*vectors.values(), strict=True)])
    result_qpn, _ = rocev2.nr_worker_qpns(len(workers), JOB)
    got = {}
    for port, frame in downs:
        src, dst, op, dqpn, psn, _, reth, values, icrc_ok = parse(frame)
        leaf = next(lf for lf in ("leaf1", "leaf2")
                    if fab.topo.links_between(lf, spine)[0].port_of(spine) == port)
        assert (dst, dqpn, values, icrc_ok) == (fab.topo.switch(leaf).service_ip,
                                                down_qpn(fab.topo, leaf, JOB), want, True)
        link = fab.topo.links_between(leaf, spine)[0]
        for hport, hframe in fab.send(leaf, link.port_of(leaf), frame):
            got[hport, leaf] = parse(hframe)
    assert len(got) == len(workers)
    for w in workers:
        src, dst, op, dqpn, psn, _, reth, values, icrc_ok = got[fab.host(w).leaf_port,
                                                                fab.host(w).leaf]
        assert (src, dst, dqpn, psn, values, icrc_ok) == (
            fab.topo.switch(fab.host(w).leaf).service_ip, fab.host(w).ip, result_qpn, 0, want,
            True)
    # a retransmission after completion on a leaf resends its kept partial to the spine,
    # whose answer (the kept sum) goes back to that leaf alone
    ((port, frame),) = fab.contribution("h5", 0, vectors["h5"])
    link = fab.topo.links_between("leaf2", spine)[0]
    ((back_port, back),) = fab.send(spine, link.port_of(spine), frame)
    assert back_port == link.port_of(spine) and parse(back)[7] == want
    assert fab.events(spine)[EV_KEPT] == 1 and fab.events("leaf2")[EV_KEPT] == 1


# offsets in the IP packet: a value, the RETH's va, the BTH PSN, the IP source address
@pytest.mark.parametrize("corrupt", [1080 - 4, 40 + 4, 28 + 9, 12])
def test_corrupt_contribution_is_dropped_before_it_touches_a_slot(fabric_config, corrupt):
    """A contribution corrupted on the wire does not match its ICRC: the leaf drops it
    (nr_events 8) before it anchors the connection or reaches a slot, so nothing is summed
    and sent on with a fresh, valid ICRC; the worker's go-back-N retransmission (the same
    packet, intact) is counted once and the sum is exact."""
    fab = Fabric(fabric_config, ["h1", "h2"])
    rng = random.Random(corrupt)
    v1, v2 = vec(rng), vec(rng)
    anchor_before = fab.register("leaf1", "nr_anchor", 0)
    assert fab.contribution("h1", 0, v1, corrupt=corrupt) == []
    ev = fab.events("leaf1")
    assert ev[EV_BAD_ICRC] == 1 and ev[EV_NEW] == 0 and ev[EV_REFUSED] == 0
    assert fab.register("leaf1", "nr_anchor", 0) == anchor_before
    assert all(fab.register("leaf1", reg, i) == 0 for reg in ("nr_count", "nr_bitmap", "nr_tag")
               for i in range(8))
    assert fab.contribution("h1", 0, v1) == []                  # the retransmission
    outs = fab.contribution("h2", 0, v2)
    assert len(outs) == 2
    for _, frame in outs:
        values, icrc_ok = parse(frame)[7:]
        assert values == wrap([a + b for a, b in zip(v1, v2, strict=True)]) and icrc_ok
    assert fab.events("leaf1")[EV_NEW] == 2


def test_corrupt_ack_or_partial_sum_is_dropped(fabric_config):
    """A worker's ACK of results and a leaf's partial sum to the spine are checked too: the
    switch would otherwise turn them into a valid-looking ACK or sum."""
    fab = Fabric(fabric_config, ["h1", "h5"])                    # leaf1 and leaf2, a spine
    fab.contribution("h1", 0, [1] * nr.VALUES)
    assert fab.ack("h1", 0, corrupt=28 + 11) == []              # the PSN's low byte
    assert fab.events("leaf1")[EV_BAD_ICRC] == 1 and fab.events("leaf1")[EV_ACK] == 0
    ((port, partial),) = fab.contribution("h5", 0, [2] * nr.VALUES)
    spine = fab.job.spine
    bad = bytearray(partial)
    bad[-8] ^= 1                                                  # a value of the partial sum
    link = fab.topo.links_between("leaf2", spine)[0]
    assert fab.send(spine, link.port_of(spine), bytes(bad)) == []
    assert fab.events(spine)[EV_BAD_ICRC] == 1 and fab.events(spine)[EV_NEW] == 0
    assert fab.send(spine, link.port_of(spine), partial) == []    # counted now, not complete
    assert fab.events(spine)[EV_NEW] == 1
