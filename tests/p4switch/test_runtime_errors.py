"""Raw p4.v1 protos against `p4switch run --no-p4`: every error class of the P4Runtime spec
comes back with its status code, a failing update changes nothing, and the successful paths
next to each error behave (arbitration, pipeline actions, profiles, PRE, externs)."""
import pathlib
import queue
import threading

import grpc
import pytest
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2 as p4r
from p4.v1 import p4runtime_pb2_grpc

import p4switch
from p4switch.device.process import SwitchProcess

PROGRAMS = pathlib.Path(__file__).parent / "device_programs"
DEVICE = 7
Code = grpc.StatusCode
U = p4r.Update
SPA = p4r.SetForwardingPipelineConfigRequest


class Client:
    """A P4Runtime client: one stream (arbitration) plus unary calls."""

    def __init__(self, addr: str, election_id=(0, 1), role: str = "", device_id=DEVICE):
        self.channel = grpc.insecure_channel(addr)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.election_id, self.role, self.device_id = election_id, role, device_id
        self.out: queue.Queue = queue.Queue()
        self.inbox: queue.Queue = queue.Queue()
        self.stream = self.stub.StreamChannel(iter(self.out.get, None))
        threading.Thread(target=self._pump, daemon=True).start()
        self.arbitrate(election_id)

    def _pump(self):
        try:
            for msg in self.stream:
                self.inbox.put(msg)
        except grpc.RpcError as exc:
            self.inbox.put(exc)

    def arbitrate(self, election_id, device_id=None):
        req = p4r.StreamMessageRequest()
        req.arbitration.device_id = self.device_id if device_id is None else device_id
        req.arbitration.role.name = self.role
        req.arbitration.election_id.high, req.arbitration.election_id.low = election_id
        self.election_id = election_id
        self.out.put(req)

    def next_message(self, timeout=5.0):
        return self.inbox.get(timeout=timeout)

    def status(self, timeout=5.0) -> int:
        """Status code of the next arbitration update on the stream."""
        msg = self.next_message(timeout)
        assert not isinstance(msg, Exception), msg
        return msg.arbitration.status.code

    def _eid(self, req):
        req.election_id.high, req.election_id.low = self.election_id
        req.device_id = self.device_id
        if self.role:
            req.role = self.role
        return req

    def set_pipeline(self, info, config, action=SPA.VERIFY_AND_COMMIT, cookie=None):
        req = self._eid(SPA(action=action))
        if info is not None:
            req.config.p4info.CopyFrom(info)
            req.config.p4_device_config = config
        if cookie is not None:
            req.config.cookie.cookie = cookie
        return self.stub.SetForwardingPipelineConfig(req)

    def get_pipeline(self, response_type=p4r.GetForwardingPipelineConfigRequest.ALL):
        """The config, or None when the device has none."""
        resp = self.stub.GetForwardingPipelineConfig(p4r.GetForwardingPipelineConfigRequest(
            device_id=self.device_id, response_type=response_type))
        return resp.config if resp.HasField("config") else None

    def write(self, *updates, atomicity=p4r.WriteRequest.CONTINUE_ON_ERROR):
        req = self._eid(p4r.WriteRequest(atomicity=atomicity))
        req.updates.extend(updates)
        return self.stub.Write(req)

    def read(self, *entities):
        req = p4r.ReadRequest(device_id=self.device_id)
        req.entities.extend(entities)
        return [e for resp in self.stub.Read(req) for e in resp.entities]

    def close(self):
        self.out.put(None)
        self.channel.close()


def call_code(fn, *args, **kwargs) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as err:
        fn(*args, **kwargs)
    return err.value.code()


def batch_codes(err: grpc.RpcError) -> list[int]:
    assert err.code() == Code.UNKNOWN
    details = dict(err.trailing_metadata())["grpc-status-details-bin"]
    status = status_pb2.Status.FromString(details)
    codes = []
    for any_msg in status.details:
        e = p4r.Error()
        assert any_msg.Unpack(e)
        codes.append(e.canonical_code)
    return codes


class Names:
    """P4Info ids by name, so the test reads like the program."""

    def __init__(self, info):
        self.info = info
        self.t = {t.preamble.name.split(".")[-1]: t for t in info.tables}
        self.a = {a.preamble.name.split(".")[-1]: a for a in info.actions}

    def table(self, name):
        return self.t[name].preamble.id

    def field(self, table, name):
        return next(m.id for m in self.t[table].match_fields if m.name == name)

    def action(self, name, **params):
        a = self.a[name]
        msg = p4r.Action(action_id=a.preamble.id)
        for p in a.params:
            if p.name in params:
                msg.params.add(param_id=p.id, value=params[p.name])
        return msg

    def obj(self, kind, name):
        return next(o.preamble.id for o in getattr(self.info, kind)
                    if o.preamble.name.split(".")[-1] == name)


