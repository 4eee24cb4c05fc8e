"""Frontend: preprocessing, parsing and checking errors with exact positions, and the
`p4switch compile` command's outputs."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from test_core_helpers import program

import p4switch

L3 = Path(__file__).parent / "core_programs" / "l3_three_tables.p4"

BAD = [
    # (ingress body, control locals, the token the error must point at, message part)
    ("hdr.h.r8 = hdr.h.r16;", "", "hdr.h.r16", "bit<16>"),
    ("hdr.h.r8 = nothing_here;", "", "nothing_here", "unknown name 'nothing_here'"),
    ("hdr.h.zz = 1;", "", "zz", "no field 'zz'"),
    ("if (hdr.h.a) { }", "", "hdr.h.a", "bool"),
    ("hdr.h.s = hdr.h.s + hdr.h.a;", "", "hdr.h.a", "int<8>"),
    ("hdr.h.r8 = hdr.h.a + hdr.h.r16;", "", "hdr.h.r16", "bit<16>"),
    ("hdr.h.r8 = hdr.h.r32[40:1];", "", "40", "out of range"),
    ("t.apply();", "table t { key = { hdr.h.a: fuzzy; } actions = { NoAction; } }", "fuzzy",
     "unknown match kind"),
    ("a(1, 2);", "action a(bit<8> v) { hdr.h.a = v; }", "a(1, 2)", "argument"),
    ("hdr.h.r8 = 1 hdr.h.a;", "", "hdr.h.a;", "syntax error"),
    ("t.apply();", "table t { key = { hdr.h.a: exact; } actions = { NoAction; } default_action = gone(); }",
     "gone", "unknown action 'gone'"),
    ("t.apply();", "action a() { } table t { key = { hdr.h.a: exact; } actions = { NoAction; } "
     "default_action = a(); }", "a();", "not in the table's actions"),
    ("t.apply();", "table t { key = { hdr.h.a: exact; } actions = { NoAction; } colour = 1; }",
     "colour", "unknown table property"),
    ("t.apply();", "table t { key = { (bit<8>)hdr.h.s: exact; } actions = { NoAction; } }",
     "(bit<8>)hdr.h.s", "@name"),
    ("r.write(0);", "register<bit<8>>(4) r;", "r.write(0)", "argument"),
    ("r.frob(0);", "register<bit<8>>(4) r;", "frob", "no method 'frob'"),
    ("hash(hdr.h.r8, HashAlgorithm.sha256, 8w0, { hdr.h.a }, 8w4);", "", "sha256", "no member 'sha256'"),
    ("bit<8> x = 1; bit<8> x = 2;", "", "x = 2", "already declared"),
    ("hdr.h.r8 = hdr.h.a[3:0];", "", "hdr.h.a[3:0]", "bit<4>"),
    ("mark_to_drop();", "", "mark_to_drop()", "argument"),
]


@pytest.mark.parametrize("body,locals_,token,message", BAD, ids=[b for b, _, _, _ in BAD])
def test_errors_point_at_the_offending_token(tmp_path, body, locals_, token, message):
    path = program(tmp_path, body, locals_)
    with pytest.raises(p4switch.P4CompileError) as info:
        p4switch.load(str(path))
    err = info.value
    lines = path.read_text().splitlines()
    line = next(i for i, t in enumerate(lines, 1) if token in t and (body in t or locals_ in t))
    col = lines[line - 1].rindex(token) + 1 if token == "hdr.h.a" else lines[line - 1].index(token) + 1
    assert err.file == str(path)
    assert (err.line, err.col) == (line, col), str(err)
    assert message in err.message
    text = str(err).splitlines()
    assert text[0].startswith(f"{path}:{line}:{col}: error: ")
    assert text[1] == lines[line - 1]
    assert text[2] == " " * (col - 1) + "^"


def test_line_markers_map_errors_into_included_files(tmp_path):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "bad.p4").write_text("\n\nconst bit<8> K = unknown_k;\n")
    main = tmp_path / "main.p4"
    main.write_text('#include <core.p4>\n#include "bad.p4"\n')
    with pytest.raises(p4switch.P4CompileError) as info:
        p4switch.load(str(main), include_dirs=(str(inc),))
    assert info.value.file.endswith("bad.p4")
    assert (info.value.line, info.value.col) == (3, 18)


def test_defines_reach_the_preprocessor(tmp_path):
    path = program(tmp_path, "hdr.h.r8 = VALUE;")
    sw = p4switch.load(str(path), defines={"VALUE": "8w42"})
    out = sw.process(0, bytes(12))
    assert out[0][1][2] == 42


def test_varbit_header_needs_two_argument_extract(tmp_path):
    path = tmp_path / "varbit.p4"
    path.write_text(program(tmp_path, "").read_text().replace("int<8>  t;", "varbit<32> t;"))
    with pytest.raises(p4switch.P4CompileError, match="varbit"):
        p4switch.load(str(path))


def test_compile_command_writes_p4info_and_config(tmp_path):
    info_path, cfg_path = tmp_path / "out.p4info.txtpb", tmp_path / "out.json"
    run = subprocess.run([sys.executable, "-m", "p4switch.cli", "compile", str(L3),
                          "--p4info", str(info_path), "--config", str(cfg_path)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    info = text_format.Parse(info_path.read_text(), p4info_pb2.P4Info())
    assert {t.preamble.name for t in info.tables} == {"MyIngress.ipv4_lpm", "MyIngress.acl",
                                                       "MyEgress.send_frame"}
    config = json.loads(cfg_path.read_bytes())
    assert config["format"] == "p4switch-config/2" and "header ipv4_t" in config["source"]
    # the config alone is enough to run the program
    sw = p4switch.load_config(info, cfg_path.read_bytes())
    assert sw.table_entries("ipv4_lpm") == []


def test_compile_command_fails_without_traceback(tmp_path):
    path = program(tmp_path, "hdr.h.r8 = ;")
    run = subprocess.run([sys.executable, "-m", "p4switch.cli", "compile", str(path),
                          "--p4info", str(tmp_path / "x.txtpb")], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode != 0
    assert "syntax error" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "x.txtpb").exists()


def test_names_that_are_python_keywords():
    sw = p4switch.load(str(Path(__file__).parent / "core_programs" / "python_keywords.p4"))
    assert sw.process(0, bytes([5, 0, 0, 9])) == [(1, bytes([5, 6, 7, 9]))]


def test_varbit_ipv4_options_round_trip():
    sw = p4switch.load(str(Path(__file__).parent / "core_programs" / "varbit_options.p4"))
    base = bytes.fromhex("45000014000000004011000001020304")[:12] + bytes(8)
    ((port, out),) = sw.process(0, base + b"payload")
    assert port == 1 and out[8] == 0x3F and out[20:] == b"payload"
    with_opts = bytearray(base)
    with_opts[0] = 0x47                                  # ihl 7: 8 bytes of options
    data = bytes(with_opts) + bytes(range(1, 9)) + b"payload"
    ((port, out),) = sw.process(0, data)
    assert port == 2 and out[20:28] == bytes(range(1, 9)) and out[28:] == b"payload"
    assert out[1] == 0                                   # minSizeInBytes of a varbit-only header
    # options longer than the packet: PacketTooShort, the options header stays invalid
    ((port, out),) = sw.process(0, bytes(with_opts) + b"abc")
    assert port == 1 and out[20:] == b"abc"


def test_sub_parser_and_sub_control_instances():
    sw = p4switch.load(str(Path(__file__).parent / "core_programs" / "subparser_subcontrol.p4"))
    assert "I.marker.marks" in {t.preamble.name for t in sw.p4info.tables}
    sw.table_add("I.marker.marks", {"hdr.a.kind": 1}, "I.marker.bump", {"v": 10})
    assert sw.process(0, bytes([1, 5, 0xAB, 0xCD])) == [(1, bytes([1, 16, 0xAB, 0xCD]))]
    assert sw.process(0, bytes([2, 5, 0xAB, 0xCD])) == [(0, bytes([2, 5, 0xAB, 0xCD]))]


def test_constructor_parameters_and_atomic_blocks():
    sw = p4switch.load(str(Path(__file__).parent / "core_programs" / "ctor_params_atomic.p4"))
    assert sw.process(0, bytes([1, 0])) == [(1, bytes([12, 0x77]))]
    sw.process(0, bytes([2, 0]))
    assert sw.register_read("total", 0) == 12 + 13


def test_type_parameters_of_v1model_do_not_capture_user_names(tmp_path):
    # v1model declares hash<O, T, D, M>: those names stay usable as variables
    sw = p4switch.load(str(program(tmp_path, "hdr.h.r8 = T + M + O;",
                                   "bit<8> T = 3; bit<8> M = 4; bit<8> O = 5;")))
    assert sw.process(0, bytes(12))[0][1][2] == 12


def test_named_arguments(tmp_path):
    locals_ = ("action put(bit<8> first, bit<8> second) { hdr.h.r8 = first - second; }\n"
               "    register<bit<8>>(2) r;")
    body = "put(second = 1, first = 10); r.write(value = hdr.h.r8, index = 1);"
    sw = p4switch.load(str(program(tmp_path, body, locals_)))
    assert sw.process(0, bytes(12))[0][1][2] == 9
    assert sw.register_read("r", 1) == 9
    bad = program(tmp_path, "put(first = 1, third = 2);", locals_, name="bad.p4")
    with pytest.raises(p4switch.P4CompileError, match="no parameter named 'third'"):
        p4switch.load(str(bad))


def test_default_parameter_values(tmp_path):
    locals_ = "action put(bit<8> first, bit<8> second = 2) { hdr.h.r8 = first - second; }"
    sw = p4switch.load(str(program(tmp_path, "put(10);", locals_)))
    assert sw.process(0, bytes(12))[0][1][2] == 8
    sw = p4switch.load(str(program(tmp_path, "put(first = 10);", locals_, name="named.p4")))
    assert sw.process(0, bytes(12))[0][1][2] == 8


def test_generic_function():
    sw = p4switch.load(str(Path(__file__).parent / "core_programs" / "generic_function.p4"))
    assert sw.process(0, bytes([9, 0])) == [(1, bytes([9, 9]))]
    assert sw.process(0, bytes([2, 0])) == [(1, bytes([2, 1]))]
