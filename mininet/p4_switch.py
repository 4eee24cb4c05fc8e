"""A Mininet switch that runs a P4Runtime-served v1model target: `p4switch run` (this project)
or BMv2's `simple_switch_grpc` when asked for and installed. Both start with no program and
serve P4Runtime on the topology's port, so the controller cannot tell them apart; link speed
is the switch's own egress pacing on p4switch and a kernel token bucket on BMv2's ports."""
from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from mininet.node import Switch

from p4switch.device.process import stop_process

ROOT = Path(__file__).resolve().parent.parent
CPU_PORT = 510
TARGETS = ("p4switch", "bmv2")
# How fabricd compiles a program for each target (`fabricd --compiler`; None: its default,
# p4switch compile).
COMPILERS = {"p4switch": None,
             "bmv2": "p4c-bm2-ss --p4runtime-files {p4info} -o {config} {program}"}
# The fastest link each target keeps up with on the demo's fabric: links, not switches, must
# be the bottleneck, since the demo's minimum RTO is a full queue's drain time at the link
# rate. An unoptimised BMv2 (-O0, 2 shared CPUs) forwarded fabric.p4 at about 650 packets/s
# per switch, 1.2 Mbit/s per rank, in the 16 Mbit/s demo (ring all-reduce 5.3 s instead of
# 0.4 s); there the all-to-all lost whole windows in BMv2's queues and a QP gave up. 2 Mbit/s
# is also part two's rate on BMv2 (demo.py --ideas-link-mbps). p4switch: the topology's rate.
MAX_LINK_MBPS = {"bmv2": 2.0}
# The real-time priority of p4switch's packet threads (`p4switch run --packet-priority`): in
# Mininet-HiFi the switches are the kernel's datapath, whose softirqs run before any process;
# here they are processes on the cores the hosts use, and in the ordinary class each of their
# thousands of wake-ups a second waited behind ranks, fabricd and the demo (40-70 us each,
# 10-20 % of a collective on an otherwise idle 2-core machine), and now and then for a whole
# time slice, which the ports' pacing cannot make up. The packet threads sleep between
# packets, so they take the CPU only for the packets they carry.
PACKET_PRIORITY = 1
# BMv2's Thrift server (its runtime CLI) would take 9090 on every switch, and its notification
# socket is named by device id (/tmp/bmv2-<id>-notifications.ipc, which another fabric or a
# test may use at the same time): each switch gets its own, from its P4Runtime port.
THRIFT_PORT_OFFSET = 10000


def missing_tools(target: str) -> list[str]:
    """The executables `target` needs that are not on PATH (p4switch needs none)."""
    tools = ("simple_switch_grpc", "p4c-bm2-ss") if target == "bmv2" else ()
    return [t for t in tools if shutil.which(t) is None]


class P4RuntimeSwitch(Switch):
    """Started with no program; the controller pushes the pipeline over P4Runtime."""

    def __init__(self, name, device_id: int, grpc_port: int, target: str = "p4switch",
                 log_dir: str | None = None, link_mbps: float | None = None,
                 queue_depth: int | None = None, packet_log: bool = False, **kwargs):
        kwargs["inNamespace"] = False     # ports are the root namespace's veths
        super().__init__(name, **kwargs)
        self.device_id = device_id
        self.grpc_port = grpc_port
        self.target = target
        self.log_dir = Path(log_dir) if log_dir else None
        self.link_mbps = link_mbps
        self.queue_depth = queue_depth
        self.packet_log = packet_log and self.log_dir is not None
        self.proc: subprocess.Popen | None = None

    def _port_args(self) -> list[str]:
        args = []
        for intf, port in sorted(self.ports.items(), key=lambda kv: kv[1]):
            if intf.name != "lo":
                args += ["-i", f"{port}@{intf.name}"]
        return args

    def command(self) -> list[str]:
        if self.target == "bmv2":
            # BMv2's own options first; the gRPC server's after "--".
            return ["simple_switch_grpc", "--no-p4", "--device-id", str(self.device_id),
                    "--thrift-port", str(self.grpc_port + THRIFT_PORT_OFFSET),
                    "--notifications-addr",
                    f"ipc:///tmp/bmv2-{self.grpc_port}-notifications.ipc",
                    *self._port_args(), *self._bmv2_log_args(), "--", "--grpc-server-addr",
                    f"127.0.0.1:{self.grpc_port}", "--cpu-port", str(CPU_PORT)]
        cmd = [sys.executable, "-m", "p4switch.cli", "run", "--no-p4", *self._port_args()]
        cmd += ["--device-id", str(self.device_id), "--grpc-addr",
                f"127.0.0.1:{self.grpc_port}", "--cpu-port", str(CPU_PORT)]
        cmd += ["--packet-priority", str(PACKET_PRIORITY)]
        if self.link_mbps:      # every port's egress paced like a link of that speed
            cmd += ["--queue-rate", f"{self.link_mbps:g}mbps"]
        if self.queue_depth:
            cmd += ["--queue-depth", str(self.queue_depth)]
        if self.control_path:
            cmd += ["--control-socket", str(self.control_path)]
        if self.packet_log:     # p4switch runs its Python backend, which logs every packet
            cmd += ["--log-file", str(self.log_dir / f"{self.name}.packets.log")]
        return cmd

    def _bmv2_log_args(self) -> list[str]:
        if not self.packet_log:
            return []
        return ["--log-file", str(self.log_dir / f"{self.name}.packets"), "--log-flush"]

    @property
    def control_path(self) -> Path | None:
        """p4switch's queue control socket, for `python -m p4switch.device.control PATH
        show_queues` or `set_queue_rate` at run time (BMv2 has its runtime CLI instead)."""
        if self.target != "p4switch" or not self.log_dir:
            return None
        return self.log_dir / f"{self.name}.ctl"

    def start(self, controllers):
        log = subprocess.DEVNULL
        if self.log_dir:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            log = open(self.log_dir / f"{self.name}.log", "w")  # noqa: SIM115 (kept by Popen)
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                     cwd=ROOT)
        self._wait_listening()
        if self.target == "bmv2" and self.link_mbps:
            self._shape_ports()

    def _shape_ports(self) -> None:
        """BMv2 paces its queues only in packets/s, set over Thrift: shape each port's
        egress in bits/s in the kernel instead (a token bucket holding queue_depth
        full-size frames), so that both targets run links of the same speed."""
        rate = self.link_mbps * 1e6 / 8                     # bytes/s
        burst = max(3000, int(rate / 100))                  # 10 ms of line rate
        limit = (self.queue_depth or 256) * 1514
        for intf in self.intfList():
            if intf.name != "lo":
                subprocess.run(["tc", "qdisc", "replace", "dev", intf.name, "root", "tbf",
                                "rate", f"{self.link_mbps:g}mbit", "burst", str(burst),
                                "limit", str(limit)], check=True, capture_output=True)

    def _wait_listening(self, timeout: float = 300.0) -> None:
        # a switch listens within seconds; 20 s ran out at a load average of 37 on 2 cores
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name}: switch exited with {self.proc.returncode}"
                                   f" (log in {self.log_dir})")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.grpc_port)) == 0:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"{self.name}: P4Runtime port {self.grpc_port} not open after "
                           f"{timeout:.0f}s")

    def stop(self, deleteIntfs=True):
        stop_process(self.proc, 5)
        super().stop(deleteIntfs)
