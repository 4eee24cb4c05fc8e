"""mininet/host_nic.py's NIC on a veth at 0.1 Mbit/s: ACKs overtake queued data, and packets to
two peers take turns instead of leaving in the order they were posted. A frame takes 90 ms
to leave at that rate, so the order holds however a busy machine interrupts the test
while it posts them (at 1 Mbit/s a pause of 20 ms let the data the ACK should overtake
leave first)."""
from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyroute2.netns import popns, pushns

from collectives import wire
from fabricmodel import rocev2

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.netns
ETH_P_IP = 0x0800
OTHER = "10.99.0.3"                       # a second peer, reached over the same veth
MBPS = 0.4                                # a full frame (4,170 bytes) takes 83 ms to leave


def _nic(ns: str, dev: str, mbps: float, peers: list[str]) -> None:
    sys.path.insert(0, str(ROOT / "mininet"))
    from host_nic import nic_commands

    for cmd in nic_commands(dev, mbps, peers):
        subprocess.run(["ip", "netns", "exec", ns, *cmd.split()], check=True,
                       capture_output=True)


def _frames(netns_pair, sends: list[tuple[str, bytes, int]]) -> list[tuple[str, int]]:
    """Sends each (destination, RoCE bytes, ToS) from a, in order, at once; returns the
    (destination, BTH opcode) of every RoCEv2 frame b's interface sees, in arrival order."""
    a, b = netns_pair["a"], netns_pair["b"]
    pushns(b)
    try:
        rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IP))
        rx.bind((netns_pair["dev_b"], ETH_P_IP))
    finally:
        popns()
    pushns(a)
    try:
        tx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    finally:
        popns()
    src = socket.inet_aton(netns_pair["ip_a"])
    for i, (dst, roce, tos) in enumerate(sends):
        tx.sendto(wire.frame(src, socket.inet_aton(dst), 1000, i + 1, tos, roce,
                             rocev2.ROCEV2_PORT), (dst, 0))
    out, deadline = [], time.monotonic() + 30      # catches a loss; a busy machine is slow
    rx.settimeout(0.5)
    while len(out) < len(sends) and time.monotonic() < deadline:
        try:
            data = rx.recv(65536)
        except TimeoutError:
            continue
        ip = data[14:]
        if ip[9] == 17 and int.from_bytes(ip[22:24], "big") == rocev2.ROCEV2_PORT:
            out.append((socket.inet_ntoa(ip[16:20]), ip[28]))
    rx.close()
    tx.close()
    return out


@pytest.fixture
def nic(netns_pair):
    mac = subprocess.run(["ip", "-n", netns_pair["b"], "-br", "link", "show",
                          netns_pair["dev_b"]], capture_output=True, text=True,
                         check=True).stdout.split()[2]
    subprocess.run(["ip", "-n", netns_pair["a"], "neigh", "replace", OTHER, "lladdr", mac,
                    "dev", netns_pair["dev_a"]], check=True)
    for ns, dev in ((netns_pair["a"], netns_pair["dev_a"]), (netns_pair["b"], netns_pair["dev_b"])):
        subprocess.run(["ip", "-n", ns, "link", "set", dev, "mtu", "9000"], check=True)  # jumbo
    _nic(netns_pair["a"], netns_pair["dev_a"], MBPS, [netns_pair["ip_b"], OTHER])
    return netns_pair


sys.path.insert(0, str(ROOT / "mininet"))
from report import MTU  # noqa: E402  (the demo's path MTU: a data packet is a full frame)

DATA = wire.bth(rocev2.WRITE_MIDDLE, 5, 1) + bytes(MTU)
ACK = wire.bth(rocev2.ACKNOWLEDGE, 5, 1) + wire.aeth(rocev2.AETH_ACK, 0)


def test_an_ack_overtakes_the_data_queued_before_it(nic):
    b = nic["ip_b"]
    got = _frames(nic, [(b, DATA, wire.ECN_ECT0)] * 8 + [(b, ACK, 0)])
    assert len(got) == 9
    # the token buckets start full (up to two frames leave at once); a FIFO puts the ACK last
    assert got.index((b, rocev2.ACKNOWLEDGE)) <= 2, got


def test_packets_to_two_peers_take_turns(nic):
    b = nic["ip_b"]
    got = _frames(nic, [(b, DATA, wire.ECN_ECT0)] * 6 + [(OTHER, DATA, wire.ECN_ECT0)] * 6)
    assert len(got) == 12
    # posted as six to b then six to the other: a FIFO sends all of b's first
    assert {dst for dst, _ in got[:4]} == {b, OTHER}, got
