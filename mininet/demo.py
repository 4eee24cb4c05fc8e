"""`make demo`: a leaf-spine of p4switch (or, with `--target bmv2`, BMv2) switches in Mininet,
configured only by fabricd over P4Runtime, runs collectives under hash ECMP, spraying, REPS and
Ethereal (each but ECMP a tc eBPF program on every rank's interface); prints the collective
completion times side by side, then fails a leaf-spine link in the middle of a collective
(silently, then announced through fabricctl) and prints what each policy makes of it; saves a
plot.

    sudo .venv/bin/python mininet/demo.py [--target bmv2] [--topology FILE] [--size 4MiB]
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

# siblings in mininet/: the script's own directory is first on sys.path
import part2
from capture import PortCaptures, switch_interfaces
from demo_options import IDEAS_LINK_MBPS, LINK_MBPS, SIZE, DemoOptions
from fabric_net import build_net, configure_hosts, host_netns, ping_all
from fabricd_proc import Fabricd
from failures import EXACT as FAILURE_EXACT
from failures import FAILURE_HEAD, failure_runs, failure_table
from fidelity_watch import RETRIES, FabricMonitor, WaitSampler, column, rerun_unfaithful, window
from host_nic import pace_nics
from ideas import EXACT as IDEAS_EXACT
from ideas import HEAD as IDEAS_HEAD
from ideas import Ranks
from ideas import padded as ideas_padded
from ideas import table as ideas_table
from p4_switch import COMPILERS, TARGETS, missing_tools
from report import HEADERS, MTU, plot, ratio_rows, table, table_rows

from collectives.launch import LaunchError, policy_program
from collectives.native import default_backend
from collectives.train import TrainConfig
from collectives.transport import BACKENDS
from fabricmodel import policies as lb_policies
from p4switch.device.control import send_command
from results.record import save_table

ROOT = Path(__file__).resolve().parent.parent
ECN_PACKETS = 32                       # fabricd's default queue-length threshold, in packets
# Where a launch stays unfaithful after its re-runs (fidelity_watch.RETRIES), part one's rate is
# lowered by SLOWER (at most LOWERINGS times) and the launch runs once more
SLOWER = 0.5
LOWERINGS = 2
# `--link-mbps auto`: the share of the machine's cores the emulation's per-packet work may
# take at the calibrated rate (the rest is slack for the bursts a ratio to the bound must not see)
HEADROOM = 0.75


def uplink_bytes(fabricd: Fabricd, topo) -> list[int]:
    """Bytes each leaf has sent up to the spines so far, one number per uplink."""
    out = []
    for leaf in (s for s in topo.switches if s.startswith("leaf")):
        tx = {p["port"]: int(p["tx_bytes"]) for p in fabricd.ctl_json("counters", leaf)["ports"]}
        out += [tx.get(lk.a_port, 0) for lk in topo.uplinks(leaf)]
    return out


class Rates:
    """Part one's link rate, lowered where its rows stay unfaithful: every switch port, every
    host NIC and the transport's minimum RTO together, so that results stay comparable as
    ratios to the link-rate bound (each row keeps the rate it ran at)."""

    def __init__(self, net, topo, ranks: Ranks, link_mbps: float, retries: int = RETRIES,
                 adapt: bool = True):
        self.net, self.topo, self.ranks, self.mbps = net, topo, ranks, link_mbps
        self.retries, self.adapt = retries, adapt
        self.lowered = 0

    def set(self, mbps: float) -> None:
        """Every switch port, host NIC and the minimum RTO (inversely) to `mbps`."""
        old, self.mbps = self.mbps, mbps
        for sw in self.net.switches:
            if getattr(sw, "control_path", None):
                send_command(str(sw.control_path), f"set_queue_rate all {mbps:g}mbps")
        pace_nics(self.net, self.topo, mbps)
        rto = self.ranks.transport.get("min_rto")
        if rto:
            self.ranks.transport = self.ranks.transport | {"min_rto": rto * old / mbps}

    def lower(self) -> bool:
        """Halve the rate (at most LOWERINGS times; a fixed --link-mbps is only verified)."""
        if not self.adapt or not self.retries or not self.mbps or self.lowered >= LOWERINGS:
            return False
        old = self.mbps
        self.set(old * SLOWER)
        self.lowered += 1
        click.echo(f"demo: rows stayed unfaithful at {old:g} Mbit/s after {self.retries} re-runs: "
                   f"links, NICs and the transport's timers lowered to {self.mbps:g} Mbit/s")
        return True

    def calibrate(self, monitor, run: dict) -> None:
        """`--link-mbps auto`: one uncongested ring all-reduce at the default rate measures the
        CPU each packet costs (the ranks' and the switches', over the collective's window);
        where carrying the rate would take more than HEADROOM of the machine's cores, the rate
        is lowered to what fits (in steps of 8 Mbit/s)."""
        sampler = WaitSampler({n: pid for n, (pid, _) in monitor.switches.items()}).start()
        try:
            got = self.ranks.launch([h.name for h in self.ranks.hosts], run, seed=99)
        finally:
            sampler.stop()
        t0, t1 = window(got)
        cct = t1 - t0
        spent = sampler.cpu_between(t0, t1) + sum(r["cpu_s"] for r in got)
        packets = max(1, sum(r["packets_sent"] for r in got))
        cores = len(os.sched_getaffinity(0))
        fit = self.mbps * HEADROOM * cores * cct / max(spent, 1e-9)
        rate = self.mbps if fit >= self.mbps else max(8.0, 8.0 * int(fit // 8))
        click.echo(f"demo: calibration at {self.mbps:g} Mbit/s: {spent / packets * 1e6:.0f} us of "
                   f"CPU per packet sent, {spent / cct:.2f} of {cores} cores busy (headroom "
                   f"{HEADROOM:.0%}): links at {rate:g} Mbit/s")
        if rate != self.mbps:
            self.set(rate)


def faithful_launch(launch, what: str, rates: Rates | None) -> list[dict]:
    """launch() -> its rows; an unfaithful launch runs again (rates.retries times), then once
    more at a lower rate where `rates` may lower it."""
    rows = rerun_unfaithful(launch, lambda rows: rows, what, rates.retries if rates else 0)
    if column(rows).startswith("NO") and rates is not None and rates.lower():
        rows = launch()
    return rows


def measure(fabricd, topo, ranks: Ranks, policies, runs, seeds,
            rates: Rates | None = None) -> list[dict]:
    """Each collective under each policy, policies interleaved per seed so that the machine's
    load drifts alike for all. Every rank's row gets the launch's uplink imbalance: bytes on
    the busiest leaf uplink over the mean (1.0 = perfectly balanced), and the link rate it
    ran at. An unfaithful launch is re-run (faithful_launch)."""
    names = [h.name for h in ranks.hosts]
    rows = []
    for seed in seeds:
        for run in runs:
            for policy in policies:
                before = [0]

                def launch(run=run, policy=policy, seed=seed, before=before):
                    before[0] = uplink_bytes(fabricd, topo)
                    return ranks.launch(names, run, policy=policy, seed=seed,
                                        topology=str(fabricd.topology),
                                        fabricd=fabricd.address)

                got = faithful_launch(launch, f"seed {seed} {run['collective']}/{run['algo']} "
                                              f"{policy}", rates)
                sent = [b - a for a, b in zip(before[0], uplink_bytes(fabricd, topo),
                                              strict=True)]
                imbalance = max(sent) / (sum(sent) / len(sent)) if sum(sent) else 0.0
                rows += [r | {"seed": seed, "uplink_imbalance": imbalance,
                              "link_mbps": rates.mbps if rates else None} for r in got]
                cct = max(r["cct_s"] for r in got)
                click.echo(f"demo: seed {seed} {run['collective']}/{run['algo']:<18} "
                           f"{policy:<8} CCT {cct * 1e3:8.1f} ms  busiest uplink "
                           f"{imbalance:.2f}x mean  CNPs {sum(r['cnps_received'] for r in got)}"
                           f"{_reps_line(policy)}")
    return rows


def _reps_line(policy: str) -> str:
    """What REPS did in the launch just ended, from its eBPF map (ebpf/reps.py)."""
    if lb_policies.get(policy).mechanism != "reps":
        return ""
    t = policy_program(policy).totals()
    sent = t.n_explore + t.n_recycled + t.n_random
    return (f"  REPS: {t.n_recycled / max(sent, 1):.0%} recycled, {t.n_random} random, "
            f"{t.acks_ece} ECN-Echo evictions of {t.acks_good + t.acks_ece} echoes")


def gave_up(failed: list[list]) -> list[list]:
    """The failure table's rows (failures.FAILURE_HEAD) that ended inexact although their
    policy should have recovered: after an announced failure every policy should (fabricd
    routes around the link), after a silent one only those that move flows on a timeout."""
    return [f for f in failed if f[FAILURE_EXACT] == "NO" and
            (f[1] == "announced" or lb_policies.get(f[2]).survives_silent_failure)]


def _speed(mbps: float) -> str:
    return f"{mbps:g} Mbit/s" if mbps else "unshaped"


def _ecn_delay_us(mbps: float) -> int:
    """The switches mark ECN at the queueing delay of ECN_PACKETS full data packets (the
    bytes ahead, as a switch counting buffer bytes does), not at a packet count: REPS
    needs an ACK per data packet, and in a packet count each 64-byte ACK weighs as much as
    a 1 KiB data packet, so the same data backlog marked twice as early under REPS.
    0 (unshaped links): fabricd's queue-length threshold."""
    return round(ECN_PACKETS * (MTU + HEADERS) * 8 / mbps) if mbps else 0


@click.command()
@click.option("--target", type=click.Choice(TARGETS), default="p4switch", show_default=True,
              help="The switches: this project's p4switch, or BMv2's simple_switch_grpc with "
                   "fabric.p4 compiled by p4c-bm2-ss, which fabricd runs (both must be on "
                   "PATH).")
@click.option("--topology", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=ROOT / "controller/topologies/leafspine-2x2.yaml", show_default=True)
@click.option("--collectives", "colls", default="allreduce/ring,allreduce/halving-doubling,alltoall/direct",
              show_default=True, help="Comma-separated collective/algo pairs.")
@click.option("--policies", help="Comma-separated load-balancing policies [default: every "
                                 "registered one].")
@click.option("--size", help=f"Bytes per rank [default: {SIZE['p4switch']}, on BMv2 "
                            f"{SIZE['bmv2']}].")
@click.option("--repeat", type=click.IntRange(1), default=3, show_default=True,
              help="Launches per policy, each with another seed (other ECMP ports).")
@click.option("--link-mbps", default="auto", show_default=True,
              help="Every switch port's egress rate in Mbit/s, 0 for as fast as the switch "
                   f"goes; auto: the topology's link_mbps, else {LINK_MBPS:g} (the fastest "
                   "rate measured to keep the demo link-bound; on BMv2 at most 2), lowered "
                   "where a calibration run's CPU per packet says the cores cannot carry it, "
                   "and again where rows stay unfaithful. A given rate is only verified.")
@click.option("--queue-depth", type=click.IntRange(1), default=256, show_default=True,
              help="Egress queue depth in packets; with the default window it holds every "
                   "packet in flight, as RoCE runs lossless (PFC).")
@click.option("--window", type=click.IntRange(1, 4096), default=32, show_default=True,
              help="Packets in flight per connection (Ethereal's sub-flows share it). It "
                   "must cover the round trip, Python hosts and queues included: with 16, a "
                   "single-path flow was window-bound, which no policy fixes.")
@click.option("--ack-every", type=click.IntRange(1, 4096), default=4, show_default=True,
              help="Data packets per requested ACK (REPS asks for every one): a quarter of "
                   "the window per QP keeps it open while ACKs wait in queues.")
@click.option("--reliability", type=click.Choice(["ooo", "sr", "gbn"]), default="ooo",
              show_default=True, help="ooo: a receiver that tolerates reordering, which "
                                      "spraying and REPS assume (all policies use it); sr, gbn: "
                                      "NAK at the first gap, which turns reordering into "
                                      "retransmissions.")
@click.option("--transport", "backend", type=click.Choice(list(BACKENDS)),
              default=default_backend(), show_default=True,
              help="The hosts' RoCEv2 data path: native (C) where a C compiler exists, or "
                   "python (the reference).")
@click.option("--min-rto", type=click.FloatRange(0.001),
              help="Minimum retransmission timeout in s [default: twice a full queue's "
                   "drain time]. A NIC's few ms would fire spuriously on Python switches.")
@click.option("--failures/--no-failures", default=True, show_default=True,
              help="Fail a leaf-spine link in the middle of a collective, silently and "
                   "announced, under every policy.")
@click.option("--failure-collective", default="alltoall/direct", show_default=True,
              help="The collective/algo the link fails under.")
@click.option("--ideas/--no-ideas", default=True, show_default=True,
              help="Part two: Multicast Allgather, NetReduce and vClos next to their "
                   "baselines, and a training run over them, on their own fabric "
                   "(--ideas-topology).")
@click.option("--train/--no-train", default=True, show_default=True,
              help="Part two's training run: the digits MLP over ring, NetReduce and SwitchML "
                   "(out/train.png).")
@click.option("--train-epochs", type=click.IntRange(1), default=TrainConfig.epochs,
              show_default=True, help="Epochs of each training run.")
@click.option("--part-one/--no-part-one", default=True, show_default=True,
              help="Part one: the load-balancing policies (--no-part-one runs only part two).")
@click.option("--ideas-only", default=",".join(part2.IDEAS), show_default=True,
              help="Comma-separated part-two experiments to run.")
@click.option("--ideas-topology", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=ROOT / "controller/topologies/leafspine-4x4-h2.yaml", show_default=True)
@click.option("--ideas-size", default="64KiB", show_default=True,
              help="Bytes per rank in part two.")
@click.option("--ideas-link-mbps", type=click.FloatRange(0.1),
              help="Part two's link rate (hosts' NICs are paced to it too) [default: "
                   f"{IDEAS_LINK_MBPS:g}, chosen as LINK_MBPS is; on BMv2 at most 2].")
@click.option("--vclos-seeds", type=click.IntRange(1), default=3, show_default=True,
              help="ECMP seeds (other source ports) for the shared-fabric vClos baseline.")
@click.option("--vclos-repeats", type=click.IntRange(1), default=3, show_default=True,
              help="Runs of each vClos measurement (alone, together); the median counts.")
@click.option("--fidelity-retries", type=click.IntRange(0), default=RETRIES, show_default=True,
              help="Re-runs of a launch the fidelity monitor marks not faithful (part one's, "
                   "part two's Allgathers and FSDP cases); where one of part one stays so, its "
                   "rate is halved (unless --link-mbps fixed it).")
@click.option("--cli", is_flag=True, help="End in the Mininet CLI with fabricd running, for "
                                          "fabricctl by hand (FABRICD is in its environment).")
@click.option("--pcap", is_flag=True, help="Capture every switch port of part one into "
              "OUT/pcap/<interface>.pcap (tcpdump; tshark decodes the RoCEv2).")
@click.option("--switch-logs", is_flag=True, help="Per-packet logs of every switch of part one "
              "in OUT/logs/ (p4switch then runs its Python backend: slower).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=ROOT / "out", show_default=True)
def main(**given):
    """Run collectives under the load-balancing policies on an emulated P4 fabric."""
    opts = DemoOptions.parse(**given)
    one, two, out_dir = opts.part_one, opts.part_two, opts.output.out_dir
    missing = missing_tools(opts.target)
    if missing:
        raise click.ClickException(f"--target {opts.target} needs {' and '.join(missing)} on "
                                   f"PATH (build BMv2 with PI and p4c), or run the demo on "
                                   f"p4switch")
    if os.geteuid() != 0:
        raise click.ClickException("Mininet needs root: run `sudo make demo`")
    try:                                      # the policies run in eBPF: say what is missing
        for policy in one.policies:
            policy_program(policy)
    except LaunchError as err:
        raise click.ClickException(str(err)) from None
    out_dir.mkdir(parents=True, exist_ok=True)
    rows, failed = part_one_runs(opts) if one.enabled else ([], [])
    extra = []
    if two.enabled:
        try:
            extra = part2.run(two.topology, out_dir, two.link_mbps, opts.transport.queue_depth,
                              opts.target, COMPILERS[opts.target],
                              opts.transport.config(two.link_mbps), two.elements,
                              seeds=tuple(range(two.vclos_seeds)), repeats=two.vclos_repeats,
                              ideas=two.ideas, train=two.train, retries=opts.fidelity_retries)
        except LaunchError as err:
            raise click.ClickException(f"a collective failed: {err}") from None
    link_mbps, size = one.link_mbps, one.size
    ran_at = sorted({r["link_mbps"] for r in rows if r.get("link_mbps")}, reverse=True)
    title = (f"{one.topo.name}, {len(one.topo.hosts)} ranks, {size} per rank, "
             f"{opts.transport.reliability}, "
             f"links {' / '.join(map(_speed, ran_at)) if ran_at else _speed(link_mbps)}")
    if rows:
        (out_dir / "demo.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (out_dir / "part1-rows.jsonl").write_text("".join(
            json.dumps(r) + "\n" for r in ratio_rows(rows, link_mbps)))
        click.echo(f"\n{title}\n")
        click.echo(table(rows, link_mbps))
        save_table(out_dir, "demo-lb", title, *table_rows(rows, link_mbps))
    if failed:
        click.echo(f"\nA leaf-spine link fails in the middle of {one.failure_collective} ({size} "
                   f"per rank): silently (the switches drop, fabricd is not told), then "
                   f"announced (fabricctl link ... down)\n")
        click.echo(failure_table(failed))
        save_table(out_dir, "demo-failures", f"A leaf-spine link fails during "
                   f"{one.failure_collective} ({size} per rank)", FAILURE_HEAD, failed)
    if extra:
        click.echo(f"\nThe other ideas on {two.topology.stem} ({two.size} per rank)\n")
        click.echo(ideas_table(extra))
        save_table(out_dir, "demo-ideas", f"The other ideas on {two.topology.stem} "
                   f"({two.size} per rank)", IDEAS_HEAD, [ideas_padded(x) for x in extra])
    if rows:
        plot(rows, out_dir / "demo-cct.png", title, link_mbps)
        click.echo(f"\ndemo: results in {out_dir / 'demo.jsonl'}, plot in "
                   f"{out_dir / 'demo-cct.png'}")
    if not all(r["ok"] for r in rows) or any(x[IDEAS_EXACT] != "yes" for x in extra) or \
            gave_up(failed):
        raise SystemExit(1)


def part_one_runs(opts: DemoOptions) -> tuple[list[dict], list]:
    """Part one on its own fabric: every run under every policy, then the link failures; the
    rate is lowered where rows stay unfaithful unless --link-mbps fixed it."""
    one, output = opts.part_one, opts.output
    topo, link_mbps = one.topo, one.link_mbps
    logs = output.out_dir / "logs"
    click.echo(f"demo: {topo.name}: {len(topo.switches)} {opts.target} switches, "
               f"{len(topo.hosts)} hosts, links at {_speed(link_mbps)}")
    net = build_net(topo, target=opts.target, log_dir=str(logs), link_mbps=link_mbps or None,
                    queue_depth=opts.transport.queue_depth, packet_log=output.switch_logs)
    pcaps = None
    try:
        net.start()
        if output.pcap:
            pcaps = PortCaptures(switch_interfaces(net), output.out_dir / "pcap").start()
        configure_hosts(net, topo)
        if link_mbps:
            pace_nics(net, topo, link_mbps)
        with Fabricd(one.topology, logs, compiler=COMPILERS[opts.target],
                     ecn_delay_us=_ecn_delay_us(link_mbps)) as fabricd:
            state = fabricd.ctl("state")
            click.echo(state.stdout.rstrip())
            if not ping_all(net, topo):
                raise click.ClickException(f"hosts cannot reach each other; see {logs}")
            click.echo("demo: every host reaches every other through the fabric")
            ranked = sorted(topo.hosts.values(), key=lambda h: h.rank)
            with host_netns(net, [h.name for h in ranked]) as namespaces:
                ranks = Ranks(topo, namespaces, opts.transport.config(link_mbps),
                              FabricMonitor.of_net(net, fabricd))
                rates = Rates(net, topo, ranks, link_mbps, opts.fidelity_retries,
                              one.adapt_rate)
                if one.adapt_rate and link_mbps:
                    rates.calibrate(ranks.monitor, one.runs[0] | {"collective": "allreduce",
                                                                  "algo": "ring"})
                rows = measure(fabricd, topo, ranks, one.policies, one.runs,
                               range(one.repeat), rates)
                failed = []
                if one.failures:
                    failed = failure_runs(net, fabricd, topo, ranks, one.policies,
                                          one.failure_run, link_mbps=link_mbps)
            if output.cli:
                interact(net, fabricd)
    except LaunchError as err:
        raise click.ClickException(f"a collective failed: {err}") from None
    finally:
        if pcaps is not None:
            pcaps.stop()
            click.echo(f"demo: one pcap per switch port in {output.out_dir / 'pcap'}")
        net.stop()
    return rows, failed


def interact(net, fabricd) -> None:
    from mininet.cli import CLI

    os.environ["FABRICD"] = fabricd.address
    fabricctl = Path(sys.executable).parent / "fabricctl"
    click.echo(f"demo: fabricd serves {fabricd.address} ($FABRICD); try `sh {fabricctl} state` "
               f"or `sh {fabricctl} slice create jobA 2`; exit the CLI to stop the fabric")
    CLI(net)


if __name__ == "__main__":
    main()
