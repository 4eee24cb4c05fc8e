"""The runtime CLI's command language (simple_switch_CLI's): one `do_<command>` per command,
its arguments declared in a row of kinds (`syntax.command`), printing what BMv2's CLI prints
so that scripts reading its output keep working. A bad argument or a refused operation
prints one error line and the CLI goes on with the next command."""
from __future__ import annotations

import cmd
import json
import sys

from ..thrift import simple_switch, standard
from ..thrift.standard import BmAddEntryOptions, BmCounterValue
from . import dumps, values
from .syntax import (
    COUNTER,
    INDEX,
    METER,
    PROFILE,
    REGISTER,
    TABLE,
    VALUE_SET,
    WORD,
    checked,
    command,
    integer,
    to_int,
)
from .values import InputError


def _indirect(table, with_selector=False):
    if with_selector and table.kind != "indirect_ws":
        raise InputError("Cannot run this command on non-indirect table, or on indirect "
                         "table with no selector")
    if table.kind not in ("indirect", "indirect_ws"):
        raise InputError("Cannot run this command on non-indirect table")


def _selector(profile):
    if not profile.with_selection:
        raise InputError("Cannot run this command on an action profile without selector")


ENTRY, MEMBER, GROUP = integer("entry handle"), integer("member handle"), integer("group handle")
MGRP, NODE = integer("multicast group id"), integer("node handle")
MIRROR = integer("mirror_id")
INDIRECT, INDIRECT_WS = checked(TABLE, _indirect), checked(TABLE, lambda t: _indirect(t, True))
SELECTOR = checked(PROFILE, _selector)


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

    # --- checks shared by commands ---------------------------------------------------------
    def _table_action(self, typed_table, table, name):
        action = self.program.find("action", name)
        if action is None or action.name not in table.actions:
            raise InputError(f"Table {typed_table} has no action {name}")
        return action

    def _profile_action(self, profile, name):
        action = self.program.find("action", name)
        if action is None or action.name not in profile.actions:
            raise InputError(f"Action profile '{profile.name}' has no action '{name}'")
        return action

    @staticmethod
    def _data(action, args, shown=None):
        if len(args) != len(action.params):
            raise InputError(f"Action {shown or action.name} needs {len(action.params)} "
                             "parameters")
        return values.action_data(action, args)

    @staticmethod
    def _priority(table, args):
        """Pops the trailing priority of a ternary/range table's entry."""
        if not table.needs_priority:
            return 0
        try:
            return int(args.pop(-1))
        except (ValueError, IndexError):
            raise InputError("Table is ternary, but could not extract a valid priority "
                             "from args") from None

    @staticmethod
    def _key(table, typed, args):
        if len(args) != len(table.key):
            raise InputError(f"Table {typed} needs {len(table.key)} key fields")
        return values.match_key(table, args)

    # --- program ---------------------------------------------------------------------------
    @command()
    def do_show_tables(self, words):
        "List tables defined in the P4 program: show_tables"
        for name in sorted(self.program.tables):
            print(self.program.tables[name].describe())

    @command()
    def do_show_actions(self, words):
        "List actions defined in the P4 program: show_actions"
        for name in sorted(self.program.actions):
            print(self.program.actions[name].describe())

    @command(TABLE)
    def do_table_show_actions(self, words, table):
        "List one table's actions as per the P4 program: table_show_actions <table_name>"
        for name in sorted(table.actions):
            print(self.program.actions[name].describe())

    @command(TABLE)
    def do_table_info(self, words, table):
        "Show info about a table: table_info <table_name>"
        print(table.describe())
        print("*" * 80)
        for name in sorted(table.actions):
            print(self.program.actions[name].describe())

    @command()
    def do_switch_info(self, words):
        "Show some basic info about the switch: switch_info"
        info = self.client.bm_mgmt_get_info()
        names = [f[1] for f in info.fields]
        width = 5 + max(len(n) for n in names)
        for n in names:
            print(f"{n:{width}}: {getattr(info, n)}")

    @command()
    def do_reset_state(self, words):
        "Reset all state in the switch (table entries, registers, ...), but P4 config is preserved: reset_state"
        self.client.bm_reset_state()

    @command(WORD)
    def do_write_config_to_file(self, words, path):
        "Retrieves the JSON config currently used by the switch and dumps it to user-specified file"
        with open(path, "w") as f:
            f.write(self.client.bm_get_config())

    @command()
    def do_show_ports(self, words):
        "Shows the ports connected to the switch: show_ports"
        print(f"{'port #':^10}{'iface name':^20}{'status':^10}extra info")
        print("=" * 50)
        for p in self.client.bm_dev_mgr_show_ports():
            extra = "; ".join(f"{k}={v}" for k, v in (p.extra or {}).items())
            print(f"{p.port_num:^10}{p.iface_name:^20}{'UP' if p.is_up else 'DOWN':^10}{extra}")

    # --- match tables ----------------------------------------------------------------------
    @command(TABLE)
    def do_table_num_entries(self, words, table):
        "Return the number of entries in a match table (direct or indirect): table_num_entries <table name>"
        print(self.client.bm_mt_get_num_entries(0, table.name))

    @command(TABLE)
    def do_table_clear(self, words, table):
        "Clear all entries in a match table (direct or indirect), but not the default entry: table_clear <table name>"
        self.client.bm_mt_clear_entries(0, table.name, False)

    @command(TABLE, WORD, rest=True)
    def do_table_set_default(self, words, table, action_name, params):
        "Set default action for a match table: table_set_default <table name> <action name> <action parameters>"
        action = self._table_action(words[0], table, action_name)
        data = self._data(action, params, shown=action_name)
        print("Setting default action of", words[0])
        print(f"{'action:':20} {action_name}")
        print(f"{'runtime data:':20} " + "\t".join(values.colon_hex(d) for d in data))
        self.client.bm_mt_set_default_action(0, table.name, action.name, data)

    @command(TABLE)
    def do_table_reset_default(self, words, table):
        "Reset default entry for a match table: table_reset_default <table name>"
        self.client.bm_mt_reset_default_entry(0, table.name)

    @command(TABLE, WORD, rest=True, minimum=3)
    def do_table_add(self, words, table, action_name, rest):
        "Add entry to a match table: table_add <table name> <action name> <match fields> => <action parameters> [priority]"
        action = self._table_action(words[0], table, action_name)
        priority = self._priority(table, rest)
        split = rest.index("=>") if "=>" in rest else len(rest) - 1
        if split != len(table.key):
            raise InputError(f"Table {words[0]} needs {len(table.key)} key fields")
        data = self._data(action, rest[split + 1:])
        key = values.match_key(table, rest[:split])
        print("Adding entry to", table.match_type, "match table", words[0])
        print(f"{'match key:':20} " + "\t".join(dumps.param_str(p) for p in key))
        print(f"{'action:':20} {action_name}")
        print(f"{'runtime data:':20} " + "\t".join(values.colon_hex(d) for d in data))
        handle = self.client.bm_mt_add_entry(0, table.name, key, action.name, data,
                                             BmAddEntryOptions(priority=priority))
        print("Entry has been added with handle", handle)

    @command(TABLE, WORD, WORD)
    def do_table_set_timeout(self, words, table, handle, timeout):
        "Set a timeout in ms for a given entry; the table has to support timeouts: table_set_timeout <table_name> <entry handle> <timeout (ms)>"
        if not table.support_timeout:
            raise InputError(f"Table {words[0]} does not support entry timeouts")
        handle, timeout = to_int(handle, "entry handle"), to_int(timeout, "timeout")
        print("Setting a", timeout, "ms timeout for entry", handle)
        self.client.bm_mt_set_entry_ttl(0, table.name, handle, timeout)

    @command(TABLE, WORD, WORD, rest=True)
    def do_table_modify(self, words, table, action_name, handle, params):
        "Add entry to a match table: table_modify <table name> <action name> <entry handle> [action parameters]"
        action = self._table_action(words[0], table, action_name)
        handle = to_int(handle, "entry handle")
        data = self._data(action, _after_arrow(params))
        print("Modifying entry", handle, "for", table.match_type, "match table", words[0])
        self.client.bm_mt_modify_entry(0, table.name, handle, action.name, data)

    @command(TABLE, ENTRY)
    def do_table_delete(self, words, table, handle):
        "Delete entry from a match table: table_delete <table name> <entry handle>"
        print("Deleting entry", handle, "from", words[0])
        self.client.bm_mt_delete_entry(0, table.name, handle)

    # --- action profiles -------------------------------------------------------------------
    @command(PROFILE, WORD, rest=True)
    def do_act_prof_create_member(self, words, profile, action_name, params):
        "Add a member to an action profile: act_prof_create_member <action profile name> <action_name> [action parameters]"
        action = self._profile_action(profile, action_name)
        data = self._data(action, params)
        handle = self.client.bm_mt_act_prof_add_member(0, profile.name, action.name, data)
        print("Member has been created with handle", handle)

    @command(PROFILE, MEMBER)
    def do_act_prof_delete_member(self, words, profile, handle):
        "Delete a member in an action profile: act_prof_delete_member <action profile name> <member handle>"
        self.client.bm_mt_act_prof_delete_member(0, profile.name, handle)

    @command(PROFILE, WORD, WORD, rest=True)
    def do_act_prof_modify_member(self, words, profile, action_name, handle, params):
        "Modify member in an action profile: act_prof_modify_member <action profile name> <action_name> <member_handle> [action parameters]"
        action = self._profile_action(profile, action_name)
        handle = to_int(handle, "member handle")
        self.client.bm_mt_act_prof_modify_member(0, profile.name, handle, action.name,
                                                 self._data(action, _after_arrow(params)))

    @command(SELECTOR)
    def do_act_prof_create_group(self, words, profile):
        "Add a group to an action pofile: act_prof_create_group <action profile name>"
        print("Group has been created with handle",
              self.client.bm_mt_act_prof_create_group(0, profile.name))

    @command(SELECTOR, GROUP)
    def do_act_prof_delete_group(self, words, profile, handle):
        "Delete a group from an action profile: act_prof_delete_group <action profile name> <group handle>"
        self.client.bm_mt_act_prof_delete_group(0, profile.name, handle)

    @command(SELECTOR, MEMBER, GROUP)
    def do_act_prof_add_member_to_group(self, words, profile, member, group):
        "Add member to group in an action profile: act_prof_add_member_to_group <action profile name> <member handle> <group handle>"
        self.client.bm_mt_act_prof_add_member_to_group(0, profile.name, member, group)

    @command(SELECTOR, MEMBER, GROUP)
    def do_act_prof_remove_member_from_group(self, words, profile, member, group):
        "Remove member from group in action profile: act_prof_remove_member_from_group <action profile name> <member handle> <group handle>"
        self.client.bm_mt_act_prof_remove_member_from_group(0, profile.name, member, group)

    @command(PROFILE)
    def do_act_prof_dump(self, words, profile):
        "Display entries in an action profile: act_prof_dump <action profile name>"
        dumps.print_profile(self.client, profile)

    @command(PROFILE, MEMBER)
    def do_act_prof_dump_member(self, words, profile, handle):
        "Display some information about a member: act_prof_dump_member <action profile name> <member handle>"
        dumps.print_member(self.client.bm_mt_act_prof_get_member(0, profile.name, handle))

    @command(PROFILE, GROUP)
    def do_act_prof_dump_group(self, words, profile, handle):
        "Display some information about a group: table_dump_group <action profile name> <group handle>"
        dumps.print_group(self.client.bm_mt_act_prof_get_group(0, profile.name, handle))

    # --- indirect tables -------------------------------------------------------------------
    def _indirect_add(self, table, rest):
        priority = self._priority(table, rest)
        split = rest.index("=>") if "=>" in rest else len(rest) - 1
        if len(rest) != split + 2:
            raise InputError("Invalid arguments, could not find handle")
        handle = to_int(rest[split + 1], "handle")
        key = values.match_key(table, rest[:split])
        print("Adding entry to indirect match table", table.name)
        return key, handle, BmAddEntryOptions(priority=priority)

    @command(INDIRECT, rest=True, minimum=2)
    def do_table_indirect_add(self, words, table, rest):
        "Add entry to an indirect match table: table_indirect_add <table name> <match fields> => <member handle> [priority]"
        key, handle, options = self._indirect_add(table, rest)
        print("Entry has been added with handle",
              self.client.bm_mt_indirect_add_entry(0, table.name, key, handle, options))

    @command(INDIRECT_WS, rest=True, minimum=2)
    def do_table_indirect_add_with_group(self, words, table, rest):
        "Add entry to an indirect match table: table_indirect_add <table name> <match fields> => <group handle> [priority]"
        key, handle, options = self._indirect_add(table, rest)
        print("Entry has been added with handle",
              self.client.bm_mt_indirect_ws_add_entry(0, table.name, key, handle, options))

    @command(INDIRECT, ENTRY)
    def do_table_indirect_delete(self, words, table, handle):
        "Delete entry from an indirect match table: table_indirect_delete <table name> <entry handle>"
        print("Deleting entry", handle, "from", words[0])
        self.client.bm_mt_indirect_delete_entry(0, table.name, handle)

    @command(INDIRECT, integer("handle"))
    def do_table_indirect_set_default(self, words, table, handle):
        "Set default member for indirect match table: table_indirect_set_default <table name> <member handle>"
        self.client.bm_mt_indirect_set_default_member(0, table.name, handle)

    @command(INDIRECT_WS, integer("handle"))
    def do_table_indirect_set_default_with_group(self, words, table, handle):
        "Set default group for indirect match table: table_indirect_set_default <table name> <group handle>"
        self.client.bm_mt_indirect_ws_set_default_group(0, table.name, handle)

    @command(TABLE)
    def do_table_indirect_reset_default(self, words, table):
        "Reset default entry for indirect match table: table_indirect_reset_default <table name>"
        self.client.bm_mt_indirect_reset_default_entry(0, table.name)

    # --- dumps -----------------------------------------------------------------------------
    @command(TABLE)
    def do_table_dump(self, words, table):
        "Display entries in a match-table: table_dump <table name>"
        entries = self.client.bm_mt_get_entries(0, table.name)
        print("==========")
        print("TABLE ENTRIES")
        for e in entries:
            print("**********")
            dumps.print_entry(table, e)
        if table.profile is not None:
            dumps.print_profile(self.client, table.profile)
        default = self.client.bm_mt_get_default_entry(0, table.name)
        print("==========")
        print("Dumping default entry")
        dumps.print_action_entry(default)
        print("==========")

    @command(TABLE, ENTRY)
    def do_table_dump_entry(self, words, table, handle):
        "Display some information about a table entry: table_dump_entry <table name> <entry handle>"
        dumps.print_entry(table, self.client.bm_mt_get_entry(0, table.name, handle))

    @command(TABLE, rest=True)
    def do_table_dump_entry_from_key(self, words, table, rest):
        "Display some information about a table entry: table_dump_entry_from_key <table name> <match fields> [priority]"
        priority = self._priority(table, rest)
        key = self._key(table, words[0], rest)
        entry = self.client.bm_mt_get_entry_from_key(0, table.name, key,
                                                     BmAddEntryOptions(priority=priority))
        dumps.print_entry(table, entry)

    # --- counters, meters, registers -------------------------------------------------------
    @command(COUNTER, INDEX)
    def do_counter_read(self, words, counter, index):
        "Read counter value: counter_read <name> <index>"
        if counter.is_direct:
            print("this is the direct counter for table", counter.binding)
            value = self.client.bm_mt_read_counter(0, counter.binding, index)
        else:
            value = self.client.bm_counter_read(0, counter.name, index)
        print(f"{words[0]}[{index}]= ({value.bytes} bytes, {value.packets} packets)")

    @command(COUNTER, INDEX, integer("packets"), integer("bytes"))
    def do_counter_write(self, words, counter, index, packets, nbytes):
        "Write counter value: counter_write <name> <index> <packets> <bytes>"
        value = BmCounterValue(packets=packets, bytes=nbytes)
        if counter.is_direct:
            print("writing to direct counter for table", counter.binding)
            self.client.bm_mt_write_counter(0, counter.binding, index, value)
        else:
            self.client.bm_counter_write(0, counter.name, index, value)
        print(f"{words[0]}[{index}] has been updated")

    @command(COUNTER)
    def do_counter_reset(self, words, counter):
        "Reset counter: counter_reset <name>"
        if counter.is_direct:
            print("this is the direct counter for table", counter.binding)
            self.client.bm_mt_reset_counters(0, counter.binding)
        else:
            self.client.bm_counter_reset_all(0, counter.name)

    @staticmethod
    def _rates(meter, texts):
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

    @command(METER, rest=True)
    def do_meter_array_set_rates(self, words, meter, rates):
        "Configure rates for an entire meter array: meter_array_set_rates <name> <rate_1>:<burst_1> <rate_2>:<burst_2> ..."
        self.client.bm_meter_array_set_rates(0, meter.name, self._rates(meter, rates))

    @command(METER, INDEX, rest=True)
    def do_meter_set_rates(self, words, meter, index, rates):
        "Configure rates for a meter: meter_set_rates <name> <index> <rate_1>:<burst_1> <rate_2>:<burst_2> ...\nRate uses units/microsecond and burst uses units where units is bytes or packets"
        rates = self._rates(meter, rates)
        if meter.is_direct:
            self.client.bm_mt_set_meter_rates(0, meter.binding, index, rates)
        else:
            self.client.bm_meter_set_rates(0, meter.name, index, rates)

    @command(METER, INDEX)
    def do_meter_get_rates(self, words, meter, index):
        "Retrieve rates for a meter: meter_get_rates <name> <index>"
        if meter.is_direct:
            rates = self.client.bm_mt_get_meter_rates(0, meter.binding, index)
        else:
            rates = self.client.bm_meter_get_rates(0, meter.name, index)
        if len(rates) != meter.rate_count:
            print("WARNING: expected", meter.rate_count, "rates but only received", len(rates))
        for i, rate in enumerate(rates):
            print(f"{i}: info rate = {rate.units_per_micros}, burst size = {rate.burst_size}")

    @command(REGISTER, rest=True)
    def do_register_read(self, words, register, rest):
        "Read register value: register_read <name> [index]"
        if rest:
            if len(words) != 2:
                raise InputError(f"Wrong number of args, expected 2 but got {len(words)}")
            index = to_int(rest[0], "index")
            print(f"{words[0]}[{index}]=", self.client.bm_register_read(0, register.name, index))
        else:
            sys.stderr.write("register index omitted, reading entire array\n")
            cells = self.client.bm_register_read_all(0, register.name)
            print(f"{words[0]}=", ", ".join(str(c) for c in cells))

    @command(REGISTER, INDEX, WORD)
    def do_register_write(self, words, register, index, value):
        "Write register value: register_write <name> <index> <value>"
        try:
            value = int(value)
        except ValueError:
            raise InputError("Bad format for value, must be an integer") from None
        self.client.bm_register_write(0, register.name, index, value)

    @command(REGISTER)
    def do_register_reset(self, words, register):
        "Reset all the cells in the register array to 0: register_reset <name>"
        self.client.bm_register_reset(0, register.name)

    # --- parser value sets -----------------------------------------------------------------
    def _vset_value(self, name, text):
        width = self.program.value_sets[name]
        try:
            value = int(text, 0)
        except ValueError:
            raise InputError("Invalid input, could not cast to integer, try in hex with 0x "
                             "prefix") from None
        if value < 0 or value >> width:
            raise InputError(f"Input is too large, it should fit within {width} bits")
        return value.to_bytes((width + 7) // 8, "big")

    @command()
    def do_show_pvs(self, words):
        "List parser value sets defined in the P4 program: show_pvs"
        for name in sorted(self.program.value_sets):
            print(f"{name:30} [compressed bitwidth:{self.program.value_sets[name]}]")

    @command(VALUE_SET, WORD)
    def do_pvs_add(self, words, name, value):
        "Add a value to a parser value set: pvs_add <pvs_name> <value>"
        self.client.bm_parse_vset_add(0, name, self._vset_value(name, value))

    @command(VALUE_SET, WORD)
    def do_pvs_remove(self, words, name, value):
        "Remove a value from a parser value set: pvs_remove <pvs_name> <value>"
        self.client.bm_parse_vset_remove(0, name, self._vset_value(name, value))

    @command(VALUE_SET)
    def do_pvs_get(self, words, name):
        "Print all values from a parser value set: pvs_get <pvs_name>"
        for v in self.client.bm_parse_vset_get(0, name):
            print(values.hexstr(v))

    @command(VALUE_SET)
    def do_pvs_clear(self, words, name):
        "Remove all values from a parser value set: pvs_clear <pvs_name>"
        self.client.bm_parse_vset_clear(0, name)

    # --- multicast -------------------------------------------------------------------------
    def _node_maps(self, args):
        ports, lags = args, []
        if "|" in args:
            at = args.index("|")
            ports, lags = args[:at], args[at + 1:]
        port_map = values.port_map(ports)
        lag_map = values.port_map(lags, "lag") if self.lag else None
        return port_map, lag_map

    @command(MGRP)
    def do_mc_mgrp_create(self, words, mgrp):
        "Create multicast group: mc_mgrp_create <group id>"
        print("Creating multicast group", mgrp)
        self.mc.bm_mc_mgrp_create(0, mgrp)

    @command(MGRP)
    def do_mc_mgrp_destroy(self, words, mgrp):
        "Destroy multicast group: mc_mgrp_destroy <group id>"
        print("Destroying multicast group", mgrp)
        self.mc.bm_mc_mgrp_destroy(0, mgrp)

    @command(integer("rid"), rest=True)
    def do_mc_node_create(self, words, rid, ports):
        "Create multicast node: mc_node_create <rid> <space-separated port list> [ | <space-separated lag list> ]"
        port_map, lag_map = self._node_maps(ports)
        if self.lag:
            print("Creating node with rid", rid, ", port map", port_map, "and lag map", lag_map)
            handle = self.mc.bm_mc_node_create(0, rid, port_map, lag_map)
        else:
            print("Creating node with rid", rid, "and with port map", port_map)
            handle = self.mc.bm_mc_node_create(0, rid, port_map)
        print("node was created with handle", handle)

    @command(NODE, rest=True, minimum=2)
    def do_mc_node_update(self, words, handle, ports):
        "Update multicast node: mc_node_update <node handle> <space-separated port list> [ | <space-separated lag list> ]"
        port_map, lag_map = self._node_maps(ports)
        if self.lag:
            print("Updating node", handle, "with port map", port_map, "and lag map", lag_map)
            self.mc.bm_mc_node_update(0, handle, port_map, lag_map)
        else:
            print("Updating node", handle, "with port map", port_map)
            self.mc.bm_mc_node_update(0, handle, port_map)

    @command(MGRP, NODE)
    def do_mc_node_associate(self, words, mgrp, node):
        "Associate node to multicast group: mc_node_associate <group handle> <node handle>"
        print("Associating node", node, "to multicast group", mgrp)
        self.mc.bm_mc_node_associate(0, mgrp, node)

    @command(MGRP, NODE)
    def do_mc_node_dissociate(self, words, mgrp, node):
        "Dissociate node from multicast group: mc_node_associate <group handle> <node handle>"
        print("Dissociating node", node, "from multicast group", mgrp)
        self.mc.bm_mc_node_dissociate(0, mgrp, node)

    @command(NODE)
    def do_mc_node_destroy(self, words, node):
        "Destroy multicast node: mc_node_destroy <node handle>"
        print("Destroying node", node)
        self.mc.bm_mc_node_destroy(0, node)

    def do_mc_set_lag_membership(self, line):
        "Set lag membership of port list: mc_set_lag_membership <lag index> <space-separated port list>"
        if not self.lag:
            print("Error: Cannot execute this command with this type of PRE, SimplePreLAG is "
                  "required")
            return
        self._lag_membership(line)

    @command(integer("lag index"), rest=True, minimum=2)
    def _lag_membership(self, words, lag, ports):
        port_map = values.port_map(ports, "lag")
        print("Setting lag membership:", lag, "<-", port_map)
        self.mc.bm_mc_set_lag_membership(0, lag, port_map)

    @command(rest=True)
    def do_mc_dump(self, words, rest):
        "Dump entries in multicast engine"
        try:
            dump = json.loads(self.mc.bm_mc_get_entries(0))
        except ValueError:
            print("Exception when retrieving MC entries")
            return
        dumps.print_mc_entries(dump)

    # --- simple_switch: mirroring, queues, clock -------------------------------------------
    @command(MIRROR, integer("egress_port"))
    def do_mirroring_add(self, words, mirror, port):
        "Add mirroring session to unicast port: mirroring_add <mirror_id> <egress_port>"
        self.sswitch.mirroring_session_add(mirror, simple_switch.MirroringSessionConfig(
            port=port))

    @command(MIRROR, integer("mgrp"))
    def do_mirroring_add_mc(self, words, mirror, mgrp):
        "Add mirroring session to multicast group: mirroring_add_mc <mirror_id> <mgrp>"
        self.sswitch.mirroring_session_add(mirror, simple_switch.MirroringSessionConfig(
            mgid=mgrp))

    @command(MIRROR)
    def do_mirroring_delete(self, words, mirror):
        "Delete mirroring session: mirroring_delete <mirror_id>"
        self.sswitch.mirroring_session_delete(mirror)

    @command(MIRROR)
    def do_mirroring_get(self, words, mirror):
        "Display mirroring session: mirroring_get <mirror_id>"
        print(self.sswitch.mirroring_session_get(mirror))

    @staticmethod
    def _queue(args, amount, all_, one, prio):
        if len(args) > 1:
            prio(to_int(args[0], "egress_port"), to_int(args[1], "priority"), amount)
        elif args:
            one(to_int(args[0], "egress_port"), amount)
        else:
            all_(amount)

    @command(integer("nb_pkts"), rest=True)
    def do_set_queue_depth(self, words, depth, rest):
        "Set depth of one / all egress queue(s): set_queue_depth <nb_pkts> [<egress_port> [<priority>]]"
        s = self.sswitch
        self._queue(rest, depth, s.set_all_egress_queue_depths, s.set_egress_queue_depth,
                    s.set_egress_priority_queue_depth)

    @command(integer("rate_pps"), rest=True)
    def do_set_queue_rate(self, words, rate, rest):
        "Set rate of one / all egress queue(s): set_queue_rate <rate_pps> [<egress_port> [<priority>]]"
        s = self.sswitch
        self._queue(rest, rate, s.set_all_egress_queue_rates, s.set_egress_queue_rate,
                    s.set_egress_priority_queue_rate)

    @command(rest=True)
    def do_get_time_elapsed(self, words, rest):
        "Get time elapsed (in microseconds) since the switch started: get_time_elapsed"
        print(self.sswitch.get_time_elapsed_us())

    @command(rest=True)
    def do_get_time_since_epoch(self, words, rest):
        "Get time elapsed (in microseconds) since the switch clock's epoch: get_time_since_epoch"
        print(self.sswitch.get_time_since_epoch_us())


def _after_arrow(params):
    """table_modify's and act_prof_modify_member's action data may follow a '=>'."""
    return params[1:] if params and params[0] == "=>" else params


# The forms BMv2 keeps from before action profiles had names of their own: each runs an
# act_prof_* command on the table's action profile (the table_indirect_* ones deprecated;
# those on groups need a selector).
DEPRECATED = ("create_member", "delete_member", "modify_member", "create_group", "delete_group",
              "add_member_to_group", "remove_member_from_group")


def _legacy(name: str, substitute: str, with_selector: bool, deprecated: bool):
    @command(TABLE, rest=True)
    def do(self, words, table, rest):
        _indirect(table, with_selector)
        if deprecated and table.profile.tables > 1:
            raise InputError("Legacy command does not work with shared action profiles")
        if deprecated:      # on stderr: scripts parse stdout
            sys.stderr.write(f"This is a deprecated command, use '{substitute}' instead\n")
        return getattr(self, f"do_{substitute}")(" ".join([table.profile.name, *rest]))
    own = getattr(RuntimeCLI, f"do_{substitute}").__doc__
    doc = own.replace(substitute, name).replace("<action profile name>", "<table name>") \
        .replace("an action profile", "an indirect match table")
    do.__doc__ = f"[DEPRECATED!] {doc}" if deprecated else doc
    return do


for _verb in DEPRECATED:
    setattr(RuntimeCLI, f"do_table_indirect_{_verb}",
            _legacy(f"table_indirect_{_verb}", f"act_prof_{_verb}", "group" in _verb, True))
for _what in ("member", "group"):
    setattr(RuntimeCLI, f"do_table_dump_{_what}",
            _legacy(f"table_dump_{_what}", f"act_prof_dump_{_what}", False, False))
