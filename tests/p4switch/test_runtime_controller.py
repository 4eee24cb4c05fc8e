"""What a controller written for simple_switch_grpc relies on, through p4runtime-shell (the PyPI
client) against `p4switch run` on both backends (and simple_switch_grpc when installed), with
tests/p4switch/device_programs/controller.p4 and frames on real veths: digest lists, idle
timeouts, meters, watch ports of action selector groups, packet I/O, arbitration."""
from __future__ import annotations

import pathlib
import queue
import select
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass

import grpc
import p4runtime_sh.shell as sh
import pytest
from google.protobuf import text_format
from google.rpc import code_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
from targets import compile_for, start_target
from test_device_net import ETH_TEST, links, raw_socket, receive_all  # noqa: F401 (fixture)

pytestmark = pytest.mark.netns
PROGRAMS = pathlib.Path(__file__).parent / "device_programs"
DEVICE = 5
UNKNOWN_DST = b"\x02\x00\x00\x00\x00\xee"


@pytest.fixture(params=["p4switch-native", "p4switch-python",
                        pytest.param("bmv2", marks=pytest.mark.bmv2)])
def target(request):
    if request.param == "bmv2" and shutil.which("p4c-bm2-ss") is None:
        pytest.skip("p4c-bm2-ss is not on PATH")
    return request.param


@dataclass
class Rig:
    target: str
    switch: object
    ports: dict[int, str]      # port number -> switch-side interface
    hosts: dict[int, str]      # port number -> host-side interface

    def send(self, port: int, frame: bytes) -> None:
        with raw_socket(self.hosts[port]) as s:
            s.send(frame)


@pytest.fixture
def rig(target, links, tmp_path):  # noqa: F811 (the fixture imported above)
    pairs = {i: links.local() for i in (1, 2, 3)}
    ports = {i: sw for i, (sw, _) in pairs.items()}
    config = sh.FwdPipeConfig(*compile_for(target, str(PROGRAMS / "controller.p4"),
                                           str(tmp_path)))
    with start_target(target, ports, device_id=DEVICE, cpu_port=510) as switch:
        sh.setup(device_id=DEVICE, grpc_addr=switch.grpc_addr, election_id=(0, 1),
                 config=config, verbose=False)
        try:
            yield Rig(target, switch, ports, {i: h for i, (_, h) in pairs.items()})
        finally:
            sh.teardown()


def mac(n: int) -> bytes:
    return bytes([2, 0, 0, 0, 0, n])


def frame(src: bytes, dst: bytes = UNKNOWN_DST, seq: int = 0) -> bytes:
    """ethernet + probe header (colours 0, seq) + padding to 64 bytes"""
    head = dst + src + ETH_TEST.to_bytes(2, "big") + b"\x00\x00" + seq.to_bytes(4, "big")
    return head + bytes(64 - len(head))


WAIT = 30.0     # s for a message that must come: a busy machine is slow, only a loss meets it


def next_stream(kind: str, timeout: float):
    """The next stream message of this kind (p4runtime-shell's queue), None if none came."""
    return sh.client.get_stream_packet(kind, timeout=timeout)


def resend_until_listed(rig, port: int, data: bytes) -> p4runtime_pb2.DigestList:
    """Sends `data` every 0.2 s until a digest list comes (the switch suppresses it until its
    earlier list is acked or timed out, which a busy machine makes later) -> that list."""
    deadline = time.monotonic() + WAIT
    while True:
        rig.send(port, data)
        if (msg := next_stream("digest", 0.2)) is not None:
            return msg.digest
        assert time.monotonic() < deadline, "no digest list"


def ack(lst: p4runtime_pb2.DigestList) -> None:
    req = p4runtime_pb2.StreamMessageRequest()
    req.digest_ack.digest_id, req.digest_ack.list_id = lst.digest_id, lst.list_id
    sh.client.stream_out_q.put(req)


def sources(lst: p4runtime_pb2.DigestList) -> list[tuple[bytes, int]]:
    """(source MAC, ingress port) of each message in a DigestList"""
    out = []
    for data in lst.data:
        src, port = (m.bitstring for m in data.struct.members)
        out.append((src.rjust(6, b"\x00"), int.from_bytes(port, "big")))
    return out


