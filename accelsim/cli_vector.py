"""``accelsim calibrate DIRECTORY``: fit the vector unit to measured lone vector ops
(part of :mod:`accelsim.cli`, loaded only when the measurements are a directory).

The fitted file is the ``--hardware`` file with the vector unit's fixed cost per op
class and stream written in; its comment keeps the hardware file's own leading comment (a
GEMM fit's record) and adds this fit's.
"""

from __future__ import annotations

import argparse

import numpy as np

from accelsim.calibration.vector_fit import (
    NAMES,
    OVERHEADS,
    VectorFit,
    calibrate_vector_unit,
    cross_validated_vector,
    engine_vector_us,
    predict_us,
    vector_class_errors,
)
from accelsim.calibration.vector_ops import VectorMeasurements, read_vector_measurements
from accelsim.cli_sweep import printing
from accelsim.config.files import display_path, read_text
from accelsim.config.hardware import HardwareSpec
from accelsim.config.loader import dump_yaml, reads_back, yaml_comment
from accelsim.errors import ConfigError, InputError
from accelsim.report.staging import staged_file, write_verified

EXIT_OK = 0
MIN_FOLDS, MAX_FOLDS = 2, 20


def calibrate_vector(args: argparse.Namespace, hw: HardwareSpec) -> int:
    """Fit, on all the measured ops or on ``--half``'s half, write the fitted file,
    then print the fit and its errors per op class."""
    if args.fit or args.ranges:
        option = "--fit" if args.fit else "--range"
        raise InputError.single("calibrate", option, "only for GEMMs: a vector fit fits them all")
    ops = read_vector_measurements(args.measurements)
    train = np.arange(len(ops))
    held = train[:0]
    if args.half is not None:
        train, held = ops.half(args.half)
    most = min(MAX_FOLDS, len(train))
    if args.folds and not MIN_FOLDS <= args.folds <= most:
        raise InputError.single(
            "calibrate",
            "--folds",
            f"must be {MIN_FOLDS} to {most} (each fold is one more fit; {len(train)} ops fitted)",
            args.folds,
        )
    done = calibrate_vector_unit(hw, ops.subset(train))
    result, fitted = done.fit, done.fitted
    text = _header(args, ops, len(train), result) + dump_yaml(fitted.model_dump(mode="json"))
    reads_back(text, fitted)
    trig = result.values["sine_cosine_ops"]
    rows: dict[str, tuple[np.ndarray, VectorMeasurements]] = {
        "fitted, closed form": (predict_us(done.features, result.values), done.ops),
        "fitted file, alone": (engine_vector_us(fitted, done.ops, trig), done.ops),
    }
    if len(held):
        rows["held out (other half)"] = (
            engine_vector_us(fitted, ops.subset(held), trig),
            ops.subset(held),
        )
    if args.folds:
        rows[f"held out, {args.folds}-fold"] = (cross_validated_vector(done, args.folds), done.ops)
    with staged_file(args.out, args.force) as path:
        write_verified(path, text)
    with printing(args.out):
        print(
            f"calibrate {display_path(args.hardware)}'s vector unit on {len(train)} of"
            f" {len(ops)} vector ops of {display_path(args.measurements)}"
            f" ({result.evaluations} evaluations)"
        )
        for name in NAMES:
            low, high = result.ranges[name]
            unmeasured = [c for c, n in OVERHEADS.items() if n == name and c not in result.measured]
            note = "   (no such ops measured: not written)" if unmeasured else ""
            print(f"{name:<28} {result.values[name]:>10.4g}   range {low:.4g} to {high:.4g}{note}")
        print(_error_table(rows))
        print(f"wrote {display_path(args.out)}")
    return EXIT_OK


def _header(args: argparse.Namespace, ops: VectorMeasurements, fitted: int, fit: VectorFit) -> str:
    """The hardware file's own leading comment, then this fit's record."""
    half = "" if args.half is None else f" (a random half of each op's rows, seed {args.half})"
    return yaml_comment(
        [
            *_leading_comment(args),
            f"vector unit calibrated by accelsim calibrate on {fitted} of {len(ops)} vector"
            f" ops of {display_path(args.measurements)}{half},",
            f"training MAPE {fit.training_mape:.1f} % (the fit's closed form); fitted:",
            *(f"  {k} = {v:.6g}" for k, v in fit.values.items()),
            "(elementwise_overhead_us is vector_unit.op_overhead_cycles, the others"
            " vector_unit.class_overhead_cycles;",
            " sine_cosine_ops prices the measured sine and cosine only; no layer uses it)",
        ]
    )


def _leading_comment(args: argparse.Namespace) -> list[str]:
    """The lines of the ``--hardware`` file's comment before its first key."""
    lines = []
    for line in read_text(args.hardware, ConfigError, display_path(args.hardware)).splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.removeprefix("#").removeprefix(" "))
    return lines


def _error_table(rows: dict[str, tuple[np.ndarray, VectorMeasurements]]) -> str:
    """MAPE per op class of each prediction, with its op count."""
    errors = {name: vector_class_errors(pred, ops) for name, (pred, ops) in rows.items()}
    labels = list(next(iter(errors.values())))
    head = f"{'MAPE %':<26}" + "".join(f"{label:>16}" for label in labels)
    body = [
        f"{name:<26}" + "".join(f"{f'{e[label][1]:.1f} ({e[label][0]})':>16}" for label in labels)
        for name, e in errors.items()
    ]
    return "\n".join([head, *body])
