"""fabricd: the fabric controller daemon's command line.

fabricd holds one P4Runtime session per switch (primary, election id `--election-id`), keeps
the operator's intent (`intent.Intent`), turns it into the entries every switch must hold
(`encode_fabric.intended_states`) and reconciles each switch to exactly those entries. The
parts: `fabricd_state.Fabric` (intent, devices, changes), `fabricd_watchdog` (switches whose
session broke), `fabricd_service` (the gRPC API) and this module (options, the pipeline, start and stop).

The pipeline is given as compiled artifacts (`--p4info` and `--config`, from `p4switch
compile` or `p4c-bm2-ss --p4runtime-files`) or compiled at start by a compiler command run as
a subprocess (`--compiler`, default `p4switch compile`), so the controller depends on no
target's internals and drives p4switch and BMv2 alike.

Exit codes: 0 stopped by a signal; 1 a start-up input that does not work (a --state file that
is not fabricd's, a pipeline that does not compile or load, an address that cannot be bound),
said in one line; 2 a malformed command line (an address that is not HOST:PORT with a port in
0..65535, options that go together). Every input is checked before any switch is written.
"""
from __future__ import annotations

import logging
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import click

import grpctls
from controller import encode_fabric
from controller.fabricd_service import serve
from controller.fabricd_state import Fabric
from controller.fabricd_watchdog import Watchdog
from controller.intent import Intent, IntentError
from controller.liveview.server import WebServer
from controller.p4rt import Pipeline, Schema

DEFAULT_LISTEN = "127.0.0.1:50100"
REPO = Path(__file__).resolve().parents[1]
DEFAULT_PROGRAM = REPO / "p4src" / "fabric.p4"
# {program}, {p4info} and {config} are replaced by paths. For BMv2:
#   p4c-bm2-ss --p4runtime-files {p4info} -o {config} {program}
DEFAULT_COMPILER = "p4switch compile {program} --p4info {p4info} --config {config}"
COMPILER_FIELDS = ("{program}", "{p4info}", "{config}")


def _executable(name: str) -> str | None:
    """A program on PATH, or next to this Python (the venv's console scripts when fabricd
    runs as `python -m controller.fabricd` without the venv on PATH)."""
    return shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))


def compile_pipeline(program: Path, compiler: str) -> Pipeline:
    """Run `compiler` on `program` in a scratch directory and load what it wrote."""
    missing = [f for f in COMPILER_FIELDS if f not in compiler]
    if missing:
        raise click.BadParameter(f"{compiler!r} lacks {', '.join(missing)}",
                                 param_hint="--compiler")
    with tempfile.TemporaryDirectory(prefix="fabricd-p4-") as tmp:
        p4info, config = Path(tmp) / "p4info.txt", Path(tmp) / "device_config.json"
        argv = [arg.format(program=program, p4info=p4info, config=config)
                for arg in shlex.split(compiler)]
        exe = _executable(argv[0])
        if exe is None:
            raise click.ClickException(f"compiler {argv[0]!r} is not on PATH (--compiler)")
        done = subprocess.run([exe, *argv[1:]], capture_output=True, text=True)
        if done.returncode != 0:
            raise click.ClickException(f"{shlex.join(argv)} failed with exit "
                                       f"{done.returncode}:\n{(done.stderr or done.stdout).strip()}")
        for path in (p4info, config):
            if not path.exists():
                raise click.ClickException(f"{shlex.join(argv)} wrote no {path.name}")
        return Pipeline.from_files(p4info, config)


def load_pipeline(program: Path | None, p4info: Path | None, config: Path | None,
                  compiler: str = DEFAULT_COMPILER) -> Pipeline:
    if p4info or config:
        if not (p4info and config):
            raise click.UsageError("--p4info and --config go together")
        if program:
            raise click.UsageError("give --p4 (compiled at start) or --p4info/--config, "
                                   "not both")
        return Pipeline.from_files(p4info, config)
    return compile_pipeline(program or DEFAULT_PROGRAM, compiler)


def switch_addresses(intent: Intent, overrides: tuple[str, ...]) -> dict[str, str]:
    addresses = {name: f"127.0.0.1:{sw.grpc_port}" for name, sw in intent.topo.switches.items()}
    for item in overrides:
        name, sep, addr = item.partition("=")
        if not sep or name not in addresses:
            raise click.BadParameter(f"{item!r}: expected SWITCH=HOST:PORT with a switch of "
                                     f"the topology", param_hint="--switch")
        addresses[name] = addr
    return addresses