def configure_digest(kind: str = "insert", **config) -> sh.DigestEntry:
    d = sh.DigestEntry("mac_learn_t")
    for name, value in config.items():
        setattr(d, name, value)
    getattr(d, kind)()
    return d


# --- digests -------------------------------------------------------------------------------
def test_digest_lists_fill_to_max_list_size_or_wait_max_timeout(rig):
    # a max_timeout_ns no pause between the test's sends reaches: the list fills to 3
    configure_digest(max_list_size=3, max_timeout_ns=60 * 10**9, ack_timeout_ns=10**11)
    (read,) = sh.DigestEntry("mac_learn_t").read()
    assert (read.max_list_size, read.max_timeout_ns, read.ack_timeout_ns) == (3, 60 * 10**9,
                                                                             10**11)
    for n in (1, 2, 1, 3):                 # the second A is a duplicate within the buffer
        rig.send(1, frame(mac(n)))
    first = next_stream("digest", WAIT).digest
    assert sources(first) == [(mac(1), 1), (mac(2), 1), (mac(3), 1)]

    # (A, 1) is in the cache (sent, not acked): only D is buffered; it leaves on the timeout
    configure_digest("modify", max_list_size=3, max_timeout_ns=300_000_000,
                     ack_timeout_ns=10**11)
    start = time.monotonic()              # before D can reach the switch
    rig.send(1, frame(mac(1)))
    rig.send(2, frame(mac(4)))
    second = next_stream("digest", WAIT).digest
    assert sources(second) == [(mac(4), 2)]
    assert time.monotonic() - start >= 0.2             # held for max_timeout_ns (0.3 s)
    assert second.list_id != first.list_id and second.digest_id == first.digest_id

    ack(first)                            # (A, 1) may be reported again, once the ack is in
    assert sources(resend_until_listed(rig, 1, frame(mac(1)))) == [(mac(1), 1)]


def test_digest_unacked_data_waits_for_ack_timeout(rig):
    ack_timeout = 600_000_000
    configure_digest(max_list_size=1, ack_timeout_ns=ack_timeout)
    rig.send(1, frame(mac(7)))
    first = next_stream("digest", WAIT).digest
    assert sources(first) == [(mac(7), 1)]
    # not acked: suppressed until ack_timeout_ns after its list, then reported again. Sent
    # over and over until it is: on the switch's clock (the lists' timestamps, which no delay
    # on the way changes) the new list is at least the ack timeout after the first.
    again = resend_until_listed(rig, 1, frame(mac(7)))
    assert sources(again) == [(mac(7), 1)] and again.list_id != first.list_id
    assert again.timestamp - first.timestamp >= ack_timeout, (first.timestamp, again.timestamp)


def test_digest_entry_insert_modify_delete(rig):
    with pytest.raises(Exception, match="NOT_FOUND"):
        configure_digest("modify", max_list_size=1)
    configure_digest(max_list_size=1)
    with pytest.raises(Exception, match="ALREADY_EXISTS"):
        configure_digest(max_list_size=1)
    configure_digest("modify", max_list_size=2, max_timeout_ns=10**9)
    (read,) = sh.DigestEntry("mac_learn_t").read()
    assert (read.max_list_size, read.max_timeout_ns) == (2, 10**9)
    sh.DigestEntry("mac_learn_t").delete()
    assert list(sh.DigestEntry("mac_learn_t").read()) == []
    rig.send(1, frame(mac(9)))            # learning is off: no list
    assert next_stream("digest", 0.5) is None
    with pytest.raises(Exception, match="NOT_FOUND"):
        sh.DigestEntry("mac_learn_t").delete()


# --- idle timeout --------------------------------------------------------------------------
def smac_entry(src: bytes, ttl_ns: int) -> sh.TableEntry:
    te = sh.TableEntry("CtlIngress.smac")(action="CtlIngress.known")
    te.match["hdr.ethernet.src"] = ":".join(f"{b:02x}" for b in src)
    te.idle_timeout_ns = ttl_ns
    return te


def last_hits() -> dict[bytes, int]:
    """source MAC -> time_since_last_hit (ns) of every smac entry"""
    query = sh.TableEntry("CtlIngress.smac")
    _ = query.time_since_last_hit    # p4runtime-shell: asks for it in the read
    return {e.match["hdr.ethernet.src"].exact.value.rjust(6, b"\x00"):
            e.time_since_last_hit.elapsed_ns for e in query.read()}


