"""In-network aggregation in fabric.p4: exact wrap-around sums, idempotent duplicates before and
after completion, the kept result for late retransmissions, slot reuse, and a later job on an
earlier job's slots."""
from __future__ import annotations

import random

import pytest
from fabric_testlib import (
    agg,
    host_ip,
    host_mac,
    install_leaf,
    ip,
    mac_int,
    port_smac,
    routed,
)
from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from collectives import wire
from collectives.layers import Aggregation
from fabricmodel.rocev2 import AGG_FLAG_RESULT, AGG_VALUES, AGGREGATION

pytest_plugins = ["fabric_fixtures"]  # the `sw` fixture

AGGREGATOR, JOB, RESULT_GROUP, RESULT_IP = "10.0.1.253", 7, 5, "239.1.0.5"
SLOT_BASE = 16


def _job(sw, workers, slots=4, gen=1):
    install_leaf(sw)
    sw.mc_group_create(RESULT_GROUP, [(p, p) for p in range(1, workers + 1)])
    sw.table_add("FabricIngress.mcast_route", {"meta.slice_id": 0, "hdr.ipv4.dstAddr": ip(RESULT_IP)},
                 "FabricIngress.set_mcast_group", {"group": RESULT_GROUP})
    for p in range(1, workers + 1):
        sw.table_add("FabricEgress.mcast_rewrite", {"meta.mcast_grp": RESULT_GROUP,
                                              "standard_metadata.egress_rid": p},
                     "FabricEgress.rewrite_replica",
                     {"smac": mac_int(port_smac(p)), "dmac": mac_int(host_mac(p)),
                      "dst_ip": ip(host_ip(p))})
    return _job_entry(sw, workers, slots, gen)


def _job_entry(sw, workers, slots, gen):
    return sw.table_add("FabricIngress.switchml_jobs",
                        {"hdr.ipv4.dstAddr": ip(AGGREGATOR), "hdr.sml.jobId": JOB},
                        "FabricIngress.switchml_job",
                        {"gen": gen, "result_ip": ip(RESULT_IP), "slot_base": SLOT_BASE,
                         "num_slots": slots, "num_workers": workers})


def _values(rng):
    return [rng.randint(-2**31, 2**31 - 1) for _ in range(AGG_VALUES)]


def _wrap_sum(vectors):
    out = []
    for column in zip(*vectors, strict=True):
        s = sum(column) & 0xFFFFFFFF
        out.append(s - 2**32 if s >= 2**31 else s)
    return out


def _contribute(sw, worker, values, slot=0, **kw):
    """Worker `worker` contributes to the job's slot number `slot` (counted from slot_base)."""
    return sw.process(worker + 1, agg(worker, values, slot=SLOT_BASE + slot, **kw))


def _check_result(out, port, sums, version, *, dst_ip):
    pkt = Ether(out)
    assert pkt[BTH].opcode == AGGREGATION
    a = pkt[Aggregation]
    assert a.values == sums
    assert a.flags == AGG_FLAG_RESULT | (version << 1)
    assert (pkt[IP].src, pkt[IP].dst, pkt[IP].ttl) == (AGGREGATOR, dst_ip, 64)
    assert (pkt.src, pkt.dst) == (port_smac(port), host_mac(port))
    assert pkt[UDP].chksum == 0 and pkt[UDP].dport == 4791
    raw = bytes(pkt[IP])               # the switch wrote the result's own ICRC
    assert wire.icrc(raw[:28], raw[28:-4]) == raw[-4:]


@pytest.mark.parametrize("workers", range(2, 9))
def test_sum_of_n_workers_is_exact_and_multicast_to_all(sw, workers):
    _job(sw, workers)
    rng = random.Random(workers)
    vectors = [_values(rng) for _ in range(workers)]
    order = list(range(workers))
    rng.shuffle(order)
    for w in order[:-1]:
        assert _contribute(sw, w, vectors[w], num_workers=workers, slot=1) == []
    outs = dict(_contribute(sw, order[-1], vectors[order[-1]], num_workers=workers, slot=1))
    assert set(outs) == set(range(1, workers + 1))  # the completing worker too
    for port, out in outs.items():
        _check_result(out, port, _wrap_sum(vectors), 0, dst_ip=host_ip(port))
    assert sw.register_read("FabricIngress.switchml_count", 2 * (SLOT_BASE + 1)) == workers


