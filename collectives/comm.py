"""A communicator: one rank's view of the job (peers, transport, load-balancing policy).

Most collectives are written as steps: `exchange` posts every send and receive of one step
at once (like an NCCL group call) and runs the progress engine until all have completed. The
ring is pipelined instead (collectives.algorithms): it posts sends and receives one slice at a
time (`post_sends`, `post_recv`) and runs the engine until the next slice has arrived.
Messages between two ranks are matched in order: the k-th message rank a sends to rank b is
the k-th message b receives from a (the RETH rkey carries k)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import native
from .lb import Policy, make_policy, program_of
from .rendezvous import DEFAULT_PORT, Rendezvous
from .transport import Endpoint, Message, SendOp, TransportConfig


def open_endpoint(rank: int, peers: list[str], cfg: TransportConfig) -> Endpoint:
    """The rank's endpoint on the configured backend: the native data path where a C
    compiler exists (collectives/native), else the Python one (the reference)."""
    cfg.backend = cfg.backend or native.default_backend()
    if cfg.backend == "native":
        return native.NativeEndpoint(rank, peers, cfg)
    return Endpoint(rank, peers, cfg)


@dataclass
class CommConfig:
    ips: list[str]
    rank: int
    transport: TransportConfig
    policy: str = "ecmp"
    qps: int = 1
    seed: int = 0
    port: int = DEFAULT_PORT
    timeout: float = 60.0            # one wait: a collective step, a ring slice
    join_timeout: float = 15.0
    topology: object = None          # fabricmodel.topology.Topology, for Ethereal
    hosts: list[str] | None = None   # host name of every rank in `topology`
    dev: str | None = None           # this rank's interface: its policy's eBPF program is there
    routing: object = None           # fabricmodel.routing.Routing of the fabric as installed

    def __post_init__(self) -> None:
        if len(set(self.ips)) != len(self.ips) or not self.ips:
            raise ValueError(f"rank addresses must be distinct and non-empty: {self.ips}")
        if not 0 <= self.rank < len(self.ips):
            raise ValueError(f"rank {self.rank} is outside 0..{len(self.ips) - 1}")


@dataclass
class Recv:
    """A posted receive; key and msg are None for an empty message (nothing is sent)."""
    key: tuple[int, int] | None
    msg: Message | None

    def complete(self) -> bool:
        return self.msg is None or self.msg.complete()


class Communicator:
    def __init__(self, cfg: CommConfig) -> None:
        self.cfg = cfg
        self.rank, self.size = cfg.rank, len(cfg.ips)
        self.rdv = Rendezvous(cfg.rank, cfg.ips, cfg.port, cfg.join_timeout)
        cfg.transport.session = self.rdv.connect()
        self.ep = open_endpoint(cfg.rank, cfg.ips, cfg.transport)
        self.program = None
        program_cls = program_of(cfg.policy)
        if program_cls is not None:
            if not cfg.dev:
                raise ValueError(f"policy {cfg.policy} needs the rank's interface (its eBPF "
                                 "program is attached there)")
            self.program = program_cls.attached(cfg.dev)
        self.policy: Policy = make_policy(cfg.policy, cfg.rank, cfg.ips, qps=cfg.qps,
                                          seed=cfg.seed, align=cfg.transport.mtu,
                                          program=self.program, topology=cfg.topology,
                                          hosts=cfg.hosts, routing=cfg.routing)
        self.ep.timeout_hooks.append(self.policy.on_timeout)
        self._sent = [0] * self.size
        self._received = [0] * self.size
        self.groups: set[str] = set()          # multicast groups joined
        self.counters: dict[object, int] = {}  # per-protocol sequence numbers (tasks, chunks)

    @property
    def stats(self):
        return self.ep.stats

    def close(self) -> None:
        self.ep.close()
        self.rdv.close()
        if self.program is not None:
            self.program.close()

    def post_sends(self, sends: list[tuple[int, np.ndarray]]) -> list[SendOp]:
        """Posts one message to each peer (RDMA WRITEs on the QPs the policy plans: it sees
        the sends posted together at once) and returns their completions, done when every
        packet is acknowledged. The transport reads the arrays until then: the caller must
        not change them. Empty messages are not sent (both sides know the sizes)."""
        views = {peer: memoryview(np.ascontiguousarray(a)).cast("B") for peer, a in sends
                 if a.nbytes}
        if len(views) != len([1 for _, a in sends if a.nbytes]):
            raise ValueError("at most one message per peer in one post")
        ops = []
        for peer, pieces in self.policy.plan({p: len(v) for p, v in views.items()}).items():
            op = SendOp(len(pieces))
            msg_id = self._sent[peer]
            self._sent[peer] += 1
            for piece in pieces:
                self.policy.prepare(self.ep.sendqp(peer, piece.qp))
                self.ep.post_write(peer, piece.qp, msg_id, piece.offset,
                                   views[peer][piece.offset:piece.offset + piece.nbytes], op)
            ops.append(op)
        return ops

    def post_recv(self, peer: int, nbytes: int, into: np.ndarray | None = None) -> Recv:
        """The next message from `peer`, `nbytes` long, placed as its packets arrive (into
        `into`'s memory when given: a C-contiguous array of `nbytes` the caller then owns)."""
        if nbytes == 0:
            return Recv(None, None)
        view = None
        if into is not None:
            if not into.flags.c_contiguous or into.nbytes != nbytes:
                raise ValueError(f"a receive array must be C-contiguous and {nbytes} bytes")
            view = memoryview(into.reshape(-1).view(np.uint8))
        key = (peer, self._received[peer])
        self._received[peer] += 1
        msg = self.ep.message(*key)
        self.ep.stats.bad_packets += msg.post(nbytes, view)
        return Recv(key, msg)

    def take(self, recv: Recv) -> memoryview:
        """A complete message's bytes; the endpoint forgets it."""
        if recv.key is None:
            return memoryview(b"")
        del self.ep.msgs[recv.key]
        return recv.msg.buf

    def progress_until(self, done, what: str) -> None:
        """Runs the progress engine until `done()`; at most the configured timeout."""
        self.ep.progress_until(done, self.cfg.timeout, what)

    def exchange(self, sends: list[tuple[int, np.ndarray]],
                 recvs: list[tuple[int, int | np.ndarray]]) -> list[memoryview]:
        """One step: sends each array to its peer and receives from each peer `nbytes`, or
        straight into an array's memory, and returns when all are done (sends acknowledged);
        the received buffers come in the order of `recvs`."""
        ops = self.post_sends(sends)
        posted = [self.post_recv(peer, want.nbytes, want) if isinstance(want, np.ndarray)
                  else self.post_recv(peer, want) for peer, want in recvs]
        self.progress_until(lambda: all(o.done for o in ops) and all(r.complete() for r in posted),
                            "a collective step")
        return [self.take(r) for r in posted]

    def send_control(self, peer: int, data: bytes) -> SendOp:
        """A small SEND on QP 0 (tokens, repair requests); completes asynchronously."""
        op = SendOp(1)
        self.ep.post_send(peer, 0, data, op)
        return op

    def poll_control(self, peer: int) -> bytes | None:
        queue = self.ep.control[peer]
        return queue.popleft() if queue else None

    def barrier(self) -> None:
        """Every rank keeps serving its peers' retransmissions until all have arrived."""
        self.rdv.barrier_start()
        self.ep.progress_until(lambda: not self.ep.active and self.rdv.barrier_poll(),
                               self.cfg.timeout, "the barrier")
