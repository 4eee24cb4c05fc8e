"""End to end: hosts in namespaces talk across a 2x2 leaf-spine of p4switch processes that
only fabricd configured (pipeline included): routes, Ethereal source ports, a multicast group,
a NetReduce aggregation job, and a link taken down through fabricctl."""
import json
import subprocess
import sys
import threading
import time
from itertools import pairwise
from pathlib import Path

import pytest

from fabricmodel import hashing, rocev2
from fabricmodel.routing import Routing
from fabricmodel.topology import load
from tests.netns_fabric import build, sh

REPO = Path(__file__).resolve().parents[2]
TOPO = REPO / "controller" / "topologies" / "leafspine-2x2.yaml"

pytestmark = [pytest.mark.netns, pytest.mark.slow]


def forwarded(ctl, switch):
    reply = json.loads(ctl("--json", "counters", switch).stdout)
    return {p["port"]: int(p["tx_packets"]) for p in reply["ports"]}


def send_udp(ns, src, sport, dst, dport, count):
    code = ("import socket, time\n"
            "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 8)\n"   # default 1
            f"s.bind(({src!r}, {sport}))\n"
            f"for _ in range({count}):\n"
            f"    s.sendto(bytes(64), ({dst!r}, {dport})); time.sleep(0.01)\n"
            "time.sleep(0.3)\n")
    sh(ns, sys.executable, "-c", code)


class Listener:
    """A process in `ns` bound to UDP `port`: prints "ready" once bound (the constructor
    waits for it), then one line per datagram, `show` of the datagram (Python, `data` in
    scope), until `stop()`, which returns those lines."""

    def __init__(self, ns: str, port: int, show: str = "len(data)", imports: str = ""):
        code = (f"import socket\n{imports}"
                "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                f"s.bind(('0.0.0.0', {port}))\n"
                "print('ready', flush=True)\n"
                "while True:\n"
                "    data = s.recv(4096)\n"
                f"    print({show}, flush=True)\n")
        self.proc = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", code],
                                     stdout=subprocess.PIPE, text=True, cwd=REPO)
        assert self.proc.stdout.readline() == "ready\n"
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def stop(self) -> list[str]:
        self.proc.terminate()
        self.proc.wait(10)
        self._reader.join(10)
        return self.lines


def collect(listeners: dict[str, Listener], expect: set[str], grace: float = 1.0,
            timeout: float = 60.0) -> dict[str, list[str]]:
    """Wait (polling) until every host in `expect` has received something, then `grace`
    seconds more for anything that should not arrive; -> every listener's lines."""
    deadline = time.monotonic() + timeout
    while not all(listeners[h].lines for h in expect):
        if time.monotonic() > deadline:
            break
        time.sleep(0.02)
    time.sleep(grace)          # a copy the switch should not have made arrives about as soon
    return {h: lst.stop() for h, lst in listeners.items()}


def send_contribution(ns, src, aggregator, job_id, slot, worker, workers, values):
    """One SwitchML contribution: IP / UDP 4791 / BTH opcode 0xC0 / Aggregation / ICRC. The
    switches drop one whose ICRC is wrong, and the ICRC covers the IP ID, which a UDP socket
    leaves to the kernel: the whole packet goes out on a raw socket."""
    code = ("import socket\n"
            "from scapy.contrib.roce import BTH\n"
            "from scapy.layers.inet import IP, UDP\n"
            "from collectives.layers import Aggregation\n"
            f"pkt = bytes(IP(src={src!r}, dst={aggregator!r}, id=1, flags='DF') / UDP("
            f"sport=0xC000 + {worker}, dport=4791) / BTH(opcode=0xC0, dqpn=1, psn=0) / "
            f"Aggregation(job_id={job_id}, slot={slot}, worker_id={worker}, "
            f"num_workers={workers}, values={values!r}))\n"
            "s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)\n"
            f"s.sendto(pkt, ({aggregator!r}, 0))\n")
    sh(ns, sys.executable, "-c", code)


def aggregation_listener(ns) -> Listener:
    """Prints 'RESULT [values]' (or 'PARTIAL ...') per aggregation packet reaching UDP 4791."""
    return Listener(ns, 4791, imports="from collectives.layers import Aggregation\n",
                    show="(('RESULT ' if Aggregation(data[12:]).flags & 1 else 'PARTIAL ')"
                         " + str(list(Aggregation(data[12:]).values)))")


def ping(ns, ip, wait: int = 30) -> bool:
    """Two pings answered (a reply may take seconds on a busy machine: only a loss meets
    `wait`). A ping that must not be answered waits less: a late reply only passes it."""
    return sh(ns, "ping", "-c", "2", "-i", "0.2", "-W", str(wait), ip,
              check=False).returncode == 0


def counted(ctl, switch: str, port: int, want: int, within: float = 30.0) -> int:
    """The switch's tx_packets of `port` once it reached `want` (polled: a busy machine
    leaves packets queued in the switch after their sender is done), or after `within` s."""
    deadline = time.monotonic() + within
    while (got := forwarded(ctl, switch)[port]) < want and time.monotonic() < deadline:
        time.sleep(0.1)
    return got


@pytest.fixture
def net(netns_factory, tmp_path):
    """Four p4switch processes without a program and fabricd (which pushes fabric.p4)."""
    yield from build(netns_factory, tmp_path, TOPO.read_text())


