"""Attaching programs to an interface's clsact hook (inside a network namespace) with pyroute2.

Each kind of program has its own filter priority, so several programs stack on one hook in a
fixed order; attaching again replaces the filter at that priority in one netlink request
(NLM_F_REPLACE), so no packet passes unfiltered during an update.
"""
from __future__ import annotations

import errno
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netns import popns, pushns

PARENTS = {"egress": "ffff:fff3", "ingress": "ffff:fff2"}
HANDLE = 1
NETNS_DIR = "/var/run/netns"  # where `ip netns` keeps named namespaces
ETH_P_ALL = 0x0003
TCA_BPF_ID = 11  # newer than pyroute2's table of cls_bpf attributes


class TcError(RuntimeError):
    """An interface, namespace or filter that does not exist or cannot be changed."""


@contextmanager
def rtnl(netns: str | None) -> Iterator[IPRoute]:
    """An rtnetlink socket opened inside `netns` (or here); the process stays where it was,
    so the program file descriptors we hold remain valid for the kernel to resolve."""
    if netns:
        # pyroute2 would create a missing namespace: refuse instead.
        if "/" in netns or not os.path.exists(f"{NETNS_DIR}/{netns}"):
            raise TcError(f"network namespace {netns!r} does not exist")
        pushns(netns)
        try:
            ipr = IPRoute()
        finally:
            popns()
    else:
        ipr = IPRoute()
    try:
        yield ipr
    finally:
        ipr.close()


def _ifindex(ipr: IPRoute, dev: str, netns: str | None) -> int:
    found = ipr.link_lookup(ifname=dev)
    if not found:
        where = f" in namespace {netns!r}" if netns else ""
        raise TcError(f"no interface {dev!r}{where}")
    return found[0]


def _check_direction(direction: str) -> str:
    if direction not in PARENTS:
        raise TcError(f"direction must be egress or ingress, not {direction!r}")
    return PARENTS[direction]


def attach(prog_fd: int, name: str, dev: str, direction: str, prio: int,
           netns: str | None = None) -> None:
    """Adds the clsact qdisc when missing and puts the program at `prio` (replacing what is
    there) in direct-action mode."""
    parent = _check_direction(direction)
    with rtnl(netns) as ipr:
        index = _ifindex(ipr, dev, netns)
        try:
            ipr.tc("add", "clsact", index)
        except NetlinkError as exc:
            if exc.code != errno.EEXIST:
                raise TcError(f"cannot add clsact on {dev}: {exc}") from exc
        try:
            ipr.tc("replace-filter", "bpf", index, HANDLE, fd=prog_fd, name=name,
                   parent=parent, prio=prio, protocol=ETH_P_ALL, direct_action=True)
        except NetlinkError as exc:
            raise TcError(f"cannot attach {name} to {dev} {direction}: {exc}") from exc


def detach(dev: str, direction: str, prio: int, netns: str | None = None) -> bool:
    """Removes our filter at `prio`; False when there was none."""
    parent = _check_direction(direction)
    with rtnl(netns) as ipr:
        index = _ifindex(ipr, dev, netns)
        try:
            ipr.tc("del-filter", "bpf", index, HANDLE, parent=parent, prio=prio,
                   protocol=ETH_P_ALL)
        except NetlinkError as exc:
            if exc.code in (errno.ENOENT, errno.EINVAL):
                return False
            raise TcError(f"cannot detach from {dev} {direction}: {exc}") from exc
    return True


@dataclass(frozen=True)
class Filter:
    direction: str
    prio: int
    name: str     # the name given at attach time (TCA_BPF_NAME)
    prog_id: int  # kernel id of the attached program


def filters(dev: str, netns: str | None = None) -> list[Filter]:
    """The bpf filters on both clsact hooks of `dev`."""
    found = []
    with rtnl(netns) as ipr:
        index = _ifindex(ipr, dev, netns)
        for direction, parent in PARENTS.items():
            try:
                msgs = ipr.get_filters(index=index, parent=parent)
            except NetlinkError as exc:
                if exc.code == errno.EINVAL:  # no clsact qdisc
                    continue
                raise
            for msg in msgs:
                if msg.get_attr("TCA_KIND") != "bpf":
                    continue
                opts = msg.get_attr("TCA_OPTIONS")
                if opts is None:  # the per-priority chain head carries no program
                    continue
                found.append(Filter(direction, msg["info"] >> 16,
                                    opts.get_attr("TCA_BPF_NAME") or "",
                                    _prog_id(opts)))
    return found


def _prog_id(opts) -> int:
    """TCA_BPF_ID, read from the attribute's raw bytes (pyroute2 does not decode it)."""
    raw = bytes(opts.data[opts.offset + 4:opts.offset + opts.length])
    off = 0
    while off + 4 <= len(raw):
        length, kind = struct.unpack_from("=HH", raw, off)
        if length < 4:
            break
        if kind == TCA_BPF_ID and length >= 8:
            return struct.unpack_from("=I", raw, off + 4)[0]
        off += (length + 3) & ~3
    return 0
