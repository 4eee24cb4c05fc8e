"""The configured-fabric fuzz (fabric_fuzz.py) through BMv2: simple_switch_grpc runs fabric.p4
compiled by p4c-bm2-ss, configured over P4Runtime with the same entries fabricd would write
(controller.p4rt.Device.sync), and every frame that leaves it is compared with what p4switch's
Python backend sends for the same frame. The multicast group has no loss here: BMv2's
random() draws from its own generator, so a lossy group's replicas could not be compared."""
from __future__ import annotations

import select
import socket
import time

import fabric_fuzz
import pytest
from p4rt_fabric import veth_pairs
from targets import compile_for, start_target

from controller import encode_fabric
from controller.p4rt import Schema
from controller.p4rt.device import Device, Pipeline

pytestmark = [pytest.mark.bmv2, pytest.mark.netns]
FRAMES = 300
ETH_P_ALL = 0x0003


def _collect(rx: dict[int, socket.socket], want: int, wait: float) -> list[tuple[int, bytes]]:
    """Frames leaving the switch: `want` of them, or whatever came within `wait` seconds."""
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + wait
    by_fd = {s.fileno(): port for port, s in rx.items()}
    while len(got) < want or (want == 0 and time.monotonic() < deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select(list(rx.values()), [], [], left)
        for sock in ready:
            frame, addr = sock.recvfrom(65536)
            if addr[2] != socket.PACKET_OUTGOING:
                got.append((by_fd[sock.fileno()], frame))
    return got


@pytest.mark.parametrize("mode,switch", fabric_fuzz.SWITCHES, ids=lambda v: v)
def test_fuzz_configured_fabric_same_on_bmv2(fabric_compiled, tmp_path, mode, switch):
    pipeline = Pipeline.from_files(*compile_for("bmv2", str(fabric_fuzz.FABRIC_P4),
                                                str(tmp_path)))
    intent = fabric_fuzz.demo_intent(mode, loss=0.0)
    state = encode_fabric.intended_states(intent, Schema(pipeline.p4info))[switch]
    ref = fabric_fuzz.configured(fabric_compiled, state, "python")
    ports = max(e.match["standard_metadata.egress_port"] for e in state.table_entries
                if e.table == "FabricEgress.port_mac")
    with veth_pairs("z", ports) as pairs, \
            start_target("bmv2", {p: sw for p, (sw, _) in enumerate(pairs, 1)}, 1) as target:
        device = Device(switch, target.grpc_addr, 1, pipeline)
        device.connect()
        device.sync(state)
        rx, tx = {}, {}
        for port, (_, wire) in enumerate(pairs, 1):
            rx[port] = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            rx[port].bind((wire, 0))
            tx[port] = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
            tx[port].bind((wire, 0))
        try:
            compared = 0
            for kind, port, frame in fabric_fuzz.frames(5, state, FRAMES):
                if len(frame) < 14:          # a link cannot carry less than its header
                    continue
                want = ref.process(port, frame)
                tx[port].send(frame)
                got = _collect(rx, len(want), 2.0 if want else 0.3)
                assert sorted(got) == sorted(want), (kind, port, frame.hex())
                compared += 1
            assert compared > FRAMES // 2
        finally:
            device.close()
            for sock in [*rx.values(), *tx.values()]:
                sock.close()