@pytest.fixture(scope="module")
def compiled():
    return p4switch.compile_program(str(PROGRAMS / "runtime.p4"))


@pytest.fixture(scope="module")
def names(compiled):
    return Names(compiled[0])


@pytest.fixture
def bare_switch():
    with SwitchProcess(["--no-p4", "--device-id", str(DEVICE), "--cpu-port", "510"]) as sw:
        yield sw


@pytest.fixture(scope="module")
def programmed(compiled):
    """A switch running runtime.p4 and its primary client, shared by the write tests."""
    with SwitchProcess(["--no-p4", "--device-id", str(DEVICE), "--cpu-port", "510"]) as sw:
        client = Client(sw.grpc_addr, (0, 1))
        assert client.status() == code_pb2.OK
        client.set_pipeline(*compiled)
        yield client
        client.close()


def snapshot(client) -> list[bytes]:
    """Everything a client can read, serialized and sorted."""
    E = p4r.Entity
    ents = client.read(E(table_entry=p4r.TableEntry()),
                       E(table_entry=p4r.TableEntry(is_default_action=True)),
                       E(action_profile_member=p4r.ActionProfileMember()),
                       E(action_profile_group=p4r.ActionProfileGroup()),
                       E(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry()),
                       E(counter_entry=p4r.CounterEntry()), E(meter_entry=p4r.MeterEntry()),
                       E(register_entry=p4r.RegisterEntry()), E(digest_entry=p4r.DigestEntry()))
    return sorted(e.SerializeToString(deterministic=True) for e in ents)


# --- helpers building entities --------------------------------------------------------------
def mac_entry(n: Names, mac: int, port: int = 1, priority: int = 0, **kw):
    te = p4r.TableEntry(table_id=n.table("mac_table"), priority=priority, **kw)
    te.match.add(field_id=n.field("mac_table", "hdr.ethernet.dstAddr")).exact.value = \
        mac.to_bytes(6, "big")
    te.action.action.CopyFrom(n.action("set_port", port=port.to_bytes(2, "big")))
    return te


def acl_entry(n: Names, priority=10, value=b"\x0a", mask=b"\xff", low=b"\x08\x00",
              high=b"\x08\x06"):
    te = p4r.TableEntry(table_id=n.table("acl"), priority=priority)
    fm = te.match.add(field_id=n.field("acl", "hdr.ethernet.srcAddr"))
    fm.ternary.value, fm.ternary.mask = value, mask
    fm = te.match.add(field_id=n.field("acl", "hdr.ethernet.etherType"))
    fm.range.low, fm.range.high = low, high
    te.action.action.CopyFrom(n.action("drop"))
    return te


def upd(kind, **entity):
    return U(type=kind, entity=p4r.Entity(**entity))


# --- before any pipeline ---------------------------------------------------------------------
def test_requests_before_a_pipeline_and_bad_configs(bare_switch, compiled):
    info, config = compiled
    client = Client(bare_switch.grpc_addr, (0, 5))
    assert client.status() == code_pb2.OK
    caps = client.stub.Capabilities(p4r.CapabilitiesRequest())
    assert caps.p4runtime_api_version.startswith("1.")
    assert call_code(client.write, upd(U.INSERT, table_entry=p4r.TableEntry(table_id=1))) \
        == Code.FAILED_PRECONDITION
    assert call_code(client.read, p4r.Entity(table_entry=p4r.TableEntry())) \
        == Code.FAILED_PRECONDITION
    assert client.get_pipeline() is None                 # no config: `config` unset
    # Bad requests leave the device without a pipeline.
    assert call_code(client.set_pipeline, info, b"not a p4switch config") \
        == Code.INVALID_ARGUMENT
    assert call_code(client.set_pipeline, info, config, action=SPA.UNSPECIFIED) \
        == Code.INVALID_ARGUMENT
    assert call_code(client.set_pipeline, None, None, action=SPA.COMMIT) == Code.NOT_FOUND
    client.set_pipeline(info, config, action=SPA.VERIFY)
    assert client.get_pipeline() is None
    client.device_id = DEVICE + 1
    assert call_code(client.get_pipeline) == Code.NOT_FOUND
    client.device_id = DEVICE
    client.role = "nobody-arbitrated-this-role"
    assert call_code(client.set_pipeline, info, config) == Code.NOT_FOUND
    client.role = ""
    # Save, then commit. A COMMIT carrying a config is refused.
    client.set_pipeline(info, config, action=SPA.VERIFY_AND_SAVE, cookie=42)
    assert call_code(client.set_pipeline, info, config, action=SPA.COMMIT) \
        == Code.INVALID_ARGUMENT
    client.set_pipeline(None, None, action=SPA.COMMIT)
    got = client.get_pipeline()
    assert got.cookie.cookie == 42 and got.p4info == info and got.p4_device_config == config
    only_cookie = client.get_pipeline(p4r.GetForwardingPipelineConfigRequest.COOKIE_ONLY)
    assert not only_cookie.HasField("p4info") and only_cookie.cookie.cookie == 42
    client.close()


