"""Start one rank process per namespace (or host address) and gather their result lines.

The policy's tc eBPF program (collectives.lb.program_of) is attached to every rank's interface,
in the rank's namespace, before the ranks start and detached when they end. It is compiled
once per launching process and shared by every rank (its maps are keyed so that they can be);
each rank reaches the maps through the attached program and writes its own connections."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

import grpc

from ebpf import EbpfCompileError, EbpfUnavailable, Program, Spray, TcError

from . import fabric_view, native
from .lb import host_class, program_of
from .native import steer
from .rank_spec import RankSpec
from .transport import TransportConfig

ROOT = Path(__file__).resolve().parent.parent
# How long the other ranks may take to end, or report what they saw, once one rank failed.
FAILED_RANK_GRACE_S = 5.0
_loaded: dict[type, Program] = {}


class LaunchError(RuntimeError):
    pass


def policy_program(policy: str) -> Program | None:
    """The loaded (not attached) program of `policy`, compiled on first use; None for a policy
    without one (ecmp). LaunchError with one sentence when eBPF cannot be loaded here."""
    cls = program_of(policy)
    if cls is None:
        return None
    if cls not in _loaded:
        try:
            _loaded[cls] = cls.load()
        except (EbpfUnavailable, EbpfCompileError) as exc:
            raise LaunchError(f"policy {policy} runs in eBPF, which cannot be loaded here: "
                              f"{exc}") from None
    return _loaded[cls]


def interface_of(ip: str, netns: str | None) -> str:
    """The interface that holds `ip` (in `netns`)."""
    cmd = ["ip", "-o", "-4", "addr", "show"]
    if netns:
        cmd = ["ip", "-n", netns, *cmd[1:]]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) > 3 and parts[3].split("/")[0] == ip:
            return parts[1].split("@")[0]
    where = f" in namespace {netns}" if netns else ""
    raise LaunchError(f"no interface holds {ip}{where}")


@contextmanager
def attached(policy: str, ips: list[str], namespaces: list[str | None]):
    """Attaches the policy's program to every rank's interface; yields each rank's interface
    name; detaches at the end. The maps start empty (a spray range is set)."""
    prog = policy_program(policy)
    if prog is None:                         # ecmp: nothing on the path
        yield [None] * len(ips)
        return
    devs = [interface_of(ip, ns) for ip, ns in zip(ips, namespaces, strict=True)]
    if isinstance(prog, Spray):              # the whole RoCEv2 source-port range
        prog.configure()
        prog.reset_counters()
    else:
        prog.clear()
    places = list(dict.fromkeys(zip(devs, namespaces, strict=True)))
    try:
        for dev, ns in places:
            prog.attach(dev, ns)
        yield devs
    except TcError as exc:
        raise LaunchError(f"cannot attach the {policy} program: {exc}") from None
    finally:
        for dev, ns in places:
            try:
                type(prog).detach(dev, ns)
            except TcError:
                pass                          # the namespace is gone already


def _steered(ips: list[str], namespaces: list[str | None], transport: dict):
    """The native transport's steering (native/steer.py) on every rank's interface."""
    if (transport.get("backend") or native.default_backend()) != "native":
        return nullcontext()
    places = {}
    for ip, ns in zip(ips, namespaces, strict=True):
        try:
            places[interface_of(ip, ns), ns] = None
        except LaunchError:
            pass                        # an address the launcher cannot see: not steered
    return steer.steered(list(places), transport.get("dport", TransportConfig.dport))


def _wait_ranks(procs: list[subprocess.Popen], timeout: float,
                grace: float = FAILED_RANK_GRACE_S) -> list[int | str]:
    """Each rank's exit code, or "timeout"/"stopped" for a rank killed at the deadline. Once a
    rank fails, the others get `grace` seconds to end or say what they saw, then are stopped
    (as mpirun ends a job): a peer of a dead rank would otherwise wait for its data until
    the launch's timeout."""
    deadline = time.monotonic() + timeout
    failed_at = None
    while True:
        codes = [proc.poll() for proc in procs]
        if all(code is not None for code in codes):
            return codes
        now = time.monotonic()
        if failed_at is None and any(code not in (None, 0) for code in codes):
            failed_at = now
            deadline = min(deadline, now + grace)
        if now >= deadline:
            killed = set()
            for rank, proc in enumerate(procs):
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                    killed.add(rank)
            why = "stopped" if failed_at else "timeout"
            return [why if rank in killed else proc.returncode
                    for rank, proc in enumerate(procs)]
        time.sleep(0.05)


def launch(ips: list[str], runs: list[dict], *, namespaces: list[str | None] | None = None,
           transport: dict | None = None, policy: str = RankSpec.policy, qps: int = RankSpec.qps,
           seed: int = RankSpec.seed, port: int = RankSpec.port,
           out_dir: str | Path | None = None, timeout: float = 120.0,
           step_timeout: float = RankSpec.timeout, join_timeout: float = RankSpec.join_timeout,
           topology: str | None = None, fabricd: str | None = None,
           during=None, program: str = "collectives.runner") -> list[dict]:
    """Runs `runs` (dicts: collective, algo, dtype, elements[, seed, options]) on every rank;
    returns every rank's result rows. A failing rank raises LaunchError with its stderr.
    `fabricd`: its address, from which Ethereal learns the installed fabric. `during`: called
    once the ranks run (the demo's failure injection). `program`: the module each rank runs
    with the spec (collectives.train: a training run, its `runs` training configurations)."""
    namespaces = namespaces or [None] * len(ips)
    if len(namespaces) != len(ips):
        raise ValueError(f"{len(namespaces)} namespaces for {len(ips)} rank addresses")
    view = None
    if fabricd and host_class(policy).uses_fabric_view:
        try:
            view = fabric_view.fetch(fabricd)
        except grpc.RpcError as err:
            raise LaunchError(f"cannot ask fabricd at {fabricd} for the fabric: "
                              f"{err.code().name}") from None
    with attached(policy, ips, namespaces) as devs, \
            _steered(ips, namespaces, transport or {}), \
            tempfile.TemporaryDirectory(prefix="collectives-") as tmp:
        procs = []
        for rank, ns in enumerate(namespaces):
            spec = RankSpec(ips, rank, runs, str(Path(tmp) / f"rank{rank}.jsonl"),
                            transport or {}, policy, qps, seed, port, step_timeout,
                            join_timeout, str(topology) if topology else None, view,
                            devs[rank], str(out_dir) if out_dir else None)
            path = Path(tmp) / f"rank{rank}.json"
            spec.write(path)
            cmd = [sys.executable, "-m", program, str(path)]
            if ns:
                cmd = ["ip", "netns", "exec", ns, *cmd]
            err = open(Path(tmp) / f"rank{rank}.err", "w")  # noqa: SIM115 - closed below
            env = os.environ | {"PYTHONPATH": str(ROOT)}
            procs.append((subprocess.Popen(cmd, stdout=err, stderr=err, env=env), err))
        if during is not None:
            during()
        codes = _wait_ranks([proc for proc, _ in procs], timeout)
        failed = []
        for rank, ((_, err), code) in enumerate(zip(procs, codes, strict=True)):
            err.close()
            if code != 0:
                text = Path(err.name).read_text().strip().splitlines()
                failed.append(f"rank {rank} ({code}): {text[-1] if text else ''}")
        if failed:
            raise LaunchError("; ".join(failed))
        return [json.loads(line) for rank in range(len(ips))
                for line in (Path(tmp) / f"rank{rank}.jsonl").read_text().splitlines()]
