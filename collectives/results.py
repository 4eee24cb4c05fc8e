"""Result rows (one JSON object per run and rank) and the summary table a person reads."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from figures.text import format_table

from .fidelity import judge_rows

COLUMNS = ("collective", "algo", "dtype", "elements", "ranks", "policy", "reliability")


def write_jsonl(rows: list[dict], path: str | Path) -> None:
    with open(path, "a") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")


def read_jsonl(path: str | Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def summary(rows: list[dict]) -> str:
    """One line per run: CCT (slowest rank), bytes injected and retransmissions (all ranks),
    and the run's fidelity verdict from what the ranks measured themselves (their QPs' stalls
    and CPU run-queue waits; a fabric's monitor adds its switches where the caller has it)."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        groups[(row["run"], *(row[c] for c in COLUMNS))].append(row)
    head = ["collective", "algo", "dtype", "elements", "ranks", "policy", "rel",
            "CCT ms", "MB injected", "retx", "dups", "timeouts", "ok", "faithful"]
    lines = []
    for key in sorted(groups, key=lambda k: k[0]):
        g = groups[key]
        lines.append([*map(str, key[1:]),
                      f"{max(r['cct_s'] for r in g) * 1e3:.2f}",
                      f"{sum(r['bytes_injected'] for r in g) / 1e6:.3f}",
                      str(sum(r["packets_retransmitted"] for r in g)),
                      str(sum(r["duplicates_received"] for r in g)),
                      str(sum(r["timeouts"] for r in g)),
                      "yes" if all(r["ok"] for r in g) else "NO",
                      _column(g[0]["fidelity"]) if "fidelity" in g[0]
                      else judge_rows(g).column()])
    return format_table(head, lines)


def _column(verdict: dict) -> str:
    """A verdict a monitor attached to the rows (mininet/fidelity_watch.py), as a column."""
    if verdict["faithful"] is None:
        return "unmeasured"
    return "yes" if verdict["faithful"] else f"NO: {verdict.get('short', verdict['worst'])}"
