"""What the Thrift handlers share: the P4Runtime pipeline they act on (the same one the
P4Runtime server reads and writes, under the device lock), BMv2-style names and handles on top
of P4Runtime ids, and P4Runtime errors turned into BMv2 error codes.

BMv2 names objects by their JSON names, which are P4Info's fully qualified names; a unique
suffix on a '.' boundary is taken too (as simple_switch_CLI does). BMv2 hands out small
integer handles (the lowest free one) for entries, members, groups and multicast nodes;
P4Runtime identifies entries by key and members/groups by client-chosen ids. Each pipeline
gets a fresh set of handle maps; an entity written over P4Runtime gets a handle when Thrift
first sees it."""
from __future__ import annotations

import contextlib
import json
import threading

import grpc
from p4.v1 import p4runtime_pb2

from ..runtime.errors import P4RuntimeError

Update = p4runtime_pb2.Update


class HandleMap:
    """handle <-> identity (any hashable), handles allocated lowest-free from 0."""

    def __init__(self):
        self.by_handle: dict[int, object] = {}
        self.by_key: dict[object, int] = {}
        self._free: list[int] = []
        self._next = 0

    def add(self, key) -> int:
        if self._free:
            self._free.sort()
            handle = self._free.pop(0)
        else:
            handle, self._next = self._next, self._next + 1
        self.by_handle[handle], self.by_key[key] = key, handle
        return handle

    def handle_of(self, key) -> int:
        handle = self.by_key.get(key)
        return self.add(key) if handle is None else handle

    def key_of(self, handle: int):
        return self.by_handle.get(handle)

    def remove(self, handle: int) -> None:
        key = self.by_handle.pop(handle, None)
        if key is not None:
            del self.by_key[key]
            self._free.append(handle)

    def clear(self) -> None:
        self.__init__()


class PipelineState:
    """Thrift-side state of one installed pipeline."""

    def __init__(self, pipeline):
        self.pipeline = pipeline
        self.schema = pipeline.schema
        self.entries: dict[int, HandleMap] = {}         # table id -> entry handles
        self.original_keys: dict[tuple[int, int], list] = {}   # (table, handle) -> BmMatchParams
        self.members: dict[int, HandleMap] = {}         # profile id -> member handle <-> id
        self.groups: dict[int, HandleMap] = {}
        self.names = _names(pipeline.schema)
        self.defaults_set: set[int] = set()     # tables whose default a Thrift call set
        self.program_json: str | None = None     # bm_get_config's answer, made once
        self._no_default: set[str] | None = None

    def json_without_default(self, table_name: str) -> bool:
        """Whether the pipeline's BMv2 JSON gives this table no default entry (BMv2 then
        shows none; p4switch runs NoAction, which does the same)."""
        if self._no_default is None:
            self._no_default = set()
            try:
                doc = json.loads(self.pipeline.config.p4_device_config)
                for pipe in doc.get("pipelines", []) if isinstance(doc, dict) else []:
                    self._no_default.update(t["name"] for t in pipe.get("tables", [])
                                            if "default_entry" not in t)
            except (ValueError, TypeError, KeyError, AttributeError):
                pass
        return table_name in self._no_default

    def entry_handles(self, table_id: int) -> HandleMap:
        return self.entries.setdefault(table_id, HandleMap())

    def member_handles(self, profile_id: int) -> HandleMap:
        return self.members.setdefault(profile_id, HandleMap())

    def group_handles(self, profile_id: int) -> HandleMap:
        return self.groups.setdefault(profile_id, HandleMap())

    def lookup(self, kind: str, name: str):
        """-> the P4Info object of that kind and name (or unique suffix), or None."""
        return self.names[kind].get(name)


def _names(schema) -> dict[str, dict[str, object]]:
    groups = {"table": schema.tables.values(), "action": schema.actions.values(),
              "profile": schema.profiles.values(), "counter": schema.counters.values(),
              "direct_counter": schema.direct_counters.values(),
              "meter": schema.meters.values(), "register": schema.registers.values(),
              "value_set": schema.value_sets.values()}
    direct_meters = {dm.preamble.name: dm for dm in schema.p4info.direct_meters}
    out = {}
    for kind, objs in list(groups.items()) + [("direct_meter", direct_meters.values())]:
        index: dict[str, object] = {}
        seen: dict[str, int] = {}
        objs = list(objs)
        for obj in objs:
            name = _name(obj)
            parts = name.split(".")
            for i in range(len(parts)):
                suffix = ".".join(parts[i:])
                seen[suffix] = seen.get(suffix, 0) + 1
                index[suffix] = obj
        out[kind] = {s: o for s, o in index.items() if seen[s] == 1}
        for obj in objs:   # a full name always resolves, even if it is another's suffix
            out[kind][_name(obj)] = obj
    return out


def _name(obj) -> str:
    """P4Info objects carry a preamble; the schema's table and action records a name."""
    return obj.preamble.name if hasattr(obj, "preamble") else obj.name


class Bridge:
    """The P4Runtime service's device as the Thrift handlers see it."""

    def __init__(self, service, device_id: int):
        self.service, self.device_id = service, device_id
        self._state: PipelineState | None = None
        self._state_lock = threading.Lock()
        self.pre = None          # multicast nodes and LAGs (pre.PreState), per pipeline
        self.started_ns = None

    @contextlib.contextmanager
    def pipeline(self, no_pipeline_error):
        """Hold the device lock; yield the running pipeline's PipelineState. Without a
        pipeline, raise `no_pipeline_error` (a ThriftError instance)."""
        with self.service.device.lock:
            pipeline = self.service.pipeline
            if pipeline is None:
                raise no_pipeline_error
            with self._state_lock:
                if self._state is None or self._state.pipeline is not pipeline:
                    self._state = PipelineState(pipeline)
                    self.pre = None
            yield self._state

    @staticmethod
    def write(state: PipelineState, kind: int, **entity) -> None:
        state.pipeline.write(Update(type=kind, entity=p4runtime_pb2.Entity(**entity)))

    @staticmethod
    def read(state: PipelineState, **entity) -> list:
        return state.pipeline.read(p4runtime_pb2.Entity(**entity))


def error_code(exc: P4RuntimeError, codes, *, not_found: str, exists: str | None = None,
               invalid: str | None = None, exhausted: str | None = None) -> int:
    """The BMv2 error code (an attribute name of `codes`) that a P4Runtime error stands
    for; anything unmapped is `codes.ERROR`."""
    by_status = {grpc.StatusCode.NOT_FOUND: not_found, grpc.StatusCode.ALREADY_EXISTS: exists,
                 grpc.StatusCode.INVALID_ARGUMENT: invalid,
                 grpc.StatusCode.OUT_OF_RANGE: invalid,
                 grpc.StatusCode.RESOURCE_EXHAUSTED: exhausted}
    name = by_status.get(exc.code)
    return getattr(codes, name) if name else codes.ERROR
