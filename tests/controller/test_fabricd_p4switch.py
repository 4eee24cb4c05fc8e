"""fabricd drives 2 leaves + 2 spines of `p4switch run --no-p4` processes over P4Runtime:
fabricctl installs routes, an Ethereal step, a slice and a multicast group; the switches read
back hold exactly the intended entries; restarts of fabricd and of a switch neither duplicate
nor lose anything; refused requests change nothing on the switches."""
import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from controller import encode_fabric, fabricctl
from controller.intent import Intent
from controller.p4rt import Device, P4RuntimeError, Pipeline, sync

REPO = Path(__file__).resolve().parents[2]
TOPO = REPO / "controller" / "topologies" / "leafspine-2x2.yaml"
SWITCHES = {"leaf1": 1, "leaf2": 2, "spine1": 3, "spine2": 4}
p4switch = pytest.importorskip("p4switch")
if not hasattr(p4switch, "compile_program"):
    pytest.skip("p4switch.compile_program (the p4switch frontend) is not available",
                allow_module_level=True)
from p4switch.device.process import SwitchProcess  # noqa: E402

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """fabric.p4 compiled once, as the files `p4switch compile` writes."""
    out = tmp_path_factory.mktemp("fabric")
    info, config = p4switch.compile_program(str(REPO / "p4src" / "fabric.p4"))
    (out / "fabric.p4info.bin").write_bytes(info.SerializeToString())
    (out / "fabric.json").write_bytes(config)
    return out / "fabric.p4info.bin", out / "fabric.json", Pipeline(info, config)


class Fabricd:
    def __init__(self, tmp: Path, compiled, addresses: dict[str, str]) -> None:
        self.tmp, self.compiled, self.addresses = tmp, compiled, addresses
        self.proc = None
        self.log = tmp / "fabricd.log"

    def start(self) -> str:
        port_file = self.tmp / "port"
        port_file.unlink(missing_ok=True)
        args = [sys.executable, "-m", "controller.fabricd", "--topology", str(TOPO),
                "--state", str(self.tmp / "state.json"), "--p4info", str(self.compiled[0]),
                "--config", str(self.compiled[1]), "--listen", "127.0.0.1:0",
                "--port-file", str(port_file), "--resync-period", "0.3",
                "--switch-timeout", "5"]
        for name, addr in self.addresses.items():
            args += ["--switch", f"{name}={addr}"]
        self.proc = subprocess.Popen(args, cwd=REPO, stderr=self.log.open("w"))
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text().strip():
            assert self.proc.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, "fabricd did not start"
            time.sleep(0.05)
        self.server = f"127.0.0.1:{port_file.read_text().strip()}"
        return self.server

    def startup_report(self) -> dict[str, str]:
        return dict(re.findall(r"fabricd: (\w+): (.*)", self.log.read_text()))

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@pytest.fixture
def fabric(tmp_path, compiled):
    ports = {name: free_port() for name in SWITCHES}
    switches = {}

    def start_switch(name):
        sw = SwitchProcess(["--no-p4", "--device-id", str(SWITCHES[name]),
                            "--grpc-addr", f"127.0.0.1:{ports[name]}"])
        switches[name] = sw.__enter__()
        return sw

    for name in SWITCHES:
        start_switch(name)
    daemon = Fabricd(tmp_path, compiled, {n: f"127.0.0.1:{p}" for n, p in ports.items()})
    try:
        yield daemon, switches, start_switch
    finally:
        daemon.stop()
        for sw in switches.values():
            sw.stop()


def ctl(server, *args, expect=0):
    result = CliRunner().invoke(fabricctl.main, ["--server", server, *args])
    assert result.exit_code == expect, (args, result.exit_code, result.output)
    return result.output


def read_back(addresses: dict[str, str], pipeline: Pipeline) -> dict[str, sync.State]:
    states = {}
    for name, addr in addresses.items():
        dev = Device(name, addr, SWITCHES[name], pipeline, timeout=5)
        dev.conn.open_channel()             # an observer: no arbitration, no writes
        states[name] = dev.read_state(defaults_of=("FabricIngress.port_liveness",))
        dev.close()
    return states


