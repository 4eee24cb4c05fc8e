"""Chakra execution traces (MLCommons Chakra ET, the input of ASTRA-sim) read and written.

A trace set is one file per rank, `PREFIX.<rank>.et`: protobuf messages, each preceded by its
length as a varint; a `GlobalMetadata` first, then `Node`s. The wire format is decoded here
directly, from the field numbers and types of the public schema (`schema/protobuf/et_def.proto`
in mlcommons/chakra): Node = id 1, name 2, type 3, ctrl_deps 4, data_deps 5,
start_time_micros 6, duration_micros 7, inputs 8, outputs 9, attr 10; AttributeProto = name 1,
a oneof of scalar values (odd numbers 3-31) and lists (even numbers 4-32, each a message with
`values = 1`); GlobalMetadata = version 1, attr 2.

What a node becomes (`workloads.dag.Op`):
- COMP_NODE: compute of `duration_micros` (or `num_ops` FLOPs at `flops_s` when it has no
  duration); METADATA nodes: compute of their duration (usually 0).
- COMM_COLL_NODE: the collective of attr `comm_type` (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER,
  ALL_TO_ALL) over the ranks of its process group (attr `pg_name`, resolved from the
  metadata's `pg:<name>` lists or an ASTRA-sim communicator-group JSON), or over every rank
  without one. `comm_size` is read as ASTRA-sim reads it: each NPU's input buffer for every
  type (its ring all-gather ends with `comm_size` x ranks), so an all-gather's DAG size (the
  gathered result) is `comm_size` x len(group).
- COMM_SEND_NODE / COMM_RECV_NODE: a message to `comm_dst` / from `comm_src` with `comm_tag`,
  eager and matched in order per (src, dst, tag) (`workloads.dag`).
- Refused, naming the node, because the simulator does not model them: MEM_LOAD / MEM_STORE
  nodes (ASTRA-sim's remote-memory backend), the collectives REDUCE, GATHER, SCATTER,
  BROADCAST, REDUCE_SCATTER_BLOCK and BARRIER, and `involved_dim` lists that leave out a
  dimension (this fabric has one network dimension).
- Dependencies: data and control deps alike. Streams: attr `stream` when the trace has one
  (this writer's); otherwise compute nodes share one stream and every communication node
  has its own (ASTRA-sim issues a communication node as soon as its deps are done).
The writer also stores each compute's exact duration in seconds (attr `duration_s`, double),
so a written DAG reads back identical; other readers use `duration_micros`.
"""
from __future__ import annotations

import json
import re
import struct
from pathlib import Path

from workloads.dag import COLLECTIVE, COMPUTE, RECV, SEND, Op, Workload, WorkloadError

VERSION = "0.0.4"
# NodeType and CollectiveCommType values of et_def.proto
METADATA, MEM_LOAD, MEM_STORE, COMP, COMM_SEND, COMM_RECV, COMM_COLL = 1, 2, 3, 4, 5, 6, 7
COMM_TYPES = {0: "all-reduce", 2: "all-gather", 6: "all-to-all", 7: "reduce-scatter"}
COMM_NAMES = {"ALL_REDUCE": 0, "REDUCE": 1, "ALL_GATHER": 2, "GATHER": 3, "SCATTER": 4,
              "BROADCAST": 5, "ALL_TO_ALL": 6, "REDUCE_SCATTER": 7,
              "REDUCE_SCATTER_BLOCK": 8, "BARRIER": 9}
DEFAULT_FLOPS_S = 312e12 * 0.4


class ChakraError(WorkloadError):
    """A trace that cannot be read: names the file and, where known, the node."""


# ---- the protobuf wire format ------------------------------------------------------------
class _Malformed(Exception):
    pass


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(buf):
            raise _Malformed("truncated varint")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7
        if shift > 63:
            raise _Malformed("varint longer than 10 bytes")


