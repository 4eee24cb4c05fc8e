"""fabric.p4 configured the way the controller does it: `p4switch run` (and BMv2's
simple_switch_grpc where installed) on three veth ports, pipeline pushed and entries written
over P4Runtime (p4runtime-shell), packets forwarded end to end: a host route, ECMP, fast
failover through the port-liveness table, a pin and its counter, a corrupt SwitchML
contribution dropped."""
from __future__ import annotations

import shutil
import socket
import time

import p4runtime_sh.shell as sh
import pytest
from fabric_testlib import SALT, agg, host_ip, port_dmac, port_smac, routed, udp
from p4rt_fabric import fabric_switch, veth_pairs

from collectives.wire import icrc
from fabricmodel import hashing
from fabricmodel.rocev2 import AGG_VALUES

pytestmark = pytest.mark.netns
ETH_P_ALL = 0x0003


class Wires:
    """Raw sockets on the wire ends: port 1 sends, every port can receive."""

    def __init__(self, pairs):
        self.rx = {}
        for port, (_, wire) in enumerate(pairs, start=1):
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            sock.bind((wire, 0))
            sock.settimeout(0.05)
            self.rx[port] = sock
        self.tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        self.tx.bind((pairs[0][1], 0))

    def send(self, data: bytes, marker: bytes, wait: float = 1.5) -> dict[int, list[bytes]]:
        """Send `data` into port 1; the frames carrying `marker` that leave each port."""
        self.tx.send(data)
        got: dict[int, list[bytes]] = {}
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            for port, sock in self.rx.items():
                try:
                    frame, addr = sock.recvfrom(4096)
                except TimeoutError:
                    continue
                if addr[2] != socket.PACKET_OUTGOING and marker in frame:
                    got.setdefault(port, []).append(frame)
            if got:
                deadline = min(deadline, time.monotonic() + 0.2)
        return got

    def close(self):
        for sock in [self.tx, *self.rx.values()]:
            sock.close()


@pytest.fixture(params=["p4switch", pytest.param("bmv2", marks=pytest.mark.bmv2)])
def target(request):
    if request.param == "bmv2" and shutil.which("p4c-bm2-ss") is None:
        pytest.skip("p4c-bm2-ss is not on PATH")
    return request.param


@pytest.fixture
def fabric(target, tmp_path):
    """fabric.p4 on `p4switch run` (or simple_switch_grpc), pushed by p4runtime-shell; yields
    the raw wires."""
    with veth_pairs("f") as pairs, \
            fabric_switch(target, pairs, tmp_path,
                          {p: (port_smac(p), port_dmac(p)) for p in (2, 3)}):
        wires = Wires(pairs)
        try:
            yield wires
        finally:
            wires.close()


def _route(prefix: str, action: str, **params):
    entry = sh.TableEntry("FabricIngress.ipv4_route")(action=f"FabricIngress.{action}")
    entry.match["meta.slice_id"] = "0"
    entry.match["hdr.ipv4.dstAddr"] = prefix
    for name, value in params.items():
        entry.action[name] = str(value)
    entry.insert()


def _set_dead_ports(*ports: int) -> None:
    """Port liveness as the controller writes it: the default action of a table (both
    targets serve that over P4Runtime; simple_switch_grpc refuses register writes)."""
    entry = sh.TableEntry("FabricIngress.port_liveness")(
        is_default=True, action="FabricIngress.set_dead_ports")
    entry.action["ports"] = str(sum(1 << p for p in ports))
    entry.modify()


def _set_salt(salt: int) -> None:
    """The ECMP salt as the controller writes it: a default action, like port liveness."""
    entry = sh.TableEntry("FabricIngress.ecmp_salt")(
        is_default=True, action="FabricIngress.set_ecmp_salt")
    entry.action["salt"] = str(salt)
    entry.modify()


def test_host_route_forwards_and_counts(fabric):
    _route(f"{host_ip(2)}/32", "route_to_port", port=2)
    data = udp(host_ip(1), host_ip(2), 0xC000, 4791, payload=b"through p4runtime")
    assert fabric.send(data, b"through p4runtime") == {2: [routed(data, 2)]}
    (sent,) = sh.CounterEntry("FabricEgress.port_tx")(index=2).read()
    assert (sent.packet_count, sent.byte_count) == (1, len(data))


