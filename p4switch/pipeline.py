"""The v1model pipeline of a loaded program, as BMv2 simple_switch runs it: parser, checksum
verification, ingress, the traffic manager's replication (clone, resubmit, multicast,
recirculate), egress, checksum update, deparser. The reference semantics of p4switch; the
control API over it is switch.py, the native backend mirrors it in native/simple_switch.c."""
from __future__ import annotations

import time
from collections import namedtuple

from . import engine
from .engine import ExitBlock, PacketCursor, PacketState, ParserReject, Rng, join_chunks
from .ir import Program, pyname
from .stateful import Counter, DirectMeter, Meter, MeterState, Register, ValueSet
from .tables import ActionProfile, Entry, Table

DROP_PORT = 511
NORMAL, INGRESS_CLONE, EGRESS_CLONE, RECIRC, REPLICATION, RESUBMIT = 0, 1, 2, 4, 5, 6
I2E, E2E = 0, 1
MAX_LOOPS = 32          # resubmit/recirculate rounds before a packet is dropped

TableEntry = namedtuple("TableEntry", "handle match action params priority")


class EgressJob:
    """A packet the traffic manager queued for one egress port."""

    __slots__ = ("egress_port", "packet_length", "state")

    def __init__(self, egress_port, state):
        self.egress_port, self.packet_length, self.state = egress_port, state.plen, state


