"""The demo's failure part: one leaf-spine link drops every RoCEv2 packet, both ways, in the
middle of a collective. Silent: the switches' side drops (ebpf/impair, drop 1.0 of UDP 4791,
on the egress of both switch interfaces of the link) and fabricd is not told, as with a broken
transceiver; the ranks' TCP rendezvous stands for a management network and is spared.
Announced: the same, then `fabricctl link LINK down`, so fabricd takes the link out of the
ECMP groups. Per policy: the CCT and the time from the failure to the last retransmission."""
from __future__ import annotations

import copy
import threading
import time
from pathlib import Path

import click
from fidelity_watch import column
from report import link_bound_s

from collectives.launch import LaunchError
from ebpf import Impair
from figures.text import format_table

RETRY_LIMIT = 30    # consecutive timeouts of one QP (the transport's default; back-off capped
                    # at the maximum RTO, so a QP gives up after about 12 s)


def _tx_bytes(intf: str) -> int:
    return int(Path(f"/sys/class/net/{intf}/statistics/tx_bytes").read_text())


class LinkFailure:
    """Fails `link` (a topology Link between two switches) once `start_bytes` have crossed it
    since `arm()`, plus `after` seconds: the middle of the collective, not its rendezvous."""

    def __init__(self, net, fabricd, link, *, announce: bool, after: float = 0.05,
                 start_bytes: int = 64 << 10):
        self.fabricd, self.link, self.announce = fabricd, link, announce
        self.intfs = [net.get(link.a).intfs[link.a_port].name,
                      net.get(link.b).intfs[link.b_port].name]
        self.after, self.start_bytes = after, start_bytes
        self.failed_at: float | None = None
        self.prog = Impair.load()
        # RoCEv2 only: the ranks' rendezvous and barriers (TCP) stand for a cluster's
        # management network, which a failure of the data fabric does not take down
        self.prog.configure(drop=1.0, udp_dport=4791)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def arm(self) -> None:
        """Called once the ranks run (collectives.launch's `during`)."""
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        base = sum(_tx_bytes(i) for i in self.intfs)
        while not self._stop.is_set():
            if sum(_tx_bytes(i) for i in self.intfs) - base >= self.start_bytes:
                break
            time.sleep(0.002)
        else:
            return
        time.sleep(self.after)
        for intf in self.intfs:                 # Mininet's switch interfaces: root namespace
            self.prog.attach(intf, None, directions=("egress",))
        self.failed_at = time.time()
        if self.announce:
            self.fabricd.ctl("link", self.link.name, "down")

    def repair(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for intf in self.intfs:
            Impair.detach(intf, None)
        if self.announce and self.failed_at is not None:
            self.fabricd.ctl("link", self.link.name, "up")
        self.prog.close()


def failure_runs(net, fabricd, topo, ranks, policies, run: dict, seed: int = 0,
                 link_mbps: float = 0) -> list[list]:
    """One launch per policy, silent and announced; rows of the failure table."""
    link = topo.uplinks(sorted(s for s in topo.switches if s.startswith("leaf"))[0])[0]
    after = failure_delay(run, len(ranks.hosts), link_mbps)
    names = [h.name for h in ranks.hosts]
    ranks = copy.copy(ranks)             # a retry limit that lets hash ECMP give up in seconds
    ranks.transport = ranks.transport | {"retry_limit": RETRY_LIMIT}
    rows = []
    for announce in (False, True):
        for policy in policies:
            failure = LinkFailure(net, fabricd, link, announce=announce, after=after)
            try:
                got = ranks.launch(names, run, policy=policy, seed=seed,
                                   topology=str(fabricd.topology), fabricd=fabricd.address,
                                   during=failure.arm)
                error = None
            except LaunchError as err:
                got, error = [], str(err)
                click.echo(f"demo: {policy} did not finish: {error[:300]}")
            finally:
                failure.repair()
            rows.append(_row(link.name, announce, policy, failure.failed_at, got, error))
            click.echo(f"demo: failure of {link.name} ({'announced' if announce else 'silent'})"
                       f" {policy:<8} {rows[-1][3]} ms CCT")
    return rows


def failure_delay(run: dict, ranks: int, link_mbps: float) -> float:
    """How long after the first 64 KiB the link fails: a quarter of the collective's
    link-rate bound, so that the failure lands in its middle at any rate (a fixed 50 ms came
    after the end of a 512 KiB all-to-all from 96 Mbit/s); 50 ms on unshaped links."""
    bound = link_bound_s(run | {"ranks": ranks}, link_mbps)
    return bound / 4 if bound else 0.05


def _row(link: str, announce: bool, policy: str, failed_at: float | None, got: list[dict],
         error: str | None) -> list:
    how = "announced" if announce else "silent"
    if error or not got:
        reason = "retry limit" if "did not acknowledge" in (error or "") else "failed"
        return [link, how, policy, f"did not finish ({reason})", "-", "-", "-", "-",
                "yes" if failed_at else "no", "NO", "unmeasured"]
    cct = max(r["cct_s"] for r in got)
    last = max(r["last_retx_at"] for r in got)
    to_last = f"{(last - failed_at) * 1e3:.0f}" if failed_at and last > failed_at else "-"
    return [link, how, policy, f"{cct * 1e3:.0f}", to_last,
            str(sum(r["packets_retransmitted"] for r in got)),
            str(sum(r["timeouts"] for r in got)),
            str(sum(r.get("repicks", 0) for r in got)), "yes" if failed_at else "no",
            "yes" if all(r["ok"] for r in got) else "NO", column(got)]


FAILURE_HEAD = ["link", "failure", "policy", "CCT ms", "failure -> last retx ms", "retx",
                "timeouts", "re-picks", "hit mid-run", "exact", "faithful"]
EXACT = FAILURE_HEAD.index("exact")


def failure_table(rows: list[list]) -> str:
    return format_table(FAILURE_HEAD, rows)
