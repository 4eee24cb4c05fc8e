"""BMv2 JSON (what p4c-bm2-ss writes) as a p4switch program: the document is translated into
the P4_16 v1model program it describes and lowered by p4switch's compiler, so both backends
run it. See README.md."""
from __future__ import annotations

import json

from .check import BadJson
from .program import compile_doc, to_p4

__all__ = ["BadJson", "compile_doc", "is_bmv2_json", "load", "load_bytes", "to_p4"]

# top-level keys every BMv2 JSON has and p4switch's own device config has not
_KEYS = ("header_types", "headers", "parsers", "deparsers", "pipelines", "actions")


def looks_like(doc) -> bool:
    return isinstance(doc, dict) and all(k in doc for k in _KEYS)


def is_bmv2_json(data: bytes) -> bool:
    """True if `data` is a JSON object with BMv2's top-level sections."""
    try:
        return looks_like(json.loads(data))
    except (ValueError, UnicodeDecodeError):
        return False


def load_bytes(data: bytes, p4info=None):
    """BMv2 JSON bytes -> p4switch Program. Raises BadJson (a ValueError)."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadJson("", f"not JSON: {exc}") from None
    if not looks_like(doc):
        missing = [k for k in _KEYS if not isinstance(doc, dict) or k not in doc]
        raise BadJson("", f"not a BMv2 JSON: no {', '.join(missing)}")
    return compile_doc(doc, p4info)


def load(path, backend="python", p4info=None, cpu_port=None):
    """A Switch running the BMv2 JSON at `path` (P4Info: `p4info`, else the one p4switch
    writes for the program)."""
    from .. import _switch
    from .. import p4info as p4info_mod
    with open(path, "rb") as f:
        program = load_bytes(f.read(), p4info)
    info = p4info if p4info is not None else p4info_mod.build(program)
    return _switch(backend)(program, info, cpu_port=cpu_port)
