"""Fast failover in fabric.p4: the port-liveness table (one bit per port in its default
action) and the controller's batch repair."""
from __future__ import annotations

from fabric_testlib import (
    SALT,
    UPLINKS,
    host_ip,
    install_group,
    install_leaf,
    ip,
    only_output,
    udp,
)

from fabricmodel import hashing

pytest_plugins = ["fabric_fixtures"]  # the `sw` fixture

DST = "10.0.2.77"


def _flows_by_member(n=4, per_member=5):
    flows = {m: [] for m in range(n)}
    sport = 0xC000
    while min(len(v) for v in flows.values()) < per_member:
        m = hashing.ecmp_member(host_ip(1), DST, 17, sport, 4791, n, SALT)
        if len(flows[m]) < per_member:
            flows[m].append(sport)
        sport += 1
    return flows


def _set_dead(sw, *ports):
    """What the controller writes: the liveness table's default action, every dead port's bit."""
    sw.table_set_default("FabricIngress.port_liveness", "FabricIngress.set_dead_ports",
                         {"ports": sum(1 << p for p in ports)})


def _port_of(sw, sport):
    outs = sw.process(1, udp(host_ip(1), DST, sport, 4791))
    return outs[0][0] if outs else None


def test_dead_member_falls_back_to_its_backup_only(sw):
    install_leaf(sw)
    flows = _flows_by_member()
    _set_dead(sw, UPLINKS[1])
    for member, sports in flows.items():
        for sport in sports:
            expected = UPLINKS[2] if member == 1 else UPLINKS[member]
            assert _port_of(sw, sport) == expected
    _set_dead(sw)
    assert {_port_of(sw, s) for s in flows[1]} == {UPLINKS[1]}


def test_member_and_backup_dead_drops_without_looping(sw):
    install_leaf(sw)
    flows = _flows_by_member()
    _set_dead(sw, *UPLINKS[1:3])
    assert [_port_of(sw, s) for s in flows[1]] == [None] * len(flows[1])
    assert {_port_of(sw, s) for s in flows[2]} == {UPLINKS[3]}
    assert {_port_of(sw, s) for s in flows[0]} == {UPLINKS[0]}
    assert sw.counter_read("FabricIngress.port_drops", 1)[0] == len(flows[1])


def test_spraying_skips_dead_members(sw):
    install_leaf(sw, mode=1)
    _set_dead(sw, UPLINKS[0])
    ports = [_port_of(sw, 0xC000) for _ in range(8)]
    assert UPLINKS[0] not in ports and set(ports) == set(UPLINKS[1:])


def test_pin_to_dead_port_is_routed_instead(sw):
    install_leaf(sw)
    sport = 0xC000
    hashed = UPLINKS[hashing.ecmp_member(host_ip(1), DST, 17, sport, 4791, 4, SALT)]
    pinned = next(p for p in UPLINKS if p != hashed)
    sw.table_add("FabricIngress.path_pin", {"hdr.ipv4.srcAddr": ip(host_ip(1)),
                                      "hdr.ipv4.dstAddr": ip(DST),
                                      "meta.l4_sport": sport, "meta.l4_dport": 4791},
                 "FabricIngress.pin_path", {"port": pinned})
    assert _port_of(sw, sport) == pinned
    _set_dead(sw, pinned)
    assert _port_of(sw, sport) == hashed


def test_route_to_a_dead_host_port_drops(sw):
    install_leaf(sw)
    _set_dead(sw, 3)
    assert sw.process(1, udp(host_ip(1), host_ip(3))) == []


def test_controller_batch_removes_a_port_from_every_group(sw):
    """The lasting repair: rewrite each group without the port, renumbering its members."""
    install_leaf(sw)
    install_group(sw, 2, UPLINKS[::-1])
    sw.table_add("FabricIngress.ipv4_route", {"meta.slice_id": 0,
                                        "hdr.ipv4.dstAddr": (ip("10.0.3.0"), 24)},
                 "FabricIngress.route_to_group", {"group": 2})
    dead = UPLINKS[2]
    for group in (1, 2):
        live = [p for p in (UPLINKS if group == 1 else UPLINKS[::-1]) if p != dead]
        for e in sw.table_entries("FabricIngress.ecmp_members"):
            if e.match["meta.ecmp_group"] == group:
                sw.table_delete("FabricIngress.ecmp_members", e.handle)
        for e in sw.table_entries("FabricIngress.ecmp_groups"):
            if e.match["meta.ecmp_group"] == group:
                sw.table_delete("FabricIngress.ecmp_groups", e.handle)
        install_group(sw, group, live)
    for dst, order in (("10.0.2.9", UPLINKS), ("10.0.3.9", UPLINKS[::-1])):
        live = [p for p in order if p != dead]
        for sport in range(0xC000, 0xC000 + 40):
            outs = sw.process(1, udp(host_ip(1), dst, sport, 4791))
            assert only_output(outs)[0] == live[
                hashing.ecmp_member(host_ip(1), dst, 17, sport, 4791, 3, SALT)]


def test_liveness_covers_every_port_number(sw):
    """Ports above 255 take the map's second half (p4c limits shift amounts to 8 bits)."""
    install_leaf(sw)
    for port in (44, 255, 256, 300, 509):    # (511 is the drop port)
        sw.table_add("FabricIngress.ipv4_route", {"meta.slice_id": 0,
                                                  "hdr.ipv4.dstAddr": (ip("10.0.9.9"), 32)},
                     "FabricIngress.route_to_port", {"port": port})
        data = udp(host_ip(1), "10.0.9.9")
        for dead, alive in (((), True), ((port,), False), ((port ^ 256, port - 1), True)):
            _set_dead(sw, *dead)
            assert [p for p, _ in sw.process(1, data)] == ([port] if alive else []), (port, dead)
        sw.table_clear("FabricIngress.ipv4_route")
