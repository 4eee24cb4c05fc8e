"""The flows of each step of the collectives a training job runs, by rank.

`size` is the bytes of each rank's buffer. A step is a set of flows that start together (the
premise of Ethereal: known, equal sizes at arrival); ranks map to hosts only when a step is
turned into `ethereal.Flow`s.
"""
from __future__ import annotations

from dataclasses import dataclass

from fabricmodel.ethereal import Flow


@dataclass(frozen=True)
class RankFlow:
    src: int
    dst: int
    bytes: int


@dataclass(frozen=True)
class Step:
    algorithm: str
    index: int
    phase: str                # e.g. reduce-scatter, allgather, exchange
    flows: tuple[RankFlow, ...]

    @property
    def bytes(self) -> int:
        return sum(f.bytes for f in self.flows)


def _check(n: int, size: int, power_of_two: bool = False) -> None:
    if n < 2:
        raise ValueError(f"a collective needs at least 2 ranks, got {n}")
    if power_of_two and n & (n - 1):
        raise ValueError(f"halving-doubling needs a power-of-two number of ranks, got {n}")
    if size < n or size % n:
        raise ValueError(f"size must be a positive multiple of the {n} ranks, got {size}")


def ring_allreduce(n: int, size: int) -> list[Step]:
    """Reduce-scatter then allgather around the ring: 2(n-1) steps of size/n to the next rank."""
    _check(n, size)
    flows = tuple(RankFlow(i, (i + 1) % n, size // n) for i in range(n))
    return [Step("ring", s, "reduce-scatter" if s < n - 1 else "allgather", flows)
            for s in range(2 * (n - 1))]


def halving_doubling_allreduce(n: int, size: int) -> list[Step]:
    """Recursive halving (partner at distance n/2, n/4, …, sending half of what is left),
    then recursive doubling in the mirror order."""
    _check(n, size, power_of_two=True)
    rounds = n.bit_length() - 1
    steps = []
    for k in range(rounds):
        dist, part = n >> (k + 1), size >> (k + 1)
        steps.append(Step("halving-doubling", k, "reduce-scatter",
                          tuple(RankFlow(i, i ^ dist, part) for i in range(n))))
    for k in range(rounds):
        dist, part = 1 << k, (size // n) << k
        steps.append(Step("halving-doubling", rounds + k, "allgather",
                          tuple(RankFlow(i, i ^ dist, part) for i in range(n))))
    return steps


def _all_pairs(n: int, part: int) -> tuple[RankFlow, ...]:
    return tuple(RankFlow(i, j, part) for i in range(n) for j in range(n) if i != j)


def direct_allreduce(n: int, size: int) -> list[Step]:
    """Every rank sends its 1/n share to its owner, then the owner sends the sum to everyone."""
    _check(n, size)
    return [Step("direct", 0, "reduce-scatter", _all_pairs(n, size // n)),
            Step("direct", 1, "allgather", _all_pairs(n, size // n))]


def all_to_all(n: int, size: int) -> list[Step]:
    """One step: every rank sends size/n to every other rank at once."""
    _check(n, size)
    return [Step("all-to-all", 0, "exchange", _all_pairs(n, size // n))]


def ring_allgather(n: int, size: int) -> list[Step]:
    """n-1 steps of size/n to the next rank (`size` is the gathered result's size)."""
    _check(n, size)
    flows = tuple(RankFlow(i, (i + 1) % n, size // n) for i in range(n))
    return [Step("ring-allgather", s, "allgather", flows) for s in range(n - 1)]


ALGORITHMS = {
    "ring": ring_allreduce,
    "halving-doubling": halving_doubling_allreduce,
    "direct": direct_allreduce,
    "all-to-all": all_to_all,
    "ring-allgather": ring_allgather,
}


def steps(algorithm: str, n: int, size: int, algorithms=ALGORITHMS) -> list[Step]:
    """The steps of `algorithm` (a name in `algorithms`, which callers may extend)."""
    try:
        make = algorithms[algorithm]
    except KeyError:
        raise ValueError(f"unknown collective {algorithm!r} "
                         f"(known: {', '.join(algorithms)})") from None
    return make(n, size)


def flows_of(step: Step, hosts: list[str], dst_qp: int = 0):
    """The step's flows between hosts, rank i running on hosts[i]."""
    if max(max(f.src, f.dst) for f in step.flows) >= len(hosts):
        raise ValueError(f"step {step.algorithm}/{step.index} needs more ranks than the "
                         f"{len(hosts)} hosts given")
    return [Flow(hosts[f.src], hosts[f.dst], f.bytes, dst_qp) for f in step.flows]
