"""A real training run on the demo's part-two fabric: the digits MLP trained data parallel on
every host, its gradients all-reduced every step by ring, by NetReduce (a job fabricd sets up
over the leaves and a spine) and by SwitchML (a job on one leaf, its pool sized for the link
rate), with the same seed and epochs (collectives.train_launch). Prints the epochs side by
side and writes out/train.png (loss, test accuracy, drift from ring's parameters, time per
step).

Then, where PyTorch is installed, the same comparison for a PyTorch job: stock
DistributedDataParallel around a CNN on the same digits (collectives.torch_train, 217,546
parameters) on the backend mlfabric over ring, NetReduce and SwitchML, beside the same
script on gloo over loopback (collectives.torch_launch); out/train-torch.png. The two models
are the two regimes: the MLP's 9.6 KB gradient is a few packets, its all-reduce bound by
round trips through the switches, where NetReduce's halving of the bytes cannot show; the
CNN's 870 KB is bandwidth-bound at part two's link rate, where NetReduce's step approaches
N/(2(N-1)) of ring's bytes and time (the bound column: each run's bytes over the link rate)."""
from __future__ import annotations

from pathlib import Path

import click

from collectives.train import TrainConfig
from collectives.train_launch import consistent, plot, table, train_all
from results.record import save_output

ACCURACY_PP = 1.0        # the in-network runs' test accuracy may differ from ring's by this
TORCH_EPOCHS = 3         # the CNN: 33 steps of 8 x 16 samples, 95 % test accuracy


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
    return rows + torch_experiment(fab, cfg, png.parent / "train-torch.png")


def torch_experiment(fab, cfg: TrainConfig, png: Path) -> list[dict]:
    """The PyTorch CNN under DDP over gloo (loopback), then mlfabric with ring, NetReduce and
    SwitchML; its rows (they carry a "tag"), none where PyTorch is missing."""
    try:
        from collectives.torch_launch import plot as torch_plot
        from collectives.torch_launch import table as torch_table
        from collectives.torch_launch import torch_all
        from collectives.torch_train import TorchConfig
    except ImportError as exc:
        click.echo(f"demo: no PyTorch here ({exc}): the PyTorch training run is skipped")
        return []
    ranks = fab.ranks
    names = [h.name for h in ranks.hosts]
    tcfg = TorchConfig(model="cnn", epochs=TORCH_EPOCHS, batch=cfg.batch, seed=cfg.seed)
    click.echo(f"demo: PyTorch DDP, the digits CNN on {len(names)} ranks, {tcfg.epochs} epochs, "
               f"batch {tcfg.batch} per rank: gloo (loopback), then mlfabric ring, NetReduce "
               f"and SwitchML")
    rows = torch_all([ranks.ip[n] for n in names], names, tcfg,
                     ("ring", "netreduce", "switchml"), namespaces=[ranks.ns[n] for n in names],
                     fabricd=fab.fabricd.address, link_mbps=fab.link_mbps,
                     transport=ranks.transport, out_dir=png.parent / "torch-run")
    title = (f"PyTorch DDP over the fabric: the digits CNN ({len(names)} ranks, seed "
             f"{tcfg.seed}), the last epoch of each run, mean time per step, the all-reduce's "
             f"link-rate bound at {fab.link_mbps:g} Mbit/s")
    text = torch_table(rows, fab.link_mbps)
    click.echo(f"\n{title}\n")
    click.echo(text)
    save_output(png.parent / "tables", "demo-train-torch", title, text)
    torch_plot(rows, png, f"PyTorch DDP, digits CNN on {len(names)} ranks, links "
                          f"{fab.link_mbps:g} Mbit/s, batch {tcfg.batch} per rank")
    click.echo(f"demo: PyTorch training curves in {png}; execution traces in "
               f"{png.parent / 'torch-run'}")
    return rows


def summary_rows(rows: list[dict]) -> list[list[str]]:
    """Rows for the demo's ideas table (idea, run, ranks, CCT ms, MB injected/rank, exact):
    the all-reduce's mean time per step as its CCT; "yes" when the ranks agreed bit for bit
    and the run's final test accuracy is within ACCURACY_PP of ring's (the PyTorch runs':
    of gloo's)."""
    torch_rows = [r for r in rows if "tag" in r]
    rows = [r for r in rows if "tag" not in r]
    return _mlp_rows(rows) + (_torch_rows(torch_rows) if torch_rows else [])


def _torch_rows(rows: list[dict]) -> list[list[str]]:
    from collectives.torch_launch import consistent
    end = max(r["epoch"] for r in rows)
    last = {r["tag"]: r for r in rows if r["rank"] == 0 and r["epoch"] == end}
    agree = consistent(rows)
    out = []
    for tag, r in last.items():
        per_step = [x["allreduce_s"] for x in rows if x["tag"] == tag and x["rank"] == 0
                    and x["steps"]]
        gap = abs(r["test_accuracy"] - last["gloo"]["test_accuracy"]) * 100
        out.append(["Training (PyTorch CNN, DDP)",
                    f"{tag}: test accuracy {r['test_accuracy'] * 100:.2f}% after epoch {end} "
                    f"({gap:.2f} pp from gloo)", str(r["ranks"]),
                    f"{sum(per_step) / len(per_step) * 1e3:.1f}" if tag != "gloo" else "-",
                    "-", "yes" if agree and gap <= ACCURACY_PP else "NO"])
    return out


def _mlp_rows(rows: list[dict]) -> list[list[str]]:
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
