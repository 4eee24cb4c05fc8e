"""pin, reps, impair and the loader on real interfaces: a sender namespace with a program
attached sends RoCEv2 datagrams to a receiver namespace, which captures what arrives."""
import socket
import struct
import subprocess
import time
from contextlib import contextmanager

import pytest
from ebpf_packets import AETH, BTH, IP, UDP, Ether, Raw, udp_checksum_field, udp_checksum_valid
from pyroute2.netns import popns, pushns

from collectives.wire import echo_sport
from ebpf import Impair, Pin, Reps, TcError, tc

pytestmark = [pytest.mark.ebpf, pytest.mark.netns]

QP = 0x00ABCD
QP_SPORT = 0xC0DE
ETH_P_IP = 0x0800
SO_NO_CHECK = 11
SO_RCVBUFFORCE = 33  # Linux; not exported by the socket module


@contextmanager
def inside(ns):
    """Sockets made inside this block belong to namespace `ns`."""
    pushns(ns)
    try:
        yield
    finally:
        popns()


def bth_payload(psn: int, size: int = 100) -> bytes:
    """BTH + payload + ICRC; the ICRC is left zero because receivers do not check it."""
    return bytes(BTH(opcode=0x01, dqpn=QP, psn=psn, icrc=0) / Raw(b"\x5a" * size))


class Receiver:
    """A UDP socket on 4791 (what the kernel accepts) and a packet socket (the raw frames)."""

    def __init__(self, ns: str, dev: str, ip: str):
        with inside(ns):
            self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.udp.bind((ip, 4791))
            self.raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IP))
            self.raw.bind((dev, ETH_P_IP))
        for sock in (self.udp, self.raw):
            sock.settimeout(2.0)
            # Everything is read after sending: room for all of it (root may force this).
            sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20)

    def datagrams(self, count: int, timeout: float = 2.0) -> list[tuple[int, int]]:
        """(source port, PSN) of `count` datagrams; fewer when they stop coming."""
        self.udp.settimeout(timeout)
        got = []
        try:
            while len(got) < count:
                data, (_, sport) = self.udp.recvfrom(4096)
                got.append((sport, struct.unpack("!I", data[8:12])[0] & 0xFFFFFF))
        except TimeoutError:
            pass
        return got

    def frames(self) -> list[bytes]:
        """Every captured RoCEv2 frame that is already queued."""
        self.raw.setblocking(False)
        found = []
        try:
            while True:
                frame = self.raw.recv(4096)
                if frame[23] == 17 and struct.unpack_from("!H", frame, 36)[0] == 4791:
                    found.append(frame)
        except BlockingIOError:
            return found

    def close(self):
        self.udp.close()
        self.raw.close()


def mac_of(ns: str, dev: str) -> str:
    out = subprocess.run(["ip", "-n", ns, "-o", "link", "show", dev], capture_output=True,
                         text=True, check=True).stdout
    return out.split("link/ether ")[1].split()[0]


def send_udp(pair, psns, zero_checksum=False):
    with inside(pair["a"]):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with sock:
        if zero_checksum:
            sock.setsockopt(socket.SOL_SOCKET, SO_NO_CHECK, 1)
        sock.bind((pair["ip_a"], QP_SPORT))
        for psn in psns:
            sock.sendto(bth_payload(psn), (pair["ip_b"], 4791))
            time.sleep(0.0005)  # stay far below the receiver's backlog


def send_raw(pair, psns):
    """Frames built by scapy with a full UDP checksum, written to the device unmodified."""
    dst_mac = mac_of(pair["b"], pair["dev_b"])
    with inside(pair["a"]):
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    with sock:
        sock.bind((pair["dev_a"], 0))
        for psn in psns:
            frame = (Ether(dst=dst_mac) / IP(src=pair["ip_a"], dst=pair["ip_b"]) /
                     UDP(sport=QP_SPORT, dport=4791) / Raw(bth_payload(psn)))
            sock.send(bytes(frame))
            time.sleep(0.0005)


@pytest.fixture
def receiver(netns_pair):
    rx = Receiver(netns_pair["b"], netns_pair["dev_b"], netns_pair["ip_b"])
    yield rx
    rx.close()


@pytest.fixture
def pin_on_a(netns_pair):
    with Pin.load() as prog:
        prog.attach(netns_pair["dev_a"], netns_pair["a"])
        yield prog


@pytest.mark.parametrize("mode", ["offload", "zero-checksum", "raw-frames"])
def test_pinned_qp_arrives_on_its_port(netns_pair, receiver, pin_on_a, mode):
    # Configure through the attached program's maps, as the CLI or a host agent would.
    with Pin.attached(netns_pair["dev_a"], netns_pair["a"]) as agent:
        agent.pin(netns_pair["ip_b"], QP, 0xC101)
    psns = [(0xFFFFF8 + i) & 0xFFFFFF for i in range(18)]
    if mode == "raw-frames":
        send_raw(netns_pair, psns)
    else:
        send_udp(netns_pair, psns, zero_checksum=(mode == "zero-checksum"))

    got = receiver.datagrams(len(psns))
    assert sorted(p for _, p in got) == sorted(psns)  # the kernel accepted every datagram
    assert {sport for sport, _ in got} == {0xC101}

    frames = receiver.frames()
    assert len(frames) == len(psns)
    for frame in frames:
        if mode == "zero-checksum":
            assert udp_checksum_field(frame) == 0
        elif mode == "raw-frames":
            assert udp_checksum_valid(frame)

    entry = pin_on_a.get(netns_pair["ip_b"], QP)
    assert entry.pkts == len(psns)
    assert entry.bytes == len(psns) * (14 + 20 + 8 + len(bth_payload(0)))


