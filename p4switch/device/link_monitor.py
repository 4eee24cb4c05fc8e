"""Link state of the switch's ports, for P4Runtime's watch ports: a thread reads each port's
interface flags (up, with carrier) every 0.1 s and reports every change. Flags come from an
ioctl on the interface name, so it works in whatever network namespace the switch runs."""
from __future__ import annotations

import fcntl
import socket
import struct
import threading

SIOCGIFFLAGS = 0x8913
IFF_UP, IFF_RUNNING = 0x1, 0x40


def link_up(sock: socket.socket, ifname: str) -> bool | None:
    """Administratively up and with carrier (operationally up); None if there is no such
    interface."""
    try:
        req = fcntl.ioctl(sock, SIOCGIFFLAGS, struct.pack("16sH14x", ifname.encode()[:15], 0))
    except OSError:
        return None
    flags = struct.unpack("16sH14x", req)[1]
    return flags & (IFF_UP | IFF_RUNNING) == IFF_UP | IFF_RUNNING


class LinkMonitor:
    """Calls on_change(port number, up) when a port's link goes down or comes back; ports are
    read from `ports` (number -> object with .ifname) at each look, so removed ones drop out.
    Ports start as up: one that is down at start is reported at the first look."""

    def __init__(self, ports: dict, on_change, interval: float = 0.1):
        self.ports, self.on_change, self.interval = ports, on_change, interval
        self._stop = threading.Event()
        self._state: dict[int, bool] = {}
        self._thread = threading.Thread(target=self._run, name="link-monitor", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def _run(self) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            while not self._stop.is_set():
                for number, port in list(self.ports.items()):
                    up = link_up(sock, port.ifname)
                    if up is not None and self._state.get(number, True) != up:
                        self._state[number] = up
                        self.on_change(number, up)
                self._stop.wait(self.interval)
