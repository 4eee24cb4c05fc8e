"""The P4Runtime service (p4.v1.P4Runtime over gRPC) of one device. Every request that touches
the pipeline runs under the device lock, so the data plane sees each update whole."""
from __future__ import annotations

import queue
import threading
import time
from collections import Counter
from concurrent import futures

import grpc
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from . import credentials
from .arbitration import END, Arbiter, Close, Connection
from .errors import (
    P4RuntimeError,
    abort_with_batch,
    canonical_code,
    failed_precondition,
    fit,
    invalid,
    not_found,
    permission_denied,
    resource_exhausted,
)
from .pipeline import Pipeline
from .rollback import write_all_or_none

API_VERSION = "1.4.1"
# the spec leaves these details open: simple_switch_grpc's (PI's) words, which clients match
NOT_PRIMARY = "Not primary"
NO_PIPELINE = "No forwarding pipeline config set for this device"
Action = p4runtime_pb2.SetForwardingPipelineConfigRequest.Action
ResponseType = p4runtime_pb2.GetForwardingPipelineConfigRequest.ResponseType
Update = p4runtime_pb2.Update
# What one request or one idle peer may cost (each open StreamChannel holds a worker thread)
ARBITRATION_DEADLINE = 5.0      # seconds a new stream has to send its arbitration update
MAX_UNARBITRATED_PER_HOST = 8   # streams of one host that have not arbitrated yet
RESERVED_WORKERS = 8            # workers no stream may take: unary RPCs always find one
MAX_READ_QUERIES = 1000         # entities of one ReadRequest
READ_CHUNK = 1000               # entities per ReadResponse


def _guard(method):
    """Turn a P4RuntimeError raised by a unary handler into the call's status."""
    def wrapper(self, request, context):
        try:
            return method(self, request, context)
        except P4RuntimeError as exc:
            context.abort(exc.code, fit(exc.message))
    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


