"""TLS end to end: p4switch processes that require mutual TLS, fabricd connecting to them with
its client certificate and serving its API over mutual TLS, fabricctl with a CA and a client
certificate. A TLS client is served; a plaintext client, and a client without a certificate of
the configured CA, are refused, on fabricd's API and on the switches' P4Runtime alike.
Certificates are made at run time (tests/tls_certs.py)."""
from __future__ import annotations

from concurrent import futures

import grpc
import pytest
from click.testing import CliRunner

from controller import fabricctl, fabricd
from controller.p4rt import Device, P4RuntimeError
from controller.tls import bind
from grpctls import ClientTLS
from p4switch.device.process import SwitchProcess
from tests.fabricd_process import Fabricd, difference, intended, read_back
from tests.tls_certs import make_certs

pytestmark = pytest.mark.slow
# the smallest fabric fabricd accepts: two switches
TOPOLOGY = "name: tls\nkind: leaf-spine\nleaves: 1\nspines: 1\nhosts_per_leaf: 2\n"
DEVICE_IDS = {"leaf1": 1, "spine1": 2}


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("tls"))


def ctl(server, *args, expect=0):
    result = CliRunner().invoke(fabricctl.main, ["--server", server, "--timeout", "30", *args])
    assert result.exit_code == expect, (args, result.exit_code, result.output)
    return result.output


def test_tls_fabricd_and_switches_serve_tls_clients_and_refuse_the_others(
        tmp_path, compiled_fabric, certs):
    topology = tmp_path / "tls.yaml"
    topology.write_text(TOPOLOGY)
    server_tls = ["--grpc-server-ssl", "--grpc-server-cert", str(certs.server_cert),
                  "--grpc-server-key", str(certs.server_key), "--grpc-server-cacert",
                  str(certs.ca), "--grpc-server-with-client-auth"]
    switches = {name: SwitchProcess(["--no-p4", "--device-id", str(dev), *server_tls])
                for name, dev in DEVICE_IDS.items()}
    daemon = None
    try:
        for sw in switches.values():
            sw.__enter__()
        addresses = {name: sw.grpc_addr for name, sw in switches.items()}
        daemon = Fabricd(tmp_path, compiled_fabric, addresses, topology, extra=(
            "--tls-cert", str(certs.server_cert), "--tls-key", str(certs.server_key),
            "--tls-client-ca", str(certs.ca), "--switch-ca", str(certs.ca),
            "--switch-cert", str(certs.client_cert), "--switch-key", str(certs.client_key)))
        server = daemon.start()
        # fabricd -> switch over mutual TLS: the pipeline and every entry went in
        report = daemon.startup_report()
        assert all("inserted" in report[n] for n in DEVICE_IDS), report
        mine = ClientTLS.from_files(certs.ca, certs.client_cert, certs.client_key)
        got = read_back(addresses, DEVICE_IDS, compiled_fabric[2], tls=mine)
        want = intended(tmp_path / "state.json", compiled_fabric[2])
        for name in DEVICE_IDS:
            assert difference(want[name], got[name]) == \
                {"duplicated": 0, "missing": 0, "stale": 0}
            assert got[name].size() > 0

        # fabricctl -> fabricd: served with the CA and a client certificate ...
        creds = ["--ca", str(certs.ca), "--cert", str(certs.client_cert),
                 "--key", str(certs.client_key)]
        assert '"connected": true' in ctl(server, *creds, "--json", "state")
        # ... refused in plaintext, without a certificate, or with another CA's (exit 7:
        # the handshake fails, the API is unreachable)
        ctl(server, "state", expect=7)
        ctl(server, "--ca", str(certs.ca), "state", expect=7)
        ctl(server, "--ca", str(certs.ca), "--cert", str(certs.rogue_cert),
            "--key", str(certs.rogue_key), "state", expect=7)

        # a P4Runtime client of the switches without the right certificate is refused
        pipeline = compiled_fabric[2]
        for tls in (None, ClientTLS.from_files(certs.ca),
                    ClientTLS.from_files(certs.ca, certs.rogue_cert, certs.rogue_key)):
            dev = Device("leaf1", addresses["leaf1"], 1, pipeline, election_id=7, timeout=3,
                         tls=tls)
            with pytest.raises(P4RuntimeError):
                dev.connect()
            dev.close()
    finally:
        if daemon is not None:
            daemon.stop()
        for sw in switches.values():
            sw.stop()
    assert "without TLS" not in daemon.log.read_text()


def test_tls_fabricd_options_are_checked_at_start(certs):
    """A missing half of a pair or a PEM file that does not load: a usage error, before
    anything connects or listens."""
    runner = CliRunner()
    for args, message in (
            (["--tls-cert", str(certs.server_cert)], "--tls-cert and --tls-key go together"),
            (["--tls-client-ca", str(certs.ca)], "--tls-client-ca needs --tls-cert"),
            (["--switch-cert", str(certs.client_cert), "--switch-key", str(certs.client_key)],
             "need --switch-ca"),
            (["--tls-cert", str(certs.server_cert), "--tls-key", str(certs.client_key)],
             "with key"),
            (["--switch-ca", str(certs.client_key)], "CA certificate")):
        result = runner.invoke(fabricd.main, args)
        assert result.exit_code == 2 and message in result.output, (args, result.output)
    result = runner.invoke(fabricctl.main, ["--cert", str(certs.client_cert), "state"])
    assert result.exit_code == 2 and "--cert/--key need --ca" in result.output


def test_tls_plaintext_api_off_loopback_is_warned_about(caplog):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    try:
        # 0.0.0.0 with port 0: bound, never started, nothing is sent to it
        assert bind(server, "0.0.0.0:0", None, "fabricd's API") > 0
        assert bind(server, "127.0.0.1:0", None, "fabricd's API") > 0
    finally:
        server.stop(0)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == ["fabricd's API on 0.0.0.0:0 without TLS: anyone who reaches it can "
                        "change the fabric (--tls-cert/--tls-key)"], warnings
