"""A topology's fabric in Mininet, left running with no controller: the switches start empty
and serve P4Runtime on 127.0.0.1 (the topology's ports) until SIGTERM or SIGINT. fabricd runs
as its own process (docker/compose.yaml: its own service) and programs them.

    sudo .venv/bin/python mininet/fabric_up.py [--topology FILE] [--target bmv2]

The hosts' namespaces are named `mlf-<host>` (`ip netns exec mlf-h1 ping 10.0.2.1`, or
`python -m collectives run --netns mlf-h1,mlf-h2,...`).
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading
from pathlib import Path

import click

# siblings in mininet/: the script's own directory is first on sys.path
from capture import PortCaptures, switch_interfaces
from fabric_net import build_net, configure_hosts, host_netns
from p4_switch import TARGETS, missing_tools

from fabricmodel.topology import TopologyError, load

ROOT = Path(__file__).resolve().parent.parent


@click.command()
@click.option("--topology", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=ROOT / "controller/topologies/leafspine-2x2.yaml", show_default=True)
@click.option("--target", type=click.Choice(TARGETS), default="p4switch", show_default=True)
@click.option("--link-mbps", type=click.FloatRange(0), default=0, show_default=True,
              help="Every switch port's egress rate in Mbit/s, 0 for unshaped.")
@click.option("--queue-depth", type=click.IntRange(1), default=256, show_default=True)
@click.option("--log-dir", type=click.Path(file_okay=False, path_type=Path),
              default=ROOT / "out" / "logs", show_default=True, help="Switch logs.")
@click.option("--pcap", "pcap_dir", type=click.Path(file_okay=False, path_type=Path),
              envvar="MLFABRIC_PCAP",
              help="Capture every switch port into PCAP_DIR/<interface>.pcap while it runs.")
@click.option("--switch-logs", is_flag=True, help="Per-packet logs of every switch in "
              "--log-dir (p4switch then runs its Python backend: slower).")
@click.option("--ready-file", type=click.Path(dir_okay=False, path_type=Path),
              help="Created once every switch listens and the hosts are configured; removed "
                   "on the way down (a health check for compose).")
def main(topology, target, link_mbps, queue_depth, log_dir, pcap_dir, switch_logs, ready_file):
    """Run the fabric of TOPOLOGY's switches and hosts until stopped."""
    missing = missing_tools(target)
    if missing:
        raise click.ClickException(f"--target {target} needs {' and '.join(missing)} on PATH")
    if os.geteuid() != 0:
        raise click.ClickException("Mininet needs root")
    try:
        topo = load(topology)
    except TopologyError as err:
        raise click.BadParameter(str(err), param_hint="--topology") from None
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    net = build_net(topo, target=target, log_dir=str(log_dir), link_mbps=link_mbps or None,
                    queue_depth=queue_depth, packet_log=switch_logs)
    try:
        net.start()
        configure_hosts(net, topo)
        captures = (PortCaptures(switch_interfaces(net), pcap_dir) if pcap_dir
                    else contextlib.nullcontext())
        hosts = sorted(topo.hosts.values(), key=lambda h: h.rank)
        with host_netns(net, [h.name for h in hosts]), captures:
            for sw in sorted(topo.switches.values(), key=lambda s: s.device_id):
                click.echo(f"fabric: {sw.name} ({target}, device {sw.device_id}) serves "
                           f"P4Runtime on 127.0.0.1:{sw.grpc_port}")
            click.echo(f"fabric: {topo.name} up: {len(topo.switches)} switches, "
                       f"{len(hosts)} hosts (namespaces mlf-{hosts[0].name}, ...); waiting "
                       f"for a controller, SIGTERM stops", nl=True)
            if ready_file:
                ready_file.write_text(f"{topo.name}\n")
            stop.wait()
    finally:
        if ready_file:
            ready_file.unlink(missing_ok=True)
        net.stop()
    click.echo("fabric: stopped")


if __name__ == "__main__":
    main()
