"""docs/extending.md's load-balancing policy: one registration in fabricmodel/policies.py, and
the collectives CLI, the demo's policy list and the simulator know it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from collectives import lb
from collectives.cli import main as collectives_main
from fabricmodel import policies
from fabricmodel.topology import leaf_spine
from sim.cli import main as sim_main
from sim.collective import Run
from sim.fabric import LinkSpec, Transport
from tests.demo_modules import demo_modules

ROOT = Path(__file__).resolve().parents[2]
TOY = policies.Policy("toy", "ecmp", "a toy: hash ECMP under another name",
                      survives_silent_failure=False)
# a simulated run's fields that are not the simulation (the name, the host's clock)
CLOCKED = {"policy", "wall_s", "events_per_s", "python_s"}
PINNED_TOY = policies.Policy("toy-pinned", "pinned", "a toy: Ethereal's pins under another name")


@pytest.fixture
def toy(monkeypatch):
    """The registry with the toy policies registered, as it was again afterwards."""
    monkeypatch.setattr(policies, "_REGISTRY", dict(policies._REGISTRY))
    policies.register(TOY)
    policies.register(PINNED_TOY)
    return TOY


def test_extension_policy_is_refused_twice_and_its_mechanism_checked(toy):
    with pytest.raises(ValueError, match="registered already"):
        policies.register(policies.Policy("toy", "spray", "another toy"))
    with pytest.raises(ValueError, match="unknown mechanism 'teleport'"):
        policies.Policy("magic", "teleport", "no such mechanism")
    with pytest.raises(ValueError, match="lower-case letters"):
        policies.Policy("Toy Two", "ecmp", "a bad name")
    assert policies.names()[-2:] == ("toy", "toy-pinned")


def test_extension_policy_in_the_collectives_cli(toy):
    helped = CliRunner().invoke(collectives_main, ["run", "--help"])
    assert helped.exit_code == 0 and "toy" in helped.output
    # the policy passes; the next check (one address) is what stops the run
    res = CliRunner().invoke(collectives_main, ["run", "--ips", "10.0.0.1", "--policy", "toy"])
    assert res.exit_code == 2 and "at least two" in res.output, res.output
    res = CliRunner().invoke(collectives_main, ["run", "--ips", "10.0.0.1,10.0.0.2",
                                                "--policy", "magic"])
    assert res.exit_code == 2 and "'toy'" in res.output, res.output
    # the hosts run it as its mechanism's class, without an eBPF program
    host = lb.make_policy("toy", 0, ["10.0.1.1", "10.0.2.1"])
    assert isinstance(host, lb.Ecmp) and host.name == "toy" and lb.program_of("toy") is None
    assert lb.program_of("toy-pinned") is lb.program_of("ethereal") is not None


def test_extension_policy_in_the_demo_policy_list(toy):
    pytest.importorskip("mininet.net", reason="the demo needs Mininet (Debian's mininet)")
    demo, demo_options = demo_modules("demo", "demo_options")
    assert demo_options.chosen_policies(None)[-2:] == ["toy", "toy-pinned"]
    res = CliRunner().invoke(demo.main, ["--policies", "toy,magic"])
    assert res.exit_code == 2 and "['magic']" in res.output and "'toy'" in res.output
    # the demo's exit check: a policy that may give up on a silent failure is let off there
    row = ["leaf1-spine1", "silent", "toy", 0, 0, 0, 0, 0, "yes", "NO"]
    assert demo.gave_up([row]) == []
    assert demo.gave_up([row[:1] + ["announced"] + row[2:]]) != []
    assert demo.gave_up([row[:2] + ["toy-pinned"] + row[3:]]) != []


def test_extension_policy_in_the_simulator(toy, tmp_path):
    topo = leaf_spine(2, 2, 2)
    link = LinkSpec(gbps=100, delay_ns=500)
    failed = (topo.link("leaf1", "spine1").index,)
    # a policy is simulated by its mechanism: the toys run as ecmp and Ethereal do, exactly
    for policy, same in (("toy", "ecmp"), ("toy-pinned", "ethereal")):
        got, want = (Run(topo, "all-to-all", 4 * 100_000, p, link=link, failed=failed).run()
                     for p in (policy, same))
        assert got["policy"] == policy and got["ok"] and got["timeouts"]
        assert {k: v for k, v in got.items() if k not in CLOCKED} == \
            {k: v for k, v in want.items() if k not in CLOCKED}
    assert Transport().receiver_of("toy") == Transport().receiver_of("ecmp")
    res = CliRunner().invoke(sim_main, ["ethereal", "--hosts", "4", "--leaves", "2",
                                        "--collectives", "all-to-all", "--sizes", "64KiB",
                                        "--failures", "0", "--policies", "toy", "--workers", "0",
                                        "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for path in tmp_path.rglob("*.jsonl")
            for line in path.read_text().splitlines()]
    assert rows and {r["policy"] for r in rows if "policy" in r} == {"toy"}
