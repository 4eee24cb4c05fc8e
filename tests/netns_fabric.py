"""A leaf-spine of `p4switch run` processes configured only by fabricd (which pushes
fabric.p4), hosts in namespaces: the fabric the fabricd and NetReduce end-to-end tests run
on. The switches' interfaces live in one namespace (Mininet's names), each host in its own."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pyroute2 import IPRoute

from fabricmodel.topology import load
from p4switch.device.process import SwitchProcess
from tests.conftest import NetnsFactory
from tests.fabricd_process import compile_fabric
from tests.targets import BMv2Process

# fabricd's --compiler for BMv2 (p4switch: fabricd's default)
BMV2_COMPILER = "p4c-bm2-ss --p4runtime-files {p4info} -o {config} {program}"

REPO = Path(__file__).resolve().parents[1]


def sh(ns: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", ns, *args], capture_output=True, text=True,
                          check=check, timeout=300)


# Fabric.read's reader: one JSON request a line, [address, device id, kind, [[name, index],
# ...]], one JSON reply a line, {"values": [...]} or {"error": "..."}.
_READER = """\
import json, sys, grpc
from p4.v1 import p4runtime_pb2 as pb, p4runtime_pb2_grpc as rpc
stubs = {}
for line in sys.stdin:
    addr, dev, kind, reads = json.loads(line)
    try:
        if addr not in stubs:
            stubs[addr] = rpc.P4RuntimeStub(grpc.insecure_channel(addr))
        stub = stubs[addr]
        info = stub.GetForwardingPipelineConfig(pb.GetForwardingPipelineConfigRequest(
            device_id=dev, response_type=0)).config.p4info
        ids = {x.preamble.name: x.preamble.id
               for x in (info.registers if kind == "register" else info.counters)}
        out = []
        for name, index in reads:
            r = pb.ReadRequest(device_id=dev)
            e = r.entities.add()
            if kind == "register":
                e.register_entry.register_id = ids[name]
                e.register_entry.index.index = index
            else:
                e.counter_entry.counter_id = ids[name]
                e.counter_entry.index.index = index
            for resp in stub.Read(r):
                for ent in resp.entities:
                    out.append(int.from_bytes(ent.register_entry.data.bitstring, "big")
                               if kind == "register" else ent.counter_entry.data.packet_count
                               if kind == "packets" else ent.counter_entry.data.byte_count)
        reply = {"values": out}
    except Exception as exc:
        reply = {"error": repr(exc)}
    print(json.dumps(reply), flush=True)
