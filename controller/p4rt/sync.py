"""Reconciliation: the updates that turn a switch's current state into the intended one.

Pure functions over `State` values, so the plan is testable without a switch. Entries are
compared in canonical form (full P4Info names, masked values): an entry already present with
the same action is left alone, so re-running after a controller restart writes nothing, and
entries the switch lost after its own restart are written again.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from p4.v1 import p4runtime_pb2 as pb

from .entities import CloneSession, MulticastGroup, TableEntry
from .schema import Schema

INSERT, MODIFY, DELETE = pb.Update.INSERT, pb.Update.MODIFY, pb.Update.DELETE
UPDATE_NAMES = {INSERT: "insert", MODIFY: "modify", DELETE: "delete"}


@dataclass
class State:
    """Everything the controller manages on one switch."""
    table_entries: list[TableEntry] = field(default_factory=list)
    multicast_groups: list[MulticastGroup] = field(default_factory=list)
    clone_sessions: list[CloneSession] = field(default_factory=list)

    def size(self) -> int:
        return len(self.table_entries) + len(self.multicast_groups) + len(self.clone_sessions)


def canonical(schema: Schema, entry: TableEntry) -> TableEntry:
    """The entry as a switch would return it (validates it against the P4Info too)."""
    return TableEntry.from_proto(schema, entry.to_proto(schema).table_entry)


def entry_key(entry: TableEntry) -> tuple:
    return (entry.table, tuple(sorted(entry.match.items())), entry.priority, entry.default)


def entry_action(entry: TableEntry) -> tuple:
    return entry.action, tuple(sorted(entry.params.items()))


def _normal(group):
    """Replica order carries no meaning for the switch, so it does not count as a change."""
    return replace(group, replicas=tuple(sorted(group.replicas)))


def plan(schema: Schema, intended: State, current: State) -> list[tuple[int, object]]:
    """Ordered (update type, entity) pairs, so that traffic never meets a dangling reference:
    new and changed replication groups first, then new and changed table entries and default
    actions in the intended order (a program's groups before the routes that name them), and
    only then stale table entries and stale replication groups."""
    want = _index_entries(schema, intended.table_entries)
    have = {entry_key(e): e for e in current.table_entries}
    updates: list[tuple[int, object]] = []

    stale_groups: list[tuple[int, object]] = []
    for kind_want, kind_have, key in (
            (intended.multicast_groups, current.multicast_groups, "group_id"),
            (intended.clone_sessions, current.clone_sessions, "session_id")):
        w = _unique(kind_want, key)
        h = {getattr(g, key): g for g in kind_have}
        for gid, g in w.items():
            if gid not in h:
                updates.append((INSERT, g))
            elif _normal(h[gid]) != _normal(g):
                updates.append((MODIFY, g))
        stale_groups += [(DELETE, g) for gid, g in h.items() if gid not in w]

    for k, e in want.items():
        old = have.get(k)
        if e.default:
            if old is None or entry_action(old) != entry_action(e):
                updates.append((MODIFY, e))
        elif old is None:
            updates.append((INSERT, e))
        elif entry_action(old) != entry_action(e):
            updates.append((MODIFY, e))
    updates += [(DELETE, e) for k, e in have.items() if k not in want and not e.default]
    return updates + stale_groups


def _index_entries(schema: Schema, entries: list[TableEntry]) -> dict:
    index = {}
    for e in entries:
        c = canonical(schema, e)
        k = entry_key(c)
        if k in index and entry_action(index[k]) != entry_action(c):
            raise ValueError(f"two intended entries of {c.table} share a match "
                             f"{dict(k[1])} with different actions")
        index[k] = c
    return index


def _unique(groups, key: str) -> dict:
    result = {}
    for g in groups:
        gid = getattr(g, key)
        if gid in result and result[gid] != g:
            raise ValueError(f"two intended {type(g).__name__}s with id {gid} differ")
        result[gid] = g
    return result


def to_updates(schema: Schema, steps: list[tuple[int, object]]) -> list[pb.Update]:
    return [pb.Update(type=t, entity=e.to_proto(schema)) for t, e in steps]


def summary(steps: list[tuple[int, object]]) -> dict[str, int]:
    counts = {"insert": 0, "modify": 0, "delete": 0}
    for t, _ in steps:
        counts[UPDATE_NAMES[t]] += 1
    return counts