class Pipeline:
    def __init__(self, program: Program, p4info, cpu_port=None):
        self.program, self.p4info, self.cpu_port = program, p4info, cpu_port
        ns: dict = {}
        exec(compile(program.source, "<p4switch program>", "exec"), ns)  # noqa: S102
        # random() and HashAlgorithm.random draw from this switch's own generator
        self.rng = Rng()
        ns["_random"] = self.rng.random
        if "_hash('random'" in program.source:
            ns["_hash"] = self.rng.hash
        self.ns = ns
        self.cur = None
        self.mc_groups: dict[int, list[tuple[int, int]]] = {}
        self.clone_sessions: dict[int, tuple[list[tuple[int, int]], int]] = {}  # id -> (replicas, length)
        self.digest_queue: list = []
        self.externs: dict[str, object] = {}
        self.profiles: dict[str, ActionProfile] = {}
        for name, spec in program.externs.items():
            kind = spec["kind"]
            if kind == "register":
                obj = Register(name, spec["size"], spec["width"])
            elif kind == "counter":
                obj = Counter(name, spec["size"], spec["unit"])
            elif kind == "meter":
                obj = Meter(name, spec["size"], spec["unit"])
            elif kind == "direct_meter":
                obj = DirectMeter(name, spec["unit"])
            elif kind in ("action_profile", "action_selector"):
                obj = self.profiles[name] = ActionProfile(name, spec)
            elif kind == "value_set":
                obj = ValueSet(name, spec["size"], spec["widths"])
            else:
                obj = None
            self.externs[name] = obj
            ns["X_" + pyname(name)] = obj
        self.tables: dict[str, Table] = {}
        for name, spec in program.tables.items():
            fns = ns["T_" + pyname(name) + "_ACTIONS"]
            table = Table(name, spec, fns, self)
            if spec.get("implementation"):
                table.profile = self.profiles[spec["implementation"]]
            if spec.get("direct_meter"):
                table.meter = self.externs[spec["direct_meter"]]
            self.tables[name] = table
            ns["TB_" + pyname(name)] = table
            for entry in spec.get("const_entries") or []:
                self._add_const(table, entry)
        self._PARSE, self._VERIFY, self._INGRESS = ns["PARSE"], ns["VERIFY"], ns["INGRESS"]
        self._EGRESS, self._COMPUTE, self._DEPARSE = ns["EGRESS"], ns["COMPUTE"], ns["DEPARSE"]
        self._HDR, self._META, self._SM, self._PRESERVE = ns["HDR"], ns["META"], ns["SM"], ns["PRESERVE"]
        self.logger = None

    # ================================================================ packets
    def set_logger(self, fn):
        self.logger = fn
        self.ns["_LOG"] = fn is not None
        self.ns["_log"] = fn if fn is not None else engine.no_log

    def _say(self, line):
        if self.logger is not None:
            self.logger(line)

    def process(self, ingress_port: int, data: bytes):
        out = []
        pending = self.ingress(ingress_port, data)
        while pending:
            job = pending.pop(0)
            for item in self.egress(job):
                if isinstance(item, EgressJob):
                    pending.append(item)
                else:
                    out.append(item)
        return out

    def ingress(self, ingress_port: int, data: bytes, _instance=NORMAL, _from=None, _fl=None, _depth=0):
        if not isinstance(ingress_port, int) or not 0 <= ingress_port < 512:
            raise ValueError(f"ingress port {ingress_port!r} is not a 9-bit port number")
        data = bytes(data)
        if _depth > MAX_LOOPS:
            self._say("Dropping packet: too many resubmit/recirculate rounds")
            return []
        state = self._parse(ingress_port, data, _instance, _from, _fl)
        state.depth = _depth
        sm = state.sm
        try:
            self._INGRESS(state)
        except ExitBlock:
            pass
        jobs = []
        if state.clone is not None and state.clone[0] == I2E:
            replicas, clip = self.clone_sessions.get(state.clone[1] & 0xFFFFFFFF, ((), 0))
            for port, rid in replicas:
                copy = self._parse(ingress_port, data, INGRESS_CLONE, state, state.clone[2])
                copy.sm.egress_port, copy.sm.egress_rid, copy.clip = port, rid, clip
                jobs.append(EgressJob(port, copy))
        if state.digest is not None:
            name, make = state.digest
            record = make()
            self.digest_queue.append((name, tuple(getattr(record, a) for a in self.program.digests[name]["attrs"])))
        if state.resubmit is not None:
            self._say("Resubmitting packet")
            return self.ingress(ingress_port, data, RESUBMIT, state, state.resubmit, _depth + 1) + jobs
        if sm.mcast_grp:
            replicas = self.mc_groups.get(sm.mcast_grp, [])
            self._say(f"Multicast to group {sm.mcast_grp}: {len(replicas)} replicas")
            main = []
            for port, rid in replicas:
                replica = self._copy_state(state)
                replica.sm.egress_port, replica.sm.egress_rid, replica.sm.instance_type = port, rid, REPLICATION
                main.append(EgressJob(port, replica))
            return main + jobs
        if sm.egress_spec == DROP_PORT:
            self._say("Dropping packet at the end of ingress")
            return jobs
        sm.egress_port = sm.egress_spec
        return [EgressJob(sm.egress_spec, state)] + jobs

    def _parse(self, port, data, instance, src, field_list):
        state = PacketState()
        state.data = data
        state.plen = len(data)
        state.hdr, state.meta, state.sm = self._HDR(), self._META(), self._SM()
        sm = state.sm
        sm.ingress_port, sm.instance_type, sm.packet_length = port, instance, len(data)
        sm.ingress_global_timestamp = time.monotonic_ns() // 1000 & 0xFFFFFFFFFFFF
        if src is not None and field_list is not None and field_list >= 0:
            self._PRESERVE(src, state, field_list)
        self.cur = state
        self.ns["_S"] = state
        self._say(f"Packet of {len(data)} bytes on port {port}, instance type {instance}: parser")
        pkt = PacketCursor(data)
        try:
            self._PARSE(state, pkt)
        except ParserReject as r:
            sm.parser_error = r.code if r.code is not None else 0
            self._say(f"Parser error {self.program.errors[sm.parser_error] if sm.parser_error < len(self.program.errors) else sm.parser_error}")
        state.payload = data[(pkt.bo + 7) >> 3:]
        self._VERIFY(state)
        self._say("Ingress pipeline")
        return state

    def _copy_state(self, state):
        copy = PacketState()
        copy.data, copy.plen, copy.payload, copy.depth = state.data, state.plen, state.payload, state.depth
        copy.hdr, copy.meta, copy.sm = state.hdr._copy(), state.meta._copy(), state.sm._copy()
        return copy

    def egress(self, job, enq_timestamp=0, enq_qdepth=0, deq_timedelta=0, deq_qdepth=0):
        state = job.state
        sm = state.sm
        sm.egress_port = job.egress_port
        sm.enq_timestamp, sm.enq_qdepth = enq_timestamp & 0xFFFFFFFF, enq_qdepth & 0x7FFFF
        sm.deq_timedelta, sm.deq_qdepth = deq_timedelta & 0xFFFFFFFF, deq_qdepth & 0x7FFFF
        sm.egress_global_timestamp = time.monotonic_ns() // 1000 & 0xFFFFFFFFFFFF
        state.clone = state.recirculate = state.digest = None   # truncate() from ingress still applies
        self.cur = state
        self.ns["_S"] = state
        self._say(f"Egress: port {job.egress_port}, instance type {sm.instance_type}")
        try:
            self._EGRESS(state)
        except ExitBlock:
            pass
        out = []
        clone_jobs = []
        if state.clone is not None and state.clone[0] == E2E:
            replicas, clip = self.clone_sessions.get(state.clone[1] & 0xFFFFFFFF, ((), 0))
            for port, rid in replicas:
                copy = PacketState()
                copy.data, copy.plen, copy.payload, copy.depth = state.data, state.plen, state.payload, state.depth
                copy.hdr, copy.meta, copy.sm = state.hdr._copy(), self._META(), self._SM()
                if state.clone[2] is not None:
                    self._PRESERVE(state, copy, state.clone[2])
                copy.sm.ingress_port = sm.ingress_port
                copy.sm.packet_length = sm.packet_length
                copy.sm.instance_type = EGRESS_CLONE
                copy.sm.egress_rid, copy.clip = rid, clip
                clone_jobs.append(EgressJob(port, copy))
        if sm.egress_spec == DROP_PORT:
            self._say("Dropping packet at the end of egress")
        else:
            self.cur = state
            self.ns["_S"] = state
            self._COMPUTE(state)
            chunks = []
            self._DEPARSE(state, chunks)
            data = join_chunks(chunks) + state.payload
            if state.truncate is not None:
                data = data[:state.truncate]
            if state.clip:
                data = data[:state.clip]
            if state.recirculate is not None:
                self._say("Recirculating packet")
                out.extend(self.ingress(sm.ingress_port, data, RECIRC, state, state.recirculate, state.depth + 1))
            else:
                out.append((job.egress_port, data))
        out.extend(clone_jobs)
        return out

    def _attach_direct(self, t, e):
        if t.meter is not None:
            e.meter = MeterState()

    def _add_const(self, t: Table, entry):
        match, api = [], {}
        for k, v in zip(t.spec["keys"], entry["match"], strict=True):
            width = k["width"]
            full = (1 << width) - 1
            if v is None:
                match.append(None)
            elif k["match"] == "lpm":
                mask = (full >> (width - v[1])) << (width - v[1]) if v[1] else 0
                match.append((v[0] & mask, mask) if v[1] else None)
            elif k["match"] == "ternary":
                match.append((v[0] & v[1], v[1]) if v[1] else None)
            elif k["match"] == "range":
                match.append(("range", v[0], v[1]))
            else:
                match.append((v, full))
            api[k["name"]] = tuple(v) if isinstance(v, list) else v
        n = len(t.entries)
        # as p4c numbers initial entries without a priority: the first gets the largest, down to 1
        prio = entry["priority"] if entry["priority"] is not None else len(t.spec["const_entries"]) - n
        full_name = entry["action"]
        widths = [p["width"] for p in self.program.actions[full_name]["params"]]
        args = tuple(a & ((1 << w) - 1) for a, w in zip(entry["args"], widths, strict=True))
        e = Entry(None, match, full_name, args, prio, t.fns[full_name])
        e.api_match = api
        e.api_params = dict(zip([p["name"] for p in self.program.actions[full_name]["params"]], args, strict=False))
        e.is_const = True
        e.order = None
        if not t.needs_priority and entry["priority"] is None:
            e.priority = sum(bin(m[1]).count("1") for m in match if m and m[0] != "range")
            e.order = n
        self._attach_direct(t, e)
        t.add(e, check=False)
