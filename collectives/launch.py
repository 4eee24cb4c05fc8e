"""Start one rank process per namespace (or host address) and gather their result lines."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class LaunchError(RuntimeError):
    pass


def launch(ips: list[str], runs: list[dict], *, namespaces: list[str | None] | None = None,
           transport: dict | None = None, policy: str = "ecmp", qps: int = 1, seed: int = 0,
           port: int = 18515, out_dir: str | Path | None = None, timeout: float = 120.0,
           step_timeout: float = 60.0, join_timeout: float = 15.0,
           topology: str | None = None) -> list[dict]:
    """Runs `runs` (dicts: collective, algo, dtype, elements[, seed, options]) on every rank;
    returns every rank's result rows. A failing rank raises LaunchError with its stderr."""
    namespaces = namespaces or [None] * len(ips)
    if len(namespaces) != len(ips):
        raise ValueError(f"{len(namespaces)} namespaces for {len(ips)} rank addresses")
    with tempfile.TemporaryDirectory(prefix="collectives-") as tmp:
        procs = []
        for rank, ns in enumerate(namespaces):
            spec = {"ips": ips, "rank": rank, "runs": runs, "transport": transport or {},
                    "policy": policy, "topology": str(topology) if topology else None, "qps": qps, "seed": seed, "port": port,
                    "timeout": step_timeout, "join_timeout": join_timeout, "results": str(Path(tmp) / f"rank{rank}.jsonl"),
                    "out": str(out_dir) if out_dir else None}
            path = Path(tmp) / f"rank{rank}.json"
            path.write_text(json.dumps(spec))
            cmd = [sys.executable, "-m", "collectives.runner", str(path)]
            if ns:
                cmd = ["ip", "netns", "exec", ns, *cmd]
            err = open(Path(tmp) / f"rank{rank}.err", "w")  # noqa: SIM115 - closed below
            env = os.environ | {"PYTHONPATH": str(ROOT)}
            procs.append((subprocess.Popen(cmd, stdout=err, stderr=err, env=env), err))
        deadline = time.monotonic() + timeout
        failed = []
        for rank, (proc, err) in enumerate(procs):
            try:
                code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                code = "timeout"
            err.close()
            if code != 0:
                text = Path(err.name).read_text().strip().splitlines()
                failed.append(f"rank {rank} ({code}): {text[-1] if text else ''}")
        if failed:
            for proc, _ in procs:
                if proc.poll() is None:
                    proc.kill()
            raise LaunchError("; ".join(failed))
        return [json.loads(line) for rank in range(len(ips))
                for line in (Path(tmp) / f"rank{rank}.jsonl").read_text().splitlines()]
