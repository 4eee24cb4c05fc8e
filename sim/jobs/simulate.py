"""The discrete-event run (SimPy): arrivals, a first-fit queue, and jobs that advance one
iteration at a time at the speed the scheme's contention allows."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import simpy

from fabricmodel.topology import Topology

from .trace import ITERATIONS, Job


@dataclass(frozen=True)
class Outcome:
    job: Job
    start: float
    end: float
    slowdown: float          # mean communication slowdown over the job's iterations
    spans_leaves: bool       # its traffic crosses the fabric

    @property
    def jct(self) -> float:
        return self.end - self.job.arrival

    @property
    def wait(self) -> float:
        return self.start - self.job.arrival


def run(scheme_cls, topo: Topology, trace: list[Job], seed: int,
        on_done: Callable[[], None] = lambda: None) -> list[Outcome]:
    """Jobs wait in arrival order; whenever one arrives or ends, every waiting job that the
    scheme can place now starts (first fit: a small job may pass a large one that waits).
    A job that fits with n hosts fits with fewer, so a pass stops trying sizes >= the
    smallest that was refused."""
    env = simpy.Environment()
    scheme = scheme_cls(topo, seed)
    queue: list[Job] = []
    out: list[Outcome] = []

    def schedule() -> None:
        refused = None
        for job in list(queue):
            if refused is not None and job.gpus >= refused:
                continue
            if scheme.place(job.name, job.gpus) is None:
                refused = job.gpus
                continue
            queue.remove(job)
            env.process(execute(job))

    def execute(job: Job):
        start, total = env.now, 0.0
        step = job.service / ITERATIONS
        spans = scheme.spans_leaves(job.name)
        for _ in range(ITERATIONS):
            s = scheme.slowdown(job.name) if spans else 1.0
            total += s
            yield env.timeout(step * ((1 - job.comm_share) + job.comm_share * s))
        scheme.release(job.name)
        out.append(Outcome(job, start, env.now, total / ITERATIONS, spans))
        on_done()
        schedule()

    def arrivals():
        for job in trace:
            yield env.timeout(job.arrival - env.now)
            queue.append(job)
            schedule()

    env.process(arrivals())
    env.run()
    if queue:
        raise RuntimeError(f"{scheme.name}: {len(queue)} jobs never placed (larger than "
                           f"the fabric?)")
    return out
