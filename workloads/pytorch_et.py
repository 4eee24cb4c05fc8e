"""PyTorch execution traces (`torch.profiler.ExecutionTraceObserver`'s JSON) read as DAGs.

A trace set is one file per rank, `PREFIX.<rank>.json`, each a JSON object with `schema` and
`nodes`; a node has `id`, `name`, `ctrl_deps` (its parent: the operator that called it),
`inputs` and `outputs` (`values`, `shapes`, `types`) and `attrs` (`name`, `type`, `value`).
A tensor's value is [tensor id, storage id, offset, elements, bytes per element, device].
Thread roots are named `[pytorch|profiler|execution_trace|thread]`.

What becomes an op (`workloads.dag.Op`), per rank:
- Each operator called directly by a thread root (a top-level operator: `aten::linear`, an
  autograd function, the optimizer step) is one compute op on the stream `compute` (the GPU
  runs one rank's kernels in issue order). Its duration is the FLOPs of the matrix products
  and convolutions in its subtree (`aten::mm`, `addmm`, `bmm`, `baddbmm`, `matmul` leaves,
  `convolution`) at `flops_s`; other operators are taken as free (an execution trace
  records no times).
- Each `c10d::` collective in a subtree (all-reduce, all-gather, reduce-scatter,
  all-to-all) is a collective op on the stream `comm` after its operator's compute, over the
  ranks of the default process group; its size is the bytes of its input tensors (all-gather:
  its output, the gathered result). Backend ops (`gloo:`, `nccl:`) are the same collective
  seen again and are skipped.
- Dependencies follow the tensors' storage: an op waits for the last earlier op that wrote a
  storage it reads (a collective writes its tensors in place), so a gradient's all-reduce
  waits for the backward that produced it, the optimizer step for the all-reduce, and
  backward keeps computing meanwhile.
Refused, naming the file and node: collectives this simulator does not model (broadcast,
reduce, gather, scatter, barrier, send/recv) and traces whose ranks disagree on the
collectives they issue.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from workloads.dag import COLLECTIVE, COMPUTE, Op, Workload, WorkloadError
from workloads.schedule import Scheduler

THREAD = "[pytorch|profiler|execution_trace|thread]"
COLLECTIVES = {
    "c10d::allreduce_": "all-reduce", "c10d::allreduce_coalesced_": "all-reduce",
    "c10d::allgather_": "all-gather", "c10d::_allgather_base_": "all-gather",
    "c10d::allgather_into_tensor_coalesced_": "all-gather",
    "c10d::reduce_scatter_": "reduce-scatter", "c10d::_reduce_scatter_base_": "reduce-scatter",
    "c10d::reduce_scatter_tensor_coalesced_": "reduce-scatter",
    "c10d::alltoall_": "all-to-all", "c10d::alltoall_base_": "all-to-all",
}
UNMODELLED = ("c10d::broadcast_", "c10d::reduce_", "c10d::gather_", "c10d::scatter_",
              "c10d::barrier", "c10d::send", "c10d::recv_", "c10d::recv_any_source_")
BACKENDS = ("gloo:", "nccl:", "mpi:", "ucc:")
MATMUL = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul")


class ExecutionTraceError(WorkloadError):
    """A trace that cannot be read: names the file and, where known, the node."""


def trace_files(prefix: str | Path) -> list[Path]:
    prefix = Path(prefix)
    pattern = re.compile(re.escape(prefix.name) + r"\.(\d+)\.json$")
    folder = prefix.parent if str(prefix.parent) else Path(".")
    found = {int(m.group(1)): p for p in (folder.iterdir() if folder.is_dir() else ())
             if (m := pattern.match(p.name))}
    if not found:
        raise ExecutionTraceError(f"no execution traces {prefix}.<rank>.json")
    if missing := sorted(set(range(max(found) + 1)) - set(found)):
        raise ExecutionTraceError(f"{prefix}: ranks {missing} have no .json file")
    return [found[r] for r in range(len(found))]


def is_trace(prefix: str | Path) -> bool:
    p = Path(prefix)
    return (p.parent / f"{p.name}.0.json").is_file()


def _tensors(side: dict) -> list[list]:
    """The tensor values of a node's inputs or outputs (lists of tensors flattened)."""
    out = []

    def walk(v):
        if isinstance(v, list) and len(v) == 6 and all(isinstance(x, int) for x in v[:5]):
            out.append(v)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    walk(side.get("values", []))
    return out


def _shape_flops(node: dict) -> float:
    """2 x multiply-adds of one matrix product or convolution, from its input shapes."""
    name, shapes = node["name"], node["inputs"].get("shapes", [])
    dims = [s for s in shapes if isinstance(s, list) and s and all(isinstance(d, int)
                                                                   for d in s)]
    if name in ("aten::mm", "aten::matmul") and len(dims) >= 2 and len(dims[0]) == 2:
        (m, k), n = dims[0], dims[1][-1]
        return 2.0 * m * k * n
    if name == "aten::addmm" and len(dims) >= 3:
        (m, k), n = dims[1], dims[2][-1]
        return 2.0 * m * k * n
    if name in ("aten::bmm", "aten::baddbmm") and len(dims) >= 2:
        a, b = dims[-2], dims[-1]
        return 2.0 * a[0] * a[1] * a[2] * b[-1] if len(a) == 3 else 0.0
    if name == "aten::convolution" and len(dims) >= 2:
        out = node["outputs"].get("shapes", [[]])[0]
        w = dims[1]
        if isinstance(out, list) and len(out) >= 3 and len(w) >= 3:
            per_out = 1
            for d in w[1:]:
                per_out *= d
            size = 1
            for d in out:
                size *= d
            return 2.0 * size * per_out
    return 0.0


