"""TLS for the P4Runtime server, with simple_switch_grpc's options: `--grpc-server-ssl`
turns it on with `--grpc-server-cert` and `--grpc-server-key`; `--grpc-server-cacert` is the CA
that client certificates are checked against, and `--grpc-server-with-client-auth` refuses a
client that has none (mutual TLS). Without TLS the server speaks plaintext, which only the
loopback address keeps private: `plaintext_warning` says so for any other address."""
from __future__ import annotations

import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

import grpc


@dataclass(frozen=True)
class ServerTLS:
    cert: bytes
    key: bytes
    client_ca: bytes | None = None
    client_auth: bool = False

    @classmethod
    def from_files(cls, cert: str | Path, key: str | Path, cacert: str | Path | None = None,
                   client_auth: bool = False) -> ServerTLS:
        """Read and check the PEM files; ValueError names the file that is wrong (gRPC itself
        would only fail at the first handshake)."""
        if client_auth and cacert is None:
            raise ValueError("client authentication needs the CA that signs the clients' "
                             "certificates (--grpc-server-cacert)")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_cert_chain(cert, key)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"certificate {cert} with key {key}: {exc}") from None
        if cacert is not None:
            try:
                context.load_verify_locations(cafile=str(cacert))
            except (OSError, ssl.SSLError) as exc:
                raise ValueError(f"CA certificate {cacert}: {exc}") from None
        return cls(Path(cert).read_bytes(), Path(key).read_bytes(),
                   Path(cacert).read_bytes() if cacert is not None else None, client_auth)

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials([(self.key, self.cert)],
                                           root_certificates=self.client_ca,
                                           require_client_auth=self.client_auth)


def is_loopback(address: str) -> bool:
    """True for 127.0.0.0/8, ::1 and localhost (host:port, [v6]:port)."""
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def plaintext_warning(address: str, tls: ServerTLS | None) -> str | None:
    if tls is not None or is_loopback(address):
        return None
    return (f"P4Runtime on {address} without TLS: anyone who reaches it can rewrite the "
            f"switch (--grpc-server-ssl)")


def bind(server: grpc.Server, address: str, tls: ServerTLS | None) -> int:
    """Add the listening port, plaintext or TLS; -> the bound port (0: could not bind)."""
    if tls is None:
        return server.add_insecure_port(address)
    return server.add_secure_port(address, tls.credentials())
