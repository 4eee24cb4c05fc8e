"""What one request or one idle peer may cost `p4switch run`: idle StreamChannels never starve
the primary's RPCs (40 and 400 of them), a stream that never arbitrates is closed at the
arbitration deadline, a huge Read is refused and a large one streams without holding the device
lock, 1,000 failing updates come back as a readable status with the count, a 1 MB parameter
echoed in an error is cut, and a negative counter write is refused (malformed)."""
import queue
import threading
import time

import grpc
import pytest
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2 as p4r
from p4.v1 import p4runtime_pb2_grpc
from test_runtime_errors import DEVICE, PROGRAMS, Client, Names, U, mac_entry

import p4switch
from p4switch.device.process import SwitchProcess
from p4switch.runtime import server as p4rt_server

Code = grpc.StatusCode


@pytest.fixture(scope="module")
def compiled():
    return p4switch.compile_program(str(PROGRAMS / "runtime.p4"))


@pytest.fixture(scope="module")
def primary(compiled):
    with SwitchProcess(["--no-p4", "--device-id", str(DEVICE), "--backend", "python"]) as sw:
        client = Client(sw.grpc_addr, (0, 1))
        assert client.status() == code_pb2.OK
        client.set_pipeline(*compiled)
        client.addr = sw.grpc_addr
        yield client
        client.close()


class IdleStreams:
    """`count` StreamChannels over `channels` connections that never send a message."""

    def __init__(self, addr, count, channels=8):
        self.channels = [grpc.insecure_channel(addr) for _ in range(channels)]
        self.ends: queue.Queue = queue.Queue()
        self.stop = threading.Event()
        self.calls = []
        for i in range(count):
            stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channels[i % channels])
            call = stub.StreamChannel(self._silence())
            self.calls.append(call)
            threading.Thread(target=self._watch, args=(call,), daemon=True).start()

    def _silence(self):
        self.stop.wait()
        return
        yield

    def _watch(self, call):
        try:
            for _ in call:
                pass
            self.ends.put((time.monotonic(), None))
        except grpc.RpcError as exc:
            self.ends.put((time.monotonic(), exc.code()))

    def close(self):
        self.stop.set()
        for call in self.calls:
            call.cancel()
        for ch in self.channels:
            ch.close()


def timed(fn, *args):
    start = time.monotonic()
    fn(*args)
    return time.monotonic() - start


def primary_rpcs(client):
    """Seconds the primary's Capabilities, Read and Write take."""
    n = Names(client.info)
    return [timed(client.stub.Capabilities, p4r.CapabilitiesRequest()),
            timed(client.read, p4r.Entity(counter_entry=p4r.CounterEntry())),
            timed(client.write, p4r.Update(type=U.MODIFY, entity=p4r.Entity(
                counter_entry=p4r.CounterEntry(counter_id=n.obj("counters", "port_packets"),
                                               data=p4r.CounterData(packet_count=1)))))]


