"""Width arithmetic of the generated code against P4's rules (bit<W> wraps, int<W> two's
complement, saturating ops, shifts, concatenation, slices, casts)."""
from __future__ import annotations

import pytest
from test_core_helpers import run, switch

CASES = [
    # (statement, inputs, field, expected)
    ("hdr.h.r8 = hdr.h.a + hdr.h.b;", {"a": 200, "b": 100}, "r8", 44),
    ("hdr.h.r8 = hdr.h.a - hdr.h.b;", {"a": 1, "b": 2}, "r8", 255),
    ("hdr.h.r8 = hdr.h.a * hdr.h.b;", {"a": 16, "b": 17}, "r8", (16 * 17) & 0xFF),
    ("hdr.h.r8 = hdr.h.a |+| hdr.h.b;", {"a": 200, "b": 100}, "r8", 255),
    ("hdr.h.r8 = hdr.h.a |-| hdr.h.b;", {"a": 10, "b": 100}, "r8", 0),
    ("hdr.h.s = hdr.h.s |+| hdr.h.t;", {"s": 100, "t": 100}, "s", 127),
    ("hdr.h.s = hdr.h.s |-| hdr.h.t;", {"s": -100 & 0xFF, "t": 100}, "s", 0x80),
    ("hdr.h.s = hdr.h.s + hdr.h.t;", {"s": 127, "t": 1}, "s", 0x80),
    ("hdr.h.r8 = hdr.h.a << 3;", {"a": 0x41}, "r8", 0x08),
    ("hdr.h.r8 = hdr.h.a << hdr.h.b;", {"a": 0xFF, "b": 9}, "r8", 0),
    ("hdr.h.r8 = hdr.h.a >> hdr.h.b;", {"a": 0x80, "b": 7}, "r8", 1),
    ("hdr.h.s = hdr.h.s >> 2;", {"s": 0x80}, "s", 0xE0),
    ("hdr.h.r16 = hdr.h.a ++ hdr.h.b;", {"a": 0x12, "b": 0x34}, "r16", 0x1234),
    ("hdr.h.r8 = hdr.h.r32[15:8];", {"r32": 0x11223344}, "r8", 0x33),
    ("hdr.h.r32[7:4] = 4w0xA;", {"r32": 0xFFFFFFFF}, "r32", 0xFFFFFFAF),
    ("hdr.h.r8 = (bit<8>)hdr.h.r16;", {"r16": 0x1234}, "r8", 0x34),
    ("hdr.h.r16 = (bit<16>)(int<16>)hdr.h.s;", {"s": 0xFF}, "r16", 0xFFFF),
    ("hdr.h.s = (int<8>)hdr.h.a;", {"a": 200}, "s", 200),
    ("hdr.h.r8 = ~hdr.h.a;", {"a": 0x0F}, "r8", 0xF0),
    ("hdr.h.r8 = -hdr.h.a;", {"a": 1}, "r8", 0xFF),
    ("hdr.h.r8 = hdr.h.a & 0xF0 | hdr.h.b ^ 0x01;", {"a": 0xAB, "b": 0x10}, "r8", 0xA0 | 0x11),
    ("hdr.h.r8 = hdr.h.a / 3 + hdr.h.b % 5;", {"a": 100, "b": 17}, "r8", 33 + 2),
    ("hdr.h.r8 = hdr.h.a > hdr.h.b ? hdr.h.a : hdr.h.b;", {"a": 3, "b": 9}, "r8", 9),
    ("hdr.h.r8 = (hdr.h.s < hdr.h.t) ? 8w1 : 8w0;", {"s": 0xFF, "t": 1}, "r8", 1),
    ("hdr.h.r8 = (bit<8>)((bit<1>)(hdr.h.a == 5));", {"a": 5}, "r8", 1),
    ("hdr.h.r32 = 32w1 << 31;", {}, "r32", 0x80000000),
    ("hdr.h.r8 = 8w255 + 8w1;", {}, "r8", 0),
    ("hdr.h.r16 = (bit<16>)hdr.h.a + 16w0xFFFF;", {"a": 2}, "r16", 1),
]


@pytest.mark.parametrize("stmt,inputs,field,expected", CASES, ids=[c[0] for c in CASES])
def test_width_semantics(tmp_path, stmt, inputs, field, expected):
    sw = switch(tmp_path, stmt)
    assert run(sw, **inputs)[field] == expected


def test_local_variables_keep_their_width(tmp_path):
    sw = switch(tmp_path, "bit<4> x = 4w15; x = x + 1; hdr.h.r8 = (bit<8>)x;")
    assert run(sw)["r8"] == 0
