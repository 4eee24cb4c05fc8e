"""p4switch: a P4_16 compiler and v1model (BMv2 simple_switch) software switch in Python.

    sw = p4switch.load("prog.p4")
    sw.table_add("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": (0x0a000100, 24)},
                 "MyIngress.forward", {"port": 2})
    sw.process(1, packet_bytes)  # -> [(egress_port, bytes), ...]
"""
from __future__ import annotations

from .engine import P4AssertionError
from .errors import P4CompileError

__all__ = ["EgressJob", "P4AssertionError", "P4CompileError", "Switch", "compile_program", "load",
           "load_config"]


def compile_program(path, include_dirs=(), defines=None):
    """-> (p4info_pb2.P4Info, device config bytes). Raises P4CompileError."""
    from . import device_config, frontend, p4info, parse
    source = parse.preprocess(str(path), include_dirs, defines)
    program = frontend.compile_source(source, str(path))
    return p4info.build(program), device_config.encode(source)


def load(path, include_dirs=(), defines=None, cpu_port=None, backend="python", fallback=None):
    """Compiles a P4 program and returns a Switch running it on `backend` ("python", the
    reference semantics, or "native", compiled to C). Raises P4CompileError, and
    native.Unsupported for a program the native backend does not run, unless `fallback` is
    given: then fallback(reason) is called and the switch runs on the Python backend."""
    from . import frontend, p4info
    program = frontend.compile_file(str(path), include_dirs, defines)
    info = p4info.build(program)
    if backend == "native" and fallback is not None:
        from .native import Unsupported
        try:
            return _switch("native")(program, info, cpu_port=cpu_port)
        except Unsupported as exc:
            fallback(str(exc))
            backend = "python"
    return _switch(backend)(program, info, cpu_port=cpu_port)


def load_config(info, config: bytes, cpu_port=None, backend="python"):
    """A Switch from `p4switch compile` outputs (P4Info message and device config bytes).
    Raises device_config.ConfigError naming the field of a config that fails validation."""
    from . import device_config
    return device_config.load(info, config, backend=backend, cpu_port=cpu_port)


def _switch(backend):
    if backend == "native":
        from .native.switch import NativeSwitch
        return NativeSwitch
    if backend != "python":
        raise ValueError(f"unknown backend {backend!r}: want 'python' or 'native'")
    from .switch import Switch
    return Switch


def __getattr__(name):
    if name in ("Switch", "EgressJob"):
        from . import switch
        return getattr(switch, name)
    raise AttributeError(name)
