"""Capture like p4-utils: one pcap per switch port (mininet/capture.py, what `demo.py --pcap`
runs), taken on the netns fabric while a ring all-reduce crosses it; tshark reads every file
and decodes the RoCEv2 in them (BTH opcodes of RC writes and ACKs)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from netns_fabric import build

from collectives.launch import launch
from fabricmodel import rocev2

ROOT = Path(__file__).resolve().parents[2]
TOPO = ROOT / "controller" / "topologies" / "leafspine-2x2.yaml"
pytestmark = [pytest.mark.netns, pytest.mark.slow]
WRITES = {rocev2.WRITE_FIRST, rocev2.WRITE_MIDDLE, rocev2.WRITE_LAST, rocev2.WRITE_ONLY}


@pytest.fixture
def fabric(netns_factory, tmp_path):
    yield from build(netns_factory, tmp_path, TOPO.read_text())


def tshark_opcodes(pcap: Path) -> list[int]:
    out = subprocess.run(["tshark", "-r", str(pcap), "-Y", "infiniband",
                          "-T", "fields", "-e", "infiniband.bth.opcode"],
                         capture_output=True, text=True, check=True)
    return [int(v, 0) for v in out.stdout.split()]


def test_pcap_per_switch_port_decodes_as_rocev2(fabric, tmp_path):
    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed (apt-get install tshark)")
    sys.path.insert(0, str(ROOT / "mininet"))
    from capture import PortCaptures

    topo = fabric.topo
    interfaces = sorted({lk.a_intf for lk in topo.links if lk.a in topo.switches} |
                        {lk.b_intf for lk in topo.links if lk.b in topo.switches})
    hosts = ["h1", "h2", "h3", "h4"]
    with PortCaptures(interfaces, tmp_path / "pcap", netns=fabric.fab):
        rows = launch([fabric.ip(h) for h in hosts],
                      [{"collective": "allreduce", "algo": "ring", "dtype": "int32",
                        "elements": 4096}], namespaces=[fabric.hosts[h] for h in hosts])
    assert all(r["ok"] for r in rows)
    files = sorted((tmp_path / "pcap").glob("*.pcap"))
    assert [f.stem for f in files] == interfaces
    h1_port = topo.links_between("h1", "leaf1")[0].b_intf
    opcodes = tshark_opcodes(tmp_path / "pcap" / f"{h1_port}.pcap")
    assert rocev2.ACKNOWLEDGE in opcodes and WRITES & set(opcodes), opcodes[:20]
    # the ring's h2 -> h3 step crosses a spine: some uplink carried RoCEv2 too
    uplinks = [lk.a_intf for lk in topo.links if topo.node(lk.b) in topo.tier("spine")]
    assert any(tshark_opcodes(tmp_path / "pcap" / f"{u}.pcap") for u in uplinks)
