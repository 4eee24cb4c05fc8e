"""fabric.p4 as the demo configures it, fuzzed: the controller's own encoder gives a switch its
entries for a fabric with routes, ECMP groups (hashed, or sprayed round-robin), Ethereal's pins,
a vClos slice, a multicast group with loss, a SwitchML job and a NetReduce job over two leaves
and a spine; frames are made from valid packets of every kind the fabric carries (RoCEv2 data,
ACK, CNP, SwitchML and NetReduce aggregation, NetReduce ACKs and results, reliable broadcast,
ARP, plain IP) addressed to those entries, then kept, truncated or mutated (with the IPv4
checksum and the ICRC sometimes made valid again, so that mutations reach the deep paths).
Shared by test_core_fuzz.py, test_native_diff.py and bench/bench_reliability.py."""
from __future__ import annotations

import random
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from p4.v1 import p4runtime_pb2

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from collectives import wire  # noqa: E402
from controller import encode_fabric  # noqa: E402
from controller.intent import Intent  # noqa: E402
from controller.p4rt import Schema  # noqa: E402
from fabricmodel import rocev2  # noqa: E402
from fabricmodel.ethereal import Flow  # noqa: E402
from p4switch.conformance import switch_state as state_of  # noqa: E402
from p4switch.runtime.pipeline import Pipeline  # noqa: E402

FABRIC_P4 = ROOT / "p4src" / "fabric.p4"
TOPOLOGY = ROOT / "controller" / "topologies" / "leafspine-4x4-h2.yaml"
# (ECMP mode of the fabric, switch fuzzed): the leaf holding the jobs, pins and the lossy
# group; the spine on top of NetReduce's tree and in the slice; a sliced leaf that sprays
SWITCHES = (("hash", "leaf3"), ("hash", "spine1"), ("round-robin", "leaf1"))
MCAST_LOSS = 0.1


def demo_intent(ecmp_mode: str = "hash", loss: float = MCAST_LOSS) -> Intent:
    """The fabric of the demo's second part, every kind of entry present: a 4-host vClos
    slice (leaves 1-2, spines 1-2), and on the other hosts a multicast group with `loss`, a
    SwitchML job, a NetReduce job (two leaves and a spine) and an Ethereal step with pins."""
    intent = Intent.from_yaml(TOPOLOGY.read_text(), slot_capacity=1024, max_workers=32)
    intent.ecmp_mode = ecmp_mode
    intent.create_slice("tenant", 4)
    free = intent.unsliced_hosts()
    intent.create_group("allgather", free, loss=loss)
    intent.create_job("switchml", free, slots=16)
    intent.create_nr_job("netreduce", free, credits=2)
    intent.install_step("alltoall", [Flow(a, b, 1 << 20) for a in free for b in free if a != b],
                        pins=True)
    return intent


def switch_state(intent: Intent, schema: Schema, name: str):
    return encode_fabric.intended_states(intent, schema)[name]


def updates(state, schema: Schema) -> list[p4runtime_pb2.Update]:
    """The switch's P4Runtime writes, as fabricd sends them (defaults are MODIFYs)."""
    out = []
    for e in state.table_entries:
        kind = p4runtime_pb2.Update.MODIFY if e.default else p4runtime_pb2.Update.INSERT
        out.append(p4runtime_pb2.Update(type=kind, entity=e.to_proto(schema)))
    for g in state.multicast_groups:
        out.append(p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT, entity=g.to_proto()))
    return out


def configured(compiled, state, backend: str):
    """A switch on `backend` running fabric.p4 with `state` written over P4Runtime's Write
    path (the same store the server of `p4switch run` writes into)."""
    info, config = compiled
    pipe = Pipeline(p4runtime_pb2.ForwardingPipelineConfig(p4info=info, p4_device_config=config),
                    None, backend=backend)
    schema = Schema(info)
    for update in updates(state, schema):
        pipe.write(update)
    return pipe.sw


# ---- valid packets ------------------------------------------------------------------------
def _ip4(value: int | str) -> bytes:
    return value.to_bytes(4, "big") if isinstance(value, int) else bytes(map(int, value.split(".")))


def _ipv4_checksum(frame: bytearray) -> None:
    frame[24:26] = b"\0\0"
    total = sum(struct.unpack("!10H", bytes(frame[14:34])))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    frame[24:26] = (~total & 0xFFFF).to_bytes(2, "big")


def _eth(dst_mac: int, src_mac: int, ethertype: int) -> bytes:
    return dst_mac.to_bytes(6, "big") + src_mac.to_bytes(6, "big") + ethertype.to_bytes(2, "big")


