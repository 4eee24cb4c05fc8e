"""The compiler driver: preprocess, parse, check and lower a P4 file into a Program."""
from __future__ import annotations

import json

from . import parse
from .compiler import Compiler, Fail, Program, pos
from .errors import P4CompileError

CONFIG_FORMAT = "p4switch-config/1"


def compile_file(path: str, include_dirs=(), defines=None) -> Program:
    """Raises P4CompileError (file:line:col in the original source) for any bad program."""
    source = parse.preprocess(str(path), include_dirs, defines)
    tree = parse.parse(source)
    try:
        return Compiler(tree, source).run()
    except Fail as exc:
        line, col = pos(exc.where)
        raise source.error(line, col, exc.message) from None
    except RecursionError:
        raise P4CompileError(str(path), 1, 1, "program nesting is too deep") from None
    except Exception as exc:  # a checker bug must still read as a compile error, not a traceback
        raise P4CompileError(str(path), 1, 1,
                             f"internal compiler error ({type(exc).__name__}: {exc}); "
                             "this construct is probably not supported by p4switch") from None


def config_bytes(program: Program) -> bytes:
    """The device config `p4switch compile --config` writes: the lowered program as JSON."""
    return json.dumps({"format": CONFIG_FORMAT, "program": program.to_json()}).encode()


def program_from_config(config: bytes) -> Program:
    try:
        data = json.loads(config)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"device config is not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != CONFIG_FORMAT:
        raise ValueError(f"device config is not in the {CONFIG_FORMAT} format")
    return Program.from_json(data["program"])
