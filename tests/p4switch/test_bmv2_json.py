"""The BMv2 JSON reader on hand-written documents: one test per object kind, BMv2's unbounded
arithmetic, both backends, and errors that name the JSON path."""
from __future__ import annotations

import json
import pathlib
import shutil

import pytest
from bmv2_json_docs import action, base, call_in_ingress, ex, field, frame, hexstr, prim, table

from p4switch import _switch, bmv2json, p4info

BACKENDS = ["python"] + (["native"] if shutil.which("cc") else [])
PYTHON = ["python"]         # the native backend's build costs seconds: a few tests run on both


def load(doc, backend="python"):
    prog = bmv2json.load_bytes(json.dumps(doc).encode())
    return _switch(backend)(prog, p4info.build(prog))


def fwd_to(port):
    return prim("assign", field("standard_metadata", "egress_spec"), hexstr(port))


@pytest.mark.parametrize("backend", PYTHON)
def test_bmv2_json_table_exact_default_and_runtime_data(backend):
    doc = base()
    doc["pipelines"][0]["tables"].append(table(
        "ingress.t", 0, [{"match_type": "exact", "name": "h.a", "target": ["h", "a"], "mask": None}],
        [1, 0], ["ingress.fwd", "NoAction"], default=(1, False, ["0x7"])))
    doc["pipelines"][0]["init_table"] = "ingress.t"
    sw = load(doc, backend)
    sw.table_add("ingress.t", {"h.a": 1}, "ingress.fwd", {"port": 3})
    hit, miss = frame(payload=b"\x01\x00\x00\x00"), frame(payload=b"\x02\x00\x00\x00")
    assert sw.process(1, hit) == [(3, hit)]
    assert sw.process(1, miss) == [(7, miss)]          # the JSON's default entry


@pytest.mark.parametrize("backend", BACKENDS)
def test_bmv2_json_unbounded_arithmetic(backend):
    doc = base()
    call_in_ingress(doc, [
        fwd_to(2),
        # (h.a + h.b) >> 1 without a mask: BMv2 keeps the carry (P4 at 8 bits would not)
        prim("assign", field("scalars", "x"),
             ex(">>", ex("+", field("h", "a"), field("h", "b")), hexstr(1))),
        prim("assign", field("h", "a"), field("scalars", "x")),
        # ~h.b & 0xffff: the complement of an unbounded integer, then masked
        prim("assign", field("h", "c"), ex("&", ex("~", None, field("h", "b")), hexstr(0xffff))),
        # a signed field: -3 >> 1 is -2, stored as 0xfe
        prim("assign", field("scalars", "s"), hexstr(-3)),
        prim("assign", field("h", "b"), ex(">>", field("scalars", "s"), hexstr(1))),
    ])
    out = load(doc, backend).process(1, frame(payload=b"\xff\x03\x00\x00"))
    assert out == [(2, frame(payload=b"\x81\xfe\xff\xfc"))]


