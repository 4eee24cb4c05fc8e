"""The pacing monitor's lost-time episodes, asked for a window (the control socket's
`fidelity T0 T1`): a port that owed a packet for 50 ms and sent none lost that link time, and a
window counts only the part of it that lies within it. Both backends: the Python traffic
manager and device.c's ring through the native wrapper (NativeQueues)."""
from __future__ import annotations

import ctypes
import threading
import time
from pathlib import Path

import pytest

from p4switch.device.control import execute
from p4switch.device.traffic_manager import TrafficManager

QUEUE_P4 = Path(__file__).parent / "device_programs" / "queue.p4"    # port 1 -> port 2
HELD_S = 0.05


def _check_windows(fidelity, held_from: float, held_to: float) -> None:
    """fidelity(t0, t1) -> {port: (lost, longest, episodes, partial)}: the one episode of port
    2, held_from to held_to (monotonic), seen whole, clipped, and not at all."""
    length = held_to - held_from
    lost, longest, n, partial = fidelity(held_from - 1.0, held_to + 1.0)[2]
    assert n == 1 and not partial
    assert abs(lost - length) < 0.01 and abs(longest - length) < 0.01, (lost, longest, length)
    inside = fidelity(held_from + 0.01, held_from + 0.03)[2]
    assert abs(inside[0] - 0.02) < 1e-6 and inside[2] == 1, inside     # clipped to the window
    assert abs(inside[1] - length) < 0.01                               # the episode, whole
    assert fidelity(held_from - 1.0, held_from - 0.5)[2] == (0.0, 0.0, 0, False)   # before it
    assert fidelity(held_to + 0.5, held_to + 1.0)[2] == (0.0, 0.0, 0, False)       # after it


def test_fidelity_python_traffic_manager_counts_a_loss_within_the_window_only():
    tm = TrafficManager(depth=16, rate=1000.0, unit="pps")     # one packet per ms
    held_from = time.monotonic()
    for i in range(3):
        tm.enqueue(2, i)
    time.sleep(HELD_S)                 # the port owed the first packet from held_from on
    for _ in range(3):
        tm.done(tm.dequeue().port)
    held_to = time.monotonic()
    _check_windows(tm.fidelity, held_from, held_to)
    # the control socket's command: the same window, in its words
    reply = execute(tm, f"fidelity {held_to + 0.5} {held_to + 1.0}")
    assert reply == "port lost_s longest_s episodes partial | 2 0.000000 0.000000 0 0"
    whole = execute(tm, "fidelity").split(" | ")[1].split()
    assert whole[0] == "2" and float(whole[1]) > 0.8 * HELD_S and whole[3:] == ["1", "0"]
    assert execute(tm, "fidelity 2 1").startswith("error: fidelity window [2, 1] ends before")
    assert execute(tm, "fidelity 1").startswith("error: unknown command")


def test_fidelity_python_traffic_manager_forgets_old_episodes_and_says_so():
    from p4switch.device.traffic_manager import EPISODES, Episodes

    e = Episodes()
    for i in range(EPISODES + 10):
        e.add(10.0 + i, 0.5)
    assert e.within(0.0, 1e9)[2:] == (EPISODES, True)          # older ones may overlap
    assert e.within(10.0 + EPISODES + 4.6, 1e9)[2:] == (5, False)  # all within it kept


def test_fidelity_native_ring_counts_a_loss_within_the_window_only():
    from p4switch import load
    from p4switch.device.native_device import NativeQueues
    from p4switch.native import available, unavailable_reason

    if not available():
        pytest.skip(unavailable_reason())
    sw = load(QUEUE_P4, backend="native")
    lib = sw.lib
    lib.dev_configure(0, None, None, -1, -1, 0)       # no ports: frames leave into nothing
    tm = NativeQueues(depth=16)
    tm.set_rate(2, 1000.0, "pps")
    tm.attach(lib)
    frame = bytes(range(6)) * 2 + b"\x08\x00" + bytes(50)
    held_from = time.monotonic()
    for _ in range(3):
        lib.dev_inject(1, frame, len(frame))        # queued for port 2; nothing sends yet
    time.sleep(HELD_S)
    egress = threading.Thread(target=lib.dev_egress_loop, daemon=True)
    egress.start()
    try:
        deadline = time.monotonic() + 5
        while tm.snapshot()[2][3] and time.monotonic() < deadline:     # occupancy
            time.sleep(0.001)
        held_to = time.monotonic()
        assert tm.snapshot()[2][3] == 0
    finally:
        lib.dev_stop()
        egress.join(timeout=5)
    _check_windows(tm.fidelity, held_from, held_to)
    assert isinstance(lib.dev_fidelity.argtypes[0](), ctypes.c_double)
