"""`p4switch run`: the switch as a process, with the command line of simple_switch_grpc."""
from __future__ import annotations

import os
import signal
import socket
import sys
import threading

import click

from . import bmv2_options
from .native_device import IO_MODES
from .traffic_manager import parse_rate


def _port_spec(ctx, param, values):
    ports = {}
    for value in values:
        number, sep, ifname = value.partition("@")
        if not sep or not number.isdigit() or not ifname:
            raise click.BadParameter(f"'{value}' is not PORT@INTERFACE (e.g. 1@veth1)")
        if int(number) > 511:
            raise click.BadParameter(f"'{value}': ports are 9-bit, 0..511")
        if int(number) in ports:
            raise click.BadParameter(f"port {number} is given twice")
        try:
            socket.if_nametoindex(ifname)
        except OSError:
            raise click.BadParameter(f"interface '{ifname}' does not exist in this network "
                                     "namespace") from None
        ports[int(number)] = ifname
    return ports


def _per_port(kind, parse, minimum):
    def convert(ctx, param, values):
        settings = []
        for value in values:
            port, sep, amount = value.rpartition("=")
            try:
                settings.append((int(port) if sep else None, parse(amount)))
            except ValueError:
                raise click.BadParameter(f"'{value}' is not [PORT=]{kind}") from None
            if minimum is not None and settings[-1][1] < minimum:
                raise click.BadParameter(f"'{value}': {kind} out of range")
        return settings
    return convert


@click.command("run", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="[PROGRAM] [-- TARGET-OPTIONS]")
@click.option("--no-p4", is_flag=True, help="Start without a program; a controller pushes one "
              "with SetForwardingPipelineConfig.")
@click.option("-i", "--interface", "interfaces", multiple=True, callback=_port_spec,
              metavar="PORT@IFACE", help="Attach a Linux interface as switch port PORT.")
@click.option("--device-id", type=click.IntRange(0), default=0, show_default=True)
@click.option("--grpc-addr", "--grpc-server-addr", "grpc_addr", default=None,
              help="P4Runtime listen address [default: 127.0.0.1:9559] (port 0: any free port).")
@click.option("--grpc-server-ssl", "server_ssl", is_flag=True,
              help="Serve P4Runtime over TLS (needs --grpc-server-cert and --grpc-server-key).")
@click.option("--grpc-server-cert", type=click.Path(exists=True, dir_okay=False),
              help="PEM file holding the server certificate.")
@click.option("--grpc-server-key", type=click.Path(exists=True, dir_okay=False),
              help="PEM file holding the server's private key.")
@click.option("--grpc-server-cacert", type=click.Path(exists=True, dir_okay=False),
              help="PEM file holding the CA that client certificates are verified against.")
@click.option("--grpc-server-with-client-auth", "client_auth", is_flag=True,
              help="Refuse clients without a certificate signed by --grpc-server-cacert "
              "(mutual TLS).")
@click.option("--cpu-port", type=click.IntRange(0, 511), default=None,
              help="Port whose packets become PacketIn and where PacketOut enters.")
@click.option("--log-console", is_flag=True, help="Log on stdout.")
@click.option("--log-file", type=click.Path(dir_okay=False), help="Log to a file.")
@click.option("--queue-rate", multiple=True, callback=_per_port("RATE", parse_rate, None),
              metavar="[PORT=]RATE", help="Egress queue service rate: packets/s, or with a "
              "unit (500pps, 10mbps); 0 = unlimited.")
@click.option("--queue-depth", multiple=True, callback=_per_port("PKTS", int, 1),
              metavar="[PORT=]PKTS", help="Egress queue depth in packets (default 64).")
@click.option("--pcap", "pcap_dir", is_flag=False, flag_value=".", default=None,
              type=click.Path(file_okay=False), metavar="[DIR]",
              help="Write <iface>_in.pcap / <iface>_out.pcap in DIR (default: here).")
@click.option("--control-socket", type=click.Path(dir_okay=False),
              help="Unix socket for run-time set_queue_rate / set_queue_depth.")
@click.option("-I", "--include", "include_dirs", multiple=True,
              type=click.Path(file_okay=False), help="Include directory for PROGRAM.")
@click.option("--backend", type=click.Choice(["python", "native"]), default=None,
              help="Pipeline execution: native (compiled to C, the default where a C compiler "
              "exists) or python (the reference, with per-packet logs and pcap).")
@click.option("--io", "io_mode", type=click.Choice(IO_MODES), default=IO_MODES[0],
              help="How the native backend receives frames: PACKET_MMAP rings (mmap-v2 hands "
              "over each frame at once, mmap-v3 in blocks, up to 1 ms later), AF_XDP sockets in "
              "copy mode (afxdp; also sends through them; offloaded checksums stay unfinished) "
              "or recvmmsg. A port that takes none falls back to recvmmsg.")
