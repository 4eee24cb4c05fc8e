"""fabricd's side of TLS (the PEM handling is `grpctls`'s): binding its API, with a warning
when a plaintext port is off the loopback address."""
from __future__ import annotations

import logging

import grpc

from grpctls import ServerTLS, is_loopback
from grpctls import bind as bind_port

log = logging.getLogger("fabricd")


def bind(server: grpc.Server, address: str, tls: ServerTLS | None, what: str) -> int:
    """Add `server`'s listening port, plaintext or TLS; -> the bound port (0: could not bind).
    A plaintext port off the loopback address is logged as a warning naming `what`."""
    if tls is None and not is_loopback(address):
        log.warning("%s on %s without TLS: anyone who reaches it can change the fabric "
                    "(--tls-cert/--tls-key)", what, address)
    return bind_port(server, address, tls)
