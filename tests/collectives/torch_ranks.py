"""One rank of tests/collectives/test_torch_backend.py: every collective the `mlfabric` backend
implements, on tensors of each dtype and odd sizes made from a seed per case and rank, on
either `mlfabric` (over the test's namespaces) or PyTorch's `gloo` (loopback), the
reference. Writes `<out>/<backend>_rank<r>.pt`: case -> result tensor (or the error text
where the backend refused), plus what the mlfabric run logged and saw.

Run as `python -m tests.collectives.torch_ranks SPEC.json` (collectives.launch's spec)."""
from __future__ import annotations

import json
import logging
import sys
import zlib
from pathlib import Path

import torch
import torch.distributed as dist

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
          "int32": torch.int32}
SIZES = (1, 257, 5001)          # 257 float32 are 1028 B: not a multiple of a 1 KiB packet
ROOT = 3
SUBGROUP = (1, 3)


def make(case: str, rank: int, dtype: torch.dtype, n: int) -> torch.Tensor:
    """Rank `rank`'s input of `case` (the test rebuilds it the same way)."""
    gen = torch.Generator().manual_seed(zlib.crc32(f"{case}/{rank}".encode()))
    if dtype.is_floating_point:
        return torch.randn(n, generator=gen).to(dtype)
    return torch.randint(-1000, 1000, (n,), generator=gen, dtype=dtype)


