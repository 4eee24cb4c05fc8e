"""Run p4c's STF (simple test framework) files against a program loaded in p4switch.

The accepted language is the one p4c's BMv2 driver (`backends/bmv2/bmv2stf.py`) runs, one
command per line, `#` starts a comment:

    add TABLE [PRIORITY] KEY:VALUE ... ACTION(PARAM:VALUE, ...) [= ID]
    setdefault TABLE ACTION(PARAM:VALUE, ...)
    packet PORT HEX...                 send a packet
    expect PORT [HEX...][$]            expect a packet on PORT (`*` = any nibble, `$` = exact
                                       length; without data any number of packets is accepted)
    wait
    mc_mgrp_create GROUP
    mc_node_create RID PORT...         node handles count from 0, as in simple_switch_CLI
    mc_node_associate GROUP NODE_HANDLE
    mirroring_add SESSION PORT
    check_counter NAME(INDEX | $ID) [packets|bytes OP NUMBER]

Key values follow the table's match kind: exact `0x0a`, lpm `0x0a000000/8` or with
don't-care nibbles `0x0a******`, ternary `0x0a**` or `0x0a&&&0xf0`, range `1->5`, optional
`7` or `*`. Higher STF priorities win (bmv2stf passes `10000 - priority` to BMv2).

Extensions of this runner (p4c's driver has no commands for action profiles):

    add_member PROFILE MEMBER_ID ACTION(PARAM:VALUE, ...)
    add_group PROFILE GROUP_ID MEMBER_ID...
    add_indirect TABLE [PRIORITY] KEY:VALUE ... member(MEMBER_ID) | group(GROUP_ID) [= ID]

Expected packets are compared per port, in order, after the whole file has run (as the
BMv2 driver does); a received packet may be longer than its expectation unless it ends in `$`.

`dialect="p4c"` (`p4switch stf --dialect p4c`) refuses, with the reason, what p4c's BMv2
driver (`backends/bmv2/run-bmv2-test.py`, grammar in `tools/stf/`, p4c 1.2.4) cannot run: the
extension commands above, dotted names in check_counter (its grammar takes one identifier),
ternary `&&&` masks (its lexer has no `&`), LPM `value/len` (it crashes on the pair), decimal
ternary or LPM values (it builds masks from hex/binary digits), and entries of tables with
range or optional keys (it has no such key kinds). A file that passes in this dialect runs
unchanged on BMv2. Like that driver, the p4c dialect also observes only the ports the file
names in `packet` and `expect` lines (the driver gives the switch no other interfaces); the
default dialect reports a packet on any other port as unexpected. And as there, packets meet
the tables as the whole file leaves them: a file whose later table writes change what earlier
packets do fails in this dialect, as it does on BMv2 (split it into files).
"""
from __future__ import annotations

import operator
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import click

_COMMANDS = (
    "add", "setdefault", "packet", "expect", "wait", "mc_mgrp_create", "mc_node_create",
    "mc_node_associate", "mirroring_add", "check_counter", "add_member", "add_group",
    "add_indirect",
)
_EXTENSIONS = {"add_member", "add_group", "add_indirect"}   # not in p4c's BMv2 driver
DIALECTS = ("p4switch", "p4c")
_BARE_NAME = re.compile(r"^[A-Za-z_$][\w$]*$")
_COMPARE = {"==": operator.eq, "!=": operator.ne, "<=": operator.le, "<": operator.lt,
            ">=": operator.ge, ">": operator.gt}
_NUMBER = re.compile(r"^(0[xX][0-9a-fA-F*]+|0[bB][01*]+|[0-9]+)$")


class StfError(Exception):
    """A malformed or inapplicable STF line; str() is `file:line: message`."""

    def __init__(self, filename: str, line: int, message: str):
        super().__init__(f"{filename}:{line}: {message}")
        self.filename, self.line, self.message = filename, line, message


class _LineError(Exception):
    """Raised while handling one line; turned into StfError with the position."""


