"""P4 identifiers for BMv2 JSON names, and the v1model standard metadata they map onto."""
from __future__ import annotations

import re

# P4_16 keywords and names the generated program itself declares
_RESERVED = {
    "action", "actions", "apply", "bool", "bit", "const", "control", "default", "else", "enum",
    "error", "exit", "extern", "false", "header", "header_union", "if", "in", "inout", "int",
    "key", "match_kind", "out", "package", "parser", "return", "select", "state", "struct",
    "switch", "table", "transition", "true", "tuple", "typedef", "type", "value_set", "varbit",
    "verify", "void", "entries", "list", "priority", "string", "this", "abstract", "for",
    "accept", "reject", "start", "packet", "hdr", "meta", "standard_metadata", "NoAction",
    "main", "size", "next", "last", "lastIndex", "isValid", "setValid", "setInvalid",
}

# v1model's standard_metadata_t fields p4switch runs (name -> width; parser_error is `error`)
V1_STANDARD = {
    "ingress_port": 9, "egress_spec": 9, "egress_port": 9, "instance_type": 32,
    "packet_length": 32, "enq_timestamp": 32, "enq_qdepth": 19, "deq_timedelta": 32,
    "deq_qdepth": 19, "ingress_global_timestamp": 48, "egress_global_timestamp": 48,
    "mcast_grp": 16, "egress_rid": 16, "checksum_error": 1, "parser_error": 32, "priority": 3,
}

# the errors of p4switch's core.p4, so the program declares only the others
CORE_ERRORS = ("NoError", "PacketTooShort", "NoMatch", "StackOutOfBounds", "HeaderTooShort",
               "ParserTimeout", "ParserInvalidArgument")


def ident(text: str) -> str:
    """A P4 identifier close to `text` (dots and other characters become `_`)."""
    out = re.sub(r"[^A-Za-z0-9_]", "_", text) or "_"
    if out[0].isdigit():
        out = "_" + out
    if out in _RESERVED:
        out += "_"
    return out


class Namer:
    """Unique identifiers within one P4 namespace."""

    def __init__(self):
        self.used: set[str] = set(_RESERVED)

    def __call__(self, text: str, prefix: str = "") -> str:
        base = prefix + ident(text).lstrip("_") if prefix else ident(text)
        name, n = base, 0
        while name in self.used:
            n += 1
            name = f"{base}_{n}"
        self.used.add(name)
        return name


def p4_string(text: str) -> str:
    """A P4 string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
