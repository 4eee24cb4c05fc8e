"""How the project prints a table and reads a byte size from a command line, once: the
emulation (`mininet/`), the hosts' library (`collectives/`) and the simulator (`sim/`) all
show results and take sizes, and none of them should import another for it."""
from __future__ import annotations

import click
from tabulate import tabulate

SIZE_SUFFIX = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def format_table(head: list[str], lines: list[list[str]]) -> str:
    """Left-aligned columns under a header and a rule of dashes (cells printed as given)."""
    return tabulate(lines, headers=head, tablefmt="simple", disable_numparse=True)


def parse_size(text: str) -> int:
    """Bytes from '4096', '64K', '8MiB' or '1g'; at least one 4-byte element."""
    t = text.strip().lower().removesuffix("ib").removesuffix("b")
    mult = SIZE_SUFFIX.get(t[-1:], 1)
    try:
        value = int(float(t[:-1] if t[-1:] in SIZE_SUFFIX else t) * mult)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a size like 4096, 64K or 8MiB") from None
    if value < 4:
        raise click.BadParameter(f"{text!r}: a size is at least one 4-byte element")
    return value
