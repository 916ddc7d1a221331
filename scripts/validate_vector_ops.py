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

from accelsim import (
    calibrate_vector_unit,
    cross_validated_vector,
    read_vector_measurements,
    vector_latencies_us,
    vector_mape_by_class,
)

DATA = Path(__file__).resolve().parents[1] / "configs" / "validation" / "silicon" / "vector_ops"
FOLDS = 10


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
    done = calibrate_vector_unit(hw, ops.subset(train))
    trig = done.fit.values["sine_cosine_ops"]
    return VectorResult(
        name, done.fit.values, done.ops, ops.subset(held),
        vector_latencies_us(hw, ops.subset(held), trig),
        vector_latencies_us(done.fitted, done.ops, trig),
        vector_latencies_us(done.fitted, ops.subset(held), trig),
        cross_validated_vector(done, FOLDS, seed=seed),
        time.perf_counter() - start,
    )  # fmt: skip


def _row(label: str, predicted: np.ndarray, ops: Any) -> str:
    errors = vector_mape_by_class(predicted, ops)
    return f"| {label} | " + " | ".join(f"{e[1]:.1f}" for e in errors.values()) + " |"


def _per_op(r: VectorResult) -> str:
    """The held-out MAPE of each op, fitted, and its signed mean error on shapes of at
    least 1e5 elements."""
    ratio = r.after / r.held.latency_us - 1
    large = r.held.d0 * r.held.d1 * r.held.d2 >= 1e5
    parts = []
    for op in dict.fromkeys(r.held.op.tolist()):
        mine = r.held.op == op
        signed = f"{ratio[mine & large].mean() * 100:+.0f}" if (mine & large).any() else "-"
        parts.append(f"{op} {np.abs(ratio[mine]).mean() * 100:.0f} ({signed})")
    return (
        f"- {r.name}, held out, per op: MAPE % (signed mean error % at 1e5 elements and"
        " more): " + ", ".join(parts) + "."
    )


def section(results: list[VectorResult], seed: int) -> list[str]:
    """The page's lines on vector ops."""
    columns = list(vector_mape_by_class(results[0].after, results[0].held))
    names = list(results[0].values)
    out = [
        "## Vector ops",
        "",
        "accelsim's timing of one vector op launched alone against the device latencies of"
        " 25 non-matrix XLA ops measured alone on each chip and published by the SCALE-Sim"
        " project (bf16, 1,000 shapes per op; TPU v4's add has 50; the files in"
        " `configs/validation/silicon/vector_ops/`, whose README gives the source). Each"
        " op is what `accelsim/calibration/vector_ops.py`'s table says it reads, writes and"
        " computes, from how the source's collector builds it, in one of the five classes"
        " of accelsim's vector ops ([lowering](model/lowering.md#vector-op-classes))."
        " The vector unit's fixed cost per op of each class and its stream (bytes read and"
        " written per cycle) are fitted with `accelsim calibrate DIRECTORY --half"
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
        "| | " + " | ".join(columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for r in results:
        counts = vector_mape_by_class(r.after, r.held)
        out += [
            f"| **{r.name}** ops held out | "
            + " | ".join(str(n) for n, _ in counts.values())
            + " |",
            _row(f"{r.name} before", r.before, r.held),
            _row(f"{r.name} fitted (training)", r.trained, r.train),
            _row(f"{r.name} held out ({FOLDS}-fold)", r.folded, r.train),
            _row(f"{r.name} held out (other half)", r.after, r.held),
        ]
    out += [
        "",
        "| chip | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
        *(
            f"| {r.name} | " + " | ".join(f"{r.values[n]:.4g}" for n in names) + " |"
            for r in results
        ),
        "",
        *(_per_op(r) for r in results),
        "- Large element-wise and transcendental ops (but sine and cosine) and most data"
        " movement run at one stream rate (on v6e 1.4 TB/s of bytes read and written, 86 %"
        " of the HBM's 1.64 TB/s; on v4 about 1.0 TB/s of 1.2): exponential, tanh, the"
        " logistic and rsqrt cost no more than a negation, so the layers' operation counts"
        " for them (3 to 8 per element) never bind at 4,096 lanes. Sine and cosine run"
        " about 5 (v6e) and 12 (v4) times slower than the stream (on the lanes: range"
        " reduction and a polynomial).",
        "- Each class pays its own fixed cost (the first five parameters above, in us;"
        " `elementwise_overhead_us` is the file's `vector_unit.op_overhead_cycles`, the"
        " others its `vector_unit.class_overhead_cycles`). Element-wise, transcendental"
        " and data-movement ops cost about the same to launch. On v6e reduce is the"
        " fastest op on small shapes (0.57 us at the median of its shapes below 1,000"
        " elements) and gets a fixed cost under half an element-wise op's; on v4 its"
        " fitted cost is about an element-wise op's, and its error barely moves.",
        "- What is left of reduce is not a fixed cost: large reduces read their input"
        " faster than the stream rate every other class fits (on v6e up to about 3.5 TB/s"
        " of input at a few million elements, above the HBM's 1.64 TB/s), while the model"
        " streams a reduce's bytes through the unit at that one rate, so it overprices"
        " them (the signed errors above). A second pass over the data would make a reduce"
        " slower, not faster; the model has no parameter for a faster reduce and the data"
        " do not say why the chip reads it so fast, so none is added.",
        "- Batch-norm training (a layer normalisation over the last dimension: the mean,"
        " the variance, then every element normalised) runs as several kernels on the"
        " chip (about 1.8 us on v6e and 3.9 us on v4 at the median below 1,000 elements,"
        " two to four times another op's): its own fixed cost (`norm_overhead_us`) is what"
        " that costs. Its large shapes still take longer than one pass over their bytes at"
        " the stream rate (the signed errors above): the measured op reads its input more"
        " than once, for the statistics and again to normalise it. It is described here as"
        " accelsim's norm layers run, one pass over the input, so that what is fitted is"
        " what the layers pay; a norm that reads its input twice is a change to the layer"
        " rules (and to every default number), not made here.",
        "- Reshape is a copy here; on both chips some large reshapes are relayouts far"
        " slower than a copy (up to 8,425 us on v6e), which the model does not know.",
        "",
    ]
    return out
