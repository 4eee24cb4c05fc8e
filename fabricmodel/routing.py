"""Shortest-path ECMP routing on a (possibly degraded or sliced) fabric.

The ECMP group a switch uses toward a destination leaf is the list of its live links that
bring a packet one hop closer, ordered by egress port. Ports are numbered in spine order
(then parallel cable), so member i of a leaf's group is the uplink to the i-th live spine:
the order `fabricmodel/hashing.py` and the installer must agree on.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import cached_property

from fabricmodel.topology import Hop, Path, Topology


@dataclass(frozen=True)
class Route:
    """One routing entry: packets to `prefix` leave through one of `ports` (ECMP if several)."""
    switch: str
    prefix: str
    ports: tuple[int, ...]


class Routing:
    """Routes over the links of `topo` that are in `allowed` (all by default) and not failed."""

    def __init__(self, topo: Topology, failed=(), allowed=None) -> None:
        self.topo = topo
        self.failed = frozenset(failed)
        usable = set(range(len(topo.links))) if allowed is None else set(allowed)
        self.live = frozenset(usable - self.failed)
        self._dist: dict[str, dict[str, int]] = {}
        self._groups: dict[tuple[str, str], tuple[Hop, ...]] = {}
        self._paths: dict[tuple[str, str], tuple[Path, ...]] = {}

    @cached_property
    def _adj(self) -> dict[str, list[Hop]]:
        adj: dict[str, list[Hop]] = {name: [] for name in self.topo.switches}
        for idx in sorted(self.live):
            lk = self.topo.links[idx]
            if lk.a in self.topo.switches and lk.b in self.topo.switches:
                adj[lk.a].append(lk.hop_from(lk.a))
                adj[lk.b].append(lk.hop_from(lk.b))
        for hops in adj.values():
            hops.sort(key=lambda h: h.src_port)
        return adj

    def distances(self, dst_leaf: str) -> dict[str, int]:
        """Valley-free (up, then down) hop distance to `dst_leaf` of every switch that has one.

        A switch with a live downward path uses it; otherwise it goes up. Packets never turn
        back up after going down, as in any Clos routing."""
        if dst_leaf not in self._dist:
            level = {n: s.level for n, s in self.topo.switches.items()}
            down = {dst_leaf: 0}
            queue = deque([dst_leaf])
            while queue:
                node = queue.popleft()
                for hop in self._adj[node]:
                    if level[hop.dst] > level[node] and hop.dst not in down:
                        down[hop.dst] = down[node] + 1
                        queue.append(hop.dst)
            dist = dict(down)
            for node in sorted(level, key=level.get, reverse=True):
                if node in dist:
                    continue
                ups = [dist[h.dst] for h in self._adj[node]
                       if level[h.dst] > level[node] and h.dst in dist]
                if ups:
                    dist[node] = min(ups) + 1
            self._dist[dst_leaf] = dist
        return self._dist[dst_leaf]

    def group(self, switch: str, dst_leaf: str) -> tuple[Hop, ...]:
        """The ordered ECMP group of `switch` toward `dst_leaf` (empty if unreachable)."""
        key = (switch, dst_leaf)
        if key not in self._groups:
            dist = self.distances(dst_leaf)
            here = dist.get(switch)
            if here is None or here == 0:
                self._groups[key] = ()
            else:
                mine = self.topo.switches[switch].level
                up = self._goes_up(switch, dst_leaf)
                self._groups[key] = tuple(
                    h for h in self._adj[switch] if dist.get(h.dst) == here - 1
                    and (self.topo.switches[h.dst].level > mine) == up)
        return self._groups[key]

    def _goes_up(self, switch: str, dst_leaf: str) -> bool:
        """True unless a live downward hop leads toward `dst_leaf`."""
        dist = self.distances(dst_leaf)
        mine = self.topo.switches[switch].level
        return not any(self.topo.switches[h.dst].level < mine
                       and dist.get(h.dst) == dist[switch] - 1 for h in self._adj[switch])

    def paths(self, src_leaf: str, dst_leaf: str) -> tuple[Path, ...]:
        """Every shortest live path between two leaves, in ECMP member order."""
        key = (src_leaf, dst_leaf)
        if key not in self._paths:
            out: list[Path] = []

            def walk(node: str, hops: tuple[Hop, ...]) -> None:
                if node == dst_leaf:
                    out.append(Path(hops))
                    return
                for hop in self.group(node, dst_leaf):
                    walk(hop.dst, (*hops, hop))

            if src_leaf == dst_leaf or self.distances(dst_leaf).get(src_leaf) is not None:
                walk(src_leaf, ())
            self._paths[key] = tuple(out)
        return self._paths[key]

    def reachable(self, src_leaf: str, dst_leaf: str) -> bool:
        return src_leaf in self.distances(dst_leaf)

    def routes(self, switch: str, hosts=None) -> list[Route]:
        """Entries for `switch`: a /32 per directly attached host (of `hosts`, default all),
        and a /24 per other leaf's subnet with its ECMP group. Unreachable leaves get none."""
        wanted = None if hosts is None else set(hosts)
        out: list[Route] = []
        for leaf in self.topo.leaves:
            if leaf.name == switch:
                for h in self.topo.hosts_of(switch):
                    lk = self.topo.link(h.name, switch)
                    if (wanted is None or h.name in wanted) and lk.index in self.live:
                        out.append(Route(switch, f"{h.ip}/32", (h.leaf_port,)))
                continue
            if wanted is not None and not any(h.name in wanted
                                              for h in self.topo.hosts_of(leaf.name)):
                continue
            group = self.group(switch, leaf.name)
            if group:
                out.append(Route(switch, leaf.subnet, tuple(h.src_port for h in group)))
        return out
