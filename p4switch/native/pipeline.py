"""Generator stage: the match-action pipelines (BMv2's `verify_checksum`, `ingress`, `egress`,
`compute_checksum`): controls, actions, tables and functions, generated as they are called."""
from __future__ import annotations

from .codegen import CodeGen


def generate(gen: CodeGen) -> None:
    for stage in ("VERIFY", "INGRESS", "EGRESS", "COMPUTE"):
        gen.translate_function(stage, (("state",),), cfn=stage)