def test_arbitration(bare_switch, compiled):
    a = Client(bare_switch.grpc_addr, (0, 10))
    assert a.status() == code_pb2.OK
    b = Client(bare_switch.grpc_addr, (0, 5))
    assert b.status() == code_pb2.ALREADY_EXISTS          # backup: a primary exists
    assert call_code(b.set_pipeline, *compiled) == Code.PERMISSION_DENIED
    a.set_pipeline(*compiled)
    n = Names(compiled[0])
    assert call_code(b.write, upd(U.INSERT, table_entry=mac_entry(n, 1))) \
        == Code.PERMISSION_DENIED
    same = Client(bare_switch.grpc_addr, (0, 10))          # an election id already in use
    err = same.next_message()
    assert isinstance(err, grpc.RpcError) and err.code() == Code.INVALID_ARGUMENT
    wrong = Client(bare_switch.grpc_addr, (0, 99), device_id=DEVICE + 1)
    err = wrong.next_message()
    assert isinstance(err, grpc.RpcError) and err.code() == Code.NOT_FOUND
    # b raises its election id above a's: b becomes primary, both are told.
    b.arbitrate((0, 20))
    assert b.status() == code_pb2.OK
    assert a.status() == code_pb2.ALREADY_EXISTS
    assert call_code(a.write, upd(U.INSERT, table_entry=mac_entry(n, 1))) \
        == Code.PERMISSION_DENIED
    b.write(upd(U.INSERT, table_entry=mac_entry(n, 1)))
    # A backup cannot send packets.
    out = p4r.StreamMessageRequest()
    out.packet.payload = b"\x00" * 14
    out.packet.metadata.add(metadata_id=1, value=b"\x01")
    out.packet.metadata.add(metadata_id=2, value=b"\x00")
    a.out.put(out)
    err = a.next_message()
    assert err.error.canonical_code == code_pb2.PERMISSION_DENIED
    # The primary leaves: nobody is primary until an election id >= 20 shows up.
    b.close()
    assert a.status() == code_pb2.NOT_FOUND
    assert call_code(a.write, upd(U.DELETE, table_entry=mac_entry(n, 1))) \
        == Code.PERMISSION_DENIED
    a.arbitrate((0, 21))
    assert a.status() == code_pb2.OK
    a.write(upd(U.DELETE, table_entry=mac_entry(n, 1)))
    # Roles are separate elections.
    r = Client(bare_switch.grpc_addr, (0, 1), role="other")
    assert r.status() == code_pb2.OK
    for c in (a, same, wrong, r):
        c.close()


# --- writes on a programmed switch ------------------------------------------------------------
def test_batch_reports_each_update_and_applies_only_good_ones(programmed, names):
    n, before = names, snapshot(programmed)
    good = mac_entry(n, 0x0A0000000001, port=2)
    bad_table = p4r.TableEntry(table_id=0x02FFFFFF)
    too_wide = mac_entry(n, 0x0A0000000002, port=0x200)     # port is bit<9>
    with pytest.raises(grpc.RpcError) as err:
        programmed.write(upd(U.INSERT, table_entry=good), upd(U.INSERT, table_entry=bad_table),
                         upd(U.INSERT, table_entry=too_wide), upd(U.INSERT, table_entry=good))
    assert batch_codes(err.value) == [code_pb2.OK, code_pb2.NOT_FOUND,
                                      code_pb2.INVALID_ARGUMENT, code_pb2.ALREADY_EXISTS]
    after = snapshot(programmed)
    assert len(after) == len(before) + 1
    (entry,) = programmed.read(p4r.Entity(table_entry=p4r.TableEntry(
        table_id=n.table("mac_table"))))
    assert entry.table_entry.action.action.params[0].value == b"\x02"   # canonical form
    programmed.write(upd(U.DELETE, table_entry=good))
    assert snapshot(programmed) == before


