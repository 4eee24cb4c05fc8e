"""The switch process on the native backend: ports, traffic manager and pipeline all run in
the program's compiled C (p4switch/native/device.c), in two threads that Python starts and that
run without the GIL. Python keeps the P4Runtime server: its writes go into the native state
between two packet batches, and PacketIn/digests come back over a datagram socket pair. Same
interface as Device, so `serve()` and the control socket work with either."""
from __future__ import annotations

import ctypes
import os
import socket
import sys
import threading

from .ports import PortGone, open_ports

# --io: how device.c receives (its IO_* numbers, in this order); the first is the default
IO_MODES = ("mmap-v2", "mmap-v3", "afxdp", "recvmmsg")
_IO_NUMBER = {"recvmmsg": 0, "mmap-v2": 1, "mmap-v3": 2, "afxdp": 3}


class NativeQueues:
    """The egress queue settings (as TrafficManager's API for the control socket), applied to
    whichever native pipeline is installed."""

    def __init__(self, depth: int = 64):
        self.settings: list[tuple] = [(None, "depth", depth)]
        self.lib = None

    def set_depth(self, port, depth):
        if depth < 1:
            raise ValueError(f"queue depth must be >= 1 packet, not {depth}")
        self.settings.append((port, "depth", depth))
        self._apply(port, "depth", depth)

    def set_rate(self, port, rate, unit="pps"):
        if rate < 0 or unit not in ("pps", "bps"):
            raise ValueError(f"queue rate must be >= 0 pps or bps, not {rate} {unit}")
        self.settings.append((port, "rate", (rate, unit)))
        self._apply(port, "rate", (rate, unit))

    def _apply(self, port, what, value):
        if self.lib is None:
            return
        p = -1 if port is None else port
        if what == "depth":
            self.lib.dev_set_queue(p, value, 0.0, 0, 1, 0)
        else:
            self.lib.dev_set_queue(p, 0, float(value[0]), int(value[1] == "bps"), 0, 1)

    def attach(self, lib):
        self.lib = lib
        for port, what, value in self.settings:
            self._apply(port, what, value)

    def snapshot(self):
        if self.lib is None:
            return {}
        ports = (ctypes.c_uint32 * 512)()
        vals = (ctypes.c_double * (6 * 512))()
        n = self.lib.dev_queues(ports, vals, 512)
        return {ports[i]: (int(vals[6 * i]), vals[6 * i + 1], "bps" if vals[6 * i + 2] else "pps",
                           int(vals[6 * i + 3]), int(vals[6 * i + 4]), int(vals[6 * i + 5]))
                for i in range(n)}

    def fidelity(self, t0: float, t1: float):
        """port -> (link time lost s, the longest episode s, episodes, partial) within the
        monotonic window [t0, t1]: the monitor of device.c (traffic_manager.Episodes says
        what each value is)."""
        if self.lib is None:
            return {}
        ports = (ctypes.c_uint32 * 512)()
        vals = (ctypes.c_double * (4 * 512))()
        n = self.lib.dev_fidelity(t0, t1, ports, vals, 512)
        return {ports[i]: (vals[4 * i], vals[4 * i + 1], int(vals[4 * i + 2]), bool(vals[4 * i + 3]))
                for i in range(n)}

    def flush(self):
        """A new pipeline starts with empty queues (its own native state)."""

    def stop(self):
        """The queues stop with the pipeline's threads."""


