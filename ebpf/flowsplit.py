"""flowsplit: per-PSN-range source ports for RoCEv2 connections (Ethereal's split on arrival)."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

from . import libbpf
from .addr import check_port, check_psn, check_qp, check_range, ip_be, ip_str, port_be
from .program import Program

MAX_SUBFLOWS = 32  # a power of two; passed to flowsplit.c
OUTSIDE = MAX_SUBFLOWS  # the counter slot of PSNs outside the split range


class SplitKey(ctypes.Structure):
    _fields_ = [("dst_ip", ctypes.c_uint32), ("dst_qp", ctypes.c_uint32)]


class SplitDesc(ctypes.Structure):
    _fields_ = [("base_psn", ctypes.c_uint32), ("pkts_per_subflow", ctypes.c_uint32),
                ("n_subflows", ctypes.c_uint32), ("sports", ctypes.c_uint16 * MAX_SUBFLOWS)]


class SplitStats(ctypes.Structure):
    _fields_ = [("pkts", ctypes.c_uint64 * (MAX_SUBFLOWS + 1)),
                ("bytes", ctypes.c_uint64 * (MAX_SUBFLOWS + 1))]


@dataclass(frozen=True)
class Split:
    dst_ip: str
    dst_qp: int
    base_psn: int
    pkts_per_subflow: int
    sports: tuple[int, ...]

    def sport_for(self, psn: int) -> int | None:
        """The source port the program gives `psn` (None: outside the split, unchanged)."""
        index = ((psn - self.base_psn) & 0xFFFFFF) // self.pkts_per_subflow
        return self.sports[index] if index < len(self.sports) else None


@dataclass(frozen=True)
class SubflowCounters:
    pkts: tuple[int, ...]   # per sub-flow
    bytes: tuple[int, ...]  # per sub-flow, whole frames
    outside_pkts: int       # packets of the connection outside the split's PSN range
    outside_bytes: int


def _key(dst_ip: str, dst_qp: int) -> SplitKey:
    return SplitKey(ip_be(dst_ip), check_qp(dst_qp))


def _entry(dst_ip: str, dst_qp: int, base_psn: int, pkts_per_subflow: int,
           sports: list[int]) -> tuple[SplitKey, SplitDesc, Split]:
    """The map entry of one split, or ValueError naming the bad field."""
    key = _key(dst_ip, dst_qp)
    check_psn(base_psn)
    check_range("packets per sub-flow", pkts_per_subflow, 1, 0xFFFFFF)
    sports = list(sports)
    if not 1 <= len(sports) <= MAX_SUBFLOWS:
        raise ValueError(f"a split has 1 to {MAX_SUBFLOWS} sub-flows, not {len(sports)}")
    desc = SplitDesc(base_psn, pkts_per_subflow, len(sports))
    for i, port in enumerate(sports):
        desc.sports[i] = port_be(check_port(port, "source port"))
    split = Split(ip_str(key.dst_ip), dst_qp, base_psn, pkts_per_subflow, tuple(sports))
    return key, desc, split


class Flowsplit(Program):
    SOURCE = "flowsplit.c"
    HOOKS = {"egress": "flowsplit_egress"}
    PRIO = 10
    DEFINES = {"MAX_SUBFLOWS": MAX_SUBFLOWS}
    MAPS = {"splits": (SplitKey, SplitDesc, False),
            "split_stats": (SplitKey, SplitStats, True)}

    def set_split(self, dst_ip: str, dst_qp: int, base_psn: int, pkts_per_subflow: int,
                  sports: list[int]) -> Split:
        """Sub-flow i = PSNs base_psn + i*pkts_per_subflow ... (+pkts_per_subflow - 1), modulo
        2^24, leaves with source port sports[i]. Replaces the connection's previous split; its
        counters keep counting until clear_counters."""
        return self.set_splits([(dst_ip, dst_qp, base_psn, pkts_per_subflow, sports)])[0]

    def split_message(self, dst_ip: str, dst_qp: int, first_psn: int, n_packets: int,
                      sports: list[int]) -> Split:
        """Splits a message of `n_packets` starting at `first_psn` into len(sports) sub-flows
        of equal size (the last one shorter when the division is not exact)."""
        check_range("message packets", n_packets, 1, 0xFFFFFF)
        per = -(-n_packets // max(len(sports), 1))
        return self.set_split(dst_ip, dst_qp, first_psn, per, sports)

    def set_splits(self, specs) -> list[Split]:
        """Several set_split at once: all are checked before any is written."""
        entries = [_entry(*spec) for spec in specs]
        stats = self.maps["split_stats"]
        for key, desc, _ in entries:
            if stats.get(key) is None:
                stats.set(key, SplitStats(), libbpf.BPF_NOEXIST)
            self.maps["splits"].set(key, desc)
        return [split for _, _, split in entries]

    def remove_split(self, dst_ip: str, dst_qp: int) -> bool:
        key = _key(dst_ip, dst_qp)
        self.maps["split_stats"].delete(key)
        return self.maps["splits"].delete(key)

    def splits(self) -> list[Split]:
        found = []
        for key in self.maps["splits"].keys():
            desc = self.maps["splits"].get(key)
            if desc is None:  # removed while we listed
                continue
            ports = tuple(port_be(desc.sports[i]) for i in range(desc.n_subflows))
            found.append(Split(ip_str(key.dst_ip), key.dst_qp, desc.base_psn,
                               desc.pkts_per_subflow, ports))
        return found

    def counters(self, dst_ip: str, dst_qp: int) -> SubflowCounters | None:
        key = _key(dst_ip, dst_qp)
        per_cpu = self.maps["split_stats"].get(key)
        desc = self.maps["splits"].get(key)
        if per_cpu is None or desc is None:
            return None
        n = desc.n_subflows
        pkts = [sum(cpu.pkts[i] for cpu in per_cpu) for i in range(MAX_SUBFLOWS + 1)]
        byts = [sum(cpu.bytes[i] for cpu in per_cpu) for i in range(MAX_SUBFLOWS + 1)]
        return SubflowCounters(tuple(pkts[:n]), tuple(byts[:n]), pkts[OUTSIDE], byts[OUTSIDE])

    def clear_counters(self, dst_ip: str | None = None, dst_qp: int | None = None) -> None:
        """Zeroes the counters of one connection, or of all when no connection is given."""
        stats = self.maps["split_stats"]
        keys = list(stats.keys()) if dst_ip is None else [_key(dst_ip, dst_qp)]
        for key in keys:
            stats.set(key, SplitStats(), libbpf.BPF_EXIST)

    def clear(self) -> None:
        """Removes every split and its counters."""
        self.maps["splits"].clear()
        self.maps["split_stats"].clear()
