"""A device config is data: SetForwardingPipelineConfig requests that carry code (Python in
the retired p4switch-config/1 `program.source`, and in every field of p4switch-config/2) are
refused with INVALID_ARGUMENT naming the field, on both backends and with VERIFY,
VERIFY_AND_COMMIT and VERIFY_AND_SAVE + COMMIT, and the marker file the code would write never
appears. A P4Info that contradicts itself or the device config is refused the same way."""
import json
import pathlib

import grpc
import pytest
from google.rpc import code_pb2
from p4.config.v1 import p4info_pb2
from test_runtime_errors import DEVICE, SPA, Client

import p4switch
from p4switch import device_config, native
from p4switch.device.process import SwitchProcess

PROGRAMS = pathlib.Path(__file__).parent / "device_programs"
Code = grpc.StatusCode
ACTIONS = {"VERIFY": [SPA.VERIFY], "VERIFY_AND_COMMIT": [SPA.VERIFY_AND_COMMIT],
           "COMMIT": [SPA.VERIFY_AND_SAVE, SPA.COMMIT]}


def payload(marker: pathlib.Path) -> str:
    """Python that writes `marker`: a class body (what the native backend's check of the old
    format let through) and a plain statement (what the Python backend ran)."""
    code = f"open({str(marker)!r}, 'w').write('code ran')"
    return f"class HDR:\n    {code}\n{code}\n"


def attacks(marker: pathlib.Path, good: bytes) -> dict[str, bytes]:
    code = payload(marker)
    ok = json.loads(good)
    configs = {"v1 program.source": {"format": "p4switch-config/1",
                                     "program": {"source": code, "tables": {}, "actions": {}}},
               "v2 source": {**ok, "source": code},
               "v2 architecture": {**ok, "architecture": code},
               "v2 format": {**ok, "format": code},
               "v2 extra field": {**ok, "program": {"source": code}},
               "v2 include": {**ok, "source": f'#include "{marker}.py"\n' + ok["source"]}}
    return {name: json.dumps(doc).encode() for name, doc in configs.items()}


def backends():
    out = [pytest.param("python")]
    out.append(pytest.param("native", marks=pytest.mark.skipif(
        not native.available(), reason=native.unavailable_reason())))
    return out


@pytest.fixture(scope="module", params=backends())
def switch(request):
    with SwitchProcess(["--no-p4", "--device-id", str(DEVICE), "--backend", request.param]) as sw:
        client = Client(sw.grpc_addr, (0, 1))
        assert client.status() == code_pb2.OK
        yield client
        client.close()


@pytest.fixture(scope="module")
def l3():
    return p4switch.compile_program(str(PROGRAMS / "l3.p4"))


def refused(client, info, config, steps) -> grpc.RpcError:
    """The first step's error (the later COMMIT then finds nothing saved)."""
    with pytest.raises(grpc.RpcError) as err:
        client.set_pipeline(info, config, action=steps[0])
    for step in steps[1:]:
        with pytest.raises(grpc.RpcError) as later:
            client.set_pipeline(None, None, action=step)
        assert later.value.code() == Code.NOT_FOUND
    return err.value


@pytest.mark.parametrize("action", ACTIONS)
def test_security_code_in_device_config_refused(switch, l3, tmp_path, action):
    info, good = l3
    marker = tmp_path / "marker"
    for name, config in attacks(marker, good).items():
        err = refused(switch, info, config, ACTIONS[action])
        assert err.code() == Code.INVALID_ARGUMENT, (name, err.details())
        assert "p4_device_config" in err.details(), (name, err.details())
        if name.startswith("v1"):
            assert "recompile" in err.details()
        assert not marker.exists(), name
        assert not pathlib.Path(f"{marker}.py").exists()
    # the switch still takes a good config afterwards
    switch.set_pipeline(info, good)
    assert switch.get_pipeline().p4_device_config == good


def test_security_generated_code_escapes_names(switch, tmp_path):
    """P4 names and strings that look like Python stay names: the generated module never runs
    them (quotes in @name, a log_msg string)."""
    marker = tmp_path / "marker"
    code = f"open({str(marker)!r}, 'w')"
    program = (PROGRAMS / "l3.p4").read_text().replace(
        "action drop() {", f"@name(\"x'); {code}; ('\") action drop() {{", 1).replace(
        "mark_to_drop(standard_metadata);",
        f"mark_to_drop(standard_metadata); log_msg(\"\\\"); {code}; (\\\"\");", 1)
    path = tmp_path / "names.p4"
    path.write_text(program)
    info, config = p4switch.compile_program(str(path), include_dirs=(PROGRAMS,))
    switch.set_pipeline(info, config)
    assert not marker.exists()


def test_security_line_markers_never_read_files(switch, l3, tmp_path):
    """A line marker naming a file the switch has (or a device that never ends) is only a label:
    the error comes back at once, without the file's text."""
    info, good = l3
    secret = tmp_path / "secret"
    secret.write_text("the switch's secret\n" * 3)
    for name in (str(secret), "/dev/zero"):
        doc = json.loads(good)
        doc["source"] = f'# 1 "{name}"\n\n\n%%%\n'
        err = refused(switch, info, json.dumps(doc).encode(), [SPA.VERIFY])
        assert err.code() == Code.INVALID_ARGUMENT
        assert "secret" not in err.details().replace(str(secret), "")


def test_malformed_p4info_refused(switch, l3):
    info, config = l3

    def edited(change) -> p4info_pb2.P4Info:
        copy = p4info_pb2.P4Info()
        copy.CopyFrom(info)
        change(copy)
        return copy

    def dup_table_id(i):
        i.tables[1].preamble.id = i.tables[0].preamble.id

    def zero_width(i):
        i.tables[0].match_fields[0].bitwidth = 0

    def no_tables(i):
        i.ClearField("tables")
        i.ClearField("direct_counters")

    def renamed(i):
        i.actions[0].preamble.name = "Other.name"

    cases = {"dup table id": (dup_table_id, "p4info.tables[1].preamble.id"),
             "zero width": (zero_width, "p4info.tables[0].match_fields[0].bitwidth"),
             "no tables": (no_tables, "p4info.tables"),
             "renamed": (renamed, "p4info.actions"),
             "dangling ref": (lambda i: i.tables[0].action_refs.add(id=0x01ABCDEF),
                              "p4info.tables[0].action_refs")}
    for name, (change, field) in cases.items():
        err = refused(switch, edited(change), config, [SPA.VERIFY])
        assert err.code() == Code.INVALID_ARGUMENT, name
        assert field in err.details(), (name, err.details())


def test_malformed_device_config_fields():
    """Each field checked on its own, the error naming it; the retired format says recompile."""
    info, good = p4switch.compile_program(str(PROGRAMS / "l3.p4"))
    ok = json.loads(good)
    cases = {b"": "p4_device_config", b"\xff\xfe": "p4_device_config",
             b"[1]": "p4_device_config", b"[" * 100000: "p4_device_config",
             json.dumps({**ok, "architecture": "tna"}).encode(): "p4_device_config.architecture",
             json.dumps({**ok, "source": 7}).encode(): "p4_device_config.source",
             json.dumps({**ok, "source": "control x"}).encode(): "p4_device_config.source",
             json.dumps({**ok, "more": 1}).encode(): "p4_device_config.more",
             json.dumps({"format": "p4switch-config/1"}).encode(): "p4_device_config.format",
             json.dumps({"header_types": []}).encode(): "p4_device_config"}
    for config, field in cases.items():
        with pytest.raises(device_config.ConfigError) as err:
            p4switch.load_config(info, config)
        assert err.value.field == field, (config[:40], str(err.value))
