"""The load-balancing policies: the one registration every part reads.

A policy is a name over an entropy mechanism (how each packet of a queue pair gets its UDP
source port, the ECMP entropy) and what the demo may expect of it. The hosts
(`collectives.lb`) map the mechanism onto their policy class and its tc eBPF program, the
simulator (`sim/`) onto its engine's entropy mode; the CLIs, the demo and the benchmarks list
`names()`. A policy over an existing mechanism is one `register` call here; a new mechanism
also needs its host class, eBPF program and engine mode (docs/extending.md)."""
from __future__ import annotations

from dataclasses import dataclass

# ecmp: one fixed port per QP, the switches hash it; spray: a random port per data packet;
# reps: REPS's recycled entropy; pinned: a planner chooses each sub-flow's port (Ethereal)
MECHANISMS = ("ecmp", "spray", "reps", "pinned")
# the policy every table compares the others with
BASELINE = "ecmp"


@dataclass(frozen=True)
class Policy:
    name: str
    mechanism: str
    summary: str
    # A silently failed link (it drops, nobody is told) keeps receiving the flows hashed onto
    # it unless the policy moves them on a timeout: hash ECMP does not, and may give up.
    survives_silent_failure: bool = True

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("-", "").isalnum() or \
                self.name != self.name.lower():
            raise ValueError(f"a policy name is lower-case letters, digits and '-', "
                             f"not {self.name!r}")
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"policy {self.name}: unknown mechanism {self.mechanism!r}; "
                             f"choose from {MECHANISMS}")


_REGISTRY: dict[str, Policy] = {}


def register(policy: Policy) -> Policy:
    """Adds `policy`; a second policy of the same name is refused (names are what every CLI,
    result row and table is keyed by)."""
    if policy.name in _REGISTRY:
        raise ValueError(f"a policy named {policy.name!r} is registered already")
    _REGISTRY[policy.name] = policy
    return policy


def names() -> tuple[str, ...]:
    """Every registered policy's name, in registration order."""
    return tuple(_REGISTRY)


def get(name: str) -> Policy:
    """The policy named `name`; ValueError naming the registered ones otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choose from "
                         f"{list(_REGISTRY)}") from None


def parse_list(text: str | None) -> list[str]:
    """A comma-separated list of policy names (empty or None: every registered policy);
    ValueError naming the unknown ones."""
    items = [t for t in (text or "").split(",") if t] or list(_REGISTRY)
    bad = [t for t in items if t not in _REGISTRY]
    if bad:
        raise ValueError(f"unknown policy {bad}; choose from {list(_REGISTRY)}")
    return items


register(Policy("ecmp", "ecmp", "hash ECMP: each QP keeps its port, the switches hash it onto "
                "one path", survives_silent_failure=False))
register(Policy("spray", "spray", "per-packet spraying: a random port per data packet"))
register(Policy("reps", "reps", "REPS: the ports of acknowledged packets are recycled, a "
                "timeout or an ECN echo evicts one"))
register(Policy("ethereal", "pinned", "Ethereal: flows split on arrival and each sub-flow "
                "pinned to one path; a timeout re-pins it"))