def _subtree_flops(node: dict, children: dict) -> float:
    """A product's FLOPs counted once: at the outermost matrix operator of a subtree."""
    if node["name"] in MATMUL or node["name"] == "aten::convolution":
        flops = _shape_flops(node)
        if flops:
            return flops
    return sum(_subtree_flops(c, children) for c in children.get(node["id"], ()))


def _walk(node: dict, children: dict):
    yield node
    for c in children.get(node["id"], ()):
        yield from _walk(c, children)


def _load(path: Path) -> list[dict]:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError) as err:
        raise ExecutionTraceError(f"{path}: not an execution trace JSON ({err})") from None
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise ExecutionTraceError(f"{path}: no `nodes` list (not an ExecutionTraceObserver "
                                  f"file)")
    for i, n in enumerate(data["nodes"]):
        if not (isinstance(n, dict) and isinstance(n.get("id"), int)
                and isinstance(n.get("name"), str)):
            raise ExecutionTraceError(f"{path}: node #{i} has no integer id and name")
        n.setdefault("inputs", {})
        n.setdefault("outputs", {})
        if not isinstance(n["inputs"], dict) or not isinstance(n["outputs"], dict):
            raise ExecutionTraceError(f"{path}: node {n['id']} ({n['name']}): inputs and "
                                      f"outputs must be objects (schema 1.0.2 or later)")
    return data["nodes"]


def _rank_ops(path: Path, n: int, flops_s: float) -> list[Op]:
    nodes = _load(path)
    children: dict[int, list[dict]] = {}
    for x in nodes:
        children.setdefault(x.get("ctrl_deps"), []).append(x)
    roots = {x["id"] for x in nodes if x["name"] == THREAD}
    top = sorted((x for x in nodes if x.get("ctrl_deps") in roots), key=lambda x: x["id"])
    world = tuple(range(n))
    ops: list[Op] = []
    writer: dict[int, int] = {}         # storage id -> the op that last wrote it

    def add(name, kind, stream, reads, writes, **kw) -> None:
        deps = tuple(sorted({writer[s] for s in reads if s in writer}))
        ops.append(Op(len(ops), name, kind, stream, deps, **kw))
        for s in writes:
            writer[s] = len(ops) - 1

    for node in top:
        if node["name"].startswith(BACKENDS):
            continue
        sub = list(_walk(node, children))
        where = f"{path}: node {node['id']} ({node['name']})"
        for x in sub:
            if x["name"] in UNMODELLED:
                raise ExecutionTraceError(f"{where}: {x['name']} (node {x['id']}) is not a "
                                          f"collective this simulator models (it runs "
                                          f"{', '.join(sorted(set(COLLECTIVES.values())))})")
        colls = [x for x in sub if x["name"] in COLLECTIVES]
        inside = {id(y) for c in colls for y in _walk(c, children)}
        compute = [x for x in sub if id(x) not in inside]
        reads = {t[1] for x in compute for t in _tensors(x["inputs"])}
        writes = {t[1] for x in compute for t in _tensors(x["outputs"])}
        flops = _subtree_flops(node, {k: [c for c in v if id(c) not in inside]
                                      for k, v in children.items()})
        if compute:                     # an operator that is itself a collective has none
            add(node["name"], COMPUTE, "compute", reads, writes, duration_s=flops / flops_s)
        for c in colls:
            kind = COLLECTIVES[c["name"]]
            side = c["outputs"] if kind == "all-gather" else c["inputs"]
            tensors = _tensors(side) or _tensors(c["inputs"])
            size = sum(t[3] * t[4] for t in tensors)
            if kind == "all-gather" and not _tensors(c["outputs"]):
                size *= n
            storages = {t[1] for t in _tensors(c["inputs"]) + _tensors(c["outputs"])}
            add(f"{c['name']}#{c['id']}", COLLECTIVE, "comm", storages | writes, storages,
                coll=kind, bytes=size - size % n if kind != "all-reduce" else size,
                group=world)
    return ops


def read(prefix: str | Path, *, gpus_per_host: int = 1, flops_s: float) -> Workload:
    """The trace set at PREFIX (`PREFIX.<rank>.json`) as a validated Workload."""
    files = trace_files(prefix)
    ranks = [_rank_ops(p, len(files), flops_s) for p in files]
    wl = Workload(Path(prefix).name, ranks, gpus_per_host,
                  {"trace": str(prefix), "files": len(files), "format": "pytorch-et",
                   "flops_s": flops_s})
    try:
        Scheduler(wl)                   # validated, and the ranks issue the same collectives
    except WorkloadError as err:
        raise ExecutionTraceError(f"{prefix}: {err}") from None
    return wl
