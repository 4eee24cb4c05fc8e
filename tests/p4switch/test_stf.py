"""STF tests of p4switch: one small v1model program per language or architecture feature.

Each `stf/NAME.p4` runs with `stf/NAME.stf` in-process; the runner itself is checked on a
recording stand-in switch, and the `p4switch stf` command on a passing, a failing and a
malformed file."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from p4.config.v1 import p4info_pb2

import p4switch
from p4switch.stf import StfError, StfRunner, parse_stf, run_stf

STF_DIR = Path(__file__).parent / "stf"
STF_FILES = sorted(STF_DIR.glob("*.stf"))


def test_enough_programs():
    assert len(STF_FILES) >= 60
    for stf in STF_FILES:
        assert stf.with_suffix(".p4").exists(), stf


@pytest.mark.parametrize("stf", STF_FILES, ids=[p.stem for p in STF_FILES])
def test_stf(stf):
    result = run_stf(stf.with_suffix(".p4"), stf)
    assert result.passed, result.report


def test_digest_message_content():
    sw = p4switch.load(str(STF_DIR / "digest.p4"))
    assert run_stf(None, STF_DIR / "digest.stf", sw=sw).passed
    digests = sw.digests()
    assert len(digests) == 1, digests
    name, fields = digests[0]
    assert name.endswith("learn_t")
    assert fields == {"a": 7, "d": 0x0A000001}


# --------------------------------------------------------------------------- the command


def _stf_cli(*args):
    return subprocess.run([sys.executable, "-m", "p4switch.cli", "stf", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_cli_passes():
    run = _stf_cli(STF_DIR / "lpm_basic.p4", STF_DIR / "lpm_basic.stf")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "PASS" in run.stdout


def test_cli_reports_first_differing_byte(tmp_path):
    bad = tmp_path / "bad.stf"
    # the real output is 01 00 0000 00000000 CAFE on port 2; expect byte 6 to be 0x99
    bad.write_text("add t hdr.h.a:1 fwd(port:2)\n"
                   "packet 0 01 00 0000 00000000 CAFE\n"
                   "expect 2 01 00 0000 00009900 CAFE $\n"
                   "# nothing is expected on port 3, nothing arrives: fine\n")
    run = _stf_cli(STF_DIR / "exact_basic.p4", bad)
    assert run.returncode == 1, run.stdout + run.stderr
    out = run.stdout
    assert "FAIL" in out
    assert "port 2, packet 0" in out and "first difference at byte 6" in out
    assert f"{bad}:3" in out
    lines = out.splitlines()
    exp = next(i for i, line in enumerate(lines) if line.startswith("  expected:"))
    assert lines[exp] == "  expected: 01 00 00 00 00 00 99 00 CA FE $"
    assert lines[exp + 1] == "  actual:   01 00 00 00 00 00 00 00 CA FE"
    # the caret sits under byte 6 of the actual packet
    assert lines[exp + 2].index("^^") == len("  actual:   ") + 3 * 6


def test_cli_reports_missing_and_unexpected_packets(tmp_path):
    bad = tmp_path / "bad.stf"
    bad.write_text("add t hdr.h.a:1 fwd(port:2)\n"
                   "packet 0 01 00 0000 00000000\n"
                   "expect 3 01 00 0000 00000000\n")
    run = _stf_cli(STF_DIR / "exact_basic.p4", bad)
    assert run.returncode == 1
    assert "port 2, packet 0: unexpected packet" in run.stdout
    assert "port 3, packet 0" in run.stdout and "expected packet not received" in run.stdout


def test_cli_malformed_line(tmp_path):
    bad = tmp_path / "bad.stf"
    bad.write_text("# fine\nadd t hdr.h.a:1 fwd(port:2)\npacket 0 01 0Z\n")
    run = _stf_cli(STF_DIR / "exact_basic.p4", bad)
    assert run.returncode == 2
    assert f"{bad}:3: invalid character 'Z' in packet data" in run.stderr
    assert "Traceback" not in run.stderr


def test_cli_unknown_table(tmp_path):
    bad = tmp_path / "bad.stf"
    bad.write_text("\nadd nosuch hdr.h.a:1 fwd(port:2)\n")
    run = _stf_cli(STF_DIR / "exact_basic.p4", bad)
    assert run.returncode == 2
    assert f"{bad}:2: no table named 'nosuch'" in run.stderr


@pytest.mark.parametrize("line, message", [
    ("add t hdr.h.a:3 drop_()", "is @defaultonly"),
    ("setdefault t tag(v:1)", "is @tableonly"),
    ("add t hdr.h.a:3 fwd(port:1, extra:2)", "has no parameter 'extra'"),
])
def test_cli_rejected_request(tmp_path, line, message):
    bad = tmp_path / "bad.stf"
    bad.write_text("add t hdr.h.a:1 fwd(port:2)\n" + line + "\n")
    run = _stf_cli(STF_DIR / "defaultonly_tableonly.p4", bad)
    assert run.returncode == 2
    assert f"{bad}:2:" in run.stderr and message in run.stderr, run.stderr


def test_cli_bad_program():
    program = Path(__file__).parent / "errors" / "unknown_name.p4"
    run = _stf_cli(program, STF_DIR / "exact_basic.stf")
    assert run.returncode == 2
    assert f"{program}:32:19:" in run.stderr
    assert "Traceback" not in run.stderr


# --------------------------------------------------------------------------- runner units


def _info() -> p4info_pb2.P4Info:
    info = p4info_pb2.P4Info()
    fwd = info.actions.add()
    fwd.preamble.id, fwd.preamble.name, fwd.preamble.alias = 0x01000001, "I.fwd", "fwd"
    param = fwd.params.add()
    param.id, param.name, param.bitwidth = 1, "port", 9
    table = info.tables.add()
    table.preamble.id, table.preamble.name, table.preamble.alias = 0x02000001, "I.t", "t"
    kinds = [("hdr.h.e", 8, "EXACT"), ("hdr.h.l", 32, "LPM"), ("hdr.h.t", 16, "TERNARY"),
             ("hdr.h.r", 16, "RANGE"), ("hdr.h.o", 8, "OPTIONAL")]
    for i, (name, width, kind) in enumerate(kinds, start=1):
        mf = table.match_fields.add()
        mf.id, mf.name, mf.bitwidth = i, name, width
        mf.match_type = p4info_pb2.MatchField.MatchType.Value(kind)
    table.action_refs.add().id = fwd.preamble.id
    counter = info.counters.add()
    counter.preamble.id, counter.preamble.name = 0x12000001, "I.c"
    return info


class RecordingSwitch:
    """Stands in for p4switch.Switch: records requests, replays canned outputs."""

    def __init__(self, outputs=()):
        self.p4info = _info()
        self.calls = []
        self.outputs = list(outputs)

    def __getattr__(self, name):
        def record(*args, **kwargs):
            self.calls.append((name, args, kwargs))
            return 7
        return record

    def process(self, port, data):
        self.calls.append(("process", (port, data), {}))
        return self.outputs.pop(0) if self.outputs else []

    def counter_read(self, name, index):
        return (3, 300)


def _run(text, sw=None):
    sw = sw or RecordingSwitch()
    result = StfRunner(sw, "x.stf").run(parse_stf(text, "x.stf"))
    return sw, result


def test_key_forms_become_api_values():
    sw, result = _run("add t 5 e:0x0a l:0x0a0001** t:0x0a** r:1->5 o:* fwd(port:3)\n"
                      "add t 6 hdr.h.e:10 hdr.h.l:0x0a000000/8 hdr.h.t:0x0a00&&&0xf0f0 "
                      "hdr.h.r:7 hdr.h.o:4 I.fwd(port:0x1ff) = X\n")
    assert result.passed
    first, second = (c for c in sw.calls if c[0] == "table_add")
    assert first[1] == ("I.t", {"hdr.h.e": 10, "hdr.h.l": (0x0A000100, 24),
                                "hdr.h.t": (0x0A00, 0xFF00), "hdr.h.r": (1, 5),
                                "hdr.h.o": None}, "I.fwd", {"port": 3})
    assert first[2] == {"priority": 5}
    assert second[1][1] == {"hdr.h.e": 10, "hdr.h.l": (0x0A000000, 8),
                            "hdr.h.t": (0x0A00, 0xF0F0), "hdr.h.r": (7, 7), "hdr.h.o": 4}
    assert second[1][3] == {"port": 0x1FF}


def test_multicast_nodes_are_replayed_as_groups():
    sw, _ = _run("mc_mgrp_create 3\nmc_node_create 10 4 2\nmc_node_create 11 5\n"
                 "mc_node_associate 3 1\nmc_node_associate 3 0\nmirroring_add 9 6\n")
    assert ("mc_group_create", (3, []), {}) in sw.calls
    assert sw.calls[-2] == ("mc_group_modify", (3, [(5, 11), (2, 10), (4, 10)]), {})
    assert sw.calls[-1] == ("clone_session_set", (9, 6), {})


def test_expect_dont_care_prefix_and_exact_length():
    outs = [[(1, bytes.fromhex("0102030405"))], [(1, bytes.fromhex("0102030405"))]]
    _, ok = _run("packet 0 00\nexpect 1 01**03\npacket 0 00\nexpect 1 0102030405$\n",
                 RecordingSwitch(outs))
    assert ok.passed, ok.report
    _, bad = _run("packet 0 00\nexpect 1 0102$\n", RecordingSwitch([[(1, b"\x01\x02\x03")]]))
    assert not bad.passed and "first difference at byte 2" in bad.report
    _, short = _run("packet 0 00\nexpect 1 010203\n", RecordingSwitch([[(1, b"\x01")]]))
    assert not short.passed and "first difference at byte 1" in short.report
    _, first = _run("packet 0 00\nexpect 1 FF0203\n", RecordingSwitch([[(1, b"\x01\x02\x03")]]))
    assert not first.passed and "first difference at byte 0" in first.report


def test_expect_without_data_accepts_any_number_of_packets():
    outs = [[(4, b"\x01"), (4, b"\x02")]]
    _, result = _run("packet 0 00\nexpect 4\n", RecordingSwitch(outs))
    assert result.passed


def test_check_counter_conditions():
    _, ok = _run("check_counter c(1) packets == 3\ncheck_counter I.c(2) bytes >= 300\n")
    assert ok.passed
    _, bad = _run("check_counter c(1) bytes < 300\n")
    assert not bad.passed and "x.stf:1: counter I.c(1) bytes is 300" in bad.report


@pytest.mark.parametrize("text, message", [
    ("frobnicate 1\n", "x.stf:1: unknown STF command 'frobnicate'"),
    ("\n\npacket 0 123\n", "x.stf:3: packet data has an odd number of hex digits"),
    ("add t e:0x100 fwd(port:1)\n", "does not fit key 'hdr.h.e' (bit<8>)"),
    ("add t e:1 fwd(port:512)\n", "does not fit parameter 'port' (bit<9>)"),
    ("add t e:1 fwd()\n", "missing parameter(s) port"),
    ("add t e:1 fwd(prt:1)\n", "has no parameter 'prt'"),
    ("add t zz:1 fwd(port:1)\n", "has no key field 'zz'"),
    ("add t l:0x0a**01 fwd(port:1)\n", "don't-care digits before"),
    ("add t l:1/33 fwd(port:1)\n", "prefix length 33 exceeds key width 32"),
    ("add t e:1 nope(port:1)\n", "no action of table 'I.t' named 'nope'"),
    ("mc_node_associate 1 0\n", "no multicast group 1"),
    ("check_counter c(1) packets = 3\n", "bad counter condition"),
    ("check_counter d($E)\n", "no direct counter named 'd'"),
])
def test_malformed_lines(text, message):
    with pytest.raises(StfError) as err:
        _run(text)
    assert message in str(err.value)


# --------------------------------------------------------------------------- the p4c dialect


def _run_p4c(text):
    sw = RecordingSwitch()
    return sw, StfRunner(sw, "x.stf", "p4c").run(parse_stf(text, "x.stf", "p4c"))


@pytest.mark.parametrize("text, message", [
    ("check_counter I.c(1) packets == 3\n",
     "x.stf:1: check_counter 'I.c': p4c's STF grammar takes a bare identifier, write 'c'"),
    ("add_member p 1 fwd(port:1)\n", "x.stf:1: 'add_member' is a p4switch extension"),
    ("add t 1 t:0x0a00&&&0xf0f0 fwd(port:1)\n", "ternary key 'hdr.h.t:0x0a00&&&0xf0f0': p4c's "
                                                "STF lexer has no '&'"),
    ("add t l:0x0a000000/8 fwd(port:1)\n", "lpm key 'hdr.h.l:0x0a000000/8': p4c's BMv2 STF "
                                           "driver mis-reads VALUE/LEN"),
    ("add t 1 t:10 fwd(port:1)\n", "ternary key 'hdr.h.t:10': p4c's BMv2 STF driver needs a hex"),
    ("add t l:167772160 fwd(port:1)\n", "lpm key 'hdr.h.l:167772160'"),
    ("add t 1 r:1->5 fwd(port:1)\n", "key 'hdr.h.r' is range: p4c's BMv2 STF driver handles only"),
    ("add t 1 o:* fwd(port:1)\n", "key 'hdr.h.o' is optional"),
])
def test_p4c_dialect_refuses_what_p4c_cannot_run(text, message):
    with pytest.raises(StfError) as err:
        _run_p4c(text)
    assert message in str(err.value)


def test_p4c_dialect_accepts_portable_lines():
    sw, result = _run_p4c("add t 5 e:10 l:0x0a0001** t:0x0a** fwd(port:3) = A\n"
                          "add t 6 e:0x0b l:0b1010**** t:0b0000000000001*** fwd(port:4)\n"
                          "check_counter c(1) packets == 3\n")
    assert result.passed
    adds = [c for c in sw.calls if c[0] == "table_add"]
    assert adds[0][1][1]["hdr.h.l"] == (0x0a000100, 24)
    assert adds[0][1][1]["hdr.h.t"] == (0x0a00, 0xff00)
    assert adds[1][1][1]["hdr.h.t"] == (0x0008, 0xfff8)


def test_p4c_dialect_lines_are_fine_in_the_default_dialect():
    _, result = _run("add t 1 t:0x0a00&&&0xf0f0 fwd(port:1)\nadd t 1 r:1->5 fwd(port:1)\n"
                     "check_counter I.c(1) packets == 3\n")
    assert result.passed


def test_cli_dialect_option(tmp_path):
    bad = tmp_path / "bad.stf"
    bad.write_text("add t hdr.h.d:0x0a000000/8 fwd(port:1)\n")
    run = _stf_cli("--dialect", "p4c", STF_DIR / "lpm_basic.p4", bad)
    assert run.returncode == 2 and f"{bad}:1: lpm key 'hdr.h.d:0x0a000000/8'" in run.stderr
    run = _stf_cli(STF_DIR / "lpm_basic.p4", bad)
    assert run.returncode == 0, run.stdout + run.stderr


def test_p4c_dialect_observes_only_the_ports_the_file_names():
    text = "packet 0 00\nexpect 4\n"
    _, strict = _run(text, RecordingSwitch([[(4, b"\x00"), (5, b"\x00")]]))
    assert not strict.passed and "port 5, packet 0: unexpected packet" in strict.report
    sw = RecordingSwitch([[(4, b"\x00"), (5, b"\x00")]])
    result = StfRunner(sw, "x.stf", "p4c").run(parse_stf(text, "x.stf", "p4c"))
    assert result.passed    # p4c's driver gives the switch no port 5 to send on


def test_p4c_dialect_packets_meet_the_final_tables(tmp_path):
    """p4c's driver sends all table writes before BMv2 reads the packets: a later write
    changes an earlier packet's fate there, and so in the p4c dialect."""
    stf = tmp_path / "late.stf"
    stf.write_text("add t hdr.h.a:1 fwd(port:2)\npacket 0 01 00 0000 00000000\n"
                   "expect 2 01 00 0000 00000000\nsetdefault t fwd(port:3)\n")
    assert run_stf(STF_DIR / "exact_basic.p4", stf).passed
    stf.write_text("packet 0 01 00 0000 00000000\nexpect 2 01 00 0000 00000000\n"
                   "add t hdr.h.a:1 fwd(port:2)\n")
    assert not run_stf(STF_DIR / "exact_basic.p4", stf).passed      # dropped: no entry yet
    assert run_stf(STF_DIR / "exact_basic.p4", stf, dialect="p4c").passed
