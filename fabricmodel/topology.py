"""The fabric model: one description drives Mininet, the controller and the tests.

Two shapes: a two-tier leaf-spine (L leaves, S spines, H hosts per leaf, P parallel links
between every leaf and spine) and a three-tier k-ary fat-tree (edge switches are named
leaves, aggregation switches `agg`, core switches `core`). Names, port numbers, MAC and IP
addresses are decided here and nowhere else; `controller/README.md` documents the scheme.
"""
from __future__ import annotations

import ipaddress
import pathlib
from dataclasses import dataclass, field
from functools import cached_property

import jsonschema
import yaml

MAX_HOSTS_PER_LEAF = 252          # .253 is the leaf's service address, .254 its gateway
MAX_LEAVES = 16383                # leaf subnets 10.<l/256>.<l%256>.0/24 stay below 10.64/10
MAX_INTF_NAME = 15                # Linux IFNAMSIZ - 1
DEFAULT_GRPC_PORT_BASE = 50050    # switch with device id d serves P4Runtime on base + d
HOST_PORT = 0                     # a host's single interface (Mininet numbers host ports from 0)

KINDS = ("leaf-spine", "fat-tree")
TIER_LEVEL = {"host": 0, "leaf": 1, "agg": 2, "spine": 2, "core": 3}


class TopologyError(ValueError):
    """An invalid topology description; the message names the source and the field."""


@dataclass(frozen=True)
class Host:
    name: str
    rank: int                 # 0-based global index: h1 is rank 0
    ip: str
    mac: str
    leaf: str
    leaf_port: int
    gateway_ip: str
    gateway_mac: str

    @property
    def intf(self) -> str:
        return intf_name(self.name, HOST_PORT)


@dataclass(frozen=True)
class Switch:
    name: str
    tier: str                 # leaf | spine (leaf-spine); leaf | agg | core (fat-tree)
    index: int                # 1-based within the tier
    device_id: int
    grpc_port: int
    pod: int | None = None    # fat-tree pod (0-based) of leaves and aggs

    @property
    def level(self) -> int:
        return TIER_LEVEL[self.tier]

    def port_mac(self, port: int) -> str:
        return switch_port_mac(self.device_id, port)

    @property
    def subnet(self) -> str | None:
        """The /24 of a leaf's hosts (None for other tiers)."""
        return leaf_subnet(self.index) if self.tier == "leaf" else None

    @property
    def service_ip(self) -> str | None:
        """An address routed to this leaf that belongs to no host (in-network services)."""
        return _leaf_addr(self.index, 253) if self.tier == "leaf" else None

    @property
    def gateway_ip(self) -> str | None:
        return _leaf_addr(self.index, 254) if self.tier == "leaf" else None


@dataclass(frozen=True)
class Link:
    """An undirected cable; `a` is the lower tier end (host or leaf), `b` the upper one."""
    index: int
    a: str
    a_port: int
    b: str
    b_port: int
    parallel: int = 1         # 1-based among the cables between the same two switches

    @property
    def a_intf(self) -> str:
        return intf_name(self.a, self.a_port)

    @property
    def b_intf(self) -> str:
        return intf_name(self.b, self.b_port)

    def port_of(self, node: str) -> int:
        if node == self.a:
            return self.a_port
        if node == self.b:
            return self.b_port
        raise KeyError(f"{node} is not an end of link {self.name}")

    def hop_from(self, node: str) -> Hop:
        if node == self.a:
            return Hop(self.a, self.a_port, self.b, self.b_port, self.index)
        if node == self.b:
            return Hop(self.b, self.b_port, self.a, self.a_port, self.index)
        raise KeyError(f"{node} is not an end of link {self.name}")

    @property
    def name(self) -> str:
        suffix = f"#{self.parallel}" if self.parallel > 1 else ""
        return f"{self.a}-{self.b}{suffix}"


