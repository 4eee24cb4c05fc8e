"""Traffic manager: one FIFO per egress port with a depth (packets, tail drop when full) and a
service rate (packets or bits per second, 0 = as fast as egress runs), like simple_switch's
set_queue_depth / set_queue_rate. Records the queueing metadata egress sees."""
from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field

DEFAULT_DEPTH = 64      # simple_switch's default queue depth
_UNITS = {"pps": ("pps", 1), "bps": ("bps", 1), "kbps": ("bps", 1e3), "mbps": ("bps", 1e6),
          "gbps": ("bps", 1e9)}

# A paced queue's schedule keeps up to this much link time lost to late wake-ups (sending those
# packets back to back), so a busy machine still paces at the rate given; a schedule further
# behind (an idle queue) restarts from now. The same rule as p4switch/native/device.c.
PACE_CATCH_UP = 0.002
# The fidelity monitor, as device.c's: a paced packet is owed its departure at the later of the
# queue's schedule and its arrival; leaving later than PACE_CATCH_UP (which the schedule can no
# longer make up) loses that much link time: the port owed a packet and sent none. A port keeps
# its last EPISODES such episodes, so that a reader asks for the time lost within its own
# window (a collective's, not the seconds its processes take to start and stop around it).
EPISODES = 1024


def parse_rate(text: str) -> tuple[float, str]:
    """'1000' or '1000pps' -> (1000, 'pps'); '10mbps' -> (1e7, 'bps'). ValueError if bad."""
    t = text.strip().lower()
    for suffix in sorted(_UNITS, key=len, reverse=True):
        if t.endswith(suffix):
            unit, scale = _UNITS[suffix]
            value = float(t[:-len(suffix)]) * scale
            break
    else:
        unit, value = "pps", float(t)
    if value < 0 or value != value:
        raise ValueError(f"rate '{text}' must be >= 0")
    return value, unit


class Episodes:
    """A port's lost-time episodes: (monotonic s it ended, s lost), the last EPISODES."""

    def __init__(self):
        self.kept: collections.deque = collections.deque(maxlen=EPISODES)
        self.count = 0

    def add(self, end: float, length: float) -> None:
        self.kept.append((end, length))
        self.count += 1

    def within(self, t0: float, t1: float) -> tuple[float, float, int, bool]:
        """The episodes overlapping [t0, t1]: (link time lost within it, each episode clipped
        to it; the longest of them, whole; how many; partial: older episodes that may overlap
        it too were forgotten, so the lost time is a lower bound)."""
        lost, longest, n = 0.0, 0.0, 0
        for end, length in self.kept:
            part = min(end, t1) - max(end - length, t0)
            if part > 0:
                lost, longest, n = lost + part, max(longest, length), n + 1
        partial = self.count > len(self.kept) and self.kept[0][0] > t0
        return lost, longest, n, partial


@dataclass
class EgressQueue:
    depth: int
    rate: float                          # per second, 0 = unlimited
    unit: str                            # 'pps' or 'bps'
    items: collections.deque = field(default_factory=collections.deque)
    next_departure: float = 0.0          # monotonic seconds
    enqueued: int = 0
    dropped: int = 0
    in_flight: int = 0                   # dequeued, egress not finished
    episodes: Episodes = field(default_factory=Episodes)     # the fidelity monitor


@dataclass(slots=True)
class Dequeued:
    job: object
    port: int
    generation: int
    enq_timestamp: int
    enq_qdepth: int
    deq_timedelta: int
    deq_qdepth: int


