"""Action profiles and selectors: members, groups, and the reference counts that keep a member
in use by a group (or an entry) from being deleted."""
from __future__ import annotations

import collections
from dataclasses import dataclass, field

from p4.v1 import p4runtime_pb2

from .actions import parse_action, profile_actions
from .errors import already_exists, failed_precondition, invalid, not_found, resource_exhausted
from .schema import Schema

Update = p4runtime_pb2.Update

# One-shot selector entries get hidden members and groups with ids a controller cannot use
# (P4Runtime ids are 32-bit).
ONE_SHOT_BASE = 1 << 32


@dataclass
class ProfileState:
    members: dict[int, p4runtime_pb2.ActionProfileMember] = field(default_factory=dict)
    groups: dict[int, p4runtime_pb2.ActionProfileGroup] = field(default_factory=dict)
    refs: collections.Counter = field(default_factory=collections.Counter)  # ('m'|'g', id)
    next_hidden: int = ONE_SHOT_BASE
    hidden_groups: dict[int, list[int]] = field(default_factory=dict)  # group -> members
    # per group (also hidden ones): (member id, weight, watched port or None) as written
    spans: dict[int, list[tuple[int, int, int | None]]] = field(default_factory=dict)


def _watched(m) -> int | None:
    """The port a group member (or one-shot action) watches: `watch_port` (bytes, 1.4) or the
    deprecated `watch` (int); None when it watches none."""
    which = m.WhichOneof("watch_kind")
    if which == "watch_port":
        return int.from_bytes(m.watch_port, "big")
    return m.watch if which == "watch" else None


