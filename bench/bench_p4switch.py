"""Packets per second of p4switch's `Switch.process` on one core.

Rows: the three-table Ethernet/IPv4/UDP program (routed, multicast and dropped packets, and an
ACL with many ternary entries), then every p4src/*.p4 with its default actions. Ratios are to
the first row, measured in the same run."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import p4switch  # noqa: E402

L3 = ROOT / "tests" / "p4switch" / "core_programs" / "l3_three_tables.p4"


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


def l3_switch(acl_entries=0):
    sw = p4switch.load(str(L3))
    sw.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (0x0A000000, 8)}, "forward", {"dmac": 1, "port": 2})
    sw.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (0xE0000000, 4)}, "set_mcast", {"group": 1})
    sw.table_add("send_frame", {"sm.egress_port": 2}, "rewrite_smac", {"smac": 0x0200000000FF})
    sw.mc_group_create(1, [(2, 1), (3, 2), (4, 3)])
    for i in range(acl_entries):
        sw.table_add("acl", {"hdr.ipv4.srcAddr": (0xC0000000 + i, 0xFFFFFFFF), "hdr.udp.$valid$": 1},
                     "deny", {}, priority=i + 1)
    return sw


def udp(dst, sport=1234):
    return bytes(Ether() / IP(src="10.1.0.1", dst=dst) / UDP(sport=sport, dport=4791) / (b"x" * 64))


def main():
    rows = []
    unicast = [(1, udp("10.0.1.5", 1000 + i)) for i in range(64)]
    rows.append(("l3_three_tables: unicast, 3 tables", rate(l3_switch(), unicast)))
    rows.append(("l3_three_tables: 100 ACL entries", rate(l3_switch(100), unicast)))
    rows.append(("l3_three_tables: multicast x3", rate(l3_switch(), [(1, udp("224.0.0.9"))])))
    rows.append(("l3_three_tables: dropped (no route)", rate(l3_switch(), [(1, udp("11.0.0.1"))])))
    for program in sorted((ROOT / "p4src").glob("*.p4")):
        try:
            sw = p4switch.load(str(program), include_dirs=(str(ROOT / "p4src" / "include"),))
        except p4switch.P4CompileError as exc:
            rows.append((f"{program.name}: does not compile ({exc.message})", 0.0))
            continue
        rows.append((f"{program.name}: default actions", rate(sw, unicast)))
    base = rows[0][1]
    width = max(len(name) for name, _ in rows)
    print(f"{'program / traffic':<{width}}  {'packets/s':>10}  {'ratio':>6}")
    for name, pps in rows:
        print(f"{name:<{width}}  {pps:>10,.0f}  {pps / base:>6.2f}")


if __name__ == "__main__":
    main()
