"""Chakra ET traces: the reader decodes what protobuf's own implementation encodes from the
schema's field numbers, a written DAG reads back identical, and a malformed trace is refused
naming its file and node."""
from __future__ import annotations

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from workloads import chakra
from workloads.generators import data_parallel, gpt_3d
from workloads.models import Cluster

F = descriptor_pb2.FieldDescriptorProto


def _classes():
    """GlobalMetadata, Node and AttributeProto built from the schema's field numbers and types
    (our own description of them, not the upstream file), by protobuf's message factory."""
    fd = descriptor_pb2.FileDescriptorProto(name="et_check.proto", package="etcheck",
                                            syntax="proto3")

    def msg(name, *fields):
        m = fd.message_type.add(name=name)
        for number, fname, ftype, label, type_name in fields:
            f = m.field.add(name=fname, number=number, type=ftype, label=label)
            if type_name:
                f.type_name = type_name
        return m

    opt, rep = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    msg("Int64List", (1, "values", F.TYPE_INT64, rep, None))
    attr = msg("AttributeProto", (1, "name", F.TYPE_STRING, opt, None),
               (3, "double_val", F.TYPE_DOUBLE, opt, None),
               (9, "int64_val", F.TYPE_INT64, opt, None),
               (10, "int64_list", F.TYPE_MESSAGE, opt, ".etcheck.Int64List"),
               (11, "uint32_val", F.TYPE_UINT32, opt, None),
               (17, "sint64_val", F.TYPE_SINT64, opt, None),
               (27, "bool_val", F.TYPE_BOOL, opt, None),
               (29, "string_val", F.TYPE_STRING, opt, None))
    attr.oneof_decl.add(name="value")
    for f in attr.field[1:]:
        f.oneof_index = 0
    msg("GlobalMetadata", (1, "version", F.TYPE_STRING, opt, None),
        (2, "attr", F.TYPE_MESSAGE, rep, ".etcheck.AttributeProto"))
    msg("Node", (1, "id", F.TYPE_UINT64, opt, None), (2, "name", F.TYPE_STRING, opt, None),
        (3, "type", F.TYPE_INT32, opt, None), (4, "ctrl_deps", F.TYPE_UINT64, rep, None),
        (5, "data_deps", F.TYPE_UINT64, rep, None),
        (7, "duration_micros", F.TYPE_UINT64, opt, None),
        (10, "attr", F.TYPE_MESSAGE, rep, ".etcheck.AttributeProto"))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    get = message_factory.MessageFactory(pool).GetPrototype
    return [get(pool.FindMessageTypeByName(f"etcheck.{n}"))
            for n in ("GlobalMetadata", "Node", "AttributeProto")]


def _framed(msg) -> bytes:
    data = msg.SerializeToString()
    return chakra._enc_varint(len(data)) + data


def test_chakra_reader_decodes_protobufs_encoding(tmp_path):
    Meta, Node, Attr = _classes()
    meta = Meta(version="0.0.4", attr=[Attr(name="pg:tp", int64_list={"values": [0, 1]})])
    comp = Node(id=5, name="fwd", type=chakra.COMP, duration_micros=1500)
    coll = Node(id=6, name="ar", type=chakra.COMM_COLL, data_deps=[5], ctrl_deps=[5], attr=[
        Attr(name="comm_type", int64_val=0), Attr(name="comm_size", int64_val=1 << 40),
        Attr(name="pg_name", string_val="tp"), Attr(name="is_cpu_op", bool_val=False)])
    send = Node(id=7, name="s", type=chakra.COMM_SEND, data_deps=[6], attr=[
        Attr(name="comm_dst", uint32_val=1), Attr(name="comm_size", sint64_val=4096),
        Attr(name="comm_tag", int64_val=3)])
    recv = Node(id=7, name="r", type=chakra.COMM_RECV, attr=[
        Attr(name="comm_src", uint32_val=0), Attr(name="comm_size", int64_val=4096),
        Attr(name="comm_tag", int64_val=3)])
    (tmp_path / "t.0.et").write_bytes(b"".join(map(_framed, (meta, comp, coll, send))))
    (tmp_path / "t.1.et").write_bytes(b"".join(map(_framed, (meta, comp, coll, recv))))
    wl = chakra.read(tmp_path / "t")
    fwd, ar, s = wl.ranks[0]
    assert fwd.kind == "compute" and fwd.duration_s == pytest.approx(1.5e-3)
    assert (ar.coll, ar.bytes, ar.group, ar.deps) == ("all-reduce", 1 << 40, (0, 1), (5,))
    assert (s.kind, s.peer, s.tag, s.bytes) == ("send", 1, 3, 4096)
    assert wl.ranks[1][2].kind == "recv" and wl.ranks[1][2].peer == 0
    # and protobuf parses what our writer writes
    chakra.write(wl, tmp_path / "w")
    data = (tmp_path / "w.0.et").read_bytes()
    msgs = list(chakra._messages(data))
    node = Node.FromString(msgs[2])
    assert (node.id, node.type, list(node.data_deps)) == (6, chakra.COMM_COLL, [5])
    assert {a.name: a.WhichOneof("value") for a in node.attr}["comm_size"] == "int64_val"


@pytest.mark.parametrize("wl", [
    data_parallel("resnet50", Cluster(8, 2), samples_per_gpu=2),
    gpt_3d("gpt3-13b", Cluster(16, 4), pipeline=2, micro_batches=3),
], ids=["ddp", "3d"])
def test_chakra_round_trip_is_identical(tmp_path, wl):
    paths = chakra.write(wl, tmp_path / "job")
    assert [p.name for p in paths] == [f"job.{r}.et" for r in range(wl.n)]
    back = chakra.read(tmp_path / "job")
    assert back.ranks == wl.ranks and back.gpus_per_host == wl.gpus_per_host


def _broken(tmp_path, mutate):
    wl = data_parallel("resnet50", Cluster(2, 1), samples_per_gpu=1)
    chakra.write(wl, tmp_path / "bad")
    path = tmp_path / "bad.1.et"
    path.write_bytes(mutate(path.read_bytes()))
    return path


def test_chakra_truncated_file_names_file_and_node(tmp_path):
    path = _broken(tmp_path, lambda b: b[:-5])
    with pytest.raises(chakra.ChakraError, match=rf"{path}: node #9 \(after node 8\): message at byte"):
        chakra.read(tmp_path / "bad")


def test_chakra_node_without_size_names_the_node(tmp_path):
    path = _broken(tmp_path, lambda b: b.replace(b"comm_size", b"comm_xize"))
    with pytest.raises(chakra.ChakraError,
                       match=rf"{path}: node 2 \(allreduce-bucket-0\): needs an integer "
                             r"attribute 'comm_size'"):
        chakra.read(tmp_path / "bad")


def test_chakra_missing_rank_and_unknown_dependency(tmp_path):
    wl = data_parallel("resnet50", Cluster(3, 1), samples_per_gpu=1)
    chakra.write(wl, tmp_path / "x")
    (tmp_path / "x.1.et").unlink()
    with pytest.raises(chakra.ChakraError, match=r"ranks \[1\] have no .et file"):
        chakra.read(tmp_path / "x")
    with pytest.raises(chakra.ChakraError, match="no trace files"):
        chakra.read(tmp_path / "nothing")


def test_chakra_unsupported_collective_is_named(tmp_path):
    path = _broken(tmp_path, lambda b: b.replace(b"comm_type\x48\x00", b"comm_type\x48\x05"))
    with pytest.raises(chakra.ChakraError, match=rf"{path}: node 2 .*BROADCAST is not supported"):
        chakra.read(tmp_path / "bad")
