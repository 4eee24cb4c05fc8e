"""`p4switch run` on real interfaces: hosts in namespaces routed through an L3 program
configured over P4Runtime, egress queues filling and tail-dropping, packet I/O with the
controller through the CPU port, a port whose link flaps and a port whose interface
vanishes."""
import itertools
import os
import pathlib
import shutil
import socket
import subprocess
import time

import p4runtime_sh.shell as sh
import pytest
from targets import compile_for, l3_routes, start_target

from p4switch.device.control import send_command
from p4switch.device.process import SwitchProcess

pytestmark = pytest.mark.netns
PROGRAMS = pathlib.Path(__file__).parent / "device_programs"
ETH_TEST = 0x88B5          # IEEE local experimental ethertype: nothing else sends it


_names = itertools.count()


def unique_name(prefix: str) -> str:
    """An interface name unique to this run (at most 15 bytes)."""
    return f"{prefix}{os.getpid() % 100000:05d}{next(_names):03d}"[:15]


def ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def no_ipv6(dev: str, ns: str | None = None):
    cmd = ["sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1"]
    subprocess.run((["ip", "netns", "exec", ns] if ns else []) + cmd, check=True)


class Links:
    """veth pairs whose switch end is in this (root) namespace; host ends either in a
    namespace or here. Removing the switch end removes the pair."""

    def __init__(self):
        self.created: list[str] = []

    def to_netns(self, ns: str, addr: str, mac: str, checksum_offload: bool = True) -> str:
        """checksum_offload=False makes the host's kernel fill in TCP/UDP checksums itself:
        a veth otherwise hands them over unfilled (CHECKSUM_PARTIAL), which p4switch completes
        and BMv2, reading raw frames, forwards as they are (the peer then drops them)."""
        sw = unique_name("sw")
        ip("link", "add", sw, "type", "veth", "peer", "name", "eth0", "netns", ns)
        self.created.append(sw)
        if not checksum_offload:
            subprocess.run(["ip", "netns", "exec", ns, "ethtool", "-K", "eth0", "tx", "off"],
                           check=True, capture_output=True)
        no_ipv6(sw)
        no_ipv6("all", ns)
        ip("-n", ns, "link", "set", "eth0", "address", mac)
        ip("-n", ns, "addr", "add", addr, "dev", "eth0")
        ip("-n", ns, "link", "set", "eth0", "up")
        ip("link", "set", sw, "up")
        return sw

    def local(self) -> tuple[str, str]:
        sw, host = unique_name("sw"), unique_name("ho")
        ip("link", "add", sw, "type", "veth", "peer", "name", host)
        self.created.append(sw)
        for dev in (sw, host):
            no_ipv6(dev)
            ip("link", "set", dev, "up")
        return sw, host

    def cleanup(self):
        for dev in self.created:
            subprocess.run(["ip", "link", "del", dev], capture_output=True)


@pytest.fixture
def links():
    made = Links()
    try:
        yield made
    finally:
        made.cleanup()


@pytest.fixture(params=["p4switch-python", "p4switch-native", pytest.param("bmv2", marks=pytest.mark.bmv2)])
def target(request):
    if request.param == "bmv2" and shutil.which("p4c-bm2-ss") is None:
        pytest.skip("p4c-bm2-ss is not on PATH")
    return request.param


def pipeline(target: str, program: str, out: pathlib.Path):
    return sh.FwdPipeConfig(*compile_for(target, str(PROGRAMS / program), str(out)))


def raw_socket(dev: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_TEST))
    s.bind((dev, 0))
    s.settimeout(0.2)
    return s


def _incoming(sock: socket.socket) -> bytes | None:
    """One frame the interface received (not one it sent), or None after the socket's timeout."""
    try:
        data, addr = sock.recvfrom(2048)
    except TimeoutError:
        return None
    return None if addr[2] == socket.PACKET_OUTGOING else data


def receive_all(sock: socket.socket, quiet: float = 0.6, limit: float = 5.0,
                at_least: int = 0) -> list[bytes]:
    """Frames until at least `at_least` have come (within 60 s: a busy machine can hold the
    switch back for longer than `quiet`, and only a lost frame meets this deadline), then
    until nothing arrived for `quiet` seconds (or `limit` seconds went by)."""
    frames, start = [], time.monotonic()
    while len(frames) < at_least and time.monotonic() - start < 60:
        if (data := _incoming(sock)) is not None:
            frames.append(data)
    last = start = time.monotonic()
    while time.monotonic() - last < quiet and time.monotonic() - start < limit:
        if (data := _incoming(sock)) is not None:
            frames.append(data)
            last = time.monotonic()
    return frames


