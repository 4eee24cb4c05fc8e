"""Start `p4switch run` as a child process and learn its P4Runtime address (tests, benchmarks
and experiments use this instead of guessing a free port: the switch binds port 0 and says
which port it got), or BMv2's simple_switch_grpc in the same role."""
from __future__ import annotations

import pathlib
import re
import signal
import socket
import subprocess
import sys
import threading
import time

_READY = re.compile(r"P4Runtime server listening on (\S+)")


class SwitchProcess:
    """`with SwitchProcess(["--no-p4", "-i", "1@veth1"]) as sw: sw.grpc_addr`; extra args go
    to `p4switch run` (which gets --grpc-addr 127.0.0.1:0 unless given)."""

    def __init__(self, args: list[str], netns: str | None = None, timeout: float = 30.0):
        self.args = list(args)
        if "--grpc-addr" not in self.args and "--grpc-server-addr" not in self.args:
            self.args += ["--grpc-addr", "127.0.0.1:0"]
        self.netns, self.timeout = netns, timeout
        self.proc: subprocess.Popen | None = None
        self.grpc_addr: str | None = None
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


class BMv2Process:
    """The same role played by BMv2: `simple_switch_grpc` with the simple_switch_grpc spelling
    of the options (for tests that run on both targets). `p4c-bm2-ss` makes the config."""

    def __init__(self, interfaces: dict[int, str], device_id: int, cpu_port: int | None = None,
                 timeout: float = 30.0):
        self.interfaces, self.device_id = interfaces, device_id
        self.cpu_port, self.timeout = cpu_port, timeout
        self.proc: subprocess.Popen | None = None
        self.grpc_addr = f"127.0.0.1:{_free_port()}"
        self.output: list[str] = []

    @staticmethod
    def compile(program: str, outdir: str) -> tuple[str, str]:
        """-> (p4info text file, BMv2 JSON) as p4runtime-shell's FwdPipeConfig wants them."""
        stem = pathlib.Path(outdir) / pathlib.Path(program).stem
        p4info, json_out = f"{stem}.p4info.txtpb", f"{stem}.json"
        subprocess.run(["p4c-bm2-ss", "--p4runtime-files", p4info, "-o", json_out, program],
                       check=True, capture_output=True, text=True)
        return p4info, json_out

    def __enter__(self) -> BMv2Process:
        cmd = ["simple_switch_grpc", "--no-p4", "--device-id", str(self.device_id)]
        for number, ifname in sorted(self.interfaces.items()):
            cmd += ["-i", f"{number}@{ifname}"]
        cmd += ["--", "--grpc-server-addr", self.grpc_addr]
        if self.cpu_port is not None:
            cmd += ["--cpu-port", str(self.cpu_port)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, bufsize=1)
        threading.Thread(target=lambda: self.output.extend(self.proc.stdout),
                         daemon=True).start()
        import grpc
        channel = grpc.insecure_channel(self.grpc_addr)
        try:
            grpc.channel_ready_future(channel).result(timeout=self.timeout)
        except grpc.FutureTimeoutError:
            self.stop()
            raise RuntimeError("simple_switch_grpc did not start:\n"
                               + "".join(self.output)) from None
        finally:
            channel.close()
        return self

    def stop(self, timeout: float = 10.0) -> int:
        return stop_process(self.proc, timeout)

    def __exit__(self, *exc) -> None:
        self.stop()


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


def _free_port() -> int:
    """simple_switch_grpc cannot report a port it picked; take one the kernel just gave out."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_target(target: str, interfaces: dict[int, str], device_id: int,
                 cpu_port: int | None = None):
    """An unstarted context manager running target 'p4switch' (its default backend),
    'p4switch-python', 'p4switch-native' or 'bmv2' with no program."""
    if target == "bmv2":
        return BMv2Process(interfaces, device_id, cpu_port)
    args = ["--no-p4", "--device-id", str(device_id)]
    if target.startswith("p4switch-"):
        args += ["--backend", target.split("-", 1)[1]]
    for number, ifname in sorted(interfaces.items()):
        args += ["-i", f"{number}@{ifname}"]
    if cpu_port is not None:
        args += ["--cpu-port", str(cpu_port)]
    return SwitchProcess(args)


def compile_for(target: str, program: str, outdir: str) -> tuple[str, str]:
    """(P4Info text file, device config file) of `program` for `target`."""
    if target == "bmv2":
        return BMv2Process.compile(program, outdir)
    from google.protobuf import text_format

    import p4switch
    info, config = p4switch.compile_program(program)
    stem = pathlib.Path(outdir) / pathlib.Path(program).stem
    pathlib.Path(f"{stem}.p4info.txtpb").write_text(text_format.MessageToString(info))
    pathlib.Path(f"{stem}.p4switch.bin").write_bytes(config)
    return f"{stem}.p4info.txtpb", f"{stem}.p4switch.bin"
