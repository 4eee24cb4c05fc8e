"""The demo's result table and plot: collective completion time per load-balancing policy,
relative to hash ECMP measured in the same run."""
from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

from fidelity_watch import column

from fabricmodel import rocev2
from fabricmodel.policies import BASELINE
from figures import png
from figures.text import format_table

# RoCE v2 bytes around each packet's payload (fabricmodel.rocev2)
HEADERS = rocev2.FRAME_OVERHEAD + rocev2.BTH_BYTES
# The demo's RoCE path MTU (payload bytes per packet; both parts pass it to the transport):
# 4096, the common setting of RoCEv2 fabrics. The emulation's cost is per packet (the hosts'
# transport, the switches, every veth crossing), so at 1024 the two cores ran out at about
# 48 Mbit/s; 4096 sends a quarter of the packets (the links carry jumbo frames: fabric_net).
MTU = 4096
# per rank, the share of its buffer a bandwidth-optimal algorithm must send over its link
_SENT = {"allreduce": lambda n: 2 * (n - 1) / n, "alltoall": lambda n: (n - 1) / n,
         "allgather": lambda n: (n - 1) / n, "reducescatter": lambda n: (n - 1) / n}


def link_bound_s(row: dict, link_mbps: float | None) -> float | None:
    """The CCT the link rate allows: the bytes each rank must put on its link (payload of a
    bandwidth-optimal algorithm plus RoCE headers per MTU packet) over the link rate."""
    share = _SENT.get(row["collective"])
    if not link_mbps or share is None:
        return None
    size = {"int32": 4, "float32": 4, "int64": 8, "float64": 8, "float16": 2}.get(row.get("dtype"), 4)
    payload = share(row["ranks"]) * row["elements"] * size
    return payload * (1 + HEADERS / MTU) * 8 / (link_mbps * 1e6)


def cct_by_run(rows: list[dict]) -> dict[tuple[str, str], list[float]]:
    """(collective/algo, policy) -> one CCT per launch and run: the slowest rank's."""
    per_run: dict[tuple, float] = defaultdict(float)
    for r in rows:
        key = (f"{r['collective']}/{r['algo']}", r["policy"], r["seed"], r["run"])
        per_run[key] = max(per_run[key], r["cct_s"])
    out: dict[tuple[str, str], list[float]] = defaultdict(list)
    for (coll, policy, _, _), cct in per_run.items():     # launch order: by collective
        out[(coll, policy)].append(cct)
    return out


def totals(rows: list[dict], field: str) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = defaultdict(int)
    for r in rows:
        out[(f"{r['collective']}/{r['algo']}", r["policy"])] += r[field]
    return out


def table(rows: list[dict], link_mbps: float | None = None) -> str:
    return format_table(*table_rows(rows, link_mbps))


