"""What one rank process does: join the communicator, run a list of collectives, check each
result against numpy, and write one JSON line per run (CCT, bytes, retransmissions, ...).

Run as `python -m collectives.runner SPEC.json` (the launcher does this per namespace)."""
from __future__ import annotations

import resource
import struct
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from fabricmodel.topology import load

from . import algorithms, fabric_view, fidelity, mcast, netreduce, switchml
from .comm import CommConfig, Communicator
from .lb import host_class
from .rank_spec import RankSpec, rank_main
from .transport import TransportConfig

DTYPES = {"int32": np.int32, "float32": np.float32}
ALGORITHMS = {
    ("allreduce", "ring"): algorithms.allreduce_ring,
    ("allreduce", "halving-doubling"): algorithms.allreduce_halving_doubling,
    ("allreduce", "direct"): algorithms.allreduce_direct,
    ("reduce-scatter", "ring"): algorithms.reduce_scatter_ring,
    ("allgather", "ring"): algorithms.allgather_ring,
    ("alltoall", "direct"): algorithms.alltoall,
    ("allgather", "multicast"): mcast.allgather_multicast,
    ("allreduce", "switchml"): switchml.allreduce_switchml,
    ("allreduce", "netreduce"): netreduce.allreduce_netreduce,
}


def elements_of(nbytes: int, dtype: str) -> int:
    """How many elements of `dtype` `nbytes` bytes per rank hold (whole elements)."""
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; choose from {sorted(DTYPES)}")
    return nbytes // np.dtype(DTYPES[dtype]).itemsize


def make_input(seed: int, rank: int, dtype: str, elements: int) -> np.ndarray:
    """Rank `rank`'s input of a run; int32 spans the whole range so sums wrap around."""
    rng = np.random.default_rng([seed, rank])
    if dtype == "int32":
        return rng.integers(-2**31, 2**31, elements, dtype=np.int64).astype(np.int32)
    return rng.standard_normal(elements).astype(np.float32)


def expected(collective: str, inputs: list[np.ndarray], rank: int) -> np.ndarray:
    """numpy's answer for rank `rank`."""
    n = len(inputs)
    if collective == "allreduce":
        return np.sum(inputs, axis=0, dtype=inputs[0].dtype)
    if collective == "reduce-scatter":
        return np.sum(inputs, axis=0, dtype=inputs[0].dtype)[
            algorithms.segments(len(inputs[0]), n)[rank]]
    if collective == "allgather":
        return np.concatenate(inputs)
    if collective == "alltoall":
        return np.concatenate([x[algorithms.segments(len(x), n)[rank]] for x in inputs])
    raise ValueError(f"unknown collective {collective!r}")


def matches(got: np.ndarray, want: np.ndarray) -> bool:
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if got.dtype == np.float32:
        return bool(np.allclose(got, want, rtol=1e-4, atol=1e-4 * len(got) ** 0.5))
    return bool(np.array_equal(got, want))


def installed_routing(topo, view: dict | None):
    """Ethereal's view of the paths: the fabric as fabricd installed it (links down left out),
    not the topology file (collectives.fabric_view)."""
    if topo is None or not view:
        return None
    return fabric_view.installed_routing(topo, view)


def topology_hosts(path: str | None, ips: list[str]):
    """The fabric's topology model and the host name of every rank (by its address)."""
    if not path:
        return None, None
    topo = load(path)
    return topo, [topo.host_by_ip(ip).name for ip in ips]


def transport_config(spec: RankSpec) -> TransportConfig:
    """The rank's transport: the launch seed varies the QPs' ports (other ECMP paths); REPS
    gets an ACK for every packet, so every delivered packet's entropy comes back."""
    opts = {"port_seed": spec.seed} | spec.transport
    ack_every = host_class(spec.policy).ack_every
    if ack_every is not None:
        opts["ack_every"] = ack_every
    return TransportConfig(**opts)


def communicator(spec: RankSpec) -> Communicator:
    """This rank's communicator as the launcher's spec describes it (joins rank 0)."""
    topo, hosts = topology_hosts(spec.topology, spec.ips)
    routing = installed_routing(topo, spec.fabric)
    return Communicator(CommConfig(spec.ips, spec.rank, transport_config(spec), spec.policy,
                                   spec.qps, spec.seed, spec.port, spec.timeout,
                                   spec.join_timeout, topo, hosts, spec.dev, routing))


# How far ahead rank 0 sets the common start: room for its message to reach every rank
START_LEAD_S = 0.05


