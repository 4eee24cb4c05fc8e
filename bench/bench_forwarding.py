"""Packets/s forwarded between namespaces over the same veths, in one run: through `p4switch
run` on the native backend and on the Python backend, through BMv2's simple_switch_grpc when it
is installed, and through a Linux bridge. Traffic: unicast UDP through an L3 program and through
fabric.p4 (routes pushed over P4Runtime); fabric.p4 multicast (one sender, a group replicating to
two receivers); fabric.p4 aggregation (a NetReduce job of four workers, the controller's entries
written over P4Runtime). The bridge forwards the unicast frames and floods the multicast ones
(snooping off) to the same receivers; it does not aggregate (n/a).

Unicast and multicast traffic comes from bench/trafgen.c (C: one frame handed out of a
PACKET_TX_RING in batches paced to the offered load), built with the system cc: a Python
sender capped near 200,000 packets/s and a UDP socket's sendmmsg near 0.4-1.4M, and measured
themselves rather than the forwarders. The sender runs on CPU 0, the forwarder on CPU 1.
Traffic is counted where a NIC benchmark counts, at the receiving interface: each receiving host's eth0 drops every frame at its tc ingress and its
rx_packets counter is the sink, the same for every path (a socket receiver put the receiving
host's IP/UDP stack and a receive loop on the two cores the forwarders need). Every path is
offered the same loads, from 5,000 packets/s to flood (see RATES).

Needs root. Prints one table and the ratios side by side; the native pipeline's ns per packet
in-process is bench_p4switch.py's."""
import argparse
import functools
import json
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
from bcc import BPF  # noqa: E402
from netreduce_job import Job  # noqa: E402  (bench/, beside this script)

sys.path.insert(0, str(ROOT / "tests"))
from targets import compile_for, l3_routes, start_target  # noqa: E402

from collectives import netreduce as nr  # noqa: E402
from ebpf import tc as ebpf_tc  # noqa: E402
from fabricmodel import rocev2  # noqa: E402
from nativebuild import compiler  # noqa: E402
from p4switch.device.native_device import IO_MODES  # noqa: E402
from p4switch.native import available, build  # noqa: E402

L3 = ROOT / "tests" / "p4switch" / "device_programs" / "l3.p4"
FABRIC = ROOT / "p4src" / "fabric.p4"
DURATION = float(os.environ.get("BENCH_SECONDS", "2"))
PAYLOAD = 64              # UDP payload bytes, unless --payload
JUMBO_MTU = 9000          # the veths' MTU for payloads above 1,472 bytes (the demo's links')
# Offered packets/s per run, the same for every path; 0 = as fast as the sender can (flood).
# At flood the sender fills its core, where the switch's receive (or the whole bridge) also
# runs; the paced loads show what each path delivers below and around its capacity.
RATES = (5_000, 50_000, 200_000, 600_000, 1_000_000, 1_400_000, 0)
AGG_RATES = (5_000, 0)     # contributions/s: one Python process, below 150,000/s at flood
HOSTS = (1, 2, 3, 4)
HOST_MAC = {i: f"02:00:00:00:0{i}:01" for i in HOSTS}
GW_MAC = {i: f"02:00:00:00:0{i}:fe" for i in HOSTS}
GROUP = "239.1.0.9"
MCAST_RECEIVERS = (2, 3)
# The core split on a machine of 2 or more: the traffic source on SENDER_CPU (taskset), the
# forwarder on FORWARDER_CPU (the switch process's threads; the bridge's forwarding by RPS).
SENDER_CPU, FORWARDER_CPU = 0, 1
TARGET_PPS, TARGET_VS_BRIDGE = 1_000_000, 1.5     # issue #28: l3.p4 native over the veths
SINK_PRIO = 1             # the sink's tc filter priority on a receiving host's eth0 ingress
WINDOW = 16                # NetReduce packets per worker in flight (4 messages; the job has 8)