def tls_settings(cert, key, client_ca, switch_ca, switch_cert, switch_key):
    """-> (ServerTLS of the API or None, ClientTLS toward the switches or None); a missing
    half of a pair, or a PEM file that does not load, is a usage error."""
    if (cert is None) != (key is None):
        raise click.UsageError("--tls-cert and --tls-key go together")
    if client_ca and not cert:
        raise click.UsageError("--tls-client-ca needs --tls-cert and --tls-key")
    if (switch_cert or switch_key) and not switch_ca:
        raise click.UsageError("--switch-cert/--switch-key need --switch-ca")
    try:
        api_tls = (grpctls.ServerTLS.from_files(cert, key, client_ca,
                                                 client_auth=client_ca is not None)
                   if cert else None)
        switch_tls = (grpctls.ClientTLS.from_files(switch_ca, switch_cert, switch_key)
                      if switch_ca else None)
    except ValueError as err:
        raise click.UsageError(str(err)) from None
    return api_tls, switch_tls


def _address(ctx, param, value):
    """HOST:PORT with a port in 0..65535 (0: any free port), checked before anything starts."""
    if value is None:
        return value
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise click.BadParameter(f"{value!r}: expected HOST:PORT with a port in 0..65535")
    return value


def load_intent(state_path: Path | None, topo_path: Path | None, limits) -> Intent:
    """The intent of an existing --state file, else of --topology; one line for a file that
    is neither."""
    try:
        if state_path and state_path.exists():
            try:
                return Intent.from_json(state_path.read_text(), *limits)
            except (ValueError, KeyError, TypeError, AttributeError) as err:
                raise click.ClickException(
                    f"--state {state_path}: not a fabricd state file ({type(err).__name__}: "
                    f"{str(err)[:200]}); move it away to start from --topology") from None
        if topo_path:
            return Intent.from_yaml(topo_path.read_text(), limits[0], str(topo_path), limits[1])
    except IntentError as err:
        raise click.ClickException(str(err)) from None
    except (OSError, UnicodeDecodeError) as err:
        raise click.ClickException(f"cannot read {state_path or topo_path}: {err}") from None
    raise click.UsageError("give --topology (or a --state file that exists)")


def start_web(fabric: Fabric, listen: str) -> WebServer:
    try:
        web = WebServer(fabric, listen).start()
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--web") from None
    host = listen.rpartition(":")[0]
    click.echo(f"fabricd: live view on http://{host}:{web.port}/", err=True)
    return web


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--topology", "topo_path", type=click.Path(exists=True, dir_okay=False,
              path_type=Path), help="Topology YAML (ignored when --state holds one).")
@click.option("--state", "state_path", type=click.Path(dir_okay=False, path_type=Path),
              help="JSON file keeping the intent across restarts.")
@click.option("--p4", "program", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help=f"P4 program, compiled at start with --compiler (default "
                   f"{DEFAULT_PROGRAM.relative_to(REPO)}).")
@click.option("--compiler", default=DEFAULT_COMPILER, show_default=True,
              help="Command compiling --p4; {program}, {p4info} and {config} are replaced "
                   "by paths (BMv2: 'p4c-bm2-ss --p4runtime-files {p4info} -o {config} "
                   "{program}').")
