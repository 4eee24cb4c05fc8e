"""Seeded runs give exactly the results recorded at main ab86126 (the same events, in the same
order, on the same picosecond clock): a change that is meant to make the simulator faster must
not change what it simulates."""
from __future__ import annotations

import pytest

from fabricmodel.topology import fat_tree, leaf_spine
from sim.cli import failed_links
from sim.collective import Run
from sim.fabric import LinkSpec

LINK = LinkSpec(gbps=100, delay_ns=500)
FIELDS = ("cct_s", "retransmitted", "timeouts", "max_queue_kb", "packets", "ecn_marked",
          "dropped", "qps", "sim_end_s")

# (topology, collective, bytes per rank, policy, failed links) -> the recorded row's FIELDS
RECORDED = [
    ("ls444", "all-to-all", 16 * 65536, "ecmp", 1,
     (0.0006103351999999999, 416, 52, 75.762, 4256, 0, 416, 240, 10.0)),
    ("ls444", "all-to-all", 16 * 65536, "spray", 1,
     (0.00071930784, 513, 284, 58.75, 4353, 0, 513, 240, 10.0)),
    ("ls444", "all-to-all", 16 * 65536, "reps", 1,
     (0.00033193599999999996, 500, 286, 46.09, 4340, 0, 500, 240, 10.0)),
    ("ls444", "all-to-all", 16 * 65536, "ethereal", 1,
     (0.00023611392, 384, 48, 179.612, 4224, 3, 384, 240, 10.0)),
    ("ls444", "halving-doubling", 16 * 65536, "ethereal", 1,
     (0.00061196384, 384, 32, 263.814, 8064, 49, 384, 288, 10.0)),
    ("ft4", "all-to-all", 16 * 100_000, "reps", 1,
     (0.00091534192, 1600, 609, 946.12, 7600, 2741, 1412, 240, 10.0)),
]
TOPOLOGIES = {"ls444": lambda: leaf_spine(4, 4, 4), "ft4": lambda: fat_tree(4)}


@pytest.mark.parametrize("topo, algorithm, size, policy, failures, want", RECORDED,
                         ids=[f"{r[0]}-{r[1]}-{r[3]}" for r in RECORDED])
def test_seeded_run_is_exactly_as_recorded(topo, algorithm, size, policy, failures, want):
    t = TOPOLOGIES[topo]()
    row = Run(t, algorithm, size, policy, link=LINK, failed=failed_links(t, failures)).run()
    assert row["ok"]
    assert tuple(row[f] for f in FIELDS) == want
