"""Every STF file under p4src/tests/ (one per fabric.p4 feature) runs through p4switch's STF
runner in the p4c dialect, which refuses what p4c's BMv2 driver cannot run: the same files run
unchanged on BMv2 where it is installed."""
from __future__ import annotations

import pytest
from fabric_testlib import FABRIC_P4

from p4switch.stf import run_stf

pytest_plugins = ["fabric_fixtures"]  # the `sw` fixture

STF_FILES = sorted((FABRIC_P4.parent / "tests").glob("*.stf"))
FEATURES = {"routing", "ecmp", "pin", "spray", "slices", "ecn", "multicast", "failover",
            "netreduce", "netreduce_spine",
            "switchml"}


def test_every_feature_has_an_stf_file():
    assert FEATURES <= {p.stem for p in STF_FILES}


@pytest.mark.parametrize("stf", STF_FILES, ids=[p.stem for p in STF_FILES])
def test_stf(stf, sw):
    result = run_stf(FABRIC_P4, stf, sw=sw, dialect="p4c")
    assert result.passed, result.report