class ProfileStore:
    def __init__(self, schema: Schema, sw, down_ports: set[int] = frozenset()):
        self.schema, self.sw = schema, sw
        self.state = {pid: ProfileState() for pid in schema.profiles}
        self.down: set[int] = set(down_ports)    # ports whose members leave their groups

    # --- members ---------------------------------------------------------------------------
    def write_member(self, kind: int, member: p4runtime_pb2.ActionProfileMember) -> None:
        profile = self.schema.profile(member.action_profile_id)
        st, name = self.state[member.action_profile_id], profile.preamble.name
        if member.member_id <= 0 or member.member_id >= ONE_SHOT_BASE:
            raise invalid(f"{name}: member id {member.member_id} is not a valid 32-bit id")
        exists = member.member_id in st.members
        if kind == Update.DELETE:
            if not exists:
                raise not_found(f"{name}: no member {member.member_id}")
            if st.refs[("m", member.member_id)]:
                raise failed_precondition(f"{name}: member {member.member_id} is still used "
                                          "by a group or a table entry")
            self.sw.act_prof_delete_member(name, member.member_id)
            del st.members[member.member_id]
            return
        if kind == Update.INSERT and exists:
            raise already_exists(f"{name}: member {member.member_id} exists")
        if kind == Update.MODIFY and not exists:
            raise not_found(f"{name}: no member {member.member_id}")
        if kind == Update.INSERT and profile.size and len(st.members) >= profile.size:
            raise resource_exhausted(f"{name}: all {profile.size} members are in use")
        aname, params, canonical = parse_action(self.schema, member.action,
                                                profile_actions(self.schema, profile), name)
        if kind == Update.INSERT:
            self.sw.act_prof_add_member(name, member.member_id, aname, params)
        else:
            self.sw.act_prof_modify_member(name, member.member_id, aname, params)
        stored = p4runtime_pb2.ActionProfileMember()
        stored.CopyFrom(member)
        stored.action.CopyFrom(canonical)
        st.members[member.member_id] = stored

    # --- groups ----------------------------------------------------------------------------
    def write_group(self, kind: int, group: p4runtime_pb2.ActionProfileGroup) -> None:
        profile = self.schema.profile(group.action_profile_id)
        st, name = self.state[group.action_profile_id], profile.preamble.name
        if not profile.with_selector:
            raise invalid(f"{name} is an action profile without selector: it has no groups")
        if group.group_id <= 0 or group.group_id >= ONE_SHOT_BASE:
            raise invalid(f"{name}: group id {group.group_id} is not a valid 32-bit id")
        exists = group.group_id in st.groups
        if kind == Update.DELETE:
            if not exists:
                raise not_found(f"{name}: no group {group.group_id}")
            if st.refs[("g", group.group_id)]:
                raise failed_precondition(f"{name}: group {group.group_id} is used by a table "
                                          "entry")
            self.sw.act_prof_delete_group(name, group.group_id)
            self._unref_members(st, st.groups.pop(group.group_id))
            del st.spans[group.group_id]
            return
        if kind == Update.INSERT and exists:
            raise already_exists(f"{name}: group {group.group_id} exists")
        if kind == Update.MODIFY and not exists:
            raise not_found(f"{name}: no group {group.group_id}")
        spans = self._expand(profile, st, group)
        live = self._live(spans)
        if kind == Update.INSERT:
            self.sw.act_prof_add_group(name, group.group_id, live)
        else:
            self.sw.act_prof_modify_group(name, group.group_id, live)
            self._unref_members(st, st.groups[group.group_id])
        st.spans[group.group_id] = spans
        stored = p4runtime_pb2.ActionProfileGroup()
        stored.CopyFrom(group)
        st.groups[group.group_id] = stored
        for m in group.members:
            st.refs[("m", m.member_id)] += 1

    def _expand(self, profile, st: ProfileState, group) -> list[tuple[int, int, int | None]]:
        """(member id, weight, watched port) of each member, checked."""
        name = profile.preamble.name
        max_size = group.max_size or profile.max_group_size
        if profile.max_group_size and group.max_size > profile.max_group_size:
            raise invalid(f"{name}: max_size {group.max_size} exceeds the profile's "
                          f"max_group_size {profile.max_group_size}")
        if max_size and len(group.members) > max_size:
            raise resource_exhausted(f"{name}: {len(group.members)} members exceed the group's "
                                     f"max size {max_size}")
        seen, expanded = set(), []
        for m in group.members:
            if m.member_id in seen:
                raise invalid(f"{name}: member {m.member_id} listed twice in group "
                              f"{group.group_id}")
            seen.add(m.member_id)
            if m.member_id not in st.members:
                raise not_found(f"{name}: group {group.group_id} refers to unknown member "
                                f"{m.member_id}")
            if m.weight < 1:
                raise invalid(f"{name}: member {m.member_id} has weight {m.weight} (must be >= 1)")
            expanded.append((m.member_id, m.weight, _watched(m)))
        return expanded

    def _live(self, spans) -> list[int]:
        """The member ids the selector picks from: each repeated `weight` times (weighted
        selection by repetition), without the members whose watched port is down."""
        return [mid for mid, weight, port in spans if port not in self.down
                for _ in range(weight)]

    def port_status(self, port: int, up: bool) -> None:
        """A port went down or came back: the groups with members watching it change."""
        if (port not in self.down) == up:
            return
        (self.down.discard if up else self.down.add)(port)
        for pid, st in self.state.items():
            name = self.schema.profile(pid).preamble.name
            for gid, spans in st.spans.items():
                if any(watched == port for _, _, watched in spans):
                    self.sw.act_prof_modify_group(name, gid, self._live(spans))

    @staticmethod
    def _unref_members(st: ProfileState, group) -> None:
        for m in group.members:
            st.refs[("m", m.member_id)] -= 1

    # --- references from table entries -----------------------------------------------------
    def check_member(self, profile_id: int, member_id: int) -> None:
        if member_id not in self.state[profile_id].members:
            raise not_found(f"{self.schema.profile(profile_id).preamble.name}: no member "
                            f"{member_id}")

    def check_group(self, profile_id: int, group_id: int) -> None:
        profile = self.schema.profile(profile_id)
        if not profile.with_selector:
            raise invalid(f"{profile.preamble.name} has no selector: entries cannot use groups")
        if group_id not in self.state[profile_id].groups:
            raise not_found(f"{profile.preamble.name}: no group {group_id}")

    def ref(self, profile_id: int, what: tuple[str, int], delta: int) -> None:
        self.state[profile_id].refs[what] += delta

    def one_shot(self, profile_id: int, action_set: p4runtime_pb2.ActionProfileActionSet
                 ) -> tuple[str, int]:
        """Create hidden members (and a group when the profile has a selector) for a one-shot
        entry -> ('m'|'g', id) to reference from the entry."""
        profile = self.schema.profile(profile_id)
        st, name = self.state[profile_id], profile.preamble.name
        actions = list(action_set.action_profile_actions)
        if not actions:
            raise invalid(f"{name}: empty one-shot action set")
        if not profile.with_selector and len(actions) != 1:
            raise invalid(f"{name} has no selector: a one-shot set holds exactly one action")
        allowed = profile_actions(self.schema, profile)
        parsed = []
        for a in actions:
            if a.weight < 1:
                raise invalid(f"{name}: one-shot action weight {a.weight} (must be >= 1)")
            parsed.append((parse_action(self.schema, a.action, allowed, name), a.weight,
                           _watched(a)))
        if profile.max_group_size and len(parsed) > profile.max_group_size:
            raise resource_exhausted(f"{name}: {len(parsed)} actions exceed max_group_size "
                                     f"{profile.max_group_size}")
        spans = []
        for (aname, params, _), weight, watched in parsed:
            mid = st.next_hidden
            st.next_hidden += 1
            self.sw.act_prof_add_member(name, mid, aname, params)
            spans.append((mid, weight, watched))
        if not profile.with_selector:
            return ("m", spans[0][0])
        gid = st.next_hidden
        st.next_hidden += 1
        self.sw.act_prof_add_group(name, gid, self._live(spans))
        st.hidden_groups[gid] = [mid for mid, _, _ in spans]
        st.spans[gid] = spans
        return ("g", gid)

    def drop_one_shot(self, profile_id: int, ref: tuple[str, int]) -> None:
        name = self.schema.profile(profile_id).preamble.name
        kind, ident = ref
        if kind == "g":
            self.sw.act_prof_delete_group(name, ident)
            del self.state[profile_id].spans[ident]
            for mid in self.state[profile_id].hidden_groups.pop(ident):
                self.sw.act_prof_delete_member(name, mid)
        else:
            self.sw.act_prof_delete_member(name, ident)
