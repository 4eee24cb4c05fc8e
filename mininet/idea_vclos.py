"""vClos on the emulated fabric, measured as the paper frames it: two 4-rank jobs that span
racks run at once, (a) on the shared fabric with hash ECMP and (b) each in its own vClos slice,
and each job also alone. Reported: each job's CCT together and alone (the slowdown), and the
bytes each job put on every leaf-spine link, from the switches' counters.

Placement: under (a) the jobs are placed as a scheduler that does not know the network places
them, in arrival order over the racks (job A on the first host of every leaf, job B on the
second), so both jobs' flows leave every leaf and hash onto the same four uplinks; under (b)
fabricd's vClos allocator places them (two leaves and two spines each). A link's bytes are
attributed to a job from the run of that job alone with the same seed (ECMP ports are a
function of the seed, so a job's flows take the same links alone and together); the combined
run's counters are reported next to the sum.

What makes a job slower together is only what it shares with the other: links under ECMP,
the CPUs always. The ranks' CPU is small here (about 15 ms per rank for a 64 KiB all-reduce
that takes 450 ms at 2 Mbit/s); their process start-up is not (about 2 s of Python imports
per launch), so each CCT starts at the job's own barrier and both jobs' runs are posted at
one instant after both have started up."""
from __future__ import annotations

import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import click
from cpu_places import describe, placed, shares, this_thread_on
from fidelity_watch import column

from figures import png
from figures.text import format_table

PORTS = {"jobA": 18516, "jobB": 18517}
CARRIES = 0.05          # a job uses a link if it put >= 5 % of its busiest link's bytes on it


@dataclass
class Scenario:
    scheme: str                          # "ecmp shared" or "vclos"
    seed: int
    hosts: dict[str, list[str]]          # job -> hosts in rank order
    alone_s: dict[str, float] = field(default_factory=dict)
    together_s: dict[str, float] = field(default_factory=dict)
    retx: dict[str, int] = field(default_factory=dict)          # together, per job (sum)
    link_bytes: dict[str, dict[str, int]] = field(default_factory=dict)   # job -> link -> B
    combined_bytes: dict[str, int] = field(default_factory=dict)
    overlap: float = 1.0                 # least share of a together run next to the other
    exact: bool = True
    rows: list[dict] = field(default_factory=list)      # every rank row, with its verdict

    @property
    def faithful(self) -> str:
        return column(self.rows)

    def uses(self, job: str) -> set[str]:
        got = self.link_bytes[job]
        top = max(got.values(), default=0)
        return {lk for lk, b in got.items() if top and b >= CARRIES * top}

    def shared_links(self) -> set[str]:
        a, b = (self.uses(j) for j in self.hosts)
        return a & b

    def slowdown(self, job: str) -> float:
        return self.together_s[job] / self.alone_s[job]


def _runs(elements: int, repeats: int, start: float | None = None,
          period: float = 0.0) -> list[dict]:
    """`repeats` ring all-reduces in one launch (one process start-up for all); with `start`,
    run i is posted at the wall-clock instant start + i * period."""
    run = {"collective": "allreduce", "algo": "ring", "dtype": "int32", "elements": elements}
    return [run | {"seed": i} | ({"start_at": start + i * period} if start else {})
            for i in range(repeats)]


def _launch(fab, job: str, hosts: list[str], runs: list[dict], seed: int,
            cpus: set[int] | None = None) -> list[dict]:
    """The runs of `job`, its ranks on `cpus` (all CPUs if None). Its QPs' source ports
    derive from (seed, rank, peer, qp); the job's index goes into the seed because two jobs'
    NICs number their QPs independently (with equal ports, the switches' CRC of two rings
    whose addresses differ alike would keep them apart at every seed)."""
    with this_thread_on(cpus):
        return fab.ranks.launch(hosts, runs, seed=seed * len(PORTS) + list(PORTS).index(job),
                                port=PORTS[job])


