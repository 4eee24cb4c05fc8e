"""How long the compose path takes and how big its image is, measured step by step on this
machine and recorded for `make report` (docs/docker.md). Needs root, a docker engine
(`nohup dockerd >/tmp/dockerd.log 2>&1 &`) and docker-compose; rebuilds everything from
scratch, so it takes 10-20 minutes on 2 cores.

    .venv/bin/python docker/measure.py [--full-demo]
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from results.record import save_table  # noqa: E402

COMPOSE = ["docker-compose", "-f", "docker/compose.yaml", "-p", "mlfabricmeasure"]
QUICK_DEMO = [".venv/bin/python", "mininet/demo.py", "--repeat", "1", "--size", "64KiB",
              "--policies", "ecmp,ethereal", "--collectives", "allreduce/ring",
              "--no-failures", "--no-ideas"]
EDITED = ROOT / "docker" / ".measure-edit"     # a source edit: invalidates the last layer


def timed(label: str, cmd: list[str], rows: list[list[str]]) -> None:
    click.echo(f"measure: {label}: {' '.join(cmd)}", err=True)
    t0 = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise click.ClickException(f"{label} failed ({done.returncode}):\n"
                                   f"{(done.stdout + done.stderr)[-3000:]}")
    rows.append([label, f"`{' '.join(cmd)}`", _duration(time.monotonic() - t0)])


def _duration(s: float) -> str:
    return f"{s:.0f} s" if s < 90 else f"{int(s // 60)} min {s % 60:.0f} s"


def image_mb(name: str) -> float:
    out = subprocess.run(["docker", "image", "inspect", name, "--format", "{{.Size}}"],
                         capture_output=True, text=True, check=True)
    return int(out.stdout) / 1e6


@click.command()
@click.option("--full-demo", is_flag=True, help="Also time `run --rm demo` (the whole demo).")
def main(full_demo):
    """Time the compose path from nothing: base image, image, quick demo, services."""
    rows: list[list[str]] = []
    timed("base image (debootstrap + import)", ["bash", "docker/build-base.sh", "--force"], rows)
    timed("fabric image, first build (apt + pip)", [*COMPOSE, "build", "--no-cache", "fabric"],
          rows)
    EDITED.write_text(f"{time.time()}\n")
    try:
        timed("fabric image after a source edit (last layer)", [*COMPOSE, "build", "fabric"], rows)
    finally:
        EDITED.unlink()
    timed("jobs image, first build (the rest of setup.sh)", [*COMPOSE, "build", "demo"], rows)
    timed("quick demo (one ring all-reduce, two policies)",
          [*COMPOSE, "run", "--rm", "demo", *QUICK_DEMO], rows)
    if full_demo:
        timed("full demo (`make demo`)", [*COMPOSE, "run", "--rm", "demo"], rows)
    try:
        timed("fabric + fabricd up and healthy", [*COMPOSE, "up", "-d"], rows)
    finally:
        subprocess.run([*COMPOSE, "down", "-v"], cwd=ROOT, capture_output=True)
    for image in ("mlfabric:latest", "mlfabric-jobs:latest"):
        rows.append([f"size of {image}", f"`docker image inspect {image}`",
                     f"{image_mb(image):,.0f} MB (base {image_mb('mlfabric-base:bookworm'):,.0f} MB)"])
    save_table(ROOT / "out", "docker", "The compose path, step by step", ["step", "command", "took"],
               rows, command="docker/measure.py" + (" --full-demo" if full_demo else ""))
    for row in rows:
        click.echo(f"{row[0]:<48} {row[2]}")


if __name__ == "__main__":
    main()