def _roce(src, dst, sport: int, roce: bytes, macs, ip_id: int = 1, tos: int = 2) -> bytes:
    frame = bytearray(_eth(*macs, 0x0800) + wire.frame(_ip4(src), _ip4(dst), sport, ip_id, tos,
                                                       roce))
    _ipv4_checksum(frame)
    return bytes(frame)


def _plain(src, dst, proto: int, l4: bytes, macs, ip_id: int = 7) -> bytes:
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), ip_id, 0x4000, 64, proto, 0,
                     _ip4(src), _ip4(dst))
    frame = bytearray(_eth(*macs, 0x0800) + ip + l4)
    _ipv4_checksum(frame)
    return bytes(frame)


def resign_icrc(frame: bytearray) -> None:
    """A valid ICRC over what the frame holds (IPv4 without options, UDP, BTH onwards)."""
    if len(frame) >= 14 + wire.MIN_PACKET:
        frame[-4:] = wire.icrc(bytes(frame[14:42]), bytes(frame[42:-4]))


@dataclass
class Packets:
    """Valid frames of every kind the fabric carries, addressed to one switch's entries."""

    state: object
    rng: random.Random
    ports: list[int] = field(default_factory=list)
    hosts: list[int] = field(default_factory=list)     # host addresses (ints)
    g: dict = field(default_factory=dict)              # NetReduce rounds, ACKs and results

    def __post_init__(self) -> None:
        by = {}
        for e in self.state.table_entries:
            by.setdefault(e.table, []).append(e)
        self.by = by
        self.ports = [e.match["standard_metadata.egress_port"] for e in by["FabricEgress.port_mac"]]
        self.macs = {e.match["standard_metadata.egress_port"]: (e.params["smac"], e.params["dmac"])
                     for e in by["FabricEgress.port_mac"]}
        self.routes = [e.match["hdr.ipv4.dstAddr"] for e in by.get("FabricIngress.ipv4_route", [])]
        self.kinds = [k for k in KINDS if k.usable(self)]

    def entries(self, table: str, action: str | None = None) -> list:
        return [e for e in self.by.get(table, []) if action is None or e.action == action]

    def port_and_macs(self):
        port = self.rng.choice(self.ports)
        smac, dmac = self.macs[port]
        return port, (smac, dmac)                      # from the peer: dst = our port's MAC

    def host_ip(self) -> int:
        value, plen = self.rng.choice(self.routes)
        return value | self.rng.getrandbits(32 - plen) if plen < 32 else value

    def sport(self) -> int:
        return rocev2.SPORT_MIN | self.rng.getrandbits(14)


@dataclass(frozen=True)
class Kind:
    name: str
    make: object
    needs: str | None = None          # a table whose entries the packets are addressed to
    kept: float = 0.25                # the share of its frames left intact

    def usable(self, p: Packets) -> bool:
        return self.needs is None or bool(p.by.get(self.needs))


def _rc_data(p: Packets) -> bytes:
    port, macs = p.port_and_macs()
    src, dst, sport = p.host_ip(), p.host_ip(), p.sport()
    pins = p.entries("FabricIngress.path_pin")
    if pins and p.rng.random() < 0.5:
        m = p.rng.choice(pins).match
        src, dst, sport = m["hdr.ipv4.srcAddr"], m["hdr.ipv4.dstAddr"], m["meta.l4_sport"]
    qpn = rocev2.KIND_DATA << 20 | p.rng.getrandbits(8) << 8
    psn = p.rng.getrandbits(24)
    payload = bytes(p.rng.getrandbits(8) for _ in range(p.rng.choice((0, 4, 64, 256))))
    op = p.rng.choice((rocev2.WRITE_FIRST, rocev2.WRITE_MIDDLE, rocev2.SEND_ONLY))
    extra = wire.reth(0, 1, len(payload)) if op == rocev2.WRITE_FIRST else b""
    return port, _roce(src, dst, sport, wire.bth(op, qpn, psn, ackreq=True) + extra + payload,
                       macs)


def _rc_ack(p: Packets):
    port, macs = p.port_and_macs()
    qpn = rocev2.KIND_ACK << 20 | p.rng.getrandbits(8) << 8
    if p.rng.random() < 0.5:
        roce = wire.bth(rocev2.ACKNOWLEDGE, qpn, p.rng.getrandbits(24)) + \
            wire.aeth(rocev2.AETH_ACK, 0)
    else:
        roce = wire.bth(rocev2.CNP, qpn, 0, becn=True) + wire.CNP_PAD
    return port, _roce(p.host_ip(), p.host_ip(), p.sport(), roce, macs, tos=0)


