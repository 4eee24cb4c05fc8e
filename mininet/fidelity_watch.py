"""The fidelity monitor of an emulated fabric (collectives/fidelity.py says what is measured and
why): after each launch of ranks every p4switch's pacing monitor (its control socket's
`fidelity T0 T1`) says how much link time each port lost within the collectives' window (first
start to last end, in CLOCK_MONOTONIC, which the switches, the ranks in their namespaces and
this process share), and the run-queue wait of every switch process and fabricd, sampled while
the launch runs, is cut to the same window (the ranks' start-up, seconds of Python imports on
the same CPUs, is not the experiment); the ranks measure their own stalls and waits. Each rank
row then carries the launch's verdict (`row["fidelity"]`), which the tables print and the JSON
lines keep."""
from __future__ import annotations

import bisect
import threading
import time
from pathlib import Path

import click

from collectives import fidelity
from p4switch.device.control import send_command


def read_ports(control: Path, t0: float, t1: float) -> dict[int, tuple[float, float, bool]]:
    """A p4switch's monitor over the monotonic window [t0, t1]: port -> (link time lost s,
    the longest episode s, partial); {} when the switch does not answer (BMv2 has no such
    socket)."""
    try:
        reply = send_command(str(control), f"fidelity {t0:.6f} {t1:.6f}", timeout=5.0)
    except OSError:
        return {}
    if reply.startswith("error"):
        return {}
    out = {}
    for row in reply.split(" | ")[1:]:
        p, lost, longest, _, partial = row.split()
        out[int(p)] = (float(lost), float(longest), partial == "1")
    return out


# An unfaithful measurement runs again up to RETRIES times (the demo's --fidelity-retries)
RETRIES = 2
SAMPLE_S = 0.05          # the run-queue sampler's period: a few per collective at least


class WaitSampler:
    """The run-queue wait (and CPU time) of some processes, sampled every SAMPLE_S in a thread
    until stopped; between(t0, t1) interpolates each one's wait in a monotonic window,
    cpu_between(t0, t1) their CPU seconds together."""

    def __init__(self, pids: dict[str, int]):
        self.clocks = {name: fidelity.ThreadClocks(pid) for name, pid in pids.items() if pid}
        self.times: list[float] = []
        self.samples: list[dict[str, dict]] = []
        self.cpu: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="runq-sampler", daemon=True)

    def start(self) -> WaitSampler:
        self._sample()
        self._thread.start()
        return self

    def _sample(self) -> None:
        now = {name: clock.read() for name, clock in self.clocks.items()}
        self.samples.append({n: {tid: w for tid, (_, w) in th.items()} for n, th in now.items()})
        self.cpu.append(sum(r for th in now.values() for r, _ in th.values()))
        self.times.append(time.monotonic())

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self._sample()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()
        for clock in self.clocks.values():
            clock.close()

    def _at(self, t: float) -> dict[str, float]:
        i = bisect.bisect_left(self.times, t)
        if i <= 0:
            return self.samples[0]
        if i >= len(self.times):
            return self.samples[-1]
        t0, t1 = self.times[i - 1], self.times[i]
        a, b = self.samples[i - 1], self.samples[i]
        f = (t - t0) / (t1 - t0) if t1 > t0 else 1.0
        return {n: {tid: a.get(n, {}).get(tid, 0.0) + f * (w - a.get(n, {}).get(tid, 0.0))
                    for tid, w in threads.items()} for n, threads in b.items()}

    def between(self, t0: float, t1: float) -> dict[str, float]:
        return fidelity.waits_between(self._at(t0), self._at(t1))

    def cpu_between(self, t0: float, t1: float) -> float:
        def at(t: float) -> float:
            i = min(max(bisect.bisect_left(self.times, t), 1), len(self.times) - 1)
            a, b = self.times[i - 1], self.times[i]
            f = min(max((t - a) / (b - a), 0.0), 1.0) if b > a else 1.0
            return self.cpu[i - 1] + f * (self.cpu[i] - self.cpu[i - 1])
        return at(t1) - at(t0) if len(self.times) > 1 else 0.0


