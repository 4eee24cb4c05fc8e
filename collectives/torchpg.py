"""The `torch.distributed` backend `mlfabric`: a PyTorch job's collectives over the project's
RoCEv2 transport and collectives, through the emulated fabric's switches.

    import collectives.torchpg          # registers "mlfabric"
    dist.init_process_group("mlfabric")  # RANK, WORLD_SIZE, MASTER_ADDR/PORT as for gloo

Registered on import (`Backend.register_backend(..., extended_api=True, devices=["cpu"])`),
as a Python subclass of `ProcessGroup`. One communicator per process (collectives.comm: the
project's rendezvous to rank 0, the endpoint, the load-balancing policy) carries every group;
a sub-group (`new_group`) is a view of it (collectives.group). Each operation is queued to
one worker thread per process and returns at once with a `Work` whose future completes when
the collective has: DDP posts its bucket all-reduces during backward and they run while
backward goes on. One thread keeps the operations in the order the caller issued them, which
is what matches messages between two processes.

Choices, per process group (`pg_options=Options(...)` of `init_process_group`/`new_group`)
or for all by the environment:
- MLFABRIC_ALLREDUCE: ring (default), halving-doubling, netreduce, switchml;
  MLFABRIC_ALLGATHER: ring (default) or multicast (also FSDP's all_gather_into_tensor);
  MLFABRIC_OPTIONS: JSON of each algorithm's options ({"netreduce": {"aggregator": [...],
  "job_id": 3}, "switchml": {...}, "multicast": {"link_mbps": 20}}), as a fabricd
  aggregation job gives them (`fabricctl job create`).
- MLFABRIC_POLICY (ecmp, spray, reps, ethereal; eBPF ones need the program attached, as
  `python -m collectives` does), MLFABRIC_QPS, MLFABRIC_TOPOLOGY (Ethereal's paths),
  MLFABRIC_PORT (the rendezvous; default rank_spec.RankSpec.port), MLFABRIC_IP (this rank's
  fabric address; default: the address this host reaches MASTER_ADDR from), MLFABRIC_TRANSPORT (JSON of
  collectives.transport.TransportConfig fields).
An operation the chosen in-network algorithm cannot do (a MAX, a dtype the switch does not
carry, a sub-group) runs on ring and says so once in the log (logger "collectives.torch");
one nothing implements raises `UnsupportedOp` naming it."""
from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import socket
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist

from . import algorithms, mcast, netreduce, switchml
from .comm import Communicator
from .group import GroupComm
from .lb import program_of
from .rank_spec import RankSpec
from .runner import communicator  # the same rank setup as `python -m collectives run`
from .torch_tensors import (
    ALLGATHER,
    ALLREDUCE,
    IN_NETWORK,
    UnsupportedOp,
    byte_array,
    fallback_reason,
    is_average,
    reduce_array,
    ufunc_of,
    write_back,
    write_bytes,
)

NAME = "mlfabric"
log = logging.getLogger("collectives.torch")
_IN_NETWORK_FN = {"netreduce": netreduce.allreduce_netreduce,
                  "switchml": switchml.allreduce_switchml}


@dataclass
class Options:
    """A process group's algorithms (defaults from the environment, see the module's doc)."""
    allreduce: str = field(default_factory=lambda: os.environ.get("MLFABRIC_ALLREDUCE", "ring"))
    allgather: str = field(default_factory=lambda: os.environ.get("MLFABRIC_ALLGATHER", "ring"))
    options: dict = field(default_factory=lambda: json.loads(
        os.environ.get("MLFABRIC_OPTIONS") or "{}"))

    def __post_init__(self) -> None:
        if self.allreduce not in ALLREDUCE:
            raise ValueError(f"mlfabric all-reduce {self.allreduce!r}: choose from "
                             f"{list(ALLREDUCE)}")
        if self.allgather not in ALLGATHER:
            raise ValueError(f"mlfabric Allgather {self.allgather!r}: choose from "
                             f"{list(ALLGATHER)}")
        if self.allreduce in IN_NETWORK and "aggregator" not in self.options.get(
                self.allreduce, {}):
            raise ValueError(f"mlfabric all-reduce {self.allreduce} needs its aggregation "
                             f"job's options (MLFABRIC_OPTIONS {{\"{self.allreduce}\": "
                             f"{{\"aggregator\": ..., \"job_id\": ...}}}}, from fabricd)")


