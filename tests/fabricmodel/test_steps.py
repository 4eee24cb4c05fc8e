from collections import Counter

import pytest

from fabricmodel import steps


def _received(step_list, n):
    got = Counter()
    for step in step_list:
        for f in step.flows:
            got[f.dst] += f.bytes
    return [got[i] for i in range(n)]


def test_ring_allreduce_moves_2_n_minus_1_over_n_per_rank():
    n, size = 8, 8 * 1024
    s = steps.ring_allreduce(n, size)
    assert len(s) == 2 * (n - 1)
    assert all(f.dst == (f.src + 1) % n for st in s for f in st.flows)
    assert _received(s, n) == [2 * (n - 1) * size // n] * n


def test_halving_doubling_partners_and_sizes():
    n, size = 8, 8 * 1024
    s = steps.halving_doubling_allreduce(n, size)
    assert len(s) == 6
    assert [st.flows[0].dst for st in s] == [4, 2, 1, 1, 2, 4]
    assert [st.flows[0].bytes for st in s] == [4096, 2048, 1024, 1024, 2048, 4096]
    # bandwidth-optimal: each rank receives 2 (n-1)/n of its buffer, like ring
    assert _received(s, n) == [2 * (n - 1) * size // n] * n
    for st in s:  # pairwise exchanges: every rank sends and receives exactly once
        assert sorted(f.src for f in st.flows) == sorted(f.dst for f in st.flows) == list(range(n))


def test_direct_and_all_to_all_are_all_pairs():
    n, size = 5, 5 * 100
    d = steps.direct_allreduce(n, size)
    a = steps.all_to_all(n, size)
    assert len(d) == 2 and len(a) == 1
    assert len(a[0].flows) == n * (n - 1)
    assert {(f.src, f.dst) for f in a[0].flows} == {(i, j) for i in range(n) for j in range(n) if i != j}
    assert all(f.bytes == 100 for st in d + a for f in st.flows)


@pytest.mark.parametrize("call, message", [
    (lambda: steps.halving_doubling_allreduce(6, 600), "power-of-two"),
    (lambda: steps.ring_allreduce(1, 10), "at least 2 ranks"),
    (lambda: steps.all_to_all(4, 10), "multiple of the 4 ranks"),
    (lambda: steps.steps("tree", 4, 400), "unknown collective 'tree'"),
])
def test_bad_parameters(call, message):
    with pytest.raises(ValueError, match=message):
        call()
