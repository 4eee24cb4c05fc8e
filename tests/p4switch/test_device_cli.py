"""`p4switch run` rejects bad command lines with a precise message before opening anything, and
stops cleanly on SIGINT/SIGTERM."""
import signal

import pytest
from click.testing import CliRunner

from p4switch.device.cli import run_command
from p4switch.device.process import SwitchProcess


@pytest.mark.parametrize("args, message", [
    ([], "either PROGRAM or --no-p4"),
    (["--no-p4", "-i", "veth1"], "not PORT@INTERFACE"),
    (["--no-p4", "-i", "x@lo"], "not PORT@INTERFACE"),
    (["--no-p4", "-i", "1@lo", "-i", "1@lo"], "port 1 is given twice"),
    (["--no-p4", "-i", "600@lo"], "ports are 9-bit"),
    (["--no-p4", "-i", "1@no-such-if0"], "'no-such-if0' does not exist"),
    (["--no-p4", "-i", "5@lo", "--cpu-port", "5"], "both the CPU port and an interface"),
    (["--no-p4", "--queue-rate", "fast"], "is not [PORT=]RATE"),
    (["--no-p4", "--queue-rate", "2=-5pps"], "is not [PORT=]RATE"),
    (["--no-p4", "--queue-depth", "2=0"], "out of range"),
    (["--no-p4", "--cpu-port", "600"], "600"),
    (["--no-p4", "--grpc-addr", "256.1.1.1:1"], "bind"),
])
def test_bad_command_lines(args, message):
    result = CliRunner().invoke(run_command, args)
    assert result.exit_code != 0
    assert message in result.output, result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_clean_shutdown_on_signal(sig):
    with SwitchProcess(["--no-p4"]) as switch:
        switch.proc.send_signal(sig)
        assert switch.proc.wait(timeout=10) == 0
    assert any("shutting down" in line for line in switch.output)
    assert not any("Traceback" in line for line in switch.output)


def test_bad_program_is_reported_with_its_position(tmp_path):
    bad = tmp_path / "bad.p4"
    bad.write_text("#include <core.p4>\n#include <v1model.p4>\ncontrol C() { apply { x = ; } }\n")
    result = CliRunner().invoke(run_command, [str(bad)])
    assert result.exit_code != 0
    assert f"{bad}:3:" in result.output, result.output
    assert "Traceback" not in result.output
