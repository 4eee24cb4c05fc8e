"""The demo's second part runs on its own, larger fabric (default
controller/topologies/leafspine-4x4-h2.yaml: 4 leaves, 4 spines, 8 hosts), so that jobs span
racks and their traffic crosses spines. This module builds and tears down that fabric and
reads the bytes on every leaf-spine link from the switches' counters.

The hosts' NICs send at the link rate too (`host_nic.pace_nics`): with only the switches paced, a
host hands a whole window to its leaf at once, the window waits in the leaf's port, and every
ACK that crosses that port waits behind it. With 64 KiB per rank a window is a whole ring
step, so such a wait doubled a step at random (steps of 70 or 140 ms, CCTs 1.6x apart) and
hid what the vClos experiment measures."""
from __future__ import annotations

import json
import statistics
from contextlib import contextmanager
from pathlib import Path

import grpc
from fabric_net import build_net, configure_hosts, host_netns, ping_all
from fabricd_proc import Fabricd
from fidelity_watch import RETRIES, FabricMonitor
from host_nic import pace_nics
from ideas import Ranks

from collectives.train import TrainConfig
from controller.proto import fabric_pb2 as api
from controller.proto import fabric_pb2_grpc
from fabricmodel.topology import load
from results.record import save_output

ROOT = Path(__file__).resolve().parent.parent
TOPOLOGY = ROOT / "controller" / "topologies" / "leafspine-4x4-h2.yaml"
# Multicast Allgather's regime: an oversubscribed fabric where ring's traffic crosses the core
OVERSUBSCRIBED = ROOT / "controller" / "topologies" / "leafspine-2x1-h4.yaml"


class Fabric:
    """A running Mininet fabric with fabricd, and the hosts in rank order."""

    def __init__(self, net, topo, fabricd: Fabricd, ranks: Ranks, link_mbps: float,
                 retries: int = RETRIES):
        self.net, self.topo, self.fabricd, self.ranks = net, topo, fabricd, ranks
        self.link_mbps = link_mbps
        self.retries = retries          # re-runs of an unfaithful measurement
        self._stub = fabric_pb2_grpc.FabricStub(grpc.insecure_channel(fabricd.address))

    def ports(self, switch: str) -> dict[int, tuple[int, int]]:
        """port -> (rx bytes, tx bytes) from the switch's counters."""
        reply = self._stub.GetCounters(api.SwitchRequest(switch=switch), timeout=30)
        return {p.port: (p.rx_bytes, p.tx_bytes) for p in reply.ports}

    def link_bytes(self, hosts: bool = False) -> dict[str, int]:
        """Bytes sent so far on every leaf-spine link in each direction ("leaf1>spine2" from
        leaf1's transmit counter of that port, "spine2>leaf1" from spine2's): links are full
        duplex, so only flows in the same direction compete. hosts=True adds the host links
        ("h1>leaf1" from the leaf's receive counter, "leaf1>h1" from its transmit counter)."""
        c = {s: self.ports(s) for s in self.topo.switches}
        out = {}
        for lk in self.topo.links:
            if lk.a in self.topo.switches:
                out[f"{lk.a}>{lk.b}"] = c[lk.a].get(lk.a_port, (0, 0))[1]
                out[f"{lk.b}>{lk.a}"] = c[lk.b].get(lk.b_port, (0, 0))[1]
            elif hosts:
                out[f"{lk.a}>{lk.b}"] = c[lk.b].get(lk.b_port, (0, 0))[0]
                out[f"{lk.b}>{lk.a}"] = c[lk.b].get(lk.b_port, (0, 0))[1]
        return out

    def links_carrying(self, fn, hosts: bool = False) -> tuple[object, dict[str, int]]:
        """Runs fn(); returns its result and the bytes each link carried meanwhile."""
        before = self.link_bytes(hosts)
        result = fn()
        after = self.link_bytes(hosts)
        return result, {k: after[k] - before[k] for k in after}