def _fields(buf: bytes):
    """(field number, wire type, value) of each field; length-delimited values are bytes."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise _Malformed("field number 0")
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 1:
            if i + 8 > len(buf):
                raise _Malformed("truncated 64-bit field")
            value, i = buf[i:i + 8], i + 8
        elif wire == 2:
            n, i = _varint(buf, i)
            if i + n > len(buf):
                raise _Malformed(f"field {field} runs {i + n - len(buf)} bytes past its message")
            value, i = buf[i:i + n], i + n
        elif wire == 5:
            if i + 4 > len(buf):
                raise _Malformed("truncated 32-bit field")
            value, i = buf[i:i + 4], i + 4
        else:
            raise _Malformed(f"unsupported wire type {wire}")
        yield field, wire, value


def _signed(v: int, bits: int = 64) -> int:
    return v - (1 << bits) if v >> (bits - 1) else v


def _zigzag(v: int) -> int:
    return (v >> 1) ^ -(v & 1)


def _scalar(field: int, wire: int, raw):
    """An AttributeProto scalar by its oneof field number."""
    if field == 3:
        return struct.unpack("<d", raw)[0]
    if field == 5:
        return struct.unpack("<f", raw)[0]
    if field in (7, 9):
        return _signed(raw)
    if field in (11, 13):
        return raw
    if field in (15, 17):
        return _zigzag(raw)
    if field in (19, 21):
        return int.from_bytes(raw, "little")
    if field in (23, 25):
        return int.from_bytes(raw, "little", signed=True)
    if field == 27:
        return bool(raw)
    if field == 29:
        return _text(raw, "a string attribute")
    return raw                                  # 31: bytes


def _text(raw: bytes, what: str) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError as err:
        raise _Malformed(f"{what} is not UTF-8 (byte {err.start}: {raw[:40]!r})") from None


def _list(field: int, raw: bytes) -> list:
    """An AttributeProto list (a message whose field 1 repeats, packed or not)."""
    scalar = field - 1
    width = {3: 8, 5: 4, 19: 4, 21: 8, 23: 4, 25: 8}.get(scalar)
    out = []
    for f, wire, value in _fields(raw):
        if f != 1:
            continue
        if wire == 2 and scalar not in (29, 31):            # packed numbers
            if width:
                out += [_scalar(scalar, 1, value[k:k + width])
                        for k in range(0, len(value), width)]
            else:
                j = 0
                while j < len(value):
                    v, j = _varint(value, j)
                    out.append(_scalar(scalar, 0, v))
        else:
            out.append(_scalar(scalar, wire, value))
    return out


def _attrs(raws: list[bytes]) -> dict:
    out = {}
    for raw in raws:
        name, value = None, None
        for f, wire, v in _fields(raw):
            if f == 1:
                name = _text(v, "an attribute name")
            elif 3 <= f <= 32:
                value = _list(f, v) if f % 2 == 0 else _scalar(f, wire, v)
        if name is None:
            raise _Malformed("an attribute without a name")
        out[name] = value
    return out


def _uints(wire: int, value) -> list[int]:
    if wire == 0:
        return [value]
    out, j = [], 0
    while j < len(value):
        v, j = _varint(value, j)
        out.append(v)
    return out


def _node(buf: bytes) -> dict:
    node = {"id": 0, "name": "", "type": 0, "deps": [], "duration_micros": 0, "attr": []}
    for f, wire, v in _fields(buf):
        if f == 1:
            node["id"] = v
        elif f == 2:
            node["name"] = _text(v, "the node's name")
        elif f == 3:
            node["type"] = v
        elif f in (4, 5):
            node["deps"] += _uints(wire, v)
        elif f == 7:
            node["duration_micros"] = v
        elif f == 10:
            node["attr"].append(v)
    node["attr"] = _attrs(node["attr"])
    return node


def _messages(data: bytes):
    i = 0
    while i < len(data):
        n, j = _varint(data, i)
        if j + n > len(data):
            raise _Malformed(f"message at byte {i} claims {n} bytes, {len(data) - j} remain")
        yield data[j:j + n]
        i = j + n


# ---- encoding ----------------------------------------------------------------------------
def _enc_varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _enc_varint(field << 3 | wire)


def _enc_bytes(field: int, data: bytes) -> bytes:
    return _key(field, 2) + _enc_varint(len(data)) + data


def _enc_attr(name: str, value) -> bytes:
    body = _enc_bytes(1, name.encode())
    if isinstance(value, bool):
        body += _key(27, 0) + _enc_varint(int(value))
    elif isinstance(value, int):
        body += _key(9, 0) + _enc_varint(value)                   # int64_val
    elif isinstance(value, float):
        body += _key(3, 1) + struct.pack("<d", value)             # double_val
    elif isinstance(value, str):
        body += _enc_bytes(29, value.encode())                    # string_val
    else:                                                         # int64_list, packed
        body += _enc_bytes(10, _enc_bytes(1, b"".join(_enc_varint(x) for x in value)))
    return body


def _enc_node(nid: int, name: str, ntype: int, deps, duration_us: int, attrs: dict) -> bytes:
    body = _key(1, 0) + _enc_varint(nid) + _enc_bytes(2, name.encode())
    body += _key(3, 0) + _enc_varint(ntype)
    if deps:
        body += _enc_bytes(5, b"".join(_enc_varint(d) for d in deps))   # data_deps, packed
    if duration_us:
        body += _key(7, 0) + _enc_varint(duration_us)
    for k, v in attrs.items():
        body += _enc_bytes(10, _enc_attr(k, v))
    return body


def _framed(message: bytes) -> bytes:
    return _enc_varint(len(message)) + message


# ---- trace sets --------------------------------------------------------------------------
def trace_files(prefix: str | Path) -> list[Path]:
    """PREFIX.0.et ... PREFIX.<n-1>.et, every rank present."""
    prefix = Path(prefix)
    pattern = re.compile(re.escape(prefix.name) + r"\.(\d+)\.et$")
    found = {}
    folder = prefix.parent if str(prefix.parent) else Path(".")
    if folder.is_dir():
        for p in folder.iterdir():
            m = pattern.match(p.name)
            if m:
                found[int(m.group(1))] = p
    if not found:
        raise ChakraError(f"no trace files {prefix}.<rank>.et")
    missing = sorted(set(range(max(found) + 1)) - set(found))
    if missing:
        raise ChakraError(f"{prefix}: ranks {missing} have no .et file "
                          f"(ranks 0..{max(found)} expected)")
    return [found[r] for r in range(len(found))]


def write(wl: Workload, prefix: str | Path) -> list[Path]:
    """One file per rank; collectives' groups go to the metadata as `pg:<name>` lists."""
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    groups: dict[tuple, str] = {}
    for _, op in wl.ops():
        if op.kind == COLLECTIVE and op.group not in groups:
            groups[op.group] = str(len(groups))
    meta = _enc_bytes(1, VERSION.encode())
    meta += _enc_bytes(2, _enc_attr("gpus_per_host", wl.gpus_per_host))
    for group, name in groups.items():
        meta += _enc_bytes(2, _enc_attr(f"pg:{name}", list(group)))
    kinds = {v: k for k, v in COMM_TYPES.items()}
    paths = []
    for r, ops in enumerate(wl.ranks):
        out = [_framed(meta)]
        for op in ops:
            attrs: dict = {"stream": op.stream}
            if op.kind == COMPUTE:
                ntype = COMP
                attrs["duration_s"] = float(op.duration_s)
            elif op.kind == COLLECTIVE:
                ntype = COMM_COLL
                size = op.bytes // len(op.group) if op.coll == "all-gather" else op.bytes
                attrs.update(comm_type=kinds[op.coll], comm_size=size,
                             pg_name=groups[op.group])
            else:
                ntype = COMM_SEND if op.kind == SEND else COMM_RECV
                attrs.update(comm_size=op.bytes, comm_tag=op.tag,
                             comm_src=r if op.kind == SEND else op.peer,
                             comm_dst=op.peer if op.kind == SEND else r)
            out.append(_framed(_enc_node(op.id, op.name, ntype, op.deps,
                                         round(op.duration_s * 1e6), attrs)))
        path = prefix.parent / f"{prefix.name}.{r}.et"
        path.write_bytes(b"".join(out))
        paths.append(path)
    return paths