def test_idle_timeout_notifies_once_per_expiry_and_traffic_resets_it(rig):
    (smac,) = [t for t in sh.client.get_p4info().tables if t.preamble.name == "CtlIngress.smac"]
    assert smac.idle_timeout_behavior == smac.NOTIFY_CONTROL      # support_timeout = true
    ttl = 400_000_000
    inserted = time.monotonic()
    for src, t in ((mac(1), ttl), (mac(2), ttl), (mac(3), 0)):
        smac_entry(src, t).insert()
    # Gathered until B has expired twice (BMv2, which scans its entries once a second: once),
    # however long a busy machine takes; A is hit every 0.1 s, a quarter of its TTL.
    want = 1 if rig.target == "bmv2" else 2
    notices = []        # (seconds since the insert, the switch's timestamp, expired MACs)
    while sum(mac(2) in srcs for _, _, srcs in notices) < want:
        assert time.monotonic() - inserted < 60, notices
        rig.send(1, frame(mac(1)))
        while (msg := next_stream("idle_timeout_notification", 0.1)) is not None:
            notes = msg.idle_timeout_notification
            notices.append((time.monotonic() - inserted, notes.timestamp,
                            [e.match[0].exact.value.rjust(6, b"\x00") for e in notes.table_entry]))
            assert all(e.idle_timeout_ns == ttl for e in notes.table_entry)
    expired = [src for _, _, srcs in notices for src in srcs]
    assert set(expired) == {mac(2)}, notices       # B only; C has no TTL
    times = [(at, stamp) for at, stamp, srcs in notices if mac(2) in srcs]
    # no expiry comes before its TTL: here the insert's time was taken before the request
    assert times[0][0] >= ttl / 1e9, notices
    if rig.target != "bmv2":
        # once per expiry, the next one a TTL after the last (not at every scan): on the
        # switch's clock (the notices' timestamps), which no delay on the way can shorten
        assert all(b - a >= ttl for (_, a), (_, b) in zip(times, times[1:], strict=False)), notices

    hits = last_hits()
    assert hits[mac(1)] < hits[mac(2)]                  # A was hit since B was inserted
    assert hits[mac(2)] >= want * ttl                   # never hit: idle for every expiry
    (entry,) = [e for e in sh.TableEntry("CtlIngress.smac").read()
                if e.match["hdr.ethernet.src"].exact.value.endswith(b"\x02")]
    assert entry.idle_timeout_ns == ttl                 # read back as written

    smac_entry(mac(2), 0).modify()                      # no TTL any more
    smac_entry(mac(1), ttl).delete()                    # no more traffic for A: gone
    changed = time.time_ns()
    # nothing expires once both writes are done; a notice from before may still arrive
    late = []
    while (msg := next_stream("idle_timeout_notification", 0.6)) is not None:
        late.append(msg.idle_timeout_notification.timestamp)
    assert all(stamp < changed for stamp in late), (late, changed)


def test_idle_timeout_needs_a_table_that_supports_it(rig):
    te = sh.TableEntry("CtlIngress.dmac")(action="CtlIngress.forward")
    te.match["hdr.ethernet.dst"] = "02:00:00:00:00:01"
    te.action["port"] = "2"
    te.idle_timeout_ns = 10**9
    with pytest.raises(Exception, match="INVALID_ARGUMENT"):
        te.insert()
    assert list(sh.TableEntry("CtlIngress.dmac").read()) == []


