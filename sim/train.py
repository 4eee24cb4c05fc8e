"""`python -m sim train` and `python -m sim trace`: training iterations in the packet simulator, one row per
(fabric size, intra-host bandwidth, policy, all-reduce and all-gather algorithm), a table with
the iteration time, the compute-only bound and the exposed communication beside it, JSON
lines and a PNG."""
from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import click

from fabricmodel.policies import names as policy_names
from fabricmodel.topology import TopologyError, load
from figures import png
from figures.text import format_table, parse_size
from results.record import save_output
from sim import args, sweep
from sim.dag_run import DagRun, training_transport
from sim.fabric import LinkSpec
from workloads import chakra, generators, hierarchy, megatron, pytorch_et
from workloads.dag import Workload, WorkloadError
from workloads.models import EFFICIENCY, GPUS, HOSTS, MODELS, Cluster
from workloads.schedule import compute_bound

ROOT = Path(__file__).resolve().parent.parent
GB = 1e9


def run_case(label, wl, topo, policy, ar, ag, intra, link, segment, rto_s) -> dict:
    """One iteration in the packet simulator: a row."""
    row = DagRun(wl, topo, policy, allreduce=ar, allgather=ag, intra_bytes_s=intra, link=link,
                 transport=training_transport(segment, rto_s)).run()
    row["case"] = label
    return row


def run_rows(cases: list[tuple], jsonl: Path, *, link: LinkSpec, segment: int,
             rto_s: float = 100e-6, workers: int | None = None,
             scheduler: str | None = None) -> list[dict]:
    """Each case (label, workload, topology, policy, allreduce, allgather, intra B/s) as a
    task of sim/sweep.py (in this process, or on Dask with `workers` / `scheduler`); rows
    appended to `jsonl` as they finish, rewritten in case order at the end."""
    jsonl.parent.mkdir(parents=True, exist_ok=True)
    jsonl.write_text("")
    wall = time.perf_counter()
    tasks = [sweep.Task(run_case, (*c, link, segment, rto_s),
                        f"{c[0]} {c[3]} {c[4]}/{c[5]} {c[6] / GB:g} GB/s",
                        sum(op.bytes for _, op in c[1].ops()) // segment) for c in cases]

    def append(row: dict) -> None:
        with jsonl.open("a") as fh:
            fh.write(json.dumps(row) + "\n")

    try:
        outcome = sweep.run(tasks, workers=workers, scheduler=scheduler, desc="sim train",
                            on_row=append)
    except ValueError as err:
        raise click.UsageError(str(err)) from None
    if outcome.failures:
        task, error = outcome.failures[0]
        raise click.ClickException(f"{len(outcome.failures)} runs failed; {task.label}: "
                                   f"{error.strip().splitlines()[-1]}")
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in outcome.rows))
    click.echo(f"sim: {len(outcome.rows)} runs in {time.perf_counter() - wall:.1f} s wall")
    return outcome.rows


def dask_options(command):
    """--workers / --scheduler, as every sim command has them (sim/sweep.py)."""
    command = click.option("--scheduler", metavar="tcp://HOST:8786",
                           help="Submit the runs to this Dask scheduler.")(command)
    return click.option("--workers", type=click.IntRange(0), help="Run on a local Dask "
                        "cluster of this many processes (0: in this process) [default: in "
                        "this process unless the sweep is large; sim/sweep.py].")(command)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.{3 if seconds < 1e-3 else 2}f}"


def _key(r: dict) -> tuple:
    return (r["case"], r["gpus"], r["intra_gbytes_s"])


def table(rows: list[dict]) -> str:
    """One line per run; the speed-up is over the first run of the same case, fabric size
    and intra-host bandwidth (the first policy / algorithm given)."""
    base: dict[tuple, float] = {}
    for r in rows:
        if r["ok"]:
            base.setdefault(_key(r), r["iteration_s"])
    head = ["workload", "GPUs", "hosts", "intra GB/s", "policy", "all-reduce", "all-gather",
            "iteration ms", "compute bound ms", "exposed comm ms", "speed-up", "NIC GB/host",
            "retx", "done"]
    lines = []
    for r in rows:
        it = r["iteration_s"]
        lines.append([r["workload"], str(r["gpus"]), str(r["hosts"]),
                      f"{r['intra_gbytes_s']:g}", r["policy"], r["allreduce"], r["allgather"],
                      _ms(it) if it else "unfinished", _ms(r["compute_bound_s"]),
                      _ms(r["exposed_comm_s"]) if it else "-",
                      f"{base[_key(r)] / it:.2f}x" if it and _key(r) in base else "-",
                      f"{r['nic_bytes_max'] / GB:.2f}", str(r["retransmitted"]),
                      "yes" if r["ok"] else "NO"])
    return format_table(head, lines)