def _bad_updates(n: Names):
    """(description, update, expected code) for single updates the server must reject."""
    t_mac, t_acl, t_ecmp, t_fixed = (n.table(x) for x in ("mac_table", "acl", "ecmp", "fixed"))
    cases = []
    add = cases.append
    add(("modify missing entry", upd(U.MODIFY, table_entry=mac_entry(n, 0x0B)), Code.NOT_FOUND))
    add(("delete missing entry", upd(U.DELETE, table_entry=mac_entry(n, 0x0B)), Code.NOT_FOUND))
    add(("unspecified update type", upd(U.UNSPECIFIED, table_entry=mac_entry(n, 0x0B)),
         Code.INVALID_ARGUMENT))
    add(("priority on exact table", upd(U.INSERT, table_entry=mac_entry(n, 0x0B, priority=3)),
         Code.INVALID_ARGUMENT))
    add(("no priority on ternary table", upd(U.INSERT, table_entry=acl_entry(n, priority=0)),
         Code.INVALID_ARGUMENT))
    add(("ternary value outside mask",
         upd(U.INSERT, table_entry=acl_entry(n, value=b"\x0b", mask=b"\xf0")),
         Code.INVALID_ARGUMENT))
    add(("ternary all-zero mask", upd(U.INSERT, table_entry=acl_entry(n, value=b"\x00",
                                                                       mask=b"\x00")),
         Code.INVALID_ARGUMENT))
    add(("range low above high", upd(U.INSERT, table_entry=acl_entry(n, low=b"\x09",
                                                                      high=b"\x08")),
         Code.INVALID_ARGUMENT))
    add(("full range instead of omitting", upd(U.INSERT, table_entry=acl_entry(
        n, low=b"\x00", high=b"\xff\xff")), Code.INVALID_ARGUMENT))
    missing = p4r.TableEntry(table_id=t_mac)
    missing.action.action.CopyFrom(n.action("set_port", port=b"\x01"))
    add(("exact field missing", upd(U.INSERT, table_entry=missing), Code.INVALID_ARGUMENT))
    unknown_field = mac_entry(n, 0x0B)
    unknown_field.match.add(field_id=99).exact.value = b"\x01"
    add(("unknown match field", upd(U.INSERT, table_entry=unknown_field),
         Code.INVALID_ARGUMENT))
    wrong_kind = mac_entry(n, 0x0B)
    wrong_kind.match[0].ClearField("exact")
    wrong_kind.match[0].lpm.value, wrong_kind.match[0].lpm.prefix_len = b"\x0b", 48
    add(("lpm value for an exact field", upd(U.INSERT, table_entry=wrong_kind),
         Code.INVALID_ARGUMENT))
    foreign = mac_entry(n, 0x0B)
    foreign.action.action.CopyFrom(n.action("learn"))
    add(("action of another table", upd(U.INSERT, table_entry=foreign), Code.INVALID_ARGUMENT))
    default_only = mac_entry(n, 0x0B)
    default_only.action.action.CopyFrom(n.action("drop"))
    add(("@defaultonly action in an entry", upd(U.INSERT, table_entry=default_only),
         Code.PERMISSION_DENIED))
    no_param = mac_entry(n, 0x0B)
    del no_param.action.action.params[:]
    add(("missing action parameter", upd(U.INSERT, table_entry=no_param),
         Code.INVALID_ARGUMENT))
    unknown_action = mac_entry(n, 0x0B)
    unknown_action.action.action.action_id = 0x01ABCDEF
    add(("unknown action id", upd(U.INSERT, table_entry=unknown_action), Code.NOT_FOUND))
    no_action = mac_entry(n, 0x0B)
    no_action.ClearField("action")
    add(("entry without action", upd(U.INSERT, table_entry=no_action), Code.INVALID_ARGUMENT))
    default_insert = p4r.TableEntry(table_id=t_mac, is_default_action=True)
    default_insert.action.action.CopyFrom(n.action("drop"))
    add(("INSERT of a default entry", upd(U.INSERT, table_entry=default_insert),
         Code.INVALID_ARGUMENT))
    const_default = p4r.TableEntry(table_id=t_fixed, is_default_action=True)
    const_default.action.action.CopyFrom(n.action("drop"))
    add(("const default action", upd(U.MODIFY, table_entry=const_default),
         Code.PERMISSION_DENIED))
    const_entry = p4r.TableEntry(table_id=t_fixed)
    const_entry.match.add(field_id=n.field("fixed", "hdr.ethernet.etherType")).exact.value = \
        b"\x08\x00"
    const_entry.action.action.CopyFrom(n.action("drop"))
    add(("const table", upd(U.INSERT, table_entry=const_entry), Code.PERMISSION_DENIED))
    ecmp_direct = p4r.TableEntry(table_id=t_ecmp)
    ecmp_direct.match.add(field_id=n.field("ecmp", "hdr.ethernet.etherType")).exact.value = \
        b"\x90\x00"
    ecmp_member = p4r.TableEntry()
    ecmp_member.CopyFrom(ecmp_direct)
    ecmp_direct.action.action.CopyFrom(n.action("drop"))
    add(("direct action in an indirect table", upd(U.INSERT, table_entry=ecmp_direct),
         Code.INVALID_ARGUMENT))
    ecmp_member.action.action_profile_member_id = 77
    add(("unknown member in an entry", upd(U.INSERT, table_entry=ecmp_member), Code.NOT_FOUND))
    prof = n.obj("action_profiles", "ecmp_selector")
    group = p4r.ActionProfileGroup(action_profile_id=prof, group_id=1)
    group.members.add(member_id=77, weight=1)
    add(("group with unknown member", upd(U.INSERT, action_profile_group=group),
         Code.NOT_FOUND))
    counter = n.obj("counters", "port_packets")
    add(("INSERT of a counter", upd(U.INSERT, counter_entry=p4r.CounterEntry(
        counter_id=counter)), Code.INVALID_ARGUMENT))
    big = p4r.CounterEntry(counter_id=counter)
    big.index.index = 16
    add(("counter index out of range", upd(U.MODIFY, counter_entry=big), Code.OUT_OF_RANGE))
    negative = p4r.CounterEntry(counter_id=counter)
    negative.index.index = -1
    add(("negative counter index", upd(U.MODIFY, counter_entry=negative),
         Code.INVALID_ARGUMENT))
    add(("unknown counter", upd(U.MODIFY, counter_entry=p4r.CounterEntry(counter_id=0x12000099)),
         Code.NOT_FOUND))
    reg = p4r.RegisterEntry(register_id=n.obj("registers", "last_port"))
    reg.index.index = 0
    reg.data.bitstring = b"\x01\x00\x00\x00\x00"
    add(("register value too wide", upd(U.MODIFY, register_entry=reg), Code.INVALID_ARGUMENT))
    meter = p4r.MeterEntry(meter_id=n.obj("meters", "port_meter"))
    meter.index.index = 1
    meter.config.cir, meter.config.pir = 100, 10
    add(("meter cir above pir", upd(U.MODIFY, meter_entry=meter), Code.INVALID_ARGUMENT))
    add(("multicast group 0", upd(U.INSERT, packet_replication_engine_entry=
                                  p4r.PacketReplicationEngineEntry(
                                      multicast_group_entry=p4r.MulticastGroupEntry())),
         Code.INVALID_ARGUMENT))
    dup = p4r.MulticastGroupEntry(multicast_group_id=3)
    dup.replicas.add(egress_port=1, instance=1)
    dup.replicas.add(egress_port=1, instance=1)
    add(("duplicate replica", upd(U.INSERT, packet_replication_engine_entry=
                                  p4r.PacketReplicationEngineEntry(multicast_group_entry=dup)),
         Code.INVALID_ARGUMENT))
    clone = p4r.CloneSessionEntry(session_id=5)
    clone.replicas.add(egress_port=1)
    clone.replicas.add(egress_port=1)
    add(("clone session with a duplicate replica", upd(
        U.INSERT, packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
            clone_session_entry=clone)), Code.INVALID_ARGUMENT))
    add(("extern entries", upd(U.INSERT, extern_entry=p4r.ExternEntry(extern_type_id=1)),
         Code.UNIMPLEMENTED))
    vs_id = n.obj("value_sets", "tunnel_types")
    add(("INSERT of a value set", upd(U.INSERT, value_set_entry=p4r.ValueSetEntry(
        value_set_id=vs_id)), Code.INVALID_ARGUMENT))
    too_many = p4r.ValueSetEntry(value_set_id=vs_id)
    for i in range(5):
        too_many.members.add().match.add(field_id=1).exact.value = bytes([0x90, i])
    add(("value set over its size", upd(U.MODIFY, value_set_entry=too_many),
         Code.RESOURCE_EXHAUSTED))
    twice = p4r.ValueSetEntry(value_set_id=vs_id)
    for _ in range(2):
        twice.members.add().match.add(field_id=1).exact.value = b"\x88\x47"
    add(("value set member twice", upd(U.MODIFY, value_set_entry=twice), Code.ALREADY_EXISTS))
    add(("is_const in a write", upd(U.INSERT, table_entry=mac_entry(n, 0x0B, is_const=True)),
         Code.INVALID_ARGUMENT))
    add(("idle timeout on a table without it", upd(U.INSERT, table_entry=mac_entry(
        n, 0x0B, idle_timeout_ns=10**9)), Code.INVALID_ARGUMENT))
    const_modify = p4r.TableEntry()
    const_modify.CopyFrom(const_entry)
    const_modify.match[0].exact.value = b"\x88\xcc"
    add(("action of a const entry", upd(U.MODIFY, table_entry=const_modify),
         Code.PERMISSION_DENIED))
    add(("delete of a const entry", upd(U.DELETE, table_entry=const_modify),
         Code.PERMISSION_DENIED))
    metered = mac_entry(n, 0x0B)
    metered.meter_config.cir, metered.meter_config.pir = 1, 2
    add(("meter config on a table without direct meter", upd(U.INSERT, table_entry=metered),
         Code.INVALID_ARGUMENT))
    bad_meter = acl_entry(n)
    bad_meter.meter_config.cir, bad_meter.meter_config.pir = 5, 2
    add(("direct meter cir above pir", upd(U.INSERT, table_entry=bad_meter),
         Code.INVALID_ARGUMENT))
    return cases


