"""A collective over GPUs on multi-GPU hosts, as phases inside hosts and across them.

G GPUs share one NIC per host. A group of ranks spans `k` hosts with `m` of its GPUs on each.
The algorithms (NetReduce's paper compares exactly these):
- `ring`: NCCL's flat ring over all k*m GPUs, host by host: m-1 of each host's m hops are
  inside the host, one crosses the NIC; the intra-host and NIC hops of a step run at once.
- `hier-ring`: reduce-scatter inside the host, m ring all-reduces of size/m across hosts
  (through the one NIC), all-gather inside the host.
- `netreduce`: every GPU sends its whole buffer to the aggregating switch (m x size through
  the NIC), the sum comes back once per host.
- `hier-netreduce`, `hier-switchml`: reduce-scatter inside the host, the host's m shards
  (size in all) aggregated in the switch, all-gather inside the host.
- `multicast` (all-gather): each host multicasts its m shards once; inside the host the
  shards are exchanged while the network phase runs.
`plan` gives the phases; `nic_bytes` and `intra_bytes` are the bytes each NIC sends and each
GPU's intra-host link carries, the formulas the simulator is held to.
"""
from __future__ import annotations

from dataclasses import dataclass

ALLREDUCE = ("ring", "hier-ring", "netreduce", "hier-netreduce", "hier-switchml")
ALLGATHER = ("ring", "multicast")
SWITCHML_PAYLOAD = 64 * 4          # SwitchML packs 64 int32 per packet


@dataclass(frozen=True)
class Span:
    """Where a group's ranks sit: `hosts` (host ids in ring order) with `m` ranks on each."""
    hosts: tuple[int, ...]
    m: int

    @property
    def k(self) -> int:
        return len(self.hosts)

    @property
    def n(self) -> int:
        return self.k * self.m


def span(group: tuple[int, ...], gpus_per_host: int) -> Span:
    """The hosts of a group; every host must hold as many of its ranks (NCCL's rings assume a
    regular layout too)."""
    per: dict[int, int] = {}
    for r in group:
        per[r // gpus_per_host] = per.get(r // gpus_per_host, 0) + 1
    if len(set(per.values())) != 1:
        raise ValueError(f"group {group} has an uneven number of ranks per host: {per}")
    return Span(tuple(per), next(iter(per.values())))


@dataclass(frozen=True)
class Phase:
    """`intra`: a collective inside each host, timed by formula (`seconds`). `net`: a network
    collective of `bytes` over `ranks` ranks laid host by host (ranks // k per host), whose
    flows between ranks of one host are left out (they ride the intra-host link)."""
    where: str
    algorithm: str
    bytes: int
    ranks: int = 0
    seconds: float = 0.0


def intra_seconds(coll: str, size: float, m: int, intra_bytes_s: float) -> float:
    """A ring collective over m GPUs of one host: reduce-scatter and all-gather move
    (m-1)/m of the buffer over each GPU's link, all-reduce twice that."""
    if m <= 1:
        return 0.0
    share = (m - 1) / m * size / intra_bytes_s
    return 2 * share if coll == "all-reduce" else share


NET = {"all-gather": {"ring": "ring-allgather", "multicast": "multicast"},
       "reduce-scatter": {"ring": "ring-reducescatter"}, "all-to-all": {"ring": "all-to-all"}}


def plan(coll: str, size: int, sp: Span, algorithm: str, intra_bytes_s: float) -> list[Phase]:
    """The phases of one collective of `size` bytes (see dag.py for what size means)."""
    m, n, k = sp.m, sp.n, sp.k
    if k == 1:
        return [Phase("intra", coll, size, seconds=intra_seconds(coll, size, m, intra_bytes_s))]
    if coll == "all-reduce":
        if algorithm not in ALLREDUCE:
            raise ValueError(f"unknown all-reduce algorithm {algorithm!r} "
                             f"(known: {', '.join(ALLREDUCE)})")
        if algorithm.startswith("hier-"):
            rs = intra_seconds("reduce-scatter", size, m, intra_bytes_s)
            return [Phase("intra", "reduce-scatter", size, seconds=rs),
                    Phase("net", algorithm.removeprefix("hier-"), size, k),
                    Phase("intra", "all-gather", size, seconds=rs)]
        if algorithm == "netreduce":
            return [Phase("net", "netreduce", size, n)]
        return [Phase("net", "ring", size, n),
                Phase("intra", "overlap", size, seconds=_ring_intra_s(2 * (n - 1), size / n, m,
                                                                     intra_bytes_s))]
    net = NET[coll].get(algorithm, NET[coll]["ring"])
    if net == "multicast":
        intra = intra_seconds("all-gather", size, m, intra_bytes_s)
    elif net == "all-to-all":
        intra = (m - 1) * size / n / intra_bytes_s
    else:
        intra = _ring_intra_s(n - 1, size / n, m, intra_bytes_s)
    return [Phase("net", net, size, n), Phase("intra", "overlap", size, seconds=intra)]


def _ring_intra_s(steps: int, chunk: float, m: int, intra_bytes_s: float) -> float:
    """The intra-host hops of a flat ring: `steps` chunks over each GPU's link, concurrent
    with the NIC hop of the same step (the slower of the two paces the ring)."""
    return steps * chunk / intra_bytes_s if m > 1 else 0.0


def nic_bytes(coll: str, size: int, sp: Span, algorithm: str) -> float:
    """Payload bytes each host's NIC sends for one collective."""
    k, m, n = sp.k, sp.m, sp.n
    if k == 1:
        return 0.0
    if coll == "all-reduce":
        return {"ring": 2 * (n - 1) / n * size, "hier-ring": 2 * (k - 1) / k * size,
                "netreduce": m * size, "hier-netreduce": size,
                "hier-switchml": size}[algorithm]
    if coll == "all-gather":
        return (n - 1) / n * size if algorithm == "ring" else m * size / n
    if coll == "reduce-scatter":
        return (n - 1) / n * size
    return (k - 1) / k * size * m


def intra_bytes(coll: str, size: int, sp: Span, algorithm: str) -> float:
    """Bytes each GPU sends over its intra-host link: a flat ring's 2(n-1) (all-reduce) or
    n-1 chunks of size/n, a hierarchical all-reduce's reduce-scatter and all-gather inside
    the host ((m-1)/m of the buffer each), nothing for flat NetReduce (each GPU sends to the
    NIC)."""
    m, n = sp.m, sp.n
    if m == 1:
        return 0.0
    twice = 2 if coll == "all-reduce" else 1
    if sp.k == 1:
        return twice * (m - 1) / m * size
    if coll == "all-reduce" and algorithm.startswith("hier-"):
        return 2 * (m - 1) / m * size
    if coll == "all-reduce" and algorithm == "netreduce":
        return 0.0
    if coll == "all-gather" and algorithm == "multicast":
        return (m - 1) / m * size
    return twice * (n - 1) / n * size
