"""Write the STF files of this folder: packets built with scapy, expected ECMP members from
fabricmodel/hashing.py, the leaf layout of tests/p4src/fabric_testlib.py.

    .venv/bin/python p4src/tests/make_stf.py      # then: p4switch stf p4src/fabric.p4 X.stf
"""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "p4src")]

import fabric_testlib as L  # noqa: E402
from scapy.layers.inet import IP, UDP  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.packet import Raw  # noqa: E402

from collectives import netreduce as nr  # noqa: E402
from collectives import wire  # noqa: E402
from collectives.layers import Aggregation  # noqa: E402
from controller import encode_fabric  # noqa: E402
from controller import netreduce as nr_ctl  # noqa: E402
from controller.intent import Intent  # noqa: E402
from controller.switch_plan import plan_switches  # noqa: E402
from fabricmodel import hashing, rocev2  # noqa: E402

UP = L.UPLINKS
ROCE = rocev2.ROCEV2_PORT
# The switch every file models is leaf1; salt.stf gives it the salt of its tier-mate leaf2.
SALT = hashing.switch_salt("leaf1")
OTHER_SALT = hashing.switch_salt("leaf2")


def ip32(addr: str) -> str:
    return f"0x{L.ip(addr):08x}"


def mac48(mac: str) -> str:
    return "0x" + mac.replace(":", "")


def packet(port: int, data: bytes, comment: str) -> list[str]:
    return [f"# {comment}", f"packet {port} {data.hex().upper()}"]


def expect(port: int, data: bytes) -> list[str]:
    return [f"expect {port} {data.hex().upper()}$"]


def member_port(src, dst, sport, dport, ports, proto=17, salt=SALT):
    return ports[hashing.ecmp_member(src, dst, proto, sport, dport, len(ports), salt)]


def rewritten(data: bytes, port: int, **fields) -> bytes:
    """`routed(data, port)` with further IPv4/UDP field changes (checksum recomputed)."""
    pkt = Ether(L.routed(data, port))
    for name, value in fields.items():
        layer, field = name.split("_", 1)
        setattr(pkt[{"ip": IP, "udp": UDP}[layer]], field, value)
    del pkt[IP].chksum
    return bytes(pkt)


def group(gid: int, ports, mode: int = 0) -> list[str]:
    lines = [f"add FabricIngress.ecmp_groups meta.ecmp_group:{gid} "
             f"FabricIngress.set_group(size:{len(ports)}, mode:{mode})"]
    for i, port in enumerate(ports):
        lines.append(f"add FabricIngress.ecmp_members meta.ecmp_group:{gid} meta.ecmp_member:{i} "
                     f"FabricIngress.set_member(port:{port}, "
                     f"backup_port:{ports[(i + 1) % len(ports)]})")
    return lines


def leaf(mode: int = 0, uplinks=UP, salt: int = SALT) -> list[str]:
    lines = ["# leaf: host 10.0.1.n on port n (1..8), uplinks 11..14 (group 1 toward 10.0.2.0/24)",
             "# port p's MAC 02:01:00:01:00:pp; neighbour host 02:00:0a:00:01:pp or spine "
             "02:0a:00:00:00:pp",
             f"setdefault FabricIngress.ecmp_salt FabricIngress.set_ecmp_salt(salt:{salt})"]
    for n in L.HOST_PORTS:
        lines.append(f"add FabricIngress.ipv4_route meta.slice_id:0 "
                     f"hdr.ipv4.dstAddr:{ip32(L.host_ip(n))} FabricIngress.route_to_port(port:{n})")
    lines.append("add FabricIngress.ipv4_route meta.slice_id:0 hdr.ipv4.dstAddr:0x0a0002** "
                 "FabricIngress.route_to_group(group:1)")
    for p in L.HOST_PORTS + UP:
        lines.append(f"add FabricEgress.port_mac standard_metadata.egress_port:{p} "
                     f"FabricEgress.set_port_macs(smac:{mac48(L.port_smac(p))}, "
                     f"dmac:{mac48(L.port_dmac(p))})")
    return lines + group(1, uplinks, mode) + [""]


