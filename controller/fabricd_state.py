"""fabricd's state: the intent, one P4Runtime device per switch, and the one way to change
either. A change is tried on a copy of the intent; only when it validates and encodes into
entries does it replace the intent, get saved, and get written to every switch. Switches whose
session broke are brought back by `fabricd_watchdog.Watchdog`."""
from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from controller import encode_fabric
from controller.intent import Intent
from controller.p4rt import Device, P4RuntimeError, Pipeline, Schema
from controller.proto import fabric_pb2 as api
from grpctls import ClientTLS

log = logging.getLogger("fabricd")


class Fabric:
    """The daemon's state: intent, devices and the lock that orders every change."""

    def __init__(self, intent: Intent, pipeline: Pipeline, addresses: dict[str, str],
                 state_path: Path | None = None, election_id: int = 1,
                 timeout: float = 10.0, tls: ClientTLS | None = None) -> None:
        self.intent = intent
        self.pipeline = pipeline
        self.state_path = state_path
        self.lock = threading.RLock()
        self.schema = Schema(pipeline.p4info)
        self.devices = {
            name: Device(name, addresses[name], sw.device_id, pipeline, election_id, timeout,
                         tls)
            for name, sw in intent.topo.switches.items()}
        self.states = encode_fabric.intended_states(intent, self.schema)
        self.unsynced: set[str] = set()     # switches whose last reconciliation failed

    # -- the one way to change things -----------------------------------------------------------
    def change(self, fn):
        """Run `fn(intent_copy)`; on success adopt the copy, save it and sync every switch.
        Returns (fn's result, per-switch sync results)."""
        with self.lock:
            trial = self.intent.clone()
            result = fn(trial)
            states = encode_fabric.intended_states(trial, self.schema)
            self.intent, self.states = trial, states
            self.save()
            return result, self.sync_all(connect=False)

    def save(self) -> None:
        if self.state_path is None:
            return
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(self.intent.to_json())
        os.replace(tmp, self.state_path)

    def sync_all(self, connect: bool = True,
                 wanted=lambda: True) -> list[api.SwitchSync]:
        """Reconcile every switch in turn while `wanted()` (a Sync whose caller gave up
        stops: a switch that times out would otherwise hold the lock for every retry the
        caller queued meanwhile)."""
        with self.lock:
            results = []
            for name in self.devices:
                if not wanted():
                    break
                results.append(self.sync_one(name, connect))
            return results

    def sync_one(self, name: str, connect: bool = True) -> api.SwitchSync:
        """Reconcile one switch. A switch whose last reconciliation failed (its session may
        be up while its pipeline push or a write timed out) has its pipeline checked again
        first (on the same session: a new one with the same election id could race the old
        one's end on the switch). Without `connect`, a switch whose session is down or
        that is out of sync is only reported (the watchdog brings it back), so one dead
        switch does not stall every request for its connect timeout."""
        dev, state = self.devices[name], self.states[name]
        reply = api.SwitchSync(switch=name, entries=state.size())
        if not connect and (not dev.connected or name in self.unsynced):
            reply.error = "not in sync (fabricd's watchdog retries it)"
            reply.status = api.SwitchSync.PENDING
            self.unsynced.add(name)
            return reply
        try:
            if not dev.connected:
                dev.connect()
            elif name in self.unsynced:
                dev.ensure_pipeline()
            counts = dev.sync(state)
            reply.inserted, reply.modified, reply.deleted = (
                counts["insert"], counts["modify"], counts["delete"])
            reply.status = api.SwitchSync.IN_SYNC
            self.unsynced.discard(name)
        except P4RuntimeError as err:
            reply.error = str(err)
            reply.status = api.SwitchSync.FAILED
            self.unsynced.add(name)
            log.info("%s: %s", name, err)
        return reply

    def close(self) -> None:
        for dev in self.devices.values():
            dev.close()
