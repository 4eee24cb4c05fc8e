"""Table entries over P4Runtime: each entry is identified by its match key and priority, kept
in canonical form for Read, and mirrored into the switch through its handle-based API."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from . import codec
from .actions import action_proto, parse_action
from .errors import (
    already_exists,
    invalid,
    not_found,
    permission_denied,
    resource_exhausted,
    unimplemented,
)
from .match import parse_match
from .meters import check_meter_config
from .profiles import ProfileStore
from .schema import MatchType, Schema, TableInfo

Update = p4runtime_pb2.Update
IDLE_SCAN_NS = 10_000_000      # idle timeouts are checked at most this often (spec's example)


@dataclass
class StoredEntry:
    handle: int
    entry: p4runtime_pb2.TableEntry          # canonical, as Read returns it (no counter data)
    ref: tuple[str, int] | None = None       # action profile member/group of indirect tables
    one_shot: bool = False
    meter: p4runtime_pb2.MeterConfig | None = None    # direct meter config, None = all GREEN
    idle_from: int = 0        # monotonic ns the TTL counts from: insertion, MODIFY, last notice


@dataclass
class TableState:
    entries: dict[tuple, StoredEntry] = field(default_factory=dict)
    initial_default: tuple[str, dict] | None = None
    default: p4runtime_pb2.TableEntry | None = None


# simple_switch_grpc's words for an idle timeout on a table without one (clients match them);
# the spec's reading (--p4runtime-strict) names the table
IDLE_TIMEOUT_REFUSED_BMV2 = ("idle_timeout_ns must be set to 0 for tables which do not support "
                             "idle timeout")
# ... and for a write that sets the read-only time_since_last_hit, checked before the rest
TIME_SINCE_HIT_REFUSED_BMV2 = "has_time_since_last_hit must not be set in WriteRequest"


class TableStore:
    def __init__(self, schema: Schema, sw, profiles: ProfileStore, strict: bool = False):
        self.schema, self.sw, self.profiles = schema, sw, profiles
        self.strict = strict
        self.state = {tid: TableState() for tid in schema.tables}
        # monotonic ns of the next idle-timeout check (None: no entry has a TTL); read by the
        # server's timer without the device lock
        self.idle_deadline: int | None = None
        for table in schema.tables.values():
            st = self.state[table.id]
            if not table.implementation_id:
                st.initial_default = sw.table_get_default(table.name)
                st.default = self._default_proto(table, *st.initial_default)
            for e in sw.table_entries(table.name):
                self._adopt(table, e)

    # --- write -----------------------------------------------------------------------------
    def write(self, kind: int, entry: p4runtime_pb2.TableEntry) -> None:
        table = self.schema.table(entry.table_id)
        if entry.is_const:
            raise invalid("is_const is set by the server only; it must be false in writes")
        if entry.is_default_action:
            self._write_default(kind, table, entry)
            return
        key, sw_match, canonical_match = parse_match(table, entry)
        priority = self._priority(table, entry.priority)
        st = self.state[table.id]
        full_key = (key, priority)
        existing = st.entries.get(full_key)
        if kind == Update.DELETE:        # only the key counts; other fields are ignored
            if table.is_const:
                raise permission_denied(f"table '{table.name}' has const entries")
            if existing is None:
                raise not_found(f"table '{table.name}': no such entry")
            if existing.entry.is_const:
                raise permission_denied(f"table '{table.name}': the entry is const")
            self.sw.table_delete(table.name, existing.handle)
            self._release(table, existing)
            del st.entries[full_key]
            return
        self._check_entry_fields(kind, table, entry)
        if kind == Update.INSERT and existing is not None:
            raise already_exists(f"table '{table.name}': an entry with this key exists")
        if kind == Update.MODIFY and existing is None:
            raise not_found(f"table '{table.name}': no such entry")
        if kind == Update.INSERT and table.size and len(st.entries) >= table.size:
            raise resource_exhausted(f"table '{table.name}' is full ({table.size} entries)")
        if kind == Update.MODIFY and existing.entry.is_const and entry.HasField("action"):
            raise permission_denied(f"table '{table.name}': a const entry's action cannot "
                                    "change; only its direct resources")
        reset_meter = (kind == Update.MODIFY and not entry.HasField("meter_config")
                       and existing.meter is not None)
        if not entry.HasField("action"):
            # A MODIFY without action changes only the entry's direct resources.
            handle, stored = existing.handle, existing.entry
            ref, one_shot = existing.ref, existing.one_shot
        else:
            stored = p4runtime_pb2.TableEntry(table_id=table.id, priority=priority,
                                              controller_metadata=entry.controller_metadata,
                                              metadata=entry.metadata)
            stored.match.extend(canonical_match)
            if table.implementation_id:
                handle, ref, one_shot = self._apply_indirect(kind, table, entry, sw_match,
                                                             priority, existing, stored)
            else:
                handle = self._apply_direct(kind, table, entry, sw_match, priority, existing,
                                            stored)
                ref, one_shot = None, False
        if entry.HasField("counter_data"):
            self.sw.direct_counter_write(table.name, handle, entry.counter_data.packet_count,
                                         entry.counter_data.byte_count)
        meter = None
        if entry.HasField("meter_config"):
            meter = self.set_meter(table, handle, entry.meter_config)
        elif reset_meter:
            self.sw.direct_meter_reset(table.name, handle)
        idle_from = existing.idle_from if existing is not None else 0
        if entry.HasField("action") or entry.idle_timeout_ns:
            stored.idle_timeout_ns = entry.idle_timeout_ns
            idle_from = time.monotonic_ns()
            if entry.idle_timeout_ns:
                self._idle_check_by(idle_from + entry.idle_timeout_ns)
        st.entries[full_key] = StoredEntry(handle, stored, ref, one_shot, meter, idle_from)

    def _check_entry_fields(self, kind: int, table: TableInfo, entry) -> None:
        """Everything an INSERT/MODIFY is refused for before anything changes."""
        if not table.match_fields:
            raise invalid(f"table '{table.name}' has no key: only its default entry exists")
        if table.is_const and (kind == Update.INSERT or entry.HasField("action")):
            raise permission_denied(f"table '{table.name}' has const entries: only their "
                                    "direct resources may be modified")
        if kind == Update.INSERT and not entry.HasField("action"):
            raise invalid(f"table '{table.name}': the entry has no action")
        if entry.HasField("time_since_last_hit") and not self.strict:
            raise invalid(TIME_SINCE_HIT_REFUSED_BMV2)
        if entry.idle_timeout_ns or entry.HasField("time_since_last_hit"):
            if not table.supports_timeout:
                raise invalid(f"table '{table.name}' does not support idle timeout"
                              if self.strict else IDLE_TIMEOUT_REFUSED_BMV2)
            if entry.HasField("time_since_last_hit"):
                raise invalid("time_since_last_hit is read only: it must be unset in writes")
            if entry.idle_timeout_ns < 0:
                raise invalid(f"table '{table.name}': negative idle_timeout_ns")
        if entry.HasField("meter_counter_data"):
            raise unimplemented("meter counters are not supported by this target")
        if entry.HasField("meter_config"):
            if not table.direct_meter_id:
                raise invalid(f"table '{table.name}' has no direct meter")
            check_meter_config(entry.meter_config, table.name)
        if entry.HasField("counter_data") and not table.direct_counter_id:
            raise invalid(f"table '{table.name}' has no direct counter")

    def set_meter(self, table: TableInfo, handle: int, config) -> p4runtime_pb2.MeterConfig:
        c = config
        self.sw.direct_meter_set(table.name, handle, c.cir, c.cburst, c.pir, c.pburst)
        stored = p4runtime_pb2.MeterConfig()
        stored.CopyFrom(c)
        return stored

    def _apply_direct(self, kind, table, entry, sw_match, priority, existing, stored) -> int:
        if entry.action.WhichOneof("type") != "action":
            raise invalid(f"table '{table.name}' has no action profile: entries take an action")
        aname, params, canonical = parse_action(self.schema, entry.action.action, table.actions,
                                                f"table '{table.name}'")
        stored.action.action.CopyFrom(canonical)
        if kind == Update.INSERT:
            return self.sw.table_add(table.name, sw_match, aname, params,
                                     priority=priority or None)
        self.sw.table_modify(table.name, existing.handle, aname, params)
        return existing.handle

    def _apply_indirect(self, kind, table, entry, sw_match, priority, existing, stored):
        pid, which = table.implementation_id, entry.action.WhichOneof("type")
        one_shot = which == "action_profile_action_set"
        if which == "action_profile_member_id":
            self.profiles.check_member(pid, entry.action.action_profile_member_id)
            ref = ("m", entry.action.action_profile_member_id)
        elif which == "action_profile_group_id":
            self.profiles.check_group(pid, entry.action.action_profile_group_id)
            ref = ("g", entry.action.action_profile_group_id)
        elif one_shot:
            ref = self.profiles.one_shot(pid, entry.action.action_profile_action_set)
        else:
            raise invalid(f"table '{table.name}' is implemented by an action profile: entries "
                          "take a member, a group or a one-shot action set")
        stored.action.CopyFrom(entry.action)
        add, mod = ((self.sw.table_add_member, self.sw.table_modify_member) if ref[0] == "m"
                    else (self.sw.table_add_group, self.sw.table_modify_group))
        if kind == Update.INSERT:
            handle = add(table.name, sw_match, ref[1], priority=priority or None)
        else:
            handle = existing.handle
            mod(table.name, handle, ref[1])
            self._release(table, existing)
        if not one_shot:
            self.profiles.ref(pid, ref, +1)
        return handle, ref, one_shot

    def _release(self, table: TableInfo, stored: StoredEntry) -> None:
        if stored.ref is None:
            return
        if stored.one_shot:
            self.profiles.drop_one_shot(table.implementation_id, stored.ref)
        else:
            self.profiles.ref(table.implementation_id, stored.ref, -1)

    def _write_default(self, kind, table: TableInfo, entry) -> None:
        if kind != Update.MODIFY:
            raise invalid(f"table '{table.name}': the default entry can only be modified")
        if entry.match or entry.priority:
            raise invalid(f"table '{table.name}': the default entry has no match and no "
                          "priority")
        if entry.HasField("time_since_last_hit") and not self.strict:
            raise invalid(TIME_SINCE_HIT_REFUSED_BMV2)
        # simple_switch_grpc takes an idle timeout on a default entry and ignores it (the
        # default entry never ages); the spec refuses it
        if self.strict and (entry.idle_timeout_ns or entry.HasField("time_since_last_hit")):
            raise invalid("default entries have no idle timeout")
        if table.implementation_id:
            raise unimplemented(f"default entries of indirect table '{table.name}'")
        if table.const_default_action_id:
            raise permission_denied(f"table '{table.name}' has a const default action")
        st = self.state[table.id]
        if not entry.HasField("action"):
            aname, params = st.initial_default
            self.sw.table_set_default(table.name, aname, params)
            st.default = self._default_proto(table, aname, params)
            return
        if entry.action.WhichOneof("type") != "action":
            raise invalid(f"table '{table.name}': the default entry takes an action")
        aname, params, canonical = parse_action(self.schema, entry.action.action, table.actions,
                                                f"table '{table.name}'", default_entry=True)
        self.sw.table_set_default(table.name, aname, params)
        st.default = p4runtime_pb2.TableEntry(table_id=table.id, is_default_action=True)
        st.default.action.action.CopyFrom(canonical)

    @staticmethod
    def _priority(table: TableInfo, priority: int) -> int:
        if table.needs_priority and priority <= 0:
            raise invalid(f"table '{table.name}' has ternary/range/optional fields: entries "
                          "need a priority > 0")
        if not table.needs_priority and priority:
            raise invalid(f"table '{table.name}' has only exact/lpm fields: priority must be 0")
        return priority

    # --- read ------------------------------------------------------------------------------
    def read(self, query: p4runtime_pb2.TableEntry) -> list[p4runtime_pb2.TableEntry]:
        if query.table_id == 0:
            if query.match:
                raise invalid("a match key needs a table id")
            tables = list(self.schema.tables.values())
        else:
            tables = [self.schema.table(query.table_id)]
        if query.HasField("time_since_last_hit") and query.table_id and \
                not tables[0].supports_timeout:
            raise invalid(f"table '{tables[0].name}' does not support idle timeout")
        out = []
        for table in tables:
            st = self.state[table.id]
            if query.is_default_action:
                found = [st.default] if st.default is not None else []
            elif query.match:
                key, _, _ = parse_match(table, query)
                hit = st.entries.get((key, query.priority))
                found = [hit] if hit else []
            else:
                found = [e for e in st.entries.values() if _selected(query, e.entry)]
            hits = (self.sw.table_last_hits(table.name)
                    if query.HasField("time_since_last_hit") and table.supports_timeout else None)
            now = time.monotonic_ns()
            for item in found:
                out.append(self._render(table, item, query, hits, now))
        return out

    def _render(self, table, item, query, hits=None, now=0) -> p4runtime_pb2.TableEntry:
        if isinstance(item, p4runtime_pb2.TableEntry):   # the default entry
            return item
        entry = p4runtime_pb2.TableEntry()
        entry.CopyFrom(item.entry)
        if hits is not None and item.handle in hits:
            entry.time_since_last_hit.elapsed_ns = max(0, now - hits[item.handle])
        # Direct resources are reported only when asked for (spec: "Direct Resources").
        if query.HasField("meter_config") and item.meter is not None:
            entry.meter_config.CopyFrom(item.meter)
        if query.HasField("counter_data") and table.direct_counter_id:
            packets, nbytes = self.sw.direct_counter_read(table.name, item.handle)
            entry.counter_data.packet_count, entry.counter_data.byte_count = packets, nbytes
        return entry

    # --- idle timeouts ---------------------------------------------------------------------
    def _idle_check_by(self, when: int) -> None:
        if self.idle_deadline is None or when < self.idle_deadline:
            self.idle_deadline = when

    def idle_scan(self) -> list[p4runtime_pb2.IdleTimeoutNotification]:
        """One notification per table for its entries idle for their TTL since their last hit
        or their last notification (whose TTL then starts again); sets the next check."""
        now = time.monotonic_ns()
        nxt, out = None, []
        for table in self.schema.tables.values():
            if not table.supports_timeout:
                continue
            timed = [e for e in self.state[table.id].entries.values() if e.entry.idle_timeout_ns]
            if not timed:
                continue
            hits = self.sw.table_last_hits(table.name)
            note = p4runtime_pb2.IdleTimeoutNotification()
            for e in timed:
                since = max(hits.get(e.handle, 0), e.idle_from)
                if now - since >= e.entry.idle_timeout_ns:
                    expired = note.table_entry.add()
                    expired.CopyFrom(e.entry)
                    e.idle_from = since = now
                due = since + e.entry.idle_timeout_ns
                nxt = due if nxt is None else min(nxt, due)
            if note.table_entry:
                note.timestamp = time.time_ns()
                out.append(note)
        self.idle_deadline = None if nxt is None else max(nxt, now + IDLE_SCAN_NS)
        return out

    def lookup(self, entry: p4runtime_pb2.TableEntry) -> tuple[TableInfo, StoredEntry]:
        """The stored entry a DirectCounterEntry refers to, or NOT_FOUND."""
        table = self.schema.table(entry.table_id)
        key, _, _ = parse_match(table, entry)
        stored = self.state[table.id].entries.get((key, entry.priority))
        if stored is None:
            raise not_found(f"table '{table.name}': no such entry")
        return table, stored

    # --- helpers ---------------------------------------------------------------------------
    def _default_proto(self, table: TableInfo, aname: str, params: dict):
        entry = p4runtime_pb2.TableEntry(table_id=table.id, is_default_action=True)
        entry.action.action.CopyFrom(action_proto(self.schema, aname, params))
        return entry

    def _adopt(self, table: TableInfo, e) -> None:
        """Entries present right after load (const entries of the program) become readable."""
        stored = p4runtime_pb2.TableEntry(table_id=table.id, priority=e.priority or 0,
                                          is_const=self.sw.entry_is_const(table.name, e.handle))
        by_name = {m.name: m for m in table.match_fields.values()}
        key = []
        for name, value in e.match.items():
            spec = by_name[name]
            fm = _field_from_switch(spec, value)
            if fm is not None:
                stored.match.append(fm)
                key.append((spec.id, value))
        stored.match.sort(key=lambda f: f.field_id)
        stored.action.action.CopyFrom(action_proto(self.schema, e.action, e.params))
        self.state[table.id].entries[(tuple(sorted(key)), stored.priority)] = \
            StoredEntry(e.handle, stored)


def _selected(query: p4runtime_pb2.TableEntry, entry: p4runtime_pb2.TableEntry) -> bool:
    """Wildcard-read filters: a field at its default value selects everything."""
    if query.priority and entry.priority != query.priority:
        return False
    if query.controller_metadata and entry.controller_metadata != query.controller_metadata:
        return False
    if query.metadata and entry.metadata != query.metadata:
        return False
    if query.action.HasField("action"):
        return entry.action.action.action_id == query.action.action.action_id
    return True


def _field_from_switch(spec: p4info_pb2.MatchField, value) -> p4runtime_pb2.FieldMatch | None:
    """FieldMatch for a switch-side match value, None for a don't-care."""
    fm = p4runtime_pb2.FieldMatch(field_id=spec.id)
    kind = spec.match_type
    if kind == MatchType.EXACT:
        fm.exact.value = codec.to_bytes(value)
    elif kind == MatchType.OPTIONAL:
        if value is None:
            return None
        fm.optional.value = codec.to_bytes(value)
    elif kind == MatchType.LPM:
        if value[1] == 0:
            return None
        fm.lpm.value, fm.lpm.prefix_len = codec.to_bytes(value[0]), value[1]
    elif kind == MatchType.TERNARY:
        if value[1] == 0:
            return None
        fm.ternary.value, fm.ternary.mask = codec.to_bytes(value[0]), codec.to_bytes(value[1])
    else:
        if value == (0, (1 << spec.bitwidth) - 1):
            return None
        fm.range.low, fm.range.high = codec.to_bytes(value[0]), codec.to_bytes(value[1])
    return fm
