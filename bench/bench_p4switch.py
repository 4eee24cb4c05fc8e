"""Packets per second of p4switch's pipeline in-process, Python backend beside native backend.

Rows: the three-table Ethernet/IPv4/UDP program (routed, multicast and dropped packets, and an
ACL with many ternary entries), then fabric.p4 routed, multicast and aggregating (tables and
packets taken from its STF tests p4src/tests/{routing,multicast,switchml}.stf). Columns:
`Switch.process` packets/s on each backend (the native one through ctypes, one call per
packet), their ratio, and the native pipeline's own ns per packet (a C loop over the same
packet: parser to deparser, no I/O)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import p4switch  # noqa: E402
from p4switch.native import available  # noqa: E402
from p4switch.stf import StfRunner, parse_stf  # noqa: E402

L3 = ROOT / "tests" / "p4switch" / "core_programs" / "l3_three_tables.p4"
FABRIC = ROOT / "p4src" / "fabric.p4"
INCLUDE = (str(ROOT / "p4src" / "include"),)
BACKENDS = ("python", "native") if available() else ("python",)


def rate(sw, packets, seconds=1.0):
    """Packets per second over at least `seconds` of processing."""
    n, start = 0, time.perf_counter()
    while True:
        for port, data in packets:
            sw.process(port, data)
        n += len(packets)
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return n / elapsed


def l3_switch(backend, acl_entries=0):
    sw = p4switch.load(str(L3), backend=backend)
    sw.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (0x0A000000, 8)}, "forward", {"dmac": 1, "port": 2})
    sw.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (0xE0000000, 4)}, "set_mcast", {"group": 1})
    sw.table_add("send_frame", {"sm.egress_port": 2}, "rewrite_smac", {"smac": 0x0200000000FF})
    sw.mc_group_create(1, [(2, 1), (3, 2), (4, 3)])
    for i in range(acl_entries):
        sw.table_add("acl", {"hdr.ipv4.srcAddr": (0xC0000000 + i, 0xFFFFFFFF), "hdr.udp.$valid$": 1},
                     "deny", {}, priority=i + 1)
    return sw


class _Setup(StfRunner):
    """Runs an STF file's table, PRE and profile commands; keeps its packets as traffic."""

    def __init__(self, sw, filename):
        super().__init__(sw, filename)
        self.packets = []

    def _do_packet(self, words):
        port, _, data = words.partition(" ")
        self.packets.append((int(port, 0), bytes.fromhex("".join(data.split()))))

    def _do_expect(self, words):
        pass

    def _do_check_counter(self, words):
        pass


def fabric_switch(backend, stf):
    sw = p4switch.load(str(FABRIC), include_dirs=INCLUDE, backend=backend)
    path = ROOT / "p4src" / "tests" / stf
    setup = _Setup(sw, str(path))
    setup.run(parse_stf(path.read_text(), str(path)))
    return sw, setup.packets


def udp(dst, sport=1234):
    return bytes(Ether() / IP(src="10.1.0.1", dst=dst) / UDP(sport=sport, dport=4791) / (b"x" * 64))


def main():
    unicast = [(1, udp("10.0.1.5", 1000 + i)) for i in range(64)]
    cases = [
        ("l3_three_tables: unicast, 3 tables", lambda b: (l3_switch(b), unicast)),
        ("l3_three_tables: 100 ACL entries", lambda b: (l3_switch(b, 100), unicast)),
        ("l3_three_tables: multicast x3", lambda b: (l3_switch(b), [(1, udp("224.0.0.9"))])),
        ("l3_three_tables: dropped (no route)", lambda b: (l3_switch(b), [(1, udp("11.0.0.1"))])),
        ("fabric.p4: routed (routing.stf)", lambda b: fabric_switch(b, "routing.stf")),
        ("fabric.p4: multicast (multicast.stf)", lambda b: fabric_switch(b, "multicast.stf")),
        ("fabric.p4: aggregation (switchml.stf)", lambda b: fabric_switch(b, "switchml.stf")),
    ]
    rows = []
    for name, make in cases:
        pps, ns = {}, None
        for backend in BACKENDS:
            sw, packets = make(backend)
            pps[backend] = rate(sw, packets)
            if backend == "native":
                port, data = packets[0]
                ns = sw.bench_ns(port, data, 200000)
        rows.append((name, pps, ns))
    width = max(len(name) for name, _, _ in rows)
    print(f"{'program / traffic':<{width}}  {'python pps':>11}  {'native pps':>11}  {'ratio':>6}"
          f"  {'native ns/pkt':>13}  {'native pipeline pps':>19}")
    for name, pps, ns in rows:
        nat = pps.get("native")
        print(f"{name:<{width}}  {pps['python']:>11,.0f}  "
              + (f"{nat:>11,.0f}  {nat / pps['python']:>6.1f}  {ns:>13,.0f}  {1e9 / ns:>19,.0f}"
                 if nat else f"{'(no cc)':>11}"))


if __name__ == "__main__":
    main()
