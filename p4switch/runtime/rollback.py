"""All-or-none Write batches (ROLLBACK_ON_ERROR, DATAPLANE_ATOMIC): before each update the
state it touches is read back and turned into the updates that restore it; on the first
failure those run in reverse. The whole batch runs under the device lock, so packets see the
state before or after it, never a part: the rolled-back batch is also data-plane atomic."""
from __future__ import annotations

import grpc
from p4.v1 import p4runtime_pb2

from .errors import P4RuntimeError

Update = p4runtime_pb2.Update
E = p4runtime_pb2.Entity
# Entities keyed by id whose INSERT/DELETE invert each other; the rest only have MODIFY.
_KEYED = {"table_entry", "action_profile_member", "action_profile_group",
          "packet_replication_engine_entry", "digest_entry"}


def write_all_or_none(pipeline, updates) -> list[P4RuntimeError | None]:
    """Apply `updates`; if one fails, undo the applied ones. -> per-update results: None for
    success, the failure's own error, ABORTED for the updates undone or not tried."""
    undo: list[list[p4runtime_pb2.Update]] = []
    for i, update in enumerate(updates):
        try:
            inverse = _inverse(pipeline, update)
            pipeline.write(update)
        except P4RuntimeError as exc:
            try:
                for steps in reversed(undo):
                    for step in steps:
                        pipeline.write(step)
            except P4RuntimeError as undo_exc:
                lost = P4RuntimeError(grpc.StatusCode.INTERNAL, "rollback failed, state is "
                                      f"partly updated: {undo_exc.message}")
                return [lost] * i + [exc] + [lost] * (len(updates) - i - 1)
            aborted = P4RuntimeError(grpc.StatusCode.ABORTED,
                                     "not applied: another update of the batch failed")
            return [aborted] * i + [exc] + [aborted] * (len(updates) - i - 1)
        undo.append(inverse)
    return [None] * len(updates)


def _inverse(pipeline, update: p4runtime_pb2.Update) -> list[p4runtime_pb2.Update]:
    """Updates that bring back the state `update` is about to change."""
    which = update.entity.WhichOneof("entity")
    before = pipeline.read(_query(update.entity, which)) if which else []
    for e in before:
        if which == "table_entry" and e.table_entry.is_const:
            # A const entry is restored through its direct resources only.
            e.table_entry.ClearField("is_const")
            e.table_entry.ClearField("action")
    if which in _KEYED:
        if update.type == Update.INSERT:
            return [Update(type=Update.DELETE, entity=update.entity)]
        if update.type == Update.DELETE:
            return [Update(type=Update.INSERT, entity=e) for e in before]
    return [Update(type=Update.MODIFY, entity=e) for e in before]


def _query(entity: p4runtime_pb2.Entity, which: str) -> p4runtime_pb2.Entity:
    """The read that returns exactly what `entity` addresses, direct resources included."""
    q = E()
    q.CopyFrom(entity)
    if which == "table_entry":
        te = q.table_entry
        te.ClearField("action")
        te.counter_data.SetInParent()
        te.meter_config.SetInParent()
    elif which == "direct_counter_entry":
        q.direct_counter_entry.ClearField("data")
    elif which == "direct_meter_entry":
        q.direct_meter_entry.ClearField("config")
    elif which in ("counter_entry", "meter_entry", "register_entry"):
        inner = getattr(q, which)
        inner.ClearField("data" if which != "meter_entry" else "config")
    elif which == "packet_replication_engine_entry":
        pre = q.packet_replication_engine_entry
        kind = pre.WhichOneof("type")
        if kind == "multicast_group_entry":
            pre.multicast_group_entry.ClearField("replicas")
        elif kind == "clone_session_entry":
            pre.clone_session_entry.ClearField("replicas")
    elif which == "action_profile_member":
        q.action_profile_member.ClearField("action")
    elif which == "action_profile_group":
        q.action_profile_group.ClearField("members")
    elif which == "digest_entry":
        q.digest_entry.ClearField("config")
    elif which == "value_set_entry":
        q.value_set_entry.ClearField("members")
    return q
