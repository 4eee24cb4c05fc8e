"""Ethereal: singlepath load balancing for collective flows (Addanki et al., arXiv 2407.00550).

Each sending rank, on flow arrival and with no load feedback:
  1. groups the flows that leave its rack by destination leaf (ToR);
  2. takes `good` = the paths to that leaf not marked failed, s = |good|, n flows, r = n mod s;
  3. sends n - r whole flows round-robin over `good` (path and ToR order shuffled with the
     rank as seed);
  4. splits each of the r left-over flows into s/gcd(r, s) equal pieces that continue the
     round-robin, so every path carries exactly n/s flows' worth of bytes;
  5. pins every (sub-)flow to its path for its life, here by the UDP source port that the
     switches' ECMP hash maps onto that path (plus a pin entry on any hop the hash cannot be
     steered at);
  6. on a retransmission timeout marks the path failed for that ToR; the stalled sub-flow
     re-picks another path.

Deviations (documented in controller/README.md): flows of one ToR with different sizes are
balanced in separate groups of equal size; pieces are whole packets (a flow of fewer packets
than pieces gets fewer pieces); a re-picked sub-flow takes the good path this rank loaded least.
"""
from __future__ import annotations

import math
import random
from collections import defaultdict
from dataclasses import dataclass

from fabricmodel import hashing, rocev2
from fabricmodel.loads import add_path
from fabricmodel.routing import Routing
from fabricmodel.topology import Path, Topology

DEFAULT_MTU = 1024            # RoCE payload bytes per packet


@dataclass(frozen=True)
class Flow:
    src: str                  # host names
    dst: str
    bytes: int
    dst_qp: int = 0           # for the host split descriptor (ebpf flowsplit)
    base_psn: int = 0

    @property
    def connection_sport(self) -> int:
        """The fixed source port a NIC derives for this QP (the hash-ECMP baseline)."""
        return hashing.connection_sport(self.src, self.dst, self.dst_qp)


@dataclass(frozen=True)
class PinEntry:
    """Send packets of this 5-tuple out of `port` on `switch` instead of hashing."""
    switch: str
    src_ip: str
    dst_ip: str
    sport: int
    dport: int
    port: int
    proto: int = rocev2.UDP


@dataclass(frozen=True)
class SubFlow:
    flow: Flow
    index: int                # piece number within the flow
    pieces: int
    offset: int               # bytes from the start of the flow
    bytes: int
    packets: int              # packets of `mtu` payload bytes (the last may be shorter)
    path: Path | None         # None when source and destination share a leaf
    sport: int
    pins: tuple[PinEntry, ...] = ()


@dataclass(frozen=True)
class SplitDescriptor:
    """What `ebpf/flowsplit` needs: packet i of the flow (from base_psn) uses
    sports[(i - base_psn) // pkts_per_subflow]."""
    src: str
    dst_ip: str
    dst_qp: int
    base_psn: int
    pkts_per_subflow: int
    sports: tuple[int, ...]


