"""The running switch: ports, one ingress thread (poll over all port sockets, parser +
ingress pipeline, into the traffic manager), one egress thread (traffic manager -> egress
pipeline -> transmit); packets for an idle unpaced port skip the queue and finish in the
ingress thread. A single lock serialises every call into the P4 pipeline, which also lets the
P4Runtime server change state between two packets, never inside one."""
from __future__ import annotations

import select
import sys
import threading
import time
import traceback

from .log import EventLog
from .pcap import PortCaptures
from .ports import PortGone, RawPort, open_ports
from .traffic_manager import TrafficManager


class Device:
    backend = "python"       # the pipelines P4Runtime installs run on p4switch's Python backend

    def __init__(self, interfaces: dict[int, str], cpu_port: int | None,
                 tm: TrafficManager, log: EventLog, pcap_dir: str | None = None):
        self.cpu_port = cpu_port
        self.tm = tm
        self.log = log
        self.logging = bool(log)        # checked per packet: a plain attribute is cheapest
        self.dump_bytes = log.dump_bytes   # --dump-packet-data: head of each frame, in hex
        self.lock = threading.RLock()
        self.sw = None
        self.on_cpu_packet = None     # set by the P4Runtime service
        self.on_digests = None
        self.ports = open_ports(interfaces)
        self.captures = PortCaptures(pcap_dir, interfaces) if pcap_dir else None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    # --- control ---------------------------------------------------------------------------
    def install(self, sw) -> None:
        """Swap in a new pipeline (None = drop everything); queued packets of the old one go."""
        with self.lock:
            if sw is not None and self.logging:
                sw.set_logger(self.log)
            self.sw = sw
            self.tm.flush()
        if self.logging:
            self.log("new pipeline installed" if sw is not None else "pipeline removed")

    def start(self) -> None:
        for target, name in ((self._ingress_loop, "ingress"), (self._egress_loop, "egress")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        self.tm.stop()
        for t in self._threads:
            t.join(timeout=2)
        self.close()

    def close(self) -> None:
        for port in self.ports.values():
            port.close()
        if getattr(self, "captures", None):
            self.captures.close()

    # --- ingress ---------------------------------------------------------------------------
    def inject(self, port: int, frame: bytes) -> None:
        """Run a frame through ingress as if it arrived on `port` (PacketOut uses the CPU
        port)."""
        if self.logging:
            self.log(f"packet of {len(frame)} bytes injected on port {port}")
        self._ingress(port, frame)

    def _ingress(self, port: int, frame: bytes) -> None:
        with self.lock:
            sw = self.sw
            if sw is None:
                return
            try:
                jobs = sw.ingress(port, frame)
                digests = sw.digests()
            except Exception:
                self._pipeline_error(f"ingress of a packet from port {port}")
                return
            if digests and self.on_digests:
                self.on_digests(digests)
            for job in jobs:
                if self.tm.cut_through(job.egress_port):
                    # An idle unpaced port: egress right here saves a thread hand-off.
                    self._egress(job, time.monotonic_ns() // 1000, 0, 0, 0)
                    continue
                depth = self.tm.enqueue(job.egress_port, job)
                if self.logging:
                    self.log(f"egress queue of port {job.egress_port}: "
                             + ("full, tail drop" if depth is None else f"enqueued at depth "
                                                                        f"{depth}"))

    def _ingress_loop(self) -> None:
        poller = select.poll()
        by_fd = {}
        for port in self.ports.values():
            poller.register(port.fileno(), select.POLLIN)
            by_fd[port.fileno()] = port
        while not self._stop.is_set():
            for fd, events in poller.poll(200):
                port = by_fd[fd]
                try:
                    if events & (select.POLLNVAL | select.POLLHUP):
                        raise PortGone(0, f"{port.ifname}: socket closed")
                    if events & select.POLLERR:
                        port.clear_error()         # a link down only: the port stays
                    frames = port.receive()
                except PortGone as exc:
                    self._port_gone(port, exc)
                    poller.unregister(fd)
                    del by_fd[fd]
                    continue
                for frame in frames:
                    if self.logging:
                        self.log(f"packet of {len(frame)} bytes received on port "
                                 f"{port.number}")
                    if self.dump_bytes:
                        self.log.dump(f"received on port {port.number}", frame)
                    if self.captures:
                        self.captures.inbound(port.number, frame)
                    self._ingress(port.number, frame)

    # --- egress ----------------------------------------------------------------------------
    def _egress_loop(self) -> None:
        while True:
            item = self.tm.dequeue()
            if item is None:
                return
            try:
                with self.lock:
                    if item.generation == self.tm.generation and self.sw is not None:
                        self._egress(item.job, item.enq_timestamp, item.enq_qdepth,
                                     item.deq_timedelta, item.deq_qdepth)
            finally:
                self.tm.done(item.port)

    def _egress(self, job, enq_timestamp, enq_qdepth, deq_timedelta, deq_qdepth) -> None:
        """Egress pipeline and transmission of one packet; the caller holds the lock."""
        try:
            outs = self.sw.egress(job, enq_timestamp=enq_timestamp, enq_qdepth=enq_qdepth,
                                  deq_timedelta=deq_timedelta, deq_qdepth=deq_qdepth)
        except Exception:
            self._pipeline_error(f"egress of a packet to port {job.egress_port}")
            return
        for out in outs:
            if isinstance(out, tuple):
                self._transmit(*out)
            else:     # an egress-to-egress clone or a recirculated packet: queued like any
                self.tm.enqueue(out.egress_port, out)

    def _transmit(self, number: int, frame: bytes) -> None:
        if number == self.cpu_port:
            if self.logging:
                self.log(f"packet of {len(frame)} bytes sent to the controller")
            if self.on_cpu_packet:
                self.on_cpu_packet(frame)
            return
        port = self.ports.get(number)
        if port is None:
            if self.logging:
                self.log(f"port {number} has no interface: packet dropped")
            return
        if self.logging:
            self.log(f"transmitting packet of {len(frame)} bytes out of port {number}")
        if self.dump_bytes:
            self.log.dump(f"sent out of port {number}", frame)
        if self.captures:
            self.captures.outbound(number, frame)
        try:
            port.send(frame)
        except PortGone as exc:
            self._port_gone(port, exc)

    # --- trouble ---------------------------------------------------------------------------
    def _port_gone(self, port: RawPort, exc: OSError) -> None:
        if self.ports.pop(port.number, None) is None:
            return
        print(f"p4switch: port {port.number} ({port.ifname}) is gone ({exc}); the switch keeps "
              "running without it", file=sys.stderr, flush=True)
        port.close()

    def _pipeline_error(self, what: str) -> None:
        print(f"p4switch: pipeline error during {what}; packet dropped:\n"
              f"{traceback.format_exc()}", file=sys.stderr, flush=True)
