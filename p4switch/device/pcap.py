"""Per-port capture files (`--pcap DIR`): <iface>_in.pcap and <iface>_out.pcap in classic
libpcap format, as simple_switch writes them, through scapy's PcapWriter."""
from __future__ import annotations

import pathlib
import threading

from scapy.utils import PcapWriter

LINKTYPE_ETHERNET = 1


class PortCaptures:
    """Both directions of every port; `inbound(port, frame)` / `outbound(port, frame)`. The
    ingress and egress threads both write, so every file has a lock."""

    def __init__(self, directory: str, ports: dict[int, str]):
        root = pathlib.Path(directory)
        root.mkdir(parents=True, exist_ok=True)
        self._in = {p: self._open(root / f"{name}_in.pcap") for p, name in ports.items()}
        self._out = {p: self._open(root / f"{name}_out.pcap") for p, name in ports.items()}

    @staticmethod
    def _open(path):
        return PcapWriter(str(path), linktype=LINKTYPE_ETHERNET, sync=True), threading.Lock()

    @staticmethod
    def _write(writer, frame: bytes) -> None:
        pcap, lock = writer
        with lock:
            pcap.write(frame)

    def inbound(self, port: int, frame: bytes) -> None:
        if port in self._in:
            self._write(self._in[port], frame)

    def outbound(self, port: int, frame: bytes) -> None:
        if port in self._out:
            self._write(self._out[port], frame)

    def close(self) -> None:
        for pcap, lock in [*self._in.values(), *self._out.values()]:
            with lock:
                pcap.close()