# --- arbitration -----------------------------------------------------------------------------
def test_arbitration_without_election_id_is_primary_as_in_bmv2(target, tmp_path):
    """simple_switch_grpc reads an unset election id as 0: alone, that client is primary and
    writes; p4switch does the same by default (the spec's reading, a backup that never
    becomes primary, is `--p4runtime-strict`: tests/p4switch/test_cmdline_dialect.py)."""
    info_file, config_file = compile_for(target, str(PROGRAMS / "controller.p4"), str(tmp_path))
    config = p4runtime_pb2.ForwardingPipelineConfig(
        p4info=text_format.Parse(pathlib.Path(info_file).read_text(), p4info_pb2.P4Info()),
        p4_device_config=pathlib.Path(config_file).read_bytes())
    with start_target(target, {}, device_id=DEVICE, cpu_port=510) as switch, \
            grpc.insecure_channel(switch.grpc_addr) as channel:
        stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
        requests: queue.Queue = queue.Queue()
        stream = stub.StreamChannel(iter(requests.get, None))
        hello = p4runtime_pb2.StreamMessageRequest()
        hello.arbitration.device_id = DEVICE          # no election_id
        requests.put(hello)
        status = next(stream).arbitration.status.code
        set_pipeline = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=DEVICE, config=config,
            action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        write = p4runtime_pb2.WriteRequest(device_id=DEVICE)
        update = write.updates.add(type=p4runtime_pb2.Update.INSERT)
        update.entity.digest_entry.digest_id = config.p4info.digests[0].preamble.id
        try:
            assert status == code_pb2.OK            # primary with election id 0
            stub.SetForwardingPipelineConfig(set_pipeline)
            stub.Write(write)
        finally:
            requests.put(None)
            stream.cancel()


# --- meters --------------------------------------------------------------------------------
GREEN, YELLOW, RED = 0, 1, 2


def dmac_entry(dst: bytes, port: int) -> sh.TableEntry:
    te = sh.TableEntry("CtlIngress.dmac")(action="CtlIngress.forward")
    te.match["hdr.ethernet.dst"] = ":".join(f"{b:02x}" for b in dst)
    te.action["port"] = str(port)
    return te


def colours(rig, count: int, dst: bytes) -> list[tuple[int, int]]:
    """(port meter colour, flow meter colour) of `count` back-to-back frames from port 1 to
    port 2, as the probe header carries them out."""
    with raw_socket(rig.hosts[2]) as rx:
        for seq in range(count):
            rig.send(1, frame(mac(1), dst, seq))
        got = receive_all(rx, quiet=0.4, at_least=count)
    assert [int.from_bytes(f[16:20], "big") for f in got] == list(range(count))
    return [(f[14], f[15]) for f in got]


def unconfigured_meter_has_config(index: int) -> bool:
    (entry,) = sh.MeterEntry("CtlIngress.port_meter")(index=index).read()
    return entry.msg().HasField("config")


def test_meter_configs_read_write_and_colour_packets(rig):
    dst = mac(0x20)
    dmac_entry(dst, 2).insert()
    assert colours(rig, 3, dst) == [(GREEN, GREEN)] * 3          # unconfigured: GREEN

    # indirect meter, cell of port 1: two-rate, 1 packet committed and 2 peak per burst
    me = sh.MeterEntry("CtlIngress.port_meter")
    me.index = 1
    me.cir, me.cburst, me.pir, me.pburst = 1, 1, 2, 2
    me.modify()
    (read,) = sh.MeterEntry("CtlIngress.port_meter")(index=1).read()
    assert (read.config.cir, read.config.cburst, read.config.pir, read.config.pburst) == \
        (1, 1, 2, 2)
    assert not unconfigured_meter_has_config(2)

    # direct meter of the dmac entry: the second packet is already RED
    dme = sh.DirectMeterEntry("CtlIngress.flow_meter")
    dme.table_entry.match["hdr.ethernet.dst"] = ":".join(f"{b:02x}" for b in dst)
    dme.cir, dme.cburst, dme.pir, dme.pburst = 1, 1, 1, 1
    dme.modify()
    (dread,) = sh.DirectMeterEntry("CtlIngress.flow_meter").read()
    assert (dread.config.cir, dread.config.pburst) == (1, 1)
    assert colours(rig, 4, dst) == [(GREEN, GREEN), (YELLOW, RED), (RED, RED), (RED, RED)]

    # without a config the meters are unconfigured again: every packet GREEN
    sh.MeterEntry("CtlIngress.port_meter")(index=1).modify()
    cleared = sh.DirectMeterEntry("CtlIngress.flow_meter")
    cleared.table_entry.match["hdr.ethernet.dst"] = ":".join(f"{b:02x}" for b in dst)
    cleared.modify()
    assert not unconfigured_meter_has_config(1)
    assert colours(rig, 3, dst) == [(GREEN, GREEN)] * 3


