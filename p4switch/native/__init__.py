"""The native backend of p4switch: the lowered program compiled to C (see README.md)."""
from __future__ import annotations

from nativebuild import compiler

from .lowered import Unsupported

__all__ = ["Unsupported", "available", "default_backend", "refusal", "unavailable_reason"]


def available() -> bool:
    return compiler() is not None


def unavailable_reason() -> str:
    return "no C compiler (cc) found: p4switch runs the Python backend instead of the native one"


def default_backend() -> str:
    """What `p4switch run` and `p4switch stf` use without --backend."""
    return "native" if available() else "python"


def refusal(program) -> str | None:
    """Why the native backend does not run `program` (a compiled Program), or None if it does."""
    from .program import generate
    try:
        generate(program)
    except Unsupported as exc:
        return str(exc)
    return None
