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
import struct
import weakref
import zlib
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

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
    """The per-rank algorithm a host runs on flow arrival (it needs no other rank's state).

    `plan_ranks` plans a batch of flows given as arrays (destination ranks and sizes) and
    returns them as columns (`RankPlan`); `plan` is the same for `Flow` objects and returns
    `SubFlow`s. Per destination leaf the round-robin is array arithmetic; a source port is a
    table lookup: the switches' crc32 is affine, so crc(src, dst, sport) is crc(src, dst)
    xor a per-port term, and for a power-of-two group the member is a few bits of that xor
    (the switch's salt says which), so one path's hashed hops are one mask and value over
    the CRC (`_PortTables`)."""

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
        self._hosts = _hosts(topo)
        self._ports = _PortTables.get()
        self._base = self._ports.base(self._hosts.ip_int[self.host.rank], dport)
        # the paths to each leaf get ids when the leaf is first planned for (routing order,
        # from _tor_base[tor]); loads and steering are per id
        self.paths: list[Path] = []
        self._tor_base: dict[str, int] = {}
        self._tor_ids: dict[str, np.ndarray] = {}   # ids in this rank's shuffled order
        self._steer: list[_Steer] = []
        self._steer_parts: list[np.ndarray] = []    # per destination leaf: (mask, value,
        self._steer_cols = np.zeros((4, 0), dtype=np.int64)  # steered, hashed hops) of its
        #                                                       paths, by id
        self._load = np.zeros(0, dtype=np.int64)
        # source ports given per destination rank: the first in arrays, any more in dicts
        n = len(topo.hosts)
        self._first_sport = np.full(n, -1, dtype=np.int64)
        self._first_path = np.full(n, -1, dtype=np.int64)
        self._more_sports: dict[int, dict[int, int]] = {}

    # ---- path bookkeeping ---------------------------------------------------------------
    def good_paths(self, dst_leaf: str) -> list[Path]:
        """This rank's shuffled order of the paths to `dst_leaf` that are not marked failed."""
        return [self.paths[i] for i in self._good_ids(dst_leaf)]

    def _good_ids(self, dst_leaf: str) -> np.ndarray:
        if dst_leaf not in self._tor_ids:
            paths = self.routing.paths(self.host.leaf, dst_leaf)
            perm = _shuffled(self.rng, len(paths))
            base = self._tor_base[dst_leaf] = len(self.paths)
            self.paths.extend(paths)
            steer, cols = _route_cache(self.routing).steering(self.routing, self.host.leaf,
                                                              dst_leaf)
            self._steer.extend(steer)
            self._steer_parts.append(cols)
            self._tor_ids[dst_leaf] = np.array(perm, dtype=np.int64) + base
        failed = self.failed.get(dst_leaf)
        ids = self._tor_ids[dst_leaf]
        if not failed:
            return ids
        return ids[[self.paths[i] not in failed for i in ids]]

    def _path_id(self, path: Path, tor: str) -> int:
        return self._tor_base[tor] + self.routing.paths(self.host.leaf, tor).index(path)

    def mark_failed(self, dst_leaf: str, path: Path) -> None:
        self.failed[dst_leaf].add(path)

    # ---- planning -----------------------------------------------------------------------
    def plan(self, flows: list[Flow]) -> list[SubFlow]:
        """Split and pin the flows that arrive together (one batching window)."""
        for f in flows:
            self._check_flow(f)
        dsts = np.fromiter((self.topo.hosts[f.dst].rank for f in flows), dtype=np.int64,
                           count=len(flows))
        sizes = np.fromiter((f.bytes for f in flows), dtype=np.int64, count=len(flows))
        plan = self._plan(dsts, sizes, lambda i: flows[i].connection_sport)
        return [plan.subflow(i, flows[plan.flow[i]]) for i in range(len(plan))]

    def plan_ranks(self, dsts, sizes, dst_qp: int = 0) -> RankPlan:
        """`plan` for flows to host ranks `dsts` of `sizes` bytes (NIC queue pair `dst_qp`),
        as columns: what a simulator or a NIC driver needs, without an object per flow."""
        dsts = np.asarray(dsts, dtype=np.int64)
        sizes = np.asarray(sizes, dtype=np.int64)
        if dsts.shape != sizes.shape or dsts.ndim != 1:
            raise ValueError("dsts and sizes must be equal-length sequences")
        n = len(self.topo.hosts)
        if len(dsts) and (dsts.min() < 0 or dsts.max() >= n):
            raise ValueError(f"destination ranks must be in 0..{n - 1}")
        if len(sizes) and sizes.min() < 1:
            bad = int(np.flatnonzero(sizes < 1)[0])
            raise ValueError(f"flow {self.host.name}->{self._hosts.names[dsts[bad]]}: bytes "
                             f"must be positive, got {sizes[bad]}")
        names = self._hosts.names
        src = self.host.name
        return self._plan(dsts, sizes, lambda i: hashing.connection_sport(
            src, names[dsts[i]], dst_qp), dst_qp)

    def _check_flow(self, f: Flow) -> None:
        if f.src != self.host.name:
            raise ValueError(f"flow from {f.src} given to the planner of {self.host.name}")
        self.topo.host(f.dst)
        if f.bytes < 1:
            raise ValueError(f"flow {f.src}->{f.dst}: bytes must be positive, got {f.bytes}")

    def _plan(self, dsts: np.ndarray, sizes: np.ndarray, local_sport, dst_qp: int = 0) -> RankPlan:
        """Rack-local flows first (in the order given), then per destination leaf in this
        rank's shuffled order, per size ascending: whole flows round-robin over the good
        paths, then the left-over flows' pieces continuing the round-robin."""
        hosts = self._hosts
        leaf = hosts.leaf[dsts]
        mine = hosts.leaf_index[self.host.leaf]
        local = np.flatnonzero(leaf == mine)
        cols = _Columns()
        cols.whole(local, sizes[local], self._packets(sizes[local]), -1)
        remote = np.flatnonzero(leaf != mine)
        tors = sorted({hosts.leaf_names[x] for x in np.unique(leaf[remote])})
        self.rng.shuffle(tors)
        goods = []
        for tor in tors:
            good = self._good_ids(tor)
            if not len(good):
                raise RuntimeError(f"{self.host.name}: no live path from {self.host.leaf} to {tor}")
            goods.append(good)
        if len(self._load) < len(self.paths):
            self._load = np.concatenate((self._load, np.zeros(len(self.paths) - len(self._load),
                                                              dtype=np.int64)))
        if tors:
            self._reset_loads(tors)
            slot = np.full(len(hosts.leaf_names), -1, dtype=np.int64)
            slot[[hosts.leaf_index[t] for t in tors]] = np.arange(len(tors))
            tor_slot = slot[leaf[remote]]
            order = np.lexsort((remote, sizes[remote], tor_slot))
            rows, rslot, rsize = remote[order], tor_slot[order], sizes[remote][order]
            cuts = np.flatnonzero((np.diff(rslot) != 0) | (np.diff(rsize) != 0)) + 1
            starts = np.concatenate(([0], cuts))
            counts = np.diff(np.concatenate((starts, [len(rows)])))
            width = np.array([len(g) for g in goods], dtype=np.int64)
            s_of = width[rslot[starts]]
            left = counts % s_of
            turn = np.arange(len(rows)) - np.repeat(starts, counts)
            table = np.full((len(goods), int(width.max())), -1, dtype=np.int64)
            for k, g in enumerate(goods):
                table[k, :len(g)] = g
            path = table[rslot, turn % width[rslot]]
            if not left.any():
                cols.whole(rows, rsize, self._packets(rsize), path)
            else:
                for a, c, r in zip(starts, counts, left, strict=True):
                    w = slice(a, a + c - r)
                    cols.whole(rows[w], rsize[w], self._packets(rsize[w]), path[w])
                    if r:
                        self._leftovers(cols, rows[a + c - r: a + c], int(rsize[a]),
                                        goods[rslot[a]], int(c - r))
        plan = cols.done(self, dsts, sizes, dst_qp)
        if tors:
            np.add.at(self._load, plan.path[len(local):], plan.bytes[len(local):])
        self._ports_for(plan, local_sport, len(local))
        return plan

    def _leftovers(self, cols: _Columns, rows: np.ndarray, size: int, good: np.ndarray,
                   turn: int) -> None:
        """The r flows left after whole rounds (all of `size` bytes): s/gcd(r, s) pieces
        each, continuing the turn."""
        s, r = len(good), len(rows)
        pieces = np.array(self._pieces(size, s // math.gcd(r, s)), dtype=np.int64)
        offset, nbytes, packets = pieces[:, 0], pieces[:, 1], pieces[:, 2]
        k = len(offset)
        cols.add(np.repeat(rows, k), np.tile(np.arange(k), r), np.full(r * k, k),
                 np.tile(offset, r), np.tile(nbytes, r), np.tile(packets, r),
                 good[(turn + np.arange(r * k)) % s])

    def _reset_loads(self, tors: list[str]) -> None:
        """A new arrival balances afresh: forget what earlier ones put on these leaves' paths."""
        for tor in tors:
            self._load[self._tor_ids[tor]] = 0

    def _packets(self, size):
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

    # ---- realisation: source port and pins ----------------------------------------------
    def _ports_for(self, plan: RankPlan, local_sport, first_remote: int) -> None:
        """Every sub-flow's source port: rack-local ones the connection's, the others the
        lowest port that steers the longest prefix of their path's hashed hops, not used by
        this rank toward the same host on another path."""
        for i in range(first_remote):
            plan.sport[i] = local_sport(int(plan.flow[i]))
        rows = np.arange(first_remote, len(plan))
        if not len(rows):
            return
        dst, pid = plan.dst[rows], plan.path[rows]
        if self._steer_cols.shape[1] != len(self._steer):
            self._steer_cols = np.concatenate(self._steer_parts, axis=1)
        steer_mask, steer_value = self._steer_cols[0][pid], self._steer_cols[1][pid]
        # a table lookup serves a destination this rank has given no port yet and that this
        # arrival sends to once; the rest take the general search, in plan order
        once = np.bincount(dst, minlength=len(self._first_sport))[dst] == 1
        fast = once & (self._first_sport[dst] < 0) & (steer_mask >= 0)
        port = self._ports.lowest(self._base ^ self._hosts.crc[dst[fast]], steer_mask[fast],
                                  steer_value[fast])
        found = port >= 0
        done = rows[fast][found]
        plan.sport[done] = port[found]
        plan.steered[done] = self._steer_cols[2][plan.path[done]]
        self._first_sport[plan.dst[done]] = port[found]
        self._first_path[plan.dst[done]] = plan.path[done]
        # the rest in plan order: the table's lowest port is `_search`'s answer unless this
        # rank gave it toward that host on another path (a halving-doubling step's pieces
        # all go to one host: this spares a search per piece)
        rest = np.flatnonzero(np.isin(rows, done, invert=True))
        lowest = np.full(len(rest), -1, dtype=np.int64)
        table = steer_mask[rest] >= 0
        lowest[table] = self._ports.lowest(self._base ^ self._hosts.crc[dst[rest[table]]],
                                           steer_mask[rest[table]], steer_value[rest[table]])
        steered_of = self._steer_cols[2]
        for k, port in zip(rest.tolist(), lowest.tolist(), strict=True):
            i, d, p = first_remote + k, int(dst[k]), int(pid[k])
            if port >= 0 and not self._given_elsewhere(d, port, p):
                sport, steered = port, int(steered_of[p])
            else:
                sport, steered = self._search(d, p)
            plan.sport[i], plan.steered[i] = sport, steered
            self._use(d, sport, p)

    def _given_elsewhere(self, dst: int, sport: int, pid: int) -> bool:
        """`sport in self._taken(dst, pid)`, without building the set."""
        if self._first_sport[dst] == sport:
            return self._first_path[dst] != pid
        return self._more_sports.get(dst, {}).get(sport, pid) != pid

    def _taken(self, dst: int, pid: int) -> set[int]:
        """Ports this rank gave toward host `dst` on paths other than `pid`."""
        taken = set()
        if self._first_sport[dst] >= 0 and self._first_path[dst] != pid:
            taken.add(int(self._first_sport[dst]))
        for sport, other in self._more_sports.get(dst, {}).items():
            if other != pid:
                taken.add(sport)
        return taken

    def _use(self, dst: int, sport: int, pid: int) -> None:
        if self._first_sport[dst] < 0 or self._first_sport[dst] == sport:
            self._first_sport[dst], self._first_path[dst] = sport, pid
        else:
            self._more_sports.setdefault(dst, {})[sport] = pid

    def _search(self, dst: int, pid: int) -> tuple[int, int]:
        """A source port steering the longest possible prefix of the hops; how many it steers.
        Two hops whose salts read overlapping CRC bits can ask for different values of a
        shared bit: then no port steers both, and the later hop gets a pin."""
        taken = self._taken(dst, pid)
        steer = self._steer[pid]
        key = self._base ^ int(self._hosts.crc[dst])
        if steer.mask >= 0:
            # the longest consistent prefix is one condition on CRC bits: its ports, in order
            for port in self._ports.ports_for(key, steer.mask, steer.value):
                if port not in taken:
                    return port, steer.steered
        choices = steer.choices
        crc = self._ports.crcs(key)
        members = {}
        for steered in range(len(choices), 0, -1):
            ok = np.ones(len(crc), dtype=bool)
            for _, size, member, salt in choices[:steered]:
                if (size, salt) not in members:
                    members[size, salt] = _windows(crc, salt) % size
                ok &= members[size, salt] == member
            for k in np.flatnonzero(ok):
                if rocev2.SPORT_MIN + int(k) not in taken:
                    return rocev2.SPORT_MIN + int(k), steered
        return next(p for p in range(rocev2.SPORT_MIN, rocev2.SPORT_MAX + 1)
                    if p not in taken), 0

    def _pins(self, dst: int, pid: int, sport: int, steered: int) -> tuple[PinEntry, ...]:
        dst_ip = self._hosts.ips[dst]
        return tuple(PinEntry(hop.src, self.host.ip, dst_ip, sport, self.dport, hop.src_port)
                     for k, (hop, _, _, _) in enumerate(self._steer[pid].choices)
                     if self.pin_all or k >= steered)

    # ---- failures -----------------------------------------------------------------------
    def on_timeout(self, sub: SubFlow) -> SubFlow:
        """A retransmission timeout: the path is failed for that ToR; re-pick another."""
        if sub.path is None:
            raise ValueError("a rack-local flow has no path to re-pick")
        tor = self.topo.host(sub.flow.dst).leaf
        self.mark_failed(tor, sub.path)
        load = self._load
        stalled = self._path_id(sub.path, tor)
        load[stalled] -= sub.bytes
        good = self._good_ids(tor)
        if not len(good):
            # Timeouts on every path are not evidence of as many failures (congestion drops
            # on a lossy fabric also time out): keep only this latest mark and go on.
            self.failed[tor] = {sub.path}
            good = self._good_ids(tor)
            if not len(good):
                good = np.array([stalled])
        pid = int(good[np.argmin(load[good])])     # the first of the least loaded
        best = self.paths[pid]
        load[pid] += sub.bytes
        dst = self.topo.host(sub.flow.dst).rank
        sport, steered = self._search(dst, pid)
        self._use(dst, sport, pid)
        return SubFlow(sub.flow, sub.index, sub.pieces, sub.offset, sub.bytes, sub.packets, best,
                       sport, self._pins(dst, pid, sport, steered))


@dataclass
class RankPlan:
    """One arrival's sub-flows as columns, in plan order (numpy arrays of one row each)."""
    planner: EtherealRank
    flow: np.ndarray          # index of the flow in the arrival
    dst: np.ndarray           # destination host rank
    index: np.ndarray         # piece number within the flow, of `pieces`
    pieces: np.ndarray
    offset: np.ndarray
    bytes: np.ndarray
    packets: np.ndarray
    path: np.ndarray          # id in planner.paths; -1 when source and destination share a leaf
    sport: np.ndarray
    steered: np.ndarray       # hashed hops the port steers; the rest get pin entries
    flow_bytes: np.ndarray    # per flow of the arrival: its size
    dst_qp: int = 0

    def __len__(self) -> int:
        return len(self.flow)

    def pins(self, i: int) -> tuple[PinEntry, ...]:
        if self.path[i] < 0:
            return ()
        return self.planner._pins(int(self.dst[i]), int(self.path[i]), int(self.sport[i]),
                                  int(self.steered[i]))

    def pinned_rows(self) -> np.ndarray:
        """Rows that need pin entries."""
        p = self.planner
        if p.pin_all:
            return np.flatnonzero(self.path >= 0)
        remote = self.path >= 0
        if not remote.any():
            return np.flatnonzero(remote)
        hashed = p._steer_cols[3]          # current: _ports_for refreshed it for these rows
        return np.flatnonzero(remote & (self.steered < hashed[np.where(remote, self.path, 0)]))

    def subflow(self, i: int, flow: Flow | None = None) -> SubFlow:
        """Row i as a SubFlow (of `flow`, else of a Flow rebuilt from the row)."""
        p = self.planner
        if flow is None:
            flow = Flow(p.host.name, p._hosts.names[self.dst[i]],
                        int(self.flow_bytes[self.flow[i]]), dst_qp=self.dst_qp)
        path = p.paths[self.path[i]] if self.path[i] >= 0 else None
        return SubFlow(flow, int(self.index[i]), int(self.pieces[i]), int(self.offset[i]),
                       int(self.bytes[i]), int(self.packets[i]), path, int(self.sport[i]),
                       self.pins(i))


class _Columns:
    """RankPlan's columns while they are being built: whole flows in blocks, pieces one by one."""

    def __init__(self) -> None:
        self.blocks: list[tuple] = []

    def whole(self, rows, sizes, packets, path) -> None:
        n = len(rows)
        if n:
            zeros = np.zeros(n, dtype=np.int64)
            self.add(rows, zeros, zeros + 1, zeros, sizes, packets,
                     np.broadcast_to(np.asarray(path, dtype=np.int64), (n,)))

    def add(self, rows, index, pieces, offset, nbytes, packets, path) -> None:
        self.blocks.append((rows, index, pieces, offset, nbytes, packets, path))

    def done(self, planner: EtherealRank, dsts: np.ndarray, sizes: np.ndarray,
             dst_qp: int) -> RankPlan:
        if self.blocks:
            cols = [np.concatenate([b[k] for b in self.blocks]).astype(np.int64)
                    for k in range(7)]
        else:
            cols = [np.zeros(0, dtype=np.int64) for _ in range(7)]
        flow, index, pieces, offset, nbytes, packets, path = cols
        n = len(flow)
        return RankPlan(planner, flow, dsts[flow], index, pieces, offset, nbytes, packets, path,
                        np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), sizes, dst_qp)


@dataclass(frozen=True)
class _Steer:
    """How a source port steers one path: its hashed hops (hop, group size, member, salt),
    and the longest prefix of them one port can steer that is a condition on CRC bits (all
    groups powers of two, no bit asked for both values) as a mask and value; mask -1 when
    no such table lookup applies."""
    choices: tuple
    steered: int
    mask: int
    value: int


def _shuffled(rng: random.Random, n: int) -> list[int]:
    """`rng.shuffle(list(range(n)))`'s result with the same draws from `rng` (Fisher-Yates
    from the top, `_randbelow` by rejection on getrandbits), without a call per swap: shuffling
    every leaf's paths is most of an arrival's cost on large fabrics. tests/fabricmodel holds
    it to random.shuffle."""
    perm = list(range(n))
    bits = rng.getrandbits
    for i in range(n - 1, 0, -1):
        m = i + 1
        k = m.bit_length()
        j = bits(k)
        while j >= m:
            j = bits(k)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


class _RouteCache:
    """What every rank planning on one Routing shares: each path's steering, as objects and
    as columns (mask, value, steered, hashed hops) for the planner's arrays."""

    def __init__(self) -> None:
        self._steer: dict[tuple[str, str], tuple[list[_Steer], np.ndarray]] = {}

    def steering(self, routing: Routing, src_leaf: str,
                 tor: str) -> tuple[list[_Steer], np.ndarray]:
        key = (src_leaf, tor)
        if key not in self._steer:
            steer = [_steering(routing, p, tor) for p in routing.paths(src_leaf, tor)]
            cols = np.array([[st.mask for st in steer], [st.value for st in steer],
                             [st.steered for st in steer], [len(st.choices) for st in steer]],
                            dtype=np.int64).reshape(4, -1)
            self._steer[key] = (steer, cols)
        return self._steer[key]


_ROUTES: weakref.WeakKeyDictionary[Routing, _RouteCache] = weakref.WeakKeyDictionary()


def _route_cache(routing: Routing) -> _RouteCache:
    cache = _ROUTES.get(routing)
    if cache is None:
        cache = _ROUTES[routing] = _RouteCache()
    return cache


def _steering(routing: Routing, path: Path, tor: str) -> _Steer:
    choices = []
    for hop in path.hops:
        group = routing.group(hop.src, tor)
        if len(group) > 1:
            choices.append((hop, len(group), group.index(hop), hashing.switch_salt(hop.src)))
    if any(size & (size - 1) for _, size, _, _ in choices):
        return _Steer(tuple(choices), 0, -1, 0)       # a modulo that is no bit selection
    mask = value = 0
    for steered, (_, size, member, salt) in enumerate(choices):
        bits = _bits(size.bit_length() - 1, member, salt)
        if (value ^ bits[1]) & mask & bits[0]:
            return _Steer(tuple(choices), steered, mask, value)
        mask, value = mask | bits[0], value | bits[1]
    return _Steer(tuple(choices), len(choices), mask, value)


def _bits(k: int, member: int, salt: int) -> tuple[int, int]:
    """The CRC bits (mask, value) a switch with `salt` reads member `member` of 2^k from."""
    mask = value = 0
    for j in range(k):
        at = (salt + j) % 32
        mask |= 1 << at
        value |= (member >> j & 1) << at
    return mask, value


@dataclass(frozen=True)
class _Hosts:
    """Per topology: each host rank's name, IP, leaf index, and crc32 of its address's bytes."""
    names: list[str]
    ips: list[str]
    ip_int: np.ndarray
    leaf: np.ndarray
    leaf_names: list[str]
    leaf_index: dict[str, int]
    crc: np.ndarray


_HOSTS: dict[int, tuple[Topology, _Hosts]] = {}


def _hosts(topo: Topology) -> _Hosts:
    got = _HOSTS.get(id(topo))
    if got is None or got[0] is not topo:
        hosts = [topo.host_by_rank(r) for r in range(len(topo.hosts))]
        leaf_names = sorted({h.leaf for h in hosts})
        leaf_index = {name: k for k, name in enumerate(leaf_names)}
        ip_int = np.array([hashing.ip_to_int(h.ip) for h in hosts], dtype=np.uint64)
        table = _Hosts([h.name for h in hosts], [h.ip for h in hosts], ip_int,
                       np.array([leaf_index[h.leaf] for h in hosts], dtype=np.int64),
                       leaf_names, leaf_index, _PortTables.get().dst_terms(ip_int))
        got = _HOSTS[id(topo)] = (topo, table)
    return got[1]


class _PortTables:
    """crc32 over fabric.p4's 13-byte key is affine: for keys of one length,
    crc(a ^ b) = crc(a) ^ crc(b) ^ crc(0). So crc(src, dst, UDP, sport, dport) =
    base(src, dport) ^ dst_term(dst) ^ port_term(sport), each computed once. A switch with
    salt s and a group of 2^k members picks CRC bits s .. s+k-1 (cyclically), so the ports
    steering a path's hashed hops are those with (port_term & mask) == value ^ (key & mask)
    for one mask and value over the CRC: a sorted table per mask answers that."""
    _instance: _PortTables | None = None

    def __init__(self) -> None:
        zero = zlib.crc32(bytes(13))
        ports = range(rocev2.SPORT_MIN, rocev2.SPORT_MAX + 1)
        self.port_term = np.array([zlib.crc32(struct.pack("!IIBHH", 0, 0, 0, p, 0)) ^ zero
                                   for p in ports], dtype=np.uint64)
        self._by_mask: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._dst_basis = np.array([zlib.crc32(struct.pack("!IIBHH", 0, 1 << b, 0, 0, 0)) ^ zero
                                    for b in range(32)], dtype=np.uint64)

    @classmethod
    def get(cls) -> _PortTables:
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def base(self, src_ip: int, dport: int) -> int:
        """crc of (src, 0, UDP, 0, dport) with crc(0) folded in, so that base ^ dst_term(dst)
        ^ port_term(p) is the crc of the whole key."""
        return zlib.crc32(struct.pack("!IIBHH", int(src_ip), 0, rocev2.UDP, 0, dport))

    def dst_terms(self, ips: np.ndarray) -> np.ndarray:
        out = np.zeros(len(ips), dtype=np.uint64)
        for b in range(32):
            out ^= np.where((ips >> np.uint64(b)) & np.uint64(1), self._dst_basis[b], 0).astype(np.uint64)
        return out

    def crcs(self, key_crc: int) -> np.ndarray:
        """The crc of every port's key, in port order, given base ^ dst_term."""
        return (np.uint64(key_crc) ^ self.port_term).astype(np.int64)

    def lowest(self, key_crc: np.ndarray, mask: np.ndarray, value: np.ndarray) -> np.ndarray:
        """Per row, the lowest port whose crc has `value` under `mask`; -1 where none has."""
        out = np.full(len(key_crc), -1, dtype=np.int64)
        for m in np.unique(mask):
            rows = np.flatnonzero(mask == m)
            terms, ports = self._table(int(m))
            want = value[rows] ^ (key_crc[rows].astype(np.int64) & int(m))
            at = np.minimum(np.searchsorted(terms, want), len(terms) - 1)
            hit = terms[at] == want
            out[rows[hit]] = ports[at[hit]]
        return out

    def ports_for(self, key_crc: int, mask: int, value: int) -> list[int]:
        """Every port whose crc has `value` under `mask`, ascending."""
        terms, ports = self._table(mask)
        want = value ^ (key_crc & mask)
        return ports[np.searchsorted(terms, want):np.searchsorted(terms, want, "right")].tolist()

    def _table(self, mask: int) -> tuple[np.ndarray, np.ndarray]:
        """port_term & mask sorted, and the ports in that order (ascending among equals)."""
        if mask not in self._by_mask:
            terms = (self.port_term & np.uint64(mask)).astype(np.int64)
            order = np.argsort(terms, kind="stable")
            self._by_mask[mask] = (terms[order], order + rocev2.SPORT_MIN)
        return self._by_mask[mask]


def _windows(crc: np.ndarray, salt: int) -> np.ndarray:
    """hashing.salted_window over an array of CRCs."""
    c = crc.astype(np.uint64)
    return (((c << np.uint64(32)) | c) >> np.uint64(salt)).astype(np.int64) & (
        (1 << hashing.WINDOW_BITS) - 1)


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
