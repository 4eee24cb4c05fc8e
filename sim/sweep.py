"""Independent simulations as tasks on a Dask cluster: a local one of `workers` processes, or
an existing one at `scheduler` (`dask-scheduler` + `dask-worker`, or dask-jobqueue on Slurm;
sim/README.md). Every run is seeded and shares nothing with the others, so the rows are
those of a serial run, in task order. A task that fails is reported with its parameters and
the others still run.

A worker compiles the engine once (sim.fabric.ns3) and then runs the tasks it is given.
`workers=0` runs every task in this process, one after another (no Dask).
"""
from __future__ import annotations

import os
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tqdm import tqdm


@dataclass(frozen=True)
class Task:
    """`fn(*args)` returns a result row (a dict) or a list of them; `label` names the task
    in the progress bar and in a failure report."""
    fn: Callable
    args: tuple
    label: str


@dataclass
class Outcome:
    rows: list[dict] = field(default_factory=list)        # in task order
    failures: list[tuple[Task, str]] = field(default_factory=list)


def default_workers() -> int:
    return os.cpu_count() or 1


def run(tasks: list[Task], *, workers: int | None = None, scheduler: str | None = None,
        desc: str = "sim", on_row: Callable[[dict], None] | None = None) -> Outcome:
    """Run every task; `on_row` sees each row as its task completes (any order)."""
    results: dict[int, list[dict]] = {}
    failures: dict[int, str] = {}
    with tqdm(total=len(tasks), unit="run", desc=desc, dynamic_ncols=True) as bar:
        for i, rows, error in _execute(tasks, workers, scheduler):
            if error is None:
                results[i] = rows
                for row in rows:
                    if on_row is not None:
                        on_row(row)
            else:
                failures[i] = error
                tqdm.write(f"{desc}: task failed: {tasks[i].label}: {error.splitlines()[-1]}")
            bar.set_postfix_str(tasks[i].label)
            bar.update(1)
    out = Outcome()
    for i in range(len(tasks)):
        if i in results:
            out.rows.extend(results[i])
        else:
            out.failures.append((tasks[i], failures[i]))
    return out


def _call(task: Task) -> list[dict]:
    got = task.fn(*task.args)
    return got if isinstance(got, list) else [got]


def _execute(tasks: list[Task], workers: int | None, scheduler: str | None
             ) -> Iterable[tuple[int, list[dict] | None, str | None]]:
    if scheduler is None and workers == 0:
        for i, task in enumerate(tasks):
            try:
                yield i, _call(task), None
            except Exception:                              # reported, the others go on
                yield i, None, traceback.format_exc()
        return
    from dask.distributed import Client, LocalCluster, as_completed

    cluster = None
    if scheduler is None:
        # loopback only, any free ports: scheduler, workers and dashboard
        cluster = LocalCluster(n_workers=workers or default_workers(), threads_per_worker=1,
                               processes=True, host="127.0.0.1", scheduler_port=0,
                               dashboard_address="127.0.0.1:0")
    try:
        with Client(cluster if cluster is not None else scheduler) as client:
            futures = {client.submit(_call, task, key=f"sim-{i}-{os.getpid()}", pure=False): i
                       for i, task in enumerate(tasks)}
            for future in as_completed(futures):
                i = futures[future]
                if future.status == "finished":
                    yield i, future.result(), None
                else:
                    error = future.exception()
                    yield i, None, "".join(traceback.format_exception(error))
    finally:
        if cluster is not None:
            cluster.close()
