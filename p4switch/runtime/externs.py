"""Indexed externs over P4Runtime: counters, direct counters, meters and registers. They exist
for the pipeline's whole life, so only MODIFY is a valid write; an unset index means every
index (wildcard) in writes and reads."""
from __future__ import annotations

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from . import codec
from .errors import invalid, out_of_range, unimplemented
from .meters import check_meter_config
from .schema import Schema
from .tables import TableStore

Update = p4runtime_pb2.Update
CounterUnit = p4info_pb2.CounterSpec.Unit


def _only_modify(kind: int, what: str) -> None:
    if kind != Update.MODIFY:
        raise invalid(f"{what} entries always exist: only MODIFY is allowed")


def _indices(has_index: bool, index: int, size: int, name: str) -> range:
    if not has_index:
        return range(size)
    if index < 0:
        raise invalid(f"{name}: negative index {index}")
    if index >= size:
        raise out_of_range(f"{name}: index {index} beyond the last one, {size - 1}")
    return range(index, index + 1)


def _fill_counter(data: p4runtime_pb2.CounterData, unit: int, packets: int, nbytes: int):
    if unit in (CounterUnit.PACKETS, CounterUnit.BOTH):
        data.packet_count = packets
    if unit in (CounterUnit.BYTES, CounterUnit.BOTH):
        data.byte_count = nbytes


