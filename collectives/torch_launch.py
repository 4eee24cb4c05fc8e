"""The launcher's side of a PyTorch training job (`python -m collectives torchrun`): the same
script (collectives.torch_train: seed, data order, epochs) once on PyTorch's `gloo` over
loopback, the reference, and once per mlfabric all-reduce (ring, NetReduce, SwitchML, each
in-network job set up by fabricd and removed after it; one launch for all), or under FSDP
once per Allgather (ring, multicast: a group fabricd sets up; a launch each). Then the runs side by side: a table with each
step's time, its all-reduce time and the link-rate bound of that all-reduce, and a PNG."""
from __future__ import annotations

import tempfile
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import grpc
import numpy as np

from controller.proto import fabric_pb2 as api
from controller.proto import fabric_pb2_grpc
from figures import png
from figures.text import format_table

from .launch import LaunchError, launch
from .rank_spec import RankSpec
from .torch_train import TorchConfig, make_model, parameters
from .train_launch import allreduce_bound_s, allreduce_options


@contextmanager
def multicast_group(fabricd: str | None, workers: list[str], name: str = "torch-fsdp"):
    """A multicast group over the workers that fabricd installs for the run: its address."""
    if not fabricd:
        raise LaunchError("multicast Allgather needs fabricd's address (it installs the group)")
    with grpc.insecure_channel(fabricd) as channel:
        stub = fabric_pb2_grpc.FabricStub(channel)
        try:
            group = stub.CreateMulticastGroup(api.CreateMulticastGroupRequest(
                name=name, members=workers), timeout=60)
        except grpc.RpcError as err:
            raise LaunchError(f"fabricd at {fabricd} did not create the multicast group: "
                              f"{err.code().name}: {err.details()}") from None
        try:
            yield group.address
        finally:
            stub.DeleteMulticastGroup(api.NameRequest(name=name), timeout=60)


def switch_bytes(fabricd: str | None) -> int | None:
    """Bytes the fabric's switches have received so far on all their ports (their counters,
    through fabricd: every hop of a packet counts), or None without fabricd."""
    if not fabricd:
        return None
    with grpc.insecure_channel(fabricd) as channel:
        stub = fabric_pb2_grpc.FabricStub(channel)
        try:
            switches = stub.GetTopology(api.Empty(), timeout=60).switches
            return sum(p.rx_bytes for sw in switches for p in stub.GetCounters(
                api.SwitchRequest(switch=sw.name), timeout=60).ports)
        except grpc.RpcError as err:
            raise LaunchError(f"fabricd at {fabricd} did not give the switches' counters: "
                              f"{err.code().name}: {err.details()}") from None


def launches(cfg: TorchConfig, algos, allgathers, reference: bool) -> list[list[tuple]]:
    """The runs (tag, run), by launch: gloo's alone (loopback); DDP's mlfabric runs in one
    launch (the ranks start and join the fabric once, a process group per run); FSDP's
    each in a launch of its own, so that the switches' counters tell their bytes apart."""
    out = [[("gloo", {"backend": "gloo"})]] if reference else []
    if cfg.parallel == "ddp":
        return out + [[(a, {"backend": "mlfabric", "algo": a}) for a in algos]]
    return out + [[(f"fsdp-{g}", {"backend": "mlfabric", "allgather": g})] for g in allgathers]


@dataclass(frozen=True)
class TorchRanks:
    """Where a job's ranks run and how each launch starts them."""
    ips: list[str]                   # rank order
    workers: list[str]               # their hosts' names (fabricd's jobs and groups)
    namespaces: list[str | None]
    fabricd: str | None
    link_mbps: float | None
    transport: dict | None
    port: int
    timeout: float                   # a whole launch
    step_timeout: float


