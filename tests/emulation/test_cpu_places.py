"""mininet/cpu_places.py: groups get disjoint CPUs when the machine has enough, and what a
placed thread starts (a job's rank processes) runs on its group's CPUs."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "mininet"))
import cpu_places  # noqa: E402

sys.path.remove(str(ROOT / "mininet"))


def test_fidelity_cpu_shares_are_disjoint_when_there_are_enough_cpus():
    assert cpu_places.shares(["jobA", "jobB"], [0, 1]) == {"jobA": {0}, "jobB": {1}}
    assert cpu_places.shares(["a", "b"], [0, 1, 2, 3]) == {"a": {0, 1}, "b": {2, 3}}
    assert cpu_places.shares(["a", "b", "c"], [0, 1]) == {"a": {0}, "b": {1}, "c": {0}}


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
def test_fidelity_a_placed_thread_starts_its_processes_on_its_cpus():
    cpu = max(os.sched_getaffinity(0))
    code = "import os; print(sorted(os.sched_getaffinity(0)))"
    with cpu_places.this_thread_on({cpu}):
        child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert child.stdout.strip() == f"[{cpu}]"
    assert len(os.sched_getaffinity(0)) >= 2          # the thread is back on every CPU
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        with cpu_places.placed({"s": proc.pid}, {"s": {cpu}}):
            assert os.sched_getaffinity(proc.pid) == {cpu}
        assert os.sched_getaffinity(proc.pid) == os.sched_getaffinity(0)
    finally:
        proc.kill()
        proc.wait()

