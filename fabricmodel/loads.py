"""Bytes per directed link for a set of flows, under Ethereal and under the baselines.

A load map is keyed by egress (node, port): the direction of a link is the port it leaves
from. Host links are included; `max_load(..., fabric_only=True)` looks at switch-to-switch
links only, where the schemes differ (host links carry the same bytes under every scheme).
"""
from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable

from fabricmodel import hashing, rocev2
from fabricmodel.routing import Routing
from fabricmodel.topology import HOST_PORT, Hop, Topology

Loads = dict[tuple[str, int], float]


def _host_hops(topo: Topology, src: str, dst: str) -> tuple[tuple[str, int], tuple[str, int]]:
    d = topo.host(dst)
    return (src, HOST_PORT), (d.leaf, d.leaf_port)


def add_path(loads: Loads, topo: Topology, src: str, dst: str, hops: Iterable[Hop],
             size: float) -> None:
    first, last = _host_hops(topo, src, dst)
    loads[first] = loads.get(first, 0) + size
    for hop in hops:
        loads[hop.egress] = loads.get(hop.egress, 0) + size
    loads[last] = loads.get(last, 0) + size


def is_fabric(topo: Topology, key: tuple[str, int]) -> bool:
    node, port = key
    if node in topo.hosts:
        return False
    lk = topo.ports(node).get(port)
    return lk is not None and lk.a not in topo.hosts


def max_load(topo: Topology, loads: Loads, fabric_only: bool = True) -> float:
    return max((v for k, v in loads.items() if not fabric_only or is_fabric(topo, k)),
               default=0)


def ecmp_path(routing: Routing, src_ip: str, dst_ip: str, sport: int, dport: int,
              src_leaf: str, dst_leaf: str) -> list[Hop]:
    """The hops a packet takes when every switch hashes it with its salt (as fabric.p4 does)."""
    hops, node = [], src_leaf
    while node != dst_leaf:
        group = routing.group(node, dst_leaf)
        if not group:
            raise RuntimeError(f"{node} has no route to {dst_leaf}")
        hop = group[hashing.ecmp_member(src_ip, dst_ip, rocev2.UDP, sport, dport, len(group),
                                        hashing.switch_salt(node))]
        hops.append(hop)
        node = hop.dst
    return hops


def ecmp_loads(topo: Topology, routing: Routing, flows, sports: dict | None = None,
               dport: int = rocev2.ROCEV2_PORT) -> Loads:
    """Hash ECMP as it really happens: one source port per flow (default: per-QP port)."""
    loads: Loads = {}
    for f in flows:
        s, d = topo.host(f.src), topo.host(f.dst)
        sport = (sports or {}).get(f, f.connection_sport)
        add_path(loads, topo, f.src, f.dst,
                 ecmp_path(routing, s.ip, d.ip, sport, dport, s.leaf, d.leaf), f.bytes)
    return loads


def ecmp_expected_max(topo: Topology, routing: Routing, flows, trials: int = 200,
                      seed: int = 0, fabric_only: bool = True) -> float:
    """Mean over random source ports of the most loaded link (Monte Carlo, seeded)."""
    rng = random.Random(seed)
    total = 0.0
    for _ in range(trials):
        loads: Loads = {}
        for f in flows:
            s, d = topo.host(f.src), topo.host(f.dst)
            hops, node = [], s.leaf
            while node != d.leaf:
                hop = rng.choice(routing.group(node, d.leaf))
                hops.append(hop)
                node = hop.dst
            add_path(loads, topo, f.src, f.dst, hops, f.bytes)
        total += max_load(topo, loads, fabric_only)
    return total / trials


def ecmp_worst_max(topo: Topology, routing: Routing, flows, fabric_only: bool = True) -> float:
    """The most loaded link when every flow that can hash onto a link does (all collide)."""
    loads: Loads = {}
    for f in flows:
        s, d = topo.host(f.src), topo.host(f.dst)
        links = {h for p in routing.paths(s.leaf, d.leaf) for h in p.hops}
        add_path(loads, topo, f.src, f.dst, links, f.bytes)
    return max_load(topo, loads, fabric_only)


def spray_loads(topo: Topology, routing: Routing, flows) -> Loads:
    """Ideal per-packet spraying: every switch divides each flow evenly over its group."""
    fractions: dict[tuple[str, str], dict[Hop, float]] = {}

    def split(src_leaf: str, dst_leaf: str) -> dict[Hop, float]:
        if (src_leaf, dst_leaf) not in fractions:
            out: dict[Hop, float] = defaultdict(float)
            share = {src_leaf: 1.0}
            frontier = [src_leaf]
            while frontier:
                nxt: list[str] = []
                for node in frontier:
                    group = routing.group(node, dst_leaf)
                    for hop in group:
                        part = share[node] / len(group)
                        out[hop] += part
                        if hop.dst not in share:
                            nxt.append(hop.dst)
                        share[hop.dst] = share.get(hop.dst, 0.0) + part
                frontier = nxt
            fractions[(src_leaf, dst_leaf)] = out
        return fractions[(src_leaf, dst_leaf)]

    loads: Loads = {}
    for f in flows:
        s, d = topo.host(f.src), topo.host(f.dst)
        first, last = _host_hops(topo, f.src, f.dst)
        loads[first] = loads.get(first, 0) + f.bytes
        loads[last] = loads.get(last, 0) + f.bytes
        for hop, frac in split(s.leaf, d.leaf).items():
            loads[hop.egress] = loads.get(hop.egress, 0) + f.bytes * frac
    return loads


def lower_bound(topo: Topology, routing: Routing, flows, fabric_only: bool = True) -> float:
    """No routing can load its busiest link less: each leaf's (and fat-tree pod's) traffic in
    and out must cross its live up-links, which all have the same capacity."""
    out_b: dict[str, float] = defaultdict(float)
    in_b: dict[str, float] = defaultdict(float)
    bound = 0.0
    for f in flows:
        s, d = topo.host(f.src), topo.host(f.dst)
        if not fabric_only:
            bound = max(bound, f.bytes)
        if s.leaf != d.leaf:
            out_b[s.leaf] += f.bytes
            in_b[d.leaf] += f.bytes
        if topo.kind == "fat-tree":
            sp, dp = topo.switch(s.leaf).pod, topo.switch(d.leaf).pod
            if sp != dp:
                out_b[f"pod{sp}"] += f.bytes
                in_b[f"pod{dp}"] += f.bytes
    if not fabric_only:
        host_out: dict[str, float] = defaultdict(float)
        host_in: dict[str, float] = defaultdict(float)
        for f in flows:
            host_out[f.src] += f.bytes
            host_in[f.dst] += f.bytes
        bound = max(bound, *host_out.values(), *host_in.values())
    for group, size in (*out_b.items(), *in_b.items()):
        cut = _cut_links(topo, routing, group)
        bound = max(bound, size / cut if cut else float("inf"))
    return bound


def _cut_links(topo: Topology, routing: Routing, group: str) -> int:
    if group.startswith("pod"):
        pod = int(group[3:])
        return sum(1 for i in routing.live
                   if topo.links[i].a in topo.switches
                   and topo.switches[topo.links[i].a].tier == "agg"
                   and topo.switches[topo.links[i].a].pod == pod)
    return sum(1 for lk in topo.uplinks(group) if lk.index in routing.live)
