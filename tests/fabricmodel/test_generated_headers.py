"""The committed P4 and eBPF headers are what fabricmodel/headers.py generates from the owner
(fabricmodel/rocev2.py, hashing.py), and a number changed in the owner shows as a difference
until the headers are regenerated."""
import re

import pytest

from fabricmodel import headers, rocev2


def test_generated_headers_match_the_committed_files():
    for path, text in headers.outputs().items():
        assert path.read_text() == text, (
            f"{path.name} differs from what fabricmodel/headers.py generates: run "
            f"`{headers.COMMAND}`")


def test_generated_headers_differ_when_a_number_in_the_owner_changes(monkeypatch):
    monkeypatch.setattr(rocev2, "ROCEV2_PORT", 4792)
    stale = [p.name for p, text in headers.outputs().items() if p.read_text() != text]
    assert stale == ["rocev2.p4", "rocev2.h"]
    assert "const bit<16> ROCEV2_PORT = 4792;" in headers.p4_header()


@pytest.mark.parametrize("path", [headers.P4_HEADER.parent / "defines.p4",
                                  headers.C_HEADER.parent / "roce.h"])
def test_generated_numbers_are_not_typed_again_beside_them(path):
    """The hand-written headers include the generated one and define none of its names."""
    text = path.read_text()
    generated = headers.P4_HEADER if path.suffix == ".p4" else headers.C_HEADER
    assert f'#include "{generated.name}"' in text
    names = {n for n, *_ in headers.p4_constants() + headers.p4_defines() + headers.c_defines()}
    defined = set(re.findall(r"^(?:#define|const bit<\d+>)\s+(\w+)", text, re.M))
    assert not names & defined


def test_generated_qpn_layout_round_trips():
    for kind, peer, index in ((rocev2.KIND_DATA, 0, 0), (rocev2.KIND_ACK, 255, 7),
                              (rocev2.KIND_DOWN, 4095, 255)):
        assert rocev2.qpn_fields(rocev2.qpn(kind, peer, index)) == (kind, peer, index)
    assert rocev2.qpn(rocev2.KIND_DATA, 3, 2) == 0x100302
    with pytest.raises(ValueError, match="no QP number"):
        rocev2.qpn(rocev2.KIND_DATA, 4096, 0)
