"""fabricd as a child process of an experiment, and fabricctl calls against it."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from p4switch.device.process import stop_process

ROOT = Path(__file__).resolve().parent.parent


class Fabricd:
    """Starts `fabricd` on an ephemeral 127.0.0.1 port and waits until it serves and every
    switch holds fabric.p4 and its routes (`fabricctl sync` succeeds: on a busy machine a
    switch can time out at fabricd's start, and its watchdog writes it a moment later)."""

    def __init__(self, topology: Path, log_dir: Path, ecmp_mode: str = "hash",
                 compiler: str | None = None, ecn_delay_us: int = 0):
        """`compiler`: fabricd's `--compiler` for the switches' target (None: p4switch);
        `ecn_delay_us`: fabricd's `--ecn-delay-us` (0: its queue-length threshold)."""
        self.topology, self.log_dir, self.ecmp_mode = topology, log_dir, ecmp_mode
        self.compiler, self.ecn_delay_us = compiler, ecn_delay_us
        self.proc: subprocess.Popen | None = None
        self.address = ""

    def __enter__(self) -> Fabricd:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        port_file = self.log_dir / "fabricd.port"
        port_file.unlink(missing_ok=True)
        log = open(self.log_dir / "fabricd.log", "w")  # noqa: SIM115 (kept by Popen)
        cmd = [sys.executable, "-m", "controller.fabricd", "--topology", str(self.topology),
               "--listen", "127.0.0.1:0", "--port-file", str(port_file),
               "--state", str(self.log_dir / "fabric-state.json"), "--ecmp-mode", self.ecmp_mode]
        if self.compiler:
            cmd += ["--compiler", self.compiler]
        if self.ecn_delay_us:
            cmd += ["--ecn-delay-us", str(self.ecn_delay_us)]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        try:
            self._wait_ready()
        except BaseException:
            stop_process(self.proc)     # a fabricd left running would fight the next one
            raise
        return self

    def _wait_ready(self) -> None:
        port_file = self.log_dir / "fabricd.port"
        # fabricd compiles fabric.p4 first (seconds; over 120 s at a load average of 35)
        deadline = time.monotonic() + 600
        while not (port_file.exists() and port_file.read_text().strip()):
            if self.proc.poll() is not None:
                tail = (self.log_dir / "fabricd.log").read_text().strip().splitlines()[-5:]
                raise RuntimeError(f"fabricd exited with {self.proc.returncode}: "
                                   + "\n".join(tail))
            if time.monotonic() > deadline:
                raise RuntimeError("fabricd did not start within 600 s")
            time.sleep(0.2)
        self.address = f"127.0.0.1:{port_file.read_text().strip()}"
        while (done := self.ctl("sync")).returncode != 0:
            if time.monotonic() > deadline + 60:
                raise RuntimeError(f"the switches are not in sync: {done.stdout}{done.stderr}")
            time.sleep(0.5)

    def ctl(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "controller.fabricctl", "--server",
                               self.address, *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=120)

    def ctl_json(self, *args: str) -> dict:
        out = self.ctl("--json", *args)
        if out.returncode != 0:
            raise RuntimeError(f"fabricctl {' '.join(args)}: exit {out.returncode}: "
                               f"{out.stderr.strip() or out.stdout.strip()}")
        return json.loads(out.stdout)

    def __exit__(self, *exc) -> None:
        stop_process(self.proc)