@pytest.mark.parametrize("backend", PYTHON)
def test_bmv2_json_conditionals_jumps_and_hit_miss(backend):
    doc = base()
    yes = action(doc, "yes", [fwd_to(5)])
    # if (h.b != 0) c = 1 else c = 2, as p4c writes an if inside an action
    branch = action(doc, "branch", [
        prim("_jump_if_zero", ex("b2d", None, ex("!=", field("h", "b"), hexstr(0))), hexstr(3)),
        prim("assign", field("h", "c"), hexstr(1)),
        prim("_jump", hexstr(4)),
        prim("assign", field("h", "c"), hexstr(2)),
    ])
    pipe = doc["pipelines"][0]
    pipe["conditionals"].append({"name": "node_1", "id": 0, "true_next": "t_yes",
                                 "false_next": "t_branch",
                                 "expression": ex("and", ex("valid", None,
                                                            {"type": "header", "value": "h"}),
                                                  ex("==", field("h", "a"), hexstr(1)))})
    pipe["tables"].append(table("t_yes", 0, [{"match_type": "exact", "target": ["h", "a"],
                                              "mask": None}], [yes], ["yes"],
                                default=(yes, False, []), next_tables={"__HIT__": None,
                                                                        "__MISS__": "t_branch"}))
    pipe["tables"].append(table("tbl_branch", 1, [], [branch], ["branch"],
                                default=(branch, True, [])))
    pipe["tables"][-1]["name"] = "t_branch"
    pipe["tables"][0]["next_tables"]["__MISS__"] = "t_branch"
    pipe["init_table"] = "node_1"
    sw = load(doc, backend)
    sw.table_add("t_yes", {"h.a": 1}, "yes")
    assert sw.process(1, frame(payload=b"\x01\x00\x00\x09")) == [(5, frame(payload=b"\x01\x00\x00\x09"))]
    assert sw.process(1, frame(payload=b"\x02\x04\x00\x09")) == [(0, frame(payload=b"\x02\x04\x00\x01"))]
    assert sw.process(1, frame(payload=b"\x02\x00\x00\x09")) == [(0, frame(payload=b"\x02\x00\x00\x02"))]


@pytest.mark.parametrize("backend", PYTHON)
def test_bmv2_json_const_entries_of_each_match_kind(backend):
    doc = base()
    key = [{"match_type": "lpm", "target": ["h", "a"], "mask": None, "name": "a"},
           {"match_type": "ternary", "target": ["h", "b"], "mask": None, "name": "b"},
           {"match_type": "range", "target": ["h", "c"], "mask": None, "name": "c"}]
    entries = [
        {"match_key": [{"match_type": "lpm", "key": "0x10", "prefix_length": 4},
                       {"match_type": "ternary", "key": "0x01", "mask": "0x0f"},
                       {"match_type": "range", "start": "0x0000", "end": "0x00ff"}],
         "action_entry": {"action_id": 1, "action_data": ["0x4"]}, "priority": 2},
        {"match_key": [{"match_type": "lpm", "key": "0x00", "prefix_length": 0},
                       {"match_type": "ternary", "key": "0x00", "mask": "0x00"},
                       {"match_type": "range", "start": "0x0000", "end": "0xffff"}],
         "action_entry": {"action_id": 1, "action_data": ["0x6"]}, "priority": 9},
    ]
    doc["pipelines"][0]["tables"].append(table("t", 0, key, [1, 0], ["ingress.fwd", "NoAction"],
                                               default=(0, False, []), entries=entries,
                                               match_type="range"))
    doc["pipelines"][0]["init_table"] = "t"
    sw = load(doc, backend)
    assert sw.process(1, frame(payload=b"\x1a\x21\x00\x80"))[0][0] == 4
    assert sw.process(1, frame(payload=b"\x1a\x22\x00\x80"))[0][0] == 6     # b's low nibble
    assert sw.process(1, frame(payload=b"\x2a\x21\x00\x80"))[0][0] == 6     # a's prefix
    assert sw.process(1, frame(payload=b"\x1a\x21\x01\x00"))[0][0] == 6     # c's range