def _by_run(rows: list[dict]) -> list[tuple[float, float]]:
    """(start, CCT) of every run of a launch: the first rank's start (the ranks leave the
    barrier before it together) and the slowest rank's CCT."""
    runs = sorted({r["run"] for r in rows})
    return [(min(r["started_at"] for r in rows if r["run"] == i),
             max(r["cct_s"] for r in rows if r["run"] == i)) for i in runs]


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    """The share of the shorter run during which the other one ran too (1.0: it ran
    entirely next to the other)."""
    shared = min(a[0] + a[1], b[0] + b[1]) - max(a[0], b[0])
    return max(0.0, shared) / min(a[1], b[1])


def measure(fab, scheme: str, hosts: dict[str, list[str]], elements: int, seed: int,
            repeats: int = 3, cpus: dict[str, set[int]] | None = None) -> Scenario:
    """Each job alone, then both at once, `repeats` runs each; a CCT is the median of its
    runs, each measured from its own start (the ranks' barrier), so the other job's process
    start-up is in neither. Together, both jobs' run i is posted at one wall-clock instant,
    far enough apart that a run ends before the next is posted; that both ran at once is
    checked from their start times (`overlap`). Link bytes are per run."""
    sc = Scenario(scheme, seed, hosts)
    alone: dict[str, list[float]] = {}
    setup = 0.0
    for job, names in hosts.items():
        t0 = time.monotonic()
        rows, links = fab.links_carrying(
            lambda job=job, names=names: _launch(fab, job, names, _runs(elements, repeats),
                                                 seed, (cpus or {}).get(job)))
        alone[job] = [c for _, c in _by_run(rows)]
        setup = max(setup, time.monotonic() - t0 - sum(alone[job]))
        sc.link_bytes[job] = {k: b // repeats for k, b in links.items()}
        sc.exact &= all(r["ok"] for r in rows)
        sc.rows += rows
    sc.alone_s = {j: statistics.median(v) for j, v in alone.items()}
    # two jobs' ranks start up at once on the same CPUs: twice one job's start-up, plus slack
    start = time.time() + 2 * setup + 1.0
    period = 2.5 * max(sc.alone_s.values()) + 0.2

    def both():
        with ThreadPoolExecutor(len(hosts)) as pool:
            futs = {job: pool.submit(_launch, fab, job, names,
                                     _runs(elements, repeats, start, period), seed,
                                     (cpus or {}).get(job))
                    for job, names in hosts.items()}
            return {job: f.result() for job, f in futs.items()}

    results, links = fab.links_carrying(both)
    sc.combined_bytes = {k: b // repeats for k, b in links.items()}
    together = {job: _by_run(rows) for job, rows in results.items()}
    for job, rows in results.items():
        sc.retx[job] = sum(r["packets_retransmitted"] for r in rows)
        sc.exact &= all(r["ok"] for r in rows)
        sc.rows += rows
    a, b = together.values()
    sc.overlap = min(_overlap(x, y) for x, y in zip(a, b, strict=True))
    sc.together_s = {j: statistics.median(c for _, c in v) for j, v in together.items()}
    click.echo(f"demo: vclos {scheme:<11} seed {seed}: " + ", ".join(
        f"{j} alone {'/'.join(f'{x * 1e3:.0f}' for x in alone[j])} ms, together "
        f"{'/'.join(f'{c * 1e3:.0f}' for _, c in together[j])} ms" for j in hosts)
        + f"; runs at once overlap >= {sc.overlap:.0%}; links carrying both jobs: "
          f"{len(sc.shared_links())}")
    return sc


@dataclass
class Result:
    scenarios: list[Scenario]
    slices: list[dict]
    refusal: str                        # fabricctl's exit code and message for the third job
    refused_code: int
    isolated: bool                      # a host of one slice cannot reach the other's


def experiment(fab, elements: int, seeds=(0, 1, 2), repeats: int = 3) -> Result:
    names = [h.name for h in fab.ranks.hosts]
    topo = fab.topo
    by_leaf = [[h.name for h in topo.hosts_of(lf.name)] for lf in topo.leaves]
    shared = {"jobA": [hs[0] for hs in by_leaf][:4], "jobB": [hs[1] for hs in by_leaf][:4]}
    if len(names) < 8 or len(by_leaf) < 4 or any(len(hs) < 2 for hs in by_leaf):
        raise click.ClickException("the vClos experiment needs >= 4 leaves with >= 2 hosts")
    cpus = shares(list(shared))
    click.echo(f"demo: vclos: each job's ranks on their own CPUs ({describe(cpus)}); in the "
               f"slices their switches too, on the shared fabric the switches serve both")
    scenarios = [measure(fab, "ecmp shared", shared, elements, s, repeats, cpus) for s in seeds]
    ctl = fab.fabricd
    slices = [ctl.ctl_json("slice", "create", job, "4") for job in ("jobA", "jobB")]
    try:
        for s in slices:
            click.echo(f"demo: fabricctl slice create {s['name']} 4 -> hosts "
                       f"{','.join(s['hosts'])}, leaves {','.join(s['leaves'])}, spines "
                       f"{','.join(s.get('spines', [])) or '-'}")
        refused = ctl.ctl("slice", "create", "jobC", "2")
        refusal = (refused.stderr or refused.stdout).strip()
        click.echo(f"demo: fabricctl slice create jobC 2 -> exit {refused.returncode}: {refusal}")
        hosts = {s["name"]: list(s["hosts"]) for s in slices}
        a, b = hosts["jobA"][0], hosts["jobB"][0]
        ping = fab.net.get(a).cmd(f"ping -c 1 -W 1 {fab.topo.host(b).ip}")
        isolated = " 0% packet loss" not in ping
        click.echo(f"demo: {a} -> {b} across slices: "
                   f"{'no route (isolated)' if isolated else 'REACHABLE'}")
        switches = {sw: s["name"] for s in slices for sw in [*s["leaves"], *s.get("spines", [])]}
        pids = {sw: fab.net.get(sw).proc.pid for sw in switches}
        with placed(pids, {sw: cpus[job] for sw, job in switches.items()}):
            scenarios.append(measure(fab, "vclos", hosts, elements, seeds[0], repeats, cpus))
    finally:
        for job in ("jobA", "jobB"):
            ctl.ctl("slice", "delete", job)
    return Result(scenarios, slices, refusal, refused.returncode, isolated)


def job_table(res: Result) -> str:
    head = ["scheme", "seed", "job", "hosts", "CCT alone ms", "CCT together ms", "slowdown",
            "links shared", "retx", "exact", "faithful"]
    rows = []
    for sc in res.scenarios:
        shared = len(sc.shared_links())
        for job, hosts in sc.hosts.items():
            rows.append([sc.scheme, str(sc.seed), job, ",".join(hosts),
                         f"{sc.alone_s[job] * 1e3:.1f}", f"{sc.together_s[job] * 1e3:.1f}",
                         f"{sc.slowdown(job):.2f}x", str(shared), str(sc.retx[job]),
                         "yes" if sc.exact else "NO", sc.faithful])
    return format_table(head, rows)


def link_table(res: Result) -> str:
    """KB per job on every leaf-spine link, up (leaf to spine) and down: "A/B (both)" with
    the combined run's counter in brackets; * marks a direction carrying both jobs."""
    head = ["link"] + [f"{sc.scheme} s{sc.seed}: up A/B (both), down A/B (both)"
                       for sc in res.scenarios]
    rows = []
    for key in res.scenarios[0].combined_bytes:
        leaf, spine = key.split(">")
        if not leaf.startswith("leaf"):
            continue
        cells = [f"{leaf}-{spine}"]
        for sc in res.scenarios:
            parts = []
            for lk in (key, f"{spine}>{leaf}"):
                a, b = (sc.link_bytes[j].get(lk, 0) / 1e3 for j in sc.hosts)
                mark = "*" if lk in sc.shared_links() else ""
                parts.append(f"{a:.0f}/{b:.0f} ({sc.combined_bytes.get(lk, 0) / 1e3:.0f}){mark}")
            cells.append(", ".join(parts))
        rows.append(cells)
    return format_table(head, rows)


def summary_rows(res: Result) -> list[list[str]]:
    """Rows for the demo's ideas table (idea, run, ranks, CCT ms, MB injected/rank, exact)."""
    out = []
    for scheme in dict.fromkeys(sc.scheme for sc in res.scenarios):
        scs = [sc for sc in res.scenarios if sc.scheme == scheme]
        slow = [sc.slowdown(j) for sc in scs for j in sc.hosts]
        shared = sum(bool(sc.shared_links()) for sc in scs)
        together = statistics.median(sc.together_s[j] for sc in scs for j in sc.hosts)
        where = "shared fabric, hash ECMP" if scheme != "vclos" else "own vClos slices"
        out.append(["vClos", f"2 ring all-reduces at once, {where}: slowdown vs alone "
                             f"{statistics.median(slow):.2f}x (max {max(slow):.2f}x), a link "
                             f"carries both in {shared}/{len(scs)} seeds",
                    "4+4", f"{together * 1e3:.1f}", "-",
                    "yes" if all(sc.exact for sc in scs) else "NO",
                    column([r for sc in scs for r in sc.rows])])
    out.append(["vClos", f"third job refused: exit {res.refused_code}", "2", "-", "-",
                "yes" if res.refused_code == 5 else "NO"])
    out.append(["vClos", "isolation: ping across slices", "-", "-", "-",
                "yes" if res.isolated else "NO"])
    return out


def plot(res: Result, path: Path, title: str) -> None:
    fig, (left, right) = png.subplots(1, 2, figsize=(12, 4))
    labels, alone, together, unfaithful = [], [], [], []
    for sc in res.scenarios:
        for job in sc.hosts:
            labels.append(f"{sc.scheme}\ns{sc.seed} {job}")
            alone.append(sc.alone_s[job] * 1e3)
            together.append(sc.together_s[job] * 1e3)
            unfaithful.append(sc.faithful.startswith("NO"))
    xs = range(len(labels))
    left.bar([x - 0.2 for x in xs], alone, 0.4, label="alone")
    bars = left.bar([x + 0.2 for x in xs], together, 0.4, label="both jobs at once")
    for bar, bad in zip(bars, unfaithful, strict=True):     # a scenario not faithful: hatched
        if bad:
            bar.set_hatch("xx")
    if any(unfaithful):
        left.bar([0], [0], 0, hatch="xx", color="white", edgecolor="black",
                 label="not faithful (fidelity monitor)")
    left.set_xticks(list(xs), labels, fontsize=6)
    left.set_ylabel("CCT (ms)")
    left.legend(fontsize=8)
    worst = max((sc for sc in res.scenarios if sc.scheme != "vclos"),
                key=lambda sc: len(sc.shared_links()))
    best = next(sc for sc in res.scenarios if sc.scheme == "vclos")
    links = [k for k in best.combined_bytes if k.startswith("leaf")]
    for i, sc in enumerate((worst, best)):
        a, b = ([sc.link_bytes[j].get(lk, 0) / 1e3 for lk in links] for j in sc.hosts)
        xs = [x + (i - 0.5) * 0.4 for x in range(len(links))]
        right.bar(xs, a, 0.4, label=f"{sc.scheme} s{sc.seed}: job A", color=f"C{2 * i}")
        right.bar(xs, b, 0.4, bottom=a, label=f"{sc.scheme} s{sc.seed}: job B",
                  color=f"C{2 * i + 1}")
    right.set_xticks(range(len(links)), links, rotation=90, fontsize=6)
    right.set_ylabel("KB on the leaf-to-spine direction")
    right.legend(fontsize=7)
    png.save(fig, path, suptitle=title)
