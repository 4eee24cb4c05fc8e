"""`p4switch run`: the switch as a process, with the command line of simple_switch_grpc."""
from __future__ import annotations

import signal
import socket
import sys
import threading

import click

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


@click.command("run")
@click.argument("program", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--no-p4", is_flag=True, help="Start without a program; a controller pushes one "
              "with SetForwardingPipelineConfig.")
@click.option("-i", "--interface", "interfaces", multiple=True, callback=_port_spec,
              metavar="PORT@IFACE", help="Attach a Linux interface as switch port PORT.")
@click.option("--device-id", type=click.IntRange(0), default=0, show_default=True)
@click.option("--grpc-addr", "--grpc-server-addr", "grpc_addr", default="127.0.0.1:9559",
              show_default=True, help="P4Runtime listen address (port 0: any free port).")
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
@click.option("--log-console", is_flag=True, help="Per-packet log on stdout.")
@click.option("--log-file", type=click.Path(dir_okay=False), help="Per-packet log to a file.")
@click.option("--queue-rate", multiple=True, callback=_per_port("RATE", parse_rate, None),
              metavar="[PORT=]RATE", help="Egress queue service rate: packets/s, or with a "
              "unit (500pps, 10mbps); 0 = unlimited.")
@click.option("--queue-depth", multiple=True, callback=_per_port("PKTS", int, 1),
              metavar="[PORT=]PKTS", help="Egress queue depth in packets (default 64).")
@click.option("--pcap", "pcap_dir", type=click.Path(file_okay=False),
              help="Write <iface>_in.pcap / <iface>_out.pcap here.")
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
def run_command(program, no_p4, interfaces, device_id, grpc_addr, server_ssl, grpc_server_cert,
                grpc_server_key, grpc_server_cacert, client_auth, cpu_port, log_console,
                log_file, queue_rate, queue_depth, pcap_dir, control_socket, include_dirs,
                backend, io_mode):
    """Run a v1model switch on Linux interfaces, serving P4Runtime (like simple_switch_grpc).

    PROGRAM is a P4_16 file to start with; or --no-p4 to wait for a controller."""
    if bool(program) == no_p4:
        raise click.UsageError("give either PROGRAM or --no-p4")
    if cpu_port is not None and cpu_port in interfaces:
        raise click.BadParameter(f"port {cpu_port} is both the CPU port and an interface",
                                 param_hint="--cpu-port")
    tls = _server_tls(server_ssl, grpc_server_cert, grpc_server_key, grpc_server_cacert,
                      client_auth)
    from p4.v1 import p4runtime_pb2

    from ..runtime.credentials import plaintext_warning
    from ..runtime.errors import P4RuntimeError
    from ..runtime.server import serve
    from .control import ControlServer
    from .device import Device
    from .link_monitor import LinkMonitor
    from .log import EventLog
    from .traffic_manager import TrafficManager

    config = _compile(program, include_dirs) if program else None
    backend = _backend(backend, log_console or log_file or pcap_dir, program, config)
    if backend == "native":
        from .native_device import NativeDevice, NativeQueues
        tm = NativeQueues()
    else:
        tm = TrafficManager()
    for port, (rate, unit) in sorted(queue_rate, key=lambda s: s[0] is not None):
        tm.set_rate(port, rate, unit)
    for port, depth in sorted(queue_depth, key=lambda s: s[0] is not None):
        tm.set_depth(port, depth)
    log = EventLog(log_console, log_file)
    try:
        if backend == "native":
            device = NativeDevice(interfaces, cpu_port, tm, io_mode)
        else:
            device = Device(interfaces, cpu_port, tm, log, pcap_dir)
    except OSError as exc:
        raise click.ClickException(f"cannot open the ports: {exc}") from None
    try:
        server, service, bound = serve(device, device_id, grpc_addr, tls=tls)
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
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    control = ControlServer(control_socket, tm) if control_socket else None
    device.start()
    links = LinkMonitor(device.ports, service.port_status)
    links.start()
    host = grpc_addr.rsplit(":", 1)[0]
    warning = plaintext_warning(grpc_addr, tls)
    if warning:
        print(f"p4switch: warning: {warning}", file=sys.stderr, flush=True)
    ports = ", ".join(f"{n}@{name}" for n, name in sorted(interfaces.items())) or "none"
    print(f"p4switch: device {device_id}, {backend} backend, ports {ports}, cpu port {cpu_port}, "
          f"P4Runtime server listening on {host}:{bound}", flush=True)

    while not stop.wait(1.0):
        pass
    print("p4switch: shutting down", file=sys.stderr, flush=True)
    server.stop(grace=0.5).wait()
    links.stop()
    if control:
        control.close()
    device.stop()
    log.close()


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


def _compile(program, include_dirs):
    import p4switch
    try:
        return p4switch.compile_program(program, include_dirs=tuple(include_dirs))
    except p4switch.P4CompileError as exc:
        raise click.ClickException(str(exc)) from None
