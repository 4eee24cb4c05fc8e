"""Validation of the action part of table entries and action profile members: the action must
belong to the table, its parameters must be exactly the declared ones, each fitting its width."""
from __future__ import annotations

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from . import codec
from .errors import invalid, permission_denied
from .schema import Schema, TableInfo

Scope = p4info_pb2.ActionRef.Scope


def parse_action(schema: Schema, action: p4runtime_pb2.Action, allowed: dict[int, int],
                 where: str, default_entry: bool = False
                 ) -> tuple[str, dict[str, int], p4runtime_pb2.Action]:
    """-> (action name, {param name: value}, canonical Action) or INVALID_ARGUMENT/NOT_FOUND.
    `allowed` maps the action ids usable here to their ActionRef scope."""
    info = schema.action(action.action_id)
    if action.action_id not in allowed:
        raise invalid(f"action '{info.name}' is not an action of {where}")
    scope = allowed[action.action_id]
    # A scope violation is PERMISSION_DENIED (spec: "Action Specification").
    if default_entry and scope == Scope.TABLE_ONLY:
        raise permission_denied(f"action '{info.name}' is @tableonly in {where}: not a "
                                "default action")
    if not default_entry and scope == Scope.DEFAULT_ONLY:
        raise permission_denied(f"action '{info.name}' is @defaultonly in {where}: not for "
                                "entries")
    values: dict[str, int] = {}
    canonical = p4runtime_pb2.Action(action_id=action.action_id)
    seen = set()
    for param in action.params:
        spec = info.params.get(param.param_id)
        if spec is None:
            raise invalid(f"action '{info.name}' has no parameter with id {param.param_id}")
        if param.param_id in seen:
            raise invalid(f"action '{info.name}': parameter '{spec.name}' given twice")
        seen.add(param.param_id)
        value = codec.to_int(param.value, spec.bitwidth, f"{info.name}.{spec.name}")
        values[spec.name] = value
    missing = [p.name for pid, p in info.params.items() if pid not in seen]
    if missing:
        raise invalid(f"action '{info.name}': missing parameter(s) {', '.join(missing)}")
    for pid in sorted(seen):
        canonical.params.add(param_id=pid, value=codec.to_bytes(values[info.params[pid].name]))
    return info.name, values, canonical


def action_proto(schema: Schema, name: str, params: dict[str, int]) -> p4runtime_pb2.Action:
    """Canonical Action message for an action known by name (as the switch reports it)."""
    info = schema.action_by_name(name)
    action = p4runtime_pb2.Action(action_id=info.id)
    by_name = {p.name: pid for pid, p in info.params.items()}
    for pname, value in sorted(params.items(), key=lambda kv: by_name[kv[0]]):
        action.params.add(param_id=by_name[pname], value=codec.to_bytes(value))
    return action


def profile_actions(schema: Schema, profile: p4info_pb2.ActionProfile) -> dict[int, int]:
    """Actions usable by members of `profile`: those of the tables it implements."""
    allowed: dict[int, int] = {}
    for table_id in profile.table_ids:
        table: TableInfo = schema.table(table_id)
        for action_id, scope in table.actions.items():
            if scope != Scope.DEFAULT_ONLY:
                allowed[action_id] = scope
    return allowed