class TrafficManager:
    def __init__(self, depth: int = DEFAULT_DEPTH, rate: float = 0.0, unit: str = "pps"):
        self.default_depth, self.default_rate, self.default_unit = depth, rate, unit
        self._queues: dict[int, EgressQueue] = {}
        self._cv = threading.Condition()
        self._rr: list[int] = []
        self._stopping = False
        self._sleeping = False      # the scheduler waits: only then is a notify needed
        self.generation = 0

    # --- configuration (any thread) --------------------------------------------------------
    def set_depth(self, port: int | None, depth: int) -> None:
        if depth < 1:
            raise ValueError(f"queue depth must be >= 1 packet, not {depth}")
        with self._cv:
            if port is None:
                self.default_depth = depth
                for q in self._queues.values():
                    q.depth = depth
            else:
                self._queue(port).depth = depth

    def set_rate(self, port: int | None, rate: float, unit: str = "pps") -> None:
        if rate < 0 or unit not in ("pps", "bps"):
            raise ValueError(f"queue rate must be >= 0 pps or bps, not {rate} {unit}")
        with self._cv:
            targets = self._queues.values() if port is None else [self._queue(port)]
            if port is None:
                self.default_rate, self.default_unit = rate, unit
            for q in targets:
                q.rate, q.unit = rate, unit
            self._cv.notify()

    def snapshot(self) -> dict[int, tuple[int, float, int, int, int]]:
        """port -> (depth, rate, unit, occupancy, enqueued, dropped)."""
        with self._cv:
            return {p: (q.depth, q.rate, q.unit, len(q.items), q.enqueued, q.dropped)
                    for p, q in sorted(self._queues.items())}

    def fidelity(self, t0: float, t1: float) -> dict[int, tuple[float, float, int, bool]]:
        """port -> its lost-time episodes within the monotonic window [t0, t1]
        (Episodes.within)."""
        with self._cv:
            return {p: q.episodes.within(t0, t1) for p, q in sorted(self._queues.items())}

    # --- data path -------------------------------------------------------------------------
    def enqueue(self, port: int, job) -> int | None:
        """Queue `job` for `port` -> its enq_qdepth, or None if tail-dropped."""
        with self._cv:
            q = self._queues.get(port) or self._queue(port)
            depth = len(q.items)
            if depth >= q.depth:
                q.dropped += 1
                return None
            q.items.append((job, time.monotonic_ns() // 1000, depth, self.generation))
            q.enqueued += 1
            if self._sleeping:
                self._cv.notify()
            return depth

    def cut_through(self, port: int) -> bool:
        """May a packet for `port` skip its queue (egress at once, zero queueing metadata)?
        Only when the port is unpaced, its queue is empty and none of its packets is in egress,
        so order is kept. The caller must keep other enqueuers out until that egress is done
        (the device lock does)."""
        with self._cv:
            q = self._queues.get(port) or self._queue(port)
            if q.rate or q.items or q.in_flight:
                return False
            q.enqueued += 1
            return True

    def done(self, port: int) -> None:
        """Egress of a dequeued packet of `port` is finished."""
        with self._cv:
            self._queues[port].in_flight -= 1

    def dequeue(self) -> Dequeued | None:
        """Block until some queue may send (round robin over ports, each paced at its rate);
        None once stop() was called. The caller reports the end of its egress with done()."""
        with self._cv:
            while not self._stopping:
                now_ns = time.monotonic_ns()
                now = now_ns / 1e9
                wait = None
                for i, port in enumerate(self._rr):
                    q = self._queues[port]
                    if not q.items:
                        continue
                    if q.rate and q.next_departure > now:
                        gap = q.next_departure - now
                        wait = gap if wait is None else min(wait, gap)
                        continue
                    job, enq_ts, enq_depth, gen = q.items.popleft()
                    q.in_flight += 1
                    if q.rate:
                        cost = 1.0 if q.unit == "pps" else 8.0 * _length(job)
                        behind = q.next_departure > now - PACE_CATCH_UP
                        late = now - max(enq_ts / 1e6, q.next_departure)
                        if not behind and late > PACE_CATCH_UP:
                            q.episodes.add(now, late)
                        q.next_departure = (q.next_departure if behind else now) + cost / q.rate
                    self._rr.append(self._rr.pop(i))      # served ports go to the back
                    return Dequeued(job, port, gen, enq_ts, enq_depth, now_ns // 1000 - enq_ts,
                                    len(q.items))
                self._sleeping = True
                self._cv.wait(timeout=wait if wait is not None else 0.5)
                self._sleeping = False
            return None

    def flush(self) -> None:
        """Drop everything queued (a new pipeline invalidates the old one's packets)."""
        with self._cv:
            self.generation += 1
            for q in self._queues.values():
                q.items.clear()

    def stop(self) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify_all()

    def _queue(self, port: int) -> EgressQueue:
        q = self._queues.get(port)
        if q is None:
            q = self._queues[port] = EgressQueue(self.default_depth, self.default_rate,
                                                 self.default_unit)
            self._rr.append(port)
        return q


def _length(job) -> int:
    return getattr(job, "packet_length", 0) or 64
