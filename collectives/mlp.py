"""The training workload: scikit-learn's bundled `digits` (1,797 8x8 images of handwritten
digits, 10 classes; shipped with the package, no download) and a one-hidden-layer MLP in
numpy whose parameters and gradients are one flat float32 vector: the vector a data-parallel
step all-reduces."""
from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CLASSES = 10
PIXEL_MAX = 16.0               # digits' pixels are 0..16


@dataclass(frozen=True)
class Digits:
    x_train: np.ndarray        # float32, pixels scaled to 0..1
    y_train: np.ndarray        # int64 class labels
    x_test: np.ndarray
    y_test: np.ndarray


def digits(seed: int, test_fraction: float = 0.2) -> Digits:
    """The data set split at random (by `seed`) into a training and a test set."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), not {test_fraction}")
    pixels, y = digits_table()
    x = (pixels / PIXEL_MAX).astype(np.float32)
    order = np.random.default_rng(seed).permutation(len(y))
    test = order[:round(len(y) * test_fraction)]
    train = order[len(test):]
    return Digits(x[train], y[train], x[test], y[test])


def digits_table() -> tuple[np.ndarray, np.ndarray]:
    """The 1,797 images (64 pixels each, 0..16) and their labels, read from the file
    scikit-learn ships them in (`datasets/data/digits.csv.gz`: 64 pixel columns, then the
    label) without importing scikit-learn: its import took each rank process ~2 s of CPU,
    as much as the rest of the rank's start."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("scikit-learn is not installed: its bundled digits data set is the "
                          "training data (pip install scikit-learn)")
    path = Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"
    table = np.loadtxt(path, delimiter=",")
    return table[:, :-1], table[:, -1].astype(np.int64)


class MLP:
    """inputs -> hidden (ReLU) -> classes (softmax, cross-entropy). `params` is one float32
    vector; the weight matrices are views into it, so an update of `params` is the model's."""

    def __init__(self, inputs: int, hidden: int, classes: int = CLASSES, seed: int = 0):
        if min(inputs, hidden, classes) < 1:
            raise ValueError(f"layer sizes must be positive: {inputs}, {hidden}, {classes}")
        self.shapes = [(inputs, hidden), (hidden,), (hidden, classes), (classes,)]
        sizes = [int(np.prod(s)) for s in self.shapes]
        self.params = np.zeros(sum(sizes), dtype=np.float32)
        self._cuts = np.cumsum([0, *sizes])
        rng = np.random.default_rng(seed)
        w1, _, w2, _ = self.layers(self.params)
        w1[:] = rng.standard_normal(w1.shape) * np.sqrt(2.0 / inputs)    # He (ReLU)
        w2[:] = rng.standard_normal(w2.shape) * np.sqrt(1.0 / hidden)

    def layers(self, flat: np.ndarray) -> list[np.ndarray]:
        """w1, b1, w2, b2 as views of `flat` (the parameters, or a gradient)."""
        return [flat[a:b].reshape(s)
                for a, b, s in zip(self._cuts[:-1], self._cuts[1:], self.shapes, strict=True)]

    def _forward(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        w1, b1, w2, b2 = self.layers(self.params)
        h = np.maximum(x @ w1 + b1, 0.0)
        z = h @ w2 + b2
        z = z - z.max(axis=1, keepdims=True)
        p = np.exp(z)
        return h, p / p.sum(axis=1, keepdims=True)

    def loss_and_grad(self, x: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
        """Mean cross-entropy over the batch and its gradient, one float32 vector."""
        h, p = self._forward(x)
        loss = float(-np.log(p[np.arange(len(y)), y] + 1e-12).mean())
        dz = p.copy()
        dz[np.arange(len(y)), y] -= 1.0
        dz /= len(y)
        w1, _, w2, _ = self.layers(self.params)
        grad = np.zeros_like(self.params)
        gw1, gb1, gw2, gb2 = self.layers(grad)
        gw2[:] = h.T @ dz
        gb2[:] = dz.sum(axis=0)
        dh = (dz @ w2.T) * (h > 0)
        gw1[:] = x.T @ dh
        gb1[:] = dh.sum(axis=0)
        return loss, grad

    def loss(self, x: np.ndarray, y: np.ndarray) -> float:
        _, p = self._forward(x)
        return float(-np.log(p[np.arange(len(y)), y] + 1e-12).mean())

    def accuracy(self, x: np.ndarray, y: np.ndarray) -> float:
        _, p = self._forward(x)
        return float((p.argmax(axis=1) == y).mean())

    def digest(self) -> str:
        """A short hash of the parameters: data-parallel ranks must hold the same bits."""
        return hashlib.sha256(self.params.tobytes()).hexdigest()[:16]
