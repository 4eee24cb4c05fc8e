"""One training iteration as a DAG of operations per rank (GPU), as PyTorch runs it.

An op is compute (a duration), a collective (kind, bytes, group of ranks) or one half of a
point-to-point transfer (a send or a receive, matched by peer and tag). An op starts once
every op it depends on (`deps`, ids of the same rank) has finished *and* the op issued before
it on the same stream of its rank has finished: a stream is a CUDA stream, so compute on one
stream overlaps communication on another, and two collectives on one stream run one after
the other. The i-th collective a rank issues on a group meets the i-th of every other member
(NCCL's rule: the members issue a communicator's collectives in the same order).

Bytes follow `fabricmodel/steps.py`: all-reduce and reduce-scatter name each rank's input
buffer, all-gather the gathered result (each rank contributes bytes / len(group)).
"""
from __future__ import annotations

from dataclasses import dataclass, field

COMPUTE, COLLECTIVE, SEND, RECV = "compute", "collective", "send", "recv"
KINDS = (COMPUTE, COLLECTIVE, SEND, RECV)
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")


class WorkloadError(ValueError):
    """A DAG that cannot run: the message names the rank and op."""


@dataclass(frozen=True)
class Op:
    id: int                       # unique within its rank
    name: str
    kind: str                     # one of KINDS
    stream: str                   # ops on one (rank, stream) run in issue order
    deps: tuple[int, ...] = ()    # ids of this rank's ops that must finish first
    duration_s: float = 0.0       # compute
    coll: str = ""                # collective: one of COLLECTIVES
    bytes: int = 0                # collective (see the module doc) or the message of a send
    group: tuple[int, ...] = ()   # collective: the ranks, in ring order
    peer: int = -1                # send: the receiver; recv: the sender
    tag: int = 0                  # matches a send with its receive


@dataclass
class Workload:
    """The ops of every rank, in issue order; `facts` records what the generator assumed."""
    name: str
    ranks: list[list[Op]]
    gpus_per_host: int = 1
    facts: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.ranks)

    def ops(self):
        for r, ops in enumerate(self.ranks):
            for op in ops:
                yield r, op

    def validate(self) -> None:
        """Every reference resolves: deps to earlier-known ops of the rank, groups and peers to
        ranks, sends to receives."""
        sends, recvs = set(), set()
        for r, ops in enumerate(self.ranks):
            ids = {op.id for op in ops}
            if len(ids) != len(ops):
                raise WorkloadError(f"rank {r}: two ops share an id")
            for op in ops:
                where = f"rank {r} op {op.id} ({op.name})"
                if op.kind not in KINDS:
                    raise WorkloadError(f"{where}: unknown kind {op.kind!r}")
                if missing := [d for d in op.deps if d not in ids]:
                    raise WorkloadError(f"{where}: depends on unknown ops {missing}")
                if op.kind == COMPUTE and op.duration_s < 0:
                    raise WorkloadError(f"{where}: negative duration")
                if op.kind == COLLECTIVE:
                    if op.coll not in COLLECTIVES:
                        raise WorkloadError(f"{where}: unknown collective {op.coll!r}")
                    if r not in op.group or any(not 0 <= g < self.n for g in op.group):
                        raise WorkloadError(f"{where}: group {op.group} must hold rank {r} "
                                            f"and ranks < {self.n}")
                if op.kind in (SEND, RECV):
                    if not 0 <= op.peer < self.n or op.peer == r:
                        raise WorkloadError(f"{where}: peer {op.peer} is not another rank")
                    (sends if op.kind == SEND else recvs).add(
                        (r, op.peer, op.tag) if op.kind == SEND else (op.peer, r, op.tag))
        if unmatched := sends ^ recvs:
            src, dst, tag = sorted(unmatched)[0]
            raise WorkloadError(f"send {src} -> {dst} tag {tag} has no matching "
                                f"{'receive' if (src, dst, tag) in sends else 'send'}")
