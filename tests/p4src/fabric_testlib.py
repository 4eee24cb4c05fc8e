"""Packets and control-plane settings shared by the fabric.p4 tests.

The switch under test is a leaf: hosts 10.0.1.1..8 on ports 1..8, uplinks on ports 11..14
(ECMP group 1 toward 10.0.2.0/24). Port p's own MAC is 02:01:00:01:00:pp; its neighbour is
host p (02:00:0a:00:01:pp) or a spine port (02:0a:00:00:00:pp), so rewrites show in the bytes.
"""
from __future__ import annotations

import ipaddress
from pathlib import Path

from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from collectives.layers import Aggregation
from fabricmodel.hashing import switch_salt
from fabricmodel.rocev2 import AGGREGATION

FABRIC_P4 = Path(__file__).resolve().parents[2] / "p4src" / "fabric.p4"
HOST_PORTS = list(range(1, 9))
UPLINKS = [11, 12, 13, 14]
GROUP = 1
REMOTE_NET = "10.0.2.0"
SALT = switch_salt("leaf1")   # the switch under test is leaf1; its ECMP hash's salt
ROCE = 4791
# Long enough to parse as a BTH when sent to UDP 4791 (a shorter RoCE packet is malformed).
PAYLOAD = b"fabric.p4 test payload"


def ip(addr: str) -> int:
    return int(ipaddress.IPv4Address(addr))


def mac_int(addr: str) -> int:
    return int(addr.replace(":", ""), 16)


def port_smac(port: int) -> str:
    return f"02:01:00:01:00:{port:02x}"


def port_dmac(port: int) -> str:
    """The neighbour on a port: the host on host ports, a spine port on uplinks."""
    return host_mac(port) if port in HOST_PORTS else f"02:0a:00:00:00:{port:02x}"


def host_ip(n: int) -> str:
    return f"10.0.1.{n}"


def host_mac(n: int) -> str:
    return f"02:00:0a:00:01:{n:02x}"


def udp(src: str, dst: str, sport: int = 0xC000, dport: int = 5000, *, ttl: int = 64,
        ecn: int = 0, payload: bytes = PAYLOAD, smac: str | None = None) -> bytes:
    return bytes(Ether(src=smac or host_mac(1), dst="02:01:00:01:00:01")
                 / IP(src=src, dst=dst, ttl=ttl, tos=ecn) / UDP(sport=sport, dport=dport)
                 / Raw(payload))


def tcp(src: str, dst: str, sport: int, dport: int, *, ttl: int = 64) -> bytes:
    return bytes(Ether(src=host_mac(1), dst="02:01:00:01:00:01")
                 / IP(src=src, dst=dst, ttl=ttl) / TCP(sport=sport, dport=dport) / Raw(b"tcp"))


def agg(worker: int, values, *, job: int = 7, slot: int = 0, version: int = 0,
        num_workers: int = 2, dst: str = "10.0.1.253", chunk_seq: int = 0,
        sport: int = 0xC123) -> bytes:
    """A contribution from host `worker + 1` (worker ids are 0-based); scapy appends the ICRC."""
    return bytes(Ether(src=host_mac(worker + 1), dst=port_smac(worker + 1))
                 / IP(src=host_ip(worker + 1), dst=dst) / UDP(sport=sport, dport=ROCE)
                 / BTH(opcode=AGGREGATION, dqpn=0x11, psn=chunk_seq)
                 / Aggregation(job_id=job, slot=slot, chunk_seq=chunk_seq, worker_id=worker,
                               num_workers=num_workers, flags=version << 1, values=list(values)))


def routed(data: bytes, port: int, *, ttl_delta: int = 1) -> bytes:
    """What the leaf should send for `data` out of `port`: port MACs, TTL - 1, new checksum."""
    pkt = Ether(data)
    pkt[Ether].src, pkt[Ether].dst = port_smac(port), port_dmac(port)
    pkt[IP].ttl -= ttl_delta
    del pkt[IP].chksum
    return bytes(pkt)


def ipv4_checksum_ok(data: bytes) -> bool:
    pkt = Ether(data)
    sent = pkt[IP].chksum
    del pkt[IP].chksum
    return Ether(bytes(pkt))[IP].chksum == sent


def install_leaf(sw, *, mode: int = 0, uplinks=UPLINKS, group: int = GROUP,
                 slice_id: int = 0, salt: int = SALT) -> None:
    """The ECMP salt, host routes, port MACs and one ECMP group toward the remote /24."""
    sw.table_set_default("FabricIngress.ecmp_salt", "FabricIngress.set_ecmp_salt", {"salt": salt})
    for n in HOST_PORTS:
        sw.table_add("FabricIngress.ipv4_route", {"meta.slice_id": slice_id,
                                            "hdr.ipv4.dstAddr": (ip(host_ip(n)), 32)},
                     "FabricIngress.route_to_port", {"port": n})
    for port in HOST_PORTS + UPLINKS:
        sw.table_add("FabricEgress.port_mac", {"standard_metadata.egress_port": port},
                     "FabricEgress.set_port_macs",
                     {"smac": mac_int(port_smac(port)), "dmac": mac_int(port_dmac(port))})
    sw.table_add("FabricIngress.ipv4_route", {"meta.slice_id": slice_id,
                                        "hdr.ipv4.dstAddr": (ip(REMOTE_NET), 24)},
                 "FabricIngress.route_to_group", {"group": group})
    install_group(sw, group, uplinks, mode=mode)


def install_group(sw, group: int, ports, *, mode: int = 0) -> None:
    """Members in the given order; member i's backup is member (i + 1) mod size."""
    sw.table_add("FabricIngress.ecmp_groups", {"meta.ecmp_group": group}, "FabricIngress.set_group",
                 {"size": len(ports), "mode": mode})
    for i, port in enumerate(ports):
        sw.table_add("FabricIngress.ecmp_members", {"meta.ecmp_group": group, "meta.ecmp_member": i},
                     "FabricIngress.set_member",
                     {"port": port, "backup_port": ports[(i + 1) % len(ports)]})


def only_output(outs):
    assert len(outs) == 1, outs
    return outs[0]
