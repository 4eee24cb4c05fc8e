"""Packets/s forwarded between two namespaces over the same veths, in one run: through
`p4switch run` on the native backend and on the Python backend (an L3 program, then fabric.p4
routing; routes pushed over P4Runtime), through BMv2's simple_switch_grpc when it is installed,
and through a Linux bridge. (fabric.p4 multicast and aggregation: bench_p4switch.py, in-process.)

Needs root. Prints one table; the ratio column is delivered packets/s / the bridge's."""
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import p4runtime_sh.shell as sh  # noqa: E402

sys.path.insert(0, str(ROOT / "tests"))
from targets import compile_for, start_target  # noqa: E402

from p4switch.native import available  # noqa: E402

L3 = ROOT / "tests" / "p4switch" / "device_programs" / "l3.p4"
FABRIC = ROOT / "p4src" / "fabric.p4"
DURATION = float(os.environ.get("BENCH_SECONDS", "3"))
PAYLOAD = 64
RATES = (5000, 0)          # offered packets/s per run; 0 = as fast as the sender can
HOST_MAC = {1: "02:00:00:00:01:01", 2: "02:00:00:00:02:01"}
GW_MAC = {1: "02:00:00:00:01:fe", 2: "02:00:00:00:02:fe"}

SENDER = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
duration, size, rate = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
start = time.monotonic()
end, n, msg = start + duration, 0, bytes(size)
while time.monotonic() < end:
    for _ in range(16):
        try:
            s.sendto(msg, ("10.0.2.1", 9000))
            n += 1
        except OSError:
            pass
    if rate:                       # paced: sleep until the schedule catches up
        ahead = n / rate - (time.monotonic() - start)
        if ahead > 0:
            time.sleep(ahead)
print(n)
"""

RECEIVER = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
s.bind(("10.0.2.1", 9000))
s.settimeout(1.0)
n, first, last, give_up = 0, None, None, time.monotonic() + float(sys.argv[1]) + 5
while time.monotonic() < give_up:
    try:
        s.recv(4096)
    except TimeoutError:
        if first is not None:
            break
        continue
    last = time.monotonic()
    first = first or last
    n += 1
print(n, (last - first) if first else 0)
"""


