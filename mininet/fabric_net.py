"""Build a Mininet network from the project's topology model (fabricmodel/topology.py): the
same names, port numbers and addresses the controller uses."""
from __future__ import annotations

import subprocess
from contextlib import contextmanager

from mininet.link import Link
from mininet.net import Mininet
from mininet.topo import Topo
from p4_switch import P4RuntimeSwitch

from fabricmodel.topology import Topology


class FabricTopo(Topo):
    def build(self, topology: Topology, target: str = "p4switch", log_dir: str | None = None,
              link_mbps: float | None = None, queue_depth: int | None = None,
              packet_log: bool = False):
        for sw in topology.switches.values():
            self.addSwitch(sw.name, cls=P4RuntimeSwitch, device_id=sw.device_id,
                           grpc_port=sw.grpc_port, target=target, log_dir=log_dir,
                           link_mbps=link_mbps, queue_depth=queue_depth,
                           packet_log=packet_log)
        for host in topology.hosts.values():
            self.addHost(host.name, ip=None, mac=host.mac)
        for lk in topology.links:
            self.addLink(lk.a, lk.b, port1=lk.a_port, port2=lk.b_port, cls=Link)


def configure_hosts(net: Mininet, topology: Topology) -> None:
    """A /32 address and a default route through the leaf's gateway with a static ARP entry:
    every packet, also to a host on the same leaf, is routed by the P4 fabric (which answers
    no ARP)."""
    for h in topology.hosts.values():
        node = net.get(h.name)
        intf = h.intf
        node.cmd(f"ip addr flush dev {intf}")
        node.cmd(f"ip addr add {h.ip}/32 dev {intf}")
        node.cmd(f"ip route add {h.gateway_ip} dev {intf}")
        node.cmd(f"ip route add default via {h.gateway_ip} dev {intf}")
        node.cmd(f"ip route add 224.0.0.0/4 dev {intf}")
        node.cmd(f"ip neigh replace {h.gateway_ip} lladdr {h.gateway_mac} dev {intf} nud permanent")
        # The fabric is emulated by user-space switches: offloads would hand them
        # over-MTU segments that a real NIC would have cut.
        node.cmd(f"ethtool -K {intf} tx off gso off tso off gro off 2>/dev/null")
    quiet_ipv6(net)


# Every link carries jumbo frames, as a RoCE fabric's ports do: the demo's path MTU of 4096
# (mininet/report.py) makes frames of 4,170 bytes.
JUMBO_MTU = 9000


def build_net(topology: Topology, **switch_opts) -> Mininet:
    net = Mininet(topo=FabricTopo(topology, **switch_opts), controller=None,
                  autoSetMacs=False, autoStaticArp=False, build=True)
    for link in net.links:
        for intf in (link.intf1, link.intf2):
            out = intf.cmd(f"ip link set {intf.name} mtu {JUMBO_MTU}")
            if out.strip():
                raise RuntimeError(f"cannot set {intf.name}'s MTU to {JUMBO_MTU}: {out.strip()}")
    return net


def quiet_ipv6(net: Mininet) -> None:
    """No IPv6 on the fabric: the kernel's router solicitations and MLD reports would be
    traffic the switches forward and the counters show."""
    for node in net.hosts:
        node.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1")
    for sw in net.switches:
        for intf in sw.intfList():
            if intf.name != "lo":
                subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{intf.name}.disable_ipv6=1"],
                               check=False, capture_output=True)


def ping_all(net: Mininet, topology: Topology) -> bool:
    hosts = sorted(topology.hosts.values(), key=lambda h: h.rank)
    return all(" 0% packet loss" in net.get(a.name).cmd(f"ping -c 1 -W 2 {b.ip}")
               for a in hosts for b in hosts if a is not b)


@contextmanager
def host_netns(net: Mininet, names: list[str], prefix: str = "mlf-"):
    """Names the hosts' network namespaces (`ip netns attach`) so that tools taking a
    namespace name (`ip netns exec`, collectives.launch) can enter them; removed after."""
    attached = []
    try:
        for name in names:
            ns = f"{prefix}{name}"
            subprocess.run(["ip", "netns", "delete", ns], check=False, capture_output=True)
            subprocess.run(["ip", "netns", "attach", ns, str(net.get(name).pid)], check=True,
                           capture_output=True)
            attached.append(ns)
        yield attached
    finally:
        for ns in attached:
            subprocess.run(["ip", "netns", "delete", ns], check=False, capture_output=True)