# The NetReduce workers, one process with a raw socket in each worker's namespace: packet
# number g of every worker is sent while fewer than WINDOW of the worker's packets await their
# result (as the job's credits would hold a real worker back); the results multicast back to
# the workers are counted. Contributions differ only in PSN and, on a message's FIRST, RETH's
# address: the templates are patched and their ICRC computed again (fabric.p4 drops a NetReduce
# packet whose ICRC fails).
AGGREGATE = """
import ctypes, json, os, select, socket, sys, time
cfg = json.loads(sys.argv[1])
sys.path.insert(0, cfg["root"])
from collectives.wire import icrc
duration, rate, window = cfg["duration"], cfg["rate"], cfg["window"]
libc = ctypes.CDLL(None, use_errno=True)
home = os.open("/proc/self/ns/net", os.O_RDONLY)
tx, rx = [], []
for ns in cfg["namespaces"]:
    fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
    assert libc.setns(fd, 0x40000000) == 0, ctypes.get_errno()
    os.close(fd)
    t = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    t.bind(("eth0", 0))
    r = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
    r.bind(("eth0", 0x0800))
    r.setsockopt(263, 23, 1)                  # SOL_PACKET, PACKET_IGNORE_OUTGOING
    r.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    r.setblocking(False)
    tx.append(t)
    rx.append(r)
assert libc.setns(home, 0x40000000) == 0
first = [bytearray.fromhex(h) for h in cfg["first"]]
middle = [bytearray.fromhex(h) for h in cfg["middle"]]
msg_pkts, pkt_bytes, psn_at, va_at = cfg["msg_pkts"], cfg["pkt_bytes"], cfg["psn_at"], cfg["va_at"]
got = [0] * len(rx)
first_result = last_result = None
def drain():
    global first_result, last_result
    for i, r in enumerate(rx):
        while True:
            try:
                f = r.recv(2048)
            except BlockingIOError:
                break
            if len(f) > 1000 and f[23] == 17:    # a result: UDP, a 1 KiB payload
                got[i] += 1
                last_result = time.monotonic()
                first_result = first_result or last_result
g = g0 = cfg["g0"]
start = time.monotonic()
end = start + duration
while time.monotonic() < end:
    drain()
    now = time.monotonic()
    if g - g0 - got[0] >= window:
        if not select.select([rx[0]], [], [], 1.0)[0] and g - g0 - got[0] >= window:
            break                                 # no result for 1 s: the job stalled
        continue
    if rate and (g - g0) * len(tx) > rate * (now - start):
        time.sleep(min(0.001, (g - g0) * len(tx) / rate - (now - start)))
        continue
    for w in range(len(tx)):
        f = first[w] if g % msg_pkts == 0 else middle[w]
        f[psn_at:psn_at + 4] = (g & 0xFFFFFF).to_bytes(4, "big")
        if g % msg_pkts == 0:
            f[va_at:va_at + 8] = (g * pkt_bytes).to_bytes(8, "big")
        f[-4:] = icrc(f[14:42], f[42:-4])
        tx[w].send(f)
    g += 1
stop = time.monotonic() + 1.0
while time.monotonic() < stop and min(got) < g - g0:
    drain()
    time.sleep(0.01)
span = (last_result - first_result) if first_result else 0
print(json.dumps({"sent": (g - g0) * len(tx), "results": sum(got), "span": span, "g": g}))
"""


def sh_run(*cmd, check=True):
    done = subprocess.run(cmd, capture_output=True, text=True)
    if check and done.returncode:
        raise RuntimeError(f"{' '.join(cmd[:6])}... failed: {done.stderr.strip()[-2000:]}")
    return done


