"""What a host knows of the fabric, asked from fabricd rather than read from the topology file:
the links fabricd marked down and the ECMP groups it installed, in member order. Ethereal's
planner steers by the members a switch actually hashes over, so after `fabricctl link ... down`
its source ports still land on the paths it means.

fabricd serves on the host's loopback (127.0.0.1), which the ranks' namespaces cannot reach:
the launcher, the ranks' host agent, asks (`fetch`) and hands each rank the answer."""
from __future__ import annotations

import grpc

from controller.proto import fabric_pb2 as api
from controller.proto import fabric_pb2_grpc
from fabricmodel.routing import Routing
from fabricmodel.topology import Hop, Topology


class InstalledRouting(Routing):
    """Routing over the links fabricd has up; a switch's group toward a leaf is the member
    list fabricd installed (GetRoutes, shared slice), where it installed one."""

    def __init__(self, topo: Topology, failed, installed: dict[tuple[str, str], tuple[int, ...]]):
        super().__init__(topo, failed)
        self.installed = installed

    def group(self, switch: str, dst_leaf: str) -> tuple[Hop, ...]:
        ports = self.installed.get((switch, self.topo.switches[dst_leaf].subnet))
        if ports is None:
            return super().group(switch, dst_leaf)
        by_port = {h.src_port: h for h in self._adj[switch]}
        return tuple(by_port[p] for p in ports if p in by_port)


def fetch(address: str, timeout: float = 10.0) -> dict:
    """fabricd's view, as JSON-able data: links down (their two ends) and every switch's
    leaf-subnet routes with their member ports in order."""
    with grpc.insecure_channel(address) as channel:
        stub = fabric_pb2_grpc.FabricStub(channel)
        reply = stub.GetTopology(api.Empty(), timeout=timeout)
        view = {"down": [[lk.a, lk.a_port, lk.b, lk.b_port] for lk in reply.links if not lk.up],
                "routes": []}
        for sw in reply.switches:
            for route in stub.GetRoutes(api.SwitchRequest(switch=sw.name),
                                        timeout=timeout).routes:
                if route.slice == 0 and not route.prefix.endswith("/32"):
                    view["routes"].append([sw.name, route.prefix, list(route.ports)])
    return view


def installed_routing(topo: Topology, view: dict) -> InstalledRouting:
    by_ends = {(lk.a, lk.a_port, lk.b, lk.b_port): lk.index for lk in topo.links}
    failed = {by_ends[tuple(ends)] for ends in view["down"] if tuple(ends) in by_ends}
    installed = {(switch, prefix): tuple(ports) for switch, prefix, ports in view["routes"]}
    return InstalledRouting(topo, failed, installed)
