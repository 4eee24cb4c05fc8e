"""How each scheme places a job and how much contention slows its communication.

Communication model (all schemes): every iteration ends in an all-reduce run as one ring per
host position (NCCL's channels, one per NIC): each host sends one flow to the host in the same
position on the job's next leaf, so a leaf with m of the job's hosts sends m flows up and
receives m. A flow on a link shared by k flows gets 1/k of it; the iteration's communication
lasts as long as its most slowed flow (the ring's slowest hop), i.e. x max k.

- `ECMP`: the scheduler knows racks but not links: it takes free hosts from the leaves with the
  most free hosts (fewest leaves), and every flow hashes onto a random spine for its life.
  Flows of the same and of other jobs collide on uplinks and downlinks.
- `VClos`: `controller.vclos.VClosAllocator` (link isolation) gives the job a non-blocking
  slice or refuses (the job waits); inside a slice each flow gets its own uplink (vClos
  chooses the routing with the placement), so nothing is shared: slowdown 1.
- `OCSVClos`: the same with `controller.vclos.OCSVClosAllocator` (optical circuits between
  leaves and spines: spine ports are not tied to a leaf, less fragmentation).
"""
from __future__ import annotations

import random
from collections import Counter

from controller.vclos import AllocationError, OCSVClosAllocator, VClosAllocator
from fabricmodel.topology import Topology


class ECMP:
    name = "ECMP"

    def __init__(self, topo: Topology, seed: int) -> None:
        self.topo = topo
        self.rng = random.Random(seed)
        self.free = {lf.name: [h.name for h in topo.hosts_of(lf.name)] for lf in topo.leaves}
        self.spines = [s for s in topo.switches if topo.switch(s).level == 2]
        self.load: Counter = Counter()             # (direction, leaf, spine) -> flows
        self.jobs: dict[str, tuple[list[str], list[tuple]]] = {}

    def place(self, name: str, n: int) -> list[str] | None:
        if sum(map(len, self.free.values())) < n:
            return None
        hosts, by_leaf = [], []
        for leaf in sorted(self.free, key=lambda lf: -len(self.free[lf])):
            take = self.free[leaf][:n - len(hosts)]
            if take:
                by_leaf.append((leaf, len(take)))
                hosts += take
                self.free[leaf] = self.free[leaf][len(take):]
            if len(hosts) == n:
                break
        links = []
        if len(by_leaf) > 1:
            for i, (leaf, count) in enumerate(by_leaf):
                nxt = by_leaf[(i + 1) % len(by_leaf)][0]
                for _ in range(count):
                    spine = self.rng.choice(self.spines)
                    links += [("up", leaf, spine), ("down", nxt, spine)]
        flows = [tuple(links[i:i + 2]) for i in range(0, len(links), 2)]
        self.load.update(links)
        self.jobs[name] = (hosts, flows)
        return hosts

    def release(self, name: str) -> None:
        hosts, flows = self.jobs.pop(name)
        self.load.subtract(link for flow in flows for link in flow)
        for h in hosts:
            self.free[self.topo.host(h).leaf].append(h)

    def slowdown(self, name: str) -> float:
        flows = self.jobs[name][1]
        return float(max((self.load[lk] for flow in flows for lk in flow), default=1))

    def spans_leaves(self, name: str) -> bool:
        return bool(self.jobs[name][1])


class VClos:
    name = "vClos"

    def __init__(self, topo: Topology, seed: int) -> None:
        self.topo = topo
        self.alloc = self._allocator(topo)

    def _allocator(self, topo: Topology) -> VClosAllocator:
        return VClosAllocator(topo, "link")

    def place(self, name: str, n: int) -> list[str] | None:
        try:
            return list(self.alloc.allocate(name, n).hosts)
        except AllocationError:
            return None

    def release(self, name: str) -> None:
        self.alloc.release(name)

    def slowdown(self, name: str) -> float:
        return 1.0

    def spans_leaves(self, name: str) -> bool:
        return len(self.alloc.slices[name].leaves) > 1


class OCSVClos(VClos):
    name = "OCS-vClos"

    def _allocator(self, topo: Topology) -> VClosAllocator:
        return OCSVClosAllocator(topo)


SCHEMES = (ECMP, VClos, OCSVClos)
