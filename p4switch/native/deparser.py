"""Generator stage: the deparser (BMv2's `deparser`): emits valid headers bit by bit into the
output buffer; the traffic manager appends the payload."""
from __future__ import annotations

from .codegen import CodeGen


def generate(gen: CodeGen) -> None:
    gen.translate_function("DEPARSE", (("state",), ("out",)), cfn="DEPARSE")
