"""Source text to parse tree: the C preprocessor, then the LALR parser of p4.lark.

Positions in the tree are lines of the preprocessed text; `SourceMap` turns them back into
(file, line) of the original files through cpp's `# line "file"` markers."""
from __future__ import annotations

import json
import re
import subprocess
from functools import lru_cache
from pathlib import Path

from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from .errors import P4CompileError

INCLUDE_DIR = Path(__file__).parent / "p4include"
_MARKER = re.compile(r'^#\s*(?:line\s+)?(\d+)\s+"((?:[^"\\]|\\.)*)"')
_CPP_DIAG = re.compile(r"^(.*?):(\d+):(\d+): (?:fatal )?error: (.*)$")


class SourceMap:
    """Maps lines of cpp output to (file, line) in the files cpp read."""

    def __init__(self, text: str):
        self.preprocessed = text         # what a device config carries (markers included)
        self.places: list[tuple[str, int]] = [("<none>", 0)]
        self.lines: list[str] = []
        file, line = "<none>", 1
        for raw in text.split("\n"):
            marker = _MARKER.match(raw)
            if marker:
                line, file = int(marker.group(1)), marker.group(2)
                self.places.append((file, 0))
                self.lines.append("")
                continue
            self.places.append((file, line))
            self.lines.append(raw)
            line += 1

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def error(self, line: int, col: int, message: str) -> P4CompileError:
        file, orig = self.places[line] if 0 < line < len(self.places) else ("<input>", line)
        source = self.lines[line - 1] if 0 < line <= len(self.lines) else None
        return P4CompileError(file, orig, col, message, source)


def preprocess(path: str, include_dirs=(), defines=None) -> SourceMap:
    """Runs the system C preprocessor; its errors become P4CompileError at cpp's position."""
    cmd = ["cpp", "-x", "c", "-undef", "-nostdinc", "-w", "-I", str(INCLUDE_DIR)]
    for directory in include_dirs:
        cmd += ["-I", str(directory)]
    for key, value in (defines or {}).items():
        cmd.append(f"-D{key}" if value is None else f"-D{key}={value}")
    cmd.append(str(path))
    if not Path(path).is_file():
        raise P4CompileError(str(path), 0, 0, "cannot read the program file", "")
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        for line in run.stderr.splitlines():
            diag = _CPP_DIAG.match(line)
            if diag:
                raise P4CompileError(diag.group(1), int(diag.group(2)), int(diag.group(3)),
                                     diag.group(4))
        raise P4CompileError(str(path), 1, 1, "preprocessor failed: " + run.stderr.strip())
    return SourceMap(run.stdout)


# ---------------------------------------------------------------- lexer pass
_TYPE_DECL_KW = {"_HEADER", "_HEADER_UNION", "_STRUCT", "_EXTERN", "_PARSER", "_CONTROL",
                 "_PACKAGE", "_ENUM"}
_KEYWORD = re.compile(r"^_[A-Z_]+$")
_ANGLE_OPENERS = {"_BIT", "_INT_KW", "_VARBIT", "_TUPLE", "_VALUE_SET", "TYPE_IDENTIFIER", "TLT"}


def _declaration_extent(tokens: list[Token], i: int) -> tuple[int, int]:
    """Token range of the declaration around tokens[i]: from after the previous `;`, `{` or `}`
    to its closing `;` or to the `}` that closes its body."""
    start = i
    while start > 0 and tokens[start - 1].value not in (";", "{", "}"):
        start -= 1
    depth, j = 0, i
    while j < len(tokens):
        v = tokens[j].value
        if v == "{":
            depth += 1
        elif v == "}":
            depth -= 1
            if depth == 0:
                return start, j
        elif v == ";" and depth == 0:
            return start, j
        j += 1
    return start, j


def _type_names(tokens: list[Token]) -> tuple[set[str], list[tuple[int, int, set[str]]]]:
    """Names declared as types (global), and type parameters with the token range they cover."""
    names: set[str] = set()
    scoped: list[tuple[int, int, set[str]]] = []
    n = len(tokens)
    for i, tok in enumerate(tokens):
        if tok.type in _TYPE_DECL_KW:
            j = i + 1
            if tok.type == "_ENUM" and j < n and tokens[j].type in ("_BIT", "_INT_KW"):
                j += 4
            if tok.type == "_EXTERN":
                # `extern T f<..>(..)` declares a function, `extern Name {` a type
                if j + 1 < n and tokens[j + 1].value in ("{", "<"):
                    names.add(tokens[j].value)
                continue
            if j < n and tokens[j].type == "IDENTIFIER":
                names.add(tokens[j].value)
        elif tok.type in ("_TYPEDEF", "TYPE_KW") and (
                i == 0 or tokens[i - 1].value in (";", "}", "{") or tokens[i - 1].type == "ANNOTATION"):
            j = i + 1
            depth = 0
            while j < n and not (tokens[j].value == ";" and depth == 0):
                depth += tokens[j].value in ("(", "[", "{", "<")
                depth -= tokens[j].value in (")", "]", "}", ">")
                j += 1
            if j - 1 > i and tokens[j - 1].type == "IDENTIFIER":
                names.add(tokens[j - 1].value)
        elif tok.value == "<" and i > 0 and tokens[i - 1].type == "IDENTIFIER":
            # type parameters: NAME < A, B > ( or {
            j, params = i + 1, []
            while j + 1 < n and tokens[j].type == "IDENTIFIER" and tokens[j + 1].value in (",", ">"):
                params.append(tokens[j].value)
                if tokens[j + 1].value == ">":
                    break
                j += 2
            if params and j + 2 < n and tokens[j + 1].value == ">" and tokens[j + 2].value in ("(", "{"):
                prev2 = tokens[i - 2] if i >= 2 else None
                if prev2 is not None and (prev2.type in _TYPE_DECL_KW or prev2.type in (
                        "IDENTIFIER", "TYPE_IDENTIFIER", "_VOID", "GT", "_BOOL", "VOID")):
                    start, end = _declaration_extent(tokens, i)
                    scoped.append((start, end, set(params)))
    return names, scoped


