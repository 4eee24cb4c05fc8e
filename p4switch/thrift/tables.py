"""`standard`'s match-table calls (bm_mt_*): entries by handle, default entries, indirect
entries (member or group of the table's action profile), direct counters and meters, all as
P4Runtime writes and reads on the running pipeline."""
from __future__ import annotations

from p4.v1 import p4runtime_pb2

from ..runtime.errors import P4RuntimeError
from . import values
from .bridge import Bridge, error_code
from .standard import (
    BmActionEntry,
    BmActionEntryType,
    BmAddEntryOptions,
    BmCounterValue,
    BmMtEntry,
    BmMtEntryLife,
    InvalidTableOperation,
    TableOperationErrorCode,
)

Update = p4runtime_pb2.Update
Codes = TableOperationErrorCode


def fail(code: str) -> InvalidTableOperation:
    return InvalidTableOperation(code=getattr(Codes, code))


def _p4rt_failure(exc: P4RuntimeError) -> InvalidTableOperation:
    import grpc
    if exc.code == grpc.StatusCode.PERMISSION_DENIED:
        return fail("DEFAULT_ACTION_IS_CONST")
    return InvalidTableOperation(code=error_code(exc, Codes, not_found="INVALID_HANDLE",
                                                 exists="DUPLICATE_ENTRY",
                                                 exhausted="TABLE_FULL"))