def torch_all(ips: list[str], workers: list[str], cfg: TorchConfig, algos=("ring",), *,
              reference: bool = True, allgathers=("ring",), namespaces=None,
              fabricd: str | None = None, link_mbps: float | None = None,
              transport: dict | None = None, port: int = RankSpec.port,
              out_dir: Path | None = None, timeout: float = 1800.0,
              step_timeout: float = 120.0) -> list[dict]:
    """The runs (gloo first when `reference`, then each all-reduce in `algos` or, under FSDP,
    each Allgather in `allgathers`) on the ranks `ips` (hosts `workers`, rank order), launched
    as `launches` groups them. Every mlfabric row carries `bytes_injected` (its rank's
    transport, that epoch), a run launched alone `switch_bytes`, and, against the first
    run, `max_param_diff` (parameters after the same epoch) and `step1_diff` (after the
    first step)."""
    ranks = TorchRanks(ips, workers, namespaces or [None] * len(ips), fabricd, link_mbps,
                       transport, port, timeout, step_timeout)
    groups = launches(cfg, algos, allgathers, reference)
    rows = []
    with tempfile.TemporaryDirectory(prefix="torch-") as tmp:
        out = Path(out_dir or tmp)
        out.mkdir(parents=True, exist_ok=True)
        for runs in groups:
            rows += _launch(runs, ranks, cfg, out)
        first = groups[0][0][0]
        for r in rows:
            ref = np.load(out / f"{first}_params_epoch{r['epoch']}.npy")
            r["max_param_diff"] = float(np.abs(np.load(
                out / f"{r['tag']}_params_epoch{r['epoch']}.npy") - ref).max())
            step1 = out / f"{r['tag']}_params_step1.npy"
            if step1.exists():
                ref1 = np.load(out / f"{first}_params_step1.npy")
                r["step1_diff"] = float(np.abs(np.load(step1) - ref1).max())
                top = max(x["grad_absmax"] for x in rows
                          if x["tag"] == r["tag"] and "grad_absmax" in x)
                r["step1_bound"] = step1_bound(r["algo"], r["ranks"], top, cfg.lr,
                                               float(np.abs(ref1).max()))
    return rows


@contextmanager
def _run_options(tag: str, run: dict, fabricd: str | None, workers: list[str],
                 link_mbps: float | None):
    """The run's algorithm options: its multicast group or its in-network all-reduce's job,
    which fabricd sets up for the run and removes after it."""
    if run.get("allgather") == "multicast":
        with multicast_group(fabricd, workers, name=f"torch-{tag}") as address:
            yield {"multicast": {"group": address} | (
                {"link_mbps": link_mbps} if link_mbps else {})}
        return
    algo = run.get("algo", "ring")
    with allreduce_options(algo if algo in ("netreduce", "switchml") else "ring", fabricd,
                           workers, link_mbps, name=f"torch-{tag}") as options:
        yield {algo: options} if options else {}


def _launch(runs, ranks: TorchRanks, cfg: TorchConfig, out: Path) -> list[dict]:
    """One launch of `runs` (one backend); a run launched alone carries `switch_bytes`, what
    the switches received meanwhile."""
    specs = [run | {"tag": tag, "train": asdict(cfg)} for tag, run in runs]
    if specs[0]["backend"] == "gloo":
        return launch(["127.0.0.1"] * len(ranks.ips), specs, port=ranks.port, out_dir=out,
                      timeout=ranks.timeout, program="collectives.torch_train")
    with ExitStack() as jobs:
        for spec in specs:
            spec["options"] = jobs.enter_context(_run_options(
                spec["tag"], spec, ranks.fabricd, ranks.workers, ranks.link_mbps))
        before = switch_bytes(ranks.fabricd)
        got = launch(ranks.ips, specs, namespaces=ranks.namespaces, transport=ranks.transport,
                     port=ranks.port, out_dir=out, timeout=ranks.timeout,
                     step_timeout=ranks.step_timeout, program="collectives.torch_train")
        after = switch_bytes(ranks.fabricd)
    if before is None or len(specs) > 1:
        return got
    return [r | {"switch_bytes": after - before} for r in got]


def step1_bound(algo: str, ranks: int, grad_absmax: float, lr: float,
                param_absmax: float) -> float:
    """How far a run's parameters after the first SGD step may be from the reference's
    (gloo's): lr x the error of the summed gradient plus float32 rounding of the update.
    Every rank adds x = its gradient / N, |x| <= M (`grad_absmax`, the largest over ranks).
    The float32 sums of ring and gloo differ by at most 2 (N-1) roundings of partial sums
    <= N M, 2 (N-1) N M 2^-24; NetReduce and SwitchML sum fixed point, within
    N 2^(e + ceil(log2 N) - 31) of the exact sum for the block's exponent e, 2^e <= 2M:
    M N 2^(ceil(log2 N) - 30), plus gloo's own rounding."""
    n, m = ranks, grad_absmax
    rounding = 2 * (n - 1) * n * m * 2.0 ** -24
    fixed = m * n * 2.0 ** ((n - 1).bit_length() - 30) if algo in ("netreduce",
                                                                   "switchml") else 0.0
    return lr * (rounding + fixed) + 2 * param_absmax * 2.0 ** -24


