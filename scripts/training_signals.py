#!/usr/bin/env python3
"""Measured training signals: small models trained in NumPy on bundled data.

    python scripts/training_signals.py [--out accelsim/data/traces] [--epochs 30] [--seed 0]

Trains an MLP (64-64-32-10) and a small CNN (conv 8, conv 16, fc 10) on
scikit-learn's bundled handwritten digits (``sklearn.datasets.load_digits``:
1,797 8x8 images shipped inside the package, nothing downloaded) with plain
SGD, seeded and deterministic, and writes per model two CSV traces
(``docs/techniques/training-signals.md`` describes them):

* ``digits_<model>.weights.csv``, ``layer,kind,epoch,group,statistic,relative``:
  per layer, output channel (a neuron's weight row, a conv filter) and epoch,
  the mean over the epoch's steps of ``|dw_g| / |w_g|`` (the update's norm over
  the group's weights' norm, the statistic convergence-aware skipping
  thresholds), and the same in units of the layer's epoch-0 mean over groups;
* ``digits_<model>.predictor.csv``, ``layer,epoch,predictor_error``: per layer
  and epoch, the mean relative squared error ``|g_hat - g|^2 / |g|^2`` of an
  ADA-GP-style predictor's weight-gradient prediction, measured on each step
  before the predictor learns from that step's true gradient.

The predictor follows ADA-GP's tensor reorganisation (one sample per output
channel, its batch-averaged output activation, pooled to at most 2x2 for a
conv) and is one linear map per layer trained online by SGD on the squared
error; the model itself always trains by back-propagation.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "accelsim" / "data" / "traces"
EPS = 1e-12


class Layer(Protocol):
    def forward(self, x: np.ndarray) -> np.ndarray: ...

    def backward(self, dy: np.ndarray) -> np.ndarray: ...


@dataclass
class Linear:
    """``y = x W + b``; a group is an output neuron (a column of ``W``)."""

    name: str
    w: np.ndarray
    b: np.ndarray
    kind: str = "linear"
    x: np.ndarray = field(default_factory=lambda: np.zeros(0))
    y: np.ndarray = field(default_factory=lambda: np.zeros(0))
    dw: np.ndarray = field(default_factory=lambda: np.zeros(0))
    db: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.x = x
        self.y = x @ self.w + self.b
        return self.y

    def backward(self, dy: np.ndarray) -> np.ndarray:
        self.dw = self.x.T @ dy
        self.db = dy.sum(axis=0)
        return dy @ self.w.T

    def group_weights(self, w: np.ndarray) -> np.ndarray:
        """Weights (or their change) as one row per group."""
        return w.T

    def channel_features(self) -> np.ndarray:
        """Per output channel, its batch-averaged output activation (the predictor's input)."""
        return self.y.mean(axis=0)[:, None]


def im2col(x: np.ndarray) -> np.ndarray:
    """Patches of a 3x3, stride-1, pad-1 convolution: ``(N H W, C 9)``."""
    n, c, h, w = x.shape
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.empty((n, h, w, c, 3, 3))
    for i in range(3):
        for j in range(3):
            cols[..., i, j] = padded[:, :, i : i + h, j : j + w].transpose(0, 2, 3, 1)
    return cols.reshape(n * h * w, c * 9)


def col2im(cols: np.ndarray, shape: tuple[int, int, int, int]) -> np.ndarray:
    """The adjoint of :func:`im2col`: patches summed back into an input-shaped tensor."""
    n, c, h, w = shape
    patches = cols.reshape(n, h, w, c, 3, 3)
    padded = np.zeros((n, c, h + 2, w + 2))
    for i in range(3):
        for j in range(3):
            padded[:, :, i : i + h, j : j + w] += patches[..., i, j].transpose(0, 3, 1, 2)
    return padded[:, :, 1:-1, 1:-1]


@dataclass
class Conv:
    """3x3, stride-1, pad-1 convolution; ``w`` is ``(K, C 9)``, a group is a filter."""

    name: str
    w: np.ndarray
    b: np.ndarray
    kind: str = "conv"
    shape: tuple[int, int, int, int] = (0, 0, 0, 0)
    cols: np.ndarray = field(default_factory=lambda: np.zeros(0))
    y: np.ndarray = field(default_factory=lambda: np.zeros(0))
    dw: np.ndarray = field(default_factory=lambda: np.zeros(0))
    db: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def forward(self, x: np.ndarray) -> np.ndarray:
        n, _, h, w = x.shape
        self.shape = x.shape
        self.cols = im2col(x)
        out = self.cols @ self.w.T + self.b
        self.y = out.reshape(n, h, w, -1).transpose(0, 3, 1, 2)
        return self.y

    def backward(self, dy: np.ndarray) -> np.ndarray:
        flat = dy.transpose(0, 2, 3, 1).reshape(-1, self.w.shape[0])
        self.dw = flat.T @ self.cols
        self.db = flat.sum(axis=0)
        return col2im(flat @ self.w, self.shape)

    def group_weights(self, w: np.ndarray) -> np.ndarray:
        return w

    def channel_features(self) -> np.ndarray:
        """Per filter, its batch-averaged output map pooled to at most 2x2."""
        mean = self.y.mean(axis=0)
        k, h, w = mean.shape
        p = min(2, h)
        return mean.reshape(k, p, h // p, p, w // p).mean(axis=(2, 4)).reshape(k, p * p)


class Relu:
    def forward(self, x: np.ndarray) -> np.ndarray:
        self.mask = x > 0
        return x * self.mask

    def backward(self, dy: np.ndarray) -> np.ndarray:
        return dy * self.mask


class Pool:
    """2x2 max pooling, stride 2 (ties to the first maximum)."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        n, c, h, w = x.shape
        windows = x.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5)
        flat = windows.reshape(n, c, h // 2, w // 2, 4)
        self.arg = flat.argmax(axis=-1)
        self.shape = x.shape
        return np.take_along_axis(flat, self.arg[..., None], axis=-1)[..., 0]

    def backward(self, dy: np.ndarray) -> np.ndarray:
        n, c, h, w = self.shape
        flat = np.zeros((n, c, h // 2, w // 2, 4))
        np.put_along_axis(flat, self.arg[..., None], dy[..., None], axis=-1)
        windows = flat.reshape(n, c, h // 2, w // 2, 2, 2).transpose(0, 1, 2, 4, 3, 5)
        return windows.reshape(n, c, h, w)


class Flatten:
    def forward(self, x: np.ndarray) -> np.ndarray:
        self.shape = x.shape
        return x.reshape(x.shape[0], -1)

    def backward(self, dy: np.ndarray) -> np.ndarray:
        return dy.reshape(self.shape)


def softmax_loss(logits: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean softmax cross-entropy and its gradient with respect to the logits."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(shifted)
    p /= p.sum(axis=1, keepdims=True)
    n = len(labels)
    loss = float(-np.log(p[np.arange(n), labels] + EPS).mean())
    p[np.arange(n), labels] -= 1
    return loss, p / n


def he(rng: np.random.Generator, fan_in: int, shape: tuple[int, ...]) -> np.ndarray:
    return rng.normal(0.0, np.sqrt(2.0 / fan_in), shape)


def mlp(rng: np.random.Generator) -> list[Layer]:
    """64-64-32-10, ReLU."""
    sizes = (64, 64, 32, 10)
    layers: list[Layer] = []
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        layers.append(Linear(f"fc{i + 1}", he(rng, a, (a, b)), np.zeros(b)))
        if i < len(sizes) - 2:
            layers.append(Relu())
    return layers


def cnn(rng: np.random.Generator) -> list[Layer]:
    """conv 1->8, pool, conv 8->16, pool (2x2x16), fc 64->10."""
    return [
        Conv("conv1", he(rng, 9, (8, 9)), np.zeros(8)),
        Relu(),
        Pool(),
        Conv("conv2", he(rng, 72, (16, 72)), np.zeros(16)),
        Relu(),
        Pool(),
        Flatten(),
        Linear("fc", he(rng, 64, (64, 10)), np.zeros(10)),
    ]


MODELS = {"mlp": (mlp, False), "cnn": (cnn, True)}
"""Each model: its builder and whether it reads images (else flattened pixels)."""


def weighted(layers: Sequence[Layer]) -> list[Linear | Conv]:
    return [layer for layer in layers if isinstance(layer, Linear | Conv)]


def forward_backward(layers: Sequence[Layer], x: np.ndarray, labels: np.ndarray) -> float:
    """One forward and backward pass; every weighted layer's gradients left in place."""
    for layer in layers:
        x = layer.forward(x)
    loss, dy = softmax_loss(x, labels)
    for layer in reversed(layers):
        dy = layer.backward(dy)
    return loss


def group_statistic(layer: Linear | Conv, delta: np.ndarray) -> np.ndarray:
    """Per group, ``|dw_g| / |w_g|``: the update's norm over the updated weights' norm."""
    change = np.linalg.norm(layer.group_weights(delta), axis=1)
    return change / (np.linalg.norm(layer.group_weights(layer.w), axis=1) + EPS)


@dataclass
class Predictor:
    """ADA-GP-style gradient predictor of one layer: a linear map from an output
    channel's features (and a constant) to that channel's weight gradient."""

    m: np.ndarray
    lr: float

    def error_and_learn(self, features: np.ndarray, grads: np.ndarray) -> float:
        """The relative squared error of the prediction, then one SGD step on it."""
        inputs = np.hstack([features, np.ones((len(features), 1))])
        guess = inputs @ self.m
        error = float(((guess - grads) ** 2).sum() / (np.square(grads).sum() + EPS))
        step = inputs.T @ (guess - grads) / len(features)
        self.m -= self.lr * step / (np.square(inputs).mean() + EPS)
        return error


@dataclass(frozen=True)
class Settings:
    """How a model is trained (every value our choice, recorded in the docs)."""

    epochs: int = 30
    batch: int = 32
    lr: float = 0.05
    predictor_lr: float = 0.1
    seed: int = 0


def train(model: str, x: np.ndarray, y: np.ndarray, s: Settings) -> tuple[list[list[object]], ...]:
    """Trains ``model`` and returns its weight-statistic rows and predictor-error rows."""
    rng = np.random.default_rng(s.seed)
    build, images = MODELS[model]
    layers = build(rng)
    inputs = x[:, None] if images else x.reshape(len(x), -1)
    trained = weighted(layers)
    predictors = {}
    stats: dict[str, list[np.ndarray]] = {layer.name: [] for layer in trained}
    errors: dict[str, list[float]] = {layer.name: [] for layer in trained}
    for _ in range(s.epochs):
        order = rng.permutation(len(inputs))
        sums = {layer.name: np.zeros(len(layer.b)) for layer in trained}
        errs = {layer.name: 0.0 for layer in trained}
        steps = 0
        for start in range(0, len(order), s.batch):
            take = order[start : start + s.batch]
            forward_backward(layers, inputs[take], y[take])
            steps += 1
            for layer in trained:
                features = layer.channel_features()
                grads = layer.group_weights(layer.dw)
                if layer.name not in predictors:
                    shape = (features.shape[1] + 1, grads.shape[1])
                    predictors[layer.name] = Predictor(np.zeros(shape), s.predictor_lr)
                errs[layer.name] += predictors[layer.name].error_and_learn(features, grads)
                delta = -s.lr * layer.dw
                sums[layer.name] += group_statistic(layer, delta)
                layer.w += delta
                layer.b -= s.lr * layer.db
        for layer in trained:
            stats[layer.name].append(sums[layer.name] / steps)
            errors[layer.name].append(errs[layer.name] / steps)
    return _rows(trained, stats, errors)


def _rows(
    trained: Sequence[Linear | Conv],
    stats: dict[str, list[np.ndarray]],
    errors: dict[str, list[float]],
) -> tuple[list[list[object]], list[list[object]]]:
    weights: list[list[object]] = []
    predictor: list[list[object]] = []
    for layer in trained:
        first = float(stats[layer.name][0].mean())
        for epoch, groups in enumerate(stats[layer.name]):
            for g, value in enumerate(groups):
                weights.append(
                    [layer.name, layer.kind, epoch, g, f"{value:.6g}", f"{value / first:.6g}"]
                )
        for epoch, error in enumerate(errors[layer.name]):
            predictor.append([layer.name, epoch, f"{error:.6g}"])
    return weights, predictor


def digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's bundled digits: 1,797 8x8 images scaled to [0, 1], and labels."""
    from sklearn.datasets import load_digits

    data = load_digits()
    return data.images / 16.0, data.target


def write(path: Path, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    with path.open("w", newline="") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(header)
        out.writerows(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help="directory of the traces")
    parser.add_argument("--epochs", type=int, default=Settings.epochs)
    parser.add_argument("--seed", type=int, default=Settings.seed)
    args = parser.parse_args(argv)
    settings = Settings(epochs=args.epochs, seed=args.seed)
    x, y = digits()
    args.out.mkdir(parents=True, exist_ok=True)
    for model in MODELS:
        began = time.perf_counter()
        weights, predictor = train(model, x, y, settings)
        stem = args.out / f"digits_{model}"
        write(
            stem.with_suffix(".weights.csv"),
            ("layer", "kind", "epoch", "group", "statistic", "relative"),
            weights,
        )
        write(stem.with_suffix(".predictor.csv"), ("layer", "epoch", "predictor_error"), predictor)
        print(f"{model}: {time.perf_counter() - began:.1f} s, {stem}.*.csv")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
