"""One training iteration as a DAG of operations per rank (GPU), as PyTorch runs it.

An op is compute (a duration), a collective (kind, bytes, group of ranks) or one half of a
point-to-point transfer (a send or a receive). An op starts once
every op it depends on (`deps`, ids of the same rank) has finished *and* the op issued before
it on the same stream of its rank has finished: a stream is a CUDA stream, so compute on one
stream overlaps communication on another, and two collectives on one stream run one after
the other. The i-th collective a rank issues on a group meets the i-th of every other member
(NCCL's rule: the members issue a communicator's collectives in the same order).

Sends are eager, as ASTRA-sim and MPI run them: a send starts once it is ready, whether or not
its receive has been posted, and finishes when its bytes are delivered; a receive finishes
once it is posted and its message has arrived. The i-th send from `src` to `dst` with a tag
meets the i-th receive on `dst` from `src` with that tag (a queue per (src, dst, tag), so two
messages in flight with one tag are both delivered, in order).

Bytes follow `fabricmodel/steps.py`: all-reduce and reduce-scatter name each rank's input
buffer, all-gather the gathered result (each rank contributes bytes / len(group)).
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

COMPUTE, COLLECTIVE, SEND, RECV = "compute", "collective", "send", "recv"
KINDS = (COMPUTE, COLLECTIVE, SEND, RECV)
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
MAX_BYTES = 1 << 50                # 1 PiB: a larger message is a corrupt size, not a workload
MAX_SECONDS = 1e6                  # an op longer than 11 days is a corrupt duration


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
        """Every reference resolves (deps to ops of the rank, groups and peers to ranks, sends
        to receives in order), every size and duration is finite and in range, and no rank's
        ops wait on each other in a cycle."""
        messages: dict[tuple, list] = defaultdict(lambda: [[], []])
        for r, ops in enumerate(self.ranks):
            ids = {op.id for op in ops}
            if len(ids) != len(ops):
                raise WorkloadError(f"rank {r}: two ops share an id")
            for op in ops:
                self._check_op(r, op, ids)
                if op.kind in (SEND, RECV):
                    key = (r, op.peer, op.tag) if op.kind == SEND else (op.peer, r, op.tag)
                    messages[key][op.kind == RECV].append((r, op))
            _check_acyclic(r, ops)
        for (src, dst, tag), (sends, recvs) in sorted(messages.items()):
            for (_, s), (_, v) in zip(sends, recvs, strict=False):   # counts: below
                if s.bytes != v.bytes:
                    raise WorkloadError(f"send {src} -> {dst} tag {tag}: rank {src} op {s.id} "
                                        f"({s.name}) sends {s.bytes} B, rank {dst} op {v.id} "
                                        f"({v.name}) receives {v.bytes} B")
            if len(sends) != len(recvs):
                more, what = (sends, "receive") if len(sends) > len(recvs) else (recvs, "send")
                r, op = more[min(len(sends), len(recvs))]
                raise WorkloadError(f"send {src} -> {dst} tag {tag} has no matching {what}: "
                                    f"rank {r} op {op.id} ({op.name}) is the "
                                    f"{min(len(sends), len(recvs)) + 1}-th of {len(more)}, "
                                    f"the peer posts {min(len(sends), len(recvs))}")

    def _check_op(self, r: int, op: Op, ids: set) -> None:
        where = f"rank {r} op {op.id} ({op.name})"
        if op.kind not in KINDS:
            raise WorkloadError(f"{where}: unknown kind {op.kind!r}")
        if missing := [d for d in op.deps if d not in ids]:
            raise WorkloadError(f"{where}: depends on unknown ops {missing}")
        if not isinstance(op.duration_s, (int, float)) or not math.isfinite(op.duration_s) \
                or not 0 <= op.duration_s <= MAX_SECONDS:
            raise WorkloadError(f"{where}: duration {op.duration_s!r} s is not a number in "
                                f"[0, {MAX_SECONDS:g}]")
        if not isinstance(op.bytes, int) or not 0 <= op.bytes <= MAX_BYTES:
            raise WorkloadError(f"{where}: size {op.bytes!r} B is not an integer in "
                                f"[0, {MAX_BYTES}]")
        if op.kind == COLLECTIVE:
            if op.coll not in COLLECTIVES:
                raise WorkloadError(f"{where}: unknown collective {op.coll!r}")
            if r not in op.group or any(not 0 <= g < self.n for g in op.group) \
                    or len(set(op.group)) != len(op.group):
                raise WorkloadError(f"{where}: group {op.group} must hold rank {r} once "
                                    f"and distinct ranks < {self.n}")
        if op.kind in (SEND, RECV) and (not 0 <= op.peer < self.n or op.peer == r):
            raise WorkloadError(f"{where}: peer {op.peer} is not another rank")


def _check_acyclic(r: int, ops: list[Op]) -> None:
    """A rank's ops wait on their deps and on the op before them on their stream; a cycle in
    that graph never runs. Found here, before any simulation, naming the ops on it."""
    waits: dict[int, set[int]] = {op.id: set(op.deps) for op in ops}
    last: dict[str, int] = {}
    for op in ops:
        if op.stream in last:
            waits[op.id].add(last[op.stream])
        last[op.stream] = op.id
    users: dict[int, list[int]] = defaultdict(list)
    for oid, ws in waits.items():
        for w in ws:
            users[w].append(oid)
    left = {oid: len(ws) for oid, ws in waits.items()}
    ready = [oid for oid, n in left.items() if n == 0]
    while ready:
        oid = ready.pop()
        for u in users[oid]:
            left[u] -= 1
            if left[u] == 0:
                ready.append(u)
    stuck = {oid for oid, n in left.items() if n}
    if not stuck:
        return
    name = {op.id: op.name for op in ops}
    cycle, at = [], min(stuck)
    while at not in cycle:            # walk back along waits that are stuck themselves
        cycle.append(at)
        at = min(w for w in waits[at] if w in stuck)
    cycle = cycle[cycle.index(at):][::-1]
    raise WorkloadError(f"rank {r}: ops wait on each other in a cycle: " + " -> ".join(
        f"{oid} ({name[oid]})" for oid in cycle + cycle[:1]) +
        " (each waits on the one before: a dependency, or the op before it on its stream)")
