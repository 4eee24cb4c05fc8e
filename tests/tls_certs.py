"""Certificates made at run time for the TLS tests and bench: a CA, a server certificate for
127.0.0.1/localhost, a client certificate, and a client certificate from another CA (which a
server requiring clients of the first CA must refuse). EC P-256 keys: quick to make."""
from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Certs:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    rogue_cert: Path          # a client certificate signed by another CA
    rogue_key: Path


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(subject: str, key, issuer: str, issuer_key, *, ca: bool = False,
          server: bool = False) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
    if not ca:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write(path: Path, cert: x509.Certificate | None = None, key=None) -> Path:
    if cert is not None:
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    else:
        path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return path


def make_certs(directory: Path) -> Certs:
    keys = {n: ec.generate_private_key(ec.SECP256R1())
            for n in ("ca", "server", "client", "rogue_ca", "rogue")}
    out = {}
    out["ca"] = _write(directory / "ca.pem", _cert("mlfabric test CA", keys["ca"],
                                                   "mlfabric test CA", keys["ca"], ca=True))
    for role, issuer, server in (("server", "ca", True), ("client", "ca", False),
                                 ("rogue", "rogue_ca", False)):
        issuer_name = "mlfabric test CA" if issuer == "ca" else "another CA"
        cert = _cert(f"mlfabric {role}", keys[role], issuer_name, keys[issuer], server=server)
        out[f"{role}_cert"] = _write(directory / f"{role}.pem", cert)
        out[f"{role}_key"] = _write(directory / f"{role}.key", key=keys[role])
    return Certs(**out)