def routing() -> list[str]:
    lines = leaf()
    d = L.udp("10.0.2.5", L.host_ip(3), ttl=64)
    lines += packet(12, d, "10.0.2.5 -> 10.0.1.3 from an uplink: port 3, port MACs, TTL 63, "
                    "new checksum") + expect(3, L.routed(d, 3))
    lines += packet(1, L.udp(L.host_ip(1), L.host_ip(2), ttl=1), "TTL 1: dropped")
    d = bytes(Ether() / IP(src=L.host_ip(1), dst=L.host_ip(2), options=b"\x01\x01\x01\x00")
              / UDP(sport=1, dport=2) / Raw(b"x" * 8))
    lines += packet(1, d, "IPv4 with options (ihl 6): rejected by the parser, dropped")
    d = bytes(Ether() / IP(src=L.host_ip(1), dst=L.host_ip(4), proto=253) / Raw(b"opaque" * 4))
    lines += packet(1, d, "IP protocol 253 (unknown): forwarded by IP") + expect(4, L.routed(d, 4))
    d = L.tcp(L.host_ip(1), L.host_ip(5), 40000, 80)
    lines += packet(1, d, "TCP to 10.0.1.5") + expect(5, L.routed(d, 5))
    return lines + ["", "check_counter port_rx(1) packets == 4",
                    "check_counter port_drops(1) packets == 2",
                    "check_counter port_tx(3) packets == 1"]


ECMP_SPORTS = [0xC000 + 17 * i for i in range(12)]


def ecmp(salt: int = SALT) -> list[str]:
    lines = leaf(salt=salt)
    src, dst = L.host_ip(1), "10.0.2.7"
    for sport in ECMP_SPORTS:
        port = member_port(src, dst, sport, ROCE, UP, salt=salt)
        d = L.udp(src, dst, sport, ROCE)
        lines += packet(1, d, f"{src}:{sport} -> {dst} (RoCEv2): salt {salt}, window % 4 -> "
                        f"port {port}")
        lines += expect(port, L.routed(d, port))
    return lines


def salt() -> list[str]:
    """ecmp.stf's packets on a leaf with its tier-mate's salt: the same 5-tuples, other
    members (the model predicts both)."""
    src, dst = L.host_ip(1), "10.0.2.7"
    moved = [s for s in ECMP_SPORTS if member_port(src, dst, s, ROCE, UP) !=
             member_port(src, dst, s, ROCE, UP, salt=OTHER_SALT)]
    if len(moved) < len(ECMP_SPORTS) // 2:
        raise SystemExit(f"salts {SALT} and {OTHER_SALT} split ecmp.stf's flows alike")
    return [f"# leaf2's salt {OTHER_SALT} (leaf1's is {SALT}): {len(moved)} of "
            f"{len(ECMP_SPORTS)} flows take another uplink than in ecmp.stf"] + ecmp(OTHER_SALT)


def pin() -> list[str]:
    lines = leaf()
    src, dst, sport = L.host_ip(1), "10.0.2.3", 0xC001
    hashed = member_port(src, dst, sport, ROCE, UP)
    pinned = next(p for p in UP if p != hashed)
    lines.insert(-1, f"add FabricIngress.path_pin hdr.ipv4.srcAddr:{ip32(src)} "
                     f"hdr.ipv4.dstAddr:{ip32(dst)} meta.l4_sport:{sport} meta.l4_dport:0x{ROCE:04x} "
                     f"FabricIngress.pin_path(port:{pinned})")
    d = L.udp(src, dst, sport, ROCE)
    lines += packet(1, d, f"pinned flow: port {pinned} although ECMP picks {hashed}")
    lines += expect(pinned, L.routed(d, pinned))
    d = L.udp(src, dst, sport + 1, ROCE)
    other = member_port(src, dst, sport + 1, ROCE, UP)
    lines += packet(1, d, f"same hosts, other source port: not pinned, ECMP port {other}")
    return lines + expect(other, L.routed(d, other))