class EtherealRank:
    """The per-rank algorithm a host runs on flow arrival (it needs no other rank's state)."""

    def __init__(self, topo: Topology, host: str, *, routing: Routing | None = None,
                 seed: int | None = None, mtu: int = DEFAULT_MTU,
                 dport: int = rocev2.ROCEV2_PORT, pin_all: bool = False) -> None:
        if mtu < 1:
            raise ValueError(f"mtu must be positive, got {mtu}")
        self.topo = topo
        self.host = topo.host(host)
        self.routing = routing or Routing(topo)
        self.rng = random.Random(self.host.rank if seed is None else seed)
        self.mtu = mtu
        self.dport = dport
        self.pin_all = pin_all
        self.failed: dict[str, set[Path]] = defaultdict(set)
        self._order: dict[str, list[Path]] = {}
        self._load: dict[str, dict[Path, int]] = defaultdict(lambda: defaultdict(int))
        self._sports: dict[str, dict[int, Path]] = defaultdict(dict)

    # ---- path bookkeeping ---------------------------------------------------------------
    def good_paths(self, dst_leaf: str) -> list[Path]:
        """This rank's shuffled order of the paths to `dst_leaf` that are not marked failed."""
        if dst_leaf not in self._order:
            order = list(self.routing.paths(self.host.leaf, dst_leaf))
            self.rng.shuffle(order)
            self._order[dst_leaf] = order
        return [p for p in self._order[dst_leaf] if p not in self.failed[dst_leaf]]

    def mark_failed(self, dst_leaf: str, path: Path) -> None:
        self.failed[dst_leaf].add(path)

    # ---- planning -----------------------------------------------------------------------
    def plan(self, flows: list[Flow]) -> list[SubFlow]:
        """Split and pin the flows that arrive together (one batching window)."""
        for f in flows:
            self._check_flow(f)
        out: list[SubFlow] = []
        groups: dict[str, dict[int, list[Flow]]] = defaultdict(lambda: defaultdict(list))
        for f in flows:
            dst_leaf = self.topo.host(f.dst).leaf
            if dst_leaf == self.host.leaf:
                out.append(self._realize(f, 0, 1, (0, f.bytes, self._packets(f.bytes)), None))
            else:
                groups[dst_leaf][f.bytes].append(f)
        tors = sorted(groups)
        self.rng.shuffle(tors)
        for tor in tors:
            good = self.good_paths(tor)
            if not good:
                raise RuntimeError(f"{self.host.name}: no live path from {self.host.leaf} to {tor}")
            self._load[tor] = defaultdict(int)
            for size in sorted(groups[tor]):
                out.extend(self._balance(groups[tor][size], good, tor))
        return out

    def _check_flow(self, f: Flow) -> None:
        if f.src != self.host.name:
            raise ValueError(f"flow from {f.src} given to the planner of {self.host.name}")
        self.topo.host(f.dst)
        if f.bytes < 1:
            raise ValueError(f"flow {f.src}->{f.dst}: bytes must be positive, got {f.bytes}")

    def _balance(self, flows: list[Flow], good: list[Path], tor: str) -> list[SubFlow]:
        s, n = len(good), len(flows)
        r = n % s
        out, turn = [], 0
        for f in flows[: n - r]:
            out.append(self._assign(f, 0, 1, (0, f.bytes, self._packets(f.bytes)),
                                    good[turn % s], tor))
            turn += 1
        wanted = s // math.gcd(r, s) if r else 1
        for f in flows[n - r:]:
            pieces = self._pieces(f.bytes, wanted)
            for idx, piece in enumerate(pieces):
                out.append(self._assign(f, idx, len(pieces), piece, good[turn % s], tor))
                turn += 1
        return out

    def _packets(self, size: int) -> int:
        return -(-size // self.mtu)

    def _pieces(self, size: int, pieces: int) -> list[tuple[int, int, int]]:
        """(offset, bytes, packets) of up to `pieces` runs of whole packets, equal but the last."""
        packets = self._packets(size)
        per = -(-packets // min(pieces, packets))
        out = []
        for start in range(0, packets, per):
            offset = start * self.mtu
            out.append((offset, min(size, (start + per) * self.mtu) - offset,
                        min(per, packets - start)))
        return out

    def _assign(self, f: Flow, idx: int, pieces: int, piece: tuple[int, int, int],
                path: Path, tor: str) -> SubFlow:
        self._load[tor][path] += piece[1]
        return self._realize(f, idx, pieces, piece, path)

    # ---- realisation: source port and pins ----------------------------------------------
    def _realize(self, f: Flow, idx: int, pieces: int, piece: tuple[int, int, int],
                 path: Path | None) -> SubFlow:
        dst = self.topo.host(f.dst)
        if path is None:
            return SubFlow(f, idx, pieces, *piece, None, f.connection_sport)
        choices = []
        for hop in path.hops:
            group = self.routing.group(hop.src, dst.leaf)
            if len(group) > 1:
                choices.append((hop, len(group), group.index(hop)))
        used = self._sports[dst.ip]
        taken = {p for p, other in used.items() if other != path}
        sport, steered = self._search(dst.ip, choices, taken)
        used[sport] = path
        pins = tuple(PinEntry(hop.src, self.host.ip, dst.ip, sport, self.dport, hop.src_port)
                     for k, (hop, _, _) in enumerate(choices)
                     if self.pin_all or k >= steered)
        return SubFlow(f, idx, pieces, *piece, path, sport, pins)

    def _search(self, dst_ip: str, choices, taken) -> tuple[int, int]:
        """A source port steering the longest possible prefix of the hops; how many it steers.
        Switches apply the same hash, so groups of equal size at two hops can conflict."""
        for steered in range(len(choices), 0, -1):
            want = [(size, member) for _, size, member in choices[:steered]]
            if _compatible(want):
                try:
                    return hashing.sport_for_members(self.host.ip, dst_ip, self.dport, want,
                                                     taken), steered
                except ValueError:
                    continue
        return next(p for p in range(rocev2.SPORT_MIN, rocev2.SPORT_MAX + 1)
                    if p not in taken), 0

    # ---- failures -----------------------------------------------------------------------
    def on_timeout(self, sub: SubFlow) -> SubFlow:
        """A retransmission timeout: the path is failed for that ToR; re-pick another."""
        if sub.path is None:
            raise ValueError("a rack-local flow has no path to re-pick")
        tor = self.topo.host(sub.flow.dst).leaf
        self.mark_failed(tor, sub.path)
        load = self._load[tor]
        load[sub.path] -= sub.bytes
        good = self.good_paths(tor)
        if not good:
            # Timeouts on every path are not evidence of as many failures (congestion drops
            # on a lossy fabric also time out): keep only this latest mark and go on.
            self.failed[tor] = {sub.path}
            good = self.good_paths(tor) or [sub.path]
        best = min(good, key=lambda p: load[p])
        load[best] += sub.bytes
        return self._realize(sub.flow, sub.index, sub.pieces,
                             (sub.offset, sub.bytes, sub.packets), best)


def _compatible(choices: list[tuple[int, int]]) -> bool:
    """Whether some integer has residue m modulo g for every (g, m) (Chinese remainders),
    with a modulus small enough that the 16,384 RoCE source ports contain several such ports."""
    for i, (g1, m1) in enumerate(choices):
        for g2, m2 in choices[i + 1:]:
            if m1 % math.gcd(g1, g2) != m2 % math.gcd(g1, g2):
                return False
    return math.lcm(*(g for g, _ in choices)) <= 4096 if choices else True


def split_descriptors(subflows: list[SubFlow], topo: Topology) -> list[SplitDescriptor]:
    """One descriptor per flow that leaves its rack, source ports in piece order."""
    by_flow: dict[Flow, list[SubFlow]] = defaultdict(list)
    for sub in subflows:
        if sub.path is not None:
            by_flow[sub.flow].append(sub)
    out = []
    for f, subs in by_flow.items():
        subs.sort(key=lambda s: s.index)
        out.append(SplitDescriptor(f.src, topo.host(f.dst).ip, f.dst_qp, f.base_psn,
                                   subs[0].packets, tuple(s.sport for s in subs)))
    return out


@dataclass
class StepPlan:
    """The controller's whole-step view: every rank's plan, merged."""
    subflows: list[SubFlow]
    loads: dict[tuple[str, int], float]
    pins: list[PinEntry]
    descriptors: list[SplitDescriptor]


def plan_step(topo: Topology, flows: list[Flow], *, failed=(), routing: Routing | None = None,
              mtu: int = DEFAULT_MTU, pin_all: bool = False) -> StepPlan:
    """Run every sending rank's Ethereal on its flows of one collective step."""
    routing = routing or Routing(topo, failed)
    by_src: dict[str, list[Flow]] = defaultdict(list)
    for f in flows:
        by_src[topo.host(f.src).name].append(f)
    subflows: list[SubFlow] = []
    for src in sorted(by_src, key=lambda h: topo.host(h).rank):
        rank = EtherealRank(topo, src, routing=routing, mtu=mtu, pin_all=pin_all)
        subflows.extend(rank.plan(by_src[src]))
    loads: dict[tuple[str, int], float] = {}
    for sub in subflows:
        add_path(loads, topo, sub.flow.src, sub.flow.dst, sub.path.hops if sub.path else (),
                 sub.bytes)
    pins = list(dict.fromkeys(p for sub in subflows for p in sub.pins))
    return StepPlan(subflows, loads, pins, split_descriptors(subflows, topo))
