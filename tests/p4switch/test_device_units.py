"""Pieces of the device that need no interfaces: checksum completion for offloaded frames,
the traffic manager's depth/rate/metadata, the control-socket commands, P4Runtime bytes."""
import time

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Dot1Q, Ether

from p4switch.device.control import execute
from p4switch.device.ports import complete_l4_checksum
from p4switch.device.traffic_manager import TrafficManager, parse_rate
from p4switch.runtime import codec
from p4switch.runtime.errors import P4RuntimeError


def _partial(pkt, l4_type) -> bytes:
    """The frame as the kernel hands it over with CHECKSUM_PARTIAL: the L4 checksum field
    holds the folded pseudo-header sum, not the final checksum."""
    ip = pkt[IP]
    pseudo = (bytes(map(int, ip.src.split("."))) + bytes(map(int, ip.dst.split(".")))
              + bytes([0, ip.proto]) + len(bytes(ip.payload)).to_bytes(2, "big"))
    total = sum(int.from_bytes(pseudo[i:i + 2], "big") for i in range(0, len(pseudo), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    raw = bytearray(bytes(pkt))
    off = len(raw) - len(bytes(ip.payload)) + (16 if l4_type is TCP else 6)
    raw[off:off + 2] = total.to_bytes(2, "big")
    return bytes(raw)


@pytest.mark.parametrize("l4", [UDP(sport=1234, dport=4791), TCP(sport=5, dport=80)])
@pytest.mark.parametrize("vlan", [False, True])
def test_partial_checksum_is_completed(l4, vlan):
    inner = IP(src="10.0.0.1", dst="10.0.0.2") / l4 / (b"payload-" * 5)
    pkt = Ether() / Dot1Q(vlan=7) / inner if vlan else Ether() / inner
    good = bytes(Ether(bytes(pkt)))              # scapy fills the right checksum
    assert complete_l4_checksum(_partial(Ether(good), type(l4))) == good


def test_frames_without_l4_checksum_are_untouched():
    arp_like = bytes(Ether(type=0x0806)) + bytes(28)
    assert complete_l4_checksum(arp_like) == arp_like


def test_tail_drop_and_queue_metadata():
    tm = TrafficManager(depth=3)
    assert [tm.enqueue(2, f"job{i}") for i in range(5)] == [0, 1, 2, None, None]
    first = tm.dequeue()
    assert (first.job, first.port, first.enq_qdepth, first.deq_qdepth) == ("job0", 2, 0, 2)
    assert first.deq_timedelta >= 0
    assert tm.snapshot()[2] == (3, 0.0, "pps", 2, 3, 2)  # depth, rate, occupancy, enq, drops


def test_rate_paces_departures():
    tm = TrafficManager()
    tm.set_rate(1, 50.0)
    for i in range(4):
        tm.enqueue(1, i)
    start = time.monotonic()
    jobs = [tm.dequeue().job for _ in range(4)]
    assert jobs == [0, 1, 2, 3]
    assert time.monotonic() - start >= 3 / 50 * 0.9     # three gaps of 20 ms


class _Job:
    def __init__(self, length):
        self.packet_length = length


def test_bit_rate_paces_by_packet_length():
    tm = TrafficManager()
    tm.set_rate(1, *parse_rate("80kbps"))           # 1000-byte packets: 10 per second
    for _ in range(3):
        tm.enqueue(1, _Job(1000))
    start = time.monotonic()
    for _ in range(3):
        tm.dequeue()
    assert time.monotonic() - start >= 0.2 * 0.9


def test_parse_rate():
    assert parse_rate("1000") == (1000.0, "pps")
    assert parse_rate("500pps") == (500.0, "pps")
    assert parse_rate("10mbps") == (1e7, "bps")
    assert parse_rate("1Gbps") == (1e9, "bps")
    for bad in ("fast", "-1", "10 furlongs"):
        with pytest.raises(ValueError):
            parse_rate(bad)


def test_ports_are_served_round_robin():
    tm = TrafficManager()
    for i in range(3):
        tm.enqueue(1, ("a", i))
        tm.enqueue(2, ("b", i))
    order = [tm.dequeue().job[0] for _ in range(6)]
    assert order == ["a", "b", "a", "b", "a", "b"]


def test_flush_and_stop():
    tm = TrafficManager()
    tm.enqueue(1, "old")
    gen = tm.generation
    tm.flush()
    assert tm.generation == gen + 1 and tm.snapshot()[1][3] == 0
    tm.stop()
    assert tm.dequeue() is None


def test_control_commands():
    tm = TrafficManager()
    assert execute(tm, "set_queue_rate all 100") == "ok"
    assert execute(tm, "set_queue_depth 3 10") == "ok"
    assert tm.snapshot()[3][:3] == (10, 100.0, "pps")
    assert execute(tm, "set_queue_rate 3 2mbps") == "ok"
    assert tm.snapshot()[3][1:3] == (2e6, "bps")
    assert execute(tm, "set_queue_depth 3 0").startswith("error")
    assert execute(tm, "set_queue_rate x 1").startswith("error")
    assert execute(tm, "frobnicate").startswith("error")
    assert "port depth rate" in execute(tm, "show_queues")


def test_bytestrings():
    assert codec.to_bytes(0) == b"\x00" and codec.to_bytes(0x1FF) == b"\x01\xff"
    assert codec.to_int(b"\x00\x00\x01\xff", 9, "f") == 0x1FF      # padded form accepted
    with pytest.raises(P4RuntimeError):
        codec.to_int(b"\x02\x00", 9, "f")
    with pytest.raises(P4RuntimeError):
        codec.to_int(b"", 9, "f")
    assert codec.unpack_bits(codec.pack_bits([0x1FF, 0x5], [9, 7]), [9, 7]) == [0x1FF, 0x5]
    assert codec.pack_bits([1, 0], [9, 7]) == b"\x00\x80"


def test_cut_through_only_when_it_keeps_order():
    tm = TrafficManager()
    assert tm.cut_through(1)                       # idle, unpaced
    tm.enqueue(1, "queued")
    assert not tm.cut_through(1)                   # would overtake the queued packet
    item = tm.dequeue()
    assert not tm.cut_through(1)                   # still in egress
    tm.done(item.port)
    assert tm.cut_through(1)
    tm.set_rate(2, 100.0)
    assert not tm.cut_through(2)                   # paced ports always queue