def test_each_bad_update_gets_its_code_and_changes_nothing(programmed, names):
    before = snapshot(programmed)
    wrong = []
    for what, update, expected in _bad_updates(names):
        with pytest.raises(grpc.RpcError) as err:
            programmed.write(update)
        (code,) = batch_codes(err.value)
        if code != expected.value[0]:
            wrong.append(f"{what}: got {code_pb2.Code.Name(code)}, expected {expected.name}")
        if snapshot(programmed) != before:
            wrong.append(f"{what}: the rejected update changed the state")
    assert not wrong, "\n".join(wrong)


def test_request_level_errors(programmed, names):
    entry = mac_entry(names, 0x0C)
    assert call_code(programmed.write, upd(U.INSERT, table_entry=entry),
                     atomicity=7) == Code.INVALID_ARGUMENT
    programmed.device_id = DEVICE + 1
    try:
        assert call_code(programmed.write, upd(U.INSERT, table_entry=entry)) == Code.NOT_FOUND
    finally:
        programmed.device_id = DEVICE
    saved = programmed.election_id
    programmed.election_id = (0, 0)
    try:
        assert call_code(programmed.write, upd(U.INSERT, table_entry=entry)) \
            == Code.PERMISSION_DENIED
    finally:
        programmed.election_id = saved
    programmed.role = "nobody-arbitrated-this-role"
    try:
        assert call_code(programmed.write, upd(U.INSERT, table_entry=entry)) == Code.NOT_FOUND
    finally:
        programmed.role = ""
    # Read: one p4.v1.Error per request, UNKNOWN overall.
    with pytest.raises(grpc.RpcError) as err:
        programmed.read(p4r.Entity(counter_entry=p4r.CounterEntry()),
                        p4r.Entity(table_entry=p4r.TableEntry(table_id=0x02ABCDEF)),
                        p4r.Entity())
    assert batch_codes(err.value) == [code_pb2.OK, code_pb2.NOT_FOUND,
                                      code_pb2.INVALID_ARGUMENT]


