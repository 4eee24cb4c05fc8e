"""Load-balancing policies: how a message to a peer is split over queue pairs and which
entropy (UDP source port) each QP uses. A policy sees all the sends of one collective step
at once, which is the moment Ethereal splits flows ("on arrival")."""
from __future__ import annotations

from dataclasses import dataclass

from .entropy import FixedEntropy, RepsEntropy, SprayEntropy, derived_sport

POLICIES = ("ecmp", "ethereal", "spray", "reps")


@dataclass(frozen=True)
class Piece:
    offset: int
    nbytes: int
    qp: int
    entropy: FixedEntropy


def even_split(nbytes: int, parts: int, align: int) -> list[tuple[int, int]]:
    """NCCL_IB_SPLIT_DATA_ON_QPS: (offset, bytes) of up to `parts` equal runs of whole
    `align`-byte units (empty runs are left out)."""
    units = -(-nbytes // align)
    out = []
    for i in range(parts):
        lo = units * i // parts * align
        hi = min(units * (i + 1) // parts * align, nbytes)
        if hi > lo:
            out.append((lo, hi - lo))
    return out


class Policy:
    name = ""

    def __init__(self, rank: int, qps: int = 1, seed: int = 0, align: int = 1024) -> None:
        if not 1 <= qps <= 128:
            raise ValueError(f"QPs per connection must be 1..128 (NCCL's range), not {qps}")
        self.rank, self.qps, self.seed, self.align = rank, qps, seed, align
        self._entropy: dict[tuple[int, int], FixedEntropy] = {}

    def entropy(self, peer: int, qp: int) -> FixedEntropy:
        key = (peer, qp)
        if key not in self._entropy:
            self._entropy[key] = self._make(peer, qp)
        return self._entropy[key]

    def _make(self, peer: int, qp: int) -> FixedEntropy:
        return FixedEntropy(derived_sport(self.seed, self.rank, peer, qp))

    def plan(self, sends: dict[int, int]) -> dict[int, list[Piece]]:
        return {peer: [Piece(off, n, i, self.entropy(peer, i))
                       for i, (off, n) in enumerate(even_split(nbytes, self.qps, self.align))]
                for peer, nbytes in sends.items()}


class Ecmp(Policy):
    """One fixed source port per QP: the QP follows one hashed path."""
    name = "ecmp"


class Spray(Policy):
    name = "spray"

    def _make(self, peer: int, qp: int) -> FixedEntropy:
        return SprayEntropy(hash((self.seed, self.rank, peer, qp)))


class Reps(Policy):
    name = "reps"

    def _make(self, peer: int, qp: int) -> FixedEntropy:
        return RepsEntropy(hash((self.seed, self.rank, peer, qp)))


class Ethereal(Policy):
    """Split on arrival with controller.ethereal: flows of one step to remote racks are
    balanced over the uplinks, each sub-flow on its own QP with the source port the planner
    chose. Without a topology every peer is rack-local and a flow stays one QP."""
    name = "ethereal"

    def __init__(self, rank: int, qps: int = 1, seed: int = 0, align: int = 1024,
                 planner=None, hosts: list[str] | None = None) -> None:
        super().__init__(rank, qps, seed, align)
        self.planner, self.hosts = planner, hosts

    def plan(self, sends: dict[int, int]) -> dict[int, list[Piece]]:
        if self.planner is None:
            return super().plan(sends)
        from controller.ethereal import Flow

        me = self.hosts[self.rank]
        flows = [Flow(me, self.hosts[peer], n, dst_qp=peer) for peer, n in sends.items()]
        out: dict[int, list[Piece]] = {peer: [] for peer in sends}
        for sub in self.planner.plan(flows):
            peer = sub.flow.dst_qp
            out[peer].append(Piece(sub.offset, sub.bytes, sub.index,
                                   _PlannedEntropy(self.planner, sub)))
        return out


class _PlannedEntropy(FixedEntropy):
    """A pinned sub-flow: on a retransmission timeout Ethereal marks the path failed and the
    sub-flow re-picks another path (a new source port)."""

    def __init__(self, planner, sub) -> None:
        super().__init__(sub.sport)
        self.planner, self.sub = planner, sub

    def on_timeout(self, entropy: int) -> None:
        if self.sub.path is not None:
            self.sub = self.planner.on_timeout(self.sub)
            self.sport = self.sub.sport


def make_policy(name: str, rank: int, *, qps: int = 1, seed: int = 0, align: int = 1024,
                topology=None, hosts: list[str] | None = None) -> Policy:
    if name not in POLICIES:
        raise ValueError(f"unknown load-balancing policy {name!r}; choose from {POLICIES}")
    if name != "ethereal":
        return {"ecmp": Ecmp, "spray": Spray, "reps": Reps}[name](rank, qps, seed, align)
    planner = None
    if topology is not None:
        from controller.ethereal import EtherealRank

        planner = EtherealRank(topology, hosts[rank], mtu=align, seed=seed or None)
    return Ethereal(rank, qps, seed, align, planner, hosts)
