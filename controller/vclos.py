"""vClos (Han et al., arXiv 2308.05692): every job gets an isolated virtual Clos.

A slice is a set of leaves with the job's hosts, a set of spines, and the cables between
them, held exclusively, so that the job's flows never share a link with another job's and
ECMP collisions between jobs cannot happen. A job that fits under one leaf gets that leaf
alone (the tightest fit). Otherwise it is spread evenly over the fewest leaves l that work
(m = ceil(n/l) hosts on some, m-1 on the others) and gets enough spines that every leaf has
m uplinks into the slice: a non-blocking virtual Clos. Spines are picked greedily, those
reaching the most candidate leaves over free cables first.

`isolation="switch"` (the default) also holds the leaves and spines exclusively, as the
paper's slices do; `isolation="link"` lets jobs share a switch but never a link (a switch's
crossbar is non-blocking, so sharing it adds no contention) and fragments less.

`OCSVClosAllocator` is OCS-vClos: optical circuit switches between the leaves and the spines
let a slice connect any free leaf uplink port to any free spine port, so the spine tier no
longer fragments (see its docstring).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from fabricmodel.routing import Route, Routing
from fabricmodel.topology import Topology

ISOLATION = ("switch", "link")


class AllocationError(Exception):
    """No isolated slice fits (or the request is invalid); the message says why."""


@dataclass(frozen=True)
class Slice:
    job: str
    slice_id: int                       # small integer the switches classify packets into
    hosts: tuple[str, ...]              # rank order
    leaves: tuple[str, ...]
    spines: tuple[str, ...]
    links: frozenset[int]               # host cables and fabric cables, exclusively held
    # OCS-vClos only: (leaf-end cable, spine-end cable) pairs joined by an optical circuit;
    # the leaf ends are in `links`, the spine ends are held through these pairs.
    circuits: tuple[tuple[int, int], ...] = ()

    def routing(self, topo: Topology, failed=()) -> Routing:
        """Routing confined to the slice's links: its ECMP groups use only its cables."""
        return Routing(topo, failed=failed, allowed=self.links)

    def routes(self, topo: Topology, failed=()) -> list[Route]:
        """Route entries (to install under this slice_id) on every switch of the slice."""
        routing = self.routing(topo, failed)
        return [r for sw in (*self.leaves, *self.spines)
                for r in routing.routes(sw, hosts=self.hosts)]

    def ingress_ports(self, topo: Topology) -> dict[str, tuple[int, ...]]:
        """Per switch, the ports whose packets belong to this slice (links are exclusive,
        so the ingress port alone classifies a packet)."""
        out: dict[str, list[int]] = {}
        for idx in sorted(self.links):
            lk = topo.links[idx]
            for end in (lk.a, lk.b):
                if end in topo.switches:
                    out.setdefault(end, []).append(lk.port_of(end))
        return {sw: tuple(sorted(ports)) for sw, ports in out.items()}


def _fill(free: dict[str, list[str]], cands, count: int, m: int, full: int):
    """The `count` candidate leaves with the fewest free hosts (tightest fit), in fabric
    order, and their hosts: m on the first `full` leaves, m-1 on the others."""
    order = {lf: i for i, lf in enumerate(free)}
    leaves = sorted(cands, key=lambda lf: (len(free[lf]), order[lf]))[:count]
    leaves.sort(key=order.get)
    hosts: list[str] = []
    for i, lf in enumerate(leaves):
        hosts += free[lf][: m if i < full else m - 1]
    return leaves, hosts


@dataclass(frozen=True)
class Fragmentation:
    free_hosts: int
    free_leaves: int                    # leaves no job uses
    free_spines: int
    free_fabric_links: int
    largest_job: int                    # the most hosts one new job could get now

    @property
    def ratio(self) -> float:
        """Share of the free hosts that no single new job can use (0: none wasted)."""
        return 1 - self.largest_job / self.free_hosts if self.free_hosts else 0.0


