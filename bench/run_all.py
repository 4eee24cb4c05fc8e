"""Run every bench/bench_*.py in turn; each prints its own table, recorded for `make report`
(out/bench/<script>.jsonl, stamped with its command).

Each script runs in a session of its own at the highest scheduling priority the machine
grants (as root): Linux schedules by autogroup, one per session, so `nice` alone would not
keep other sessions' work from taking the cores a benchmark measures. Elsewhere it runs
as it is, and its figures carry the machine's load (each record is stamped with it)."""
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from results.capture import run_and_record  # noqa: E402


def foreground() -> None:
    """In the child: a new session whose autogroup has nice -20, and nice -5 inside it."""
    os.setsid()
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write("-20")
        os.nice(-5)
    except OSError:             # not root, or no autogroups: run at the priority given
        pass


here = pathlib.Path(__file__).parent
failed = []
for script in sorted(here.glob("bench_*.py")):
    print(f"\n=== {script.stem} ===", flush=True)
    cmd = [sys.executable, str(script.relative_to(ROOT))]
    if run_and_record(cmd, ROOT / "out" / "bench", script.stem, script.stem,
                      preexec_fn=foreground) != 0:
        failed.append(script.name)
if failed:
    sys.exit(f"benchmarks failed: {', '.join(failed)}")
