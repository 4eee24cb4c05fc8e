"""Hand-written BMv2 JSON documents for the reader's tests: a base program (Ethernet, then a
header `h` when the EtherType is 0x1234) that each test extends with the objects it checks."""
from __future__ import annotations

import copy

STANDARD = [["ingress_port", 9, False], ["egress_spec", 9, False], ["egress_port", 9, False],
            ["instance_type", 32, False], ["packet_length", 32, False],
            ["mcast_grp", 16, False], ["egress_rid", 16, False], ["checksum_error", 1, False],
            ["parser_error", 32, False], ["_padding", 3, False]]

BASE = {
    "__meta__": {"version": [2, 23], "compiler": "hand-written"},
    "header_types": [
        {"name": "scalars_0", "id": 0, "fields": [["x", 8, False], ["y", 16, False],
                                                  ["s", 8, True]]},
        {"name": "standard_metadata", "id": 1, "fields": STANDARD},
        {"name": "ethernet_t", "id": 2, "fields": [["dst", 48, False], ["src", 48, False],
                                                   ["etype", 16, False]]},
        {"name": "h_t", "id": 3, "fields": [["a", 8, False], ["b", 8, False], ["c", 16, False]]},
    ],
    "headers": [
        {"name": "scalars", "id": 0, "header_type": "scalars_0", "metadata": True},
        {"name": "standard_metadata", "id": 1, "header_type": "standard_metadata", "metadata": True},
        {"name": "ethernet", "id": 2, "header_type": "ethernet_t", "metadata": False},
        {"name": "h", "id": 3, "header_type": "h_t", "metadata": False},
    ],
    "header_stacks": [], "header_union_types": [], "header_unions": [], "header_union_stacks": [],
    "field_lists": [],
    "errors": [["NoError", 0], ["PacketTooShort", 1], ["NoMatch", 2], ["StackOutOfBounds", 3],
               ["HeaderTooShort", 4], ["ParserTimeout", 5], ["ParserInvalidArgument", 6]],
    "enums": [],
    "parsers": [{"name": "parser", "id": 0, "init_state": "start", "parse_states": [
        {"name": "start", "id": 0,
         "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "ethernet"}]}],
         "transition_key": [{"type": "field", "value": ["ethernet", "etype"]}],
         "transitions": [
             {"type": "hexstr", "value": "0x1234", "mask": None, "next_state": "parse_h"},
             {"type": "default", "value": None, "mask": None, "next_state": None}]},
        {"name": "parse_h", "id": 1,
         "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "h"}]}],
         "transition_key": [],
         "transitions": [{"type": "default", "value": None, "mask": None, "next_state": None}]},
    ]}],
    "parse_vsets": [],
    "deparsers": [{"name": "deparser", "id": 0, "order": ["ethernet", "h"]}],
    "meter_arrays": [], "counter_arrays": [], "register_arrays": [], "calculations": [],
    "learn_lists": [],
    "actions": [
        {"name": "NoAction", "id": 0, "runtime_data": [], "primitives": []},
        {"name": "ingress.fwd", "id": 1, "runtime_data": [{"name": "port", "bitwidth": 9}],
         "primitives": [{"op": "assign", "parameters": [
             {"type": "field", "value": ["standard_metadata", "egress_spec"]},
             {"type": "runtime_data", "value": 0}]}]},
    ],
    "pipelines": [
        {"name": "ingress", "id": 0, "init_table": None, "tables": [], "action_profiles": [],
         "conditionals": []},
        {"name": "egress", "id": 1, "init_table": None, "tables": [], "action_profiles": [],
         "conditionals": []},
    ],
    "checksums": [], "force_arith": [], "extern_instances": [], "field_aliases": [],
}


def base() -> dict:
    return copy.deepcopy(BASE)


def field(h, f):
    return {"type": "field", "value": [h, f]}


def hexstr(v):
    return {"type": "hexstr", "value": hex(v) if v >= 0 else "-" + hex(-v)}


def ex(op, left, right, **more):
    return {"type": "expression", "value": {"op": op, "left": left, "right": right, **more}}


def prim(op, *params):
    return {"op": op, "parameters": list(params)}


def action(doc, name, prims, runtime_data=()):
    aid = max(a["id"] for a in doc["actions"]) + 1
    doc["actions"].append({"name": name, "id": aid, "primitives": list(prims),
                           "runtime_data": [{"name": n, "bitwidth": w} for n, w in runtime_data]})
    return aid


