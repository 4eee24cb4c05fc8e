"""A failure inside p4switch's compiler is p4switch's, not the program's: it still reads as one
compile error (file, message), but says where in p4switch it was raised and keeps the original
traceback; pushed over P4Runtime it is INTERNAL with the traceback in the switch's log, while a
bad program stays INVALID_ARGUMENT."""
import json
import logging
import pathlib

import grpc
import pytest
from p4.v1 import p4runtime_pb2

import p4switch
from p4switch import frontend, parse, passes
from p4switch.errors import InternalCompilerError, P4CompileError
from p4switch.runtime.errors import P4RuntimeError
from p4switch.runtime.pipeline import Pipeline

L3 = pathlib.Path(__file__).parent / "device_programs" / "l3.p4"


def failing_lowering(self, unit):
    """LowerPipeline failing as a bug in it would (a KeyError from its own bookkeeping)."""
    raise KeyError("no_such_block")


@pytest.fixture
def broken_lowering(monkeypatch):
    monkeypatch.setattr(passes.LowerPipeline, "run", failing_lowering)


def config_of(path: pathlib.Path, tag: str) -> p4runtime_pb2.ForwardingPipelineConfig:
    """The pipeline config of `path`, its source tagged so no cached compile answers for it."""
    info, device = p4switch.compile_program(str(path))
    doc = json.loads(device)
    doc["source"] += f"\n// {tag}\n"
    return p4runtime_pb2.ForwardingPipelineConfig(p4info=info,
                                                  p4_device_config=json.dumps(doc).encode())


def test_internal_compiler_error_names_its_place_and_keeps_the_traceback(broken_lowering):
    source = parse.preprocess(str(L3))
    with pytest.raises(InternalCompilerError) as err:
        frontend.compile_source(source, str(L3))
    assert isinstance(err.value, P4CompileError)          # callers that catch compile errors
    assert "internal compiler error (KeyError: 'no_such_block', raised in failing_lowering at " \
           "test_internal_errors.py:" in err.value.message
    assert isinstance(err.value.__cause__, KeyError)


def test_internal_compiler_error_over_p4runtime_is_internal_and_logged(caplog):
    config = config_of(L3, "internal")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(passes.LowerPipeline, "run", failing_lowering)
        with caplog.at_level(logging.ERROR), pytest.raises(P4RuntimeError) as err:
            Pipeline(config, cpu_port=None)
    assert err.value.code == grpc.StatusCode.INTERNAL
    assert "internal compiler error (KeyError" in err.value.message
    assert any(r.exc_info and "KeyError" in r.exc_text for r in caplog.records
               if r.exc_text), "the switch's log has the traceback"


def test_a_bad_program_over_p4runtime_stays_invalid_argument():
    config = config_of(L3, "bad")
    doc = json.loads(config.p4_device_config)
    doc["source"] += "\ncontrol Broken( {\n"
    config.p4_device_config = json.dumps(doc).encode()
    with pytest.raises(P4RuntimeError) as err:
        Pipeline(config, cpu_port=None)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "internal" not in err.value.message
