"""The live view without a network: who uses each link comes from the intent (slices,
steps, multicast and aggregation trees), each directed link's load from the right switch
counter, and the markup carries both, with failed links drawn down."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from controller.intent import Intent
from controller.liveview import view
from controller.liveview.loads import LoadSampler, link_counter
from controller.liveview.usage import link_users
from fabricmodel.ethereal import Flow

TOPOLOGIES = Path(__file__).resolve().parents[2] / "controller" / "topologies"


@pytest.fixture
def intent():
    return Intent.from_yaml((TOPOLOGIES / "leafspine-4x4.yaml").read_text(), slot_capacity=64)


def names(intent, users, who):
    return {intent.topo.links[i].name for i, us in users.items() if who in us}


def test_slice_step_group_and_jobs_mark_the_links_they_use(intent):
    sl = intent.create_slice("jobA", 4)
    intent.install_step("s1", [Flow("h5", "h9", 1 << 20)], False)
    intent.create_group("g1", ["h6", "h10", "h14"])
    intent.create_nr_job("nr1", ["h7", "h11"])
    users = link_users(intent)
    assert names(intent, users, "slice jobA") == {intent.topo.links[i].name for i in sl.links}
    step = names(intent, users, "step s1")
    assert {"h5-leaf2", "h9-leaf3"} <= step and any("spine" in n for n in step)
    group = names(intent, users, "group g1")
    assert {"h6-leaf2", "h10-leaf3", "h14-leaf4"} <= group
    assert any("spine" in n for n in group)
    assert {"h7-leaf2", "h11-leaf3"} <= names(intent, users, "netreduce nr1")
    # no link of the slice is used by anything else: vClos holds its links exclusively
    assert all(us == ["slice jobA"] for i, us in users.items() if i in sl.links)


def test_each_direction_is_counted_where_its_bytes_are(intent):
    topo = intent.topo
    up = topo.link("leaf1", "spine2")
    assert link_counter(topo, "leaf1", "spine2", up) == ("leaf1", up.port_of("leaf1"), "tx")
    assert link_counter(topo, "spine2", "leaf1", up) == ("spine2", up.port_of("spine2"), "tx")
    host = topo.links_between("h1", "leaf1")[0]
    # a host has no counters: what it sends is what its leaf receives
    assert link_counter(topo, "h1", "leaf1", host) == ("leaf1", host.port_of("leaf1"), "rx")


class _Fabric:
    def __init__(self, intent):
        self.intent, self.devices = intent, {}


def test_rate_is_bytes_over_the_window(intent):
    sampler = LoadSampler(_Fabric(intent), window=1.0)
    key = ("leaf1", 3, "tx")
    assert sampler.rate_bps(key) == 0.0
    for t, nbytes in ((0.0, 0), (0.5, 1000), (1.0, 2500), (1.5, 2500)):
        sampler._push(key, t, nbytes)
    # the window keeps 0.5 .. 1.5: 1,500 bytes in one second
    assert sampler.rate_bps(key) == pytest.approx(1500 * 8)


def test_markup_shows_loads_users_and_down_links(intent):
    topo = intent.topo
    lk = topo.link("leaf1", "spine1")
    intent.set_link("leaf1-spine1", False)
    loads = {(lk.index, "leaf1"): 8e6}
    users = {lk.index: ["slice jobA"]}
    page = view.fragment(topo, loads, users, set(intent.failed))
    row = re.search(r'<tr data-link="leaf1-spine1" data-state="(\w+)" data-load-bps="(\d+)"',
                    page)
    assert row.groups() == ("down", "8000000")
    assert "8.0 Mbit/s" in page and "slice jobA" in page
    assert re.search(r'stroke-dasharray="6,4" data-link="leaf1-spine1" data-from="leaf1" '
                     r'data-load-bps="8000000"', page)
    assert len(re.findall(r"<line ", page)) == 2 * len(topo.links)
    assert len(re.findall(r'data-state="up"', page)) == len(topo.links) - 1