# ---- the process: one communicator, one worker thread ----------------------------------
_spec: dict = {}


def configure(spec: dict) -> None:
    """The process's fabric as a launcher describes it (collectives.launch's rank spec:
    ips, transport, policy, qps, seed, port, timeout, topology, fabric, dev), in place of
    the environment; call before init_process_group."""
    _spec.clear()
    _spec.update(spec)


def _env_spec(rank: int, ips: list[str]) -> dict:
    return {"ips": ips, "rank": rank,
            "transport": json.loads(os.environ.get("MLFABRIC_TRANSPORT") or "{}"),
            "policy": os.environ.get("MLFABRIC_POLICY", RankSpec.policy),
            "qps": int(os.environ.get("MLFABRIC_QPS", RankSpec.qps)),
            "port": int(os.environ.get("MLFABRIC_PORT", RankSpec.port)),
            "topology": os.environ.get("MLFABRIC_TOPOLOGY")}


def own_address() -> str:
    """MLFABRIC_IP, else the source address of this host's route to MASTER_ADDR."""
    if os.environ.get("MLFABRIC_IP"):
        return os.environ["MLFABRIC_IP"]
    master = os.environ.get("MASTER_ADDR")
    if not master:
        raise ValueError("mlfabric needs this rank's fabric address: set MLFABRIC_IP or "
                         "MASTER_ADDR")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((master, 9))
        return s.getsockname()[0]


def _addresses(store, rank: int, size: int) -> list[str]:
    """Every rank's address, exchanged through the job's store."""
    store.set(f"mlfabric/ip/{rank}", own_address())
    ips = [store.get(f"mlfabric/ip/{r}").decode() for r in range(size)]
    if len(set(ips)) != size:
        raise ValueError(f"mlfabric ranks need distinct fabric addresses, got {ips} "
                         "(set MLFABRIC_IP per rank)")
    return ips


class _Process:
    """This process's communicator and the worker thread that runs every collective."""

    def __init__(self, comm: Communicator) -> None:
        self.comm = comm
        self.jobs: queue.Queue = queue.Queue()
        self.busy: dict[str, list[float]] = {}     # op -> [count, seconds, bytes injected]
        self.logged: set[str] = set()
        self.closed = False
        self.thread = threading.Thread(target=self._run, name="mlfabric", daemon=True)
        self.thread.start()

    def submit(self, kind: str, fn, result) -> _Work:
        fut = torch.futures.Future()
        self.jobs.put((kind, fn, result, fut))
        return _Work(fut)

    def _run(self) -> None:
        while (job := self.jobs.get()) is not None:
            kind, fn, result, fut = job
            t0, b0 = time.perf_counter(), self.comm.stats.bytes_injected
            try:
                fn()
            except BaseException as exc:      # the caller's wait() raises it
                log.error("mlfabric %s failed: %s", kind, exc)
                fut.set_exception(exc)
                continue
            count = self.busy.setdefault(kind, [0, 0.0, 0])
            count[0] += 1
            count[1] += time.perf_counter() - t0
            count[2] += self.comm.stats.bytes_injected - b0
            fut.set_result(result)

    def once(self, reason: str) -> None:
        if reason not in self.logged:
            self.logged.add(reason)
            log.warning("mlfabric: %s; running it on ring", reason)

    def close(self, barrier: bool) -> None:
        if self.closed:
            return
        if barrier:
            self.submit("barrier", self.comm.barrier, None).wait()
        self.closed = True
        self.jobs.put(None)
        self.thread.join(timeout=self.comm.cfg.timeout)
        self.comm.close()


_process: _Process | None = None


def stats() -> dict[str, dict[str, float]]:
    """Per operation kind of this process: how many ran, seconds spent in them on the worker,
    bytes the transport injected for them."""
    if _process is None:
        return {}
    return {k: {"count": c, "seconds": s, "bytes": b} for k, (c, s, b) in _process.busy.items()}


