"""`standard`'s action-profile calls (bm_mt_act_prof_*): members and groups by BMv2 handle,
kept as P4Runtime ActionProfileMember/Group entities with ids this layer picks."""
from __future__ import annotations

from p4.v1 import p4runtime_pb2

from ..runtime.errors import P4RuntimeError
from . import values
from .bridge import Bridge, error_code
from .standard import BmMtActProfGroup, BmMtActProfMember, TableOperationErrorCode
from .tables import fail

Update = p4runtime_pb2.Update


def _failure(exc: P4RuntimeError, not_found="INVALID_MBR_HANDLE"):
    import grpc
    if exc.code == grpc.StatusCode.FAILED_PRECONDITION:
        return fail("MBR_STILL_USED" if not_found == "INVALID_MBR_HANDLE" else "GRP_STILL_USED")
    return fail(TableOperationErrorCode._VALUES_TO_NAMES[error_code(
        exc, TableOperationErrorCode, not_found=not_found, exhausted="TABLE_FULL")])


class ProfileCalls:
    bridge: Bridge

    def _profile(self, state, name):
        profile = state.lookup("profile", name)
        if profile is None:
            raise fail("INVALID_ACTION_PROFILE_NAME")
        return profile

    def _profile_action(self, state, profile, name, data):
        action = state.lookup("action", name)
        tables = [t for t in state.schema.tables.values()
                  if t.implementation_id == profile.preamble.id]
        if action is None or not any(action.id in t.actions for t in tables):
            raise fail("INVALID_ACTION_NAME")
        try:
            return values.to_action(action, data)
        except values.BadValue:
            raise fail("BAD_ACTION_DATA") from None

    @staticmethod
    def _read(state, profile, kind, **ids) -> list:
        """The profile's members (kind "action_profile_member") or groups, all or by id."""
        cls = p4runtime_pb2.ActionProfileMember if kind == "action_profile_member" \
            else p4runtime_pb2.ActionProfileGroup
        found = Bridge.read(state, **{kind: cls(action_profile_id=profile.preamble.id, **ids)})
        return [getattr(e, kind) for e in found]

    @classmethod
    def _free_id(cls, state, profile, kind) -> int:
        """The lowest id no member (group) of the profile has, P4Runtime's included."""
        attr = "member_id" if kind == "action_profile_member" else "group_id"
        used = {getattr(m, attr) for m in cls._read(state, profile, kind)}
        candidate = 1
        while candidate in used:
            candidate += 1
        return candidate

    def _write_profile(self, state, kind, not_found="INVALID_MBR_HANDLE", **entity):
        try:
            Bridge.write(state, kind, **entity)
        except P4RuntimeError as exc:
            raise _failure(exc, not_found) from None

    def _member(self, state, profile, handle):
        mid = state.member_handles(profile.preamble.id).key_of(handle)
        if mid is None:
            raise fail("INVALID_MBR_HANDLE")
        return mid

    def _group(self, state, profile, handle):
        if not profile.with_selector:
            raise fail("NO_ACTION_PROFILE_SELECTION")
        gid = state.group_handles(profile.preamble.id).key_of(handle)
        if gid is None:
            raise fail("INVALID_GRP_HANDLE")
        return gid

    # --- members ---------------------------------------------------------------------------
    def bm_mt_act_prof_add_member(self, cxt_id, act_prof_name, action_name, action_data):
        with self._state() as state:
            profile = self._profile(state, act_prof_name)
            action = self._profile_action(state, profile, action_name, action_data)
            mid = self._free_id(state, profile, "action_profile_member")
            self._write_profile(state, Update.INSERT, action_profile_member=p4runtime_pb2.
                        ActionProfileMember(action_profile_id=profile.preamble.id,
                                            member_id=mid, action=action))
            return state.member_handles(profile.preamble.id).add(mid)

    def bm_mt_act_prof_delete_member(self, cxt_id, act_prof_name, mbr_handle):
        with self._state() as state:
            profile = self._profile(state, act_prof_name)
            mid = self._member(state, profile, mbr_handle)
            self._write_profile(state, Update.DELETE, action_profile_member=p4runtime_pb2.
                        ActionProfileMember(action_profile_id=profile.preamble.id,
                                            member_id=mid))
            state.member_handles(profile.preamble.id).remove(mbr_handle)

    def bm_mt_act_prof_modify_member(self, cxt_id, act_prof_name, mbr_handle, action_name,
                                     action_data):
        with self._state() as state:
            profile = self._profile(state, act_prof_name)
            mid = self._member(state, profile, mbr_handle)
            action = self._profile_action(state, profile, action_name, action_data)
            self._write_profile(state, Update.MODIFY, action_profile_member=p4runtime_pb2.
                        ActionProfileMember(action_profile_id=profile.preamble.id,
                                            member_id=mid, action=action))

    def bm_mt_act_prof_get_members(self, cxt_id, act_prof_name):
        with self._state() as state:
            profile = self._profile(state, act_prof_name)
            members = [self._bm_member(state, profile, m)
                       for m in self._read(state, profile, "action_profile_member")]
            return sorted(members, key=lambda m: m.mbr_handle)

    def bm_mt_act_prof_get_member(self, cxt_id, act_prof_name, mbr_handle):
        with self._state() as state:
            profile = self._profile(state, act_prof_name)
            mid = self._member(state, profile, mbr_handle)
            found = self._read(state, profile, "action_profile_member", member_id=mid)
            if not found:
                raise fail("INVALID_MBR_HANDLE")
            return self._bm_member(state, profile, found[0])

    def _bm_member(self, state, profile, member) -> BmMtActProfMember:
        info = state.schema.action(member.action.action_id)
        return BmMtActProfMember(
            mbr_handle=state.member_handles(profile.preamble.id).handle_of(member.member_id),
            action_name=info.name, action_data=values.action_data(info, member.action))

    # --- groups ----------------------------------------------------------------------------
    def bm_mt_act_prof_create_group(self, cxt_id, act_prof_name):
        with self._state() as state:
            profile = self._profile(state, act_prof_name)
            if not profile.with_selector:
                raise fail("NO_ACTION_PROFILE_SELECTION")
            gid = self._free_id(state, profile, "action_profile_group")
            self._write_profile(state, Update.INSERT, action_profile_group=p4runtime_pb2.
                        ActionProfileGroup(action_profile_id=profile.preamble.id, group_id=gid,
                                           max_size=profile.max_group_size))
            return state.group_handles(profile.preamble.id).add(gid)

    def bm_mt_act_prof_delete_group(self, cxt_id, act_prof_name, grp_handle):
        with self._state() as state:
            profile = self._profile(state, act_prof_name)
            gid = self._group(state, profile, grp_handle)
            self._write_profile(state, Update.DELETE, not_found="INVALID_GRP_HANDLE",
                        action_profile_group=p4runtime_pb2.ActionProfileGroup(
                            action_profile_id=profile.preamble.id, group_id=gid))
            state.group_handles(profile.preamble.id).remove(grp_handle)

    def _change_group(self, state, profile, gid, mid, add: bool):
        found = self._read(state, profile, "action_profile_group", group_id=gid)
        if not found:
            raise fail("INVALID_GRP_HANDLE")
        group = found[0]
        ids = [m.member_id for m in group.members]
        if add and mid in ids:
            raise fail("MBR_ALREADY_IN_GRP")
        if not add and mid not in ids:
            raise fail("MBR_NOT_IN_GRP")
        kept = [m for m in group.members if m.member_id != mid]
        del group.members[:]
        group.members.extend(kept)
        if add:
            group.members.add(member_id=mid, weight=1)
        self._write_profile(state, Update.MODIFY, action_profile_group=group)

    def bm_mt_act_prof_add_member_to_group(self, cxt_id, act_prof_name, mbr_handle, grp_handle):
        with self._state() as state:
            profile = self._profile(state, act_prof_name)
            mid = self._member(state, profile, mbr_handle)
            self._change_group(state, profile, self._group(state, profile, grp_handle), mid, True)

    def bm_mt_act_prof_remove_member_from_group(self, cxt_id, act_prof_name, mbr_handle,
                                                grp_handle):
        with self._state() as state:
            profile = self._profile(state, act_prof_name)
            mid = self._member(state, profile, mbr_handle)
            self._change_group(state, profile, self._group(state, profile, grp_handle), mid,
                               False)

    def bm_mt_act_prof_get_groups(self, cxt_id, act_prof_name):
        with self._state() as state:
            profile = self._profile(state, act_prof_name)
            groups = [self._bm_group(state, profile, g)
                      for g in self._read(state, profile, "action_profile_group")]
            return sorted(groups, key=lambda g: g.grp_handle)

    def bm_mt_act_prof_get_group(self, cxt_id, act_prof_name, grp_handle):
        with self._state() as state:
            profile = self._profile(state, act_prof_name)
            gid = self._group(state, profile, grp_handle)
            found = self._read(state, profile, "action_profile_group", group_id=gid)
            if not found:
                raise fail("INVALID_GRP_HANDLE")
            return self._bm_group(state, profile, found[0])

    def _bm_group(self, state, profile, group) -> BmMtActProfGroup:
        members = state.member_handles(profile.preamble.id)
        return BmMtActProfGroup(
            grp_handle=state.group_handles(profile.preamble.id).handle_of(group.group_id),
            mbr_handles=sorted(members.handle_of(m.member_id) for m in group.members))
