"""`python -m collectives`: run collectives by hand on a set of namespaces or hosts."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import click

from fabricmodel import policies
from fabricmodel.topology import TopologyError, load
from figures.text import parse_size

from .launch import LaunchError, launch
from .native import default_backend
from .rendezvous import DEFAULT_PORT
from .results import read_jsonl, summary, write_jsonl
from .runner import ALGORITHMS, DTYPES, elements_of
from .train import ALGOS as TRAIN_ALGOS
from .train import TrainConfig
from .train_launch import consistent, plot, train_all
from .train_launch import table as train_table
from .transport import BACKENDS, RELIABILITY


def _split(text: str | None) -> list[str]:
    return [t for t in (text or "").split(",") if t]


class PolicyName(click.ParamType):
    """A policy of `fabricmodel.policies`, looked up when the command runs (so a policy
    registered after this module was imported is one too)."""
    name = "policy"

    def get_metavar(self, param, ctx=None) -> str:
        return "[" + "|".join(policies.names()) + "]"

    def convert(self, value, param, ctx) -> str:
        try:
            return policies.get(value).name
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


@click.group()
def main() -> None:
    """Emulated RoCEv2 collectives (see collectives/README.md)."""


@main.command()
@click.option("--ips", help="Comma-separated rank addresses (rank 0 first).")
@click.option("--topology", type=click.Path(exists=True, dir_okay=False),
              help="Topology file (controller/topologies): host addresses by rank, and the "
                   "paths Ethereal balances over.")
@click.option("--ranks", type=click.IntRange(2), help="With --topology: the first N hosts.")
@click.option("--netns", "namespaces", help="Comma-separated namespaces, one per rank.")
@click.option("--collective", type=click.Choice(sorted({c for c, _ in ALGORITHMS})),
              default="allreduce", show_default=True)
@click.option("--algo", default="ring", show_default=True,
              help=f"One of {sorted({a for _, a in ALGORITHMS})} (per collective).")
@click.option("--size", default="1MiB", show_default=True,
              help="Bytes per rank (the shard for allgather).")
@click.option("--dtype", type=click.Choice(sorted(DTYPES)), default="int32", show_default=True)
@click.option("--policy", type=PolicyName(), default="ecmp", show_default=True)
@click.option("--qps", type=click.IntRange(1, 128), default=1, show_default=True,
              help="QPs per connection (NCCL_IB_QPS_PER_CONNECTION, even split).")
@click.option("--reliability", type=click.Choice(list(RELIABILITY)), default="ooo",
              show_default=True, help="ooo: a receiver that tolerates reordering (what spraying "
                                      "assumes); gbn, sr: NAK at the first gap.")
@click.option("--transport", "backend", type=click.Choice(list(BACKENDS)),
              default=default_backend(), show_default=True,
              help="The hosts' RoCEv2 data path: native (C, collectives/native; where a C "
                   "compiler exists) or python (the reference).")
@click.option("--fabricd", help="fabricd's address: Ethereal learns the installed fabric there.")
@click.option("--mtu", type=click.Choice(["256", "512", "1024", "2048", "4096"]),
              default="1024", show_default=True)
@click.option("--window", type=click.IntRange(1, 4096), default=64, show_default=True)
@click.option("--rate-gbps", type=click.FloatRange(0), default=0.0,
              help="Pacing rate per QP (0: unpaced).")
@click.option("--repeat", type=click.IntRange(1), default=1, show_default=True)
@click.option("--aggregator", help="switchml, netreduce: the job's aggregator IP; netreduce "
              "across leaves: every rank's, comma-separated, as fabricctl job create lists them.")
@click.option("--job-id", type=click.IntRange(1, 0xFFFF), default=1, show_default=True,
              help="switchml, netreduce: the job id fabricctl gave.")
@click.option("--slots", type=click.IntRange(1, 0xFFFF), default=16, show_default=True,
              help="switchml: slots of the job.")
@click.option("--credits", type=click.IntRange(1, 128), default=8, show_default=True,
              help="netreduce: messages in flight (the job's credits).")
@click.option("--group", help="Multicast group for --algo multicast.")
@click.option("--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, show_default=True,
              help="TCP rendezvous port on rank 0.")
@click.option("--out", type=click.Path(dir_okay=False), help="Append result JSON lines here.")
def run(**given):
    """Run one collective on every rank and print the summary table."""
    opts = RunOptions.parse(**given)
    try:
        rows = opts.launch()
    except LaunchError as exc:
        raise click.ClickException(str(exc)) from None
    if opts.out:
        write_jsonl(rows, opts.out)
    click.echo(summary(rows))
    if not all(r["ok"] for r in rows):
        sys.exit(1)


@dataclass(frozen=True)
class RunOptions:
    """`run`'s options, checked: the ranks, what each runs, and how they are launched."""
    ips: list[str]
    namespaces: list[str] | None
    runs: list[dict]                 # one per repetition (collectives.runner's run dicts)
    policy: str
    qps: int
    port: int
    topology: str | None
    fabricd: str | None
    transport: dict                  # collectives.transport.TransportConfig's fields
    out: str | None

    @classmethod
    def parse(cls, *, ips, topology, ranks, namespaces, collective, algo, size, dtype, policy,
              qps, reliability, backend, fabricd, mtu, window, rate_gbps, repeat, aggregator,
              job_id, slots, credits, group, port, out) -> RunOptions:
        """The options as click gives them; click.BadParameter naming the option at fault."""
        ip_list, ns_list = _split(ips), _split(namespaces)
        if topology and not ip_list:
            ip_list = _topology_ips(topology, ranks)
        if len(ip_list) < 2:
            raise click.BadParameter("need at least two rank addresses", param_hint="--ips")
        if ns_list and len(ns_list) != len(ip_list):
            raise click.BadParameter(f"{len(ns_list)} namespaces for {len(ip_list)} addresses",
                                     param_hint="--netns")
        if (collective, algo) not in ALGORITHMS:
            raise click.BadParameter(f"no algorithm {algo!r} for {collective}; choose from "
                                     f"{sorted(a for c, a in ALGORITHMS if c == collective)}",
                                     param_hint="--algo")
        run = {"collective": collective, "algo": algo, "dtype": dtype,
               "elements": elements_of(parse_size(size), dtype),
               "options": _algo_options(algo, len(ip_list), aggregator, job_id, slots, credits,
                                        group)}
        transport = {"reliability": reliability, "mtu": int(mtu), "window": window,
                     "rate_gbps": rate_gbps, "backend": backend}
        return cls(ip_list, ns_list or None, [dict(run) for _ in range(repeat)], policy, qps,
                   port, topology, fabricd, transport, out)

    def launch(self) -> list[dict]:
        return launch(self.ips, self.runs, namespaces=self.namespaces, policy=self.policy,
                      qps=self.qps, port=self.port, topology=self.topology,
                      fabricd=self.fabricd, transport=self.transport)


