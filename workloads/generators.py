"""Iterations of data-parallel (DDP), FSDP and 3D-parallel (Megatron-style) training as DAGs.

Ranks are GPUs, numbered host by host (rank g on host g // gpus_per_host). Compute time is
FLOPs / (peak x efficiency) (`models.Cluster`); a model's compute and parameters are spread
evenly over its layers (the published totals are kept; the per-layer skew of a CNN is not).
"""
from __future__ import annotations

from workloads.dag import COLLECTIVE, COMPUTE, RECV, SEND, Op, Workload
from workloads.models import MODELS, Cluster, Model

DDP_BUCKET_BYTES = 25 * 1024 * 1024     # torch DDP's bucket_cap_mb default


class _Rank:
    """Appends ops to one rank's list, numbering them."""

    def __init__(self) -> None:
        self.ops: list[Op] = []

    def add(self, name: str, kind: str, stream: str, deps=(), **kw) -> int:
        oid = len(self.ops)
        deps = tuple(dict.fromkeys(d for d in deps if d is not None))
        self.ops.append(Op(oid, name, kind, stream, deps, **kw))
        return oid


def _model(name: str | Model) -> Model:
    if isinstance(name, Model):
        return name
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r} (known: {', '.join(MODELS)})") from None


def data_parallel(model: str | Model, cluster: Cluster, samples_per_gpu: int = 32,
                  bytes_per_element: int = 4, bucket_bytes: int = DDP_BUCKET_BYTES) -> Workload:
    """DDP: forward, then backward in as many chunks as gradient buckets; each bucket is
    all-reduced over every rank on the communication stream as soon as backward has produced
    it (so it overlaps the rest of backward); the optimizer step waits for all of them."""
    m = _model(model)
    grad = int(m.params * bytes_per_element)
    sizes = [bucket_bytes] * (grad // bucket_bytes) + ([grad % bucket_bytes] if grad % bucket_bytes
                                                       else [])
    flops = m.train_flops(samples_per_gpu)
    fwd, bwd = cluster.seconds(flops / 3), cluster.seconds(2 * flops / 3)
    group = tuple(range(cluster.gpus))
    ranks = []
    for _ in group:
        r = _Rank()
        prev = r.add("forward", COMPUTE, "compute", duration_s=fwd)
        reduces = []
        for i, size in enumerate(sizes):
            prev = r.add(f"backward-{i}", COMPUTE, "compute", (prev,),
                         duration_s=bwd * size / grad)
            reduces.append(r.add(f"allreduce-bucket-{i}", COLLECTIVE, "comm", (prev,),
                                 coll="all-reduce", bytes=size, group=group))
        r.add("optimizer", COMPUTE, "compute", (prev, *reduces))
        ranks.append(r.ops)
    return Workload(f"{m.name} data parallel", ranks, cluster.gpus_per_host, {
        "model": m.name, "params": m.params, "bytes_per_element": bytes_per_element,
        "buckets": sizes, "compute_s": fwd + bwd})