@dataclass(frozen=True)
class Hop:
    """One direction of a link: leaves `src` on `src_port`, enters `dst` on `dst_port`."""
    src: str
    src_port: int
    dst: str
    dst_port: int
    link: int                 # Link.index

    @property
    def egress(self) -> tuple[str, int]:
        return (self.src, self.src_port)


@dataclass(frozen=True)
class Path:
    """A switch-level path from a source leaf to a destination leaf."""
    hops: tuple[Hop, ...]

    @property
    def nodes(self) -> tuple[str, ...]:
        if not self.hops:
            return ()
        return (self.hops[0].src, *(h.dst for h in self.hops))

    @property
    def links(self) -> frozenset[int]:
        return frozenset(h.link for h in self.hops)

    def __str__(self) -> str:
        return " > ".join(f"{h.src}:{h.src_port}" for h in self.hops) + (
            f" > {self.hops[-1].dst}" if self.hops else "")


def intf_name(node: str, port: int) -> str:
    """Mininet's default interface name, so Mininet port numbers equal P4 port numbers."""
    return f"{node}-eth{port}"


def _leaf_addr(leaf_index: int, last: int) -> str:
    return f"10.{leaf_index >> 8}.{leaf_index & 0xFF}.{last}"


def leaf_subnet(leaf_index: int) -> str:
    return _leaf_addr(leaf_index, 0) + "/24"


def host_mac(ip: str) -> str:
    """02:00 followed by the host's IPv4 address: unique, locally administered, readable."""
    return "02:00:" + ":".join(f"{b:02x}" for b in ipaddress.IPv4Address(ip).packed)


def switch_port_mac(device_id: int, port: int) -> str:
    raw = bytes([0x02, 0x01]) + device_id.to_bytes(2, "big") + port.to_bytes(2, "big")
    return ":".join(f"{b:02x}" for b in raw)