def frame(dst: bytes, src: bytes, seq: int, size: int = 64) -> bytes:
    head = dst + src + ETH_TEST.to_bytes(2, "big") + seq.to_bytes(4, "big")
    return head + bytes(size - len(head))


# --- L3 forwarding between two hosts -------------------------------------------------------------
GW_MAC = {1: "02:00:00:00:01:fe", 2: "02:00:00:00:02:fe"}
HOST_MAC = {1: "02:00:00:00:01:01", 2: "02:00:00:00:02:01"}

UDP_ECHO = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("10.0.2.1", 5000))
s.settimeout(60)
print("ready", flush=True)
for _ in range(int(sys.argv[1])):
    data, peer = s.recvfrom(2048)
    s.sendto(data, peer)
"""

UDP_CLIENT = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(30)     # only a loss meets it: a busy machine is slow
for i in range(int(sys.argv[1])):
    msg = b"datagram-%03d" % i + bytes(100)
    s.sendto(msg, ("10.0.2.1", 5000))
    assert s.recvfrom(2048)[0] == msg, "echo differs"
print("udp ok")
"""


def in_ns(ns, *cmd, **kw):
    return subprocess.run(["ip", "netns", "exec", ns, *cmd], capture_output=True, text=True,
                          **kw)


def test_l3_ping_udp_and_counters(target, netns_factory, links, tmp_path):
    hosts = {1: netns_factory.netns("h1"), 2: netns_factory.netns("h2")}
    ports = {}
    for i, ns in hosts.items():
        ports[i] = links.to_netns(ns, f"10.0.{i}.1/24", HOST_MAC[i],
                                  checksum_offload=target != "bmv2")
        ip("-n", ns, "neigh", "add", f"10.0.{i}.254", "lladdr", GW_MAC[i], "dev", "eth0")
        ip("-n", ns, "route", "add", "default", "via", f"10.0.{i}.254")
    config = pipeline(target, "l3.p4", tmp_path)
    with start_target(target, ports, device_id=1) as switch:
        sh.setup(device_id=1, grpc_addr=switch.grpc_addr, election_id=(0, 1), config=config,
                 verbose=False)
        try:
            l3_routes(HOST_MAC, GW_MAC)

            ping = in_ns(hosts[1], "ping", "-c", "3", "-i", "0.2", "-W", "30", "10.0.2.1")
            assert ping.returncode == 0, ping.stdout + ping.stderr
            server = subprocess.Popen(["ip", "netns", "exec", hosts[2], "python3", "-c",
                                       UDP_ECHO, "5"], stdout=subprocess.PIPE, text=True)
            assert server.stdout.readline() == "ready\n"      # bound: the client may send
            client = in_ns(hosts[1], "python3", "-c", UDP_CLIENT, "5", timeout=180)
            server.wait(timeout=60)
            assert client.returncode == 0 and "udp ok" in client.stdout, client.stderr

            counts = {c.index: (c.packet_count, c.byte_count)
                      for c in sh.CounterEntry("MyIngress.routed_packets").read()
                      if c.packet_count}
            icmp_frame, udp_frame = 14 + 84, 14 + 20 + 8 + 112
            expected_bytes = 3 * icmp_frame + 5 * udp_frame
            assert counts == {1: (8, expected_bytes), 2: (8, expected_bytes)}
            hits = sorted(d.packet_count for d in
                          sh.DirectCounterEntry("MyIngress.route_hits").read())
            assert hits == [8, 8]
        finally:
            sh.teardown()
        # p4switch exits 0 on SIGTERM; simple_switch_grpc dies of it (-15)
        assert switch.stop() == (-15 if target == "bmv2" else 0)


# --- egress queue: depth grows, tail drop at the configured depth --------------------------------
def burst(tx: socket.socket, count: int, start: int) -> None:
    for seq in range(start, start + count):
        tx.send(frame(b"\x02" * 6, b"\x04" * 6, seq))


def depths(frames: list[bytes]) -> list[int]:
    return [int.from_bytes(f[6:12], "big") for f in frames]


