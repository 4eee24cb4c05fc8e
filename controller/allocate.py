"""The allocation rules every planner uses, so that one kind of resource is never handed out
by two rules: the lowest (or highest) free ids of a range, and the first free run of slots."""
from __future__ import annotations

from collections.abc import Iterable


def free_ids(used: Iterable[int], lo: int, hi: int, count: int = 1,
             from_top: bool = False) -> list[int]:
    """Up to `count` ids of lo..hi not in `used`, lowest first (or highest first)."""
    taken = set(used)
    ids = range(hi, lo - 1, -1) if from_top else range(lo, hi + 1)
    out: list[int] = []
    for i in ids:
        if i not in taken:
            out.append(i)
            if len(out) == count:
                break
    return out


def first_fit(taken: Iterable[tuple[int, int]], size: int, capacity: int) -> int | None:
    """The lowest start of `size` free places in 0..capacity-1 around the [lo, hi) runs in
    `taken`, or None."""
    start = 0
    for lo, hi in sorted(taken):
        if lo - start >= size:
            return start
        start = max(start, hi)
    return start if capacity - start >= size else None
