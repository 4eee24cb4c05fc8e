"""The compiler driver: a P4 file or preprocessed text through the passes (passes.py) into a
Program, every failure a P4CompileError at its place in the original source."""
from __future__ import annotations

import traceback
from pathlib import Path

from . import parse, passes
from .errors import InternalCompilerError, P4CompileError
from .ir import Fail, Program, pos


def compile_file(path: str, include_dirs=(), defines=None) -> Program:
    """Raises P4CompileError (file:line:col in the original source) for any bad program."""
    unit = passes.Unit(str(path), path=str(path), include_dirs=tuple(include_dirs),
                       defines=dict(defines or {}))
    passes.Preprocess().run(unit)   # cpp's errors are P4CompileErrors at cpp's position already
    return _front_end(unit)


def compile_source(source: parse.SourceMap, name: str) -> Program:
    """The Program of preprocessed text; `name` labels errors that have no place in it."""
    return _front_end(passes.Unit(name, source=source))


def _front_end(unit: passes.Unit) -> Program:
    source = unit.source
    try:
        return passes.run(unit, passes.passes_from(passes.Parse)).program
    except P4CompileError:
        raise
    except Fail as exc:
        line, col = pos(exc.where)
        raise source.error(line, col, exc.message) from None
    except RecursionError:
        raise P4CompileError(unit.name, 1, 1, "program nesting is too deep", "") from None
    except Exception as exc:  # a checker bug reads as one compile error, its traceback kept
        raise InternalCompilerError(unit.name, 1, 1, _internal_message(exc), "") from exc


def _internal_message(exc: Exception) -> str:
    """Where in p4switch the failure was raised, so a report of it can be acted on."""
    frame = traceback.extract_tb(exc.__traceback__)[-1]
    return (f"internal compiler error ({type(exc).__name__}: {exc}, raised in {frame.name} "
            f"at {Path(frame.filename).name}:{frame.lineno}): a p4switch bug, or a construct "
            "it does not support")
