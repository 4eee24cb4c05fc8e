"""pin: one source port per RoCEv2 queue pair, written by the host's planner (Ethereal)."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

from . import libbpf
from .addr import check_port, check_qp, ip_be, ip_str, port_be
from .program import Program


class PinKey(ctypes.Structure):
    _fields_ = [("dst_ip", ctypes.c_uint32), ("dst_qp", ctypes.c_uint32)]


class PinVal(ctypes.Structure):
    _fields_ = [("sport", ctypes.c_uint16), ("pad", ctypes.c_uint16),
                ("generation", ctypes.c_uint32)]


class PinStats(ctypes.Structure):
    _fields_ = [("pkts", ctypes.c_uint64), ("bytes", ctypes.c_uint64)]


@dataclass(frozen=True)
class PinEntry:
    dst_ip: str
    dst_qp: int
    sport: int
    generation: int   # how many times this QP's port changed
    pkts: int         # data packets that left with the pin (all of its generations)
    bytes: int


def _key(dst_ip: str, dst_qp: int) -> PinKey:
    return PinKey(ip_be(dst_ip), check_qp(dst_qp))


class Pin(Program):
    SOURCE = "pin.c"
    HOOKS = {"egress": "pin_egress"}
    PRIO = 10
    MAPS = {"pins": (PinKey, PinVal, False), "pin_stats": (PinKey, PinStats, True)}

    def pin(self, dst_ip: str, dst_qp: int, sport: int) -> int:
        """Data packets to (dst_ip, dst_qp) leave with `sport` from now on; returns the pin's
        generation (0 for a new pin, +1 for every change of its port)."""
        key = _key(dst_ip, dst_qp)
        check_port(sport, "source port")
        old = self.maps["pins"].get(key)
        generation = 0 if old is None else old.generation + (port_be(old.sport) != sport)
        if self.maps["pin_stats"].get(key) is None:
            self.maps["pin_stats"].set(key, PinStats(), libbpf.BPF_NOEXIST)
        self.maps["pins"].set(key, PinVal(port_be(sport), 0, generation))
        return generation

    def unpin(self, dst_ip: str, dst_qp: int) -> bool:
        key = _key(dst_ip, dst_qp)
        self.maps["pin_stats"].delete(key)
        return self.maps["pins"].delete(key)

    def get(self, dst_ip: str, dst_qp: int) -> PinEntry | None:
        key = _key(dst_ip, dst_qp)
        val = self.maps["pins"].get(key)
        if val is None:
            return None
        per_cpu = self.maps["pin_stats"].get(key) or []
        return PinEntry(dst_ip, dst_qp, port_be(val.sport), val.generation,
                        sum(c.pkts for c in per_cpu), sum(c.bytes for c in per_cpu))

    def entries(self) -> list[PinEntry]:
        out = []
        for key in self.maps["pins"].keys():
            entry = self.get(ip_str(key.dst_ip), key.dst_qp)
            if entry is not None:  # removed while we listed
                out.append(entry)
        return out

    def clear(self) -> None:
        """Removes every pin and its counters."""
        self.maps["pins"].clear()
        self.maps["pin_stats"].clear()
