"""Which op may start when: the DAG's semantics, independent of how time passes.

`Scheduler` answers "what became ready" as ops finish; executors (the analytic one below,
`sim/dag_run.py` in the packet simulator) decide how long each op takes. A collective is matched across its
group here (`instance`), and each send with its receive (`message`: the k-th send of a
(src, dst, tag) meets the k-th receive), so every executor agrees on what meets what.
"""
from __future__ import annotations

import heapq
from collections import defaultdict, deque
from collections.abc import Callable

from workloads.dag import COLLECTIVE, COMPUTE, RECV, SEND, Op, Workload, WorkloadError


class Scheduler:
    def __init__(self, wl: Workload) -> None:
        wl.validate()
        self.wl = wl
        self.op = [{o.id: o for o in ops} for ops in wl.ranks]
        self.waiting = [{o.id: len(set(o.deps)) for o in ops} for ops in wl.ranks]
        self.users: list[dict[int, list[int]]] = [defaultdict(list) for _ in wl.ranks]
        self.queue: list[dict[str, deque]] = [defaultdict(deque) for _ in wl.ranks]
        self.seq: dict[tuple[int, int], tuple] = {}      # (rank, op id) -> collective instance
        self.msg: dict[tuple[int, int], tuple] = {}      # (rank, op id) -> (src, dst, tag, k)
        issued: dict[tuple, int] = defaultdict(int)
        for r, ops in enumerate(wl.ranks):
            for o in ops:
                for d in set(o.deps):
                    self.users[r][d].append(o.id)
                self.queue[r][o.stream].append(o.id)
                if o.kind == COLLECTIVE:
                    k = issued[(r, o.group)]
                    issued[(r, o.group)] += 1
                    self.seq[(r, o.id)] = (o.group, k)
                elif o.kind in (SEND, RECV):
                    key = (r, o.peer, o.tag) if o.kind == SEND else (o.peer, r, o.tag)
                    k = issued[(o.kind, key)]
                    issued[(o.kind, key)] += 1
                    self.msg[(r, o.id)] = (*key, k)
        self.left = sum(len(ops) for ops in wl.ranks)
        self._check_instances()

    def _check_instances(self) -> None:
        members: dict[tuple, list[tuple[int, Op]]] = defaultdict(list)
        for (r, oid), inst in self.seq.items():
            members[inst].append((r, self.op[r][oid]))
        for (group, k), got in members.items():
            first = got[0][1]
            for r, o in got:
                if (o.coll, o.bytes) != (first.coll, first.bytes):
                    raise WorkloadError(f"rank {r} op {o.id} ({o.name}): collective {k} on group "
                                        f"{group} is {first.coll} of {first.bytes} B on rank "
                                        f"{got[0][0]} but {o.coll} of {o.bytes} B here")
            if len(got) != len(group):
                absent = sorted(set(group) - {r for r, _ in got})
                raise WorkloadError(f"collective {k} on group {group} ({first.name}) is never "
                                    f"issued by ranks {absent}")

    def instance(self, rank: int, op: Op) -> tuple:
        return self.seq[(rank, op.id)]

    def message(self, rank: int, op: Op) -> tuple:
        """(src, dst, tag, k): the same for a send and the receive it meets."""
        return self.msg[(rank, op.id)]

    def blocked(self, limit: int = 4) -> str:
        """The first ops of streams that never ran, for a deadlock's message: each waits on
        its dependencies or, ready itself, on a peer that never issued its half."""
        out = []
        for r in range(self.wl.n):
            for q in self.queue[r].values():
                if q and len(out) < limit:
                    o = self.op[r][q[0]]
                    why = ("waits on its dependencies" if self.waiting[r][o.id] else
                           f"a {o.kind} its peers never met")
                    out.append(f"rank {r} op {o.id} ({o.name}): {why}")
        return "; ".join(out)

    def _ready(self, rank: int, oid: int) -> bool:
        o = self.op[rank][oid]
        return self.waiting[rank][oid] == 0 and self.queue[rank][o.stream][0] == oid

    def start(self) -> list[tuple[int, Op]]:
        return [(r, self.op[r][q[0]]) for r in range(self.wl.n) for q in self.queue[r].values()
                if self.waiting[r][q[0]] == 0]

    def finish(self, rank: int, op: Op) -> list[tuple[int, Op]]:
        """`op` finished on `rank`: the ops that became ready."""
        self.left -= 1
        q = self.queue[rank][op.stream]
        if not q or q[0] != op.id:
            raise RuntimeError(f"rank {rank} op {op.id} finished out of its stream's order")
        q.popleft()
        out = []
        if q and self._ready(rank, q[0]):
            out.append((rank, self.op[rank][q[0]]))
        for u in self.users[rank].get(op.id, ()):
            self.waiting[rank][u] -= 1
            if self._ready(rank, u):
                out.append((rank, self.op[rank][u]))
        return out


def run_analytic(wl: Workload, comm_s: Callable[[Op], float]) -> dict:
    """Iteration time when a collective takes `comm_s(op)` once its last member issued it and a
    message takes `comm_s(send)` from when its send starts (eager: the receive need not be
    posted): no contention between them. `comm_s = lambda op: 0.0` gives the compute-only
    bound."""
    sched = Scheduler(wl)
    t, events = 0.0, []
    counter = 0
    finish_at = [0.0] * wl.n
    arrived: dict[tuple, list[tuple[int, Op]]] = defaultdict(list)
    delivered: dict[tuple, float] = {}           # message -> when its bytes arrive
    posted: dict[tuple, tuple[int, Op]] = {}     # message -> the receive waiting for it

    def push(at: float, rank: int, op: Op) -> None:
        nonlocal counter
        counter += 1
        heapq.heappush(events, (at, counter, rank, op))

    def begin(rank: int, op: Op) -> None:
        if op.kind == COMPUTE:
            push(t + op.duration_s, rank, op)
        elif op.kind == COLLECTIVE:
            inst = sched.instance(rank, op)
            arrived[inst].append((rank, op))
            if len(arrived[inst]) == len(op.group):
                for r, o in arrived.pop(inst):
                    push(t + comm_s(o), r, o)
        elif op.kind == SEND:
            key = sched.message(rank, op)
            at = t + comm_s(op)
            push(at, rank, op)
            if key in posted:
                push(at, *posted.pop(key))
            else:
                delivered[key] = at
        else:
            key = sched.message(rank, op)
            if key in delivered:
                push(max(t, delivered.pop(key)), rank, op)
            else:
                posted[key] = (rank, op)

    for r, op in sched.start():
        begin(r, op)
    while events:
        t, _, rank, op = heapq.heappop(events)
        finish_at[rank] = max(finish_at[rank], t)
        for r, o in sched.finish(rank, op):
            begin(r, o)
    if sched.left:
        raise WorkloadError(f"{sched.left} ops never became ready: ranks wait on each other "
                            f"(a receive or collective whose peer waits on it): "
                            f"{sched.blocked()}")
    return {"iteration_s": max(finish_at), "rank_s": finish_at}


def compute_bound(wl: Workload) -> float:
    """The iteration time with communication free: compute and the DAG's own waits only."""
    return run_analytic(wl, lambda op: 0.0)["iteration_s"]


__all__ = ["Scheduler", "run_analytic", "compute_bound", "RECV", "SEND"]
