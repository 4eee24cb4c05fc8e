"""One rank of a PyTorch training job on the fabric: stock `DistributedDataParallel` or
`FullyShardedDataParallel` around a small CNN (or an MLP) on scikit-learn's digits
(collectives.mlp's split), on the backend `mlfabric` (collectives.torchpg) or on PyTorch's
own `gloo` over loopback, the reference.

As collectives.train: every rank starts from the same parameters (torch's seed), walks the
training set in the same order and takes its `batch` of each global batch; DDP averages the
ranks' gradients, so every backend trains the same model up to how its sums round. Rank 0
saves the parameters after the first step and after each epoch; every rank writes its
execution trace of one step (`torch.profiler.ExecutionTraceObserver`, JSON) beside the run,
`<out>/<tag>_et.<rank>.json`.

A launch may hold several runs of one backend (the spec's `runs`): the process joins the job
once and each run trains in a process group of its own (mlfabric: `new_group` with that
run's all-reduce and Allgather), from the same seed.

Run as `python -m collectives.torch_train SPEC.json` (collectives.torch_launch starts it
through collectives.launch, one process per rank)."""
from __future__ import annotations

import hashlib
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from .mlp import CLASSES, digits
from .rank_spec import RankSpec, rank_main

MODELS = ("cnn", "tiny-cnn", "mlp")
PARALLEL = ("ddp", "fsdp")
TRACED_STEP = 2            # the step of epoch 1 whose execution trace is written (warm)


@dataclass(frozen=True)
class TorchConfig:
    model: str = "cnn"
    parallel: str = "ddp"
    epochs: int = 3
    batch: int = 16             # samples per rank per step
    steps: int = 0              # steps per epoch at most (0: the whole training set's)
    lr: float = 0.05
    momentum: float = 0.9
    seed: int = 0

    def __post_init__(self) -> None:
        if self.model not in MODELS or self.parallel not in PARALLEL:
            raise ValueError(f"model must be one of {MODELS} and parallel one of {PARALLEL}: "
                             f"{self}")
        if self.epochs < 1 or self.batch < 1 or self.steps < 0 or self.lr <= 0 or \
                not 0 <= self.momentum < 1:
            raise ValueError(f"epochs and batch must be positive, steps >= 0, lr positive, "
                             f"momentum in [0, 1): {self}")


def make_model(kind: str) -> nn.Module:
    """cnn: two 3x3 convolutions (32, 64 channels), a 2x2 max-pool, 1024 -> 192 -> 10:
    217,546 parameters, 870 KB of float32 gradient (bandwidth-bound at the demo's link
    rates); tiny-cnn: one 3x3 convolution (8 channels), a 2x2 max-pool, 128 -> 10: 1,370
    parameters (the tests' model: a convolution's gradients in seconds); mlp: 64 -> 32 -> 10,
    2,410 parameters as collectives.mlp's (latency-bound)."""
    if kind == "cnn":
        return nn.Sequential(
            nn.Unflatten(1, (1, 8, 8)),
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(64 * 4 * 4, 192), nn.ReLU(), nn.Linear(192, CLASSES))
    if kind == "tiny-cnn":
        return nn.Sequential(
            nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 4 * 4, CLASSES))
    if kind == "mlp":
        return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, CLASSES))
    raise ValueError(f"no model {kind!r}; choose from {MODELS}")


def parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _wrap(model: nn.Module, parallel: str, group) -> nn.Module:
    if parallel == "ddp":
        return nn.parallel.DistributedDataParallel(model, process_group=group)
    from torch.distributed.fsdp import FullyShardedDataParallel
    # device_id: FSDP looks for an accelerator unless told the job is on the CPU
    return FullyShardedDataParallel(model, process_group=group, device_id=torch.device("cpu"),
                                    use_orig_params=True)