def table(name, tid, key, action_ids, actions, default=None, next_tables=None, **more):
    t = {"name": name, "id": tid, "key": key, "match_type": more.pop("match_type", "exact"),
         "type": "simple", "max_size": 1024, "with_counters": False, "support_timeout": False,
         "direct_meters": None, "action_ids": action_ids, "actions": actions,
         "base_default_next": None,
         "next_tables": next_tables if next_tables is not None else {a: None for a in actions}}
    if default is not None:
        t["default_entry"] = {"action_id": default[0], "action_const": default[1],
                              "action_data": default[2], "action_entry_const": default[1]}
    t.update(more)
    return t


def call_in_ingress(doc, prims, next_node=None, name="tbl_act"):
    """`prims` as an action p4c runs from an apply block (a key-less table, const default)."""
    aid = action(doc, name[4:] if name.startswith("tbl_") else name, prims)
    aname = doc["actions"][-1]["name"]
    t = table(name, 100 + aid, [], [aid], [aname], default=(aid, True, []),
              next_tables={aname: next_node})
    pipe = doc["pipelines"][0]
    pipe["tables"].append(t)
    if pipe["init_table"] is None:
        pipe["init_table"] = name
    return t


def frame(etype=0x1234, payload=b"\x01\x02\x00\x03"):
    return bytes(6) + bytes.fromhex("020000000001") + etype.to_bytes(2, "big") + payload


def cpu_loop() -> dict:
    """bmv2_json_programs/cpu_loop.p4 as p4c-bm2-ss writes it."""
    doc = base()
    doc["header_types"] = [
        {"name": "scalars_0", "id": 0, "fields": []},
        {"name": "standard_metadata", "id": 1, "fields": STANDARD},
        {"name": "packet_in_t", "id": 2, "fields": [["port", 9, False], ["_pad", 7, False]]},
        {"name": "packet_out_t", "id": 3, "fields": [["egress_port", 9, False],
                                                      ["_pad", 7, False]]},
        {"name": "ethernet_t", "id": 4, "fields": [["dst", 48, False], ["src", 48, False],
                                                   ["etype", 16, False]]}]
    doc["headers"] = [
        {"name": "scalars", "id": 0, "header_type": "scalars_0", "metadata": True},
        {"name": "standard_metadata", "id": 1, "header_type": "standard_metadata", "metadata": True},
        {"name": "packet_out", "id": 2, "header_type": "packet_out_t", "metadata": False},
        {"name": "packet_in", "id": 3, "header_type": "packet_in_t", "metadata": False},
        {"name": "ethernet", "id": 4, "header_type": "ethernet_t", "metadata": False}]
    doc["parsers"][0]["parse_states"] = [
        {"name": "start", "id": 0, "parser_ops": [],
         "transition_key": [field("standard_metadata", "ingress_port")],
         "transitions": [
             {"type": "hexstr", "value": "0x01fe", "mask": None, "next_state": "parse_packet_out"},
             {"type": "default", "value": None, "mask": None, "next_state": "parse_ethernet"}]},
        {"name": "parse_packet_out", "id": 1,
         "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "packet_out"}]}],
         "transition_key": [],
         "transitions": [{"type": "default", "value": None, "mask": None,
                          "next_state": "parse_ethernet"}]},
        {"name": "parse_ethernet", "id": 2,
         "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "ethernet"}]}],
         "transition_key": [],
         "transitions": [{"type": "default", "value": None, "mask": None, "next_state": None}]}]
    doc["deparsers"][0]["order"] = ["packet_in", "ethernet"]
    doc["actions"] = [
        {"name": "NoAction", "id": 0, "runtime_data": [], "primitives": []},
        {"name": "I.send_to_cpu", "id": 1, "runtime_data": [{"name": "port", "bitwidth": 9}],
         "primitives": [
             prim("assign", field("standard_metadata", "egress_spec"), hexstr(510)),
             prim("add_header", {"type": "header", "value": "packet_in"}),
             prim("assign", field("packet_in", "port"), {"type": "runtime_data", "value": 0}),
             prim("remove_header", {"type": "header", "value": "packet_out"})]}]
    doc["pipelines"][0]["tables"] = [table(
        "I.to_cpu", 0, [{"match_type": "exact", "name": "hdr.ethernet.dst",
                         "target": ["ethernet", "dst"], "mask": None}],
        [1, 0], ["I.send_to_cpu", "NoAction"], default=(0, False, []))]
    doc["pipelines"][0]["init_table"] = "I.to_cpu"
    return doc
