"""Console/file log in the spirit of simple_switch's --log-console: one timestamped line per
event, thread-tagged. The pipeline's own lines (parser states, tables, actions) arrive through
the switch's set_logger hook and are written the same way."""
from __future__ import annotations

import sys
import threading
import time


class EventLog:
    def __init__(self, console: bool, path: str | None):
        self._streams = []
        if console:
            self._streams.append(sys.stdout)
        if path:
            self._streams.append(open(path, "a", buffering=1))  # noqa: SIM115 - closed below
        self._owned = self._streams[1:] if console else self._streams
        self._lock = threading.Lock()

    def __bool__(self) -> bool:
        return bool(self._streams)

    def __call__(self, message: str) -> None:
        t = time.time()
        stamp = time.strftime("%H:%M:%S", time.localtime(t)) + f".{int(t % 1 * 1e6):06d}"
        line = f"[{stamp}] [p4switch] [{threading.current_thread().name}] {message}\n"
        with self._lock:
            for stream in self._streams:
                stream.write(line)
                stream.flush()

    def close(self) -> None:
        for stream in self._owned:
            stream.close()
