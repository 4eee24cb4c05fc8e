"""A printed table as JSON lines: the first line its stamp (what ran it, when, where) and
headers, then one line per row. Imports nothing of the project, so any part may record."""
from __future__ import annotations

import datetime
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLES = "tables"


def machine() -> str:
    """What the numbers were measured on, in a few words."""
    os_name = platform.freedesktop_os_release().get("PRETTY_NAME", platform.system()) \
        if hasattr(platform, "freedesktop_os_release") else platform.system()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return (f"{os.cpu_count()} cores, {os_name}, kernel {platform.release()}, "
            f"Python {platform.python_version()}, load {load:.1f}")


def commit() -> str:
    """The checkout's commit; "unknown" where there is no git or no .git (the docker image
    has neither), since a run must not fail for want of its stamp."""
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                             capture_output=True, text=True)
    except OSError:
        return "unknown"
    return out.stdout.strip() or "unknown"


def invocation(argv: list[str]) -> list[str]:
    """The command as a reader types it: `python -m PKG` for a package's __main__, a script
    as its path in the checkout."""
    script = Path(argv[0]).resolve()
    try:
        rel = script.relative_to(ROOT)
    except ValueError:
        return [script.name, *argv[1:]]
    if rel.name == "__main__.py":
        return ["python", "-m", ".".join(rel.parent.parts), *argv[1:]]
    return [str(rel), *argv[1:]]


_ABSOLUTE = re.compile(r"(?<![\w.~])/[^\s'\"]+")


def portable(command: str) -> str:
    """`command` without the paths of the machine it ran on: a path in the checkout as seen
    from its root, any other absolute path as its last part (`…/name`)."""
    def shown(m: re.Match) -> str:
        path = Path(m[0])
        try:
            return str(path.relative_to(ROOT)) or "."
        except ValueError:
            return f"…/{path.name}" if path.name else m[0]
    return _ABSOLUTE.sub(shown, command)


def stamp(command: str | None = None) -> dict:
    return {"command": portable(command or shlex.join(invocation(sys.argv))),
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine(), "commit": commit()}


def save_table(out_dir: Path, name: str, title: str, head: list[str], lines: list[list],
               command: str | None = None) -> Path:
    """Write `out_dir/tables/NAME.jsonl`; returns its path."""
    path = Path(out_dir) / TABLES / f"{name}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    first = {"stamp": stamp(command), "title": title, "headers": list(head)}
    path.write_text("".join(json.dumps(x) + "\n"
                            for x in [first, *([str(c) for c in r] for r in lines)]))
    return path


def save_output(out_dir: Path, name: str, title: str, text: str,
                command: str | None = None) -> Path:
    """A command's printed output (a benchmark's tables as it prints them), stamped:
    `out_dir/NAME.jsonl` with one line."""
    path = Path(out_dir) / f"{name}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"stamp": stamp(command), "title": title, "text": text}) + "\n")
    return path


class Table:
    """A recorded table (headers and rows) or output (text) read back."""

    def __init__(self, path: Path) -> None:
        try:
            first, *rows = [json.loads(line) for line in path.read_text().splitlines()]
            self.stamp, self.title = first["stamp"], first["title"]
            self.text = first.get("text")
            self.headers = first["headers"] if self.text is None else []
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"{path}: not a recorded table ({err})") from None
        bad = [i for i, r in enumerate(rows, 2) if len(r) != len(self.headers)]
        if bad:
            raise ValueError(f"{path}:{bad[0]}: {len(rows[bad[0] - 2])} cells under "
                             f"{len(self.headers)} headers")
        self.rows = rows
