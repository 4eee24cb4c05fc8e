"""Console/file log in the spirit of simple_switch's --log-console, on the standard `logging`:
one timestamped, thread-tagged line per event. The pipeline's own lines (parser states,
tables, actions) arrive through the switch's set_logger hook and are logged the same way."""
from __future__ import annotations

import itertools
import logging
import sys

_FORMAT = "[%(asctime)s.%(msecs)03d] [p4switch] [%(threadName)s] %(message)s"
_instances = itertools.count()


class EventLog:
    """`per_packet`: the pipeline's and the device's per-packet lines (BMv2's debug and trace
    messages); without it only what the switch does as a whole is logged. `dump_bytes`: the
    first bytes of each frame received and sent (BMv2's --dump-packet-data)."""

    def __init__(self, console: bool, path: str | None, per_packet: bool = True,
                 dump_bytes: int = 0):
        self.per_packet, self.dump_bytes = per_packet, dump_bytes
        # a logger of its own per switch, not propagated: the process's root logger is not ours
        self._logger = logging.getLogger(f"p4switch.device.{next(_instances)}")
        self._logger.propagate = False
        self._logger.setLevel(logging.INFO)
        self._handlers: list[logging.Handler] = []
        if console:
            self._handlers.append(logging.StreamHandler(sys.stdout))
        if path:
            self._handlers.append(logging.FileHandler(path, mode="a"))
        formatter = logging.Formatter(_FORMAT, datefmt="%H:%M:%S")
        for h in self._handlers:
            h.setFormatter(formatter)
            self._logger.addHandler(h)

    def __bool__(self) -> bool:
        """Whether per-packet lines are wanted (checked per packet by the device)."""
        return bool(self._handlers) and self.per_packet

    def __call__(self, message: str) -> None:
        self._logger.info(message)

    def dump(self, what: str, frame: bytes) -> None:
        head = frame[:self.dump_bytes]
        self._logger.info(f"packet of {len(frame)} bytes {what}: {head.hex()}"
                          + (" ..." if len(frame) > len(head) else ""))

    def close(self) -> None:
        for h in self._handlers:
            self._logger.removeHandler(h)
            h.close()
