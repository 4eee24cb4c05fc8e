"""A sub-group of a communicator (`torch.distributed.new_group`): the members' ranks in the
world, renumbered 0..k-1, over the world's endpoint and message order.

The collectives of algorithms.py address peers by rank and post through `post_sends`,
`post_recv`, `take`, `progress_until` and `exchange`; a `GroupComm` translates those ranks to
the world's. Messages between two processes stay matched in order (the k-th message a sends
b is the k-th b receives), so every process must issue the operations of groups it shares
with a peer in the same order, as NCCL and Gloo require. The in-network algorithms and the
multicast Allgather address the whole job (an aggregation job, a multicast group): they run
on the world only (collectives.torchpg falls back to ring on a sub-group)."""
from __future__ import annotations

import numpy as np

from . import algorithms
from .comm import Communicator


class GroupComm:
    def __init__(self, world: Communicator, members: list[int]) -> None:
        if len(set(members)) != len(members) or world.rank not in members:
            raise ValueError(f"a group's members must be distinct world ranks including "
                             f"this one ({world.rank}): {members}")
        bad = [m for m in members if not 0 <= m < world.size]
        if bad:
            raise ValueError(f"ranks {bad} are outside the world 0..{world.size - 1}")
        self.world, self.members = world, list(members)
        self.rank, self.size = members.index(world.rank), len(members)
        self.cfg, self.ep = world.cfg, world.ep

    @property
    def stats(self):
        return self.world.stats

    def post_sends(self, sends: list[tuple[int, np.ndarray]]):
        return self.world.post_sends([(self.members[p], a) for p, a in sends])

    def post_recv(self, peer: int, nbytes: int, into: np.ndarray | None = None):
        return self.world.post_recv(self.members[peer], nbytes, into)

    def take(self, recv) -> memoryview:
        return self.world.take(recv)

    def progress_until(self, done, what: str) -> None:
        self.world.progress_until(done, what)

    exchange = Communicator.exchange

    def barrier(self) -> None:
        """Every member has arrived once a ring all-reduce of one element per member over them completes."""
        algorithms.allreduce_ring(self, np.zeros(self.size, dtype=np.int32))
