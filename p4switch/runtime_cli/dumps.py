"""What the CLI prints for the switch's answers, line for line as BMv2's CLI prints them:
table entries and default entries, action-profile members and groups, the echo of a match
key, and the multicast engine's dump."""
from __future__ import annotations

from ..thrift import standard
from ..thrift.standard import BmActionEntryType
from . import values


def print_action_entry(entry) -> None:
    if entry.action_type == BmActionEntryType.ACTION_DATA:
        print(f"Action entry: {entry.action_name} - "
              + ", ".join(values.hexstr(d) for d in entry.action_data or []))
    elif entry.action_type == BmActionEntryType.MBR_HANDLE:
        print(f"Index: member({entry.mbr_handle})")
    elif entry.action_type == BmActionEntryType.GRP_HANDLE:
        print(f"Index: group({entry.grp_handle})")
    else:
        print("EMPTY")


def print_member(member) -> None:
    print(f"Dumping member {member.mbr_handle}")
    print(f"Action entry: {member.action_name} - "
          + ", ".join(values.hexstr(d) for d in member.action_data or []))


def print_group(group) -> None:
    print(f"Dumping group {group.grp_handle}")
    print(f"Members: [{', '.join(str(h) for h in group.mbr_handles or [])}]")


def print_entry(table, entry) -> None:
    width = max([20] + [len(k[0]) for k in table.key])
    print(f"Dumping entry {hex(entry.entry_handle)}")
    print("Match key:")
    for p, (name, _, _) in zip(entry.match_key, table.key, strict=False):
        kind = standard.BmMatchParamType._VALUES_TO_NAMES[p.type]
        print(f"* {name:{width}}: {kind:10}{_dump_param(p)}")
    if entry.options is not None and entry.options.priority is not None and \
            entry.options.priority >= 0:
        print(f"Priority: {entry.options.priority}")
    print_action_entry(entry.action_entry)
    if entry.life is not None:
        print(f"Life: {entry.life.time_since_hit_ms}ms since hit, timeout is "
              f"{entry.life.timeout_ms}ms")


def print_profile(client, profile) -> None:
    print("==========")
    print("MEMBERS")
    for m in client.bm_mt_act_prof_get_members(0, profile.name):
        print("**********")
        print_member(m)
    if profile.with_selection:
        print("==========")
        print("GROUPS")
        for g in client.bm_mt_act_prof_get_groups(0, profile.name):
            print("**********")
            print_group(g)


def print_mc_entries(dump: dict) -> None:
    """bm_mc_get_entries' JSON: groups, their nodes' ports and LAGs, then the LAGs."""
    nodes = {h["handle"]: (h["rid"], h["l2_handle"]) for h in dump["l1_handles"]}
    sets = {h["handle"]: (h["ports"], h["lags"]) for h in dump["l2_handles"]}
    print("==========")
    print("MC ENTRIES")
    last_ports = None
    for group in dump["mgrps"]:
        print("**********")
        print(f"mgrp({group['id']})")
        for handle in group["l1_handles"]:
            rid, l2 = nodes[handle]
            last_ports, lags = sets[l2]
            print(f"  -> (L1h={handle}, rid={rid}) -> (ports=[{_join(last_ports)}], "
                  f"lags=[{_join(lags)}])")
    print("==========")
    print("LAGS")
    if "lags" in dump:
        # BMv2's CLI prints the ports of the last node listed on every LAG line, and its
        # CLI_tests expect exactly that; with no node listed, the LAG's own members.
        for lag in dump["lags"]:
            ports = lag["ports"] if last_ports is None else last_ports
            print(f"lag({lag['id']}) -> ports=[{_join(ports)}]")
    else:
        print("None for this PRE type")
    print("==========")


def param_str(p) -> str:
    """A match parameter as the table_add echo shows it: KIND-bytes."""
    kind = standard.BmMatchParamType._VALUES_TO_NAMES[p.type]
    return f"{kind}-{_param_text(p, values.colon_hex, with_valid=False)}"


def _dump_param(p) -> str:
    return _param_text(p, values.hexstr, with_valid=True)


def _param_text(p, show, with_valid: bool) -> str:
    if p.exact is not None:
        return show(p.exact.key)
    if p.lpm is not None:
        return f"{show(p.lpm.key)}/{p.lpm.prefix_length}"
    if p.ternary is not None:
        return f"{show(p.ternary.key)} &&& {show(p.ternary.mask)}"
    if p.range is not None:
        return f"{show(p.range.start)} -> {show(p.range.end_)}"
    if p.valid is not None and with_valid:
        return "01" if p.valid.key else "00"
    return ""


def _join(items) -> str:
    return ", ".join(str(i) for i in items)