@pytest.mark.parametrize("atomicity", [p4r.WriteRequest.ROLLBACK_ON_ERROR,
                                       p4r.WriteRequest.DATAPLANE_ATOMIC])
def test_atomic_batches_are_all_or_none(programmed, names, atomicity):
    kept, gone = mac_entry(names, 0x0F01, port=1), mac_entry(names, 0x0F02, port=2)
    gone.counter_data.packet_count = 4
    programmed.write(upd(U.INSERT, table_entry=kept), upd(U.INSERT, table_entry=gone))
    before = snapshot(programmed)
    new = mac_entry(names, 0x0F03, port=3)
    reg = p4r.RegisterEntry(register_id=names.obj("registers", "last_port"))
    reg.index.index = 3
    reg.data.bitstring = b"\x07"
    counter = p4r.CounterEntry(counter_id=names.obj("counters", "port_packets"))
    counter.data.packet_count = 5                     # every index (wildcard write)
    group = p4r.MulticastGroupEntry(multicast_group_id=7)
    group.replicas.add(egress_port=1, instance=1)
    batch = [upd(U.INSERT, table_entry=new), upd(U.MODIFY, table_entry=mac_entry(names, 0x0F01,
                                                                                 port=9)),
             upd(U.DELETE, table_entry=gone), upd(U.MODIFY, register_entry=reg),
             upd(U.MODIFY, counter_entry=counter),
             upd(U.INSERT, packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                 multicast_group_entry=group))]
    with pytest.raises(grpc.RpcError) as err:
        programmed.write(*batch, upd(U.INSERT, table_entry=new), atomicity=atomicity)
    assert batch_codes(err.value) == [code_pb2.ABORTED] * 6 + [code_pb2.ALREADY_EXISTS]
    assert snapshot(programmed) == before
    restored = p4r.DirectCounterEntry(table_entry=mac_entry(names, 0x0F02))
    restored.table_entry.ClearField("action")
    (got,) = programmed.read(p4r.Entity(direct_counter_entry=restored))
    assert got.direct_counter_entry.data.packet_count == 4     # the deleted entry came back
    programmed.write(*batch, atomicity=atomicity)               # without the bad update: all
    assert snapshot(programmed) != before
    undo_counter = p4r.CounterEntry(counter_id=counter.counter_id)
    undo_counter.data.SetInParent()
    reg.data.bitstring = b"\x00"
    programmed.write(upd(U.DELETE, table_entry=new), upd(U.DELETE, table_entry=kept),
                     upd(U.MODIFY, register_entry=reg), upd(U.MODIFY, counter_entry=undo_counter),
                     upd(U.DELETE, packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                         multicast_group_entry=group)))


def test_table_full_is_resource_exhausted(programmed, names):
    entries = [mac_entry(names, 0x100 + i) for i in range(8)]
    programmed.write(*[upd(U.INSERT, table_entry=e) for e in entries])
    with pytest.raises(grpc.RpcError) as err:
        programmed.write(upd(U.INSERT, table_entry=mac_entry(names, 0x200)))
    assert batch_codes(err.value) == [code_pb2.RESOURCE_EXHAUSTED]
    programmed.write(*[upd(U.DELETE, table_entry=e) for e in entries])


