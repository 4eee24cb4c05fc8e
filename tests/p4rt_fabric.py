"""fabric.p4 on a P4Runtime target over veths in the root namespace, set up the way the
controller does it: the pipeline pushed and the egress port MACs written by p4runtime-shell.
Shared by tests/p4src/test_fabric_p4runtime.py and tests/p4switch/test_native_runtime.py."""
from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
from pathlib import Path

import p4runtime_sh.shell as sh
from targets import compile_for, start_target

FABRIC_P4 = Path(__file__).resolve().parents[1] / "p4src" / "fabric.p4"
_names = itertools.count()


def _unique(prefix: str) -> str:
    """A root-namespace interface name unique to this process (at most 15 bytes)."""
    return f"{prefix}{os.getpid() % 100000:05d}{next(_names):03d}"[:15]


def _ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@contextlib.contextmanager
def veth_pairs(prefix: str, count: int = 3):
    """`count` veth pairs (switch end, wire end), named after `prefix`, removed afterwards."""
    pairs = []
    try:
        for _ in range(count):
            sw_end, wire = _unique(f"{prefix}s"), _unique(f"{prefix}w")
            _ip("link", "add", sw_end, "type", "veth", "peer", "name", wire)
            pairs.append((sw_end, wire))
            for dev in (sw_end, wire):
                subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1"],
                               check=True)
                _ip("link", "set", dev, "up")
        yield pairs
    finally:
        for sw_end, _ in pairs:
            subprocess.run(["ip", "link", "del", sw_end], capture_output=True)


@contextlib.contextmanager
def fabric_switch(target: str, pairs, workdir, port_macs: dict[int, tuple[str, str]]):
    """fabric.p4 on `target` (see targets.start_target) with switch port n on pairs[n - 1];
    p4runtime-shell is connected while the block runs and port_macs {port: (smac, dmac)} are
    written to FabricEgress.port_mac."""
    pipeline = sh.FwdPipeConfig(*compile_for(target, str(FABRIC_P4), str(workdir)))
    ports = {port: sw_end for port, (sw_end, _) in enumerate(pairs, start=1)}
    with start_target(target, ports, device_id=1) as switch:
        sh.setup(device_id=1, grpc_addr=switch.grpc_addr, election_id=(0, 1), config=pipeline,
                 verbose=False)
        try:
            for port, (smac, dmac) in port_macs.items():
                macs = sh.TableEntry("FabricEgress.port_mac")(action="FabricEgress.set_port_macs")
                macs.match["standard_metadata.egress_port"] = str(port)
                macs.action["smac"], macs.action["dmac"] = smac, dmac
                macs.insert()
            yield switch
        finally:
            sh.teardown()
