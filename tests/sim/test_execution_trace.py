"""A PyTorch execution trace (torch.profiler.ExecutionTraceObserver) recorded from a tiny
data-parallel model, read into the DAG and replayed by `python -m sim trace`: the DDP bucket
all-reduce becomes a collective of the gradients' bytes that the copy back waits for."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

from sim.cli import main  # noqa: E402
from workloads import pytorch_et  # noqa: E402
from workloads.schedule import compute_bound  # noqa: E402

RANKS = 2


def record(prefix, rank: int) -> None:
    """One rank's iteration of a 2-layer MLP, data parallel, each gradient all-reduced once
    backward is done, as a process of a RANKS-rank job (torch's fake process group: the
    collectives are issued and recorded, not carried)."""
    import torch.distributed as dist
    from torch.profiler import ExecutionTraceObserver
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", rank=rank, world_size=RANKS, store=FakeStore())
    try:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                    torch.nn.Linear(512, 64))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(32, 256)
        et = ExecutionTraceObserver()
        et.register_callback(f"{prefix}.{rank}.json")
        et.start()
        model(x).sum().backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        et.stop()
        et.unregister_callback()
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    p = tmp_path_factory.mktemp("et") / "mlp"
    for r in range(RANKS):
        record(p, r)
    return p


def test_execution_trace_reads_into_the_dag(prefix):
    wl = pytorch_et.read(prefix, flops_s=1e12)
    assert wl.n == RANKS
    params = 256 * 512 + 512 + 512 * 64 + 64
    colls = [o for o in wl.ranks[0] if o.kind == "collective"]
    assert sum(o.bytes for o in colls) == 4 * params           # fp32 gradients, each tensor
    assert len(colls) == 4
    assert all(o.coll == "all-reduce" and o.group == (0, 1) for o in colls)
    # GEMMs of 2 x 32 x in x out: both layers forward, the second's two backward products,
    # the first's one (the input needs no gradient)
    first, second = 2 * 32 * 256 * 512, 2 * 32 * 512 * 64
    assert compute_bound(wl) == pytest.approx((2 * first + 3 * second) / 1e12, rel=1e-6)
    # each all-reduce waits for the backward that produced its gradient; the optimizer step
    # for every all-reduce
    ops = wl.ranks[0]
    assert all(ops[c.deps[0]].name.startswith("autograd::") for c in colls)
    step = next(o for o in ops if o.name.startswith("Optimizer.step"))
    assert {c.id for c in colls} <= set(step.deps)


def test_execution_trace_replays_in_sim_trace(prefix, tmp_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["trace", str(prefix), "--gbps", "100", "--out", str(out)])
    assert res.exit_code == 0, res.output
    row = json.loads((out / "trace-mlp.jsonl").read_text().splitlines()[0])
    assert row["ok"] and row["gpus"] == RANKS
    assert row["nic_bytes_max"] > 0                               # the all-reduce crossed NICs
    assert row["iteration_s"] > row["compute_bound_s"]
    assert "PyTorch execution trace" in res.output


def test_malformed_execution_trace_is_refused(tmp_path):
    (tmp_path / "bad.0.json").write_text("{\"nodes\": 3}")
    res = CliRunner().invoke(main, ["trace", str(tmp_path / "bad")])
    assert res.exit_code == 2 and "no `nodes` list" in res.output