def test_default_entry_set_read_and_reset(programmed, names):
    t = names.table("mac_table")
    query = p4r.Entity(table_entry=p4r.TableEntry(table_id=t, is_default_action=True))
    (initial,) = programmed.read(query)
    assert initial.table_entry.action.action.action_id == names.action("drop").action_id
    default = p4r.TableEntry(table_id=t, is_default_action=True)
    default.action.action.CopyFrom(names.action("set_port", port=b"\x00\x03"))
    programmed.write(upd(U.MODIFY, table_entry=default))
    (now,) = programmed.read(query)
    assert now.table_entry.action.action.params[0].value == b"\x03"
    programmed.write(upd(U.MODIFY, table_entry=p4r.TableEntry(table_id=t,
                                                              is_default_action=True)))
    assert programmed.read(query) == [initial]


def test_const_entries_are_readable(programmed, names):
    (entry,) = programmed.read(p4r.Entity(table_entry=p4r.TableEntry(
        table_id=names.table("fixed"))))
    assert entry.table_entry.is_const
    assert entry.table_entry.match[0].exact.value == b"\x88\xcc"


def test_action_profile_references(programmed, names):
    prof = names.obj("action_profiles", "ecmp_selector")
    members = [p4r.ActionProfileMember(action_profile_id=prof, member_id=i,
                                       action=names.action("set_port", port=bytes([i])))
               for i in (1, 2)]
    group = p4r.ActionProfileGroup(action_profile_id=prof, group_id=10)
    for m in members:
        group.members.add(member_id=m.member_id, weight=1)
    entry = p4r.TableEntry(table_id=names.table("ecmp"))
    entry.match.add(field_id=names.field("ecmp", "hdr.ethernet.etherType")).exact.value = \
        b"\x90\x00"
    entry.action.action_profile_group_id = 10
    programmed.write(*[upd(U.INSERT, action_profile_member=m) for m in members],
                     upd(U.INSERT, action_profile_group=group), upd(U.INSERT, table_entry=entry))
    with pytest.raises(grpc.RpcError) as err:
        programmed.write(upd(U.DELETE, action_profile_member=members[0]),
                         upd(U.DELETE, action_profile_group=group))
    assert batch_codes(err.value) == [code_pb2.FAILED_PRECONDITION, code_pb2.FAILED_PRECONDITION]
    got = programmed.read(p4r.Entity(action_profile_group=p4r.ActionProfileGroup(
        action_profile_id=prof)))
    assert [g.action_profile_group for g in got] == [group]
    programmed.write(upd(U.DELETE, table_entry=entry), upd(U.DELETE, action_profile_group=group),
                     *[upd(U.DELETE, action_profile_member=m) for m in members])
    one_shot = p4r.TableEntry()
    one_shot.CopyFrom(entry)
    for port in (4, 5):
        a = one_shot.action.action_profile_action_set.action_profile_actions.add(weight=1)
        a.action.CopyFrom(names.action("set_port", port=bytes([port])))
    programmed.write(upd(U.INSERT, table_entry=one_shot))
    (read_back,) = programmed.read(p4r.Entity(table_entry=p4r.TableEntry(
        table_id=names.table("ecmp"))))
    assert read_back.table_entry == one_shot
    programmed.write(upd(U.DELETE, table_entry=one_shot))


def test_externs_read_back(programmed, names):
    reg = p4r.RegisterEntry(register_id=names.obj("registers", "last_port"))
    reg.index.index = 5
    reg.data.bitstring = b"\x00\x00\x01\x02"
    programmed.write(upd(U.MODIFY, register_entry=reg))
    (got,) = programmed.read(p4r.Entity(register_entry=p4r.RegisterEntry(
        register_id=reg.register_id, index=reg.index)))
    assert got.register_entry.data.bitstring == b"\x01\x02"
    meter = p4r.MeterEntry(meter_id=names.obj("meters", "port_meter"))
    meter.index.index = 2
    meter.config.cir, meter.config.cburst, meter.config.pir, meter.config.pburst = 10, 5, 20, 5
    programmed.write(upd(U.MODIFY, meter_entry=meter))
    all_meters = programmed.read(p4r.Entity(meter_entry=p4r.MeterEntry(
        meter_id=meter.meter_id)))
    assert len(all_meters) == 16
    assert all_meters[2].meter_entry == meter
    meter.ClearField("config")
    programmed.write(upd(U.MODIFY, meter_entry=meter))
    assert not programmed.read(p4r.Entity(meter_entry=meter))[0].meter_entry.HasField("config")
    clone = p4r.CloneSessionEntry(session_id=9, packet_length_bytes=64, class_of_service=1)
    clone.replicas.add(egress_port=3)
    clone.replicas.add(egress_port=4, instance=2)
    pre = p4r.PacketReplicationEngineEntry(clone_session_entry=clone)
    programmed.write(upd(U.INSERT, packet_replication_engine_entry=pre))
    got = programmed.read(p4r.Entity(packet_replication_engine_entry=pre))
    assert [g.packet_replication_engine_entry for g in got] == [pre]
    programmed.write(upd(U.DELETE, packet_replication_engine_entry=pre))