def sh_run(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def make_hosts():
    tag = uuid.uuid4().hex[:6]
    hosts, sw_ends = {}, {}
    for i in (1, 2):
        ns, sw = f"bf{i}-{tag}", f"bfs{i}{tag}"
        sh_run("ip", "netns", "add", ns)
        sh_run("ip", "link", "add", sw, "type", "veth", "peer", "name", "eth0", "netns", ns)
        sh_run("sysctl", "-qw", f"net.ipv6.conf.{sw}.disable_ipv6=1")
        sh_run("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        sh_run("ip", "-n", ns, "link", "set", "eth0", "address", HOST_MAC[i])
        sh_run("ip", "-n", ns, "addr", "add", f"10.0.{i}.1/24", "dev", "eth0")
        for dev_ns in (("-n", ns, "link", "set", "eth0", "up"), ("link", "set", sw, "up"),
                       ("-n", ns, "link", "set", "lo", "up")):
            sh_run("ip", *dev_ns)
        sh_run("ip", "-n", ns, "route", "add", "default", "via", f"10.0.{i}.254")
        hosts[i], sw_ends[i] = ns, sw
    return hosts, sw_ends


def set_gateway_mac(hosts, macs):
    for i, ns in hosts.items():
        sh_run("ip", "-n", ns, "neigh", "replace", f"10.0.{i}.254", "lladdr", macs[i],
               "dev", "eth0")


def measure(hosts, rate):
    receiver = subprocess.Popen(["ip", "netns", "exec", hosts[2], sys.executable, "-c",
                                 RECEIVER, str(DURATION)], stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    sent = int(sh_run("ip", "netns", "exec", hosts[1], sys.executable, "-c", SENDER,
                      str(DURATION), str(PAYLOAD), str(rate)).stdout)
    got, span = receiver.communicate(timeout=30)[0].split()
    return sent / DURATION, int(got) / max(float(span), 1e-9), int(got) / max(sent, 1)


def l3_routes():
    for i in (1, 2):
        te = sh.TableEntry("MyIngress.ipv4_lpm")(action="MyIngress.forward")
        te.match["hdr.ipv4.dstAddr"] = f"10.0.{i}.0/24"
        te.action["port"], te.action["dmac"] = str(i), HOST_MAC[i]
        te.action["smac"] = GW_MAC[i]
        te.insert()


def fabric_routes():
    """fabric.p4 routing between the two hosts, as the controller writes a host route."""
    for i in (1, 2):
        te = sh.TableEntry("FabricIngress.ipv4_route")(action="FabricIngress.route_to_port")
        te.match["meta.slice_id"] = "0"
        te.match["hdr.ipv4.dstAddr"] = f"10.0.{i}.0/24"
        te.action["port"] = str(i)
        te.insert()
        te = sh.TableEntry("FabricEgress.port_mac")(action="FabricEgress.set_port_macs")
        te.match["standard_metadata.egress_port"] = str(i)
        te.action["smac"], te.action["dmac"] = GW_MAC[i], HOST_MAC[i]
        te.insert()


PROGRAMS = {"l3.p4": (L3, l3_routes), "fabric.p4 routed": (FABRIC, fabric_routes)}


def through_switch(target, program, hosts, sw_ends, workdir):
    """target: p4switch-native, p4switch-python or bmv2"""
    path, write_routes = PROGRAMS[program]
    config = sh.FwdPipeConfig(*compile_for(target, str(path), str(workdir)))
    set_gateway_mac(hosts, GW_MAC)
    switch = start_target(target, {1: sw_ends[1], 2: sw_ends[2]}, 1)
    if target.startswith("p4switch"):
        switch.args += ["--queue-depth", "1024"]
    with switch:
        sh.setup(device_id=1, grpc_addr=switch.grpc_addr, election_id=(0, 1), verbose=False,
                 config=config)
        try:
            write_routes()
            return [measure(hosts, rate) for rate in RATES]
        finally:
            sh.teardown()


def through_bridge(hosts, sw_ends):
    """The bridge gets a namespace of its own: there no host firewall (e.g. Docker's FORWARD
    DROP with bridge-nf-call-iptables) sees the bridged frames."""
    ns = f"bfbr-{uuid.uuid4().hex[:6]}"
    sh_run("ip", "netns", "add", ns)
    try:
        sh_run("ip", "-n", ns, "link", "add", "br0", "type", "bridge")
        for sw in sw_ends.values():
            sh_run("ip", "link", "set", sw, "netns", ns)
            sh_run("ip", "-n", ns, "link", "set", sw, "master", "br0")
            sh_run("ip", "-n", ns, "link", "set", sw, "up")
        sh_run("ip", "-n", ns, "link", "set", "br0", "up")
        # Same frames as through the router: the gateway MAC resolves to the other host.
        set_gateway_mac(hosts, {1: HOST_MAC[2], 2: HOST_MAC[1]})
        return [measure(hosts, rate) for rate in RATES]
    finally:
        sh_run("ip", "netns", "del", ns, check=False)


def main():
    if os.geteuid() != 0:
        sys.exit("bench_forwarding needs root (network namespaces)")
    targets = (["p4switch-native"] if available() else []) + ["p4switch-python"]
    if shutil.which("simple_switch_grpc") and shutil.which("p4c-bm2-ss"):
        targets.append("bmv2")
    names = {"p4switch-native": "p4switch native", "p4switch-python": "p4switch python",
             "bmv2": "simple_switch_grpc"}
    hosts, sw_ends = make_hosts()
    runs = {}
    try:
        for program in PROGRAMS:
            for target in targets:
                with tempfile.TemporaryDirectory() as tmp:
                    runs[f"{names[target]}, {program}"] = through_switch(
                        target, program, hosts, sw_ends, pathlib.Path(tmp))
        bridge = through_bridge(hosts, sw_ends)
    finally:
        for ns in hosts.values():
            sh_run("ip", "netns", "del", ns, check=False)
    print(f"\nUDP {PAYLOAD}-byte payloads, {DURATION:g} s per run, one Python sender; "
          "ratio = delivered pps / bridge's at the same offered load")
    print(f"{'path':<34}{'offered':>10}{'offered pps':>14}{'delivered pps':>16}"
          f"{'delivered %':>13}{'ratio':>8}")
    for i, rate in enumerate(RATES):
        for name, result in (("linux bridge", bridge), *runs.items()):
            offered, delivered, frac = result[i]
            print(f"{name:<34}{(f'{rate}/s' if rate else 'flood'):>10}{offered:>14,.0f}"
                  f"{delivered:>16,.0f}{100 * frac:>12.1f}%{delivered / bridge[i][1]:>8.3f}")


if __name__ == "__main__":
    main()
