"""Stateful v1model externs: registers, counters and two-rate three-colour meters."""
from __future__ import annotations

import time

GREEN, YELLOW, RED = 0, 1, 2


class Register:
    def __init__(self, name, size, width):
        self.name, self.size, self.mask = name, size, (1 << width) - 1
        self.values = [0] * size

    def read(self, index):
        return self.values[index] if 0 <= index < self.size else 0

    def write(self, index, value):
        if 0 <= index < self.size:
            self.values[index] = value & self.mask


class Counter:
    def __init__(self, name, size, unit):
        self.name, self.size, self.unit = name, size, unit
        self.packets = [0] * size
        self.bytes = [0] * size

    def count(self, index, length):
        if 0 <= index < self.size:
            self.packets[index] += 1
            self.bytes[index] += length


class MeterState:
    """trTCM (RFC 2698) as BMv2 runs it; unconfigured meters colour everything GREEN."""

    __slots__ = ("cir", "cburst", "pir", "pburst", "ctokens", "ptokens", "last")

    def __init__(self):
        self.cir = None

    def configure(self, cir, cburst, pir, pburst):
        if cir < 0 or pir < 0 or cburst < 0 or pburst < 0:
            raise ValueError("meter rates and bursts must not be negative")
        self.cir, self.cburst, self.pir, self.pburst = cir, cburst, pir, pburst
        self.ctokens, self.ptokens = float(cburst), float(pburst)
        self.last = time.monotonic()

    def reset(self):
        self.cir = None

    def execute(self, amount):
        if self.cir is None:
            return GREEN
        now = time.monotonic()
        elapsed, self.last = now - self.last, now
        self.ctokens = min(self.cburst, self.ctokens + elapsed * self.cir)
        self.ptokens = min(self.pburst, self.ptokens + elapsed * self.pir)
        if self.ptokens < amount:
            return RED
        self.ptokens -= amount
        if self.ctokens < amount:
            return YELLOW
        self.ctokens -= amount
        return GREEN


class Meter:
    def __init__(self, name, size, unit):
        self.name, self.size, self.unit = name, size, unit
        self.states = [MeterState() for _ in range(size)]

    def execute(self, index, length):
        if not 0 <= index < self.size:
            return GREEN
        return self.states[index].execute(1 if self.unit == "packets" else length)


class DirectMeter:
    """The colour of the last hit entry's meter, read by direct_meter.read()."""

    def __init__(self, name, unit):
        self.name, self.unit, self.color = name, unit, GREEN


class ValueSet:
    def __init__(self, name, size, widths):
        self.name, self.size, self.widths = name, size, widths
        self.members: list[tuple[int, int]] = []   # (value, mask)

    def match(self, key):
        return any(key & m == v for v, m in self.members)