def test_queue_depth_grows_and_tail_drops(links, tmp_path):
    (sw_a, host_a), (sw_b, host_b) = links.local(), links.local()
    control = str(tmp_path / "ctl.sock")
    args = [str(PROGRAMS / "queue.p4"), "-i", f"1@{sw_a}", "-i", f"2@{sw_b}",
            "--queue-rate", "2=40", "--queue-depth", "2=8", "--control-socket", control]
    with SwitchProcess(args) as _switch:
        tx, rx = raw_socket(host_a), raw_socket(host_b)
        burst(tx, 30, 0)
        got = receive_all(rx, at_least=8)
        seen = depths(got)
        # Packets leave in order and each saw the queue at least as deep as the one before it
        # (arrivals outpace the 40 packets/s service), up to the full depth; the rest of the
        # burst was dropped at the tail.
        assert 8 <= len(got) <= 11, seen
        assert seen == sorted(seen) and seen[0] == 0 and max(seen) == 7, seen
        assert set(range(1, 8)) <= set(seen), seen
        report = send_command(control, "show_queues")
        row = next(r.split() for r in report.split(" | ")[1:] if r.split()[0] == "2")
        assert int(row[5]) == 30 - len(got)           # dropped = sent - delivered

        # Run-time change of the depth through the control socket.
        assert send_command(control, "set_queue_depth 2 16") == "ok"
        burst(tx, 40, 100)
        seen = depths(receive_all(rx, at_least=16))
        assert 16 <= len(seen) <= 20 and seen == sorted(seen) and max(seen) == 15, seen
        assert send_command(control, "set_queue_depth 2 0").startswith("error")


# --- packet I/O and digests through the CPU port ------------------------------------------------
def test_packet_out_packet_in_and_digest(target, links, tmp_path):
    sw_a, host_a = links.local()
    config = pipeline(target, "runtime.p4", tmp_path)
    with start_target(target, {1: sw_a}, device_id=2, cpu_port=510) as switch:
        sh.setup(device_id=2, grpc_addr=switch.grpc_addr, election_id=(0, 1), config=config,
                 verbose=False)
        try:
            wire = raw_socket(host_a)
            out = frame(b"\x02\x00\x00\x00\x00\x99", b"\x02\x00\x00\x00\x00\x01", 1)
            sh.PacketOut(payload=out, egress_port="1", _pad="0").send()
            assert receive_all(wire, quiet=0.4, at_least=1) == [out]

            te = sh.TableEntry("MyIngress.mac_table")(action="MyIngress.to_cpu")
            te.match["hdr.ethernet.dstAddr"] = "02:00:00:00:00:aa"
            te.insert()
            digest = sh.DigestEntry("learn_t")
            digest.max_list_size = 1     # one digest per list: BMv2 otherwise buffers 1024
            digest.insert()
            packet_in, digests = sh.PacketIn(), sh.DigestList()
            up = frame(b"\x02\x00\x00\x00\x00\xaa", b"\x02\x00\x00\x00\x00\x07", 2)
            wire.send(up)
            # the first of each within 30 s (a busy machine holds the switch back), and
            # no second one (within 0.3 s)
            msg = packet_in.packet_in_queue.get(timeout=30)
            assert msg.packet.payload == up
            assert [(m.metadata_id, m.value) for m in msg.packet.metadata] == [(1, b"\x01"),
                                                                               (2, b"\x00")]
            dl = digests.digest_list_queue.get(timeout=30)
            assert not list(packet_in.sniff(timeout=0.3)) and not list(digests.sniff(timeout=0))
            members = [m.bitstring for m in dl.digest.data[0].struct.members]
            assert members == [b"\x02\x00\x00\x00\x00\x07", b"\x01"]

            # The interface goes away: the switch keeps serving (p4switch also says so).
            subprocess.run(["ip", "link", "del", sw_a], check=True)
            if target.startswith("p4switch"):
                deadline = time.monotonic() + 60
                while not any("is gone" in line for line in switch.output):
                    assert time.monotonic() < deadline, switch.output
                    assert switch.proc.poll() is None, switch.output
                    time.sleep(0.05)
            else:
                time.sleep(0.5)     # BMv2 says nothing: give it time to fall over, if it does
            assert switch.proc.poll() is None
            assert list(sh.TableEntry("MyIngress.mac_table").read())
        finally:
            sh.teardown()


