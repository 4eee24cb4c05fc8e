"""`python -m sim EXPERIMENT`: one command per experiment, a progress bar, JSON lines, a table
and a PNG in --out."""
from __future__ import annotations

import functools
import json
import math
import time
from pathlib import Path

import click

from controller.aggregation import MAX_WORKERS
from controller.vclos import AllocationError
from fabricmodel.policies import names as policy_names
from fabricmodel.topology import Topology, TopologyError, fat_tree, leaf_spine, load
from figures.text import format_table, parse_size
from results.record import save_output, save_table
from sim import args, report, sweep, tenants
from sim import calibration as cal
from sim.collective import run_case
from sim.fabric import RECEIVERS, LinkSpec, Transport
from sim.ideas import multicast_allgather
from sim.ideas import netreduce as run_netreduce
from sim.jobs import training
from sim.train import read_trace, trace, train
from sim.workloads import ALGORITHMS
from workloads.generators import data_parallel
from workloads.models import MODELS, Cluster

ROOT = Path(__file__).resolve().parent.parent


def _sizes(text: str, hint: str = "--sizes") -> list[int]:
    try:
        out = [parse_size(t) for t in text.split(",") if t]
    except click.BadParameter as err:
        raise click.BadParameter(err.message, param_hint=hint) from None
    if not out or min(out) < 1:
        raise click.BadParameter("give one or more positive sizes", param_hint=hint)
    return out


