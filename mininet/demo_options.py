"""The demo's command line as one checked object: demo.py maps its click options onto
`DemoOptions.parse`, which turns them into what each part uses (part one's policies and runs,
part two's experiments, the transport both share, the fidelity re-runs, the outputs) or raises
click.BadParameter naming the option at fault."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click

# siblings in mininet/: the script's own directory is first on sys.path
import part2
from p4_switch import MAX_LINK_MBPS
from report import HEADERS, MTU

from collectives.runner import ALGORITHMS, elements_of
from collectives.train import TrainConfig
from fabricmodel import policies as lb_policies
from fabricmodel.topology import Topology, TopologyError, load
from figures.text import parse_size

# The links' rate when neither --link-mbps nor the topology's link_mbps gives one: the fastest
# measured at which the uncongested ring all-reduce stays within 1.1x of its link-rate bound
# ("vs ideal", one launch per rate and policy, 2 cores shared with other work;
# mininet/README.md, "The rate sweep"). With the native transport and MTU 4096 (report.MTU),
# ECMP / Ethereal ran 1.06-1.07x / 1.06x at 96 Mbit/s with SIZE per rank (1.06-1.07x /
# 1.08-1.10x at 2 MiB), 1.05x / 1.10x at 128 and 1.10-1.31x / 1.14-1.25x at 160 (2 MiB); at
# 240 the switches' CPU bounds it (1.29x / 1.33x at 4 MiB). With the Python transport and 1 KiB
# packets the rate was 24 Mbit/s.
LINK_MBPS = 96.0
# Bytes per rank: each step of a 4-rank ring then moves 256 packets of 4 KiB, so that filling
# the store-and-forward pipeline of its four links (three packet times) costs 1 % of the step
# at any rate; at 512 KiB it cost 9 %, and the ring ran 1.10x at 48 Mbit/s. On BMv2, whose
# links run at most 2 Mbit/s (p4_switch.MAX_LINK_MBPS), 512 KiB keeps each run seconds long.
SIZE = {"p4switch": "4MiB", "bmv2": "512KiB"}
# Part two's rate by the same rule, on its own fabric (leafspine-4x4-h2, 8 ranks, 64 KiB per
# rank): its ring all-reduce ran 1.11x / 1.16x (ECMP / Ethereal) at 20 Mbit/s and 1.36x /
# 2.12x at 40, part two's own ring baseline 1.10x at 20 with every row exact; it ran at 2
# with the Python transport and 1 KiB packets (mininet/README.md).
IDEAS_LINK_MBPS = 20.0
DTYPE = "int32"                        # the element type of every demo run


@dataclass(frozen=True)
class Transport:
    """How both parts carry packets: the switches' egress queues and the ranks' RoCEv2."""
    queue_depth: int                   # egress queue per switch port, in packets
    window: int
    ack_every: int
    reliability: str
    backend: str                       # collectives.transport.BACKENDS
    min_rto: float | None              # None: twice a full queue's drain time (drain_rto)

    def config(self, link_mbps: float) -> dict:
        """collectives.transport.TransportConfig's fields for links at `link_mbps`."""
        return {"reliability": self.reliability, "mtu": MTU, "window": self.window,
                "ack_every": self.ack_every, "backend": self.backend,
                "min_rto": self.min_rto or drain_rto(self.queue_depth, link_mbps)}


@dataclass(frozen=True)
class PartOne:
    """Part one: every collective under every policy on its own fabric, then a link fails."""
    enabled: bool
    topology: Path
    topo: Topology
    policies: list[str]                # fabricmodel.policies names
    runs: list[dict]                   # collectives.runner's run dicts, one per pair
    size: str                          # bytes per rank, as given
    repeat: int                        # launches per policy, one seed each
    link_mbps: float                   # the starting rate; 0: unshaped
    adapt_rate: bool                   # lower it where the cores or the rows say so
    failures: bool
    failure_collective: str            # collective/algo, as given
    failure_run: dict                  # the run the link fails under


@dataclass(frozen=True)
class PartTwo:
    """Part two: the in-network ideas and the training runs on a fabric of their own."""
    enabled: bool
    ideas: tuple[str, ...]             # part2.IDEAS names
    train: TrainConfig
    topology: Path
    size: str                          # bytes per rank, as given
    elements: int
    link_mbps: float
    vclos_seeds: int
    vclos_repeats: int


@dataclass(frozen=True)
class Output:
    """What the demo leaves behind besides its tables."""
    out_dir: Path
    pcap: bool                         # part one's switch ports into out_dir/pcap
    switch_logs: bool                  # part one's per-packet switch logs in out_dir/logs
    cli: bool                          # end in the Mininet CLI with fabricd running


