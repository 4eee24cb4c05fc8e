"""ECMP (the controller's hash), path pins and per-packet spraying in fabric.p4."""
from __future__ import annotations

import random
from collections import Counter

from fabric_testlib import (
    SALT,
    UPLINKS,
    host_ip,
    install_group,
    install_leaf,
    ip,
    only_output,
    routed,
    udp,
)

import p4switch
from fabricmodel import hashing

pytest_plugins = ["fabric_fixtures"]  # the `sw` fixture


def test_ecmp_member_equals_controller_hash_for_1000_flows(sw):
    install_leaf(sw)
    rng = random.Random(5)
    seen = Counter()
    for _ in range(1000):
        src = f"10.0.1.{rng.randint(1, 8)}"
        dst = f"10.0.2.{rng.randint(1, 250)}"
        sport, dport = rng.randint(0, 0xFFFF), rng.choice([4791, rng.randint(0, 0xFFFF)])
        data = udp(src, dst, sport, dport)
        port, out = only_output(sw.process(rng.randint(1, 8), data))
        assert port == UPLINKS[hashing.ecmp_member(src, dst, 17, sport, dport, 4, SALT)]
        assert out == routed(data, port)
        seen[port] += 1
    assert set(seen) == set(UPLINKS)


def test_salt_two_leaves_pick_different_members_and_the_model_predicts_both(fabric_config):
    """Two switches of one tier with their own salts (as the controller sets them): the same
    5-tuples leave by different members at each, every one where the model says; with the
    salts' offsets swapped, so are the choices (the salt alone decides)."""
    info, config = fabric_config
    salts = [hashing.switch_salt("leaf1"), hashing.switch_salt("leaf2")]
    assert salts[0] != salts[1]
    switches = [p4switch.load_config(info, config) for _ in salts]
    for s, salt in zip(switches, salts, strict=True):
        install_leaf(s, salt=salt)
    rng = random.Random(11)
    differ = 0
    for _ in range(100):
        src, dst = host_ip(rng.randint(1, 8)), f"10.0.2.{rng.randint(1, 250)}"
        sport = rng.randint(0xC000, 0xFFFF)
        data = udp(src, dst, sport, 4791)
        got = [only_output(s.process(1, data))[0] for s in switches]
        want = [UPLINKS[hashing.ecmp_member(src, dst, 17, sport, 4791, 4, salt)]
                for salt in salts]
        assert got == want
        differ += got[0] != got[1]
    assert differ > 50           # 3 in 4 for independent choices of 4


def test_group_size_three_uses_modulo_of_the_size(sw):
    install_leaf(sw, uplinks=UPLINKS[:3])
    for sport in range(0xC000, 0xC000 + 60):
        port, _ = only_output(sw.process(1, udp(host_ip(1), "10.0.2.7", sport, 4791)))
        assert port == UPLINKS[hashing.ecmp_member(host_ip(1), "10.0.2.7", 17, sport, 4791, 3,
                                                   SALT)]


def test_sport_for_member_steers_onto_the_chosen_uplink(sw):
    install_leaf(sw)
    for member, uplink in enumerate(UPLINKS):
        sport = hashing.sport_for_member(host_ip(2), "10.0.2.1", 4791, 4, member, SALT)
        assert only_output(sw.process(2, udp(host_ip(2), "10.0.2.1", sport, 4791)))[0] == uplink


def _pin(sw, src, dst, sport, dport, port):
    return sw.table_add("FabricIngress.path_pin", {"hdr.ipv4.srcAddr": ip(src),
                                             "hdr.ipv4.dstAddr": ip(dst),
                                             "meta.l4_sport": sport, "meta.l4_dport": dport},
                        "FabricIngress.pin_path", {"port": port})


def test_pin_overrides_ecmp_and_counts(sw):
    install_leaf(sw)
    src, dst, sport = host_ip(1), "10.0.2.3", 0xC001
    hashed = UPLINKS[hashing.ecmp_member(src, dst, 17, sport, 4791, 4, SALT)]
    pinned = next(p for p in UPLINKS if p != hashed)
    handle = _pin(sw, src, dst, sport, 4791, pinned)
    data = udp(src, dst, sport, 4791)
    for _ in range(5):
        port, out = only_output(sw.process(1, data))
        assert port == pinned and out == routed(data, pinned)
    assert sw.direct_counter_read("FabricIngress.path_pin", handle) == (5, 5 * len(data))
    # Another source port of the same host pair is not pinned.
    other = udp(src, dst, sport + 1, 4791)
    assert only_output(sw.process(1, other))[0] == UPLINKS[
        hashing.ecmp_member(src, dst, 17, sport + 1, 4791, 4, SALT)]
    assert sw.direct_counter_read("FabricIngress.path_pin", handle)[0] == 5
    sw.table_delete("FabricIngress.path_pin", handle)
    assert only_output(sw.process(1, data))[0] == hashed


def test_round_robin_spraying_cycles_one_flow_over_all_members(sw):
    install_leaf(sw, mode=1)
    data = udp(host_ip(1), "10.0.2.3", 0xC001, 4791)
    ports = [only_output(sw.process(1, data))[0] for _ in range(12)]
    assert ports == UPLINKS * 3


def test_round_robin_is_per_group(sw):
    install_leaf(sw, mode=1)
    install_group(sw, 2, [5, 6], mode=1)
    sw.table_add("FabricIngress.ipv4_route", {"meta.slice_id": 0,
                                        "hdr.ipv4.dstAddr": (ip("10.0.3.0"), 24)},
                 "FabricIngress.route_to_group", {"group": 2})
    seq = [only_output(sw.process(1, udp(host_ip(1), dst)))[0]
           for dst in ["10.0.2.1", "10.0.3.1", "10.0.2.1", "10.0.3.1", "10.0.2.1"]]
    assert seq == [11, 5, 12, 6, 13]


def test_random_spraying_spreads_one_flow_over_all_members(sw):
    install_leaf(sw, mode=2)
    data = udp(host_ip(1), "10.0.2.3", 0xC001, 4791)
    counts = Counter(only_output(sw.process(1, data))[0] for _ in range(400))
    assert set(counts) == set(UPLINKS)
    assert min(counts.values()) > 50  # uniform: expected 100 each


def test_group_without_members_entry_or_size_zero_drops(sw):
    install_leaf(sw)
    sw.table_add("FabricIngress.ipv4_route", {"meta.slice_id": 0,
                                        "hdr.ipv4.dstAddr": (ip("10.0.4.0"), 24)},
                 "FabricIngress.route_to_group", {"group": 9})
    assert sw.process(1, udp(host_ip(1), "10.0.4.1")) == []
    sw.table_add("FabricIngress.ecmp_groups", {"meta.ecmp_group": 9}, "FabricIngress.set_group",
                 {"size": 0, "mode": 0})
    assert sw.process(1, udp(host_ip(1), "10.0.4.1")) == []
    assert sw.counter_read("FabricIngress.port_drops", 1)[0] == 2