def fsdp(model: str | Model, cluster: Cluster, samples_per_gpu: int = 1,
         bytes_per_element: int = 2) -> Workload:
    """FSDP (full shard over every rank), one unit per layer: forward AllGathers a layer's
    parameters before computing it; backward AllGathers them again, computes, and
    Reduce-Scatters the gradients on a stream of their own. The next layer's AllGather is
    prefetched (issued while this layer computes), at most two ahead (FSDP's rate limit), so
    an AllGather and a Reduce-Scatter are in flight at once."""
    m = _model(model)
    layer = int(m.params / m.layers) * bytes_per_element
    layer -= layer % cluster.gpus
    flops = m.train_flops(samples_per_gpu) / m.layers
    fwd, bwd = cluster.seconds(flops / 3), cluster.seconds(2 * flops / 3)
    group = tuple(range(cluster.gpus))
    L = m.layers
    ranks = []
    for _ in group:
        r = _Rank()
        comp: list[int | None] = []
        gathers: list[int] = []
        for i in range(L):          # forward
            gathers.append(r.add(f"allgather-fwd-{i}", COLLECTIVE, "allgather",
                                 (comp[i - 2] if i >= 2 else None,),
                                 coll="all-gather", bytes=layer, group=group))
            comp.append(r.add(f"forward-{i}", COMPUTE, "compute",
                              (gathers[i], comp[-1] if comp else None), duration_s=fwd))
        scatters = []
        bcomp: list[int] = []
        for k, i in enumerate(reversed(range(L))):     # backward, last layer first
            ag = r.add(f"allgather-bwd-{i}", COLLECTIVE, "allgather",
                       (bcomp[k - 2] if k >= 2 else comp[-1],),
                       coll="all-gather", bytes=layer, group=group)
            bcomp.append(r.add(f"backward-{i}", COMPUTE, "compute",
                               (ag, bcomp[-1] if bcomp else comp[-1]), duration_s=bwd))
            scatters.append(r.add(f"reducescatter-{i}", COLLECTIVE, "reducescatter",
                                  (bcomp[-1],), coll="reduce-scatter", bytes=layer,
                                  group=group))
        r.add("optimizer", COMPUTE, "compute", (bcomp[-1], *scatters))
        ranks.append(r.ops)
    return Workload(f"{m.name} FSDP", ranks, cluster.gpus_per_host, {
        "model": m.name, "params": m.params, "bytes_per_element": bytes_per_element,
        "layer_bytes": layer, "compute_s": L * (fwd + bwd)})


def gpt_3d(model: str | Model, cluster: Cluster, pipeline: int, micro_batches: int,
           micro_batch: int = 1, bytes_per_element: int = 2, *, tensor: int | None = None,
           recompute: bool = False, grad_bytes: int = 4) -> Workload:
    """Megatron-LM's 3D parallelism: tensor parallel over `tensor` GPUs of one host (default:
    all of a host's), `pipeline` stages of consecutive tensor groups, data parallel over the
    rest. Each stage runs 1F1B over `micro_batches`; every layer all-reduces its activations
    twice in forward and twice in backward inside the tensor group, twice more with
    activation recomputation (the forward runs again before the backward; one collective per
    stage, micro-batch and direction here, of the stage's layers' bytes); stages exchange
    activations (forward) and their gradients (backward), 1/t of a micro-batch's activation
    per tensor rank; after the last backward each rank all-reduces its gradient shard with
    its data-parallel peers in `grad_bytes` per element (4: Megatron-LM reduces bf16
    training's gradients in fp32; 2 for bf16 reduction). Compute: Megatron-LM's FLOPs
    (`Model.train_flops`), split evenly over stages and tensor ranks."""
    m = _model(model)
    t, p = tensor or cluster.gpus_per_host, pipeline
    if cluster.gpus_per_host % t:
        raise ValueError(f"tensor parallel over {t} GPUs does not fit hosts of "
                         f"{cluster.gpus_per_host}")
    if cluster.gpus % (t * p):
        raise ValueError(f"{cluster.gpus} GPUs do not split into {p} stages of {t} GPUs")
    if m.layers % p:
        raise ValueError(f"{m.name}'s {m.layers} layers do not split into {p} stages")
    if not m.hidden:
        raise ValueError(f"{m.name} is not a transformer")
    d = cluster.gpus // (t * p)
    layers = m.layers // p
    act = micro_batch * m.seq * m.hidden * bytes_per_element      # one layer's activation
    tp_fwd = 2 * layers * act - 2 * layers * act % t
    tp_bwd = (4 if recompute else 2) * layers * act
    tp_bwd -= tp_bwd % t
    p2p = act // t
    fwd = cluster.seconds(m.forward_flops(micro_batch) / (p * t))
    bwd = cluster.seconds((m.train_flops(micro_batch, recompute) - m.forward_flops(micro_batch))
                          / (p * t))
    shard = int(m.params / (p * t)) * grad_bytes
    shard -= shard % d

    def rank(dp: int, s: int, tp: int) -> int:
        return (dp * p + s) * t + tp

    ranks = [None] * cluster.gpus
    for dp in range(d):
        for s in range(p):
            for tp in range(t):
                ranks[rank(dp, s, tp)] = _stage(
                    s, p, micro_batches, fwd, bwd, (tp_fwd, tp_bwd), p2p, shard,
                    tp_group=tuple(rank(dp, s, k) for k in range(t)),
                    dp_group=tuple(rank(k, s, tp) for k in range(d)),
                    prev=rank(dp, s - 1, tp) if s else -1,
                    nxt=rank(dp, s + 1, tp) if s < p - 1 else -1).ops
    return Workload(f"{m.name} 3D (t={t}, p={p}, d={d}, m={micro_batches})", ranks,
                    cluster.gpus_per_host, {
        "model": m.name, "params": m.params, "bytes_per_element": bytes_per_element,
        "grad_bytes": grad_bytes, "recompute": recompute,
        "tensor": t, "pipeline": p, "data": d, "micro_batches": micro_batches,
        "micro_batch": micro_batch, "stage_fwd_s": fwd, "stage_bwd_s": bwd,
        "tp_bytes": tp_fwd, "tp_bwd_bytes": tp_bwd, "p2p_bytes": p2p, "dp_bytes": shard,
        "flops": m.train_flops(micro_batch * micro_batches * d, recompute)})