def _generic_call_angle(tokens: list[Token], i: int) -> bool:
    """True when tokens[i] is `<` that opens type arguments: NAME < types > ( ."""
    depth, j, n = 0, i, len(tokens)
    while j < n:
        v = tokens[j].value
        if v == "<":
            depth += 1
        elif v == ">":
            depth -= 1
        elif v == ">>":
            depth -= 2
        elif tokens[j].type not in ("TYPE_IDENTIFIER", "INTEGER", "_BIT", "_INT_KW", "_VARBIT",
                                    "_BOOL", "_TUPLE", "DONTCARE", "_VOID", "VOID", "_ERROR",
                                    "IDENTIFIER") and v not in (",", "[", "]"):
            return False
        if depth <= 0:
            return depth == 0 and j + 1 < n and tokens[j + 1].value == "("
        j += 1
    return False


def _merge_annotations(tokens: list[Token]) -> list[Token]:
    """`@name(body)` becomes one ANNOTATION token valued `@name`, NUL, the body tokens as JSON."""
    out: list[Token] = []
    i, n = 0, len(tokens)
    while i < n:
        tok = tokens[i]
        if tok.type == "ANNOTATION" and i + 1 < n and tokens[i + 1].value == "(" \
                and tokens[i + 1].start_pos == tok.end_pos:
            depth, j = 0, i + 1
            while j < n:
                depth += {"(": 1, ")": -1}.get(tokens[j].value, 0)
                if depth == 0:
                    break
                j += 1
            body = [(t.type, str(t.value)) for t in tokens[i + 2:j]]
            out.append(Token.new_borrow_pos("ANNOTATION", tok.value + "\0" + json.dumps(body), tok))
            i = j + 1
            continue
        out.append(tok)
        i += 1
    return out


class _P4Lexer:
    always_accept = ()

    def process(self, stream):
        tokens = _merge_annotations(list(stream))
        types, scoped = _type_names(tokens)
        out: list[Token] = []
        angle: list[int] = []  # open type-argument angles
        for i, tok in enumerate(tokens):
            prev = out[-1] if out else None
            after_dot = prev is not None and prev.value == "."
            if tok.type == "IDENTIFIER" and not after_dot and (
                    tok.value in types or any(a <= i <= b and tok.value in ps for a, b, ps in scoped)):
                tok = Token.new_borrow_pos("TYPE_IDENTIFIER", tok.value, tok)
            elif after_dot and (_KEYWORD.match(tok.type) or tok.type == "TYPE_KW") \
                    and tok.value.isidentifier():
                tok = Token.new_borrow_pos("IDENTIFIER", tok.value, tok)
            if tok.type == "LT":
                if prev is not None and prev.type in ("IDENTIFIER",) and _generic_call_angle(tokens, i):
                    tok = Token.new_borrow_pos("TLT", "<", tok)
                    angle.append(1)
                elif prev is not None and prev.type in _ANGLE_OPENERS:
                    angle.append(1)
                elif angle:
                    angle.append(1)  # nested inside type arguments
            elif tok.type == "GT" and angle:
                angle.pop()
            elif tok.type == "SHR" and len(angle) >= 2:
                angle.pop()
                angle.pop()
                first = Token.new_borrow_pos("GT", ">", tok)
                second = Token("GT", ">", tok.start_pos + 1, tok.line, tok.column + 1,
                               tok.end_line, tok.end_column, tok.end_pos)
                out.append(first)
                out.append(second)
                continue
            out.append(tok)
        yield from out


@lru_cache(maxsize=1)
def _parser() -> Lark:
    grammar = (Path(__file__).parent / "p4.lark").read_text()
    return Lark(grammar, parser="lalr", lexer="basic", postlex=_P4Lexer(),
                propagate_positions=True, maybe_placeholders=False)


def parse(source: SourceMap):
    """Parse tree of the preprocessed program; syntax errors raise P4CompileError."""
    try:
        return _parser().parse(source.text)
    except UnexpectedToken as exc:
        tok = exc.token
        if tok.type == "$END":
            line = len(source.lines)
            raise source.error(line, 1, "syntax error: unexpected end of input") from None
        message = f"syntax error: unexpected '{tok.value.partition(chr(0))[0]}'"
        rest = source.lines[tok.line - 1][tok.column - 1 + len(tok.value):] if tok.line <= len(source.lines) else ""
        if tok.type == "IDENTIFIER" and re.match(r"\s*[A-Za-z_]", rest):
            message += f" (unknown type '{tok.value}'?)"
        elif re.search(r"\bfor\s*\(", source.lines[tok.line - 1][:tok.column]):
            message += " (p4switch, like p4c 1.2.4, has no for loops)"
        raise source.error(tok.line, tok.column, message) from None
    except UnexpectedCharacters as exc:
        raise source.error(exc.line, exc.column,
                           f"syntax error: unexpected character '{source.lines[exc.line - 1][exc.column - 1]}'") from None
    except UnexpectedEOF:
        raise source.error(len(source.lines), 1, "syntax error: unexpected end of input") from None
    except UnexpectedInput as exc:  # any other parser complaint
        raise source.error(getattr(exc, "line", 1), getattr(exc, "column", 1), "syntax error") from None
