"""Generator stage: the parser (BMv2's `parser`). PARSE runs the program's parser on a bit
cursor; `_Reject` becomes reject(code), which unwinds to the traffic manager's parse_packet."""
from __future__ import annotations

from .codegen import CodeGen


def generate(gen: CodeGen) -> None:
    gen.translate_function("PARSE", (("state",), ("pkt",)), cfn="PARSE")
