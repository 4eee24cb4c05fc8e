"""Several collectives in one simulated run: the engine's jobs (each with its own steps per rank,
started per rank, a completion callback per rank) and its timer."""
from __future__ import annotations

import pytest

from fabricmodel.topology import leaf_spine
from sim.fabric import HEADER_BYTES, LinkSpec, SimFabric, Transport

LINK = LinkSpec(gbps=100, delay_ns=500)
SIZE = 4 << 20


def _one_flow_job(e, src: int, dst: int, size: int) -> int:
    """A one-step job: `src` sends `size` bytes to `dst`."""
    job = e.add_job()
    e.add_step(job, src, 0)
    e.add_step(job, dst, size)
    return job


def _wire(e, flows: dict[int, tuple[int, int, int]], done: dict):
    def arrive(job, rank, step):
        src, dst, size = flows[job]
        if rank == src:
            e.add_qp(job, src, dst, step, size, 4096, 0xC000 + job, 0)

    e.on_arrive = arrive
    e.on_done = lambda job, rank: done.setdefault((job, rank), e.rank_done(job, rank))


def test_workload_jobs_on_one_nic_share_it_and_disjoint_jobs_do_not():
    fab = SimFabric(leaf_spine(2, 2, 2), LINK, Transport())
    e = fab.engine
    flows = {}
    for src, dst in ((0, 2), (0, 3), (1, 2)):     # jobs 0 and 1 share host 0's NIC
        flows[_one_flow_job(e, src, dst, SIZE)] = (src, dst, SIZE)
    done: dict = {}
    _wire(e, flows, done)
    for job, (src, dst, _) in flows.items():
        e.start_rank(job, src)
        e.start_rank(job, dst)
    fab.run()
    alone = SIZE * 8 * (4096 + HEADER_BYTES) / 4096 / LINK.bps
    assert set(done) == {(j, r) for j, (s, d, _) in flows.items() for r in (s, d)}
    # host 2 receives jobs 0 and 2 at once: both take about two link times
    assert done[(0, 2)] == pytest.approx(2 * alone, rel=0.1)
    assert done[(1, 3)] == pytest.approx(2 * alone, rel=0.1)   # shares host 0's uplink
    fab.close()


def test_workload_job_started_late_waits_and_timer_fires():
    fab = SimFabric(leaf_spine(2, 2, 1), LINK, Transport())
    e = fab.engine
    job = _one_flow_job(e, 0, 1, SIZE)
    done: dict = {}
    timers: dict = {}
    _wire(e, {job: (0, 1, SIZE)}, done)
    e.start_rank(job, 1)                        # the receiver is in; the sender is not yet

    def on_timer(tid):
        timers[tid] = e.now_s()                 # the engine's simulated clock
        e.start_rank(job, 0)

    e.on_timer = on_timer
    e.timer(1e-3, 7)
    fab.run()
    assert timers[7] == pytest.approx(1e-3)
    alone = SIZE * 8 * (4096 + HEADER_BYTES) / 4096 / LINK.bps
    assert done[(job, 1)] == pytest.approx(1e-3 + alone, rel=0.05)
    fab.close()
