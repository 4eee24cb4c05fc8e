"""`p4switch` command line: each subcommand lives in the module that owns its concern and is
imported only when used, so `p4switch compile` never loads the gRPC server."""
import importlib

import click

_SUBCOMMANDS = {
    "compile": ("p4switch.compile", "compile_command"),
    "stf": ("p4switch.stf", "stf_command"),
    "run": ("p4switch.device.cli", "run_command"),
    "cli": ("p4switch.runtime_cli.command", "cli_command"),
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(_SUBCOMMANDS)

    def get_command(self, ctx, name):
        if name not in _SUBCOMMANDS:
            return None
        module, attr = _SUBCOMMANDS[name]
        return getattr(importlib.import_module(module), attr)


@click.group(cls=_LazyGroup)
def main():
    """A v1model P4_16 software switch: compile, test (STF) and run P4 programs."""


if __name__ == "__main__":
    main()
