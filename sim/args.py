"""Command-line values that several `python -m sim` commands read: comma-separated names and
numbers, and the non-blocking leaf-spine a host count asks for. A bad value is a
click.BadParameter naming the option, raised before any simulation starts."""
from __future__ import annotations

import click

from fabricmodel.topology import Topology, leaf_spine


def names(text: str, known, what: str, hint: str | None = None) -> list[str]:
    """Comma-separated names, each one of `known`."""
    items = [t for t in text.split(",") if t]
    bad = [t for t in items if t not in known]
    if bad or not items:
        raise click.BadParameter(f"unknown {what} {bad}; choose from {list(known)}",
                                 param_hint=hint)
    return items


def numbers(text: str, hint: str, kind=float, what: str = "a comma-separated list of numbers",
            least=None) -> list:
    """Comma-separated numbers of `kind`, all positive (at least `least` when given)."""
    try:
        out = [kind(t) for t in text.split(",") if t]
    except ValueError:
        raise click.BadParameter(f"{text!r} is not {what}", param_hint=hint) from None
    if not out or (min(out) < least if least is not None else min(out) <= 0):
        raise click.BadParameter(f"give numbers of at least {least}" if least is not None
                                 else "give positive numbers", param_hint=hint)
    return out


def leaf_spine_for(hosts: int, per_leaf: int, hint: str) -> Topology:
    """A non-blocking leaf-spine of `hosts` hosts: `per_leaf` hosts a leaf and as many spines
    (one spine under a single leaf)."""
    per_leaf = min(per_leaf, hosts)
    if hosts % per_leaf:
        raise click.BadParameter(f"{hosts} hosts are not a multiple of {per_leaf} per leaf",
                                 param_hint=hint)
    leaves = hosts // per_leaf
    return leaf_spine(leaves, per_leaf if leaves > 1 else 1, per_leaf)
