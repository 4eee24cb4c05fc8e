"""One P4Runtime session with one switch: the channel, the arbitration stream and the RPCs.

The session is primary for the default role as long as its StreamChannel is open and no
client with a higher election id connects. Writes and pipeline changes need primacy; reads
do not. When the switch restarts the stream breaks: `connected` turns False, `on_lost` is
called (from the stream's thread) and `open()` starts a new session (the caller then
re-synchronises, see `device.Device` and `controller/fabricd_watchdog.py`).
"""
from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

import grpc
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2 as pb
from p4.v1 import p4runtime_pb2_grpc

from grpctls import ClientTLS, channel

from .errors import NotPrimaryError, P4RuntimeError, from_rpc_error

_CLOSE = object()
PIPELINE_TIMEOUT = 60.0     # s for a SetForwardingPipelineConfig
log = logging.getLogger("fabricd")


class Connection:
    def __init__(self, address: str, device_id: int, election_id: int = 1,
                 timeout: float = 10.0, tls: ClientTLS | None = None) -> None:
        self.address = address
        self.tls = tls
        self.device_id = device_id
        self.election_id = election_id
        self.timeout = timeout
        self._channel: grpc.Channel | None = None
        self._stub: p4runtime_pb2_grpc.P4RuntimeStub | None = None
        self._requests: queue.Queue = queue.Queue()
        self._arbitration = threading.Condition()
        self._primary: bool | None = None
        self._refusal: tuple[int, int] | None = None   # (status code, highest id) if not primary
        self._alive = False
        self._session = 0          # a stream thread only reports on its own session
        self.packets_in: queue.Queue = queue.Queue()
        self.stream_errors: list[pb.StreamError] = []
        self.on_lost: Callable[[], None] | None = None   # the session ended, not by close()

    # -- session ----------------------------------------------------------------------------
    def open(self) -> None:
        """Connect and win arbitration; raises NotPrimaryError or P4RuntimeError."""
        self.open_channel()
        with self._arbitration:
            self._session += 1
            self._requests = queue.Queue()
            self._primary = None
            self._alive = True
        responses = self._stub.StreamChannel(iter(self._requests.get, _CLOSE))
        threading.Thread(target=self._read_stream, args=(responses, self._session),
                         daemon=True, name=f"p4rt-stream-{self.address}").start()
        self._arbitrate()
        if self._alive and not self._primary and self._refusal is not None:
            code, highest = self._refusal
            if code == code_pb2.NOT_FOUND and highest >= self.election_id:
                # No client is primary, but one that left had a higher id, and a switch makes
                # primary only an id at least as high as the highest it has seen: without
                # this, that departed client would lock this controller out until a restart.
                log.warning("%s: election id %d refused (the highest seen there is %d, its "
                            "client gone): arbitrating again with %d", self.address,
                            self.election_id, highest, highest + 1)
                self.election_id = highest + 1
                self._arbitrate()
        if not self._alive:
            self.close()
            raise P4RuntimeError(grpc.StatusCode.UNAVAILABLE,
                                 f"switch {self.address} closed the stream")
        if not self._primary:
            self.close()
            raise NotPrimaryError(grpc.StatusCode.PERMISSION_DENIED,
                                  f"election id {self.election_id} is not primary "
                                  f"on {self.address}")

    def _arbitrate(self) -> None:
        with self._arbitration:
            self._primary, self._refusal = None, None
        request = pb.StreamMessageRequest()
        request.arbitration.device_id = self.device_id
        request.arbitration.election_id.high = self.election_id >> 64
        request.arbitration.election_id.low = self.election_id & ((1 << 64) - 1)
        self._requests.put(request)
        with self._arbitration:
            self._arbitration.wait_for(lambda: self._primary is not None or not self._alive,
                                       timeout=self.timeout)

    def open_channel(self) -> None:
        """Only the channel: enough to Read (an observer that must not take primacy away)."""
        self.close()
        self._channel = channel(self.address, self.tls)
        # A refused connection (or TLS handshake) fails at once rather than after `timeout`
        # of gRPC's reconnect backoff: the caller (fabricd's watchdog) retries on its own.
        states: queue.Queue = queue.Queue()
        self._channel.subscribe(states.put, try_to_connect=True)
        state = None
        try:
            while state not in (grpc.ChannelConnectivity.READY,
                                grpc.ChannelConnectivity.TRANSIENT_FAILURE):
                state = states.get(timeout=self.timeout)
        except queue.Empty:
            state = None
        finally:
            self._channel.unsubscribe(states.put)
        if state != grpc.ChannelConnectivity.READY:
            self.close()
            what = "refused the connection" if state else "does not answer"
            raise P4RuntimeError(grpc.StatusCode.UNAVAILABLE, f"switch {self.address} {what}")
        self._stub = p4runtime_pb2_grpc.P4RuntimeStub(self._channel)

    def _read_stream(self, responses, session: int) -> None:
        try:
            for msg in responses:
                kind = msg.WhichOneof("update")
                if kind == "arbitration":
                    with self._arbitration:
                        if session == self._session:
                            arb = msg.arbitration
                            self._primary = arb.status.code == 0
                            self._refusal = None if self._primary else (
                                arb.status.code,
                                arb.election_id.high << 64 | arb.election_id.low)
                        self._arbitration.notify_all()
                elif kind == "packet":
                    self.packets_in.put(msg.packet)
                elif kind == "error":
                    self.stream_errors.append(msg.error)
        except grpc.RpcError:
            pass  # the switch went away or we closed the channel: `connected` says so
        finally:
            with self._arbitration:
                lost = session == self._session and self._alive
                if session == self._session:
                    self._alive = False
                self._arbitration.notify_all()
            if lost and self.on_lost is not None:
                self.on_lost()

    @property
    def connected(self) -> bool:
        return self._alive and bool(self._primary)

    def close(self) -> None:
        with self._arbitration:
            self._alive = False            # before the stream ends: not a loss
        if self._channel is not None:
            self._requests.put(_CLOSE)
            self._channel.close()
        self._channel = self._stub = None

    # -- RPCs -------------------------------------------------------------------------------
    def _election(self, msg) -> None:
        msg.election_id.high = self.election_id >> 64
        msg.election_id.low = self.election_id & ((1 << 64) - 1)

    def _call(self, method, request, timeout: float | None = None):
        if self._stub is None:
            raise P4RuntimeError(grpc.StatusCode.UNAVAILABLE, f"not connected to {self.address}")
        try:
            return getattr(self._stub, method)(request, timeout=timeout or self.timeout)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    def set_pipeline(self, p4info, device_config: bytes, cookie: int) -> None:
        request = pb.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            action=pb.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        self._election(request)
        request.config.p4info.CopyFrom(p4info)
        request.config.p4_device_config = device_config
        request.config.cookie.cookie = cookie
        # a switch compiles the program it is sent (p4switch: seconds on a busy machine)
        self._call("SetForwardingPipelineConfig", request,
                   max(self.timeout, PIPELINE_TIMEOUT))

    def pipeline_cookie(self) -> int | None:
        """The cookie of the installed pipeline, or None when the switch has none."""
        request = pb.GetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            response_type=pb.GetForwardingPipelineConfigRequest.COOKIE_ONLY)
        try:
            reply = self._call("GetForwardingPipelineConfig", request)
        except P4RuntimeError as err:
            if err.code == grpc.StatusCode.FAILED_PRECONDITION:
                return None
            raise
        if not reply.config.HasField("cookie"):
            return None
        return reply.config.cookie.cookie

    def write(self, updates: list[pb.Update]) -> None:
        """One Write batch (non-atomic, as BMv2 does it); raises WriteError naming each
        failed update."""
        if not updates:
            return
        request = pb.WriteRequest(device_id=self.device_id, updates=updates)
        self._election(request)
        self._call("Write", request)

    def read(self, entities: list[pb.Entity]) -> list[pb.Entity]:
        if self._stub is None:
            raise P4RuntimeError(grpc.StatusCode.UNAVAILABLE, f"not connected to {self.address}")
        request = pb.ReadRequest(device_id=self.device_id, entities=entities)
        try:
            return [e for reply in self._stub.Read(request, timeout=self.timeout)
                    for e in reply.entities]
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None


__all__ = ["Connection", "NotPrimaryError", "P4RuntimeError"]