def _switchml(p: Packets):
    e = p.rng.choice(p.entries("FabricIngress.switchml_jobs"))
    job, prm = e.match["hdr.sml.jobId"], e.params
    port, macs = p.port_and_macs()
    slot = prm["slot_base"] + p.rng.randrange(prm["num_slots"])
    worker = p.rng.randrange(prm["num_workers"])
    flags = p.rng.choice((0, rocev2.AGG_FLAG_VERSION))
    values = struct.pack("!32i", *(p.rng.randrange(-1000, 1000) for _ in range(32)))
    roce = wire.bth(rocev2.AGGREGATION, job, slot) + \
        wire.AGG_HDR.pack(job, slot, slot, worker, prm["num_workers"], flags, 0) + values
    return port, _roce(p.host_ip(), e.match["hdr.ipv4.dstAddr"], p.sport(), roce, macs)


def _nr_round(p: Packets, job: int):
    """The next contribution of job `job`'s current round: each child sends packet number g
    once (in random order), then the round moves to g + 1, so that slots complete."""
    conns = [e for e in p.entries("FabricIngress.nr_conns", "FabricIngress.nr_data")
             if e.params["job"] == job]
    g, left = p.g.get(job, (0, []))
    if not left:
        g, left = (g + 1, list(conns)) if job in p.g else (0, list(conns))
    e = left.pop(p.rng.randrange(len(left)))
    p.g[job] = (g, left)
    return e, g


def _nr(p: Packets):
    """A NetReduce contribution (rounds in order, children in random order), a worker's ACK
    of results, or a result from the parent, on a connection the switch knows."""
    e = p.rng.choice(p.entries("FabricIngress.nr_conns"))
    if e.action == "FabricIngress.nr_data":
        e, g = _nr_round(p, e.params["job"])
    else:
        g = p.g.get(e.match["hdr.ipv4.dstAddr"], 0)
        p.g[e.match["hdr.ipv4.dstAddr"]] = g + 1
    dst, dqpn = e.match["hdr.ipv4.dstAddr"], e.match["hdr.bth.dqpn"]
    port, macs = p.port_and_macs()
    values = bytes(p.rng.getrandbits(8) for _ in range(4)) * 256
    rkey = next((j.params["rkey"] for j in p.entries("FabricIngress.nr_jobs")), 0)
    if e.action == "FabricIngress.nr_data":
        if g % rocev2.NR_MSG_PKTS == 0:
            roce = wire.bth(rocev2.WRITE_FIRST, dqpn, g) + \
                wire.reth(g * 1024, rkey, 1024 * rocev2.NR_MSG_PKTS) + values
        else:
            roce = wire.bth(rocev2.WRITE_MIDDLE, dqpn, g) + values
    elif e.action == "FabricIngress.nr_ack":
        roce = wire.bth(rocev2.ACKNOWLEDGE, dqpn, g) + wire.aeth(rocev2.AETH_ACK, 0)
    else:
        roce = wire.bth(rocev2.WRITE_ONLY, dqpn, g) + wire.reth(g * 1024, rkey, 1024) + values
    return port, _roce(p.host_ip(), dst, p.sport(), roce, macs)


def _rbcast(p: Packets):
    e = p.rng.choice(p.entries("FabricIngress.mcast_route"))
    port, macs = p.port_and_macs()
    chunk = p.rng.randrange(8)
    roce = wire.bth(rocev2.RBCAST, 0xFFFFFF, chunk) + \
        wire.RBCAST_HDR.pack(1, p.rng.randrange(4), chunk, 8, 0) + bytes(256)
    return port, _roce(p.host_ip(), e.match["hdr.ipv4.dstAddr"], p.sport(), roce, macs)


def _arp(p: Packets):
    port, (smac, dmac) = p.port_and_macs()
    body = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, dmac.to_bytes(6, "big"),
                       _ip4(p.host_ip()), bytes(6), _ip4(p.host_ip()))
    return port, _eth(0xFFFFFFFFFFFF, dmac, 0x0806) + body


def _plain_ip(p: Packets):
    port, macs = p.port_and_macs()
    proto = p.rng.choice((1, 6, 17))
    if proto == 6:
        l4 = struct.pack("!HHIIBBHHH", p.rng.getrandbits(16), 80, 1, 0, 0x50, 0x02, 1024, 0, 0)
    elif proto == 17:
        l4 = struct.pack("!HHHH", p.rng.getrandbits(16), 53, 8 + 12, 0) + bytes(12)
    else:
        l4 = struct.pack("!BBHHH", 8, 0, 0, 1, 1) + bytes(32)
    return port, _plain(p.host_ip(), p.host_ip(), proto, l4, macs)


