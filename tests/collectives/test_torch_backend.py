"""The torch.distributed backend `mlfabric` (collectives/torchpg.py) on 4 ranks in namespaces
around a bridge, against PyTorch's own `gloo` over loopback running the same script
(tests/collectives/torch_ranks.py): every collective on random tensors of each dtype and odd
sizes, a sub-group, halving-doubling and multicast Allgather chosen per group, two
all-reduces in flight, the logged fallback of an in-network all-reduce and the error for an
operation nothing implements. One launch per backend, shared by the module's tests."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (scripts/setup.sh "
                                            "installs torch==2.13.0, the CPU build)")

from bridge_net import make_bridge_net  # noqa: E402
from torch_ranks import DTYPES, SIZES, SUBGROUP, make  # noqa: E402

from collectives.launch import launch  # noqa: E402
from tests.conftest import NetnsFactory  # noqa: E402

pytestmark = [pytest.mark.netns, pytest.mark.slow]
RANKS = 4
PROGRAM = "tests.collectives.torch_ranks"
# |mlfabric - gloo| allowed per dtype for reductions of 8 standard normals: a few units in
# the last place of sums of magnitude ~3-10, summed in another order (exact for int32)
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 0.25, torch.float16: 0.05,
             torch.int64: 0, torch.int32: 0}


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """Both backends' results per rank: {backend: [rank's {results, seen}]}."""
    factory = NetnsFactory()
    out = tmp_path_factory.mktemp("torchpg")
    try:
        net = make_bridge_net(factory, RANKS)
        launch(["127.0.0.1"] * RANKS, [{"backend": "gloo"}], port=18720, out_dir=out,
               timeout=300, program=PROGRAM)
        launch(net.ips, [{"backend": "mlfabric"}], namespaces=net.namespaces, port=18720,
               out_dir=out, timeout=300, step_timeout=60, program=PROGRAM)
        yield {b: [torch.load(out / f"{b}_rank{r}.pt") for r in range(RANKS)]
               for b in ("gloo", "mlfabric")}
    finally:
        factory.cleanup()


def _expected(case: str, rank: int) -> torch.Tensor | None:
    """What a case must give, computed here in float64 from the ranks' seeded inputs, for
    the cases gloo refuses (its result is then an error text)."""
    kind, dname, n = case.rsplit("_", 2)[0], case.rsplit("_", 2)[1], int(case.rsplit("_", 2)[2])
    dt = DTYPES[dname]
    xs = [make(case, r, dt, n * (RANKS if kind.startswith("reduce_scatter") else 1)).double()
          for r in range(RANKS)]
    if kind == "allreduce":
        return sum(xs).to(dt)
    if kind == "allreduce_max":
        return torch.stack(xs).max(0).values.to(dt)
    if kind.startswith("reduce_scatter"):
        return sum(xs)[rank * n:(rank + 1) * n].to(dt)
    return None


def _close(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got, want)
    tol = TOLERANCE[got.dtype]
    diff = (got.double() - want.double()).abs().max().item() if got.numel() else 0.0
    assert diff <= tol, f"{what}: max |mlfabric - reference| = {diff} > {tol}"


def test_torch_every_collective_matches_gloo_on_each_dtype_and_odd_sizes(ran):
    refused = []
    for rank in range(RANKS):
        mine, ref = ran["mlfabric"][rank]["results"], ran["gloo"][rank]["results"]
        for case, want in ref.items():
            got = mine[case]
            assert not isinstance(got, str), f"rank {rank} {case}: {got}"
            if isinstance(want, str):             # gloo refused: compute it here instead
                refused.append(case)
                want = _expected(case, rank)
                assert want is not None, f"{case}: gloo said {ref[case]}"
            _close(got, want, f"rank {rank} {case}")
    cases = set(ran["gloo"][0]["results"])
    for dname in DTYPES:                          # every collective ran on every dtype
        for n in SIZES:
            for kind in ("allreduce", "allgather_tensor", "allgather_list",
                         "reduce_scatter_tensor", "reduce_scatter_list", "broadcast"):
                assert f"{kind}_{dname}_{n}" in cases
        for kind in ("alltoall_single", "alltoall_list", "sendrecv"):
            assert f"{kind}_{dname}" in cases
    print(f"gloo refused {len(set(refused))} cases, checked against float64: "
          f"{sorted(set(refused))}")


def test_torch_subgroup_and_per_group_algorithms_match_gloo(ran):
    for rank in range(RANKS):
        mine, ref = ran["mlfabric"][rank]["results"], ran["gloo"][rank]["results"]
        for dname in DTYPES:
            names = [f"hd_allreduce_{dname}", f"mcast_allgather_{dname}"]
            if rank in SUBGROUP:
                names += [f"sub_allreduce_{dname}", f"sub_allgather_{dname}"]
            else:
                assert f"sub_allreduce_{dname}" not in mine
            for name in names:
                _close(mine[name], ref[name], f"rank {rank} {name}")


def test_torch_two_allreduces_in_flight(ran):
    for rank in range(RANKS):
        seen = ran["mlfabric"][rank]["seen"]
        # both posted before the first (800 KB over the transport) completed
        assert seen["in_flight"][0], seen
        for name in ("async_big", "async_small"):
            _close(ran["mlfabric"][rank]["results"][name], ran["gloo"][rank]["results"][name],
                   f"rank {rank} {name}")


def test_torch_in_network_fallback_is_logged_once(ran):
    for rank in range(RANKS):
        mine, ref = ran["mlfabric"][rank], ran["gloo"][rank]
        for name in ("fallback_max", "fallback_int64"):
            _close(mine["results"][name], ref["results"][name], f"rank {rank} {name}")
        log = mine["seen"]["log"]
        assert sum("cannot reduce with MAX" in line for line in log) == 1, log
        assert sum("not torch.int64" in line for line in log) == 1, log
        assert all("running it on ring" in line for line in log), log


def test_torch_op_nothing_implements_is_a_precise_error(ran):
    for rank in range(RANKS):
        seen = ran["mlfabric"][rank]["seen"]
        assert seen["error_reduce"].startswith("UnsupportedOp: "), seen
        assert "no algorithm implements reduce" in seen["error_reduce"]
        assert "BAND is a bitwise reduction" in seen["error_band_float"], seen