class ExternStore:
    def __init__(self, schema: Schema, sw, tables: TableStore):
        self.schema, self.sw, self.tables = schema, sw, tables
        self.meter_configs: dict[tuple[int, int], p4runtime_pb2.MeterConfig] = {}

    # --- counters --------------------------------------------------------------------------
    def write_counter(self, kind: int, e: p4runtime_pb2.CounterEntry) -> None:
        _only_modify(kind, "counter")
        counter = self.schema.counter(e.counter_id)
        name = counter.preamble.name
        indices = _indices(e.HasField("index"), e.index.index, counter.size, name)
        for i in indices:
            self.sw.counter_write(name, i, e.data.packet_count, e.data.byte_count)

    def read_counter(self, q: p4runtime_pb2.CounterEntry) -> list[p4runtime_pb2.CounterEntry]:
        counters = [self.schema.counter(q.counter_id)] if q.counter_id else \
            list(self.schema.counters.values())
        out = []
        for counter in counters:
            name = counter.preamble.name
            for i in _indices(q.HasField("index"), q.index.index, counter.size, name):
                packets, nbytes = self.sw.counter_read(name, i)
                e = p4runtime_pb2.CounterEntry(counter_id=counter.preamble.id)
                e.index.index = i
                _fill_counter(e.data, counter.spec.unit, packets, nbytes)
                out.append(e)
        return out

    # --- direct counters -------------------------------------------------------------------
    def write_direct_counter(self, kind: int, e: p4runtime_pb2.DirectCounterEntry) -> None:
        _only_modify(kind, "direct counter")
        table, stored = self.tables.lookup(e.table_entry)
        if not table.direct_counter_id:
            raise invalid(f"table '{table.name}' has no direct counter")
        self.sw.direct_counter_write(table.name, stored.handle, e.data.packet_count,
                                     e.data.byte_count)

    def read_direct_counter(self, q: p4runtime_pb2.DirectCounterEntry):
        query = p4runtime_pb2.TableEntry()
        query.CopyFrom(q.table_entry)
        query.counter_data.SetInParent()
        if query.table_id and not self.schema.table(query.table_id).direct_counter_id:
            raise invalid(f"table '{self.schema.table(query.table_id).name}' has no direct "
                          "counter")
        out = []
        for entry in self.tables.read(query):
            table = self.schema.table(entry.table_id)
            if not table.direct_counter_id or entry.is_default_action:
                continue
            unit = self.schema.direct_counters[table.direct_counter_id].spec.unit
            d = p4runtime_pb2.DirectCounterEntry()
            d.table_entry.CopyFrom(entry)
            d.table_entry.ClearField("counter_data")
            _fill_counter(d.data, unit, entry.counter_data.packet_count,
                          entry.counter_data.byte_count)
            out.append(d)
        return out

    # --- meters ----------------------------------------------------------------------------
    def write_meter(self, kind: int, e: p4runtime_pb2.MeterEntry) -> None:
        _only_modify(kind, "meter")
        meter = self.schema.meter(e.meter_id)
        name = meter.preamble.name
        indices = _indices(e.HasField("index"), e.index.index, meter.size, name)
        if e.HasField("config"):
            check_meter_config(e.config, name)
            c = e.config
        for i in indices:
            if e.HasField("config"):
                self.sw.meter_set(name, i, c.cir, c.cburst, c.pir, c.pburst)
                stored = p4runtime_pb2.MeterConfig()
                stored.CopyFrom(c)
                self.meter_configs[(meter.preamble.id, i)] = stored
            else:
                self.sw.meter_reset(name, i)
                self.meter_configs.pop((meter.preamble.id, i), None)

    def read_meter(self, q: p4runtime_pb2.MeterEntry) -> list[p4runtime_pb2.MeterEntry]:
        meters = [self.schema.meter(q.meter_id)] if q.meter_id else \
            list(self.schema.meters.values())
        out = []
        for meter in meters:
            mid = meter.preamble.id
            for i in _indices(q.HasField("index"), q.index.index, meter.size,
                              meter.preamble.name):
                e = p4runtime_pb2.MeterEntry(meter_id=mid)
                e.index.index = i
                if (mid, i) in self.meter_configs:
                    e.config.CopyFrom(self.meter_configs[(mid, i)])
                out.append(e)
        return out

    # --- direct meters ---------------------------------------------------------------------
    def write_direct_meter(self, kind: int, e: p4runtime_pb2.DirectMeterEntry) -> None:
        _only_modify(kind, "direct meter")
        table, stored = self.tables.lookup(e.table_entry)
        if not table.direct_meter_id:
            raise invalid(f"table '{table.name}' has no direct meter")
        if e.HasField("counter_data"):
            raise unimplemented("meter counters are not supported by this target")
        if e.HasField("config"):
            check_meter_config(e.config, table.name)
            stored.meter = self.tables.set_meter(table, stored.handle, e.config)
        elif stored.meter is not None:
            self.sw.direct_meter_reset(table.name, stored.handle)
            stored.meter = None

    def read_direct_meter(self, q: p4runtime_pb2.DirectMeterEntry):
        query = p4runtime_pb2.TableEntry()
        query.CopyFrom(q.table_entry)
        query.meter_config.SetInParent()
        if query.table_id and not self.schema.table(query.table_id).direct_meter_id:
            raise invalid(f"table '{self.schema.table(query.table_id).name}' has no direct "
                          "meter")
        out = []
        for entry in self.tables.read(query):
            table = self.schema.table(entry.table_id)
            if not table.direct_meter_id or entry.is_default_action:
                continue
            d = p4runtime_pb2.DirectMeterEntry()
            d.table_entry.CopyFrom(entry)
            d.table_entry.ClearField("meter_config")
            if entry.HasField("meter_config"):
                d.config.CopyFrom(entry.meter_config)
            out.append(d)
        return out

    # --- registers -------------------------------------------------------------------------
    def write_register(self, kind: int, e: p4runtime_pb2.RegisterEntry) -> None:
        _only_modify(kind, "register")
        register = self.schema.register(e.register_id)
        name = register.preamble.name
        indices = _indices(e.HasField("index"), e.index.index, register.size, name)
        if e.data.WhichOneof("data") != "bitstring":
            raise invalid(f"{name}: register data must be a bitstring")
        value = codec.to_int(e.data.bitstring, self.schema.register_width(e.register_id), name)
        for i in indices:
            self.sw.register_write(name, i, value)

    def read_register(self, q: p4runtime_pb2.RegisterEntry) -> list[p4runtime_pb2.RegisterEntry]:
        registers = [self.schema.register(q.register_id)] if q.register_id else \
            list(self.schema.registers.values())
        out = []
        for register in registers:
            name = register.preamble.name
            for i in _indices(q.HasField("index"), q.index.index, register.size, name):
                e = p4runtime_pb2.RegisterEntry(register_id=register.preamble.id)
                e.index.index = i
                e.data.bitstring = codec.to_bytes(self.sw.register_read(name, i))
                out.append(e)
        return out
