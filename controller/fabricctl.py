"""fabricctl: the command line of fabricd's API.

Tables for people by default, `--json` for scripts. A change prints what each switch did
(in sync, pending, failed with the error). Exit codes: 0 done, every switch in sync; 1 the
change is accepted but some switch (or every one) is pending or failed: fabricd keeps the
change and retries them; 2 bad command line; 3 not found; 4 invalid argument; 5 no resources
(e.g. no isolated slice fits); 6 refused by the current state (exists already, in use, ...);
7 fabricd unreachable; 8 other server error (fabricd's log names it).
"""
from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import click
import grpc
import yaml
from google.protobuf import json_format
from tabulate import tabulate

import grpctls
from controller.proto import fabric_pb2 as api
from controller.proto import fabric_pb2_grpc

DEFAULT_SERVER = "127.0.0.1:50100"
EXIT = {
    grpc.StatusCode.NOT_FOUND: 3,
    grpc.StatusCode.INVALID_ARGUMENT: 4,
    grpc.StatusCode.OUT_OF_RANGE: 4,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 5,
    grpc.StatusCode.FAILED_PRECONDITION: 6,
    grpc.StatusCode.ALREADY_EXISTS: 6,
    grpc.StatusCode.UNAVAILABLE: 7,
    grpc.StatusCode.DEADLINE_EXCEEDED: 7,
}
NO_FABRICD = """fabricctl: is a fabricd running there? Start one of:
  sudo .venv/bin/python mininet/demo.py --cli     the demo's fabric, ending in its CLI
  docker-compose -f docker/compose.yaml up -d      the fabric and fabricd as services
  fabricd --topology FILE                          a controller for switches you started
and point fabricctl at it with --server HOST:PORT or $FABRICD."""
EXIT_SWITCH_ERROR = 1
EXIT_OTHER = 8
UINT32 = 2**32 - 1
STATUS = {api.SwitchSync.IN_SYNC: "in sync", api.SwitchSync.PENDING: "pending",
          api.SwitchSync.FAILED: "failed"}


class Ctx:
    def __init__(self, server: str, as_json: bool, timeout: float,
                 client_tls: grpctls.ClientTLS | None = None) -> None:
        self.server = server
        self.tls = client_tls
        self.as_json = as_json
        self.timeout = timeout
        self._stub = None

    def call(self, method: str, request):
        if self._stub is None:
            self._stub = fabric_pb2_grpc.FabricStub(grpctls.channel(self.server, self.tls))
        try:
            return getattr(self._stub, method)(request, timeout=self.timeout)
        except grpc.RpcError as err:
            code = err.code()
            where = f" ({self.server})" if code == grpc.StatusCode.UNAVAILABLE else ""
            click.echo(f"fabricctl: {code.name}{where}: {err.details()}", err=True)
            if code == grpc.StatusCode.UNAVAILABLE:
                click.echo(NO_FABRICD, err=True)
            sys.exit(EXIT.get(code, EXIT_OTHER))

    def emit(self, message, human) -> None:
        """Print `message` as JSON or through `human(message)`, then what each switch did
        with a change; exit 1 if some switch is not in sync."""
        results = _sync_results(message)
        if self.as_json:
            click.echo(json.dumps(json_format.MessageToDict(
                message, preserving_proto_field_name=True, including_default_value_fields=True),
                indent=1))
        else:
            human(message)
            if results and not isinstance(message, api.SyncReply):
                click.echo()
                _sync_table(results)
        behind = [s.switch for s in results if not _in_sync(s)]
        if behind:
            click.echo(f"fabricctl: {len(behind)} of {len(results)} switches not in sync "
                       f"({', '.join(behind)}): fabricd keeps the change and retries them",
                       err=True)
            sys.exit(EXIT_SWITCH_ERROR)


def table(headers: list[str], rows: list[list]) -> None:
    click.echo(tabulate([[str(c) for c in r] for r in rows], headers=headers, tablefmt="plain",
                        disable_numparse=True))


def _sync_results(message) -> list:
    if isinstance(message, api.SyncReply):
        return list(message.switches)
    return list(getattr(message, "sync", ()))


def _in_sync(s) -> bool:
    return not s.error and s.status in (api.SwitchSync.IN_SYNC,
                                        api.SwitchSync.STATUS_UNSPECIFIED)


