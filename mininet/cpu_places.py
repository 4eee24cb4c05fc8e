"""CPU provisioning as Mininet-HiFi does it (Handigol et al., CoNEXT 2012: a cpuset or a CPU
share per host and switch): tenants isolated in the network get their own CPUs too, so that
their switches and hosts do not queue for the same core. Each group (a vClos slice: its
switches and its job's ranks) gets a disjoint set of the machine's CPUs when there are at
least as many CPUs as groups (on 2 cores: one each); with fewer, groups share them in turn,
and the fidelity verdict of each run says whether that mattered.

A cpuset is a CPU affinity mask that the kernel applies to every task in it; here the mask is
set on the tasks themselves (`sched_setaffinity`, every thread of a switch process; the
launching thread of a job's ranks, whose children inherit it), which works where no cgroup
hierarchy is mounted, as on these machines."""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path


def machine_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def shares(groups: list[str], cpus: list[int] | None = None) -> dict[str, set[int]]:
    """group -> its CPUs: disjoint equal parts when there are enough, else one each in turn."""
    cpus = cpus or machine_cpus()
    if len(cpus) >= len(groups):
        per = len(cpus) // len(groups)
        return {g: set(cpus[i * per:(i + 1) * per]) for i, g in enumerate(groups)}
    return {g: {cpus[i % len(cpus)]} for i, g in enumerate(groups)}


def place_process(pid: int, cpus: set[int]) -> None:
    """Every thread of process `pid` onto `cpus` (threads it starts later inherit it)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            os.sched_setaffinity(int(task.name), cpus)
        except (ProcessLookupError, OSError):
            continue               # a thread that ended meanwhile


@contextmanager
def placed(pids: dict[str, int], cpus: dict[str, set[int]]):
    """Processes (name -> pid) on their group's CPUs (name -> CPUs) for the block; back on
    every CPU of the machine after it."""
    everything = set(machine_cpus())
    try:
        for name, pid in pids.items():
            place_process(pid, cpus[name])
        yield
    finally:
        for pid in pids.values():
            if Path(f"/proc/{pid}").exists():
                place_process(pid, everything)


@contextmanager
def this_thread_on(cpus: set[int] | None):
    """The calling thread (and what it starts: a launch's rank processes) on `cpus`."""
    if not cpus:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)          # pid 0: the calling thread
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def describe(cpus: dict[str, set[int]]) -> str:
    return ", ".join(f"{g} on CPU {','.join(map(str, sorted(c)))}" for g, c in cpus.items())
