"""docker/compose.yaml as a running system: `up -d` starts the fabric (Mininet, p4switch
switches) and fabricd as two services; fabricd serves its API over mutual TLS with the
certificates it made at its first start; fabricctl on the host, with those certificates,
through fabricd's port published on 127.0.0.1, sees every switch connected and a slice it
creates changes what the running fabric forwards, while plaintext is refused;
docker/fabricctl works through the same TLS; `down` removes everything."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fabricmodel.topology import load

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker" / "compose.yaml"
TOPOLOGY = ROOT / "controller" / "topologies" / "leafspine-2x2.yaml"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # a first image build is most of it


def _docker_answers() -> bool:
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    """A docker engine: the running one, else a dockerd started here (and stopped after)."""
    missing = [t for t in ("docker", "dockerd", "docker-compose") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"dockerd cannot start: {', '.join(missing)} not installed "
                    f"(apt-get install docker.io docker-compose)")
    if _docker_answers():
        yield
        return
    netfilter = _forwarding_state()
    if os.geteuid() != 0:
        pytest.skip("dockerd cannot start: no engine runs and starting one needs root")
    log = tmp_path_factory.mktemp("dockerd") / "dockerd.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(["dockerd"], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    deadline = time.monotonic() + 60
    while not _docker_answers():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            last = (log.read_text().strip().splitlines() or ["no output"])[-1]
            pytest.skip(f"dockerd cannot start here: {last}")
        time.sleep(0.5)
    yield
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    _restore_forwarding(netfilter)


# dockerd sets iptables' FORWARD policy to DROP and loads br_netfilter, and leaves both when
# it stops: bridged traffic on the host (bench_forwarding's Linux bridge) would then be
# filtered silently. The engine this module started is undone on the way out.
BRIDGE_NF = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")


def _forwarding_state() -> tuple[str | None, str | None]:
    out = subprocess.run(["iptables", "-S", "FORWARD"], capture_output=True, text=True)
    policy = next((line.split()[-1] for line in out.stdout.splitlines()
                   if line.startswith("-P FORWARD")), None)
    return policy, BRIDGE_NF.read_text().strip() if BRIDGE_NF.exists() else None


def _restore_forwarding(state: tuple[str | None, str | None]) -> None:
    policy, bridge_nf = state
    if policy:
        subprocess.run(["iptables", "-P", "FORWARD", policy], capture_output=True)
    if BRIDGE_NF.exists():
        BRIDGE_NF.write_text(bridge_nf or "0")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Compose:
    def __init__(self, project: str, port: int) -> None:
        self.project, self.port = project, port
        self.env = os.environ | {"FABRICD_PORT": str(port)}
        self.tls: list[str] = []          # fabricctl's --ca/--cert/--key, once fetched

    def __call__(self, *args: str, timeout: float = 600, check: bool = True):
        out = subprocess.run(["docker-compose", "-f", str(COMPOSE), "-p", self.project, *args],
                             env=self.env, capture_output=True, text=True, timeout=timeout,
                             cwd=ROOT)
        if check and out.returncode != 0:
            raise AssertionError(f"docker-compose {' '.join(args)}: exit {out.returncode}\n"
                                 f"{out.stdout[-2000:]}{out.stderr[-2000:]}")
        return out

    def fetch_certs(self, into: Path) -> None:
        """fabricd's CA and client pair, copied out of its volume."""
        for name, option in (("ca.pem", "--ca"), ("client.pem", "--cert"),
                             ("client.key", "--key")):
            out = self("exec", "-T", "fabricd", "cat", f"/var/lib/fabricd/tls/{name}",
                       timeout=60)
            (into / name).write_text(out.stdout)
            self.tls += [option, str(into / name)]

    def ctl(self, *args: str, tls: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "controller.fabricctl", "--server",
                               f"127.0.0.1:{self.port}", *(self.tls if tls else []),
                               "--timeout", "20", *args], capture_output=True, text=True,
                              timeout=60, cwd=ROOT)

    def ping(self, host: str, ip: str) -> bool:
        # three tries: one echo can be lost to a busy machine (ping exits 0 on any reply)
        out = self("exec", "-T", "fabric", "ip", "netns", "exec", f"mlf-{host}", "ping", "-c",
                   "3", "-i", "0.3", "-W", "3", ip, check=False, timeout=60)
        return out.returncode == 0


