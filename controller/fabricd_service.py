"""fabricd's gRPC service (`proto/fabric.proto`, `fabric.v1.Fabric`): each request becomes one
change of the fabric's state, refusals become gRPC statuses."""
from __future__ import annotations

import logging
from concurrent import futures

import click
import grpc

from controller import encode_fabric, fabricd_topology, switch_plan
from controller.fabricd_state import Fabric
from controller.intent import IntentError
from controller.p4rt import P4RuntimeError
from controller.proto import fabric_pb2 as api
from controller.proto import fabric_pb2_grpc
from controller.tls import bind
from fabricmodel import ethereal
from fabricmodel.loads import lower_bound, max_load
from grpctls import ServerTLS

log = logging.getLogger("fabricd")


def _abort(context, err: IntentError):
    context.abort(getattr(grpc.StatusCode, err.code), str(err))


# Lengths a request may carry: names are identifiers (a 100,000-character name, once
# persisted, would be echoed by every later refusal); a topology is a few lines of YAML.
MAX_STRING = 64
MAX_YAML = 64 * 1024
MAX_ITEMS = 65536
_LIMITS = {"yaml": MAX_YAML}


def check_sizes(msg, path: str = "") -> None:
    """Refuse (INVALID_ARGUMENT, naming the field) any string or list in `msg` beyond the
    limits above, before the request reaches the model or its lock."""
    for field, value in msg.ListFields():
        where = f"{path}{field.name}"
        items = value if field.label == field.LABEL_REPEATED else [value]
        if field.label == field.LABEL_REPEATED and len(items) > MAX_ITEMS:
            raise IntentError("INVALID_ARGUMENT", f"{where}: {len(items)} items, at most "
                              f"{MAX_ITEMS}")
        for item in items:
            if field.type == field.TYPE_STRING:
                limit = _LIMITS.get(field.name, MAX_STRING)
                if len(item) > limit:
                    raise IntentError("INVALID_ARGUMENT", f"{where}: {len(item)} characters, "
                                      f"at most {limit}")
            elif field.type == field.TYPE_MESSAGE:
                check_sizes(item, where + ".")


def _rpc(method):
    """Map refusals (IntentError: the caller's mistakes, with their status) to gRPC statuses;
    anything else is a fault of fabricd: INTERNAL, logged with its traceback."""
    def wrapper(self, request, context):
        try:
            check_sizes(request)
            return method(self, request, context)
        except IntentError as err:
            _abort(context, err)
        except Exception as err:
            if isinstance(err, grpc.RpcError) or context.code() is not None:
                raise          # an abort of this call, already carrying its status
            log.exception("%s failed", method.__name__)
            context.abort(grpc.StatusCode.INTERNAL,
                          f"fabricd failed in {method.__name__} ({type(err).__name__}: "
                          f"{str(err)[:300]}); its log has the details")
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
        topo = fabricd_topology.screen(request.yaml)     # outside the lock
        with f.lock:
            if set(topo.switches) != set(f.devices) or any(
                    topo.switches[n].device_id != f.intent.topo.switches[n].device_id
                    for n in f.devices):
                raise IntentError("FAILED_PRECONDITION",
                                  "the new topology has other switches than the ones fabricd "
                                  "drives; restart fabricd with it instead")
            f.change(lambda intent: intent.set_topology(request.yaml))
            return self._topology()

    @_rpc
    def Sync(self, request, context):
        return api.SyncReply(switches=self.fabric.sync_all(wanted=context.is_active))

    @_rpc
    def GetRoutes(self, request, context):
        self._switch(request.switch)
        reply = api.RoutesReply(switch=request.switch)
        for slice_id, route in switch_plan.routes_of(self.fabric.intent, request.switch):
            reply.routes.add(slice=slice_id, prefix=route.prefix, ports=route.ports)
        return reply

    # -- Ethereal steps --------------------------------------------------------------------------
    @_rpc
    def InstallStep(self, request, context):
        flows = [ethereal.Flow(f.src, f.dst, f.bytes, f.dst_qp, f.base_psn)
                 for f in request.flows]
        step, synced = self.fabric.change(
            lambda intent: intent.install_step(request.name, flows, request.pins))
        reply = self._step_reply(step)
        reply.sync.extend(synced)
        return reply

    @_rpc
    def RemoveStep(self, request, context):
        _, synced = self.fabric.change(lambda intent: intent.remove_step(request.name))
        return api.SyncReply(switches=synced)

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
        sl, synced = self.fabric.change(lambda intent: intent.create_slice(request.name,
                                                                           request.hosts))
        reply = self._slice(sl)
        reply.sync.extend(synced)
        return reply

    @_rpc
    def DeleteSlice(self, request, context):
        _, synced = self.fabric.change(lambda intent: intent.delete_slice(request.name))
        return api.SyncReply(switches=synced)

    @_rpc
    def CreateMulticastGroup(self, request, context):
        group, synced = self.fabric.change(
            lambda intent: intent.create_group(request.name, list(request.members),
                                               request.loss))
        reply = self._group(group)
        reply.sync.extend(synced)
        return reply

    @_rpc
    def DeleteMulticastGroup(self, request, context):
        _, synced = self.fabric.change(lambda intent: intent.delete_group(request.name))
        return api.SyncReply(switches=synced)

    @_rpc
    def CreateAggregationJob(self, request, context):
        kind = request.kind or "netreduce"
        if kind == "switchml":
            job, synced = self.fabric.change(
                lambda intent: intent.create_job(request.name, list(request.workers),
                                                 request.slots or 1))
            reply = self._job(job)
        elif kind == "netreduce":
            job, synced = self.fabric.change(
                lambda intent: intent.create_nr_job(request.name, list(request.workers),
                                                    request.credits or 8))
            reply = self._nr_job(job)
        else:
            raise IntentError("INVALID_ARGUMENT", f"aggregation job kind must be netreduce or "
                              f"switchml, not {kind[:40]!r}")
        reply.sync.extend(synced)
        return reply

    @_rpc
    def DeleteAggregationJob(self, request, context):
        _, synced = self.fabric.change(lambda intent: intent.delete_job(request.name))
        return api.SyncReply(switches=synced)

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
            ports, pins = encode_fabric.read_counters(self.fabric.intent.topo, dev)
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
        tree = switch_plan.group_tree(self.fabric.intent, group.members, group.slice_id)
        return api.MulticastGroup(
            name=group.name, group_id=group.group_id, address=group.address,
            members=group.members, loss=group.loss,
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


def serve(fabric: Fabric, listen: str,
          tls: ServerTLS | None = None) -> tuple[grpc.Server, int]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    fabric_pb2_grpc.add_FabricServicer_to_server(Service(fabric), server)
    port = bind(server, listen, tls, "fabricd's API")
    if port == 0:
        raise click.ClickException(f"cannot listen on {listen}")
    server.start()
    return server, port
