"""`p4switch cli`: simple_switch_CLI under p4switch's command (its arguments as they are)."""
import click


@click.command("cli", context_settings={"ignore_unknown_options": True,
                                        "allow_extra_args": True, "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def cli_command(args):
    """BMv2's runtime CLI (simple_switch_CLI) over the switch's Thrift server: --thrift-port
    PORT, --thrift-ip HOST, --json FILE, --pre TYPE; commands from stdin or the terminal."""
    from .main import main
    main(list(args))
