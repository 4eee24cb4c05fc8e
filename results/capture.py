"""`python -m results.capture NAME [--title T] -- COMMAND ...`: run COMMAND, show its output
as it comes, and record it (out/NAME.jsonl, stamped with COMMAND) for `make report`. Its
exit code is COMMAND's."""
from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import click

from results.record import ROOT, save_output


def shown(arg: str) -> str:
    """An argument as a reader would type it: paths inside the checkout made relative."""
    try:
        return str(Path(arg).relative_to(ROOT)) if Path(arg).is_absolute() else arg
    except ValueError:
        return arg


def run_and_record(cmd: list[str], out_dir: Path, name: str, title: str,
                   preexec_fn=None) -> int:
    """`preexec_fn` runs in the child before COMMAND (e.g. to give it a scheduling class)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            preexec_fn=preexec_fn)
    lines = []
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        lines.append(line)
    code = proc.wait()
    if code == 0:
        save_output(out_dir, name, title, "".join(lines), shlex.join(map(shown, cmd)))
    return code


@click.command(context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.option("--title", help="The table's title in the report (default: NAME).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=ROOT / "out", show_default=True)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def main(name, title, out_dir, command):
    """Run COMMAND and record what it prints as NAME."""
    sys.exit(run_and_record(list(command), out_dir, name, title or name))


if __name__ == "__main__":
    main()
