"""impair: drops, duplicates and corrupts a fraction of matching packets (netem's loss,
duplicate and corrupt)."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

from .addr import check_range
from .program import Program


class ImpairCfg(ctypes.Structure):
    _fields_ = [("drop_below", ctypes.c_uint64), ("dup_below", ctypes.c_uint64),
                ("seed", ctypes.c_uint64), ("udp_dport", ctypes.c_uint16),
                ("ip_proto", ctypes.c_uint8), ("pad", ctypes.c_uint8 * 5),
                ("corrupt_below", ctypes.c_uint64)]


class ImpairStats(ctypes.Structure):
    _fields_ = [("matched", ctypes.c_uint64), ("dropped", ctypes.c_uint64),
                ("duplicated", ctypes.c_uint64), ("corrupted", ctypes.c_uint64)]


class ImpairRng(ctypes.Structure):
    _fields_ = [("seed", ctypes.c_uint64), ("state", ctypes.c_uint64)]


@dataclass(frozen=True)
class ImpairCounters:
    matched: int
    dropped: int
    duplicated: int
    corrupted: int


@dataclass(frozen=True)
class ImpairConfig:
    drop: float
    duplicate: float
    udp_dport: int  # 0: any
    ip_proto: int   # 0: any
    seed: int       # 0: kernel randomness
    corrupt: float = 0.0


def _threshold(name: str, fraction: float) -> int:
    if not isinstance(fraction, int | float) or not 0.0 <= fraction <= 1.0:
        raise ValueError(f"{name} must be a fraction in [0, 1], not {fraction!r}")
    return round(fraction * 2**32)


class Impair(Program):
    SOURCE = "impair.c"
    HOOKS = {"egress": "impair_egress", "ingress": "impair_ingress"}
    PRIO = 40  # last on a shared hook: other programs see every packet first
    MAPS = {"impair_cfg": (ctypes.c_uint32, ImpairCfg, False),
            "impair_stats": (ctypes.c_uint32, ImpairStats, True),
            "impair_rng": (ctypes.c_uint32, ImpairRng, True)}

    def configure(self, drop: float = 0.0, duplicate: float = 0.0, udp_dport: int = 0,
                  ip_proto: int = 0, seed: int = 0, corrupt: float = 0.0) -> None:
        """Of the IPv4 packets matching (ip_proto, udp_dport; 0 = any), drop a fraction `drop`,
        duplicate a fraction `duplicate` of the rest and corrupt a fraction `corrupt` (one bit
        of the fifth-last byte: a RoCEv2 packet's last payload byte). A non-zero `seed` makes
        the choices a fixed pseudo-random sequence per CPU (reconfiguring with a new seed
        restarts it)."""
        cfg = ImpairCfg(_threshold("drop", drop), _threshold("duplicate", duplicate),
                        check_range("seed", seed, 0, 2**64 - 1),
                        check_range("UDP destination port", udp_dport, 0, 0xFFFF),
                        check_range("IP protocol", ip_proto, 0, 0xFF),
                        corrupt_below=_threshold("corrupt", corrupt))
        if udp_dport and ip_proto not in (0, 17):
            raise ValueError("a UDP destination port filter needs ip_proto 0 or 17")
        self.maps["impair_rng"].set(ctypes.c_uint32(0), ImpairRng())
        self.maps["impair_cfg"].set(ctypes.c_uint32(0), cfg)

    def config(self) -> ImpairConfig:
        cfg = self.maps["impair_cfg"].get(ctypes.c_uint32(0))
        return ImpairConfig(cfg.drop_below / 2**32, cfg.dup_below / 2**32, cfg.udp_dport,
                            cfg.ip_proto, cfg.seed, cfg.corrupt_below / 2**32)

    def disable(self) -> None:
        self.maps["impair_cfg"].set(ctypes.c_uint32(0), ImpairCfg())

    def counters(self) -> ImpairCounters:
        per_cpu = self.maps["impair_stats"].get(ctypes.c_uint32(0))
        return ImpairCounters(sum(c.matched for c in per_cpu), sum(c.dropped for c in per_cpu),
                              sum(c.duplicated for c in per_cpu),
                              sum(c.corrupted for c in per_cpu))

    def reset_counters(self) -> None:
        self.maps["impair_stats"].set(ctypes.c_uint32(0), ImpairStats())
