"""Trace semantics as ASTRA-sim defines them, on the analytic executor: eager sends, receives
matched in order per (src, dst, tag), all-gather sizes per NPU, and malformed traces refused
at load naming the node."""
from __future__ import annotations

import json
import math
import re

import pytest

from workloads import chakra
from workloads.dag import COLLECTIVE, COMPUTE, RECV, SEND, Op, Workload, WorkloadError
from workloads.schedule import compute_bound, run_analytic

US = 1e-6


def astra_ring(n: int, steps: int, size: int, compute_s: float) -> Workload:
    """A ring written as ASTRA-sim's custom all-reduce is: every rank's chain is send to the
    next rank -> receive from the previous -> compute -> send ..., all with tag 0."""
    ranks = []
    for r in range(n):
        ops, prev = [], ()
        for s in range(steps):
            k = 3 * s
            ops.append(Op(k, f"send-{s}", SEND, f"comm-{k}", prev, peer=(r + 1) % n,
                          bytes=size))
            ops.append(Op(k + 1, f"recv-{s}", RECV, f"comm-{k + 1}", (k,), peer=(r - 1) % n,
                          bytes=size))
            ops.append(Op(k + 2, f"reduce-{s}", COMPUTE, "compute", (k + 1,),
                          duration_s=compute_s))
            prev = (k + 2,)
        ranks.append(ops)
    return Workload("astra-ring", ranks)


def test_trace_send_recv_ring_like_astra_sim_finishes():
    wl = astra_ring(4, 6, 1 << 17, 7 * US)
    assert compute_bound(wl) == pytest.approx(6 * 7 * US)
    # every step: the message (1 us here) then the reduction; nothing waits on a rendezvous
    out = run_analytic(wl, lambda op: 1 * US)
    assert out["iteration_s"] == pytest.approx(6 * (1 + 7) * US)


def test_trace_two_same_tag_messages_in_flight_are_both_delivered():
    # rank 0 sends two messages with one tag, the second after 2 s of compute; rank 1 posts
    # both receives at once: the first meets the first send, the second waits for the second
    wl = Workload("two", [
        [Op(0, "s1", SEND, "a", peer=1, bytes=8), Op(1, "c", COMPUTE, "b", duration_s=2.0),
         Op(2, "s2", SEND, "c", (1,), peer=1, bytes=8)],
        [Op(0, "r1", RECV, "a", peer=0, bytes=8), Op(1, "r2", RECV, "b", peer=0, bytes=8),
         Op(2, "after-r1", COMPUTE, "d", (0,), duration_s=0.5)]])
    out = run_analytic(wl, lambda op: 1.0)
    assert out["rank_s"] == [pytest.approx(3.0), pytest.approx(3.0)]
    arrivals = run_analytic(Workload("r1", [wl.ranks[0], wl.ranks[1][:1] + [
        Op(1, "r2", RECV, "b", (0,), peer=0, bytes=8)]]), lambda op: 1.0)
    assert arrivals["rank_s"][1] == pytest.approx(3.0)


def test_trace_receive_posted_late_finishes_at_once():
    wl = Workload("late", [[Op(0, "s", SEND, "a", peer=1, bytes=8)],
                           [Op(0, "c", COMPUTE, "c", duration_s=5.0),
                            Op(1, "r", RECV, "r", (0,), peer=0, bytes=8)]])
    out = run_analytic(wl, lambda op: 1.0)
    assert out["rank_s"] == [pytest.approx(1.0), pytest.approx(5.0)]


def test_trace_zero_byte_collective_completes():
    g = (0, 1)
    wl = Workload("z", [[Op(0, "ar", COLLECTIVE, "c", coll="all-reduce", bytes=0, group=g)],
                        [Op(0, "ar", COLLECTIVE, "c", coll="all-reduce", bytes=0, group=g)]])
    assert run_analytic(wl, lambda op: 0.0)["iteration_s"] == 0.0


def _one(op: Op) -> Workload:
    return Workload("m", [[op]])


@pytest.mark.parametrize("op, message", [
    (Op(0, "c", COMPUTE, "c", duration_s=math.nan), "duration nan s is not a number"),
    (Op(0, "c", COMPUTE, "c", duration_s=math.inf), "duration inf s is not a number"),
    (Op(0, "c", COMPUTE, "c", duration_s=-1.0), "duration -1.0 s"),
    (Op(0, "a", COLLECTIVE, "c", coll="all-reduce", bytes=-5, group=(0,)), "size -5 B"),
    (Op(0, "a", COLLECTIVE, "c", coll="all-reduce", bytes=1 << 63, group=(0,)),
     f"size {1 << 63} B is not an integer"),
])
def test_malformed_trace_sizes_and_durations_are_refused(op, message):
    with pytest.raises(WorkloadError, match=re.escape(f"rank 0 op 0 ({op.name}): {message}")):
        _one(op).validate()


