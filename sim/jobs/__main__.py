"""`python -m sim.jobs`: the job trace under hash ECMP, vClos and OCS-vClos; JCT table and
plot. Options: `--help`."""
from __future__ import annotations

import statistics
import time
from pathlib import Path

import click
from tqdm import tqdm

from fabricmodel.topology import leaf_spine
from figures import png
from figures.text import format_table
from results.record import save_table

from .schemes import SCHEMES
from .simulate import Outcome, run
from .trace import generate

ROOT = Path(__file__).resolve().parents[2]


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 \
        else values[0]


def summarise(results: dict[str, list[Outcome]]) -> tuple[list[str], list[list[str]]]:
    base = statistics.mean(o.jct for o in results["ECMP"])
    head = ["scheme", "jobs", "avg JCT min", "vs ECMP", "p50", "p99", "avg wait min",
            "jobs that wait", "comm slowdown (jobs across leaves)"]
    rows = []
    for name, outs in results.items():
        jct = [o.jct for o in outs]
        cross = [o.slowdown for o in outs if o.spans_leaves]
        rows.append([name, str(len(outs)), f"{statistics.mean(jct):.1f}",
                     f"{statistics.mean(jct) / base - 1:+.1%}", f"{percentile(jct, 50):.1f}",
                     f"{percentile(jct, 99):.1f}", f"{statistics.mean(o.wait for o in outs):.1f}",
                     f"{sum(o.wait > 1e-9 for o in outs) / len(outs):.1%}",
                     f"{statistics.mean(cross):.2f}x" if cross else "-"])
    return head, rows


def plot(results: dict[str, list[Outcome]], path: Path, title: str) -> None:
    fig, (cdf, bars) = png.subplots(1, 2, figsize=(10, 3.8))
    for name, outs in results.items():
        jct = sorted(o.jct for o in outs)
        cdf.plot(jct, [(i + 1) / len(jct) for i in range(len(jct))], label=name)
    cdf.set_xscale("log")
    cdf.set_xlabel("job completion time (min)")
    cdf.set_ylabel("fraction of jobs")
    cdf.legend(fontsize=8)
    names = list(results)
    avg = [statistics.mean(o.jct for o in results[n]) for n in names]
    p99 = [percentile([o.jct for o in results[n]], 99) for n in names]
    xs = range(len(names))
    bars.bar([x - 0.2 for x in xs], avg, 0.4, label="average")
    bars.bar([x + 0.2 for x in xs], p99, 0.4, label="p99")
    bars.set_xticks(list(xs), names)
    bars.set_ylabel("JCT (min)")
    bars.legend(fontsize=8)
    png.save(fig, path, suptitle=title)


@click.command()
@click.option("--leaves", type=click.IntRange(2), default=16, show_default=True)
@click.option("--spines", type=click.IntRange(1), default=16, show_default=True)
@click.option("--hosts-per-leaf", type=click.IntRange(1), default=16, show_default=True,
              help="GPUs (one NIC each) per leaf.")
@click.option("--jobs", type=click.IntRange(1), default=400, show_default=True)
@click.option("--load", type=click.FloatRange(0.01), default=0.9, show_default=True,
              help="Offered load: GPU-minutes asked per minute over the cluster's GPUs.")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path),
              default=ROOT / "out" / "jobtrace-jct.png", show_default=True)
def main(leaves, spines, hosts_per_leaf, jobs, load, seed, plot_path):
    """Replay one generated job trace under hash ECMP, vClos and OCS-vClos."""
    topo = leaf_spine(leaves, spines, hosts_per_leaf)
    gpus = len(topo.hosts)
    try:
        trace = generate(jobs, gpus, load, seed)
    except ValueError as err:
        raise click.BadParameter(str(err)) from None
    began = time.monotonic()
    results = {}
    with tqdm(total=jobs * len(SCHEMES), unit="job", desc="jobtrace") as bar:
        for cls in SCHEMES:
            bar.set_postfix_str(cls.name)
            results[cls.name] = run(cls, topo, trace, seed, on_done=lambda: bar.update())
    title = (f"{leaves}x{spines} leaf-spine, {gpus} GPUs, {jobs} jobs (2-64 GPUs), "
             f"offered load {load:.0%}, seed {seed}")
    click.echo(f"\n{title}\n")
    head, rows = summarise(results)
    click.echo(format_table(head, rows))
    save_table(plot_path.parent, "jobtrace", title, head, rows)
    plot(results, plot_path, title)
    click.echo(f"\njobtrace: plot in {plot_path}; simulated in {time.monotonic() - began:.1f} s")


if __name__ == "__main__":
    main()