class FabricMonitor:
    """switches: name -> (pid, control socket or None); others: name -> pid (fabricd)."""

    def __init__(self, switches: dict[str, tuple[int, Path | None]], others: dict[str, int]):
        self.switches, self.others = switches, others

    @classmethod
    def of_net(cls, net, fabricd=None) -> FabricMonitor:
        """The Mininet fabric's switches (mininet/p4_switch.py) and fabricd."""
        switches = {sw.name: (sw.proc.pid, getattr(sw, "control_path", None))
                    for sw in net.switches if getattr(sw, "proc", None) is not None}
        others = {"fabricd": fabricd.proc.pid} if fabricd is not None and fabricd.proc else {}
        return cls(switches, others)

    def ports(self, t0: float, t1: float) -> dict[str, tuple[float, float, bool]]:
        """"leaf1 port 3" -> its link time lost within [t0, t1] (read_ports)."""
        return {f"{name} port {port}": lost
                for name, (_, ctl) in self.switches.items() if ctl
                for port, lost in read_ports(ctl, t0, t1).items()}

    def read(self) -> WaitSampler:
        """A sampler of the processes' waits from now on, for verdict()."""
        pids = {name: pid for name, (pid, _) in self.switches.items()} | self.others
        return WaitSampler(pids).start()

    def verdict(self, sampler: WaitSampler, rows: list[dict]) -> fidelity.Verdict:
        """The verdict of the launch that produced `rows`, `sampler` started just ahead of it:
        the ports' lost link time and the processes' waits within the collectives' window
        (first start to last end)."""
        sampler.stop()
        t0, t1 = window(rows)
        return fidelity.judge_rows(rows, self.ports(t0, t1), sampler.between(t0, t1),
                                   window_s=t1 - t0)


def window(rows: list[dict]) -> tuple[float, float]:
    """The collectives' window of a launch's rows: (first start, last end), monotonic s."""
    return (min((r["started_mono"] for r in rows), default=0.0),
            max((r["started_mono"] + r["cct_s"] for r in rows), default=0.0))


def watched(monitor: FabricMonitor | None, launch, *args, **kwargs) -> list[dict]:
    """launch(*args, **kwargs) -> its rows, each with the launch's verdict (its dict)."""
    if monitor is None:
        return launch(*args, **kwargs)
    sampler = monitor.read()
    try:
        rows = launch(*args, **kwargs)
    except BaseException:
        sampler.stop()
        raise
    v = monitor.verdict(sampler, rows).as_dict()
    return [r | {"fidelity": v} for r in rows]


def column(rows: list[dict]) -> str:
    """The fidelity column of a table row made of these launch rows (possibly of several
    launches): yes when every launch was faithful, else the worst offender."""
    verdicts = [r["fidelity"] for r in rows if r.get("fidelity")]
    if not verdicts:
        return "unmeasured"
    bad = [v for v in verdicts if v["faithful"] is False]
    if bad:
        worst = max(bad, key=lambda v: v["worst_share"])
        return f"NO: {worst.get('short', worst['worst'])}"
    return "yes" if all(v["faithful"] for v in verdicts) else "unmeasured"


def faithful(rows: list[dict]) -> bool:
    return column(rows) == "yes"


def rerun_unfaithful(measure, rows_of, what: str, retries: int = RETRIES):
    """measure() -> a result whose launch rows are rows_of(result); measured again while those
    are not faithful, at most `retries` times, each re-run said in one line; the last kept."""
    result = measure()
    for attempt in range(retries):
        verdict = column(rows_of(result))
        if not verdict.startswith("NO"):
            break
        click.echo(f"demo: {what}: not faithful ({verdict}); re-run {attempt + 1}/{retries}")
        result = measure()
    return result
