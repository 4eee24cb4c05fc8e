"""P4Info of a multi-table program: names, aliases, id prefixes and values, match fields,
action references, externs, as p4c's --p4runtime-files would write them."""
from __future__ import annotations

from pathlib import Path

from p4.config.v1 import p4info_pb2

import p4switch
from p4switch.p4info import jenkins

L3 = Path(__file__).parent / "core_programs" / "l3_three_tables.p4"
STF = Path(__file__).parent / "stf"


def _info():
    info, _ = p4switch.compile_program(str(L3))
    assert isinstance(info, p4info_pb2.P4Info)
    return info


def test_ids_are_prefixed_hashes_of_the_names():
    info = _info()
    # NoAction's id in p4c output is 21257015
    ids = {a.preamble.name: a.preamble.id for a in info.actions}
    # values p4c printed for these names (NoAction; p4lang tutorials' MyIngress actions)
    assert ids["NoAction"] == 21257015
    assert ids["MyIngress.drop"] == 25652968
    assert ids["MyIngress.forward"] == 29683729
    assert {t.preamble.name: t.preamble.id for t in info.tables}["MyIngress.ipv4_lpm"] == 37375156
    for prefix, objects in ((0x01, info.actions), (0x02, info.tables), (0x12, info.counters),
                            (0x16, info.registers)):
        for obj in objects:
            assert obj.preamble.id >> 24 == prefix
            assert obj.preamble.id & 0xFFFFFF == jenkins(obj.preamble.name) & 0xFFFFFF


def test_tables_and_match_fields():
    info = _info()
    tables = {t.preamble.name: t for t in info.tables}
    assert set(tables) == {"MyIngress.ipv4_lpm", "MyIngress.acl", "MyEgress.send_frame"}
    lpm = tables["MyIngress.ipv4_lpm"]
    assert lpm.preamble.alias == "ipv4_lpm"
    assert [(m.id, m.name, m.bitwidth, m.match_type) for m in lpm.match_fields] == [
        (1, "hdr.ipv4.dstAddr", 32, p4info_pb2.MatchField.LPM)]
    assert lpm.size == 4096
    acl = tables["MyIngress.acl"]
    assert [(m.name, m.bitwidth, m.match_type) for m in acl.match_fields] == [
        ("hdr.ipv4.srcAddr", 32, p4info_pb2.MatchField.TERNARY),
        ("hdr.ipv4.protocol", 8, p4info_pb2.MatchField.TERNARY),
        ("meta.l4_dport", 16, p4info_pb2.MatchField.RANGE),
        ("hdr.udp.$valid$", 1, p4info_pb2.MatchField.EXACT)]
    assert acl.size == 1024
    egress = tables["MyEgress.send_frame"]
    assert [m.name for m in egress.match_fields] == ["sm.egress_port"]
    actions = {a.preamble.id: a.preamble.name for a in info.actions}
    assert [actions[r.id] for r in lpm.action_refs] == ["MyIngress.forward", "MyIngress.set_mcast",
                                                         "MyIngress.drop"]


def test_actions_params_and_externs():
    info = _info()
    actions = {a.preamble.name: a for a in info.actions}
    fwd = actions["MyIngress.forward"]
    assert [(p.id, p.name, p.bitwidth) for p in fwd.params] == [(1, "dmac", 48), (2, "port", 9)]
    assert actions["MyEgress.rewrite_smac"].preamble.alias == "rewrite_smac"
    assert actions["NoAction"].preamble.annotations == ['@noWarn("unused")']
    (counter,) = info.counters
    assert (counter.preamble.name, counter.size, counter.spec.unit) == (
        "MyIngress.port_packets", 512, p4info_pb2.CounterSpec.BOTH)
    (register,) = info.registers
    assert register.preamble.name == "MyIngress.last_dst"
    assert register.size == 16 and register.type_spec.bitstring.bit.bitwidth == 32
    assert info.pkg_info.arch == "v1model"


def test_name_annotations_and_controller_headers(tmp_path):
    src = L3.read_text()
    src = src.replace("    table acl {", '    @name("access_list") table acl {')
    src = src.replace("header udp_t {", '@controller_header("packet_in")\nheader cpu_t {\n'
                      '    bit<9> ingress_port;\n    bit<7> _pad;\n}\nheader udp_t {')
    path = tmp_path / "named.p4"
    path.write_text(src)
    info, _ = p4switch.compile_program(str(path))
    names = {t.preamble.name for t in info.tables}
    assert "MyIngress.access_list" in names
    (cpm,) = info.controller_packet_metadata
    assert cpm.preamble.name == "packet_in" and cpm.preamble.id >> 24 == 0x04
    assert [(m.id, m.name, m.bitwidth) for m in cpm.metadata] == [(1, "ingress_port", 9), (2, "_pad", 7)]