def _world_process(store, rank: int, size: int, timeout_s: float) -> _Process:
    global _process
    if _process is not None and not _process.closed:
        if (_process.comm.rank, _process.comm.size) != (rank, size):
            raise RuntimeError(f"mlfabric is already running as rank {_process.comm.rank} of "
                               f"{_process.comm.size}")
        return _process
    spec = dict(_spec) if _spec else {}
    ips = spec.get("ips") or _addresses(store, rank, size)
    if len(ips) != size:
        raise ValueError(f"{len(ips)} fabric addresses for a world of {size}")
    spec = _env_spec(rank, ips) | spec | {"rank": rank, "ips": ips}
    spec.setdefault("timeout", min(timeout_s, 120.0))
    if program_of(spec.get("policy", RankSpec.policy)) is not None and not spec.get("dev"):
        from .launch import interface_of
        spec["dev"] = interface_of(ips[rank], None)
    _process = _Process(communicator(RankSpec.from_dict(spec, "the fabric's configuration")))
    atexit.register(_process.close, False)
    return _process


# ---- Work ---------------------------------------------------------------------------------
class _Work(dist.Work):
    def __init__(self, fut: torch.futures.Future) -> None:
        super().__init__()
        self.fut = fut

    def wait(self, timeout=None) -> bool:
        self.fut.wait()
        return True

    def is_completed(self) -> bool:
        return self.fut.done()

    def is_success(self) -> bool:
        if not self.fut.done():
            return False
        try:
            self.fut.value()
        except Exception:
            return False
        return True

    def get_future(self) -> torch.futures.Future:
        return self.fut

    def result(self):
        return self.fut.value()