@pytest.fixture(scope="module")
def stack(engine, tmp_path_factory):
    """The image built (cached by layer content), the services up; torn down after."""
    built = subprocess.run(["bash", str(ROOT / "docker" / "build-base.sh")],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    compose = Compose(f"mlfabrictest{os.getpid()}", _free_port())
    compose("build", "fabric", timeout=900)
    try:
        compose("up", "-d", timeout=300)     # fabricd waits until the fabric is healthy
        deadline = time.monotonic() + 300
        while compose("exec", "-T", "fabricd", "test", "-s", "/var/lib/fabricd/tls/client.key",
                      check=False, timeout=60).returncode != 0:
            assert time.monotonic() < deadline, "fabricd made no TLS certificates"
            time.sleep(1)
        compose.fetch_certs(tmp_path_factory.mktemp("fabricd-tls"))
        yield compose
    finally:
        logs = compose("logs", "--no-color", check=False, timeout=60)
        compose("down", "-v", "--timeout", "30", check=False, timeout=180)
        print(logs.stdout[-4000:])


def _state(compose: Compose) -> dict:
    out = compose.ctl("--json", "state")
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def test_fabricctl_on_the_host_programs_the_running_fabric(stack):
    topo = load(TOPOLOGY)
    deadline = time.monotonic() + 300
    # fabricd may still be connecting to the switches, or pushing the pipeline again to one
    # whose first push timed out on a busy machine: `sync` succeeds once every switch holds
    # its entries
    while stack.ctl("sync").returncode != 0:
        assert time.monotonic() < deadline, "fabricd never synchronised every switch"
        time.sleep(1)
    refused = stack.ctl("state", tls=False)              # plaintext: no TLS, no API
    assert refused.returncode == 7, refused.stdout + refused.stderr
    state = _state(stack)
    assert all(s["connected"] for s in state["switches"])
    assert sorted(s["name"] for s in state["switches"]) == sorted(topo.switches)
    before = state["entries"]

    hosts = sorted(topo.hosts.values(), key=lambda h: h.rank)
    out = stack.ctl("--json", "slice", "create", "jobA", "2")
    assert out.returncode == 0, out.stdout + out.stderr
    state = _state(stack)
    (sl,) = state["slices"]
    assert sl["name"] == "jobA" and len(sl["hosts"]) == 2
    assert state["entries"] != before, "the slice wrote nothing to the switches"

    # The running fabric now isolates the slice: its two hosts reach each other, and
    # neither reaches a host outside it, which it could before.
    a, b = (topo.host(h) for h in sl["hosts"])
    other = next(h for h in hosts if h.name not in sl["hosts"])
    assert stack.ping(a.name, b.ip)
    assert not stack.ping(a.name, other.ip)
    assert stack.ctl("slice", "delete", "jobA").returncode == 0
    assert stack.ping(a.name, other.ip)


def test_fabricctl_wrapper_needs_only_compose(stack):
    """docker/fabricctl: the container's fabricctl, for a host without the project's venv."""
    out = subprocess.run([str(ROOT / "docker" / "fabricctl"), "--json", "state"],
                         env=stack.env | {"COMPOSE_PROJECT_NAME": stack.project},
                         capture_output=True, text=True, timeout=120, cwd="/")
    assert out.returncode == 0, out.stdout + out.stderr
    assert sorted(s["name"] for s in json.loads(out.stdout)["switches"]) == \
        sorted(load(TOPOLOGY).switches)
