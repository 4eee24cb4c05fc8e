"""A topology of the controller's model as a simulated network: the C++ engine on ns-3's
simulator.

`engine.cpp` is compiled into the running process (cppyy) after a prelude of the RoCEv2
numbers it shares with the rest of the project (`fabricmodel.rocev2`, `PRELUDE`). Nodes and
ports are numbered as the topology numbers them; each cable is two engine links that behave as
ns-3's PointToPointNetDevice and channel (engine.cpp). ECMP groups come from the controller's
`Routing` of the healthy fabric: a failed link is silent (it drops what is sent onto it) and
the switches keep hashing onto it, the regime in which REPS and Ethereal's timeouts matter.
"""
from __future__ import annotations

import contextlib
import importlib.util
import ipaddress
import os
import pathlib
from dataclasses import dataclass

import numpy as np

from fabricmodel import rocev2
from fabricmodel.routing import Routing
from fabricmodel.topology import HOST_PORT, Topology, leaf_spine

ENGINE = pathlib.Path(__file__).with_name("engine.cpp")
NS3_VERSION = "44"
NS3_HEADERS = ("ns3/nstime.h", "ns3/data-rate.h")   # all the engine uses of ns-3: Time, DataRate
NS3_LIBRARIES = ("core", "network")   # in dependency order
MODES = {"ecmp": 0, "spray": 1, "reps": 2, "pinned": 3}
HEADER_BYTES = rocev2.FRAME_OVERHEAD + rocev2.BTH_BYTES   # on the wire in front of a payload
# An ACK's bytes after the headers: its AETH and 4 more (the model has always counted the ICRC
# here as well as in FRAME_OVERHEAD; kept so that results stay comparable across versions).
ACK_PAYLOAD = rocev2.AETH_BYTES + rocev2.ICRC_BYTES
SPORT_MASK = rocev2.SPORT_MAX - rocev2.SPORT_MIN
assert SPORT_MASK & (SPORT_MASK + 1) == 0 and rocev2.SPORT_MIN & SPORT_MASK == 0, \
    "engine.cpp draws source ports as SPORT_MIN | (random & SPORT_MASK)"
PRELUDE = f"""#include <cstdint>
namespace mlsim {{
constexpr uint32_t WIRE_HEADER = {HEADER_BYTES};
constexpr uint32_t ACK_PAYLOAD = {ACK_PAYLOAD};
constexpr uint16_t SPORT_MIN = {rocev2.SPORT_MIN}, SPORT_MASK = {SPORT_MASK};
constexpr uint16_t ROCEV2_PORT = {rocev2.ROCEV2_PORT};
constexpr uint8_t UDP = {rocev2.UDP};
}}
"""

_ns = None


@contextlib.contextmanager
def _quiet_fd2():
    """cppyy prints harmless 'Failed to materialize symbols' lines while loading; hide them."""
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def ns3():
    """ns-3's C++ namespace with the engine compiled into it (once per process).

    Parses only the two ns-3 headers the engine uses (Time, DataRate) and loads their two
    libraries from the ns3 wheel, instead of `from ns import ns`, which parses the headers of
    all 40-odd modules (the core and network module headers alone: 1.1 s of CPU, these two
    0.14 s; sim/README.md, "Cost")."""
    global _ns
    if _ns is None:
        import cppyy
        import libcppyy

        prefix = pathlib.Path(importlib.util.find_spec("ns3").submodule_search_locations[0])
        libcppyy.AddSmartPtrType("Ptr")          # ns3::Ptr<T> behaves as a smart pointer
        cppyy.add_include_path(str(prefix / "include"))
        cppyy.add_library_path(str(prefix / "lib64"))
        with _quiet_fd2():
            for header in NS3_HEADERS:
                cppyy.include(header)
            for lib in NS3_LIBRARIES:
                cppyy.load_library(f"libns3.{NS3_VERSION}-{lib}.so")
            # picoseconds: at 400 Gbps a packet takes 83 ns, and ns rounding would skew rates
            cppyy.gbl.ns3.Time.SetResolution(cppyy.gbl.ns3.Time.PS)
            cppyy.cppdef(PRELUDE + ENGINE.read_text())
        _ns = cppyy.gbl.ns3
        _warm_up()
    return _ns


def _warm_up() -> None:
    """Cling compiles each engine function on its first call, and cppyy a converter for each
    kind of Python callback on its first assignment (0.2-0.4 s each): a tiny run through every
    per-packet path (each entropy mode, a failed link's timeouts, ECN) and every callback,
    QPs added from `on_arrive` as runs add them, does it here, so that no run's wall time
    includes compiling."""
    topo = leaf_spine(2, 2, 2)
    fab = SimFabric(topo, failed=(topo.link("leaf1", "spine1").index,),
                    transport=Transport(ecn_kmin=0, ecn_kmax=1))
    e = fab.engine
    job = e.add_job()
    for rank in range(4):
        e.add_step(job, rank, 0)

    def arrive(job: int, rank: int, step: int) -> None:
        if rank == 0:
            add_qps(e, job, 0, step, [2, 3, 2, 3], [40_000] * 4, 4096,
                    [0xC001, 0xC002, 0xC003, 0xC004], list(MODES.values()))

    e.on_arrive = arrive
    e.on_done = lambda job, rank: None
    e.on_timeout = lambda qp: e.repath(qp, 0xC005)
    e.on_timer = lambda timer: None
    e.timer(1e-6, 0)
    for rank in range(4):
        e.start_rank(job, rank)
    fab.run(0.01)
    fab.close()


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
        ns3()
        self.topo, self.link, self.transport, self.failed = topo, link, transport, tuple(failed)
        self.routing = Routing(topo)
        self.hosts = [topo.host_by_rank(r) for r in range(len(topo.hosts))]
        self.names = [h.name for h in self.hosts] + list(topo.switches)
        self.index = {n: i for i, n in enumerate(self.names)}
        import cppyy

        e = cppyy.gbl.mlsim.Fabric()
        self.engine = e
        e.line_bps = link.bps
        e.rto = transport.rto_s
        e.window = transport.window
        e.cc = transport.cc
        e.ecn_kmin, e.ecn_kmax, e.ecn_pmax = transport.ecn_kmin, transport.ecn_kmax, transport.ecn_pmax
        e.reps_cache = transport.reps_cache
        e.seed(seed)
        e.set_links(f"{link.bps:.0f}bps", f"{link.delay_ns:g}ns", link.queue_packets)
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
