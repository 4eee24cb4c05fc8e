"""The control API of a loaded program (tables, action profiles, multicast groups, clone
sessions, registers, counters, meters, value sets, digests by P4Info names) over its pipeline."""
from __future__ import annotations

from .pipeline import DROP_PORT, EgressJob, Pipeline, TableEntry
from .stateful import Counter, Meter, Register, ValueSet
from .tables import ActionProfile, Entry, Table

__all__ = ["DROP_PORT", "EgressJob", "Switch", "TableEntry"]


class Switch(Pipeline):
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

    def table_last_hits(self, table) -> dict[int, int]:
        """time.monotonic_ns() of each entry's last hit (its insertion if none yet) by handle;
        kept for tables with `support_timeout = true` only."""
        t = self.table(table)
        if not t.idle:
            raise ValueError(f"table '{t.name}' does not support idle timeout")
        return {h: e.last_hit for h, e in t.entries.items()}

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
