"""The training workload without a fabric: the digits split, the MLP's gradient against finite
differences, and that a data-parallel step (mean of the ranks' gradients) is the step of the
whole batch; the training table's link-rate bounds per model; the training command's argument
checks."""
from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from collectives.cli import main
from collectives.mlp import MLP, digits, digits_table
from collectives.train import TrainConfig, allreduce_of
from collectives.train_launch import allreduce_bound_s, table


def test_digits_split_is_disjoint_and_seeded():
    a, b = digits(0), digits(0)
    assert len(a.y_train) + len(a.y_test) == 1797 and len(a.y_test) == 359
    assert np.array_equal(a.x_test, b.x_test) and not np.array_equal(a.x_test, digits(1).x_test)
    assert 0.0 <= a.x_train.min() and a.x_train.max() <= 1.0


def test_digits_table_is_scikit_learns_digits():
    from sklearn.datasets import load_digits
    pixels, labels = digits_table()
    ref = load_digits()
    assert np.array_equal(pixels, ref.data) and np.array_equal(labels, ref.target)


def test_mlp_gradient_matches_finite_differences():
    data = digits(0)
    model = MLP(64, 8, seed=3)
    model.params = model.params.astype(np.float64)      # finite differences need the digits
    x, y = data.x_train[:20].astype(np.float64), data.y_train[:20]
    _, grad = model.loss_and_grad(x, y)
    rng = np.random.default_rng(0)
    for i in rng.choice(len(model.params), 30, replace=False):
        keep = model.params[i]
        model.params[i] = keep + 1e-6
        up = model.loss(x, y)
        model.params[i] = keep - 1e-6
        down = model.loss(x, y)
        model.params[i] = keep
        assert grad[i] == pytest.approx((up - down) / 2e-6, abs=1e-6)


def test_mean_of_rank_gradients_is_the_global_batch_gradient():
    data = digits(0)
    model = MLP(64, 16, seed=0)
    x, y = data.x_train[:64], data.y_train[:64]
    _, whole = model.loss_and_grad(x, y)
    parts = [model.loss_and_grad(x[r * 16:(r + 1) * 16], y[r * 16:(r + 1) * 16])[1]
             for r in range(4)]
    np.testing.assert_allclose(np.sum(parts, axis=0) / 4, whole, rtol=1e-4, atol=1e-6)


def test_bad_training_configurations_are_refused():
    with pytest.raises(ValueError, match="positive"):
        TrainConfig(epochs=0)
    with pytest.raises(ValueError, match="momentum"):
        TrainConfig(momentum=1.0)
    with pytest.raises(ValueError, match="no all-reduce 'direct'"):
        allreduce_of("direct", {})


@pytest.mark.parametrize("args,message", [
    (["--topology", "controller/topologies/leafspine-2x2.yaml"], "fabricd sets up their jobs"),
    (["--topology", "controller/topologies/leafspine-2x2.yaml", "--algos", "ring,tree"],
     "unknown all-reduce ['tree']"),
    (["--topology", "controller/topologies/leafspine-2x2.yaml", "--algos", "ring",
      "--netns", "a,b"], "2 namespaces for 4 ranks"),
    (["--topology", "controller/topologies/leafspine-2x2.yaml", "--ranks", "5"],
     "has 4 hosts, not 5"),
    (["--topology", "controller/topologies/leafspine-2x2.yaml", "--epochs", "0"],
     "Invalid value for '--epochs'"),
])
def test_train_command_refuses_bad_arguments_before_anything_starts(args, message):
    res = CliRunner().invoke(main, ["train", *args])
    assert res.exit_code == 2 and message in res.output, res.output


def test_train_bound_puts_netreduce_at_n_over_2n_minus_1_of_ring():
    n, elements = 8, 230_410
    ring = allreduce_bound_s("ring", elements, n, 20.0, mtu=4096)
    nr = allreduce_bound_s("netreduce", elements, n, 20.0)
    # payload ratio N/(2(N-1)) = 0.571, NetReduce's 1 KiB packets carrying more headers
    assert 0.571 < nr / ring < 0.571 * 1.06
    assert ring == pytest.approx(2 * 7 / 8 * elements * 4 * (1 + 58 / 4096) * 8 / 20e6, rel=0.01)
    with pytest.raises(ValueError, match="no bound for all-reduce 'direct'"):
        allreduce_bound_s("direct", elements, n, 20.0)


def _rows(params: int, algo: str, step_s: float, accuracy: float) -> list[dict]:
    base = {"params": params, "algo": algo, "rank": 0, "ranks": 8, "train_loss": 0.1,
            "test_accuracy": accuracy, "allreduce_s": step_s * 0.9, "digest": "x"}
    return [base | {"epoch": 0, "steps": 0, "step_s": 0.0},
            base | {"epoch": 1, "steps": 11, "step_s": step_s}]


def test_train_table_holds_both_models_each_against_its_own_ring():
    rows = (_rows(2_410, "ring", 0.020, 0.90) + _rows(2_410, "netreduce", 0.025, 0.90)
            + _rows(230_410, "ring", 0.800, 0.95) + _rows(230_410, "netreduce", 0.500, 0.94))
    lines = table(rows, link_mbps=20.0, mtu=4096).splitlines()
    small_nr = next(line for line in lines if line.startswith("2,410") and "netreduce" in line)
    wide_nr = next(line for line in lines if line.startswith("230,410") and "netreduce" in line)
    assert "0.80x" in small_nr and "1.60x" in wide_nr         # ring's step over this one's
    assert "-1.00" in wide_nr                                 # pp from the wide model's ring
    bound = f"{allreduce_bound_s('netreduce', 230_410, 8, 20.0) * 1e3:.1f}"
    assert bound in wide_nr
    assert f"{allreduce_bound_s('netreduce', 2_410, 8, 20.0) * 1e3:.1f}" in small_nr
