"""P4Runtime (p4.v1) server for p4switch."""
from .server import P4RuntimeService, serve

__all__ = ["P4RuntimeService", "serve"]
