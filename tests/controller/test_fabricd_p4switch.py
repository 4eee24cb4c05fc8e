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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from click.testing import CliRunner

from controller import fabricctl
from controller.p4rt import P4RuntimeError, Pipeline
from p4switch.device.process import SwitchProcess
from tests.fabricd_process import Fabricd, difference, intended, meddle, read_back

REPO = Path(__file__).resolve().parents[2]
TOPO = REPO / "controller" / "topologies" / "leafspine-2x2.yaml"
SWITCHES = {"leaf1": 1, "leaf2": 2, "spine1": 3, "spine2": 4}

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def fabric(tmp_path, compiled_fabric):
    ports = {name: free_port() for name in SWITCHES}
    switches = {}

    def start_switch(name):
        sw = SwitchProcess(["--no-p4", "--device-id", str(SWITCHES[name]),
                            "--grpc-addr", f"127.0.0.1:{ports[name]}"])
        switches[name] = sw.__enter__()
        return sw

    daemon = None
    try:
        with ThreadPoolExecutor(len(SWITCHES)) as pool:     # a second core halves the starts
            list(pool.map(start_switch, SWITCHES))
        daemon = Fabricd(tmp_path, compiled_fabric,
                         {n: f"127.0.0.1:{p}" for n, p in ports.items()}, TOPO)
        yield daemon, switches, start_switch
    finally:
        if daemon is not None:
            daemon.stop()
        with ThreadPoolExecutor(len(SWITCHES)) as pool:
            list(pool.map(lambda sw: sw.stop(), switches.values()))


def ctl(server, *args, expect=0):
    result = CliRunner().invoke(fabricctl.main, ["--server", server, *args])
    assert result.exit_code == expect, (args, result.exit_code, result.output)
    return result.output


def assert_switches_hold_exactly(daemon: Fabricd, pipeline: Pipeline) -> dict[str, int]:
    """Compare every switch with the intent saved by fabricd; returns entries per switch."""
    wanted = intended(daemon.tmp / "state.json", pipeline)
    got = read_back(daemon.addresses, SWITCHES, pipeline)
    for name in SWITCHES:
        assert difference(wanted[name], got[name]) == \
            {"duplicated": 0, "missing": 0, "stale": 0}, name
    return {name: len(got[name].table_entries) for name in SWITCHES}


def test_fabricd_installs_reconciles_and_survives_restarts(fabric, compiled_fabric):
    daemon, switches, start_switch = fabric
    pipeline = compiled_fabric[2]
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
    before = read_back(daemon.addresses, SWITCHES, pipeline)
    ctl(server, "group", "create", "bad", "h1", "h77", expect=3)
    ctl(server, "slice", "create", "huge", "9", expect=5)
    bad = daemon.tmp / "bad.yaml"
    bad.write_text("kind: leaf-spine\nleaves: 2\nspines: 2\nhosts_per_leaf: [\n")
    ctl(server, "topology", "--set", str(bad), expect=4)
    assert read_back(daemon.addresses, SWITCHES, pipeline) == before

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
    deadline = time.monotonic() + 120        # catches a hang; a busy machine is slow
    while True:
        try:
            assert assert_switches_hold_exactly(daemon, pipeline) == sliced
            break
        except (AssertionError, P4RuntimeError):   # until fabricd pushed the pipeline again
            assert time.monotonic() < deadline, "spine1 was not re-synchronised"
            time.sleep(0.3)


def test_fabricd_restart_after_a_kill_reconciles_to_the_intent(fabric, compiled_fabric):
    """fabricd killed (SIGKILL) in the middle of a burst of requests, the switches changed
    behind its back while it is down; restarted with the same --state, it leaves every switch
    with zero duplicated, missing or stale entries, groups or clone sessions."""
    daemon, _, _ = fabric
    pipeline = compiled_fabric[2]
    server = daemon.start()
    ctl(server, "step", "install", "a2a", "--pins", "--flow", "h1:h3:65536",
        "--flow", "h2:h4:65536", "--flow", "h3:h1:65536", "--flow", "h4:h2:65536")
    burst = subprocess.Popen(
        [sys.executable, "-c",
         "import sys\nfrom click.testing import CliRunner\nfrom controller import fabricctl\n"
         "for i in range(40):\n"
         "    CliRunner().invoke(fabricctl.main, ['--server', sys.argv[1], '--timeout', '5',"
         " 'group', 'create', f'g{i}', 'h1', 'h2', 'h3', 'h4'])\n", server],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state = daemon.tmp / "state.json"
    deadline = time.monotonic() + 60
    while '"g2"' not in state.read_text():          # a few groups in: the burst is under way
        assert time.monotonic() < deadline and burst.poll() is None, "the burst did not start"
        time.sleep(0.02)
    daemon.kill()
    burst.wait(60)
    undo = meddle(daemon.addresses, SWITCHES["leaf2"], pipeline, "leaf2")
    want = intended(state, pipeline)
    assert difference(want["leaf2"], read_back(daemon.addresses, SWITCHES, pipeline)["leaf2"]) \
        != {"duplicated": 0, "missing": 0, "stale": 0}

    daemon.start()
    # at least the meddling is undone (more, when the kill fell between saving a change and
    # writing it to leaf2)
    counts = re.fullmatch(r"(\d+) inserted, (\d+) modified, (\d+) deleted",
                          daemon.startup_report()["leaf2"])
    assert counts and all(int(c) >= undo[k] for c, k in zip(
        counts.groups(), ("insert", "modify", "delete"), strict=True)), daemon.startup_report()
    got = read_back(daemon.addresses, SWITCHES, pipeline)
    for name in SWITCHES:
        assert difference(want[name], got[name]) == \
            {"duplicated": 0, "missing": 0, "stale": 0}, name
    assert '"g2"' in ctl(daemon.server, "--json", "state")
