"""p4runtime-shell (the PyPI client, used as a controller would) against `p4switch run --no-p4`
(and BMv2's simple_switch_grpc when installed): push a pipeline, program and read back tables,
a multicast group and counters."""
import pathlib
import shutil

import p4runtime_sh.shell as sh
import pytest
from p4runtime_sh.p4runtime import P4RuntimeWriteException  # noqa: E402
from targets import compile_for, start_target

PROGRAMS = pathlib.Path(__file__).parent / "device_programs"


@pytest.fixture(params=["p4switch", pytest.param("bmv2", marks=pytest.mark.bmv2)])
def target(request):
    if request.param == "bmv2" and shutil.which("p4c-bm2-ss") is None:
        pytest.skip("p4c-bm2-ss is not on PATH")
    return request.param


@pytest.fixture
def shell(target, tmp_path):
    config = sh.FwdPipeConfig(*compile_for(target, str(PROGRAMS / "l3.p4"), str(tmp_path)))
    with start_target(target, {}, device_id=3, cpu_port=510) as switch:
        sh.setup(device_id=3, grpc_addr=switch.grpc_addr, election_id=(0, 1), config=config,
                 verbose=False)
        try:
            yield sh
        finally:
            sh.teardown()


def route(prefix: str, port: int, dmac: str) -> "sh.TableEntry":
    te = sh.TableEntry("MyIngress.ipv4_lpm")(action="MyIngress.forward")
    te.match["hdr.ipv4.dstAddr"] = prefix
    te.action["port"] = str(port)
    te.action["dmac"] = dmac
    te.action["smac"] = "00:00:00:00:00:fe"
    return te


def read_routes(shell):
    out = {}
    for te in shell.TableEntry("MyIngress.ipv4_lpm").read():
        out[te.match["hdr.ipv4.dstAddr"].lpm.prefix_len,
            te.match["hdr.ipv4.dstAddr"].lpm.value] = te
    return out


def test_pipeline_is_installed_and_reported(shell):
    names = {t.preamble.name for t in sh.client.get_p4info().tables}
    assert "MyIngress.ipv4_lpm" in names and "MyIngress.acl" in names


def test_insert_read_modify_delete_table_entries(shell):
    route("10.0.1.0/24", 1, "00:00:00:00:01:01").insert()
    route("10.0.2.0/24", 2, "00:00:00:00:02:01").insert()
    routes = read_routes(shell)
    assert len(routes) == 2
    entry = routes[(24, bytes([10, 0, 2, 0]))]
    assert entry.action["port"].value == b"\x02"
    assert entry.action["dmac"].value == b"\x02\x01"          # canonical: no leading zeros

    modified = route("10.0.2.0/24", 7, "00:00:00:00:02:07")
    modified.modify()
    routes = read_routes(shell)
    assert routes[(24, bytes([10, 0, 2, 0]))].action["port"].value == b"\x07"

    route("10.0.1.0/24", 1, "00:00:00:00:01:01").delete()
    assert list(read_routes(shell)) == [(24, bytes([10, 0, 2, 0]))]

    with pytest.raises(P4RuntimeWriteException) as err:
        route("10.0.2.0/24", 2, "00:00:00:00:02:01").insert()
    assert "ALREADY_EXISTS" in str(err.value)


def test_ternary_range_optional_entries_with_priorities(shell):
    for prio, port_range in ((10, "1000..2000"), (20, "1500..1600")):
        te = sh.TableEntry("MyIngress.acl")(action="MyIngress.acl_deny")
        te.match["hdr.ipv4.srcAddr"] = "10.0.1.0&&&255.255.255.0"
        te.match["hdr.l4.dstPort"] = port_range
        te.match["hdr.ipv4.protocol"] = "17"
        te.priority = prio
        te.insert()
    entries = sorted(sh.TableEntry("MyIngress.acl").read(), key=lambda e: e.priority)
    assert [e.priority for e in entries] == [10, 20]
    assert entries[1].match["hdr.l4.dstPort"].range.low == (1500).to_bytes(2, "big")
    assert entries[0].match["hdr.ipv4.srcAddr"].ternary.mask == b"\xff\xff\xff\x00"


def test_default_entry_modify_and_read(shell):
    te = sh.TableEntry("MyIngress.acl")(action="MyIngress.acl_deny", is_default=True)
    te.modify()
    (default,) = sh.TableEntry("MyIngress.acl")(is_default=True).read()
    assert default.action.action_name == "MyIngress.acl_deny"


def replicas(group) -> list[tuple[int, int]]:
    return [(r.egress_port, r.instance) for r in group.replicas]


def test_multicast_group(shell):
    sh.MulticastGroupEntry(5).add(1, 1).add(2, 1).add(3, 2).insert()
    (group,) = sh.MulticastGroupEntry(5).read()
    assert sorted(replicas(group)) == [(1, 1), (2, 1), (3, 2)]
    sh.MulticastGroupEntry(5).add(4, 1).modify()
    (group,) = sh.MulticastGroupEntry(5).read()
    assert replicas(group) == [(4, 1)]
    sh.MulticastGroupEntry(5).delete()
    assert list(sh.MulticastGroupEntry(0).read()) == []


def test_counters_read_and_write(shell):
    ce = sh.CounterEntry("MyIngress.routed_packets")
    ce.index = 3
    ce.packet_count = 7
    ce.byte_count = 700
    ce.modify()
    (read_back,) = sh.CounterEntry("MyIngress.routed_packets")(index=3).read()
    assert (read_back.packet_count, read_back.byte_count) == (7, 700)
    every = list(sh.CounterEntry("MyIngress.routed_packets").read())
    assert len(every) == 512
    assert sum(c.packet_count for c in every) == 7


def test_direct_counter_of_an_entry(shell):
    route("10.0.9.0/24", 2, "00:00:00:00:09:01").insert()
    dce = sh.DirectCounterEntry("MyIngress.route_hits")
    dce.table_entry.match["hdr.ipv4.dstAddr"] = "10.0.9.0/24"
    dce.packet_count = 11
    dce.modify()
    (read_back,) = sh.DirectCounterEntry("MyIngress.route_hits").read()
    assert read_back.packet_count == 11