def _by_tag(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in sorted((r for r in rows if r["rank"] == 0), key=lambda r: r["epoch"]):
        out.setdefault(r["tag"], []).append(r)
    return out


def consistent(rows: list[dict]) -> bool:
    """Every rank of each run ended every epoch with the same parameters (bit for bit)."""
    digests: dict[tuple[str, int], set[str]] = {}
    for r in rows:
        digests.setdefault((r["tag"], r["epoch"]), set()).add(r["digest"])
    return all(len(d) == 1 for d in digests.values())


def _mean_ms(epochs: list[dict], key: str) -> float:
    return float(np.mean([e[key] for e in epochs if e["steps"]])) * 1e3


def table(rows: list[dict], link_mbps: float | None = None, mtu: int = 1024) -> str:
    """One line per run: its last epoch, ms per step, the collectives' ms per step (DDP:
    all-reduce; FSDP: Allgather and reduce-scatter) and, at `link_mbps`, the all-reduce's
    bound per step (ring in packets of `mtu`); bytes rank 0's transport injected and, for a run launched alone, the
    bytes every switch port received; each accuracy against the first run's (gloo's, the
    reference)."""
    runs = _by_tag(rows)
    first = next(iter(runs.values()))[-1] if runs else None
    model = make_model(first["config"]["model"]) if first else None
    elements = parameters(model) if model else 0
    lines = []
    for tag, epochs in runs.items():
        last = epochs[-1]
        fsdp = last["config"]["parallel"] == "fsdp"
        comm = (_mean_ms(epochs, "allgather_s") + _mean_ms(epochs, "reduce_scatter_s")
                if fsdp else _mean_ms(epochs, "allreduce_s"))
        algo = "gloo" if last["backend"] == "gloo" else last["algo"]
        bound = (f"{allreduce_bound_s(algo, elements, last['ranks'], link_mbps, mtu) * 1e3:.1f}"
                 if link_mbps and not fsdp and last["backend"] != "gloo" else "-")
        lines.append([tag, last["config"]["parallel"], str(last["ranks"]), str(last["epoch"]),
                      f"{last['train_loss']:.4f}", f"{last['test_accuracy'] * 100:.2f}",
                      f"{(last['test_accuracy'] - first['test_accuracy']) * 100:+.2f}",
                      f"{_mean_ms(epochs, 'step_s'):.1f}",
                      f"{comm:.1f}" if last["backend"] != "gloo" else "-", bound,
                      f"{sum(e.get('bytes_injected', 0) for e in epochs) / 1e6:.2f}"
                      if last["backend"] != "gloo" else "-",
                      f"{last['switch_bytes'] / 1e6:.2f}" if "switch_bytes" in last else "-",
                      f"{last.get('max_param_diff', 0):.1e}",
                      f"{last['step1_diff']:.1e} <= {last['step1_bound']:.1e}"
                      if "step1_diff" in last else "-"])
    return format_table(["run", "parallel", "ranks", "epochs", "train loss", "test acc %",
                         f"vs {next(iter(runs), '-')} (pp)", "ms/step", "ms collective/step",
                         "bound ms", "MB injected/rank", "MB into switches",
                         "max |param - ref|", "after step 1 (bound)"], lines)


def plot(rows: list[dict], path: Path, title: str) -> None:
    """Loss and test accuracy per epoch, one line per run, and the time per step (the
    collectives and the rest)."""
    runs = _by_tag(rows)
    fig, (loss_ax, acc_ax, time_ax) = png.subplots(1, 3, figsize=(15, 4.5))
    for i, (tag, epochs) in enumerate(runs.items()):
        style = {"marker": "os^vD"[i % 5], "color": f"C{i}", "label": tag}
        x = [e["epoch"] for e in epochs]
        loss_ax.plot(x, [e["train_loss"] for e in epochs], **style)
        acc_ax.plot(x, [e["test_accuracy"] * 100 for e in epochs], **style)
    loss_ax.set(xlabel="epoch", ylabel="training loss (cross-entropy)", yscale="log")
    acc_ax.set(xlabel="epoch", ylabel="test accuracy (%)")
    for ax in (loss_ax, acc_ax):
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.legend()
        ax.grid(alpha=0.3)
    names = list(runs)
    comm = [sum(_mean_ms(runs[t], k) for k in ("allreduce_s", "allgather_s",
                                               "reduce_scatter_s")) for t in names]
    rest = [_mean_ms(runs[t], "step_s") - c for t, c in zip(names, comm, strict=True)]
    time_ax.bar(names, comm, color=[f"C{i}" for i in range(len(names))], label="collectives")
    time_ax.bar(names, rest, bottom=comm, color="0.7", label="the rest of the step")
    time_ax.set(ylabel="ms per step (rank 0, mean)")
    time_ax.legend()
    png.save(fig, path, suptitle=title)