topo = load(TOPO)


def salted_elsewhere(src: str, dst: str, count: int) -> list[tuple[str, str, int, list[str]]]:
    """`count` flows (src, dst, sport, path by the model) from the lowest RoCE source ports
    whose member at the source's leaf differs between its salt and no salt."""
    s, d = topo.host(src), topo.host(dst)
    group = Routing(topo).group(s.leaf, d.leaf)
    out = []
    for sport in range(rocev2.SPORT_MIN, rocev2.SPORT_MAX):
        pick = [hashing.ecmp_member(s.ip, d.ip, rocev2.UDP, sport, rocev2.ROCEV2_PORT,
                                    len(group), salt)
                for salt in (hashing.switch_salt(s.leaf), 0)]
        if pick[0] != pick[1]:
            out.append((src, dst, sport, [s.leaf, group[pick[0]].dst, d.leaf]))
            if len(out) == count:
                return out
    raise AssertionError("no source port tells the salts apart")


def test_routes_steps_groups_and_link_failure_on_the_data_plane(net):
    hosts, ctl = net.hosts, net.fabricctl
    assert ping(hosts["h1"], net.ip("h2"))          # same leaf
    assert ping(hosts["h1"], net.ip("h3"))          # across a spine
    assert ping(hosts["h4"], net.ip("h2"))
    # Ethereal's source ports steer the fabric's own ECMP hash onto the planned spines, and
    # ports that the leaf's salt sends elsewhere than an unsalted hash would leave where the
    # model says: fabricd wrote every switch's salt (hashing.switch_salt).
    plan = json.loads(ctl("--json", "step", "install", "s", "--flow", "h1:h3:8192",
                          "--flow", "h2:h4:8192").stdout)
    flows = [(sub["src"], sub["dst"], sub["sport"], sub["path"]) for sub in plan["subflows"]]
    flows += salted_elsewhere("h1", "h3", 3)
    for src, dst, sport, path in flows:
        hops = [(sw, topo.link(sw, nxt).port_of(sw)) for sw, nxt in pairwise(path)]
        before = [forwarded(ctl, sw)[port] for sw, port in hops]
        send_udp(hosts[src], net.ip(src), sport, net.ip(dst), 4791, count=5)
        for (sw, port), had in zip(hops, before, strict=True):     # switch by switch
            assert counted(ctl, sw, port, had + 5) == had + 5, (src, dst, sport, sw, port)
    # A multicast group: one packet from h1 reaches every other member, as unicast.
    group = json.loads(ctl("--json", "group", "create", "g", "h1", "h2", "h3").stdout)
    listeners = {h: Listener(hosts[h], 5000) for h in ("h1", "h2", "h3", "h4")}
    send_udp(hosts["h1"], net.ip("h1"), 5001, group["address"], 5000, count=1)
    got = {h: len(lines) for h, lines in collect(listeners, {"h2", "h3"}).items()}
    assert got == {"h1": 0, "h2": 1, "h3": 1, "h4": 0}, got
    result = ctl("link", "leaf1-spine1", "down")
    assert result.returncode == 0, result.stdout + result.stderr
    before = forwarded(ctl, "spine1"), forwarded(ctl, "spine2")
    for _ in range(3):
        assert ping(hosts["h1"], net.ip("h3"))
        assert ping(hosts["h2"], net.ip("h4"))
    # 3 x 2 pings x 2 flows went via spine2, nothing crossed spine1 any more
    assert counted(ctl, "spine2", 2, before[1][2] + 12) >= before[1][2] + 12
    assert forwarded(ctl, "spine1") == before[0]


def test_aggregation_job_sums_and_multicasts_the_result(net):
    job = json.loads(net.fabricctl("--json", "job", "create", "sml", "h1", "h2", "h3", "--kind", "switchml",
                             "--slots", "4").stdout)
    assert (job["leaf"], job["address"]) == ("leaf1", "10.0.1.253")
    workers = job["workers"]
    listeners = {h: aggregation_listener(net.hosts[h]) for h in ("h1", "h2", "h3", "h4")}
    for wid, host in enumerate(workers):
        send_contribution(net.hosts[host], net.ip(host), job["address"], job["job_id"],
                          job["slot_base"], wid, len(workers), [wid + 1, -wid] * 16)
    got = collect(listeners, {"h1", "h2", "h3"})
    total = [1 + 2 + 3, 0 - 1 - 2] * 16
    result = [f"RESULT {total}"]
    assert got == {"h1": result, "h2": result, "h3": result, "h4": []}, got


def test_a_slice_is_isolated_from_other_traffic(net):
    out = net.fabricctl("--json", "slice", "create", "jobA", "2")
    assert out.returncode == 0, out.stderr
    members = json.loads(out.stdout)["hosts"]
    assert members == ["h1", "h2"]
    assert ping(net.hosts["h1"], net.ip("h2"))          # inside the slice
    assert ping(net.hosts["h3"], net.ip("h4"))          # outside, among themselves
    assert not ping(net.hosts["h3"], net.ip("h1"), wait=2)      # never across
    assert not ping(net.hosts["h2"], net.ip("h4"), wait=2)
    assert net.fabricctl("slice", "delete", "jobA").returncode == 0
    assert ping(net.hosts["h3"], net.ip("h1"))          # released: shared routing again
