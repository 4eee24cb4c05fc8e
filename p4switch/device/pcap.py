"""Per-port capture files (`--pcap DIR`): <iface>_in.pcap and <iface>_out.pcap in classic
libpcap format, as simple_switch writes them."""
from __future__ import annotations

import pathlib
import struct
import threading
import time

_HEADER = struct.pack("=IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)   # LINKTYPE_ETHERNET


class PcapWriter:
    def __init__(self, path: pathlib.Path):
        self._file = open(path, "wb")  # noqa: SIM115 - closed by close()
        self._file.write(_HEADER)
        self._lock = threading.Lock()

    def write(self, frame: bytes) -> None:
        t = time.time()
        sec = int(t)
        record = struct.pack("=IIII", sec, int((t - sec) * 1e6), len(frame), len(frame))
        with self._lock:
            self._file.write(record + frame)

    def close(self) -> None:
        with self._lock:
            self._file.close()


class PortCaptures:
    """Both directions of every port; `inbound(port, frame)` / `outbound(port, frame)`."""

    def __init__(self, directory: str, ports: dict[int, str]):
        root = pathlib.Path(directory)
        root.mkdir(parents=True, exist_ok=True)
        self._in = {p: PcapWriter(root / f"{name}_in.pcap") for p, name in ports.items()}
        self._out = {p: PcapWriter(root / f"{name}_out.pcap") for p, name in ports.items()}

    def inbound(self, port: int, frame: bytes) -> None:
        if port in self._in:
            self._in[port].write(frame)

    def outbound(self, port: int, frame: bytes) -> None:
        if port in self._out:
            self._out[port].write(frame)

    def close(self) -> None:
        for writer in [*self._in.values(), *self._out.values()]:
            writer.close()