def read(prefix: str | Path, *, gpus_per_host: int | None = None,
         comm_groups: str | Path | None = None, flops_s: float = DEFAULT_FLOPS_S) -> Workload:
    """The trace set at PREFIX as a Workload (validated; errors name the file and node)."""
    files = trace_files(prefix)
    n = len(files)
    extra = _comm_groups(comm_groups) if comm_groups else {}
    ranks, meta_gph = [], None
    for r, path in enumerate(files):
        msgs = _messages(path.read_bytes())
        try:
            first = next(msgs, None)
            if first is None:
                raise ChakraError(f"{path}: empty (a GlobalMetadata message comes first)")
            meta = _attrs([v for f, _, v in _fields(first) if f == 2])
        except _Malformed as err:
            raise ChakraError(f"{path}: GlobalMetadata: {err}") from None
        groups = {k[3:]: tuple(v) for k, v in meta.items() if k.startswith("pg:")}
        groups.update(extra)
        meta_gph = meta.get("gpus_per_host", meta_gph)
        ops, ids, k = [], set(), 0
        while True:
            where = f"{path}: node #{k}" + (f" (after node {ops[-1].id})" if ops else "")
            try:
                raw = next(msgs, None)
                if raw is None:
                    break
                node = _node(raw)
                where = f"{path}: node {node['id']} ({node['name'] or 'unnamed'})"
                op = _op(node, r, n, groups, flops_s)
            except _Malformed as err:
                raise ChakraError(f"{where}: {err}") from None
            except ChakraError as err:
                raise ChakraError(f"{where}: {err}") from None
            if op.id in ids:
                raise ChakraError(f"{where}: a second node with id {op.id}")
            ids.add(op.id)
            ops.append(op)
            k += 1
        for op in ops:
            if unknown := [d for d in op.deps if d not in ids]:
                raise ChakraError(f"{path}: node {op.id} ({op.name}): depends on nodes "
                                  f"{unknown} that are not in the file")
        ranks.append(ops)
    wl = Workload(Path(prefix).name, ranks, gpus_per_host or meta_gph or 1,
                  {"trace": str(prefix), "files": n})
    try:
        wl.validate()
    except WorkloadError as err:
        raise ChakraError(f"{prefix}: {err}") from None
    return wl


