"""Per-packet choice of the UDP source port (the ECMP entropy) of one queue pair.

Fixed: one path per QP (ECMP baseline, Ethereal sub-flows). Spray: a fresh random port per
packet. REPS: recycle the entropy of unmarked ACKs (REFERENCES.md)."""
from __future__ import annotations

import random
from collections import deque

from controller.hashing import connection_sport

from .wire import SPORT_MAX, SPORT_MIN


def derived_sport(*key: object) -> int:
    """A stable port in 0xC000-0xFFFF for a QP, as a NIC derives one from the QP numbers."""
    return connection_sport(*key)


class FixedEntropy:
    def __init__(self, sport: int) -> None:
        if not SPORT_MIN <= sport <= SPORT_MAX:
            raise ValueError(f"source port {sport} is outside 0x{SPORT_MIN:04X}-0x{SPORT_MAX:04X}")
        self.sport = sport

    def next(self) -> int:
        return self.sport

    def on_ack(self, entropy: int, ece: bool) -> None:
        pass

    def on_timeout(self, entropy: int) -> None:
        pass


class SprayEntropy(FixedEntropy):
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.sport = SPORT_MIN

    def next(self) -> int:
        return self.rng.randint(SPORT_MIN, SPORT_MAX)


class RepsEntropy(FixedEntropy):
    """REPS: explore `explore` random entropies round-robin first; afterwards reuse the oldest
    entropy that an unmarked ACK returned (cache of `cache_size`), else a random one. A marked
    echo or a timeout evicts the entropy."""

    def __init__(self, seed: int, cache_size: int = 8, explore: int = 16) -> None:
        self.rng = random.Random(seed)
        self.cache: deque[int] = deque()
        self.cache_size = cache_size
        self.explore = [self.rng.randint(SPORT_MIN, SPORT_MAX) for _ in range(explore)]
        self.sent = 0
        self.sport = self.explore[0]

    def next(self) -> int:
        self.sent += 1
        if self.sent <= len(self.explore):
            return self.explore[self.sent - 1]
        if self.cache:
            return self.cache.popleft()
        return self.rng.randint(SPORT_MIN, SPORT_MAX)

    def on_ack(self, entropy: int, ece: bool) -> None:
        if ece:
            self._evict(entropy)
        elif len(self.cache) < self.cache_size and SPORT_MIN <= entropy <= SPORT_MAX:
            self.cache.append(entropy)

    def on_timeout(self, entropy: int) -> None:
        self._evict(entropy)

    def _evict(self, entropy: int) -> None:
        while entropy in self.cache:
            self.cache.remove(entropy)
