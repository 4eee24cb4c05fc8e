"""`python -m ebpf attach|configure|show|detach`: the host programs on one interface.

Configuration given to `attach` is written into the freshly loaded program's maps before it is
attached, so a bad value leaves the interface as it was. `configure` and `show` reach an
attached program's maps through the kernel's object ids, from any later process.
"""
from __future__ import annotations

import click

from . import PROGRAMS, EbpfCompileError, EbpfUnavailable, TcError, reps, spray
from .addr import check_port, check_qp, ip_be, ip_str
from .impair import Impair
from .pin import Pin
from .reps import Reps
from .spray import Spray
from .tc import filters


def _ints(text: str, what: str) -> list[int]:
    try:
        return [int(part, 0) for part in text.split(",")]
    except ValueError as exc:
        raise click.BadParameter(f"{what}: expected integers, got {text!r}") from exc


def _pin(ctx, param, values):
    """DST_IP:QP:SPORT"""
    specs = []
    for value in values:
        parts = value.split(":")
        if len(parts) != 3:
            raise click.BadParameter(f"{value!r} is not DST_IP:QP:SPORT")
        specs.append((parts[0], *(_ints(p, "pin")[0] for p in parts[1:])))
    return specs


def _conn(ctx, param, values):
    """PEER_IP:REMOTE_QP:LOCAL_QP:LOCAL_IP"""
    specs = []
    for value in values:
        parts = value.split(":")
        if len(parts) != 4:
            raise click.BadParameter(f"{value!r} is not PEER_IP:REMOTE_QP:LOCAL_QP:LOCAL_IP")
        specs.append((parts[0], *(_ints(p, "QP")[0] for p in parts[1:3]), parts[3]))
    return specs


def _port_range(ctx, param, value):
    """FIRST-LAST, inclusive, e.g. 0xC000-0xFFFF"""
    if value is None:
        return None
    try:
        first, last = (int(p, 0) for p in value.split("-"))
    except ValueError as exc:
        raise click.BadParameter(f"{value!r} is not FIRST-LAST") from exc
    if last < first:
        raise click.BadParameter(f"{value!r}: LAST is below FIRST")
    return first, last - first + 1


def _configure(prog, opts) -> None:
    if isinstance(prog, Pin):
        for spec in opts["pin"]:
            _check_pin(*spec)
        for spec in opts["pin"]:
            prog.pin(*spec)
    elif isinstance(prog, Reps):
        ev_base, ev_count = opts["range"] or reps.DEFAULT_RANGE
        prog.add_connections(opts["conn"], ev_base, ev_count, opts["first_window"])
    elif isinstance(prog, Spray):
        if opts["range"] or not prog.config()[1]:
            prog.configure(*(opts["range"] or spray.DEFAULT_RANGE))
    elif isinstance(prog, Impair):
        prog.configure(opts["drop"], opts["duplicate"], opts["udp_dport"], opts["proto"],
                       opts["seed"], opts["corrupt"])