@dataclass
class Command:
    line: int
    name: str
    words: str  # the rest of the line, comment removed


@dataclass
class _Expectation:
    line: int
    pattern: str  # upper-case hex nibbles and '*'
    exact: bool


@dataclass
class StfResult:
    passed: bool
    report: str
    outputs: dict[int, list[bytes]] = field(default_factory=dict)


# --------------------------------------------------------------------------- parsing


def parse_stf(text: str, filename: str = "<stf>", dialect: str = "p4switch") -> list[Command]:
    """Split an STF file into commands; raises StfError on an unknown command (in the p4c
    dialect also on this runner's extensions and on a dotted check_counter name)."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown STF dialect '{dialect}' (one of {', '.join(DIALECTS)})")
    commands = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, rest = line.partition(" ")
        name = name.lower()
        if name not in _COMMANDS:
            raise StfError(filename, lineno, f"unknown STF command '{name}'")
        if dialect == "p4c" and name in _EXTENSIONS:
            raise StfError(filename, lineno, f"'{name}' is a p4switch extension: p4c's BMv2 "
                                             "STF driver has no action-profile commands")
        if dialect == "p4c" and name == "check_counter":
            counter = rest.strip().partition("(")[0].strip()
            if not _BARE_NAME.match(counter):
                short = counter.rsplit(".", 1)[-1]
                raise StfError(filename, lineno, f"check_counter '{counter}': p4c's STF grammar "
                                                 f"takes a bare identifier, write '{short}'")
        commands.append(Command(lineno, name, rest.strip()))
    return commands


def _number(text: str) -> int:
    if not _NUMBER.match(text) or "*" in text:
        raise _LineError(f"'{text}' is not a number")
    return int(text, 0)


def _digits(text: str) -> tuple[str, int]:
    """The digits of a hex/binary literal that may hold '*' nibbles, and bits per digit."""
    if not _NUMBER.match(text):
        raise _LineError(f"'{text}' is not a number")
    if text[:2].lower() == "0x":
        return text[2:], 4
    if text[:2].lower() == "0b":
        return text[2:], 1
    if "*" in text:
        raise _LineError(f"don't-care digits need a hex or binary literal: '{text}'")
    return text, 0


def _dont_care(text: str) -> tuple[int, int]:
    """(value, mask) of a literal with '*' digits; the mask covers the written digits."""
    digits, bits = _digits(text)
    value = mask = 0
    full = (1 << bits) - 1
    for d in digits:
        value = (value << bits) | (0 if d == "*" else int(d, 16))
        mask = (mask << bits) | (0 if d == "*" else full)
    return value, mask


def _split_call(text: str) -> tuple[str, str, str]:
    """'name(args) rest' -> (name, args, rest)."""
    m = re.match(r"^([A-Za-z_][\w.\[\]$]*)\s*\((.*?)\)\s*(.*)$", text)
    if not m:
        raise _LineError(f"expected NAME(ARGS), got '{text}'")
    return m.group(1), m.group(2), m.group(3)


def _call_args(args: str) -> dict[str, int]:
    params = {}
    for item in filter(None, (a.strip() for a in args.split(","))):
        key, sep, value = item.partition(":")
        if not sep:
            raise _LineError(f"action argument '{item}' is not NAME:VALUE")
        params[key.strip()] = _number(value.strip())
    return params


def _hex_data(text: str, allow_dont_care: bool) -> tuple[str, bool]:
    data = "".join(text.split()).upper()
    exact = data.endswith("$")
    if exact:
        if not allow_dont_care:
            raise _LineError("'$' is only allowed in expect")
        data = data[:-1]
    allowed = "0123456789ABCDEF*" if allow_dont_care else "0123456789ABCDEF"
    bad = next((c for c in data if c not in allowed), None)
    if bad is not None:
        raise _LineError(f"invalid character '{bad}' in packet data")
    if len(data) % 2:
        raise _LineError("packet data has an odd number of hex digits")
    return data, exact


# --------------------------------------------------------------------------- P4Info lookup


def _find(entities, name: str, kind: str):
    """An entity by fully-qualified name, alias, or unique dotted suffix."""
    for e in entities:
        if name in (e.preamble.name, e.preamble.alias):
            return e
    found = [e for e in entities if e.preamble.name.endswith("." + name)]
    if len(found) == 1:
        return found[0]
    if found:
        names = ", ".join(e.preamble.name for e in found)
        raise _LineError(f"{kind} name '{name}' is ambiguous: {names}")
    raise _LineError(f"no {kind} named '{name}'")


def _match_field(table, name: str):
    name = re.sub(r"\$(\d+)", r"[\1]", name)
    for f in table.match_fields:
        if f.name == name:
            return f
    found = [f for f in table.match_fields if f.name.endswith("." + name)]
    if len(found) == 1:
        return found[0]
    raise _LineError(f"table '{table.preamble.name}' has no key field '{name}'")


# --------------------------------------------------------------------------- runner


class StfRunner:
    """Executes parsed STF commands on a p4switch.Switch and checks the outputs."""

    def __init__(self, sw, filename: str = "<stf>", dialect: str = "p4switch"):
        self.sw = sw
        self.filename = filename
        self.dialect = dialect
        info = sw.p4info
        self._tables = list(info.tables)
        self._actions = {a.preamble.id: a for a in info.actions}
        self._all_actions = list(info.actions)
        self._profiles = list(info.action_profiles)
        self._counters = list(info.counters)
        self._direct_counters = list(info.direct_counters)
        self._entry_ids: dict[str, tuple[str, int]] = {}
        self._mc_nodes: list[tuple[int, list[int]]] = []
        self._mc_groups: dict[int, list[int]] = {}
        self._expected: dict[int, list[_Expectation]] = {}
        self._any_count: set[int] = set()
        self.outputs: dict[int, list[bytes]] = {}
        self.failures: list[str] = []
        self._named_ports: set[int] = set()   # ports of packet/expect lines
        self._line = 0

    def run(self, commands: list[Command]) -> StfResult:
        if self.dialect == "p4c":
            # p4c's driver sends every table/PRE command at once while BMv2's pcap reader waits
            # for each named port's input to end: packets meet the final tables, so they (and
            # the counter checks that follow them) run here after everything else
            late = [c for c in commands if c.name in ("packet", "check_counter")]
            commands = [c for c in commands if c.name not in ("packet", "check_counter")] + late
        for cmd in commands:
            self._line = cmd.line
            try:
                getattr(self, "_do_" + cmd.name)(cmd.words)
            except _LineError as exc:
                raise StfError(self.filename, cmd.line, str(exc)) from None
            except (KeyError, ValueError, TypeError, IndexError) as exc:
                # the switch rejected a table/PRE/extern request
                msg = exc.args[0] if exc.args else type(exc).__name__
                raise StfError(self.filename, cmd.line, f"{cmd.name}: {msg}") from None
        self._check_outputs()
        passed = not self.failures
        report = "PASS" if passed else "\n".join(self.failures)
        return StfResult(passed, report, self.outputs)

    # ---- tables

    def _action(self, name: str, table=None):
        if table is not None:
            candidates = [self._actions[r.id] for r in table.action_refs]
            return _find(candidates, name, f"action of table '{table.preamble.name}'")
        return _find(self._all_actions, name, "action")

    def _params(self, action, args: str) -> dict[str, int]:
        given = _call_args(args)
        names = {p.name: p for p in action.params}
        for key, value in given.items():
            if key not in names:
                raise _LineError(f"action '{action.preamble.name}' has no parameter '{key}'")
            if value >> names[key].bitwidth:
                raise _LineError(f"value {value:#x} does not fit parameter '{key}' "
                                 f"(bit<{names[key].bitwidth}>)")
        missing = [n for n in names if n not in given]
        if missing:
            raise _LineError(f"missing parameter(s) {', '.join(missing)} of action "
                             f"'{action.preamble.name}'")
        return {key: given[key] for key in names}

    def _key_value(self, mf, text: str):
        from p4.config.v1 import p4info_pb2

        kind = p4info_pb2.MatchField.MatchType.Name(mf.match_type).lower()
        width = mf.bitwidth
        full = (1 << width) - 1
        if self.dialect == "p4c":
            self._check_p4c_key(mf.name, kind, text)
        if kind == "exact":
            value = _number(text)
        elif kind == "lpm":
            if "/" in text:
                v, _, plen = text.partition("/")
                value = (_number(v), _number(plen))
            else:
                digits, bits = _digits(text)
                stars = len(digits) - len(digits.rstrip("*"))
                if "*" in digits.rstrip("*"):
                    raise _LineError(f"lpm value '{text}' has don't-care digits before "
                                     "cared-for ones")
                v, _ = _dont_care(text)
                value = (v, max(0, width - stars * bits))
            if value[1] > width:
                raise _LineError(f"prefix length {value[1]} exceeds key width {width}")
        elif kind == "ternary":
            if "&&&" in text:
                v, _, m = text.partition("&&&")
                value = (_number(v), _number(m))
            elif _digits(text)[1]:
                value = _dont_care(text)
            else:
                value = (_number(text), full)
        elif kind == "range":
            if "->" in text:
                lo, _, hi = text.partition("->")
                value = (_number(lo), _number(hi))
            else:
                value = (_number(text),) * 2
        elif kind == "optional":
            value = None if text == "*" else _number(text)
        else:
            raise _LineError(f"unsupported match kind '{kind}' of key '{mf.name}'")
        parts = value if isinstance(value, tuple) else (value,)
        if kind == "lpm":
            parts = parts[:1]
        for part in parts:
            if part is not None and part >> width:
                raise _LineError(f"value {part:#x} does not fit key '{mf.name}' (bit<{width}>)")
        return value

    @staticmethod
    def _check_p4c_key(name: str, kind: str, text: str):
        """What p4c's driver cannot turn into a simple_switch_CLI key (see the module doc)."""
        if kind in ("range", "optional"):
            raise _LineError(f"key '{name}' is {kind}: p4c's BMv2 STF driver handles only "
                             "exact, lpm and ternary keys")
        if kind == "ternary" and "&&&" in text:
            raise _LineError(f"ternary key '{name}:{text}': p4c's STF lexer has no '&', write "
                             "the mask as don't-care nibbles (e.g. 0x0a0009**)")
        if kind == "lpm" and "/" in text:
            raise _LineError(f"lpm key '{name}:{text}': p4c's BMv2 STF driver mis-reads "
                             "VALUE/LEN, write the prefix with don't-care nibbles (e.g. 0x0a00****)")
        if kind in ("ternary", "lpm") and text[:2].lower() not in ("0x", "0b"):
            raise _LineError(f"{kind} key '{name}:{text}': p4c's BMv2 STF driver needs a hex or "
                             "binary value here (it derives the mask from the written digits)")

    def _entry_head(self, words: str):
        """'TABLE [PRIO] key:val ... rest' -> (table, priority, match, rest)."""
        table_name, _, rest = words.partition(" ")
        if not table_name:
            raise _LineError("missing table name")
        table = _find(self._tables, table_name, "table")
        priority = None
        first, _, after = rest.strip().partition(" ")
        if first.isdigit():
            priority, rest = int(first), after
        match = {}
        rest = rest.strip()
        while rest:
            word, _, tail = rest.partition(" ")
            if ":" not in word or "(" in word.split(":", 1)[0]:
                break
            key, _, value = word.partition(":")
            mf = _match_field(table, key)
            match[mf.name] = self._key_value(mf, value)
            rest = tail.strip()
        return table, priority, match, rest

    @staticmethod
    def _entry_id(rest: str) -> tuple[str, str | None]:
        m = re.match(r"^(.*?)\s*=\s*([A-Za-z_]\w*)$", rest)
        return (m.group(1), m.group(2)) if m else (rest, None)

    def _do_add(self, words: str):
        table, priority, match, rest = self._entry_head(words)
        rest, entry_id = self._entry_id(rest)
        name, args, tail = _split_call(rest)
        if tail:
            raise _LineError(f"unexpected text after the action: '{tail}'")
        action = self._action(name, table)
        handle = self.sw.table_add(table.preamble.name, match, action.preamble.name,
                                   self._params(action, args), priority=priority)
        if entry_id:
            self._entry_ids[entry_id] = (table.preamble.name, handle)

    def _do_setdefault(self, words: str):
        table_name, _, rest = words.partition(" ")
        table = _find(self._tables, table_name, "table")
        name, args, tail = _split_call(rest.strip())
        if tail:
            raise _LineError(f"unexpected text after the action: '{tail}'")
        action = self._action(name, table)
        self.sw.table_set_default(table.preamble.name, action.preamble.name,
                                  self._params(action, args))

    def _do_add_member(self, words: str):
        parts = words.split(None, 2)
        if len(parts) != 3:
            raise _LineError("usage: add_member PROFILE MEMBER_ID ACTION(ARGS)")
        profile = _find(self._profiles, parts[0], "action profile")
        name, args, tail = _split_call(parts[2])
        if tail:
            raise _LineError(f"unexpected text after the action: '{tail}'")
        action = self._action(name)
        self.sw.act_prof_add_member(profile.preamble.name, _number(parts[1]),
                                    action.preamble.name, self._params(action, args))

    def _do_add_group(self, words: str):
        parts = words.split()
        if len(parts) < 2:
            raise _LineError("usage: add_group PROFILE GROUP_ID MEMBER_ID...")
        profile = _find(self._profiles, parts[0], "action profile")
        self.sw.act_prof_add_group(profile.preamble.name, _number(parts[1]),
                                   [_number(p) for p in parts[2:]])

    def _do_add_indirect(self, words: str):
        table, priority, match, rest = self._entry_head(words)
        rest, entry_id = self._entry_id(rest)
        kind, arg, tail = _split_call(rest)
        if tail or kind not in ("member", "group"):
            raise _LineError("expected member(ID) or group(ID) after the key")
        add = self.sw.table_add_member if kind == "member" else self.sw.table_add_group
        handle = add(table.preamble.name, match, _number(arg.strip()), priority=priority)
        if entry_id:
            self._entry_ids[entry_id] = (table.preamble.name, handle)

    # ---- packet replication engine

    def _do_mc_mgrp_create(self, words: str):
        group = _number(words.strip())
        if group in self._mc_groups:
            raise _LineError(f"multicast group {group} already exists")
        self.sw.mc_group_create(group, [])
        self._mc_groups[group] = []

    def _do_mc_node_create(self, words: str):
        parts = words.split()
        if len(parts) < 2:
            raise _LineError("usage: mc_node_create RID PORT...")
        self._mc_nodes.append((_number(parts[0]), [_number(p) for p in parts[1:]]))

    def _do_mc_node_associate(self, words: str):
        parts = words.split()
        if len(parts) != 2:
            raise _LineError("usage: mc_node_associate GROUP NODE_HANDLE")
        group, node = _number(parts[0]), _number(parts[1])
        if group not in self._mc_groups:
            raise _LineError(f"no multicast group {group}")
        if node >= len(self._mc_nodes):
            raise _LineError(f"no multicast node with handle {node}")
        self._mc_groups[group].append(node)
        # BMv2 replicates node by node, each node's ports in ascending order
        replicas = [(port, self._mc_nodes[n][0])
                    for n in self._mc_groups[group] for port in sorted(self._mc_nodes[n][1])]
        self.sw.mc_group_modify(group, replicas)

    def _do_mirroring_add(self, words: str):
        parts = words.split()
        if len(parts) != 2:
            raise _LineError("usage: mirroring_add SESSION PORT")
        self.sw.clone_session_set(_number(parts[0]), _number(parts[1]))

    # ---- packets

    def _do_wait(self, words: str):
        if words:
            raise _LineError("wait takes no argument")

    def _do_packet(self, words: str):
        port, _, data = words.partition(" ")
        data, _ = _hex_data(data, allow_dont_care=False)
        if not data:
            raise _LineError("packet without data")
        self._named_ports.add(_number(port))
        try:
            outputs = self.sw.process(_number(port), bytes.fromhex(data))
        except Exception as exc:  # a switch bug must fail the test, not hide the report
            self.failures.append(f"{self.filename}:{self._line}: processing the packet raised "
                                 f"{type(exc).__name__}: {exc}")
            return
        for out_port, out in outputs:
            self.outputs.setdefault(out_port, []).append(out)

    def _do_expect(self, words: str):
        port_text, _, data = words.partition(" ")
        port = _number(port_text)
        self._named_ports.add(port)
        pattern, exact = _hex_data(data, allow_dont_care=True)
        if not pattern and not exact:
            self._any_count.add(port)
            return
        self._expected.setdefault(port, []).append(
            _Expectation(self._line, pattern, exact))

    # ---- counters

    def _do_check_counter(self, words: str):
        m = re.match(r"^([A-Za-z_][\w.]*)\s*\(\s*(\$?\w+)\s*\)\s*(.*)$", words)
        if not m:
            raise _LineError("usage: check_counter NAME(INDEX) [packets|bytes OP VALUE]")
        name, index, cond = m.groups()
        if index.startswith("$"):
            counter = _find(self._direct_counters, name, "direct counter")
            if index[1:] not in self._entry_ids:
                raise _LineError(f"no entry was added with id {index[1:]}")
            table, handle = self._entry_ids[index[1:]]
            packets, nbytes = self.sw.direct_counter_read(table, handle)
        else:
            counter = _find(self._counters, name, "counter")
            packets, nbytes = self.sw.counter_read(counter.preamble.name, _number(index))
        if not cond:
            return
        c = re.match(r"^(packets|bytes)\s*(==|!=|<=|>=|<|>)\s*(\S+)$", cond)
        if not c:
            raise _LineError(f"bad counter condition '{cond}'")
        actual = packets if c.group(1) == "packets" else nbytes
        if not _COMPARE[c.group(2)](actual, _number(c.group(3))):
            self.failures.append(
                f"{self.filename}:{self._line}: counter {counter.preamble.name}({index}) "
                f"{c.group(1)} is {actual}, expected {c.group(2)} {c.group(3)}")

    # ---- output comparison

    def _check_outputs(self):
        for port in sorted(set(self._expected) | set(self.outputs)):
            if port in self._any_count:
                continue
            if self.dialect == "p4c" and port not in self._named_ports:
                continue
            expected = self._expected.get(port, [])
            actual = self.outputs.get(port, [])
            for i in range(max(len(expected), len(actual))):
                exp = expected[i] if i < len(expected) else None
                act = actual[i] if i < len(actual) else None
                problem = _compare(exp, act)
                if problem is not None:       # 0: the first byte differs
                    self.failures.append(_describe(self.filename, port, i, exp, act, problem))


