"""A topology of the controller's model built as an ns-3 network, with the C++ engine on top.

Nodes are ns-3 Nodes joined by PointToPointNetDevices (one per topology port, numbered as the
topology numbers them); `engine.cpp` is compiled into the running simulator (cppyy) and
registered as every node's protocol handler. ECMP groups come from the controller's `Routing`
of the healthy fabric: a failed link is silent (it drops what is sent onto it) and the
switches keep hashing onto it, the regime in which REPS and Ethereal's timeouts matter.
"""
from __future__ import annotations

import contextlib
import importlib.util
import ipaddress
import os
import pathlib
from dataclasses import dataclass

from fabricmodel.routing import Routing
from fabricmodel.topology import HOST_PORT, Topology

ENGINE = pathlib.Path(__file__).with_name("engine.cpp")
NS3_VERSION = "44"
NS3_MODULES = ("core", "network", "point-to-point")
NS3_LIBRARIES = ("core", "stats", "network", "point-to-point")   # in dependency order
MODES = {"ecmp": 0, "spray": 1, "reps": 2, "pinned": 3}
HEADER_BYTES = 56 + 2            # what engine.cpp puts in front of every payload, PPP included

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

    Loads only the three ns-3 modules the simulator uses (core, network, point-to-point) from
    the ns3 wheel instead of `from ns import ns`, which parses the headers of all 40-odd
    modules: about 9x faster to import (sim/README.md, "Cost")."""
    global _ns
    if _ns is None:
        import cppyy
        import libcppyy

        prefix = pathlib.Path(importlib.util.find_spec("ns3").submodule_search_locations[0])
        libcppyy.AddSmartPtrType("Ptr")          # ns3::Ptr<T> behaves as a smart pointer
        cppyy.add_include_path(str(prefix / "include"))
        cppyy.add_library_path(str(prefix / "lib64"))
        with _quiet_fd2():
            for module in NS3_MODULES:
                cppyy.include(f"ns3/{module}-module.h")
            for lib in NS3_LIBRARIES:
                cppyy.load_library(f"libns3.{NS3_VERSION}-{lib}.so")
            # picoseconds: at 400 Gbps a packet takes 83 ns, and ns rounding would skew rates
            cppyy.gbl.ns3.Time.SetResolution(cppyy.gbl.ns3.Time.PS)
            cppyy.cppdef(ENGINE.read_text())
        _ns = cppyy.gbl.ns3
    return _ns


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
    """One simulation: build, add QPs through `engine`, run, read counters. ns-3's simulator
    is a process-wide singleton, so a SimFabric is used for one run and then destroyed."""

    def __init__(self, topo: Topology, link: LinkSpec | None = None,
                 transport: Transport | None = None, failed: tuple[int, ...] = (),
                 seed: int = 1) -> None:
        link, transport = link or LinkSpec(), transport or Transport()
        ns = ns3()
        ns.Simulator.Destroy()
        ns.RngSeedManager.SetSeed(seed)
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
        self.nodes = ns.NodeContainer()
        self.nodes.Create(len(self.names))
        for i in range(len(self.names)):
            ip = ip_int(self.hosts[i].ip) if i < len(self.hosts) else 0
            e.add_node(self.nodes.Get(i), i < len(self.hosts), ip)
        p2p = ns.PointToPointHelper()
        p2p.SetDeviceAttribute("DataRate", ns.StringValue(f"{link.bps:.0f}bps"))
        p2p.SetChannelAttribute("Delay", ns.StringValue(f"{link.delay_ns:g}ns"))
        p2p.SetQueue("ns3::DropTailQueue", "MaxSize", ns.StringValue(f"{link.queue_packets}p"))
        self._devices = []
        for lk in topo.links:
            a, b = self.index[lk.a], self.index[lk.b]
            devs = p2p.Install(self.nodes.Get(a), self.nodes.Get(b))
            self._devices.append(devs)
            e.set_port(a, lk.a_port, devs.Get(0))
            e.set_port(b, lk.b_port, devs.Get(1))
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
        """Bytes sent out of (node, port): RoCE payload only, or whole packets."""
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
        ns = ns3()
        if until_s is not None:
            ns.Simulator.Stop(ns.Seconds(until_s))
        ns.Simulator.Run()
        return ns.Simulator.Now().GetSeconds()

    @staticmethod
    def events() -> int:
        return int(ns3().Simulator.GetEventCount())

    def close(self) -> None:
        ns3().Simulator.Destroy()