def spray() -> list[str]:
    lines = leaf(mode=1)
    d = L.udp(L.host_ip(1), "10.0.2.3", 0xC001, ROCE)
    for i in range(8):
        port = UP[i % 4]
        lines += packet(1, d, f"one flow, packet {i}: round robin -> port {port}")
        lines += expect(port, L.routed(d, port))
    return lines


def slices() -> list[str]:
    lines = leaf()[:-1]
    for sl, ups in ((1, [11, 12]), (2, [13, 14])):
        lines += group(10 + sl, ups)
        lines.append(f"add FabricIngress.ipv4_route meta.slice_id:{sl} "
                     f"hdr.ipv4.dstAddr:0x0a0002** FabricIngress.route_to_group(group:{10 + sl})")
    # ternary keys as p4c's BMv2 STF driver reads them: the mask is the written digits ('*'
    # = don't care), so a 9-bit port is written in binary and a wildcard as all '*'
    lines += ["add FabricIngress.slice_classify 10 standard_metadata.ingress_port:0b000000001 "
              "hdr.ipv4.srcAddr:0x******** FabricIngress.set_slice(slice_id:1)",
              "add FabricIngress.slice_classify 20 standard_metadata.ingress_port:0b********* "
              "hdr.ipv4.srcAddr:0x0a0009** FabricIngress.set_slice(slice_id:2)", ""]
    for i in range(6):
        sport = 0xC000 + 31 * i
        for src, ups, why in ((L.host_ip(1), [11, 12], "port 1 is slice 1: uplinks 11/12"),
                              ("10.0.9.4", [13, 14], "source 10.0.9.0/24 is slice 2 (higher "
                                                     "priority): uplinks 13/14")):
            port = member_port(src, "10.0.2.9", sport, ROCE, ups)
            d = L.udp(src, "10.0.2.9", sport, ROCE)
            lines += packet(1, d, f"{why}, this one {port}") + expect(port, L.routed(d, port))
    return lines


def ecn() -> list[str]:
    lines = leaf()
    lines.insert(-1, "add FabricEgress.ecn_mark standard_metadata.egress_port:3 "
                     "FabricEgress.set_ecn_threshold(threshold:0)")
    lines.insert(-1, "# threshold 0: enq_qdepth (0 here) >= 0, so every ECT packet leaving "
                     "port 3 is marked")
    for before, after in ((0, 0), (1, 3), (2, 3), (3, 3)):
        d = L.udp(L.host_ip(1), L.host_ip(3), ecn=before)
        lines += packet(1, d, f"ECN {before:02b} -> {after:02b}")
        lines += expect(3, rewritten(d, 3, ip_tos=after))
    d = L.udp(L.host_ip(1), L.host_ip(4), ecn=1)
    lines += packet(1, d, "port 4 has no threshold: ECT(1) stays")
    return lines + expect(4, L.routed(d, 4))


def multicast() -> list[str]:
    lines = leaf()[:-1] + ["mc_mgrp_create 9"]
    for handle, port in enumerate((1, 2, 5, 11)):
        lines += [f"mc_node_create {100 + port} {port}", f"mc_node_associate 9 {handle}"]
    lines.append(f"add FabricIngress.mcast_route meta.slice_id:0 hdr.ipv4.dstAddr:"
                 f"{ip32('239.1.0.9')} FabricIngress.set_mcast_group(group:9)")
    for p in (1, 2, 5):
        lines.append(f"add FabricEgress.mcast_rewrite meta.mcast_grp:9 "
                     f"standard_metadata.egress_rid:{100 + p} FabricEgress.rewrite_replica("
                     f"smac:{mac48(L.port_smac(p))}, dmac:{mac48(L.host_mac(p))}, "
                     f"dst_ip:{ip32(L.host_ip(p))})")
    d = L.udp(L.host_ip(1), "239.1.0.9", 0xC000, ROCE, ttl=9)
    lines += [""] + packet(1, d, "host 1 to group 239.1.0.9: hosts 2 and 5 as unicast, "
                                 "uplink 11 as multicast; never back to port 1")
    for p in (2, 5):
        lines += expect(p, rewritten(d, p, ip_dst=L.host_ip(p), udp_chksum=0))
    lines += expect(11, L.routed(d, 11))
    return lines + ["check_counter mcast_packets(9) packets == 1"]