def fabric(topology: Path | None, hosts: int, leaves: int | None,
           fat_tree_k: int | None = None) -> Topology:
    """A topology file, a k-ary fat-tree (k^3/4 hosts), or a leaf-spine of `hosts` hosts: as
    many leaves as spines as hosts per leaf when `hosts` is a square (16x16x16 for 256, the
    Ethereal paper's; 32x32x32 for 1,024)."""
    if fat_tree_k is not None:
        if fat_tree_k % 2:
            raise click.BadParameter(f"a fat-tree needs an even k, got {fat_tree_k}",
                                     param_hint="--fat-tree")
        return fat_tree(fat_tree_k)
    if topology is not None:
        try:
            return load(topology)
        except TopologyError as err:
            raise click.BadParameter(str(err), param_hint="--topology") from None
    if leaves is None:
        leaves = math.isqrt(hosts)
    if leaves < 1 or hosts % leaves:
        raise click.BadParameter(f"{hosts} hosts do not spread evenly over {leaves} leaves",
                                 param_hint="--hosts")
    return leaf_spine(leaves, leaves, hosts // leaves)


def failed_links(topo: Topology, count: int) -> tuple[int, ...]:
    """`count` leaf-spine cables, leaf i to spine i: distinct leaves and spines."""
    spines = topo.tier("spine") or topo.tier("agg")
    if count > min(len(topo.leaves), len(spines)):
        raise click.BadParameter(f"{topo.name} has no {count} disjoint leaf uplinks to fail",
                                 param_hint="--failures")
    return tuple(topo.link(topo.leaves[i].name, spines[i].name).index
                 if topo.kind == "leaf-spine" else topo.uplinks(topo.leaves[i].name)[0].index
                 for i in range(count))


@click.group()
def main() -> None:
    """The four ideas at paper scale in the packet-level simulator (see sim/README.md)."""


def sweep_options(fn):
    """--workers and --scheduler: where a command's independent runs go (sim/sweep.py)."""
    @functools.wraps(fn)
    def checked(*a, workers=None, scheduler=None, **kw):
        if workers is not None and scheduler is not None:
            raise click.UsageError("--workers and --scheduler exclude each other: the "
                                   "scheduler's cluster has its own workers")
        return fn(*a, workers=workers, scheduler=scheduler, **kw)

    checked = click.option(
        "--scheduler", metavar="tcp://HOST:8786",
        help="Submit the runs to this Dask scheduler (its dashboard address is printed).")(checked)
    return click.option(
        "--workers", type=click.IntRange(0),
        help="Run on a local Dask cluster of this many processes (0: every run in this "
             "process) [default: in this process unless the sweep is large enough for a "
             "cluster to win; sim/sweep.py].")(checked)


@main.command()
@click.option("--hosts", type=click.IntRange(2), default=256, show_default=True)
@click.option("--leaves", type=click.IntRange(1), help="Leaves (= spines) [default: sqrt(hosts)].")
@click.option("--topology", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A topology file instead of --hosts/--leaves.")
@click.option("--fat-tree", "fat_tree_k", type=click.IntRange(2),
              help="A 3-tier k-ary fat-tree (k^3/4 hosts; 16: 1,024) instead of --hosts/--leaves.")
@click.option("--collectives", "colls", default="all-to-all,halving-doubling", show_default=True,
              help=f"Comma-separated, of {', '.join(ALGORITHMS)}.")
@click.option("--sizes", default="1MiB", show_default=True, help="Bytes per rank, comma-separated.")
@click.option("--policies", default=lambda: ",".join(policy_names()),
              show_default="every registered policy")
@click.option("--failures", default="0,1", show_default=True,
              help="Failed leaf-spine links per run, comma-separated counts.")
@click.option("--gbps", type=click.FloatRange(min=1e-6), default=400.0, show_default=True)
@click.option("--delay-ns", type=click.FloatRange(min=0), default=500.0, show_default=True)
@click.option("--mtu", type=click.IntRange(64, 9000), default=4096, show_default=True)
@click.option("--window", type=click.IntRange(1), default=64, show_default=True,
              help="Packets in flight per QP.")
@click.option("--rto-us", type=click.FloatRange(min=1), default=100.0, show_default=True,
              help="The first retransmission timeout; it doubles on each expiry.")
@click.option("--receiver", type=click.Choice(RECEIVERS), default="auto", show_default=True,
              help="go-back-N (gbn) or selective repeat (sr); auto: ecmp and ethereal gbn, "
                   "spray and reps sr.")
@click.option("--pfc/--no-pfc", default=True, show_default=True,
              help="PFC on the switches' shared buffer (off: deep drop-tail queues).")
@click.option("--dcqcn/--no-dcqcn", default=True, show_default=True, help="DCQCN with CNPs.")
@click.option("--seeds", type=click.IntRange(1), default=1, show_default=True)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=ROOT / "out" / "sim", show_default=True)
@sweep_options
def ethereal(hosts, leaves, topology, fat_tree_k, colls, sizes, policies, failures, gbps,
             delay_ns, mtu, window, rto_us, receiver, pfc, dcqcn, seeds, out_dir, workers,
             scheduler):
    """Ethereal vs hash ECMP, spraying and REPS: CCT per collective, with and without failed
    links."""
    topo = fabric(topology, hosts, leaves, fat_tree_k)
    algos = args.names(colls, ALGORITHMS, "collective", "--collectives")
    pols = args.names(policies, policy_names(), "policy", "--policies")
    try:
        fails = [int(x) for x in failures.split(",") if x]
    except ValueError:
        raise click.BadParameter(f"{failures!r} is not a list of counts",
                                 param_hint="--failures") from None
    cases = [(a, s, failed_links(topo, k), p, seed) for seed in range(seeds)
             for a in algos for s in _sizes(sizes) for k in fails for p in pols]
    link = LinkSpec(gbps, delay_ns)
    transport = Transport(mtu=mtu, window=window, rto_s=rto_us * 1e-6, receiver=receiver,
                          pfc=pfc, cc=dcqcn)
    title = (f"{topo.name}, {len(topo.hosts)} hosts, {gbps:g} Gbps, {delay_ns:g} ns links, "
             f"MTU {mtu}")
    outcome = run_cases(topo, cases, link, transport, out_dir / "ethereal.jsonl",
                        workers=workers, scheduler=scheduler)
    finish(outcome, out_dir / "ethereal.jsonl", out_dir / "ethereal-cct.png", title)


def run_cases(topo, cases, link, transport, jsonl: Path, *, workers: int | None = None,
              scheduler: str | None = None) -> sweep.Outcome:
    """Every case (collective, size, failed links, policy, seed) as a task (sim/sweep.py);
    each row is appended to `jsonl` as its run completes, and the file is rewritten in case
    order at the end."""
    jsonl.parent.mkdir(parents=True, exist_ok=True)
    jsonl.write_text("")
    wall = time.perf_counter()
    tasks = [sweep.Task(run_case, (topo, algo, size, failed, policy, seed, link, transport),
                        f"{algo} {report.size_text(size)} {policy}"
                        f"{' failed ' + ','.join(map(str, failed)) if failed else ''} seed {seed}",
                        packets(len(topo.hosts), size, transport.mtu,
                                1 if algo == "all-to-all" else 2))
             for algo, size, failed, policy, seed in cases]

    def append(row: dict) -> None:
        with jsonl.open("a") as fh:
            fh.write(json.dumps(row) + "\n")

    outcome = sweep.run(tasks, workers=workers, scheduler=scheduler, on_row=append)
    report.write_jsonl(outcome.rows, jsonl)
    click.echo(f"sim: {len(outcome.rows)} runs in {time.perf_counter() - wall:.1f} s wall")
    return outcome


def finish(outcome: sweep.Outcome, jsonl: Path, png: Path, title: str) -> None:
    rows = outcome.rows
    click.echo(f"\n{title}\n")
    if rows:
        click.echo(report.table(rows))
        save_table(jsonl.parent, jsonl.stem, title, *report.table_rows(rows))
        report.plot(rows, png, title)
        click.echo(f"\nsim: results in {jsonl}, plot in {png}")
    report_failures(outcome)
    if not all(r["ok"] for r in rows):
        raise SystemExit(1)


def report_failures(outcome: sweep.Outcome) -> None:
    """Each failed run with its parameters and error; exit status 1 if there was one."""
    for task, error in outcome.failures:
        click.echo(f"sim: FAILED {task.label}: {error.strip().splitlines()[-1]}", err=True)
    if outcome.failures:
        raise SystemExit(1)


@main.command("jobs-packet")
@click.option("--hosts", type=click.IntRange(2), default=256, show_default=True)
@click.option("--leaves", type=click.IntRange(1), help="Leaves (= spines) [default: sqrt(hosts)].")
@click.option("--topology", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A topology file instead of --hosts/--leaves.")
@click.option("--jobs", type=click.IntRange(2, 8), default=8, show_default=True)
@click.option("--ranks", type=click.IntRange(2), default=32, show_default=True,
              help="Ranks of every job.")
@click.option("--collective", type=click.Choice(list(ALGORITHMS)), default="halving-doubling",
              show_default=True, help="What every job runs. Ring all-reduce of 1 MiB over 32 "
              "ranks is latency-bound (8-packet steps): its tenants barely meet.")
@click.option("--size", default="1MiB", show_default=True, help="Bytes per rank.")
@click.option("--schemes", default=",".join(tenants.SCHEMES), show_default=True)
@click.option("--placement", type=click.Choice(tenants.PLACEMENTS), default="spread",
              show_default=True, help="The network-unaware scheduler of ecmp and ethereal: "
              "spread deals hosts out rack by rack, random samples them (--seed).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--gbps", type=click.FloatRange(min=1e-6), default=400.0, show_default=True)
@click.option("--delay-ns", type=click.FloatRange(min=0), default=500.0, show_default=True)
@click.option("--train", "train_model", type=click.Choice(list(MODELS)),
              help="Training jobs instead of collectives: each job one DDP iteration of this "
              "model over --job-gpus GPUs, in vClos slices and shared under every policy.")
@click.option("--trace-job", "trace_jobs", multiple=True, metavar="PREFIX",
              help="A training job from a trace set (Chakra PREFIX.<rank>.et or PyTorch "
              "PREFIX.<rank>.json), its own ranks; repeat for each job (instead of --train).")
@click.option("--job-gpus", type=click.IntRange(1), default=64, show_default=True)
@click.option("--gpus-per-host", type=click.IntRange(1), default=8, show_default=True)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=ROOT / "out" / "sim", show_default=True)
@sweep_options
def jobs_packet(hosts, leaves, topology, jobs, ranks, collective, size, schemes, placement,
                seed, gbps, delay_ns, train_model, trace_jobs, job_gpus, gpus_per_host, out_dir,
                workers, scheduler):
    """Several jobs on one fabric, packet level: each job's CCT alone and with the others
    under hash ECMP and Ethereal (network-unaware placement) and in vClos slices; with
    --train, training iterations (sim/jobs/training.py)."""
    topo = fabric(topology, hosts, leaves)
    if train_model or trace_jobs:
        return _train_jobs(topo, train_model, trace_jobs, jobs, job_gpus, gpus_per_host,
                           schemes, LinkSpec(gbps, delay_ns), out_dir, workers, scheduler)
    if jobs * ranks > len(topo.hosts):
        raise click.BadParameter(f"{jobs} jobs of {ranks} ranks do not fit {len(topo.hosts)} "
                                 "hosts", param_hint="--ranks")
    size_bytes = _sizes(size, "--size")[0]
    chosen = args.names(schemes, tenants.SCHEMES, "scheme", "--schemes")
    placed = {}
    for scheme in chosen:
        try:
            placed[scheme] = tenants.place(topo, scheme, [ranks] * jobs, collective,
                                           size_bytes, placement, seed)
        except AllocationError as err:
            raise click.ClickException(f"vClos cannot place the jobs: {err}") from None
    link = LinkSpec(gbps, delay_ns)
    wall = time.perf_counter()
    tasks = [sweep.Task(functools.partial(tenants.compare, link=link, seed=seed),
                        (topo, placed[s], s), s,
                        (jobs + 1) * jobs * packets(ranks, size_bytes, 4096, 2))
             for s in chosen]
    outcome = sweep.run(tasks, workers=workers, scheduler=scheduler, desc="sim jobs-packet")
    report_failures(outcome)
    rows = outcome.rows
    jsonl = out_dir / "jobs-packet.jsonl"
    report.write_jsonl(rows, jsonl)
    click.echo(f"sim: {len(rows)} job rows in {time.perf_counter() - wall:.1f} s wall\n")
    title = (f"{topo.name}, {len(topo.hosts)} hosts, {jobs} jobs of {ranks} ranks, "
             f"{collective} {report.size_text(size_bytes)} per rank, {gbps:g} Gbps, "
             f"placement {placement}")
    click.echo(f"{title}\n")
    click.echo(report.tenants_table(rows))
    save_output(out_dir / "tables", "jobs-packet", title, report.tenants_table(rows))
    report.tenants_plot(rows, out_dir / "jobs-packet.png", title)
    click.echo(f"\nsim: results in {jsonl}, plot in {out_dir / 'jobs-packet.png'}")
    if not all(r["ok"] for r in rows):
        raise SystemExit(1)


def _train_jobs(topo, model, trace_jobs, jobs, job_gpus, gpus_per_host, schemes, link, out_dir,
                workers, scheduler) -> None:
    """Training jobs on one fabric: `jobs` generated DDP iterations of `model`, or one job
    per trace set (sim/jobs/training.py)."""
    if model and trace_jobs:
        raise click.UsageError("--train and --trace-job exclude each other")
    if trace_jobs:
        wls = [read_trace(p, gpus_per_host) for p in trace_jobs]
        what = " + ".join(w.name for w in wls)
    else:
        try:
            cluster = Cluster(job_gpus, gpus_per_host)
        except ValueError as err:
            raise click.BadParameter(str(err), param_hint="--job-gpus") from None
        wls = [data_parallel(model, cluster)] * jobs
        what = f"{jobs} x {wls[0].name}, {job_gpus} GPUs each"
    given = schemes != ",".join(tenants.SCHEMES)
    chosen = args.names(schemes, training.SCHEMES, "scheme", "--schemes") if given else \
        list(training.SCHEMES)
    rows = training.run_table(topo, wls, chosen, link, out_dir,
                              f"{what} ({gpus_per_host} GPUs per host), on {topo.name}, "
                              f"{link.gbps:g} Gb/s", workers=workers, scheduler=scheduler)
    if not all(r["ok"] for r in rows):
        raise SystemExit(1)


@main.command()
@click.option("--demo-jsonl", type=click.Path(dir_okay=False, path_type=Path),
              default=ROOT / "out" / "demo.jsonl", show_default=True,
              help="The emulation's results (else the README's demo table is used).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=ROOT / "out" / "sim", show_default=True)
@sweep_options
def calibrate(demo_jsonl, out_dir, workers, scheduler):
    """The `make demo` scenario (leafspine-2x2, 512 KiB per rank, 16 Mbit/s) simulated, CCT per
    policy next to the emulation's."""
    topo = load(ROOT / "controller" / "topologies" / "leafspine-2x2.yaml")
    link = LinkSpec(cal.LINK_MBPS / 1e3, 0.0, cal.QUEUE)
    transport = Transport(mtu=cal.MTU, window=cal.WINDOW, rto_s=cal.RTO_S, cc=False)
    cases = [(coll, cal.SIZE, (), policy, 0) for _, coll in cal.CASES for policy in policy_names()]
    outcome = run_cases(topo, cases, link, transport, out_dir / "calibration.jsonl",
                        workers=workers, scheduler=scheduler)
    report_failures(outcome)
    rows = outcome.rows
    emu, source = cal.emulation_cct_ms(demo_jsonl)
    click.echo(f"\n{topo.name}, 4 ranks, 512KiB per rank, {cal.LINK_MBPS:g} Mbit/s, MTU "
               f"{cal.MTU}, window {cal.WINDOW}; emulation from {source}\n")
    click.echo(cal.table(rows, emu))


@main.command()
@click.option("--hosts", default="128,512", show_default=True,
              help="Fabric sizes (leaf-spine, sqrt(hosts) leaves unless --leaves).")
@click.option("--hosts-per-leaf", type=click.IntRange(1), default=16, show_default=True)
@click.option("--shard", default="4KiB", show_default=True, help="Bytes each rank contributes.")
@click.option("--gbps", type=click.FloatRange(min=1e-6), default=400.0, show_default=True)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=ROOT / "out" / "sim", show_default=True)
@sweep_options
def multicast(hosts, hosts_per_leaf, shard, gbps, out_dir, workers, scheduler):
    """Multicast Allgather vs ring Allgather: link traversals (and CCT) per fabric size."""
    sizes, shard_bytes = _host_counts(hosts), _sizes(shard, "--shard")[0]
    tasks = _per_fabric(multicast_allgather, sizes, hosts_per_leaf, shard_bytes, gbps)
    outcome = sweep.run(tasks, workers=workers, scheduler=scheduler, desc="sim multicast")
    _ideas_out(outcome, out_dir / "multicast.jsonl", "shard-traversals")


@main.command()
@click.option("--hosts", default="16,64,128", show_default=True,
              help=f"Fabric sizes, at most {MAX_WORKERS} (the aggregation header's worker count).")
@click.option("--hosts-per-leaf", type=click.IntRange(1), default=16, show_default=True)
@click.option("--size", default="1MiB", show_default=True, help="Bytes per rank.")
@click.option("--gbps", type=click.FloatRange(min=1e-6), default=400.0, show_default=True)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=ROOT / "out" / "sim", show_default=True)
@sweep_options
def netreduce(hosts, hosts_per_leaf, size, gbps, out_dir, workers, scheduler):
    """NetReduce (aggregation in the leaf) vs ring all-reduce: CCT and link traversals."""
    sizes, size_bytes = _host_counts(hosts), _sizes(size, "--size")[0]
    if not sizes or not all(2 <= n <= MAX_WORKERS for n in sizes):
        raise click.BadParameter(f"each fabric needs 2..{MAX_WORKERS} hosts, got {hosts!r}",
                                 param_hint="--hosts")
    tasks = _per_fabric(run_netreduce, sizes, hosts_per_leaf, size_bytes, gbps)
    outcome = sweep.run(tasks, workers=workers, scheduler=scheduler, desc="sim netreduce")
    _ideas_out(outcome, out_dir / "netreduce.jsonl", "buffer-traversals")