def _compare(exp: _Expectation | None, act: bytes | None) -> int | str | None:
    """None when they match, else the index of the first differing byte or a reason."""
    if exp is None:
        return "unexpected packet"
    if act is None:
        return "expected packet not received"
    got = act.hex().upper()
    for i, nibble in enumerate(exp.pattern):
        if i >= len(got):
            return i // 2
        if nibble != "*" and nibble != got[i]:
            return i // 2
    if exp.exact and len(got) > len(exp.pattern):
        return len(exp.pattern) // 2
    return None


def _hex_bytes(pattern: str) -> list[str]:
    return [pattern[i:i + 2] for i in range(0, len(pattern), 2)]


def _describe(filename, port, index, exp, act, problem) -> str:
    where = f" (expect at {filename}:{exp.line})" if exp else ""
    lines = [f"port {port}, packet {index}{where}: "
             + (problem if isinstance(problem, str) else f"first difference at byte {problem}")]
    exp_bytes = _hex_bytes(exp.pattern) + (["$"] if exp and exp.exact else []) if exp else []
    act_bytes = _hex_bytes(act.hex().upper()) if act is not None else []
    lines.append("  expected: " + (" ".join(exp_bytes) if exp else "(none)"))
    lines.append("  actual:   " + (" ".join(act_bytes) if act is not None else "(none)"))
    if isinstance(problem, int):
        lines.append("            " + "   " * problem + "^^")
    return "\n".join(lines)


