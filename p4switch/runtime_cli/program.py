"""The names a runtime CLI needs, read from a program's BMv2 JSON (the switch's
`bm_get_config`, or --json): tables with their key (name, match kind, width), actions with
their parameter widths, action profiles, counter/meter/register arrays, parser value sets.
An object is found by its full name or by a unique suffix on a '.' boundary."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

MATCH_KINDS = ("exact", "lpm", "ternary", "valid", "range")


class ProgramError(ValueError):
    """The JSON lacks something the CLI needs (names the object)."""


@dataclass
class Action:
    name: str
    params: list[tuple[str, int]]

    def describe(self) -> str:
        body = ",\t".join(f"{n}({w})" for n, w in self.params)
        return f"{self.name:30} [{body}]"


@dataclass
class ActionProfile:
    name: str
    with_selection: bool
    actions: dict[str, Action] = field(default_factory=dict)
    tables: int = 0


@dataclass
class Table:
    name: str
    match_type: str
    kind: str                           # simple, indirect, indirect_ws
    support_timeout: bool
    key: list[tuple[str, str, int]]     # (field name, match kind, width)
    actions: dict[str, Action]
    profile: ActionProfile | None = None

    def describe(self) -> str:
        impl = "None" if self.profile is None else self.profile.name
        key = ",\t".join(f"{n}({k}, {w})" for n, k, w in self.key)
        return f"{self.name:30} [implementation={impl}, mk={key}]"

    @property
    def needs_priority(self) -> bool:
        return self.match_type in ("ternary", "range")


@dataclass
class Indexed:
    """A counter, meter or register array (direct ones name their table)."""
    name: str
    size: int | None
    binding: str | None = None
    width: int | None = None
    rate_count: int = 2
    unit: str = "packets"

    @property
    def is_direct(self) -> bool:
        return self.binding is not None


@dataclass
class Program:
    tables: dict[str, Table] = field(default_factory=dict)
    actions: dict[str, Action] = field(default_factory=dict)
    profiles: dict[str, ActionProfile] = field(default_factory=dict)
    counters: dict[str, Indexed] = field(default_factory=dict)
    meters: dict[str, Indexed] = field(default_factory=dict)
    registers: dict[str, Indexed] = field(default_factory=dict)
    value_sets: dict[str, int] = field(default_factory=dict)   # name -> bit width
    _suffixes: dict[tuple[str, str], object] = field(default_factory=dict)

    def find(self, kind: str, name: str):
        """kind: table, action, profile, counter, meter, register, value_set."""
        return self._suffixes.get((kind, name))

    def index_names(self) -> None:
        count: dict[tuple[str, str], int] = {}
        found: dict[tuple[str, str], object] = {}
        for kind, objs in (("table", self.tables), ("action", self.actions),
                           ("profile", self.profiles), ("counter", self.counters),
                           ("meter", self.meters), ("register", self.registers),
                           ("value_set", self.value_sets)):
            for name, obj in objs.items():
                parts = name.split(".")
                for i in range(len(parts)):
                    key = (kind, ".".join(parts[i:]))
                    count[key] = count.get(key, 0) + 1
                    found[key] = name if kind == "value_set" else obj
        self._suffixes = {k: v for k, v in found.items() if count[k] == 1}


def load(text: str) -> Program:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ProgramError(f"the program JSON does not parse: {exc}") from None
    if not isinstance(data, dict):
        raise ProgramError("the program JSON is not an object")
    prog = Program()
    try:
        _read(data, prog)
    except (KeyError, TypeError, IndexError) as exc:
        raise ProgramError(f"the program JSON lacks {exc} where the CLI needs it") from None
    prog.index_names()
    return prog


def _read(data: dict, prog: Program) -> None:
    for a in data.get("actions", []):
        prog.actions[a["name"]] = Action(a["name"], [(p["name"], p["bitwidth"])
                                                     for p in a.get("runtime_data", [])])
    header_types = {h["name"]: {f[0]: f[1] for f in h["fields"]}
                    for h in data.get("header_types", [])}
    headers = {h["name"]: h["header_type"] for h in data.get("headers", [])}

    def width(target) -> int:
        fields = header_types[headers[target[0]]]
        return fields[target[1]]

    for pipe in data.get("pipelines", []):
        for p in pipe.get("action_profiles", []):
            prog.profiles[p["name"]] = ActionProfile(p["name"], "selector" in p)
        for t in pipe.get("tables", []):
            actions = {name: prog.actions[name] for name in t.get("actions", [])}
            key = []
            for k in t.get("key", []):
                target, kind = k["target"], k["match_type"]
                if kind == "valid":
                    key.append((f"{target}_valid", kind, 1))
                elif target[1] == "$valid$":
                    key.append((f"{target[0]}_valid", kind, 1))
                else:
                    key.append((".".join(target), kind, width(target)))
            table = Table(t["name"], t["match_type"], t["type"],
                          bool(t.get("support_timeout")), key, actions)
            if table.kind in ("indirect", "indirect_ws"):
                name = t.get("action_profile") or t.get("act_prof_name")
                profile = prog.profiles.setdefault(
                    name, ActionProfile(name, table.kind == "indirect_ws"))
                profile.actions.update(actions)
                profile.tables += 1
                table.profile = profile
            prog.tables[table.name] = table
    for c in data.get("counter_arrays", []):
        prog.counters[c["name"]] = Indexed(c["name"], c.get("size"),
                                           c.get("binding") if c.get("is_direct") else None)
    for m in data.get("meter_arrays", []):
        prog.meters[m["name"]] = Indexed(m["name"], m.get("size"),
                                         m.get("binding") if m.get("is_direct") else None,
                                         rate_count=m.get("rate_count", 2),
                                         unit=m.get("type", "packets"))
    for r in data.get("register_arrays", []):
        prog.registers[r["name"]] = Indexed(r["name"], r["size"], width=r["bitwidth"])
    for v in data.get("parse_vsets", []):
        prog.value_sets[v["name"]] = v["compressed_bitwidth"]
