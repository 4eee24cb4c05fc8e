"""Meter configurations (two-rate three-colour, as v1model meters are): the checks shared by
indexed and direct meters."""
from __future__ import annotations

from p4.v1 import p4runtime_pb2

from .errors import invalid


def check_meter_config(c: p4runtime_pb2.MeterConfig, name: str) -> None:
    if c.cir < 0 or c.pir < 0 or c.cburst < 0 or c.pburst < 0:
        raise invalid(f"{name}: negative rate or burst")
    if c.cir > c.pir:
        raise invalid(f"{name}: committed rate {c.cir} above peak rate {c.pir}")
    if c.eburst:
        raise invalid(f"{name}: eburst belongs to single-rate meters, v1model has two-rate "
                      "meters")
