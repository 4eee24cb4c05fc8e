"""A topology of the controller's model as a simulated network on the project's packet-level
engine (engine.cpp, loaded by sim/engine.py).

Nodes and ports are numbered as the topology numbers them; each cable is two engine links (a
FIFO, a line, a propagation delay each way). ECMP groups come from the controller's
`Routing` of the healthy fabric: a failed link is silent (it drops what is sent onto it) and
the switches keep hashing onto it, the regime in which REPS and Ethereal's timeouts matter.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import numpy as np

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


@dataclass(frozen=True)
class Transport:
    mtu: int = 4096                  # RoCE payload bytes per packet
    window: int = 64                 # packets in flight per QP
    rto_s: float = 100e-6            # retransmission timeout (loss is declared only by it)
    cc: bool = True                  # DCQCN-like rate control on ECN echoes
    ecn_kmin: int = 100_000          # bytes queued where marking starts (RED-like ramp)
    ecn_kmax: int = 400_000
    ecn_pmax: float = 0.2
    reps_cache: int = 8              # REPS's recycled-entropy cache (entries)


class SimFabric:
    """One simulation: build, add QPs through `engine`, run, read counters. Each SimFabric has
    its own engine (its own clock and events); `close` lets it be freed."""

    def __init__(self, topo: Topology, link: LinkSpec | None = None,
                 transport: Transport | None = None, failed: tuple[int, ...] = (),
                 seed: int = 1) -> None:
        link, transport = link or LinkSpec(), transport or Transport()
        self.topo, self.link, self.transport, self.failed = topo, link, transport, tuple(failed)
        self.routing = Routing(topo)
        self.hosts = [topo.host_by_rank(r) for r in range(len(topo.hosts))]
        self.names = [h.name for h in self.hosts] + list(topo.switches)
        self.index = {n: i for i, n in enumerate(self.names)}
        e = Engine()
        self.engine = e
        e.line_bps = link.bps
        e.rto = transport.rto_s
        e.window = transport.window
        e.cc = transport.cc
        e.ecn_kmin, e.ecn_kmax, e.ecn_pmax = transport.ecn_kmin, transport.ecn_kmax, transport.ecn_pmax
        e.reps_cache = transport.reps_cache
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
