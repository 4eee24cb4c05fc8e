"""Each directed link's load from the switches' port counters, sampled in a thread.

A switch counts what it sends on a port (`FabricEgress.port_tx`) and what it receives
(`FabricIngress.port_rx`). The load from A to B is A's transmit counter on the link's port
when A is a switch; when A is a host (which has no counters), it is B's receive counter. The
rate is the difference between the newest sample and the oldest one within the window."""
from __future__ import annotations

import threading
import time
from collections import deque

from controller import encode_fabric
from controller.p4rt import P4RuntimeError
from fabricmodel.topology import Topology

WINDOW_S = 1.0


def link_counter(topo: Topology, src: str, dst: str, link) -> tuple[str, int, str]:
    """Where the bytes from `src` to `dst` over `link` are counted: (switch, port, tx|rx)."""
    if src in topo.switches:
        return src, link.port_of(src), "tx"
    return dst, link.port_of(dst), "rx"


class LoadSampler:
    """Polls every connected switch's port counters every `period` seconds."""

    def __init__(self, fabric, period: float = 0.25, window: float = WINDOW_S) -> None:
        self.fabric, self.period, self.window = fabric, period, window
        self._samples: dict[tuple[str, int, str], deque] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="liveview-loads", daemon=True)

    def start(self) -> LoadSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.period)

    def sample(self) -> None:
        """One reading of every connected switch (a switch that fails to answer is skipped:
        its links show no load until it answers again)."""
        topo = self.fabric.intent.topo
        for name, dev in self.fabric.devices.items():
            if not dev.connected:
                continue
            try:
                ports, _ = encode_fabric.read_counters(topo, dev)
            except P4RuntimeError:
                continue
            now = time.monotonic()
            with self._lock:
                for port, c in ports.items():
                    for kind in ("tx", "rx"):
                        if f"{kind}_bytes" in c:
                            self._push((name, port, kind), now, c[f"{kind}_bytes"])

    def _push(self, key, now: float, nbytes: int) -> None:
        q = self._samples.setdefault(key, deque())
        q.append((now, nbytes))
        while len(q) > 2 and now - q[1][0] >= self.window:
            q.popleft()

    def rate_bps(self, key: tuple[str, int, str]) -> float:
        """Bits per second over the window, 0 until two samples exist."""
        with self._lock:
            q = self._samples.get(key)
            if not q or len(q) < 2:
                return 0.0
            (t0, b0), (t1, b1) = q[0], q[-1]
        return max(0, b1 - b0) * 8 / (t1 - t0) if t1 > t0 else 0.0

    def link_loads(self) -> dict[tuple[int, str], float]:
        """(link index, source node) -> bits/s, both directions of every link."""
        topo = self.fabric.intent.topo
        loads = {}
        for lk in topo.links:
            for src, dst in ((lk.a, lk.b), (lk.b, lk.a)):
                loads[(lk.index, src)] = self.rate_bps(link_counter(topo, src, dst, lk))
        return loads
