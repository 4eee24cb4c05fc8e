"""The native transport's receive path as a launch sets it up: the tc program of
collectives/native/steer.py keeps the RoCEv2 packets the packet ring has taken out of the
receivers' IP stack (ip_rcv drops them as PACKET_OTHERHOST), after impair and the policies'
programs, and leaves with the launch."""
from __future__ import annotations

import json
import subprocess

import pytest
from collectives_check import assert_results, runs

from collectives.launch import launch
from collectives.native import default_backend, steer
from ebpf import tc

pytestmark = [pytest.mark.netns, pytest.mark.ebpf]


def _otherhost(ns: str, dev: str) -> int:
    out = subprocess.run(["ip", "-n", ns, "-j", "-s", "-s", "link", "show", "dev", dev],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)[0]["stats64"]["rx"].get("otherhost", 0)


def test_steering_keeps_received_roce_out_of_the_ip_stack_and_leaves(bridge_net, tmp_path):
    if default_backend() != "native":
        pytest.skip("no C compiler: the ranks run the Python transport")
    net = bridge_net(2)
    plan = runs([64_000], dtypes=("int32",), algos=[("alltoall", "direct")])
    before = [_otherhost(ns, dev) for ns, dev in zip(net.namespaces, net.rank_devs, strict=True)]
    rows = launch(net.ips, plan, namespaces=net.namespaces, out_dir=tmp_path,
                  transport={"reliability": "sr"})
    assert_results(rows, plan, 2, tmp_path)
    sent = {row["rank"]: row["packets_sent"] for row in rows}
    for r, (ns, dev) in enumerate(zip(net.namespaces, net.rank_devs, strict=True)):
        # every RoCEv2 packet the other rank sent (data, ACKs), dropped by ip_rcv first thing
        assert _otherhost(ns, dev) - before[r] >= sent[1 - r]
        assert not [f for f in tc.filters(dev, ns) if f.prio == steer.PRIO]
