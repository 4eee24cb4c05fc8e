"""What the `mlfabric` backend (collectives.torchpg) does to a tensor before and after a
collective: the numpy array that goes on the wire, the reduction as a numpy ufunc, and which
algorithm can carry which dtype and operation (the fallback to ring, and why).

Operations that only move bytes (Allgather, broadcast, all-to-all, send/recv) carry a tensor's
raw bytes, every dtype exactly. Reductions compute on the wire array: the dtype itself where
numpy has it (float16 adds in float16 at every hop, as Gloo's does), bfloat16 widened to
float32 (numpy has no bfloat16; Megatron all-reduces bf16 gradients in float32 too) and
rounded back once at the end. NetReduce and SwitchML sum int32 in the switch: float32,
float16 and bfloat16 go through their fixed point (netreduce.py: per block the workers agree
on the largest exponent e and send round(x 2^s), s = 30 - ceil(log2 N) - e; each element of
the sum within N 2^(e + ceil(log2 N) - 31) of the exact sum, plus the rounding to the
tensor's dtype), int32 exactly (wrapping); anything else they cannot carry."""
from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist

IN_NETWORK = ("netreduce", "switchml")
ALLREDUCE = ("ring", "halving-doubling", *IN_NETWORK)
ALLGATHER = ("ring", "multicast")
# what the switches' int32 sums take (float ones through the fixed point)
SWITCH_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int32)

_R = dist.ReduceOp
UFUNCS = {_R.SUM: np.add, _R.AVG: np.add, _R.PRODUCT: np.multiply, _R.MIN: np.minimum,
          _R.MAX: np.maximum, _R.BAND: np.bitwise_and, _R.BOR: np.bitwise_or,
          _R.BXOR: np.bitwise_xor}
_BITWISE = (_R.BAND, _R.BOR, _R.BXOR)


class UnsupportedOp(ValueError):
    """An operation no algorithm of the backend implements (the message says which)."""


def op_name(op) -> str:
    return str(getattr(op, "op", op)).rsplit(".", 1)[-1]


def _kind(op):
    """The RedOpType of a ReduceOp (torch hands either)."""
    return getattr(op, "op", op)


def ufunc_of(op, dtype: torch.dtype):
    """The numpy reduction of `op` on `dtype`; UnsupportedOp for what nothing here does."""
    kind = _kind(op)
    if kind not in UFUNCS:
        raise UnsupportedOp(f"mlfabric reduces with SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR or "
                            f"BXOR; no algorithm implements {op_name(op)}")
    if dtype.is_complex or dtype == torch.bool:
        raise UnsupportedOp(f"mlfabric reduces real numbers; no algorithm implements "
                            f"{op_name(op)} on {dtype}")
    if kind in _BITWISE and dtype.is_floating_point:
        raise UnsupportedOp(f"{op_name(op)} is a bitwise reduction; no algorithm implements "
                            f"it on {dtype}")
    if kind == _R.AVG and not dtype.is_floating_point:
        raise UnsupportedOp(f"AVG of {dtype} would round; mlfabric averages floating-point "
                            f"tensors only (reduce with SUM and divide)")
    return UFUNCS[kind]


def is_average(op) -> bool:
    return _kind(op) == _R.AVG


def fallback_reason(algo: str, op, dtype: torch.dtype, whole_world: bool) -> str | None:
    """Why the all-reduce `algo` cannot do this one (it then runs on ring), or None."""
    kind = _kind(op)
    if algo in IN_NETWORK:
        if kind not in (_R.SUM, _R.AVG):
            return f"{algo} adds in the switch and cannot reduce with {op_name(op)}"
        if dtype not in SWITCH_DTYPES:
            return f"{algo} carries int32 and float32/float16/bfloat16 (fixed point), not {dtype}"
        if not whole_world:
            return f"a {algo} aggregation job spans every rank of the job, not a sub-group"
    if algo == "halving-doubling" and kind not in (_R.SUM, _R.AVG):
        return f"halving-doubling only adds, it cannot reduce with {op_name(op)}"
    return None


def reduce_array(t: torch.Tensor, algo: str) -> np.ndarray:
    """The flat array a reduction of `t` computes on (a copy: the collective runs while the
    caller's tensor stays untouched until the result is written back)."""
    flat = t.detach().reshape(-1)
    if t.dtype == torch.bfloat16 or (algo in IN_NETWORK and t.dtype == torch.float16):
        return flat.float().numpy().copy()
    return flat.contiguous().numpy().copy()


def byte_array(t: torch.Tensor) -> np.ndarray:
    """A tensor's bytes as uint8 (for operations that only move data)."""
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy()


def _tensor(values: np.ndarray) -> torch.Tensor:
    values = np.ascontiguousarray(values)
    return torch.from_numpy(values if values.flags.writeable else values.copy())


def write_back(t: torch.Tensor, values: np.ndarray) -> None:
    """Writes a flat result into `t` in place, in t's dtype (rounding widened values once)."""
    src = _tensor(values)
    if src.dtype != t.dtype:
        src = src.to(t.dtype)
    t.copy_(src.reshape(t.shape))


def write_bytes(t: torch.Tensor, data: np.ndarray) -> None:
    """Writes raw bytes (uint8) into `t` in place."""
    src = _tensor(data).view(t.dtype)
    t.copy_(src.reshape(t.shape))
