"""Three fabric.p4 switches wired together in-process (leaf1 - spine - leaf2): an aggregation
job on leaf1 with a worker behind leaf2, its result multicast back across the spine, and the
kept result unicast to a remote worker that retransmits."""
from __future__ import annotations

import pytest
from fabric_testlib import agg, ip, mac_int
from scapy.contrib.roce import BTH
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether

import p4switch
from collectives.layers import Aggregation
from fabricmodel.rocev2 import AGG_FLAG_RESULT

pytest_plugins = ["fabric_fixtures"]

AGGREGATOR, RESULT_IP, GROUP, JOB = "10.0.1.253", "239.1.0.5", 5, 7
UPLINK = 11
# (switch, port) <-> (switch, port) cables; everything else is a host port.
CABLES = {("leaf1", UPLINK): ("spine", 1), ("leaf2", UPLINK): ("spine", 2)}
CABLES.update({v: k for k, v in CABLES.items()})
HOSTS = {("leaf1", 1): "10.0.1.1", ("leaf2", 1): "10.0.2.1"}


def _mac(switch: str, port: int) -> str:
    return f"02:01:00:{['leaf1', 'leaf2', 'spine'].index(switch) + 1:02x}:00:{port:02x}"


def _host_mac(addr: str) -> str:
    return "02:00:" + ":".join(f"{int(b):02x}" for b in addr.split("."))


def _route(sw, prefix, plen, port):
    sw.table_add("FabricIngress.ipv4_route", {"meta.slice_id": 0,
                                              "hdr.ipv4.dstAddr": (ip(prefix), plen)},
                 "FabricIngress.route_to_port", {"port": port})


def _configure(name, sw):
    ports = [p for (s, p) in list(CABLES) + list(HOSTS) if s == name]
    for port in ports:
        peer = CABLES.get((name, port))
        dmac = _mac(*peer) if peer else _host_mac(HOSTS[(name, port)])
        sw.table_add("FabricEgress.port_mac", {"standard_metadata.egress_port": port},
                     "FabricEgress.set_port_macs",
                     {"smac": mac_int(_mac(name, port)), "dmac": mac_int(dmac)})
    sw.mc_group_create(GROUP, [(p, p) for p in sorted(ports)])
    sw.table_add("FabricIngress.mcast_route", {"meta.slice_id": 0,
                                               "hdr.ipv4.dstAddr": ip(RESULT_IP)},
                 "FabricIngress.set_mcast_group", {"group": GROUP})
    if name == "spine":
        _route(sw, "10.0.1.0", 24, 1)
        _route(sw, "10.0.2.0", 24, 2)
        return
    other = "10.0.2.0" if name == "leaf1" else "10.0.1.0"
    host = HOSTS[(name, 1)]
    _route(sw, host, 32, 1)
    _route(sw, other, 24, UPLINK)
    sw.table_add("FabricEgress.mcast_rewrite", {"meta.mcast_grp": GROUP,
                                                "standard_metadata.egress_rid": 1},
                 "FabricEgress.rewrite_replica",
                 {"smac": mac_int(_mac(name, 1)), "dmac": mac_int(_host_mac(host)),
                  "dst_ip": ip(host)})
    if name == "leaf1":
        sw.table_add("FabricIngress.switchml_jobs", {"hdr.ipv4.dstAddr": ip(AGGREGATOR),
                                                "hdr.sml.jobId": JOB},
                     "FabricIngress.switchml_job", {"gen": 1, "result_ip": ip(RESULT_IP),
                                               "slot_base": 0, "num_slots": 8, "num_workers": 2})


@pytest.fixture
def net(fabric_config):
    switches = {name: p4switch.load_config(*fabric_config) for name in ("leaf1", "leaf2", "spine")}
    for name, sw in switches.items():
        _configure(name, sw)
    return switches


def _send(net, switch, port, data, hops=8):
    """Inject at (switch, port), carry packets over the cables; -> {host ip: [frames]}."""
    delivered: dict[str, list[bytes]] = {}
    queue = [(switch, port, data, 0)]
    while queue:
        name, in_port, frame, depth = queue.pop(0)
        assert depth < hops, "forwarding loop"
        for out_port, out in net[name].process(in_port, frame):
            peer = CABLES.get((name, out_port))
            if peer:
                queue.append((*peer, out, depth + 1))
            else:
                delivered.setdefault(HOSTS[(name, out_port)], []).append(out)
    return delivered


def _worker(n, values, src):
    pkt = Ether(agg(n, values, num_workers=2, slot=3))
    pkt[IP].src = src
    del pkt[IP].chksum
    pkt[BTH].icrc = None                 # the ICRC covers the source address: the sender's
    return bytes(pkt)


@pytest.mark.parametrize("last", ["local", "remote"])
def test_result_reaches_local_and_remote_workers(net, last):
    local = _worker(0, [5] * 32, "10.0.1.1")
    remote = _worker(1, [-7] * 32, "10.0.2.1")
    first, second = (remote, local) if last == "local" else (local, remote)
    where = {local: ("leaf1", 1), remote: ("leaf2", 1)}
    assert _send(net, *where[first], first) == {}
    got = _send(net, *where[second], second)
    assert sorted(got) == ["10.0.1.1", "10.0.2.1"]
    for host, (frame,) in got.items():
        pkt = Ether(frame)
        assert (pkt[IP].src, pkt[IP].dst) == (AGGREGATOR, host)
        assert pkt.dst == _host_mac(host)
        assert pkt[Aggregation].values == [-2] * 32
        assert pkt[Aggregation].flags == AGG_FLAG_RESULT
    # The remote worker missed it and retransmits: the kept result comes back by unicast.
    (frame,) = _send(net, "leaf2", 1, remote)["10.0.2.1"]
    assert Ether(frame)[Aggregation].values == [-2] * 32
    assert net["spine"].counter_read("FabricIngress.mcast_packets", GROUP)[0] == 1
