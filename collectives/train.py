"""One rank of a data-parallel training run: the digits MLP (collectives.mlp), every step's
gradient all-reduced over the fabric by one of the all-reduce algorithms (ring, or in the
switches: NetReduce, SwitchML), then the same SGD step on every rank.

Every rank starts from the same parameters (the seed) and walks the training set in the same
order; a step's global batch of `batch` x ranks samples is cut into one `batch` per rank. The
mean of the ranks' gradients is then the gradient of the global batch, so the run is the
single-process run up to how the all-reduce rounds: ring sums float32 in its own order,
NetReduce and SwitchML sum fixed-point integers with a shared per-block exponent.

Run as `python -m collectives.train SPEC.json` (collectives.train_launch starts it through
collectives.launch, as the runner of single collectives)."""
from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import numpy as np

from .comm import Communicator
from .mlp import MLP, digits
from .rank_spec import RankSpec, rank_main
from .runner import ALGORITHMS, communicator

ALGOS = ("ring", "netreduce", "switchml")


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 10
    batch: int = 16             # samples per rank per step
    hidden: int = 32
    lr: float = 0.1
    momentum: float = 0.9
    seed: int = 0

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch < 1 or self.hidden < 1:
            raise ValueError(f"epochs, batch and hidden must be positive: {self}")
        if self.lr <= 0 or not 0 <= self.momentum < 1:
            raise ValueError(f"lr must be positive and momentum in [0, 1): {self}")


def allreduce_of(algo: str, options: dict):
    """The all-reduce `algo` (collectives.runner's table) with its job's options bound."""
    if algo not in ALGOS:
        raise ValueError(f"no all-reduce {algo!r} for training; choose from {list(ALGOS)}")
    return partial(ALGORITHMS["allreduce", algo], **options)


def train(comm: Communicator, allreduce, cfg: TrainConfig,
          on_epoch=None) -> list[dict]:
    """Trains on this rank's share of every step; returns one row per epoch, epoch 0 being
    the initial model (losses and accuracies of the whole training and test sets, mean time
    per step and per all-reduce). `on_epoch(epoch, model)` after each, epoch 0 included."""
    data = digits(cfg.seed)
    model = MLP(data.x_train.shape[1], cfg.hidden, seed=cfg.seed)
    velocity = np.zeros_like(model.params)
    order_rng = np.random.default_rng([cfg.seed, 1])     # the same order on every rank
    global_batch = cfg.batch * comm.size
    steps = len(data.y_train) // global_batch
    if steps < 1:
        raise ValueError(f"a global batch of {global_batch} is more than the "
                         f"{len(data.y_train)} training samples")
    mine = slice(comm.rank * cfg.batch, (comm.rank + 1) * cfg.batch)
    rows = [_epoch_row(model, data, 0, 0, 0.0, 0.0)]
    if on_epoch:
        on_epoch(0, model)
    comm.barrier()
    for epoch in range(1, cfg.epochs + 1):
        order = order_rng.permutation(len(data.y_train))
        step_s = reduce_s = 0.0
        for s in range(steps):
            t0 = time.perf_counter()
            idx = order[s * global_batch:(s + 1) * global_batch][mine]
            _, grad = model.loss_and_grad(data.x_train[idx], data.y_train[idx])
            t1 = time.perf_counter()
            total = allreduce(comm, grad)
            reduce_s += time.perf_counter() - t1
            velocity = cfg.momentum * velocity + total / np.float32(comm.size)
            model.params -= np.float32(cfg.lr) * velocity
            step_s += time.perf_counter() - t0
        rows.append(_epoch_row(model, data, epoch, steps, step_s / steps, reduce_s / steps))
        if on_epoch:
            on_epoch(epoch, model)
    return rows


def _epoch_row(model: MLP, data, epoch: int, steps: int, step_s: float,
               reduce_s: float) -> dict:
    return {"epoch": epoch, "steps": steps, "params": int(model.params.size),
            "train_loss": model.loss(data.x_train, data.y_train),
            "test_loss": model.loss(data.x_test, data.y_test),
            "train_accuracy": model.accuracy(data.x_train, data.y_train),
            "test_accuracy": model.accuracy(data.x_test, data.y_test),
            "step_s": step_s, "allreduce_s": reduce_s, "digest": model.digest()}


def params_file(algo: str, epoch: int) -> str:
    """Where rank 0 saves the parameters after `epoch` (in the launch's out_dir)."""
    return f"{algo}_params_epoch{epoch}.npy"


def run_spec(spec: RankSpec) -> list[dict]:
    comm = communicator(spec)
    out_dir = Path(spec.out) if spec.out else None
    rows = []
    try:
        for run in spec.runs:
            cfg = TrainConfig(**run["train"])
            save = None
            if out_dir is not None and comm.rank == 0:   # every rank holds the same model
                def save(epoch, model, algo=run["algo"]):
                    np.save(out_dir / params_file(algo, epoch), model.params)
            epochs = train(comm, allreduce_of(run["algo"], run.get("options", {})), cfg, save)
            rows += [{"algo": run["algo"], "rank": comm.rank, "ranks": comm.size,
                      "policy": spec.policy, "config": asdict(cfg)} | e
                     for e in epochs]
        comm.barrier()
    finally:
        comm.close()
    return rows


if __name__ == "__main__":
    sys.exit(rank_main(run_spec, sys.argv[1:]))