class NativeDevice:
    backend = "native"

    def __init__(self, interfaces: dict[int, str], cpu_port: int | None, tm: NativeQueues,
                 io: str = IO_MODES[0], packet_priority: int = 0):
        self.cpu_port = cpu_port
        self.io = io
        self.packet_priority = packet_priority
        self.tm = tm
        self.lock = threading.RLock()        # the control plane's; packets take the native lock
        self.sw = None
        self.on_cpu_packet = None
        self.on_digests = None
        self.ports = open_ports(interfaces)
        self._punt_rx, self._punt_tx = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._wake_rx, self._wake_tx = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._punt_thread = threading.Thread(target=self._punt_loop, name="punt", daemon=True)

    # --- control ---------------------------------------------------------------------------
    def install(self, sw) -> None:
        """Stop the old pipeline's threads, start the new one's (None: drop everything)."""
        if sw is not None and getattr(sw, "backend", "python") != "native":
            raise ValueError("the native device runs NativeSwitch pipelines only")
        with self.lock:
            self._stop_loops()
            self.sw = sw
            self._drain()
            if sw is not None:
                self._start_loops(sw.lib)

    def start(self) -> None:
        self._punt_thread.start()

    def stop(self) -> None:
        with self.lock:
            self._stop_loops()
        self.close()

    def close(self) -> None:
        self._closed = True
        for port in self.ports.values():
            port.close()
        for s in ("_punt_rx", "_punt_tx", "_wake_rx", "_wake_tx"):
            if hasattr(self, s):
                getattr(self, s).close()

    def inject(self, port: int, frame: bytes) -> None:
        sw = self.sw
        if sw is not None:
            sw.lib.dev_inject(port, frame, len(frame))

    # --- the native loops ------------------------------------------------------------------
    def _start_loops(self, lib) -> None:
        numbers = sorted(self.ports)
        fds = (ctypes.c_int * max(len(numbers), 1))(*[self.ports[n].fileno() for n in numbers])
        nums = (ctypes.c_uint32 * max(len(numbers), 1))(*numbers)
        lib.dev_configure(len(numbers), fds, nums, -1 if self.cpu_port is None else self.cpu_port,
                          self._punt_tx.fileno(), _IO_NUMBER[self.io])
        self.tm.attach(lib)
        self._lib = lib
        # the rings are set up before install() returns: a ring being set up takes the socket
        # off the interface for an RCU grace period (milliseconds on a busy machine), and
        # frames sent then are lost
        self._ring_fds = (len(numbers), fds, nums)
        if lib.dev_rings_open(*self._ring_fds) < 0:
            print(f"p4switch: a port takes no {self.io} socket ring: receiving with recvmmsg",
                  file=sys.stderr, flush=True)
            self.io = "recvmmsg"
        self._threads = [threading.Thread(target=self._ingress, args=(lib,), name="ingress", daemon=True),
                         threading.Thread(target=self._egress, args=(lib,), name="egress", daemon=True)]
        for t in self._threads:
            t.start()

    def _realtime(self) -> None:
        """The calling packet thread under SCHED_FIFO at packet_priority (0: left as it is), so
        that it runs when a packet is due, before any process of the machine's ordinary
        scheduling class, as a kernel datapath's softirq does."""
        if not self.packet_priority:
            return
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(self.packet_priority))
        except OSError as exc:
            print(f"p4switch: --packet-priority {self.packet_priority}: {exc.strerror}; the "
                  "packet threads run in the ordinary scheduling class", file=sys.stderr,
                  flush=True)
            self.packet_priority = 0

    def _egress(self, lib) -> None:
        self._realtime()
        lib.dev_egress_loop()

    def _ingress(self, lib) -> None:
        self._realtime()
        while True:
            numbers = sorted(self.ports)
            fds = (ctypes.c_int * max(len(numbers), 1))(*[self.ports[n].fileno() for n in numbers])
            nums = (ctypes.c_uint32 * max(len(numbers), 1))(*numbers)
            gone = ctypes.c_int(-1)
            if not lib.dev_ingress_loop(len(numbers), fds, nums, self._wake_rx.fileno(), ctypes.byref(gone)):
                return
            port = self.ports.pop(gone.value, None)
            if port is not None:
                print(f"p4switch: port {port.number} ({port.ifname}) is gone; the switch keeps running "
                      "without it", file=sys.stderr, flush=True)

    def _stop_loops(self) -> None:
        if not self._threads:
            return
        self._lib.dev_stop()
        self._wake_tx.send(b"x")
        for t in self._threads:
            t.join(timeout=5)
        self._lib.dev_rings_close(*self._ring_fds)
        try:
            while self._wake_rx.recv(16, socket.MSG_DONTWAIT):
                pass
        except BlockingIOError:
            pass
        self._threads = []
        self.tm.lib = None

    def _drain(self) -> None:
        for port in list(self.ports.values()):
            try:
                while port.receive(256):
                    pass
            except PortGone:
                self.ports.pop(port.number, None)

    def _punt_loop(self) -> None:
        while not self._closed:
            try:
                msg = self._punt_rx.recv(65536)
            except OSError:
                return
            if not msg:
                continue
            sw = self.sw
            if msg[:1] == b"P" and self.on_cpu_packet:
                self.on_cpu_packet(msg[1:])
            elif msg[:1] == b"D" and sw is not None:
                digests = sw.digests()
                if digests and self.on_digests:
                    self.on_digests(digests)
