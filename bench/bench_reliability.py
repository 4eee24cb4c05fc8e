"""Reliability under hostile or unlucky input, one table: each row is one check, how much of
it ran, what it measured and how many failures it saw (crashes, divergences, lost or
duplicated entries, inexact results); the run exits 1 when any row has a failure.

Sections (each a function returning rows; `--only NAME` runs some of them):
  fuzz          fabric.p4 configured as the demo configures it (tests/p4switch/fabric_fuzz.py:
                routes, ECMP hashed and sprayed, pins, a slice, a lossy multicast group,
                SwitchML and NetReduce jobs) on a leaf, a spine and a spraying leaf; frames
                made from valid packets of every kind, kept, truncated or mutated, through the
                Python and the native backend frame by frame: per backend, frames, crashes,
                divergences from the Python backend (outputs, then counters and registers),
                the process's memory growth after a fifth of the frames
  bad_packets   truncated, mutated and re-signed RoCEv2 / 0xC0 / 0xC1 packets sent to 4
                namespaced ranks during ring, halving-doubling, multicast Allgather and
                all-to-all (tests/collectives/malformed.py): packets sent, counted by the
                ranks (bad_packets + icrc_errors), ranks that died, results exact (root)
  switch_restart a leaf SIGKILLed mid ring all-reduce on the netns fabric, restarted empty on
                the same ports: seconds to serve again and to be re-pushed by fabricd, CCT
                next to an undisturbed run, results exact, entries off the intent (root)
  fabricd_restart fabricd SIGKILLed mid-burst, a switch changed behind its back, fabricd
                restarted: entries duplicated / missing / stale against the intent
  tls           P4Runtime per RPC (new channel + call; call on an open channel) under
                plaintext, TLS and mutual TLS, side by side
  hostile       requests an attacker or a careless user sends: device configs carrying code
                (both backends, VERIFY / VERIFY_AND_COMMIT / VERIFY_AND_SAVE + COMMIT: marker
                files written = code executed), idle StreamChannels and a 10,000-query Read
                next to the primary's RPCs (seconds frozen beyond the issue's bounds: 1 s per
                RPC, 100 ms per Write), a YAML bomb and oversized topologies to fabricd (refused
                within 1 s and +100 MB), and bad start-up / command-line inputs (tracebacks)
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "collectives"))
sys.path.insert(0, str(ROOT / "tests" / "p4switch"))
sys.path.insert(0, str(ROOT / "tests" / "controller"))

from tabulate import tabulate  # noqa: E402

from collectives.launch import LaunchError, launch  # noqa: E402


@dataclass
class Row:
    check: str          # what ran
    amount: str         # how much of it
    result: str         # what it measured
    failures: int       # crashes, divergences, lost/duplicated entries, inexact results


def bad_packets(args) -> list[Row]:
    """Malformed packets to the ranks of running collectives (needs root)."""
    if os.geteuid() != 0:
        return [Row("bad packets to ranks", "skipped", "needs root for namespaces", 0)]
    from bridge_net import make_bridge_net  # noqa: PLC0415  (tests/collectives)

    from tests.conftest import NetnsFactory  # noqa: PLC0415

    factory = NetnsFactory()
    try:
        net = make_bridge_net(factory, 4)
        count, rate = args.bad_packets, 4000
        algos = [("allreduce", "ring"), ("allreduce", "halving-doubling"),
                 ("allgather", "multicast"), ("alltoall", "direct")]
        # a first all-reduce, then enough collectives to outlast the stream, which runs from
        # the end of the first to the end of the last
        repeats = max(1, round(count / rate / 1.5))
        plan = [{"collective": "allreduce", "algo": "ring", "dtype": "int32",
                 "elements": 1000}] + \
            [{"collective": c, "algo": a, "dtype": "int32", "elements": 250_001}
             for _ in range(repeats) for c, a in algos]
        with tempfile.TemporaryDirectory(prefix="bench-rel-") as tmp:
            spec = Path(tmp) / "inject.json"
            spec.write_text(json.dumps({"seed": 11, "ranks": net.ips, "count": count,
                                        "rate": rate, "via": net.bridge_ip,
                                        "start_when": f"{tmp}/run0_rank0.npy",
                                        "stop_when": f"{tmp}/run{len(plan) - 1}_rank0.npy"}))
            injector = []

            def during():
                injector.append(subprocess.Popen(
                    ["ip", "netns", "exec", net.bridge_ns, sys.executable,
                     str(ROOT / "tests" / "collectives" / "malformed.py"), str(spec)],
                    stdout=subprocess.PIPE, text=True))

            t0 = time.monotonic()
            try:
                rows = launch(net.ips, plan, namespaces=net.namespaces, timeout=600,
                              during=during, out_dir=tmp)
                died = 0
            except LaunchError as err:
                print(f"bad_packets: {err}", file=sys.stderr)
                rows, died = [], 1
            out, _ = injector[0].communicate(timeout=600)
            elapsed = time.monotonic() - t0
        sent = int(out or 0)
        counted = sum(r["bad_packets"] + r["icrc_errors"] for r in rows)
        inexact = sum(not r["ok"] for r in rows)
        return [Row("bad packets to ranks",
                    f"{sent:,} packets to 4 ranks, {len(plan)} collectives, {elapsed:.0f} s",
                    f"{counted:,} counted, {died} crashed, "
                    f"{len(rows) - inexact}/{len(rows)} results exact", died + inexact)]
    finally:
        factory.cleanup()


def fuzz(args) -> list[Row]:
    """fabric.p4 configured, fuzzed on both p4switch backends."""
    import fabric_fuzz  # noqa: PLC0415  (tests/p4switch)

    import p4switch  # noqa: PLC0415
    from p4switch.native import available  # noqa: PLC0415

    backends = ("python", "native") if available() else ("python",)
    compiled = p4switch.compile_program(str(fabric_fuzz.FABRIC_P4))
    per = -(-args.fuzz_frames // len(fabric_fuzz.SWITCHES))
    reports = []
    for mode, name in fabric_fuzz.SWITCHES:
        reports.append(fabric_fuzz.fuzz(compiled, mode, name, per, seed=args.seed,
                                        backends=backends))
        r = reports[-1]
        if r.first_divergence:
            kind, port, frame, outs = r.first_divergence
            print(f"fuzz: {r.switch}: first divergence: {kind} frame on port {port}: {frame}\n"
                  f"      outputs: {outs}", file=sys.stderr)
    frames = sum(r.frames for r in reports)
    rows = []
    for b in backends:
        crashes = sum(r.crashes[b] for r in reports)
        divergences = sum(r.divergences for r in reports) if b != backends[0] else 0
        unequal = sum(not r.state_equal for r in reports) if b != backends[0] else 0
        seconds = sum(r.seconds[b] for r in reports)
        growth = max(r.rss_growth_kib[b] for r in reports)
        rows.append(Row(f"fuzz configured fabric.p4 ({b})",
                        f"{frames:,} frames on {len(reports)} switches",
                        f"{crashes} crashed, {divergences} diverged, "
                        f"{unequal} with other counters/registers, RSS +{growth:,} KiB, "
                        f"{frames / seconds:,.0f} frames/s", crashes + divergences + unequal))
    if len(backends) == 1:
        rows.append(Row("fuzz configured fabric.p4 (native)", "skipped",
                        "no C compiler for the native backend", 0))
    return rows


def switch_restart(args) -> list[Row]:
    """A leaf SIGKILLed in the middle of a ring all-reduce on the netns fabric and restarted
    empty on the same ports (needs root): the time it took to serve again, to be re-pushed by
    fabricd, the collective's time next to an undisturbed one, exactness, entries off."""
    if os.geteuid() != 0:
        return [Row("switch restart mid-collective", "skipped", "needs root for namespaces", 0)]
    from tests.conftest import NetnsFactory  # noqa: PLC0415
    from tests.netns_fabric import build  # noqa: PLC0415

    topo = (ROOT / "controller" / "topologies" / "leafspine-2x2.yaml").read_text()
    factory = NetnsFactory()
    with tempfile.TemporaryDirectory(prefix="bench-rel-") as tmp:
        fabric_gen = build(factory, Path(tmp), topo, queue_depth=512)
        net = next(fabric_gen)
        try:
            hosts = ["h1", "h2", "h3", "h4"]
            plan = [{"collective": "allreduce", "algo": "ring", "dtype": "int32",
                     "elements": args.restart_elements}]
            kw = {"namespaces": [net.hosts[h] for h in hosts], "timeout": 600,
                  "step_timeout": 300, "transport": {"min_rto": 0.2, "max_rto": 0.5,
                                                     "retry_limit": 400}}
            ips = [net.ip(h) for h in hosts]
            quiet = launch(ips, plan, **kw)
            times = {}

            def crash():
                net.wait_for_traffic(net.host_port("h1"), args.restart_elements)   # mid-run
                times["killed"] = time.monotonic()
                log_at = len(net.log.read_text())       # fabricd's lines from the kill on
                times["restart"] = net.restart_switch("leaf1")
                while "leaf1: re-synchronised" not in net.log.read_text()[log_at:]:
                    time.sleep(0.02)
                times["resynced"] = time.monotonic() - times["killed"]

            crasher = threading.Thread(target=crash, daemon=True)
            hit = launch(ips, plan, during=crasher.start, **kw)
            crasher.join(120)
            off = sum(sum(d.values()) for d in net.difference().values())
        finally:
            fabric_gen.close()
            factory.cleanup()
    cct = max(r["cct_s"] for r in hit)
    inexact = sum(not r["ok"] for r in hit)
    return [Row("switch restart mid-collective",
                f"leaf1 killed once h1 sent it {args.restart_elements / 2**20:.0f} MiB of a "
                f"ring all-reduce of {args.restart_elements * 4 / 2**20:.0f} MiB (4 ranks)",
                f"serving again {times.get('restart', float('nan')):.2f} s, re-pushed "
                f"{times.get('resynced', float('nan')):.2f} s after the kill; CCT "
                f"{cct:.2f} s vs {max(r['cct_s'] for r in quiet):.2f} s undisturbed; "
                f"{sum(r['packets_retransmitted'] for r in hit)} retransmitted; "
                f"{len(hit) - inexact}/{len(hit)} exact; {off} entries off",
                inexact + off + ("resynced" not in times))]