def _algo_options(algo: str, ranks: int, aggregator, job_id, slots, credits, group) -> dict:
    """The keyword arguments of an in-network algorithm (collectives.runner.ALGORITHMS)."""
    if algo in ("switchml", "netreduce"):
        if not aggregator:
            raise click.BadParameter(f"{algo} needs --aggregator", param_hint="--aggregator")
        aggregators = _split(aggregator)
        if algo == "netreduce" and len(aggregators) not in (1, ranks):
            raise click.BadParameter(f"{len(aggregators)} aggregator addresses for "
                                     f"{ranks} ranks", param_hint="--aggregator")
        options = {"aggregator": aggregators if len(aggregators) > 1 else aggregator,
                   "job_id": job_id}
        return options | ({"slots": slots} if algo == "switchml" else {"credits": credits})
    if algo == "multicast" and group:
        return {"group": group}
    return {}


def _topology_ips(path: str, ranks: int | None) -> list[str]:
    return [h.ip for h in _topology_hosts(path, ranks)]


def _topology_hosts(path: str, ranks: int | None) -> list:
    """The first `ranks` hosts of the topology file (all without), in rank order."""
    try:
        topo = load(path)
    except (TopologyError, OSError) as exc:
        raise click.BadParameter(str(exc), param_hint="--topology") from None
    hosts = sorted(topo.hosts.values(), key=lambda h: h.rank)
    if ranks and ranks > len(hosts):
        raise click.BadParameter(f"the topology has {len(hosts)} hosts, not {ranks}",
                                 param_hint="--ranks")
    return hosts[:ranks or len(hosts)]