def test_duplicates_before_completion_do_not_double_count(sw):
    _job(sw, 3)
    rng = random.Random(1)
    vectors = [_values(rng) for _ in range(3)]
    for _ in range(3):
        assert _contribute(sw, 0, vectors[0], num_workers=3) == []
    assert _contribute(sw, 1, vectors[1], num_workers=3) == []
    assert _contribute(sw, 1, vectors[1], num_workers=3) == []
    outs = dict(_contribute(sw, 2, vectors[2], num_workers=3))
    assert set(outs) == {1, 2, 3}
    assert Ether(outs[1])[Aggregation].values == _wrap_sum(vectors)


def test_retransmission_after_completion_gets_the_kept_result_by_unicast(sw):
    _job(sw, 3)
    rng = random.Random(2)
    vectors = [_values(rng) for _ in range(3)]
    for w in range(3):
        _contribute(sw, w, vectors[w], num_workers=3)
    for _ in range(2):  # idempotent: the sums do not move
        (port, out), = _contribute(sw, 1, vectors[1], num_workers=3)
        assert port == 2
        _check_result(out, 2, _wrap_sum(vectors), 0, dst_ip=host_ip(2))


def test_slot_reuse_alternates_versions_and_keeps_the_previous_result(sw):
    _job(sw, 2)
    rng = random.Random(3)
    rounds = [[_values(rng) for _ in range(2)] for _ in range(4)]
    for n, vectors in enumerate(rounds):
        version = n % 2
        assert _contribute(sw, 0, vectors[0], version=version) == []
        if n:
            # Worker 1 has not moved on yet: its retransmission of the previous use is
            # answered from the other set, which worker 0's new contribution left intact.
            (port, out), = _contribute(sw, 1, rounds[n - 1][1], version=1 - version)
            _check_result(out, 2, _wrap_sum(rounds[n - 1]), 1 - version, dst_ip=host_ip(2))
        outs = dict(_contribute(sw, 1, vectors[1], version=version))
        assert set(outs) == {1, 2}
        _check_result(outs[1], 1, _wrap_sum(vectors), version, dst_ip=host_ip(1))


def test_a_later_job_on_the_same_slots_gets_its_own_sums_not_the_kept_ones(sw):
    # The controller reuses job ids and slots and writes no registers: the second job (same
    # id, same slots, another generation) starts each slot in version 0, where the first job
    # left complete sets (slots 0 and 2: its last round was in version 0) or not (1 and 3).
    handle = _job(sw, 2, gen=1)
    rng = random.Random(4)
    for slot in range(4):
        for version in range(1 + slot % 2):
            vectors = [_values(rng) for _ in range(2)]
            assert _contribute(sw, 0, vectors[0], slot=slot, version=version) == []
            assert len(_contribute(sw, 1, vectors[1], slot=slot, version=version)) == 2
    sw.table_delete("FabricIngress.switchml_jobs", handle)
    _job_entry(sw, 2, 4, gen=2)
    for slot in range(4):
        for version in (0, 1):
            vectors = [_values(rng) for _ in range(2)]
            assert _contribute(sw, 1, vectors[1], slot=slot, version=version) == []
            outs = dict(_contribute(sw, 0, vectors[0], slot=slot, version=version))
            assert set(outs) == {1, 2}
            for port, out in outs.items():
                _check_result(out, port, _wrap_sum(vectors), version, dst_ip=host_ip(port))
            # Its own kept result now answers its retransmissions.
            (port, out), = _contribute(sw, 1, vectors[1], slot=slot, version=version)
            _check_result(out, 2, _wrap_sum(vectors), version, dst_ip=host_ip(2))


def test_slots_are_independent(sw):
    _job(sw, 2)
    a, b = [1] * AGG_VALUES, [2] * AGG_VALUES
    assert _contribute(sw, 0, a, slot=0) == []
    assert _contribute(sw, 0, b, slot=3) == []
    assert Ether(_contribute(sw, 1, a, slot=3)[0][1])[Aggregation].values == [3] * AGG_VALUES
    assert Ether(_contribute(sw, 1, b, slot=0)[0][1])[Aggregation].values == [3] * AGG_VALUES