def test_malformed_trace_cycle_is_named_at_load():
    wl = Workload("cyc", [[Op(0, "a", COMPUTE, "s", (2,)), Op(1, "b", COMPUTE, "s"),
                           Op(2, "c", COMPUTE, "t", (1,))]])
    # a waits on c, c on b, b on a (the op before it on stream s)
    with pytest.raises(WorkloadError, match=re.escape(
            "rank 0: ops wait on each other in a cycle: 1 (b) -> 2 (c) -> 0 (a) -> 1 (b)")):
        wl.validate()


def test_malformed_trace_deadlock_across_ranks_names_the_ops():
    wl = Workload("dl", [[Op(0, "r", RECV, "a", peer=1, bytes=8),
                          Op(1, "s", SEND, "b", (0,), peer=1, bytes=8)],
                         [Op(0, "r", RECV, "a", peer=0, bytes=8),
                          Op(1, "s", SEND, "b", (0,), peer=0, bytes=8)]])
    with pytest.raises(WorkloadError, match=re.escape("rank 0 op 0 (r): a recv its peers "
                                                      "never met")):
        compute_bound(wl)


def test_malformed_trace_send_and_receive_sizes_differ():
    wl = Workload("sz", [[Op(0, "s", SEND, "a", peer=1, bytes=8)],
                         [Op(0, "r", RECV, "a", peer=0, bytes=16)]])
    with pytest.raises(WorkloadError, match="sends 8 B, rank 1 op 0 \\(r\\) receives 16 B"):
        wl.validate()


def test_chakra_all_gather_comm_size_is_each_npus_input(tmp_path):
    g = (0, 1, 2, 3)
    wl = Workload("ag", [[Op(0, "ag", COLLECTIVE, "c", coll="all-gather", bytes=4 << 20,
                             group=g)] for _ in g])
    chakra.write(wl, tmp_path / "ag")
    node = chakra._node(list(chakra._messages((tmp_path / "ag.0.et").read_bytes()))[1])
    assert node["attr"]["comm_size"] == 1 << 20          # what each NPU contributes
    assert chakra.read(tmp_path / "ag").ranks == wl.ranks


def test_malformed_trace_non_utf8_name_is_refused(tmp_path):
    node = chakra._enc_node(0, "x", chakra.COMP, (), 1, {})
    node = node.replace(chakra._enc_bytes(2, b"x"), chakra._enc_bytes(2, b"\xff\xfe"))
    meta = chakra._framed(chakra._enc_bytes(1, b"0.0.4"))
    (tmp_path / "u.0.et").write_bytes(meta + chakra._framed(node))
    with pytest.raises(chakra.ChakraError, match=re.escape("u.0.et: node #0: the node's name "
                                                           "is not UTF-8")):
        chakra.read(tmp_path / "u")


def test_malformed_trace_memory_node_is_refused_naming_the_feature(tmp_path):
    meta = chakra._framed(chakra._enc_bytes(1, b"0.0.4"))
    node = chakra._framed(chakra._enc_node(3, "load", chakra.MEM_LOAD, (), 1, {}))
    (tmp_path / "m.0.et").write_bytes(meta + node)
    with pytest.raises(chakra.ChakraError, match="node 3 \\(load\\): memory load/store nodes"):
        chakra.read(tmp_path / "m")


def test_trace_results_are_json_without_nan():
    out = run_analytic(astra_ring(2, 2, 8, 1 * US), lambda op: 0.0)
    json.dumps(out, allow_nan=False)


def test_malformed_trace_unmodelled_features_are_named(tmp_path):
    meta = chakra._framed(chakra._enc_bytes(1, b"0.0.4"))
    dims = chakra._enc_bytes(1, b"involved_dim") + chakra._enc_bytes(
        28, chakra._enc_bytes(1, bytes([1, 0])))              # bool_list [true, false]
    node = chakra._enc_node(4, "ar", chakra.COMM_COLL, (), 0,
                            {"comm_type": 0, "comm_size": 64}) + chakra._enc_bytes(10, dims)
    (tmp_path / "d.0.et").write_bytes(meta + chakra._framed(node))
    with pytest.raises(chakra.ChakraError, match=re.escape(
            "node 4 (ar): involved_dim [True, False] leaves out a network dimension")):
        chakra.read(tmp_path / "d")
    bcast = chakra._enc_node(5, "bc", chakra.COMM_COLL, (), 0, {"comm_type": 5, "comm_size": 64})
    (tmp_path / "d.0.et").write_bytes(meta + chakra._framed(bcast))
    with pytest.raises(chakra.ChakraError, match="collective BROADCAST is not supported"):
        chakra.read(tmp_path / "d")