@main.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
def table(path):
    """Print the summary table of a result JSON-lines file."""
    click.echo(summary(read_jsonl(path)))


@main.command()
@click.option("--topology", type=click.Path(exists=True, dir_okay=False), required=True,
              help="Topology file (controller/topologies): the ranks' hosts (names, addresses) "
                   "that fabricd's aggregation jobs are made of.")
@click.option("--ranks", type=click.IntRange(2), help="The first N hosts [default: all].")
@click.option("--netns", "namespaces", help="Comma-separated namespaces, one per rank.")
@click.option("--fabricd", help="fabricd's address: it sets up the NetReduce and SwitchML jobs.")
@click.option("--algos", default=",".join(TRAIN_ALGOS), show_default=True,
              help="Comma-separated all-reduce algorithms, one training run each.")
@click.option("--epochs", type=click.IntRange(1), default=TrainConfig.epochs, show_default=True)
@click.option("--batch", type=click.IntRange(1), default=TrainConfig.batch, show_default=True,
              help="Samples per rank per step (the global batch is ranks times this).")
@click.option("--hidden", type=click.IntRange(1), default=TrainConfig.hidden, show_default=True,
              help="Hidden units of the MLP (64 -> hidden -> 10).")
@click.option("--lr", type=click.FloatRange(0, min_open=True), default=TrainConfig.lr,
              show_default=True)
@click.option("--seed", type=int, default=TrainConfig.seed, show_default=True,
              help="Initial parameters, the train/test split and the order of the samples.")
@click.option("--link-mbps", type=click.FloatRange(0, min_open=True),
              help="The fabric's link rate: sizes SwitchML's pool and timer as SwitchML does; "
                   "the table's bound column.")
@click.option("--min-rto", type=click.FloatRange(0.001),
              help="The RC transport's minimum retransmission timeout in s.")
@click.option("--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, show_default=True,
              help="TCP rendezvous port on rank 0.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default="out/train.png",
              show_default=True, help="The PNG of loss, test accuracy and time per step.")
