"""A real training run on the demo's part-two fabric, in the two regimes of NetReduce's
claim: the digits MLP trained data parallel on every host, its gradients all-reduced every
step by ring, by NetReduce (a job fabricd sets up over the leaves and a spine) and, for the
small model, by SwitchML (a job on one leaf, its pool sized for the link rate), same seed
(collectives.train_launch), once as the small model (2,410 parameters: a 9.6 KB gradient, a
few packets whose all-reduce is bound by round trips through the switches, where halving the
bytes cannot show) and once wide (WIDE_HIDDEN hidden units, 230,410 parameters: a 922 KB
gradient, bandwidth-bound at part two's link rate, where NetReduce's step should approach
N/(2(N-1)) of ring's bytes and time). One table holds both, each run with its all-reduce's
link-rate bound and ring's step time over its own; out/train.png and out/train-wide.png.

Then, where PyTorch is installed, the same comparison for a PyTorch job: stock
DistributedDataParallel around a CNN on the same digits (collectives.torch_train, 217,546
parameters) on the backend mlfabric over ring and NetReduce, beside the same
script on gloo over loopback (collectives.torch_launch); out/train-torch.png."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import click

from collectives.train import ALGOS, TrainConfig
from collectives.train_launch import consistent, plot, table, train_all
from results.record import save_output

try:                      # the PyTorch job needs PyTorch; the rest of the demo runs without it
    from collectives import torch_launch
    from collectives.torch_train import TorchConfig
    NO_TORCH = ""
except ImportError as exc:
    torch_launch = TorchConfig = None
    NO_TORCH = str(exc)

ACCURACY_PP = 1.0        # the in-network runs' test accuracy may differ from ring's by this
TORCH_EPOCHS = 3         # the CNN: 33 steps of 8 x 16 samples, 95 % test accuracy (fewer
                         # when --train-epochs asks fewer, as for the wide MLP)
# The wide MLP: 64 -> 3,072 -> 10, 230,410 parameters (>= 200k: bandwidth-bound at part
# two's rate); two epochs (22 steps of 8 x 16 samples) reach the small model's accuracy
WIDE_HIDDEN = 3072
WIDE_EPOCHS = 2
# The bandwidth-bound models run ring and NetReduce only: SwitchML stretched over four leaves
# pulls every worker's vector into one leaf through its spine ports (8.8 s per step of the
# wide MLP at 20 Mbit/s against ring's 0.76 s); its row stays with the small model
BANDWIDTH_BOUND_ALGOS = ("ring", "netreduce")


def experiment(fab, cfg: TrainConfig, png: Path) -> list[dict]:
    """The runs of both models on every host of the fabric `fab` (part2.Fabric); returns
    their rows (and the PyTorch job's)."""
    ranks = fab.ranks
    names = [h.name for h in ranks.hosts]
    wide = replace(cfg, hidden=WIDE_HIDDEN, epochs=min(cfg.epochs, WIDE_EPOCHS))
    rows = []
    for model, algos, plot_path in ((cfg, ALGOS, png), (wide, BANDWIDTH_BOUND_ALGOS,
                                                       png.with_name(f"{png.stem}-wide.png"))):
        click.echo(f"demo: training the digits MLP (hidden {model.hidden}) on {len(names)} "
                   f"ranks, {model.epochs} epochs, batch {model.batch} per rank: "
                   f"{', '.join(algos)} (in-network jobs from fabricd)")
        got = train_all([ranks.ip[n] for n in names], names, model, algos,
                        namespaces=[ranks.ns[n] for n in names], fabricd=fab.fabricd.address,
                        link_mbps=fab.link_mbps, transport=ranks.transport)
        plot(got, plot_path, f"digits MLP 64-{model.hidden}-10 data parallel on {len(names)} "
                             f"ranks, links {fab.link_mbps:g} Mbit/s, batch {model.batch} "
                             f"per rank, seed {model.seed}")
        click.echo(f"demo: training curves in {plot_path}")
        rows += got
    title = (f"Training the digits MLP over the fabric ({len(names)} ranks, seed {cfg.seed}), "
             f"small (latency-bound) and wide (bandwidth-bound): the last epoch of each run, "
             f"mean time per step, the all-reduce's link-rate bound at {fab.link_mbps:g} Mbit/s")
    text = table(rows, fab.link_mbps, ranks.transport.get("mtu", 1024))
    click.echo(f"\n{title}\n")
    click.echo(text)
    save_output(png.parent / "tables", "demo-train", title, text)
    return rows + torch_experiment(fab, cfg, png.parent / "train-torch.png")


def torch_experiment(fab, cfg: TrainConfig, png: Path) -> list[dict]:
    """The PyTorch CNN under DDP over gloo (loopback), then mlfabric with ring and NetReduce;
    its rows (they carry a "tag"), none where PyTorch is missing."""
    if torch_launch is None:
        click.echo(f"demo: no PyTorch here ({NO_TORCH}): the PyTorch training run is skipped")
        return []
    ranks = fab.ranks
    names = [h.name for h in ranks.hosts]
    tcfg = TorchConfig(model="cnn", epochs=min(cfg.epochs, TORCH_EPOCHS), batch=cfg.batch,
                       seed=cfg.seed)
    click.echo(f"demo: PyTorch DDP, the digits CNN on {len(names)} ranks, {tcfg.epochs} epochs, "
               f"batch {tcfg.batch} per rank: gloo (loopback), then mlfabric ring and NetReduce")
    rows = torch_launch.torch_all([ranks.ip[n] for n in names], names, tcfg,
                     BANDWIDTH_BOUND_ALGOS, namespaces=[ranks.ns[n] for n in names],
                     fabricd=fab.fabricd.address, link_mbps=fab.link_mbps,
                     transport=ranks.transport, out_dir=png.parent / "torch-run")
    title = (f"PyTorch DDP over the fabric: the digits CNN ({len(names)} ranks, seed "
             f"{tcfg.seed}), the last epoch of each run, mean time per step, the all-reduce's "
             f"link-rate bound at {fab.link_mbps:g} Mbit/s")
    text = torch_launch.table(rows, fab.link_mbps, ranks.transport.get("mtu", 1024))
    click.echo(f"\n{title}\n")
    click.echo(text)
    save_output(png.parent / "tables", "demo-train-torch", title, text)
    torch_launch.plot(rows, png, f"PyTorch DDP, digits CNN on {len(names)} ranks, links "
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
    end = max(r["epoch"] for r in rows)
    last = {r["tag"]: r for r in rows if r["rank"] == 0 and r["epoch"] == end}
    agree = torch_launch.consistent(rows)
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
    agree = consistent(rows)
    out = []
    for params in sorted({r["params"] for r in rows}):
        mine = [r for r in rows if r["params"] == params and r["rank"] == 0]
        end = max(r["epoch"] for r in mine)
        last = {r["algo"]: r for r in mine if r["epoch"] == end}
        for algo, r in last.items():
            trained = [x["allreduce_s"] for x in mine if x["algo"] == algo and x["steps"]]
            gap = abs(r["test_accuracy"] - last["ring"]["test_accuracy"]) * 100
            out.append([f"Training (digits MLP, {params:,} parameters)",
                        f"{algo}: test accuracy {r['test_accuracy'] * 100:.2f}% after epoch "
                        f"{end} ({gap:.2f} pp from ring)", str(r["ranks"]),
                        f"{sum(trained) / len(trained) * 1e3:.1f}", "-",
                        "yes" if agree and gap <= ACCURACY_PP else "NO"])
    return out
