"""One installed forwarding pipeline: the switch built from a ForwardingPipelineConfig and the
P4Runtime state on top of it (entries, profiles, PRE, externs, digest configs), with the
dispatch of Write updates and Read queries to the store that owns each entity kind."""
from __future__ import annotations

import logging

from p4.v1 import p4runtime_pb2

from p4switch import device_config
from p4switch.native.lowered import Unsupported

from . import codec
from .digests import DigestEngine
from .errors import P4RuntimeError, internal, invalid, unimplemented
from .externs import ExternStore
from .pre import PreStore
from .profiles import ProfileStore
from .schema import Schema
from .tables import TableStore
from .value_sets import ValueSetStore

log = logging.getLogger(__name__)

Update = p4runtime_pb2.Update


class Pipeline:
    def __init__(self, config: p4runtime_pb2.ForwardingPipelineConfig, cpu_port: int | None,
                 backend: str = "python", down_ports: set[int] = frozenset(),
                 strict: bool = False):
        self.config = p4runtime_pb2.ForwardingPipelineConfig()
        self.config.CopyFrom(config)
        try:
            self.sw = device_config.load(config.p4info, config.p4_device_config,
                                         cpu_port=cpu_port, backend=backend)
            self.schema = Schema.from_p4info(config.p4info)
        except P4RuntimeError:
            raise
        except device_config.ConfigError as exc:
            raise invalid(str(exc)) from exc
        except (ValueError, Unsupported) as exc:  # the readers' own errors: the config's fault
            raise invalid(f"the pipeline config is not valid for this target: {exc}") from exc
        except Exception as exc:  # the switch's fault: INTERNAL, the traceback in its log
            log.exception("pushing a pipeline config failed inside p4switch")
            raise internal(f"p4switch failed on this pipeline config: {exc}") from exc
        self.profiles = ProfileStore(self.schema, self.sw, down_ports)
        self.tables = TableStore(self.schema, self.sw, self.profiles, strict)
        self.pre = PreStore(self.sw)
        self.externs = ExternStore(self.schema, self.sw, self.tables)
        self.value_sets = ValueSetStore(self.schema, self.sw)
        self.digests = DigestEngine(self.schema)

    # --- Write -----------------------------------------------------------------------------
    def write(self, update: p4runtime_pb2.Update) -> None:
        kind = update.type
        if kind not in (Update.INSERT, Update.MODIFY, Update.DELETE):
            raise invalid("update type must be INSERT, MODIFY or DELETE")
        which = update.entity.WhichOneof("entity")
        e = update.entity
        _check_counter_data(which, e)
        try:
            if which == "table_entry":
                self.tables.write(kind, e.table_entry)
            elif which == "action_profile_member":
                self.profiles.write_member(kind, e.action_profile_member)
            elif which == "action_profile_group":
                self.profiles.write_group(kind, e.action_profile_group)
            elif which == "packet_replication_engine_entry":
                self.pre.write(kind, e.packet_replication_engine_entry)
            elif which == "counter_entry":
                self.externs.write_counter(kind, e.counter_entry)
            elif which == "direct_counter_entry":
                self.externs.write_direct_counter(kind, e.direct_counter_entry)
            elif which == "meter_entry":
                self.externs.write_meter(kind, e.meter_entry)
            elif which == "direct_meter_entry":
                self.externs.write_direct_meter(kind, e.direct_meter_entry)
            elif which == "register_entry":
                self.externs.write_register(kind, e.register_entry)
            elif which == "digest_entry":
                self.digests.write(kind, e.digest_entry)
            elif which == "value_set_entry":
                self.value_sets.write(kind, e.value_set_entry)
            elif which is None:
                raise invalid("update without an entity")
            else:
                raise unimplemented(f"writing {which} is not supported by this target")
        except (KeyError, ValueError) as exc:
            # The switch re-validates; P4Runtime checks above should leave nothing for it.
            raise invalid(f"the switch rejected the update: {exc}") from exc

    # --- Read ------------------------------------------------------------------------------
    def read(self, entity: p4runtime_pb2.Entity) -> list[p4runtime_pb2.Entity]:
        which = entity.WhichOneof("entity")
        E = p4runtime_pb2.Entity
        if which == "table_entry":
            return [E(table_entry=x) for x in self.tables.read(entity.table_entry)]
        if which == "action_profile_member":
            return [E(action_profile_member=x) for x in self._read_members(
                entity.action_profile_member)]
        if which == "action_profile_group":
            return [E(action_profile_group=x) for x in self._read_groups(
                entity.action_profile_group)]
        if which == "packet_replication_engine_entry":
            return [E(packet_replication_engine_entry=x) for x in self.pre.read(
                entity.packet_replication_engine_entry)]
        if which == "counter_entry":
            return [E(counter_entry=x) for x in self.externs.read_counter(entity.counter_entry)]
        if which == "direct_counter_entry":
            return [E(direct_counter_entry=x) for x in self.externs.read_direct_counter(
                entity.direct_counter_entry)]
        if which == "meter_entry":
            return [E(meter_entry=x) for x in self.externs.read_meter(entity.meter_entry)]
        if which == "direct_meter_entry":
            return [E(direct_meter_entry=x) for x in self.externs.read_direct_meter(
                entity.direct_meter_entry)]
        if which == "register_entry":
            return [E(register_entry=x) for x in self.externs.read_register(
                entity.register_entry)]
        if which == "value_set_entry":
            return [E(value_set_entry=x) for x in self.value_sets.read(entity.value_set_entry)]
        if which == "digest_entry":
            return [E(digest_entry=d) for d in self.digests.read(entity.digest_entry)]
        if which is None:
            raise invalid("read of an empty entity")
        raise unimplemented(f"reading {which} is not supported by this target")

    def _profiles_for(self, profile_id: int):
        if profile_id:
            self.schema.profile(profile_id)
            return [profile_id]
        return list(self.profiles.state)

    def _read_members(self, q):
        out = []
        for pid in self._profiles_for(q.action_profile_id):
            members = self.profiles.state[pid].members
            ids = [q.member_id] if q.member_id else sorted(members)
            out.extend(members[i] for i in ids if i in members)
        return out

    def _read_groups(self, q):
        out = []
        for pid in self._profiles_for(q.action_profile_id):
            groups = self.profiles.state[pid].groups
            ids = [q.group_id] if q.group_id else sorted(groups)
            out.extend(groups[i] for i in ids if i in groups)
        return out

    # --- packet I/O and digests ------------------------------------------------------------
    def packet_out_bytes(self, msg: p4runtime_pb2.PacketOut) -> bytes:
        """The frame injected at the CPU port: packet_out header (if the program has one)
        followed by the payload."""
        header = self.schema.packet_out
        if header is None:
            if msg.metadata:
                raise invalid("the program has no packet_out controller header")
            return msg.payload
        given = {}
        for m in msg.metadata:
            if m.metadata_id in given:
                raise invalid(f"packet_out metadata {m.metadata_id} given twice")
            given[m.metadata_id] = m.value
        known = {f.id: f for f in header.fields}
        unknown = set(given) - set(known)
        if unknown:
            raise invalid(f"packet_out has no metadata with id(s) {sorted(unknown)}")
        missing = [f.name for f in header.fields if f.id not in given]
        if missing:
            raise invalid(f"packet_out metadata missing: {', '.join(missing)}")
        values = [codec.to_int(given[f.id], f.bitwidth, f"packet_out.{f.name}")
                  for f in header.fields]
        return codec.pack_bits(values, header.widths) + msg.payload

    def packet_in(self, frame: bytes) -> p4runtime_pb2.PacketIn:
        """PacketIn for a frame the pipeline sent to the CPU port."""
        msg = p4runtime_pb2.PacketIn()
        header = self.schema.packet_in
        if header is None:
            msg.payload = frame
            return msg
        nbytes = (sum(header.widths) + 7) // 8
        for f, value in zip(header.fields, codec.unpack_bits(frame, header.widths),
                            strict=True):
            msg.metadata.add(metadata_id=f.id, value=codec.to_bytes(value))
        msg.payload = frame[nbytes:]
        return msg


def _check_counter_data(which: str | None, e: p4runtime_pb2.Entity) -> None:
    """Counts are int64 on the wire but never negative in a switch: refused before any change
    (a stored negative count would make every later Read of it fail)."""
    if which == "table_entry" and e.table_entry.HasField("counter_data"):
        data, what = e.table_entry.counter_data, "table_entry.counter_data"
    elif which in ("counter_entry", "direct_counter_entry") and getattr(e, which).HasField("data"):
        data, what = getattr(e, which).data, f"{which}.data"
    else:
        return
    for field in ("packet_count", "byte_count"):
        if getattr(data, field) < 0:
            raise invalid(f"{what}.{field} {getattr(data, field)} is negative")
