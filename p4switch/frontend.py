"""The compiler driver: preprocess, parse, check and lower a P4 file into a Program."""
from __future__ import annotations

from . import parse
from .compiler import Compiler, Fail, Program, pos
from .errors import P4CompileError


def compile_file(path: str, include_dirs=(), defines=None) -> Program:
    """Raises P4CompileError (file:line:col in the original source) for any bad program."""
    return compile_source(parse.preprocess(str(path), include_dirs, defines), str(path))


def compile_source(source: parse.SourceMap, name: str) -> Program:
    """The Program of preprocessed text; `name` labels errors that have no place in it."""
    try:
        return Compiler(parse.parse(source), source).run()
    except P4CompileError:
        raise
    except Fail as exc:
        line, col = pos(exc.where)
        raise source.error(line, col, exc.message) from None
    except RecursionError:
        raise P4CompileError(name, 1, 1, "program nesting is too deep", "") from None
    except Exception as exc:  # a checker bug must still read as a compile error, not a traceback
        raise P4CompileError(name, 1, 1,
                             f"internal compiler error ({type(exc).__name__}: {exc}); "
                             "this construct is probably not supported by p4switch", "") from None
