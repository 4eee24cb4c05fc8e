"""The fidelity verdict (collectives/fidelity.py) and the Python traffic manager's pacing
monitor, without a fabric."""
from __future__ import annotations

import time

from collectives import fidelity
from p4switch.device.traffic_manager import TrafficManager


def test_fidelity_verdict_names_the_worst_port_before_cpu_waits():
    v = fidelity.judge(1.0, {"spine1 port 2": (0.30, 0.30), "leaf1 port 1": (0.01, 0.004)},
                       {"rank 0": 0.0}, {"leaf2": 0.50})
    assert v.faithful is False
    assert v.worst.startswith("spine1 port 2 lost 300 ms"), v.worst
    assert v.measured["offenders"][0].startswith("spine1 port 2")
    assert any(o.startswith("leaf2 waited 500 ms") for o in v.measured["offenders"])
    assert v.column() == "NO: spine1 port 2 lost 300 ms (30%)"


def test_fidelity_verdict_within_tolerance_is_faithful_and_empty_is_unmeasured():
    small = fidelity.TOLERANCE * 0.9
    v = fidelity.judge(2.0, {"leaf1 port 1": (small * 2.0, 0.001)}, {"rank 1": small * 2.0},
                       {"fabricd": small * 2.0})
    assert v.faithful is True and v.column() == "yes"
    assert fidelity.judge(1.0).column() == "unmeasured"
    over = fidelity.judge(1.0, stalls={"rank 3": 2 * fidelity.TOLERANCE})
    assert over.faithful is False and over.worst.startswith("rank 3's QPs stalled")


def test_fidelity_port_losses_between_readings_restart_with_a_new_pipeline():
    before = {1: (10, 0.1, 0.02, 0.003, 1), 2: (5, 0.1, 0.5, 0.2, 3)}
    after = {1: (20, 0.2, 0.05, 0.004, 2), 2: (3, 0.01, 0.01, 0.01, 1)}
    got = fidelity.port_losses(before, after)
    assert abs(got[1][0] - 0.03) < 1e-9 and got[1][1] == 0.004
    assert got[2] == (0.01, 0.01)            # the counter went down: counted from 0


def test_fidelity_thread_clocks_grow_and_a_process_waits_as_its_most_waiting_thread():
    clocks = fidelity.ThreadClocks("self")
    try:
        run0 = sum(r for r, _ in clocks.read().values())
        end = time.process_time() + 0.05
        while time.process_time() < end:
            pass
        assert sum(r for r, _ in clocks.read().values()) - run0 >= 0.04   # the same fds, reread
    finally:
        clocks.close()
    assert not clocks.fds
    assert fidelity.thread_waits()                  # this process's threads, by id
    assert fidelity.ThreadClocks(2 ** 30).read() == {}          # no such process
    before, after = {"1": 0.1, "2": 0.2}, {"1": 0.4, "2": 0.3, "3": 0.05}
    assert abs(fidelity.wait_between(before, after) - 0.3) < 1e-9


def test_fidelity_monitor_of_the_python_traffic_manager_counts_a_late_departure():
    tm = TrafficManager(depth=16, rate=1000.0, unit="pps")     # one packet per ms
    for i in range(3):
        tm.enqueue(1, i)
    time.sleep(0.05)                  # the port owed the first packet 50 ms ago
    for _ in range(3):
        tm.done(tm.dequeue().port)
    paced, busy, lost, late_max, late = tm.fidelity()[1]
    assert paced == 3 and abs(busy - 0.003) < 1e-9
    assert late >= 1 and 0.04 < lost < 1.0 and late_max > 0.04
    assert tm.fidelity()[1][3] == 0.0          # the worst lateness restarts per reading


def test_fidelity_column_of_the_collectives_summary():
    from collectives.results import summary

    row = {"run": 0, "collective": "allreduce", "algo": "ring", "dtype": "int32",
           "elements": 4, "ranks": 2, "policy": "ecmp", "reliability": "ooo", "cct_s": 1.0,
           "bytes_injected": 1, "packets_retransmitted": 0, "duplicates_received": 0,
           "timeouts": 0, "ok": True}
    busy = [row | {"rank": 0, "stall_s": 0.0, "runq_wait_s": 0.2},
            row | {"rank": 1, "stall_s": 0.0, "runq_wait_s": 0.0}]
    assert "NO: rank 0 CPU wait 200 ms (20%)" in summary(busy)
    assert summary([row | {"rank": 0}]).splitlines()[-1].rstrip().endswith("unmeasured")