@dataclass(frozen=True)
class DemoOptions:
    """demo.py's command line, checked, grouped as the parts use it."""
    target: str                        # p4_switch.TARGETS
    part_one: PartOne
    part_two: PartTwo
    transport: Transport
    fidelity_retries: int              # re-runs of a launch the fidelity monitor rejects
    output: Output

    @classmethod
    def parse(cls, *, target, topology, colls, policies, size, repeat, link_mbps, queue_depth,
              window, ack_every, reliability, backend, min_rto, failures, failure_collective,
              ideas, train, train_epochs, part_one, ideas_only, ideas_topology, ideas_size,
              ideas_link_mbps, vclos_seeds, vclos_repeats, fidelity_retries, cli, pcap,
              switch_logs, out_dir) -> DemoOptions:
        """The options as click gives them; click.BadParameter naming the option at fault."""
        policy_list = chosen_policies(policies)
        try:
            topo = load(topology)
        except TopologyError as err:
            raise click.BadParameter(str(err), param_hint="--topology") from None
        ideas_list = [i for i in _choices(ideas_only, part2.IDEAS, "part-two experiment")
                      if train or i != "train"]
        if ideas and not ideas_list:
            raise click.UsageError("--no-train leaves part two nothing to run")
        if not part_one and not ideas:
            raise click.UsageError("--no-part-one --no-ideas leaves nothing to run")
        failure_pairs = _collectives(failure_collective)
        if len(failure_pairs) != 1:
            raise click.BadParameter(f"one collective/algo, not {len(failure_pairs)}",
                                     param_hint="--failure-collective")
        size = size or SIZE[target]
        given_mbps = _link_rate(link_mbps)
        if given_mbps is None:
            auto = topo.params.get("link_mbps") or LINK_MBPS
            rate = min(auto, MAX_LINK_MBPS.get(target, auto))
        else:
            rate = given_mbps
        if ideas_link_mbps is None:
            ideas_link_mbps = min(IDEAS_LINK_MBPS, MAX_LINK_MBPS.get(target, IDEAS_LINK_MBPS))
        one = PartOne(part_one, topology, topo, policy_list,
                      [_run(pair, size) for pair in _collectives(colls)], size, repeat, rate,
                      given_mbps is None, failures, failure_collective,
                      _run(failure_pairs[0], size))
        two = PartTwo(ideas, tuple(ideas_list), TrainConfig(epochs=train_epochs),
                      ideas_topology, ideas_size, elements_of(parse_size(ideas_size), DTYPE),
                      ideas_link_mbps, vclos_seeds, vclos_repeats)
        return cls(target, one, two,
                   Transport(queue_depth, window, ack_every, reliability, backend, min_rto),
                   fidelity_retries, Output(out_dir, pcap, switch_logs, cli))


def drain_rto(depth: int, mbps: float) -> float:
    """Twice the time a full queue of MTU packets takes to drain, at least 0.1 s."""
    return max(0.1, 2 * depth * (MTU + HEADERS) * 8 / (mbps * 1e6)) if mbps else 0.1


def chosen_policies(text: str | None) -> list[str]:
    """--policies: the names given, each registered (fabricmodel.policies); every registered
    policy when none is given."""
    try:
        return lb_policies.parse_list(text)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--policies") from None


def _run(pair: tuple[str, str], size: str) -> dict:
    return {"collective": pair[0], "algo": pair[1], "dtype": DTYPE,
            "elements": elements_of(parse_size(size), DTYPE)}


def _choices(text: str, known: tuple[str, ...], what: str) -> list[str]:
    items = [t for t in text.split(",") if t]
    bad = [t for t in items if t not in known]
    if bad or not items:
        raise click.BadParameter(f"unknown {what} {bad}; choose from {list(known)}")
    return items


def _collectives(text: str) -> list[tuple[str, str]]:
    # the in-network ones need a group or an aggregation job: the ideas part sets those up
    known = sorted(k for k in ALGORITHMS if k[1] not in ("multicast", "switchml", "netreduce"))
    pairs = [tuple(t.split("/", 1)) for t in text.split(",") if t]
    bad = [p for p in pairs if p not in known]
    if bad or not pairs:
        raise click.BadParameter(f"unknown collective/algo {['/'.join(p) for p in bad]}; "
                                 f"choose from {['/'.join(k) for k in known]} (multicast "
                                 f"Allgather and NetReduce run in the ideas part)")
    return pairs


def _link_rate(text: str) -> float | None:
    """--link-mbps: None for auto, else a rate >= 0."""
    if text == "auto":
        return None
    try:
        value = float(text)
    except ValueError:
        raise click.BadParameter(f"{text!r} is neither auto nor a rate in Mbit/s",
                                 param_hint="--link-mbps") from None
    if not value >= 0:
        raise click.BadParameter(f"{text!r}: a rate is >= 0", param_hint="--link-mbps")
    return value