def test_out_of_range_slot_or_worker_is_dropped_and_counted(sw):
    _job(sw, 2, slots=4)
    assert _contribute(sw, 0, [1] * AGG_VALUES, slot=4) == []
    assert _contribute(sw, 0, [1] * AGG_VALUES, slot=-1) == []  # another job's slot
    assert sw.process(3, agg(2, [1] * AGG_VALUES, slot=SLOT_BASE)) == []
    assert sw.counter_read("FabricIngress.port_drops", 1)[0] == 2
    assert sw.counter_read("FabricIngress.port_drops", 3)[0] == 1
    assert sw.register_read("FabricIngress.switchml_count", 2 * SLOT_BASE) == 0


def test_without_a_job_the_contribution_is_routed_on(sw):
    install_leaf(sw)
    data = agg(0, list(range(AGG_VALUES)), dst="10.0.2.253")
    (port, out), = sw.process(1, data)
    assert port in (11, 12, 13, 14) and out == routed(data, port)


def test_other_roce_opcodes_are_plain_traffic(sw):
    _job(sw, 2)
    data = bytes(Ether() / IP(src=host_ip(1), dst=AGGREGATOR) / UDP(sport=0xC000, dport=4791)
                 / BTH(opcode=0x0A, psn=1) / (b"\x00" * 140))
    assert sw.process(1, data) == []  # routed: the aggregator address has no route here
    sw.table_add("FabricIngress.ipv4_route", {"meta.slice_id": 0,
                                        "hdr.ipv4.dstAddr": (ip(AGGREGATOR), 32)},
                 "FabricIngress.route_to_port", {"port": 8})
    (port, out), = sw.process(1, data)
    assert port == 8 and out == routed(data, 8)


def _corrupted(frame: bytes, offset: int = -5) -> bytes:
    """`frame` with one byte the ICRC covers changed (by default the last value's)."""
    out = bytearray(frame)
    out[offset] ^= 0x40
    pkt = Ether(bytes(out))
    del pkt[IP].chksum                   # a router on the way would have made it valid again
    return bytes(pkt)


@pytest.mark.parametrize("offset", [-5, 14 + 20 + 8 + 12 + 8, 14 + 12])
def test_corrupt_contribution_is_dropped_before_it_touches_a_slot(sw, offset):
    """A value, the worker id or the source address corrupted on the way: the ICRC does not
    match, so the switch drops it (counted) and no register moves; the worker's
    retransmission (its timer) then counts once, and the sum is exact."""
    _job(sw, 2)
    rng = random.Random(9)
    vectors = [_values(rng) for _ in range(2)]
    bad = _corrupted(agg(0, vectors[0], slot=SLOT_BASE, num_workers=2), offset)
    assert sw.process(1, bad) == []
    assert sw.counter_read("FabricIngress.port_drops", 1)[0] == 1
    assert sw.register_read("FabricIngress.switchml_count", 2 * SLOT_BASE) == 0
    assert sw.register_read("FabricIngress.switchml_bitmap", 2 * SLOT_BASE) == 0
    assert _contribute(sw, 0, vectors[0], num_workers=2) == []      # the retransmission
    outs = dict(_contribute(sw, 1, vectors[1], num_workers=2))
    for port, out in outs.items():
        _check_result(out, port, _wrap_sum(vectors), 0, dst_ip=host_ip(port))


def test_corrupt_or_misframed_switchml_packet_in_transit_is_dropped(sw):
    """Not only on the aggregating leaf: a corrupted 0xC0 packet is dropped wherever it is
    parsed (a result re-made with a fresh ICRC would hide the corruption), and so is one
    whose length is not the aggregation packet's."""
    install_leaf(sw)
    good = agg(0, [1] * AGG_VALUES, dst="10.0.2.1")        # routed on: no job here
    assert len(sw.process(1, good)) == 1
    assert sw.process(1, _corrupted(good)) == []
    pkt = Ether(good)
    pkt[IP].len += 4
    longer = bytes(pkt) + bytes(4)
    assert sw.process(1, longer) == []
    assert sw.counter_read("FabricIngress.port_drops", 1)[0] == 2
