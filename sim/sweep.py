"""Independent simulations as tasks: one after another in this process, or on a Dask cluster
(a local one of `workers` processes, or an existing one at `scheduler`: `dask-scheduler` +
`dask-worker`, or dask-jobqueue on Slurm; sim/README.md). Every run is seeded and shares
nothing with the others, so the rows are those of a serial run, in task order. A task that
fails is reported with its parameters and the others still run.

Where the runs go (`plan`): `workers=0` in this process; `workers=N` a local cluster of N;
`scheduler` that cluster; neither (the default) in this process unless the sweep is large
enough for a local cluster to win: at least 2 runs, 2 CPUs and `DASK_AT_PACKETS` packets in
all (a task's `packets`, the data packets its run sends). A local cluster costs about 3 s to
start and each worker's first run about 0.1 s to load the engine's cached build (built here
before the cluster starts); one core simulates about a million packets in 2-3 s, so below
that size the serial run finishes first.
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
    packets: int = 0          # the data packets it sends (its size, for `plan`)


@dataclass
class Outcome:
    rows: list[dict] = field(default_factory=list)        # in task order
    failures: list[tuple[Task, str]] = field(default_factory=list)


DASK_AT_PACKETS = 4_000_000


def default_workers() -> int:
    return os.cpu_count() or 1


def plan(tasks: list[Task], workers: int | None, scheduler: str | None) -> int | None:
    """The local workers to start (0: run in this process; None: use `scheduler`)."""
    if scheduler is not None:
        if workers is not None:
            raise ValueError("--workers and --scheduler exclude each other: the scheduler's "
                             "cluster has its own workers")
        return None
    if workers is not None:
        return workers
    cpus = default_workers()
    if len(tasks) >= 2 and cpus >= 2 and sum(t.packets for t in tasks) >= DASK_AT_PACKETS:
        return min(cpus, len(tasks))
    return 0


def run(tasks: list[Task], *, workers: int | None = None, scheduler: str | None = None,
        desc: str = "sim", on_row: Callable[[dict], None] | None = None,
        say: Callable[[str], None] = tqdm.write) -> Outcome:
    """Run every task where `plan` puts them; `on_row` sees each row as its task completes
    (any order); `say` gets the cluster's dashboard address."""
    local = plan(tasks, workers, scheduler)
    results: dict[int, list[dict]] = {}
    failures: dict[int, str] = {}
    with tqdm(total=len(tasks), unit="run", desc=desc, dynamic_ncols=True) as bar:
        for i, rows, error in _execute(tasks, local, scheduler, say):
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


def _execute(tasks: list[Task], workers: int | None, scheduler: str | None,
             say: Callable[[str], None]) -> Iterable[tuple[int, list[dict] | None, str | None]]:
    if scheduler is None and workers == 0:
        for i, task in enumerate(tasks):
            try:
                yield i, _call(task), None
            except Exception:                              # reported, the others go on
                yield i, None, traceback.format_exc()
        return
    from dask.distributed import Client, LocalCluster, as_completed

    from .engine import library

    library()        # built here once, so that local workers only load the cached build
    cluster = None
    if scheduler is None:
        # loopback only, any free ports: scheduler, workers and dashboard
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               host="127.0.0.1", scheduler_port=0,
                               dashboard_address="127.0.0.1:0")
    try:
        with Client(cluster if cluster is not None else scheduler) as client:
            say(f"sim: Dask dashboard at {client.dashboard_link}")
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