def one_f_one_b(stage: int, stages: int, micro: int) -> list[tuple[str, int]]:
    """The 1F1B order of forward ('F', i) and backward ('B', i) passes on a stage."""
    warm = min(stages - stage - 1, micro)
    order = [("F", i) for i in range(warm)]
    f, b = warm, 0
    while b < micro:
        if f < micro:
            order.append(("F", f))
            f += 1
        order.append(("B", b))
        b += 1
    return order


def _stage(s, p, micro, fwd, bwd, tp_bytes, p2p, shard, tp_group, dp_group, prev, nxt):
    r = _Rank()
    last = None
    done_f: dict[int, int] = {}
    for what, i in one_f_one_b(s, p, micro):
        if what == "F":
            got = r.add(f"recv-act-{i}", RECV, "p2p-recv", peer=prev, tag=2 * i,
                        bytes=p2p) if prev >= 0 else None
            c = r.add(f"forward-{i}", COMPUTE, "compute", (got, last), duration_s=fwd)
            last = done_f[i] = c if len(tp_group) == 1 else r.add(
                f"tp-allreduce-fwd-{i}", COLLECTIVE, "compute", (c,), coll="all-reduce",
                bytes=tp_bytes[0], group=tp_group)
            if nxt >= 0:
                r.add(f"send-act-{i}", SEND, "p2p-send", (last,), peer=nxt, tag=2 * i,
                      bytes=p2p)
        else:
            got = r.add(f"recv-grad-{i}", RECV, "p2p-recv", peer=nxt, tag=2 * i + 1,
                        bytes=p2p) if nxt >= 0 else None
            c = r.add(f"backward-{i}", COMPUTE, "compute", (got, last, done_f[i]),
                      duration_s=bwd)
            last = c if len(tp_group) == 1 else r.add(
                f"tp-allreduce-bwd-{i}", COLLECTIVE, "compute", (c,), coll="all-reduce",
                bytes=tp_bytes[1], group=tp_group)
            if prev >= 0:
                r.add(f"send-grad-{i}", SEND, "p2p-send", (last,), peer=prev, tag=2 * i + 1,
                      bytes=p2p)
    if len(dp_group) > 1:
        last = r.add("dp-allreduce", COLLECTIVE, "comm", (last,), coll="all-reduce",
                     bytes=shard, group=dp_group)
    r.add("optimizer", COMPUTE, "compute", (last,))
    return r


def pipeline_bound(micro: int, stages: int, fwd: float, bwd: float) -> float:
    """1F1B's compute-only iteration: (m + p - 1) forward-backward pairs (the bubble is
    (p - 1)/m of the work)."""
    return (micro + stages - 1) * (fwd + bwd)


GENERATORS = {"dp": data_parallel, "fsdp": fsdp, "3d": gpt_3d}
__all__ = ["data_parallel", "fsdp", "gpt_3d", "one_f_one_b", "pipeline_bound", "GENERATORS"]
