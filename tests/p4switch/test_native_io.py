"""`p4switch run --io`: the native device's ways of receiving (PACKET_MMAP rings of TPACKET_V2
and V3, AF_XDP sockets, recvmmsg) each forward a stream in order and keep a frame's VLAN tag
(put back where the kernel took it off: the frame leaves tagged, the receiver's kernel reports
the same tag), carry jumbo frames whole up to the ports' MTU, and drop (and say so) a frame
that the receive buffer cut short rather than forward its head."""
from __future__ import annotations

import os
import pathlib
import signal
import socket
import struct
import time

import pytest
from test_device_net import ETH_TEST, ip, links  # noqa: F401 (fixture)

from p4switch.device.native_device import IO_MODES
from p4switch.device.process import SwitchProcess
from p4switch.native import available

pytestmark = [pytest.mark.netns,
              pytest.mark.skipif(not available(), reason="no C compiler (cc) for the native backend")]
PROGRAMS = pathlib.Path(__file__).parent / "device_programs"
SOL_PACKET, PACKET_AUXDATA, TP_STATUS_VLAN_VALID = 263, 8, 0x10
SO_RCVBUFFORCE = 33
AUX = struct.Struct("=IIIHHHH")             # struct tpacket_auxdata


def frame(seq: int, vlan: int | None = None, size: int = 64) -> bytes:
    """A test frame of `size` bytes; a jumbo one carries a pattern, so a cut or a shifted byte
    shows."""
    tag = b"\x81\x00" + vlan.to_bytes(2, "big") if vlan is not None else b""
    head = b"\x02" * 6 + b"\x04" * 6 + tag + ETH_TEST.to_bytes(2, "big") + seq.to_bytes(4, "big")
    return head + bytes((seq + i) % 251 for i in range(size - len(head)))


def receive_tagged(sock: socket.socket, want: int) -> list[tuple[bytes, int | None]]:
    """(frame as the kernel hands it over, VLAN id it took off or None) of the test's frames:
    until `want` have come (within 60 s: a busy machine holds the switch back for seconds, so
    only a lost frame runs into this deadline), then until 0.5 s of quiet (one too many)."""
    out, deadline = [], time.monotonic() + 60
    while True:
        done = len(out) >= want
        if not done and time.monotonic() > deadline:
            return out
        sock.settimeout(0.5 if done else 1.0)
        try:
            data, anc, _, addr = sock.recvmsg(65536, socket.CMSG_SPACE(AUX.size))
        except TimeoutError:
            if done:
                return out
            continue
        if addr[2] == socket.PACKET_OUTGOING or ETH_TEST.to_bytes(2, "big") not in data[12:18]:
            continue
        vlan = None
        for level, kind, raw in anc:
            if (level, kind) == (SOL_PACKET, PACKET_AUXDATA):
                status, _len, _snaplen, _mac, _net, tci, _tpid = AUX.unpack(raw[:AUX.size])
                vlan = tci & 0xFFF if status & TP_STATUS_VLAN_VALID else None
        out.append((data, vlan))
    return out


@pytest.mark.parametrize("io", IO_MODES)
def test_io_mode_forwards_in_order_and_keeps_vlan_tags(io, links):  # noqa: F811
    (sw_a, host_a), (sw_b, host_b) = links.local(), links.local()
    args = [str(PROGRAMS / "queue.p4"), "-i", f"1@{sw_a}", "-i", f"2@{sw_b}", "--io", io,
            "--backend", "native"]
    with SwitchProcess(args) as switch:
        rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        rx.bind((host_b, 0))
        rx.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
        tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        tx.bind((host_a, 0))
        sent = [frame(i) for i in range(40)] + [frame(40, vlan=7)]
        for f in sent:
            tx.send(f)
        got = receive_tagged(rx, len(sent))
        rx.close()
        tx.close()
        assert not any("receiving with recvmmsg" in line for line in switch.output) or \
            io == "recvmmsg", switch.output
    # queue.p4 writes the queue depth (0: cut through) into the source address
    tagged = frame(40, vlan=7)
    assert [(f[:6] + f[12:], v) for f, v in got] == \
        [(frame(i)[:6] + frame(i)[12:], None) for i in range(40)] + \
        [(tagged[:6] + tagged[16:], 7)]


