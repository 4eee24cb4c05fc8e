"""Was an emulated run faithful? Mininet-HiFi's rule (Handigol et al., CoNEXT 2012): a result
measured on processes that share CPUs is only as good as their schedule was kept. Three
monitors, each a length of time over the run's window:

- a switch port's **lost link time**: it owed a packet (queued, or waiting in the port's receive
  ring) and sent none for longer than its pacer can make up (p4switch's monitor, `fidelity T0
  T1` on its control socket: the episodes it keeps, clipped to the window);
- a rank's **transport stall**: its QPs had data, window and pacing credit and did not send
  (`Stats.stall_s`);
- a process's **CPU run-queue wait** (`/proc/<pid>/task/*/schedstat`, second field): runnable,
  not running (its most waiting thread's).

Why one share of the window bounds them all: a collective's completion time is the length of
its critical path; a stretch of time in which a link or a process on that path did not do its
work adds at most its own length to it. So when no port, rank or process lost more than
TOLERANCE of the window, the measured time is within about TOLERANCE of what the configured
network would give (each ratio to a bound with it); a run with one that did is marked not
faithful, the worst offender named."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

# Share of the run's window any one port, rank or process may lose: the bottleneck links then
# ran within 5 % of their rate while they had packets to send, and no process of the run
# waited for a CPU for more than 5 % of it. There is no absolute floor: a stall of d moves a
# CCT by up to d, so a floor F would let a collective of T be off by F / T (a 4 ms scheduler
# slice is 11 % of a 37 ms Reduce-Scatter); a launch too short to stay within 5 % of its
# window on a shared CPU is measured with a bigger message, not judged more leniently.
TOLERANCE = 0.05


class ThreadClocks:
    """Every thread's schedstat of one process (s on a CPU, s runnable but waiting for one),
    read through descriptors kept open between samples: reopening each file costs ~50 us a
    thread, which at 20 samples a second over the demo's switches was a fifth of a core, taken
    from the CPUs it measures."""

    def __init__(self, pid: int | str):
        self.task_dir = f"/proc/{pid}/task"
        self.fds: dict[str, int] = {}

    def read(self) -> dict[str, tuple[float, float]]:
        """thread id -> (run s, wait s) so far; {} once the process is gone."""
        try:
            tids = set(os.listdir(self.task_dir))
        except OSError:
            tids = set()
        for tid in set(self.fds) - tids:
            os.close(self.fds.pop(tid))
        out = {}
        for tid in tids:
            try:
                if tid not in self.fds:
                    self.fds[tid] = os.open(f"{self.task_dir}/{tid}/schedstat", os.O_RDONLY)
                run, wait = os.pread(self.fds[tid], 96, 0).split()[:2]
            except (OSError, ValueError):
                continue           # a thread that ended meanwhile
            out[tid] = (int(run) / 1e9, int(wait) / 1e9)
        return out

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


def thread_waits(pid: int | str = "self") -> dict[str, float]:
    """thread id -> s it was runnable but waiting for a CPU so far; {} once the process is
    gone."""
    clocks = ThreadClocks(pid)
    try:
        return {tid: wait for tid, (_, wait) in clocks.read().items()}
    finally:
        clocks.close()


def wait_between(before: dict[str, float], after: dict[str, float]) -> float:
    """A process's run-queue wait between two thread_waits readings: its most waiting
    thread's (two threads waiting at once, a switch's ingress and egress, delay its packets
    once, not twice)."""
    return max((w - before.get(t, 0.0) for t, w in after.items()), default=0.0)


def waits_between(before: dict[str, dict], after: dict[str, dict]) -> dict[str, float]:
    return {n: max(0.0, wait_between(before.get(n, {}), after[n])) for n in after}


@dataclass
class Verdict:
    window_s: float
    faithful: bool | None                 # None: nothing was measured
    worst: str = ""                       # the worst offender, in words
    worst_share: float = 0.0              # its lost time over the window
    measured: dict = field(default_factory=dict)

    def column(self) -> str:
        """The tables' fidelity column."""
        if self.faithful is None:
            return "unmeasured"
        return "yes" if self.faithful else f"NO: {self.measured['short']}"

    def as_dict(self) -> dict:
        return {"faithful": self.faithful, "window_s": self.window_s, "worst": self.worst,
                "worst_share": self.worst_share, "tolerance": TOLERANCE, **self.measured}


