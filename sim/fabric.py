"""A topology of the controller's model as a simulated network on the project's packet-level
engine (engine.cpp, loaded by sim/engine.py).

Nodes and ports are numbered as the topology numbers them; each cable is two engine links (a
FIFO, a line, a propagation delay each way). ECMP groups come from the controller's
`Routing` of the healthy fabric and every switch hashes with its salt from the model
(`fabricmodel.hashing.switch_salt`); a failed link is silent (it drops what is sent onto it) and
the switches keep hashing onto it, the regime in which REPS and Ethereal's timeouts matter.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import numpy as np

from fabricmodel import policies
from fabricmodel.hashing import switch_salt
from fabricmodel.routing import Routing
from fabricmodel.topology import HOST_PORT, Topology

from .engine import ACK_PAYLOAD, HEADER_BYTES, Engine  # noqa: F401 (re-exported)

MODES = {"ecmp": 0, "spray": 1, "reps": 2, "pinned": 3}


def add_qps(engine, job: int, src: int, step: int, dsts, sizes, mtu: int, sports, modes) -> None:
    """The engine's QPs from `src` to host nodes `dsts` of `sizes` bytes, source ports `sports`,
    entropy modes `modes` (one each, or one for all): sequences or numpy arrays, passed to
    C++ as int64 arrays in one call."""
    cols = [np.ascontiguousarray(c, dtype=np.int64) for c in (dsts, sizes, sports, modes)]
    n = len(cols[0])
    if len(cols[1]) != n or len(cols[2]) != n or len(cols[3]) not in (1, n):
        raise ValueError("add_qps: dsts, sizes, sports (and modes, unless one) differ in length")
    if n:
        engine.add_qps(job, src, step, n, cols[0], cols[1], mtu, cols[2], cols[3], len(cols[3]))


def ip_int(ip: str) -> int:
    return int(ipaddress.IPv4Address(ip))


@dataclass(frozen=True)
class LinkSpec:
    gbps: float = 400.0
    delay_ns: float = 500.0
    queue_packets: int = 100_000    # deep: the fabric is lossless in effect (PFC's stand-in)

    @property
    def bps(self) -> float:
        return self.gbps * 1e9


RECEIVERS = ("auto", "gbn", "sr")


@dataclass(frozen=True)
class Transport:
    """The hosts' RoCE transport and the switches' ECN and PFC (sim/README.md, "What it
    models", gives each default's source). None: derived from the link rate as HPCC's ns-3
    scripts derive it (`per_rate`)."""
    mtu: int = 4096                  # RoCE payload bytes per packet
    window: int = 64                 # packets in flight per QP
    host_window: int = 0             # ... per NIC, over all its QPs (0: no cap)
    rto_s: float = 100e-6            # retransmission timeout, doubled on each expiry
    rto_max_backoff: int = 6         # ... up to rto_s * 2^6
    # go-back-N (RoCE's) or selective repeat; auto: each policy with the receiver its authors
    # assume (ecmp and ethereal go-back-N, spray and reps selective repeat)
    receiver: str = "auto"
    cc: bool = True                  # DCQCN
    cnp_interval_s: float = 50e-6    # the receiver's CNPs: at most one per QP per interval
    dcqcn_g: float = 1 / 256
    alpha_resume_s: float = 1e-6
    rate_decrease_interval_s: float = 4e-6
    rp_timer_s: float = 300e-6
    byte_counter: int = 10_000_000
    fast_recovery: int = 1
    rate_ai_bps: float | None = None     # 5 Mb/s per 25 Gb/s of line rate
    rate_hai_bps: float | None = None    # 50 Mb/s per 25 Gb/s
    min_rate_bps: float = 1e9
    ecn_kmin: int | None = None      # bytes queued where marking starts: 100 KB per 25 Gb/s
    ecn_kmax: int | None = None      # ... where it reaches ecn_pmax: 400 KB per 25 Gb/s
    ecn_pmax: float = 0.2
    pfc: bool = True                 # PFC on the switches' shared buffer
    buffer_bytes: int | None = None  # per switch: 16 MB per 50 Gb/s
    pfc_alpha: float = 1 / 8         # the dynamic threshold: this fraction of the free buffer
    pfc_xoff_packets: int = 0        # > 0: a static XOFF threshold per ingress, in packets
    pfc_xon_packets: int = 2         # RESUME this many packets below XOFF
    reps_cache: int = 8              # REPS's recycled-entropy cache (entries)

    def __post_init__(self) -> None:
        if self.receiver not in RECEIVERS:
            raise ValueError(f"receiver must be one of {RECEIVERS}, got {self.receiver!r}")

    def per_rate(self, bps: float) -> dict[str, float]:
        """The rate-derived settings at line rate `bps` (HPCC's ns-3 run.py scales its DCQCN
        and ECN settings per 25 Gb/s of NIC rate, its buffer per 50 Gb/s)."""
        k = bps / 25e9

        def pick(value, derived):
            return derived if value is None else value

        return {"rate_ai": pick(self.rate_ai_bps, 5e6 * k),
                "rate_hai": pick(self.rate_hai_bps, 50e6 * k),
                "ecn_kmin": pick(self.ecn_kmin, round(100_000 * k)),
                "ecn_kmax": pick(self.ecn_kmax, round(400_000 * k)),
                "buffer_bytes": pick(self.buffer_bytes, round(16e6 * bps / 50e9))}

    def gbn_modes(self) -> int:
        """engine.cpp's gbn_modes: a bit per entropy mode whose QPs get go-back-N receivers."""
        gbn = {"auto": ("ecmp", "pinned"), "gbn": tuple(MODES), "sr": ()}[self.receiver]
        return sum(1 << MODES[m] for m in gbn)

    def receiver_of(self, policy: str) -> str:
        """The receiver a policy's QPs get: go-back-N or selective repeat."""
        mode = MODES[policies.get(policy).mechanism]
        return "go-back-N" if self.gbn_modes() >> mode & 1 else "selective repeat"


_ROUTING: dict[int, tuple[Topology, Routing]] = {}


def healthy_routing(topo: Topology) -> Routing:
    """The healthy fabric's `Routing`, one per topology object and process: every run of a
    sweep on it shares its groups and paths (and the Ethereal planner's steering cached on
    it), which depend on the topology alone."""
    got = _ROUTING.get(id(topo))
    if got is None or got[0] is not topo:
        if len(_ROUTING) >= 4:                 # the oldest goes: a process's tests make many
            del _ROUTING[next(iter(_ROUTING))]
        got = _ROUTING[id(topo)] = (topo, Routing(topo))
    return got[1]


class SimFabric:
    """One simulation: build, add QPs through `engine`, run, read counters. Each SimFabric has
    its own engine (its own clock and events); `close` lets it be freed."""

    def __init__(self, topo: Topology, link: LinkSpec | None = None,
                 transport: Transport | None = None, failed: tuple[int, ...] = (),
                 seed: int = 1) -> None:
        link, transport = link or LinkSpec(), transport or Transport()
        self.topo, self.link, self.transport, self.failed = topo, link, transport, tuple(failed)
        self.routing = healthy_routing(topo)
        self.hosts = [topo.host_by_rank(r) for r in range(len(topo.hosts))]
        self.names = [h.name for h in self.hosts] + list(topo.switches)
        self.index = {n: i for i, n in enumerate(self.names)}
        e = Engine()
        self.engine = e
        t, derived = transport, transport.per_rate(link.bps)
        e.line_bps = link.bps
        e.rto, e.rto_max_backoff, e.window = t.rto_s, t.rto_max_backoff, t.window
        e.host_window = t.host_window
        e.gbn_modes = t.gbn_modes()
        e.cc, e.cnp_interval, e.dcqcn_g = t.cc, t.cnp_interval_s, t.dcqcn_g
        e.alpha_resume, e.rate_decrease_interval = t.alpha_resume_s, t.rate_decrease_interval_s
        e.rp_timer, e.byte_counter, e.fast_recovery = t.rp_timer_s, t.byte_counter, t.fast_recovery
        e.rate_ai, e.rate_hai, e.min_rate = derived["rate_ai"], derived["rate_hai"], t.min_rate_bps
        e.ecn_kmin, e.ecn_kmax, e.ecn_pmax = derived["ecn_kmin"], derived["ecn_kmax"], t.ecn_pmax
        e.pfc, e.buffer_bytes, e.pfc_alpha = t.pfc, derived["buffer_bytes"], t.pfc_alpha
        wire = HEADER_BYTES + t.mtu
        # headroom: what is in flight on the cable both ways when the PAUSE leaves, and two
        # packets (one on the wire at each end)
        e.headroom_bytes = 2 * link.bps * link.delay_ns * 1e-9 / 8 + 2 * wire
        e.pfc_resume_bytes = t.pfc_xon_packets * wire
        e.pfc_xoff_bytes = t.pfc_xoff_packets * wire
        e.reps_cache = t.reps_cache
        e.seed(seed)
        e.set_links(round(link.bps), round(link.delay_ns * 1000), link.queue_packets)
        for i in range(len(self.names)):
            e.add_node(i < len(self.hosts), ip_int(self.hosts[i].ip) if i < len(self.hosts) else 0)
        for lk in topo.links:
            a, b = self.index[lk.a], self.index[lk.b]
            e.connect(a, lk.a_port, b, lk.b_port)
            if lk.index in self.failed:
                e.fail_port(a, lk.a_port)
                e.fail_port(b, lk.b_port)
        for sw in topo.switches.values():
            s = self.index[sw.name]
            e.set_salt(s, switch_salt(sw.name))
            for leaf in topo.leaves:
                if leaf.name == sw.name:
                    for h in topo.hosts_of(leaf.name):
                        e.set_host_port(s, ip_int(h.ip), h.leaf_port)
                    continue
                ports = [hop.src_port for hop in self.routing.group(sw.name, leaf.name)]
                if ports:
                    e.set_group(s, leaf.index, ports)

    # ---- queries ---------------------------------------------------------------------------
    def port_bytes(self, node: str, port: int, payload_only: bool = True) -> int:
        """Bytes sent out of (node, port): RoCE payload only, or whole packets on the wire."""
        i = self.index[node]
        return int(self.engine.tx_data(i, port) if payload_only else self.engine.tx(i, port))

    def uplink_bytes(self) -> dict[tuple[str, int], int]:
        """Payload bytes each leaf sent up, per uplink port."""
        return {(lf.name, lk.a_port): self.port_bytes(lf.name, lk.a_port)
                for lf in self.topo.leaves for lk in self.topo.uplinks(lf.name)}

    def fabric_loads(self) -> dict[tuple[str, int], int]:
        """Payload bytes per directed link, host links included, keyed as fabricmodel/loads.py."""
        out = {}
        for lk in self.topo.links:
            for end in (lk.a, lk.b):
                port = HOST_PORT if end in self.topo.hosts else lk.port_of(end)
                got = self.port_bytes(end, port)
                if got:
                    out[(end, port)] = got
        return out

    def add_pin(self, switch: str, src_ip: str, dst_ip: str, sport: int, port: int) -> None:
        self.engine.add_pin(self.index[switch], ip_int(src_ip), ip_int(dst_ip), sport, port)

    def run(self, until_s: float | None = None) -> float:
        """Simulate until nothing is left to do (or `until_s` simulated seconds); the
        simulated time at the end."""
        return float(self.engine.run(-1.0 if until_s is None else until_s))

    def events(self) -> int:
        return int(self.engine.events())

    def close(self) -> None:
        self.engine.release()
