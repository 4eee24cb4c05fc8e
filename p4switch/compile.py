"""`p4switch compile`: P4 source -> P4Info (text format) and device config (JSON: the
preprocessed program as text, see device_config.py)."""
from __future__ import annotations

import sys
from pathlib import Path

import click
from google.protobuf import text_format

from .errors import P4CompileError


@click.command("compile")
@click.argument("program", type=click.Path(dir_okay=False))
@click.option("--p4info", "p4info_path", type=click.Path(dir_okay=False), help="write P4Info here (text format)")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="write the device config here (JSON)")
@click.option("--bmv2-json", "bmv2_json_path", type=click.Path(dir_okay=False),
              help="write the program as BMv2 JSON (what p4c-bm2-ss writes) here")
@click.option("-I", "include_dirs", multiple=True, type=click.Path(file_okay=False), help="extra include directory")
@click.option("-D", "defines", multiple=True, help="preprocessor define NAME or NAME=VALUE")
def compile_command(program, p4info_path, config_path, bmv2_json_path, include_dirs, defines):
    """Check PROGRAM and write its P4Info and device config."""
    from . import device_config, frontend, p4info, parse
    macros = {}
    for d in defines:
        key, _, value = d.partition("=")
        macros[key] = value if _ else None
    try:
        source = parse.preprocess(program, include_dirs, macros)
        prog = frontend.compile_source(source, program)
        info = p4info.build(prog)
        bmv2 = _bmv2_json(source) if bmv2_json_path else None
    except P4CompileError as exc:
        click.echo(str(exc), err=True)
        sys.exit(1)
    try:
        if p4info_path:
            Path(p4info_path).write_text(text_format.MessageToString(info))
        if config_path:
            Path(config_path).write_bytes(device_config.encode(source))
        if bmv2_json_path:
            Path(bmv2_json_path).write_text(bmv2)
    except OSError as exc:
        raise click.ClickException(f"cannot write output: {exc.strerror}: {exc.filename}") from None
    click.echo(f"{program}: {len(prog.tables)} tables, {len(info.actions)} actions, "
               f"{len(prog.externs)} extern instances", err=True)


def _bmv2_json(source) -> str:
    """The BMv2 JSON text, or exit 1 naming what the writer does not write."""
    import json

    from .bmv2json.write import CannotWrite, write
    try:
        return json.dumps(write(source), indent=1)
    except CannotWrite as exc:
        click.echo(f"cannot write BMv2 JSON: {exc}", err=True)
        sys.exit(1)
