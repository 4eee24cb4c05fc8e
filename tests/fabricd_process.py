"""fabricd as a child process for the controller tests and the reliability bench: fabric.p4
compiled once by p4switch, fabricd started on a port of its choosing (read from --port-file by
polling), its startup report, and a read-back of every switch compared with the intent."""
from __future__ import annotations

import re
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import p4switch
from controller import encode_fabric
from controller.intent import Intent
from controller.p4rt import Device, MulticastGroup, Pipeline, sync
from p4switch.device.process import stop_process

REPO = Path(__file__).resolve().parents[1]
RPC_TIMEOUT = 60.0      # s for one P4Runtime call: only a hang meets it, not a busy machine


def compile_fabric(out: Path) -> tuple[Path, Path, Pipeline]:
    """fabric.p4 compiled by p4switch, written as the files `p4switch compile` writes."""
    info, config = p4switch.compile_program(str(REPO / "p4src" / "fabric.p4"))
    (out / "fabric.p4info.bin").write_bytes(info.SerializeToString())
    (out / "fabric.json").write_bytes(config)
    return out / "fabric.p4info.bin", out / "fabric.json", Pipeline(info, config)


class Fabricd:
    """`start()` runs fabricd on the topology (or the saved --state) with the switches at
    `addresses`; `extra` are more options (TLS); -> the API address."""

    def __init__(self, tmp: Path, compiled, addresses: dict[str, str], topology: Path,
                 extra: tuple[str, ...] = ()) -> None:
        self.tmp, self.compiled, self.addresses = tmp, compiled, addresses
        self.topology, self.extra = topology, list(extra)
        self.proc: subprocess.Popen | None = None
        self.log = tmp / "fabricd.log"
        self.server = ""

    def start(self, timeout: float = 180.0) -> str:
        """A start takes ~1 s; the deadline only catches a hang (fabricd_api's 30 s was
        crossed at a load average of 20)."""
        port_file = self.tmp / "port"
        port_file.unlink(missing_ok=True)
        args = [sys.executable, "-m", "controller.fabricd", "--topology", str(self.topology),
                "--state", str(self.tmp / "state.json"), "--p4info", str(self.compiled[0]),
                "--config", str(self.compiled[1]), "--listen", "127.0.0.1:0",
                "--port-file", str(port_file), "--resync-period", "0.3",
                # 30 s: a margin a busy machine does not cross (5 s was crossed at load 20)
                "--switch-timeout", "30", *self.extra]
        for name, addr in self.addresses.items():
            args += ["--switch", f"{name}={addr}"]
        self.proc = subprocess.Popen(args, cwd=REPO, stderr=self.log.open("w"))
        deadline = time.monotonic() + timeout
        while not port_file.exists() or not port_file.read_text().strip():
            assert self.proc.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, "fabricd did not start"
            time.sleep(0.05)
        self.server = f"127.0.0.1:{port_file.read_text().strip()}"
        return self.server

    def startup_report(self) -> dict[str, str]:
        return dict(re.findall(r"fabricd: (\w+): (.*)", self.log.read_text()))

    def stop(self) -> None:
        stop_process(self.proc, 30)         # SIGKILL if it has not ended in 30 s

    def kill(self) -> None:
        """SIGKILL: no chance to close its sessions, as a crash."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def read_back(addresses: dict[str, str], device_ids: dict[str, int], pipeline: Pipeline,
              tls=None) -> dict[str, sync.State]:
    """Every table entry, the defaults of port_liveness and ecmp_salt, every multicast group
    and clone session of every switch, read as an observer (no arbitration, so fabricd stays
    primary)."""
    states = {}
    for name, addr in addresses.items():
        dev = Device(name, addr, device_ids[name], pipeline, timeout=RPC_TIMEOUT, tls=tls)
        dev.conn.open_channel()
        try:
            states[name] = dev.read_state(defaults_of=("FabricIngress.port_liveness",
                                                       "FabricIngress.ecmp_salt"))
        finally:
            dev.close()
    return states


def intended(state_file: Path, pipeline: Pipeline) -> dict[str, sync.State]:
    """What fabricd's saved intent says every switch must hold."""
    schema = Device("x", "127.0.0.1:1", 0, pipeline).schema
    intent = Intent.from_json(state_file.read_text(), encode_fabric.slot_capacity(schema),
                              encode_fabric.max_workers(schema))
    return encode_fabric.intended_states(intent, schema)


def _entries(state: sync.State) -> list:
    return [(sync.entry_key(e), sync.entry_action(e)) for e in state.table_entries]


def _groups(state: sync.State) -> list:
    return ([("mc", g.group_id, tuple(sorted(g.replicas))) for g in state.multicast_groups]
            + [("clone", s.session_id, s) for s in state.clone_sessions])


def difference(want: sync.State, have: sync.State) -> dict[str, int]:
    """Entries (table entries, multicast groups, clone sessions) a switch holds twice, lacks,
    or holds without the intent asking (or with another action): zero for a switch in sync."""
    dup = (len(_entries(have)) - len({k for k, _ in _entries(have)})
           + len(_groups(have)) - len({g[:2] for g in _groups(have)}))
    want_e, have_e = set(_entries(want)), set(_entries(have))
    want_g, have_g = set(map(repr, _groups(want))), set(map(repr, _groups(have)))
    return {"duplicated": dup,
            "missing": len(want_e - have_e) + len(want_g - have_g),
            "stale": len(have_e - want_e) + len(have_g - want_g)}


def meddle(addresses: dict[str, str], device_id: int, pipeline: Pipeline,
           name: str) -> dict[str, int]:
    """While fabricd is down, another controller changes `name`: deletes two entries fabricd
    installed, changes the action data of a third and adds a multicast group of its own.
    -> what fabricd must undo: {"insert": 2, "modify": 1, "delete": 1}. It uses fabricd's
    election id: a higher one would keep fabricd a backup afterwards (a switch makes primary
    only an id at least as high as the highest it has seen)."""
    dev = Device(name, addresses[name], device_id, pipeline, election_id=1, timeout=RPC_TIMEOUT)
    dev.conn.open()
    try:
        have = dev.read_state().table_entries
        with_params = [e for e in have if e.params and not e.default]
        changed = with_params[0]
        param, value = next(iter(changed.params.items()))
        other = value ^ 1 if isinstance(value, int) else bytes([value[0] ^ 1]) + value[1:]
        gone = [e for e in have if e is not changed and not e.default][:2]
        dev.write([(sync.DELETE, e) for e in gone]
                  + [(sync.MODIFY, replace(changed, params={**changed.params, param: other})),
                     (sync.INSERT, MulticastGroup(4000, ((1, 1), (2, 1))))])
    finally:
        dev.close()
    return {"insert": 2, "modify": 1, "delete": 1}
