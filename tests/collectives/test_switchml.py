"""SwitchML host protocol against a Python aggregator (tests the hosts, not fabric.p4):
slots and credits, versions, timeouts, idempotent duplicates, float scaling."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from collectives_check import assert_results, runs

from collectives.launch import launch

HERE = Path(__file__).parent
ROOT = HERE.parent.parent


@pytest.fixture
def aggregator(bridge_net):
    procs = []

    def start(n: int):
        net = bridge_net(n)
        proc = subprocess.Popen(["ip", "netns", "exec", net.bridge_ns, sys.executable,
                                 str(HERE / "py_aggregator.py"), net.bridge_ip, *net.ips],
                                env=os.environ | {"PYTHONPATH": str(ROOT)})
        procs.append(proc)
        return net
    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def _plan(sizes, dtypes=("int32", "float32"), slots=8):
    plan = runs(sizes, dtypes=dtypes, algos=[("allreduce", "switchml")])
    for run in plan:
        run["options"] = {"aggregator": "10.77.0.254", "slots": slots, "rto": 0.01}
    return plan


@pytest.mark.netns
def test_switchml_is_exact(aggregator, tmp_path):
    net = aggregator(4)
    plan = _plan([1, 31, 33, 50_000])
    rows = launch(net.ips, plan, namespaces=net.namespaces, out_dir=tmp_path, timeout=120)
    assert_results(rows, plan, 4, tmp_path)


@pytest.mark.netns
@pytest.mark.ebpf
def test_switchml_recovers_from_loss_through_retransmission(aggregator, tmp_path):
    net = aggregator(4)
    prog = net.impair(drop=0.05)
    plan = _plan([20_000])
    rows = launch(net.ips, plan, namespaces=net.namespaces, out_dir=tmp_path, timeout=120)
    assert_results(rows, plan, 4, tmp_path)
    assert prog.counters().dropped > 0
    assert sum(r["packets_retransmitted"] for r in rows) > 0
    prog.close()