def dead_ports(*ports: int) -> str:
    """The controller's liveness write: one default action, bit p = port p dead."""
    return (f"setdefault FabricIngress.port_liveness "
            f"FabricIngress.set_dead_ports(ports:0x{sum(1 << p for p in ports):x})")


def failover() -> list[str]:
    # Every entry and the liveness map come before the packets: p4c's driver does not wait
    # for a loaded switch to process earlier packets before a later table change.
    live = [11, 12, 14]
    dead = {3, 13, 15, 16}
    lines = ["# the controller's batch repair after port 13 failed: group 1 without it;",
             "# fast failover: ports 3, 13, 15, 16 dead in the liveness map, group 2",
             "# (10.0.3.0/24) still holds 13, group 3 (10.0.4.0/24) is 15, 16, 11"]
    lines += leaf(uplinks=live)[:-1]
    for net, gid, ports in (("0a0003", 2, UP), ("0a0004", 3, [15, 16, 11])):
        lines += [f"add FabricIngress.ipv4_route meta.slice_id:0 hdr.ipv4.dstAddr:0x{net}** "
                  f"FabricIngress.route_to_group(group:{gid})"] + group(gid, ports)
    src = L.host_ip(1)
    pin_sport = next(s for s in range(0xC100, 0xD000)
                     if member_port(src, "10.0.3.7", s, ROCE, UP) == 11)
    lines += [f"add FabricIngress.path_pin hdr.ipv4.srcAddr:{ip32(src)} "
              f"hdr.ipv4.dstAddr:{ip32('10.0.3.7')} meta.l4_sport:{pin_sport} "
              f"meta.l4_dport:0x{ROCE:04x} FabricIngress.pin_path(port:13)", dead_ports(*sorted(dead)), ""]
    for i in range(6):
        sport = 0xC000 + 7 * i
        port = member_port(src, "10.0.2.7", sport, ROCE, live)
        d = L.udp(src, "10.0.2.7", sport, ROCE)
        lines += packet(1, d, f"3 live members: port {port}, never 13")
        lines += expect(port, L.routed(d, port))
    for dst, ports in (("10.0.3.7", UP), ("10.0.4.7", [15, 16, 11])):
        backup = {p: ports[(i + 1) % len(ports)] for i, p in enumerate(ports)}
        seen: dict[int, int] = {}
        for sport in range(0xC200, 0xD000):
            port = member_port(src, dst, sport, ROCE, ports)
            if seen.get(port, 0) == 2:
                continue
            seen[port] = seen.get(port, 0) + 1
            d = L.udp(src, dst, sport, ROCE)
            to = port if port not in dead else backup[port]
            if to in dead:
                lines += packet(1, d, f"{dst}: member on {port} and its backup {to} dead: "
                                      f"dropped")
            else:
                lines += packet(1, d, f"{dst}: member on {port} -> port {to}")
                lines += expect(to, L.routed(d, to))
            if len(seen) == len(ports) and min(seen.values()) == 2:
                break
    d = L.udp(src, "10.0.3.7", pin_sport, ROCE)
    lines += packet(1, d, "pinned to dead port 13: routed instead, hash -> port 11")
    lines += expect(11, L.routed(d, 11))
    d = L.udp(src, L.host_ip(3))
    lines += packet(1, d, "a route straight to dead port 3: dropped")
    return lines


