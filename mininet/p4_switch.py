"""A Mininet switch that runs a P4Runtime-served v1model target: `p4switch run` (this project)
or BMv2's `simple_switch_grpc` when asked for and installed. Both take the same options, so
the rest of the experiment cannot tell them apart."""
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


def target_command(target: str) -> list[str]:
    if target == "bmv2":
        exe = shutil.which("simple_switch_grpc")
        if exe is None:
            raise RuntimeError("--target bmv2 needs simple_switch_grpc on PATH")
        return [exe, "--no-p4"]
    return [sys.executable, "-m", "p4switch.cli", "run", "--no-p4"]


class P4RuntimeSwitch(Switch):
    """Started with no program; the controller pushes the pipeline over P4Runtime."""

    def __init__(self, name, device_id: int, grpc_port: int, target: str = "p4switch",
                 log_dir: str | None = None, link_mbps: float | None = None,
                 queue_depth: int | None = None, **kwargs):
        kwargs["inNamespace"] = False     # ports are the root namespace's veths
        super().__init__(name, **kwargs)
        self.device_id = device_id
        self.grpc_port = grpc_port
        self.target = target
        self.log_dir = Path(log_dir) if log_dir else None
        self.link_mbps = link_mbps
        self.queue_depth = queue_depth
        self.proc: subprocess.Popen | None = None

    def command(self) -> list[str]:
        cmd = target_command(self.target)
        for intf, port in sorted(self.ports.items(), key=lambda kv: kv[1]):
            if intf.name != "lo":
                cmd += ["-i", f"{port}@{intf.name}"]
        cmd += ["--device-id", str(self.device_id), "--grpc-addr",
                f"127.0.0.1:{self.grpc_port}", "--cpu-port", str(CPU_PORT)]
        if self.link_mbps:      # every port's egress paced like a link of that speed
            cmd += ["--queue-rate", f"{self.link_mbps:g}mbps"]
        if self.queue_depth:
            cmd += ["--queue-depth", str(self.queue_depth)]
        if self.control_path:
            cmd += ["--control-socket", str(self.control_path)]
        return cmd

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

    def _wait_listening(self, timeout: float = 20.0) -> None:
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
