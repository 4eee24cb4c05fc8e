"""Load-balancing policies, the hosts' side: how the messages of one collective step are split
over queue pairs, and what a rank writes into its policy's tc eBPF program (ebpf/). The source
port of a packet is never chosen here: the transport sends each QP with one fixed port, as a
NIC does, and the program attached to the rank's interface decides every packet's port.

The policies are registered in `fabricmodel.policies`; each names a mechanism, and one class
here serves each mechanism (`HOSTS`), with the program it needs (`program_of`):

    ecmp      no program: each QP keeps its port, the switches hash it onto one path
    spray     ebpf/spray: a random port per data packet (configured by the launcher)
    reps      ebpf/reps: each QP is registered as a connection; a retransmission timeout
              evicts the entropy of the packet that timed out
    pinned    ebpf/pin: one QP per sub-flow (NCCL_IB_QPS_PER_CONNECTION); the rank's Ethereal
              planner pins each QP's port, keyed by (destination IP, destination QPN); a
              timeout marks the path failed for that ToR and re-pins the QP; the QPs of one
              flow share its window (NCCL's QPs of one connection share its slots)
A policy sees all the sends of one step at once, which is the moment Ethereal splits flows
("on arrival")."""
from __future__ import annotations

from dataclasses import dataclass

import ebpf
from ebpf import Program
from fabricmodel import hashing, policies, rocev2
from fabricmodel.ethereal import EtherealRank, Flow, SubFlow
from fabricmodel.rocev2 import KIND_ACK
from fabricmodel.topology import Hop

from .transport import SendQP
from .wire import echo_sport

REPS_FIRST_WINDOW = 16
ACK_PORT_TRIES = 256


@dataclass(frozen=True)
class Piece:
    offset: int
    nbytes: int
    qp: int