def _options(fn):
    options = [
        click.option("--netns", default=None, help="network namespace of DEV (default: this one)"),
        click.option("--pin", multiple=True, callback=_pin, help="pin: DST_IP:QP:SPORT"),
        click.option("--conn", multiple=True, callback=_conn,
                     help="reps: PEER_IP:REMOTE_QP:LOCAL_QP:LOCAL_IP"),
        click.option("--range", "range_", callback=_port_range,
                     help="reps/spray: entropy range FIRST-LAST (default 0xC000-0xFFFF)"),
        click.option("--first-window", default=16, show_default=True,
                     help="reps: data packets that explore round-robin"),
        click.option("--drop", default=0.0, help="impair: fraction dropped"),
        click.option("--duplicate", default=0.0, help="impair: fraction duplicated"),
        click.option("--corrupt", default=0.0,
                     help="impair: fraction with one bit flipped (no checksum updated)"),
        click.option("--udp-dport", default=0, help="impair: only UDP to this port (0: any)"),
        click.option("--proto", default=0, help="impair: only this IP protocol (0: any)"),
        click.option("--seed", default=0, help="impair: fixed pseudo-random sequence (0: none)"),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


OWN_OPTIONS = {
    "pin": {"pin"},
    "reps": {"conn", "range_", "first_window"},
    "spray": {"range_"},
    "impair": {"drop", "duplicate", "udp_dport", "proto", "seed", "corrupt"},
}


def _opts(program: str, kwargs) -> dict:
    """The options of `program`; an option given for another program is an error."""
    ctx = click.get_current_context()
    for name in kwargs:
        given = ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
        if given and name != "netns" and name not in OWN_OPTIONS[program]:
            option = "--" + name.rstrip("_").replace("_", "-")
            raise click.UsageError(f"{option} does not apply to {program}")
    kwargs["range"] = kwargs.pop("range_")
    return kwargs


def _fail(exc: Exception):
    raise click.ClickException(str(exc)) from exc


CONFIG_ERRORS = (ValueError, KeyError, TcError, EbpfUnavailable, EbpfCompileError, OSError)


@click.group()
def main():
    """Host eBPF programs (tc clsact) for RoCEv2 entropy control and loss injection."""


@main.command()
@click.argument("program", type=click.Choice(sorted(PROGRAMS)))
@click.argument("dev")
@click.option("--direction", type=click.Choice(["egress", "ingress"]), multiple=True,
              help="hook(s) to use (default: all the program has; impair: egress)")
@_options
def attach(program, dev, direction, **kwargs):
    """Load PROGRAM, configure it, attach it to DEV (replacing an earlier one)."""
    cls = PROGRAMS[program]
    opts = _opts(program, kwargs)
    if not direction and cls is Impair:
        direction = ("egress",)
    try:
        with cls.load() as prog:
            _configure(prog, opts)
            prog.attach(dev, kwargs["netns"], tuple(direction) or None)
    except CONFIG_ERRORS as exc:
        _fail(exc)
    click.echo(f"{program} attached to {dev}")


@main.command()
@click.argument("program", type=click.Choice(sorted(PROGRAMS)))
@click.argument("dev")
@_options
def configure(program, dev, **kwargs):
    """Change the configuration of the PROGRAM attached to DEV."""
    opts = _opts(program, kwargs)
    try:
        with PROGRAMS[program].attached(dev, opts["netns"]) as prog:
            _configure(prog, opts)
    except CONFIG_ERRORS as exc:
        _fail(exc)


@main.command()
@click.argument("program", type=click.Choice(sorted(PROGRAMS) + ["all"]))
@click.argument("dev")
@click.option("--netns", default=None, help="network namespace of DEV")
def detach(program, dev, netns):
    """Remove PROGRAM (or all of ours) from DEV."""
    names = sorted(PROGRAMS) if program == "all" else [program]
    try:
        removed = [name for name in names if PROGRAMS[name].detach(dev, netns)]
    except CONFIG_ERRORS as exc:
        _fail(exc)
    click.echo(f"detached: {', '.join(removed) or 'nothing'}")


def _check_pin(dst_ip, dst_qp, sport) -> None:
    """Every pin is checked before any is written."""
    ip_be(dst_ip)
    check_qp(dst_qp)
    check_port(sport, "source port")


def _show_pin(prog: Pin):
    for e in prog.entries():
        yield (f"  pin to {e.dst_ip} QP {e.dst_qp:#x}: sport {e.sport} (generation "
               f"{e.generation}); pkts {e.pkts} bytes {e.bytes}")


def _show_reps(prog: Reps):
    for key in prog.maps["reps_conns"].keys():
        peer = ip_str(key.peer_ip)
        st = prog.state(peer, key.qp)
        yield (f"  conn to {peer} QP {key.qp:#x}: cache {list(st.cache)}; data explore "
               f"{st.n_explore} recycled {st.n_recycled} random {st.n_random}; acks good "
               f"{st.acks_good} ece {st.acks_ece} foreign {st.acks_foreign}")


def _show_spray(prog: Spray):
    base, count = prog.config()
    pkts, byts = prog.counters()
    yield f"  range {base:#x}-{base + count - 1:#x}; sprayed {pkts} packets, {byts} bytes"


def _show_impair(prog: Impair):
    cfg = prog.config()
    c = prog.counters()
    yield (f"  drop {cfg.drop:.4f} duplicate {cfg.duplicate:.4f} corrupt {cfg.corrupt:.4f} "
           f"udp dport {cfg.udp_dport or 'any'} proto {cfg.ip_proto or 'any'} seed {cfg.seed}")
    yield (f"  matched {c.matched} dropped {c.dropped} duplicated {c.duplicated} "
           f"corrupted {c.corrupted}")


SHOW = {Pin: _show_pin, Reps: _show_reps, Spray: _show_spray, Impair: _show_impair}


@main.command()
@click.argument("dev")
@click.option("--netns", default=None, help="network namespace of DEV")
def show(dev, netns):
    """List our programs on DEV with their configuration and counters."""
    try:
        attached = filters(dev, netns)
        if not attached:
            click.echo(f"no programs on {dev}")
        by_prio = {cls.PRIO: (name, cls) for name, cls in PROGRAMS.items()}
        for prio in sorted({f.prio for f in attached}):
            name, cls = by_prio.get(prio, ("other", None))
            hooks = ", ".join(f"{f.direction} {f.name} (program id {f.prog_id})"
                              for f in attached if f.prio == prio)
            click.echo(f"{name} at prio {prio}: {hooks}")
            if cls is not None:
                with cls.attached(dev, netns) as prog:
                    for line in SHOW[cls](prog):
                        click.echo(line)
    except CONFIG_ERRORS as exc:
        _fail(exc)
