"""Bad start-up and command-line input to fabricd and fabricctl (malformed): one error line,
the documented exit code, no traceback, and for fabricd nothing pushed to any switch."""
import socket
import subprocess
import sys

import pytest
from click.testing import CliRunner
from test_fabricd_api import P4INFO, REPO, TOPO, free_port

from controller import fabricctl


def fabricd(tmp_path, *args, state_text=None):
    """fabricd with switches nobody serves; -> (exit code, stderr)."""
    config = tmp_path / "config.json"
    config.write_text("{}")
    state = tmp_path / "state.json"
    if state_text is not None:
        state.write_text(state_text)
    cmd = [sys.executable, "-m", "controller.fabricd", "--topology", str(TOPO), "--state",
           str(state), "--p4info", str(P4INFO), "--config", str(config), "--switch-timeout",
           "0.2", *args]
    for name in ("leaf1", "leaf2", "spine1", "spine2"):
        cmd += ["--switch", f"{name}=127.0.0.1:{free_port()}"]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stderr


def one_error(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("Error")]
    assert len(errors) == 1, stderr
    return errors[0]


@pytest.mark.parametrize("text", ["", '{"topology": 7}'])
def test_malformed_state_file_one_line_exit_1(tmp_path, text):
    code, err = fabricd(tmp_path, "--listen", "127.0.0.1:0", state_text=text)
    assert code == 1 and "not a fabricd state file" in one_error(err), err
    assert "leaf1:" not in err                    # no switch was written


@pytest.mark.parametrize("option", ["--listen", "--web"])
def test_malformed_addresses_refused_before_anything_starts(tmp_path, option):
    for value in ("127.0.0.1:99999", "127.0.0.1") if option == "--listen" else ("h:x",):
        args = ["--listen", "127.0.0.1:0", option, value] if option == "--web" else \
            [option, value]
        code, err = fabricd(tmp_path, *args)
        assert code == 2 and "0..65535" in one_error(err), (value, err)
        assert "leaf1:" not in err


def test_malformed_web_port_in_use_refused_before_pushing(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        code, err = fabricd(tmp_path, "--listen", "127.0.0.1:0", "--web",
                            f"127.0.0.1:{busy.getsockname()[1]}")
    assert code == 2 and "cannot listen" in one_error(err), err
    assert "leaf1:" not in err


@pytest.mark.parametrize("args", [
    ["slice", "create", "s", str(2**32)],
    ["job", "create", "j", "h1", "h2", "--kind", "switchml", "--slots", str(2**40)],
    ["step", "install", "s", "--flow", f"h1:h3:{2**64}"],
    ["--timeout", "-1", "state"],
    ["--timeout", "nan", "state"],
])
def test_malformed_fabricctl_numbers_beyond_protocol_types(args):
    result = CliRunner().invoke(fabricctl.main, ["--server", "127.0.0.1:1", *args])
    assert isinstance(result.exception, SystemExit) and result.exit_code == 2, result.output
    assert "Traceback" not in result.output


def test_malformed_fabricctl_flow_file_numbers(tmp_path):
    path = tmp_path / "flows.yaml"
    path.write_text(f"flows:\n  - {{src: h1, dst: h3, bytes: 10, dst_qp: {2**40}}}\n")
    result = CliRunner().invoke(fabricctl.main, ["--server", "127.0.0.1:1", "step", "install",
                                                 "s", "--file", str(path)])
    assert isinstance(result.exception, SystemExit) and result.exit_code == 2, result.output
