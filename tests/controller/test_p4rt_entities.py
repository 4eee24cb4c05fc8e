"""P4Runtime client without a switch: names to ids, canonical encodings, reconciliation plans."""
import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as pb

from controller.p4rt import (
    CounterCell,
    MulticastGroup,
    Schema,
    SchemaError,
    State,
    TableEntry,
    sync,
    values,
)

P4INFO = """
tables { preamble { id: 1 name: "Ingress.routes" alias: "routes" }
  match_fields { id: 1 name: "meta.slice" bitwidth: 8 match_type: EXACT }
  match_fields { id: 2 name: "hdr.ipv4.dstAddr" bitwidth: 32 match_type: LPM }
  action_refs { id: 10 } action_refs { id: 11 } size: 1024 }
tables { preamble { id: 2 name: "Ingress.classify" alias: "classify" }
  match_fields { id: 1 name: "standard_metadata.ingress_port" bitwidth: 9 match_type: TERNARY }
  match_fields { id: 2 name: "hdr.udp.srcPort" bitwidth: 16 match_type: RANGE }
  action_refs { id: 12 } action_refs { id: 11 } size: 64 }
actions { preamble { id: 10 name: "Ingress.forward" alias: "forward" }
  params { id: 1 name: "port" bitwidth: 9 } params { id: 2 name: "dmac" bitwidth: 48 } }
actions { preamble { id: 11 name: "Ingress.drop" alias: "drop" } }
actions { preamble { id: 12 name: "Ingress.set_slice" alias: "set_slice" }
  params { id: 1 name: "slice" bitwidth: 8 } }
counters { preamble { id: 20 name: "Egress.port_tx" alias: "port_tx" }
  spec { unit: BOTH } size: 16 }
direct_counters { preamble { id: 30 name: "Ingress.routes_hits" } direct_table_id: 1 }
"""


@pytest.fixture
def schema():
    return Schema(text_format.Parse(P4INFO, p4info_pb2.P4Info()))


def test_canonical_byte_strings():
    assert values.encode(0, 9) == b"\x00"
    assert values.encode(2, 9) == b"\x02"
    assert values.encode(0x1FF, 9) == b"\x01\xff"
    assert values.encode("10.0.1.2", 32) == b"\x0a\x00\x01\x02"
    assert values.encode("02:00:0a:00:01:02", 48) == b"\x02\x00\x0a\x00\x01\x02"
    with pytest.raises(ValueError, match="does not fit in 9 bits"):
        values.encode(512, 9)


def test_names_resolve_by_full_name_and_alias(schema):
    assert schema.table("routes") is schema.table("Ingress.routes")
    assert schema.table(1).name == "Ingress.routes"
    with pytest.raises(SchemaError, match="no table 'nope'"):
        schema.table("nope")
    with pytest.raises(SchemaError, match="not an action of table Ingress.routes"):
        schema.table_action(schema.table("routes"), "set_slice")


def test_lpm_entry_is_canonical_and_round_trips(schema):
    entry = TableEntry("routes", {"slice": 0, "dstAddr": ("10.0.2.77", 24)}, "forward",
                       {"port": 3, "dmac": "02:00:0a:00:02:01"})
    proto = entry.to_proto(schema).table_entry
    assert proto.table_id == 1
    lpm = next(m for m in proto.match if m.field_id == 2).lpm
    assert lpm.value == b"\x0a\x00\x02\x00" and lpm.prefix_len == 24  # host bits cleared
    assert proto.action.action.params[0].value == b"\x03"
    back = TableEntry.from_proto(schema, proto)
    assert back.table == "Ingress.routes"
    assert back.match == {"meta.slice": 0, "hdr.ipv4.dstAddr": (0x0A000200, 24)}
    assert back.params == {"port": 3, "dmac": 0x02000A000201}


def test_wildcards_are_left_out_and_priority_is_required(schema):
    entry = TableEntry("classify", {"ingress_port": (0, 0), "srcPort": (0xC000, 0xFFFF)},
                       "set_slice", {"slice": 2}, priority=10)
    proto = entry.to_proto(schema).table_entry
    assert [m.field_id for m in proto.match] == [2]   # mask 0 = don't care
    with pytest.raises(ValueError, match="need a priority"):
        TableEntry("classify", {}, "set_slice", {"slice": 2}).to_proto(schema)
    with pytest.raises(ValueError, match="no priority allowed"):
        TableEntry("routes", {"slice": 1, "dstAddr": ("10.0.0.0", 8)}, "drop",
                   priority=3).to_proto(schema)


def test_bad_entries_name_the_problem(schema):
    with pytest.raises(SchemaError, match="no match field 'vlan'"):
        TableEntry("routes", {"slice": 0, "vlan": 1}, "drop").to_proto(schema)
    with pytest.raises(ValueError, match=r"needs parameters \['dmac'\]"):
        TableEntry("routes", {"slice": 0}, "forward", {"port": 1}).to_proto(schema)
    with pytest.raises(ValueError, match="exact field meta.slice needs a value"):
        TableEntry("routes", {}, "drop").to_proto(schema)
    with pytest.raises(ValueError, match="index 16 outside 0..15"):
        CounterCell("port_tx", 16).to_proto(schema)


def _route(slice_, prefix, port):
    return TableEntry("routes", {"slice": slice_, "dstAddr": (prefix, 24)}, "forward",
                      {"port": port, "dmac": 1})


def test_plan_writes_only_the_difference(schema):
    keep, change, stale = (_route(0, "10.0.1.0", 1), _route(0, "10.0.2.0", 2),
                           _route(0, "10.0.3.0", 3))
    new = _route(1, "10.0.1.0", 4)
    default = TableEntry("classify", action="drop", default=True)
    current = State([sync.canonical(schema, e) for e in (keep, change, stale, default)],
                    [MulticastGroup(5, ((1, 1), (2, 2)))])
    intended = State([TableEntry("routes", action="drop", default=True), keep,
                      _route(0, "10.0.2.0", 9), new, default],
                     [MulticastGroup(5, ((2, 2), (1, 1))), MulticastGroup(6, ((3, 0),))])
    steps = sync.plan(schema, intended, current)
    kinds = [(sync.UPDATE_NAMES[t], type(e).__name__) for t, e in steps]
    # Group 6 before the routes, then entries and defaults in the intended order, the stale
    # route last; group 5 (same set of replicas) and the unchanged default are left alone.
    assert kinds == [("insert", "MulticastGroup"), ("modify", "TableEntry"),
                     ("modify", "TableEntry"), ("insert", "TableEntry"),
                     ("delete", "TableEntry")]
    assert steps[4][1].match["hdr.ipv4.dstAddr"] == (0x0A000300, 24)
    assert steps[1][1].default and steps[1][1].table == "Ingress.routes"
    assert sync.summary(steps) == {"insert": 2, "modify": 2, "delete": 1}
    updates = sync.to_updates(schema, steps)
    assert updates[4].type == pb.Update.DELETE and updates[4].entity.HasField("table_entry")


def test_plan_of_an_in_sync_switch_is_empty(schema):
    intended = State([_route(0, "10.0.1.0", 1),
                      TableEntry("routes", action="drop", default=True)],
                     [MulticastGroup(5, ((1, 1),))])
    current = State([sync.canonical(schema, e) for e in intended.table_entries],
                    list(intended.multicast_groups))
    assert sync.plan(schema, intended, current) == []


def test_conflicting_intended_entries_are_refused(schema):
    with pytest.raises(ValueError, match="share a match"):
        sync.plan(schema, State([_route(0, "10.0.1.0", 1), _route(0, "10.0.1.9", 2)]), State())