@click.option("--p4info", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Compiled P4Info (text, or binary if named .bin/.pb), with --config.")
@click.option("--config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Compiled device config (p4switch compile --config or p4c-bm2-ss -o JSON).")
@click.option("--switch", "overrides", multiple=True, metavar="NAME=HOST:PORT",
              help="P4Runtime address of a switch (default 127.0.0.1:grpc_port_base+id).")
@click.option("--listen", default=DEFAULT_LISTEN, show_default=True, callback=_address,
              help="Address of the northbound API (port 0 picks a free one).")
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Serve the API over TLS with this PEM certificate (and --tls-key).")
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="PEM private key of --tls-cert.")
@click.option("--tls-client-ca", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Require API clients to show a certificate signed by this CA (mutual TLS).")
@click.option("--switch-ca", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Connect to the switches over TLS, verifying them against this CA.")
@click.option("--switch-cert", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="PEM client certificate shown to switches that require one (with "
                   "--switch-key and --switch-ca).")
@click.option("--switch-key", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="PEM private key of --switch-cert.")
@click.option("--port-file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the bound API port here once serving.")
@click.option("--election-id", default=1, show_default=True, type=click.IntRange(1))
@click.option("--resync-period", default=1.0, show_default=True, type=float,
              help="Seconds between checks for broken switch sessions.")
@click.option("--switch-timeout", default=10.0, show_default=True, type=float,
              help="Seconds to wait for a switch to answer.")
@click.option("--ecn-threshold", default=32, show_default=True, type=click.IntRange(0),
              help="Queue depth (packets) at which egress marks ECN CE on every port.")
@click.option("--ecn-delay-us", default=0, show_default=True, type=click.IntRange(0),
              help="Mark ECN CE at this queueing delay (microseconds) instead of a queue "
                   "depth: bytes queued ahead on a port of fixed rate, so that small packets "
                   "(ACKs) count for their size. 0: use --ecn-threshold.")
@click.option("--ecmp-mode", type=click.Choice(sorted(encode_fabric.ECMP_MODES)),
              default="hash", show_default=True,
              help="How ECMP groups pick a member: per flow (hash) or per packet (baselines).")
@click.option("--web", metavar="HOST:PORT", callback=_address,
              help="Serve the live view (topology, link loads, who uses each link) here, "
                   "e.g. 127.0.0.1:8080. Off by default.")
@click.option("-v", "--verbose", is_flag=True)
def main(**given):
    """Run the fabric controller: connect to every switch and serve the fabric API."""
    run(FabricdOptions(**given))


@dataclass(frozen=True)
class FabricdOptions:
    """fabricd's command line as click checked it, one field per option."""
    topo_path: Path | None
    state_path: Path | None
    program: Path | None
    compiler: str
    p4info: Path | None
    config: Path | None
    overrides: tuple[str, ...]        # NAME=HOST:PORT
    listen: str
    tls_cert: Path | None
    tls_key: Path | None
    tls_client_ca: Path | None
    switch_ca: Path | None
    switch_cert: Path | None
    switch_key: Path | None
    port_file: Path | None
    election_id: int
    resync_period: float
    switch_timeout: float
    ecn_threshold: int
    ecn_delay_us: int
    ecmp_mode: str
    web: str | None
    verbose: bool


def run(opts: FabricdOptions) -> None:
    """Start, serve until SIGINT or SIGTERM, stop (exit 0)."""
    logging.basicConfig(level=logging.INFO if opts.verbose else logging.WARNING,
                        format="fabricd: %(message)s")
    api_tls, switch_tls = tls_settings(opts.tls_cert, opts.tls_key, opts.tls_client_ca,
                                       opts.switch_ca, opts.switch_cert, opts.switch_key)
    pipeline = load_pipeline(opts.program, opts.p4info, opts.config, opts.compiler)
    schema = Schema(pipeline.p4info)
    limits = (encode_fabric.slot_capacity(schema), encode_fabric.max_workers(schema))
    intent = load_intent(opts.state_path, opts.topo_path, limits)
    intent.ecn_threshold, intent.ecn_delay_us = opts.ecn_threshold, opts.ecn_delay_us
    intent.ecmp_mode = opts.ecmp_mode
    fabric = Fabric(intent, pipeline, switch_addresses(intent, opts.overrides), opts.state_path,
                    opts.election_id, opts.switch_timeout, switch_tls)
    fabric.save()
    web_server = start_web(fabric, opts.web) if opts.web else None  # a bad --web before a push
    watchdog = Watchdog(fabric, opts.resync_period)  # before the sessions open: none unseen
    for result in fabric.sync_all():
        status = result.error or (f"{result.inserted} inserted, {result.modified} modified, "
                                  f"{result.deleted} deleted")
        click.echo(f"fabricd: {result.switch}: {status}", err=True)
    try:
        server, port = serve(fabric, opts.listen, api_tls)
    except (click.ClickException, RuntimeError) as err:
        if web_server:
            web_server.stop()
        raise click.ClickException(f"--listen {opts.listen}: cannot listen "
                                   f"({getattr(err, 'message', err)})") from None
    if opts.port_file:
        opts.port_file.write_text(f"{port}\n")
    click.echo(f"fabricd: serving {intent.topo.name} on {opts.listen.rsplit(':', 1)[0]}:{port}",
               err=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    threading.Thread(target=watchdog.run, args=(stop,), daemon=True).start()
    stop.wait()
    server.stop(grace=1).wait()
    if web_server:
        web_server.stop()
    fabric.close()
    sys.exit(0)


if __name__ == "__main__":
    main()
