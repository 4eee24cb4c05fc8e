"""numpy's answers, computed in the test from the same seeded inputs the ranks used."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from collectives.algorithms import segments
from collectives.runner import make_input

ALL = [("allreduce", "ring"), ("allreduce", "halving-doubling"), ("allreduce", "direct"),
       ("reduce-scatter", "ring"), ("allgather", "ring"), ("allgather", "multicast"),
       ("alltoall", "direct")]


def runs(sizes, dtypes=("int32", "float32"), algos=ALL) -> list[dict]:
    return [{"collective": c, "algo": a, "dtype": d, "elements": n}
            for n in sizes for d in dtypes for c, a in algos]


def want(run: dict, seed: int, ranks: int, rank: int) -> np.ndarray:
    xs = [make_input(seed, r, run["dtype"], run["elements"]) for r in range(ranks)]
    total = xs[0].copy()
    for x in xs[1:]:
        total += x                                 # int32 wraps like the switch and ranks
    c = run["collective"]
    if c == "allreduce":
        return total
    if c == "reduce-scatter":
        return total[segments(len(total), ranks)[rank]]
    if c == "allgather":
        return np.concatenate(xs)
    return np.concatenate([x[segments(len(x), ranks)[rank]] for x in xs])


def assert_results(rows: list[dict], runs: list[dict], ranks: int, out: Path) -> None:
    assert len(rows) == len(runs) * ranks
    for i, run in enumerate(runs):
        for rank in range(ranks):
            got = np.load(out / f"run{i}_rank{rank}.npy")
            expected = want(run, i, ranks, rank)
            label = f"{run} rank {rank}"
            assert got.dtype == expected.dtype and got.shape == expected.shape, label
            if run["dtype"] == "int32":
                assert np.array_equal(got, expected), label
            else:
                np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4, err_msg=label)
    assert all(r["ok"] for r in rows)