def agree_start(comm: Communicator) -> float:
    """A wall-clock instant every rank starts the collective at (rank 0 picks it and sends it
    on the control QP; the ranks share the machine's clock). The barrier alone releases rank
    0 first and the others as its message reaches them, 2-5 ms apart in the emulation under
    load: an early rank's CCT counted that wait, 5-20% of a collective at 96-240 Mbit/s."""
    if comm.size == 1:
        return time.time()
    if comm.rank == 0:
        at = time.time() + START_LEAD_S
        ops = [comm.send_control(peer, struct.pack("!d", at)) for peer in range(1, comm.size)]
        comm.progress_until(lambda: all(op.done for op in ops), "the start instant's sends")
        return at
    got: list[bytes] = []

    def arrived() -> bool:
        msg = comm.poll_control(0)
        if msg is not None:
            got.append(msg)
        return bool(got)

    comm.progress_until(arrived, "the start instant")
    return struct.unpack("!d", got[0])[0]


def run_spec(spec: RankSpec) -> list[dict]:
    comm = communicator(spec)
    out_dir = Path(spec.out) if spec.out else None
    rows = []
    try:
        for i, run in enumerate(spec.runs):
            rows.append(_one(comm, spec, i, run, out_dir))
        comm.barrier()
    finally:
        comm.close()
    return rows


def _one(comm: Communicator, spec: RankSpec, i: int, run: dict, out_dir: Path | None) -> dict:
    key = (run["collective"], run["algo"])
    if key not in ALGORITHMS:
        raise ValueError(f"no algorithm {run['algo']!r} for {run['collective']!r}; "
                         f"known: {sorted(ALGORITHMS)}")
    fn = ALGORITHMS[key]
    seed = run.get("seed", i)
    inputs = [make_input(seed, r, run["dtype"], run["elements"]) for r in range(comm.size)]
    kwargs = run.get("options", {})
    comm.barrier()
    # several jobs posted at one wall-clock instant (FSDP's case), or this job's ranks at one
    start_at = run["start_at"] if "start_at" in run else agree_start(comm)
    time.sleep(max(0.0, start_at - time.time()))
    before = comm.stats.as_dict()
    repicks = comm.policy.repicks
    # the wall clock for the rows' readers, CLOCK_MONOTONIC (which the switches' fidelity
    # monitors keep, in every namespace) for the collective's window
    started = time.time()
    t0, c0 = time.monotonic(), time.process_time()
    u0 = resource.getrusage(resource.RUSAGE_SELF).ru_utime
    w0 = fidelity.thread_waits()
    got = fn(comm, inputs[comm.rank], **kwargs)
    cct, cpu = time.monotonic() - t0, time.process_time() - c0
    runq_wait = fidelity.wait_between(w0, fidelity.thread_waits())
    user = resource.getrusage(resource.RUSAGE_SELF).ru_utime - u0
    after = comm.stats.as_dict()
    delta = {k: after[k] - before[k] for k in after}
    if out_dir is not None:
        np.save(out_dir / f"run{i}_rank{comm.rank}.npy", got)
    return {"run": i, "collective": run["collective"], "algo": run["algo"],
            "dtype": run["dtype"], "elements": run["elements"], "ranks": comm.size,
            "rank": comm.rank, "policy": spec.policy,
            "reliability": comm.ep.cfg.reliability, "started_at": started,
            "started_mono": t0, "cct_s": cct, "cpu_s": cpu,
            "cpu_user_s": user,
            "ok": matches(got, expected(run["collective"], inputs, comm.rank)),
            "bytes_injected": delta["bytes_injected"], "packets_sent": delta["packets_sent"],
            "packets_retransmitted": delta["retransmitted"],
            "duplicates_received": delta["duplicates"], "timeouts": delta["timeouts"],
            "reorderings": delta["out_of_order"], "icrc_errors": delta["icrc_errors"],
            "bad_packets": delta["bad_packets"], "repair_bytes": delta["repair_bytes"],
            "last_retx_at": after["last_retx_at"], "repicks": comm.policy.repicks - repicks,
            "naks_received": delta["naks_received"], "cnps_received": delta["cnps_received"],
            "data_packets": delta["data_packets"],
            "stall_s": delta["stall_s"], "stall_max_s": after["stall_max_s"],
            "runq_wait_s": runq_wait,
            "transport": asdict(comm.ep.cfg) | {"session": None}}


if __name__ == "__main__":
    sys.exit(rank_main(run_spec, sys.argv[1:]))