def even_split(nbytes: int, parts: int, align: int) -> list[tuple[int, int]]:
    """NCCL_IB_SPLIT_DATA_ON_QPS: (offset, bytes) of up to `parts` equal runs of whole
    `align`-byte units (empty runs are left out)."""
    units = -(-nbytes // align)
    out = []
    for i in range(parts):
        lo = units * i // parts * align
        hi = min(units * (i + 1) // parts * align, nbytes)
        if hi > lo:
            out.append((lo, hi - lo))
    return out


class Policy:
    """The hosts' side of one mechanism (`fabricmodel.policies.MECHANISMS`); `name` is the
    registered policy's."""
    mechanism = ""
    program: type[Program] | None = None     # the tc program on every rank's interface
    ack_every: int | None = None             # data packets per ACK it needs (None: any)
    uses_fabric_view = False                 # plans paths: wants the fabric as installed

    def __init__(self, rank: int, ips: list[str], qps: int = 1, align: int = 1024,
                 program: Program | None = None, name: str = "") -> None:
        if not 1 <= qps <= 128:
            raise ValueError(f"QPs per connection must be 1..128 (NCCL's range), not {qps}")
        self.name = name or self.mechanism
        if self.program is not None and program is None:
            raise ValueError(f"policy {self.name} needs its eBPF program on the rank's "
                             "interface (collectives.launch attaches it)")
        self.rank, self.ips, self.qps, self.align = rank, ips, qps, align
        self.program = program
        self.repicks = 0                          # Ethereal: sub-flows moved after a timeout

    def plan(self, sends: dict[int, int]) -> dict[int, list[Piece]]:
        return {peer: [Piece(off, n, i)
                       for i, (off, n) in enumerate(even_split(nbytes, self.qps, self.align))]
                for peer, nbytes in sends.items()}

    def prepare(self, qp: SendQP) -> None:
        """Called for every QP a piece is posted on, before its first packet."""

    def on_timeout(self, qp: SendQP, psn: int) -> None:
        """A retransmission timeout of packet `psn` on `qp`."""


class Ecmp(Policy):
    """One fixed source port per QP: the QP follows one hashed path."""
    mechanism = "ecmp"


class SprayPolicy(Policy):
    """ebpf/spray gives every data packet a random port; nothing to do per rank."""
    mechanism, program = "spray", ebpf.Spray


class RepsPolicy(Policy):
    """ebpf/reps: every QP of this rank is a REPS connection; the receiver ACKs every packet
    (the runner sets ack_every=1), so every delivered packet's entropy comes back."""
    mechanism, program, ack_every = "reps", ebpf.Reps, 1

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._known: set[tuple[int, int]] = set()

    def prepare(self, qp: SendQP) -> None:
        if (qp.peer, qp.dqpn) in self._known:
            return
        self._known.add((qp.peer, qp.dqpn))
        ack_qpn = rocev2.qpn(KIND_ACK, qp.peer, qp.idx)   # what the peer's ACKs address
        self.program.add_connection(self.ips[qp.peer], qp.dqpn, ack_qpn, self.ips[self.rank],
                                    first_window=REPS_FIRST_WINDOW)

    def on_timeout(self, qp: SendQP, psn: int) -> None:
        if (qp.peer, qp.dqpn) in self._known:      # control QPs are not REPS connections
            self.program.timeout(self.ips[qp.peer], qp.dqpn, psn=psn)


class Ethereal(Policy):
    """Split on arrival with fabricmodel.ethereal: flows of one step to remote racks are
    balanced over the uplinks, each sub-flow on its own QP, whose port the planner pins in
    ebpf/pin. Without a topology every peer is rack-local and a flow stays one QP.

    A pipelined ring step sends one flow as slices (collectives.algorithms): every slice of a
    step arrives with the same peers and sizes, so the planner splits the first and the rest
    ride its sub-flows (same QPs, same pinned ports), as the paper plans a flow once on
    arrival. Re-planning and re-pinning each 16 KiB slice cost 320-480 us of CPU, a third of
    the slice's time on a 96 Mbit/s link. A timeout (a path marked failed) forgets the plans."""
    mechanism, program, uses_fabric_view = "pinned", ebpf.Pin, True

    def __init__(self, rank: int, ips: list[str], qps: int = 1, align: int = 1024,
                 program: Program | None = None, planner: EtherealRank | None = None,
                 hosts: list[str] | None = None, name: str = "") -> None:
        super().__init__(rank, ips, qps, align, program, name)
        self.planner, self.hosts = planner, hosts
        self.subs: dict[tuple[int, int], SubFlow] = {}
        self.pieces: dict[int, int] = {}          # peer -> QPs its flow is split over now
        # an arrival's (peer, bytes) -> its plan, the sub-flows by (peer, QP) and the split
        self._plans: dict[tuple, tuple[dict[int, list[Piece]], dict, dict[int, int]]] = {}
        self._pinned: dict[tuple[int, int], int | None] = {}   # (peer, dqpn) -> port written
        self._ports: dict[tuple, int] = {}        # _port's answers
        if planner is not None:
            self._warm_up()

    def _warm_up(self) -> None:
        """Pays the planner's one-time costs now, as a NIC driver does when it loads, not on
        the first collective's clock: numpy's lazy imports, the paths and port tables of every
        leaf, the reverse-path port search. A spare planner does it, so this rank's own
        (its shuffles, its ports) starts as new. It took 5-10 ms of the first arrival's CPU,
        a sixth of an all-to-all's time at 96 Mbit/s."""
        me, mtu = self.hosts[self.rank], self.planner.mtu
        spare = EtherealRank(self.planner.topo, me, routing=self.planner.routing, mtu=mtu)
        flows = [Flow(me, host, 2 * mtu, dst_qp=peer) for peer, host in enumerate(self.hosts)
                 if peer != self.rank]
        # all at once (whole flows, the table lookup), then each alone (split, the search)
        for arrival in [flows] + [[f] for f in flows]:
            for sub in spare.plan(arrival):
                if sub.path is not None:
                    self._port(sub)

    def plan(self, sends: dict[int, int]) -> dict[int, list[Piece]]:
        if self.planner is None:
            return super().plan(sends)
        key = tuple(sorted(sends.items()))
        known = self._plans.get(key)
        if known is None:
            known = self._plans[key] = self._split(sends)
        out, subs, self.pieces = known
        self.subs.update(subs)
        return dict(out)

    def _split(self, sends: dict[int, int]) -> tuple[dict[int, list[Piece]], dict, dict[int, int]]:
        me = self.hosts[self.rank]
        flows = [Flow(me, self.hosts[peer], n, dst_qp=peer) for peer, n in sends.items()]
        out: dict[int, list[Piece]] = {peer: [] for peer in sends}
        subs = {}
        for sub in self.planner.plan(flows):
            peer = sub.flow.dst_qp
            subs[peer, sub.index] = sub
            out[peer].append(Piece(sub.offset, sub.bytes, sub.index))
        return out, subs, {peer: len(pieces) for peer, pieces in out.items()}

    def prepare(self, qp: SendQP) -> None:
        # The sub-flows of one flow share its window, as NCCL's QPs of one connection share
        # its NCCL_STEPS slots: splitting moves bytes onto other paths, it does not multiply
        # the data in flight (one window per QP would deepen the queues the ACKs of other
        # flows wait in, and the other policies send each flow on one QP with one window).
        qp.window = max(1, -(-qp.ep.cfg.window // self.pieces.get(qp.peer, 1)))
        sub = self.subs.get((qp.peer, qp.idx))
        # rack-local: the QP's own port (no pin)
        self._pin(qp, None if sub is None or sub.path is None else self._port(sub))

    def _pin(self, qp: SendQP, port: int | None) -> None:
        """Writes the QP's pin unless it holds that port already (a map update is a syscall)."""
        key = (qp.peer, qp.dqpn)
        if key in self._pinned and self._pinned[key] == port:
            return
        if port is None:
            self.program.unpin(self.ips[qp.peer], qp.dqpn)
        else:
            self.program.pin(self.ips[qp.peer], qp.dqpn, port)
        self._pinned[key] = port

    def on_timeout(self, qp: SendQP, psn: int) -> None:
        sub = self.subs.get((qp.peer, qp.idx))
        if self.planner is None or sub is None or sub.path is None:
            return
        sub = self.subs[qp.peer, qp.idx] = self.planner.on_timeout(sub)
        self._plans.clear()                      # a path is failed: plan new arrivals afresh
        self.repicks += 1
        self._pin(qp, self._port(sub))

    def _port(self, sub: SubFlow) -> int:
        """The planner's port steers the data; the receiver's ACKs echo that port in their
        own source port (wire.echo_sport), so they are hashed too. A port that also brings the ACKs back over
        the same links (the reverse path) is preferred: then a timeout on a path means that
        path, and Ethereal's failure marks stay true. The planner's port when none is found."""
        key = (sub.flow.src, sub.flow.dst, sub.path, sub.sport)
        if key not in self._ports:
            self._ports[key] = self._search_port(sub)
        return self._ports[key]

    def _search_port(self, sub: SubFlow) -> int:
        routing = self.planner.routing
        topo = self.planner.topo
        src, dst = topo.host(sub.flow.src), topo.host(sub.flow.dst)
        fwd, rev = [], []
        for hop in sub.path.hops:
            group = routing.group(hop.src, dst.leaf)
            if len(group) > 1:
                fwd.append((len(group), group.index(hop), hashing.switch_salt(hop.src)))
            back = Hop(hop.dst, hop.dst_port, hop.src, hop.src_port, hop.link)
            group = routing.group(back.src, src.leaf)
            if len(group) > 1:
                if back not in group:
                    return sub.sport
                rev.append((len(group), group.index(back), hashing.switch_salt(back.src)))
        span = rocev2.SPORT_MAX - rocev2.SPORT_MIN + 1
        for k in range(ACK_PORT_TRIES):          # about 1 in (group sizes) ports fits
            sport = rocev2.SPORT_MIN + (sub.sport - rocev2.SPORT_MIN + k) % span
            if all(hashing.ecmp_member(src.ip, dst.ip, rocev2.UDP, sport, rocev2.ROCEV2_PORT,
                                       n, salt) == m for n, m, salt in fwd) and \
                    all(hashing.ecmp_member(dst.ip, src.ip, rocev2.UDP, echo_sport(sport),
                                            rocev2.ROCEV2_PORT, n, salt) == m for n, m, salt in rev):
                return sport
        return sub.sport


HOSTS: dict[str, type[Policy]] = {cls.mechanism: cls
                                  for cls in (Ecmp, SprayPolicy, RepsPolicy, Ethereal)}


def host_class(name: str) -> type[Policy]:
    """The class that runs registered policy `name` on a rank (ValueError if unknown)."""
    return HOSTS[policies.get(name).mechanism]


def program_of(name: str) -> type[Program] | None:
    """The tc program policy `name` runs on every rank's interface (None: nothing)."""
    return host_class(name).program


def make_policy(name: str, rank: int, ips: list[str], *, qps: int = 1, seed: int = 0,
                align: int = 1024, program: Program | None = None, topology=None,
                hosts: list[str] | None = None, routing=None) -> Policy:
    cls = host_class(name)
    if cls is not Ethereal:
        return cls(rank, ips, qps, align, program, name)
    planner = None
    if topology is not None:
        # every rank its own shuffle, another one per seed (Ethereal, arXiv 2407.00550:
        # "shuffled with the rank as seed")
        planner = EtherealRank(topology, hosts[rank], mtu=align, seed=seed << 16 | rank,
                               routing=routing)
    return Ethereal(rank, ips, qps, align, program, planner, hosts, name)
