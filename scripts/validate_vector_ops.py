"""Accuracy of accelsim's lone vector-op timing against measured TPU latencies: the
vector section of docs/validation-silicon.md (``scripts/validate_silicon.py`` writes
the page and calls :func:`run_chip` and :func:`section`).

For each chip, on the GEMM-calibrated file (``accelsim calibrate``'s GEMM fit, as in
the bundled ``*_calibrated.yaml``), against SCALE-Sim's measured lone vector ops in
``configs/validation/silicon/vector_ops/``:

- before: the vector unit as the GEMM fit leaves it (the chip's fixed cost per op,
  no stream bound), every op timed alone by the engine's arithmetic;
- fitted on a random half of each op's rows (seed ``--seed``), scored on that half
  (training) and on the other half (held out), each op timed alone;
- cross-validated on the training half in ``FOLDS`` folds (the fit's closed form).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from accelsim.calibration.vector_fit import (
    NAMES,
    cross_validated_vector,
    engine_vector_us,
    fit_vector,
    vector_class_errors,
    vector_features,
    vector_hardware,
)
from accelsim.calibration.vector_ops import CLASSES, OPS, read_vector_measurements

DATA = Path(__file__).resolve().parents[1] / "configs" / "validation" / "silicon" / "vector_ops"
FOLDS = 10
COLUMNS = ("all", *CLASSES)


@dataclass(frozen=True)
class VectorResult:
    name: str
    values: dict[str, float]
    train: Any  # the VectorMeasurements fitted
    held: Any  # the other half
    before: np.ndarray  # the held-out half, before the vector fit
    trained: np.ndarray  # the training half, fitted file
    after: np.ndarray  # the held-out half, fitted file
    folded: np.ndarray  # the training half, each op by the fit of the other folds
    seconds: float


def run_chip(name: str, folder: str, hw: Any, seed: int) -> VectorResult:
    """Fit the vector unit of ``hw`` (GEMM-calibrated) on half of the chip's ops."""
    start = time.perf_counter()
    ops = read_vector_measurements(DATA / folder)
    train, held = ops.half(seed)
    features = vector_features(hw, ops)
    fit = fit_vector(hw, features.subset(train), ops.subset(train))
    fitted = vector_hardware(hw, fit.values)
    trig = fit.values["sine_cosine_ops"]
    return VectorResult(
        name, fit.values, ops.subset(train), ops.subset(held),
        engine_vector_us(hw, ops.subset(held), trig),
        engine_vector_us(fitted, ops.subset(train), trig),
        engine_vector_us(fitted, ops.subset(held), trig),
        cross_validated_vector(
            hw, features.subset(train), ops.subset(train), FOLDS, seed=seed
        ),
        time.perf_counter() - start,
    )  # fmt: skip


def _row(label: str, predicted: np.ndarray, ops: Any) -> str:
    errors = vector_class_errors(predicted, ops)
    return f"| {label} | " + " | ".join(f"{errors[c][1]:.1f}" for c in COLUMNS) + " |"


def _per_op(r: VectorResult) -> str:
    """The held-out MAPE of each op, fitted."""
    error = np.abs(r.after / r.held.latency_us - 1) * 100
    parts = [f"{op} {error[r.held.op == op].mean():.0f}" for op in OPS if (r.held.op == op).any()]
    return f"- {r.name}, held out, per op (%): " + ", ".join(parts) + "."


def section(results: list[VectorResult], seed: int) -> list[str]:
    """The page's lines on vector ops."""
    out = [
        "## Vector ops",
        "",
        "accelsim's timing of one vector op launched alone against the device latencies of"
        " 25 non-matrix XLA ops measured alone on each chip and published by the SCALE-Sim"
        " project (bf16, 1,000 shapes per op; TPU v4's add has 50; the files in"
        " `configs/validation/silicon/vector_ops/`, whose README gives the source). Each"
        " op is what `accelsim.calibration.vector_ops.OPS` says it reads, writes and"
        " computes, from how the source's collector builds it, in one of five classes."
        " The vector unit's fixed cost per op and its stream (bytes read and written per"
        " cycle) are fitted with `accelsim calibrate DIRECTORY --half"
        f" {seed}` on the GEMM-calibrated file: on a random half of each op's rows (seed"
        f" {seed}), the other half held out; sine and cosine, which no layer uses, get"
        " their own fitted operations per element.",
        "",
        "- **before**: the GEMM-calibrated file's vector unit (the chip's fixed cost per"
        " op, 4,096 lanes, no stream bound), on the held-out half;",
        "- **fitted (training)**: the fitted file on the half it was fitted to;",
        f"- **held out ({FOLDS}-fold)**: the training half in {FOLDS} random folds, each"
        " predicted by a fit on the others (the fit's closed form);",
        "- **held out (other half)**: the fitted file on the half the fit never saw. The"
        " bundled `tpu_v6e_calibrated.yaml` and `tpu_v4_calibrated.yaml` are these fits.",
        "",
        "| | " + " | ".join(COLUMNS) + " |",
        "|---|" + "---|" * len(COLUMNS),
    ]
    for r in results:
        counts = vector_class_errors(r.after, r.held)
        out += [
            f"| **{r.name}** ops held out | "
            + " | ".join(str(counts[c][0]) for c in COLUMNS)
            + " |",
            _row(f"{r.name} before", r.before, r.held),
            _row(f"{r.name} fitted (training)", r.trained, r.train),
            _row(f"{r.name} held out ({FOLDS}-fold)", r.folded, r.train),
            _row(f"{r.name} held out (other half)", r.after, r.held),
        ]
    out += [
        "",
        "| chip | " + " | ".join(NAMES) + " |",
        "|---|" + "---|" * len(NAMES),
        *(
            f"| {r.name} | " + " | ".join(f"{r.values[n]:.4g}" for n in NAMES) + " |"
            for r in results
        ),
        "",
        *(_per_op(r) for r in results),
        "- Every class but sine and cosine runs at the stream rate once large (on v6e"
        " 1.4 TB/s of bytes read and written, 86 % of the HBM's 1.64 TB/s; on v4 about"
        " 1.0 TB/s of 1.2): exponential, tanh, the logistic and rsqrt cost no more than"
        " a negation, so the layers' operation counts for them (3 to 8 per element) never"
        " bind at 4,096 lanes. Sine and cosine run about 5 (v6e) and 12 (v4) times slower"
        " than the stream (on the lanes: range reduction and a polynomial).",
        "- Reduce and broadcast pay about half the fixed cost of the other ops (on v6e"
        " 0.46 and 0.43 us at their fastest against 0.94 us for add); one fixed cost per"
        " op serves both only halfway, and reduce's error is that of its small shapes.",
        "- Batch-norm training (a layer normalisation over the last dimension) runs as"
        " several kernels on the chip (about 1.8 us on v6e and 3.9 us on v4 for small"
        " shapes, two to four times another op's fixed cost), one op with one fixed cost"
        " here.",
        "- Reshape is a copy here; on both chips some large reshapes are relayouts far"
        " slower than a copy (up to 8,425 us on v6e), which the model does not know.",
        "",
    ]
    return out