def fabricd_restart(args) -> list[Row]:
    """fabricd SIGKILLed in the middle of a burst of requests to 4 p4switch processes, one
    switch changed behind its back, fabricd restarted: entries duplicated, missing, stale."""
    from p4switch.device.process import SwitchProcess  # noqa: PLC0415
    from tests.fabricd_process import (  # noqa: PLC0415
        Fabricd,
        compile_fabric,
        difference,
        intended,
        meddle,
        read_back,
    )

    ids = {"leaf1": 1, "leaf2": 2, "spine1": 3, "spine2": 4}
    topo = ROOT / "controller" / "topologies" / "leafspine-2x2.yaml"
    with tempfile.TemporaryDirectory(prefix="bench-rel-") as tmp:
        compiled = compile_fabric(Path(tmp))
        switches = {n: SwitchProcess(["--no-p4", "--device-id", str(i)]).__enter__()
                    for n, i in ids.items()}
        daemon = Fabricd(Path(tmp), compiled, {n: sw.grpc_addr for n, sw in switches.items()},
                         topo)
        try:
            server = daemon.start()
            fabricctl = [sys.executable, "-m", "controller.fabricctl", "--server", server]
            subprocess.run([*fabricctl, "step", "install", "a2a", "--pins"]
                           + [a for f in ("h1:h3", "h2:h4", "h3:h1", "h4:h2")
                              for a in ("--flow", f"{f}:65536")], check=True, cwd=ROOT,
                           capture_output=True)
            burst = subprocess.Popen(
                ["sh", "-c", " ; ".join(" ".join([*fabricctl, "group", "create", f"g{i}",
                                                  "h1", "h2", "h3", "h4"])
                                        for i in range(args.burst))],
                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            state = Path(tmp) / "state.json"
            while '"g1"' not in state.read_text() and burst.poll() is None:
                time.sleep(0.02)
            daemon.kill()
            burst.wait(120)
            meddle(daemon.addresses, ids["leaf2"], compiled[2], "leaf2")
            want = intended(state, compiled[2])
            before = read_back(daemon.addresses, ids, compiled[2])
            t0 = time.monotonic()
            daemon.start()
            took = time.monotonic() - t0
            after = read_back(daemon.addresses, ids, compiled[2])
        finally:
            daemon.stop()
            for sw in switches.values():
                sw.stop()
    total = {k: sum(difference(want[n], after[n])[k] for n in ids)
             for k in ("duplicated", "missing", "stale")}
    off_before = sum(sum(difference(want[n], before[n]).values()) for n in ids)
    entries = sum(want[n].size() for n in ids)
    return [Row("fabricd restart after SIGKILL",
                f"{entries} entries on 4 switches, killed mid-burst of {args.burst} requests, "
                f"{off_before} entries off before the restart",
                f"{total['duplicated']} duplicated, {total['missing']} missing, "
                f"{total['stale']} stale after it (start + reconcile {took:.1f} s)",
                sum(total.values()))]


def tls_cost(args) -> list[Row]:
    """Per RPC, against p4switch's P4Runtime server: a new channel (TCP + handshake) and one
    Capabilities call, and one call on an open channel; plaintext, TLS, mutual TLS, measured
    side by side (medians)."""
    import statistics  # noqa: PLC0415

    import grpc  # noqa: PLC0415
    from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc  # noqa: PLC0415

    from grpctls import ClientTLS, channel  # noqa: PLC0415
    from p4switch.device.process import SwitchProcess  # noqa: PLC0415
    from tests.tls_certs import make_certs  # noqa: PLC0415

    request = p4runtime_pb2.CapabilitiesRequest()
    own = [("grpc.use_local_subchannel_pool", 1)]  # a new channel never reuses a connection

    def fresh(address, tls) -> float:
        t0 = time.perf_counter()
        with (grpc.insecure_channel(address, own) if tls is None else
              grpc.secure_channel(address, tls.credentials(), own)) as ch:
            p4runtime_pb2_grpc.P4RuntimeStub(ch).Capabilities(request, timeout=10)
        return time.perf_counter() - t0

    def reused(stub) -> float:
        t0 = time.perf_counter()
        stub.Capabilities(request, timeout=10)
        return time.perf_counter() - t0

    with tempfile.TemporaryDirectory(prefix="bench-rel-") as tmp, ExitStack() as stack:
        c = make_certs(Path(tmp))
        server = ["--grpc-server-ssl", "--grpc-server-cert", str(c.server_cert),
                  "--grpc-server-key", str(c.server_key)]
        modes = {"plaintext": ([], None),
                 "TLS": (server, ClientTLS.from_files(c.ca)),
                 "mutual TLS": ([*server, "--grpc-server-cacert", str(c.ca),
                                 "--grpc-server-with-client-auth"],
                                ClientTLS.from_files(c.ca, c.client_cert, c.client_key))}
        addr = {m: stack.enter_context(SwitchProcess(["--no-p4", *flags])).grpc_addr
                for m, (flags, _) in modes.items()}
        # the modes take turns, RPC by RPC, so that the machine's load falls on all alike
        first = {m: [] for m in modes}
        for _ in range(args.tls_rpcs):
            for m, (_, tls) in modes.items():
                first[m].append(fresh(addr[m], tls))
        stubs = {m: p4runtime_pb2_grpc.P4RuntimeStub(
                     stack.enter_context(channel(addr[m], tls))) for m, (_, tls) in modes.items()}
        again = {m: [] for m in modes}
        for _ in range(args.tls_rpcs + 1):
            for m in modes:
                again[m].append(reused(stubs[m]))
        got = {m: (statistics.median(first[m]), statistics.median(again[m][1:])) for m in modes}
    base = got["plaintext"]
    return [Row(f"P4Runtime {mode}", f"{args.tls_rpcs} RPCs each way",
                f"new channel + RPC {fresh * 1e3:.2f} ms ({fresh / base[0]:.2f}x plaintext), "
                f"RPC on an open channel {reused * 1e3:.2f} ms ({reused / base[1]:.2f}x)", 0)
            for mode, (fresh, reused) in got.items()]


def hostile(args) -> list[Row]:
    """Each hostile input of tests/*/test_*security*, *dos*, *malformed* at bench scale."""
    return _code_in_configs() + _frozen_switch(args) + _fabricd_inputs() + _tracebacks()


def _code_in_configs() -> list[Row]:
    import grpc  # noqa: PLC0415
    from google.rpc import code_pb2  # noqa: PLC0415
    from test_device_config_security import ACTIONS, PROGRAMS, attacks  # noqa: PLC0415
    from test_runtime_errors import DEVICE, Client  # noqa: PLC0415

    import p4switch  # noqa: PLC0415
    from p4switch import native  # noqa: PLC0415
    from p4switch.device.process import SwitchProcess  # noqa: PLC0415

    info, good = p4switch.compile_program(str(PROGRAMS / "l3.p4"))
    rows = []
    for backend in ("python", "native") if native.available() else ("python",):
        sent = refused = ran = 0
        with tempfile.TemporaryDirectory(prefix="bench-rel-") as tmp, SwitchProcess(
                ["--no-p4", "--device-id", str(DEVICE), "--backend", backend]) as sw:
            client = Client(sw.grpc_addr, (0, 1))
            assert client.status() == code_pb2.OK
            marker = Path(tmp) / "marker"
            for config in attacks(marker, good).values():
                for steps in ACTIONS.values():
                    sent += 1
                    try:
                        client.set_pipeline(info, config, action=steps[0])
                    except grpc.RpcError as err:
                        refused += err.code() == grpc.StatusCode.INVALID_ARGUMENT
                    for step in steps[1:]:
                        try:
                            client.set_pipeline(None, None, action=step)
                        except grpc.RpcError:
                            pass
                    ran += marker.exists() or Path(f"{marker}.py").exists()
                    marker.unlink(missing_ok=True)
            client.close()
        rows.append(Row(f"code in a device config ({backend})", f"{sent} requests",
                        f"{refused} refused (INVALID_ARGUMENT), {ran} ran code", ran + sent - refused))
    return rows


def _frozen_switch(args) -> list[Row]:
    from google.rpc import code_pb2  # noqa: PLC0415
    from p4.v1 import p4runtime_pb2 as p4r  # noqa: PLC0415
    from test_runtime_dos import IdleStreams, primary_rpcs, timed  # noqa: PLC0415
    from test_runtime_errors import DEVICE, PROGRAMS, Client, Names, U  # noqa: PLC0415

    import p4switch  # noqa: PLC0415
    from p4switch.device.process import SwitchProcess  # noqa: PLC0415

    compiled = p4switch.compile_program(str(PROGRAMS / "runtime.p4"))
    rows = []
    with SwitchProcess(["--no-p4", "--device-id", str(DEVICE), "--backend", "python"]) as sw:
        client = Client(sw.grpc_addr, (0, 1))
        assert client.status() == code_pb2.OK
        client.set_pipeline(*compiled)
        client.info = compiled[0]
        for count in (40, 400):
            idle = IdleStreams(sw.grpc_addr, count)
            try:
                time.sleep(0.5)
                waits = [w for _ in range(10) for w in primary_rpcs(client)]
            finally:
                idle.close()
            frozen = sum(max(w - 1.0, 0.0) for w in waits)
            rows.append(Row(f"{count} idle StreamChannels", f"{len(waits)} primary RPCs",
                            f"slowest {max(waits) * 1e3:.0f} ms, {frozen:.2f} s beyond 1 s",
                            sum(w > 1.0 for w in waits)))
        query = p4r.Entity(counter_entry=p4r.CounterEntry())
        try:
            client.read(*[query] * 10_000)
            huge = "answered"
        except Exception as err:  # noqa: BLE001 (any refusal counts)
            huge = f"refused ({err.code().name})"
        counter = Names(compiled[0]).obj("counters", "port_packets")
        # the 1,000-query Read from another process, so that only the switch is shared
        reader = subprocess.Popen([sys.executable, "-c", READER.format(addr=sw.grpc_addr,
                                                                      device=DEVICE)],
                                  stdout=subprocess.PIPE, text=True)
        time.sleep(0.3)
        waits = []
        while reader.poll() is None:
            waits.append(timed(client.write, p4r.Update(type=U.MODIFY, entity=p4r.Entity(
                counter_entry=p4r.CounterEntry(counter_id=counter,
                                               data=p4r.CounterData(packet_count=1))))))
        streamed = int(reader.stdout.read() or 0)
        waits.sort()
        frozen = sum(max(w - 0.1, 0.0) for w in waits)
        rows.append(Row("Read of 10,000 queries", "1 request", huge, int(huge == "answered")))
        rows.append(Row("Read of 1,000 wildcard queries", f"{streamed} entities streamed beside "
                        f"{len(waits)} Writes", f"Writes: median {waits[len(waits) // 2] * 1e3:.1f}"
                        f" ms, p90 {waits[len(waits) * 9 // 10] * 1e3:.1f} ms, slowest "
                        f"{waits[-1] * 1e3:.0f} ms ({sum(w > 0.1 for w in waits)} over 100 ms, "
                        f"{frozen:.2f} s beyond it)", int(streamed != 16_000)))
        client.close()
    return rows


READER = """
import grpc
from p4.v1 import p4runtime_pb2 as p4r, p4runtime_pb2_grpc
with grpc.insecure_channel("{addr}") as ch:
    req = p4r.ReadRequest(device_id={device})
    req.entities.extend([p4r.Entity(counter_entry=p4r.CounterEntry())] * 1000)
    print(sum(len(r.entities) for r in p4runtime_pb2_grpc.P4RuntimeStub(ch).Read(req)))
"""


def _fabricd_inputs() -> list[Row]:
    import grpc  # noqa: PLC0415
    from test_fabricd_api import Daemon, free_port  # noqa: PLC0415
    from test_fabricd_dos import BOMB, HUGE, WIDE, rss_kb  # noqa: PLC0415

    from controller.proto import fabric_pb2 as api  # noqa: PLC0415
    from controller.proto import fabric_pb2_grpc  # noqa: PLC0415

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-rel-") as tmp:
        daemon = Daemon(Path(tmp), {n: f"127.0.0.1:{free_port()}"
                                    for n in ("leaf1", "leaf2", "spine1", "spine2")})
        try:
            with grpc.insecure_channel(daemon.start()) as ch:
                stub = fabric_pb2_grpc.FabricStub(ch)
                for name, text in (("YAML bomb", BOMB), ("16,383 x 252 topology", HUGE),
                                   ("10^8 parallel links", WIDE),
                                   ("100,000-character slice name", None)):
                    before, t0 = rss_kb(daemon.proc.pid), time.monotonic()
                    try:
                        if text is None:
                            stub.CreateSlice(api.CreateSliceRequest(name="j" * 100_000,
                                                                    hosts=2), timeout=120)
                        else:
                            stub.SetTopology(api.SetTopologyRequest(yaml=text), timeout=120)
                        code = "accepted"
                    except grpc.RpcError as err:
                        code = err.code().name
                    took, grew = time.monotonic() - t0, rss_kb(daemon.proc.pid) - before
                    rows.append(Row(f"fabricd: {name}", f"{len(text or 'j' * 100_000)} bytes",
                                    f"{code} in {took * 1e3:.0f} ms, RSS +{grew // 1024} MB, "
                                    f"{max(took - 1.0, 0):.2f} s beyond 1 s",
                                    int(code != "INVALID_ARGUMENT" or took > 1 or grew > 100_000)))
        finally:
            daemon.stop()
    return rows


def _tracebacks() -> list[Row]:
    """The start-up and command-line cases of tests/controller/test_fabricd_malformed.py."""
    import pytest  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="bench-rel-") as tmp:
        log = Path(tmp) / "report.txt"
        code = pytest.main([str(ROOT / "tests" / "controller" / "test_fabricd_malformed.py"),
                            "-q", "-p", "no:cacheprovider", f"--junitxml={log}"])
        text = log.read_text()
    cases = text.count("<testcase")
    failed = text.count("<failure") + text.count("<error")
    return [Row("bad start-up and CLI inputs (fabricd, fabricctl)", f"{cases} cases",
                f"{cases - failed} one line + documented exit code, {failed} tracebacks or "
                "wrong codes", failed + int(code not in (0, 1)))]