@dataclass
class Topology:
    name: str
    kind: str
    params: dict
    switches: dict[str, Switch] = field(default_factory=dict)
    hosts: dict[str, Host] = field(default_factory=dict)
    links: list[Link] = field(default_factory=list)

    # ---- lookups -------------------------------------------------------------------------
    def node(self, name: str) -> Switch | Host:
        if name in self.switches:
            return self.switches[name]
        if name in self.hosts:
            return self.hosts[name]
        raise KeyError(f"unknown node {name!r} in topology {self.name}")

    def host(self, name: str) -> Host:
        try:
            return self.hosts[name]
        except KeyError:
            raise KeyError(f"unknown host {name!r} in topology {self.name}") from None

    def host_by_rank(self, rank: int) -> Host:
        if not 0 <= rank < len(self.hosts):
            raise KeyError(f"rank {rank} out of range: {self.name} has {len(self.hosts)} hosts")
        return self._hosts_by_rank[rank]

    def host_by_ip(self, ip: str) -> Host:
        try:
            return self._hosts_by_ip[ip]
        except KeyError:
            raise KeyError(f"no host has address {ip} in topology {self.name}") from None

    def switch(self, name: str) -> Switch:
        try:
            return self.switches[name]
        except KeyError:
            raise KeyError(f"unknown switch {name!r} in topology {self.name}") from None

    def tier(self, tier: str) -> list[Switch]:
        return [s for s in self.switches.values() if s.tier == tier]

    @property
    def leaves(self) -> list[Switch]:
        return self.tier("leaf")

    def hosts_of(self, leaf: str) -> list[Host]:
        return self._hosts_by_leaf.get(leaf, [])

    def link(self, a: str, b: str, parallel: int = 1) -> Link:
        for lk in self._links_by_pair.get(frozenset((a, b)), ()):
            if lk.parallel == parallel:
                return lk
        raise KeyError(f"no link {a}-{b}" + (f" #{parallel}" if parallel > 1 else "")
                       + f" in topology {self.name}")

    def links_between(self, a: str, b: str) -> list[Link]:
        return list(self._links_by_pair.get(frozenset((a, b)), ()))

    def parse_link(self, text: str) -> Link:
        """`leaf1-spine2` or `leaf1-spine2#2` (the parallel cable number) as a Link."""
        ends, _, par = text.partition("#")
        a, sep, b = ends.partition("-")
        if not sep or not a or not b:
            raise KeyError(f"link {text!r}: expected NODE-NODE or NODE-NODE#N")
        if par and not par.isdigit():
            raise KeyError(f"link {text!r}: parallel number {par!r} is not an integer")
        return self.link(a, b, int(par) if par else 1)

    def ports(self, switch: str) -> dict[int, Link]:
        """Every port of a switch and the link on it."""
        return dict(self._ports[switch])

    def peer_mac(self, node: str, port: int) -> str:
        """The MAC at the far end of `node`'s `port` (a host's MAC, or the neighbour switch's
        port MAC): the destination MAC of a packet leaving there."""
        link = self._ports[node][port]
        peer = link.b if link.a == node else link.a
        if peer in self.hosts:
            return self.hosts[peer].mac
        return self.switches[peer].port_mac(link.port_of(peer))

    def links_of(self, node: str) -> list[Link]:
        return list(self._ports[node].values())

    def uplinks(self, switch: str) -> list[Link]:
        """Links to the next tier up, in port order (= spine order, then parallel number)."""
        level = self.switches[switch].level
        return [lk for _, lk in sorted(self._ports[switch].items())
                if self.node(lk.b).level > level and lk.a == switch]

    # ---- derived structures -------------------------------------------------------------
    @cached_property
    def _hosts_by_rank(self) -> list[Host]:
        return sorted(self.hosts.values(), key=lambda h: h.rank)

    @cached_property
    def _hosts_by_ip(self) -> dict[str, Host]:
        return {h.ip: h for h in self.hosts.values()}

    @cached_property
    def _hosts_by_leaf(self) -> dict[str, list[Host]]:
        out: dict[str, list[Host]] = {}
        for h in self._hosts_by_rank:
            out.setdefault(h.leaf, []).append(h)
        return out

    @cached_property
    def _links_by_pair(self) -> dict[frozenset, list[Link]]:
        out: dict[frozenset, list[Link]] = {}
        for lk in self.links:
            out.setdefault(frozenset((lk.a, lk.b)), []).append(lk)
        return out

    @cached_property
    def _ports(self) -> dict[str, dict[int, Link]]:
        out: dict[str, dict[int, Link]] = {n: {} for n in (*self.switches, *self.hosts)}
        for lk in self.links:
            out[lk.a][lk.a_port] = lk
            out[lk.b][lk.b_port] = lk
        return out

    def summary(self) -> str:
        tiers = ", ".join(f"{len(self.tier(t))} {t}" for t in ("leaf", "agg", "spine", "core")
                          if self.tier(t))
        return f"{self.name} ({self.kind}): {len(self.hosts)} hosts, {tiers}, {len(self.links)} links"


# ---- builders ---------------------------------------------------------------------------
class _Builder:
    def __init__(self, name: str, kind: str, params: dict, grpc_port_base: int) -> None:
        self.topo = Topology(name=name, kind=kind, params=params)
        self.grpc_port_base = grpc_port_base

    def switch(self, tier: str, index: int, pod: int | None = None) -> Switch:
        device_id = len(self.topo.switches) + 1
        sw = Switch(f"{tier}{index}", tier, index, device_id,
                    self.grpc_port_base + device_id, pod)
        self.topo.switches[sw.name] = sw
        return sw

    def host(self, leaf: Switch, slot: int) -> None:
        rank = len(self.topo.hosts)
        ip = _leaf_addr(leaf.index, slot)
        h = Host(f"h{rank + 1}", rank, ip, host_mac(ip), leaf.name, slot,
                 leaf.gateway_ip, leaf.port_mac(slot))
        self.topo.hosts[h.name] = h
        self.link(h.name, HOST_PORT, leaf.name, slot)

    def link(self, a: str, a_port: int, b: str, b_port: int, parallel: int = 1) -> None:
        self.topo.links.append(Link(len(self.topo.links), a, a_port, b, b_port, parallel))

    def done(self) -> Topology:
        for lk in self.topo.links:
            for end in (lk.a_intf, lk.b_intf):
                if len(end) > MAX_INTF_NAME:
                    raise TopologyError(f"{self.topo.name}: interface name {end!r} is longer "
                                        f"than {MAX_INTF_NAME} characters")
        return self.topo


