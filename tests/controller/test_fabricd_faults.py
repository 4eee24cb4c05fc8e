"""Faults of the control plane under a running collective, on the netns fabric (four p4switch
processes that only fabricd configured, hosts in namespaces):
- a switch process killed in the middle of a ring all-reduce and restarted empty on the same
  ports: fabricd sees the stream break, pushes the pipeline and every entry again, and the
  collective completes exact through the RC transport's retransmissions;
- a leaf-spine link taken down and up twice during an all-to-all under Ethereal, on both
  transports: exact, and the ranks report the sub-flows they re-picked."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from collectives.launch import launch
from tests.conftest import NetnsFactory
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


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    """One fabric for both faults: the link flaps run on the switch restarted before."""
    factory = NetnsFactory()
    try:
        yield from build(factory, tmp_path_factory.mktemp("faults"), TOPO.read_text(),
                         queue_depth=512)
    finally:
        factory.cleanup()


def run(net, tmp_path, collective: str, algo: str, elements: int, policy: str, during,
        transport: dict = TRANSPORT):
    ips = [net.ip(h) for h in HOSTS]
    plan = [{"collective": collective, "algo": algo, "dtype": "int32", "elements": elements}]
    return launch(ips, plan, namespaces=[net.hosts[h] for h in HOSTS], out_dir=tmp_path,
                  timeout=600, step_timeout=300, transport=transport, policy=policy,
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


def flap_twice(net, intf: str, flaps: list[float], down: float, up: float) -> None:
    """Once traffic crosses `intf`: sets it down for `down` s, up for `up` s, twice; the
    wall-clock time of every change goes into `flaps`. Over netlink, so that nothing but the
    holds separates the changes."""
    net.wait_for_traffic(intf, 64 << 10)
    with net.links() as ipr:
        (index,) = ipr.link_lookup(ifname=intf)
        for _ in range(2):
            for state, hold in (("down", down), ("up", up)):
                ipr.link("set", index=index, state=state)
                flaps.append(time.time())
                time.sleep(hold)


@pytest.mark.ebpf
def test_link_flap_twice_during_ethereal_alltoall_is_exact_and_repicks_are_reported(
        net, tmp_path):
    """On both transports. Each rank sends one of its two remote flows over spine1 (Ethereal
    spreads two flows over two paths), so the flapped link stalls a sub-flow of every rank."""
    link = next(lk for lk in net.topo.links if {lk.a, lk.b} == {"leaf1", "spine1"})
    for backend in ("native", "python"):
        flaps: list[float] = []
        flapper = threading.Thread(target=flap_twice, args=(net, link.a_intf, flaps, 0.5, 0.3))
        # Paced at 2 Mbit/s per QP, each rank's 1 MiB per peer takes at least 4.2 s whatever
        # the load, so both flaps (1.6 s from the first 64 KiB on the link) fall inside the
        # collective at little CPU. Down for 0.5 s: a sub-flow's window (64 packets at ~234
        # packets/s) fills with lost packets in 0.27 s, so its RTO fires, not a NAK.
        rows = run(net, tmp_path, "alltoall", "direct", 1 << 20, "ethereal",
                   during=flapper.start, transport=TRANSPORT | {"backend": backend,
                                                                 "rate_gbps": 0.002})
        flapper.join(130)
        assert len(flaps) == 4, flaps
        # Both flaps within the collective: the first comes after its traffic crossed the
        # link (so after a rank started; another, descheduled after the barrier, may start
        # later), the last before any rank completed.
        assert min(r["started_at"] for r in rows) < flaps[0], (backend, flaps, rows)
        for r in rows:
            assert flaps[-1] < r["started_at"] + r["cct_s"], \
                (backend, flaps, r["started_at"], r["cct_s"])
        assert all(r["ok"] for r in rows), rows
        print(f"{backend}: re-picks per rank {[r['repicks'] for r in rows]}, retransmitted "
              f"{sum(r['packets_retransmitted'] for r in rows)}")
        assert sum(r["repicks"] for r in rows) > 0
