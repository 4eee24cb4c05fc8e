"""fabricd's API through fabricctl, with switches that do not answer: refusals carry the right
status and exit code and change nothing; accepted changes persist across a restart."""
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from controller import fabricctl
from p4switch.device.process import stop_process

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
P4INFO = HERE / "test_encode_fabric_p4info.txtpb"
TOPO = REPO / "controller" / "topologies" / "leafspine-2x2.yaml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    def __init__(self, tmp: Path, switches: dict[str, str]) -> None:
        self.tmp, self.switches, self.proc = tmp, switches, None
        self.log = tmp / "fabricd.log"

    def start(self, *extra: str) -> str:
        port_file = self.tmp / "port"
        port_file.unlink(missing_ok=True)
        config = self.tmp / "config.json"
        config.write_text("{}")
        args = [sys.executable, "-m", "controller.fabricd", "--topology", str(TOPO),
                "--state", str(self.tmp / "state.json"), "--p4info", str(P4INFO),
                "--config", str(config), "--listen", "127.0.0.1:0", "--port-file",
                str(port_file), "--switch-timeout", "0.2", "--resync-period", "3600", *extra]
        for name, addr in self.switches.items():
            args += ["--switch", f"{name}={addr}"]
        self.proc = subprocess.Popen(args, cwd=REPO, stderr=self.log.open("w"))
        # a start takes ~1 s; 120 s is a margin no load on 2 cores crossed (30 s did, at a
        # load average of 20)
        deadline = time.monotonic() + 120
        while not port_file.exists() or not port_file.read_text().strip():
            assert self.proc.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, "fabricd did not start"
            time.sleep(0.05)
        return f"127.0.0.1:{port_file.read_text().strip()}"

    def stop(self) -> None:
        stop_process(self.proc, 30)         # SIGKILL if it has not ended in 30 s


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path, {n: f"127.0.0.1:{free_port()}"
                          for n in ("leaf1", "leaf2", "spine1", "spine2")})
    yield d
    d.stop()


def ctl(server, *args):
    result = CliRunner().invoke(fabricctl.main, ["--server", server, *args])
    return result.exit_code, result.output


def state(server):
    code, out = ctl(server, "--json", "state")
    assert code == 0, out
    data = json.loads(out)
    for sw in data["switches"]:
        assert sw["connected"] is False
    return data


def test_refusals_have_status_exit_code_and_change_nothing(daemon, tmp_path):
    server = daemon.start()
    before = state(server)
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("kind: leaf-spine\nleaves: [1\n")
    cases = [
        (3, "NOT_FOUND", ["group", "create", "g", "h1", "h99"]),
        (3, "NOT_FOUND", ["step", "install", "s", "--flow", "h1:h42:1000"]),
        (3, "NOT_FOUND", ["slice", "delete", "nope"]),
        (3, "NOT_FOUND", ["routes", "leaf9"]),
        (3, "NOT_FOUND", ["link", "leaf1-spine9", "down"]),
        (4, "INVALID_ARGUMENT", ["link", "leaf1", "down"]),
        (4, "INVALID_ARGUMENT", ["topology", "--set", str(bad_yaml)]),
        (4, "INVALID_ARGUMENT", ["group", "create", "g", "h1"]),
        (5, "RESOURCE_EXHAUSTED", ["slice", "create", "big", "5"]),
        (5, "RESOURCE_EXHAUSTED", ["job", "create", "j", "h1", "h2", "--kind", "switchml", "--slots", "5000"]),
        (6, "not connected", ["counters", "leaf1"]),
        (2, "Usage", ["step", "install", "s", "--flow", "h1-h3"]),
    ]
    for code, word, args in cases:
        got, out = ctl(server, *args)
        assert (got, word in out) == (code, True), (args, got, out)
    assert state(server) == before


def test_changes_persist_across_a_restart(daemon):
    server = daemon.start()
    # no switch answers: each change is kept, reported pending on every switch, exit 1
    code, out = ctl(server, "slice", "create", "jobA", "2")
    assert code == 1 and "jobA" in out and "4 of 4 switches not in sync" in out, out
    code, out = ctl(server, "--json", "group", "create", "g", "h3", "h4")
    assert code == 1, out
    reply = json.loads(out[:out.rindex("}") + 1])
    assert reply["address"].startswith("239.1.")
    assert {s["status"] for s in reply["sync"]} == {"PENDING"}
    code, out = ctl(server, "step", "install", "s1", "--flow", "h3:h4:4096")
    assert code == 1 and "1 sub-flows" in out, out
    assert ctl(server, "slice", "create", "jobA", "2")[0] == 6     # ALREADY_EXISTS
    code, out = ctl(server, "link", "leaf2-spine1", "down")
    assert code == 1 and "leaf1" in out            # the switches did not answer: exit 1
    before = state(server)
    assert before["failed_links"] == ["leaf2-spine1"]
    daemon.stop()
    server = daemon.start()
    after = state(server)
    assert after == before
    # jobA holds leaf1 alone: its hosts are routed in its slice only, unreachable from h3/h4.
    code, out = ctl(server, "--json", "routes", "leaf1")
    assert json.loads(out)["routes"] == [{"slice": 1, "prefix": "10.0.1.1/32", "ports": [1]},
                                         {"slice": 1, "prefix": "10.0.1.2/32", "ports": [2]}]
    code, out = ctl(server, "--json", "routes", "leaf2")
    assert all(r["prefix"].startswith("10.0.2.") for r in json.loads(out)["routes"])


def test_step_from_a_file_returns_ports_and_split_descriptors(daemon, tmp_path):
    server = daemon.start()
    step = tmp_path / "step.yaml"
    step.write_text("flows:\n"
                    "  - {src: h1, dst: h3, bytes: 10240, dst_qp: 17, base_psn: 100}\n"
                    "  - {src: h1, dst: h4, bytes: 10240}\n"
                    "  - {src: h1, dst: h2, bytes: 10240}\n")
    code, out = ctl(server, "--json", "step", "install", "a2a", "--file", str(step))
    assert code == 1, out                       # planned and kept; no switch answers
    reply = json.loads(out[:out.rindex("}") + 1])
    cross = [s for s in reply["subflows"] if s["dst"] != "h2"]
    assert len(cross) == 2 and {s["path"][1] for s in cross} == {"spine1", "spine2"}
    desc = {d["dst_ip"]: d for d in reply["descriptors"]}
    assert set(desc) == {"10.0.2.1", "10.0.2.2"}          # rack-local h2 needs no splitting
    assert desc["10.0.2.1"]["dst_qp"] == 17 and desc["10.0.2.1"]["base_psn"] == 100
    assert all(0xC000 <= p <= 0xFFFF for d in desc.values() for p in d["sports"])
    step.write_text("flows: {src: h1}\n")
    code, out = ctl(server, "step", "install", "bad", "--file", str(step))
    assert code == 2 and "expected `flows:`" in out
