"""Does the fidelity verdict catch what a busy CPU does to the emulation? The same demo parts
run twice, quiet and under a CPU hog (HOGS busy-loop processes at normal priority for the
whole run), side by side: each row's ratio to its bound, quiet vs loaded, and both verdicts.
A loaded row is either marked not faithful or within 10 % of the quiet run's ratio; a row
that is neither is unmarked and off (U, which must be 0). vClos slices' slowdown in every
faithful row is checked against 1.05x.

    sudo .venv/bin/python bench/bench_fidelity.py [--out out/bench-fidelity] [-- DEMO OPTIONS]

Last line: `fidelity: R rows, F faithful within 10 %, M marked not faithful, U unmarked off
by more than 10 %`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import click

from figures.text import format_table
from results.record import save_output

ROOT = Path(__file__).resolve().parents[1]
HOGS = 2
WITHIN = 0.10
VCLOS_SLOWDOWN = 1.05
# The demo's parts compared: part one's ring and halving-doubling under ECMP and Ethereal,
# part two's Multicast Allgather, its FSDP case and vClos (both fabrics); one seed each.
DEMO = ["--collectives", "allreduce/ring,allreduce/halving-doubling", "--policies",
        "ecmp,ethereal", "--repeat", "1", "--no-failures", "--ideas-only", "mcast,fsdp,vclos",
        "--vclos-seeds", "1", "--vclos-repeats", "3"]


def hogs(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def run_demo(out: Path, extra: list[str]) -> tuple[list[dict], float, tuple[float, float]]:
    """The demo into `out`; its rows (part one and two), seconds, load before and after."""
    out.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    got = subprocess.run([sys.executable, str(ROOT / "mininet" / "demo.py"), *DEMO, *extra,
                          "--out", str(out)], cwd=ROOT)
    took = time.monotonic() - t0
    rows = []
    for name in ("part1-rows.jsonl", "part2-rows.jsonl"):
        path = out / name
        if path.exists():
            rows += [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    if got.returncode not in (0, 1) or not rows:
        raise click.ClickException(f"the demo failed ({got.returncode}) in {out}")
    return rows, took, (load0, os.getloadavg()[0])


def compare(quiet: list[dict], loaded: list[dict]) -> tuple[list[list[str]], dict[str, int]]:
    by_row = {r["row"]: r for r in quiet}
    lines, counts = [], {"F": 0, "M": 0, "U": 0}
    for r in loaded:
        q = by_row.get(r["row"])
        if q is None:
            continue
        off = r["ratio"] / q["ratio"] - 1 if q["ratio"] else 0.0
        if r["faithful"] != "yes":
            kind = "M"
        elif abs(off) <= WITHIN:
            kind = "F"
        else:
            kind = "U"
        counts[kind] += 1
        lines.append([r["row"], f"{q['ratio']:.2f}", q["faithful"][:60], f"{r['ratio']:.2f}",
                      r["faithful"][:60], f"{off:+.0%}", kind])
    return lines, counts


def vclos_check(rows: list[dict]) -> list[str]:
    return [f"{r['row']} {r['ratio']:.2f}x" for r in rows
            if r.get("vclos") and r["faithful"] == "yes" and r["ratio"] > VCLOS_SLOWDOWN]


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              default=ROOT / "out" / "bench-fidelity", show_default=True)
@click.argument("demo_args", nargs=-1, type=click.UNPROCESSED)
def main(out, demo_args):
    """The demo's parts quiet and under a CPU hog, side by side."""
    if os.geteuid() != 0:
        raise click.ClickException("the demo needs root (Mininet)")
    quiet, t_quiet, l_quiet = run_demo(out / "quiet", list(demo_args))
    procs = hogs(HOGS)
    try:
        loaded, t_loaded, l_loaded = run_demo(out / "loaded", list(demo_args))
    finally:
        for p in procs:
            p.kill()
            p.wait()
    lines, counts = compare(quiet, loaded)
    text = format_table(["row", "quiet vs bound", "quiet faithful", f"{HOGS} hogs vs bound",
                         "loaded faithful", "loaded / quiet", "kind"], lines)
    slow = vclos_check(quiet) + vclos_check(loaded)
    summary = [f"quiet run {t_quiet:.0f} s (load {l_quiet[0]:.1f} -> {l_quiet[1]:.1f}), "
               f"loaded {t_loaded:.0f} s (load {l_loaded[0]:.1f} -> {l_loaded[1]:.1f})",
               "vClos slices' slowdown in faithful rows: " + (
                   f"over {VCLOS_SLOWDOWN}x: {', '.join(slow)}" if slow
                   else f"all at most {VCLOS_SLOWDOWN}x (or none faithful)"),
               f"fidelity: {len(lines)} rows, {counts['F']} faithful within 10 %, {counts['M']} "
               f"marked not faithful, {counts['U']} unmarked off by more than 10 %"]
    click.echo("\n" + text + "\n\n" + "\n".join(summary))
    save_output(out, "bench-fidelity", "The demo's parts quiet and under a CPU hog",
                text + "\n\n" + "\n".join(summary))


if __name__ == "__main__":
    main()