KINDS = (Kind("roce_data", _rc_data), Kind("roce_ack_cnp", _rc_ack),
         Kind("switchml", _switchml, "FabricIngress.switchml_jobs"),
         Kind("netreduce", _nr, "FabricIngress.nr_conns", kept=0.75),   # rounds complete
         Kind("rbcast", _rbcast, "FabricIngress.mcast_route"),
         Kind("arp", _arp), Kind("plain_ip", _plain_ip))


# ---- mutation ------------------------------------------------------------------------------
def mutate(rng: random.Random, frame: bytes, kept: float = 0.25) -> bytes:
    """`kept` of the frames left intact; of the others a third truncated, two thirds with
    1-4 bytes changed (mostly in the headers); a changed frame gets its IPv4 checksum and its
    ICRC made valid again half the time each, so that it passes the parser and the ICRC
    checks and reaches what is behind."""
    way = rng.random()
    if way < kept:
        return frame
    if way < kept + (1 - kept) / 3:
        return frame[:rng.randrange(len(frame))]
    out = bytearray(frame)
    for _ in range(rng.randint(1, 4)):
        span = min(len(out), 14 + 20 + 8 + 12 + 16 + 12) if rng.random() < 0.7 else len(out)
        out[rng.randrange(span)] = rng.getrandbits(8)
    is_roce = len(out) >= 14 + wire.MIN_PACKET and out[12:14] == b"\x08\x00" and \
        out[14] == 0x45 and out[23] == 17 and out[36:38] == b"\x12\xb7"
    if is_roce and rng.random() < 0.5:
        resign_icrc(out)
    if len(out) >= 34 and out[12:14] == b"\x08\x00" and out[14] == 0x45 and rng.random() < 0.5:
        _ipv4_checksum(out)
    return bytes(out)


def frames(seed: int, state, count: int):
    """(kind, ingress port, frame): `count` frames made from `state`'s valid packets."""
    rng = random.Random(seed)
    p = Packets(state, rng)
    for _ in range(count):
        kind = rng.choice(p.kinds)
        port, frame = kind.make(p)
        yield kind.name, port, mutate(rng, frame, kind.kept)


# ---- the differential run ------------------------------------------------------------------
def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


@dataclass
class Report:
    switch: str
    frames: int = 0
    outputs: int = 0                      # packets the reference backend sent
    crashes: dict = field(default_factory=dict)          # backend -> count
    divergences: int = 0
    first_divergence: tuple | None = None    # (kind, port, frame hex, outputs per backend)
    state_equal: bool = True
    rss_growth_kib: dict = field(default_factory=dict)   # backend -> growth after warm-up
    seconds: dict = field(default_factory=dict)          # backend -> processing time
    kinds: dict = field(default_factory=dict)            # kind -> frames

    @property
    def failures(self) -> int:
        return sum(self.crashes.values()) + self.divergences + (not self.state_equal)


def fuzz(compiled, ecmp_mode: str, name: str, count: int, seed: int = 1,
         backends=("python", "native")) -> Report:
    """`count` frames through `name` of the demo fabric on every backend, frame by frame:
    outputs compared with the first backend's, then counters and registers."""
    info, _ = compiled
    state = switch_state(demo_intent(ecmp_mode), Schema(info), name)
    switches = {b: configured(compiled, state, b) for b in backends}
    report = Report(f"{name} ({ecmp_mode})")
    warm = max(1, count // 5)
    base: dict[str, int] = {}
    for b in backends:
        report.crashes[b] = 0
        report.seconds[b] = 0.0
    for i, (kind, port, frame) in enumerate(frames(seed, state, count)):
        if i == warm:
            base = {b: rss_kib() for b in backends}
        report.kinds[kind] = report.kinds.get(kind, 0) + 1
        outs = {}
        for b, sw in switches.items():
            t0 = time.perf_counter()
            try:
                outs[b] = sw.process(port, frame)
            except Exception as exc:  # a crash is what this counts; the run goes on
                report.crashes[b] += 1
                outs[b] = f"crash: {type(exc).__name__}: {exc}"
            report.seconds[b] += time.perf_counter() - t0
        ref = outs[backends[0]]
        if any(o != ref for o in outs.values()):
            report.divergences += 1
            if report.first_divergence is None:
                report.first_divergence = (kind, port, frame.hex(), outs)
        report.frames += 1
        report.outputs += len(ref) if isinstance(ref, list) else 0
    end = rss_kib()
    # one process holds every backend: the growth is the process's, charged to all of them
    report.rss_growth_kib = {b: end - base.get(b, end) for b in backends}
    states = [state_of(sw) for sw in switches.values()]
    report.state_equal = all(s == states[0] for s in states)
    return report
