"""The fidelity monitor end to end on a netns fabric of p4switch processes (leaf1 - spine1 -
leaf2, one rank behind each leaf, links paced at 20 Mbit/s): a ring all-reduce whose spine is
stopped (SIGSTOP) for 300 ms in the middle of it is marked not faithful, the spine named
among the offenders with the stop's length of lost link time; the same run left alone is
faithful (skipped, saying so, when the machine is too busy for any run to be). The switches'
packet threads run in the real-time class, as the demo's do (mininet/p4_switch.py)."""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from collectives.fidelity import TOLERANCE
from collectives.launch import launch
from tests.conftest import NetnsFactory
from tests.netns_fabric import build

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.netns
TOPOLOGY = """name: fidelity
kind: leaf-spine
leaves: 2
spines: 1
hosts_per_leaf: 1
"""
STOP_S = 0.3
RUN = {"collective": "allreduce", "algo": "ring", "dtype": "int32", "elements": 1 << 19}


@pytest.fixture(scope="module")
def watch():
    sys.path.insert(0, str(ROOT / "mininet"))
    import fidelity_watch
    yield fidelity_watch
    sys.path.remove(str(ROOT / "mininet"))


@pytest.fixture(scope="module")
def fabric(tmp_path_factory, watch):
    from p4_switch import PACKET_PRIORITY  # the demo's switches' (mininet/, on the path)

    factory = NetnsFactory()
    try:
        yield from build(factory, tmp_path_factory.mktemp("fidfab"), TOPOLOGY, queue_depth=256,
                         switch_args=("--queue-rate", "20mbps",
                                      "--packet-priority", str(PACKET_PRIORITY)))
    finally:
        factory.cleanup()


def test_fidelity_switch_packet_threads_run_real_time(fabric, watch):
    from p4_switch import PACKET_PRIORITY

    for name, p in fabric.procs.items():
        tasks = Path(f"/proc/{p.proc.pid}/task").iterdir()
        real_time = [t.name for t in tasks if os.sched_getscheduler(int(t.name)) == os.SCHED_FIFO]
        # the ingress and egress threads only: P4Runtime, gRPC and Python stay ordinary
        assert len(real_time) == 2, (name, real_time)
        assert all(os.sched_getparam(int(t)).sched_priority == PACKET_PRIORITY for t in real_time)


def _run(fabric, watch, during=None):
    monitor = watch.FabricMonitor(
        {name: (p.proc.pid, fabric.controls[name]) for name, p in fabric.procs.items()}, {})
    hosts = sorted(fabric.hosts)
    sampler = monitor.read()
    rows = launch([fabric.ip(h) for h in hosts], [RUN], namespaces=[fabric.hosts[h] for h in hosts],
                  transport={"window": 32, "min_rto": 0.5}, during=during, timeout=120)
    assert all(r["ok"] for r in rows)
    return monitor.verdict(sampler, rows)


def test_fidelity_names_a_starved_switch_and_passes_the_same_run_left_alone(fabric, watch):
    spine = fabric.procs["spine1"].proc.pid
    lk = next(lk for lk in fabric.topo.links if "spine1" in (lk.a, lk.b))
    intf = lk.a_intf if lk.a == "spine1" else lk.b_intf

    def starve():
        fabric.wait_for_traffic(intf, 200_000, timeout=60)
        os.kill(spine, signal.SIGSTOP)
        time.sleep(STOP_S)
        os.kill(spine, signal.SIGCONT)

    starved = _run(fabric, watch, starve)
    print("starved:", starved.column(), starved.measured)
    assert starved.faithful is False
    # named: among the offenders (on a busy machine other switches lose link time too), and
    # its ports the ones with the stop's signature, one packet held for the whole stop
    assert any(w.startswith("spine1 port") for w in starved.measured["offenders"]), starved.worst
    lost = max(v for k, v in starved.measured["ports_lost_s"].items() if k.startswith("spine1"))
    assert 0.8 * STOP_S < lost < 4 * STOP_S, starved.measured
    late = starved.measured["ports_late_max_s"]
    assert max(late, key=late.get).startswith("spine1"), late
    assert late[max(late, key=late.get)] > 0.8 * STOP_S, late

    alone = _run(fabric, watch)
    print("alone:", alone.column(), alone.measured)
    spine_lost = [v for k, v in alone.measured["ports_lost_s"].items() if k.startswith("spine1")]
    assert max(spine_lost) < 0.5 * STOP_S, alone.measured
    busy = max(alone.measured["runq_wait_s"].values()) > TOLERANCE * alone.window_s
    if not alone.faithful and busy:
        pytest.skip(f"the machine is too busy for a faithful run (load "
                    f"{os.getloadavg()[0]:.1f}): {alone.worst}")
    assert alone.faithful, alone.worst