def test_tables_never_applied_are_left_out_like_p4c(tmp_path):
    src = L3.read_text().replace("            acl.apply();\n", "")
    path = tmp_path / "no_acl.p4"
    path.write_text(src)
    info, _ = p4switch.compile_program(str(path))
    assert {t.preamble.name for t in info.tables} == {"MyIngress.ipv4_lpm", "MyEgress.send_frame"}
    names = {a.preamble.name for a in info.actions}
    assert "MyIngress.permit" not in names and "MyIngress.deny" not in names
    assert "MyIngress.drop" in names


def test_new_types_name_params_and_match_fields(tmp_path):
    src = L3.read_text().replace("typedef bit<9> port_t;", '@p4runtime_translation("p4.org/port", 32)\n'
                                 'type bit<9> port_t;\ntype bit<48> mac_t;')
    src = src.replace("action forward(bit<48> dmac, port_t port)", "action forward(mac_t dmac, port_t port)")
    src = src.replace("hdr.ethernet.dstAddr = dmac;", "hdr.ethernet.dstAddr = (bit<48>)dmac;")
    src = src.replace("sm.egress_spec = port;", "sm.egress_spec = (bit<9>)port;")
    path = tmp_path / "types.p4"
    path.write_text(src)
    info, _ = p4switch.compile_program(str(path))
    fwd = [a for a in info.actions if a.preamble.name == "MyIngress.forward"][0]
    assert [(p.name, p.type_name.name) for p in fwd.params] == [("dmac", "mac_t"), ("port", "port_t")]
    port = info.type_info.new_types["port_t"]
    assert port.translated_type.uri == "p4.org/port" and port.translated_type.sdn_bitwidth == 32
    assert info.type_info.new_types["mac_t"].original_type.bitstring.bit.bitwidth == 48


def test_externs_declared_in_table_properties_take_the_table_name():
    program = Path(__file__).parent / "core_programs" / "inline_externs.p4"
    info, config = p4switch.compile_program(str(program))
    (table,) = info.tables
    (profile,) = info.action_profiles
    (counter,) = info.direct_counters
    assert profile.preamble.name == counter.preamble.name == table.preamble.name == "I.ecmp"
    assert profile.with_selector and list(profile.table_ids) == [table.preamble.id]
    assert table.implementation_id == profile.preamble.id
    assert list(table.direct_resource_ids) == [counter.preamble.id]
    assert counter.direct_table_id == table.preamble.id
    sw = p4switch.load_config(info, config)
    sw.act_prof_add_member("I.ecmp", 1, "fwd", {"port": 3})
    h = sw.table_add_member("I.ecmp", {"hdr.h.a": 1}, 1)
    assert sw.process(0, bytes([1, 0, 0, 0, 0, 9]))[0][0] == 3
    assert sw.direct_counter_read("I.ecmp", h) == (1, 6)


def test_p4c_conventions_implicit_noaction_type_info_and_action_order(tmp_path):
    """As p4c writes P4Info: a table without default_action lists NoAction @defaultonly
    (DEFAULT_ONLY); type_info is always present; actions come control by control, the global
    actions a control uses before its own; tables and actions only used in a branch a constant
    condition never takes, or actions only called from other actions, are left out."""
    src = (STF / "exact_basic.p4").read_text()
    src = src.replace("        default_action = drop_();\n", "")
    src = src.replace("    apply {\n        t.apply();\n    }",
                      "    action inner() { sm.egress_spec = 1; }\n"
                      "    action outer() { inner(); }\n"
                      "    table dead { key = { hdr.h.b: exact; } actions = { fwd; } }\n"
                      "    apply {\n        t.apply();\n        outer();\n"
                      "        if (false) { dead.apply(); }\n    }")
    path = tmp_path / "conv.p4"
    path.write_text(src)
    info, _ = p4switch.compile_program(str(path))
    assert [t.preamble.name for t in info.tables] == ["IngressImpl.t"]
    names = {a.preamble.id: a.preamble.name for a in info.actions}
    refs = [(names[r.id], list(r.annotations), r.scope) for r in info.tables[0].action_refs]
    assert refs == [("IngressImpl.fwd", [], p4info_pb2.ActionRef.TABLE_AND_DEFAULT),
                    ("IngressImpl.drop_", [], p4info_pb2.ActionRef.TABLE_AND_DEFAULT),
                    ("NoAction", ["@defaultonly"], p4info_pb2.ActionRef.DEFAULT_ONLY)]
    assert [a.preamble.name for a in info.actions] == [
        "NoAction", "IngressImpl.fwd", "IngressImpl.drop_", "IngressImpl.outer"]
    assert info.HasField("type_info")
