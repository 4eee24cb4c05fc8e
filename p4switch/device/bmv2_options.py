"""simple_switch_grpc's command-line options that p4switch takes as BMv2 does but that have no
counterpart of their own: what each does here, and the target options BMv2 reads after `--`.

Every option is either carried out or answered with one line on stderr saying what p4switch
does instead (NOTES); options whose BMv2 behaviour p4switch cannot give at all (packets from
files or nanomsg) are refused (REFUSED), so that nothing silently behaves differently."""
from __future__ import annotations

import sys

import click

# BMv2's log levels, most verbose first; p4switch's per-packet lines are BMv2's debug/trace
# messages, its start-up and pipeline lines its info messages.
LOG_LEVELS = ("trace", "debug", "info", "warn", "error", "off")
PER_PACKET_LEVELS = ("trace", "debug")

NOTES = {
    "nanolog": "p4switch has no nanomsg event logger; per-packet events go to --log-console "
               "or --log-file",
    "notifications_addr": "p4switch sends learning and ageing notifications over P4Runtime "
                          "only (digests, idle-timeout notifications), not over nanomsg",
    "debugger": "p4switch has no BMv2 debugger; --log-console shows each packet's path",
    "debugger_addr": "p4switch has no BMv2 debugger; --log-console shows each packet's path",
    "restore_state": "p4switch cannot read BMv2's serialized state; it starts with the "
                     "program's initial state",
    "log_file_max_size": "p4switch does not rotate its log file; it appends to one file",
    "log_file_max_files": "p4switch does not rotate its log file; it appends to one file",
    "disable_swap": "p4switch always replaces a pipeline whole on SetForwardingPipelineConfig",
    "priority_queues": "p4switch has one egress queue per port (no v1model priority queues)",
    "max_mc_groups": "p4switch bounds multicast groups by memory only",
    "max_l1_entries": "p4switch bounds multicast nodes by memory only",
    "max_l2_entries": "p4switch bounds multicast nodes by memory only",
}
REFUSED = {
    "use_files": "p4switch reads and writes packets only on Linux interfaces (-i PORT@IF), "
                 "not from pcap files (--use-files)",
    "packet_in": "p4switch reads and writes packets only on Linux interfaces (-i PORT@IF), "
                 "not on a nanomsg socket (--packet-in)",
    "dp_grpc_server_addr": "p4switch reads and writes packets only on Linux interfaces "
                           "(-i PORT@IF), not over a dataplane gRPC channel "
                           "(--dp-grpc-server-addr)",
}


def note(message: str) -> None:
    print(f"p4switch: {message}", file=sys.stderr, flush=True)


def switch_options(f):
    """BMv2's general options (options_parse.cpp) that p4switch's own set lacks."""
    opts = [
        click.option("--thrift-port", type=click.IntRange(0, 65535), default=None,
                     help="TCP port of the Thrift runtime server (simple_switch_CLI); default "
                     "9090 as BMv2, on 127.0.0.1 (--thrift-addr); 0 = any free port."),
        click.option("--thrift-addr", default="127.0.0.1", show_default=True,
                     help="Address the Thrift server binds (BMv2 binds every address)."),
        click.option("-L", "--log-level", type=click.Choice(LOG_LEVELS), default="trace",
                     show_default=True, help="trace/debug: per-packet lines; info and above: "
                     "start-up and pipeline lines only (no per-packet cost)."),
        click.option("--log-flush", is_flag=True, help="Flush the log file after every line "
                     "(p4switch always does)."),
        click.option("--log-file-max-size", type=click.IntRange(1), default=None,
                     help="BMv2's log rotation (p4switch appends to one file)"),
        click.option("--log-file-max-files", type=click.IntRange(0), default=None,
                     help="BMv2's log rotation (p4switch appends to one file)"),
        click.option("--dump-packet-data", type=click.IntRange(0), default=0,
                     metavar="BYTES", help="Log the first BYTES of every packet received and "
                     "sent (needs a log and -L info or below)."),
        click.option("--use-files", type=int, default=None, hidden=True),
        click.option("--packet-in", default=None, hidden=True),
        click.option("--nanolog", default=None, metavar="ADDR",
                     help="BMv2's nanomsg event log (not in p4switch: a note says so)"),
        click.option("--notifications-addr", default=None, metavar="ADDR",
                     help="BMv2's nanomsg notifications (p4switch: over P4Runtime)"),
        click.option("--debugger", is_flag=True, default=False,
                     help="BMv2's debugger (not in p4switch)"),
        click.option("--debugger-addr", default=None, metavar="ADDR",
                     help="BMv2's debugger (not in p4switch)"),
        click.option("--restore-state", type=click.Path(exists=True, dir_okay=False),
                     default=None, help="BMv2's serialized state (p4switch cannot read it)"),
        click.option("--max-port-count", type=int, default=512, show_default=True,
                     help="Most interfaces the switch takes."),
        click.option("-v", "--version", "show_version", is_flag=True,
                     help="Print the version and exit."),
        click.option("--json-version", is_flag=True,
                     help="Print the BMv2 JSON format version read, and exit."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


@click.command("simple_switch_grpc target options", add_help_option=False,
               context_settings={"help_option_names": []})
@click.option("--grpc-server-addr", default=None)
@click.option("--grpc-server-ssl", "server_ssl", is_flag=True, default=False)
@click.option("--grpc-server-cacert", type=click.Path(exists=True, dir_okay=False))
@click.option("--grpc-server-cert", type=click.Path(exists=True, dir_okay=False))
@click.option("--grpc-server-key", type=click.Path(exists=True, dir_okay=False))
@click.option("--grpc-server-with-client-auth", "client_auth", is_flag=True, default=False)
@click.option("--cpu-port", type=click.IntRange(1, 511), default=None)
@click.option("--drop-port", type=click.IntRange(0, 511), default=None)
@click.option("--dp-grpc-server-addr", default=None)
@click.option("--priority-queues", type=click.IntRange(1), default=None)
@click.option("--max-mc-groups", type=click.IntRange(1), default=None)
@click.option("--max-l1-entries", type=click.IntRange(1), default=None)
@click.option("--max-l2-entries", type=click.IntRange(1), default=None)
@click.option("--disable-swap", is_flag=True, default=False)
def _target_command(**kwargs):
    return kwargs


def target_options(args: tuple[str, ...]) -> dict:
    """Parse what follows `--` as simple_switch_grpc's target parser does; -> option values
    (None/False where not given). A bad target option is a usage error naming it."""
    try:
        ctx = _target_command.make_context("--", list(args), resilient_parsing=False)
    except click.UsageError as exc:
        raise click.UsageError(f"after '--' (simple_switch_grpc's target options): "
                               f"{exc.format_message()}") from None
    except click.exceptions.Exit:
        return {}
    return dict(ctx.params)


def check_refused(values: dict) -> None:
    for name, reason in REFUSED.items():
        if values.get(name) is not None:
            raise click.UsageError(reason)


def report_notes(values: dict) -> None:
    """One stderr line for each given option p4switch answers differently from BMv2."""
    for name, message in NOTES.items():
        value = values.get(name)
        if value not in (None, False):
            note(f"--{name.replace('_', '-')}: {message}")
