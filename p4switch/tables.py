"""Match-action tables and action profiles at run time (the state the control plane writes)."""
from __future__ import annotations

from time import monotonic_ns

from .engine import hash_bytes, pack_bits

_MISS = object()


class Entry:
    """One table entry. `match` is per key: (value, mask), ("range", lo, hi) or None (wildcard)."""

    __slots__ = ("handle", "match", "action", "args", "priority", "fn", "member", "group",
                 "packets", "bytes", "meter", "is_const", "api_match", "api_params", "order",
                 "last_hit")

    def __init__(self, handle, match, action, args, priority, fn):
        self.handle, self.match, self.action, self.args = handle, match, action, args
        self.priority, self.fn = priority, fn
        self.member = self.group = self.meter = None
        self.packets = self.bytes = 0
        self.is_const = False
        self.api_match, self.api_params = {}, {}
        self.order = handle
        self.last_hit = monotonic_ns()     # idle timeouts count from the insertion

    def matches(self, key) -> bool:
        for m, k in zip(self.match, key, strict=False):
            if m is None:
                continue
            if m[0] == "range":
                if not m[1] <= k <= m[2]:
                    return False
            elif k & m[1] != m[0]:
                return False
        return True


class ActionProfile:
    """Members (action + data) and groups of members; a selector picks one member per packet."""

    def __init__(self, name: str, spec: dict):
        self.name = name
        self.selector = spec["kind"] == "action_selector"
        self.algorithm = spec.get("algorithm", "crc16")
        self.output_mask = (1 << spec.get("output_width", 32)) - 1
        self.members: dict[int, tuple] = {}   # id -> (action, args, fn, creation order)
        self.groups: dict[int, list[int]] = {}
        self.created = 0

    def pick(self, entry: Entry, sel, sel_widths):
        if entry.member is not None:
            m = self.members.get(entry.member)
            return (m[2], m[1], m[0]) if m else None
        members = self.groups.get(entry.group) or []
        members = [mid for mid in members if mid in self.members]
        if not members:
            return None
        members.sort(key=lambda mid: self.members[mid][3])
        if len(members) == 1 or sel is None:
            m = self.members[members[0]]
        else:
            total, value = 0, 0
            for v, w in zip(sel, sel_widths, strict=False):
                value = (value << w) | (v & ((1 << w) - 1))
                total += w
            h = hash_bytes(self.algorithm, pack_bits(value, total)) & self.output_mask
            m = self.members[members[h % len(members)]]
        return m[2], m[1], m[0]


class Table:
    def __init__(self, name: str, spec: dict, fns: dict, owner):
        self.name, self.spec, self.fns, self.owner = name, spec, fns, owner
        self.kinds = [k["match"] for k in spec["keys"]]
        self.widths = [k["width"] for k in spec["keys"]]
        self.sel_widths = [k["width"] for k in spec.get("selector_keys", [])]
        self.exact_only = all(k == "exact" for k in self.kinds)
        self.needs_priority = any(k in ("ternary", "range", "optional") for k in self.kinds)
        self.entries: dict[int, Entry] = {}
        self.index: dict[tuple, Entry] = {}      # exact-only tables: key -> entry
        self.by_match: dict[tuple, Entry] = {}   # (match, priority) -> entry, for duplicates
        self.ordered: list[Entry] = []
        self.dirty = False
        self.cache: dict = {}
        self.next_handle = 1
        self.profile: ActionProfile | None = None
        self.counting = bool(spec.get("direct_counter"))
        self.idle = bool(spec.get("support_timeout"))   # entries keep their last hit's time
        self.meter = None            # the DirectMeter extern when `meters =` is set
        d = spec["default"]
        widths = [p["width"] for p in owner.program.actions[d["action"]]["params"]]
        self.initial_default = (d["action"], [a & ((1 << w) - 1) for a, w in zip(d["args"], widths, strict=True)])
        self.set_default(*self.initial_default)

    def set_default(self, action, args):
        self.dname, self.dargs, self.dfn = action, tuple(args), self.fns[action]

    # ------------------------------------------------------------ data path
    def apply(self, key, sel):
        e = self.lookup(key)
        if e is None:
            return False, self.dfn, self.dargs, self.dname
        if self.counting:
            e.packets += 1
            e.bytes += self.owner.cur.plen
        if self.idle:
            e.last_hit = monotonic_ns()
        if self.meter is not None:
            self.meter.color = e.meter.execute(
                1 if self.meter.unit == "packets" else self.owner.cur.plen) if e.meter else 0
        if self.profile is not None:
            picked = self.profile.pick(e, sel, self.sel_widths)
            if picked is None:
                return False, self.dfn, self.dargs, self.dname
            return (True,) + picked
        return True, e.fn, e.args, e.action

    def lookup(self, key):
        if self.exact_only:
            return self.index.get(key)
        e = self.cache.get(key, _MISS)
        if e is _MISS:
            if self.dirty:
                self.ordered = sorted(self.entries.values(), key=lambda x: (-x.priority, x.order))
                self.dirty = False
            e = None
            for cand in self.ordered:
                if cand.matches(key):
                    e = cand
                    break
            if len(self.cache) > 65536:
                self.cache.clear()
            self.cache[key] = e
        return e

    # ------------------------------------------------------------ control plane
    def _match_key(self, entry):
        return tuple(entry.match), (entry.priority if self.needs_priority else None)

    def add(self, entry: Entry, check=True):
        """Stores a new entry under the next handle; duplicates (same match) are refused."""
        mkey = self._match_key(entry)
        other = self.by_match.get(mkey)
        if check and other is not None:
            raise ValueError(f"table '{self.name}': an entry with this match already exists "
                             f"(handle {other.handle})")
        entry.handle = self.next_handle
        entry.order = entry.handle if entry.order is None else entry.order
        self.next_handle += 1
        self.entries[entry.handle] = entry
        self.by_match[mkey] = entry
        if self.exact_only:
            self.index[tuple(m[0] for m in entry.match)] = entry
        self.changed()
        return entry.handle

    def remove(self, handle):
        entry = self.entries.pop(handle)
        self.by_match.pop(self._match_key(entry), None)
        if self.exact_only:
            self.index.pop(tuple(m[0] for m in entry.match), None)
        self.changed()

    def changed(self):
        self.cache.clear()
        self.dirty = True
