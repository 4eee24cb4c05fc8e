"""fabricd's watchdog: brings back switches whose P4Runtime session ended or whose last
reconciliation failed.

A session ends when the switch process dies or restarts (its stream breaks: the connection
reports it at once through `on_lost`), or when another controller takes primacy; a
reconciliation fails when a pipeline push or a write times out on a busy switch. The watchdog
wakes on a lost session, or every `period` seconds to retry the others, opens a new session
where the old one ended, pushes the pipeline when the switch does not run it (a restarted
switch has nothing; a push may have timed out) and reconciles the switch with the intent (`Fabric.sync_one`: every missing entry
written, nothing duplicated, stale entries deleted). Each recovery is logged with what it
wrote and how long the switch was out of sync."""
from __future__ import annotations

import logging
import threading
import time

from controller.p4rt import P4RuntimeError

log = logging.getLogger("fabricd")


class Watchdog:
    def __init__(self, fabric, period: float) -> None:
        self.fabric, self.period = fabric, period
        self._wake = threading.Event()
        self._lost_at: dict[str, float] = {}
        for name, dev in fabric.devices.items():
            dev.conn.on_lost = lambda name=name: self.lost(name)

    def lost(self, name: str) -> None:
        """A session broke (called from its stream's thread): recover it now."""
        self._lost_at.setdefault(name, time.monotonic())
        log.warning("%s: P4Runtime session lost", name)
        self._wake.set()

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self._wake.wait(self.period)
            self._wake.clear()
            if stop.is_set():
                return
            for name, dev in self.fabric.devices.items():
                if not dev.connected or name in self.fabric.unsynced:
                    self.recover(name)

    def recover(self, name: str) -> bool:
        """Reconnect and reconcile one switch; False while it cannot be reached."""
        dev = self.fabric.devices[name]
        self._lost_at.setdefault(name, time.monotonic())
        try:                            # outside the fabric lock: requests go on meanwhile
            pushed = dev.ensure_pipeline() if dev.connected else dev.connect()
        except P4RuntimeError:
            return False
        with self.fabric.lock:
            self.fabric.unsynced.discard(name)     # its pipeline was checked just now
            result = self.fabric.sync_one(name)
        if result.error:
            return False
        took = time.monotonic() - self._lost_at.pop(name)
        log.warning("%s: re-synchronised after %.2f s (%s; %d inserted, %d modified, "
                    "%d deleted)", name, took, "pipeline pushed" if pushed else "pipeline kept",
                    result.inserted, result.modified, result.deleted)
        return True
