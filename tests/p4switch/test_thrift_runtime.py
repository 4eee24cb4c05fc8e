"""BMv2's Thrift runtime API on a real `p4switch run` (tests/p4switch/device_programs/
runtime.p4): tables, action profiles, counters, meters, registers, multicast and mirroring
written over Thrift are read back over P4Runtime and the other way round; bad calls get BMv2's
error codes and change nothing."""
from __future__ import annotations

import pathlib
import queue
import socket

import grpc
import pytest
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
from thrift.transport import TSocket, TTransport

from p4switch.device.process import SwitchProcess
from p4switch.thrift import simple_pre, simple_switch, standard
from p4switch.thrift.idl import Client
from p4switch.thrift.standard import (
    BmAddEntryOptions,
    BmMatchParam,
    BmMatchParamExact,
    BmMatchParamRange,
    BmMatchParamTernary,
    BmMatchParamType,
    BmMeterRateConfig,
    TableOperationErrorCode,
)

PROGRAMS = pathlib.Path(__file__).parent / "device_programs"
DEVICE = 7


class Thrift:
    """The three clients simple_switch_CLI opens, on one connection."""

    def __init__(self, address: str):
        host, port = address.rsplit(":", 1)
        self.transport = TTransport.TBufferedTransport(TSocket.TSocket(host, int(port)))
        prot = TBinaryProtocol.TBinaryProtocol(self.transport)
        self.transport.open()

        def client(methods, name):
            return Client(methods, TMultiplexedProtocol.TMultiplexedProtocol(prot, name))
        self.std = client(standard.STANDARD, "standard")
        self.pre = client(simple_pre.SIMPLE_PRE_LAG, "simple_pre_lag")
        self.sw = client(simple_switch.SIMPLE_SWITCH, "simple_switch")

    def close(self):
        self.transport.close()


class P4RT:
    """A primary P4Runtime client (election id 1) and the program's P4Info."""

    def __init__(self, address: str):
        self.channel = grpc.insecure_channel(address)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.requests: queue.Queue = queue.Queue()
        self.stream = self.stub.StreamChannel(iter(self.requests.get, None))
        hello = p4runtime_pb2.StreamMessageRequest()
        hello.arbitration.device_id = DEVICE
        hello.arbitration.election_id.low = 1
        self.requests.put(hello)
        next(self.stream)
        self.p4info = self.stub.GetForwardingPipelineConfig(
            p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=DEVICE)).config.p4info

    def id(self, kind: str, name: str) -> int:
        return next(o.preamble.id for o in getattr(self.p4info, kind) if o.preamble.name == name)

    def read(self, **entity) -> list:
        req = p4runtime_pb2.ReadRequest(device_id=DEVICE)
        req.entities.add(**entity)
        return [e for resp in self.stub.Read(req) for e in resp.entities]

    def write(self, kind, **entity) -> None:
        req = p4runtime_pb2.WriteRequest(device_id=DEVICE)
        req.election_id.low = 1
        req.updates.add(type=kind, entity=p4runtime_pb2.Entity(**entity))
        self.stub.Write(req)

    def close(self):
        self.requests.put(None)
        self.stream.cancel()
        self.channel.close()


@pytest.fixture(scope="module")
def switch():
    with SwitchProcess([str(PROGRAMS / "runtime.p4"), "--backend", "python",
                        "--device-id", str(DEVICE), "--cpu-port", "510"]) as sw:
        yield sw


@pytest.fixture
def thrift(switch):
    t = Thrift(switch.thrift_addr)
    yield t
    t.close()


@pytest.fixture
def p4rt(switch):
    p = P4RT(switch.grpc_addr)
    yield p
    p.close()


def exact(value: bytes) -> BmMatchParam:
    return BmMatchParam(type=BmMatchParamType.EXACT, exact=BmMatchParamExact(value))


MAC = bytes.fromhex("020000000001")


