"""TLS for the project's gRPC servers and clients: p4switch's P4Runtime server, fabricd's API
and its P4Runtime sessions, fabricctl. Plaintext stays the default, which only the loopback
address keeps private.

PEM files are checked when read (with the standard library's `ssl`), so a wrong path, a key
that does not match its certificate or a file that is no PEM is refused at start with the
file's name, not at the first handshake (gRPC itself reads them only then).
"""
from __future__ import annotations

import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

import grpc


def _check_pair(cert: str | Path, key: str | Path, purpose: int) -> None:
    try:
        ssl.SSLContext(purpose).load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"certificate {cert} with key {key}: {exc}") from None


def _read_ca(path: str | Path) -> bytes:
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=str(path))
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"CA certificate {path}: {exc}") from None
    return Path(path).read_bytes()


@dataclass(frozen=True)
class ServerTLS:
    """A server's certificate and key. `client_ca` checks the certificates clients show;
    `client_auth` refuses a client that shows none (mutual TLS)."""
    cert: bytes
    key: bytes
    client_ca: bytes | None = None
    client_auth: bool = False

    @classmethod
    def from_files(cls, cert: str | Path, key: str | Path, client_ca: str | Path | None = None,
                   client_auth: bool = False) -> ServerTLS:
        if client_auth and client_ca is None:
            raise ValueError("client authentication needs the CA that signs the clients' "
                             "certificates")
        _check_pair(cert, key, ssl.PROTOCOL_TLS_SERVER)
        return cls(Path(cert).read_bytes(), Path(key).read_bytes(),
                   _read_ca(client_ca) if client_ca is not None else None, client_auth)

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials([(self.key, self.cert)],
                                           root_certificates=self.client_ca,
                                           require_client_auth=self.client_auth)


@dataclass(frozen=True)
class ClientTLS:
    """The CA a server's certificate must chain to; with `cert` and `key`, the client's own
    certificate for servers that require one."""
    ca: bytes
    cert: bytes | None = None
    key: bytes | None = None

    @classmethod
    def from_files(cls, ca: str | Path, cert: str | Path | None = None,
                   key: str | Path | None = None) -> ClientTLS:
        if (cert is None) != (key is None):
            raise ValueError("a client certificate and its key go together")
        if cert is not None:
            _check_pair(cert, key, ssl.PROTOCOL_TLS_CLIENT)
        return cls(_read_ca(ca), Path(cert).read_bytes() if cert else None,
                   Path(key).read_bytes() if key else None)

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(root_certificates=self.ca, private_key=self.key,
                                            certificate_chain=self.cert)


def channel(address: str, tls: ClientTLS | None) -> grpc.Channel:
    """A channel to `address`: plaintext without `tls`, else TLS verifying the server's
    certificate against `tls.ca` (its name or IP address must match `address`'s host)."""
    if tls is None:
        return grpc.insecure_channel(address)
    return grpc.secure_channel(address, tls.credentials())


def is_loopback(address: str) -> bool:
    """True for 127.0.0.0/8, ::1 and localhost (host:port, [v6]:port)."""
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(server: grpc.Server, address: str, tls: ServerTLS | None) -> int:
    """Add `server`'s listening port, plaintext or TLS; -> the bound port (0: could not bind)."""
    if tls is None:
        return server.add_insecure_port(address)
    return server.add_secure_port(address, tls.credentials())