@pytest.mark.parametrize("backend", PYTHON)
def test_bmv2_json_parser_masks_value_sets_verify_and_parser_error(backend):
    doc = base()
    start = doc["parsers"][0]["parse_states"][0]
    start["transitions"] = [
        {"type": "hexstr", "value": "0x1200", "mask": "0xff00", "next_state": "parse_h"},
        {"type": "parse_vset", "value": "vs", "mask": None, "next_state": "parse_h"},
        {"type": "default", "value": None, "mask": None, "next_state": None}]
    doc["parse_vsets"] = [{"name": "vs", "id": 0, "compressed_bitwidth": 16, "max_size": 4}]
    doc["parsers"][0]["parse_states"][1]["parser_ops"].append(
        {"op": "verify", "parameters": [ex("!=", field("h", "a"), hexstr(0xee)), hexstr(6)]})
    call_in_ingress(doc, [fwd_to(1), prim("assign", field("h", "c"),
                                          field("standard_metadata", "parser_error"))])
    sw = load(doc, backend)
    assert sw.process(1, frame(0x12ab, b"\x01\x02\x00\x00")) == [(1, frame(0x12ab, b"\x01\x02\x00\x00"))]
    other = frame(0x4321, b"\x01\x02\x00\x00")
    assert sw.process(1, other) == [(1, other)]           # h not parsed: the bytes are payload
    sw.value_set_write("vs", [(0x4321, 0xffff)])
    assert sw.process(1, other) == [(1, frame(0x4321, b"\x01\x02\x00\x00"))]
    bad = frame(0x1234, b"\xee\x02\x00\x00")
    assert sw.process(1, bad) == [(1, frame(0x1234, b"\xee\x02\x00\x06"))]   # error 6 read back


@pytest.mark.parametrize("backend", PYTHON)
def test_bmv2_json_header_stack_and_add_remove(backend):
    doc = base()
    doc["headers"] += [{"name": "st[0]", "id": 4, "header_type": "h_t", "metadata": False},
                       {"name": "st[1]", "id": 5, "header_type": "h_t", "metadata": False}]
    doc["header_stacks"] = [{"name": "st", "id": 0, "header_type": "h_t", "header_ids": [4, 5]}]
    doc["deparsers"][0]["order"] = ["ethernet", "st[0]", "st[1]", "h"]
    call_in_ingress(doc, [
        fwd_to(1),
        prim("push", {"type": "header_stack", "value": "st"}, hexstr(1)),
        prim("add_header", {"type": "header", "value": "st[0]"}),
        prim("assign", ex("access_field", ex("dereference_header_stack",
                                             {"type": "header_stack", "value": "st"}, hexstr(0)), 0),
             field("h", "b")),
        prim("remove_header", {"type": "header", "value": "h"}),
    ])
    out = load(doc, backend).process(1, frame(payload=b"\x01\x02\x00\x03"))
    assert out[0][1][14:15] == b"\x02" and len(out[0][1]) == 18


@pytest.mark.parametrize("backend", PYTHON)
def test_bmv2_json_counters_registers_meters_hash(backend):
    doc = base()
    doc["counter_arrays"] = [{"name": "ingress.cnt", "id": 0, "size": 4, "is_direct": False}]
    doc["register_arrays"] = [{"name": "ingress.reg", "id": 0, "size": 4, "bitwidth": 16}]
    doc["meter_arrays"] = [{"name": "ingress.mtr", "id": 0, "type": "packets", "rate_count": 2,
                            "size": 4, "is_direct": False}]
    doc["calculations"] = [{"name": "calc", "id": 0, "algo": "identity",
                            "input": [field("h", "a")]}]
    call_in_ingress(doc, [
        fwd_to(1),
        prim("count", {"type": "counter_array", "value": "ingress.cnt"}, hexstr(2)),
        prim("register_write", {"type": "register_array", "value": "ingress.reg"}, hexstr(1),
             ex("+", field("h", "c"), hexstr(1))),
        prim("register_read", field("h", "b"), {"type": "register_array", "value": "ingress.reg"},
             hexstr(1)),
        prim("execute_meter", {"type": "meter_array", "value": "ingress.mtr"}, hexstr(0),
             field("scalars", "x")),
        prim("modify_field_with_hash_based_offset", field("h", "c"), hexstr(100),
             {"type": "calculation", "value": "calc"}, hexstr(7)),
    ])
    sw = load(doc, backend)
    out = sw.process(1, frame(payload=b"\x0a\x00\x01\x02"))
    # b = low byte of (0x0102 + 1); c = 100 + (0x0a mod 7)
    assert out == [(1, frame(payload=b"\x0a\x03" + (103).to_bytes(2, "big")))]
    assert sw.register_read("ingress.reg", 1) == 0x0103
    assert sw.counter_read("ingress.cnt", 2)[0] == 1


