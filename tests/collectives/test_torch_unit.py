"""The `mlfabric` backend's parts that need no fabric: which reductions and dtypes each
algorithm takes (the fallback reasons, the precise errors), tensors to wire arrays and back,
a sub-group's validation, and a one-rank world in this process (nothing on the wire: every
operation's bookkeeping, the fallback said once, the error for an operation nothing
implements)."""
from __future__ import annotations

import logging

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (scripts/setup.sh "
                                            "installs torch==2.13.0, the CPU build)")
import torch.distributed as dist  # noqa: E402

from collectives import torch_tensors as tt  # noqa: E402

R = dist.ReduceOp


def test_torch_reductions_each_algorithm_takes_and_the_errors():
    assert tt.ufunc_of(R.SUM, torch.bfloat16) is np.add
    assert tt.ufunc_of(R.MAX, torch.int32) is np.maximum
    with pytest.raises(tt.UnsupportedOp, match="BAND is a bitwise reduction"):
        tt.ufunc_of(R.BAND, torch.float32)
    with pytest.raises(tt.UnsupportedOp, match="AVG of torch.int32"):
        tt.ufunc_of(R.AVG, torch.int32)
    with pytest.raises(tt.UnsupportedOp, match="real numbers"):
        tt.ufunc_of(R.SUM, torch.complex64)
    assert tt.fallback_reason("netreduce", R.SUM, torch.bfloat16, True) is None
    assert "cannot reduce with MAX" in tt.fallback_reason("netreduce", R.MAX, torch.float32, True)
    assert "not torch.float64" in tt.fallback_reason("switchml", R.SUM, torch.float64, True)
    assert "sub-group" in tt.fallback_reason("netreduce", R.SUM, torch.float32, False)
    assert "only adds" in tt.fallback_reason("halving-doubling", R.MIN, torch.float32, True)
    assert tt.fallback_reason("ring", R.MIN, torch.int64, False) is None


def test_torch_wire_arrays_round_trip_every_dtype():
    for dt in (torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64):
        t = (torch.arange(7 * 3) - 9).to(dt).reshape(7, 3)
        x = tt.reduce_array(t, "ring")
        assert x.dtype == (np.float32 if dt == torch.bfloat16 else x.dtype)
        out = torch.empty_like(t)
        tt.write_back(out, x)
        assert torch.equal(out, t), dt
        raw = torch.empty_like(t)
        tt.write_bytes(raw, tt.byte_array(t).copy())
        assert torch.equal(raw, t), dt
    # the switches take float16 widened to float32 (their fixed point is float32's)
    assert tt.reduce_array(torch.ones(3, dtype=torch.float16), "netreduce").dtype == np.float32


def test_torch_subgroup_must_hold_this_rank_and_world_ranks():
    from collectives.group import GroupComm

    class World:
        rank, size, cfg, ep = 2, 4, None, None
    with pytest.raises(ValueError, match="including this one"):
        GroupComm(World(), [0, 1])
    with pytest.raises(ValueError, match="outside the world"):
        GroupComm(World(), [2, 7])
    g = GroupComm(World(), [3, 2])
    assert (g.rank, g.size, g.members) == (1, 2, [3, 2])


def test_torch_options_name_what_is_missing():
    from collectives.torchpg import Options
    with pytest.raises(ValueError, match="choose from"):
        Options(allreduce="tree")
    with pytest.raises(ValueError, match="needs its aggregation job's options"):
        Options(allreduce="netreduce", options={})


@pytest.fixture(scope="module")
def one_rank():
    """A one-rank mlfabric world in this process on loopback (the Python transport: no
    packet ring on the host's interfaces); nothing goes on the wire with one rank."""
    from collectives import torchpg
    torchpg.configure({"ips": ["127.0.0.1"], "transport": {"backend": "python"},
                       "port": 18790, "timeout": 10})
    dist.init_process_group("mlfabric", init_method="tcp://127.0.0.1:18791", rank=0,
                            world_size=1)
    yield torchpg
    dist.destroy_process_group()
    torchpg.configure({})


def test_torch_one_rank_world_runs_every_operation(one_rank):
    assert dist.get_backend() == "mlfabric"
    t = torch.arange(5, dtype=torch.bfloat16)
    w = dist.all_reduce(t, async_op=True)
    w.wait()
    assert w.is_completed() and torch.equal(t, torch.arange(5, dtype=torch.bfloat16))
    out = torch.empty(4)
    dist.all_gather_into_tensor(out, torch.ones(4))
    rs = torch.empty(3)
    dist.reduce_scatter_tensor(rs, torch.full((3,), 2.0))
    b = torch.full((2,), 7)
    dist.broadcast(b, 0)
    a = torch.empty(6)
    dist.all_to_all_single(a, torch.arange(6.0))
    dist.barrier()
    assert out.tolist() == [1.0] * 4 and rs.tolist() == [2.0] * 3 and a.tolist() == list(range(6))
    stats = one_rank.stats()
    assert {"allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall",
            "barrier"} <= set(stats)


def test_torch_one_rank_fallback_is_logged_once_and_unsupported_op_raises(one_rank, caplog):
    group = dist.new_group([0], pg_options=one_rank.Options(
        allreduce="netreduce", options={"netreduce": {"aggregator": "192.0.2.1"}}))
    with caplog.at_level(logging.WARNING, logger="collectives.torch"):
        for _ in range(3):
            t = torch.tensor([3.0, -1.0])
            dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
            assert t.tolist() == [3.0, -1.0]
    said = [r.getMessage() for r in caplog.records if "cannot reduce with MAX" in r.getMessage()]
    assert len(said) == 1 and said[0].endswith("running it on ring"), said
    with pytest.raises(tt.UnsupportedOp, match="no algorithm implements gather"):
        dist.gather(torch.ones(1), [torch.ones(1)], dst=0)