# --------------------------------------------------------------------------- entry points


def run_stf(program: str | Path, stf: str | Path, include_dirs=(), sw=None,
            dialect: str = "p4switch", backend="python", fallback=None) -> StfResult:
    """Load PROGRAM (unless a switch is given) and run the STF file on it; `fallback` as in
    p4switch.load (the Python backend for a program the native one does not run).

    Raises p4switch.P4CompileError for a bad program and StfError for a bad STF line (in the
    p4c dialect also for what p4c's BMv2 driver cannot run)."""
    import p4switch

    stf = Path(stf)
    commands = parse_stf(stf.read_text(), str(stf), dialect)
    if sw is None:
        sw = p4switch.load(str(program), include_dirs=tuple(include_dirs), backend=backend,
                           fallback=fallback)
    runner = StfRunner(sw, str(stf), dialect)
    return runner.run(commands)


@click.command("stf")
@click.argument("program", type=click.Path(exists=True, dir_okay=False))
@click.argument("stf", type=click.Path(exists=True, dir_okay=False))
@click.option("-I", "include_dirs", multiple=True, type=click.Path(file_okay=False),
              help="Extra include directory for the C preprocessor.")
@click.option("-v", "--verbose", is_flag=True, help="Print the packets each port emitted.")
@click.option("--dialect", type=click.Choice(DIALECTS), default="p4switch", show_default=True,
              help="p4c: refuse what p4c's BMv2 STF driver cannot run (portable files).")