@pytest.mark.parametrize("count", [40, 400])
def test_dos_idle_streams_leave_primary_responsive(primary, compiled, count):
    primary.info = compiled[0]
    idle = IdleStreams(primary.addr, count)
    opened = time.monotonic()       # every stream asked for (a busy machine takes seconds)
    try:
        time.sleep(0.5)      # the streams reach the server and take what they can
        for _ in range(3):
            assert max(primary_rpcs(primary)) < 1.0
        # beyond the per-host cap, streams are refused at once; the rest at the deadline
        ends = [idle.ends.get(timeout=p4rt_server.ARBITRATION_DEADLINE + 10)
                for _ in range(count)]
        codes = {code for _, code in ends}
        assert codes <= {Code.RESOURCE_EXHAUSTED, Code.DEADLINE_EXCEEDED}, codes
        late = [t - opened for t, code in ends if code == Code.DEADLINE_EXCEEDED]
        # the 8 admitted wait out the deadline (a few more if the deadline freed room while
        # a slow machine was still opening the rest); the others were refused at once
        assert 0 < len(late) <= max(p4rt_server.MAX_UNARBITRATED_PER_HOST, count // 4)
        assert max(late) < p4rt_server.ARBITRATION_DEADLINE + 5
        assert max(primary_rpcs(primary)) < 1.0
    finally:
        idle.close()


def test_dos_huge_read_refused_large_read_does_not_block_writes(primary, compiled):
    n = Names(compiled[0])
    query = p4r.Entity(counter_entry=p4r.CounterEntry())
    start = time.monotonic()
    with pytest.raises(grpc.RpcError) as err:
        primary.read(*[query] * 10_000)
    assert err.value.code() == Code.RESOURCE_EXHAUSTED
    assert "10000" in err.value.details()
    assert time.monotonic() - start < 5.0      # refused on arrival (a hang catcher)
    # 1,000 wildcard queries (16,000 counters) stream while a Write gets the device lock
    done = threading.Event()
    got = []
    reader = threading.Thread(target=lambda: (got.extend(primary.read(*[query] * 1000)),
                                              done.set()))
    reader.start()
    counter = n.obj("counters", "port_packets")
    waits = []
    while not done.is_set():
        waits.append(timed(primary.write, p4r.Update(type=U.MODIFY, entity=p4r.Entity(
            counter_entry=p4r.CounterEntry(counter_id=counter,
                                           data=p4r.CounterData(packet_count=2))))))
    reader.join()
    assert len(got) == 16_000
    # Writes went through during the Read (it held the lock throughout before: a few Writes,
    # each waiting seconds): nine in ten within the 100 ms; the slowest (CPU contention
    # at high machine load, not the lock) within a hang catcher's bound
    waits.sort()
    assert len(waits) >= 10 and waits[len(waits) * 9 // 10] < 0.1 and waits[-1] < 5.0, \
        (len(waits), waits[-5:])


def details(err):
    status = status_pb2.Status.FromString(dict(err.trailing_metadata())["grpc-status-details-bin"])
    errors = []
    for item in status.details:
        e = p4r.Error()
        assert item.Unpack(e)
        errors.append(e)
    return status, errors


def test_dos_thousand_failing_updates_readable_status(primary, compiled):
    n = Names(compiled[0])
    updates = [p4r.Update(type=U.DELETE, entity=p4r.Entity(table_entry=mac_entry(n, mac)))
               for mac in range(1000)]
    with pytest.raises(grpc.RpcError) as err:
        primary.write(*updates)
    assert err.value.code() == Code.UNKNOWN
    status, errors = details(err.value)
    assert status.message.startswith("1000 of 1000 updates failed")
    assert f"the other {1000 - len(errors)} not listed" in status.message
    assert 10 <= len(errors) < 1000
    assert all(e.canonical_code == code_pb2.NOT_FOUND for e in errors)


def test_malformed_megabyte_parameter_error_is_cut(primary, compiled):
    n = Names(compiled[0])
    entry = mac_entry(n, 1)
    entry.action.action.params[0].value = b"\x01" * 1_000_000
    with pytest.raises(grpc.RpcError) as err:
        primary.write(p4r.Update(type=U.INSERT, entity=p4r.Entity(table_entry=entry)))
    status, errors = details(err.value)
    assert len(errors) == 1 and errors[0].canonical_code == code_pb2.INVALID_ARGUMENT
    assert len(errors[0].message) < 400


def test_malformed_negative_counter_refused(primary, compiled):
    n = Names(compiled[0])
    counter = n.obj("counters", "port_packets")
    for data in (p4r.CounterData(packet_count=-1), p4r.CounterData(byte_count=-5)):
        with pytest.raises(grpc.RpcError) as err:
            primary.write(p4r.Update(type=U.MODIFY, entity=p4r.Entity(
                counter_entry=p4r.CounterEntry(counter_id=counter, data=data))))
        _, errors = details(err.value)
        assert errors[0].canonical_code == code_pb2.INVALID_ARGUMENT
        assert "negative" in errors[0].message
    entry = mac_entry(n, 7, counter_data=p4r.CounterData(packet_count=-3))
    with pytest.raises(grpc.RpcError):
        primary.write(p4r.Update(type=U.INSERT, entity=p4r.Entity(table_entry=entry)))
    # nothing was stored: the wildcard Read of every counter still answers
    assert primary.read(p4r.Entity(counter_entry=p4r.CounterEntry()))
    assert not primary.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=n.table("mac_table"))))
