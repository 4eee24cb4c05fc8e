"""The collectives through a real switch: `p4switch run` with p4src/fabric.p4 as the leaf of
4 hosts (each in its own namespace), configured over P4Runtime with p4runtime-shell.
SwitchML sums in the switch's registers; multicast Allgather is replicated by the switch;
the switch marks ECN and the hosts answer with CNPs."""
from __future__ import annotations

import subprocess

import p4runtime_sh.shell as sh
import pytest
from collectives_check import ALL, assert_results, runs
from google.protobuf import text_format

import p4switch
from collectives.launch import launch
from ebpf.impair import Impair
from p4switch.device.process import SwitchProcess
from tests.conftest import unique_name

pytestmark = pytest.mark.netns
FABRIC_P4 = "p4src/fabric.p4"
AGGREGATOR, JOB, GROUP, GROUP_IP = "10.0.1.253", 3, 9, "239.1.0.9"


def _port_mac(port: int) -> str:
    return f"02:01:00:01:00:{port:02x}"


def _host_mac(rank: int) -> str:
    return f"02:00:0a:00:01:{rank + 1:02x}"


@pytest.fixture
def leaf(netns_factory, tmp_path):
    """4 hosts on ports 1..4 of a p4switch running fabric.p4 (switch ends in this namespace,
    removed afterwards); yields (namespaces, ips, host devices, write_ecn_threshold)."""
    n = 4
    made, namespaces, ips = [], [], []
    info, config = p4switch.compile_program(FABRIC_P4)
    (tmp_path / "p4info.txtpb").write_text(text_format.MessageToString(info))
    (tmp_path / "config.bin").write_bytes(config)
    try:
        for r in range(n):
            ns = netns_factory.netns(f"fh{r}")
            sw_end = unique_name("fsw")
            subprocess.run(["ip", "link", "add", sw_end, "type", "veth", "peer", "name", "eth0",
                            "netns", ns], check=True)
            made.append(sw_end)
            ip = f"10.0.1.{r + 1}"
            for cmd in (["sysctl", "-qw", f"net.ipv6.conf.{sw_end}.disable_ipv6=1"],
                        ["ip", "link", "set", sw_end, "up"],
                        ["ip", "netns", "exec", ns, "sysctl", "-qw",
                         "net.ipv6.conf.all.disable_ipv6=1"],
                        ["ip", "-n", ns, "link", "set", "eth0", "address", _host_mac(r)],
                        ["ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0"],
                        ["ip", "-n", ns, "link", "set", "eth0", "up"]):
                subprocess.run(cmd, check=True)
            # the switch does not answer ARP: every neighbour is the switch port
            for other in [f"10.0.1.{k + 1}" for k in range(n) if k != r] + [AGGREGATOR]:
                subprocess.run(["ip", "-n", ns, "neigh", "add", other, "lladdr",
                                _port_mac(r + 1), "dev", "eth0", "nud", "permanent"], check=True)
            namespaces.append(ns)
            ips.append(ip)
        args = ["--no-p4", "--device-id", "1", "--queue-depth", "256"]
        for r, dev in enumerate(made):
            args += ["-i", f"{r + 1}@{dev}"]
        with SwitchProcess(args) as switch:
            pipeline = sh.FwdPipeConfig(str(tmp_path / "p4info.txtpb"),
                                        str(tmp_path / "config.bin"))
            sh.setup(device_id=1, grpc_addr=switch.grpc_addr, election_id=(0, 1),
                     config=pipeline, verbose=False)
            try:
                _install(ips)
                yield namespaces, ips, ["eth0"] * n, _ecn_threshold
            finally:
                sh.teardown()
    finally:
        for dev in made:
            subprocess.run(["ip", "link", "del", dev], capture_output=True)


def _entry(table: str, action: str, match: dict, params: dict) -> None:
    e = sh.TableEntry(table)(action=action)
    for k, v in match.items():
        e.match[k] = v
    for k, v in params.items():
        e.action[k] = v
    e.insert()