def test_ecmp_failover_and_pin_over_p4runtime(fabric):
    _set_salt(SALT)
    _route("10.0.2.0/24", "route_to_group", group=1)
    group = sh.TableEntry("FabricIngress.ecmp_groups")(action="FabricIngress.set_group")
    group.match["meta.ecmp_group"] = "1"
    group.action["size"], group.action["mode"] = "2", "0"
    group.insert()
    for member, (port, backup) in enumerate(((2, 3), (3, 2))):
        entry = sh.TableEntry("FabricIngress.ecmp_members")(action="FabricIngress.set_member")
        entry.match["meta.ecmp_group"], entry.match["meta.ecmp_member"] = "1", str(member)
        entry.action["port"], entry.action["backup_port"] = str(port), str(backup)
        entry.insert()

    dst = "10.0.2.9"
    to_2 = hashing.sport_for_member(host_ip(1), dst, 4791, 2, 0, SALT)
    to_3 = hashing.sport_for_member(host_ip(1), dst, 4791, 2, 1, SALT)
    flow_a = udp(host_ip(1), dst, to_2, 4791, payload=b"flow a: long enough for a BTH")
    flow_b = udp(host_ip(1), dst, to_3, 4791, payload=b"flow b: long enough for a BTH")
    assert fabric.send(flow_a, b"flow a") == {2: [routed(flow_a, 2)]}
    assert fabric.send(flow_b, b"flow b") == {3: [routed(flow_b, 3)]}

    _set_dead_ports(2)  # fast failover: member 0 falls back to its backup, port 3
    assert fabric.send(flow_a, b"flow a") == {3: [routed(flow_a, 3)]}
    _set_dead_ports()
    assert fabric.send(flow_a, b"flow a") == {2: [routed(flow_a, 2)]}

    pin = sh.TableEntry("FabricIngress.path_pin")(action="FabricIngress.pin_path")
    pin.match["hdr.ipv4.srcAddr"], pin.match["hdr.ipv4.dstAddr"] = host_ip(1), dst
    pin.match["meta.l4_sport"], pin.match["meta.l4_dport"] = str(to_3), "4791"
    pin.action["port"] = "2"
    pin.insert()
    assert fabric.send(flow_b, b"flow b") == {2: [routed(flow_b, 2)]}
    (hits,) = sh.DirectCounterEntry("FabricIngress.pin_counter").read()
    assert (hits.packet_count, hits.byte_count) == (1, len(flow_b))


def test_corrupt_switchml_contribution_is_dropped_on_the_target(fabric):
    """A one-worker SwitchML job whose result goes to a host route: the intact contribution
    comes back as the result with its own valid ICRC; a corrupted one (one value bit, the
    ICRC left as it was) is dropped before it touches the slot."""
    _route(f"{host_ip(2)}/32", "route_to_port", port=2)
    job = sh.TableEntry("FabricIngress.switchml_jobs")(action="FabricIngress.switchml_job")
    job.match["hdr.ipv4.dstAddr"], job.match["hdr.sml.jobId"] = "10.0.1.253", "7"
    for name, value in (("gen", 1), ("result_ip", host_ip(2)), ("slot_base", 0),
                        ("num_slots", 4), ("num_workers", 1)):
        job.action[name] = str(value)
    job.insert()
    values = [0x5A5A0000 + i for i in range(AGG_VALUES)]
    marker = (0x5A5A0003).to_bytes(4, "big")
    good = agg(0, values, slot=1, num_workers=1)
    bad = bytearray(good)
    bad[-5] ^= 1
    assert fabric.send(bytes(bad), marker) == {}
    (drops,) = sh.CounterEntry("FabricIngress.port_drops")(index=1).read()
    assert drops.packet_count == 1
    got = fabric.send(good, marker)
    assert list(got) == [2] and len(got[2]) == 1
    raw = got[2][0][14:]
    assert icrc(raw[:28], raw[28:-4]) == raw[-4:]
