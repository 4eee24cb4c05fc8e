"""NativeSwitch: the Switch control API (inherited, the Python objects stay the control plane's
view) over the compiled pipeline. Every control-plane write is pushed into the native state
(a new table snapshot swapped in under the pipeline's lock, so packets never wait for more
than one swap); registers and counters live in native memory and the Python objects read and
write it through ctypes views."""
from __future__ import annotations

import ctypes

from ..engine import P4AssertionError
from ..stateful import Counter, Meter, Register, ValueSet
from ..switch import DROP_PORT, Switch
from . import build
from . import program as cprogram
from .codegen import arg_words

NO_ID = (1 << 64) - 1
_OUT_CAP = 1 << 20
_OUT_MAX = 4096


def _words(program, action, args):
    """An action's arguments as table-row words (wide ones little-endian, as wide_t)."""
    out = []
    for p, v in zip(program.actions[action]["params"], args, strict=True):
        n = arg_words(p["width"])
        out += [(v >> (64 * i)) & NO_ID for i in range(n)]
    return out


def _arr(values):
    return (ctypes.c_uint64 * max(len(values), 1))(*values)


class NativeSwitch(Switch):
    backend = "native"

    def __init__(self, program, p4info, cpu_port=None):
        self.c_source = cprogram.generate(program)      # raises Unsupported first
        super().__init__(program, p4info, cpu_port)
        self.lib = build.load(self.c_source)
        self.lib.sw_init()
        self.action_ids = {name: i for i, name in enumerate(program.actions)}
        self.table_ids = {name: i for i, name in enumerate(program.tables)}
        self.nargs = {name: cprogram.table_nargs(program, name) for name in program.tables}
        profiles = [n for n, s in program.externs.items() if s["kind"] in ("action_profile", "action_selector")]
        self.profile_ids = {n: i for i, n in enumerate(profiles)}
        regs = [n for n, s in program.externs.items() if s["kind"] == "register"]
        cnts = [n for n, s in program.externs.items() if s["kind"] == "counter"]
        for i, name in enumerate(regs):
            r: Register = self.externs[name]
            r.values = self._view(self.lib.sw_register(i), r.size)
        for i, name in enumerate(cnts):
            c: Counter = self.externs[name]
            c.packets = self._view(self.lib.sw_counter(i, 0), c.size)
            c.bytes = self._view(self.lib.sw_counter(i, 1), c.size)
        self._out = ctypes.create_string_buffer(_OUT_CAP)
        self._meta = (ctypes.c_uint32 * (2 * _OUT_MAX))()
        self._digest_buf = (ctypes.c_uint64 * (17 * 256))()
        self.digest_names = list(program.digests)
        for t in self.tables.values():
            self._push_table(t)
            self._push_default(t)
        for name in self.profiles:
            self._push_profile(name)

    @staticmethod
    def _view(ptr, size):
        return (ctypes.c_uint64 * size).from_address(ctypes.addressof(ptr.contents))

    # ================================================================ packets
    def set_logger(self, fn):
        """The native pipeline does not log per packet (use --backend python to trace)."""
        self.logger = fn

    def process(self, ingress_port: int, data: bytes):
        if not isinstance(ingress_port, int) or not 0 <= ingress_port < 512:
            raise ValueError(f"ingress port {ingress_port!r} is not a 9-bit port number")
        data = bytes(data)
        n = self.lib.sw_process(ingress_port, data, len(data), self._out, _OUT_CAP, self._meta, _OUT_MAX)
        if n == -1:
            kind, line = ctypes.c_int(), ctypes.c_int()
            self.lib.sw_assert_info(ctypes.byref(kind), ctypes.byref(line))
            raise P4AssertionError(f"{'assert' if kind.value == 0 else 'assume'} failed at line {line.value}")
        if n < 0:
            raise RuntimeError("the outputs of one packet exceed the native backend's buffer")
        out, off, base = [], 0, ctypes.addressof(self._out)
        for i in range(n):
            port, length = self._meta[2 * i], self._meta[2 * i + 1]
            out.append((port, ctypes.string_at(base + off, length)))
            off += length
        if self.program.digests:
            self._pull_digests()
        return out

    def bench_ns(self, port: int, data: bytes, count: int) -> float:
        """ns per packet of the whole native pipeline, in-process (no I/O)."""
        return self.lib.sw_bench(port, data, len(data), count)

    def ingress(self, *args, **kwargs):
        raise NotImplementedError("the native backend runs ingress and egress together: use process()")

    egress = ingress

    def digests(self):
        self._pull_digests()
        return super().digests()

    def _pull_digests(self):
        n = self.lib.sw_digests(self._digest_buf, 256)
        for i in range(n):
            rec = self._digest_buf[17 * i:17 * i + 17]
            name = self.digest_names[rec[0]]
            nattrs = len(self.program.digests[name]["attrs"])
            self.digest_queue.append((name, tuple(rec[1:1 + nattrs])))

    # ================================================================ pushing state
    def _pull_counters(self, t):
        if not t.counting:
            return
        n = len(t.entries)
        h, p, b = _arr([0] * n), _arr([0] * n), _arr([0] * n)
        got = self.lib.sw_table_counters(self.table_ids[t.name], h, p, b)
        for i in range(got):
            e = t.entries.get(h[i])
            if e is not None:
                e.packets, e.bytes = p[i], b[i]

    def _push_table(self, t, carry=True):
        nargs = self.nargs[t.name]
        rows, packets, nbytes = [], [], []
        for e in sorted(t.entries.values(), key=lambda x: (-x.priority, x.order)):
            rows += [e.handle, self.action_ids[e.action] if e.action else NO_ID,
                     NO_ID if e.member is None else e.member, NO_ID if e.group is None else e.group]
            for m in e.match:       # (kind, a.lo, a.hi, b.lo, b.hi): keys up to 128 bits
                if m is None:
                    rows += [0, 0, 0, 0, 0]
                else:
                    kind, a, b = (2, m[1], m[2]) if m[0] == "range" else (1, m[0], m[1])
                    rows += [kind, a & NO_ID, a >> 64, b & NO_ID, b >> 64]
            args = _words(self.program, e.action, e.args) if e.action else []
            rows += args + [0] * (nargs - len(args))
            packets.append(e.packets)
            nbytes.append(e.bytes)
        self.lib.sw_table_set(self.table_ids[t.name], len(packets), _arr(rows), _arr(packets), _arr(nbytes),
                              int(carry))

    def _push_default(self, t):
        args = _words(self.program, t.dname, t.dargs)
        args += [0] * (self.nargs[t.name] - len(args))
        self.lib.sw_table_default(self.table_ids[t.name], self.action_ids[t.dname], _arr(args))

    def _push_profile(self, name):
        prof = self.profiles[name]
        users = [t for t in self.tables.values() if t.profile is prof]
        nargs = max([self.nargs[t.name] for t in users] + [0])
        ids = sorted(prof.members)
        index = {mid: i for i, mid in enumerate(ids)}
        members = []
        for mid in ids:
            action = prof.members[mid][0]
            args = _words(self.program, action, prof.members[mid][1])
            members += [mid, self.action_ids[action]] + args + [0] * (nargs - len(args))
        groups = []
        for gid, mids in prof.groups.items():
            live = sorted((m for m in mids if m in prof.members), key=lambda m: prof.members[m][3])
            groups += [gid, len(live)] + [index[m] for m in live]
        self.lib.sw_profile_set(self.profile_ids[name], len(ids), _arr(members), len(prof.groups),
                                _arr(groups), len(groups))

    def _push_group(self, group_id):
        replicas = self.mc_groups.get(group_id)
        flat = [v for r in replicas or () for v in r]
        arr = (ctypes.c_uint32 * max(len(flat), 1))(*flat)
        self.lib.sw_mc_set(group_id, replicas is not None, len(flat) // 2, arr)

    def _push_sessions(self):
        blob = []
        for sid, (replicas, clip) in self.clone_sessions.items():
            blob += [sid & NO_ID, clip, len(replicas)] + [v for r in replicas for v in r]
        self.lib.sw_clone_set_all(len(self.clone_sessions), _arr(blob))

    def _after_table(self, table):
        t = self.table(table)
        self._push_table(t)
        self._push_default(t)

    # ================================================================ the control API
    def table_add(self, table, *a, **k):
        h = super().table_add(table, *a, **k)
        self._after_table(table)
        return h

    def table_modify(self, table, *a, **k):
        super().table_modify(table, *a, **k)
        self._after_table(table)

    def table_delete(self, table, *a, **k):
        super().table_delete(table, *a, **k)
        self._after_table(table)

    def table_clear(self, table):
        super().table_clear(table)
        self._after_table(table)

    def table_set_default(self, table, *a, **k):
        super().table_set_default(table, *a, **k)
        self._after_table(table)

    def table_reset_default(self, table):
        super().table_reset_default(table)
        self._after_table(table)

    def table_add_member(self, table, *a, **k):
        h = super().table_add_member(table, *a, **k)
        self._after_table(table)
        return h

    def table_add_group(self, table, *a, **k):
        h = super().table_add_group(table, *a, **k)
        self._after_table(table)
        return h

    def table_modify_member(self, table, *a, **k):
        super().table_modify_member(table, *a, **k)
        self._after_table(table)

    def table_modify_group(self, table, *a, **k):
        super().table_modify_group(table, *a, **k)
        self._after_table(table)

    def _after_profile(self, profile):
        self._push_profile(self._profile(profile).name)

    def act_prof_add_member(self, profile, *a, **k):
        super().act_prof_add_member(profile, *a, **k)
        self._after_profile(profile)

    def act_prof_modify_member(self, profile, *a, **k):
        super().act_prof_modify_member(profile, *a, **k)
        self._after_profile(profile)

    def act_prof_delete_member(self, profile, *a, **k):
        super().act_prof_delete_member(profile, *a, **k)
        self._after_profile(profile)

    def act_prof_add_group(self, profile, *a, **k):
        super().act_prof_add_group(profile, *a, **k)
        self._after_profile(profile)

    def act_prof_modify_group(self, profile, *a, **k):
        super().act_prof_modify_group(profile, *a, **k)
        self._after_profile(profile)

    def act_prof_delete_group(self, profile, *a, **k):
        super().act_prof_delete_group(profile, *a, **k)
        self._after_profile(profile)

    def mc_group_create(self, group_id, replicas=()):
        super().mc_group_create(group_id, replicas)
        self._push_group(group_id)

    def mc_group_modify(self, group_id, replicas):
        super().mc_group_modify(group_id, replicas)
        self._push_group(group_id)

    def mc_group_delete(self, group_id):
        super().mc_group_delete(group_id)
        self._push_group(group_id)

    def clone_session_set_replicas(self, session_id, replicas, packet_length=0):
        super().clone_session_set_replicas(session_id, replicas, packet_length)
        self._push_sessions()

    def clone_session_delete(self, session_id):
        super().clone_session_delete(session_id)
        self._push_sessions()

    def value_set_write(self, name, members):
        super().value_set_write(name, members)
        vs = self._extern("value set", name, ValueSet)
        names = [n for n, s in self.program.externs.items() if s["kind"] == "value_set"]
        flat = [w for v, m in vs.members for w in (v, m)]
        self.lib.sw_value_set(names.index(vs.name), len(vs.members), _arr(flat))

    def meter_set(self, name, index, cir, cburst, pir, pburst):
        super().meter_set(name, index, cir, cburst, pir, pburst)
        self.lib.sw_meter_set(self._meter_id(name), index, 1, cir, cburst, pir, pburst)

    def meter_reset(self, name, index):
        super().meter_reset(name, index)
        self.lib.sw_meter_set(self._meter_id(name), index, 0, 0, 0, 0, 0)

    def _meter_id(self, name):
        m = self._extern("meter", name, Meter)
        return [n for n, s in self.program.externs.items() if s["kind"] == "meter"].index(m.name)

    def direct_meter_set(self, table, handle, cir, cburst, pir, pburst):
        super().direct_meter_set(table, handle, cir, cburst, pir, pburst)
        self.lib.sw_meter_set(-1 - self.table_ids[self.table(table).name], handle, 1, cir, cburst, pir, pburst)

    def direct_meter_reset(self, table, handle):
        super().direct_meter_reset(table, handle)
        self.lib.sw_meter_set(-1 - self.table_ids[self.table(table).name], handle, 0, 0, 0, 0, 0)

    def table_last_hits(self, table):
        hits = super().table_last_hits(table)       # the insertion times
        n = len(hits)
        h, t = _arr([0] * n), _arr([0] * n)
        got = self.lib.sw_table_hits(self.table_ids[self.table(table).name], h, t)
        for i in range(got):
            if h[i] in hits:
                hits[h[i]] = max(hits[h[i]], t[i])
        return hits

    def direct_counter_read(self, table, handle):
        self._pull_counters(self.table(table))
        return super().direct_counter_read(table, handle)

    def direct_counter_write(self, table, handle, packets, nbytes):
        self._pull_counters(self.table(table))
        super().direct_counter_write(table, handle, packets, nbytes)
        self._push_table(self.table(table), carry=False)


__all__ = ["DROP_PORT", "NativeSwitch"]