@click.option("--packet-priority", type=click.IntRange(0, 99), default=0, show_default=True,
              help="Real-time priority (SCHED_FIFO) of the native backend's packet threads, so "
              "that packets leave when due however busy the CPUs are; 0: the ordinary class.")
@click.option("--p4runtime-strict", is_flag=True,
              help="Follow the P4Runtime spec where simple_switch_grpc departs from it "
              "(p4switch/device/README.md lists where).")
@bmv2_options.switch_options
def run_command(args, no_p4, interfaces, device_id, grpc_addr, server_ssl, grpc_server_cert,
                grpc_server_key, grpc_server_cacert, client_auth, cpu_port, log_console,
                log_file, queue_rate, queue_depth, pcap_dir, control_socket, include_dirs,
                backend, io_mode, packet_priority, p4runtime_strict, **bmv2):
    """Run a v1model switch on Linux interfaces, serving P4Runtime and BMv2's Thrift runtime
    (like simple_switch_grpc, whose command line this takes).

    PROGRAM is a P4_16 file, or a BMv2 JSON (what p4c-bm2-ss writes) or `p4switch compile
    --config` output (PROGRAM.json), to start with; or --no-p4 to wait for a controller.
    BMv2 options without a p4switch counterpart say on stderr what p4switch does. Options of
    simple_switch_grpc's target parser (--grpc-server-addr, --cpu-port, ...) may follow `--`."""
    if bmv2.pop("show_version"):
        from importlib.metadata import version
        click.echo(f"p4switch {version('mlfabric')}")
        return
    if bmv2.pop("json_version"):
        click.echo(_json_version())
        return
    program, target = _split_positionals(args, no_p4)
    bmv2_options.check_refused({**bmv2, **target})
    grpc_addr = _merged(grpc_addr, target["grpc_server_addr"], "--grpc-server-addr") \
        or "127.0.0.1:9559"
    cpu_port = _merged(cpu_port, target["cpu_port"], "--cpu-port")
    tls = _server_tls(server_ssl or target["server_ssl"],
                      _merged(grpc_server_cert, target["grpc_server_cert"], "--grpc-server-cert"),
                      _merged(grpc_server_key, target["grpc_server_key"], "--grpc-server-key"),
                      _merged(grpc_server_cacert, target["grpc_server_cacert"],
                              "--grpc-server-cacert"),
                      client_auth or target["client_auth"])
    _check_switch_options(program, no_p4, interfaces, cpu_port, target, bmv2, log_console,
                          log_file, pcap_dir)
    _log_file_notes(bmv2, log_file)
    bmv2_options.report_notes({**bmv2, **target})
    per_packet = bool(log_console or log_file) and \
        bmv2["log_level"] in bmv2_options.PER_PACKET_LEVELS
    dump_bytes = _dump_bytes(bmv2["dump_packet_data"], bmv2["log_level"], log_console or log_file)
    config = _load_program(program, include_dirs) if program else None
    backend = _backend(backend, per_packet or dump_bytes or pcap_dir, program, config)
    from .log import EventLog
    log = EventLog(log_console, log_file, per_packet=per_packet, dump_bytes=dump_bytes)
    tm = _queues(backend, queue_rate, queue_depth)
    device = _open_device(backend, interfaces, cpu_port, tm, io_mode, packet_priority, log,
                          pcap_dir)
    server, service, bound = _serve_p4runtime(device, device_id, grpc_addr, tls,
                                              p4runtime_strict, program, config)
    thrift = _start_thrift(service, bmv2, device_id)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    from .control import ControlServer
    from .link_monitor import LinkMonitor
    control = ControlServer(control_socket, tm) if control_socket else None
    device.start()
    links = LinkMonitor(device.ports, service.port_status)
    links.start()
    _announce(device_id, backend, interfaces, cpu_port, grpc_addr, bound, tls, thrift)
    while not stop.wait(1.0):
        pass
    print("p4switch: shutting down", file=sys.stderr, flush=True)
    server.stop(grace=0.5).wait()
    if thrift:
        thrift.close()
    links.stop()
    if control:
        control.close()
    device.stop()
    log.close()


