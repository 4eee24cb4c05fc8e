"""The fidelity verdict (collectives/fidelity.py), without a fabric."""
from __future__ import annotations

import time

from collectives import fidelity


def test_fidelity_verdict_names_the_worst_port_before_cpu_waits():
    v = fidelity.judge(1.0, {"spine1 port 2": (0.30, 0.30), "leaf1 port 1": (0.01, 0.004)},
                       {"rank 0": 0.0}, {"leaf2": 0.50})
    assert v.faithful is False
    assert v.worst.startswith("spine1 port 2 lost 300 ms"), v.worst
    assert v.measured["offenders"][0].startswith("spine1 port 2")
    assert any(o.startswith("leaf2 waited 500 ms") for o in v.measured["offenders"])
    assert v.column() == "NO: spine1 port 2 lost 300 ms (30%)"
    partial = fidelity.judge(1.0, {"leaf1 port 1": (0.2, 0.01, True)})
    assert partial.column() == "NO: leaf1 port 1 lost at least 200 ms (20%)"


def test_fidelity_verdict_within_tolerance_is_faithful_and_empty_is_unmeasured():
    small = fidelity.TOLERANCE * 0.9
    v = fidelity.judge(2.0, {"leaf1 port 1": (small * 2.0, 0.001)}, {"rank 1": small * 2.0},
                       {"fabricd": small * 2.0})
    assert v.faithful is True and v.column() == "yes"
    assert fidelity.judge(1.0).column() == "unmeasured"
    over = fidelity.judge(1.0, stalls={"rank 3": 2 * fidelity.TOLERANCE})
    assert over.faithful is False and over.worst.startswith("rank 3's QPs stalled")


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