@contextmanager
def running_fabric(topology: Path, log_dir: Path, link_mbps: float, queue_depth: int,
                   transport: dict, ns_prefix: str = "mlf2-", target: str = "p4switch",
                   compiler: str | None = None, retries: int = RETRIES):
    """compiler: fabricd's --compiler for the target (p4_switch.COMPILERS); retries: re-runs
    of an unfaithful measurement."""
    topo = load(topology)
    net = build_net(topo, target=target, log_dir=str(log_dir), link_mbps=link_mbps or None,
                    queue_depth=queue_depth)
    try:
        net.start()
        configure_hosts(net, topo)
        if link_mbps:
            pace_nics(net, topo, link_mbps)
        with Fabricd(topology, log_dir, compiler=compiler) as fabricd:
            if not ping_all(net, topo):
                raise RuntimeError(f"hosts cannot reach each other; see {log_dir}")
            names = [h.name for h in sorted(topo.hosts.values(), key=lambda h: h.rank)]
            with host_netns(net, names, prefix=ns_prefix) as namespaces:
                monitor = FabricMonitor.of_net(net, fabricd)
                yield Fabric(net, topo, fabricd, Ranks(topo, namespaces, transport, monitor),
                             link_mbps, retries)
    finally:
        net.stop()


IDEAS = ("mcast", "fsdp", "netreduce", "vclos", "train")


def show(out_dir: Path, name: str, title: str, text: str) -> None:
    """Print one of part two's tables under its title, and record it for `make report`."""
    import click

    click.echo(f"\n{title}\n")
    click.echo(text)
    save_output(out_dir / "tables", name, title, text)


def run(topology: Path, out_dir: Path, link_mbps: float, queue_depth: int, target: str,
        compiler: str | None, transport: dict, elements: int,
        seeds: tuple[int, ...] = (0, 1, 2), repeats: int = 3,
        ideas: tuple[str, ...] = IDEAS, train: TrainConfig | None = None,
        oversubscribed: Path | None = OVERSUBSCRIBED, retries: int = RETRIES) -> list[list[str]]:
    """The ideas on the 8-host fabric: Multicast Allgather ("mcast"), its FSDP case ("fsdp"),
    NetReduce next to ring and SwitchML ("netreduce"), vClos ("vclos"), a training run over
    ring, NetReduce and SwitchML ("train", `train` its configuration), or those of `ideas`.
    Prints their tables, writes out/mcast-allgather.png, out/vclos.png and out/train.png,
    returns the ideas-table rows. An unfaithful Allgather or FSDP measurement runs again, at
    most `retries` times."""
    import click
    import idea_fsdp
    import idea_mcast
    import idea_train
    import idea_vclos
    from ideas import fabric_link_bytes, link_table, netreduce, summary

    unknown = set(ideas) - set(IDEAS)
    if unknown or not ideas:
        raise ValueError(f"unknown ideas {sorted(unknown)}; choose from {list(IDEAS)}")
    topo = load(topology)
    click.echo(f"\ndemo: part two on {topo.name}: {len(topo.switches)} {target} switches, "
               f"{len(topo.hosts)} hosts, links at {link_mbps:g} Mbit/s")
    traffic = fsdp = nr_runs = vc = trained = None
    rows = []
    with running_fabric(topology, out_dir / "logs-part2", link_mbps, queue_depth, transport,
                        target=target, compiler=compiler, retries=retries) as fab:
        n = len(fab.ranks.hosts)
        if "mcast" in ideas:
            traffic = idea_mcast.fabric_traffic(fab, elements)
            rows += [summary("Multicast Allgather", t.run, r) for t, r in traffic.rows]
        if "fsdp" in ideas:
            fsdp = idea_fsdp.experiment(fab, elements)
        if "netreduce" in ideas:
            nr_rows, nr_runs = netreduce(
                fab.fabricd, fab.ranks, elements,
                link_bytes=lambda: fabric_link_bytes(fab.fabricd, fab.topo),
                link_mbps=link_mbps, directed_bytes=lambda: fab.link_bytes(hosts=True))
            rows += nr_rows
        if "vclos" in ideas:
            vc = idea_vclos.experiment(fab, elements, seeds, repeats)
        if "train" in ideas:
            trained = idea_train.experiment(fab, train or TrainConfig(), out_dir / "train.png")
    over = over_fsdp = None
    if oversubscribed and {"mcast", "fsdp"} & set(ideas):
        otopo = load(oversubscribed)
        click.echo(f"\ndemo: part two on {otopo.name} (oversubscribed; ranks spread over the "
                   f"racks): {len(otopo.switches)} {target} switches, {len(otopo.hosts)} hosts")
        with running_fabric(oversubscribed, out_dir / "logs-part2-over", link_mbps,
                            queue_depth, transport, ns_prefix="mlf3-", target=target,
                            compiler=compiler, retries=retries) as fab2:
            if "mcast" in ideas:
                over = idea_mcast.fabric_traffic(fab2, elements, loss=0.0, spread_ranks=True)
                rows += [summary(f"Multicast Allgather ({otopo.name})", t.run, r)
                         for t, r in over.rows]
            if "fsdp" in ideas:
                over_fsdp = idea_fsdp.experiment(fab2, elements, spread_ranks=True)
    title = f"{topo.name}, links {link_mbps:g} Mbit/s"
    if traffic:
        show(out_dir, "demo-mcast", f"Multicast Allgather: bytes on every link of the fabric, "
             f"{n} ranks ({elements * 4} B per rank), {topo.name}",
             idea_mcast.traffic_table(traffic.runs, link_mbps))
    if over:
        show(out_dir, "demo-mcast-over", f"Multicast Allgather on {otopo.name} "
             f"(oversubscribed, ranks spread over the racks)",
             idea_mcast.traffic_table(over.runs, link_mbps))
    for runs_, where in ((traffic, topo.name), (over, otopo.name if over else "")):
        if runs_:
            click.echo(idea_mcast.regime(runs_.runs, link_mbps, where))
    if fsdp:
        show(out_dir, "demo-fsdp", f"FSDP: a Reduce-Scatter of {elements * 4} B per rank and an "
             f"Allgather of {elements * 4 // n} B shards posted at once, {topo.name}",
             idea_fsdp.table(fsdp, link_mbps))
    if over_fsdp:
        show(out_dir, "demo-fsdp-over", f"FSDP on {otopo.name} (oversubscribed, ranks spread "
             f"over the racks)", idea_fsdp.table(over_fsdp, link_mbps))
    if traffic:
        idea_mcast.plot(traffic.runs, out_dir / "mcast-allgather.png", title, fsdp or ())
    if nr_runs:
        show(out_dir, "demo-netreduce", f"NetReduce's runs: bytes on the fabric links (switch "
             f"counters), against ring all-reduce's on the same {n} ranks and NetReduce's bound "
             f"N/(2(N-1))", link_table(topo, nr_runs))
    if vc:
        show(out_dir, "demo-vclos", f"vClos: two 4-rank ring all-reduces ({elements * 4} B per "
             f"rank), each alone and both at once", idea_vclos.job_table(vc))
        show(out_dir, "demo-vclos-links", "KB each job put on every leaf-spine link (from the "
             "alone runs; the combined run's counter in brackets; * = a direction carrying both "
             "jobs)", idea_vclos.link_table(vc))
        idea_vclos.plot(vc, out_dir / "vclos.png", title)
    for cases, where in ((fsdp, "FSDP"), (over_fsdp, f"FSDP, {otopo.name}" if over_fsdp else "")):
        rows += [[f"Multicast Allgather ({where})", c.label, str(n), f"{c.rs_cct_s * 1e3:.1f}",
                  "-", "yes" if c.exact else "NO", c.faithful] for c in cases or ()]
    rows += idea_vclos.summary_rows(vc) if vc else []
    write_ratios(out_dir / "part2-rows.jsonl", ratio_rows(link_mbps, {
        topo.name: (traffic, fsdp), otopo.name if over or over_fsdp else "-": (over, over_fsdp)}, vc))
    return rows + (idea_train.summary_rows(trained) if trained else [])


