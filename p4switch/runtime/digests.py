"""Digest lists (P4Runtime spec "DigestEntry"): per configured digest, a buffer of distinct
messages sent as one DigestList when it holds `max_list_size` of them or when its first one
has waited `max_timeout_ns`; a cache of the data sent and not yet acknowledged (kept up to
`ack_timeout_ns`) that suppresses the same data until its list is acked or times out."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from p4.v1 import p4runtime_pb2

from . import codec
from .errors import already_exists, invalid, not_found
from .schema import Schema

Update = p4runtime_pb2.Update


@dataclass
class _Digest:
    config: p4runtime_pb2.DigestEntry
    buffer: list[tuple] = field(default_factory=list)   # distinct messages, in arrival order
    first_ns: int = 0                                    # when the buffer's first one came
    cache: dict[tuple, int] = field(default_factory=dict)        # message -> its list id
    sent: dict[int, tuple[int, list]] = field(default_factory=dict)  # list id -> (ns, messages)


class DigestEngine:
    """Thread-safe: the data plane offers messages, the stream acks lists and a timer calls
    `due()` at `next_deadline()`."""

    def __init__(self, schema: Schema):
        self.schema = schema
        self._digests: dict[int, _Digest] = {}
        self._next_list_id = 1
        self._lock = threading.Lock()

    # --- DigestEntry writes and reads ------------------------------------------------------
    def write(self, kind: int, e: p4runtime_pb2.DigestEntry) -> None:
        self.schema.digest(e.digest_id)            # NOT_FOUND for an unknown id
        c = e.config
        if kind != Update.DELETE and (c.max_timeout_ns < 0 or c.ack_timeout_ns < 0
                                      or c.max_list_size < 0):
            raise invalid(f"Digest {e.digest_id}: negative timeout or list size")
        with self._lock:
            exists = e.digest_id in self._digests
            if kind == Update.INSERT and exists:
                raise already_exists(f"Digest {e.digest_id} already configured")
            if kind in (Update.MODIFY, Update.DELETE) and not exists:
                raise not_found(f"Digest {e.digest_id} not configured")
            if kind == Update.DELETE:
                del self._digests[e.digest_id]
                return
            stored = p4runtime_pb2.DigestEntry()
            stored.CopyFrom(e)
            if exists:
                self._digests[e.digest_id].config = stored
            else:
                self._digests[e.digest_id] = _Digest(stored)

    def read(self, q: p4runtime_pb2.DigestEntry) -> list[p4runtime_pb2.DigestEntry]:
        if q.digest_id:
            self.schema.digest(q.digest_id)
        with self._lock:
            return [d.config for i, d in self._digests.items()
                    if not q.digest_id or i == q.digest_id]

    # --- data plane -> lists ---------------------------------------------------------------
    def offer(self, digests: list[tuple[str, dict]]) -> list[p4runtime_pb2.DigestList]:
        """Buffer the data plane's messages -> the lists that are ready now."""
        now = time.monotonic_ns()
        out = []
        with self._lock:
            for name, values in digests:
                did = self.schema.digest_ids.get(name) or self._short_id(name)
                d = self._digests.get(did)
                if d is None:
                    continue
                members = self.schema.digest_members(did)
                msg = tuple(values[m] for m, _ in members) if members[0][0] else \
                    tuple(values.values())
                if msg in d.cache or msg in d.buffer:
                    continue
                if not d.buffer:
                    d.first_ns = now
                d.buffer.append(msg)
                c = d.config.config
                if c.max_timeout_ns == 0 or (c.max_list_size and len(d.buffer) >= c.max_list_size):
                    out.append(self._send(did, d, now))
        return out

    def due(self) -> list[p4runtime_pb2.DigestList]:
        """Lists whose first message has waited max_timeout_ns; expire unacked lists."""
        now = time.monotonic_ns()
        out = []
        with self._lock:
            for did, d in self._digests.items():
                if d.buffer and now - d.first_ns >= d.config.config.max_timeout_ns:
                    out.append(self._send(did, d, now))
                timeout = d.config.config.ack_timeout_ns
                for list_id in [i for i, (sent, _) in d.sent.items() if now - sent >= timeout]:
                    self._forget(d, list_id)
        return out

    def next_deadline(self) -> int | None:
        """monotonic ns of the next buffer flush or cache expiry (None: nothing pending)."""
        with self._lock:
            times = []
            for d in self._digests.values():
                if d.buffer:
                    times.append(d.first_ns + d.config.config.max_timeout_ns)
                if d.sent:
                    times.append(min(s for s, _ in d.sent.values())
                                 + d.config.config.ack_timeout_ns)
            return min(times, default=None)

    def ack(self, ack: p4runtime_pb2.DigestListAck) -> None:
        """The controller has the list: its data may be reported again."""
        with self._lock:
            d = self._digests.get(ack.digest_id)
            if d is not None:
                self._forget(d, ack.list_id)

    # --- helpers (under the lock) ----------------------------------------------------------
    def _send(self, did: int, d: _Digest, now: int) -> p4runtime_pb2.DigestList:
        lst = p4runtime_pb2.DigestList(digest_id=did, list_id=self._next_list_id,
                                       timestamp=time.time_ns())
        self._next_list_id += 1
        members = self.schema.digest_members(did)
        for msg in d.buffer:
            data = lst.data.add()
            if len(members) == 1 and members[0][0] == "":
                data.bitstring = codec.to_bytes(msg[0])
            else:
                for value in msg:
                    data.struct.members.add().bitstring = codec.to_bytes(value)
        if d.config.config.ack_timeout_ns:        # 0: the cache stays empty
            for msg in d.buffer:
                d.cache[msg] = lst.list_id
            d.sent[lst.list_id] = (now, d.buffer)
        d.buffer = []
        return lst

    @staticmethod
    def _forget(d: _Digest, list_id: int) -> None:
        _, messages = d.sent.pop(list_id, (0, []))
        for msg in messages:
            if d.cache.get(msg) == list_id:
                del d.cache[msg]

    def _short_id(self, name: str) -> int | None:
        for full, did in self.schema.digest_ids.items():
            if full.endswith("." + name):
                return did
        return None