@click.option("--out", type=click.Path(dir_okay=False), help="Append the epoch rows here.")
def train(**given):
    """Train the digits MLP data parallel, once per all-reduce algorithm (same seed and
    epochs), and compare loss, test accuracy and time per step."""
    opts = TrainOptions.parse(**given)
    try:
        rows = opts.launch()
    except (LaunchError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    if opts.out:
        write_jsonl(rows, opts.out)
    click.echo(train_table(rows, opts.link_mbps))
    cfg = opts.cfg
    plot(rows, Path(opts.plot_path), f"digits MLP, {len(opts.hosts)} ranks, {cfg.epochs} "
                                     f"epochs, batch {cfg.batch} per rank, seed {cfg.seed}")
    click.echo(f"plot: {opts.plot_path}")
    if not consistent(rows):
        raise click.ClickException("the ranks of a run ended an epoch with different "
                                   "parameters")


@dataclass(frozen=True)
class TrainOptions:
    """`train`'s options, checked: the ranks' hosts, the algorithms, the model's training."""
    hosts: list                      # fabricmodel.topology.Host, in rank order
    namespaces: list[str] | None
    algos: list[str]
    cfg: TrainConfig
    fabricd: str | None
    link_mbps: float | None
    transport: dict | None
    port: int
    plot_path: str
    out: str | None

    @classmethod
    def parse(cls, *, topology, ranks, namespaces, fabricd, algos, epochs, batch, hidden, lr,
              seed, link_mbps, min_rto, port, plot_path, out) -> TrainOptions:
        """The options as click gives them; click.BadParameter naming the option at fault."""
        hosts = _topology_hosts(topology, ranks)
        ns_list = _split(namespaces)
        if ns_list and len(ns_list) != len(hosts):
            raise click.BadParameter(f"{len(ns_list)} namespaces for {len(hosts)} ranks",
                                     param_hint="--netns")
        algo_list = _split(algos)
        bad = [a for a in algo_list if a not in TRAIN_ALGOS]
        if bad or not algo_list:
            raise click.BadParameter(f"unknown all-reduce {bad}; choose from "
                                     f"{list(TRAIN_ALGOS)}", param_hint="--algos")
        if not fabricd and set(algo_list) - {"ring"}:
            raise click.BadParameter("netreduce and switchml aggregate in the switches: fabricd "
                                     "sets up their jobs", param_hint="--fabricd")
        cfg = TrainConfig(epochs=epochs, batch=batch, hidden=hidden, lr=lr, seed=seed)
        return cls(hosts, ns_list or None, algo_list, cfg, fabricd, link_mbps,
                   {"min_rto": min_rto} if min_rto else None, port, plot_path, out)

    def launch(self) -> list[dict]:
        return train_all([h.ip for h in self.hosts], [h.name for h in self.hosts], self.cfg,
                         self.algos, namespaces=self.namespaces, fabricd=self.fabricd,
                         link_mbps=self.link_mbps, transport=self.transport, port=self.port)


@main.command()
@click.option("--topology", type=click.Path(exists=True, dir_okay=False), required=True,
              help="Topology file (controller/topologies): the ranks' hosts.")
@click.option("--ranks", type=click.IntRange(2), help="The first N hosts [default: all].")
@click.option("--netns", "namespaces", help="Comma-separated namespaces, one per rank.")
@click.option("--fabricd", help="fabricd's address: it sets up the NetReduce and SwitchML jobs "
                                "and the multicast group.")
@click.option("--parallel", type=click.Choice(["ddp", "fsdp"]), default="ddp", show_default=True,
              help="DistributedDataParallel or FullyShardedDataParallel.")
@click.option("--model", type=click.Choice(["cnn", "tiny-cnn", "mlp"]), default="cnn",
              show_default=True, help="cnn: 217,546 parameters (bandwidth-bound); tiny-cnn: "
                                      "1,370; mlp: 2,410 (latency-bound).")
@click.option("--algos", default="ring,netreduce,switchml", show_default=True,
              help="DDP: comma-separated mlfabric all-reduce algorithms, one run each.")
@click.option("--allgathers", default="ring,multicast", show_default=True,
              help="FSDP: comma-separated Allgather algorithms, one run each.")
@click.option("--reference/--no-reference", default=True, show_default=True,
              help="First the same script on PyTorch's gloo over loopback (the reference).")
@click.option("--epochs", type=click.IntRange(1), default=3, show_default=True)
@click.option("--batch", type=click.IntRange(1), default=16, show_default=True,
              help="Samples per rank per step (the global batch is ranks times this).")
@click.option("--steps", type=click.IntRange(0), default=0, show_default=True,
              help="Steps per epoch at most (0: every global batch of the training set).")
@click.option("--lr", type=click.FloatRange(0, min_open=True), default=0.05, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--link-mbps", type=click.FloatRange(0, min_open=True),
              help="The fabric's link rate: the bound column, SwitchML's pool, multicast pace.")
@click.option("--min-rto", type=click.FloatRange(0.001),
              help="The RC transport's minimum retransmission timeout in s.")
@click.option("--port", type=click.IntRange(1, 65534), default=DEFAULT_PORT, show_default=True,
              help="TCP rendezvous port on rank 0 (torch's store: the next one).")
@click.option("--trace-dir", type=click.Path(file_okay=False),
              help="Keep the parameters and each rank's execution trace "
                   "(<run>_et.<rank>.json) here.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default="out/torch.png",
              show_default=True)
@click.option("--out", type=click.Path(dir_okay=False), help="Append the epoch rows here.")
def torchrun(**given):
    """Train a PyTorch model (DDP or FSDP) on the backend mlfabric, once per algorithm,
    beside the same script on gloo; compare loss, accuracy, time per step."""
    opts = TorchrunOptions.parse(**given)
    from . import torch_launch  # importable: parse imported PyTorch
    try:
        rows = opts.launch()
    except (LaunchError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    if opts.out:
        write_jsonl(rows, opts.out)
    click.echo(torch_launch.table(rows, opts.link_mbps))
    cfg = opts.cfg
    torch_launch.plot(rows, Path(opts.plot_path), f"{cfg.model} {cfg.parallel} on "
                                                  f"{len(opts.hosts)} ranks, {cfg.epochs} "
                                                  f"epochs, batch {cfg.batch} per rank")
    click.echo(f"plot: {opts.plot_path}")
    if not torch_launch.consistent(rows):
        raise click.ClickException("the ranks of a run ended an epoch with different "
                                   "parameters")


@dataclass(frozen=True)
class TorchrunOptions:
    """`torchrun`'s options, checked: the ranks' hosts, the runs, the model's training."""
    hosts: list                      # fabricmodel.topology.Host, in rank order
    namespaces: list[str] | None
    cfg: object                      # collectives.torch_train.TorchConfig
    algos: list[str]                 # DDP's all-reduces, one run each
    allgathers: list[str]            # FSDP's Allgathers, one run each
    reference: bool                  # first gloo over loopback
    fabricd: str | None
    link_mbps: float | None
    transport: dict | None
    port: int
    trace_dir: str | None
    plot_path: str
    out: str | None

    @classmethod
    def parse(cls, *, topology, ranks, namespaces, fabricd, parallel, model, algos, allgathers,
              reference, epochs, batch, steps, lr, seed, link_mbps, min_rto, port, trace_dir,
              plot_path, out) -> TorchrunOptions:
        """The options as click gives them; click.BadParameter naming the option at fault,
        a ClickException where PyTorch is missing."""
        try:
            from .torch_tensors import ALLGATHER, ALLREDUCE
            from .torch_train import TorchConfig
        except ImportError as exc:
            raise click.ClickException(f"torchrun needs PyTorch (pip install torch==2.13.0): "
                                       f"{exc}") from None
        hosts = _topology_hosts(topology, ranks)
        ns_list = _split(namespaces)
        if ns_list and len(ns_list) != len(hosts):
            raise click.BadParameter(f"{len(ns_list)} namespaces for {len(hosts)} ranks",
                                     param_hint="--netns")
        algo_list, gather_list = _split(algos), _split(allgathers)
        for given, known, hint in ((algo_list, ALLREDUCE, "--algos"),
                                   (gather_list, ALLGATHER, "--allgathers")):
            bad = [a for a in given if a not in known]
            if bad or not given:
                raise click.BadParameter(f"unknown {bad}; choose from {list(known)}",
                                         param_hint=hint)
        needs = set(algo_list) - {"ring", "halving-doubling"} if parallel == "ddp" else \
            set(gather_list) - {"ring"}
        if needs and not fabricd:
            raise click.BadParameter(f"{sorted(needs)} need fabricd (it sets up their switches)",
                                     param_hint="--fabricd")
        cfg = TorchConfig(model=model, parallel=parallel, epochs=epochs, batch=batch,
                          steps=steps, lr=lr, seed=seed)
        return cls(hosts, ns_list or None, cfg, algo_list, gather_list, reference, fabricd,
                   link_mbps, {"min_rto": min_rto} if min_rto else None, port, trace_dir,
                   plot_path, out)

    def launch(self) -> list[dict]:
        from . import torch_launch
        return torch_launch.torch_all(
            [h.ip for h in self.hosts], [h.name for h in self.hosts], self.cfg, self.algos,
            reference=self.reference, allgathers=self.allgathers, namespaces=self.namespaces,
            fabricd=self.fabricd, link_mbps=self.link_mbps, port=self.port,
            out_dir=self.trace_dir, transport=self.transport)