def test_thrift_table_entry_is_read_back_over_p4runtime(thrift, p4rt):
    tid = p4rt.id("tables", "MyIngress.mac_table")
    handle = thrift.std.bm_mt_add_entry(0, "MyIngress.mac_table", [exact(MAC)],
                                        "MyIngress.set_port", [b"\x00\x02"],
                                        BmAddEntryOptions())
    try:
        [entity] = p4rt.read(table_entry=p4runtime_pb2.TableEntry(table_id=tid))
        entry = entity.table_entry
        assert entry.match[0].exact.value == MAC.lstrip(b"\0")
        assert entry.action.action.action_id == p4rt.id("actions", "MyIngress.set_port")
        assert entry.action.action.params[0].value == b"\x02"
        # modified over Thrift (by a suffix name), seen over P4Runtime
        thrift.std.bm_mt_modify_entry(0, "mac_table", handle, "set_port", [b"\x00\x05"])
        [entity] = p4rt.read(table_entry=p4runtime_pb2.TableEntry(table_id=tid))
        assert entity.table_entry.action.action.params[0].value == b"\x05"
        [bm] = thrift.std.bm_mt_get_entries(0, "MyIngress.mac_table")
        assert bm.entry_handle == handle and bm.options.priority == -1
        assert bm.match_key[0].exact.key == MAC and bm.action_entry.action_data == [b"\x05"]
    finally:
        thrift.std.bm_mt_delete_entry(0, "MyIngress.mac_table", handle)
    assert p4rt.read(table_entry=p4runtime_pb2.TableEntry(table_id=tid)) == []
    assert thrift.std.bm_mt_get_num_entries(0, "MyIngress.mac_table") == 0


def test_thrift_lists_p4runtime_entries_with_bmv2_priorities(thrift, p4rt):
    tid = p4rt.id("tables", "MyIngress.acl")
    entry = p4runtime_pb2.TableEntry(table_id=tid, priority=10)
    entry.match.add(field_id=1).ternary.CopyFrom(p4runtime_pb2.FieldMatch.Ternary(
        value=b"\x02", mask=b"\xff"))
    entry.match.add(field_id=2).range.CopyFrom(p4runtime_pb2.FieldMatch.Range(
        low=b"\x08\x00", high=b"\x08\xff"))
    entry.action.action.action_id = p4rt.id("actions", "MyIngress.drop")
    p4rt.write(p4runtime_pb2.Update.INSERT, table_entry=entry)
    try:
        [bm] = thrift.std.bm_mt_get_entries(0, "MyIngress.acl")
        assert bm.options.priority == 2**31 - 1 - 10       # as PI maps them
        srcmac, ethertype, port = bm.match_key
        assert srcmac.ternary.key == bytes(5) + b"\x02" and srcmac.ternary.mask == bytes(5) + b"\xff"
        assert (ethertype.range.start, ethertype.range.end_) == (b"\x08\x00", b"\x08\xff")
        assert port.ternary.mask == b"\x00\x00"           # an omitted optional: don't care
        assert bm.action_entry.action_name == "MyIngress.drop"
        # a ternary entry added over Thrift gets P4Runtime priority 2^31 - 1 - its own
        key = [BmMatchParam(type=BmMatchParamType.TERNARY, ternary=BmMatchParamTernary(
                   bytes(6), bytes(6))),
               BmMatchParam(type=BmMatchParamType.RANGE, range=BmMatchParamRange(
                   b"\x00\x00", b"\x00\x10")),
               BmMatchParam(type=BmMatchParamType.TERNARY, ternary=BmMatchParamTernary(
                   b"\x00\x03", b"\x01\xff"))]
        h = thrift.std.bm_mt_add_entry(0, "MyIngress.acl", key, "NoAction", [],
                                       BmAddEntryOptions(priority=5))
        found = p4rt.read(table_entry=p4runtime_pb2.TableEntry(table_id=tid))
        assert sorted(e.table_entry.priority for e in found) == [10, 2**31 - 1 - 5]
        thrift.std.bm_mt_delete_entry(0, "MyIngress.acl", h)
    finally:
        p4rt.write(p4runtime_pb2.Update.DELETE, table_entry=entry)