def _int(attr: dict, name: str, node: dict) -> int:
    v = attr.get(name)
    if not isinstance(v, int) or isinstance(v, bool):
        raise ChakraError(f"needs an integer attribute {name!r}" +
                          (f", has {v!r}" if v is not None else ""))
    return v


def _op(node: dict, rank: int, n: int, groups: dict, flops_s: float) -> Op:
    a, t = node["attr"], node["type"]
    deps = tuple(dict.fromkeys(node["deps"]))
    base = dict(id=node["id"], name=node["name"] or f"node-{node['id']}", deps=deps)
    if t in (MEM_LOAD, MEM_STORE):
        raise ChakraError("memory load/store nodes (ASTRA-sim's remote-memory backend) are not "
                          "modelled")
    if t in (COMP, METADATA):
        if "duration_s" in a:
            dur = float(a["duration_s"])
        elif node["duration_micros"] or t != COMP:
            dur = node["duration_micros"] * 1e-6
        else:
            dur = a.get("num_ops", 0) / flops_s
        return Op(kind=COMPUTE, stream=a.get("stream", "compute"), duration_s=dur, **base)
    stream = a.get("stream", f"comm-{node['id']}")
    if t == COMM_COLL:
        kind = _int(a, "comm_type", node)
        if kind not in COMM_TYPES:
            name = next((k for k, v in COMM_NAMES.items() if v == kind), str(kind))
            raise ChakraError(f"collective {name} is not supported "
                              f"(supported: {', '.join(COMM_TYPES.values())})")
        pg = a.get("pg_name")
        if pg in (None, ""):
            group = tuple(range(n))
        elif str(pg) in groups:
            group = groups[str(pg)]
        else:
            raise ChakraError(f"process group {pg!r} is not defined (give the metadata's "
                              f"pg:<name> lists or a communicator-group JSON)")
        dims = a.get("involved_dim")
        if isinstance(dims, list) and not all(dims):
            raise ChakraError(f"involved_dim {dims} leaves out a network dimension (this "
                              f"fabric has one)")
        size = _int(a, "comm_size", node)
        if COMM_TYPES[kind] == "all-gather":
            size *= len(group)
        return Op(kind=COLLECTIVE, stream=stream, coll=COMM_TYPES[kind], bytes=size,
                  group=group, **base)
    if t in (COMM_SEND, COMM_RECV):
        send = t == COMM_SEND
        peer = _int(a, "comm_dst" if send else "comm_src", node)
        return Op(kind=SEND if send else RECV, stream=stream, peer=peer,
                  tag=a.get("comm_tag", 0), bytes=_int(a, "comm_size", node), **base)
    raise ChakraError(f"node type {t} is not supported")


def _comm_groups(path: str | Path) -> dict:
    """ASTRA-sim's communicator-group file: {"<pg_name>": [ranks...], ...}."""
    try:
        data = json.loads(Path(path).read_text())
        return {str(k): tuple(int(r) for r in v) for k, v in data.items()}
    except (OSError, ValueError, TypeError, AttributeError) as err:
        raise ChakraError(f"{path}: not a communicator-group JSON ({err})") from None