def test_modify_without_action_and_read_filters(programmed, names):
    a = mac_entry(names, 0x0E01, port=1)
    a.metadata = b"cookie-a"
    b = mac_entry(names, 0x0E02, port=2)
    programmed.write(upd(U.INSERT, table_entry=a), upd(U.INSERT, table_entry=b))
    counts = mac_entry(names, 0x0E01)
    counts.ClearField("action")
    counts.counter_data.packet_count = 9
    programmed.write(upd(U.MODIFY, table_entry=counts))     # direct counter only
    query = p4r.TableEntry(table_id=names.table("mac_table"))
    query.counter_data.SetInParent()
    got = {e.table_entry.match[0].exact.value: e.table_entry for e in
           programmed.read(p4r.Entity(table_entry=query))}
    first = got[b"\x0e\x01"]
    assert first.counter_data.packet_count == 9
    assert first.action.action.params[0].value == b"\x01"          # action kept
    assert first.metadata == b"cookie-a"
    by_metadata = p4r.TableEntry(table_id=names.table("mac_table"), metadata=b"cookie-a")
    assert [e.table_entry.match[0].exact.value for e in programmed.read(
        p4r.Entity(table_entry=by_metadata))] == [b"\x0e\x01"]
    programmed.write(upd(U.DELETE, table_entry=a), upd(U.DELETE, table_entry=b))


def test_direct_meter_config(programmed, names):
    entry = acl_entry(names, priority=30)
    c = entry.meter_config
    c.cir, c.cburst, c.pir, c.pburst = 100, 10, 200, 20
    programmed.write(upd(U.INSERT, table_entry=entry))
    table_query = p4r.TableEntry(table_id=names.table("acl"))
    (plain,) = programmed.read(p4r.Entity(table_entry=table_query))
    assert not plain.table_entry.HasField("meter_config")     # only when asked for
    table_query.meter_config.SetInParent()
    (got,) = programmed.read(p4r.Entity(table_entry=table_query))
    assert got.table_entry.meter_config == c
    dm = p4r.DirectMeterEntry(table_entry=acl_entry(names, priority=30))
    dm.table_entry.ClearField("meter_config")
    dm.config.cir, dm.config.cburst, dm.config.pir, dm.config.pburst = 50, 5, 60, 6
    programmed.write(upd(U.MODIFY, direct_meter_entry=dm))
    (read,) = programmed.read(p4r.Entity(direct_meter_entry=p4r.DirectMeterEntry(
        table_entry=table_query)))
    assert read.direct_meter_entry.config == dm.config
    programmed.write(upd(U.DELETE, table_entry=entry))


def test_value_set(programmed, names):
    vs = p4r.ValueSetEntry(value_set_id=names.obj("value_sets", "tunnel_types"))
    for etype in (b"\x88\x47", b"\x89\x02"):
        vs.members.add().match.add(field_id=1).exact.value = etype
    programmed.write(upd(U.MODIFY, value_set_entry=vs))
    query = p4r.ValueSetEntry(value_set_id=vs.value_set_id)
    assert programmed.read(p4r.Entity(value_set_entry=query))[0].value_set_entry == vs
    programmed.write(upd(U.MODIFY, value_set_entry=query))          # empty: no members
    assert not programmed.read(p4r.Entity(value_set_entry=query))[0].value_set_entry.members


def test_reconcile_keeps_entries(programmed, names, compiled):
    entry = mac_entry(names, 0x0D0D, port=4)
    programmed.write(upd(U.INSERT, table_entry=entry))
    before = snapshot(programmed)
    programmed.set_pipeline(*compiled, action=SPA.RECONCILE_AND_COMMIT)
    after = snapshot(programmed)
    tables_only = [e for e in after if p4r.Entity.FromString(e).HasField("table_entry")]
    assert tables_only == [e for e in before if p4r.Entity.FromString(e).HasField("table_entry")]
    # A program that cannot take the state: refused, the running pipeline keeps everything.
    other = p4switch.compile_program(str(PROGRAMS / "l3.p4"))
    assert call_code(programmed.set_pipeline, *other, action=SPA.RECONCILE_AND_COMMIT) \
        == Code.INVALID_ARGUMENT
    assert programmed.get_pipeline().p4info == compiled[0]
    assert [e for e in snapshot(programmed) if p4r.Entity.FromString(e).HasField("table_entry")] \
        == tables_only
    programmed.write(upd(U.DELETE, table_entry=entry))
