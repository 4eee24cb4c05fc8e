"""The P4Runtime client against a real switch process serving fabric.p4: `p4switch run`, and
BMv2's simple_switch_grpc when it is installed."""
from pathlib import Path

import grpc
import pytest

from controller.p4rt import (
    CloneSession,
    Device,
    MulticastGroup,
    NotPrimaryError,
    Pipeline,
    State,
    TableEntry,
    WriteError,
    sync,
)
from tests.fabricd_process import RPC_TIMEOUT
from tests.targets import compile_for, start_target

REPO = Path(__file__).resolve().parents[2]

TARGETS = ["p4switch", pytest.param("bmv2", marks=pytest.mark.bmv2)]


@pytest.fixture(params=TARGETS)
def target(request, tmp_path):
    """(switch process, the fabric.p4 pipeline compiled for it)."""
    p4info, config = compile_for(request.param, str(REPO / "p4src" / "fabric.p4"), tmp_path)
    with start_target(request.param, {}, 7) as sw:
        yield sw, Pipeline.from_files(p4info, config)


def route(prefix, port, slice_id=0):
    addr, plen = prefix.split("/")
    return TableEntry("ipv4_route", {"slice_id": slice_id, "dstAddr": (addr, int(plen))},
                      "route_to_port", {"port": port})


def test_pipeline_push_write_read_delete(target):
    switch, pipeline = target
    dev = Device("s", switch.grpc_addr, 7, pipeline, election_id=5, timeout=RPC_TIMEOUT)
    assert dev.connect() is True                 # a fresh switch gets the program
    entries = [route("10.0.1.0/24", 1), route("10.0.2.0/24", 2, slice_id=3),
               TableEntry("slice_classify", {"ingress_port": (4, 0x1FF)}, "set_slice",
                          {"slice_id": 3}, priority=7)]
    default = TableEntry("ipv4_route", action="route_to_port", params={"port": 3},
                         default=True)
    intended = State(entries + [default], [MulticastGroup(9, ((1, 1), (2, 2)))],
                     [CloneSession(5, ((6, 0),))])
    assert dev.sync(intended) == {"insert": 5, "modify": 1, "delete": 0}
    defaults = dev.read_state(defaults_of=("ipv4_route",)).table_entries
    assert [(e.action, e.params) for e in defaults if e.default] == [
        ("FabricIngress.route_to_port", {"port": 3})]
    back = dev.read_state()
    assert sorted(map(sync.entry_key, back.table_entries)) == sorted(
        sync.entry_key(sync.canonical(dev.schema, e)) for e in entries)
    # (BMv2 returns the replicas in its own order: the order carries no meaning)
    assert [(g.group_id, sorted(g.replicas)) for g in back.multicast_groups] == [
        (9, [(1, 1), (2, 2)])]
    assert back.clone_sessions == [CloneSession(5, ((6, 0),))]
    assert dev.sync(intended) == {"insert": 0, "modify": 0, "delete": 0}

    with pytest.raises(WriteError) as err:           # the same entry twice
        dev.write([(sync.INSERT, entries[0])])
    assert err.value.code == grpc.StatusCode.ALREADY_EXISTS or any(
        code == "ALREADY_EXISTS" for _, code, _ in err.value.errors)

    smaller = State(entries[:1])
    assert dev.sync(smaller) == {"insert": 0, "modify": 0, "delete": 4}
    assert [sync.entry_key(e) for e in dev.read_state().table_entries] == [
        sync.entry_key(sync.canonical(dev.schema, entries[0]))]
    assert dev.read_state().multicast_groups == []
    dev.close()


def test_a_second_controller_is_backup_and_reconnect_keeps_entries(target):
    switch, pipeline = target
    first = Device("s", switch.grpc_addr, 7, pipeline, election_id=10, timeout=RPC_TIMEOUT)
    first.connect()
    first.sync(State([route("10.0.1.0/24", 1)]))
    backup = Device("s", switch.grpc_addr, 7, pipeline, election_id=3, timeout=RPC_TIMEOUT)
    with pytest.raises(NotPrimaryError):
        backup.connect()
    first.close()
    again = Device("s", switch.grpc_addr, 7, pipeline, election_id=10, timeout=RPC_TIMEOUT)
    assert again.connect() is False              # same cookie: the pipeline stays
    assert again.sync(State([route("10.0.1.0/24", 1)])) == {"insert": 0, "modify": 0,
                                                           "delete": 0}
    counters = again.read_counter("port_rx")
    assert len(counters) == again.schema.counter("port_rx").size
    assert all(c.packets == 0 for c in counters)
    again.close()