@click.option("--backend", type=click.Choice(["python", "native"]), default=None,
              help="native (compiled to C; the default where a C compiler exists) or python.")
def stf_command(program, stf, include_dirs, verbose, dialect, backend):
    """Run the STF test STF on the P4 program PROGRAM.

    Exit status: 0 passed, 1 an expectation failed, 2 the program or the STF file is bad."""
    import p4switch
    from p4switch.native import Unsupported, available, default_backend, unavailable_reason

    if backend == "native" and not available():
        click.echo(unavailable_reason(), err=True)
        sys.exit(2)
    if backend is None and not available():
        click.echo(unavailable_reason(), err=True)
    fallback = None
    if backend is None:     # the default path runs every program: say when it is not native
        def fallback(reason):
            click.echo(f"p4switch: the native backend does not run {program} ({reason}): "
                       "running it on the Python backend", err=True)
    try:
        result = run_stf(program, stf, include_dirs, dialect=dialect,
                         backend=backend or default_backend(), fallback=fallback)
    except (p4switch.P4CompileError, StfError) as exc:
        click.echo(str(exc), err=True)
        sys.exit(2)
    except Unsupported as exc:
        click.echo(f"{program}: the native backend does not run this program: {exc}", err=True)
        sys.exit(2)
    if verbose:
        for port, packets in sorted(result.outputs.items()):
            for data in packets:
                click.echo(f"port {port}: {data.hex().upper()}")
    if result.passed:
        click.echo(f"PASS {stf}")
        return
    click.echo(result.report)
    click.echo(f"FAIL {stf}")
    sys.exit(1)