def _check_switch_options(program, no_p4, interfaces, cpu_port, target, bmv2, log_console,
                          log_file, pcap_dir):
    """The checks between options, before anything is opened."""
    if bool(program) == no_p4:
        raise click.UsageError("give either PROGRAM or --no-p4")
    if cpu_port is not None and cpu_port in interfaces:
        raise click.BadParameter(f"port {cpu_port} is both the CPU port and an interface",
                                 param_hint="--cpu-port")
    _check_drop_port(target["drop_port"], interfaces, cpu_port)
    if len(interfaces) > bmv2["max_port_count"]:
        raise click.BadParameter(f"{len(interfaces)} interfaces, more than {bmv2['max_port_count']}",
                                 param_hint="--max-port-count")
    if log_console and log_file:
        raise click.UsageError("--log-console and --log-file are exclusive (as in BMv2)")
    if pcap_dir is not None and not os.path.isdir(pcap_dir):
        raise click.BadParameter(f"directory '{pcap_dir}' does not exist", param_hint="--pcap")


def _queues(backend, queue_rate, queue_depth):
    """The egress queues of the backend, with the command line's rates and depths (the
    all-ports setting first, so a per-port one overrides it)."""
    if backend == "native":
        from .native_device import NativeQueues
        tm = NativeQueues()
    else:
        from .traffic_manager import TrafficManager
        tm = TrafficManager()
    for port, (rate, unit) in sorted(queue_rate, key=lambda s: s[0] is not None):
        tm.set_rate(port, rate, unit)
    for port, depth in sorted(queue_depth, key=lambda s: s[0] is not None):
        tm.set_depth(port, depth)
    return tm


def _open_device(backend, interfaces, cpu_port, tm, io_mode, packet_priority, log, pcap_dir):
    try:
        if backend == "native":
            from .native_device import NativeDevice
            return NativeDevice(interfaces, cpu_port, tm, io_mode, packet_priority)
        if packet_priority:
            print("p4switch: --packet-priority sets the native backend's packet threads; the "
                  "Python backend's run in the ordinary class", file=sys.stderr, flush=True)
        from .device import Device
        return Device(interfaces, cpu_port, tm, log, pcap_dir)
    except OSError as exc:
        raise click.ClickException(f"cannot open the ports: {exc}") from None


def _serve_p4runtime(device, device_id, grpc_addr, tls, strict, program, config):
    """The P4Runtime server, with the command line's program installed: (server, service,
    bound port). A failure closes the device and exits with the reason."""
    from p4.v1 import p4runtime_pb2

    from ..runtime.errors import P4RuntimeError
    from ..runtime.server import serve
    try:
        server, service, bound = serve(device, device_id, grpc_addr, tls=tls, strict=strict)
    except (OSError, RuntimeError) as exc:
        device.close()
        raise click.ClickException(str(exc)) from None
    if config is not None:
        try:
            service.commit(p4runtime_pb2.ForwardingPipelineConfig(p4info=config[0],
                                                                  p4_device_config=config[1]))
        except P4RuntimeError as exc:
            server.stop(grace=0)
            device.close()
            raise click.ClickException(f"{program}: {exc.message}") from None
    return server, service, bound


def _announce(device_id, backend, interfaces, cpu_port, grpc_addr, bound, tls, thrift):
    """The line on stdout that says the switch is up and where it listens (what
    SwitchProcess and scripts wait for)."""
    from ..runtime.credentials import plaintext_warning
    warning = plaintext_warning(grpc_addr, tls)
    if warning:
        print(f"p4switch: warning: {warning}", file=sys.stderr, flush=True)
    host = grpc_addr.rsplit(":", 1)[0]
    ports = ", ".join(f"{n}@{name}" for n, name in sorted(interfaces.items())) or "none"
    thrift_line = f", Thrift server listening on {thrift.address}" if thrift else ""
    print(f"p4switch: device {device_id}, {backend} backend, ports {ports}, cpu port {cpu_port}, "
          f"P4Runtime server listening on {host}:{bound}{thrift_line}", flush=True)


def _server_tls(server_ssl, cert, key, cacert, client_auth):
    """The TLS settings of the command line, checked as simple_switch_grpc checks them, except
    that certificates given without --grpc-server-ssl are an error (BMv2 ignores them and
    serves plaintext, which is the mistake this should catch)."""
    from ..runtime.credentials import ServerTLS
    if not server_ssl:
        given = [name for name, value in (("--grpc-server-cert", cert), ("--grpc-server-key", key),
                 ("--grpc-server-cacert", cacert), ("--grpc-server-with-client-auth",
                 client_auth)) if value]
        if given:
            raise click.UsageError(f"{', '.join(given)} without --grpc-server-ssl")
        return None
    if not (cert and key):
        raise click.UsageError("--grpc-server-ssl needs --grpc-server-cert and --grpc-server-key")
    if client_auth and not cacert:
        raise click.UsageError("--grpc-server-with-client-auth needs --grpc-server-cacert (the CA "
                               "that signs the clients' certificates)")
    try:
        return ServerTLS.from_files(cert, key, cacert, client_auth)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


