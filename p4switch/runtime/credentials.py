"""TLS for the P4Runtime server, with simple_switch_grpc's options: `--grpc-server-ssl`
turns it on with `--grpc-server-cert` and `--grpc-server-key`; `--grpc-server-cacert` is the CA
that client certificates are checked against, and `--grpc-server-with-client-auth` refuses a
client that has none (mutual TLS). The PEM handling is `grpctls`'s."""
from __future__ import annotations

from grpctls import ServerTLS, bind, is_loopback

__all__ = ["ServerTLS", "bind", "plaintext_warning"]


def plaintext_warning(address: str, tls: ServerTLS | None) -> str | None:
    """Plaintext is the default, which only the loopback address keeps private."""
    if tls is not None or is_loopback(address):
        return None
    return (f"P4Runtime on {address} without TLS: anyone who reaches it can rewrite the "
            f"switch (--grpc-server-ssl)")
