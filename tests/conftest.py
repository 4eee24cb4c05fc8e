"""Shared pytest fixtures: privilege checks and self-cleaning network namespaces."""
from __future__ import annotations

import functools
import itertools
import os
import shutil
import subprocess
import uuid

import pytest

# Test helpers import each other as `tests.<module>`. Bind that name to this folder now:
# p4runtime_sh imports IPython, which puts IPython/extensions on sys.path, and its `tests`
# package would otherwise win for whichever test module imports `tests.*` after it. (A copy
# of this file outside the repository, as test_foundation makes, has no `tests` to bind.)
try:
    import tests  # noqa: F401
except ModuleNotFoundError:
    pass

_counter = itertools.count()


def _is_root() -> bool:
    return os.geteuid() == 0


@functools.cache
def _have_bcc() -> str | None:
    try:
        import bcc  # noqa: F401
    except Exception as exc:  # bcc raises assorted errors when headers are missing
        return f"bcc does not import: {exc}"
    return None


def pytest_collection_modifyitems(config, items):
    reasons = {}
    if not _is_root():
        reasons["netns"] = "needs root for network namespaces"
        reasons["ebpf"] = "needs root to load eBPF programs"
        reasons["mininet"] = "needs root to run Mininet"
    missing = [t for t in ("simple_switch_grpc", "p4c-bm2-ss") if shutil.which(t) is None]
    if missing:
        reasons["bmv2"] = f"BMv2 needs {' and '.join(missing)} on PATH"
    for item in items:
        for marker, reason in reasons.items():
            # a marker, not a keyword: keywords also hold directory names (a checkout
            # called bmv2 would skip everything)
            if item.get_closest_marker(marker) is not None:
                item.add_marker(pytest.mark.skip(reason=reason))


def pytest_runtest_setup(item):
    """As root, eBPF tests must run: bcc that does not import (setup.sh installs it) fails
    them with the import error instead of skipping them out of sight."""
    if _is_root() and item.get_closest_marker("ebpf") is not None:
        bcc_missing = _have_bcc()
        if bcc_missing:
            pytest.fail(f"eBPF test as root, but {bcc_missing} (scripts/setup.sh installs "
                        "bcc)", pytrace=False)


def unique_name(prefix: str) -> str:
    """A short name unique to this run (interface names are limited to 15 bytes)."""
    return f"{prefix}{os.getpid() % 1000:03d}{next(_counter):03d}"[:15]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


class NetnsFactory:
    """Creates namespaces and veth pairs and remembers them so that teardown removes all."""

    def __init__(self) -> None:
        self.namespaces: list[str] = []

    def netns(self, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        _ip("netns", "add", name)
        self.namespaces.append(name)
        _ip("-n", name, "link", "set", "lo", "up")
        return name

    def veth(self, ns_a: str, ns_b: str, addr_a: str | None = None, addr_b: str | None = None,
             name_a: str | None = None, name_b: str | None = None) -> tuple[str, str]:
        """A veth pair with one end in each namespace; optional CIDR addresses; both ends up."""
        name_a = name_a or unique_name("va")
        name_b = name_b or unique_name("vb")
        _ip("link", "add", name_a, "netns", ns_a, "type", "veth", "peer", "name", name_b,
            "netns", ns_b)
        for ns, dev, addr in ((ns_a, name_a, addr_a), (ns_b, name_b, addr_b)):
            if addr:
                _ip("-n", ns, "addr", "add", addr, "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
        return name_a, name_b

    def cleanup(self) -> None:
        for name in reversed(self.namespaces):
            # Killing leftover processes first lets the namespace really disappear.
            subprocess.run(["ip", "netns", "pids", name], capture_output=True)
            pids = _ip("netns", "pids", name, check=False).stdout.split()
            for pid in pids:
                subprocess.run(["kill", "-9", pid], capture_output=True)
            _ip("netns", "del", name, check=False)
        self.namespaces.clear()


@pytest.fixture
def netns_factory():
    """Yields a NetnsFactory; every namespace it made is deleted, pass or fail."""
    factory = NetnsFactory()
    try:
        yield factory
    finally:
        factory.cleanup()


@pytest.fixture
def netns_pair(netns_factory):
    """Two namespaces joined by a veth pair 10.99.0.1/24 <-> 10.99.0.2/24."""
    a = netns_factory.netns("a")
    b = netns_factory.netns("b")
    dev_a, dev_b = netns_factory.veth(a, b, "10.99.0.1/24", "10.99.0.2/24")
    return {"a": a, "b": b, "dev_a": dev_a, "dev_b": dev_b, "ip_a": "10.99.0.1",
            "ip_b": "10.99.0.2"}
