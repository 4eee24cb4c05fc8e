"""Megatron-LM's weak-scaling table (Narayanan et al., SC'21, table 1) reproduced on the
project's DAGs: the same model shapes, parallelism, global batch and hardware (DGX A100: 8
A100s on NVLink, 8 x 200 Gb/s InfiniBand per host), full activation recomputation, bf16
training with fp32 gradient all-reduce, 1F1B pipeline with micro-batches of one sample.

Each row's iteration is a `generators.gpt_3d` DAG timed by the analytic executor
(`schedule.run_analytic`): compute at `efficiency` of the A100's peak, every collective and
transfer at the bandwidth of its path (no contention: `comm_seconds`). Per-GPU TFLOP/s is the
paper's own count, 96·B·s·l·h²·(1 + s/6h + V/16lh) / (iteration x GPUs).

Calibration, once: the compute efficiency is the value that makes the first row (1.7B,
32 GPUs) come out at the paper's 137 TFLOP/s (solved by bisection); every other row is
predicted with it.
"""
from __future__ import annotations

from dataclasses import dataclass

from workloads import hierarchy
from workloads.dag import COLLECTIVE, Op, Workload
from workloads.generators import gpt_3d
from workloads.models import HOSTS, MODELS, Cluster, Host
from workloads.schedule import run_analytic


@dataclass(frozen=True)
class Row:
    model: str
    tensor: int
    pipeline: int
    gpus: int
    batch: int
    paper_tflops: float         # achieved TFLOP/s per GPU, as published


TABLE1 = (
    Row("megatron-1.7b", 1, 1, 32, 512, 137),
    Row("megatron-3.6b", 2, 1, 64, 512, 138),
    Row("megatron-7.5b", 4, 1, 128, 512, 142),
    Row("megatron-18.4b", 8, 1, 256, 1024, 135),
    Row("megatron-39.1b", 8, 2, 512, 1536, 138),
    Row("megatron-76.1b", 8, 4, 1024, 1792, 140),
)


def comm_seconds(wl: Workload, host: Host, intra_bytes_s: float, allreduce: str = "ring"):
    """Each op's communication time on idle links: a collective as `hierarchy.plan`'s phases,
    its network phase at the host's NICs together (NCCL spreads a ring's channels over all
    of them); a transfer between hosts at one NIC (a GPU's own rail), inside a host at
    NVLink."""
    g = wl.gpus_per_host
    host_bytes_s, nic_bytes_s = host.gbps / 8 * 1e9, host.nic_gbps / 8 * 1e9
    inside = {id(op) for r, op in wl.ops() if op.kind == "send" and r // g == op.peer // g}

    def seconds(op: Op) -> float:
        if op.kind != COLLECTIVE:
            return op.bytes / (intra_bytes_s if id(op) in inside else nic_bytes_s)
        sp = hierarchy.span(op.group, g)
        algo = allreduce if op.coll == "all-reduce" else "ring"
        net = hierarchy.nic_bytes(op.coll, op.bytes, sp, algo) / host_bytes_s
        total = 0.0
        for ph in hierarchy.plan(op.coll, op.bytes, sp, algo, intra_bytes_s):
            if ph.where == "net":
                total += net
            elif ph.algorithm == "overlap":         # runs beside the network phase
                total += max(0.0, ph.seconds - net)
            else:
                total += ph.seconds
        return total
    return seconds


def workload(row: Row, efficiency: float, host: Host = HOSTS["dgx-a100"],
             micro_batch: int = 1) -> tuple[Workload, Cluster]:
    m = MODELS[row.model]
    cluster = Cluster(row.gpus, host.gpus, host.gpu, efficiency, host.gpu.nvlink_bytes_s)
    d = row.gpus // (row.tensor * row.pipeline)
    micro = row.batch // (d * micro_batch)
    wl = gpt_3d(m, cluster, row.pipeline, micro, micro_batch, tensor=row.tensor,
                recompute=True, grad_bytes=4)
    return wl, cluster


def paper_flops(row: Row) -> float:
    """96·B·s·l·h²·(1 + s/6h + V/16lh): the paper's FLOPs per iteration."""
    m = MODELS[row.model]
    b, s, h, lay, v = row.batch, m.seq, m.hidden, m.layers, m.vocab
    return 96 * b * s * lay * h * h * (1 + s / (6 * h) + v / (16 * lay * h))


def simulate(row: Row, efficiency: float, host: Host = HOSTS["dgx-a100"]) -> dict:
    """One row's iteration on the analytic executor, in the paper's units."""
    wl, cluster = workload(row, efficiency, host)
    it = run_analytic(wl, comm_seconds(wl, host, cluster.intra_bytes_s))["iteration_s"]
    return {"model": MODELS[row.model].name, "t": row.tensor, "p": row.pipeline,
            "gpus": row.gpus, "batch": row.batch, "micro_batches": wl.facts["micro_batches"],
            "iteration_s": it, "tflops": paper_flops(row) / (it * row.gpus) / 1e12,
            "paper_tflops": row.paper_tflops, "efficiency": efficiency}


def calibrate(row: Row = TABLE1[0], host: Host = HOSTS["dgx-a100"]) -> float:
    """The compute efficiency at which `row` reaches the paper's TFLOP/s (bisection: the
    simulated TFLOP/s grow with the efficiency)."""
    lo, hi = 0.05, 1.0
    for _ in range(30):
        mid = (lo + hi) / 2
        if simulate(row, mid, host)["tflops"] < row.paper_tflops:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def reproduce(host: Host = HOSTS["dgx-a100"], rows=TABLE1) -> list[dict]:
    """Calibrate on the first row, predict every row (the first included, as a check)."""
    eff = calibrate(rows[0], host)
    out = []
    for row in rows:
        r = simulate(row, eff, host)
        r["calibrated_on"] = MODELS[rows[0].model].name
        r["error"] = r["tflops"] / row.paper_tflops - 1
        out.append(r)
    return out
