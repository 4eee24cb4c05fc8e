"""Every STF file under p4src/tests/ (one per fabric.p4 feature) runs through p4switch's STF
runner in the p4c dialect, which refuses what p4c's BMv2 driver cannot run: the same files run
unchanged on BMv2 where it is installed."""
from __future__ import annotations

import pytest
from fabric_testlib import FABRIC_P4

from p4switch.stf import run_stf

pytest_plugins = ["fabric_fixtures"]  # the `sw` fixture

STF_FILES = sorted((FABRIC_P4.parent / "tests").glob("*.stf"))
FEATURES = {"routing", "ecmp", "salt", "pin", "spray", "slices", "ecn", "multicast", "failover",
            "netreduce", "netreduce_spine",
            "switchml"}


def test_every_feature_has_an_stf_file():
    assert FEATURES <= {p.stem for p in STF_FILES}


def test_salt_stf_sends_the_ecmp_flows_elsewhere():
    """salt.stf replays ecmp.stf's packets on a switch with another salt of the same tier:
    the same 5-tuples, and several expected on other uplinks (both computed by the model)."""
    def expected(name):
        return [line.split()[1] for line in (FABRIC_P4.parent / "tests" / name).read_text()
                .splitlines() if line.startswith("expect ")]
    a, b = expected("ecmp.stf"), expected("salt.stf")
    assert len(a) == len(b) == 12
    assert sum(x != y for x, y in zip(a, b, strict=True)) >= 6


@pytest.mark.parametrize("stf", STF_FILES, ids=[p.stem for p in STF_FILES])
def test_stf(stf, sw):
    result = run_stf(FABRIC_P4, stf, sw=sw, dialect="p4c")
    assert result.passed, result.report
