"""pytest fixtures of the fabric.p4 tests (loaded by each module's `pytest_plugins`)."""
from __future__ import annotations

import pytest
from fabric_testlib import FABRIC_P4

import p4switch


@pytest.fixture(scope="session")
def fabric_config():
    """fabric.p4 compiled once per session."""
    return p4switch.compile_program(str(FABRIC_P4))


@pytest.fixture
def sw(fabric_config):
    """A fresh switch running fabric.p4 with empty tables and zeroed state."""
    info, config = fabric_config
    return p4switch.load_config(info, config)