def switchml() -> list[str]:
    lines = leaf()[:-1] + ["mc_mgrp_create 5", "mc_node_create 1 1", "mc_node_associate 5 0",
                           "mc_node_create 2 2", "mc_node_associate 5 1",
                           f"add FabricIngress.mcast_route meta.slice_id:0 hdr.ipv4.dstAddr:"
                           f"{ip32('239.1.0.5')} FabricIngress.set_mcast_group(group:5)"]
    for p in (1, 2):
        lines.append(f"add FabricEgress.mcast_rewrite meta.mcast_grp:5 "
                     f"standard_metadata.egress_rid:{p} FabricEgress.rewrite_replica("
                     f"smac:{mac48(L.port_smac(p))}, dmac:{mac48(L.host_mac(p))}, "
                     f"dst_ip:{ip32(L.host_ip(p))})")
    # Job 8 (generation 2) holds the same slots, as a job does after job 7 is deleted (fabricd
    # reuses slots and writes no registers; STF cannot delete an entry, so it has another id).
    for job, gen in ((7, 1), (8, 2)):
        lines.append(f"add FabricIngress.switchml_jobs hdr.ipv4.dstAddr:{ip32('10.0.1.253')} "
                     f"hdr.sml.jobId:{job} FabricIngress.switchml_job(gen:{gen}, "
                     f"result_ip:{ip32('239.1.0.5')}, slot_base:16, num_slots:4, num_workers:2)")
    values = {0: [i - 16 for i in range(32)],
              1: [1000 * i + (2**31 - 1 if i == 0 else 0) for i in range(32)]}
    later = {0: [7 * i for i in range(32)], 1: [-3 - i for i in range(32)]}

    def wrap_sum(vs) -> list[int]:
        return [((x + y + 2**31) % 2**32) - 2**31 for x, y in zip(vs[0], vs[1], strict=True)]

    def result(port: int, made_from: int, vs=values, job: int = 7) -> bytes:
        pkt = Ether(L.agg(made_from, wrap_sum(vs), job=job, slot=18))
        pkt.src, pkt.dst = L.port_smac(port), L.host_mac(port)
        pkt[IP].src, pkt[IP].dst, pkt[IP].ttl = "10.0.1.253", L.host_ip(port), 64
        pkt[UDP].chksum, pkt[Aggregation].flags = 0, 1
        del pkt[IP].chksum
        # The switch writes the result's own ICRC.
        raw = bytes(pkt)
        return raw[:-4] + wire.icrc(raw[14:42], raw[42:-4])

    lines += [""] + packet(1, L.agg(0, values[0], slot=18),
                           "worker 0, slot 18 (job slots 16..19): consumed, no output")
    lines += packet(1, L.agg(0, values[0], slot=18),
                    "worker 0 again (retransmission): ignored, not counted twice")
    lines += packet(2, L.agg(1, values[1], slot=18),
                    "worker 1 completes: the sums (value 0 wraps around) go to both workers")
    lines += expect(1, result(1, 1)) + expect(2, result(2, 1))
    lines += packet(1, L.agg(0, values[0], slot=18),
                    "worker 0 retransmits after completion: the kept result, unicast to it")
    lines += expect(1, result(1, 0))
    lines += packet(2, L.agg(1, later[1], job=8, slot=18),
                    "job 8's worker 1, slot 18, version 0 again: job 7's complete set is of "
                    "another generation, so consumed (not answered with job 7's sums)")
    lines += packet(1, L.agg(0, later[0], job=8, slot=18),
                    "job 8's worker 0 completes: job 8's own sums to both workers")
    return lines + expect(1, result(1, 0, later, 8)) + expect(2, result(2, 0, later, 8))


# ---- NetReduce: the controller's own entries for one switch of a 2 x 2 leaf-spine ----------
NR_TOPO = """name: nr-stf
kind: leaf-spine
leaves: 2
spines: 2
hosts_per_leaf: 4
"""
NR_JOB = 7