def ratio_rows(link_mbps: float, mcast: dict, vc) -> list[dict]:
    """Every row of part two as a ratio to its bound with its verdict (what
    bench/bench_fidelity.py compares): Allgathers and the FSDP Reduce-Scatters against their
    busiest link at the link rate, the vClos slowdowns against 1.0 (jobs that share nothing)."""
    out = []
    for where, (traffic, cases) in mcast.items():
        for t in traffic.runs if traffic else ():
            if t.busiest_s(link_mbps):
                out.append({"row": f"{where}: {t.run}", "ratio": t.cct_s / t.busiest_s(link_mbps),
                            "cct_s": t.cct_s, "bound_s": t.busiest_s(link_mbps),
                            "faithful": t.faithful})
        for c in cases or ():
            if c.busiest_s(link_mbps):
                out.append({"row": f"{where}: fsdp {c.label}",
                            "ratio": c.rs_cct_s / c.busiest_s(link_mbps), "cct_s": c.rs_cct_s,
                            "bound_s": c.busiest_s(link_mbps), "faithful": c.faithful})
    for sc in vc.scenarios if vc else ():
        out.append({"row": f"vclos {sc.scheme} seed {sc.seed}: slowdown",
                    "ratio": statistics.median(sc.slowdown(j) for j in sc.hosts),
                    "bound_s": None, "faithful": sc.faithful, "vclos": sc.scheme == "vclos"})
    return out


def write_ratios(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
