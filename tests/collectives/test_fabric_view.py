"""Ethereal plans over the fabric as fabricd installed it (collectives/fabric_view.py): links
marked down leave the paths, and a port is chosen for the member order the switches hash over."""
from __future__ import annotations

from collectives import fabric_view
from collectives.lb import make_policy
from collectives.transport import SendQP, TransportConfig
from fabricmodel import hashing
from fabricmodel.topology import load

TOPO = load("controller/topologies/leafspine-2x2.yaml")
HOSTS = [TOPO.host_by_rank(r).name for r in range(4)]
IPS = [TOPO.host_by_rank(r).ip for r in range(4)]


class Pins:
    def __init__(self):
        self.pins = {}

    def pin(self, ip, qpn, sport):
        self.pins[ip, qpn] = sport

    def unpin(self, ip, qpn):
        self.pins.pop((ip, qpn), None)


class Ep:
    rank, peers, cfg = 0, IPS, TransportConfig()


def _plan(view):
    routing = fabric_view.installed_routing(TOPO, view)
    pins = Pins()
    policy = make_policy("ethereal", 0, IPS, topology=TOPO, hosts=HOSTS, program=pins,
                         routing=routing)
    plan = policy.plan({2: 64 << 10, 3: 64 << 10})        # h1 -> h3, h4 on the other leaf
    for peer, pieces in plan.items():
        for p in pieces:
            policy.prepare(SendQP(Ep, peer, p.qp))
    return policy, plan, pins


def _members(view, switch, prefix):
    return next(ports for sw, pre, ports in view["routes"] if (sw, pre) == (switch, prefix))


def test_a_link_marked_down_leaves_the_paths():
    view = {"down": [["leaf1", 3, "spine1", 1]],
            "routes": [["leaf1", "10.0.2.0/24", [4]], ["leaf2", "10.0.1.0/24", [3, 4]]]}
    policy, plan, pins = _plan(view)
    for sub in policy.subs.values():
        assert [h.dst for h in sub.path.hops][0] == "spine2"
    assert len(pins.pins) == sum(len(p) for p in plan.values())


def test_ports_follow_the_installed_member_order():
    """fabricd lists leaf1's members toward leaf2 as [4, 3] (spine2 first): the port of a
    sub-flow meant for spine1 must hash onto member 1 of that list, not the file's order."""
    for order in ([3, 4], [4, 3]):
        view = {"down": [], "routes": [["leaf1", "10.0.2.0/24", order],
                                       ["leaf2", "10.0.1.0/24", [3, 4]]]}
        policy, _, pins = _plan(view)
        used = set()
        for (peer, idx), sub in policy.subs.items():
            sport = pins.pins[IPS[peer], SendQP(Ep, peer, idx).dqpn]
            first = sub.path.hops[0]
            member = hashing.ecmp_member(IPS[0], IPS[peer], 17, sport, 4791, 2,
                                         hashing.switch_salt("leaf1"))
            assert _members(view, "leaf1", "10.0.2.0/24")[member] == first.src_port
            used.add(first.dst)
        assert used == {"spine1", "spine2"}


def test_sub_flows_of_one_flow_share_its_window():
    """h1 sends one flow to the other leaf (split over both spines) and one in its rack: the
    split flow's two QPs carry the window of one flow between them, not two windows."""
    pins = Pins()
    policy = make_policy("ethereal", 0, IPS, topology=TOPO, hosts=HOSTS, program=pins)
    plan = policy.plan({1: 64 << 10, 2: 64 << 10})
    assert len(plan[2]) == 2 and len(plan[1]) == 1
    windows = {}
    for peer, pieces in plan.items():
        for p in pieces:
            qp = SendQP(Ep, peer, p.qp)
            policy.prepare(qp)
            windows[peer, p.qp] = qp.window
    w = Ep.cfg.window
    assert windows == {(1, 0): w, (2, 0): w // 2, (2, 1): w // 2}
