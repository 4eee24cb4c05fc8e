"""Seeded runs give exactly the results recorded: a change that is meant to make the simulator
faster must not change what it simulates.

The engine's own picosecond clock reproduced the results recorded at main ab86126 bit for bit;
these were recorded again when the engine gained go-back-N receivers (ecmp, ethereal), PFC,
DCQCN with CNPs, the RTO's backoff and strict-priority control packets: the same runs, now
with those mechanisms (a black-holed flow now waits 100, 200, 400 us ... between its
timeouts, which is why spray and reps end later than before); and again when every switch's
ECMP hash got its salt (fabricmodel.hashing.switch_salt): the hashed rows (ecmp, spray,
reps) take other paths around the failed link, Ethereal's planned paths are unchanged."""
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
     (0.00151232912, 592, 37, 162.006, 4432, 0, 592, 240, 10.0)),
    ("ls444", "all-to-all", 16 * 65536, "spray", 1,
     (0.0019302744, 525, 263, 45.694, 4365, 0, 525, 240, 10.0)),
    ("ls444", "all-to-all", 16 * 65536, "reps", 1,
     (0.0009053504, 500, 270, 41.54, 4340, 0, 500, 240, 10.0)),
    ("ls444", "all-to-all", 16 * 65536, "ethereal", 1,
     (0.00013393552, 384, 24, 199.392, 4224, 0, 384, 240, 10.0)),
    ("ls444", "halving-doubling", 16 * 65536, "ethereal", 1,
     (0.00040875583999999996, 384, 16, 240.932, 8064, 0, 384, 304, 10.0)),
    ("ft4", "all-to-all", 16 * 100_000, "reps", 1,
     (0.0261080256, 1384, 363, 323.366, 7384, 0, 1384, 240, 10.0)),
]
TOPOLOGIES = {"ls444": lambda: leaf_spine(4, 4, 4), "ft4": lambda: fat_tree(4)}


@pytest.mark.parametrize("topo, algorithm, size, policy, failures, want", RECORDED,
                         ids=[f"{r[0]}-{r[1]}-{r[3]}" for r in RECORDED])
def test_seeded_run_is_exactly_as_recorded(topo, algorithm, size, policy, failures, want):
    t = TOPOLOGIES[topo]()
    row = Run(t, algorithm, size, policy, link=LINK, failed=failed_links(t, failures)).run()
    assert row["ok"]
    assert tuple(row[f] for f in FIELDS) == want