def _sync_table(results) -> None:
    if isinstance(results, api.SyncReply):
        results = results.switches
    table(["switch", "inserted", "modified", "deleted", "entries", "status"],
          [[s.switch, s.inserted, s.modified, s.deleted, s.entries,
            STATUS.get(s.status, "in sync" if _in_sync(s) else "failed")
            + (f": {s.error}" if s.error else "")] for s in results])


def _seconds(ctx, param, value):
    if not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a number of seconds")
    return value


def _deleted(line: str, reply) -> None:
    click.echo(line)
    _sync_table(reply)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--server", default=lambda: os.environ.get("FABRICD", DEFAULT_SERVER),
              show_default=f"$FABRICD or {DEFAULT_SERVER}", help="fabricd's API address.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.option("--timeout", default=30.0, show_default=True, callback=_seconds,
              type=click.FloatRange(0, 86400, min_open=True), help="Seconds per request.")
@click.option("--ca", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="Connect over TLS, verifying fabricd against this CA.")
@click.option("--cert", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="PEM client certificate, for a fabricd that requires one (with --key, --ca).")
@click.option("--key", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="PEM private key of --cert.")
@click.pass_context
def main(ctx, server, as_json, timeout, ca, cert, key):
    """Drive the fabric controller (fabricd)."""
    if (cert or key) and not ca:
        raise click.UsageError("--cert/--key need --ca")
    try:
        client_tls = grpctls.ClientTLS.from_files(ca, cert, key) if ca else None
    except ValueError as err:
        raise click.UsageError(str(err)) from None
    ctx.obj = Ctx(server, as_json, timeout, client_tls)


# -- topology, sync, routes -----------------------------------------------------------------------
@main.command()
@click.option("--set", "path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Replace the topology by this YAML file.")
@click.pass_obj
def topology(c: Ctx, path):
    """Show the switches, hosts and links (or replace the topology)."""
    reply = (c.call("SetTopology", api.SetTopologyRequest(yaml=path.read_text())) if path
             else c.call("GetTopology", api.Empty()))

    def human(t):
        click.echo(f"topology {t.name} ({t.kind})")
        table(["switch", "tier", "id", "p4runtime", "connected"],
              [[s.name, s.tier, s.device_id, s.grpc_address, "yes" if s.connected else "NO"]
               for s in t.switches])
        click.echo()
        table(["host", "rank", "ip", "mac", "leaf", "port"],
              [[h.name, h.rank, h.ip, h.mac, h.leaf, h.leaf_port] for h in t.hosts])
        click.echo()
        table(["link", "ports", "state", "slice"],
              [[lk.name, f"{lk.a}:{lk.a_port}-{lk.b}:{lk.b_port}", "up" if lk.up else "DOWN",
                lk.slice or "-"] for lk in t.links])
    c.emit(reply, human)


@main.command()
@click.pass_obj
def sync(c: Ctx):
    """Reconcile every switch with the intended state (installs routes on a fresh fabric)."""
    c.emit(c.call("Sync", api.Empty()), _sync_table)


@main.command()
@click.argument("switch")
@click.pass_obj
def routes(c: Ctx, switch):
    """The routes of one switch: slice, prefix and egress ports (several = ECMP group)."""
    def human(r):
        table(["slice", "prefix", "ports"],
              [[x.slice, x.prefix, ",".join(map(str, x.ports))] for x in r.routes])
    c.emit(c.call("GetRoutes", api.SwitchRequest(switch=switch)), human)


# -- Ethereal steps ----------------------------------------------------------------------------
@main.group()
def step():
    """Install or remove the paths of one collective step (Ethereal)."""


def _flow(text: str) -> api.FlowSpec:
    parts = text.split(":")
    if len(parts) != 3 or not parts[2].isdigit() or int(parts[2]) >= 2**64:
        raise click.BadParameter(f"{text!r}: expected SRC:DST:BYTES (BYTES below 2^64), e.g. "
                                 "h1:h3:1048576", param_hint="--flow")
    return api.FlowSpec(src=parts[0], dst=parts[1], bytes=int(parts[2]))


def _flows_from_file(path: Path) -> list[api.FlowSpec]:
    try:
        data = yaml.safe_load(path.read_text())
        flows = data["flows"]
        return [api.FlowSpec(src=str(f["src"]), dst=str(f["dst"]), bytes=int(f["bytes"]),
                             dst_qp=int(f.get("dst_qp", 0)), base_psn=int(f.get("base_psn", 0)))
                for f in flows]
    except (yaml.YAMLError, TypeError, KeyError, ValueError) as err:
        raise click.BadParameter(f"{path}: expected `flows:` with src, dst and bytes per flow "
                                 f"({type(err).__name__}: {err})", param_hint="--file") from None