@pytest.mark.parametrize("backend", PYTHON)
def test_bmv2_json_checksum_digest_clone_and_exit(backend):
    doc = base()
    doc["calculations"] = [{"name": "ck", "id": 0, "algo": "csum16",
                            "input": [field("h", "a"), field("h", "b")]}]
    doc["checksums"] = [{"name": "cksum", "id": 0, "target": ["h", "c"], "type": "generic",
                         "calculation": "ck", "verify": False, "update": True,
                         "if_cond": ex("valid", None, {"type": "header", "value": "h"})}]
    doc["learn_lists"] = [{"id": 1, "name": "digest_t", "elements": [field("h", "a")]}]
    call_in_ingress(doc, [
        fwd_to(1),
        prim("generate_digest", hexstr(1), hexstr(1)),
        prim("clone_ingress_pkt_to_egress", hexstr(5), hexstr(0)),
        prim("exit"),
        fwd_to(9),
    ])
    sw = load(doc, backend)
    sw.clone_session_set(5, 4)
    out = sw.process(1, frame(payload=b"\x12\x34\x00\x00"))
    want = frame(payload=b"\x12\x34" + (0xffff - 0x1234).to_bytes(2, "big"))
    assert sorted(out) == [(1, want), (4, want)]
    assert [d[1] for d in sw.digests()] == [{"a": 0x12}]


@pytest.mark.parametrize("doc_edit, path, message", [
    (lambda d: d["pipelines"][0]["tables"].append(table(
        "t", 0, [{"match_type": "foo", "target": ["h", "a"], "mask": None}], [1], ["ingress.fwd"])),
     "pipelines[0].tables[0].key[0].match_type", "unknown 'foo'"),
    (lambda d: d["header_types"][3]["fields"].append(["d", "eight"]),
     "header_types[3].fields[3][1]", "must be an integer, not a string"),
    (lambda d: d["deparsers"][0]["order"].append("nope"),
     "deparsers[0].order[2]", "unknown header 'nope'"),
    (lambda d: d["actions"][1]["primitives"].append(prim("frobnicate")),
     "actions[1].primitives[1].op", "unknown primitive 'frobnicate'"),
    (lambda d: d["actions"][1]["primitives"].append(
        prim("assign", field("h", "zz"), hexstr(1))),
     "actions[1].primitives[1].parameters[0].value[1]", "has no field 'zz'"),
    (lambda d: d["parsers"][0]["parse_states"][0]["transitions"][0].update(value="0xg"),
     "parsers[0].parse_states[0].transitions[0].value", "must be a hexstring"),
    (lambda d: d["extern_instances"].append({"name": "x", "id": 0, "type": "Foo",
                                             "attribute_values": []}),
     "extern_instances[0].type", "p4switch runs only v1model's externs"),
    (lambda d: d["pipelines"][0].update(init_table="missing"),
     "pipelines[0].init_table", "no table, conditional or action call is named 'missing'"),
    (lambda d: d["__meta__"].update(version=[3, 0]), "__meta__.version", "major version 2"),
    # translated, then refused by p4switch's compiler: still named by its JSON path
    (lambda d: d["parsers"][0]["parse_states"][0]["parser_ops"].append(
        {"op": "primitive", "parameters": [prim("exit")]}),
     "parsers[0].parse_states[0].parser_ops[1]", "exit is not allowed in a parser"),
])
def test_bmv2_json_malformed_errors_name_the_path(doc_edit, path, message):
    doc = base()
    doc_edit(doc)
    if doc["pipelines"][0]["tables"] and doc["pipelines"][0]["init_table"] is None:
        doc["pipelines"][0]["init_table"] = "t"
    call_in_ingress(doc, [prim("assign", field("h", "a"), hexstr(0))], name="tbl_keep") \
        if not doc["pipelines"][0]["tables"] and doc["pipelines"][0]["init_table"] is None else None
    if path.startswith("actions[1]"):          # make ingress.fwd reachable
        doc["pipelines"][0]["tables"].append(table("t2", 9, [], [1], ["ingress.fwd"],
                                                   default=(1, False, ["0x1"])))
        doc["pipelines"][0]["tables"][0]["next_tables"] = {k: "t2" for k in
                                                           doc["pipelines"][0]["tables"][0]["next_tables"]}
    with pytest.raises(bmv2json.BadJson) as err:
        bmv2json.load_bytes(json.dumps(doc).encode())
    assert err.value.path == path, str(err.value)
    assert message in err.value.message


