"""`python -m p4switch.program_digest PROG.p4 ...`: one line per program with the SHA-256 of what
the compiler generates for it (the `Program` as JSON with sorted keys, which both backends run,
and its P4Info text), or `error` and the digest of the error message. Two versions of the
compiler generate the same when their lines are the same (`diff`); `--p4c-src DIR` adds p4c's
`testdata/p4_16_samples/*-bmv2.p4`."""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import click
from google.protobuf import text_format

from . import frontend, p4info, parse
from .errors import P4CompileError


def digest(path: Path) -> str:
    """`<sha256>` of the program's output, or `error <sha256 of the message>`."""
    try:
        prog = frontend.compile_file(str(path), (path.parent,))
    except P4CompileError as exc:
        return "error " + hashlib.sha256(error_text(exc, path).encode()).hexdigest()
    body = json.dumps(prog.to_json(), sort_keys=True)
    info = text_format.MessageToString(p4info.build(prog))
    return hashlib.sha256((body + "\0" + info).encode()).hexdigest()


def error_text(exc: P4CompileError, path: Path) -> str:
    """The error without the folders it names (the program's and this checkout's p4include/),
    so two checkouts of the compiler give the same digest for the same error."""
    return str(exc).replace(str(path.parent) + "/", "").replace(str(parse.INCLUDE_DIR) + "/", "")


@click.command()
@click.argument("programs", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--p4c-src", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="a p4c checkout: add its testdata/p4_16_samples/*-bmv2.p4")
def main(programs, p4c_src):
    paths = list(programs)
    if p4c_src is not None:
        paths += sorted((p4c_src / "testdata" / "p4_16_samples").glob("*-bmv2.p4"))
    if not paths:
        raise click.UsageError("no program given")
    for path in paths:
        click.echo(f"{path} {digest(path)}")


if __name__ == "__main__":
    sys.exit(main())