class P4RuntimeService(p4runtime_pb2_grpc.P4RuntimeServicer):
    """`device` provides: lock, cpu_port, install(sw or None), inject(port, frame), and calls
    back on_cpu_packet(frame) / on_digests(list) that this service registers."""

    def __init__(self, device, device_id: int, max_streams: int = 24,
                 arbitration_deadline: float = ARBITRATION_DEADLINE, strict: bool = False):
        self.device, self.device_id, self.strict = device, device_id, strict
        self.arbiter = Arbiter(device_id, strict)
        self.streams = StreamLimits(max_streams, MAX_UNARBITRATED_PER_HOST)
        self.arbitration_deadline = arbitration_deadline
        # Read/Write address `pipeline`; the device runs `running`. They differ between a
        # VERIFY_AND_SAVE and its COMMIT (writes in between land in the saved pipeline).
        self.pipeline: Pipeline | None = None
        self.running: Pipeline | None = None
        self.down_ports: set[int] = set()     # ports without link (watch_port)
        device.on_cpu_packet = self._packet_in
        device.on_digests = self._digests
        # one thread for what the spec times: digest buffers and caches, idle timeouts
        self._tick = threading.Condition()
        threading.Thread(target=self._timer_loop, daemon=True, name="p4rt-timers").start()

    # --- pipeline config -------------------------------------------------------------------
    @_guard
    def SetForwardingPipelineConfig(self, request, context):
        self._check_device(request.device_id)
        self._check_role(request.role)
        if not self._may_write(request):
            raise permission_denied(NOT_PRIMARY)
        action = request.action
        if action == Action.UNSPECIFIED or action not in Action.values():
            raise invalid("SetForwardingPipelineConfig needs an action")
        if action == Action.COMMIT:
            if request.HasField("config"):
                raise invalid("COMMIT takes no config: it realizes the saved one")
            with self.device.lock:
                if self.pipeline is None or self.pipeline is self.running:
                    raise not_found("COMMIT without a config saved by VERIFY_AND_SAVE")
                self._install(self.pipeline)
            return p4runtime_pb2.SetForwardingPipelineConfigResponse()
        if not request.config.HasField("p4info"):
            raise invalid("the request carries no P4Info")
        # validated and compiled outside the device lock: packets and other RPCs go on meanwhile
        candidate = self._pipeline(request.config)
        if action == Action.VERIFY:
            return p4runtime_pb2.SetForwardingPipelineConfigResponse()
        with self.device.lock:
            if action == Action.VERIFY_AND_SAVE:
                self.pipeline = candidate
            elif action == Action.VERIFY_AND_COMMIT:
                self._install(candidate)
            elif action == Action.RECONCILE_AND_COMMIT:
                if self.pipeline is not None:
                    self._replay(self.pipeline, candidate)
                self._install(candidate)
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def commit(self, config: p4runtime_pb2.ForwardingPipelineConfig) -> None:
        """Install a pipeline without a client (the program given on the command line)."""
        with self.device.lock:
            self._install(self._pipeline(config))

    def _pipeline(self, config) -> Pipeline:
        return Pipeline(config, self.device.cpu_port, self.device.backend, self.down_ports,
                        self.strict)

    def _install(self, pipeline: Pipeline) -> None:
        self.pipeline = self.running = pipeline
        self.device.install(pipeline.sw)

    @staticmethod
    def _replay(old: Pipeline, new: Pipeline) -> None:
        """Re-create the old pipeline's forwarding state in the new one (RECONCILE): profiles
        before the entries that use them; any entity the new program cannot take aborts the
        reconcile and leaves the old pipeline running."""
        E = p4runtime_pb2.Entity
        entries = p4runtime_pb2.TableEntry()
        entries.meter_config.SetInParent()      # ask for the direct meter configs too
        order = [E(action_profile_member=p4runtime_pb2.ActionProfileMember()),
                 E(action_profile_group=p4runtime_pb2.ActionProfileGroup()),
                 E(table_entry=entries),
                 E(table_entry=p4runtime_pb2.TableEntry(is_default_action=True)),
                 E(packet_replication_engine_entry=p4runtime_pb2.PacketReplicationEngineEntry()),
                 E(meter_entry=p4runtime_pb2.MeterEntry()),
                 E(digest_entry=p4runtime_pb2.DigestEntry())]
        for query in order:
            for entity in old.read(query):
                which = entity.WhichOneof("entity")
                if which == "table_entry" and entity.table_entry.is_const:
                    continue
                default = which == "table_entry" and entity.table_entry.is_default_action
                if default and (old.schema.table(entity.table_entry.table_id)
                                .const_default_action_id):
                    continue
                if which == "meter_entry" and not entity.meter_entry.HasField("config"):
                    continue
                kind = Update.MODIFY if default or which == "meter_entry" else Update.INSERT
                try:
                    new.write(Update(type=kind, entity=entity))
                except P4RuntimeError as exc:
                    raise invalid(f"cannot reconcile: {exc.message}") from exc

    @_guard
    def GetForwardingPipelineConfig(self, request, context):
        self._check_device(request.device_id)
        resp = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        with self.device.lock:
            if self.pipeline is None:
                return resp            # spec: no config known -> `config` unset
            rt = request.response_type
            cfg = self.pipeline.config
            resp.config.SetInParent()
            if cfg.HasField("cookie"):
                resp.config.cookie.CopyFrom(cfg.cookie)
            if rt in (ResponseType.ALL, ResponseType.P4INFO_AND_COOKIE):
                resp.config.p4info.CopyFrom(cfg.p4info)
            if rt in (ResponseType.ALL, ResponseType.DEVICE_CONFIG_AND_COOKIE):
                resp.config.p4_device_config = cfg.p4_device_config
        return resp

    # --- Write / Read ----------------------------------------------------------------------
    def Write(self, request, context):
        try:
            self._check_device(request.device_id)
            self._check_role(request.role)
            if not self._may_write(request):
                raise permission_denied(NOT_PRIMARY)
            if request.atomicity not in p4runtime_pb2.WriteRequest.Atomicity.values():
                raise invalid(f"unknown atomicity {request.atomicity}")
        except P4RuntimeError as exc:
            context.abort(exc.code, fit(exc.message))
        results: list[P4RuntimeError | None] = []
        with self.device.lock:
            if self.pipeline is None:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                              NO_PIPELINE)
            if request.atomicity == p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR:
                for update in request.updates:
                    try:
                        self.pipeline.write(update)
                        results.append(None)
                    except P4RuntimeError as exc:
                        results.append(exc)
            else:   # ROLLBACK_ON_ERROR; under the lock that is also DATAPLANE_ATOMIC
                results = write_all_or_none(self.pipeline, request.updates)
        self._poke()          # new digest configs or idle timeouts change the next deadline
        if any(r is not None for r in results):
            abort_with_batch(context, results)
        return p4runtime_pb2.WriteResponse()

    def Read(self, request, context):
        """Entities of the valid requests; if some request failed, then UNKNOWN with one
        p4.v1.Error per request (spec: Read "Batch Processing"). Each query runs under the
        device lock on its own and its entities are streamed, so a long Read never holds the
        lock (or the whole answer) at once; the spec promises no snapshot across queries."""
        try:
            self._check_device(request.device_id)
            if len(request.entities) > MAX_READ_QUERIES:
                raise resource_exhausted(f"a Read of {len(request.entities)} entities: this "
                                         f"server takes at most {MAX_READ_QUERIES} per request")
            with self.device.lock:
                self._require_pipeline()
        except P4RuntimeError as exc:
            context.abort(exc.code, fit(exc.message))
        results: list[P4RuntimeError | None] = []
        pending: list[p4runtime_pb2.Entity] = []
        sent = False
        for query in request.entities:
            try:
                with self.device.lock:
                    pending.extend(self._require_pipeline().read(query))
                results.append(None)
            except P4RuntimeError as exc:
                results.append(exc)
            time.sleep(0)       # let a waiting Write take the lock (and the GIL) between queries
            while len(pending) >= READ_CHUNK:
                yield p4runtime_pb2.ReadResponse(entities=pending[:READ_CHUNK])
                del pending[:READ_CHUNK]
                sent = True
        if pending or not sent:
            yield p4runtime_pb2.ReadResponse(entities=pending)
        if any(r is not None for r in results):
            abort_with_batch(context, results)

    @_guard
    def Capabilities(self, request, context):
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version=API_VERSION)

    # --- StreamChannel ---------------------------------------------------------------------
    def StreamChannel(self, request_iterator, context):
        host = _host(context.peer())
        refusal = self.streams.admit(host)
        if refusal:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, refusal)
        conn = Connection()
        threading.Thread(target=self._stream_reader, args=(conn, request_iterator),
                         daemon=True, name="p4rt-stream").start()
        context.add_callback(lambda: conn.outbox.put(END))
        deadline = time.monotonic() + self.arbitration_deadline
        arbitrated = False
        try:
            while True:
                if not arbitrated and conn.role is not None:
                    self.streams.arbitrated(host)
                    arbitrated = True
                try:
                    item = conn.outbox.get(timeout=None if arbitrated else
                                           max(deadline - time.monotonic(), 0.0))
                except queue.Empty:
                    if conn.role is None:
                        context.abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                                      f"no arbitration update within {self.arbitration_deadline:g}"
                                      " s of opening the stream")
                    continue
                if item is END:
                    return
                if isinstance(item, Close):
                    context.abort(item.code, fit(item.message))
                yield item
        finally:
            self.streams.release(host, arbitrated)
            self.arbiter.disconnect(conn)

    def _stream_reader(self, conn: Connection, requests) -> None:
        try:
            for req in requests:
                self._stream_message(conn, req)
        except P4RuntimeError as exc:
            conn.outbox.put(Close(exc.code, exc.message))
            return
        except grpc.RpcError:
            pass   # the client went away; the writer side ends the stream
        conn.outbox.put(END)

    def _stream_message(self, conn: Connection, req) -> None:
        which = req.WhichOneof("update")
        if which == "arbitration":
            self.arbiter.arbitrate(conn, req.arbitration)
            return
        if conn.role is None:
            raise failed_precondition("the first stream message must be an arbitration update")
        if which == "packet":
            self._packet_out(conn, req.packet)
        elif which == "digest_ack":
            running = self.running
            if running is not None:
                running.digests.ack(req.digest_ack)
                self._poke()
        else:
            self._stream_error(conn, grpc.StatusCode.UNIMPLEMENTED,
                               f"stream message '{which}' is not supported", other=req)

    def _packet_out(self, conn: Connection, packet) -> None:
        if not self.arbiter.conn_is_primary(conn):
            self._stream_error(conn, grpc.StatusCode.PERMISSION_DENIED,
                               NOT_PRIMARY, packet_out=packet)
            return
        with self.device.lock:
            if self.running is None:
                self._stream_error(conn, grpc.StatusCode.FAILED_PRECONDITION,
                                   NO_PIPELINE, packet_out=packet)
                return
            try:
                frame = self.running.packet_out_bytes(packet)
            except P4RuntimeError as exc:
                self._stream_error(conn, exc.code, exc.message, packet_out=packet)
                return
            self.device.inject(self.device.cpu_port, frame)

    @staticmethod
    def _stream_error(conn, code, message, packet_out=None, other=None) -> None:
        msg = p4runtime_pb2.StreamMessageResponse()
        msg.error.canonical_code = canonical_code(code)
        msg.error.message = message
        if packet_out is not None:
            msg.error.packet_out.packet_out.CopyFrom(packet_out)
        elif other is not None:
            msg.error.other.other.Pack(other)
        conn.send(msg)

    # --- data plane -> controller ----------------------------------------------------------
    def _packet_in(self, frame: bytes) -> None:
        """Called by the device (under its lock) for each frame sent to the CPU port."""
        if self.running is None:
            return
        packet = self.running.packet_in(frame)
        for conn in self.arbiter.primaries():
            conn.send(p4runtime_pb2.StreamMessageResponse(packet=packet))

    def _digests(self, digests) -> None:
        running = self.running
        if running is None:
            return
        self._send_digest_lists(running.digests.offer(digests))
        self._poke()

    def _send_digest_lists(self, lists) -> None:
        for lst in lists:
            for conn in self.arbiter.primaries():
                conn.send(p4runtime_pb2.StreamMessageResponse(digest=lst))

    def port_status(self, port: int, up: bool) -> None:
        """A port lost or regained its link: members watching it leave or rejoin their groups
        (in the running and in a saved pipeline)."""
        with self.device.lock:
            (self.down_ports.discard if up else self.down_ports.add)(port)
            for pipeline in {id(p): p for p in (self.pipeline, self.running)
                             if p is not None}.values():
                pipeline.profiles.port_status(port, up)

    # --- timers ----------------------------------------------------------------------------
    def _poke(self) -> None:
        with self._tick:
            self._tick.notify()

    def _timer_loop(self) -> None:
        while True:
            with self._tick:      # a poke while the deadline is computed waits for wait()
                running = self.running
                deadlines = [] if running is None else \
                    [d for d in (running.digests.next_deadline(), running.tables.idle_deadline)
                     if d is not None]
                wait = 1.0 if not deadlines else (min(deadlines) - time.monotonic_ns()) / 1e9
                if wait > 0:
                    self._tick.wait(min(wait, 1.0))
            if running is not None and running is self.running:
                self._send_digest_lists(running.digests.due())
                self._idle_timeouts(running)

    def _idle_timeouts(self, running: Pipeline) -> None:
        deadline = running.tables.idle_deadline
        if deadline is None or time.monotonic_ns() < deadline:
            return
        with self.device.lock:
            if running is not self.running:
                return
            notes = running.tables.idle_scan()
        for note in notes:
            for conn in self.arbiter.primaries():
                conn.send(p4runtime_pb2.StreamMessageResponse(idle_timeout_notification=note))

    # --- helpers ---------------------------------------------------------------------------
    def _check_device(self, device_id: int) -> None:
        if device_id != self.device_id:
            raise not_found(f"this server is device {self.device_id}, not {device_id}")

    def _check_role(self, role: str) -> None:
        if role and not self.arbiter.knows(role):
            raise not_found(f"no client ever arbitrated for role '{role}'")

    def _require_pipeline(self) -> Pipeline:
        if self.pipeline is None:
            raise failed_precondition(NO_PIPELINE)
        return self.pipeline

    def _may_write(self, request) -> bool:
        """Primary's requests only. simple_switch_grpc (PI) also takes, while no client has a
        stream open, every request without election id (and refuses those with one)."""
        if not self.strict and not self.arbiter.connected():
            return not request.HasField("election_id")
        return self.arbiter.is_primary(request.role, self._eid(request))

    def _eid(self, request):
        """A request without election id: none (the spec), or 0 (simple_switch_grpc)."""
        if request.HasField("election_id"):
            return request.election_id
        return None if self.strict else p4runtime_pb2.Uint128()