def assert_switches_hold_exactly(daemon: Fabricd, pipeline: Pipeline) -> dict[str, int]:
    """Compare every switch with the intent saved by fabricd; returns entries per switch."""
    schema = Device("x", "127.0.0.1:1", 0, pipeline).schema
    intent = Intent.from_json((daemon.tmp / "state.json").read_text(),
                              encode_fabric.slot_capacity(schema),
                              encode_fabric.max_workers(schema))
    wanted = encode_fabric.intended_states(intent, schema)
    got = read_back(daemon.addresses, pipeline)
    sizes = {}
    for name in SWITCHES:
        have, want = got[name], wanted[name]
        keys = [sync.entry_key(e) for e in have.table_entries]
        assert len(keys) == len(set(keys)), f"{name}: duplicate entries"
        assert sorted((sync.entry_key(e), sync.entry_action(e)) for e in have.table_entries) \
            == sorted((sync.entry_key(e), sync.entry_action(e)) for e in want.table_entries), name
        assert sorted((g.group_id, tuple(sorted(g.replicas))) for g in have.multicast_groups) \
            == sorted((g.group_id, tuple(sorted(g.replicas))) for g in want.multicast_groups)
        sizes[name] = len(have.table_entries)
    return sizes


def test_fabricd_installs_reconciles_and_survives_restarts(fabric, compiled):
    daemon, switches, start_switch = fabric
    pipeline = compiled[2]
    server = daemon.start()
    report = daemon.startup_report()
    assert all("inserted" in report[n] for n in SWITCHES), report
    base = assert_switches_hold_exactly(daemon, pipeline)
    assert base["leaf1"] > 0 and base["spine1"] > 0

    out = json.loads(ctl(server, "--json", "step", "install", "ring0", "--pins",
                         "--flow", "h1:h3:1048576", "--flow", "h2:h4:1048576"))
    # Each rank sends one flow over 2 spines: Ethereal splits it in two, one piece per spine.
    assert sorted((s["src"], s["path"][1]) for s in out["subflows"]) == [
        ("h1", "spine1"), ("h1", "spine2"), ("h2", "spine1"), ("h2", "spine2")]
    assert out["pins"] == 4
    ctl(server, "group", "create", "ag", "h1", "h2", "h3")
    job = json.loads(ctl(server, "--json", "job", "create", "sml", "h1", "h2", "h3", "--kind", "switchml",
                         "--slots", "8"))
    assert (job["leaf"], job["address"], job["slots"]) == ("leaf1", "10.0.1.253", 8)
    nrj = json.loads(ctl(server, "--json", "job", "create", "nrj", "h1", "h2", "h3"))
    # NetReduce over two leaves: a stage per leaf, then a spine; each worker sends to its leaf
    assert nrj["switches"][:2] == ["leaf1", "leaf2"] and nrj["switches"][2].startswith("spine")
    assert nrj["addresses"] == ["10.0.1.253", "10.0.1.253", "10.0.2.253"]
    sizes = assert_switches_hold_exactly(daemon, pipeline)
    assert sizes["leaf1"] > base["leaf1"]
    state = json.loads(ctl(server, "--json", "state"))
    assert all(s["connected"] for s in state["switches"])

    # Refused requests: right exit code, nothing on any switch changes.
    before = read_back(daemon.addresses, pipeline)
    ctl(server, "group", "create", "bad", "h1", "h77", expect=3)
    ctl(server, "slice", "create", "huge", "9", expect=5)
    bad = daemon.tmp / "bad.yaml"
    bad.write_text("kind: leaf-spine\nleaves: 2\nspines: 2\nhosts_per_leaf: [\n")
    ctl(server, "topology", "--set", str(bad), expect=4)
    assert read_back(daemon.addresses, pipeline) == before

    # A slice needs hosts free of other work: remove the step and group, then slice leaf2.
    ctl(server, "step", "remove", "ring0")
    ctl(server, "group", "delete", "ag")
    ctl(server, "job", "delete", "sml")
    ctl(server, "job", "delete", "nrj")
    assert assert_switches_hold_exactly(daemon, pipeline) == base
    ctl(server, "slice", "create", "jobA", "2")
    ctl(server, "link", "leaf1-spine2", "down")
    sliced = assert_switches_hold_exactly(daemon, pipeline)

    # fabricd restart: it finds every switch in sync and writes nothing.
    daemon.stop()
    daemon.start()
    report = daemon.startup_report()
    assert all(report[n] == "0 inserted, 0 modified, 0 deleted" for n in SWITCHES), report
    assert assert_switches_hold_exactly(daemon, pipeline) == sliced

    # A switch restart: fabricd notices, pushes the pipeline and rewrites its entries.
    switches["spine1"].stop()
    start_switch("spine1")
    deadline = time.monotonic() + 20
    while True:
        try:
            assert assert_switches_hold_exactly(daemon, pipeline) == sliced
            break
        except (AssertionError, P4RuntimeError):   # until fabricd pushed the pipeline again
            assert time.monotonic() < deadline, "spine1 was not re-synchronised"
            time.sleep(0.3)
