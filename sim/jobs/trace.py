"""The job trace: a documented distribution, generated from a seed.

- Sizes (GPUs, one per host): 2, 4, 8, 16, 32, 64 with probabilities SIZE_WEIGHTS, skewed
  toward small jobs as in published GPU-cluster traces.
- Service time alone (no contention): log-normal, median MEDIAN_MIN minutes, sigma SIGMA.
- Communication share of an iteration when the job spans leaves: uniform in COMM_SHARE
  (the rest is compute, which contention does not slow).
- Arrivals: Poisson, with the rate that makes the offered load (GPU-minutes asked per minute
  over the cluster's GPUs) equal `load`.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

SIZES = (2, 4, 8, 16, 32, 64)
SIZE_WEIGHTS = (0.30, 0.25, 0.20, 0.12, 0.08, 0.05)
MEDIAN_MIN = 30.0
SIGMA = 1.0
COMM_SHARE = (0.3, 0.7)
ITERATIONS = 50            # contention is re-read every iteration (1/50 of a job)


@dataclass(frozen=True)
class Job:
    name: str
    arrival: float         # minutes
    gpus: int
    service: float         # minutes when alone on a non-blocking fabric
    comm_share: float


def mean_gpu_minutes() -> float:
    """E[gpus x service] of the distribution (log-normal mean = median x e^(sigma^2/2))."""
    mean_size = sum(s * w for s, w in zip(SIZES, SIZE_WEIGHTS, strict=True))
    return mean_size * MEDIAN_MIN * math.exp(SIGMA ** 2 / 2)


def generate(jobs: int, gpus: int, load: float, seed: int) -> list[Job]:
    if jobs < 1 or gpus < max(SIZES) or not 0 < load:
        raise ValueError(f"need jobs >= 1, gpus >= {max(SIZES)}, load > 0; got "
                         f"{jobs}, {gpus}, {load}")
    rng = random.Random(seed)
    rate = load * gpus / mean_gpu_minutes()          # jobs per minute
    t, out = 0.0, []
    for i in range(jobs):
        t += rng.expovariate(rate)
        out.append(Job(f"j{i}", t, rng.choices(SIZES, SIZE_WEIGHTS)[0],
                       rng.lognormvariate(math.log(MEDIAN_MIN), SIGMA),
                       rng.uniform(*COMM_SHARE)))
    return out