def _stf_value(v) -> str:
    if isinstance(v, str) and "." in v:
        return ip32(v)
    if isinstance(v, str) and ":" in v:
        return mac48(v)
    return str(v)


def _stf_key(v) -> str:
    if isinstance(v, tuple):                    # LPM (address, prefix length): nibbles
        addr, plen = v
        assert plen % 4 == 0, "p4c's STF driver reads LPM keys only as don't-care nibbles"
        digits = f"{L.ip(addr):08x}"[:plen // 4]
        return "0x" + digits + "*" * (8 - len(digits))
    return _stf_value(v)


def stf_entries(state_entries, groups) -> list[str]:
    """controller.p4rt entries as STF commands (p4c's dialect: nibbles, no /len)."""
    lines = []
    for e in state_entries:
        params = ", ".join(f"{k}:{_stf_value(v)}" for k, v in e.params.items())
        if e.default:
            lines.append(f"setdefault {e.table} {e.action}({params})")
            continue
        keys = " ".join(f"{k}:{_stf_key(v)}" for k, v in e.match.items())
        lines.append(f"add {e.table} {keys} {e.action}({params})")
    node = 0
    for g in groups:
        lines.append(f"mc_mgrp_create {g.group_id}")
        for port, rid in g.replicas:
            lines += [f"mc_node_create {rid} {port}", f"mc_node_associate {g.group_id} {node}"]
            node += 1
    return lines


def nr_setup(workers: list[str], switch: str):
    intent = Intent.from_yaml(NR_TOPO, slot_capacity=1024, max_workers=32)
    topo = intent.topo
    job = nr_ctl.NetReducePlanner(topo).create(NR_JOB, "stf", workers, credits=2)
    state = encode_fabric.switch_state(topo, plan_switches(intent)[switch])
    tables, groups = encode_fabric.netreduce_entries(topo, job)[switch]
    lines = [f"# {switch} of {topo.name} (2 leaves x 2 spines x 4 hosts), NetReduce job "
             f"{NR_JOB} over {', '.join(workers)}: the controller's entries"]
    return topo, job, lines + stf_entries([*state.table_entries, *tables],
                                          [*state.multicast_groups, *groups]) + [""]


def ip_checksum(header: bytes) -> int:
    total = sum(int.from_bytes(header[i:i + 2], "big") for i in range(0, 20, 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def roce_frame(smac: str, dmac: str, src: str, dst: str, roce: bytes, ip_id: int = 1) -> bytes:
    """Ethernet / IPv4 (checksum filled) / UDP (RoCEv2) / roce / ICRC, as the transport sends."""
    ip = bytearray(wire.frame(bytes(map(int, src.split("."))), bytes(map(int, dst.split("."))),
                              0xC001, ip_id, 0, roce))
    ip[10:12] = ip_checksum(ip[:20]).to_bytes(2, "big")
    return bytes.fromhex(dmac.replace(":", "") + smac.replace(":", "")) + b"\x08\x00" + bytes(ip)


def nr_values(values) -> bytes:
    return b"".join((v & 0xFFFFFFFF).to_bytes(4, "big") for v in values)


def nr_result(dqpn: int, g: int, values, ackreq: bool) -> bytes:
    """The RoCE part of a sum: WRITE ONLY of packet g, RETH (va = 256 g, rkey = job)."""
    return (wire.bth(rocev2.WRITE_ONLY, dqpn, g, ackreq=ackreq)
            + wire.reth(g * nr.PKT_BYTES, NR_JOB, nr.PKT_BYTES) + nr_values(values))


def netreduce() -> list[str]:
    workers = ["h1", "h2"]
    topo, job, lines = nr_setup(workers, "leaf1")
    agg = topo.switch("leaf1").service_ip
    ipsn = {"h1": 0x00FFFE, "h2": 0x7A0000}       # h1's PSNs wrap inside the message
    result_qpn, reply_ack = rocev2.nr_worker_qpns(len(workers), NR_JOB)
    vals = {w: [[(r * 64 + i) * (k + 1) * 0x01010101 - 2**31 for i in range(nr.VALUES)]
                for k in range(2)] for r, w in enumerate(workers)}

    def contribution(w: str, g: int) -> tuple[int, bytes]:
        h = topo.host(w)
        qpn, _ = rocev2.nr_aggregator_qpns(workers.index(w), NR_JOB)
        psn = (ipsn[w] + g) & wire.PSN_MASK
        if g % rocev2.NR_MSG_PKTS == 0:
            roce = wire.bth(rocev2.WRITE_FIRST, qpn, psn) + \
                wire.reth(g * nr.PKT_BYTES, NR_JOB, nr.MSG_BYTES)
        else:
            roce = wire.bth(rocev2.WRITE_MIDDLE, qpn, psn)
        return h.leaf_port, roce_frame(h.mac, h.gateway_mac, h.ip, agg, roce + nr_values(vals[w][g]))

    def results(g: int, ackreq: bool, only: str | None = None) -> list[str]:
        out = []
        summed = [sum(c) for c in zip(*(vals[w][g] for w in workers), strict=True)]
        for w in workers if only is None else [only]:
            h = topo.host(w)
            out += expect(h.leaf_port, roce_frame(topo.switch("leaf1").port_mac(h.leaf_port),
                                                  h.mac, agg, h.ip,
                                                  nr_result(result_qpn, g, summed, ackreq)))
        return out

    lines += packet(*contribution("h1", 1), "a later packet before its connection's first one: "
                    "no anchor, refused (nr_events 5)")
    lines += packet(*contribution("h1", 0), "h1's first packet (RETH va 0): anchors its QP, "
                    "counted, consumed")
    lines += packet(*contribution("h1", 1), "h1's later packet, mapped by PSN (0x00FFFF) to slot 1")
    lines += packet(*contribution("h1", 1), "the same packet again (go-back-N): a duplicate, "
                    "consumed, not added (nr_events 1)")
    lines += packet(*contribution("h2", 0), "h2's first packet completes slot 0: the sum to h1 "
                    "and h2 as WRITE ONLY, PSN 0, no ACK request inside a message")
    lines += results(0, False)
    lines += packet(*contribution("h2", 1), "h2's later packet completes slot 1")
    lines += results(1, False)
    lines += packet(*contribution("h1", 1), "h1 retransmits after completion: the kept sum, "
                    "to h1 alone, with an ACK request (nr_events 2)")
    lines += results(1, True, only="h1")
    h = topo.host("h1")
    _, ack_qpn = rocev2.nr_aggregator_qpns(0, NR_JOB)
    ack = wire.bth(rocev2.ACKNOWLEDGE, ack_qpn, 1) + wire.aeth(rocev2.AETH_ACK, 2)
    lines += packet(h.leaf_port, roce_frame(h.mac, h.gateway_mac, h.ip, agg, ack),
                    "h1 acknowledges results up to packet 1: the ACK of its own PSN 0x00FFFF")
    back = wire.bth(rocev2.ACKNOWLEDGE, reply_ack, (ipsn["h1"] + 1) & wire.PSN_MASK) + \
        wire.aeth(rocev2.AETH_ACK, 2)
    lines += expect(h.leaf_port, roce_frame(topo.switch("leaf1").port_mac(h.leaf_port), h.mac,
                                            agg, h.ip, back))
    return lines + ["", "check_counter nr_events(0) packets == 4",
                    "check_counter nr_events(1) packets == 1",
                    "check_counter nr_events(2) packets == 1",
                    "check_counter nr_events(3) packets == 2",
                    "check_counter nr_events(5) packets == 1",
                    "check_counter nr_events(6) packets == 1"]


def netreduce_spine() -> list[str]:
    workers = ["h1", "h2", "h5"]                  # leaf1: h1, h2; leaf2: h5
    topo, job, lines = nr_setup(workers, job_spine := "spine1")
    assert job.spine == job_spine
    spine = topo.switch(job_spine)
    me = job.stages[-1].address
    leaves = ["leaf1", "leaf2"]
    partial = {"leaf1": [7] * nr.VALUES, "leaf2": [2**31 - 1] * nr.VALUES}
    summed = [7 + 2**31 - 1] * nr.VALUES

    def up(leaf: str, g: int) -> tuple[int, bytes]:
        link = topo.links_between(leaf, job_spine)[0]
        lf = topo.switch(leaf)
        roce = wire.bth(rocev2.WRITE_ONLY, nr_ctl.up_qpn(topo, leaf, NR_JOB), g, ackreq=True) + \
            wire.reth(g * nr.PKT_BYTES, NR_JOB, nr.PKT_BYTES) + nr_values(partial[leaf])
        return link.port_of(job_spine), roce_frame(lf.port_mac(link.port_of(leaf)),
                                                   spine.port_mac(link.port_of(job_spine)),
                                                   lf.service_ip, me, roce)

    def down(leaf: str, g: int, ackreq: bool) -> list[str]:
        link = topo.links_between(leaf, job_spine)[0]
        lf = topo.switch(leaf)
        return expect(link.port_of(job_spine),
                      roce_frame(spine.port_mac(link.port_of(job_spine)),
                                 lf.port_mac(link.port_of(leaf)), me, lf.service_ip,
                                 nr_result(nr_ctl.down_qpn(topo, leaf, NR_JOB), g, summed,
                                           ackreq)))

    lines += packet(*up("leaf1", 0), "leaf1's partial sum of packet 0 (a WRITE ONLY, PSN 0): "
                    "consumed")
    lines += packet(*up("leaf2", 0), "leaf2's completes it: the sum (wrapping) to both leaves, "
                    "each on its down QP")
    for leaf in leaves:
        lines += down(leaf, 0, False)
    lines += packet(*up("leaf2", 0), "leaf2 resends its partial (a worker missed the result): "
                    "the kept sum to leaf2 alone")
    lines += down("leaf2", 0, True)
    return lines + ["", "check_counter nr_events(0) packets == 2",
                    "check_counter nr_events(2) packets == 1",
                    "check_counter nr_events(3) packets == 1"]


FILES = {
    "routing": ("LPM routing, MAC rewrite, TTL, checksum, IPv4 options, unknown protocol", routing),
    "ecmp": ("ECMP member = 16 bits of crc32(src, dst, proto, sport, dport) from the switch's "
             "salt on, % size", ecmp),
    "salt": ("the same flows on a switch of the same tier with another salt", salt),
    "pin": ("an exact pin (src, dst, sport, dport) overrides ECMP", pin),
    "spray": ("per-packet round-robin spraying (group mode 1) over every member", spray),
    "slices": ("vClos slices by ingress port and source prefix, each on its own uplinks", slices),
    "ecn": ("ECN CE marking in egress, ECT packets only, per-port threshold", ecn),
    "multicast": ("multicast per slice, per-replica rewrite, no copy back to the ingress port",
                  multicast),
    "failover": ("a port removed from a group by the controller; fast failover through the "
                 "port-liveness table", failover),
    "switchml": ("SwitchML-style aggregation of 2 workers: sums, duplicates, kept result, "
                 "a later job on the same slots", switchml),
    "netreduce": ("NetReduce on a leaf: first packet (RETH anchor), later packet (by PSN), "
                  "duplicate, retransmission after completion, ACK translation", netreduce),
    "netreduce_spine": ("NetReduce's spine stage: the leaves' partial sums, the sum down to "
                        "each leaf, a resent partial answered from the kept sum",
                        netreduce_spine),
}

if __name__ == "__main__":
    for name, (title, build) in FILES.items():
        (HERE / f"{name}.stf").write_text(f"# fabric.p4: {title}\n" + "\n".join(build()) + "\n")
        print(f"wrote {name}.stf")
