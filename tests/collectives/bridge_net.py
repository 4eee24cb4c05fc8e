"""Ranks in their own namespaces around a Linux bridge that lives in a namespace too (the
`bridge_net` fixture of conftest.py; bench/bench_reliability.py makes one too)."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass

from ebpf.impair import Impair
from tests.conftest import unique_name


def sh(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


@dataclass
class BridgeNet:
    bridge_ns: str
    namespaces: list[str]
    ips: list[str]
    rank_devs: list[str]          # each rank's interface (inside its namespace)
    bridge_ip: str = "10.77.0.254"

    def tx_bytes(self, rank: int) -> int:
        return int(sh("ip", "netns", "exec", self.namespaces[rank], "cat",
                      f"/sys/class/net/{self.rank_devs[rank]}/statistics/tx_bytes"))

    def impair(self, drop: float = 0.0, duplicate: float = 0.0, seed: int = 7):
        """ebpf.impair on every rank's ingress: real drops/duplicates of RoCEv2 packets,
        independent per receiver. Returns the loaded program (its counters)."""
        prog = Impair.load()
        prog.configure(drop=drop, duplicate=duplicate, udp_dport=4791, seed=seed)
        for ns, dev in zip(self.namespaces, self.rank_devs, strict=True):
            prog.attach(dev, ns, directions=("ingress",))
        return prog


def make_bridge_net(factory, n: int, addresses: list[str] | None = None,
                    prefix: int = 24) -> BridgeNet:
    """n ranks 10.77.0.1.. (or `addresses`, all on-link through a /`prefix`) around a bridge,
    each in a namespace `factory` (tests.conftest.NetnsFactory) makes and later removes."""
    br_ns = factory.netns("cbr")
    sh("ip", "-n", br_ns, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
    sh("ip", "-n", br_ns, "addr", "add", "10.77.0.254/24", "dev", "br0")
    sh("ip", "-n", br_ns, "link", "set", "br0", "up")
    namespaces, ips, devs = [], [], []
    for r in range(n):
        ns = factory.netns(f"cr{r}")
        ip = addresses[r] if addresses else f"10.77.0.{r + 1}"
        dev, peer = unique_name("cr"), unique_name("cb")
        factory.veth(ns, br_ns, f"{ip}/{prefix}", None, dev, peer)
        sh("ip", "-n", br_ns, "link", "set", peer, "master", "br0")
        namespaces.append(ns)
        ips.append(ip)
        devs.append(dev)
    return BridgeNet(br_ns, namespaces, ips, devs)
