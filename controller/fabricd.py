"""fabricd: the fabric controller daemon.

Holds one P4Runtime session per switch (primary, election id `--election-id`), keeps the
operator's intent (`install_intent.Intent`), turns it into the entries every switch must hold
(`install.intended_states`) and reconciles each switch to exactly those entries. A change is
tried on a copy of the intent; only when it validates and compiles into entries does it
replace the intent, get saved, and get written. A watchdog reconnects switches that restarted
(pushing the pipeline again) and re-synchronises them.
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from concurrent import futures
from pathlib import Path

import click
import grpc

from controller import install, install_fabric
from controller.install_intent import Intent, IntentError
from controller.p4rt import Device, P4RuntimeError, Pipeline, Schema
from controller.proto import fabric_pb2 as api
from controller.proto import fabric_pb2_grpc
from fabricmodel import ethereal
from fabricmodel.loads import lower_bound, max_load

log = logging.getLogger("fabricd")

DEFAULT_LISTEN = "127.0.0.1:50100"
REPO = Path(__file__).resolve().parents[1]
DEFAULT_PROGRAM = REPO / "p4src" / "fabric.p4"


class Fabric:
    """The daemon's state: intent, devices and the lock that orders every change."""

    def __init__(self, intent: Intent, pipeline: Pipeline, addresses: dict[str, str],
                 state_path: Path | None = None, election_id: int = 1,
                 timeout: float = 10.0) -> None:
        self.intent = intent
        self.pipeline = pipeline
        self.state_path = state_path
        self.lock = threading.RLock()
        self.schema = Schema(pipeline.p4info)
        self.devices = {
            name: Device(name, addresses[name], sw.device_id, pipeline, election_id, timeout)
            for name, sw in intent.topo.switches.items()}
        self.states = install_fabric.intended_states(intent, self.schema)

    # -- the one way to change things -----------------------------------------------------------
    def change(self, fn):
        """Run `fn(intent_copy)`; on success adopt the copy, save it and sync every switch.
        Returns (fn's result, per-switch sync results)."""
        with self.lock:
            trial = self.intent.clone()
            result = fn(trial)
            states = install_fabric.intended_states(trial, self.schema)
            self.intent, self.states = trial, states
            self.save()
            return result, self.sync_all(connect=False)

    def save(self) -> None:
        if self.state_path is None:
            return
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(self.intent.to_json())
        os.replace(tmp, self.state_path)

    def sync_all(self, connect: bool = True) -> list[api.SwitchSync]:
        with self.lock:
            return [self.sync_one(name, connect) for name in self.devices]

    def sync_one(self, name: str, connect: bool = True) -> api.SwitchSync:
        """Reconcile one switch. Without `connect`, a switch whose session is down is only
        reported (the watchdog reconnects it), so one dead switch does not stall every
        request for its connect timeout."""
        dev, state = self.devices[name], self.states[name]
        reply = api.SwitchSync(switch=name, entries=state.size())
        if not connect and not dev.connected:
            reply.error = "not connected (fabricd retries it)"
            return reply
        try:
            dev.ensure_connected()
            counts = dev.sync(state)
            reply.inserted, reply.modified, reply.deleted = (
                counts["insert"], counts["modify"], counts["delete"])
        except P4RuntimeError as err:
            reply.error = str(err)
            log.info("%s: %s", name, err)
        return reply

    def watchdog(self, stop: threading.Event, period: float) -> None:
        """Reconnect and re-sync switches whose session broke (e.g. the switch restarted)."""
        while not stop.wait(period):
            for name, dev in self.devices.items():
                if dev.connected:
                    continue
                try:
                    dev.connect()      # outside the fabric lock: requests go on meanwhile
                except P4RuntimeError:
                    continue
                with self.lock:
                    result = self.sync_one(name)
                if not result.error:
                    log.info("%s: re-synchronised (%d inserted)", name, result.inserted)

    def close(self) -> None:
        for dev in self.devices.values():
            dev.close()


def _abort(context, err: IntentError):
    context.abort(getattr(grpc.StatusCode, err.code), str(err))


def _rpc(method):
    """Map refusals to gRPC statuses; anything else is an internal error with its message."""
    def wrapper(self, request, context):
        try:
            return method(self, request, context)
        except IntentError as err:
            _abort(context, err)
        except (ValueError, KeyError) as err:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(err.args[0] if err.args else err))
    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


