"""collectives.launch: once a rank fails, the others are stopped after a grace period, not
left waiting for a dead peer until the launch's timeout."""
import subprocess
import sys
import time

from collectives.launch import _wait_ranks


def _rank(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code])


def test_a_failed_rank_stops_its_waiting_peers_after_the_grace():
    start = time.monotonic()
    codes = _wait_ranks([_rank("raise SystemExit(3)"), _rank("import time; time.sleep(60)"),
                         _rank("pass")], timeout=60, grace=0.5)
    assert codes == [3, "stopped", 0]
    assert time.monotonic() - start < 30


def test_ranks_past_the_timeout_are_killed_as_timed_out():
    codes = _wait_ranks([_rank("import time; time.sleep(60)"), _rank("pass")], timeout=0.5)
    assert codes == ["timeout", 0]
