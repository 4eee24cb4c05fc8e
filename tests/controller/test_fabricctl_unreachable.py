"""fabricctl against what does not answer: no fabricd at its address (the gRPC status, and
what to start); a switch fabricd cannot reach (reported pending, exit 1; in sync once it is
up); and a client that took primacy with a higher election id and left (fabricd heals the
lockout by arbitrating above it, without a restart)."""
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from click.testing import CliRunner
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2 as p4r
from p4.v1 import p4runtime_pb2_grpc

from controller import fabricctl
from p4switch.device.process import SwitchProcess
from tests.fabricd_process import Fabricd

TOPO = Path(__file__).resolve().parents[2] / "controller" / "topologies" / "leafspine-2x2.yaml"
IDS = {"leaf1": 1, "leaf2": 2, "spine1": 3, "spine2": 4}


def test_unreachable_fabricd_says_what_to_start():
    with socket.socket() as s:          # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        addr = f"127.0.0.1:{s.getsockname()[1]}"
    out = subprocess.run([sys.executable, "-m", "controller.fabricctl", "--server", addr,
                          "--timeout", "5", "state"], capture_output=True, text=True)
    assert out.returncode != 0 and out.stdout == ""
    assert f"UNAVAILABLE ({addr})" in out.stderr
    assert "docker-compose -f docker/compose.yaml up -d" in out.stderr
    assert "fabricd --topology FILE" in out.stderr



def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Fabric:
    """fabricd over p4switch processes, spine2 not started until `start("spine2")`."""

    def __init__(self, tmp, compiled):
        self.ports = {name: free_port() for name in IDS}
        self.switches = {}
        for name in IDS:
            if name != "spine2":
                self.start(name)
        self.daemon = Fabricd(tmp, compiled, {n: f"127.0.0.1:{p}" for n, p in self.ports.items()},
                              TOPO)
        self.server = self.daemon.start()

    def start(self, name):
        self.switches[name] = SwitchProcess(["--no-p4", "--device-id", str(IDS[name]),
                                             "--grpc-addr", f"127.0.0.1:{self.ports[name]}"])
        self.switches[name].__enter__()

    def ctl(self, *args):
        """-> (exit code, the JSON reply, everything printed)."""
        result = CliRunner().invoke(fabricctl.main, ["--server", self.server, "--json", *args])
        out = result.output
        return result.exit_code, json.loads(out[:out.rindex("}") + 1]) if "}" in out else {}, out

    def wait_in_sync(self, timeout=120):
        deadline = time.monotonic() + timeout
        while self.ctl("sync")[0] != 0:
            assert time.monotonic() < deadline, "the switches never came into sync"
            time.sleep(0.5)

    def close(self):
        self.daemon.stop()
        for sw in self.switches.values():
            sw.stop()


@pytest.fixture(scope="module")
def fabric(tmp_path_factory, compiled_fabric):
    f = Fabric(tmp_path_factory.mktemp("unreachable"), compiled_fabric)
    yield f
    f.close()


def test_unreachable_switch_reported_pending_with_nonzero_exit(fabric):
    """A slice created while spine2 does not answer: fabricctl lists spine2 as pending, the
    others in sync, and exits 1; once spine2 is up, the next change is in sync everywhere."""
    code, reply, out = fabric.ctl("slice", "create", "jobA", "2")
    status = {s["switch"]: s["status"] for s in reply["sync"]}
    assert code == 1, out
    assert status.pop("spine2") in ("PENDING", "FAILED"), out
    assert set(status.values()) == {"IN_SYNC"}, out
    assert "1 of 4 switches not in sync (spine2)" in out
    fabric.start("spine2")
    fabric.wait_in_sync()
    code, reply, out = fabric.ctl("slice", "create", "jobB", "2")
    assert code == 0, out
    assert {s["switch"]: s["status"] for s in reply["sync"]} == dict.fromkeys(IDS, "IN_SYNC")
    code, reply, out = fabric.ctl("slice", "delete", "jobA")
    assert code == 0 and {s["status"] for s in reply["switches"]} == {"IN_SYNC"}, out


def test_security_election_lockout_heals_without_restart(fabric):
    """A client takes leaf1 with election id 1000 and leaves: fabricd (id 1) arbitrates above
    it and leaf1 is in sync again, fabricd never restarted."""
    if "spine2" not in fabric.switches:
        fabric.start("spine2")
    fabric.wait_in_sync()
    pid = fabric.daemon.proc.pid
    request = p4r.StreamMessageRequest()
    request.arbitration.device_id = IDS["leaf1"]
    request.arbitration.election_id.low = 1000
    with grpc.insecure_channel(f"127.0.0.1:{fabric.ports['leaf1']}") as channel:
        stream = p4runtime_pb2_grpc.P4RuntimeStub(channel).StreamChannel(iter([request]))
        assert next(stream).arbitration.status.code == code_pb2.OK     # the intruder is primary
        stream.cancel()
    fabric.wait_in_sync(timeout=60)
    code, reply, out = fabric.ctl("group", "create", "g1", "h1", "h2")
    assert code == 0 and {s["status"] for s in reply["sync"]} == {"IN_SYNC"}, out
    assert fabric.daemon.proc.pid == pid and fabric.daemon.proc.poll() is None
    assert "arbitrating again with 1001" in fabric.daemon.log.read_text()
