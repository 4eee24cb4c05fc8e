"""Start `p4switch run` as a child process and learn its P4Runtime address (tests, benchmarks
and experiments use this instead of guessing a free port: the switch binds port 0 and says
which port it got); stop_process ends it, or any other switch process."""
from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time

_READY = re.compile(r"P4Runtime server listening on ([^\s,]+)")
_THRIFT = re.compile(r"Thrift server listening on (\S+)")


class SwitchProcess:
    """`with SwitchProcess(["--no-p4", "-i", "1@veth1"]) as sw: sw.grpc_addr`; extra args go
    to `p4switch run` (which gets --grpc-addr 127.0.0.1:0 and --thrift-port 0 unless given:
    many switches run side by side); `thrift_addr` is where its Thrift server listens."""

    def __init__(self, args: list[str], netns: str | None = None, timeout: float = 30.0):
        own, sep, target = _split(list(args))
        if not {"--grpc-addr", "--grpc-server-addr"} & set(own + target):
            own += ["--grpc-addr", "127.0.0.1:0"]
        if "--thrift-port" not in own:
            own += ["--thrift-port", "0"]
        self.args = own + sep + target
        self.netns, self.timeout = netns, timeout
        self.proc: subprocess.Popen | None = None
        self.grpc_addr: str | None = None
        self.thrift_addr: str | None = None
        self.output: list[str] = []

    def __enter__(self) -> SwitchProcess:
        cmd = [sys.executable, "-m", "p4switch.cli", "run", *self.args]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns, *cmd]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, bufsize=1)
        ready = threading.Event()
        threading.Thread(target=self._pump, args=(ready,), daemon=True).start()
        if not ready.wait(self.timeout) or self.grpc_addr is None:
            self.stop()
            raise RuntimeError("p4switch did not start:\n" + "".join(self.output))
        return self

    def _pump(self, ready: threading.Event) -> None:
        for line in self.proc.stdout:
            self.output.append(line)
            match = _READY.search(line)
            if match and self.grpc_addr is None:
                thrift = _THRIFT.search(line)
                self.thrift_addr = thrift.group(1) if thrift else None
                self.grpc_addr = match.group(1)
                ready.set()
        ready.set()

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, wait; -> exit code."""
        code = stop_process(self.proc, timeout)
        time.sleep(0.05)
        return code

    def __exit__(self, *exc) -> None:
        self.stop()


def _split(args: list[str]):
    """Switch options, then `--` and the target options after it (if any)."""
    if "--" not in args:
        return args, [], []
    at = args.index("--")
    return args[:at], ["--"], args[at + 1:]


def stop_process(proc: subprocess.Popen | None, timeout: float = 10.0) -> int | None:
    """SIGTERM, then SIGKILL after `timeout` seconds; -> the exit code."""
    if proc is None:
        return None
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode
