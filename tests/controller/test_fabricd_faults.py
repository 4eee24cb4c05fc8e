"""Faults of the control plane under a running collective, on the netns fabric (four p4switch
processes that only fabricd configured, hosts in namespaces):
- a switch process killed in the middle of a ring all-reduce and restarted empty on the same
  ports: fabricd sees the stream break, pushes the pipeline and every entry again, and the
  collective completes exact through the RC transport's retransmissions;
- a leaf-spine link taken down and up twice during an all-to-all under Ethereal: exact, and
  the ranks report the sub-flows they re-picked."""
from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest

from collectives.launch import launch
from tests.netns_fabric import build

pytestmark = [pytest.mark.netns, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
TOPO = REPO / "controller" / "topologies" / "leafspine-2x2.yaml"
HOSTS = ["h1", "h2", "h3", "h4"]
# Timeouts far above a software switch's queueing on a loaded machine, back-off capped low so
# that the first retransmission after a repair comes soon, and retries enough to outlast a
# switch restart (~2-10 s here) or a link down for a second.
TRANSPORT = {"min_rto": 0.2, "max_rto": 0.5, "retry_limit": 400}
ZERO = {"duplicated": 0, "missing": 0, "stale": 0}


@pytest.fixture
def net(netns_factory, tmp_path):
    yield from build(netns_factory, tmp_path, TOPO.read_text(), queue_depth=512)


def run(net, tmp_path, collective: str, algo: str, elements: int, policy: str, during):
    ips = [net.ip(h) for h in HOSTS]
    plan = [{"collective": collective, "algo": algo, "dtype": "int32", "elements": elements}]
    return launch(ips, plan, namespaces=[net.hosts[h] for h in HOSTS], out_dir=tmp_path,
                  timeout=600, step_timeout=300, transport=TRANSPORT, policy=policy,
                  topology=str(TOPO), during=during)


def test_switch_restart_mid_collective_is_repushed_and_the_collective_exact(net, tmp_path):
    events = {}

    def crash_leaf1():
        net.wait_for_traffic(net.host_port("h1"), 256 << 10)
        events["killed"] = time.monotonic()
        events["log_at"] = len(net.log.read_text())     # what fabricd logs from the kill on
        events["restart_s"] = net.restart_switch("leaf1")
        deadline = time.monotonic() + 120
        while "leaf1: re-synchronised" not in net.log.read_text()[events["log_at"]:]:
            assert time.monotonic() < deadline, net.log.read_text()
            time.sleep(0.05)
        events["resynced"] = time.monotonic()

    crasher = threading.Thread(target=crash_leaf1)
    rows = run(net, tmp_path, "allreduce", "ring", 1 << 20, "ecmp",
               during=lambda: crasher.start())
    crasher.join(130)
    assert "resynced" in events, "leaf1 was not re-synchronised during the collective"
    assert all(r["ok"] for r in rows), rows                       # exact
    assert sum(r["packets_retransmitted"] for r in rows) > 0      # the crash hit mid-run
    log = net.log.read_text()[events["log_at"]:]
    assert "leaf1: P4Runtime session lost" in log
    assert "pipeline pushed" in log.split("leaf1: re-synchronised")[1].splitlines()[0]
    assert net.difference() == {name: ZERO for name in net.switches}
    print(f"leaf1 restarted in {events['restart_s']:.2f} s, re-synchronised "
          f"{events['resynced'] - events['killed']:.2f} s after the kill")


@pytest.mark.ebpf
@pytest.mark.xfail(run=False, reason="open bug: after two flaps of leaf1-spine1 the ranks finish "
                   "the Ethereal all-to-all and then hang in the closing barrier (no packet moves; "
                   "seen on the native and, with 32 MiB per rank, the Python transport), so the "
                   "launch times out after 300 s")
def test_link_flap_twice_during_ethereal_alltoall_is_exact_and_repicks_are_reported(
        net, tmp_path):
    link = next(lk for lk in net.topo.links if {lk.a, lk.b} == {"leaf1", "spine1"})
    flaps = []

    def flap_twice():
        net.wait_for_traffic(link.a_intf, 128 << 10)
        for _ in range(2):
            subprocess.run(["ip", "-n", net.fab, "link", "set", link.a_intf, "down"],
                           check=True)
            time.sleep(1.0)          # down for 2 RTOs and more: the sub-flows on it time out
            subprocess.run(["ip", "-n", net.fab, "link", "set", link.a_intf, "up"],
                           check=True)
            flaps.append(time.monotonic())
            time.sleep(0.5)

    flapper = threading.Thread(target=flap_twice)
    rows = run(net, tmp_path, "alltoall", "direct", 1 << 21, "ethereal",
               during=lambda: flapper.start())
    done = time.monotonic()
    flapper.join(130)
    assert len(flaps) == 2 and flaps[-1] < done, "the flaps did not both fall within the run"
    assert all(r["ok"] for r in rows), rows
    repicks = sum(r["repicks"] for r in rows)
    print(f"re-picks per rank: {[r['repicks'] for r in rows]}, retransmitted "
          f"{sum(r['packets_retransmitted'] for r in rows)}")
    assert repicks > 0
