"""The training workload without a fabric: the digits split, the MLP's gradient against finite
differences, and that a data-parallel step (mean of the ranks' gradients) is the step of the
whole batch; the training command's argument checks."""
from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from collectives.cli import main
from collectives.mlp import MLP, digits, digits_table
from collectives.train import TrainConfig, allreduce_of


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
