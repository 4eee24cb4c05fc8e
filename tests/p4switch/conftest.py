"""fabric.p4 compiled once per session for the tests that fuzz it configured."""
from __future__ import annotations

import fabric_fuzz
import pytest

import p4switch


@pytest.fixture(scope="session")
def fabric_compiled():
    return p4switch.compile_program(str(fabric_fuzz.FABRIC_P4))
