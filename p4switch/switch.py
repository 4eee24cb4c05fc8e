"""A loaded program: the v1model pipeline (BMv2 simple_switch semantics) and its control API."""
from __future__ import annotations

import time
from collections import namedtuple

from . import engine
from .compiler import Program, pyname
from .engine import PacketState, _Exit, _Packet, _Reject, join_chunks
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


class Switch:
    def __init__(self, program: Program, p4info, cpu_port=None):
        self.program, self.p4info, self.cpu_port = program, p4info, cpu_port
        ns: dict = {}
        exec(compile(program.source, "<p4switch program>", "exec"), ns)  # noqa: S102
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
        self.ns["_log"] = fn if fn is not None else engine._log

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
        S = self._parse(ingress_port, data, _instance, _from, _fl)
        S.depth = _depth
        sm = S.sm
        try:
            self._INGRESS(S)
        except _Exit:
            pass
        jobs = []
        if S.clone is not None and S.clone[0] == I2E:
            replicas, clip = self.clone_sessions.get(S.clone[1] & 0xFFFFFFFF, ((), 0))
            for port, rid in replicas:
                C = self._parse(ingress_port, data, INGRESS_CLONE, S, S.clone[2])
                C.sm.egress_port, C.sm.egress_rid, C.clip = port, rid, clip
                jobs.append(EgressJob(port, C))
        if S.digest is not None:
            name, make = S.digest
            record = make()
            self.digest_queue.append((name, tuple(getattr(record, a) for a in self.program.digests[name]["attrs"])))
        if S.resubmit is not None:
            self._say("Resubmitting packet")
            return self.ingress(ingress_port, data, RESUBMIT, S, S.resubmit, _depth + 1) + jobs
        if sm.mcast_grp:
            replicas = self.mc_groups.get(sm.mcast_grp, [])
            self._say(f"Multicast to group {sm.mcast_grp}: {len(replicas)} replicas")
            main = []
            for port, rid in replicas:
                R = self._copy_state(S)
                R.sm.egress_port, R.sm.egress_rid, R.sm.instance_type = port, rid, REPLICATION
                main.append(EgressJob(port, R))
            return main + jobs
        if sm.egress_spec == DROP_PORT:
            self._say("Dropping packet at the end of ingress")
            return jobs
        sm.egress_port = sm.egress_spec
        return [EgressJob(sm.egress_spec, S)] + jobs

    def _parse(self, port, data, instance, src, field_list):
        S = PacketState()
        S.data = data
        S.plen = len(data)
        S.hdr, S.meta, S.sm = self._HDR(), self._META(), self._SM()
        sm = S.sm
        sm.ingress_port, sm.instance_type, sm.packet_length = port, instance, len(data)
        sm.ingress_global_timestamp = time.monotonic_ns() // 1000 & 0xFFFFFFFFFFFF
        if src is not None and field_list is not None and field_list >= 0:
            self._PRESERVE(src, S, field_list)
        self.cur = S
        self.ns["_S"] = S
        self._say(f"Packet of {len(data)} bytes on port {port}, instance type {instance}: parser")
        pkt = _Packet(data)
        try:
            self._PARSE(S, pkt)
        except _Reject as r:
            sm.parser_error = r.code if r.code is not None else 0
            self._say(f"Parser error {self.program.errors[sm.parser_error] if sm.parser_error < len(self.program.errors) else sm.parser_error}")
        S.payload = data[(pkt.bo + 7) >> 3:]
        self._VERIFY(S)
        self._say("Ingress pipeline")
        return S

    def _copy_state(self, S):
        R = PacketState()
        R.data, R.plen, R.payload, R.depth = S.data, S.plen, S.payload, S.depth
        R.hdr, R.meta, R.sm = S.hdr._copy(), S.meta._copy(), S.sm._copy()
        return R

    def egress(self, job, enq_timestamp=0, enq_qdepth=0, deq_timedelta=0, deq_qdepth=0):
        S = job.state
        sm = S.sm
        sm.egress_port = job.egress_port
        sm.enq_timestamp, sm.enq_qdepth = enq_timestamp & 0xFFFFFFFF, enq_qdepth & 0x7FFFF
        sm.deq_timedelta, sm.deq_qdepth = deq_timedelta & 0xFFFFFFFF, deq_qdepth & 0x7FFFF
        sm.egress_global_timestamp = time.monotonic_ns() // 1000 & 0xFFFFFFFFFFFF
        S.clone = S.recirculate = S.digest = None   # truncate() from ingress still applies
        self.cur = S
        self.ns["_S"] = S
        self._say(f"Egress: port {job.egress_port}, instance type {sm.instance_type}")
        try:
            self._EGRESS(S)
        except _Exit:
            pass
        out = []
        clone_jobs = []
        if S.clone is not None and S.clone[0] == E2E:
            replicas, clip = self.clone_sessions.get(S.clone[1] & 0xFFFFFFFF, ((), 0))
            for port, rid in replicas:
                C = PacketState()
                C.data, C.plen, C.payload, C.depth = S.data, S.plen, S.payload, S.depth
                C.hdr, C.meta, C.sm = S.hdr._copy(), self._META(), self._SM()
                if S.clone[2] is not None:
                    self._PRESERVE(S, C, S.clone[2])
                C.sm.ingress_port = sm.ingress_port
                C.sm.packet_length = sm.packet_length
                C.sm.instance_type = EGRESS_CLONE
                C.sm.egress_rid, C.clip = rid, clip
                clone_jobs.append(EgressJob(port, C))
        if sm.egress_spec == DROP_PORT:
            self._say("Dropping packet at the end of egress")
        else:
            self.cur = S
            self.ns["_S"] = S
            self._COMPUTE(S)
            chunks = []
            self._DEPARSE(S, chunks)
            data = join_chunks(chunks) + S.payload
            if S.truncate is not None:
                data = data[:S.truncate]
            if S.clip:
                data = data[:S.clip]
            if S.recirculate is not None:
                self._say("Recirculating packet")
                out.extend(self.ingress(sm.ingress_port, data, RECIRC, S, S.recirculate, S.depth + 1))
            else:
                out.append((job.egress_port, data))
        out.extend(clone_jobs)
        return out

    # ================================================================ names
    def _resolve(self, kind, name, pool):
        if name in pool:
            return name
        matches = [n for n in pool if n.endswith("." + name)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise KeyError(f"no {kind} named '{name}'")
        raise KeyError(f"{kind} name '{name}' is ambiguous: {', '.join(sorted(matches))}")

    def table(self, name) -> Table:
        return self.tables[self._resolve("table", name, self.tables)]

    # ================================================================ tables
    def _table_action(self, table: Table, action, params, for_default=False):
        names = [a["name"] for a in table.spec["actions"]]
        full = self._resolve("action", action, names)
        scope = [a["scope"] for a in table.spec["actions"] if a["name"] == full][0]
        if for_default and scope == "TABLE_ONLY":
            raise ValueError(f"action '{full}' is @tableonly: it cannot be the default action")
        if not for_default and scope == "DEFAULT_ONLY":
            raise ValueError(f"action '{full}' is @defaultonly: it cannot be used in entries")
        info = self.program.actions[full]
        params = dict(params or {})
        args = []
        for p in info["params"]:
            if p["name"] not in params:
                raise ValueError(f"action '{full}' needs parameter '{p['name']}'")
            v = params.pop(p["name"])
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError(f"parameter '{p['name']}' must be an int")
            if not 0 <= v < (1 << p["width"]):
                if p["type"].startswith("int<") and -(1 << (p["width"] - 1)) <= v < 0:
                    pass
                else:
                    raise ValueError(f"value {v} does not fit parameter '{p['name']}' of {p['width']} bits")
            args.append(v & ((1 << p["width"]) - 1))      # int<W> data kept as two's complement
        if params:
            raise ValueError(f"action '{full}' has no parameter '{sorted(params)[0]}'")
        fn = table.fns[full]
        return full, tuple(args), fn

    def _match(self, table: Table, match: dict):
        match = dict(match or {})
        keys = table.spec["keys"]
        out, api = [], {}
        prefix_len = 0
        for k in keys:
            name = k["name"]
            value = self._take_key(match, name, keys)
            width, kind = k["width"], k["match"]
            full = (1 << width) - 1
            api[name] = value
            if value is None:
                if kind == "exact":
                    raise ValueError(f"exact key '{name}' needs a value")
                out.append(None)
                continue
            if kind in ("exact", "optional"):
                v = self._int(value, name)
                self._fits(v, width, name)
                out.append((v, full))
            elif kind == "lpm":
                v, plen = self._pair(value, name)
                self._fits(v, width, name)
                if not 0 <= plen <= width:
                    raise ValueError(f"prefix length {plen} is out of range for '{name}'")
                mask = (full >> (width - plen)) << (width - plen) if plen else 0
                prefix_len += plen
                out.append((v & mask, mask) if plen else None)
            elif kind == "ternary":
                v, mask = self._pair(value, name)
                self._fits(v, width, name)
                self._fits(mask, width, name)
                out.append((v & mask, mask) if mask else None)
            elif kind == "range":
                lo, hi = self._pair(value, name)
                self._fits(lo, width, name)
                self._fits(hi, width, name)
                if lo > hi:
                    raise ValueError(f"range low {lo} is above high {hi} for '{name}'")
                out.append(None if (lo, hi) == (0, full) else ("range", lo, hi))
            else:
                raise ValueError(f"unsupported match kind {kind}")
        if match:
            raise KeyError(f"table '{table.name}' has no key '{sorted(match)[0]}'")
        return out, api, prefix_len

    def _take_key(self, match, name, keys):
        if name in match:
            return match.pop(name)
        short = [m for m in match if name.endswith("." + m) or m == name.split(".")[-1]]
        if len(short) == 1:
            return match.pop(short[0])
        return None

    @staticmethod
    def _int(v, name):
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"key '{name}' needs an int value, got {v!r}")
        return v

    def _pair(self, v, name):
        if not isinstance(v, tuple | list) or len(v) != 2:
            raise TypeError(f"key '{name}' needs a (value, mask|prefix|high) pair, got {v!r}")
        return self._int(v[0], name), self._int(v[1], name)

    @staticmethod
    def _fits(v, width, name):
        if not 0 <= v < (1 << width):
            raise ValueError(f"value {v} does not fit key '{name}' of {width} bits")

    def _priority(self, table, priority, prefix_len):
        if table.needs_priority:
            if priority is None:
                raise ValueError(f"table '{table.name}' has ternary/range/optional keys: entries need a priority")
            return priority
        return prefix_len

    def table_add(self, table, match, action, params=None, priority=None):
        t = self.table(table)
        self._check_mutable(t)
        if t.profile is not None:
            raise ValueError(f"table '{t.name}' uses an action profile: add members or groups instead")
        m, api, plen = self._match(t, match)
        full, args, fn = self._table_action(t, action, params)
        e = Entry(None, m, full, args, self._priority(t, priority, plen), fn)
        e.api_match, e.api_params = api, dict(zip([p["name"] for p in self.program.actions[full]["params"]], args, strict=False))
        e.order = None
        self._attach_direct(t, e)
        return t.add(e)

    @staticmethod
    def _check_mutable(t):
        if t.spec.get("entries_const"):
            raise ValueError(f"table '{t.name}' has const entries: the control plane cannot add to it")

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

    def _entry(self, t, handle):
        e = t.entries.get(handle)
        if e is None:
            raise KeyError(f"table '{t.name}' has no entry with handle {handle}")
        return e

    def table_modify(self, table, handle, action, params=None):
        t = self.table(table)
        e = self._entry(t, handle)
        if e.is_const:
            raise ValueError(f"table '{t.name}' has const entries: they cannot be modified")
        full, args, fn = self._table_action(t, action, params)
        e.action, e.args, e.fn = full, args, fn
        e.api_params = dict(zip([p["name"] for p in self.program.actions[full]["params"]], args, strict=False))
        t.cache.clear()

    def table_delete(self, table, handle):
        t = self.table(table)
        e = self._entry(t, handle)
        if e.is_const:
            raise ValueError(f"table '{t.name}' has const entries: they cannot be deleted")
        t.remove(handle)

    def table_clear(self, table):
        t = self.table(table)
        for h in [h for h, e in t.entries.items() if not e.is_const]:
            t.remove(h)

    def table_set_default(self, table, action, params=None):
        t = self.table(table)
        if t.spec.get("default_const"):
            raise ValueError(f"table '{t.name}' has a const default action")
        full, args, fn = self._table_action(t, action, params, for_default=True)
        t.dname, t.dargs, t.dfn = full, args, fn

    def table_get_default(self, table):
        t = self.table(table)
        names = [p["name"] for p in self.program.actions[t.dname]["params"]]
        return t.dname, dict(zip(names, t.dargs, strict=False))

    def table_reset_default(self, table):
        t = self.table(table)
        action, args = t.initial_default
        t.set_default(action, args)

    def table_entries(self, table):
        t = self.table(table)
        out = []
        for h in sorted(t.entries):
            e = t.entries[h]
            action = e.action
            params = getattr(e, "api_params", {})
            if e.member is not None:
                action, params = ("member", e.member)
            elif e.group is not None:
                action, params = ("group", e.group)
            out.append(TableEntry(h, dict(e.api_match), action, params,
                                  e.priority if t.needs_priority else None))
        return out

    def entry_is_const(self, table, handle):
        return self._entry(self.table(table), handle).is_const

    # ------------------------------------------------------------ action profiles
    def _profile(self, name) -> ActionProfile:
        return self.profiles[self._resolve("action profile", name, self.profiles)]

    def _profile_table(self, prof: ActionProfile) -> Table:
        for t in self.tables.values():
            if t.profile is prof:
                return t
        raise KeyError(f"action profile '{prof.name}' is not used by any table")

    def act_prof_add_member(self, profile, member_id, action, params=None):
        prof = self._profile(profile)
        if member_id in prof.members:
            raise ValueError(f"member {member_id} already exists in '{prof.name}'")
        full, args, fn = self._table_action(self._profile_table(prof), action, params)
        prof.created += 1
        prof.members[member_id] = (full, args, fn, prof.created)

    def act_prof_modify_member(self, profile, member_id, action, params=None):
        prof = self._profile(profile)
        if member_id not in prof.members:
            raise KeyError(f"no member {member_id} in '{prof.name}'")
        full, args, fn = self._table_action(self._profile_table(prof), action, params)
        prof.members[member_id] = (full, args, fn, prof.members[member_id][3])

    def act_prof_delete_member(self, profile, member_id):
        prof = self._profile(profile)
        if member_id not in prof.members:
            raise KeyError(f"no member {member_id} in '{prof.name}'")
        for gid, members in prof.groups.items():
            if member_id in members:
                raise ValueError(f"member {member_id} is still in group {gid}")
        del prof.members[member_id]

    def act_prof_add_group(self, profile, group_id, member_ids=()):
        prof = self._profile(profile)
        if group_id in prof.groups:
            raise ValueError(f"group {group_id} already exists in '{prof.name}'")
        self._check_members(prof, member_ids)
        prof.groups[group_id] = list(member_ids)

    def act_prof_modify_group(self, profile, group_id, member_ids):
        prof = self._profile(profile)
        if group_id not in prof.groups:
            raise KeyError(f"no group {group_id} in '{prof.name}'")
        self._check_members(prof, member_ids)
        prof.groups[group_id] = list(member_ids)

    def act_prof_delete_group(self, profile, group_id):
        prof = self._profile(profile)
        if group_id not in prof.groups:
            raise KeyError(f"no group {group_id} in '{prof.name}'")
        del prof.groups[group_id]

    def _check_members(self, prof, member_ids):
        for m in member_ids:
            if m not in prof.members:
                raise KeyError(f"no member {m} in '{prof.name}'")
        if not prof.selector and len(member_ids) > 0:
            raise ValueError(f"'{prof.name}' is an action_profile: groups need an action_selector")

    def _indirect(self, table, match, member=None, group=None, priority=None):
        t = self.table(table)
        if t.profile is None:
            raise ValueError(f"table '{t.name}' has no action profile")
        if member is not None and member not in t.profile.members:
            raise KeyError(f"no member {member} in '{t.profile.name}'")
        if group is not None and group not in t.profile.groups:
            raise KeyError(f"no group {group} in '{t.profile.name}'")
        self._check_mutable(t)
        m, api, plen = self._match(t, match)
        e = Entry(None, m, None, (), self._priority(t, priority, plen), None)
        e.member, e.group, e.api_match, e.api_params = member, group, api, {}
        e.order = None
        return t.add(e)

    def table_add_member(self, table, match, member_id, priority=None):
        return self._indirect(table, match, member=member_id, priority=priority)

    def table_add_group(self, table, match, group_id, priority=None):
        return self._indirect(table, match, group=group_id, priority=priority)

    def table_modify_member(self, table, handle, member_id):
        t = self.table(table)
        e = self._entry(t, handle)
        if member_id not in t.profile.members:
            raise KeyError(f"no member {member_id} in '{t.profile.name}'")
        e.member, e.group = member_id, None
        t.changed()

    def table_modify_group(self, table, handle, group_id):
        t = self.table(table)
        e = self._entry(t, handle)
        if group_id not in t.profile.groups:
            raise KeyError(f"no group {group_id} in '{t.profile.name}'")
        e.member, e.group = None, group_id
        t.changed()

    # ------------------------------------------------------------ replication engine
    def mc_group_create(self, group_id, replicas=()):
        if group_id in self.mc_groups:
            raise ValueError(f"multicast group {group_id} already exists")
        self._check_group(group_id, replicas)
        self.mc_groups[group_id] = [tuple(r) for r in replicas]

    def mc_group_modify(self, group_id, replicas):
        if group_id not in self.mc_groups:
            raise KeyError(f"no multicast group {group_id}")
        self._check_group(group_id, replicas)
        self.mc_groups[group_id] = [tuple(r) for r in replicas]

    def mc_group_delete(self, group_id):
        if group_id not in self.mc_groups:
            raise KeyError(f"no multicast group {group_id}")
        del self.mc_groups[group_id]

    @staticmethod
    def _check_group(group_id, replicas):
        if not 0 < group_id < (1 << 16):
            raise ValueError(f"multicast group id {group_id} must be in 1..65535")
        for r in replicas:
            if len(r) != 2 or not 0 <= r[0] < 512 or not 0 <= r[1] < (1 << 16):
                raise ValueError(f"bad replica {r!r}: want (port 0..511, rid 0..65535)")

    def clone_session_set(self, session_id, egress_port, rid=0, packet_length=0):
        """One-replica clone session; `packet_length` > 0 truncates the clones (P4Runtime)."""
        self.clone_session_set_replicas(session_id, [(egress_port, rid)], packet_length)

    def clone_session_set_replicas(self, session_id, replicas, packet_length=0):
        """A clone session with any number of (egress_port, rid) replicas."""
        for r in replicas:
            if len(r) != 2 or not 0 <= r[0] < 512 or not 0 <= r[1] < (1 << 16):
                raise ValueError(f"bad clone replica {r!r}: want (port 0..511, rid 0..65535)")
        if not isinstance(packet_length, int) or packet_length < 0:
            raise ValueError(f"bad clone packet_length {packet_length!r}")
        self.clone_sessions[session_id] = ([tuple(r) for r in replicas], packet_length)

    def clone_session_delete(self, session_id):
        if session_id not in self.clone_sessions:
            raise KeyError(f"no clone session {session_id}")
        del self.clone_sessions[session_id]

    # ------------------------------------------------------------ stateful externs
    def _extern(self, kind, name, cls):
        names = [n for n, o in self.externs.items() if isinstance(o, cls)]
        return self.externs[self._resolve(kind, name, names)]

    def register_read(self, name, index):
        r = self._extern("register", name, Register)
        self._index(r, index)
        return r.values[index]

    def register_write(self, name, index, value):
        r = self._extern("register", name, Register)
        self._index(r, index)
        if not 0 <= value <= r.mask:
            raise ValueError(f"value {value} does not fit register '{r.name}'")
        r.values[index] = value

    @staticmethod
    def _index(obj, index):
        if not isinstance(index, int) or not 0 <= index < obj.size:
            raise IndexError(f"index {index} is out of range for '{obj.name}' (size {obj.size})")

    def counter_read(self, name, index):
        c = self._extern("counter", name, Counter)
        self._index(c, index)
        return c.packets[index], c.bytes[index]

    def counter_write(self, name, index, packets, nbytes):
        c = self._extern("counter", name, Counter)
        self._index(c, index)
        c.packets[index], c.bytes[index] = packets, nbytes

    def direct_counter_read(self, table, handle):
        e = self._entry(self.table(table), handle)
        return e.packets, e.bytes

    def direct_counter_write(self, table, handle, packets, nbytes):
        e = self._entry(self.table(table), handle)
        e.packets, e.bytes = packets, nbytes

    def meter_set(self, name, index, cir, cburst, pir, pburst):
        m = self._extern("meter", name, Meter)
        self._index(m, index)
        m.states[index].configure(cir, cburst, pir, pburst)

    def meter_reset(self, name, index):
        m = self._extern("meter", name, Meter)
        self._index(m, index)
        m.states[index].reset()

    def direct_meter_set(self, table, handle, cir, cburst, pir, pburst):
        e = self._entry(self.table(table), handle)
        if e.meter is None:
            raise ValueError(f"table '{table}' has no direct meter")
        e.meter.configure(cir, cburst, pir, pburst)

    def direct_meter_reset(self, table, handle):
        e = self._entry(self.table(table), handle)
        if e.meter is None:
            raise ValueError(f"table '{table}' has no direct meter")
        e.meter.reset()

    def value_set_write(self, name, members):
        vs = self._extern("value set", name, ValueSet)
        if len(members) > vs.size:
            raise ValueError(f"value set '{vs.name}' holds at most {vs.size} members")
        vs.members = [(v & m, m) if isinstance(v, int) else v for v, m in members]

    def digests(self):
        out = []
        for name, values in self.digest_queue:
            fields = [f for f, _ in self.program.digests[name]["fields"]]
            out.append((name, dict(zip(fields, values, strict=False))))
        self.digest_queue = []
        return out