def _flat_params(wrapped: nn.Module, parallel: str) -> np.ndarray:
    """The whole model's parameters as one float32 vector (FSDP: gathered; every rank must
    call it, it is a collective there)."""
    if parallel == "fsdp":
        from torch.distributed.fsdp import FullyShardedDataParallel
        with FullyShardedDataParallel.summon_full_params(wrapped, writeback=False):
            return torch.cat([p.detach().reshape(-1) for p in wrapped.parameters()]).numpy().copy()
    return torch.cat([p.detach().reshape(-1) for p in wrapped.parameters()]).numpy().copy()


def _evaluate(wrapped: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    with torch.no_grad():
        out = wrapped(x)
        return (float(nn.functional.cross_entropy(out, y)),
                float((out.argmax(1) == y).float().mean()))


COMM_KINDS = ("allreduce", "allgather", "reduce_scatter")


def _comm_so_far(backend: str) -> tuple[float, ...]:
    """Seconds this process's mlfabric worker spent so far in each of COMM_KINDS, then the
    bytes its transport injected for every operation (gloo: not measured, zeros)."""
    if backend != "mlfabric":
        return (0.0,) * (len(COMM_KINDS) + 1)
    from . import torchpg
    s = torchpg.stats()
    return (*(s.get(k, {}).get("seconds", 0.0) for k in COMM_KINDS),
            float(sum(v["bytes"] for v in s.values())))


def train(cfg: TorchConfig, rank: int, size: int, backend: str, out: Path | None,
          tag: str, group=None) -> list[dict]:
    """The training of this rank in process group `group` (None: the default one); one row
    per epoch (epoch 0: the initial model)."""
    torch.manual_seed(cfg.seed)
    data = digits(cfg.seed)
    xs = {k: torch.from_numpy(getattr(data, k)) for k in ("x_train", "x_test")}
    ys = {k: torch.from_numpy(getattr(data, k)) for k in ("y_train", "y_test")}
    model = make_model(cfg.model)
    nparams = parameters(model)
    wrapped = _wrap(model, cfg.parallel, group)
    opt = torch.optim.SGD(wrapped.parameters(), lr=cfg.lr, momentum=cfg.momentum)
    order_rng = np.random.default_rng([cfg.seed, 1])          # the same order on every rank
    global_batch = cfg.batch * size
    steps = len(ys["y_train"]) // global_batch
    if steps < 1:
        raise ValueError(f"a global batch of {global_batch} is more than the "
                         f"{len(ys['y_train'])} training samples")
    steps = min(steps, cfg.steps or steps)
    traced = min(TRACED_STEP, steps - 1)
    mine = slice(rank * cfg.batch, (rank + 1) * cfg.batch)

    def row(epoch: int, step_s: float, comm: tuple[float, ...]) -> dict:
        flat = _flat_params(wrapped, cfg.parallel)
        if out is not None and rank == 0:
            np.save(out / f"{tag}_params_epoch{epoch}.npy", flat)
        train_loss, train_acc = _evaluate(wrapped, xs["x_train"], ys["y_train"])
        test_loss, test_acc = _evaluate(wrapped, xs["x_test"], ys["y_test"])
        return {"epoch": epoch, "steps": steps if epoch else 0, "params": nparams,
                "train_loss": train_loss, "test_loss": test_loss,
                "train_accuracy": train_acc, "test_accuracy": test_acc,
                "step_s": step_s, **{f"{k}_s": v for k, v in zip(COMM_KINDS, comm[:-1], strict=True)},
                "bytes_injected": comm[-1] * steps,
                "digest": hashlib.sha256(flat.tobytes()).hexdigest()[:16]}

    rows = [row(0, 0.0, (0.0,) * (len(COMM_KINDS) + 1))]
    dist.barrier(group)
    for epoch in range(1, cfg.epochs + 1):
        order = order_rng.permutation(len(ys["y_train"]))
        step_s, c0 = 0.0, _comm_so_far(backend)
        for s in range(steps):
            trace = _tracer(out, tag, rank) if epoch == 1 and s == traced else None
            idx = torch.from_numpy(order[s * global_batch:(s + 1) * global_batch][mine])
            if epoch == 1 and s == 0 and cfg.parallel == "ddp":
                grad_absmax = _local_grad_absmax(wrapped, opt, xs["x_train"][idx],
                                                 ys["y_train"][idx]) / size
            t0 = time.perf_counter()
            loss = nn.functional.cross_entropy(wrapped(xs["x_train"][idx]), ys["y_train"][idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            step_s += time.perf_counter() - t0
            if trace is not None:
                trace.stop()
                trace.unregister_callback()
            if epoch == 1 and s == 0 and out is not None and cfg.parallel == "ddp" and rank == 0:
                np.save(out / f"{tag}_params_step1.npy", _flat_params(wrapped, "ddp"))
        comm = tuple((b - a) / steps for a, b in zip(c0, _comm_so_far(backend), strict=True))
        rows.append(row(epoch, step_s / steps, comm))
        if epoch == 1 and cfg.parallel == "ddp":
            rows[-1]["grad_absmax"] = grad_absmax
    return rows


def _local_grad_absmax(wrapped: nn.Module, opt, x: torch.Tensor, y: torch.Tensor) -> float:
    """The largest |gradient| of this rank's own batch (no all-reduce: DDP's no_sync), the
    scale the fixed-point error bound of the first step's sum is stated in; the gradients
    are cleared again before the step."""
    with wrapped.no_sync():
        nn.functional.cross_entropy(wrapped(x), y).backward()
    top = max(float(p.grad.abs().max()) for p in wrapped.parameters())
    opt.zero_grad()
    return top


def _tracer(out: Path | None, tag: str, rank: int):
    """An execution trace observer writing this rank's trace of one step, started."""
    if out is None:
        return None
    et = torch.profiler.ExecutionTraceObserver()
    et.register_callback(str(out / f"{tag}_et.{rank}.json"))
    et.start()
    return et


def _backend(runs: list[dict]) -> str:
    """The one backend of a launch's runs (torch initialises a process once)."""
    backends = {run.get("backend", "mlfabric") for run in runs}
    if len(backends) != 1 or not backends <= {"mlfabric", "gloo"}:
        raise ValueError(f"the runs of one launch share one backend, mlfabric or gloo, "
                         f"not {sorted(backends)}")
    return backends.pop()


def _init(spec: RankSpec, backend: str) -> None:
    """Joins the job's default process group: mlfabric on the fabric addresses (its own
    algorithms come with each run's group), or gloo on loopback."""
    rank, size = spec.rank, len(spec.ips)
    port = spec.port + 1                         # the store; the fabric's rendezvous at port
    if backend == "gloo":
        master = "127.0.0.1"
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    else:
        from . import torchpg
        torchpg.configure(asdict(spec))
        master = spec.ips[0]
    dist.init_process_group(backend, init_method=f"tcp://{master}:{port}", rank=rank,
                            world_size=size)


def _group(backend: str, run: dict):
    """The run's process group over every rank: mlfabric with the run's all-reduce and
    Allgather and their jobs' options; gloo's default group."""
    if backend == "gloo":
        return None
    from . import torchpg
    return dist.new_group(backend=backend, pg_options=torchpg.Options(
        allreduce=run.get("algo", "ring"), allgather=run.get("allgather", "ring"),
        options=run.get("options", {})))


def run_spec(spec: RankSpec) -> list[dict]:
    out = Path(spec.out) if spec.out else None
    backend = _backend(spec.runs)
    rank, size = spec.rank, len(spec.ips)
    # one thread per rank: 8 ranks share two cores, and torch's spinning intra-op threads
    # made every rank wait for the others' (gloo's steps took 7x longer with the default)
    torch.set_num_threads(1)
    _init(spec, backend)
    rows = []
    try:
        for run in spec.runs:
            cfg = TorchConfig(**run["train"])
            got = train(cfg, rank, size, backend, out, run["tag"], _group(backend, run))
            base = {"tag": run["tag"], "backend": backend, "algo": run.get("algo", "ring"),
                    "allgather": run.get("allgather", "ring"), "rank": rank, "ranks": size,
                    "config": asdict(cfg)}
            rows += [base | r for r in got]
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return rows


if __name__ == "__main__":
    sys.exit(rank_main(run_spec, sys.argv[1:]))
