"""The launcher's side of a training run: the same training (seed, epochs, batches) once per
all-reduce algorithm on the same ranks: ring, then NetReduce and SwitchML, each in an
aggregation job that fabricd sets up in the switches for the run and removes after it. Then
the epochs side by side: a table, and one PNG of loss, test accuracy and time per step."""
from __future__ import annotations

import tempfile
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

import grpc
import numpy as np

from controller.proto import fabric_pb2 as api
from controller.proto import fabric_pb2_grpc
from fabricmodel import rocev2
from figures import png
from figures.text import format_table

from . import switchml as sml
from .launch import LaunchError, launch
from .netreduce import PKT_BYTES
from .rank_spec import RankSpec
from .train import ALGOS, TrainConfig, params_file

SWITCHML_SLOTS = 16            # fabricctl's default, where no link rate sizes the pool
HEADERS = rocev2.FRAME_OVERHEAD + rocev2.BTH_BYTES


def allreduce_bound_s(algo: str, elements: int, ranks: int, link_mbps: float,
                      mtu: int = 1024) -> float:
    """The time one all-reduce of `elements` float32 takes at the hosts' link rate: the bytes
    each rank must send (and receive) on its link. Ring and halving-doubling send 2(N-1)/N of
    the vector in packets of `mtu`; NetReduce and SwitchML the vector once (the switch returns
    the sum), in packets of 1 KiB of int32 (NetReduce) or 32 values (SwitchML, 198-byte
    frames). NetReduce over ring: N/(2(N-1)) of the payload, 0.57 at 8 ranks."""
    data = elements * 4
    if algo in ("ring", "halving-doubling", "gloo"):
        wire = 2 * (ranks - 1) / ranks * data * (1 + HEADERS / mtu)
    elif algo == "netreduce":
        wire = data * (1 + HEADERS / PKT_BYTES)
    elif algo == "switchml":
        wire = data * sml.FRAME_BYTES / (4 * sml.K)
    else:
        raise ValueError(f"no bound for all-reduce {algo!r}")
    return wire * 8 / (link_mbps * 1e6)


@contextmanager
def allreduce_options(algo: str, fabricd: str | None, workers: list[str],
                      link_mbps: float | None = None, name: str = "train"):
    """The options of `algo`'s all-reduce. Ring needs none; NetReduce and SwitchML need an
    aggregation job of the workers (host names, in rank order), which fabricd creates here and
    deletes afterwards. SwitchML's pool and timer are sized for `link_mbps` as SwitchML sizes
    them (collectives.switchml), else its defaults."""
    if algo not in ALGOS:
        raise ValueError(f"no all-reduce {algo!r} for training; choose from {list(ALGOS)}")
    if algo == "ring":
        yield {}
        return
    if not fabricd:
        raise LaunchError(f"{algo} aggregates in the switches: it needs fabricd's address")
    slots = sml.pool_slots(link_mbps) if link_mbps else SWITCHML_SLOTS
    job_name = f"{name}-{algo}"
    with grpc.insecure_channel(fabricd) as channel:
        stub = fabric_pb2_grpc.FabricStub(channel)
        try:
            job = stub.CreateAggregationJob(api.CreateAggregationJobRequest(
                name=job_name, workers=workers, kind=algo, slots=slots), timeout=60)
        except grpc.RpcError as err:
            raise LaunchError(f"fabricd at {fabricd} did not create the {algo} job: "
                              f"{err.code().name}: {err.details()}") from None
        try:
            if algo == "netreduce":
                yield {"aggregator": list(job.addresses), "job_id": job.job_id,
                       "credits": job.credits}
            else:
                yield {"aggregator": job.address, "job_id": job.job_id, "slots": slots,
                       "slot_base": job.slot_base} | (
                    {"rto": sml.pool_timeout(len(workers), slots, link_mbps)}
                    if link_mbps else {})
        finally:
            stub.DeleteAggregationJob(api.NameRequest(name=job_name), timeout=60)


