"""A real training run on the demo's part-two fabric: the digits MLP trained data parallel on
every host, its gradients all-reduced every step by ring, by NetReduce (a job fabricd sets up
over the leaves and a spine) and by SwitchML (a job on one leaf, its pool sized for the link
rate), with the same seed and epochs (collectives.train_launch). Prints the epochs side by
side and writes out/train.png (loss, test accuracy, drift from ring's parameters, time per
step)."""
from __future__ import annotations

from pathlib import Path

import click

from collectives.train import TrainConfig
from collectives.train_launch import consistent, plot, table, train_all
from results.record import save_output

ACCURACY_PP = 1.0        # the in-network runs' test accuracy may differ from ring's by this


def experiment(fab, cfg: TrainConfig, png: Path) -> list[dict]:
    """The three runs on every host of the fabric `fab` (part2.Fabric); returns their rows."""
    ranks = fab.ranks
    names = [h.name for h in ranks.hosts]
    click.echo(f"demo: training the digits MLP on {len(names)} ranks, {cfg.epochs} epochs, "
               f"batch {cfg.batch} per rank: ring, then NetReduce and SwitchML jobs from fabricd")
    rows = train_all([ranks.ip[n] for n in names], names, cfg,
                     namespaces=[ranks.ns[n] for n in names], fabricd=fab.fabricd.address,
                     link_mbps=fab.link_mbps, transport=ranks.transport)
    title = (f"Training the digits MLP over the fabric ({len(names)} ranks, seed {cfg.seed}): "
             f"the last epoch of each run, mean time per step")
    click.echo(f"\n{title}\n")
    click.echo(table(rows))
    save_output(png.parent / "tables", "demo-train", title, table(rows))
    plot(rows, png, f"digits MLP data parallel on {len(names)} ranks, links "
                    f"{fab.link_mbps:g} Mbit/s, batch {cfg.batch} per rank, seed {cfg.seed}")
    click.echo(f"demo: training curves in {png}")
    return rows


def summary_rows(rows: list[dict]) -> list[list[str]]:
    """Rows for the demo's ideas table (idea, run, ranks, CCT ms, MB injected/rank, exact):
    the all-reduce's mean time per step as its CCT; "yes" when the ranks agreed bit for bit
    and the run's final test accuracy is within ACCURACY_PP of ring's."""
    last = {r["algo"]: r for r in rows if r["rank"] == 0 and r["epoch"] == max(
        x["epoch"] for x in rows)}
    agree = consistent(rows)
    out = []
    for algo, r in last.items():
        trained = [x["allreduce_s"] for x in rows if x["algo"] == algo and x["rank"] == 0
                   and x["steps"]]
        gap = abs(r["test_accuracy"] - last["ring"]["test_accuracy"]) * 100
        out.append(["Training (digits MLP)",
                    f"{algo}: test accuracy {r['test_accuracy'] * 100:.2f}% after epoch "
                    f"{r['epoch']} ({gap:.2f} pp from ring)", str(r["ranks"]),
                    f"{sum(trained) / len(trained) * 1e3:.1f}", "-",
                    "yes" if agree and gap <= ACCURACY_PP else "NO"])
    return out
