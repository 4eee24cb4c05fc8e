"""simple_switch_CLI (p4switch/runtime_cli/) reading a command file on stdin against a real
`p4switch run`: BMv2's command language and BMv2's output, command by command; what it wrote
is there over P4Runtime."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from p4switch.device.process import SwitchProcess

PROGRAMS = pathlib.Path(__file__).parent / "device_programs"

# (command, what BMv2's simple_switch_CLI prints for it) on runtime.p4
SESSION = [
    ("table_num_entries mac_table", "0\n"),
    ("table_add mac_table set_port 02:00:00:00:00:01 => 2",
     "Adding entry to exact match table mac_table\n"
     "match key:           EXACT-02:00:00:00:00:01\n"
     "action:              set_port\n"
     "runtime data:        00:02\n"
     "Entry has been added with handle 0\n"),
    ("table_add acl drop 0x020000000001&&&0xffffffffffff 0x0800->0x08ff 1&&&0x1ff => 10",
     "Adding entry to range match table acl\n"
     "match key:           TERNARY-02:00:00:00:00:01 &&& ff:ff:ff:ff:ff:ff\t"
     "RANGE-08:00 -> 08:ff\tTERNARY-00:01 &&& 01:ff\n"
     "action:              drop\n"
     "runtime data:        \n"
     "Entry has been added with handle 0\n"),
    ("table_dump acl",
     "==========\nTABLE ENTRIES\n**********\nDumping entry 0x0\nMatch key:\n"
     "* hdr.ethernet.srcAddr          : TERNARY   020000000001 &&& ffffffffffff\n"
     "* hdr.ethernet.etherType        : RANGE     0800 -> 08ff\n"
     "* standard_metadata.ingress_port: TERNARY   0001 &&& 01ff\n"
     "Priority: 10\nAction entry: MyIngress.drop - \n"
     "==========\nDumping default entry\nAction entry: NoAction - \n==========\n"),
    ("table_modify mac_table set_port 0 => 3",
     "Modifying entry 0 for exact match table mac_table\n"),
    ("table_dump_entry mac_table 0",
     "Dumping entry 0x0\nMatch key:\n* hdr.ethernet.dstAddr: EXACT     020000000001\n"
     "Action entry: MyIngress.set_port - 03\n"),
    ("table_set_default mac_table to_cpu",
     "Setting default action of mac_table\naction:              to_cpu\nruntime data:        \n"),
    ("act_prof_create_member ecmp_selector set_port 7", "Member has been created with handle 0\n"),
    ("act_prof_create_group ecmp_selector", "Group has been created with handle 0\n"),
    ("act_prof_add_member_to_group ecmp_selector 0 0", ""),
    ("table_indirect_add_with_group ecmp 0x9000 => 0",
     "Adding entry to indirect match table MyIngress.ecmp\nEntry has been added with handle 0\n"),
    ("act_prof_dump_group ecmp_selector 0", "Dumping group 0\nMembers: [0]\n"),
    # the table_indirect_* forms run the act_prof_* command on the table's profile
    ("table_indirect_create_member ecmp set_port 5", "Member has been created with handle 1\n"),
    ("table_dump_member ecmp 1", "Dumping member 1\nAction entry: MyIngress.set_port - 05\n"),
    ("table_indirect_delete mac_table 0", "Error: Cannot run this command on non-indirect table\n"),
    ("act_prof_delete_group ecmp_selector x", "Error: Bad format for group handle\n"),
    ("table_delete mac_table", "Error: Wrong number of args, expected 2 but got 1\n"),
    ("table_add mac_table set_port", "Error: Insufficient number of args\n"),
    ("counter_read port_packets 3", "port_packets[3]= (0 bytes, 0 packets)\n"),
    ("counter_read port_packets 16", "Invalid counter operation (INVALID_INDEX)\n"),
    ("meter_set_rates port_meter 0 2:1 1:1", "Invalid meter operation (INVALID_INFO_RATE_VALUE)\n"),
    ("meter_set_rates port_meter 0 1:1 2:1", ""),
    ("meter_get_rates port_meter 0",
     "0: info rate = 1.0, burst size = 1\n1: info rate = 2.0, burst size = 1\n"),
    ("register_write last_port 1 9", ""),
    ("register_read last_port 1", "last_port[1]= 9\n"),
    ("register_read last_port 16", "Invalid register operation (INVALID_INDEX)\n"),
    ("mc_mgrp_create 1", "Creating multicast group 1\n"),
    ("mc_node_create 2 1 5 8 | 1 3",
     "Creating node with rid 2 , port map 100100010 and lag map 1010\n"
     "node was created with handle 0\n"),
    ("mc_node_associate 1 0", "Associating node 0 to multicast group 1\n"),
    ("mc_dump", "==========\nMC ENTRIES\n**********\nmgrp(1)\n"
     "  -> (L1h=0, rid=2) -> (ports=[1, 5, 8], lags=[1, 3])\n==========\nLAGS\n==========\n"),
    ("mc_set_lag_membership 1 6 9 12", "Setting lag membership: 1 <- 1001001000000\n"),
    # BMv2's CLI prints the last node's ports on each LAG line (its CLI_tests' mc_dump.out)
    ("mc_dump", "==========\nMC ENTRIES\n**********\nmgrp(1)\n"
     "  -> (L1h=0, rid=2) -> (ports=[1, 5, 8], lags=[1, 3])\n==========\nLAGS\n"
     "lag(1) -> ports=[1, 5, 8]\n==========\n"),
    ("mirroring_add 5 3", ""),
    ("mirroring_get 5", "MirroringSessionConfig(port=3, mgid=None)\n"),
    ("mirroring_get 6", "Invalid mirroring operation (SESSION_NOT_FOUND)\n"),
    ("table_delete mac_table 0", "Deleting entry 0 from mac_table\n"),
    ("table_add mac_table set_port 1 2", "Error: Action MyIngress.set_port needs 1 parameters\n"),
    ("table_add mac_table set_port 02:00:00:00:00:0g => 2",
     "Invalid match key: Error while parsing 02:00:00:00:00:0g - Invalid MAC address\n"),
    ("table_add no_table x 1 => 2", "Error: Invalid table name (no_table)\n"),
    ("table_num_entries mac_table", "0\n"),
]


@pytest.fixture(scope="module")
def switch():
    with SwitchProcess([str(PROGRAMS / "runtime.p4"), "--backend", "python",
                        "--device-id", "4"]) as sw:
        yield sw


def run_cli(switch, commands: str, *via) -> subprocess.CompletedProcess:
    port = switch.thrift_addr.rsplit(":", 1)[1]
    cmd = list(via or [sys.executable, "-m", "p4switch.runtime_cli.main"])
    return subprocess.run([*cmd, "--thrift-port", port], input=commands, text=True,
                          capture_output=True, timeout=60)


def test_simple_switch_cli_command_file_gives_bmv2_output(switch):
    result = run_cli(switch, "".join(c + "\n" for c, _ in SESSION))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("Obtaining JSON from switch...\nDone\n")
    answers = out[out.index("RuntimeCmd: "):].split("RuntimeCmd: ")[1:]
    assert len(answers) == len(SESSION) + 1                 # and the prompt EOF ends
    for (command, expected), got in zip(SESSION, answers, strict=False):
        assert got == expected, command
    assert answers[-1] == "\n"


def test_simple_switch_cli_writes_what_p4runtime_reads(switch):
    """The entry and register cell the CLI writes are the device's: read over P4Runtime."""
    import grpc
    from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
    result = run_cli(switch, "table_add learned NoAction 00:00:00:00:00:07 =>\n"
                             "register_write last_port 3 1234\n")
    assert "Entry has been added with handle" in result.stdout, result.stdout
    with grpc.insecure_channel(switch.grpc_addr) as channel:
        stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
        info = stub.GetForwardingPipelineConfig(p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=4)).config.p4info
        tid = next(t.preamble.id for t in info.tables if t.preamble.name == "MyIngress.learned")
        rid = next(r.preamble.id for r in info.registers
                   if r.preamble.name == "MyIngress.last_port")
        req = p4runtime_pb2.ReadRequest(device_id=4)
        req.entities.add().table_entry.table_id = tid
        reg = req.entities.add().register_entry
        reg.register_id, reg.index.index = rid, 3
        entities = [e for r in stub.Read(req) for e in r.entities]
    [entry] = [e.table_entry for e in entities if e.HasField("table_entry")]
    assert entry.match[0].exact.value == b"\x07"
    [cell] = [e.register_entry for e in entities if e.HasField("register_entry")]
    assert int.from_bytes(cell.data.bitstring, "big") == 1234