class StreamLimits:
    """Open StreamChannels, counted so that streams never take the workers unary RPCs need and
    one host cannot hold many streams without arbitrating (P4Runtime clients arbitrate at
    once; idle streams are what a flood looks like)."""

    def __init__(self, max_streams: int, max_unarbitrated_per_host: int):
        self.max_streams, self.per_host = max_streams, max_unarbitrated_per_host
        self._lock = threading.Lock()
        self._open = 0
        self._unarbitrated: Counter = Counter()

    def admit(self, host: str) -> str | None:
        """Counts a new stream of `host` in, or -> why it is refused."""
        with self._lock:
            if self._open >= self.max_streams:
                return f"this switch serves at most {self.max_streams} streams at once"
            if self._unarbitrated[host] >= self.per_host:
                return (f"{host} has {self.per_host} streams that have not arbitrated: "
                        "arbitrate first")
            self._open += 1
            self._unarbitrated[host] += 1
            return None

    def arbitrated(self, host: str) -> None:
        with self._lock:
            self._drop(host)

    def release(self, host: str, arbitrated: bool) -> None:
        with self._lock:
            self._open -= 1
            if not arbitrated:
                self._drop(host)

    def _drop(self, host: str) -> None:
        self._unarbitrated[host] -= 1
        if self._unarbitrated[host] <= 0:
            del self._unarbitrated[host]


def _host(peer: str) -> str:
    """The host of a gRPC peer string (ipv4:127.0.0.1:5000, ipv6:[::1]:5000, unix:path)."""
    kind, _, rest = peer.partition(":")
    if kind in ("ipv4", "ipv6"):
        return rest.rsplit(":", 1)[0]
    return kind


def serve(device, device_id: int, address: str, workers: int = 32,
          tls: credentials.ServerTLS | None = None, strict: bool = False):
    """Start the gRPC server (plaintext, or TLS when `tls` is given) -> (grpc.Server,
    P4RuntimeService, bound port). Each open StreamChannel holds a worker for its lifetime:
    streams may take all but RESERVED_WORKERS of them."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers,
                                                    thread_name_prefix="p4rt"))
    service = P4RuntimeService(device, device_id, max_streams=workers - RESERVED_WORKERS,
                               strict=strict)
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(service, server)
    port = credentials.bind(server, address, tls)
    if port == 0:
        raise OSError(f"cannot bind the P4Runtime server to {address}")
    server.start()
    return server, service, port