# ---- the process group --------------------------------------------------------------------
class MlfabricGroup(dist.ProcessGroup):
    def __init__(self, proc: _Process, members: list[int], options: Options) -> None:
        world = proc.comm
        self.whole = members == list(range(world.size))
        self.comm = world if self.whole else GroupComm(world, members)
        super().__init__(self.comm.rank, self.comm.size)
        self.proc, self.members, self.options = proc, members, options

    def getBackendName(self) -> str:
        return NAME

    def name(self) -> str:
        return NAME

    def shutdown(self) -> None:
        if self.whole:
            self.proc.close(barrier=True)

    # -- reductions --
    def _allreduce_algo(self, t: torch.Tensor, op) -> str:
        algo = self.options.allreduce
        reason = fallback_reason(algo, op, t.dtype, self.whole)
        if reason:
            self.proc.once(reason)
            return "ring"
        return algo

    def _reduce(self, t: torch.Tensor, op) -> np.ndarray:
        """All-reduces `t`'s values (on the worker); returns the flat result."""
        ufunc = ufunc_of(op, t.dtype)
        algo = self._allreduce_algo(t, op)
        x = reduce_array(t, algo)
        if x.size == 0:
            return x
        if algo in IN_NETWORK:
            out = _IN_NETWORK_FN[algo](self.comm, x, **self.options.options[algo])
        elif algo == "halving-doubling":
            out = algorithms.allreduce_halving_doubling(self.comm, x)
        else:
            out = algorithms.allreduce_ring(self.comm, x, ufunc)
        if is_average(op):
            out = out / np.asarray(self.comm.size, dtype=out.dtype)
        return out

    def allreduce(self, tensors, opts):
        for t in tensors:
            ufunc_of(opts.reduceOp, t.dtype)              # precise error now, not in wait()
        op = opts.reduceOp

        def run():
            for t in tensors:
                write_back(t, self._reduce(t, op))
        return self.proc.submit("allreduce", run, tensors)

    def allreduce_coalesced(self, tensors, opts):
        return self.allreduce(tensors, opts)

    def reduce_scatter_single(self, output, input, opts):
        if input.numel() != output.numel() * self.comm.size:
            raise ValueError(f"reduce_scatter: input of {input.numel()} elements is not "
                             f"{self.comm.size} x the output's {output.numel()}")
        ufunc = ufunc_of(opts.reduceOp, input.dtype)
        op = opts.reduceOp

        def run():
            x = reduce_array(input, "ring")
            out = algorithms.reduce_scatter_ring(self.comm, x, ufunc) if self.comm.size > 1 else x
            if is_average(op):
                out = out / np.asarray(self.comm.size, dtype=out.dtype)
            write_back(output, out)
        return self.proc.submit("reduce_scatter", run, [output])

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter(self, outputs, input_lists, opts):
        for out, ins in zip(outputs, input_lists, strict=True):
            if len(ins) != self.comm.size or any(i.numel() != out.numel() for i in ins):
                raise ValueError(f"reduce_scatter: {len(ins)} inputs for {self.comm.size} ranks, "
                                 f"each must have the output's {out.numel()} elements")
        works = [self.reduce_scatter_single(out, torch.cat([i.reshape(-1) for i in ins]), opts)
                 for out, ins in zip(outputs, input_lists, strict=True)]
        return works[-1] if works else self.barrier(None)

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts):
        works = [self.reduce_scatter_single(o, i, opts) for o, i in zip(outputs, inputs,
                                                                       strict=True)]
        return works[-1]

    # -- data movement --
    def _allgather_bytes(self, shard: np.ndarray) -> np.ndarray:
        if self.comm.size == 1:
            return shard.copy()
        if self.options.allgather == "multicast":
            if self.whole:
                return mcast.allgather_multicast(self.comm, shard,
                                                 **self.options.options.get("multicast", {}))
            self.proc.once("a multicast group spans every rank of the job, not a sub-group "
                           "(Allgather)")
        return algorithms.allgather_ring(self.comm, shard)

    def all_gather_single(self, output, input, opts):
        if output.numel() != input.numel() * self.comm.size or output.dtype != input.dtype:
            raise ValueError(f"all_gather_into_tensor: output of {output.numel()} "
                             f"{output.dtype} is not {self.comm.size} x the input's "
                             f"{input.numel()} {input.dtype}")

        def run():
            write_bytes(output, self._allgather_bytes(byte_array(input).copy()))
        return self.proc.submit("allgather", run, [output])

    _allgather_base = all_gather_single

    def all_gather_single_coalesced(self, outputs, inputs, opts):
        works = [self.all_gather_single(o, i, opts) for o, i in zip(outputs, inputs,
                                                                   strict=True)]
        return works[-1]

    def allgather(self, output_lists, inputs, opts):
        for outs, inp in zip(output_lists, inputs, strict=True):
            if len(outs) != self.comm.size or any(o.numel() != inp.numel() for o in outs):
                raise ValueError(f"all_gather: {len(outs)} outputs for {self.comm.size} ranks, "
                                 f"each must have the input's {inp.numel()} elements")

        def run():
            for outs, inp in zip(output_lists, inputs, strict=True):
                got = self._allgather_bytes(byte_array(inp).copy())
                for o, part in zip(outs, np.split(got, self.comm.size), strict=True):
                    write_bytes(o, part)
        return self.proc.submit("allgather", run, output_lists)

    def broadcast(self, tensors, opts):
        root = opts.rootRank
        if not 0 <= root < self.comm.size:
            raise ValueError(f"broadcast root {root} is outside the group of {self.comm.size}")

        def run():
            for t in tensors:
                data = byte_array(t)
                if self.comm.size == 1 or data.size == 0:
                    continue
                if self.comm.rank == root:
                    self.comm.exchange([(p, data.copy()) for p in range(self.comm.size)
                                        if p != root], [])
                else:
                    buf = np.empty_like(data)
                    self.comm.exchange([], [(root, buf)])
                    write_bytes(t, buf)
        return self.proc.submit("broadcast", run, tensors)

    def all_to_all_single(self, output, input, output_splits, input_splits, opts):
        n = self.comm.size
        out_rows = _splits(output, output_splits, n, "output")
        in_rows = _splits(input, input_splits, n, "input")
        row_out = output[0].numel() * output.element_size() if output.dim() else 0
        row_in = input[0].numel() * input.element_size() if input.dim() else 0

        def run():
            src, dst = byte_array(input), np.empty(output.numel() * output.element_size(),
                                                   dtype=np.uint8)
            ins, outs = _cuts(in_rows, row_in), _cuts(out_rows, row_out)
            dst[outs[self.comm.rank]] = src[ins[self.comm.rank]]
            others = [p for p in range(n) if p != self.comm.rank]
            self.comm.exchange([(p, src[ins[p]].copy()) for p in others],
                               [(p, dst[outs[p]]) for p in others])
            write_bytes(output, dst)
        return self.proc.submit("alltoall", run, [output])

    alltoall_base = all_to_all_single

    def alltoall(self, outputs, inputs, opts):
        if len(outputs) != self.comm.size or len(inputs) != self.comm.size:
            raise ValueError(f"all_to_all: {len(inputs)} inputs and {len(outputs)} outputs "
                             f"for {self.comm.size} ranks")

        def run():
            others = [p for p in range(self.comm.size) if p != self.comm.rank]
            bufs = {p: np.empty(outputs[p].numel() * outputs[p].element_size(), np.uint8)
                    for p in others}
            self.comm.exchange([(p, byte_array(inputs[p]).copy()) for p in others],
                               [(p, bufs[p]) for p in others])
            outputs[self.comm.rank].copy_(inputs[self.comm.rank])
            for p in others:
                write_bytes(outputs[p], bufs[p])
        return self.proc.submit("alltoall", run, outputs)

    def barrier(self, opts=None):
        return self.proc.submit("barrier", self.comm.barrier, None)

    def send(self, tensors, dst, tag):
        def run():
            ops = [op for t in tensors for op in self.comm.post_sends([(dst, byte_array(t).copy())])]
            self.comm.progress_until(lambda: all(o.done for o in ops), f"a send to {dst}")
        return self.proc.submit("send", run, tensors)

    def recv(self, tensors, src, tag):
        def run():
            for t in tensors:
                buf = np.empty(t.numel() * t.element_size(), dtype=np.uint8)
                got = self.comm.post_recv(src, buf.nbytes, buf if buf.nbytes else None)
                self.comm.progress_until(got.complete, f"a receive from {src}")
                self.comm.take(got)
                write_bytes(t, buf)
        return self.proc.submit("recv", run, tensors)

    def _unsupported(self, what: str):
        raise UnsupportedOp(f"mlfabric implements all_reduce, all_gather, "
                            f"all_gather_into_tensor, reduce_scatter, reduce_scatter_tensor, "
                            f"broadcast, all_to_all, all_to_all_single, barrier, send and "
                            f"recv; no algorithm implements {what}")

    def gather(self, *args):
        self._unsupported("gather")

    def scatter(self, *args):
        self._unsupported("scatter")

    def reduce(self, *args):
        self._unsupported("reduce")

    def recv_anysource(self, *args):
        self._unsupported("recv from any source")