def test_thrift_bad_calls_get_bmv2_codes_and_change_nothing(thrift):
    Codes = TableOperationErrorCode
    calls = [
        (Codes.INVALID_TABLE_NAME, ("no_such_table", [exact(MAC)], "set_port", [b"\0\1"])),
        (Codes.INVALID_ACTION_NAME, ("mac_table", [exact(MAC)], "learn", [])),
        (Codes.BAD_MATCH_KEY, ("mac_table", [exact(MAC[:5])], "set_port", [b"\0\1"])),
        (Codes.BAD_ACTION_DATA, ("mac_table", [exact(MAC)], "set_port", [b"\xff\xff"])),
        (Codes.BAD_ACTION_DATA, ("mac_table", [exact(MAC)], "set_port", [])),
    ]
    for code, (table, key, action, data) in calls:
        with pytest.raises(standard.InvalidTableOperation) as err:
            thrift.std.bm_mt_add_entry(0, table, key, action, data, BmAddEntryOptions())
        assert err.value.code == code, (table, action)
    h = thrift.std.bm_mt_add_entry(0, "mac_table", [exact(MAC)], "set_port", [b"\0\1"],
                                   BmAddEntryOptions())
    with pytest.raises(standard.InvalidTableOperation) as err:
        thrift.std.bm_mt_add_entry(0, "mac_table", [exact(MAC)], "set_port", [b"\0\1"],
                                   BmAddEntryOptions())
    assert err.value.code == Codes.DUPLICATE_ENTRY
    with pytest.raises(standard.InvalidTableOperation) as err:
        thrift.std.bm_mt_delete_entry(0, "mac_table", h + 100)
    assert err.value.code == Codes.INVALID_HANDLE
    assert thrift.std.bm_mt_get_num_entries(0, "mac_table") == 1
    thrift.std.bm_mt_delete_entry(0, "mac_table", h)
    with pytest.raises(standard.InvalidTableOperation) as err:
        thrift.std.bm_mt_set_default_action(0, "fixed", "drop", [])
    assert err.value.code == Codes.DEFAULT_ACTION_IS_CONST


def test_thrift_direct_counter_and_default_entry(thrift, p4rt):
    h = thrift.std.bm_mt_add_entry(0, "mac_table", [exact(MAC)], "set_port", [b"\0\1"],
                                   BmAddEntryOptions())
    try:
        thrift.std.bm_mt_write_counter(0, "mac_table", h, standard.BmCounterValue(
            bytes=640, packets=10))
        value = thrift.std.bm_mt_read_counter(0, "mac_table", h)
        assert (value.bytes, value.packets) == (640, 10)
        tid = p4rt.id("tables", "MyIngress.mac_table")
        key = p4runtime_pb2.TableEntry(table_id=tid)
        key.match.add(field_id=1).exact.value = MAC.lstrip(b"\0")
        [e] = p4rt.read(direct_counter_entry=p4runtime_pb2.DirectCounterEntry(table_entry=key))
        assert e.direct_counter_entry.data.packet_count == 10
        default = thrift.std.bm_mt_get_default_entry(0, "mac_table")
        assert default.action_name == "MyIngress.drop"
        thrift.std.bm_mt_set_default_action(0, "mac_table", "to_cpu", [])
        assert thrift.std.bm_mt_get_default_entry(0, "mac_table").action_name == \
            "MyIngress.to_cpu"
        thrift.std.bm_mt_reset_default_entry(0, "mac_table")
        assert thrift.std.bm_mt_get_default_entry(0, "mac_table").action_name == \
            "MyIngress.drop"
    finally:
        thrift.std.bm_mt_clear_entries(0, "mac_table", False)
    assert thrift.std.bm_mt_get_num_entries(0, "mac_table") == 0