@step.command("install")
@click.argument("name")
@click.option("--flow", "flows", multiple=True, metavar="SRC:DST:BYTES")
@click.option("--file", "path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="YAML with `flows: [{src: h1, dst: h3, bytes: 1048576}, ...]` "
                   "(optional dst_qp, base_psn per flow).")
@click.option("--pins/--no-pins", default=False,
              help="Pin every sub-flow on every hop (else only where the hash cannot steer).")
@click.pass_obj
def step_install(c: Ctx, name, flows, path, pins):
    """Plan a step, install its pins, print each sub-flow's source port and path."""
    specs = [_flow(f) for f in flows] + (_flows_from_file(path) if path else [])
    if not specs:
        raise click.UsageError("give --flow SRC:DST:BYTES (repeatable) or --file")
    reply = c.call("InstallStep", api.InstallStepRequest(name=name, flows=specs, pins=pins))

    def human(r):
        table(["src", "dst", "bytes", "sport", "path"],
              [[s.src, s.dst, s.bytes, s.sport, " > ".join(s.path) or "(same leaf)"]
               for s in r.subflows])
        click.echo(f"step {r.name}: {len(r.subflows)} sub-flows, {r.pins} pin entries, "
                   f"max link load {r.max_link_bytes} B (lower bound {r.lower_bound_bytes} B)")
    c.emit(reply, human)


@step.command("remove")
@click.argument("name")
@click.pass_obj
def step_remove(c: Ctx, name):
    c.emit(c.call("RemoveStep", api.NameRequest(name=name)),
           lambda r: _deleted(f"step {name} removed", r))


# -- slices, groups, jobs ----------------------------------------------------------------------
@main.group("slice")
def slice_():
    """vClos slices: isolated virtual Clos networks for jobs."""


def _slice_human(s) -> None:
    table(["slice", "id", "hosts", "leaves", "spines", "links"],
          [[s.name, s.id, ",".join(s.hosts), ",".join(s.leaves), ",".join(s.spines) or "-",
            len(s.links)]])


@slice_.command("create")
@click.argument("name")
@click.argument("hosts", type=click.IntRange(1, UINT32))
@click.pass_obj
def slice_create(c: Ctx, name, hosts):
    """Give job NAME an isolated slice of HOSTS hosts."""
    c.emit(c.call("CreateSlice", api.CreateSliceRequest(name=name, hosts=hosts)), _slice_human)


@slice_.command("delete")
@click.argument("name")
@click.pass_obj
def slice_delete(c: Ctx, name):
    c.emit(c.call("DeleteSlice", api.NameRequest(name=name)),
           lambda r: _deleted(f"slice {name} deleted", r))


@main.group()
def group():
    """Multicast groups (Allgather)."""


@group.command("create")
@click.argument("name")
@click.argument("members", nargs=-1, required=True)
@click.option("--loss", type=float, default=0.0, show_default=True,
              help="Experiments: the switches drop this share of the replicas toward members.")
@click.pass_obj
def group_create(c: Ctx, name, members, loss):
    """A multicast group NAME over the MEMBERS hosts."""
    def human(g):
        click.echo(f"group {g.name}: id {g.group_id}, address {g.address}, "
                   f"members {','.join(g.members)}"
                   + (f", replicas dropped at rate {g.loss:g}" if g.loss else ""))
        table(["switch", "replicate to ports"],
              [[r.switch, ",".join(map(str, r.ports))] for r in g.tree])
    c.emit(c.call("CreateMulticastGroup",
                  api.CreateMulticastGroupRequest(name=name, members=members, loss=loss)),
           human)


@group.command("delete")
@click.argument("name")
@click.pass_obj
def group_delete(c: Ctx, name):
    c.emit(c.call("DeleteMulticastGroup", api.NameRequest(name=name)),
           lambda r: _deleted(f"group {name} deleted", r))


@main.group()
def job():
    """In-network aggregation jobs (NetReduce, and the SwitchML baseline)."""