def test_bmv2_json_not_a_document():
    with pytest.raises(bmv2json.BadJson, match="not JSON"):
        bmv2json.load_bytes(b"{")
    with pytest.raises(bmv2json.BadJson, match="not a BMv2 JSON: no parsers"):
        bmv2json.load_bytes(b'{"header_types": [], "headers": [], "deparsers": [], '
                            b'"pipelines": [], "actions": []}')
    assert bmv2json.is_bmv2_json(json.dumps(base()).encode())
    assert not bmv2json.is_bmv2_json(b'{"format": "p4switch-config/2"}')


def test_bmv2_json_device_config_takes_the_clients_p4info_ids():
    """p4_device_config: a BMv2 JSON with a P4Info whose ids p4c did not derive from names
    (any ids go, as on simple_switch_grpc); names that are not the JSON's are refused."""
    from bmv2_json_docs import cpu_loop

    import p4switch
    from p4switch import device_config
    info, _ = p4switch.compile_program(str(pathlib.Path(__file__).parent
                                           / "bmv2_json_programs" / "cpu_loop.p4"))
    config = json.dumps(cpu_loop()).encode()
    renumbered = type(info)()
    renumbered.CopyFrom(info)
    old_to_new = {}
    for kind in ("tables", "actions", "controller_packet_metadata"):
        for k, o in enumerate(getattr(renumbered, kind), 1):
            old_to_new[o.preamble.id] = (o.preamble.id & 0xff000000) | k
            o.preamble.id = old_to_new[o.preamble.id]
    for t in renumbered.tables:
        for ref in t.action_refs:
            ref.id = old_to_new[ref.id]
    sw = device_config.load(renumbered, config)
    assert "I.to_cpu" in sw.tables
    renumbered.tables[0].preamble.name = "I.elsewhere"
    with pytest.raises(device_config.ConfigError, match="'I.to_cpu' .* is missing"):
        device_config.load(renumbered, config)


def _paths(o, p=()):
    yield p
    if isinstance(o, dict):
        for k, v in o.items():
            yield from _paths(v, p + (k,))
    elif isinstance(o, list):
        for i, v in enumerate(o):
            yield from _paths(v, p + (i,))


def test_bmv2_json_mutated_documents_get_badjson_only():
    """Documents with a value replaced or removed anywhere: read, or refused with BadJson (a
    client's p4_device_config is data; no other exception may escape the reader)."""
    import copy
    import random

    from bmv2_json_docs import cpu_loop

    from p4switch.bmv2json import program
    rng = random.Random(3)
    values = [None, 0, -1, 2**40, "", "0x", "0xzz", [], {}, [1], True, 1.5, "scalars",
              ["a", "b"], {"type": "field", "value": ["a"]}, {"op": "+"}]
    seeds = [cpu_loop(), base()]
    refused = 0
    for _ in range(400):
        doc = copy.deepcopy(rng.choice(seeds))
        where = rng.choice(list(_paths(doc))[1:])
        parent = doc
        for k in where[:-1]:
            parent = parent[k]
        if rng.random() < 0.75:
            parent[where[-1]] = rng.choice(values)
        else:
            del parent[where[-1]]
        try:
            program.to_p4(doc)
        except bmv2json.BadJson as exc:
            refused += 1
            assert exc.message
    assert refused > 100
