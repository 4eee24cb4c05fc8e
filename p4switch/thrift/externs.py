"""`standard`'s calls on indexed externs: counter, meter and register arrays, parser value
sets. Indices are checked against the array's size before P4Runtime is asked (BMv2's
INVALID_INDEX); every call touches at most one array."""
from __future__ import annotations

from p4.v1 import p4runtime_pb2

from ..runtime.codec import to_bytes
from ..runtime.errors import P4RuntimeError
from . import values
from .bridge import Bridge
from .standard import (
    BmCounterValue,
    CounterOperationErrorCode,
    InvalidCounterOperation,
    InvalidMeterOperation,
    InvalidParseVSetOperation,
    InvalidRegisterOperation,
    MeterOperationErrorCode,
    ParseVSetOperationErrorCode,
    RegisterOperationErrorCode,
)

Update = p4runtime_pb2.Update


def _counter_error(code):
    return InvalidCounterOperation(code=getattr(CounterOperationErrorCode, code))


def _meter_error(code):
    return InvalidMeterOperation(code=getattr(MeterOperationErrorCode, code))


def _register_error(code):
    return InvalidRegisterOperation(code=getattr(RegisterOperationErrorCode, code))


def _vset_error(code):
    return InvalidParseVSetOperation(code=getattr(ParseVSetOperationErrorCode, code))


