"""Test helpers: a P4Runtime target with no program (p4switch on either backend, or BMv2's
simple_switch_grpc), the pipeline config each one takes, and the routes of the L3 program
(tests/p4switch/device_programs/l3.p4) that the device tests and bench_forwarding.py use."""
from __future__ import annotations

import pathlib
import socket
import subprocess
import sys
import threading
import time

import p4runtime_sh.shell as sh
from google.protobuf import text_format

import p4switch
from p4switch.device.process import SwitchProcess, stop_process


class BMv2Process:
    """The same role played by BMv2: `simple_switch_grpc` with the simple_switch_grpc spelling
    of the options (for tests that run on both targets). `p4c-bm2-ss` makes the config."""

    def __init__(self, interfaces: dict[int, str], device_id: int, cpu_port: int | None = None,
                 timeout: float = 30.0, netns: str | None = None):
        self.interfaces, self.device_id = interfaces, device_id
        self.cpu_port, self.timeout, self.netns = cpu_port, timeout, netns
        self.proc: subprocess.Popen | None = None
        self.grpc_addr = f"127.0.0.1:{_free_port()}"
        # its runtime CLI's Thrift server would take 9090 in every instance, its notification
        # socket /tmp/bmv2-<device id>-...: each gets its own (tests run several at once)
        self.thrift_port = _free_port()
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
        cmd = ["simple_switch_grpc", "--no-p4", "--device-id", str(self.device_id),
               "--thrift-port", str(self.thrift_port),
               "--notifications-addr", f"ipc:///tmp/bmv2-t{self.thrift_port}-notifications.ipc"]
        for number, ifname in sorted(self.interfaces.items()):
            cmd += ["-i", f"{number}@{ifname}"]
        cmd += ["--", "--grpc-server-addr", self.grpc_addr]
        if self.cpu_port is not None:
            cmd += ["--cpu-port", str(self.cpu_port)]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns, *cmd]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, bufsize=1)
        threading.Thread(target=lambda: self.output.extend(self.proc.stdout),
                         daemon=True).start()
        if self.netns:
            self._wait_in_netns()
            return self
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

    def _wait_in_netns(self) -> None:
        """The gRPC port is only reachable from inside the namespace: poll it from there."""
        host, port = self.grpc_addr.rsplit(":", 1)
        probe = (f"import socket, sys; s = socket.socket(); s.settimeout(1); "
                 f"sys.exit(s.connect_ex(({host!r}, {port})))")
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            if subprocess.run(["ip", "netns", "exec", self.netns, sys.executable, "-c", probe],
                              capture_output=True).returncode == 0:
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("simple_switch_grpc did not start:\n" + "".join(self.output))

    def stop(self, timeout: float = 10.0) -> int:
        return stop_process(self.proc, timeout)

    def __exit__(self, *exc) -> None:
        self.stop()


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
    info, config = p4switch.compile_program(program)
    stem = pathlib.Path(outdir) / pathlib.Path(program).stem
    pathlib.Path(f"{stem}.p4info.txtpb").write_text(text_format.MessageToString(info))
    pathlib.Path(f"{stem}.p4switch.bin").write_bytes(config)
    return f"{stem}.p4info.txtpb", f"{stem}.p4switch.bin"


def l3_routes(host_mac: dict[int, str], gw_mac: dict[int, str]) -> None:
    """l3.p4's routes over the P4Runtime shell's open connection: 10.0.<i>.0/24 leaves port i
    addressed to host_mac[i] from gw_mac[i], for every i in host_mac."""
    for i in host_mac:
        te = sh.TableEntry("MyIngress.ipv4_lpm")(action="MyIngress.forward")
        te.match["hdr.ipv4.dstAddr"] = f"10.0.{i}.0/24"
        te.action["port"], te.action["dmac"] = str(i), host_mac[i]
        te.action["smac"] = gw_mac[i]
        te.insert()