def test_simple_switch_cli_under_p4switch_and_without_a_switch(switch):
    result = run_cli(switch, "show_tables\n", sys.executable, "-m", "p4switch.cli", "cli")
    assert "MyIngress.mac_table" in result.stdout and \
        "[implementation=MyIngress.ecmp_selector, mk=hdr.ethernet.etherType(exact, 16)]" \
        in result.stdout
    nothing = subprocess.run([sys.executable, "-m", "p4switch.runtime_cli.main",
                              "--thrift-port", "1"], input="", text=True, capture_output=True,
                             timeout=30)
    assert nothing.returncode == 1
    assert "Could not connect to thrift client on port 1" in nothing.stdout


def test_simple_switch_cli_reads_the_bmv2_json_p4switch_writes():
    """For a program bmv2json's writer takes (l3.p4), bm_get_config is that BMv2 JSON, so the
    CLI's names are p4c-bm2-ss's (key fields as header.field)."""
    with SwitchProcess([str(PROGRAMS / "l3.p4"), "--backend", "python"]) as sw:
        result = run_cli(sw, "show_tables\ntable_add ipv4_lpm route_drop 10.0.0.1/8 =>\n"
                             "table_dump_entry ipv4_lpm 0\n")
    out = result.stdout
    assert "MyIngress.ipv4_lpm" in out and "mk=ipv4.dstAddr(lpm, 32)" in out, out
    assert "* ipv4.dstAddr        : LPM       0a000001/8" in out, out