def _jumbo_links(links, mtu: int):  # noqa: F811
    pairs = links.local(), links.local()
    for pair in pairs:
        for dev in pair:
            ip("link", "set", dev, "mtu", str(mtu))
    return pairs


def _send(host: str, frames: list[bytes]) -> None:
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    tx.bind((host, 0))
    for f in frames:
        tx.send(f)
    tx.close()


def _listen(host: str) -> socket.socket:
    rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    rx.bind((host, 0))
    rx.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
    rx.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20)    # room for a burst of jumbo frames
    return rx


@pytest.mark.parametrize("io", IO_MODES)
def test_io_mode_carries_jumbo_frames_whole(io, links):  # noqa: F811
    """Ports of MTU 9000 (the demo's links): frames of 4,000 and 9,000 bytes and the largest
    the MTU takes (9,014: MTU plus the Ethernet header) come out byte for byte, on the io mode
    asked for (no fallback to recvmmsg); then a burst of 64 of the largest that waited while
    the switch was stopped, so that it takes them as one batch (AF_XDP: 320 UMEM frames)."""
    (sw_a, host_a), (sw_b, host_b) = _jumbo_links(links, 9000)
    args = [str(PROGRAMS / "queue.p4"), "-i", f"1@{sw_a}", "-i", f"2@{sw_b}", "--io", io,
            "--backend", "native"]
    sent = [frame(i, size=n) for i, n in enumerate([4000, 9000, 9014, 64])]
    burst = [frame(len(sent) + i, size=9014) for i in range(64)]
    with SwitchProcess(args) as switch:
        rx = _listen(host_b)
        _send(host_a, sent)
        got = receive_tagged(rx, len(sent))
        os.kill(switch.proc.pid, signal.SIGSTOP)
        try:
            _send(host_a, burst)
        finally:
            os.kill(switch.proc.pid, signal.SIGCONT)
        got += receive_tagged(rx, len(burst))
        rx.close()
        assert not any("receiving with recvmmsg" in line for line in switch.output) or \
            io == "recvmmsg", switch.output
    assert [len(f) for f, _ in got] == [len(f) for f in sent + burst]
    # queue.p4 writes the queue depth into the source address: the rest is the frame sent
    assert [(f[:6] + f[12:], v) for f, v in got] == [(f[:6] + f[12:], None) for f in sent + burst]


@pytest.mark.parametrize("io, mtu, size", [("mmap-v2", 9000, 4000), ("recvmmsg", 16000, 12000)])
def test_a_frame_the_receive_buffer_cuts_is_dropped_and_said(io, mtu, size, links):  # noqa: F811
    """The ports' MTU raised after the switch sized its receive buffers (a V2 ring's slots for
    1500, recvmmsg's 9 KiB): the larger frame is dropped with a line on stderr, not forwarded
    cut short; the switch goes on forwarding the frames that fit."""
    (sw_a, host_a), (sw_b, host_b) = links.local(), links.local()
    args = [str(PROGRAMS / "queue.p4"), "-i", f"1@{sw_a}", "-i", f"2@{sw_b}", "--io", io,
            "--backend", "native"]
    with SwitchProcess(args) as switch:
        for pair in ((sw_a, host_a), (sw_b, host_b)):
            for dev in pair:
                ip("link", "set", dev, "mtu", str(mtu))
        rx = _listen(host_b)
        _send(host_a, [frame(0), frame(1, size=size), frame(2)])
        got = receive_tagged(rx, 2)
        rx.close()
        deadline = time.monotonic() + 10
        while not any("dropped a" in line for line in switch.output) and time.monotonic() < deadline:
            time.sleep(0.05)
        said = [line for line in switch.output if "dropped a" in line]
    assert [f[:6] + f[12:] for f, _ in got] == [frame(i)[:6] + frame(i)[12:] for i in (0, 2)]
    assert len(said) == 1 and f"port 1: dropped a {size}-byte frame" in said[0], switch.output
