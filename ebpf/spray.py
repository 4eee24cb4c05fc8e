"""spray: a fresh pseudo-random source port for every RoCEv2 packet (per-packet spraying)."""
from __future__ import annotations

import ctypes

from fabricmodel.rocev2 import SPORT_MAX, SPORT_MIN

from .addr import check_range
from .program import Program

DEFAULT_RANGE = (SPORT_MIN, SPORT_MAX - SPORT_MIN + 1)  # (first, count): every RoCEv2 source port


class SprayCfg(ctypes.Structure):
    _fields_ = [("base", ctypes.c_uint16), ("pad", ctypes.c_uint16), ("count", ctypes.c_uint32)]


class SprayStats(ctypes.Structure):
    _fields_ = [("pkts", ctypes.c_uint64), ("bytes", ctypes.c_uint64)]


class Spray(Program):
    SOURCE = "spray.c"
    HOOKS = {"egress": "spray_egress"}
    PRIO = 30
    MAPS = {"spray_cfg": (ctypes.c_uint32, SprayCfg, False),
            "spray_stats": (ctypes.c_uint32, SprayStats, True)}

    def configure(self, base: int = DEFAULT_RANGE[0], count: int = DEFAULT_RANGE[1]) -> None:
        """Source ports are drawn uniformly from [base, base + count)."""
        check_range("first source port", base, 1, 0xFFFF)
        check_range("port count", count, 1, 0x10000 - base)
        self.maps["spray_cfg"].set(ctypes.c_uint32(0), SprayCfg(base, 0, count))

    def config(self) -> tuple[int, int]:
        cfg = self.maps["spray_cfg"].get(ctypes.c_uint32(0))
        return cfg.base, cfg.count

    def disable(self) -> None:
        self.maps["spray_cfg"].set(ctypes.c_uint32(0), SprayCfg())

    def counters(self) -> tuple[int, int]:
        """(packets, bytes) sprayed."""
        per_cpu = self.maps["spray_stats"].get(ctypes.c_uint32(0))
        return sum(c.pkts for c in per_cpu), sum(c.bytes for c in per_cpu)

    def reset_counters(self) -> None:
        self.maps["spray_stats"].set(ctypes.c_uint32(0), SprayStats())