class Service(fabric_pb2_grpc.FabricServicer):
    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric

    # -- topology and routes ----------------------------------------------------------------------
    @_rpc
    def GetTopology(self, request, context):
        return self._topology()

    @_rpc
    def SetTopology(self, request, context):
        f = self.fabric
        with f.lock:
            trial = f.intent.clone()
            trial.set_topology(request.yaml)
            if set(trial.topo.switches) != set(f.devices) or any(
                    trial.topo.switches[n].device_id != f.intent.topo.switches[n].device_id
                    for n in f.devices):
                raise IntentError("FAILED_PRECONDITION",
                                  "the new topology has other switches than the ones fabricd "
                                  "drives; restart fabricd with it instead")
            f.change(lambda intent: intent.set_topology(request.yaml))
            return self._topology()

    @_rpc
    def Sync(self, request, context):
        return api.SyncReply(switches=self.fabric.sync_all())

    @_rpc
    def GetRoutes(self, request, context):
        self._switch(request.switch)
        reply = api.RoutesReply(switch=request.switch)
        for slice_id, route in install.routes_of(self.fabric.intent, request.switch):
            reply.routes.add(slice=slice_id, prefix=route.prefix, ports=route.ports)
        return reply

    # -- Ethereal steps --------------------------------------------------------------------------
    @_rpc
    def InstallStep(self, request, context):
        flows = [ethereal.Flow(f.src, f.dst, f.bytes, f.dst_qp, f.base_psn)
                 for f in request.flows]
        step, _ = self.fabric.change(
            lambda intent: intent.install_step(request.name, flows, request.pins))
        return self._step_reply(step)

    @_rpc
    def RemoveStep(self, request, context):
        self.fabric.change(lambda intent: intent.remove_step(request.name))
        return api.Empty()

    def _step_reply(self, step) -> api.StepReply:
        intent = self.fabric.intent
        plan = intent.step_plan(step)
        reply = api.StepReply(name=step.name, pins=len(plan.pins))
        for sub in plan.subflows:
            reply.subflows.add(src=sub.flow.src, dst=sub.flow.dst, bytes=sub.bytes,
                               sport=sub.sport, path=sub.path.nodes if sub.path else ())
        for d in plan.descriptors:
            reply.descriptors.add(src=d.src, dst_ip=d.dst_ip, dst_qp=d.dst_qp,
                                  base_psn=d.base_psn, pkts_per_subflow=d.pkts_per_subflow,
                                  sports=d.sports)
        reply.max_link_bytes = int(max_load(intent.topo, plan.loads))
        routing = intent.routing(intent.slice_of_host(step.flows[0].src))
        reply.lower_bound_bytes = int(lower_bound(intent.topo, routing, list(step.flows)))
        return reply

    # -- slices, groups, jobs, links -------------------------------------------------------------
    @_rpc
    def CreateSlice(self, request, context):
        sl, _ = self.fabric.change(lambda intent: intent.create_slice(request.name,
                                                                      request.hosts))
        return self._slice(sl)

    @_rpc
    def DeleteSlice(self, request, context):
        self.fabric.change(lambda intent: intent.delete_slice(request.name))
        return api.Empty()

    @_rpc
    def CreateMulticastGroup(self, request, context):
        group, _ = self.fabric.change(
            lambda intent: intent.create_group(request.name, list(request.members)))
        return self._group(group)

    @_rpc
    def DeleteMulticastGroup(self, request, context):
        self.fabric.change(lambda intent: intent.delete_group(request.name))
        return api.Empty()

    @_rpc
    def CreateAggregationJob(self, request, context):
        kind = request.kind or "netreduce"
        if kind == "switchml":
            job, _ = self.fabric.change(
                lambda intent: intent.create_job(request.name, list(request.workers),
                                                 request.slots or 1))
            return self._job(job)
        if kind != "netreduce":
            raise IntentError("INVALID_ARGUMENT", f"aggregation job kind must be netreduce or "
                              f"switchml, not {kind!r}")
        job, _ = self.fabric.change(
            lambda intent: intent.create_nr_job(request.name, list(request.workers),
                                                request.credits or 8))
        return self._nr_job(job)

    @_rpc
    def DeleteAggregationJob(self, request, context):
        self.fabric.change(lambda intent: intent.delete_job(request.name))
        return api.Empty()

    @_rpc
    def SetLink(self, request, context):
        _, results = self.fabric.change(lambda intent: intent.set_link(request.link, request.up))
        return api.SyncReply(switches=results)

    # -- state and counters ----------------------------------------------------------------------
    @_rpc
    def GetState(self, request, context):
        f = self.fabric
        with f.lock:
            intent = f.intent
            reply = api.State(switches=self._switch_infos(),
                              failed_links=sorted(intent.topo.links[i].name
                                                  for i in intent.failed))
            reply.slices.extend(self._slice(s) for s in intent.slices.values())
            reply.groups.extend(self._group(g) for g in intent.groups.values())
            reply.jobs.extend(self._job(j) for j in intent.jobs.values())
            reply.jobs.extend(self._nr_job(j) for j in intent.nr_jobs.values())
            for step in intent.steps.values():
                plan = intent.step_plan(step)
                reply.steps.add(name=step.name, flows=len(step.flows),
                                subflows=len(plan.subflows), pins=len(plan.pins))
            for name, state in f.states.items():
                reply.entries[name] = state.size()
            return reply

    @_rpc
    def GetCounters(self, request, context):
        self._switch(request.switch)
        dev = self.fabric.devices[request.switch]
        if not dev.connected:
            raise IntentError("FAILED_PRECONDITION", f"switch {request.switch} is not "
                              f"connected ({dev.address}); fabricd keeps retrying")
        try:
            ports, pins = install_fabric.read_counters(self.fabric.intent.topo, dev)
        except P4RuntimeError as err:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"{request.switch}: {err}")
        reply = api.Counters(switch=request.switch)
        for port, c in sorted(ports.items()):
            reply.ports.add(port=port, **c)
        for pin, packets, nbytes in pins:
            intent = self.fabric.intent
            reply.pins.add(src=intent.topo.host_by_ip(pin.src_ip).name,
                           dst=intent.topo.host_by_ip(pin.dst_ip).name, sport=pin.sport,
                           dport=pin.dport, port=pin.port, packets=packets, bytes=nbytes)
        return reply

    # -- conversions -----------------------------------------------------------------------------
    def _switch(self, name: str) -> None:
        if name not in self.fabric.devices:
            raise IntentError("NOT_FOUND", f"unknown switch {name!r}")

    def _switch_infos(self) -> list[api.SwitchInfo]:
        topo = self.fabric.intent.topo
        return [api.SwitchInfo(name=s.name, tier=s.tier, device_id=s.device_id,
                               grpc_address=self.fabric.devices[s.name].address,
                               connected=self.fabric.devices[s.name].connected)
                for s in topo.switches.values()]

    def _topology(self) -> api.Topology:
        intent = self.fabric.intent
        topo = intent.topo
        owner = {i: s.job for s in intent.slices.values() for i in s.links}
        reply = api.Topology(name=topo.name, kind=topo.kind, switches=self._switch_infos())
        for h in sorted(topo.hosts.values(), key=lambda h: h.rank):
            reply.hosts.add(name=h.name, rank=h.rank, ip=h.ip, mac=h.mac, leaf=h.leaf,
                            leaf_port=h.leaf_port)
        for lk in topo.links:
            reply.links.add(name=lk.name, a=lk.a, a_port=lk.a_port, b=lk.b, b_port=lk.b_port,
                            up=lk.index not in intent.failed, slice=owner.get(lk.index, ""))
        return reply

    def _slice(self, sl) -> api.Slice:
        topo = self.fabric.intent.topo
        return api.Slice(name=sl.job, id=sl.slice_id, hosts=sl.hosts, leaves=sl.leaves,
                         spines=sl.spines, links=[topo.links[i].name for i in sorted(sl.links)])

    def _group(self, group) -> api.MulticastGroup:
        tree = install.group_tree(self.fabric.intent, group.members, group.slice_id)
        return api.MulticastGroup(
            name=group.name, group_id=group.group_id, address=group.address,
            members=group.members,
            tree=[api.Replication(switch=sw, ports=[r.port for r in reps])
                  for sw, reps in sorted(tree.items())])

    def _job(self, job) -> api.AggregationJob:
        return api.AggregationJob(
            name=job.name, job_id=job.job_id, leaf=job.leaf,
            address=self.fabric.intent.topo.switch(job.leaf).service_ip, workers=job.workers,
            slot_base=job.slot_base, slots=job.slots, group_id=job.group_id, kind="switchml")

    def _nr_job(self, job) -> api.AggregationJob:
        topo = self.fabric.intent.topo
        first = job.stages[0]
        return api.AggregationJob(
            name=job.name, job_id=job.job_id, leaf=first.switch, address=first.address,
            workers=job.workers, slot_base=first.slot_base, slots=job.slots,
            group_id=job.stages[-1].group_id, kind="netreduce", credits=job.credits,
            switches=[st.switch for st in job.stages],
            addresses=[job.address_of(w, topo) for w in job.workers],
            generation=job.generation,
            stages=[api.AggregationStage(switch=st.switch, address=st.address,
                                         job_index=st.job_index, slot_base=st.slot_base,
                                         msg_base=st.msg_base, children=len(st.children),
                                         group_id=st.group_id) for st in job.stages])


