"""The `simple_switch` calls: mirroring sessions as P4Runtime clone sessions, egress queue
depths and rates on the device's traffic manager, the switch clock."""
from __future__ import annotations

import time

from p4.v1 import p4runtime_pb2

from ..runtime.errors import P4RuntimeError
from .bridge import Bridge
from .simple_switch import (
    InvalidMirroringOperation,
    MirroringOperationErrorCode,
    MirroringSessionConfig,
)

Update = p4runtime_pb2.Update
NOT_FOUND = InvalidMirroringOperation(code=MirroringOperationErrorCode.SESSION_NOT_FOUND)


class SimpleSwitchCalls:
    def __init__(self, bridge: Bridge):
        self.bridge = bridge
        self.started = time.monotonic_ns()
        self.sessions: dict[int, MirroringSessionConfig] = {}   # as given, for _get

    def _sessions(self, state, sid):
        q = p4runtime_pb2.PacketReplicationEngineEntry(
            clone_session_entry=p4runtime_pb2.CloneSessionEntry(session_id=sid))
        found = Bridge.read(state, packet_replication_engine_entry=q)
        return [e.packet_replication_engine_entry.clone_session_entry for e in found]

    def _group_replicas(self, state, mgid):
        q = p4runtime_pb2.PacketReplicationEngineEntry(
            multicast_group_entry=p4runtime_pb2.MulticastGroupEntry(multicast_group_id=mgid))
        found = Bridge.read(state, packet_replication_engine_entry=q)
        if not found:
            raise NOT_FOUND
        return list(found[0].packet_replication_engine_entry.multicast_group_entry.replicas)

    def mirroring_session_add(self, mirror_id, config):
        """A session to a port, or to a multicast group: the group's replicas as they are
        now (a P4Runtime clone session lists its replicas itself)."""
        with self.bridge.pipeline(NOT_FOUND) as state:
            session = p4runtime_pb2.CloneSessionEntry(session_id=mirror_id)
            if config.port is not None:
                session.replicas.add(egress_port=config.port, instance=0)
            if config.mgid is not None:
                session.replicas.extend(self._group_replicas(state, config.mgid))
            kind = Update.MODIFY if self._sessions(state, mirror_id) else Update.INSERT
            try:
                Bridge.write(state, kind, packet_replication_engine_entry=p4runtime_pb2.
                             PacketReplicationEngineEntry(clone_session_entry=session))
            except P4RuntimeError:
                raise NOT_FOUND from None
            self.sessions[mirror_id] = MirroringSessionConfig(port=config.port,
                                                              mgid=config.mgid)

    def mirroring_session_delete(self, mirror_id):
        with self.bridge.pipeline(NOT_FOUND) as state:
            try:
                Bridge.write(state, Update.DELETE, packet_replication_engine_entry=p4runtime_pb2.
                             PacketReplicationEngineEntry(clone_session_entry=p4runtime_pb2.
                                                          CloneSessionEntry(session_id=mirror_id)))
            except P4RuntimeError:
                raise NOT_FOUND from None
            self.sessions.pop(mirror_id, None)

    def mirroring_session_get(self, mirror_id):
        with self.bridge.pipeline(NOT_FOUND) as state:
            found = self._sessions(state, mirror_id)
            if not found:
                raise NOT_FOUND
            given = self.sessions.get(mirror_id)
            if given is not None:
                return given
            replicas = found[0].replicas       # written over P4Runtime: its first port
            return MirroringSessionConfig(port=replicas[0].egress_port if replicas else None)

    # the old calls: 0 = success, as in BMv2
    def mirroring_mapping_add(self, mirror_id, egress_port):
        try:
            self.mirroring_session_add(mirror_id, MirroringSessionConfig(port=egress_port))
        except InvalidMirroringOperation:
            return 1
        return 0

    def mirroring_mapping_delete(self, mirror_id):
        try:
            self.mirroring_session_delete(mirror_id)
        except InvalidMirroringOperation:
            return 1
        return 0

    def mirroring_mapping_get_egress_port(self, mirror_id):
        try:
            config = self.mirroring_session_get(mirror_id)
        except InvalidMirroringOperation:
            return -1
        return -1 if config.port is None else config.port

    # --- queues: 0 = success, 1 = refused (as BMv2's return codes) -------------------------
    def _tm(self, fn, *args):
        try:
            fn(*args)
        except ValueError:
            return 1
        return 0

    def set_egress_queue_depth(self, port_num, depth_pkts):
        return self._tm(self.bridge.service.device.tm.set_depth, port_num, depth_pkts)

    def set_all_egress_queue_depths(self, depth_pkts):
        return self._tm(self.bridge.service.device.tm.set_depth, None, depth_pkts)

    def set_egress_queue_rate(self, port_num, rate_pps):
        return self._tm(self.bridge.service.device.tm.set_rate, port_num, rate_pps, "pps")

    def set_all_egress_queue_rates(self, rate_pps):
        return self._tm(self.bridge.service.device.tm.set_rate, None, rate_pps, "pps")

    def set_egress_priority_queue_depth(self, port_num, priority, depth_pkts):
        """One queue per port: priority 0 is it, any other priority is refused."""
        return self.set_egress_queue_depth(port_num, depth_pkts) if priority == 0 else 1

    def set_egress_priority_queue_rate(self, port_num, priority, rate_pps):
        return self.set_egress_queue_rate(port_num, rate_pps) if priority == 0 else 1

    def get_time_elapsed_us(self):
        return (time.monotonic_ns() - self.started) // 1000

    def get_time_since_epoch_us(self):
        return time.time_ns() // 1000