SECTIONS: dict[str, Callable[[argparse.Namespace], list[Row]]] = {
    "fuzz": fuzz,
    "bad_packets": bad_packets,
    "switch_restart": switch_restart,
    "fabricd_restart": fabricd_restart,
    "tls": tls_cost,
    "hostile": hostile,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=sorted(SECTIONS), help="sections to run")
    ap.add_argument("--bad-packets", type=int, default=20_000,
                    help="malformed packets sent to the ranks")
    ap.add_argument("--fuzz-frames", type=int, default=100_000,
                    help="frames through each backend of the configured fabric.p4")
    ap.add_argument("--seed", type=int, default=1, help="the fuzz frames' seed")
    ap.add_argument("--restart-elements", type=int, default=1 << 20,
                    help="int32 elements of the all-reduce a switch restart hits")
    ap.add_argument("--burst", type=int, default=20,
                    help="requests in the burst fabricd is killed in the middle of")
    ap.add_argument("--tls-rpcs", type=int, default=200, help="RPCs per TLS measurement")
    args = ap.parse_args(argv)
    rows: list[Row] = []
    for name, section in SECTIONS.items():
        if args.only and name not in args.only:
            continue
        print(f"bench_reliability: {name} ...", flush=True)
        rows += section(args)
    print(tabulate([(r.check, r.amount, r.result, r.failures, "yes" if r.failures == 0 else "NO")
                    for r in rows], headers=["check", "amount", "result", "failures", "ok"],
                   tablefmt="simple", disable_numparse=True))
    return 1 if any(r.failures for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
