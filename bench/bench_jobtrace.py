"""The vClos job-trace simulation (`python -m sim.jobs`, 16x16 leaf-spine, 256 GPUs) at a
light and a heavy offered load: how long the one command takes on this machine, and the
average / p99 JCT of vClos and OCS-vClos relative to hash ECMP in the same run."""
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOADS = (0.5, 0.9)


def main() -> None:
    print(f"{'load':>5} {'scheme':<10} {'avg JCT min':>11} {'vs ECMP':>8} {'p99 min':>8} "
          f"{'p99 vs ECMP':>11} {'jobs that wait':>14} {'command s':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for load in LOADS:
            start = time.perf_counter()
            got = subprocess.run([sys.executable, "-m", "sim.jobs", "--load", str(load),
                                  "--plot", f"{tmp}/jct.png"], cwd=ROOT, capture_output=True,
                                 text=True, check=True)
            took = time.perf_counter() - start
            rows = {}
            for line in got.stdout.splitlines():
                m = re.match(r"(ECMP|vClos|OCS-vClos)\s+\d+\s+([\d.]+)\s+\S+\s+[\d.]+\s+"
                             r"([\d.]+)\s+[\d.]+\s+([\d.]+%)", line)
                if m:
                    rows[m[1]] = (float(m[2]), float(m[3]), m[4])
            base_avg, base_p99, _ = rows["ECMP"]
            for name, (avg, p99, waited) in rows.items():
                print(f"{load:>5.0%} {name:<10} {avg:>11.1f} {avg / base_avg:>7.2f}x "
                      f"{p99:>8.1f} {p99 / base_p99:>10.2f}x {waited:>14} {took:>9.1f}")


if __name__ == "__main__":
    main()