class _Log(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _allreduce(case, rank, size, dt, n):
    t = make(case, rank, dt, n)
    dist.all_reduce(t)
    return t


def _allreduce_max(case, rank, size, dt, n):
    t = make(case, rank, dt, n)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t


def _allgather_tensor(case, rank, size, dt, n):
    t = torch.empty(n * size, dtype=dt)
    dist.all_gather_into_tensor(t, make(case, rank, dt, n))
    return t


def _allgather_list(case, rank, size, dt, n):
    ts = [torch.empty(n, dtype=dt) for _ in range(size)]
    dist.all_gather(ts, make(case, rank, dt, n))
    return torch.cat(ts)


def _reduce_scatter_tensor(case, rank, size, dt, n):
    t = torch.empty(n, dtype=dt)
    dist.reduce_scatter_tensor(t, make(case, rank, dt, n * size))
    return t


def _reduce_scatter_list(case, rank, size, dt, n):
    t = torch.empty(n, dtype=dt)
    dist.reduce_scatter(t, list(make(case, rank, dt, n * size).split(n)))
    return t


def _broadcast(case, rank, size, dt, n):
    t = make(case, rank, dt, n)
    dist.broadcast(t, ROOT)
    return t


def _alltoall_single(case, rank, size, dt, n):
    """Rank r sends (r + j) % 3 + 1 rows of 3 to rank j: uneven splits."""
    ins = [(rank + j) % 3 + 1 for j in range(size)]
    outs = [(r + rank) % 3 + 1 for r in range(size)]
    t = torch.empty(sum(outs), 3, dtype=dt)
    dist.all_to_all_single(t, make(case, rank, dt, 3 * sum(ins)).reshape(-1, 3), outs, ins)
    return t.reshape(-1)


def _alltoall_list(case, rank, size, dt, n):
    ins = list(make(case, rank, dt, 5 * size).split(5))
    outs = [torch.empty(5, dtype=dt) for _ in range(size)]
    dist.all_to_all(outs, ins)
    return torch.cat(outs)


def _sendrecv(case, rank, size, dt, n):
    """Each rank sends to the next one and receives from the previous one."""
    got = torch.empty(n, dtype=dt)
    ops = [dist.P2POp(dist.isend, make(case, rank, dt, n), (rank + 1) % size),
           dist.P2POp(dist.irecv, got, (rank - 1) % size)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    return got


SIZED = {"allreduce": _allreduce, "allreduce_max": _allreduce_max,
         "allgather_tensor": _allgather_tensor, "allgather_list": _allgather_list,
         "reduce_scatter_tensor": _reduce_scatter_tensor,
         "reduce_scatter_list": _reduce_scatter_list, "broadcast": _broadcast}
UNSIZED = {"alltoall_single": _alltoall_single, "alltoall_list": _alltoall_list,
           "sendrecv": _sendrecv}


def cases(rank: int, size: int, out: dict) -> None:
    """Every collective on every dtype (and size): case name -> result, or the error text
    where the backend refused it."""
    plan = [(f"{kind}_{dname}_{n}", fn, dt, n) for dname, dt in DTYPES.items()
            for n in SIZES for kind, fn in SIZED.items()]
    plan += [(f"{kind}_{dname}", fn, dt, 301) for dname, dt in DTYPES.items()
             for kind, fn in UNSIZED.items()]
    for case, fn, dt, n in plan:
        try:
            out[case] = fn(case, rank, size, dt, n)
        except (RuntimeError, ValueError) as exc:
            out[case] = f"error: {exc}"
    dist.barrier()


def groups(rank: int, size: int, backend: str, out: dict) -> dict:
    """Sub-group, per-group algorithms (mlfabric: halving-doubling, multicast Allgather, an
    in-network all-reduce that must fall back), async overlap, the errors."""
    seen: dict = {}
    opts = {}
    if backend == "mlfabric":
        from collectives.torchpg import Options
        opts = {"hd": Options(allreduce="halving-doubling"),
                "mcast": Options(allgather="multicast"),
                # no switch here: every operation below must fall back to ring
                "nr": Options(allreduce="netreduce",
                              options={"netreduce": {"aggregator": "192.0.2.1"}})}
    sub = dist.new_group(list(SUBGROUP))
    hd = dist.new_group(list(range(size)), pg_options=opts.get("hd"))
    mc = dist.new_group(list(range(size)), pg_options=opts.get("mcast"))
    nr = dist.new_group(list(range(size)), pg_options=opts.get("nr"))
    for dname, dt in DTYPES.items():
        if rank in SUBGROUP:
            t = make(f"sub_allreduce_{dname}", rank, dt, 257)
            dist.all_reduce(t, group=sub)
            out[f"sub_allreduce_{dname}"] = t
            g = torch.empty(257 * len(SUBGROUP), dtype=dt)
            dist.all_gather_into_tensor(g, make(f"sub_allgather_{dname}", rank, dt, 257),
                                        group=sub)
            out[f"sub_allgather_{dname}"] = g
        t = make(f"hd_allreduce_{dname}", rank, dt, 5001)
        dist.all_reduce(t, group=hd)
        out[f"hd_allreduce_{dname}"] = t
        g = torch.empty(3001 * size, dtype=dt)
        dist.all_gather_into_tensor(g, make(f"mcast_allgather_{dname}", rank, dt, 3001),
                                    group=mc)
        out[f"mcast_allgather_{dname}"] = g
    for _ in range(2):          # the fallback is said once, not per call
        t = make("fallback_max", rank, torch.float32, 257)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=nr)
        out["fallback_max"] = t
        t = make("fallback_int64", rank, torch.int64, 257)
        dist.all_reduce(t, group=nr)
        out["fallback_int64"] = t
    # two all-reduces in flight at once, waited for in the reverse order
    big, small = make("async_big", rank, torch.float32, 200_000), make("async_small", rank,
                                                                      torch.float32, 33)
    w1 = dist.all_reduce(big, async_op=True)
    w2 = dist.all_reduce(small, async_op=True)
    seen["in_flight"] = [not w1.is_completed(), not w2.is_completed()]
    w2.wait()
    w1.wait()
    out["async_big"], out["async_small"] = big, small
    errors = (("reduce", lambda: dist.reduce(torch.ones(3), 0)),
              ("band_float", lambda: dist.all_reduce(torch.ones(3), op=dist.ReduceOp.BAND)))
    # gloo implements reduce and fails BAND on one rank at a time: only mlfabric's errors
    for name, fn in errors if backend == "mlfabric" else ():
        try:
            fn()
            seen[f"error_{name}"] = None
        except Exception as exc:        # noqa: BLE001 - what each backend raises is the point
            seen[f"error_{name}"] = f"{type(exc).__name__}: {exc}"
    dist.barrier()
    return seen


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    rank, size = spec["rank"], len(spec["ips"])
    backend = spec["runs"][0]["backend"]
    log = _Log()
    logging.getLogger("collectives.torch").addHandler(log)
    torch.set_num_threads(1)
    if backend == "mlfabric":
        from collectives import torchpg
        torchpg.configure(spec)
        master = spec["ips"][0]
    else:
        master = "127.0.0.1"
    dist.init_process_group(backend, init_method=f"tcp://{master}:{spec['port'] + 1}",
                            rank=rank, world_size=size)
    out: dict = {}
    cases(rank, size, out)
    seen = groups(rank, size, backend, out)
    dist.destroy_process_group()
    seen["log"] = log.lines
    torch.save({"results": out, "seen": seen}, Path(spec["out"]) / f"{backend}_rank{rank}.pt")
    Path(spec["results"]).write_text("")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