def test_attach_replace_detach(netns_pair):
    dev, ns = netns_pair["dev_a"], netns_pair["a"]
    with Pin.load() as first, Pin.load() as second:
        first.attach(dev, ns)
        [f1] = tc.filters(dev, ns)
        second.attach(dev, ns)  # replaces in place
        [f2] = tc.filters(dev, ns)
        assert (f1.direction, f1.prio, f1.name) == (f2.direction, f2.prio, f2.name)
        assert f1.prog_id != f2.prog_id
        with Impair.load() as imp:
            imp.attach(dev, ns, directions=("ingress",))
        kinds = {(f.direction, f.name) for f in tc.filters(dev, ns)}
        assert kinds == {("egress", "pin_egress"), ("ingress", "impair_ingress")}
        # The attached instance is the second one: its maps are the ones reached by id.
        second.pin(netns_pair["ip_b"], QP, 0xC000)
        with Pin.attached(dev, ns) as agent:
            assert [e.sport for e in agent.entries()] == [0xC000]
    assert Pin.detach(dev, ns)
    assert not Pin.detach(dev, ns)
    assert Impair.detach(dev, ns)
    assert tc.filters(dev, ns) == []
    with pytest.raises(TcError, match="no pin program"):
        Pin.attached(dev, ns)


def test_attach_errors(netns_pair):
    with Pin.load() as prog:
        with pytest.raises(TcError, match="no interface 'nope0'"):
            prog.attach("nope0", netns_pair["a"])
        with pytest.raises(TcError, match="does not exist"):
            prog.attach(netns_pair["dev_a"], "no-such-namespace-xyz")
        with pytest.raises(ValueError, match="no ingress program"):
            prog.attach(netns_pair["dev_a"], netns_pair["a"], directions=("ingress",))
    assert tc.filters(netns_pair["dev_a"], netns_pair["a"]) == []


@pytest.mark.parametrize("direction", ["egress", "ingress"])
def test_impair_counts_match_what_arrives(netns_pair, receiver, direction):
    n = 300
    dev_ns = ("dev_a", "a") if direction == "egress" else ("dev_b", "b")
    with Impair.load() as imp:
        imp.configure(drop=0.2, duplicate=0.2, udp_dport=4791, seed=99)
        imp.attach(netns_pair[dev_ns[0]], netns_pair[dev_ns[1]], directions=(direction,))
        send_udp(netns_pair, range(n))
        counters = imp.counters()
        expected = n - counters.dropped + counters.duplicated
        got = receiver.datagrams(expected)
        assert receiver.datagrams(1, timeout=0.3) == []  # and nothing more
    assert counters.matched == n
    assert 20 <= counters.dropped <= 100 and 15 <= counters.duplicated <= 90
    assert len(got) == expected
    assert len({psn for _, psn in got}) == n - counters.dropped


def test_reps_recycles_echoed_entropies_across_namespaces(netns_pair, receiver):
    """Data from a (reps attached) to b; b acknowledges each packet with a standard ACK whose
    UDP source port echoes the packet's entropy, marking one with BECN; the next data packets
    reuse exactly the unmarked entropies, oldest first."""
    base, local_qp = 0xC100, 0x000777
    with Reps.load() as reps:
        reps.add_connection(netns_pair["ip_b"], QP, local_qp, netns_pair["ip_a"], ev_base=base,
                            ev_count=16, first_window=4)
        reps.attach(netns_pair["dev_a"], netns_pair["a"])
        send_udp(netns_pair, range(4))
        first = receiver.datagrams(4)
        assert [s for s, _ in first] == [base, base + 1, base + 2, base + 3]

        for sport, psn in first:
            with inside(netns_pair["b"]):
                acker = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            with acker:
                acker.bind((netns_pair["ip_b"], echo_sport(sport)))
                ack = (BTH(opcode=0x11, dqpn=local_qp, psn=psn, becn=int(sport == base + 1),
                           icrc=0) / AETH(msn=psn))
                acker.sendto(bytes(ack), (netns_pair["ip_a"], 4791))
        deadline = time.monotonic() + 30      # polled: a busy machine only makes it later
        while time.monotonic() < deadline:
            state = reps.state(netns_pair["ip_b"], QP)
            if state.acks_good + state.acks_ece == 4:
                break
            time.sleep(0.01)
        assert state.cache == (base, base + 2, base + 3) and state.acks_ece == 1

        send_udp(netns_pair, range(4, 8))
        second = receiver.datagrams(4)
        assert [s for s, _ in second[:3]] == [base, base + 2, base + 3]
        assert base <= second[3][0] < base + 16
        assert reps.state(netns_pair["ip_b"], QP).n_random == 1


def test_programs_stack_on_one_hook_in_priority_order(netns_pair, receiver, pin_on_a):
    """impair (prio 40) after pin (prio 10) on the same egress: pin still sees and rewrites
    every packet, impair then drops the ones it is told to."""
    pin_on_a.pin(netns_pair["ip_b"], QP, 0xC111)
    with Impair.load() as imp:
        imp.configure(drop=1.0, udp_dport=4791)
        imp.attach(netns_pair["dev_a"], netns_pair["a"])
        send_udp(netns_pair, range(5))
        assert imp.counters().dropped == 5
        imp.configure(drop=0.0, udp_dport=4791)
        pin_on_a.pin(netns_pair["ip_b"], QP, 0xC222)
        send_udp(netns_pair, range(5, 10))
    assert [s for s, _ in receiver.datagrams(5)] == [0xC222] * 5
    assert pin_on_a.get(netns_pair["ip_b"], QP).pkts == 10