@job.command("create")
@click.argument("name")
@click.argument("workers", nargs=-1, required=True)
@click.option("--kind", type=click.Choice(["netreduce", "switchml"]), default="netreduce",
              show_default=True, help="netreduce: aggregation inside RC connections, per leaf "
              "and on a spine when the workers span leaves; switchml: the opcode-0xC0 baseline "
              "on one leaf.")
@click.option("--credits", default=8, show_default=True, type=click.IntRange(1, 256),
              help="netreduce: messages in flight per job (a power of two).")
@click.option("--slots", default=16, show_default=True, type=click.IntRange(1, UINT32),
              help="switchml: register slots on the aggregating leaf.")
@click.pass_obj
def job_create(c: Ctx, name, workers, kind, credits, slots):
    """An aggregation job NAME summing the WORKERS' vectors (worker w = the w-th host)."""
    def human(j):
        if j.kind == "netreduce":
            table(["job", "id", "kind", "tree", "credits", "result group", "workers"],
                  [[j.name, j.job_id, j.kind, " > ".join(j.switches), j.credits, j.group_id,
                    ",".join(f"{w}@{a}" for w, a in zip(j.workers, j.addresses, strict=True))]])
            return
        table(["job", "id", "kind", "leaf", "address", "slots", "result group", "workers"],
              [[j.name, j.job_id, j.kind, j.leaf, j.address,
                f"{j.slot_base}..{j.slot_base + j.slots - 1}", j.group_id, ",".join(j.workers)]])
    c.emit(c.call("CreateAggregationJob",
                  api.CreateAggregationJobRequest(name=name, workers=workers, slots=slots,
                                                  kind=kind, credits=credits)),
           human)


@job.command("delete")
@click.argument("name")
@click.pass_obj
def job_delete(c: Ctx, name):
    c.emit(c.call("DeleteAggregationJob", api.NameRequest(name=name)),
           lambda r: _deleted(f"job {name} deleted", r))


# -- links, state, counters --------------------------------------------------------------------
@main.command()
@click.argument("link")
@click.argument("state", type=click.Choice(["up", "down"]))
@click.pass_obj
def link(c: Ctx, link, state):
    """Take LINK (e.g. leaf1-spine2, leaf1-spine2#2) down or bring it back up."""
    c.emit(c.call("SetLink", api.SetLinkRequest(link=link, up=state == "up")), _sync_table)


@main.command()
@click.pass_obj
def state(c: Ctx):
    """Switch sessions, failed links, slices, groups, jobs and steps."""
    def human(s):
        table(["switch", "id", "p4runtime", "connected", "entries"],
              [[x.name, x.device_id, x.grpc_address, "yes" if x.connected else "NO",
                s.entries.get(x.name, 0)] for x in s.switches])
        click.echo(f"\nfailed links: {', '.join(s.failed_links) or 'none'}")
        for title, rows, headers in (
                ("slices", [[x.name, x.id, ",".join(x.hosts), len(x.links)] for x in s.slices],
                 ["name", "id", "hosts", "links"]),
                ("multicast groups", [[x.name, x.group_id, x.address, ",".join(x.members)]
                                      for x in s.groups], ["name", "id", "address", "members"]),
                ("aggregation jobs", [[x.name, x.job_id, x.kind,
                                       " > ".join(x.switches) or x.leaf, x.slots,
                                       ",".join(x.workers)] for x in s.jobs],
                 ["name", "id", "kind", "switches", "slots", "workers"]),
                ("steps", [[x.name, x.flows, x.subflows, x.pins] for x in s.steps],
                 ["name", "flows", "sub-flows", "pins"])):
            click.echo(f"\n{title}:")
            if rows:
                table(headers, rows)
            else:
                click.echo("  none")
    c.emit(c.call("GetState", api.Empty()), human)


@main.command()
@click.argument("switch")
@click.pass_obj
def counters(c: Ctx, switch):
    """Per-port and per-pin counters read from SWITCH."""
    def human(r):
        table(["port", "rx pkts", "rx bytes", "tx pkts", "tx bytes", "drops"],
              [[p.port, p.rx_packets, p.rx_bytes, p.tx_packets, p.tx_bytes, p.drops]
               for p in r.ports])
        if r.pins:
            click.echo()
            table(["src", "dst", "sport", "dport", "port", "packets", "bytes"],
                  [[p.src, p.dst, p.sport, p.dport, p.port, p.packets, p.bytes]
                   for p in r.pins])
    c.emit(c.call("GetCounters", api.SwitchRequest(switch=switch)), human)


if __name__ == "__main__":
    main()