def table_rows(rows: list[dict], link_mbps: float | None = None) -> tuple[list, list]:
    """(headers, lines): one line per collective and policy; `bound ms` and `vs ideal`
    compare the median CCT with the link-rate bound (link_bound_s) when the links are
    paced."""
    ccts = cct_by_run(rows)
    bounds = {(f"{r['collective']}/{r['algo']}", r["policy"]):
              link_bound_s(r, r.get("link_mbps") or link_mbps) for r in rows}
    imbalance = defaultdict(list)
    for r in rows:
        if r["rank"] == 0:
            imbalance[(f"{r['collective']}/{r['algo']}", r["policy"])].append(
                r["uplink_imbalance"])
    retx, timeouts = totals(rows, "packets_retransmitted"), totals(rows, "timeouts")
    reorder, icrc = totals(rows, "reorderings"), totals(rows, "icrc_errors")
    ok = defaultdict(lambda: True)
    launched = defaultdict(list)
    for r in rows:
        ok[(f"{r['collective']}/{r['algo']}", r["policy"])] &= r["ok"]
        launched[(f"{r['collective']}/{r['algo']}", r["policy"])].append(r)
    head = ["collective", "policy", "runs", "CCT median ms", "min", "max", "bound ms", "vs ideal",
            f"vs {BASELINE}",
            "reorderings", "retx", "timeouts", "ICRC errors", "busiest uplink", "exact",
            "faithful"]
    lines = []
    for (coll, policy), values in ccts.items():
        med = statistics.median(values)
        base = ccts.get((coll, BASELINE))
        ratio = f"{med / statistics.median(base):.2f}x" if base else "-"
        bound = bounds.get((coll, policy))
        lines.append([coll, policy, str(len(values)), f"{med * 1e3:.1f}",
                      f"{min(values) * 1e3:.1f}", f"{max(values) * 1e3:.1f}",
                      f"{bound * 1e3:.1f}" if bound else "-", f"{med / bound:.2f}x" if bound else "-",
                      ratio,
                      str(reorder[(coll, policy)]), str(retx[(coll, policy)]),
                      str(timeouts[(coll, policy)]), str(icrc[(coll, policy)]),
                      f"{statistics.median(imbalance[(coll, policy)]):.2f}x mean",
                      "yes" if ok[(coll, policy)] else "NO",
                      column(launched[(coll, policy)])])
    return head, lines


def ratio_rows(rows: list[dict], link_mbps: float | None) -> list[dict]:
    """Each line of the table as its median CCT's ratio to the link-rate bound, with its
    verdict (bench/bench_fidelity.py compares these)."""
    head, lines = table_rows(rows, link_mbps)
    col = {h: i for i, h in enumerate(head)}
    return [{"row": f"{x[col['collective']]} {x[col['policy']]}",
             "ratio": float(x[col["vs ideal"]].rstrip("x")), "faithful": x[col["faithful"]]}
            for x in lines if x[col["vs ideal"]] != "-"]


def plot(rows: list[dict], path: Path, title: str, link_mbps: float | None = None) -> None:
    """Bars per policy, and for each collective its link-rate bound as a black line across
    its bars (the CCT a bandwidth-optimal algorithm needs at the links' rate)."""
    ccts = cct_by_run(rows)
    colls = sorted({c for c, _ in ccts})
    policies = list(dict.fromkeys(p for _, p in ccts))
    launched = defaultdict(list)
    for r in rows:
        launched[(f"{r['collective']}/{r['algo']}", r["policy"])].append(r)
    width = 0.8 / len(policies)
    fig, ax = png.subplots(figsize=(2.2 + 2.2 * len(colls), 3.6))
    marked = False
    for i, policy in enumerate(policies):
        meds, lo, hi = [], [], []
        for c in colls:
            v = [x * 1e3 for x in ccts.get((c, policy), [0.0])]
            m = statistics.median(v)
            meds.append(m)
            lo.append(m - min(v))
            hi.append(max(v) - m)
        xs = [j + (i - (len(policies) - 1) / 2) * width for j in range(len(colls))]
        bars = ax.bar(xs, meds, width, yerr=[lo, hi], capsize=3, label=policy)
        for bar, c in zip(bars, colls, strict=True):    # unfaithful rows hatched
            if column(launched.get((c, policy), [])).startswith("NO"):
                bar.set_hatch("xx")
                marked = True
    if marked:
        ax.bar([0], [0], 0, hatch="xx", color="white", edgecolor="black",
               label="not faithful (fidelity monitor)")
    for j, c in enumerate(colls):
        row = next(r for r in rows if f"{r['collective']}/{r['algo']}" == c)
        bound = link_bound_s(row, link_mbps)
        if bound:
            ax.hlines(bound * 1e3, j - 0.45, j + 0.45, colors="black", linestyles="--",
                      label="link-rate bound" if j == 0 else None)
    ax.set_xticks(range(len(colls)), colls)
    ax.set_ylabel("collective completion time (ms)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    png.save(fig, path)
