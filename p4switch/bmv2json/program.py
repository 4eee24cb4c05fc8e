"""The whole document -> one P4_16 v1model program (the translation the other modules do
section by section), checked and lowered by p4switch's own compiler into a `Program`."""
from __future__ import annotations

import functools
import os
import tempfile

from .. import parse, passes
from ..errors import P4CompileError
from ..ir import Fail, pos
from .check import BadJson, J
from .exprs import Exprs
from .externs import Externs
from .headers import Headers
from .names import CORE_ERRORS, Namer
from .parsers import Parsers
from .pipelines import Pipelines
from .primitives import Primitives

# p4c's numbering of the core errors, for a document without an `errors` section
_DEFAULT_ERRORS = list(enumerate(CORE_ERRORS))


class Translator(Headers, Exprs, Primitives, Externs, Parsers, Pipelines):
    def __init__(self, root: J, p4info=None):
        self.root = root
        self.namer = Namer()
        self.locals, self.pre = [], []
        self.p4info_tables = None
        self.controller = {}
        self.p4info_optional: set[tuple[str, str]] = set()   # (table, key) P4Info says optional
        self.p4info_structs: dict[str, list[str]] = {}
        self.p4info_vset_sizes: dict[str, int] = {}
        if p4info is not None:
            self.p4info_vset_sizes = {v.preamble.name: v.size for v in p4info.value_sets}
            from p4.config.v1 import p4info_pb2
            optional = p4info_pb2.MatchField.OPTIONAL
            self.p4info_optional = {(t.preamble.name, m.name) for t in p4info.tables
                                    for m in t.match_fields if m.match_type == optional}
            self.p4info_structs = {n: [m.name for m in s.members]
                                   for n, s in p4info.type_info.structs.items()}
            self.p4info_tables = {t.preamble.name for t in p4info.tables}
            self.controller = {cm.preamble.name: [(m.name, m.bitwidth) for m in cm.metadata]
                               for cm in p4info.controller_packet_metadata}

    def controller_annotation(self, t) -> str:
        fields = [(f[0], f[2]) for f in t.fields]
        for name, want in self.controller.items():
            if want == fields:
                return f'@controller_header("{name}") '
        return ""

    def errors(self, root: J) -> list[str]:
        self.error_names: dict[int, str] = {}
        pairs = []
        if root.has("errors"):
            for e in root["errors"].items():
                e.arr(2)
                pairs.append((e[1].int(0, 2**31 - 2), e[0].str()))
        else:
            pairs = _DEFAULT_ERRORS
        for value, name in pairs:
            if not name.isidentifier():
                root["errors"].fail(f"error name {name!r} is not an identifier")
            if value in self.error_names:
                root["errors"].fail(f"errors {self.error_names[value]!r} and {name!r} share "
                                    f"the value {value}")
            self.error_names[value] = name
        out = []
        own = [n for n in self.error_names.values() if n not in CORE_ERRORS]
        if own:
            out.append(f"error {{ {', '.join(own)} }}")
        out.append("bit<32> _error_code(in error e) {")
        for value, name in self.error_names.items():
            out.append(f"    if (e == error.{name}) {{ return 32w{value}; }}")
        out += ["    return 32w0;", "}"]
        return out

    def source(self) -> str:
        root = self.root
        root.obj()
        if root.has("__meta__"):
            version = root["__meta__"]["version"]
            version.arr(2)
            if version[0].int() != 2:
                version.fail(f"BMv2 JSON version {version.value[0]}.{version.value[1]}: p4switch "
                             "reads major version 2")
        self.read_headers(root)
        self.read_externs(root)
        self.read_actions(root)
        errors = self.errors(root)
        parser = self.parser(root)
        verify, update = self.checksum_calls(root)
        ingress = self.control(root, "ingress")
        egress = self.control(root, "egress")
        deparser = self.deparser(root)
        lines = errors[:1] if errors[0].startswith("error") else []
        lines += self.type_decls() + self.learn_decls
        lines += errors[1:] if errors[0].startswith("error") else errors
        lines += self.top_decls + parser
        lines += ["control verify_c(inout headers_t hdr, inout meta_t meta) {", "    apply {"]
        lines += ["        " + s for s in verify] + ["    }", "}"]
        lines += ingress + egress
        lines += ["control compute_c(inout headers_t hdr, inout meta_t meta) {", "    apply {"]
        lines += ["        " + s for s in update] + ["    }", "}"]
        lines += deparser
        lines.append("V1Switch(ParserImpl(), verify_c(), ingress_c(), egress_c(), compute_c(), "
                     "DeparserImpl()) main;")
        return "\n".join(lines) + "\n"


def to_p4(doc, p4info=None) -> str:
    """A parsed BMv2 JSON document -> the P4_16 program it describes. Raises BadJson."""
    try:
        return Translator(J(doc), p4info).source()
    except RecursionError:
        raise BadJson("", "expressions are nested too deeply") from None


SOURCE_NAME = "<bmv2 json>"


@functools.cache
def _prelude() -> str:
    """core.p4 and v1model.p4 through the preprocessor, once: the translated program itself
    never goes through cpp (it is data from whoever wrote the JSON)."""
    with tempfile.TemporaryDirectory(prefix="p4switch-bmv2json-") as tmp:
        path = os.path.join(tmp, "prelude.p4")
        with open(path, "w") as f:
            f.write("#include <core.p4>\n#include <v1model.p4>\n")
        return "\n".join(parse.preprocess(path).lines)


def compile_doc(doc, p4info=None):
    """-> p4switch Program. Raises BadJson naming the JSON object p4switch cannot run."""
    text = to_p4(doc, p4info)
    source = parse.SourceMap(f'# 1 "<prelude>"\n{_prelude()}\n# 1 "{SOURCE_NAME}"\n{text}')
    try:
        tree = parse.parse(source)
        try:
            return passes.lower(tree, source, SOURCE_NAME).program
        except Fail as exc:
            line, col = pos(exc.where)
            raise source.error(line, col, exc.message) from None
    except P4CompileError as exc:
        raise _blame(text, exc) from None
    except RecursionError:
        raise BadJson("", "the program is nested too deeply") from None
    except Exception as exc:     # a translation the compiler trips on: still the JSON's error
        raise BadJson("", f"p4switch cannot run this program ({type(exc).__name__}: {exc})") from None


def _blame(text: str, exc: P4CompileError) -> BadJson:
    """The JSON object whose translation the compiler refused (the nearest `// json:` mark)."""
    lines = text.split("\n")
    where = ""
    if exc.file == SOURCE_NAME:
        for i in range(min(exc.line, len(lines)) - 1, -1, -1):
            mark = lines[i].strip()
            if mark.startswith("// json: "):
                where = mark[len("// json: "):]
                break
    return BadJson(where, f"p4switch cannot run this: {exc.message}")