def _per_fabric(run, sizes: list[int], hosts_per_leaf: int, nbytes: int,
                gbps: float) -> list[sweep.Task]:
    """One task of `run` per fabric size: its non-blocking leaf-spine, `nbytes`, the links."""
    return [sweep.Task(run, (args.leaf_spine_for(n, hosts_per_leaf, "--hosts"), nbytes,
                             LinkSpec(gbps), Transport()), f"{n} hosts",
                       packets(n, nbytes, Transport().mtu, 2)) for n in sizes]


def packets(hosts: int, size: int, mtu: int, sends_per_byte: int) -> int:
    """About the data packets a collective sends: each rank sends its `size` bytes
    `sends_per_byte` times (all-to-all once, the others about twice), in MTU packets."""
    return hosts * -(-size // mtu) * sends_per_byte


def _host_counts(text: str) -> list[int]:
    return args.numbers(text, "--hosts", int, "a list of host counts", least=2)


def _ideas_out(outcome: sweep.Outcome, jsonl: Path, unit: str) -> None:
    rows = outcome.rows
    report.write_jsonl(rows, jsonl)
    head = ["idea", "hosts", "run", "CCT us", unit, "formula", "baseline / this", "done"]
    lines = []
    for r in rows:
        base = next(b for b in rows if b["hosts"] == r["hosts"] and "baseline" in b["run"])
        lines.append([r["idea"], str(r["hosts"]), r["run"], f"{r['cct_s'] * 1e6:.1f}",
                      f"{r['traversals']:.1f}", f"{r['formula']:.1f}",
                      f"{base['traversals'] / r['traversals']:.3f}x",
                      "yes" if r["ok"] else "NO"])
    click.echo("\n" + format_table(head, lines))
    save_table(jsonl.parent, jsonl.stem, f"{rows[0]['idea']} against its baseline: CCT and "
               f"{unit}, counted and by formula", head, lines)
    click.echo(f"\nsim: results in {jsonl}")
    report_failures(outcome)
    if not all(r["ok"] for r in rows):
        raise SystemExit(1)


main.add_command(train)
main.add_command(trace)