def make_hosts(mtu: int = 1500):
    """Host i in namespace bf<i>-<tag>, 10.0.i.1/24 behind gateway 10.0.i.254, its veth's
    other end bfs<i><tag> in the root namespace (for the switch or the bridge); both ends of
    MTU mtu."""
    tag = uuid.uuid4().hex[:6]
    hosts, sw_ends = {}, {}
    for i in HOSTS:
        ns, sw = f"bf{i}-{tag}", f"bfs{i}{tag}"
        sh_run("ip", "netns", "add", ns)
        sh_run("ip", "link", "add", sw, "type", "veth", "peer", "name", "eth0", "netns", ns)
        sh_run("sysctl", "-qw", f"net.ipv6.conf.{sw}.disable_ipv6=1")
        sh_run("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        sh_run("ip", "-n", ns, "link", "set", "eth0", "address", HOST_MAC[i], "mtu", str(mtu))
        sh_run("ip", "link", "set", sw, "mtu", str(mtu))
        sh_run("ip", "-n", ns, "addr", "add", f"10.0.{i}.1/24", "dev", "eth0")
        for dev_ns in (("-n", ns, "link", "set", "eth0", "up"), ("link", "set", sw, "up"),
                       ("-n", ns, "link", "set", "lo", "up")):
            sh_run("ip", *dev_ns)
        sh_run("ip", "-n", ns, "route", "add", "default", "via", f"10.0.{i}.254")
        # Checksums computed by the sender's kernel, as on the demo's hosts (fabric_net.py):
        # with offload the frames leave with partial checksums, which p4switch's ports
        # complete and simple_switch_grpc forwards as they are (the receiver drops them).
        sh_run("ip", "netns", "exec", ns, "ethtool", "-K", "eth0", "tx", "off")
        hosts[i], sw_ends[i] = ns, sw
    return hosts, sw_ends


def set_gateway_mac(hosts, macs):
    for i, ns in hosts.items():
        sh_run("ip", "-n", ns, "neigh", "replace", f"10.0.{i}.254", "lladdr", macs[i],
               "dev", "eth0")


@functools.cache
def trafgen() -> str:
    """bench/trafgen.c built with the system cc (cached by content beside the native backend's
    programs): the traffic source of the unicast and multicast runs."""
    if compiler() is None:
        sys.exit("bench_forwarding needs a C compiler (cc) for its traffic tool bench/trafgen.c "
                 "and none was found")
    source = (ROOT / "bench" / "trafgen.c").read_text()
    return str(build.executable(source, ("-O2",), "bench/trafgen.c"))


@functools.cache
def sink_program():
    """The sink's tc program, loaded once: drops every frame at the receiving interface's
    ingress (TC_ACT_SHOT) -> (bcc object that keeps it loaded, program fd)."""
    bpf = BPF(text="int sink(struct __sk_buff *skb) { return 2; }")
    return bpf, bpf.load_func(b"sink", BPF.SCHED_CLS).fd


def rx_packets(ns) -> int:
    """Frames the receiving host's eth0 took in (the veth counts a frame once it is queued for
    the host; a full queue's drop is not counted)."""
    with ebpf_tc.rtnl(ns) as ipr:
        return ipr.get_links(ifname="eth0")[0].get_attr("IFLA_STATS64")["rx_packets"]


def split_cores() -> bool:
    """Whether the sender and the forwarder get a core each (this process may use both)."""
    return {SENDER_CPU, FORWARDER_CPU} <= os.sched_getaffinity(0)


def pinned(cpu) -> list[str]:
    """The command prefix that runs a program on cpu (nothing on a machine of one core)."""
    return ["taskset", "-c", str(cpu)] if split_cores() else []


def pin_process(pid, cpu):
    """Every thread of process pid (and so the threads they start) onto cpu."""
    if split_cores():
        for tid in os.listdir(f"/proc/{pid}/task"):
            os.sched_setaffinity(int(tid), {cpu})


def next_hop_mac(ns, dst) -> str:
    """The destination MAC of host 1's frames to dst (host 1 in namespace ns), as its stack
    would put it: the multicast group's MAC, or what its neighbour table holds for its
    gateway (set_gateway_mac's)."""
    ip = [int(b) for b in dst.split(".")]
    if 224 <= ip[0] < 240:
        return f"01:00:5e:{ip[1] & 0x7F:02x}:{ip[2]:02x}:{ip[3]:02x}"
    out = sh_run("ip", "-n", ns, "-j", "neigh", "show", "10.0.1.254", "dev", "eth0").stdout
    return json.loads(out)[0]["lladdr"]


def delivered(hosts, dst, receivers, rate, payload):
    """Host 1 sends to dst for DURATION s (UDP payloads of `payload` bytes), counted at the receivers' interfaces (each one's
    ingress drops every frame: the counter, not the host's IP/UDP stack, is the sink).
    -> (offered pps, delivered pps, delivered fraction, frames delivered). Delivered pps: the
    counters' rise from 0.5 s after the sender starts to 0.2 s before it ends, over that
    window (a steady rate, not a start-up or a backlog let go after a stall); the fraction:
    every frame counted / frames sent (to each receiver)."""
    _, fd = sink_program()
    for i in receivers:
        ebpf_tc.attach(fd, "sink", "eth0", "ingress", SINK_PRIO, hosts[i])
    try:
        before = sum(rx_packets(hosts[i]) for i in receivers)
        sender = subprocess.Popen([*pinned(SENDER_CPU), "ip", "netns", "exec", hosts[1],
                                   trafgen(), "send", "eth0", HOST_MAC[1],
                                   next_hop_mac(hosts[1], dst), "10.0.1.1", dst, str(DURATION),
                                   str(payload), str(rate)], stdout=subprocess.PIPE, text=True)
        start = time.monotonic()
        samples = []
        for at in (0.5, DURATION - 0.2):
            time.sleep(max(0.0, start + at - time.monotonic()))
            samples.append((time.monotonic(), sum(rx_packets(hosts[i]) for i in receivers)))
        out, _ = sender.communicate(timeout=DURATION + 30)
        if sender.returncode:
            raise RuntimeError(f"trafgen send exited with {sender.returncode}")
        sent = int(out)
        time.sleep(0.1)                             # the last frames of the switch's queue
        total = sum(rx_packets(hosts[i]) for i in receivers) - before
    finally:
        for i in receivers:
            ebpf_tc.detach("eth0", "ingress", SINK_PRIO, hosts[i])
    (t0, n0), (t1, n1) = samples
    return (sent / DURATION, (n1 - n0) / (t1 - t0), total / max(sent * len(receivers), 1),
            total)


def unicast(hosts, rate, payload):
    """Host 1 to host 2: see delivered()."""
    return delivered(hosts, "10.0.2.1", (2,), rate, payload)


def multicast(hosts, rate, payload):
    """Host 1 to GROUP, counted at MCAST_RECEIVERS: copies delivered, summed over them."""
    return delivered(hosts, GROUP, MCAST_RECEIVERS, rate, payload)


def aggregation(hosts, rate, job):
    """The NetReduce job's workers h1..h4 on hosts 1..4 (switch ports 1..4): contributions
    offered per s, results delivered per s (summed over the workers: each stands for one
    contribution aggregated), delivered fraction, results delivered. The packet numbers go on from the job's
    last run on this switch (job.next_g): a number seen before would be a retransmission."""
    eth_ip_udp = 14 + 20 + 8
    cfg = {"root": str(ROOT), "duration": DURATION, "rate": rate, "window": WINDOW,
           "namespaces": [hosts[i] for i in HOSTS], "msg_pkts": rocev2.NR_MSG_PKTS,
           "pkt_bytes": nr.PKT_BYTES, "psn_at": eth_ip_udp + 8, "va_at": eth_ip_udp + 12,
           "g0": job.next_g, "first": [job.contribution(r, 0).hex() for r in range(len(HOSTS))],
           "middle": [job.contribution(r, 1).hex() for r in range(len(HOSTS))]}
    out = json.loads(sh_run(sys.executable, "-c", AGGREGATE, json.dumps(cfg)).stdout)
    job.next_g = out["g"]
    return (out["sent"] / DURATION, out["results"] / max(out["span"], 0.9 * DURATION),
            out["results"] / max(out["sent"], 1), out["results"])


def l3_program_routes(p4info):
    l3_routes({i: HOST_MAC[i] for i in (1, 2)}, GW_MAC)


def fabric_routes(p4info):
    """fabric.p4 routing between the hosts, as the controller writes a host route."""
    for i in HOSTS:
        te = sh.TableEntry("FabricIngress.ipv4_route")(action="FabricIngress.route_to_port")
        te.match["meta.slice_id"] = "0"
        te.match["hdr.ipv4.dstAddr"] = f"10.0.{i}.0/24"
        te.action["port"] = str(i)
        te.insert()
        te = sh.TableEntry("FabricEgress.port_mac")(action="FabricEgress.set_port_macs")
        te.match["standard_metadata.egress_port"] = str(i)
        te.action["smac"], te.action["dmac"] = GW_MAC[i], HOST_MAC[i]
        te.insert()


def fabric_group(p4info):
    """GROUP replicated to the receivers' ports, which send the copies on unchanged (no
    per-replica rewrite): the receivers take them as the group's."""
    fabric_routes(p4info)
    group = sh.MulticastGroupEntry(9)
    for port in MCAST_RECEIVERS:
        group.add(port, 1)
    group.insert()
    te = sh.TableEntry("FabricIngress.mcast_route")(action="FabricIngress.set_mcast_group")
    te.match["meta.slice_id"], te.match["hdr.ipv4.dstAddr"] = "0", GROUP
    te.action["group"] = "9"
    te.insert()


def netreduce_job(p4info, job):
    for update in job.updates(p4info):
        sh.client.write_update(update)


# traffic -> (program, what P4Runtime writes, how it is measured)
TRAFFIC = {
    "l3.p4 routed": (L3, l3_program_routes, unicast),
    "fabric.p4 routed": (FABRIC, fabric_routes, unicast),
    "fabric.p4 multicast x2": (FABRIC, fabric_group, multicast),
    "fabric.p4 netreduce x4": (FABRIC, netreduce_job, aggregation),
}


def cpu_seconds(pid) -> float:
    """User + system CPU time of process pid and all its threads so far."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def costed(pid, measure, *args):
    """measure(*args)'s result with its packet count replaced by the CPU time process pid spent per
    packet delivered (us), in the kernel on its behalf too (recvmmsg, sendmmsg into the veths)."""
    before = cpu_seconds(pid)
    *result, packets = measure(*args)
    return (*result, 1e6 * (cpu_seconds(pid) - before) / packets if packets else None)


def through_switch(target, traffic, hosts, sw_ends, configs, job, rates, payload):
    """target: p4switch-native (@IO: its --io), p4switch-python or bmv2; configs caches
    compiled programs.
    -> [(offered pps, delivered pps, delivered fraction, switch CPU us per packet)] per rate."""
    program, write, how = TRAFFIC[traffic]
    target, _, io = target.partition("@")
    if (target, program) not in configs:
        configs[(target, program)] = sh.FwdPipeConfig(
            *compile_for(target, str(program), str(configs["dir"])))
    set_gateway_mac(hosts, GW_MAC)
    switch = start_target(target, sw_ends, 1)
    if target.startswith("p4switch"):
        switch.args += ["--queue-depth", "1024"] + (["--io", io] if io else [])
    with switch:
        pid = switch.proc.pid
        pin_process(pid, FORWARDER_CPU)
        sh.setup(device_id=1, grpc_addr=switch.grpc_addr, election_id=(0, 1), verbose=False,
                 config=configs[(target, program)])
        try:
            if how is aggregation:
                job.next_g = 0                  # a new switch: the job starts afresh
                write(sh.context.p4info, job)
                return [costed(pid, aggregation, hosts, rate, job) for rate in AGG_RATES]
            write(sh.context.p4info)
            return [costed(pid, how, hosts, rate, payload) for rate in rates]
        finally:
            sh.teardown()


# Where the bridge forwards. By default in the softirq of the core that queued the frame to
# its port, i.e. inside the sender's system calls, on the sender's core; with RPS on its ports
# (rps_cpus) on FORWARDER_CPU, the core the switch process gets. Both are measured; a path's
# ratio to the bridge is to the better of the two at the same offered load.
BRIDGE_PLACES = {"linux bridge": None, "linux bridge rps": FORWARDER_CPU}


def steer(ns, ifname, cpu):
    """RPS of interface ifname (in namespace ns) to cpu, or off (None)."""
    mask = f"{1 << cpu:x}" if cpu is not None and split_cores() else "0"
    sh_run("ip", "netns", "exec", ns, "sh", "-c",
           f"for q in /sys/class/net/{ifname}/queues/rx-*; do echo {mask} > $q/rps_cpus; done")


def through_bridge(hosts, sw_ends, rates, hows, payload):
    """{measure function: {BRIDGE_PLACES name: results}}. The bridge gets a namespace of its
    own: there no host firewall (e.g. Docker's FORWARD DROP with bridge-nf-call-iptables) sees
    the bridged frames. Multicast snooping off: the bridge floods the group's frames to every
    port."""
    ns = f"bfbr-{uuid.uuid4().hex[:6]}"
    sh_run("ip", "netns", "add", ns)
    try:
        sh_run("ip", "-n", ns, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
        for sw in sw_ends.values():
            sh_run("ip", "link", "set", sw, "netns", ns)
            sh_run("ip", "-n", ns, "link", "set", sw, "master", "br0")
            sh_run("ip", "-n", ns, "link", "set", sw, "up")
        sh_run("ip", "-n", ns, "link", "set", "br0", "up")
        # Same frames as through the router: the gateway MAC resolves to the other host.
        set_gateway_mac(hosts, {1: HOST_MAC[2], 2: HOST_MAC[1], 3: HOST_MAC[1], 4: HOST_MAC[1]})
        # the bridge forwards in the kernel, in softirq work: no process to cost
        results = {}
        for name, cpu in BRIDGE_PLACES.items():
            for sw in sw_ends.values():
                steer(ns, sw, cpu)
            for how in (unicast, multicast):
                if how in hows:
                    results.setdefault(how, {})[name] = [how(hosts, rate, payload)[:3] + (None,)
                                                          for rate in rates]
        return results
    finally:
        sh_run("ip", "netns", "del", ns, check=False)


NAMES = {"p4switch-native": "p4switch native", "p4switch-python": "p4switch python",
         "bmv2": "simple_switch_grpc -O0"}


def path_name(target: str) -> str:
    base, _, io = target.partition("@")
    return NAMES[base] + (f" {io}" if io else "")


def scheduling() -> str:
    """With autogroups the kernel shares the CPU between sessions before nice applies: a
    bench niced high in a session beside busy ones gets a session's share (bench/README.md)."""
    try:
        enabled = pathlib.Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip()
        group = pathlib.Path("/proc/self/autogroup").read_text().strip()
    except OSError:
        return "no autogroups"
    if enabled != "1":
        return "autogroups off"
    return f"autogroups on, this process in {group}, itself at nice {os.nice(0)}"


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traffic", action="append", choices=list(TRAFFIC),
                        help="only this traffic (repeatable; default: all)")
    parser.add_argument("--io", action="append", choices=IO_MODES,
                        help="native backend rows, one per p4switch run --io mode (repeatable; "
                        "default: one row, the default mode)")
    parser.add_argument("--no-python", action="store_true",
                        help="leave out the Python backend (its rows take the longest)")
    parser.add_argument("--rates", type=lambda v: tuple(int(float(r)) for r in v.split(",")),
                        default=RATES, help="offered packets/s, comma-separated, 0 = flood "
                        f"(default {','.join(map(str, RATES))})")
    parser.add_argument("--payload", type=int, default=PAYLOAD,
                        help=f"UDP payload bytes of the unicast and multicast frames (default "
                        f"{PAYLOAD}); above 1,472 the veths get MTU {JUMBO_MTU}, as the demo's links")
    args = parser.parse_args()
    if not 0 <= args.payload <= JUMBO_MTU - 28:
        parser.error(f"--payload: 0 to {JUMBO_MTU - 28} bytes (the veths' MTU {JUMBO_MTU} less "
                     f"the IP and UDP headers), not {args.payload}")
    return args


def main():
    args = arguments()
    if os.geteuid() != 0:
        sys.exit("bench_forwarding needs root (network namespaces)")
    trafgen()                                   # no cc: stop before building anything
    natives = [f"p4switch-native@{io}" for io in args.io] if args.io else ["p4switch-native"]
    targets = (natives if available() else []) + ([] if args.no_python else ["p4switch-python"])
    if shutil.which("simple_switch_grpc") and shutil.which("p4c-bm2-ss"):
        targets.append("bmv2")
    traffics = {t: TRAFFIC[t] for t in (args.traffic or TRAFFIC)}
    print(f"load average before: {os.getloadavg()[0]:.1f} (1 min), {os.cpu_count()} CPUs; "
          f"{scheduling()}", flush=True)
    hosts, sw_ends = make_hosts(1500 if args.payload <= 1500 - 28 else JUMBO_MTU)
    job = Job()
    runs = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            configs = {"dir": pathlib.Path(tmp)}
            for traffic in traffics:
                for target in targets:
                    runs[(traffic, target)] = through_switch(target, traffic, hosts, sw_ends,
                                                             configs, job, args.rates,
                                                             args.payload)
        bridge = through_bridge(hosts, sw_ends, args.rates, {h for _, _, h in traffics.values()},
                                args.payload)
    finally:
        for ns in hosts.values():
            sh_run("ip", "netns", "del", ns, check=False)
    print(f"load average after: {os.getloadavg()[0]:.1f} (1 min)")
    report(targets, runs, bridge, traffics, args.rates, args.payload)


def report(targets, runs, bridge, traffics, rates_offered, payload):
    cores = (f"sender on CPU {SENDER_CPU}, forwarder on CPU {FORWARDER_CPU} (the switch "
             f"process's threads; the bridge's forwarding by RPS in 'linux bridge rps', in the "
             f"sender's softirq in 'linux bridge')" if split_cores() else "one core")
    print(f"\n{payload}-byte UDP payloads ({payload + 42}-byte frames) in frames from bench/trafgen.c (C, a PACKET_TX_RING "
          f"past the qdisc, paced to the offered load; multicast: to 2 receivers, delivered = "
          f"copies/s summed), counted at the receiving interfaces (rx_packets, ingress drops "
          f"all) from 0.5 s after the sender starts to 0.2 s before it ends; {cores}; "
          f"netreduce: 4 workers' 1 KiB contributions from one Python "
          f"process, at most {WINDOW} per worker awaiting the result, delivered = results/s "
          f"summed over the workers (= contributions aggregated/s); {DURATION:g} s per run; "
          f"vs bridge: to the better bridge row at the same load; "
          f"simple_switch_grpc is BMv2 1.15.5 built -O0")
    print(f"{'traffic':<24}{'path':<24}{'offered':>8}{'offered pps':>13}{'delivered pps':>15}"
          f"{'delivered':>11}{'vs bridge':>11}{'vs python':>11}{'switch CPU':>12}")
    for traffic, (_, _, how) in traffics.items():
        variants = bridge.get(how, {})
        for i, rate in enumerate(AGG_RATES if how is aggregation else rates_offered):
            base = max((r[i][1] for r in variants.values()), default=None)
            rows = [(name + (" (flood)" if how is multicast else ""), r[i])
                    for name, r in variants.items()] or [("linux bridge", None)]
            rows += [(path_name(t), runs[(traffic, t)][i]) for t in targets]
            python = runs[(traffic, "p4switch-python")][i][1] \
                if (traffic, "p4switch-python") in runs else None
            for name, result in rows:
                label = f"{rate // 1000}k/s" if rate else "flood"
                if result is None:
                    print(f"{traffic:<24}{name:<24}{label:>8}{'n/a: no aggregation':>39}")
                    continue
                offered, delivered, frac, cpu = result
                print(f"{traffic:<24}{name:<24}{label:>8}{offered:>13,.0f}{delivered:>15,.0f}"
                      f"{100 * frac:>10.1f}%"
                      + (f"{delivered / base:>10.2f}x" if base else f"{'-':>11}")
                      + (f"{delivered / python:>10.2f}x" if python else f"{'-':>11}")
                      + (f"{cpu:>7.2f} us/p" if cpu is not None else f"{'-':>12}"))
    print("\nEach path's capacity (the most it delivered at any offered load above), native's "
          "capacity as a multiple of it, and the switch process's CPU time per packet at that "
          "load (in the kernel on its behalf too) as a multiple of native's:")
    for traffic, (_, _, how) in traffics.items():
        native = runs.get((traffic, targets[0])) if targets[0].startswith("p4switch-native") \
            else None
        if not native:
            continue
        paths = list(bridge.get(how, {}).items())
        paths += [(path_name(t), runs[(traffic, t)]) for t in targets]
        rates = AGG_RATES if how is aggregation else rates_offered
        top = max(native, key=lambda r: r[1])
        print(f"  {traffic}")
        for name, results in paths:
            i = max(range(len(results)), key=lambda i: results[i][1])
            label = f"{rates[i] // 1000}k/s" if rates[i] else "flood"
            line = f"    {name:<24}{results[i][1]:>11,.0f} pps at {label:<7}"
            line += f"{top[1] / results[i][1]:>8.2f}x" if results[i] is not top else f"{'':>9}"
            cpu = results[i][3]
            if cpu is not None:
                line += f"{cpu:>9.2f} us/p" + (f"{cpu / top[3]:>7.1f}x" if top[3] else "")
            print(line)
    if payload == PAYLOAD:      # the target is set for 64-byte payloads
        target_line(targets, runs, bridge)


def capacity(results) -> float:
    return max(r[1] for r in results)


def target_line(targets, runs, bridge):
    """Issue #28's bound beside the figure: l3.p4 on the native backend's default I/O."""
    native = (runs.get(("l3.p4 routed", "p4switch-native"))       # --io given: its default's row
              or runs.get(("l3.p4 routed", f"p4switch-native@{IO_MODES[0]}")))
    if native is None:
        return
    have = capacity(native)
    bridge_best = max((capacity(r) for r in bridge.get(unicast, {}).values()), default=None)
    line = (f"\nTarget (issue #28, l3.p4 native, default --io): >= {TARGET_PPS:,} pps delivered: "
            f"{have:,.0f} pps, {'holds' if have >= TARGET_PPS else 'does not hold'}")
    if bridge_best:
        ratio = have / bridge_best
        line += (f"; aim >= {TARGET_VS_BRIDGE:g}x the bridge's capacity ({bridge_best:,.0f}): "
                 f"{ratio:.2f}x, {'holds' if ratio >= TARGET_VS_BRIDGE else 'does not hold'}")
    bmv2 = runs.get(("l3.p4 routed", "bmv2"))
    line += (f"; >= 10x simple_switch_grpc: {have / capacity(bmv2):.1f}x" if bmv2 else
             "; >= 10x simple_switch_grpc: not on PATH, not measured")
    print(line)


if __name__ == "__main__":
    main()