def leaf_spine(leaves: int, spines: int, hosts_per_leaf: int, parallel_links: int = 1, *,
               name: str | None = None, grpc_port_base: int = DEFAULT_GRPC_PORT_BASE,
               link_mbps: float | None = None) -> Topology:
    """Leaf l: ports 1..H to its hosts, then H + (s-1)*P + p to spine s (cable p).
    Spine s: port (l-1)*P + p to leaf l (cable p)."""
    params = {"leaves": leaves, "spines": spines, "hosts_per_leaf": hosts_per_leaf,
              "parallel_links": parallel_links, "grpc_port_base": grpc_port_base,
              "link_mbps": link_mbps}
    _check("leaf-spine", params, name or "leaf-spine")
    b = _Builder(name or f"leafspine-{leaves}x{spines}", "leaf-spine", params, grpc_port_base)
    leaf_sw = [b.switch("leaf", i) for i in range(1, leaves + 1)]
    spine_sw = [b.switch("spine", i) for i in range(1, spines + 1)]
    for leaf in leaf_sw:
        for slot in range(1, hosts_per_leaf + 1):
            b.host(leaf, slot)
    for leaf in leaf_sw:
        for spine in spine_sw:
            for p in range(1, parallel_links + 1):
                b.link(leaf.name, hosts_per_leaf + (spine.index - 1) * parallel_links + p,
                       spine.name, (leaf.index - 1) * parallel_links + p, p)
    return b.done()


def fat_tree(k: int, *, name: str | None = None,
             grpc_port_base: int = DEFAULT_GRPC_PORT_BASE,
             link_mbps: float | None = None) -> Topology:
    """k pods of k/2 leaves (edge) and k/2 aggs; (k/2)^2 cores; k/2 hosts per leaf.
    Leaf: ports 1..k/2 hosts, k/2 + a to agg a of its pod. Agg: port e to leaf e of its pod,
    k/2 + c to core (a-1)*k/2 + c. Core: port p+1 to the agg of pod p it reaches."""
    params = {"k": k, "grpc_port_base": grpc_port_base, "link_mbps": link_mbps}
    _check("fat-tree", params, name or "fat-tree")
    half = k // 2
    b = _Builder(name or f"fattree-k{k}", "fat-tree", params, grpc_port_base)
    leaves = [[b.switch("leaf", p * half + e + 1, p) for e in range(half)] for p in range(k)]
    aggs = [[b.switch("agg", p * half + a + 1, p) for a in range(half)] for p in range(k)]
    cores = [b.switch("core", i + 1) for i in range(half * half)]
    for pod in leaves:
        for leaf in pod:
            for slot in range(1, half + 1):
                b.host(leaf, slot)
    for p in range(k):
        for e, leaf in enumerate(leaves[p]):
            for a, agg in enumerate(aggs[p]):
                b.link(leaf.name, half + a + 1, agg.name, e + 1)
    for p in range(k):
        for a, agg in enumerate(aggs[p]):
            for c in range(half):
                core = cores[a * half + c]
                b.link(agg.name, half + c + 1, core.name, p + 1)
    return b.done()