def train_all(ips: list[str], workers: list[str], cfg: TrainConfig, algos=ALGOS, *,
              namespaces: list[str] | None = None, fabricd: str | None = None,
              link_mbps: float | None = None, transport: dict | None = None,
              port: int = RankSpec.port, timeout: float = 1800.0,
              step_timeout: float = 120.0) -> list[dict]:
    """One training run per algorithm in `algos` on the ranks `ips` (hosts `workers`, rank
    order). Returns every rank's epoch rows; when ring ran too, each carries
    `max_param_diff`: the largest difference between the parameters after that epoch and
    ring's after the same epoch (how far the switches' fixed-point sums drifted the run)."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="train-") as tmp:
        for algo in algos:
            with allreduce_options(algo, fabricd, workers, link_mbps) as options:
                rows += launch(ips, [{"algo": algo, "options": options, "train": asdict(cfg)}],
                               namespaces=namespaces, transport=transport, port=port,
                               out_dir=tmp, timeout=timeout, step_timeout=step_timeout,
                               program="collectives.train")
        if "ring" in algos:
            for r in rows:
                mine, ring = (np.load(Path(tmp) / params_file(a, r["epoch"]))
                              for a in (r["algo"], "ring"))
                r["max_param_diff"] = float(np.abs(mine - ring).max())
    return rows


def _runs(rows: list[dict]) -> dict[tuple[int, str], list[dict]]:
    """Rank 0's epoch rows per (model size, algorithm) (every rank holds the same model), in
    epoch order; smaller models first."""
    out: dict[tuple[int, str], list[dict]] = {}
    for r in sorted((r for r in rows if r["rank"] == 0), key=lambda r: (r["params"], r["epoch"])):
        out.setdefault((r["params"], r["algo"]), []).append(r)
    return out


def consistent(rows: list[dict]) -> bool:
    """Every rank of each run ended every epoch with the same parameters (bit for bit)."""
    digests: dict[tuple, set[str]] = {}
    for r in rows:
        digests.setdefault((r["params"], r["algo"], r["epoch"]), set()).add(r["digest"])
    return all(len(d) == 1 for d in digests.values())


def _per_step_ms(epochs: list[dict], key: str) -> float:
    trained = [e[key] for e in epochs if e["steps"]]
    return float(np.mean(trained)) * 1e3


def table(rows: list[dict], link_mbps: float | None = None, mtu: int = 1024) -> str:
    """One line per model and all-reduce: its last epoch against ring's on the same model,
    ms per step and per all-reduce; with `link_mbps` the all-reduce's link-rate bound
    (allreduce_bound_s, ring in packets of `mtu`) and ring's step time over this run's."""
    runs = _runs(rows)
    lines = []
    for (params, algo), epochs in runs.items():
        last, ring = epochs[-1], runs.get((params, "ring"), [None])[-1]
        vs = (f"{(last['test_accuracy'] - ring['test_accuracy']) * 100:+.2f}"
              if ring else "-")
        diff = last.get("max_param_diff")
        step = _per_step_ms(epochs, "step_s")
        bound = (f"{allreduce_bound_s(algo, params, last['ranks'], link_mbps, mtu) * 1e3:.1f}"
                 if link_mbps else "-")
        lines.append([f"{params:,}", algo, str(last["ranks"]), str(last["epoch"]),
                      f"{last['train_loss']:.4f}", f"{last['test_accuracy'] * 100:.2f}", vs,
                      f"{step:.1f}", f"{_per_step_ms(epochs, 'allreduce_s'):.1f}", bound,
                      f"{_per_step_ms(runs[params, 'ring'], 'step_s') / step:.2f}x"
                      if ring else "-",
                      f"{diff:.1e}" if diff is not None else "-"])
    return format_table(["parameters", "all-reduce", "ranks", "epochs", "train loss",
                         "test acc %", "vs ring (pp)", "ms/step", "ms all-reduce/step",
                         "bound ms", "ring's step / this", "max |param - ring's|"], lines)


STYLES = {"ring": ("-", "o", "C0"), "netreduce": ("--", "s", "C1"), "switchml": (":", "^", "C2")}


def plot(rows: list[dict], path: Path, title: str) -> None:
    """Loss, test accuracy and the parameters' distance from ring's per epoch, one line per
    all-reduce, and the time per step (all-reduce and the rest); rows of one model."""
    runs = {algo: epochs for (_, algo), epochs in _runs(rows).items()}
    fig, axes = png.subplots(2, 2, figsize=(11, 7.5))
    (loss_ax, acc_ax), (diff_ax, time_ax) = axes
    for algo, epochs in runs.items():
        line, marker, color = STYLES[algo]
        style = {"marker": marker, "color": color, "label": algo}
        x = [e["epoch"] for e in epochs]
        loss_ax.plot(x, [e["train_loss"] for e in epochs], line, **style)
        acc_ax.plot(x, [e["test_accuracy"] * 100 for e in epochs], line, **style)
        drift = [(e["epoch"], e["max_param_diff"]) for e in epochs
                 if e.get("max_param_diff")]          # ring's own (0) has no place on a log
        if drift:
            diff_ax.plot(*zip(*drift, strict=True), line, **style)
    loss_ax.set(xlabel="epoch", ylabel="training loss (cross-entropy)", yscale="log")
    acc_ax.set(xlabel="epoch", ylabel="test accuracy (%)")
    diff_ax.set(xlabel="epoch", ylabel="max |parameter - ring run's|", yscale="log")
    for ax in (loss_ax, acc_ax, diff_ax):
        ax.xaxis.get_major_locator().set_params(integer=True)
        if ax.lines:
            ax.legend()
        ax.grid(alpha=0.3)
    names = list(runs)
    reduce = [_per_step_ms(runs[a], "allreduce_s") for a in names]
    rest = [_per_step_ms(runs[a], "step_s") - r for a, r in zip(names, reduce, strict=True)]
    time_ax.bar(names, reduce, color=[STYLES[a][2] for a in names], label="all-reduce")
    time_ax.bar(names, rest, bottom=reduce, color="0.7", label="forward, backward, update")
    time_ax.set(ylabel="ms per step (rank 0, mean)")
    time_ax.legend()
    png.save(fig, path, suptitle=title)
