"""The hosts' RoCEv2 data path in C (transport.c), behind the interface of
collectives.transport.Endpoint, which stays the reference and the fallback (see README.md)."""
from __future__ import annotations

from nativebuild import compiler

from .endpoint import NativeEndpoint

__all__ = ["NativeEndpoint", "available", "default_backend"]


def available() -> bool:
    return compiler() is not None


def default_backend() -> str:
    """The transport a rank uses unless told: native where a C compiler exists."""
    return "native" if available() else "python"
