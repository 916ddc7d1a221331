"""``accelsim calibrate``: fit a hardware file's physical parameters to measured GEMMs
(part of :mod:`accelsim.cli`).

Loaded only for this command: the hardware spec, the fold schedule and the closed
forms, no event engine, workload, run driver or technique.
"""

from __future__ import annotations

import argparse

import numpy as np

from accelsim.calibration.fit import (
    Fit,
    calibrate,
    check_folds,
    class_errors,
    cross_validated,
    file_values,
    physical,
)
from accelsim.calibration.measurements import Measurements, read_measurements
from accelsim.calibration.model import compute_bound_us, engine_us, predict_us
from accelsim.cli_sweep import printing
from accelsim.config.calibrated import Pairs, timing_flags
from accelsim.config.enums import PsumPolicy
from accelsim.config.files import display_path
from accelsim.config.hardware import HardwareSpec
from accelsim.config.loader import dump_yaml, load_hardware, parse_sets, reads_back, yaml_comment
from accelsim.errors import InputError
from accelsim.report.staging import check_file, not_an_input, staged_file, write_verified

EXIT_OK = 0


def _fit_names(text: str | None) -> list[str]:
    """The parameters ``--fit`` names (none: all four).

    Raises:
        InputError: naming ``--fit`` when a name is empty (``--fit ,``, ``--fit a,,b``).
    """
    if text is None:
        return []
    names = [n.strip() for n in text.split(",")]
    if not all(names):
        raise InputError.single(
            "calibrate", "--fit", "expected comma-separated parameter names, none empty", text
        )
    return names


def _ranges(items: list[str]) -> dict[str, tuple[float, float]]:
    """The ranges ``--range NAME=LOW:HIGH`` asks for, by parameter name.

    Raises:
        InputError: naming ``--range`` for an item not of that form or a name given twice.
    """
    ranges = {}
    for item in items:
        name, equals, span = item.partition("=")
        low, colon, high = span.partition(":")
        try:
            if not (equals and colon):
                raise ValueError
            bounds = (float(low), float(high))
        except ValueError:
            raise InputError.single(
                "calibrate", "--range", "expected NAME=LOW:HIGH (two numbers)", item
            ) from None
        if name.strip() in ranges:
            raise InputError.single("calibrate", "--range", "a parameter given twice", item)
        ranges[name.strip()] = bounds
    return ranges


def cmd_calibrate(args: argparse.Namespace) -> int:
    """``accelsim calibrate MEASUREMENTS.csv --hardware HW.yaml --out FITTED.yaml``.

    Everything the report shows is worked out first (a GEMM the fitted file cannot
    time is refused before anything is written), then the fitted file written
    (staged, and renamed into place once it reads back as the fitted hardware),
    then the report printed.  An existing ``--out``
    is replaced only with ``--force`` (a symbolic link itself, never its target),
    and never when it is the measurements or the hardware file.
    """
    not_an_input(
        args.out,
        "--out",
        {"the measurements file": args.measurements, "the --hardware file": args.hardware},
    )
    check_file(args.out, args.force)
    hw = load_hardware(args.hardware, parse_sets(args.sets))
    _, psums, overlap = timing_flags(
        hw.calibrated_settings, display_path(args.hardware), None, args.psums, args.fold_overlap
    )
    if args.measurements.is_dir():
        from accelsim.cli_vector import calibrate_vector  # only for vector ops

        return calibrate_vector(args, hw)
    if args.half is not None:
        raise InputError.single("calibrate", "--half", "only for a directory of vector ops")
    gemms = read_measurements(args.measurements, hw.array.precision.value)
    names = _fit_names(args.fit)
    if args.folds:
        check_folds(args.folds, gemms, "calibrate")
    done = calibrate(
        hw, gemms, fold_overlap=overlap, psums=psums, names=names, ranges=_ranges(args.ranges)
    )
    result, features = done.fit, done.features
    fitted = done.fitted.model_copy(update={"calibrated_under": settings_record(overlap, psums)})
    header = _header(args, len(gemms), result)
    text = header + dump_yaml(fitted.model_dump(mode="json"))
    reads_back(text, fitted)
    rows = {
        "file, closed form": predict_us(features, physical(hw, {})),
        "fitted, closed form": predict_us(features, physical(hw, result.values)),
        "fitted file, accelsim layer": engine_us(fitted, gemms, overlap, psums),
    }
    if args.folds:
        rows[f"held out, {args.folds}-fold"] = cross_validated(done, args.folds)
    bound = compute_bound_us(features, fitted.clock_mhz)
    closest = float(np.min(rows["fitted file, accelsim layer"] / bound))
    with staged_file(args.out, args.force) as path:
        write_verified(path, text)
    with printing(args.out):
        print(
            f"calibrate {display_path(args.hardware)} on {len(gemms)} GEMMs of"
            f" {display_path(args.measurements)} ({result.evaluations} evaluations)"
        )
        print(_fit_table(hw, result))
        print(_error_table(rows, gemms))
        print(
            f"closest to its compute bound (every PE busy at {fitted.clock_mhz:g} MHz):"
            f" x{closest:.3f}"
        )
        for name in result.at_bound:
            print(f"note: {name} ended on a bound of its range: the data would push it further")
        print(f"wrote {display_path(args.out)}")
    return EXIT_OK


def settings_record(overlap: bool, psums: PsumPolicy) -> Pairs:
    """The run settings a fit priced its measurements under (the fitted file's
    ``calibrated_under``)."""
    return (("timing", (("fold_overlap", overlap), ("psums", psums.value))),)


def _header(args: argparse.Namespace, gemms: int, result: Fit) -> str:
    """The fitted file's comment: what was fitted, on what (the run settings it was
    fitted under are the file's ``calibrated_under``)."""
    return yaml_comment(
        [
            f"{display_path(args.hardware)} calibrated by accelsim calibrate on {gemms}"
            f" GEMMs of {display_path(args.measurements)}",
            f"training MAPE {result.training_mape:.1f} % (the fit's closed form); fitted:",
            *(f"  {k} = {v:.6g}" for k, v in result.values.items()),
        ]
    )


def _fit_table(hw: HardwareSpec, result: Fit) -> str:
    """The fitted parameters beside the file's values and their ranges."""
    before = file_values(hw)
    lines = [f"{'parameter':<22} {'file':>10} {'fitted':>10}   range"]
    for p in result.parameters:
        lines.append(
            f"{p.name:<22} {before[p.name]:>10.4g} {result.values[p.name]:>10.4g}"
            f"   {p.low:.4g} to {p.high:.4g} {p.unit}"
        )
    return "\n".join(lines)


def _error_table(rows: dict[str, np.ndarray], gemms: Measurements) -> str:
    """MAPE per size class (SCALE-Sim cycles on one 128x128 array) of each prediction."""
    errors = {name: class_errors(pred, gemms) for name, pred in rows.items()}
    labels = list(next(iter(errors.values())))
    counts = next(iter(errors.values()))
    head = f"{'MAPE %':<28}" + "".join(f"{lab:>10}" for lab in labels)
    gemm_row = f"{'GEMMs':<28}" + "".join(f"{counts[lab][0]:>10}" for lab in labels)
    body = [
        f"{name:<28}" + "".join(f"{_percent(e[lab]):>10}" for lab in labels)
        for name, e in errors.items()
    ]
    return "\n".join([head, gemm_row, *body])


def _percent(error: tuple[int, float]) -> str:
    """A class's MAPE to one decimal, ``-`` for a class without GEMMs."""
    gemms, mape = error
    return f"{mape:.1f}" if gemms else "-"
