"""`p4switch compile --bmv2-json`: programs of the project written as BMv2 JSON, read back by
the reader, pass their STF tests as the source does (both backends); what the writer does not
write is refused by name and nothing is written."""
from __future__ import annotations

import json
import pathlib
import shutil

import pytest
from click.testing import CliRunner

from p4switch import _switch, bmv2json, frontend, p4info, parse, stf
from p4switch.compile import compile_command

STF = pathlib.Path(__file__).parent / "stf"
FABRIC = pathlib.Path(__file__).parents[2] / "p4src" / "fabric.p4"
# one program per construct the writer writes (tests/p4switch/stf has the rest)
PROGRAMS = ["action_directional", "action_run", "checksum_ipv4_verify", "clone_preserving_field_list", "digest",
            "direct_counter", "error_verify", "hash_crc16", "hit_miss", "register_rw",
            "random_fixed_range", "select_tuple", "ternary_priority", "truncate"]


def written(tmp_path, name) -> bytes:
    out = tmp_path / f"{name}.json"
    result = CliRunner().invoke(compile_command, [str(STF / f"{name}.p4"), "--bmv2-json", str(out)])
    assert result.exit_code == 0, result.output
    return out.read_bytes()


@pytest.mark.parametrize("name", PROGRAMS)
def test_bmv2_json_written_by_compile_passes_the_stf(tmp_path, name):
    data = written(tmp_path, name)
    assert bmv2json.is_bmv2_json(data)
    prog = frontend.compile_file(str(STF / f"{name}.p4"))
    info = p4info.build(prog)
    sw = _switch("python")(bmv2json.load_bytes(data, info), info)
    result = stf.run_stf(STF / f"{name}.p4", STF / f"{name}.stf", sw=sw)
    assert result.passed, result.report


@pytest.mark.skipif(not shutil.which("cc"), reason="the native backend needs a C compiler (cc)")
@pytest.mark.parametrize("name", ["l3_forward"])
def test_bmv2_json_written_runs_on_the_native_backend(tmp_path, name):
    data = written(tmp_path, name)
    prog = frontend.compile_file(str(STF / f"{name}.p4"))
    info = p4info.build(prog)
    sw = _switch("native")(bmv2json.load_bytes(data, info), info)
    assert stf.run_stf(STF / f"{name}.p4", STF / f"{name}.stf", sw=sw).passed


def test_bmv2_json_written_looks_like_p4c_bm2_ss_output(tmp_path):
    doc = json.loads(written(tmp_path, "l3_forward"))
    assert doc["__meta__"]["version"][0] == 2
    assert [p["name"] for p in doc["pipelines"]] == ["ingress", "egress"]
    assert doc["headers"][:2] == [
        {"name": "scalars", "id": 0, "header_type": "scalars_0", "metadata": True},
        {"name": "standard_metadata", "id": 1, "header_type": "standard_metadata", "metadata": True}]
    assert doc["checksums"] and doc["checksums"][0]["update"]
    tables = {t["name"]: t for t in doc["pipelines"][0]["tables"]}
    assert any(t["key"] and t["key"][0]["match_type"] == "lpm" for t in tables.values())


def test_bmv2_json_writer_refuses_by_name_and_writes_nothing(tmp_path):
    out, info = tmp_path / "u.json", tmp_path / "u.p4info.txtpb"
    result = CliRunner().invoke(compile_command, [str(STF / "header_union.p4"), "--bmv2-json",
                                                  str(out), "--p4info", str(info)])
    assert result.exit_code == 1
    assert "cannot write BMv2 JSON: headers member u of kind UnionT" in result.output
    assert not out.exists() and not info.exists()


def test_bmv2_json_writer_on_fabric_names_what_it_lacks():
    from p4switch.bmv2json.write import CannotWrite, write
    with pytest.raises(CannotWrite, match="control FabricIngress: expression Subscript"):
        write(parse.preprocess(str(FABRIC)))