def _splits(t: torch.Tensor, splits, n: int, what: str) -> list[int]:
    """Rows of `t`'s first dimension per rank (all-to-all's split sizes, or equal)."""
    rows = t.shape[0] if t.dim() else t.numel()
    splits = list(splits)
    if not splits:
        if rows % n:
            raise ValueError(f"all_to_all_single: {what} of {rows} rows does not split "
                             f"evenly over {n} ranks")
        return [rows // n] * n
    if len(splits) != n or sum(splits) != rows:
        raise ValueError(f"all_to_all_single: {what} split sizes {splits} are not {n} "
                         f"sizes summing to its {rows} rows")
    return splits


def _cuts(rows: list[int], row_bytes: int) -> list[slice]:
    bounds = np.concatenate([[0], np.cumsum(rows)]) * row_bytes
    return [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


# ---- registration ---------------------------------------------------------------------
def _create(opts, pg_options) -> MlfabricGroup:
    """torch.distributed's creator (extended API): the world group joins the fabric, a
    sub-group (global_ranks_in_group) is a view of it."""
    members = list(opts.global_ranks_in_group)
    timeout_s = opts.timeout.total_seconds()
    options = pg_options if isinstance(pg_options, Options) else Options()
    if _process is None or _process.closed:      # torch creates the default group first
        proc = _world_process(opts.store, opts.group_rank, opts.group_size, timeout_s)
        return MlfabricGroup(proc, list(range(opts.group_size)), options)
    return MlfabricGroup(_process, members or list(range(opts.group_size)), options)


if NAME.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(NAME, _create, extended_api=True, devices=["cpu"])