def plot(rows: list[dict], path: Path, title: str) -> None:
    """Iteration time per run (bars), its compute-only bound (black ticks)."""
    labels = [f"{r['gpus']} GPUs {r['intra_gbytes_s']:g} GB/s\n{r['policy']} {r['allreduce']}"
              f"/{r['allgather']}" for r in rows]
    fig, ax = png.subplots(figsize=(2.5 + 0.9 * len(rows), 4.2))
    xs = range(len(rows))
    ax.bar(xs, [(r["iteration_s"] or 0) * 1e3 for r in rows], 0.7, label="iteration")
    ax.scatter(xs, [r["compute_bound_s"] * 1e3 for r in rows], marker="_", s=600, c="k",
               label="compute-only bound", zorder=3)
    ax.set_xticks(list(xs), labels, fontsize=6, rotation=60, ha="right")
    ax.set_ylabel("iteration time (ms)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    png.save(fig, path)


def finish(rows: list[dict], out_dir: Path, name: str, title: str) -> None:
    click.echo(f"\n{title}\n")
    click.echo(table(rows))
    save_output(out_dir / "tables", name, title, table(rows))
    plot(rows, out_dir / f"{name}.png", title)
    click.echo(f"\nsim: results in {out_dir / (name + '.jsonl')}, plot in "
               f"{out_dir / (name + '.png')}")
    if not all(r["ok"] for r in rows):
        raise SystemExit(1)


GRAD_BYTES = {"fp32": 4, "bf16": 2}


def _workload(model, parallelism, cluster, pipeline, micro_batches, batch, *, tensor=None,
              recompute=False, grad_dtype="fp32") -> Workload:
    try:
        if parallelism == "dp":
            return generators.data_parallel(model, cluster, samples_per_gpu=batch or 32)
        if parallelism == "fsdp":
            return generators.fsdp(model, cluster, samples_per_gpu=batch or 1)
        return generators.gpt_3d(model, cluster, pipeline, micro_batches,
                                 micro_batch=batch or 1, tensor=tensor, recompute=recompute,
                                 grad_bytes=GRAD_BYTES[grad_dtype])
    except ValueError as err:
        raise click.BadParameter(str(err)) from None


def print_megatron_table(out_dir: Path) -> None:
    """Megatron-LM's table 1 next to this model's prediction (workloads/megatron.py)."""
    rows = megatron.reproduce()
    head = ["model", "t", "p", "GPUs", "batch", "micro-batches", "iteration s",
            "sim TFLOP/s/GPU", "paper TFLOP/s/GPU", "error"]
    lines = [[r["model"], str(r["t"]), str(r["p"]), str(r["gpus"]), str(r["batch"]),
              str(r["micro_batches"]), f"{r['iteration_s']:.2f}", f"{r['tflops']:.1f}",
              f"{r['paper_tflops']:g}", f"{r['error']:+.1%}"] for r in rows]
    title = (f"Megatron-LM table 1 on DGX A100 (8 x 200 Gb/s, NVLink 300 GB/s per direction), "
             f"compute efficiency {rows[0]['efficiency']:.3f} calibrated on "
             f"{rows[0]['calibrated_on']}")
    text = format_table(head, lines)
    click.echo(f"\n{title}\n\n{text}")
    save_output(out_dir / "tables", "train-megatron-table1", title, text)


@click.command()
@click.option("--model", type=click.Choice(list(MODELS)), default="gpt3-13b", show_default=True)
@click.option("--parallelism", type=click.Choice(["dp", "fsdp", "3d"]), default="3d",
              show_default=True, help="DDP data parallel, FSDP, or Megatron 3D.")
@click.option("--gpus", default="256", show_default=True, help="GPU counts, comma-separated.")
@click.option("--host", "host_kind", type=click.Choice(list(HOSTS)), default="dgx-a100",
              show_default=True, help="The server: its GPU, GPUs, NICs and NVLink (each "
              "option below overrides one). Its NICs are simulated as one of their sum.")
@click.option("--gpus-per-host", type=click.IntRange(1), help="[default: the host's]")
@click.option("--intra-gbs", help="Intra-host GB/s per GPU and direction, comma-separated "
              "[default: the host's NVLink: A100 300, H100 450; PCIe Gen4 32].")
@click.option("--policies", default="ecmp", show_default=True,
              help="Comma-separated, of fabricmodel.policies' names.")
@click.option("--allreduce", default="ring", show_default=True,
              help=f"Comma-separated, of {', '.join(hierarchy.ALLREDUCE)}.")
@click.option("--allgather", default="ring", show_default=True,
              help=f"Comma-separated, of {', '.join(hierarchy.ALLGATHER)}.")
@click.option("--pipeline", type=click.IntRange(1), default=4, show_default=True,
              help="3D: pipeline stages.")
@click.option("--tensor", type=click.IntRange(1), help="3D: tensor-parallel GPUs, inside a "
              "host [default: all of a host's].")
@click.option("--micro-batches", type=click.IntRange(1), default=16, show_default=True)
@click.option("--recompute/--no-recompute", default=False, show_default=True,
              help="3D: full activation recomputation (Megatron-LM's FLOPs 96 vs 72 B s l h²).")
@click.option("--grad-dtype", type=click.Choice(list(GRAD_BYTES)), default="fp32",
              show_default=True, help="3D: the gradients' all-reduce type (Megatron-LM "
              "reduces bf16 training's gradients in fp32).")
@click.option("--batch", type=click.IntRange(1), help="Samples per GPU (dp 32, fsdp 1) or "
              "per micro-batch (3d 1).")
@click.option("--gpu", type=click.Choice(list(GPUS)), help="[default: the host's]")
@click.option("--efficiency", type=click.FloatRange(0, 1, min_open=True), default=EFFICIENCY,
              show_default=True, help="Achieved fraction of the GPU's peak FLOP/s (calibrated "
              "on Megatron-LM's table 1, first row).")
@click.option("--gbps", type=click.FloatRange(min=1e-6),
              help="Host network Gb/s per direction [default: the host's NICs together].")
@click.option("--megatron-table", is_flag=True, help="Print Megatron-LM's table 1 next to "
              "this model's prediction (no packet simulation) and stop.")
@click.option("--hosts-per-leaf", type=click.IntRange(1), default=16, show_default=True)
@click.option("--segment", default="64KiB", show_default=True,
              help="Simulated packet payload (docs/training.md measures its effect: 64 vs 16 KiB "
              "changes a GPT-3 13B iteration by 0.07 %).")
@click.option("--rto-us", type=click.FloatRange(min=1), default=100.0, show_default=True,
              help="Retransmission timeout (raise it with --segment: a deep queue of large "
              "segments outlasts 100 us and the timeouts fire spuriously).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=ROOT / "out" / "sim", show_default=True)
@dask_options
def train(model, parallelism, gpus, host_kind, gpus_per_host, intra_gbs, policies, allreduce,
          allgather, pipeline, tensor, micro_batches, recompute, grad_dtype, batch, gpu,
          efficiency, gbps, megatron_table, hosts_per_leaf, segment, rto_us, out_dir, workers,
          scheduler):
    """A model's training iteration in the packet simulator under policies and collective algorithms."""
    if megatron_table:
        return print_megatron_table(out_dir)
    host = HOSTS[host_kind]
    gpu_spec = GPUS[gpu] if gpu else host.gpu
    gpus_per_host = gpus_per_host or host.gpus
    gbps = gbps or host.gbps
    counts = args.numbers(gpus, "--gpus", int)
    intras = [g * GB for g in args.numbers(intra_gbs, "--intra-gbs")] if intra_gbs else \
        [gpu_spec.nvlink_bytes_s]
    pols = args.names(policies, policy_names(), "policy", "--policies")
    ars = args.names(allreduce, hierarchy.ALLREDUCE, "all-reduce algorithm", "--allreduce")
    ags = args.names(allgather, hierarchy.ALLGATHER, "all-gather algorithm", "--allgather")
    seg = parse_size(segment)
    cases = []
    for n, intra in itertools.product(counts, intras):
        try:
            cluster = Cluster(n, gpus_per_host, gpu_spec, efficiency, intra)
        except ValueError as err:
            raise click.BadParameter(str(err), param_hint="--gpus") from None
        wl = _workload(model, parallelism, cluster, pipeline, micro_batches, batch,
                       tensor=tensor, recompute=recompute, grad_dtype=grad_dtype)
        topo = args.leaf_spine_for(cluster.hosts, hosts_per_leaf, "--hosts-per-leaf")
        label = f"{model} {parallelism}"
        cases += [(label, wl, topo, p, a, g, intra)
                  for p, a, g in itertools.product(pols, ars, ags)]
    name = f"train-{model}-{parallelism}"
    rows = run_rows(cases, out_dir / f"{name}.jsonl", link=LinkSpec(gbps), segment=seg,
                    rto_s=rto_us * 1e-6, workers=workers, scheduler=scheduler)
    finish(rows, out_dir, name, f"{model} {parallelism}, {host.name}: {gpus_per_host} GPUs per "
           f"host, {gbps:g} Gb/s per host, {seg // 1024} KiB segments")


def read_trace(prefix, gpus_per_host=None, comm_groups=None) -> Workload:
    """A trace set as a workload: PyTorch execution traces (PREFIX.<rank>.json) or Chakra
    (PREFIX.<rank>.et); a bad one, or one whose ranks wait on each other, is a usage error."""
    try:
        if pytorch_et.is_trace(prefix):
            wl = pytorch_et.read(prefix, gpus_per_host=gpus_per_host or 1,
                                 flops_s=GPUS["a100"].peak_flops * EFFICIENCY)
        else:
            wl = chakra.read(prefix, gpus_per_host=gpus_per_host, comm_groups=comm_groups)
        compute_bound(wl)               # ranks that wait on each other: refused here
    except WorkloadError as err:
        raise click.BadParameter(str(err), param_hint="PREFIX") from None
    return wl


@click.command()
@click.argument("prefix")
@click.option("--topology", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A topology file [default: a leaf-spine sized to the ranks' hosts].")
@click.option("--gpus-per-host", type=click.IntRange(1),
              help="Ranks per host [default: the trace's, else 1].")
@click.option("--comm-groups", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="ASTRA-sim communicator-group JSON for the nodes' pg_name.")
@click.option("--intra-gbs", default="300", show_default=True,
              help="Intra-host GB/s per GPU and direction (NVLink A100 300).")
@click.option("--policies", default="ecmp", show_default=True)
@click.option("--allreduce", default="ring", show_default=True)
@click.option("--allgather", default="ring", show_default=True)
@click.option("--gbps", type=click.FloatRange(min=1e-6), default=400.0, show_default=True)
@click.option("--hosts-per-leaf", type=click.IntRange(1), default=16, show_default=True)
@click.option("--segment", default="64KiB", show_default=True)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=ROOT / "out" / "sim", show_default=True)
@dask_options
def trace(prefix, topology, gpus_per_host, comm_groups, intra_gbs, policies, allreduce,
          allgather, gbps, hosts_per_leaf, segment, out_dir, workers, scheduler):
    """A trace set in the packet simulator: Chakra (PREFIX.<rank>.et, as ASTRA-sim names them) or PyTorch's
    execution traces (PREFIX.<rank>.json, from torch.profiler.ExecutionTraceObserver; compute
    timed from its matrix products at an A100's calibrated rate)."""
    wl = read_trace(prefix, gpus_per_host, comm_groups)
    hosts = -(-wl.n // wl.gpus_per_host)
    try:
        topo = (load(topology) if topology
                else args.leaf_spine_for(hosts, hosts_per_leaf, "--hosts-per-leaf"))
    except TopologyError as err:
        raise click.BadParameter(str(err), param_hint="--topology") from None
    if len(topo.hosts) < hosts:
        raise click.BadParameter(f"{topo.name} has {len(topo.hosts)} hosts; the trace needs "
                                 f"{hosts}", param_hint="--topology")
    intras = [g * GB for g in args.numbers(intra_gbs, "--intra-gbs")]
    pols = args.names(policies, policy_names(), "policy", "--policies")
    ars = args.names(allreduce, hierarchy.ALLREDUCE, "all-reduce algorithm", "--allreduce")
    ags = args.names(allgather, hierarchy.ALLGATHER, "all-gather algorithm", "--allgather")
    seg = parse_size(segment)
    cases = [(wl.name, wl, topo, p, a, g, i)
             for i, p, a, g in itertools.product(intras, pols, ars, ags)]
    name = f"trace-{wl.name}"
    rows = run_rows(cases, out_dir / f"{name}.jsonl", link=LinkSpec(gbps), segment=seg,
                    workers=workers, scheduler=scheduler)
    kind = "PyTorch execution trace" if wl.facts.get("format") == "pytorch-et" else "Chakra trace"
    finish(rows, out_dir, name, f"{kind} {prefix} ({wl.n} ranks, {wl.gpus_per_host} per "
           f"host) on {topo.name}, {gbps:g} Gbps, {seg // 1024} KiB segments")
