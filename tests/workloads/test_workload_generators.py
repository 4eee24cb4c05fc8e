"""Each generator's collectives carry the model's parameters x bytes per element / shards, and
its compute is FLOPs / (peak x efficiency)."""
from __future__ import annotations

import pytest

from workloads.dag import COLLECTIVE, RECV, SEND
from workloads.generators import data_parallel, fsdp, gpt_3d, one_f_one_b, pipeline_bound
from workloads.models import MODELS, Cluster
from workloads.schedule import compute_bound

C16 = Cluster(16, gpus_per_host=8)


def _colls(wl, rank=0, prefix=""):
    return [op for op in wl.ranks[rank] if op.kind == COLLECTIVE and op.name.startswith(prefix)]


@pytest.mark.parametrize("model", ["resnet50", "bert-large", "gpt2-1.5b"])
def test_workload_ddp_buckets_sum_to_the_gradients(model):
    wl = data_parallel(model, C16, bytes_per_element=4)
    ars = _colls(wl)
    assert sum(op.bytes for op in ars) == int(MODELS[model].params * 4)
    assert all(op.bytes <= 25 * 2**20 and op.group == tuple(range(16)) for op in ars)
    # every rank issues the same collectives
    assert all([o.bytes for o in _colls(wl, r)] == [o.bytes for o in ars] for r in range(16))


def test_workload_ddp_compute_is_flops_over_achieved_peak():
    m, c = MODELS["bert-large"], Cluster(8, 8, efficiency=0.5)
    wl = data_parallel("bert-large", c, samples_per_gpu=4)
    b, s, h, lay, v = 4, m.seq, m.hidden, m.layers, m.vocab      # Megatron's count, no recompute
    want = 72 * b * s * lay * h * h * (1 + s / (6 * h) + v / (12 * lay * h)) / (312e12 * 0.5)
    assert compute_bound(wl) == pytest.approx(want)


def test_workload_fsdp_shards_each_layer_over_every_rank():
    m = MODELS["gpt2-1.5b"]
    wl = fsdp("gpt2-1.5b", C16, bytes_per_element=2)
    ag, rs = _colls(wl, prefix="allgather"), _colls(wl, prefix="reducescatter")
    assert len(ag) == 2 * m.layers and len(rs) == m.layers
    shard = m.params / m.layers * 2 / 16
    assert all(op.bytes / len(op.group) == pytest.approx(shard, abs=1) for op in ag + rs)
    # an AllGather and a Reduce-Scatter are on different streams, so both can be in flight
    assert {op.stream for op in ag} != {op.stream for op in rs}


def test_workload_3d_gpt_bytes_per_collective():
    m = MODELS["gpt3-13b"]
    c = Cluster(256, 8)
    wl = gpt_3d("gpt3-13b", c, pipeline=8, micro_batches=4)
    f = wl.facts
    assert (f["tensor"], f["pipeline"], f["data"]) == (8, 8, 4)
    dp = _colls(wl, prefix="dp-allreduce")[0]
    assert dp.bytes == pytest.approx(m.params * 4 / (8 * 8), rel=1e-6)      # fp32, params / (t p)
    assert len(dp.group) == 4 and len({r // 8 for r in dp.group}) == 4       # across hosts
    tp = _colls(wl, prefix="tp-allreduce")[0]
    assert {r // 8 for r in tp.group} == {0} and len(tp.group) == 8          # inside a host
    layers = m.layers // 8
    assert tp.bytes == 2 * layers * m.seq * m.hidden * 2
    bwd = _colls(wl, prefix="tp-allreduce-bwd")[0]
    assert bwd.bytes == tp.bytes                                              # no recompute
    again = gpt_3d("gpt3-13b", c, pipeline=8, micro_batches=4, recompute=True, grad_bytes=2)
    assert _colls(again, prefix="tp-allreduce-bwd")[0].bytes == 2 * tp.bytes  # forward again
    assert _colls(again, prefix="dp-allreduce")[0].bytes == pytest.approx(dp.bytes / 2, abs=4)
    send = next(op for op in wl.ranks[0] if op.kind == SEND)
    assert send.bytes == m.seq * m.hidden * 2 // 8 and send.peer == 8        # next host
    assert any(op.kind == RECV for op in wl.ranks[8])


@pytest.mark.parametrize("p, micro", [(4, 8), (8, 4), (2, 1)])
def test_workload_1f1b_compute_bound_has_the_pipeline_bubble(p, micro):
    c = Cluster(8 * p, 8)
    wl = gpt_3d("gpt3-13b", c, pipeline=p, micro_batches=micro)
    f = wl.facts
    assert compute_bound(wl) == pytest.approx(
        pipeline_bound(micro, p, f["stage_fwd_s"], f["stage_bwd_s"]))
    order = one_f_one_b(0, p, micro)
    assert sorted(order) == sorted([("F", i) for i in range(micro)] +
                                   [("B", i) for i in range(micro)])


def test_workload_generators_reject_what_does_not_fit():
    with pytest.raises(ValueError, match="do not split into 3 stages"):
        gpt_3d("gpt3-13b", Cluster(24, 8), pipeline=3, micro_batches=2)
    with pytest.raises(ValueError, match="unknown model"):
        data_parallel("gpt5", C16)
    with pytest.raises(ValueError, match="do not fill hosts"):
        Cluster(12, 8)


def test_workload_megatron_flops_formula_with_and_without_recomputation():
    m = MODELS["megatron-18.4b"]
    b, s, h, lay, v = 1024, m.seq, m.hidden, m.layers, m.vocab
    assert m.train_flops(b, recompute=True) == pytest.approx(
        96 * b * s * lay * h * h * (1 + s / (6 * h) + v / (16 * lay * h)))
    assert m.train_flops(b) == pytest.approx(
        72 * b * s * lay * h * h * (1 + s / (6 * h) + v / (12 * lay * h)))
    assert m.params == pytest.approx(18.4e9, rel=0.01)


def test_workload_megatron_tensor_groups_inside_a_host():
    wl = gpt_3d("megatron-3.6b", Cluster(32, 8), pipeline=1, micro_batches=2, tensor=2)
    tp = _colls(wl, prefix="tp-allreduce")[0]
    assert len(tp.group) == 2 and len({r // 8 for r in tp.group}) == 1
    dp = _colls(wl, prefix="dp-allreduce")[0]
    assert len(dp.group) == 16 and len({r // 8 for r in dp.group}) == 4
    with pytest.raises(ValueError, match="does not fit hosts of 8"):
        gpt_3d("megatron-3.6b", Cluster(24, 8), pipeline=1, micro_batches=2, tensor=3)