# --- a link that goes down and comes back ----------------------------------------------------------
def forwarded(tx: socket.socket, rx: socket.socket, seq: int, within: float = 30.0) -> bool:
    """Sends a frame every 50 ms until one comes out of the other port (a veth that was set
    up again takes a moment to have carrier)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        tx.send(frame(b"\x02" * 6, b"\x04" * 6, seq))
        try:
            data, addr = rx.recvfrom(2048)
        except TimeoutError:
            continue
        if addr[2] != socket.PACKET_OUTGOING and data[14:18] == seq.to_bytes(4, "big"):
            return True
    return False


@pytest.mark.parametrize("backend", ["python", "native"])
def test_link_down_and_up_keeps_the_port(backend, links):
    """A port whose link is set down (its socket gets ENETDOWN, sends to it fail) forwards
    again once the link is back up: a link that flaps is not an interface that is gone. It
    used to be: the switch dropped the port for good, and a leaf-spine link that flapped
    stayed dead in one direction (tests/controller/test_fabricd_faults.py)."""
    (sw_a, host_a), (sw_b, host_b) = links.local(), links.local()
    args = [str(PROGRAMS / "queue.p4"), "--backend", backend, "-i", f"1@{sw_a}",
            "-i", f"2@{sw_b}"]
    with SwitchProcess(args) as switch:
        tx, rx = raw_socket(host_a), raw_socket(host_b)
        assert forwarded(tx, rx, 0)
        # the ingress port, then the egress port, which is sent to while it is down
        for seq, dev in enumerate([sw_a, sw_b, sw_a, sw_b], start=1):
            ip("link", "set", dev, "down")
            if dev == sw_b:        # through the switch, into the port that is down
                tx.send(frame(b"\x02" * 6, b"\x04" * 6, 1000 + seq))
            time.sleep(0.3)        # the switch's loops see the error
            ip("link", "set", dev, "up")
            assert forwarded(tx, rx, seq), f"nothing forwarded after {dev} came back up"
        assert switch.proc.poll() is None
        assert not any("gone" in line for line in switch.output), switch.output


# --- console log and pcap files ------------------------------------------------------------------
def test_log_console_and_pcap(links, tmp_path):
    (sw_a, host_a), (sw_b, host_b) = links.local(), links.local()
    ports = [str(PROGRAMS / "queue.p4"), "-i", f"1@{sw_a}", "-i", f"2@{sw_b}"]
    sent = frame(b"\x02" * 6, b"\x04" * 6, 7)
    # --log-file and --log-console are exclusive, as in BMv2: the file in a run of its own
    log_file = tmp_path / "switch.log"
    with SwitchProcess([*ports, "--log-file", str(log_file)]) as switch:
        raw_socket(host_a).send(sent)
        receive_all(raw_socket(host_b), quiet=0.4, at_least=1)
        assert switch.stop() == 0
    assert "received on port 1" in log_file.read_text()
    with SwitchProcess([*ports, "--log-console", "--pcap", str(tmp_path)]) as switch:
        tx, rx = raw_socket(host_a), raw_socket(host_b)
        tx.send(sent)
        (got,) = receive_all(rx, quiet=0.4, at_least=1)
        assert switch.stop() == 0
    log = "".join(switch.output)
    assert "received on port 1" in log and "out of port 2" in log, log
    assert "parser state" in log.lower()                   # the pipeline's own lines
    pcap_in = (tmp_path / f"{sw_a}_in.pcap").read_bytes()
    pcap_out = (tmp_path / f"{sw_b}_out.pcap").read_bytes()
    assert pcap_in[:4] == b"\xd4\xc3\xb2\xa1" and pcap_in.endswith(sent)
    assert pcap_out.endswith(got)


# --- multicast replicas are queued per egress port ----------------------------------------------
def test_multicast_replicas_use_the_egress_queues(links, tmp_path):
    (sw1, h1), (sw2, h2), (sw3, h3) = links.local(), links.local(), links.local()
    config = pipeline("p4switch", "mcast.p4", tmp_path)
    args = ["--no-p4", "--device-id", "4", "-i", f"1@{sw1}", "-i", f"2@{sw2}", "-i", f"3@{sw3}",
            "--queue-rate", "2=5", "--queue-depth", "2=2"]
    with SwitchProcess(args) as switch:
        sh.setup(device_id=4, grpc_addr=switch.grpc_addr, election_id=(0, 1), config=config,
                 verbose=False)
        try:
            sh.MulticastGroupEntry(1).add(2, 5).add(3, 6).insert()
            tx, rx2, rx3 = raw_socket(h1), raw_socket(h2), raw_socket(h3)
            burst(tx, 6, 0)
            got3, got2 = receive_all(rx3, at_least=6), receive_all(rx2, at_least=2)
        finally:
            sh.teardown()
    # Port 3 is unconstrained and gets every replica; port 2's slow, 2-deep queue keeps the
    # first two replicas (and one more if its egress thread takes the first off the queue
    # before the burst ends, which one it is depends on thread timing) and drops the rest at
    # its tail. Each replica carries its own rid.
    assert len(got3) == 6 and {f[6:12] for f in got3} == {(6).to_bytes(6, "big")}
    assert 2 <= len(got2) <= 3 and {f[6:12] for f in got2} == {(5).to_bytes(6, "big")}
    seq = [int.from_bytes(f[14:18], "big") for f in got2]
    assert seq[:2] == [0, 1] and seq == sorted(set(seq)), seq
