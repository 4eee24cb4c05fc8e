"""Multicast groups for collectives: one shared tree per (job, communicator).

The tree is rooted at the lowest switch that reaches every member's leaf going only down
(the leaf itself when all members share one, else a spine, or in a fat-tree an agg or core),
rotating between equal candidates so groups spread over the fabric. A switch replicates a
packet to every tree port and member host port of the group except the one it came in on
(the data plane prunes the ingress port), so one group per switch serves every sender.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from controller.allocate import free_ids
from fabricmodel import rocev2
from fabricmodel.routing import Routing
from fabricmodel.topology import Topology

MAX_GROUP_ID = rocev2.GROUP_IDS - 1   # fabric.p4's multicast group ids (and every planner's)


class MulticastError(Exception):
    """An invalid request (unknown host, duplicate group, no tree); the message says why."""


@dataclass(frozen=True)
class Rewrite:
    """Per-replica rewrite toward a member host: the copy leaves as unicast to that host."""
    dst_mac: str
    dst_ip: str
    src_mac: str


@dataclass(frozen=True)
class Replica:
    port: int
    rid: int                     # replication id, unique within the group on this switch
    rewrite: Rewrite | None      # None on fabric ports: copies travel on with the group address


@dataclass(frozen=True)
class MulticastGroup:
    job: str
    communicator: str
    group_id: int                # the P4 multicast group id on every switch of the tree
    group_ip: str                # 239.1.<id div 256>.<id mod 256>: what senders address
    members: tuple[str, ...]     # hosts, rank order
    root: str
    replicas: dict[str, tuple[Replica, ...]]
    tree_links: frozenset[int]

    @property
    def switches(self) -> list[str]:
        return list(self.replicas)


class Tree(NamedTuple):
    root: str
    replicas: dict[str, tuple[Replica, ...]]
    tree_links: frozenset[int]


def group_ip(group_id: int) -> str:
    """The address senders use for a group: 239.1.<id div 256>.<id mod 256>."""
    return f"239.1.{group_id >> 8}.{group_id & 0xFF}"


def group_ids(used, count: int = 1, from_top: bool = False) -> list[int]:
    """`count` free multicast group ids (every user of the PRE allocates through here)."""
    ids = free_ids(used, 1, MAX_GROUP_ID, count, from_top)
    if len(ids) < count:
        raise MulticastError("every multicast group id is in use")
    return ids


def _down_reach(topo: Topology, routing: Routing, node: str, leaf: str) -> list[int] | None:
    """The links of the first down-only path from `node` to `leaf`, or None."""
    links: list[int] = []
    while node != leaf:
        level = topo.switches[node].level
        down = [h for h in routing.group(node, leaf) if topo.switches[h.dst].level < level]
        if not down:
            return None
        links.append(down[0].link)
        node = down[0].dst
    return links


@dataclass
class MulticastPlanner:
    topo: Topology
    groups: dict[tuple[str, str], MulticastGroup] = field(default_factory=dict)

    def create(self, job: str, communicator: str, members: list[str], *,
               routing: Routing | None = None, extra_leaves=()) -> MulticastGroup:
        """A group whose tree reaches every member (and `extra_leaves`, e.g. an aggregator)."""
        key = (job, communicator)
        if key in self.groups:
            raise MulticastError(f"group {job}/{communicator} already exists "
                                 f"(id {self.groups[key].group_id})")
        if len(members) < 1 or len(set(members)) != len(members):
            raise MulticastError(f"group {job}/{communicator}: members must be distinct hosts, "
                                 f"got {members!r}")
        unknown = [m for m in members if m not in self.topo.hosts]
        unknown += [lf for lf in extra_leaves if self.topo.switches.get(lf) is None
                    or self.topo.switches[lf].tier != "leaf"]
        if unknown:
            raise MulticastError(f"group {job}/{communicator}: unknown host or leaf "
                                 f"{', '.join(map(repr, unknown))}")
        used = {g.group_id for g in self.groups.values()}
        gid = group_ids(used)[0]
        try:
            found = tree(self.topo, routing or Routing(self.topo), members, gid, extra_leaves)
        except MulticastError as exc:
            raise MulticastError(f"group {job}/{communicator}: {exc}") from None
        group = MulticastGroup(job, communicator, gid, group_ip(gid),
                               tuple(sorted(members, key=lambda m: self.topo.host(m).rank)),
                               *found)
        self.groups[key] = group
        return group

    def delete(self, job: str, communicator: str) -> MulticastGroup:
        try:
            return self.groups.pop((job, communicator))
        except KeyError:
            raise MulticastError(f"no multicast group {job}/{communicator}") from None


def tree(topo: Topology, routing: Routing, members, group_id: int, extra_leaves=()) -> Tree:
    """The shared tree of a group (stateless: the same inputs give the same tree, so a
    daemon can recompute it after a failure and keep its group id)."""
    leaves = sorted({topo.host(m).leaf for m in members} | set(extra_leaves),
                    key=lambda lf: topo.switches[lf].device_id)
    by_level: dict[int, list[tuple[str, set[int]]]] = {}
    for sw in topo.switches.values():
        links: set[int] = set()
        for leaf in leaves:
            path = _down_reach(topo, routing, sw.name, leaf)
            if path is None:
                break
            links.update(path)
        else:
            by_level.setdefault(sw.level, []).append((sw.name, links))
    if not by_level:
        raise MulticastError(f"no switch reaches every member leaf ({', '.join(leaves)}) "
                             f"over live links")
    candidates = by_level[min(by_level)]
    root, links = candidates[group_id % len(candidates)]
    return Tree(root, _replicas(topo, members, links), frozenset(links))


def _replicas(topo: Topology, members, links: set[int]) -> dict[str, tuple[Replica, ...]]:
    ports: dict[str, list[tuple[int, Rewrite | None]]] = {}
    for idx in sorted(links):
        lk = topo.links[idx]
        for end in (lk.a, lk.b):
            ports.setdefault(end, []).append((lk.port_of(end), None))
    for m in members:
        h = topo.host(m)
        leaf = topo.switch(h.leaf)
        ports.setdefault(h.leaf, []).append(
            (h.leaf_port, Rewrite(h.mac, h.ip, leaf.port_mac(h.leaf_port))))
    return {sw: tuple(Replica(port, rid, rw)
                      for rid, (port, rw) in enumerate(sorted(entries, key=lambda e: e[0]),
                                                       start=1))
            for sw, entries in sorted(ports.items(),
                                      key=lambda kv: topo.switches[kv[0]].device_id)}