# -- process ----------------------------------------------------------------------------------
def load_pipeline(program: Path | None, p4info: Path | None, config: Path | None) -> Pipeline:
    if p4info or config:
        if not (p4info and config):
            raise click.UsageError("--p4info and --config go together")
        return Pipeline.from_files(p4info, config)
    import p4switch
    info, device_config = p4switch.compile_program(str(program or DEFAULT_PROGRAM))
    return Pipeline(info, device_config)


def switch_addresses(intent: Intent, overrides: tuple[str, ...]) -> dict[str, str]:
    addresses = {name: f"127.0.0.1:{sw.grpc_port}" for name, sw in intent.topo.switches.items()}
    for item in overrides:
        name, sep, addr = item.partition("=")
        if not sep or name not in addresses:
            raise click.BadParameter(f"{item!r}: expected SWITCH=HOST:PORT with a switch of "
                                     f"the topology", param_hint="--switch")
        addresses[name] = addr
    return addresses


def serve(fabric: Fabric, listen: str) -> tuple[grpc.Server, int]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    fabric_pb2_grpc.add_FabricServicer_to_server(Service(fabric), server)
    port = server.add_insecure_port(listen)
    if port == 0:
        raise click.ClickException(f"cannot listen on {listen}")
    server.start()
    return server, port


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--topology", "topo_path", type=click.Path(exists=True, dir_okay=False,
              path_type=Path), help="Topology YAML (ignored when --state holds one).")
