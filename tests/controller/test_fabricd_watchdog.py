"""fabricd's watchdog and its bookkeeping, with stand-in devices: a switch whose
reconciliation failed while its session stayed up (a pipeline push timing out on a busy
switch) is retried on its session until it is in sync; requests meanwhile only report
it; a lost session wakes the watchdog at once. (With real switches and processes:
test_fabricd_p4switch.py and test_fabricd_faults.py.)"""
from __future__ import annotations

import threading
import time

import grpc

from controller.fabricd_state import Fabric
from controller.fabricd_watchdog import Watchdog
from controller.p4rt import P4RuntimeError, Pipeline
from tests.controller.test_encode_fabric import fixture_p4info, intent_of


class StandIn:
    """The parts of p4rt.Device fabricd uses; `sync` fails `failures` times (DEADLINE)."""

    def __init__(self, name: str, failures: int = 0) -> None:
        self.name, self.failures = name, failures
        self.connected, self.connects, self.checks, self.synced = True, 0, 0, 0
        self.conn = self                     # the watchdog sets conn.on_lost
        self.on_lost = None

    def connect(self) -> bool:
        self.connects += 1
        self.connected = True
        return self.ensure_pipeline()

    def ensure_pipeline(self) -> bool:
        self.checks += 1
        return False

    def sync(self, state) -> dict[str, int]:
        if self.failures:
            self.failures -= 1
            raise P4RuntimeError(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
        self.synced += 1
        return {"insert": state.size(), "modify": 0, "delete": 0}

    def close(self) -> None:
        self.connected = False


def fabric_of_stand_ins(**failures) -> Fabric:
    fabric = Fabric(intent_of("leafspine-2x2"), Pipeline(fixture_p4info(), b"{}"),
                    {n: "127.0.0.1:1" for n in ("leaf1", "leaf2", "spine1", "spine2")})
    fabric.devices = {n: StandIn(n, failures.get(n, 0)) for n in fabric.devices}
    return fabric


def test_restart_a_failed_reconciliation_is_retried_on_its_session():
    fabric = fabric_of_stand_ins(spine2=2)
    replies = {r.switch: r for r in fabric.sync_all()}
    assert "Deadline" in replies["spine2"].error and fabric.unsynced == {"spine2"}
    assert all(not replies[n].error for n in ("leaf1", "leaf2", "spine1"))
    spine2 = fabric.devices["spine2"]
    assert spine2.connected and spine2.checks == 0
    # a request meanwhile reports it, without stalling on it
    assert "not in sync" in fabric.sync_one("spine2", connect=False).error
    watchdog = Watchdog(fabric, period=0.01)
    # its pipeline checked again on the session it has (a new session with the same
    # election id could race the old one's end on the switch)
    assert not watchdog.recover("spine2")            # fails once more: still unsynced
    assert fabric.unsynced == {"spine2"} and spine2.checks == 1
    assert watchdog.recover("spine2")
    assert fabric.unsynced == set() and spine2.checks == 2 and spine2.synced == 1
    assert spine2.connects == 0
    assert fabric.devices["leaf1"].checks == 0       # in sync all along: left alone


def test_restart_a_lost_session_wakes_the_watchdog_at_once():
    fabric = fabric_of_stand_ins()
    fabric.sync_all()
    watchdog = Watchdog(fabric, period=3600)         # only a lost session can wake it
    stop = threading.Event()
    thread = threading.Thread(target=watchdog.run, args=(stop,), daemon=True)
    thread.start()
    leaf2 = fabric.devices["leaf2"]
    leaf2.connected = False
    leaf2.on_lost()                                  # what the stream's thread calls
    for _ in range(500):
        if leaf2.synced == 2:
            break
        time.sleep(0.01)
    stop.set()
    watchdog.lost("leaf1")                           # wake it so that it sees `stop`
    thread.join(5)
    assert leaf2.connects == 1 and leaf2.synced == 2 and not thread.is_alive()


def test_a_sync_whose_caller_gave_up_stops_before_the_next_switch():
    fabric = fabric_of_stand_ins()
    asked = []

    def wanted():                     # the caller's deadline passes after two switches
        asked.append(1)
        return len(asked) <= 2

    replies = fabric.sync_all(wanted=wanted)
    assert [r.switch for r in replies] == list(fabric.devices)[:2]
    assert sum(d.synced for d in fabric.devices.values()) == 2
