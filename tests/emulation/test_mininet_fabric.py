"""The demo's fabric, for real: Mininet with p4switch switches that only fabricd configures,
hosts that reach each other through it, and a collective under Ethereal whose sub-flows
take both spines."""
import json
import sys
from pathlib import Path

import pytest

from collectives.launch import launch
from fabricmodel.topology import load

ROOT = Path(__file__).resolve().parents[2]
TOPO = ROOT / "controller" / "topologies" / "leafspine-2x2.yaml"
pytestmark = [pytest.mark.mininet, pytest.mark.slow]


@pytest.fixture
def fabric(tmp_path):
    pytest.importorskip("mininet.net", reason="Mininet is not installed")
    sys.path.insert(0, str(ROOT / "mininet"))
    from fabric_net import build_net, configure_hosts
    from fabricd_proc import Fabricd

    topo = load(TOPO)
    net = build_net(topo, log_dir=str(tmp_path))
    try:
        net.start()
        configure_hosts(net, topo)
        with Fabricd(TOPO, tmp_path) as fabricd:
            yield net, topo, fabricd
    finally:
        net.stop()
        sys.path.remove(str(ROOT / "mininet"))


def spine_tx(fabricd, spine):
    return sum(int(p["tx_packets"]) for p in fabricd.ctl_json("counters", spine)["ports"])


def test_fabricd_programs_the_mininet_fabric_and_ethereal_uses_both_spines(fabric):
    from fabric_net import host_netns, ping_all

    net, topo, fabricd = fabric
    state = fabricd.ctl("--json", "state")
    assert state.returncode == 0, state.stderr
    assert ping_all(net, topo)
    hosts = sorted(topo.hosts.values(), key=lambda h: h.rank)
    runs = [{"collective": "allreduce", "algo": "ring", "dtype": "int32", "elements": 16384}]
    with host_netns(net, [h.name for h in hosts], prefix="mlft-") as namespaces:
        before = {s: spine_tx(fabricd, s) for s in ("spine1", "spine2")}
        # An RTO far above the software switches' queueing on a busy machine: a spurious
        # go-back-N timeout resends a window on one spine and skews the split below
        rows = launch([h.ip for h in hosts], runs, namespaces=namespaces, policy="ethereal",
                      topology=str(TOPO), timeout=180,
                      transport={"min_rto": 0.5, "max_rto": 2.0})
        after = {s: spine_tx(fabricd, s) for s in ("spine1", "spine2")}
    assert len(rows) == 4 and all(r["ok"] for r in rows), json.dumps(rows)[:2000]
    sent = {s: after[s] - before[s] for s in after}
    # A ring's two cross-leaf flows are each split in two and pinned to different spines:
    # both spines carry close to half of the cross-leaf packets. A timeout (a busy machine
    # delaying the ACKs past the RTO) moves a sub-flow to the other spine and resends its
    # window there: then only both spines carrying traffic is the design's.
    total = sum(sent.values())
    assert total > 0 and all(sent.values()), sent
    repicks = sum(r["repicks"] for r in rows)
    assert repicks <= sum(r["timeouts"] for r in rows), rows
    if not repicks:
        # a retransmission crosses one spine, and so does the ACK it may draw
        skew = 2 * sum(r["packets_retransmitted"] for r in rows)
        assert all(0.35 * total - skew < v < 0.65 * total + skew for v in sent.values()), \
            (sent, skew)