def test_thrift_action_selector_groups(thrift, p4rt):
    prof = "MyIngress.ecmp_selector"
    m0 = thrift.std.bm_mt_act_prof_add_member(0, prof, "set_port", [b"\0\3"])
    m1 = thrift.std.bm_mt_act_prof_add_member(0, prof, "set_port", [b"\0\4"])
    g = thrift.std.bm_mt_act_prof_create_group(0, prof)
    thrift.std.bm_mt_act_prof_add_member_to_group(0, prof, m0, g)
    thrift.std.bm_mt_act_prof_add_member_to_group(0, prof, m1, g)
    with pytest.raises(standard.InvalidTableOperation) as err:
        thrift.std.bm_mt_act_prof_add_member_to_group(0, prof, m1, g)
    assert err.value.code == TableOperationErrorCode.MBR_ALREADY_IN_GRP
    h = thrift.std.bm_mt_indirect_ws_add_entry(0, "ecmp", [exact(b"\x90\x00")], g,
                                               BmAddEntryOptions())
    pid = p4rt.id("action_profiles", prof)
    [group] = p4rt.read(action_profile_group=p4runtime_pb2.ActionProfileGroup(
        action_profile_id=pid))
    assert len(group.action_profile_group.members) == 2
    assert thrift.std.bm_mt_get_entry(0, "ecmp", h).action_entry.grp_handle == g
    assert thrift.std.bm_mt_act_prof_get_group(0, prof, g).mbr_handles == [m0, m1]
    thrift.std.bm_mt_delete_entry(0, "ecmp", h)
    thrift.std.bm_mt_act_prof_delete_group(0, prof, g)
    for m in (m0, m1):
        thrift.std.bm_mt_act_prof_delete_member(0, prof, m)
    assert p4rt.read(action_profile_member=p4runtime_pb2.ActionProfileMember(
        action_profile_id=pid)) == []


def test_thrift_counters_registers_meters(thrift, p4rt):
    thrift.std.bm_counter_write(0, "port_packets", 3, standard.BmCounterValue(bytes=0,
                                                                              packets=42))
    assert thrift.std.bm_counter_read(0, "MyIngress.port_packets", 3).packets == 42
    q = p4runtime_pb2.CounterEntry(counter_id=p4rt.id("counters", "MyIngress.port_packets"))
    q.index.index = 3
    assert p4rt.read(counter_entry=q)[0].counter_entry.data.packet_count == 42
    thrift.std.bm_counter_reset_all(0, "port_packets")
    assert thrift.std.bm_counter_read(0, "port_packets", 3).packets == 0
    with pytest.raises(standard.InvalidCounterOperation) as err:
        thrift.std.bm_counter_read(0, "port_packets", 16)
    assert err.value.code == standard.CounterOperationErrorCode.INVALID_INDEX

    thrift.std.bm_register_write(0, "last_port", 5, 77)
    r = p4runtime_pb2.RegisterEntry(register_id=p4rt.id("registers", "MyIngress.last_port"))
    r.index.index = 5
    assert p4rt.read(register_entry=r)[0].register_entry.data.bitstring == b"\x4d"
    assert thrift.std.bm_register_read(0, "last_port", 5) == 77
    assert thrift.std.bm_register_read_all(0, "last_port")[5] == 77
    thrift.std.bm_register_reset(0, "last_port")
    assert thrift.std.bm_register_read(0, "last_port", 5) == 0
    with pytest.raises(standard.InvalidRegisterOperation) as err:
        thrift.std.bm_register_write(0, "last_port", 16, 1)
    assert err.value.code == standard.RegisterOperationErrorCode.INVALID_INDEX
    with pytest.raises(standard.InvalidRegisterOperation) as err:
        thrift.std.bm_register_read(0, "no_such_register", 0)
    assert err.value.code == standard.RegisterOperationErrorCode.INVALID_REGISTER_NAME

    rates = [BmMeterRateConfig(0.5, 10), BmMeterRateConfig(2.0, 20)]
    thrift.std.bm_meter_set_rates(0, "port_meter", 1, rates)
    m = p4runtime_pb2.MeterEntry(meter_id=p4rt.id("meters", "MyIngress.port_meter"))
    m.index.index = 1
    config = p4rt.read(meter_entry=m)[0].meter_entry.config
    assert (config.cir, config.cburst, config.pir, config.pburst) == (500000, 10, 2000000, 20)
    got = thrift.std.bm_meter_get_rates(0, "port_meter", 1)
    assert [(r.units_per_micros, r.burst_size) for r in got] == [(0.5, 10), (2.0, 20)]
    with pytest.raises(standard.InvalidMeterOperation) as err:
        thrift.std.bm_meter_set_rates(0, "port_meter", 1, rates[::-1])
    assert err.value.code == standard.MeterOperationErrorCode.INVALID_INFO_RATE_VALUE


