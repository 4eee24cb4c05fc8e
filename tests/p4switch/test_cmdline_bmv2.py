"""`p4switch run` takes simple_switch_grpc's whole command line: BMv2's general options, a
positional program and the target's options after `--`. Each option is carried out, or
answered with one stderr line saying what p4switch does instead, or refused with a precise
error; none is silently ignored."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest
from bmv2_json_docs import base, table
from click.testing import CliRunner

from p4switch.device.cli import run_command
from p4switch.device.process import SwitchProcess

PROGRAMS = pathlib.Path(__file__).parent / "device_programs"


@pytest.mark.parametrize("args, message", [
    (["--no-p4", "--use-files", "0"], "not from pcap files (--use-files)"),
    (["--no-p4", "--packet-in", "ipc:///tmp/x"], "not on a nanomsg socket"),
    (["--no-p4", "--", "--dp-grpc-server-addr", "127.0.0.1:1"], "dataplane gRPC channel"),
    (["--no-p4", "--", "--drop-port", "500"], "drop port is 511"),
    (["--no-p4", "--", "--cpu-port", "0"], "'--cpu-port'"),
    (["--no-p4", "--", "--no-such-option"], "after '--' (simple_switch_grpc's target"),
    (["--no-p4", "-L", "loud"], "loud"),
    (["--no-p4", "--log-console", "--log-file", "x.log"], "exclusive"),
    (["--no-p4", "--pcap", "/no/such/dir"], "does not exist"),
    (["--no-p4", "--max-port-count", "0", "-i", "1@lo"], "more than 0"),
    (["--no-p4", "--grpc-addr", "127.0.0.1:1", "--", "--grpc-server-addr", "127.0.0.1:2"],
     "both before and after '--'"),
    (["--no-p4", "prog.p4"], "unexpected argument 'prog.p4' with --no-p4"),
    (["no-such-program.p4"], "is not a file"),
])
def test_cmdline_refusals_name_the_option(args, message):
    result = CliRunner().invoke(run_command, args)
    assert result.exit_code != 0
    assert message in result.output, result.output
    assert "Traceback" not in result.output


def test_cmdline_bad_bmv2_json_program_names_the_object(tmp_path):
    prog = tmp_path / "prog.json"
    doc = base()
    doc["pipelines"][0]["tables"].append({"name": "t"})          # a table without its fields
    prog.write_text(json.dumps(doc))
    result = CliRunner().invoke(run_command, [str(prog)])
    assert result.exit_code == 1
    last = result.output.strip().splitlines()[-1]
    assert last.startswith(f"Error: {prog}: p4_device_config.pipelines[0].tables[0]"), last


def test_cmdline_bmv2_json_program_runs_and_is_what_thrift_serves(tmp_path):
    """A positional BMv2 JSON is the switch's program: bm_get_config serves its very text,
    and simple_switch_CLI fills its table by the JSON's names."""
    doc = base()
    doc["pipelines"][0]["tables"].append(table(
        "ingress.t", 0, [{"match_type": "exact", "name": "h.a", "target": ["h", "a"],
                          "mask": None}], [1, 0], ["ingress.fwd", "NoAction"],
        default=(0, False, [])))
    doc["pipelines"][0]["init_table"] = "ingress.t"
    prog = tmp_path / "prog.json"
    prog.write_text(json.dumps(doc, indent=2))
    with SwitchProcess([str(prog), "--backend", "python"]) as switch:
        port = switch.thrift_addr.rsplit(":", 1)[1]
        cli = subprocess.run([sys.executable, "-m", "p4switch.runtime_cli.main", "--thrift-port",
                              port, "--json", str(prog)], text=True, capture_output=True,
                             input="table_add ingress.t ingress.fwd 5 => 3\ntable_dump t\n",
                             timeout=60)
    assert "WARNING" not in cli.stdout                      # the switch serves the same md5
    assert "Entry has been added with handle 0" in cli.stdout, cli.stdout
    assert "* h.a                 : EXACT     05" in cli.stdout
    assert "Action entry: ingress.fwd - 03" in cli.stdout


def test_cmdline_version_exits_at_once():
    result = CliRunner().invoke(run_command, ["-v"])
    assert result.exit_code == 0 and result.output.startswith("p4switch ")


def test_cmdline_simple_switch_grpc_spelling_starts_and_explains(tmp_path):
    """p4net's command line plus every option p4switch answers differently: the switch
    starts, serves P4Runtime and Thrift where asked, and says one line per such option."""
    state = tmp_path / "state"
    state.write_text("")
    args = ["--device-id", "3", "--log-console", "--log-flush", "-L", "info",
            "--nanolog", "ipc:///tmp/x.ipc", "--notifications-addr", "ipc:///tmp/y.ipc",
            "--debugger", "--restore-state", str(state), "--dump-packet-data", "32",
            "--log-file-max-files", "2", "--pcap", str(tmp_path),
            str(PROGRAMS / "runtime.p4"), "--",
            "--cpu-port", "510", "--drop-port", "511", "--priority-queues", "1",
            "--max-mc-groups", "16", "--max-l1-entries", "8", "--max-l2-entries", "8",
            "--disable-swap"]
    with SwitchProcess(args) as switch:
        assert switch.thrift_addr and switch.thrift_addr.startswith("127.0.0.1:")
        ready = next(line for line in switch.output if "listening on" in line)
        assert "device 3" in ready and "cpu port 510" in ready
        # -L info: no per-packet log, so nothing forces the Python backend but --pcap
        assert "python backend" in ready
    out = "".join(switch.output)
    for option, words in [
            ("--log-flush", "because --log-file is not given"),
            ("--nanolog", "no nanomsg event logger"),
            ("--notifications-addr", "over P4Runtime only"),
            ("--debugger", "no BMv2 debugger"),
            ("--restore-state", "cannot read BMv2's serialized state"),
            ("--log-file-max-files", "does not rotate"),
            ("--priority-queues", "one egress queue per port"),
            ("--max-mc-groups", "by memory only"),
            ("--disable-swap", "replaces a pipeline whole")]:
        line = next((ln for ln in switch.output if option in ln or words in ln), None)
        assert line is not None and words in line, f"{option}: {out}"
    assert "Traceback" not in out


def test_cmdline_log_level_chooses_per_packet_lines():
    """-L trace (BMv2's default) keeps the per-packet log, so --log-console needs the Python
    backend; -L info and above log no packets and leave the backend to choose."""
    from p4switch.native import available
    if not available():
        pytest.skip("the native backend needs a C compiler")
    runner = CliRunner()
    for level, python_only in (("trace", True), ("debug", True), ("info", False),
                               ("off", False)):
        result = runner.invoke(run_command, ["--no-p4", "--log-console", "-L", level,
                                             "--backend", "native", "--grpc-addr",
                                             "256.0.0.1:1"])
        refused = "need --backend python" in result.output
        assert refused == python_only, (level, result.output)