# --- packet I/O ------------------------------------------------------------------------------
def test_packet_out_and_packet_in_carry_controller_metadata(rig):
    info = {m.name: m.id for c in sh.client.get_p4info().controller_packet_metadata
            if c.preamble.name == "packet_in" for m in c.metadata}
    out = frame(mac(1), mac(0x30), 5)
    with raw_socket(rig.hosts[3]) as wire:
        sh.PacketOut(payload=out, egress_port="3", flags="0").send()
        assert receive_all(wire, quiet=0.4, at_least=1) == [out]

    te = sh.TableEntry("CtlIngress.dmac")(action="CtlIngress.punt")
    te.match["hdr.ethernet.dst"] = "02:00:00:00:00:31"
    te.action["reason"] = "9"
    te.insert()
    up = frame(mac(4), mac(0x31), 6)
    rig.send(2, up)
    msg = next_stream("packet", WAIT).packet
    assert msg.payload == up
    assert {m.metadata_id: m.value for m in msg.metadata} == {info["ingress_port"]: b"\x02",
                                                              info["reason"]: b"\x09"}


# --- watch ports -----------------------------------------------------------------------------
def trunk_spread(rig, ports=(2, 3), count: int = 24, wait: float = WAIT) -> dict[int, int]:
    """Frames from `count` source MACs to the trunk's address -> frames received per port:
    until all have come out of `ports` (or `wait` s went by), then 0.4 s of quiet."""
    dst = mac(0x40)
    socks = {p: raw_socket(rig.hosts[p]) for p in ports}
    got = dict.fromkeys(ports, 0)
    try:
        for n in range(count):
            rig.send(1, frame(bytes([2, 0, 0, 1, 0, n]), dst, n))
        deadline = time.monotonic() + wait
        while sum(got.values()) < count and time.monotonic() < deadline:
            ready, _, _ = select.select(list(socks.values()), [], [], 0.2)
            for p, sock in socks.items():
                if sock in ready and sock.recvfrom(2048)[1][2] != socket.PACKET_OUTGOING:
                    got[p] += 1
        return {p: got[p] + len(receive_all(s, quiet=0.4)) for p, s in socks.items()}
    finally:
        for s in socks.values():
            s.close()


def eventually_spread(rig, want: dict[int, int]) -> None:
    """trunk_spread(rig, ports of `want`) again until it is `want` (within 2 WAIT s): the
    switch sees a link change when its loops next run, which a busy machine makes later."""
    deadline = time.monotonic() + 2 * WAIT
    while (got := trunk_spread(rig, ports=tuple(want), wait=2.0)) != want:
        assert time.monotonic() < deadline, (got, want)
        time.sleep(0.3)


def set_link(ifname: str, state: str) -> None:
    subprocess.run(["ip", "link", "set", ifname, state], check=True)


def test_watch_port_takes_members_out_while_their_port_is_down(rig):
    for member_id, port in ((1, 2), (2, 3)):
        m = sh.ActionProfileMember("CtlIngress.trunk_selector")(
            member_id=member_id, action="CtlIngress.trunk_port")
        m.action["port"] = str(port)
        m.insert()
    group = sh.ActionProfileGroup("CtlIngress.trunk_selector")(group_id=1)
    group.add(1, watch_port=b"\x02").add(2, watch_port=b"\x03").insert()
    te = sh.TableEntry("CtlIngress.trunk")
    te.match["hdr.ethernet.dst"] = "02:00:00:00:00:40"
    te.group_id = 1
    te.insert()

    both = trunk_spread(rig)
    assert both[2] > 0 and both[3] > 0 and sum(both.values()) == 24, both

    set_link(rig.hosts[3], "down")            # port 3 loses its carrier
    try:
        eventually_spread(rig, {2: 24})       # none lost on port 3's link
        (read,) = sh.ActionProfileGroup("CtlIngress.trunk_selector")(group_id=1).read()
        assert sorted((m.member_id, m.watch_port) for m in read.members) == \
            [(1, b"\x02"), (2, b"\x03")]       # the group as written: nothing removed
    finally:
        set_link(rig.hosts[3], "up")
    eventually_spread(rig, both)              # the same hash spread as before
