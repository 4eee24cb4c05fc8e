"""Result rows as JSON lines, the table a person reads (the demo's columns) and a PNG."""
from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

from fabricmodel.policies import BASELINE
from figures import png
from figures.text import format_table


def write_jsonl(rows: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def size_text(n: int) -> str:
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k and n % k == 0:
            return f"{n // k}{unit}"
    return f"{n}B"


def _case(r: dict) -> tuple:
    return (r["collective"], size_text(r["size_bytes"]), ",".join(r["failed_links"]) or "-")


def _receiver(row: dict) -> str:
    """go-back-N or selective repeat ("gbn", "sr"), and what else decided the run's losses."""
    short = {"go-back-N": "gbn", "selective repeat": "sr"}.get(row.get("receiver"), "-")
    return short + ("+pfc" if row.get("pfc") else "") + ("+dcqcn" if row.get("dcqcn") else "")


def table(rows: list[dict]) -> str:
    return format_table(*table_rows(rows))


def table_rows(rows: list[dict]) -> tuple[list, list]:
    """(headers, lines): CCT per (collective, size, failed links) and policy: median over
    seeds, relative to hash ECMP and to Ethereal in the same run."""
    ccts: dict[tuple, list[float]] = defaultdict(list)
    agg: dict[tuple, dict] = defaultdict(lambda: defaultdict(float))
    for r in rows:
        key = (*_case(r), r["policy"], _receiver(r))
        ccts[key].append(r["cct_s"] if r["ok"] else float("inf"))
        for f in ("retransmitted", "timeouts", "uplink_imbalance", "wall_s", "events"):
            agg[key][f] += r[f]
        agg[key]["n"] += 1
        agg[key]["ok"] = agg[key].get("ok", 1) and r["ok"]
    head = ["collective", "size/rank", "failed", "policy", "receiver", "CCT median us", f"vs {BASELINE}",
            "vs ethereal", "retx", "timeouts", "busiest uplink", "events/s", "done"]
    lines = []
    for key, values in ccts.items():
        med = statistics.median(values)
        a = agg[key]

        def rel(policy: str, key=key, med=med) -> str:
            base = next((v for k, v in ccts.items() if k[:4] == (*key[:3], policy)), None)
            return f"{med / statistics.median(base):.2f}x" if base else "-"

        lines.append([*key, f"{med * 1e6:.1f}" if med != float("inf") else "unfinished",
                      rel(BASELINE), rel("ethereal"), str(int(a["retransmitted"])),
                      str(int(a["timeouts"])), f"{a['uplink_imbalance'] / a['n']:.2f}x mean",
                      f"{a['events'] / a['wall_s']:,.0f}" if a["wall_s"] else "-",
                      "yes" if a["ok"] else "NO"])
    return head, lines


def plot(rows: list[dict], path: Path, title: str) -> None:
    cases = list(dict.fromkeys(_case(r) for r in rows))
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    cct: dict[tuple, list[float]] = defaultdict(list)
    for r in rows:
        if r["ok"]:
            cct[(_case(r), r["policy"])].append(r["cct_s"] * 1e6)
    width = 0.8 / len(policies)
    fig, ax = png.subplots(figsize=(2.5 + 1.9 * len(cases), 3.8))
    for i, policy in enumerate(policies):
        xs = [j + (i - (len(policies) - 1) / 2) * width for j in range(len(cases))]
        ax.bar(xs, [statistics.median(cct.get((c, policy), [0])) for c in cases], width,
               label=policy)
    ax.set_xticks(range(len(cases)),
                  [f"{c}\n{s}" + (f"\nfailed {f}" if f != "-" else "") for c, s, f in cases],
                  fontsize=7)
    ax.set_ylabel("collective completion time (us)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    png.save(fig, path)


def tenants_table(rows: list[dict]) -> str:
    """`python -m sim jobs-packet`: each job's CCT alone and with the others, per scheme, and
    the fabric links it shared; a summary line per scheme under the table."""
    head = ["scheme", "job", "ranks", "leaves", "CCT alone us", "together us", "slowdown",
            "fabric links", "shared", "done"]
    lines = [[r["scheme"], r["job"], str(r["ranks"]), str(r["leaves"]),
              f"{r['alone_s'] * 1e6:.1f}" if r["alone_s"] else "-",
              f"{r['together_s'] * 1e6:.1f}" if r["together_s"] else "-",
              f"{r['slowdown']:.3f}x" if r["slowdown"] else "-",
              str(r["links"]), str(r["links_shared"]), "yes" if r["ok"] else "NO"]
             for r in rows]
    out = [format_table(head, lines), ""]
    for scheme in dict.fromkeys(r["scheme"] for r in rows):
        mine = [r for r in rows if r["scheme"] == scheme]
        slow = [r["slowdown"] for r in mine if r["slowdown"]]
        first = mine[0]
        out.append(f"{scheme}: slowdown median {statistics.median(slow):.3f}x, max "
                   f"{max(slow):.3f}x; {len(first['scheme_shared_links'])} directed fabric "
                   f"links carry two jobs or more (at most {first['scheme_max_jobs_on_a_link']}"
                   f" on one); together: {first['together_timeouts']} timeouts, largest queue "
                   f"{first['together_max_queue_kb']:.0f} KB" if slow else f"{scheme}: not done")
    return "\n".join(out)


def tenants_plot(rows: list[dict], path: Path, title: str) -> None:
    """Each job's CCT alone and together, grouped by scheme (`python -m sim jobs-packet`)."""
    schemes = list(dict.fromkeys(r["scheme"] for r in rows))
    fig, ax = png.subplots(figsize=(2.5 + 2.2 * len(schemes), 3.8))
    x, ticks = 0.0, []
    for scheme in schemes:
        mine = [r for r in rows if r["scheme"] == scheme and r["ok"]]
        xs = [x + i for i in range(len(mine))]
        ax.bar([v - 0.2 for v in xs], [r["alone_s"] * 1e6 for r in mine], 0.4,
               color="0.7", label="alone" if not ticks else None)
        ax.bar([v + 0.2 for v in xs], [r["together_s"] * 1e6 for r in mine], 0.4,
               color="C3", label="together" if not ticks else None)
        ticks.append((x + (len(mine) - 1) / 2, scheme))
        x += len(mine) + 1.5
    ax.set_xticks([t for t, _ in ticks], [s for _, s in ticks])
    ax.set_ylabel("each job's CCT (us)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    png.save(fig, path)
