"""`p4switch run` serves P4Runtime over TLS with simple_switch_grpc's options: a TLS client is
served, a plaintext client is refused, and under mutual TLS a client without a certificate
from the configured CA is refused. Plaintext off the loopback address is warned about.
Certificates are made at run time (tests/tls_certs.py)."""
from __future__ import annotations

import grpc
import pytest
from click.testing import CliRunner
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from grpctls import is_loopback
from p4switch.device.cli import run_command
from p4switch.device.process import SwitchProcess
from tests.tls_certs import make_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("tls"))


def capabilities(address: str, ca=None, cert=None, key=None) -> str:
    """One Capabilities RPC; -> the API version, or raises grpc.RpcError."""
    if ca is None:
        channel = grpc.insecure_channel(address)
    else:
        creds = grpc.ssl_channel_credentials(
            ca.read_bytes(), key.read_bytes() if key else None,
            cert.read_bytes() if cert else None)
        channel = grpc.secure_channel(address, creds)
    with channel:
        stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
        # 30 s: a margin no load crosses (the calls take milliseconds)
        reply = stub.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=30)
        return reply.p4runtime_api_version


def refused(address: str, **kw) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as err:
        capabilities(address, **kw)
    return err.value.code()


def test_tls_server_serves_tls_clients_and_refuses_plaintext(certs):
    with SwitchProcess(["--no-p4", "--grpc-server-ssl", "--grpc-server-cert",
                        str(certs.server_cert), "--grpc-server-key",
                        str(certs.server_key)]) as switch:
        assert capabilities(switch.grpc_addr, ca=certs.ca) == "1.4.1"
        assert refused(switch.grpc_addr) == grpc.StatusCode.UNAVAILABLE
        # a client certificate the server does not ask for is no obstacle
        assert capabilities(switch.grpc_addr, ca=certs.ca, cert=certs.client_cert,
                            key=certs.client_key) == "1.4.1"


def test_tls_mutual_refuses_clients_without_the_cas_certificate(certs):
    with SwitchProcess(["--no-p4", "--grpc-server-ssl", "--grpc-server-cert",
                        str(certs.server_cert), "--grpc-server-key", str(certs.server_key),
                        "--grpc-server-cacert", str(certs.ca),
                        "--grpc-server-with-client-auth"]) as switch:
        addr = switch.grpc_addr
        assert capabilities(addr, ca=certs.ca, cert=certs.client_cert,
                            key=certs.client_key) == "1.4.1"
        assert refused(addr) == grpc.StatusCode.UNAVAILABLE
        assert refused(addr, ca=certs.ca) == grpc.StatusCode.UNAVAILABLE
        assert refused(addr, ca=certs.ca, cert=certs.rogue_cert,
                       key=certs.rogue_key) == grpc.StatusCode.UNAVAILABLE
    assert not any("warning" in line for line in switch.output), switch.output


def test_tls_plaintext_off_loopback_is_warned_about():
    # 0.0.0.0 with port 0: bound for a moment, nothing is sent to it
    with SwitchProcess(["--no-p4", "--grpc-addr", "0.0.0.0:0"]) as switch:
        pass
    assert any("warning: P4Runtime on 0.0.0.0:0 without TLS" in line
               for line in switch.output), switch.output
    assert is_loopback("127.0.0.1:9559") and is_loopback("[::1]:1") \
        and is_loopback("localhost:1")
    assert not is_loopback("0.0.0.0:9559") and not is_loopback("[::]:1")


@pytest.mark.parametrize("args, message", [
    (["--grpc-server-cert", "{server_cert}"], "--grpc-server-cert without --grpc-server-ssl"),
    (["--grpc-server-with-client-auth"], "--grpc-server-with-client-auth without"),
    (["--grpc-server-ssl"], "needs --grpc-server-cert and --grpc-server-key"),
    (["--grpc-server-ssl", "--grpc-server-cert", "{server_cert}", "--grpc-server-key",
      "{client_key}"], "with key"),
    (["--grpc-server-ssl", "--grpc-server-cert", "{server_cert}", "--grpc-server-key",
      "{server_key}", "--grpc-server-with-client-auth"], "--grpc-server-cacert"),
    (["--grpc-server-ssl", "--grpc-server-cert", "{server_cert}", "--grpc-server-key",
      "{server_key}", "--grpc-server-cacert", "{server_key}"], "CA certificate"),
])
def test_tls_bad_options_are_refused_before_anything_opens(certs, args, message):
    paths = {k: str(v) for k, v in vars(certs).items()}
    result = CliRunner().invoke(run_command, ["--no-p4", *(a.format(**paths) for a in args)])
    assert result.exit_code == 2, result.output
    assert message in result.output, result.output
