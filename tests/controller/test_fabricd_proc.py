"""mininet/fabricd_proc.py: a fabric whose switches never come up fails within its deadline
and says which switches and what they logged (a test timeout would say nothing)."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "mininet"))
from fabricd_proc import Fabricd  # noqa: E402

TOPO = ROOT / "controller" / "topologies" / "leafspine-2x2.yaml"


def test_switches_never_in_sync_fail_with_what_they_logged(tmp_path):
    (tmp_path / "leaf1.log").write_text("p4switch: started\np4switch: stuck on port 3\n")
    with pytest.raises(RuntimeError) as err:
        with Fabricd(TOPO, tmp_path, sync_timeout=2):
            pass
    text = str(err.value)
    assert "not in sync after 2 s" in text, text
    assert "spine2" in text and "leaf1.log:\n  p4switch: started\n  p4switch: stuck on port 3" in text, text
    assert "fabricd.log:" in text
