"""fabricd as a child process of an experiment, and fabricctl calls against it."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from fabricmodel.topology import load
from p4switch.device.process import stop_process

ROOT = Path(__file__).resolve().parent.parent


class Fabricd:
    """Starts `fabricd` on an ephemeral 127.0.0.1 port and waits until it serves and every
    switch holds fabric.p4 and its routes (`fabricctl sync` succeeds: on a busy machine a
    switch can time out at fabricd's start, and its watchdog writes it a moment later)."""

    def __init__(self, topology: Path, log_dir: Path, ecmp_mode: str = "hash",
                 compiler: str | None = None, ecn_delay_us: int = 0,
                 sync_timeout: float = 180.0, switch_timeout: float | None = None):
        """`compiler`: fabricd's `--compiler` for the switches' target (None: p4switch);
        `ecn_delay_us`: fabricd's `--ecn-delay-us` (0: its queue-length threshold);
        `sync_timeout`: how long the switches may take to be in sync once fabricd serves;
        `switch_timeout`: fabricd's `--switch-timeout` (None: its default)."""
        self.topology, self.log_dir, self.ecmp_mode = topology, log_dir, ecmp_mode
        self.compiler, self.ecn_delay_us = compiler, ecn_delay_us
        self.sync_timeout, self.switch_timeout = sync_timeout, switch_timeout
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
        if self.switch_timeout:
            cmd += ["--switch-timeout", f"{self.switch_timeout:g}"]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        try:
            self._wait_ready()
        except BaseException:
            stop_process(self.proc)     # a fabricd left running would fight the next one
            raise
        return self

    def _wait_ready(self) -> None:
        # Both waits end well inside the suite's 600 s per test, so that a fabric that never
        # comes up fails with what fabricd and the switches said, not with a bare timeout.
        port_file = self.log_dir / "fabricd.port"
        # fabricd compiles fabric.p4 first (seconds; over 120 s at a load average of 35)
        deadline = time.monotonic() + 300
        while not (port_file.exists() and port_file.read_text().strip()):
            if self.proc.poll() is not None:
                raise RuntimeError(f"fabricd exited with {self.proc.returncode}:\n"
                                   + self._tail("fabricd"))
            if time.monotonic() > deadline:
                raise RuntimeError("fabricd did not start within 300 s:\n" + self._tail("fabricd"))
            time.sleep(0.2)
        self.address = f"127.0.0.1:{port_file.read_text().strip()}"
        # a switch that timed out at fabricd's start is written by its watchdog within seconds
        deadline = time.monotonic() + self.sync_timeout
        while (done := self.ctl("sync")).returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError(self._unsynced(done.stdout + done.stderr))
            time.sleep(0.5)

    def _tail(self, name: str, lines: int = 8) -> str:
        """The last lines of fabricd's log or of a switch's (mininet's P4Switch writes
        NAME.log into the same directory)."""
        path = self.log_dir / f"{name}.log"
        if not path.exists():
            return f"  ({path} does not exist)"
        return "\n".join(f"  {line}" for line in path.read_text(errors="replace")
                         .strip().splitlines()[-lines:])

    def _unsynced(self, sync_output: str) -> str:
        """What to say when the switches are not in sync: fabricctl's table (or its error),
        fabricd's log, and the logs of the switches the table shows failing (of every
        switch when fabricctl got no table)."""
        switches = load(self.topology).switches
        rows = {line.split()[0]: line for line in sync_output.splitlines()
                if line.split() and line.split()[0] in switches}
        failing = [n for n in switches if n not in rows or not rows[n].rstrip().endswith(" ok")]
        return (f"the switches are not in sync after {self.sync_timeout:g} s; "
                f"fabricctl sync said:\n{sync_output.rstrip()}\n"
                f"fabricd.log:\n{self._tail('fabricd')}"
                + "".join(f"\n{name}.log:\n{self._tail(name)}" for name in failing
                          if (self.log_dir / f"{name}.log").exists()))

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