def _backend(choice, python_only_options, program, config):
    from ..native import available, default_backend, refusal, unavailable_reason
    if choice == "native" and not available():
        raise click.ClickException(unavailable_reason())
    if choice is None:
        if python_only_options:
            return "python"      # per-packet logs and pcap come from the Python backend
        if not available():
            print(f"p4switch: {unavailable_reason()}", file=sys.stderr, flush=True)
            return "python"
        reason = config and refusal(_program_of(config))
        if reason:
            print(f"p4switch: the native backend does not run {program} ({reason}): running it "
                  "on the Python backend", file=sys.stderr, flush=True)
            return "python"
        return default_backend()
    if choice == "native" and python_only_options:
        raise click.UsageError("--log-console, --log-file and --pcap need --backend python")
    return choice


def _program_of(config):
    from ..device_config import program
    return program(config[1])


def _split_positionals(args, no_p4):
    """BMv2's positionals: the program first, then what follows `--` for the target parser.
    With --no-p4 a first positional that is no `.json` file is the target's (BMv2's rule)."""
    args = list(args)
    program = None
    if args and not args[0].startswith("-"):
        program = args.pop(0)
        if no_p4:
            if program.endswith(".json"):
                bmv2_options.note(f"ignoring {program} as '--no-p4' was used (as BMv2 does)")
            else:
                raise click.UsageError(f"unexpected argument '{program}' with --no-p4")
            program = None
    if program is not None and not os.path.isfile(program):
        raise click.BadParameter(f"'{program}' is not a file", param_hint="PROGRAM")
    return program, bmv2_options.target_options(tuple(args))


def _merged(own, target, name):
    if own is not None and target is not None and own != target:
        raise click.UsageError(f"{name} is given both before and after '--', differently")
    return own if own is not None else target


def _check_drop_port(drop_port, interfaces, cpu_port):
    """p4switch drops what egress_spec 511 points at, as BMv2 by default; another drop port
    would change what programs do, so only 511 is taken."""
    from ..pipeline import DROP_PORT
    if drop_port is None or drop_port == DROP_PORT:
        return
    raise click.BadParameter(f"p4switch's drop port is {DROP_PORT} (the v1model one); "
                             f"{drop_port} would need a program compiled for it",
                             param_hint="--drop-port")


def _log_file_notes(bmv2, log_file):
    if bmv2["log_flush"] and not log_file:
        bmv2_options.note("ignoring --log-flush because --log-file is not given (as BMv2 does)")


def _dump_bytes(count, level, logging_on):
    if not count:
        return 0
    if not logging_on:
        bmv2_options.note("--dump-packet-data: ignored without --log-console or --log-file")
        return 0
    if bmv2_options.LOG_LEVELS.index(level) > bmv2_options.LOG_LEVELS.index("info"):
        bmv2_options.note(f"--dump-packet-data: ignored, -L {level} excludes 'info' messages "
                          "(as BMv2 does)")
        return 0
    return count


def _json_version():
    """BMv2's answer is <major>.<minor> of the newest format it reads; p4switch reads every
    2.x (the major version 2 that p4c-bm2-ss writes)."""
    return "2.x"


def _start_thrift(service, bmv2, device_id):
    """BMv2's Thrift runtime on --thrift-port (9090 by default). When the default port is
    taken (another switch runs there) the switch runs without it and says so; a port given
    on the command line that cannot be bound is an error, as in BMv2."""
    from ..thrift.server import ThriftServer
    port = bmv2["thrift_port"]
    try:
        return ThriftServer.start(service, bmv2["thrift_addr"], 9090 if port is None else port,
                                  device_id=device_id)
    except OSError as exc:
        if port is not None:
            raise click.ClickException(f"cannot serve Thrift on {bmv2['thrift_addr']}:{port}: "
                                       f"{exc.strerror or exc}") from None
        bmv2_options.note(f"Thrift port 9090 is taken ({exc.strerror or exc}): running without "
                          "the Thrift runtime server (give --thrift-port)")
        return None


def _load_program(program, include_dirs):
    """PROGRAM as P4_16 source, or as BMv2 JSON (a `.json` file, the device config it is):
    -> (P4Info, device config)."""
    if not program.endswith(".json"):
        return _compile(program, include_dirs)
    from .. import device_config
    try:
        with open(program, "rb") as f:
            data = f.read()
        _, info = device_config.compiled(data)
    except OSError as exc:
        raise click.ClickException(f"{program}: {exc.strerror}") from None
    except device_config.ConfigError as exc:
        raise click.ClickException(f"{program}: {exc}") from None
    return info, data


def _compile(program, include_dirs):
    import p4switch
    try:
        return p4switch.compile_program(program, include_dirs=tuple(include_dirs))
    except p4switch.P4CompileError as exc:
        raise click.ClickException(str(exc)) from None