def judge(window_s: float, ports: dict[str, tuple[float, float]] | None = None,
          stalls: dict[str, float] | None = None, waits: dict[str, float] | None = None) -> Verdict:
    """The verdict of one run: ports ("leaf1 port 3" -> (lost s, its longest episode s[,
    partial: the monitor forgot older episodes, the loss is a lower bound])), ranks'
    transport stalls ("rank 2" -> s) and processes' run-queue waits ("spine1" -> s), each
    against TOLERANCE of the window. The worst offender named is the worst port over the
    tolerance, else the worst rank, else the worst process: what the network did not do
    before the CPU wait that is its likely cause."""
    ports, stalls, waits = ports or {}, stalls or {}, waits or {}
    window = max(window_s, 1e-9)
    kinds = [[(lost / window, f"{name} lost {least}{lost * 1e3:.0f} ms of link time "
                              f"(a packet {late * 1e3:.0f} ms late)",
               f"{name} lost {least}{lost * 1e3:.0f} ms")
              for name, (lost, late, *partial) in ports.items()
              for least in ["at least " if any(partial) else ""]],
             [(s / window, f"{name}'s QPs stalled {s * 1e3:.0f} ms", f"{name} stalled {s * 1e3:.0f} ms")
              for name, s in stalls.items()],
             [(w / window, f"{name} waited {w * 1e3:.0f} ms for a CPU", f"{name} CPU wait {w * 1e3:.0f} ms")
              for name, w in waits.items()]]
    measured = {"ports_lost_s": {n: round(v[0], 6) for n, v in ports.items()},
                "ports_late_max_s": {n: round(v[1], 6) for n, v in ports.items()},
                "stall_s": {n: round(v, 6) for n, v in stalls.items()},
                "runq_wait_s": {n: round(v, 6) for n, v in waits.items()}}
    if not any(kinds):
        return Verdict(window_s, None, measured=measured)
    over = [max(k) for k in kinds if k and max(k)[0] > TOLERANCE]
    share, worst, short = over[0] if over else max(max(k) for k in kinds if k)
    return Verdict(window_s, not over, f"{worst}, {share:.0%} of {window_s:.2f} s", share,
                   measured | {"offenders": [w for k in kinds for sh, w, _ in sorted(k, reverse=True)
                                             if sh > TOLERANCE],
                               "short": f"{short} ({share:.0%})"})


def rank_measures(rows: list[dict]) -> tuple[dict[str, float], dict[str, float]]:
    """The ranks' own monitors from their result rows: (stalls, run-queue waits) by rank."""
    stalls = {f"rank {r['rank']}": r["stall_s"] for r in rows if "stall_s" in r}
    waits = {f"rank {r['rank']}": r["runq_wait_s"] for r in rows if "runq_wait_s" in r}
    return stalls, waits


def judge_rows(rows: list[dict], ports: dict | None = None, waits: dict | None = None,
               window_s: float | None = None) -> Verdict:
    """A launch's verdict: its ranks' rows (their stalls and run-queue waits over the
    collective's own window), the switches' ports and other processes (switches, fabricd)
    measured over `window_s` (default: the slowest rank's CCT)."""
    stalls, rank_waits = rank_measures(rows)
    window = window_s if window_s is not None else max((r["cct_s"] for r in rows), default=0.0)
    return judge(window, ports, stalls, rank_waits | (waits or {}))


