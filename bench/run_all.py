"""Run every bench/bench_*.py in turn; each prints its own table, recorded for `make report`
(out/bench/<script>.jsonl, stamped with its command)."""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from results.capture import run_and_record  # noqa: E402

here = pathlib.Path(__file__).parent
failed = []
for script in sorted(here.glob("bench_*.py")):
    print(f"\n=== {script.stem} ===", flush=True)
    cmd = [sys.executable, str(script.relative_to(ROOT))]
    if run_and_record(cmd, ROOT / "out" / "bench", script.stem, script.stem) != 0:
        failed.append(script.name)
if failed:
    sys.exit(f"benchmarks failed: {', '.join(failed)}")