"""


class Fabric:
    def __init__(self, topo, fab: str, hosts: dict[str, str], devices: dict[str, str],
                 server: str, switches: dict[str, str], procs: dict | None = None,
                 state: Path | None = None, log: Path | None = None,
                 controls: dict[str, Path] | None = None):
        self.topo, self.fab, self.hosts, self.devices = topo, fab, hosts, devices
        self.server, self.switches = server, switches
        self.procs = procs or {}       # switch -> its SwitchProcess (p4switch)
        self.state, self.log = state, log      # fabricd's --state file and its log
        self.controls = controls or {}  # switch -> its control socket (p4switch)
        self._compiled = None
        self._reader: subprocess.Popen | None = None

    def fabricctl(self, *args: str) -> subprocess.CompletedProcess:
        """fabricctl inside the fabric's namespace, where fabricd listens; never raises."""
        # --timeout 120: a change reconciles every switch, which took over fabricctl's 30 s
        # default at a load average of 35
        return sh(self.fab, sys.executable, "-m", "controller.fabricctl", "--server",
                  self.server, "--timeout", "120", *args, check=False)

    def ctl(self, *args: str) -> dict:
        """fabricctl --json, which must succeed; its reply decoded."""
        out = self.fabricctl("--json", *args)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout) if out.stdout.strip() else {}

    def ip(self, host: str) -> str:
        return self.topo.host(host).ip

    def read(self, switch: str, reads: list[tuple[str, int]], kind: str = "register") -> list[int]:
        """Register cells (kind "register"), counter byte counts ("counter") or packet counts
        ("packets") read over P4Runtime from inside the fabric's namespace, where the
        switches serve gRPC, by one reader process that lives as long as the fabric (a
        process per read spent most of a read importing grpc)."""
        if self._reader is None or self._reader.poll() is not None:
            self._reader = subprocess.Popen(
                ["ip", "netns", "exec", self.fab, sys.executable, "-c", _READER],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        request = [self.switches[switch], self.topo.switch(switch).device_id, kind, reads]
        self._reader.stdin.write(json.dumps(request) + "\n")
        self._reader.stdin.flush()
        reply = json.loads(self._reader.stdout.readline() or '{"error": "the reader died"}')
        assert "error" not in reply, (switch, reads, reply["error"])
        return reply["values"]

    def close(self) -> None:
        """Ends the reader process, if one runs."""
        if self._reader is not None:
            self._reader.stdin.close()
            self._reader.wait(10)
            self._reader = None

    def host_port(self, host: str) -> str:
        """The switch-side interface of `host`'s cable (in the fabric's namespace)."""
        lk = next(lk for lk in self.topo.links if host in (lk.a, lk.b))
        return lk.b_intf if lk.a == host else lk.a_intf

    def links(self) -> IPRoute:
        """A netlink socket in the fabric's namespace. Reading counters and setting links
        through it forks nothing: an `ip` started from this process took up to 4 s at a load
        average of 20, long enough to push a test's event past the collective it belongs in."""
        return IPRoute(netns=self.fab)

    def wait_for_traffic(self, intf: str, nbytes: int, timeout: float = 120.0) -> None:
        """Poll until `nbytes` more have come in on `intf`: a collective is under way."""
        with self.links() as ipr:
            (index,) = ipr.link_lookup(ifname=intf)

            def rx_bytes() -> int:
                return ipr.get_links(index)[0].get("IFLA_STATS64")["rx_bytes"]

            base, deadline = rx_bytes(), time.monotonic() + timeout
            while rx_bytes() - base < nbytes:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no traffic on {intf} within {timeout} s")
                time.sleep(0.01)

    def restart_switch(self, name: str) -> float:
        """SIGKILL switch `name` (a crash: no goodbye to fabricd) and start it again on the
        same interfaces and P4Runtime address, empty; -> seconds until it serves again."""
        old = self.procs[name]
        old.proc.kill()
        old.proc.wait(10)
        args = [a for a in old.args if a not in ("--grpc-addr", "127.0.0.1:0")]
        started = time.monotonic()
        new = SwitchProcess([*args, "--grpc-addr", self.switches[name]], netns=self.fab)
        self.procs[name] = new.__enter__()
        return time.monotonic() - started

    def difference(self) -> dict[str, dict[str, int]]:
        """Per switch, entries duplicated, missing and stale against fabricd's saved intent,
        read back over P4Runtime from inside the fabric's namespace (p4switch's fabric.p4)."""
        if self._compiled is None:
            self._compiled = compile_fabric(self.state.parent)[:2]
        code = ("import json, sys\n"
                "from pathlib import Path\n"
                "from controller.p4rt import Pipeline\n"
                "from tests.fabricd_process import difference, intended, read_back\n"
                "addresses, ids = json.loads(sys.argv[1]), json.loads(sys.argv[2])\n"
                "pipe = Pipeline.from_files(sys.argv[4], sys.argv[5])\n"
                "want, got = intended(Path(sys.argv[3]), pipe), read_back(addresses, ids, pipe)\n"
                "print(json.dumps({n: difference(want[n], got[n]) for n in addresses}))\n")
        ids = {n: self.topo.switch(n).device_id for n in self.switches}
        out = sh(self.fab, sys.executable, "-c", code, json.dumps(self.switches),
                 json.dumps(ids), str(self.state), *map(str, self._compiled))
        return json.loads(out.stdout)


def quiet(ns: str) -> None:
    """No IPv6 on new interfaces: the kernel's own ND/MLD frames would show in the counters."""
    for knob in ("net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"):
        sh(ns, "sysctl", "-qw", knob, check=False)


def leaf_spine(name: str, hosts_per_leaf: int, leaves: int = 2, spines: int = 1) -> str:
    """A leaf-spine topology file's text."""
    return (f"name: {name}\nkind: leaf-spine\nleaves: {leaves}\nspines: {spines}\n"
            f"hosts_per_leaf: {hosts_per_leaf}\n")


def module_fabric(tmp_path_factory, topology_yaml: str, name: str):
    """A module-scoped fixture's body: yields (the Fabric, its topology file) and tears the
    fabric and its namespaces down after the module."""
    factory = NetnsFactory()
    tmp = tmp_path_factory.mktemp(name)
    try:
        for fab in build(factory, tmp, topology_yaml):
            yield fab, tmp / "topology.yaml"
    finally:
        factory.cleanup()


def build(netns_factory, tmp_path: Path, topology_yaml: str, queue_depth: int | None = None,
          target: str = "p4switch", fabricd_args: tuple[str, ...] = (),
          switch_args: tuple[str, ...] = ()):
    """Yields the Fabric of `target` switches ("p4switch" or "bmv2"); stops fabricd and every
    switch afterwards. queue_depth: p4switch's egress queues in packets (its default if
    None). fabricd_args: more options for fabricd (e.g. --web); switch_args: for every
    p4switch (e.g. --queue-rate), each of which also gets a control socket."""
    path = tmp_path / "topology.yaml"
    path.write_text(topology_yaml)
    topo = load(path)
    fab = netns_factory.netns("nrf")
    quiet(fab)
    hosts, devices = {}, {}
    for lk in topo.links:
        if lk.a in topo.hosts:
            h = topo.host(lk.a)
            ns = hosts[h.name] = netns_factory.netns(h.name)
            quiet(ns)
            netns_factory.veth(ns, fab, name_a="eth0", name_b=lk.b_intf)
            devices[h.name] = "eth0"
            leaf = topo.switch(h.leaf)
            for cmd in (["link", "set", "eth0", "address", h.mac],
                        ["addr", "add", f"{h.ip}/32", "dev", "eth0"],
                        ["route", "add", leaf.gateway_ip, "dev", "eth0"],
                        ["route", "add", "10.0.0.0/8", "via", leaf.gateway_ip],
                        ["route", "add", "224.0.0.0/4", "dev", "eth0"],
                        ["neigh", "add", leaf.gateway_ip, "lladdr", h.gateway_mac, "dev",
                         "eth0"]):
                subprocess.run(["ip", "-n", ns, *cmd], check=True, capture_output=True)
            if target == "bmv2":    # BMv2 forwards a veth's unfilled (offloaded) checksums
                sh(ns, "ethtool", "-K", "eth0", "tx", "off")
        else:
            netns_factory.veth(fab, fab, name_a=lk.a_intf, name_b=lk.b_intf)
    procs, addresses, controls = {}, {}, {}
    daemon = fabric = None
    try:
        unstarted = {}
        for sw in topo.switches.values():
            ports = {port: lk.a_intf if lk.a == sw.name else lk.b_intf
                     for port, lk in sorted(topo.ports(sw.name).items())}
            if target == "bmv2":
                unstarted[sw.name] = BMv2Process(ports, sw.device_id, netns=fab)
            else:
                ifaces = [a for port, name in ports.items() for a in ("-i", f"{port}@{name}")]
                depth = ["--queue-depth", str(queue_depth)] if queue_depth else []
                controls[sw.name] = tmp_path / f"{sw.name}.ctl"
                unstarted[sw.name] = SwitchProcess(
                    ["--no-p4", "--device-id", str(sw.device_id), *depth, "--control-socket",
                     str(controls[sw.name]), *switch_args, *ifaces], netns=fab)
        procs.update(_start_all(unstarted))
        addresses.update({name: proc.grpc_addr for name, proc in procs.items()})
        port_file = tmp_path / "port"
        state = tmp_path / "fabricd-state.json"
        args = [sys.executable, "-m", "controller.fabricd", "--topology", str(path),
                "--state", str(state), "--listen", "127.0.0.1:0", "--port-file",
                str(port_file)]
        if target == "bmv2":
            args += ["--compiler", BMV2_COMPILER]
        args += [a for name, addr in addresses.items() for a in ("--switch", f"{name}={addr}")]
        args += list(fabricd_args)
        log = (tmp_path / "fabricd.log").open("w")
        daemon = subprocess.Popen(["ip", "netns", "exec", fab, *args], cwd=REPO, stderr=log)
        deadline = time.monotonic() + 180    # p4c-bm2-ss at -O0 on a busy machine
        while not port_file.exists() or not port_file.read_text().strip():
            assert daemon.poll() is None, (tmp_path / "fabricd.log").read_text()
            assert time.monotonic() < deadline, "fabricd did not start"
            time.sleep(0.1)
        fabric = Fabric(topo, fab, hosts, devices, f"127.0.0.1:{port_file.read_text().strip()}",
                        addresses, procs, state, tmp_path / "fabricd.log", controls)
        # every switch holds its entries (on a busy machine one can time out at fabricd's
        # start; its watchdog writes it a moment later)
        while (done := fabric.fabricctl("sync")).returncode != 0:
            assert time.monotonic() < deadline + 60, done.stdout + done.stderr
            time.sleep(0.5)
        yield fabric
    finally:
        if fabric is not None:
            fabric.close()
        if daemon is not None and daemon.poll() is None:
            daemon.terminate()
            daemon.wait(10)
        with ThreadPoolExecutor(max(1, len(procs))) as pool:
            list(pool.map(lambda proc: proc.stop(), procs.values()))


def _start_all(unstarted: dict) -> dict:
    """Every switch started at once (each start is mostly a Python process importing the
    target, which a second core halves); -> name -> started switch, in `unstarted`'s order.
    One that fails to start stops the others and raises its error."""
    with ThreadPoolExecutor(len(unstarted)) as pool:
        futures = {name: pool.submit(proc.__enter__) for name, proc in unstarted.items()}
    started = {name: f.result() for name, f in futures.items() if f.exception() is None}
    failed = [f.exception() for f in futures.values() if f.exception() is not None]
    if failed:
        for proc in started.values():
            proc.stop()
        raise failed[0]
    return started
