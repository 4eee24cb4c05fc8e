"""QP setup rendezvous and barriers over TCP to rank 0 (like NCCL's bootstrap network).

Every rank connects to rank 0 and says who it is; rank 0 answers once all ranks are there
with a session number (it seeds every QP's initial PSN, so packets of an earlier run are never
taken for this one). The connections stay open for barriers."""
from __future__ import annotations

import json
import random
import select
import socket
import time

DEFAULT_PORT = 18515


class RendezvousError(RuntimeError):
    """A rank could not reach rank 0, or not every rank joined in time."""


class Rendezvous:
    def __init__(self, rank: int, ips: list[str], port: int = DEFAULT_PORT,
                 timeout: float = 15.0) -> None:
        self.rank, self.ips, self.port, self.timeout = rank, ips, port, timeout
        self.conns: dict[int, socket.socket] = {}
        self._bufs: dict[int, bytes] = {}
        self.session = 0
        self.barriers = 0

    # ---- setup --------------------------------------------------------------------------
    def connect(self) -> int:
        if self.rank == 0:
            self._serve()
        else:
            self._join()
        return self.session

    def _serve(self) -> None:
        srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            srv.bind((self.ips[0], self.port))
        except OSError as exc:
            raise RendezvousError(f"rank 0 cannot listen on {self.ips[0]}:{self.port}: "
                                  f"{exc.strerror}") from exc
        srv.listen(len(self.ips))
        deadline = time.monotonic() + self.timeout
        with srv:
            while len(self.conns) < len(self.ips) - 1:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([srv], [], [], left)[0]:
                    missing = sorted(set(range(1, len(self.ips))) - set(self.conns))
                    raise RendezvousError(f"ranks {missing} did not join rank 0 at "
                                          f"{self.ips[0]}:{self.port} within {self.timeout:.0f} s")
                conn, _ = srv.accept()
                hello = self._read_json(conn, deadline)
                peer = hello.get("rank")
                if not isinstance(peer, int) or not 0 < peer < len(self.ips) \
                        or peer in self.conns or hello.get("ip") != self.ips[peer]:
                    conn.close()
                    raise RendezvousError(f"unexpected rendezvous hello {hello!r}")
                self.conns[peer] = conn
        self.session = random.getrandbits(32)
        for conn in self.conns.values():
            conn.sendall(json.dumps({"session": self.session}).encode() + b"\n")

    def _join(self) -> None:
        deadline = time.monotonic() + self.timeout
        last = ""
        while True:
            try:
                conn = socket.create_connection((self.ips[0], self.port),
                                                timeout=max(0.1, deadline - time.monotonic()))
                break
            except OSError as exc:
                last = exc.strerror or str(exc)
                if time.monotonic() >= deadline:
                    raise RendezvousError(f"rank {self.rank} cannot reach rank 0 at "
                                          f"{self.ips[0]}:{self.port} within {self.timeout:.0f} s: "
                                          f"{last}") from exc
                time.sleep(0.05)
        conn.sendall(json.dumps({"rank": self.rank, "ip": self.ips[self.rank]}).encode() + b"\n")
        self.conns[0] = conn
        self.session = self._read_json(conn, deadline)["session"]

    def _read_json(self, conn: socket.socket, deadline: float) -> dict:
        data = b""
        while not data.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([conn], [], [], left)[0]:
                raise RendezvousError("rendezvous peer went silent")
            chunk = conn.recv(4096)
            if not chunk:
                raise RendezvousError("rendezvous peer closed the connection")
            data += chunk
        return json.loads(data)

    # ---- barriers (non-blocking, so the caller keeps the transport progressing) ----------
    def barrier_start(self) -> None:
        self.barriers += 1
        self._arrived: set[int] = set()
        if self.rank != 0:
            self.conns[0].sendall(b"B")

    def barrier_poll(self) -> bool:
        ready = select.select(list(self.conns.values()), [], [], 0)[0]
        for peer, conn in self.conns.items():
            if conn in ready:
                got = conn.recv(64)
                if not got:
                    raise RendezvousError(f"rank {peer} left during barrier {self.barriers}")
                self._bufs[peer] = self._bufs.get(peer, b"") + got
        if self.rank == 0:
            for peer, buf in self._bufs.items():
                if buf and peer not in self._arrived:
                    self._arrived.add(peer)
                    self._bufs[peer] = buf[1:]
            if len(self._arrived) == len(self.conns):
                for conn in self.conns.values():
                    conn.sendall(b"B")
                return True
            return False
        buf = self._bufs.get(0, b"")
        if buf:
            self._bufs[0] = buf[1:]
            return True
        return False

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()
        self.conns.clear()
