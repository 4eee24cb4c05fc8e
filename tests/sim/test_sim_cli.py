"""`python -m sim` refuses bad input with a precise message before it builds anything."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from sim.cli import main


@pytest.mark.parametrize("args, message", [
    (["ethereal", "--policies", "ecmp,magic"], "unknown policy ['magic']"),
    (["ethereal", "--collectives", "ring,bogus"], "unknown collective ['bogus']"),
    (["ethereal", "--hosts", "10", "--leaves", "3"], "10 hosts do not spread evenly over 3"),
    (["ethereal", "--hosts", "16", "--failures", "5"], "has no 5 disjoint leaf uplinks"),
    (["ethereal", "--failures", "one"], "is not a list of counts"),
    (["ethereal", "--sizes", "lots"], "--sizes"),
    (["netreduce", "--hosts", "300"], "each fabric needs 2..255 hosts"),
    (["multicast", "--hosts", "x"], "'x' is not a list of host counts"),
])
def test_bad_arguments_are_refused(tmp_path, args, message):
    result = CliRunner().invoke(main, [*args, "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not list(tmp_path.iterdir())      # nothing written
