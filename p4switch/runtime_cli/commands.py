"""The runtime CLI's command language (simple_switch_CLI's): one `do_<command>` per command,
printing what BMv2's CLI prints, so scripts that read its output keep working. A bad argument
or a refused operation prints one error line and the CLI goes on with the next command."""
from __future__ import annotations

import cmd
import functools
import json
import sys

from ..thrift import simple_pre, simple_switch, standard
from ..thrift.idl import ThriftError
from ..thrift.standard import BmActionEntryType, BmAddEntryOptions, BmCounterValue
from . import values
from .values import DataError, InputError, KeyError_

# exception class -> (its error-code enum, the words BMv2's CLI prints before the code)
_ERRORS = [
    (standard.InvalidTableOperation, standard.TableOperationErrorCode, "table"),
    (standard.InvalidCounterOperation, standard.CounterOperationErrorCode, "counter"),
    (standard.InvalidMeterOperation, standard.MeterOperationErrorCode, "meter"),
    (standard.InvalidRegisterOperation, standard.RegisterOperationErrorCode, "register"),
    (standard.InvalidLearnOperation, standard.LearnOperationErrorCode, "learn"),
    (standard.InvalidSwapOperation, standard.SwapOperationErrorCode, "swap"),
    (standard.InvalidDevMgrOperation, standard.DevMgrErrorCode, "device manager"),
    (standard.InvalidCrcOperation, standard.CrcErrorCode, "crc"),
    (standard.InvalidToeplitzHashOperation, standard.ToeplitzHashErrorCode, "Toeplitz hash"),
    (standard.InvalidParseVSetOperation, standard.ParseVSetOperationErrorCode,
     "parser value set"),
    (simple_switch.InvalidMirroringOperation, simple_switch.MirroringOperationErrorCode,
     "mirroring"),
]


def reports_errors(f):
    """Print a bad input or a refused operation the way BMv2's CLI does."""
    @functools.wraps(f)
    def run(self, line):
        try:
            return f(self, line)
        except KeyError_ as exc:
            print("Invalid match key:", exc)
        except DataError as exc:
            print("Invalid runtime data:", exc)
        except InputError as exc:
            print("Error:", exc)
        except simple_pre.InvalidMcOperation as exc:
            print(f"Invalid PRE operation ({simple_pre.McOperationErrorCode._VALUES_TO_NAMES[exc.code]})")
        except ThriftError as exc:
            for cls, codes, words in _ERRORS:
                if isinstance(exc, cls):
                    print(f"Invalid {words} operation ({codes._VALUES_TO_NAMES[exc.code]})")
                    break
            else:
                raise
    return run


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InputError(f"Bad format for {what}") from None