class ExternCalls:
    bridge: Bridge

    @staticmethod
    def _indexed(state, kind, name, index, error):
        obj = state.lookup(kind, name)
        if obj is None:
            raise error(f"INVALID_{kind.upper()}_NAME")
        if index is not None and not 0 <= index < obj.size:
            raise error("INVALID_INDEX")
        return obj

    @staticmethod
    def _call(error, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except P4RuntimeError:
            raise error("ERROR") from None

    # --- counters --------------------------------------------------------------------------
    def bm_counter_read(self, cxt_id, counter_name, index):
        with self.bridge.pipeline(_counter_error("ERROR")) as state:
            counter = self._indexed(state, "counter", counter_name, index, _counter_error)
            q = p4runtime_pb2.CounterEntry(counter_id=counter.preamble.id)
            q.index.index = index
            found = self._call(_counter_error, Bridge.read, state, counter_entry=q)
            data = found[0].counter_entry.data
            return BmCounterValue(bytes=data.byte_count, packets=data.packet_count)

    def bm_counter_write(self, cxt_id, counter_name, index, value):
        with self.bridge.pipeline(_counter_error("ERROR")) as state:
            counter = self._indexed(state, "counter", counter_name, index, _counter_error)
            e = p4runtime_pb2.CounterEntry(counter_id=counter.preamble.id)
            e.index.index = index
            e.data.byte_count = max(0, value.bytes or 0)
            e.data.packet_count = max(0, value.packets or 0)
            self._call(_counter_error, Bridge.write, state, Update.MODIFY, counter_entry=e)

    def bm_counter_reset_all(self, cxt_id, counter_name):
        with self.bridge.pipeline(_counter_error("ERROR")) as state:
            counter = self._indexed(state, "counter", counter_name, None, _counter_error)
            e = p4runtime_pb2.CounterEntry(counter_id=counter.preamble.id)   # every index
            e.data.SetInParent()
            self._call(_counter_error, Bridge.write, state, Update.MODIFY, counter_entry=e)

    # --- meters ----------------------------------------------------------------------------
    @staticmethod
    def _meter_config(rates):
        if len(rates or []) != 2:
            raise _meter_error("BAD_RATES_LIST")
        if any(r.units_per_micros < 0 for r in rates) or \
                rates[0].units_per_micros > rates[1].units_per_micros:
            raise _meter_error("INVALID_INFO_RATE_VALUE")
        if any(r.burst_size < 0 for r in rates) or rates[0].burst_size > rates[1].burst_size:
            raise _meter_error("INVALID_BURST_SIZE_VALUE")
        return values.to_meter_config(rates)

    def bm_meter_set_rates(self, cxt_id, meter_array_name, index, rates):
        with self.bridge.pipeline(_meter_error("ERROR")) as state:
            meter = self._indexed(state, "meter", meter_array_name, index, _meter_error)
            e = p4runtime_pb2.MeterEntry(meter_id=meter.preamble.id,
                                         config=self._meter_config(rates))
            e.index.index = index
            self._call(_meter_error, Bridge.write, state, Update.MODIFY, meter_entry=e)

    def bm_meter_array_set_rates(self, cxt_id, meter_array_name, rates):
        with self.bridge.pipeline(_meter_error("ERROR")) as state:
            meter = self._indexed(state, "meter", meter_array_name, None, _meter_error)
            e = p4runtime_pb2.MeterEntry(meter_id=meter.preamble.id,
                                         config=self._meter_config(rates))
            self._call(_meter_error, Bridge.write, state, Update.MODIFY, meter_entry=e)

    def bm_meter_get_rates(self, cxt_id, meter_array_name, index):
        with self.bridge.pipeline(_meter_error("ERROR")) as state:
            meter = self._indexed(state, "meter", meter_array_name, index, _meter_error)
            q = p4runtime_pb2.MeterEntry(meter_id=meter.preamble.id)
            q.index.index = index
            found = self._call(_meter_error, Bridge.read, state, meter_entry=q)
            if not found or not found[0].meter_entry.HasField("config"):
                return []
            return values.meter_rates(found[0].meter_entry.config)

    # --- registers -------------------------------------------------------------------------
    def _register_write(self, state, register, index, value):
        width = state.schema.register_width(register.preamble.id)
        e = p4runtime_pb2.RegisterEntry(register_id=register.preamble.id)
        if index is not None:
            e.index.index = index
        e.data.bitstring = to_bytes(value & ((1 << width) - 1))   # BMv2 keeps the low bits
        self._call(_register_error, Bridge.write, state, Update.MODIFY, register_entry=e)

    def bm_register_read(self, cxt_id, register_array_name, idx):
        with self.bridge.pipeline(_register_error("ERROR")) as state:
            register = self._indexed(state, "register", register_array_name, idx,
                                     _register_error)
            q = p4runtime_pb2.RegisterEntry(register_id=register.preamble.id)
            q.index.index = idx
            found = self._call(_register_error, Bridge.read, state, register_entry=q)
            return int.from_bytes(found[0].register_entry.data.bitstring, "big")

    def bm_register_read_all(self, cxt_id, register_array_name):
        with self.bridge.pipeline(_register_error("ERROR")) as state:
            register = self._indexed(state, "register", register_array_name, None,
                                     _register_error)
            found = self._call(_register_error, Bridge.read, state, register_entry=p4runtime_pb2.
                               RegisterEntry(register_id=register.preamble.id))
            cells = sorted(found, key=lambda e: e.register_entry.index.index)
            return [int.from_bytes(e.register_entry.data.bitstring, "big") for e in cells]

    def bm_register_write(self, cxt_id, register_array_name, index, value):
        with self.bridge.pipeline(_register_error("ERROR")) as state:
            register = self._indexed(state, "register", register_array_name, index,
                                     _register_error)
            self._register_write(state, register, index, value)

    def bm_register_write_range(self, cxt_id, register_array_name, start_index, end_index,
                                value):
        with self.bridge.pipeline(_register_error("ERROR")) as state:
            register = self._indexed(state, "register", register_array_name, start_index,
                                     _register_error)
            if not start_index <= end_index < register.size:
                raise _register_error("INVALID_INDEX")
            for i in range(start_index, end_index + 1):
                self._register_write(state, register, i, value)

    def bm_register_reset(self, cxt_id, register_array_name):
        with self.bridge.pipeline(_register_error("ERROR")) as state:
            register = self._indexed(state, "register", register_array_name, None,
                                     _register_error)
            self._register_write(state, register, None, 0)    # every index

    # --- parser value sets -----------------------------------------------------------------
    def _vset(self, state, name):
        vset = state.lookup("value_set", name)
        if vset is None:
            raise _vset_error("INVALID_PARSE_VSET_NAME")
        return vset

    def _vset_members(self, state, vset):
        found = self._call(_vset_error, Bridge.read, state, value_set_entry=p4runtime_pb2.
                           ValueSetEntry(value_set_id=vset.preamble.id))
        return list(found[0].value_set_entry.members) if found else []

    def _vset_store(self, state, vset, members):
        e = p4runtime_pb2.ValueSetEntry(value_set_id=vset.preamble.id)
        for m in members:
            e.members.add().CopyFrom(m)
        self._call(_vset_error, Bridge.write, state, Update.MODIFY, value_set_entry=e)

    def _vset_member(self, vset, value: bytes):
        member = p4runtime_pb2.ValueSetMember()
        width = sum(m.bitwidth for m in vset.match)
        number = int.from_bytes(value, "big")
        if number >> width:
            raise _vset_error("ERROR")
        for spec in reversed(list(vset.match)):
            fm = p4runtime_pb2.FieldMatch(field_id=spec.id)
            fm.exact.value = to_bytes(number & ((1 << spec.bitwidth) - 1))
            member.match.insert(0, fm)
            number >>= spec.bitwidth
        return member

    def bm_parse_vset_add(self, cxt_id, parse_vset_name, value):
        with self.bridge.pipeline(_vset_error("ERROR")) as state:
            vset = self._vset(state, parse_vset_name)
            members = self._vset_members(state, vset)
            new = self._vset_member(vset, value)
            if new not in members:
                self._vset_store(state, vset, members + [new])

    def bm_parse_vset_remove(self, cxt_id, parse_vset_name, value):
        with self.bridge.pipeline(_vset_error("ERROR")) as state:
            vset = self._vset(state, parse_vset_name)
            gone = self._vset_member(vset, value)
            self._vset_store(state, vset, [m for m in self._vset_members(state, vset)
                                           if m != gone])

    def bm_parse_vset_get(self, cxt_id, parse_vset_name):
        with self.bridge.pipeline(_vset_error("ERROR")) as state:
            vset = self._vset(state, parse_vset_name)
            width = sum(m.bitwidth for m in vset.match)
            out = []
            for member in self._vset_members(state, vset):
                number = 0
                given = {fm.field_id: fm for fm in member.match}
                for spec in vset.match:
                    fm = given.get(spec.id)
                    part = int.from_bytes(fm.exact.value, "big") if fm else 0
                    number = (number << spec.bitwidth) | part
                out.append(number.to_bytes(values.nbytes(width), "big"))
            return out

    def bm_parse_vset_clear(self, cxt_id, parse_vset_name):
        with self.bridge.pipeline(_vset_error("ERROR")) as state:
            self._vset_store(state, self._vset(state, parse_vset_name), [])