def test_thrift_multicast_and_mirroring(thrift, p4rt):
    assert thrift.pre.bm_mc_mgrp_create(0, 5) == 5
    n0 = thrift.pre.bm_mc_node_create(0, 3, "110", "")          # ports 1 and 2, rid 3
    n1 = thrift.pre.bm_mc_node_create(0, 4, "1000", "10")       # port 3 and lag 1
    thrift.pre.bm_mc_set_lag_membership(0, 1, "110000")          # lag 1 = ports 4, 5
    thrift.pre.bm_mc_node_associate(0, 5, n0)
    thrift.pre.bm_mc_node_associate(0, 5, n1)
    q = p4runtime_pb2.PacketReplicationEngineEntry(
        multicast_group_entry=p4runtime_pb2.MulticastGroupEntry(multicast_group_id=5))
    [g] = p4rt.read(packet_replication_engine_entry=q)
    replicas = {(r.egress_port, r.instance) for r in
                g.packet_replication_engine_entry.multicast_group_entry.replicas}
    assert replicas == {(1, 3), (2, 3), (3, 4), (4, 4)}
    with pytest.raises(simple_pre.InvalidMcOperation) as err:
        thrift.pre.bm_mc_node_associate(0, 6, n0)
    assert err.value.code == simple_pre.McOperationErrorCode.INVALID_MGRP_HANDLE
    thrift.pre.bm_mc_node_dissociate(0, 5, n1)
    [g] = p4rt.read(packet_replication_engine_entry=q)
    assert len(g.packet_replication_engine_entry.multicast_group_entry.replicas) == 2

    thrift.sw.mirroring_session_add(4, simple_switch.MirroringSessionConfig(port=3))
    s = p4runtime_pb2.PacketReplicationEngineEntry(
        clone_session_entry=p4runtime_pb2.CloneSessionEntry(session_id=4))
    [c] = p4rt.read(packet_replication_engine_entry=s)
    assert [(r.egress_port, r.instance) for r in
            c.packet_replication_engine_entry.clone_session_entry.replicas] == [(3, 0)]
    assert repr(thrift.sw.mirroring_session_get(4)) == \
        "MirroringSessionConfig(port=3, mgid=None)"
    thrift.sw.mirroring_session_delete(4)
    with pytest.raises(simple_switch.InvalidMirroringOperation):
        thrift.sw.mirroring_session_get(4)

    thrift.pre.bm_mc_node_destroy(0, n0)
    thrift.pre.bm_mc_node_destroy(0, n1)
    thrift.pre.bm_mc_mgrp_destroy(0, 5)
    assert p4rt.read(packet_replication_engine_entry=q) == []


def test_thrift_switch_info_and_program_json(thrift, switch):
    import hashlib
    import json
    info = thrift.std.bm_mgmt_get_info()
    assert info.device_id == DEVICE
    assert info.thrift_port == int(switch.thrift_addr.rsplit(":", 1)[1])
    text = thrift.std.bm_get_config()
    program = json.loads(text)
    tables = {t["name"]: t for t in program["pipelines"][0]["tables"]}
    assert tables["MyIngress.ecmp"]["type"] == "indirect_ws"
    assert [k["match_type"] for k in tables["MyIngress.acl"]["key"]] == \
        ["ternary", "range", "optional"]
    assert thrift.std.bm_get_config_md5() == hashlib.md5(text.encode()).digest()
    # bmv2json's writer refuses runtime.p4 (a value set): the names-only description
    assert program["__meta__"]["compiler"].startswith("p4switch: names from the P4Info")


def test_thrift_server_survives_garbage_and_binds_loopback(switch, thrift):
    host, port = switch.thrift_addr.rsplit(":", 1)
    assert host == "127.0.0.1"
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"\x80\x01\x00\x01" + b"\xff" * 64)     # a call header, then nonsense
        s.settimeout(5)
        try:
            while s.recv(4096):
                pass
        except (TimeoutError, ConnectionResetError):
            pass
    assert thrift.std.bm_mgmt_get_info().device_id == DEVICE