class RuntimeCLI(cmd.Cmd):
    prompt = "RuntimeCmd: "
    intro = "Control utility for runtime P4 table manipulation"

    def __init__(self, program, client, mc_client, sswitch_client, lag=True, stdin=None):
        super().__init__(stdin=stdin)
        self.program, self.client = program, client
        self.mc, self.sswitch, self.lag = mc_client, sswitch_client, lag

    # --- the shell -------------------------------------------------------------------------
    def emptyline(self):
        return False

    def do_EOF(self, line):
        print()
        return True

    def default(self, line):
        print(f"*** Unknown syntax: {line}")

    # --- lookups ---------------------------------------------------------------------------
    def _get(self, kind: str, words: str, name: str):
        obj = self.program.find(kind, name)
        if obj is None:
            raise InputError(f"Invalid {words} name ({name})")
        return obj

    def _table(self, name):
        return self._get("table", "table", name)

    def _profile(self, name):
        return self._get("profile", "action profile", name)

    @staticmethod
    def _n_args(args, n):
        if len(args) != n:
            raise InputError(f"Wrong number of args, expected {n} but got {len(args)}")

    @staticmethod
    def _min_args(args, n):
        if len(args) < n:
            raise InputError("Insufficient number of args")

    def _table_action(self, typed_table, table, name):
        action = self.program.find("action", name)
        if action is None or action.name not in table.actions:
            raise InputError(f"Table {typed_table} has no action {name}")
        return action

    def _data(self, action, args, shown=None):
        if len(args) != len(action.params):
            raise InputError(f"Action {shown or action.name} needs {len(action.params)} "
                             "parameters")
        return values.action_data(action, args)

    def _key_and_priority(self, table, args):
        """Pops the trailing priority of a ternary/range table's entry."""
        priority = 0
        if table.needs_priority:
            try:
                priority = int(args.pop(-1))
            except (ValueError, IndexError):
                raise InputError("Table is ternary, but could not extract a valid priority "
                                 "from args") from None
        return priority

    # --- program ---------------------------------------------------------------------------
    @reports_errors
    def do_show_tables(self, line):
        "List tables defined in the P4 program: show_tables"
        self._n_args(line.split(), 0)
        for name in sorted(self.program.tables):
            print(self.program.tables[name].describe())

    @reports_errors
    def do_show_actions(self, line):
        "List actions defined in the P4 program: show_actions"
        self._n_args(line.split(), 0)
        for name in sorted(self.program.actions):
            print(self.program.actions[name].describe())

    @reports_errors
    def do_table_show_actions(self, line):
        "List one table's actions as per the P4 program: table_show_actions <table_name>"
        args = line.split()
        self._n_args(args, 1)
        for name in sorted(self._table(args[0]).actions):
            print(self.program.actions[name].describe())

    @reports_errors
    def do_table_info(self, line):
        "Show info about a table: table_info <table_name>"
        args = line.split()
        self._n_args(args, 1)
        table = self._table(args[0])
        print(table.describe())
        print("*" * 80)
        for name in sorted(table.actions):
            print(self.program.actions[name].describe())

    @reports_errors
    def do_switch_info(self, line):
        "Show some basic info about the switch: switch_info"
        self._n_args(line.split(), 0)
        info = self.client.bm_mgmt_get_info()
        names = [f[1] for f in info.fields]
        width = 5 + max(len(n) for n in names)
        for n in names:
            print(f"{n:{width}}: {getattr(info, n)}")

    @reports_errors
    def do_reset_state(self, line):
        "Reset all state in the switch (table entries, registers, ...), but P4 config is preserved: reset_state"
        self._n_args(line.split(), 0)
        self.client.bm_reset_state()

    @reports_errors
    def do_write_config_to_file(self, line):
        "Retrieves the JSON config currently used by the switch and dumps it to user-specified file"
        args = line.split()
        self._n_args(args, 1)
        with open(args[0], "w") as f:
            f.write(self.client.bm_get_config())

    @reports_errors
    def do_show_ports(self, line):
        "Shows the ports connected to the switch: show_ports"
        self._n_args(line.split(), 0)
        print(f"{'port #':^10}{'iface name':^20}{'status':^10}extra info")
        print("=" * 50)
        for p in self.client.bm_dev_mgr_show_ports():
            extra = "; ".join(f"{k}={v}" for k, v in (p.extra or {}).items())
            print(f"{p.port_num:^10}{p.iface_name:^20}{'UP' if p.is_up else 'DOWN':^10}{extra}")

    # --- match tables ----------------------------------------------------------------------
    @reports_errors
    def do_table_num_entries(self, line):
        "Return the number of entries in a match table (direct or indirect): table_num_entries <table name>"
        args = line.split()
        self._n_args(args, 1)
        print(self.client.bm_mt_get_num_entries(0, self._table(args[0]).name))

    @reports_errors
    def do_table_clear(self, line):
        "Clear all entries in a match table (direct or indirect), but not the default entry: table_clear <table name>"
        args = line.split()
        self._n_args(args, 1)
        self.client.bm_mt_clear_entries(0, self._table(args[0]).name, False)

    @reports_errors
    def do_table_set_default(self, line):
        "Set default action for a match table: table_set_default <table name> <action name> <action parameters>"
        args = line.split()
        self._min_args(args, 2)
        table = self._table(args[0])
        action = self._table_action(args[0], table, args[1])
        data = self._data(action, args[2:], shown=args[1])
        print("Setting default action of", args[0])
        print(f"{'action:':20} {args[1]}")
        print(f"{'runtime data:':20} " + "\t".join(values.colon_hex(d) for d in data))
        self.client.bm_mt_set_default_action(0, table.name, action.name, data)

    @reports_errors
    def do_table_reset_default(self, line):
        "Reset default entry for a match table: table_reset_default <table name>"
        args = line.split()
        self._n_args(args, 1)
        self.client.bm_mt_reset_default_entry(0, self._table(args[0]).name)

    @reports_errors
    def do_table_add(self, line):
        "Add entry to a match table: table_add <table name> <action name> <match fields> => <action parameters> [priority]"
        args = line.split()
        self._min_args(args, 3)
        table = self._table(args[0])
        action = self._table_action(args[0], table, args[1])
        priority = self._key_and_priority(table, args)
        rest = args[2:]
        split = rest.index("=>") if "=>" in rest else len(rest) - 1
        key_args, data_args = rest[:split], rest[split + 1:]
        if len(key_args) != len(table.key):
            raise InputError(f"Table {args[0]} needs {len(table.key)} key fields")
        data = self._data(action, data_args)
        key = values.match_key(table, key_args)
        print("Adding entry to", table.match_type, "match table", args[0])
        print(f"{'match key:':20} " + "\t".join(_param_str(p) for p in key))
        print(f"{'action:':20} {args[1]}")
        print(f"{'runtime data:':20} " + "\t".join(values.colon_hex(d) for d in data))
        handle = self.client.bm_mt_add_entry(0, table.name, key, action.name, data,
                                             BmAddEntryOptions(priority=priority))
        print("Entry has been added with handle", handle)

    @reports_errors
    def do_table_set_timeout(self, line):
        "Set a timeout in ms for a given entry; the table has to support timeouts: table_set_timeout <table_name> <entry handle> <timeout (ms)>"
        args = line.split()
        self._n_args(args, 3)
        table = self._table(args[0])
        if not table.support_timeout:
            raise InputError(f"Table {args[0]} does not support entry timeouts")
        handle = _int(args[1], "entry handle")
        timeout = _int(args[2], "timeout")
        print("Setting a", timeout, "ms timeout for entry", handle)
        self.client.bm_mt_set_entry_ttl(0, table.name, handle, timeout)

    @reports_errors
    def do_table_modify(self, line):
        "Add entry to a match table: table_modify <table name> <action name> <entry handle> [action parameters]"
        args = line.split()
        self._min_args(args, 3)
        table = self._table(args[0])
        action = self._table_action(args[0], table, args[1])
        handle = _int(args[2], "entry handle")
        params = args[3:]
        if params and params[0] == "=>":
            params = params[1:]
        data = self._data(action, params)
        print("Modifying entry", handle, "for", table.match_type, "match table", args[0])
        self.client.bm_mt_modify_entry(0, table.name, handle, action.name, data)

    @reports_errors
    def do_table_delete(self, line):
        "Delete entry from a match table: table_delete <table name> <entry handle>"
        args = line.split()
        self._n_args(args, 2)
        table = self._table(args[0])
        handle = _int(args[1], "entry handle")
        print("Deleting entry", handle, "from", args[0])
        self.client.bm_mt_delete_entry(0, table.name, handle)

    # --- indirect tables and action profiles -----------------------------------------------
    def _indirect(self, table, with_selector=False):
        if with_selector and table.kind != "indirect_ws":
            raise InputError("Cannot run this command on non-indirect table, or on indirect "
                             "table with no selector")
        if table.kind not in ("indirect", "indirect_ws"):
            raise InputError("Cannot run this command on non-indirect table")

    def _selector(self, profile):
        if not profile.with_selection:
            raise InputError("Cannot run this command on an action profile without selector")

    def _profile_action(self, profile, name):
        action = self.program.find("action", name)
        if action is None or action.name not in profile.actions:
            raise InputError(f"Action profile '{profile.name}' has no action '{name}'")
        return action

    @reports_errors
    def do_act_prof_create_member(self, line):
        "Add a member to an action profile: act_prof_create_member <action profile name> <action_name> [action parameters]"
        args = line.split()
        self._min_args(args, 2)
        profile = self._profile(args[0])
        action = self._profile_action(profile, args[1])
        data = self._data(action, args[2:])
        handle = self.client.bm_mt_act_prof_add_member(0, profile.name, action.name, data)
        print("Member has been created with handle", handle)

    @reports_errors
    def do_act_prof_delete_member(self, line):
        "Delete a member in an action profile: act_prof_delete_member <action profile name> <member handle>"
        args = line.split()
        self._n_args(args, 2)
        profile = self._profile(args[0])
        self.client.bm_mt_act_prof_delete_member(0, profile.name, _int(args[1], "member handle"))

    @reports_errors
    def do_act_prof_modify_member(self, line):
        "Modify member in an action profile: act_prof_modify_member <action profile name> <action_name> <member_handle> [action parameters]"
        args = line.split()
        self._min_args(args, 3)
        profile = self._profile(args[0])
        action = self._profile_action(profile, args[1])
        handle = _int(args[2], "member handle")
        params = args[3:]
        if params and params[0] == "=>":
            params = params[1:]
        self.client.bm_mt_act_prof_modify_member(0, profile.name, handle, action.name,
                                                 self._data(action, params))

    @reports_errors
    def do_act_prof_create_group(self, line):
        "Add a group to an action pofile: act_prof_create_group <action profile name>"
        args = line.split()
        self._n_args(args, 1)
        profile = self._profile(args[0])
        self._selector(profile)
        print("Group has been created with handle",
              self.client.bm_mt_act_prof_create_group(0, profile.name))

    @reports_errors
    def do_act_prof_delete_group(self, line):
        "Delete a group from an action profile: act_prof_delete_group <action profile name> <group handle>"
        args = line.split()
        self._n_args(args, 2)
        profile = self._profile(args[0])
        self._selector(profile)
        self.client.bm_mt_act_prof_delete_group(0, profile.name, _int(args[1], "group handle"))

    def _member_group(self, line, add):
        args = line.split()
        self._n_args(args, 3)
        profile = self._profile(args[0])
        self._selector(profile)
        member, group = _int(args[1], "member handle"), _int(args[2], "group handle")
        call = self.client.bm_mt_act_prof_add_member_to_group if add else \
            self.client.bm_mt_act_prof_remove_member_from_group
        call(0, profile.name, member, group)

    @reports_errors
    def do_act_prof_add_member_to_group(self, line):
        "Add member to group in an action profile: act_prof_add_member_to_group <action profile name> <member handle> <group handle>"
        self._member_group(line, True)

    @reports_errors
    def do_act_prof_remove_member_from_group(self, line):
        "Remove member from group in action profile: act_prof_remove_member_from_group <action profile name> <member handle> <group handle>"
        self._member_group(line, False)

    def _indirect_add(self, line, with_selector):
        args = line.split()
        self._min_args(args, 2)
        table = self._table(args[0])
        self._indirect(table, with_selector)
        priority = self._key_and_priority(table, args)
        rest = args[1:]
        split = rest.index("=>") if "=>" in rest else len(rest) - 1
        if len(rest) != split + 2:
            raise InputError("Invalid arguments, could not find handle")
        handle = _int(rest[split + 1], "handle")
        key = values.match_key(table, rest[:split])
        print("Adding entry to indirect match table", table.name)
        return table, key, handle, BmAddEntryOptions(priority=priority)

    @reports_errors
    def do_table_indirect_add(self, line):
        "Add entry to an indirect match table: table_indirect_add <table name> <match fields> => <member handle> [priority]"
        table, key, handle, options = self._indirect_add(line, False)
        print("Entry has been added with handle",
              self.client.bm_mt_indirect_add_entry(0, table.name, key, handle, options))

    @reports_errors
    def do_table_indirect_add_with_group(self, line):
        "Add entry to an indirect match table: table_indirect_add <table name> <match fields> => <group handle> [priority]"
        table, key, handle, options = self._indirect_add(line, True)
        print("Entry has been added with handle",
              self.client.bm_mt_indirect_ws_add_entry(0, table.name, key, handle, options))

    @reports_errors
    def do_table_indirect_delete(self, line):
        "Delete entry from an indirect match table: table_indirect_delete <table name> <entry handle>"
        args = line.split()
        self._n_args(args, 2)
        table = self._table(args[0])
        self._indirect(table)
        handle = _int(args[1], "entry handle")
        print("Deleting entry", handle, "from", args[0])
        self.client.bm_mt_indirect_delete_entry(0, table.name, handle)

    def _indirect_default(self, line, with_selector):
        args = line.split()
        self._n_args(args, 2)
        table = self._table(args[0])
        self._indirect(table, with_selector)
        return table, _int(args[1], "handle")

    @reports_errors
    def do_table_indirect_set_default(self, line):
        "Set default member for indirect match table: table_indirect_set_default <table name> <member handle>"
        table, handle = self._indirect_default(line, False)
        self.client.bm_mt_indirect_set_default_member(0, table.name, handle)

    @reports_errors
    def do_table_indirect_set_default_with_group(self, line):
        "Set default group for indirect match table: table_indirect_set_default <table name> <group handle>"
        table, handle = self._indirect_default(line, True)
        self.client.bm_mt_indirect_ws_set_default_group(0, table.name, handle)

    @reports_errors
    def do_table_indirect_reset_default(self, line):
        "Reset default entry for indirect match table: table_indirect_reset_default <table name>"
        args = line.split()
        self._n_args(args, 1)
        self.client.bm_mt_indirect_reset_default_entry(0, self._table(args[0]).name)

    def _legacy(self, line, substitute, with_selector=False, deprecated=True):
        """The table_indirect_* forms: the same command on the table's action profile."""
        args = line.split()
        self._min_args(args, 1)
        table = self._table(args[0])
        self._indirect(table, with_selector)
        if deprecated and table.profile.tables > 1:
            raise InputError("Legacy command does not work with shared action profiles")
        args[0] = table.profile.name
        if deprecated:      # on stderr: scripts parse stdout
            sys.stderr.write(f"This is a deprecated command, use '{substitute}' instead\n")
        return getattr(self, f"do_{substitute}")(" ".join(args))

    @reports_errors
    def do_table_indirect_create_member(self, line):
        "[DEPRECATED!] Add a member to an indirect match table; use 'act_prof_create_member'"
        return self._legacy(line, "act_prof_create_member")

    @reports_errors
    def do_table_indirect_delete_member(self, line):
        "[DEPRECATED!] Delete a member of an indirect match table; use 'act_prof_delete_member'"
        return self._legacy(line, "act_prof_delete_member")

    @reports_errors
    def do_table_indirect_modify_member(self, line):
        "[DEPRECATED!] Modify a member of an indirect match table; use 'act_prof_modify_member'"
        return self._legacy(line, "act_prof_modify_member")

    @reports_errors
    def do_table_indirect_create_group(self, line):
        "[DEPRECATED!] Add a group to an indirect match table; use 'act_prof_create_group'"
        return self._legacy(line, "act_prof_create_group", True)

    @reports_errors
    def do_table_indirect_delete_group(self, line):
        "[DEPRECATED!] Delete a group; use 'act_prof_delete_group'"
        return self._legacy(line, "act_prof_delete_group", True)

    @reports_errors
    def do_table_indirect_add_member_to_group(self, line):
        "[DEPRECATED!] Add member to group; use 'act_prof_add_member_to_group'"
        return self._legacy(line, "act_prof_add_member_to_group", True)

    @reports_errors
    def do_table_indirect_remove_member_from_group(self, line):
        "[DEPRECATED!] Remove member from group; use 'act_prof_remove_member_from_group'"
        return self._legacy(line, "act_prof_remove_member_from_group", True)

    @reports_errors
    def do_table_dump_member(self, line):
        "Display some information about a member: table_dump_member <table name> <member handle>"
        return self._legacy(line, "act_prof_dump_member", deprecated=False)

    @reports_errors
    def do_table_dump_group(self, line):
        "Display some information about a group: table_dump_group <table name> <group handle>"
        return self._legacy(line, "act_prof_dump_group", deprecated=False)

    # --- dumps -----------------------------------------------------------------------------
    @staticmethod
    def _print_action_entry(entry):
        if entry.action_type == BmActionEntryType.ACTION_DATA:
            print(f"Action entry: {entry.action_name} - "
                  + ", ".join(values.hexstr(d) for d in entry.action_data or []))
        elif entry.action_type == BmActionEntryType.MBR_HANDLE:
            print(f"Index: member({entry.mbr_handle})")
        elif entry.action_type == BmActionEntryType.GRP_HANDLE:
            print(f"Index: group({entry.grp_handle})")
        else:
            print("EMPTY")

    @staticmethod
    def _print_member(member):
        print(f"Dumping member {member.mbr_handle}")
        print(f"Action entry: {member.action_name} - "
              + ", ".join(values.hexstr(d) for d in member.action_data or []))

    @staticmethod
    def _print_group(group):
        print(f"Dumping group {group.grp_handle}")
        print(f"Members: [{', '.join(str(h) for h in group.mbr_handles or [])}]")

    def _print_entry(self, table, entry):
        width = max([20] + [len(k[0]) for k in table.key])
        print(f"Dumping entry {hex(entry.entry_handle)}")
        print("Match key:")
        for p, (name, _, _) in zip(entry.match_key, table.key, strict=False):
            kind = standard.BmMatchParamType._VALUES_TO_NAMES[p.type]
            print(f"* {name:{width}}: {kind:10}{_dump_param(p)}")
        if entry.options is not None and (entry.options.priority or 0) >= 0 and \
                entry.options.priority is not None:
            print(f"Priority: {entry.options.priority}")
        self._print_action_entry(entry.action_entry)
        if entry.life is not None:
            print(f"Life: {entry.life.time_since_hit_ms}ms since hit, timeout is "
                  f"{entry.life.timeout_ms}ms")

    def _dump_profile(self, profile):
        print("==========")
        print("MEMBERS")
        for m in self.client.bm_mt_act_prof_get_members(0, profile.name):
            print("**********")
            self._print_member(m)
        if profile.with_selection:
            print("==========")
            print("GROUPS")
            for g in self.client.bm_mt_act_prof_get_groups(0, profile.name):
                print("**********")
                self._print_group(g)

    @reports_errors
    def do_table_dump(self, line):
        "Display entries in a match-table: table_dump <table name>"
        args = line.split()
        self._n_args(args, 1)
        table = self._table(args[0])
        entries = self.client.bm_mt_get_entries(0, table.name)
        print("==========")
        print("TABLE ENTRIES")
        for e in entries:
            print("**********")
            self._print_entry(table, e)
        if table.profile is not None:
            self._dump_profile(table.profile)
        default = self.client.bm_mt_get_default_entry(0, table.name)
        print("==========")
        print("Dumping default entry")
        self._print_action_entry(default)
        print("==========")

    @reports_errors
    def do_table_dump_entry(self, line):
        "Display some information about a table entry: table_dump_entry <table name> <entry handle>"
        args = line.split()
        self._n_args(args, 2)
        table = self._table(args[0])
        entry = self.client.bm_mt_get_entry(0, table.name, _int(args[1], "entry handle"))
        self._print_entry(table, entry)

    @reports_errors
    def do_table_dump_entry_from_key(self, line):
        "Display some information about a table entry: table_dump_entry_from_key <table name> <match fields> [priority]"
        args = line.split()
        self._min_args(args, 1)
        table = self._table(args[0])
        priority = self._key_and_priority(table, args)
        if len(args) - 1 != len(table.key):
            raise InputError(f"Table {args[0]} needs {len(table.key)} key fields")
        key = values.match_key(table, args[1:])
        entry = self.client.bm_mt_get_entry_from_key(0, table.name, key,
                                                     BmAddEntryOptions(priority=priority))
        self._print_entry(table, entry)

    @reports_errors
    def do_act_prof_dump(self, line):
        "Display entries in an action profile: act_prof_dump <action profile name>"
        args = line.split()
        self._n_args(args, 1)
        self._dump_profile(self._profile(args[0]))

    @reports_errors
    def do_act_prof_dump_member(self, line):
        "Display some information about a member: act_prof_dump_member <action profile name> <member handle>"
        args = line.split()
        self._n_args(args, 2)
        profile = self._profile(args[0])
        self._print_member(self.client.bm_mt_act_prof_get_member(
            0, profile.name, _int(args[1], "member handle")))

    @reports_errors
    def do_act_prof_dump_group(self, line):
        "Display some information about a group: table_dump_group <action profile name> <group handle>"
        args = line.split()
        self._n_args(args, 2)
        profile = self._profile(args[0])
        self._print_group(self.client.bm_mt_act_prof_get_group(
            0, profile.name, _int(args[1], "group handle")))

    # --- counters, meters, registers -------------------------------------------------------
    @reports_errors
    def do_counter_read(self, line):
        "Read counter value: counter_read <name> <index>"
        args = line.split()
        self._n_args(args, 2)
        counter = self._get("counter", "counter", args[0])
        index = _int(args[1], "index")
        if counter.is_direct:
            print("this is the direct counter for table", counter.binding)
            value = self.client.bm_mt_read_counter(0, counter.binding, index)
        else:
            value = self.client.bm_counter_read(0, counter.name, index)
        print(f"{args[0]}[{index}]= ({value.bytes} bytes, {value.packets} packets)")

    @reports_errors
    def do_counter_write(self, line):
        "Write counter value: counter_write <name> <index> <packets> <bytes>"
        args = line.split()
        self._n_args(args, 4)
        counter = self._get("counter", "counter", args[0])
        index = _int(args[1], "index")
        value = BmCounterValue(packets=_int(args[2], "packets"), bytes=_int(args[3], "bytes"))
        if counter.is_direct:
            print("writing to direct counter for table", counter.binding)
            self.client.bm_mt_write_counter(0, counter.binding, index, value)
        else:
            self.client.bm_counter_write(0, counter.name, index, value)
        print(f"{args[0]}[{index}] has been updated")

    @reports_errors
    def do_counter_reset(self, line):
        "Reset counter: counter_reset <name>"
        args = line.split()
        self._n_args(args, 1)
        counter = self._get("counter", "counter", args[0])
        if counter.is_direct:
            print("this is the direct counter for table", counter.binding)
            self.client.bm_mt_reset_counters(0, counter.binding)
        else:
            self.client.bm_counter_reset_all(0, counter.name)

    def _rates(self, meter, texts):
        if len(texts) != meter.rate_count:
            raise InputError(f"Invalid number of rates, expected {meter.rate_count} but got "
                             f"{len(texts)}")
        rates = []
        for text in texts:
            try:
                rate, burst = text.split(":")
                rates.append(standard.BmMeterRateConfig(float(rate), int(burst)))
            except ValueError:
                raise InputError("Error while parsing rates") from None
        return rates

    @reports_errors
    def do_meter_array_set_rates(self, line):
        "Configure rates for an entire meter array: meter_array_set_rates <name> <rate_1>:<burst_1> <rate_2>:<burst_2> ..."
        args = line.split()
        self._min_args(args, 1)
        meter = self._get("meter", "meter", args[0])
        self.client.bm_meter_array_set_rates(0, meter.name, self._rates(meter, args[1:]))

    @reports_errors
    def do_meter_set_rates(self, line):
        "Configure rates for a meter: meter_set_rates <name> <index> <rate_1>:<burst_1> <rate_2>:<burst_2> ...\nRate uses units/microsecond and burst uses units where units is bytes or packets"
        args = line.split()
        self._min_args(args, 2)
        meter = self._get("meter", "meter", args[0])
        index = _int(args[1], "index")
        rates = self._rates(meter, args[2:])
        if meter.is_direct:
            self.client.bm_mt_set_meter_rates(0, meter.binding, index, rates)
        else:
            self.client.bm_meter_set_rates(0, meter.name, index, rates)

    @reports_errors
    def do_meter_get_rates(self, line):
        "Retrieve rates for a meter: meter_get_rates <name> <index>"
        args = line.split()
        self._n_args(args, 2)
        meter = self._get("meter", "meter", args[0])
        index = _int(args[1], "index")
        if meter.is_direct:
            rates = self.client.bm_mt_get_meter_rates(0, meter.binding, index)
        else:
            rates = self.client.bm_meter_get_rates(0, meter.name, index)
        if len(rates) != meter.rate_count:
            print("WARNING: expected", meter.rate_count, "rates but only received", len(rates))
        for i, rate in enumerate(rates):
            print(f"{i}: info rate = {rate.units_per_micros}, burst size = {rate.burst_size}")

    @reports_errors
    def do_register_read(self, line):
        "Read register value: register_read <name> [index]"
        args = line.split()
        self._min_args(args, 1)
        register = self._get("register", "register", args[0])
        if len(args) > 1:
            self._n_args(args, 2)
            index = _int(args[1], "index")
            print(f"{args[0]}[{index}]=", self.client.bm_register_read(0, register.name, index))
        else:
            sys.stderr.write("register index omitted, reading entire array\n")
            cells = self.client.bm_register_read_all(0, register.name)
            print(f"{args[0]}=", ", ".join(str(c) for c in cells))

    @reports_errors
    def do_register_write(self, line):
        "Write register value: register_write <name> <index> <value>"
        args = line.split()
        self._n_args(args, 3)
        register = self._get("register", "register", args[0])
        index = _int(args[1], "index")
        try:
            value = int(args[2])
        except ValueError:
            raise InputError("Bad format for value, must be an integer") from None
        self.client.bm_register_write(0, register.name, index, value)

    @reports_errors
    def do_register_reset(self, line):
        "Reset all the cells in the register array to 0: register_reset <name>"
        args = line.split()
        self._n_args(args, 1)
        self.client.bm_register_reset(0, self._get("register", "register", args[0]).name)

    # --- parser value sets -----------------------------------------------------------------
    def _vset(self, name):
        found = self.program.find("value_set", name)
        if found is None:
            raise InputError(f"Invalid parser value set name ({name})")
        return found, self.program.value_sets[found]

    def _vset_value(self, text, width):
        try:
            value = int(text, 0)
        except ValueError:
            raise InputError("Invalid input, could not cast to integer, try in hex with 0x "
                             "prefix") from None
        if value < 0 or value >> width:
            raise InputError(f"Input is too large, it should fit within {width} bits")
        return value.to_bytes((width + 7) // 8, "big")

    @reports_errors
    def do_show_pvs(self, line):
        "List parser value sets defined in the P4 program: show_pvs"
        self._n_args(line.split(), 0)
        for name in sorted(self.program.value_sets):
            print(f"{name:30} [compressed bitwidth:{self.program.value_sets[name]}]")

    @reports_errors
    def do_pvs_add(self, line):
        "Add a value to a parser value set: pvs_add <pvs_name> <value>"
        args = line.split()
        self._n_args(args, 2)
        name, width = self._vset(args[0])
        self.client.bm_parse_vset_add(0, name, self._vset_value(args[1], width))

    @reports_errors
    def do_pvs_remove(self, line):
        "Remove a value from a parser value set: pvs_remove <pvs_name> <value>"
        args = line.split()
        self._n_args(args, 2)
        name, width = self._vset(args[0])
        self.client.bm_parse_vset_remove(0, name, self._vset_value(args[1], width))

    @reports_errors
    def do_pvs_get(self, line):
        "Print all values from a parser value set: pvs_get <pvs_name>"
        args = line.split()
        self._n_args(args, 1)
        for v in self.client.bm_parse_vset_get(0, self._vset(args[0])[0]):
            print(values.hexstr(v))

    @reports_errors
    def do_pvs_clear(self, line):
        "Remove all values from a parser value set: pvs_clear <pvs_name>"
        args = line.split()
        self._n_args(args, 1)
        self.client.bm_parse_vset_clear(0, self._vset(args[0])[0])

    # --- multicast -------------------------------------------------------------------------
    def _node_maps(self, args):
        ports, lags = args, []
        if "|" in args:
            at = args.index("|")
            ports, lags = args[:at], args[at + 1:]
        port_map = values.port_map(ports)
        lag_map = values.port_map(lags, "lag") if self.lag else None
        return port_map, lag_map

    @reports_errors
    def do_mc_mgrp_create(self, line):
        "Create multicast group: mc_mgrp_create <group id>"
        args = line.split()
        self._n_args(args, 1)
        mgrp = _int(args[0], "multicast group id")
        print("Creating multicast group", mgrp)
        self.mc.bm_mc_mgrp_create(0, mgrp)

    @reports_errors
    def do_mc_mgrp_destroy(self, line):
        "Destroy multicast group: mc_mgrp_destroy <group id>"
        args = line.split()
        self._n_args(args, 1)
        mgrp = _int(args[0], "multicast group id")
        print("Destroying multicast group", mgrp)
        self.mc.bm_mc_mgrp_destroy(0, mgrp)

    @reports_errors
    def do_mc_node_create(self, line):
        "Create multicast node: mc_node_create <rid> <space-separated port list> [ | <space-separated lag list> ]"
        args = line.split()
        self._min_args(args, 1)
        rid = _int(args[0], "rid")
        port_map, lag_map = self._node_maps(args[1:])
        if self.lag:
            print("Creating node with rid", rid, ", port map", port_map, "and lag map", lag_map)
            handle = self.mc.bm_mc_node_create(0, rid, port_map, lag_map)
        else:
            print("Creating node with rid", rid, "and with port map", port_map)
            handle = self.mc.bm_mc_node_create(0, rid, port_map)
        print("node was created with handle", handle)

    @reports_errors
    def do_mc_node_update(self, line):
        "Update multicast node: mc_node_update <node handle> <space-separated port list> [ | <space-separated lag list> ]"
        args = line.split()
        self._min_args(args, 2)
        handle = _int(args[0], "node handle")
        port_map, lag_map = self._node_maps(args[1:])
        if self.lag:
            print("Updating node", handle, "with port map", port_map, "and lag map", lag_map)
            self.mc.bm_mc_node_update(0, handle, port_map, lag_map)
        else:
            print("Updating node", handle, "with port map", port_map)
            self.mc.bm_mc_node_update(0, handle, port_map)

    @reports_errors
    def do_mc_node_associate(self, line):
        "Associate node to multicast group: mc_node_associate <group handle> <node handle>"
        args = line.split()
        self._n_args(args, 2)
        mgrp, node = _int(args[0], "multicast group id"), _int(args[1], "node handle")
        print("Associating node", node, "to multicast group", mgrp)
        self.mc.bm_mc_node_associate(0, mgrp, node)

    @reports_errors
    def do_mc_node_dissociate(self, line):
        "Dissociate node from multicast group: mc_node_associate <group handle> <node handle>"
        args = line.split()
        self._n_args(args, 2)
        mgrp, node = _int(args[0], "multicast group id"), _int(args[1], "node handle")
        print("Dissociating node", node, "from multicast group", mgrp)
        self.mc.bm_mc_node_dissociate(0, mgrp, node)

    @reports_errors
    def do_mc_node_destroy(self, line):
        "Destroy multicast node: mc_node_destroy <node handle>"
        args = line.split()
        self._n_args(args, 1)
        node = _int(args[0], "node handle")
        print("Destroying node", node)
        self.mc.bm_mc_node_destroy(0, node)

    @reports_errors
    def do_mc_set_lag_membership(self, line):
        "Set lag membership of port list: mc_set_lag_membership <lag index> <space-separated port list>"
        if not self.lag:
            raise InputError("Cannot execute this command with this type of PRE, SimplePreLAG "
                             "is required")
        args = line.split()
        self._min_args(args, 2)
        lag = _int(args[0], "lag index")
        port_map = values.port_map(args[1:], "lag")
        print("Setting lag membership:", lag, "<-", port_map)
        self.mc.bm_mc_set_lag_membership(0, lag, port_map)

    @reports_errors
    def do_mc_dump(self, line):
        "Dump entries in multicast engine"
        try:
            dump = json.loads(self.mc.bm_mc_get_entries(0))
        except ValueError:
            print("Exception when retrieving MC entries")
            return
        nodes = {h["handle"]: (h["rid"], h["l2_handle"]) for h in dump["l1_handles"]}
        sets = {h["handle"]: (h["ports"], h["lags"]) for h in dump["l2_handles"]}
        print("==========")
        print("MC ENTRIES")
        for group in dump["mgrps"]:
            print("**********")
            print(f"mgrp({group['id']})")
            for handle in group["l1_handles"]:
                rid, l2 = nodes[handle]
                ports, lags = sets[l2]
                print(f"  -> (L1h={handle}, rid={rid}) -> (ports=[{_join(ports)}], "
                      f"lags=[{_join(lags)}])")
        print("==========")
        print("LAGS")
        if "lags" in dump:
            for lag in dump["lags"]:
                print(f"lag({lag['id']}) -> ports=[{_join(lag['ports'])}]")
        else:
            print("None for this PRE type")
        print("==========")

    # --- simple_switch: mirroring, queues, clock -------------------------------------------
    def _mirror(self, line, what):
        args = line.split()
        self._n_args(args, 2)
        return _int(args[0], "mirror_id"), _int(args[1], what)

    @reports_errors
    def do_mirroring_add(self, line):
        "Add mirroring session to unicast port: mirroring_add <mirror_id> <egress_port>"
        mirror, port = self._mirror(line, "egress_port")
        self.sswitch.mirroring_session_add(mirror, simple_switch.MirroringSessionConfig(
            port=port))

    @reports_errors
    def do_mirroring_add_mc(self, line):
        "Add mirroring session to multicast group: mirroring_add_mc <mirror_id> <mgrp>"
        mirror, mgrp = self._mirror(line, "mgrp")
        self.sswitch.mirroring_session_add(mirror, simple_switch.MirroringSessionConfig(
            mgid=mgrp))

    @reports_errors
    def do_mirroring_delete(self, line):
        "Delete mirroring session: mirroring_delete <mirror_id>"
        args = line.split()
        self._n_args(args, 1)
        self.sswitch.mirroring_session_delete(_int(args[0], "mirror_id"))

    @reports_errors
    def do_mirroring_get(self, line):
        "Display mirroring session: mirroring_get <mirror_id>"
        args = line.split()
        self._n_args(args, 1)
        print(self.sswitch.mirroring_session_get(_int(args[0], "mirror_id")))

    def _queue(self, line, what, all_, one, prio):
        args = line.split()
        self._min_args(args, 1)
        amount = _int(args[0], what)
        if len(args) > 2:
            prio(_int(args[1], "egress_port"), _int(args[2], "priority"), amount)
        elif len(args) == 2:
            one(_int(args[1], "egress_port"), amount)
        else:
            all_(amount)

    @reports_errors
    def do_set_queue_depth(self, line):
        "Set depth of one / all egress queue(s): set_queue_depth <nb_pkts> [<egress_port> [<priority>]]"
        s = self.sswitch
        self._queue(line, "nb_pkts", s.set_all_egress_queue_depths, s.set_egress_queue_depth,
                    s.set_egress_priority_queue_depth)

    @reports_errors
    def do_set_queue_rate(self, line):
        "Set rate of one / all egress queue(s): set_queue_rate <rate_pps> [<egress_port> [<priority>]]"
        s = self.sswitch
        self._queue(line, "rate_pps", s.set_all_egress_queue_rates, s.set_egress_queue_rate,
                    s.set_egress_priority_queue_rate)

    @reports_errors
    def do_get_time_elapsed(self, line):
        "Get time elapsed (in microseconds) since the switch started: get_time_elapsed"
        print(self.sswitch.get_time_elapsed_us())

    @reports_errors
    def do_get_time_since_epoch(self, line):
        "Get time elapsed (in microseconds) since the switch clock's epoch: get_time_since_epoch"
        print(self.sswitch.get_time_since_epoch_us())


def _join(items) -> str:
    return ", ".join(str(i) for i in items)


def _param_str(p) -> str:
    """A match parameter as the table_add echo shows it: KIND-bytes."""
    kind = standard.BmMatchParamType._VALUES_TO_NAMES[p.type]
    if p.exact is not None:
        body = values.colon_hex(p.exact.key)
    elif p.lpm is not None:
        body = f"{values.colon_hex(p.lpm.key)}/{p.lpm.prefix_length}"
    elif p.ternary is not None:
        body = f"{values.colon_hex(p.ternary.key)} &&& {values.colon_hex(p.ternary.mask)}"
    elif p.range is not None:
        body = f"{values.colon_hex(p.range.start)} -> {values.colon_hex(p.range.end_)}"
    else:
        body = ""
    return f"{kind}-{body}"


def _dump_param(p) -> str:
    if p.exact is not None:
        return values.hexstr(p.exact.key)
    if p.lpm is not None:
        return f"{values.hexstr(p.lpm.key)}/{p.lpm.prefix_length}"
    if p.ternary is not None:
        return f"{values.hexstr(p.ternary.key)} &&& {values.hexstr(p.ternary.mask)}"
    if p.range is not None:
        return f"{values.hexstr(p.range.start)} -> {values.hexstr(p.range.end_)}"
    if p.valid is not None:
        return "01" if p.valid.key else "00"
    return ""
