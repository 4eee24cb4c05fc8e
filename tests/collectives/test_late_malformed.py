"""Late and out-of-turn messages to a rank (malformed for the collective that gets them):
a SwitchML result arriving after its call returned is dropped and counted as a duplicate (not
as the next run's bad packet); a reliable-broadcast control message of a later task, or one too
short to read, is dropped and counted as a bad packet, never raised."""
from __future__ import annotations

import struct
from types import SimpleNamespace

import numpy as np

from collectives import mcast, switchml
from collectives.transport import Stats
from fabricmodel import rocev2


class LoopbackAggregator:
    """An endpoint whose aggregator answers every chunk at once (one worker: the sum is the
    chunk), twice: the second answer arrives after the call is over."""

    def __init__(self):
        self.handlers, self.stats = {}, Stats()
        self.cfg = SimpleNamespace(ecn=False)
        self.queue, self.late = [], []

    def join(self, _group):
        pass

    def send_frame(self, _agg, _sport, frame, _tos):
        job, slot, g, w, n, flags, values = switchml.decode(frame + b"\0" * 4)
        answer = switchml.encode(job, slot, g, w, n, flags | rocev2.AGG_FLAG_RESULT,
                                 values) + b"\0" * 4
        self.queue.append(answer)
        self.late.append(answer)

    def progress(self, _seconds):
        while self.queue:
            self.handlers[rocev2.AGGREGATION](memoryview(self.queue.pop(0)), None, 0, 0.0)


def test_malformed_late_switchml_result_counted_as_duplicate():
    ep = LoopbackAggregator()
    comm = SimpleNamespace(ep=ep, rank=0, size=1, counters={}, cfg=SimpleNamespace(timeout=5))
    x = np.arange(100, dtype=np.int32)
    assert (switchml.allreduce_switchml(comm, x, "10.0.0.254", job_id=3, slots=2) == x).all()
    before = ep.stats.duplicates
    for answer in ep.late:                  # the aggregator's second answers, after the call
        ep.handlers[rocev2.AGGREGATION](memoryview(answer), None, 0, 0.0)
    assert ep.stats.duplicates - before == len(ep.late) and ep.stats.bad_packets == 0


class ControlOnly:
    """A two-rank communicator whose peer has sent `messages` on the control QP."""

    def __init__(self, messages):
        self.rank, self.size, self.counters, self.groups = 0, 2, {}, {"239.1.0.1"}
        self.stats = Stats()
        self.cfg = SimpleNamespace(timeout=0.3)
        self.ep = SimpleNamespace(cfg=SimpleNamespace(line_gbps=1.0, min_rto=0.01, mtu=1024,
                                                      ecn=False),
                                  handlers={}, active=False, progress=lambda s: None,
                                  sendqps={}, join=lambda g: None,
                                  send_frame=lambda *frame: None)
        self.inbox = list(messages)

    def poll_control(self, _peer):
        return self.inbox.pop(0) if self.inbox else None

    def send_control(self, _peer, _msg):
        pass

    def barrier(self):
        pass


def test_malformed_future_task_control_message_dropped_and_counted():
    future = struct.pack("!cHH", b"T", 7, 1)            # a token of task 7 during task 1
    comm = ControlOnly([future, b"\x01"])
    try:
        mcast.allgather_multicast(comm, np.zeros(4, dtype=np.int32), "239.1.0.1")
    except TimeoutError:
        pass                                # the peer never multicasts: the task cannot end
    assert comm.stats.bad_packets == 2