@dataclass
class VClosAllocator:
    topo: Topology
    isolation: str = "switch"
    slices: dict[str, Slice] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.isolation not in ISOLATION:
            raise ValueError(f"isolation must be one of {', '.join(ISOLATION)}, "
                             f"got {self.isolation!r}")
        leaf_level = {s.name for s in self.topo.leaves}
        self._spines = [s.name for s in self.topo.switches.values() if s.level == 2]
        self._cables: dict[tuple[str, str], list[int]] = {}
        for lk in self.topo.links:
            if lk.a in leaf_level and lk.b in self._spines:
                self._cables.setdefault((lk.a, lk.b), []).append(lk.index)

    # ---- state --------------------------------------------------------------------------
    def _used(self) -> tuple[set[str], set[int], set[str]]:
        hosts, links, switches = set(), set(), set()
        for s in self.slices.values():
            hosts.update(s.hosts)
            links.update(s.links)
            switches.update(s.leaves, s.spines)
        return hosts, links, switches

    # ---- allocation ---------------------------------------------------------------------
    def allocate(self, job: str, n: int) -> Slice:
        if not isinstance(job, str) or not job:
            raise AllocationError(f"job name must be a non-empty string, got {job!r}")
        if job in self.slices:
            raise AllocationError(f"job {job!r} already holds a slice")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise AllocationError(f"job {job!r}: host count must be a positive integer, got {n!r}")
        found = self._find(n)
        if found is None:
            raise AllocationError(self._refusal(job, n))
        hosts, leaves, spines, links, *circuits = found
        sid = min(set(range(1, len(self.slices) + 2)) - {s.slice_id for s in self.slices.values()})
        sl = Slice(job, sid, tuple(hosts), tuple(leaves), tuple(spines), frozenset(links),
                   tuple(circuits[0]) if circuits else ())
        self.slices[job] = sl
        return sl

    def release(self, job: str) -> Slice:
        try:
            return self.slices.pop(job)
        except KeyError:
            raise AllocationError(f"job {job!r} holds no slice") from None

    def _find(self, n: int):
        used_hosts, used_links, used_sw = self._used()
        free = {leaf.name: [h.name for h in self.topo.hosts_of(leaf.name)
                            if h.name not in used_hosts]
                for leaf in self.topo.leaves}
        if self.isolation == "switch":
            free = {lf: hs for lf, hs in free.items() if lf not in used_sw}
        if sum(map(len, free.values())) < n:
            return None
        single = sorted((len(hs), lf_idx, lf) for lf_idx, (lf, hs) in enumerate(free.items())
                        if len(hs) >= n)
        if single:
            leaf = single[0][2]
            hosts = free[leaf][:n]
            return hosts, [leaf], [], self._host_links(hosts)
        spines = [s for s in self._spines if self.isolation == "link" or s not in used_sw]
        spare = {key: [i for i in c if i not in used_links] for key, c in self._cables.items()}
        most = max(map(len, free.values()))
        for count in range(max(2, -(-n // most)), len(free) + 1):
            got = self._try_spread(n, count, free, spines, spare)
            if got:
                return got
        return None

    def _try_spread(self, n, count, free, spines, spare):
        """n hosts over `count` leaves, m = ceil(n/count) on the first ones, m-1 on the rest;
        m uplinks per leaf (spines x cables) so the virtual Clos is non-blocking."""
        m = -(-n // count)
        full = n - count * (m - 1)          # leaves that hold m hosts; the others hold m-1
        cands = [lf for lf, hs in free.items() if len(hs) >= m]
        if len(cands) < count:
            return None
        parallel = max((len(c) for c in self._cables.values()), default=1)
        per_spine = min(parallel, m)
        needed = -(-m // per_spine)
        reach = {s: {lf for lf in cands if len(spare.get((lf, s), ())) >= per_spine}
                 for s in spines}
        chosen, pool = [], set(cands)
        for s in sorted(spines, key=lambda s: (-len(reach[s]), self._spines.index(s))):
            if len(pool & reach[s]) >= count:
                chosen.append(s)
                pool &= reach[s]
                if len(chosen) == needed:
                    break
        if len(chosen) < needed:
            return None
        leaves, hosts = _fill(free, pool, count, m, full)
        links = self._host_links(hosts)
        for lf in leaves:
            for s in chosen:
                links += spare[(lf, s)][:per_spine]
        return hosts, leaves, chosen, links

    def _host_links(self, hosts: list[str]) -> list[int]:
        return [self.topo.link(h, self.topo.host(h).leaf).index for h in hosts]

    # ---- reporting ----------------------------------------------------------------------
    def _refusal(self, job: str, n: int) -> str:
        frag = self.fragmentation()
        total = len(self.topo.hosts)
        if n > total:
            return f"job {job!r} needs {n} hosts but the fabric has only {total}"
        usable = "free" if self.isolation == "link" else "on unused leaves"
        if frag.free_hosts < n:
            # in switch isolation hosts left on a used leaf are not usable
            avail = self._usable_hosts()
            if avail < n:
                return (f"job {job!r} needs {n} hosts but only {avail} hosts are {usable} "
                        f"({len(self.slices)} slices allocated)")
        return (f"job {job!r} needs {n} hosts: {self._usable_hosts()} hosts are {usable} but no "
                f"isolated virtual Clos fits them (free: {frag.free_leaves} leaves, "
                f"{frag.free_spines} spines, {frag.free_fabric_links} fabric links; the largest "
                f"job that fits now has {frag.largest_job} hosts)")

    def _usable_hosts(self) -> int:
        used_hosts, _, used_sw = self._used()
        return sum(1 for h in self.topo.hosts.values() if h.name not in used_hosts
                   and (self.isolation == "link" or h.leaf not in used_sw))

    def fragmentation(self) -> Fragmentation:
        used_hosts, used_links, used_sw = self._used()
        free_hosts = len(self.topo.hosts) - len(used_hosts)
        # Binary search: a job that fits still fits with one host less under the even spread.
        lo, hi = 0, self._usable_hosts()
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if self._find(mid) else (lo, mid - 1)
        largest = lo
        return Fragmentation(
            free_hosts=free_hosts,
            free_leaves=sum(1 for lf in self.topo.leaves if lf.name not in used_sw),
            free_spines=sum(1 for s in self._spines if s not in used_sw),
            free_fabric_links=sum(1 for c in self._cables.values() for i in c
                                  if i not in used_links),
            largest_job=largest,
        )


@dataclass
class OCSVClosAllocator(VClosAllocator):
    """OCS-vClos: a layer of optical circuit switches between leaves and spines.

    Every leaf uplink port and every spine port is cabled to the optical layer, which can
    circuit-connect any leaf port to any spine port. A job over `count` leaves with m hosts on
    the fullest one needs m free uplink ports on each leaf and m spines with `count` free ports
    each; which physical cable a port sits on no longer matters, so the "no spine reaches all
    chosen leaves over free cables" refusal of the electrical fabric becomes a count check.
    Slices share switches but never a port (link isolation, the only sensible one here: the
    circuits are what is exclusive). Circuits are recorded as (leaf-end cable, spine-end
    cable) pairs of the electrical topology's cable numbering."""

    isolation: str = "link"

    def __post_init__(self) -> None:
        if self.isolation != "link":
            raise ValueError("OCS-vClos isolates circuits: isolation must be 'link'")
        super().__post_init__()

    def _try_spread(self, n, count, free, spines, spare):
        m = -(-n // count)
        full = n - count * (m - 1)
        spine_used = {b for s in self.slices.values() for _, b in s.circuits}
        up_free = {lf: [i for (leaf, _), c in spare.items() if leaf == lf for i in c]
                   for lf in free}
        ports_free = {s: [i for (_, sp), c in self._cables.items() if sp == s for i in c
                          if i not in spine_used] for s in spines}
        cands = [lf for lf, hs in free.items() if len(hs) >= m and len(up_free[lf]) >= m]
        chosen = sorted((s for s in spines if len(ports_free[s]) >= count),
                        key=lambda s: (-len(ports_free[s]), self._spines.index(s)))[:m]
        if len(cands) < count or len(chosen) < m:
            return None
        leaves, hosts = _fill(free, cands, count, m, full)
        links, circuits = self._host_links(hosts), []
        for li, lf in enumerate(leaves):
            for si, s in enumerate(chosen):
                leaf_end, spine_end = up_free[lf][si], ports_free[s][li]
                links.append(leaf_end)
                circuits.append((leaf_end, spine_end))
        return hosts, leaves, chosen, links, circuits
