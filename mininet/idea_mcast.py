"""Multicast Allgather on the emulated fabric, measured as the paper measures it: bytes on
every link of the fabric (switch counters: host-to-leaf from the leaves' receive counters,
every other direction from the sending switch's transmit counter) for ring Allgather and
multicast Allgather at 8 ranks, and their ratio."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click
from fidelity_watch import column, rerun_unfaithful

from figures import png
from figures.text import format_table

PORT = 18518


@dataclass
class Outcome:
    runs: list  # list[Traffic]
    rows: list  # (Traffic, the ranks' result rows)


@dataclass
class Traffic:
    run: str
    cct_s: float
    link_bytes: dict[str, int]          # directed link -> bytes during the run
    injected: int                       # bytes the ranks handed to the network
    exact: bool
    retx: int = 0
    faithful: str = "unmeasured"

    def busiest_s(self, link_mbps: float) -> float:
        """The busiest directed link's bytes at the link rate: no schedule of the run's
        traffic finishes sooner (its bound)."""
        return max(self.link_bytes.values(), default=0) * 8 / (link_mbps * 1e6)

    @property
    def fabric_bytes(self) -> int:
        return sum(self.link_bytes.values())

    def tier(self, kind: str) -> int:
        """'host' = host<->leaf links, 'spine' = leaf<->spine links."""
        return sum(b for k, b in self.link_bytes.items()
                   if ("spine" in k) == (kind == "spine"))


def measure(fab, names: list[str], run: dict, label: str) -> tuple[Traffic, list[dict]]:
    """One launch and the bytes every link carried meanwhile, re-run while not faithful."""
    rows, links = rerun_unfaithful(
        lambda: fab.links_carrying(lambda: fab.ranks.launch(names, run, port=PORT), hosts=True),
        lambda got: got[0], label, fab.retries)
    t = Traffic(label, max(r["cct_s"] for r in rows), links,
                sum(r["bytes_injected"] for r in rows), all(r["ok"] for r in rows),
                sum(r["packets_retransmitted"] for r in rows), column(rows))
    click.echo(f"demo: {label:<34} CCT {t.cct_s * 1e3:7.1f} ms, {t.fabric_bytes / 1e3:8.1f} KB "
               f"on the fabric's links, exact {'yes' if t.exact else 'NO'}")
    return t, rows


def spread(topo) -> list[str]:
    """Every host, in the order a scheduler spreading a job over the racks places its ranks:
    one per leaf in turn, so that each ring step goes from one rack to the next."""
    racks = [[h.name for h in topo.hosts_of(lf.name)] for lf in topo.leaves]
    return [r[i] for i in range(max(map(len, racks))) for r in racks if i < len(r)]


def fabric_traffic(fab, elements: int, loss: float = 0.05, spread_ranks: bool = False) -> Outcome:
    """Ring and multicast Allgather of `elements` int32 per rank over every host, then (loss
    > 0) the multicast one again with the switches dropping `loss` of the replicas toward the
    members (a drop rate fabricd installs in fabric.p4's mcast_loss table): the neighbour
    repair must still make it exact. spread_ranks: ranks in `spread` order, else by host."""
    names = spread(fab.topo) if spread_ranks else [h.name for h in fab.ranks.hosts]
    base = {"collective": "allgather", "dtype": "int32", "elements": elements}
    results = [measure(fab, names, base | {"algo": "ring"}, "allgather ring")]
    for name, rate in (("demo-ag", 0.0), ("demo-ag-lossy", loss))[:2 if loss else 1]:
        group = fab.fabricd.ctl_json("group", "create", name, *names, "--loss", str(rate))
        click.echo(f"demo: fabricctl group create {name} {' '.join(names)} --loss {rate:g} "
                   f"-> {group['address']}")
        try:
            label = f"allgather multicast {group['address']}" + (
                f", {rate:.0%} loss in the switches" if rate else "")
            results.append(measure(fab, names, base | {"algo": "multicast", "options": {
                "group": group["address"], "link_mbps": fab.link_mbps}}, label))
        finally:
            fab.fabricd.ctl("group", "delete", name)
    return Outcome([t for t, _ in results], results)


def traffic_table(runs: list[Traffic], link_mbps: float) -> str:
    """Bytes per run and tier, and the bound: the busiest directed link's bytes at the link
    rate (a host's receive link where it is the bottleneck, the core where that is)."""
    base = runs[0]
    head = ["run", "CCT ms", "bound ms (busiest link)", "vs bound", "KB on all links",
            "vs ring", "host links KB", "leaf-spine KB", "KB injected", "retx", "exact",
            "faithful"]
    return format_table(head, [
        [t.run, f"{t.cct_s * 1e3:.1f}", f"{t.busiest_s(link_mbps) * 1e3:.1f}",
         f"{t.cct_s / t.busiest_s(link_mbps):.2f}x" if t.busiest_s(link_mbps) else "-",
         f"{t.fabric_bytes / 1e3:.1f}",
         f"{t.fabric_bytes / base.fabric_bytes:.2f}x", f"{t.tier('host') / 1e3:.1f}",
         f"{t.tier('spine') / 1e3:.1f}", f"{t.injected / 1e3:.1f}", str(t.retx),
         "yes" if t.exact else "NO", t.faithful] for t in runs])


def regime(runs: list[Traffic], link_mbps: float, where: str) -> str:
    """One line: which link bounds ring and multicast Allgather here, and so whether
    multicast can gain time (only where ring's busiest link is not multicast's too)."""
    ring, mc = runs[0], runs[1]
    rb, mb = ring.busiest_s(link_mbps), mc.busiest_s(link_mbps)
    ring_link = max(ring.link_bytes, key=ring.link_bytes.get)
    mc_link = max(mc.link_bytes, key=mc.link_bytes.get)
    if rb <= 1.1 * mb:
        return (f"demo: {where}: ring's busiest link ({ring_link}, {rb * 1e3:.0f} ms) and "
                f"multicast's ({mc_link}, {mb * 1e3:.0f} ms) bound both alike: multicast saves "
                f"traffic, no time can be gained")
    return (f"demo: {where}: ring is bound by {ring_link} ({rb * 1e3:.0f} ms at {link_mbps:g} "
            f"Mbit/s), multicast by {mc_link} ({mb * 1e3:.0f} ms): multicast may finish "
            f"{rb / mb:.1f}x sooner; measured {ring.cct_s * 1e3:.0f} vs {mc.cct_s * 1e3:.0f} ms")


def plot(runs: list[Traffic], path: Path, title: str, fsdp=()) -> None:
    """Bytes on every link, ring vs multicast (left); the FSDP Reduce-Scatter's CCT (right)."""
    links = list(runs[0].link_bytes)
    fig, (ax, right) = png.subplots(1, 2, figsize=(14, 4), width_ratios=(3, 1))
    width = 0.8 / len(runs)
    for i, t in enumerate(runs):
        xs = [x + (i - (len(runs) - 1) / 2) * width for x in range(len(links))]
        ax.bar(xs, [t.link_bytes.get(k, 0) / 1e3 for k in links], width,
               label=f"{t.run}: {t.fabric_bytes / 1e3:.0f} KB in total"
               + (" (not faithful)" if t.faithful.startswith("NO") else ""))
    ax.set_xticks(range(len(links)), links, rotation=90, fontsize=6)
    ax.set_ylabel("KB on the link")
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=9)
    if fsdp:
        bars = right.bar(range(len(fsdp)), [c.rs_cct_s * 1e3 for c in fsdp])
        for bar, c in zip(bars, fsdp, strict=True):      # not faithful: hatched
            if c.faithful.startswith("NO"):
                bar.set_hatch("xx")
        right.set_xticks(range(len(fsdp)), [c.label.replace(" at once", "").replace(
            "reduce-scatter", "RS") for c in fsdp], rotation=20, fontsize=7)
        right.set_ylabel("Reduce-Scatter CCT (ms)")
        right.set_title("FSDP: Reduce-Scatter next to an Allgather", fontsize=9)
    else:
        right.axis("off")
    png.save(fig, path)
