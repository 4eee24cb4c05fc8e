"""Where simple_switch_grpc and the P4Runtime spec differ, `p4switch run` does what
simple_switch_grpc does, and what the spec says with --p4runtime-strict: both ways, over the
wire (p4switch/device/README.md lists the differences)."""
from __future__ import annotations

import pathlib
import queue

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

import p4switch
from p4switch.device.process import SwitchProcess
from p4switch.runtime.tables import IDLE_TIMEOUT_REFUSED_BMV2, TIME_SINCE_HIT_REFUSED_BMV2

PROGRAMS = pathlib.Path(__file__).parent / "device_programs"
DEVICE = 9


@pytest.fixture(scope="module")
def pipeline():
    info, config = p4switch.compile_program(str(PROGRAMS / "runtime.p4"))
    return p4runtime_pb2.ForwardingPipelineConfig(p4info=info, p4_device_config=config)


class Client:
    def __init__(self, address, election_id=None):
        self.channel = grpc.insecure_channel(address)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.requests: queue.Queue = queue.Queue()
        self.stream = self.stub.StreamChannel(iter(self.requests.get, None))
        hello = p4runtime_pb2.StreamMessageRequest()
        hello.arbitration.device_id = DEVICE
        if election_id is not None:
            hello.arbitration.election_id.low = election_id
        self.requests.put(hello)
        self.status = next(self.stream).arbitration.status.code

    def close(self):
        self.requests.put(None)
        self.stream.cancel()
        self.channel.close()


def _push(stub, pipeline, election_id=None):
    req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
        device_id=DEVICE, config=pipeline,
        action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
    if election_id is not None:
        req.election_id.low = election_id
    stub.SetForwardingPipelineConfig(req)


def _timed_entry(pipeline):
    info = pipeline.p4info
    table = next(t for t in info.tables if t.preamble.name == "MyIngress.mac_table")
    action = next(a for a in info.actions if a.preamble.name == "MyIngress.to_cpu")
    req = p4runtime_pb2.WriteRequest(device_id=DEVICE)
    req.election_id.low = 1
    entry = req.updates.add(type=p4runtime_pb2.Update.INSERT).entity.table_entry
    entry.table_id = table.preamble.id
    entry.match.add(field_id=1).exact.value = b"\x01"
    entry.action.action.action_id = action.preamble.id
    entry.idle_timeout_ns = 10**9          # mac_table has no support_timeout
    return req


def _timed_default(pipeline, elapsed=False):
    """A MODIFY of mac_table's default entry with an idle timeout, or with the read-only
    time_since_last_hit set."""
    req = _timed_entry(pipeline)
    update = req.updates[0]
    update.type = p4runtime_pb2.Update.MODIFY
    entry = update.entity.table_entry
    entry.ClearField("match")
    entry.is_default_action = True
    if elapsed:
        entry.idle_timeout_ns = 0
        entry.time_since_last_hit.elapsed_ns = 10**6
    return req


@pytest.mark.parametrize("strict", [False, True])
def test_arbitration_without_election_id_bmv2_or_spec(pipeline, strict):
    """simple_switch_grpc (default): the unset election id is 0, a lone client is primary
    and writes. The spec (--p4runtime-strict): a backup that never becomes primary."""
    args = ["--no-p4", "--device-id", str(DEVICE)] + (["--p4runtime-strict"] if strict else [])
    with SwitchProcess(args) as switch:
        client = Client(switch.grpc_addr)
        try:
            if not strict:
                assert client.status == code_pb2.OK
                _push(client.stub, pipeline)          # no election id in the request either
            else:
                assert client.status == code_pb2.NOT_FOUND
                with pytest.raises(grpc.RpcError) as err:
                    _push(client.stub, pipeline)
                assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        finally:
            client.close()


def _update_error(exc: grpc.RpcError):
    """The one p4.v1.Error of a failed one-update Write: (canonical code, message)."""
    from google.rpc import status_pb2
    blob = dict(exc.trailing_metadata())["grpc-status-details-bin"]
    status = status_pb2.Status.FromString(blob)
    error = p4runtime_pb2.Error()
    status.details[0].Unpack(error)
    return error.canonical_code, error.message


@pytest.mark.parametrize("strict", [False, True])
def test_idle_timeout_on_a_table_without_one_bmv2_or_spec(pipeline, strict):
    args = ["--no-p4", "--device-id", str(DEVICE)] + (["--p4runtime-strict"] if strict else [])
    with SwitchProcess(args) as switch:
        client = Client(switch.grpc_addr, election_id=1)
        try:
            _push(client.stub, pipeline, election_id=1)
            with pytest.raises(grpc.RpcError) as err:
                client.stub.Write(_timed_entry(pipeline))
            code, details = _update_error(err.value)
            assert code == code_pb2.INVALID_ARGUMENT
            if strict:
                assert "table 'MyIngress.mac_table' does not support idle timeout" in details
            else:
                assert IDLE_TIMEOUT_REFUSED_BMV2 in details
                assert IDLE_TIMEOUT_REFUSED_BMV2 == ("idle_timeout_ns must be set to 0 for "
                                                     "tables which do not support idle timeout")
            # the default entry: time_since_last_hit refused in BMv2's words; an idle
            # timeout ignored by BMv2, refused by the spec
            with pytest.raises(grpc.RpcError) as err:
                client.stub.Write(_timed_default(pipeline, elapsed=True))
            code, details = _update_error(err.value)
            assert code == code_pb2.INVALID_ARGUMENT
            assert details == ("default entries have no idle timeout" if strict else
                               TIME_SINCE_HIT_REFUSED_BMV2)
            assert TIME_SINCE_HIT_REFUSED_BMV2 == ("has_time_since_last_hit must not be set in "
                                                   "WriteRequest")
            if strict:
                with pytest.raises(grpc.RpcError) as err:
                    client.stub.Write(_timed_default(pipeline))
                assert _update_error(err.value) == (code_pb2.INVALID_ARGUMENT,
                                                    "default entries have no idle timeout")
            else:
                client.stub.Write(_timed_default(pipeline))
        finally:
            client.close()


@pytest.mark.parametrize("strict", [False, True])
def test_requests_before_any_stream_bmv2_or_spec(pipeline, strict):
    """simple_switch_grpc (PI): while no client has a stream open, a request without election
    id is taken (how PI's PTF runner pushes its pipeline) and one with an election id is not
    primary. The spec: no stream, no primary, nothing is taken."""
    args = ["--no-p4", "--device-id", str(DEVICE)] + (["--p4runtime-strict"] if strict else [])
    with SwitchProcess(args) as switch, grpc.insecure_channel(switch.grpc_addr) as channel:
        stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
        with pytest.raises(grpc.RpcError) as err:
            _push(stub, pipeline, election_id=1)
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        if strict:
            with pytest.raises(grpc.RpcError) as err:
                _push(stub, pipeline)
            assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        else:
            _push(stub, pipeline)
            got = stub.GetForwardingPipelineConfig(
                p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=DEVICE))
            assert got.config.p4info == pipeline.p4info