class TableCalls:
    bridge: Bridge

    def _state(self):
        return self.bridge.pipeline(fail("ERROR"))

    @staticmethod
    def _table(state, name):
        table = state.lookup("table", name)
        if table is None:
            raise fail("INVALID_TABLE_NAME")
        return table

    @staticmethod
    def _action(state, table, name):
        action = state.lookup("action", name)
        if action is None or action.id not in table.actions:
            raise fail("INVALID_ACTION_NAME")
        return action

    def _write(self, state, kind, **entity):
        try:
            Bridge.write(state, kind, **entity)
        except P4RuntimeError as exc:
            raise _p4rt_failure(exc) from None

    def _entries(self, state, table) -> list[p4runtime_pb2.TableEntry]:
        entries = [e.table_entry for e in Bridge.read(
            state, table_entry=p4runtime_pb2.TableEntry(table_id=table.id))]
        handles = state.entry_handles(table.id)
        present = {values.identity(e) for e in entries}
        for handle, ident in list(handles.by_handle.items()):
            if ident not in present:            # deleted over P4Runtime
                handles.remove(handle)
                state.original_keys.pop((table.id, handle), None)
        return entries

    def _key(self, state, table, handle):
        ident = state.entry_handles(table.id).key_of(handle)
        if ident is None:
            raise fail("INVALID_HANDLE")
        return values.entry_of(table.id, ident)

    def _new_entry(self, state, table, match_key, options):
        priority = options.priority if options is not None else None
        try:
            entry = p4runtime_pb2.TableEntry(table_id=table.id,
                                             priority=values.to_p4rt_priority(table, priority))
            entry.match.extend(values.to_field_matches(table, match_key or []))
        except values.BadValue:
            raise fail("BAD_MATCH_KEY") from None
        return entry

    def _insert(self, state, table, entry, match_key) -> int:
        self._write(state, Update.INSERT, table_entry=entry)
        handle = state.entry_handles(table.id).handle_of(values.identity(entry))
        state.original_keys[(table.id, handle)] = list(match_key or [])
        return handle

    # --- direct entries --------------------------------------------------------------------
    def bm_mt_get_num_entries(self, cxt_id, table_name):
        with self._state() as state:
            return len(self._entries(state, self._table(state, table_name)))

    def bm_mt_clear_entries(self, cxt_id, table_name, reset_default_entry):
        with self._state() as state:
            table = self._table(state, table_name)
            for entry in self._entries(state, table):
                if not entry.is_const:
                    key = values.entry_of(table.id, values.identity(entry))
                    self._write(state, Update.DELETE, table_entry=key)
            self._entries(state, table)
            if reset_default_entry:
                self._reset_default(state, table)

    def bm_mt_add_entry(self, cxt_id, table_name, match_key, action_name, action_data,
                        options):
        with self._state() as state:
            table = self._table(state, table_name)
            if table.implementation_id:
                raise fail("WRONG_TABLE_TYPE")
            entry = self._new_entry(state, table, match_key, options)
            entry.action.action.CopyFrom(self._action_msg(state, table, action_name, action_data))
            return self._insert(state, table, entry, match_key)

    def _action_msg(self, state, table, action_name, action_data):
        action = self._action(state, table, action_name)
        try:
            return values.to_action(action, action_data)
        except values.BadValue:
            raise fail("BAD_ACTION_DATA") from None

    def bm_mt_set_default_action(self, cxt_id, table_name, action_name, action_data):
        with self._state() as state:
            table = self._table(state, table_name)
            entry = p4runtime_pb2.TableEntry(table_id=table.id, is_default_action=True)
            entry.action.action.CopyFrom(self._action_msg(state, table, action_name, action_data))
            self._write(state, Update.MODIFY, table_entry=entry)
            state.defaults_set.add(table.id)

    def bm_mt_reset_default_entry(self, cxt_id, table_name):
        with self._state() as state:
            self._reset_default(state, self._table(state, table_name))

    bm_mt_indirect_reset_default_entry = bm_mt_reset_default_entry

    def _reset_default(self, state, table):
        self._write(state, Update.MODIFY, table_entry=p4runtime_pb2.TableEntry(
            table_id=table.id, is_default_action=True))
        state.defaults_set.discard(table.id)

    def bm_mt_delete_entry(self, cxt_id, table_name, entry_handle):
        with self._state() as state:
            table = self._table(state, table_name)
            key = self._key(state, table, entry_handle)
            try:
                Bridge.write(state, Update.DELETE, table_entry=key)
            except P4RuntimeError as exc:
                raise _p4rt_failure(exc) from None
            finally:
                self._entries(state, table)

    bm_mt_indirect_delete_entry = bm_mt_delete_entry

    def bm_mt_modify_entry(self, cxt_id, table_name, entry_handle, action_name, action_data):
        with self._state() as state:
            table = self._table(state, table_name)
            entry = self._key(state, table, entry_handle)
            entry.action.action.CopyFrom(self._action_msg(state, table, action_name, action_data))
            self._write(state, Update.MODIFY, table_entry=entry)

    def bm_mt_set_entry_ttl(self, cxt_id, table_name, entry_handle, timeout_ms):
        with self._state() as state:
            table = self._table(state, table_name)
            if not table.supports_timeout:
                raise fail("AGEING_DISABLED")
            entry = self._current(state, table, entry_handle)
            entry.idle_timeout_ns = max(0, timeout_ms) * 1_000_000
            entry.ClearField("time_since_last_hit")
            entry.ClearField("counter_data")
            entry.ClearField("meter_config")
            self._write(state, Update.MODIFY, table_entry=entry)

    bm_mt_indirect_set_entry_ttl = bm_mt_set_entry_ttl

    def _current(self, state, table, handle) -> p4runtime_pb2.TableEntry:
        key = self._key(state, table, handle)
        try:
            found = Bridge.read(state, table_entry=key)
        except P4RuntimeError as exc:
            raise _p4rt_failure(exc) from None
        if not found:
            raise fail("INVALID_HANDLE")
        return found[0].table_entry

    # --- indirect entries ------------------------------------------------------------------
    def _indirect(self, state, table_name):
        table = self._table(state, table_name)
        if not table.implementation_id:
            raise fail("WRONG_TABLE_TYPE")
        return table

    def _member_id(self, state, table, handle):
        mid = state.member_handles(table.implementation_id).key_of(handle)
        if mid is None:
            raise fail("INVALID_MBR_HANDLE")
        return mid

    def _group_id(self, state, table, handle):
        gid = state.group_handles(table.implementation_id).key_of(handle)
        if gid is None:
            raise fail("INVALID_GRP_HANDLE")
        return gid

    def _point_at(self, state, table, entry, handle, group: bool) -> None:
        """Make the entry's action a member (or a group) of the table's action profile."""
        if group:
            entry.action.action_profile_group_id = self._group_id(state, table, handle)
        else:
            entry.action.action_profile_member_id = self._member_id(state, table, handle)

    def _add_indirect(self, table_name, match_key, handle, options, group: bool) -> int:
        with self._state() as state:
            table = self._indirect(state, table_name)
            entry = self._new_entry(state, table, match_key, options)
            self._point_at(state, table, entry, handle, group)
            return self._insert(state, table, entry, match_key)

    def _modify_indirect(self, table_name, entry_handle, handle, group: bool) -> None:
        """Point an entry (the default entry when entry_handle is None) somewhere else."""
        with self._state() as state:
            table = self._indirect(state, table_name)
            entry = p4runtime_pb2.TableEntry(table_id=table.id, is_default_action=True) \
                if entry_handle is None else self._key(state, table, entry_handle)
            self._point_at(state, table, entry, handle, group)
            self._write(state, Update.MODIFY, table_entry=entry)

    def bm_mt_indirect_add_entry(self, cxt_id, table_name, match_key, mbr_handle, options):
        return self._add_indirect(table_name, match_key, mbr_handle, options, group=False)

    def bm_mt_indirect_ws_add_entry(self, cxt_id, table_name, match_key, grp_handle, options):
        return self._add_indirect(table_name, match_key, grp_handle, options, group=True)

    def bm_mt_indirect_modify_entry(self, cxt_id, table_name, entry_handle, mbr_handle):
        self._modify_indirect(table_name, entry_handle, mbr_handle, group=False)

    def bm_mt_indirect_ws_modify_entry(self, cxt_id, table_name, entry_handle, grp_handle):
        self._modify_indirect(table_name, entry_handle, grp_handle, group=True)

    def bm_mt_indirect_set_default_member(self, cxt_id, table_name, mbr_handle):
        self._modify_indirect(table_name, None, mbr_handle, group=False)

    def bm_mt_indirect_ws_set_default_group(self, cxt_id, table_name, grp_handle):
        self._modify_indirect(table_name, None, grp_handle, group=True)

    # --- reading entries -------------------------------------------------------------------
    def bm_mt_get_entries(self, cxt_id, table_name):
        with self._state() as state:
            table = self._table(state, table_name)
            handles = state.entry_handles(table.id)
            out = [self._bm_entry(state, table, handles.handle_of(values.identity(e)), e)
                   for e in self._entries(state, table)]
            return sorted(out, key=lambda e: e.entry_handle)

    def bm_mt_get_entry(self, cxt_id, table_name, entry_handle):
        with self._state() as state:
            table = self._table(state, table_name)
            return self._bm_entry(state, table, entry_handle,
                                  self._current(state, table, entry_handle))

    def bm_mt_get_entry_from_key(self, cxt_id, table_name, match_key, options):
        with self._state() as state:
            table = self._table(state, table_name)
            key = self._new_entry(state, table, match_key, options)
            found = Bridge.read(state, table_entry=key)
            if not found:
                raise fail("BAD_MATCH_KEY")
            entry = found[0].table_entry
            handle = state.entry_handles(table.id).handle_of(values.identity(entry))
            return self._bm_entry(state, table, handle, entry)

    def bm_mt_get_default_entry(self, cxt_id, table_name):
        with self._state() as state:
            table = self._table(state, table_name)
            found = Bridge.read(state, table_entry=p4runtime_pb2.TableEntry(
                table_id=table.id, is_default_action=True))
            if not found or not found[0].table_entry.HasField("action"):
                return BmActionEntry(action_type=BmActionEntryType.NONE)
            action = self._bm_action(state, table, found[0].table_entry.action)
            if table.id not in state.defaults_set and action.action_name == "NoAction" and \
                    state.json_without_default(table.name):
                return BmActionEntry(action_type=BmActionEntryType.NONE)
            return action

    def _bm_entry(self, state, table, handle, entry) -> BmMtEntry:
        key = state.original_keys.get((table.id, handle)) or \
            values.to_match_params(table, entry.match)
        out = BmMtEntry(match_key=key, entry_handle=handle,
                        options=BmAddEntryOptions(
                            priority=values.to_bmv2_priority(table, entry.priority)),
                        action_entry=self._bm_action(state, table, entry.action))
        if table.supports_timeout and entry.idle_timeout_ns:
            since = entry.time_since_last_hit.elapsed_ns \
                if entry.HasField("time_since_last_hit") else 0
            out.life = BmMtEntryLife(timeout_ms=entry.idle_timeout_ns // 1_000_000,
                                     time_since_hit_ms=since // 1_000_000)
        return out

    def _bm_action(self, state, table, action) -> BmActionEntry:
        which = action.WhichOneof("type")
        if which == "action":
            info = state.schema.action(action.action.action_id)
            return BmActionEntry(action_type=BmActionEntryType.ACTION_DATA,
                                 action_name=info.name,
                                 action_data=values.action_data(info, action.action))
        if which == "action_profile_member_id":
            handle = state.member_handles(table.implementation_id).handle_of(
                action.action_profile_member_id)
            return BmActionEntry(action_type=BmActionEntryType.MBR_HANDLE, mbr_handle=handle)
        if which == "action_profile_group_id":
            handle = state.group_handles(table.implementation_id).handle_of(
                action.action_profile_group_id)
            return BmActionEntry(action_type=BmActionEntryType.GRP_HANDLE, grp_handle=handle)
        return BmActionEntry(action_type=BmActionEntryType.NONE)

    # --- direct counters and meters --------------------------------------------------------
    def bm_mt_read_counter(self, cxt_id, table_name, entry_handle):
        with self._state() as state:
            table = self._table(state, table_name)
            if not table.direct_counter_id:
                raise fail("COUNTERS_DISABLED")
            key = self._key(state, table, entry_handle)
            try:
                found = Bridge.read(state, direct_counter_entry=p4runtime_pb2.DirectCounterEntry(
                    table_entry=key))
            except P4RuntimeError as exc:
                raise _p4rt_failure(exc) from None
            data = found[0].direct_counter_entry.data if found else None
            return BmCounterValue(bytes=data.byte_count if data else 0,
                                  packets=data.packet_count if data else 0)

    def bm_mt_write_counter(self, cxt_id, table_name, entry_handle, value):
        with self._state() as state:
            table = self._table(state, table_name)
            if not table.direct_counter_id:
                raise fail("COUNTERS_DISABLED")
            self._write_direct_counter(state, self._key(state, table, entry_handle), value)

    def _write_direct_counter(self, state, key, value):
        entry = p4runtime_pb2.DirectCounterEntry(table_entry=key)
        entry.data.byte_count = max(0, value.bytes or 0) if value else 0
        entry.data.packet_count = max(0, value.packets or 0) if value else 0
        self._write(state, Update.MODIFY, direct_counter_entry=entry)

    def bm_mt_reset_counters(self, cxt_id, table_name):
        with self._state() as state:
            table = self._table(state, table_name)
            if not table.direct_counter_id:
                raise fail("COUNTERS_DISABLED")
            for entry in self._entries(state, table):
                self._write_direct_counter(
                    state, values.entry_of(table.id, values.identity(entry)), None)

    def bm_mt_set_meter_rates(self, cxt_id, table_name, entry_handle, rates):
        with self._state() as state:
            table = self._table(state, table_name)
            if not table.direct_meter_id:
                raise fail("METERS_DISABLED")
            if len(rates or []) != 2 or rates[0].units_per_micros > rates[1].units_per_micros:
                raise fail("INVALID_METER_OPERATION")
            entry = p4runtime_pb2.DirectMeterEntry(table_entry=self._key(state, table,
                                                                         entry_handle))
            entry.config.CopyFrom(values.to_meter_config(rates))
            self._write(state, Update.MODIFY, direct_meter_entry=entry)

    def bm_mt_get_meter_rates(self, cxt_id, table_name, entry_handle):
        with self._state() as state:
            table = self._table(state, table_name)
            if not table.direct_meter_id:
                raise fail("METERS_DISABLED")
            key = self._key(state, table, entry_handle)
            found = Bridge.read(state, direct_meter_entry=p4runtime_pb2.DirectMeterEntry(
                table_entry=key))
            if not found or not found[0].direct_meter_entry.HasField("config"):
                return []
            return values.meter_rates(found[0].direct_meter_entry.config)
