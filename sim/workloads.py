"""The collectives the simulator runs, as steps of flows between ranks.

Ring, halving-doubling, direct all-reduce, all-to-all and ring Allgather are the controller's
(`fabricmodel/steps.py`, the same flows the emulation's planner sees). The double binary tree
(NCCL's) is added here: two binary trees over the ranks, each reducing and then broadcasting
half of the buffer, pipelined in chunks; a step is one chunk slot in which every tree node
passes one chunk on.
"""
from __future__ import annotations

from fabricmodel import steps as csteps
from fabricmodel.steps import RankFlow, Step

DBT_CHUNKS = 8


def _tree(ranks: list[int]) -> dict[int, int]:
    """Parent of each rank in the in-order binary tree over `ranks` (the root has none)."""
    parent: dict[int, int] = {}

    def build(lo: int, hi: int, up: int | None) -> None:
        if lo > hi:
            return
        mid = (lo + hi) // 2
        if up is not None:
            parent[ranks[mid]] = up
        build(lo, mid - 1, ranks[mid])
        build(mid + 1, hi, ranks[mid])

    build(0, len(ranks) - 1, None)
    return parent


def _height(parent: dict[int, int], n: int) -> dict[int, int]:
    """Longest distance from each rank down to a leaf of its tree."""
    h = dict.fromkeys(range(n), 0)
    changed = True
    while changed:
        changed = False
        for child, up in parent.items():
            if h[up] < h[child] + 1:
                h[up] = h[child] + 1
                changed = True
    return h


def double_binary_tree(n: int, size: int, chunks: int = DBT_CHUNKS) -> list[Step]:
    """Reduce up both trees, then broadcast down, `chunks` chunks of size/(2*chunks) each;
    tree 2 is tree 1 shifted by one rank, so a leaf of one is an inner node of the other."""
    if n < 2:
        raise ValueError(f"a collective needs at least 2 ranks, got {n}")
    chunk = max(1, size // (2 * chunks))
    trees = [_tree(list(range(n))), _tree([(i + 1) % n for i in range(n)])]
    heights = [_height(t, n) for t in trees]
    depth = max(max(h.values()) for h in heights) + 1
    out: list[Step] = []
    slots = chunks + depth - 1
    for s in range(slots):         # reduce: a node at height h sends chunk s - h up
        flows = [RankFlow(c, p, chunk) for t, h in zip(trees, heights, strict=True)
                 for c, p in t.items() if 0 <= s - h[c] < chunks]
        out.append(Step("double-binary-tree", len(out), "reduce", tuple(flows)))
    for s in range(slots):         # broadcast: a node at depth d sends chunk s - d down
        flows = []
        for t in trees:
            depth_of = _depths(t, n)
            flows += [RankFlow(p, c, chunk) for c, p in t.items() if 0 <= s - depth_of[p] < chunks]
        out.append(Step("double-binary-tree", len(out), "broadcast", tuple(flows)))
    return out


def _depths(parent: dict[int, int], n: int) -> dict[int, int]:
    d: dict[int, int] = {}

    def depth(r: int) -> int:
        if r not in d:
            d[r] = 0 if r not in parent else depth(parent[r]) + 1
        return d[r]

    for r in range(n):
        depth(r)
    return d


def ring_reducescatter(n: int, size: int) -> list[Step]:
    """The reduce-scatter half of the ring all-reduce: n-1 steps of size/n to the next rank."""
    return csteps.ring_allreduce(n, size)[:n - 1]


ALGORITHMS = {
    "ring": csteps.ring_allreduce,
    "halving-doubling": csteps.halving_doubling_allreduce,
    "direct": csteps.direct_allreduce,
    "double-binary-tree": double_binary_tree,
    "all-to-all": csteps.all_to_all,
    "ring-allgather": csteps.ring_allgather,
    "ring-reducescatter": ring_reducescatter,
}


def steps(algorithm: str, n: int, size: int) -> list[Step]:
    return csteps.steps(algorithm, n, size - size % n if size >= n else size, ALGORITHMS)