def _install(ips: list[str]) -> None:
    group = sh.MulticastGroupEntry(GROUP)
    for r, ip in enumerate(ips):
        port = str(r + 1)
        _entry("FabricIngress.ipv4_route", "FabricIngress.route_to_port",
               {"meta.slice_id": "0", "hdr.ipv4.dstAddr": f"{ip}/32"}, {"port": port})
        _entry("FabricEgress.port_mac", "FabricEgress.set_port_macs",
               {"standard_metadata.egress_port": port},
               {"smac": _port_mac(r + 1), "dmac": _host_mac(r)})
        _entry("FabricEgress.mcast_rewrite", "FabricEgress.rewrite_replica",
               {"meta.mcast_grp": str(GROUP), "standard_metadata.egress_rid": port},
               {"smac": _port_mac(r + 1), "dmac": _host_mac(r), "dst_ip": ip})
        group.add(r + 1, r + 1)
    group.insert()
    _entry("FabricIngress.mcast_route", "FabricIngress.set_mcast_group",
           {"meta.slice_id": "0", "hdr.ipv4.dstAddr": GROUP_IP}, {"group": str(GROUP)})
    _entry("FabricIngress.switchml_jobs", "FabricIngress.switchml_job",
           {"hdr.ipv4.dstAddr": AGGREGATOR, "hdr.sml.jobId": str(JOB)},
           {"gen": "1", "result_ip": GROUP_IP, "slot_base": "32", "num_slots": "8",
            "num_workers": str(len(ips))})


def _ecn_threshold(ports: int, threshold: int) -> None:
    for port in range(1, ports + 1):
        _entry("FabricEgress.ecn_mark", "FabricEgress.set_ecn_threshold",
               {"standard_metadata.egress_port": str(port)}, {"threshold": str(threshold)})


def _switchml(sizes, dtypes=("int32", "float32")):
    plan = runs(sizes, dtypes=dtypes, algos=[("allreduce", "switchml")])
    for run in plan:
        run["options"] = {"aggregator": AGGREGATOR, "job_id": JOB, "slots": 8,
                          "slot_base": 32, "rto": 0.05}
    return plan


def test_switchml_and_multicast_allgather_through_fabric_p4(leaf, tmp_path):
    namespaces, ips, _, _ = leaf
    plan = _switchml([1, 33, 2000]) + \
        [dict(r, options={"group": GROUP_IP}) for r in
         runs([1000], dtypes=("int32",), algos=[("allgather", "multicast")])]
    rows = launch(ips, plan, namespaces=namespaces, out_dir=tmp_path, timeout=240,
                  step_timeout=120)
    assert_results(rows, plan, 4, tmp_path)
    # the switch writes every SwitchML result's ICRC, and a multicast replica it made unicast
    # checks against the group it was sent to: no packet failed its ICRC check (late
    # duplicate SwitchML results, answered to a retransmission after its call returned, count
    # as bad packets of the next run: their handler is gone)
    assert [r["icrc_errors"] for r in rows] == [0] * len(rows)
    # every result really left the switch: at least one per chunk per worker on each port
    chunks = sum(-(-r["elements"] // 32) for r in plan if r["algo"] == "switchml")
    for port in range(1, 5):
        (sent,) = sh.CounterEntry("FabricEgress.port_tx")(index=port).read()
        assert sent.packet_count >= chunks


@pytest.mark.ebpf
def test_switchml_through_fabric_p4_under_loss(leaf, tmp_path):
    namespaces, ips, devs, _ = leaf
    prog = Impair.load()
    prog.configure(drop=0.05, udp_dport=4791, seed=11)
    for ns, dev in zip(namespaces, devs, strict=True):
        prog.attach(dev, ns, directions=("ingress",))
    plan = _switchml([3000], dtypes=("int32",))
    rows = launch(ips, plan, namespaces=namespaces, out_dir=tmp_path, timeout=240,
                  step_timeout=120)
    assert_results(rows, plan, 4, tmp_path)
    assert prog.counters().dropped > 0
    assert sum(r["packets_retransmitted"] for r in rows) > 0
    prog.close()


def test_switch_ecn_marks_make_receivers_send_cnps(leaf, tmp_path):
    namespaces, ips, _, set_threshold = leaf
    set_threshold(4, 0)        # every ECT packet is marked CE
    plan = runs([20_000], dtypes=("int32",), algos=ALL[:1])
    rows = launch(ips, plan, namespaces=namespaces, out_dir=tmp_path, timeout=240,
                  step_timeout=120, policy="reps")
    assert_results(rows, plan, 4, tmp_path)
    assert all(r["cnps_received"] > 0 for r in rows)