@click.option("--state", "state_path", type=click.Path(dir_okay=False, path_type=Path),
              help="JSON file keeping the intent across restarts.")
@click.option("--p4", "program", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help=f"P4 program compiled with p4switch (default {DEFAULT_PROGRAM.name}).")
@click.option("--p4info", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Precompiled P4Info (text or binary), with --config.")
@click.option("--config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Precompiled device config (e.g. p4switch compile or p4c-bm2-ss JSON).")
@click.option("--switch", "overrides", multiple=True, metavar="NAME=HOST:PORT",
              help="P4Runtime address of a switch (default 127.0.0.1:grpc_port_base+id).")
@click.option("--listen", default=DEFAULT_LISTEN, show_default=True,
              help="Address of the northbound API (port 0 picks a free one).")
@click.option("--port-file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the bound API port here once serving.")
@click.option("--election-id", default=1, show_default=True, type=click.IntRange(1))
@click.option("--resync-period", default=1.0, show_default=True, type=float,
              help="Seconds between checks for broken switch sessions.")
@click.option("--switch-timeout", default=10.0, show_default=True, type=float,
              help="Seconds to wait for a switch to answer.")
@click.option("--ecn-threshold", default=32, show_default=True, type=click.IntRange(0),
              help="Queue depth (packets) at which egress marks ECN CE on every port.")
@click.option("--ecmp-mode", type=click.Choice(sorted(install_fabric.ECMP_MODES)),
              default="hash", show_default=True,
              help="How ECMP groups pick a member: per flow (hash) or per packet (baselines).")
@click.option("-v", "--verbose", is_flag=True)
def main(topo_path, state_path, program, p4info, config, overrides, listen, port_file,
         election_id, resync_period, switch_timeout, ecn_threshold, ecmp_mode, verbose):
    """Run the fabric controller: connect to every switch and serve the fabric API."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="fabricd: %(message)s")
    pipeline = load_pipeline(program, p4info, config)
    schema = Schema(pipeline.p4info)
    limits = (install_fabric.slot_capacity(schema), install_fabric.max_workers(schema))
    try:
        if state_path and state_path.exists():
            intent = Intent.from_json(state_path.read_text(), *limits)
        elif topo_path:
            intent = Intent.from_yaml(topo_path.read_text(), limits[0], str(topo_path),
                                      limits[1])
        else:
            raise click.UsageError("give --topology (or a --state file that exists)")
    except IntentError as err:
        raise click.ClickException(str(err)) from None
    intent.ecn_threshold, intent.ecmp_mode = ecn_threshold, ecmp_mode
    fabric = Fabric(intent, pipeline, switch_addresses(intent, overrides), state_path,
                    election_id, switch_timeout)
    fabric.save()
    for result in fabric.sync_all():
        status = result.error or (f"{result.inserted} inserted, {result.modified} modified, "
                                  f"{result.deleted} deleted")
        click.echo(f"fabricd: {result.switch}: {status}", err=True)
    server, port = serve(fabric, listen)
    if port_file:
        port_file.write_text(f"{port}\n")
    click.echo(f"fabricd: serving {intent.topo.name} on {listen.rsplit(':', 1)[0]}:{port}",
               err=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    threading.Thread(target=fabric.watchdog, args=(stop, resync_period), daemon=True).start()
    stop.wait()
    server.stop(grace=1).wait()
    fabric.close()
    sys.exit(0)


if __name__ == "__main__":
    main()