# ---- descriptions (YAML) -----------------------------------------------------------------
# One JSON Schema per kind. `x-message` is what a value failing the property's checks is told;
# `x-<keyword>` overrides it for one failing keyword (e.g. a maximum).
_MAX_K = int((2 * MAX_LEAVES) ** 0.5) // 2 * 2      # the largest even k with k*k/2 leaves allowed
_POSITIVE = {"type": "integer", "minimum": 1, "x-message": "must be a positive integer"}
_COMMON_PROPS = {
    "kind": {"enum": list(KINDS)},
    "name": {"type": "string", "minLength": 1, "x-message": "must be a non-empty string"},
    "grpc_port_base": {"type": "integer", "minimum": 1024, "maximum": 60000,
                       "x-message": "must be an integer in 1024..60000"},
    "link_mbps": {"anyOf": [{"type": "null"}, {"type": "number", "exclusiveMinimum": 0}],
                  "x-message": "must be a positive number or null"},
}
SCHEMAS = {
    "leaf-spine": {
        "type": "object",
        "required": ["leaves", "spines", "hosts_per_leaf"],
        "additionalProperties": False,
        "properties": {
            **_COMMON_PROPS,
            "leaves": {**_POSITIVE, "maximum": MAX_LEAVES, "x-maximum": f"at most {MAX_LEAVES}"},
            "spines": _POSITIVE,
            "hosts_per_leaf": {**_POSITIVE, "maximum": MAX_HOSTS_PER_LEAF,
                               "x-maximum": f"at most {MAX_HOSTS_PER_LEAF}"},
            "parallel_links": _POSITIVE,
        },
    },
    "fat-tree": {
        "type": "object",
        "required": ["k"],
        "additionalProperties": False,
        "properties": {
            **_COMMON_PROPS,
            "k": {"type": "integer", "minimum": 2, "multipleOf": 2,
                  "x-message": "must be an even integer >= 2",
                  "maximum": _MAX_K, "x-maximum": f"at most {_MAX_K} ({MAX_LEAVES} leaves)"},
        },
    },
}
_VALIDATORS = {kind: jsonschema.Draft202012Validator(schema) for kind, schema in SCHEMAS.items()}


def _check(kind: str, data: dict, src: str) -> None:
    """Validate a description of `kind`; the first problem, in field order, as TopologyError."""
    props = SCHEMAS[kind]["properties"]
    order = {key: i for i, key in enumerate(props)}
    errors = sorted(_VALIDATORS[kind].iter_errors(data),
                    key=lambda e: order.get(e.path[0] if e.path else "", -1))
    if not errors:
        return
    err = errors[0]
    if err.validator == "required":
        field = err.message.split("'")[1]
        raise TopologyError(f"{src}: {field}: required for kind {kind}")
    if err.validator == "additionalProperties":
        field = sorted(set(data) - set(props))[0]
        raise TopologyError(f"{src}: {field}: unknown field for kind {kind} "
                            f"(allowed: {', '.join(sorted(props))})")
    field = err.path[0]
    rule = props[field]
    message = rule.get(f"x-{err.validator}", rule.get("x-message", err.message))
    raise TopologyError(f"{src}: {field}: {message}, got {data[field]!r}")


def from_dict(data, source: str = "<dict>") -> Topology:
    """Build a topology from a parsed description; errors name `source` and the field."""
    if not isinstance(data, dict):
        raise TopologyError(f"{source}: expected a mapping at the top level, "
                            f"got {type(data).__name__}")
    kind = data.get("kind")
    if kind not in KINDS:
        raise TopologyError(f"{source}: kind: must be one of {', '.join(KINDS)}, got {kind!r}")
    _check(kind, data, source)
    name = data.get("name", pathlib.Path(source).stem if source != "<dict>" else None)
    common = {"name": name, "grpc_port_base": data.get("grpc_port_base", DEFAULT_GRPC_PORT_BASE),
              "link_mbps": data.get("link_mbps")}
    if kind == "leaf-spine":
        return leaf_spine(data["leaves"], data["spines"], data["hosts_per_leaf"],
                          data.get("parallel_links", 1), **common)
    return fat_tree(data["k"], **common)


def load(path: str | pathlib.Path) -> Topology:
    """Read a topology YAML file (see controller/topologies/)."""
    path = pathlib.Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise TopologyError(f"{path.name}: cannot read: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        raise TopologyError(f"{path.name}{where}: not valid YAML: "
                            f"{getattr(exc, 'problem', exc)}") from None
    return from_dict(data, path.name)
