"""Command line: ``accelsim run | layer | check``.

The only module that prints or exits.  Bad input (any
:class:`~accelsim.errors.InputError`, an existing run directory) exits with
code 2 and one line per problem, ``file: key.path: problem (got value)``;
an internal error exits with code 1.  Set ``ACCELSIM_DEBUG=1`` for tracebacks.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accelsim import __version__
from accelsim.config.base import Convention
from accelsim.config.loader import (
    Override,
    display_path,
    load_energy,
    load_hardware,
    parse_sets,
    read_yaml,
)
from accelsim.config.run import PsumPolicy
from accelsim.energy.model import check_table
from accelsim.errors import InputError, OutputError
from accelsim.pipeline import (
    conv_gemm,
    gemm_for,
    load_inputs,
    resolved_config,
    simulate_layer,
    simulate_run,
)
from accelsim.report.console import layer_table, summary_table
from accelsim.report.writer import check_writable, run_directory, write_run
from accelsim.workload.loader import load_workload
from accelsim.workload.ops import Phase

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT = 0, 1, 2
DEFAULT_ENERGY = Path(__file__).resolve().parent.parent / "configs" / "energy" / "horowitz45.yaml"


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer (got {text!r})") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer (got {value})")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="accelsim", description="Cycle-level simulator of DNN training accelerators."
    )
    parser.add_argument("--version", action="version", version=f"accelsim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="simulate one training step of a run file")
    run.add_argument("run_file", type=Path, help="run YAML (configs/runs/*.yaml)")
    run.add_argument(
        "--out",
        type=Path,
        default=Path("results"),
        help="parent directory of run directories (default: results)",
    )
    run.add_argument("--force", action="store_true", help="overwrite an existing run directory")
    run.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a field: batch_size=64, array.rows=64, "
        "hardware.dram.bandwidth_bytes_per_cycle=32, workload.input.height=32",
    )

    layer = sub.add_parser("layer", help="simulate one GEMM or conv layer (SCALE-Sim style)")
    layer.add_argument("--hardware", type=Path, required=True, help="hardware YAML")
    layer.add_argument(
        "--energy",
        type=Path,
        default=DEFAULT_ENERGY,
        help="energy table YAML (default: configs/energy/horowitz45.yaml)",
    )
    layer.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a hardware field, e.g. array.rows=64",
    )
    shape = layer.add_mutually_exclusive_group(required=True)
    shape.add_argument(
        "--gemm", nargs=3, type=_positive, metavar=("M", "N", "K"), help="C[MxN] = A[MxK] . B[KxN]"
    )
    shape.add_argument(
        "--conv",
        nargs=7,
        type=_positive,
        metavar=("H", "W", "R", "S", "C", "K", "STRIDE"),
        help="padded ifmap HxW, RxS filter, C channels, K filters, stride",
    )
    layer.add_argument(
        "--phase",
        choices=[p.value for p in (Phase.FWD, Phase.BWD_INPUT, Phase.BWD_WEIGHT)],
        default="fwd",
    )
    layer.add_argument(
        "--convention", choices=[c.value for c in Convention], default=Convention.ACCELSIM.value
    )
    layer.add_argument(
        "--psums",
        choices=[p.value for p in PsumPolicy],
        default=PsumPolicy.CHUNK.value,
        help="ws/is partial sums: chunk the stream so they fit, or spill",
    )
    layer.add_argument("--json", action="store_true", help="print one JSON object")

    check = sub.add_parser("check", help="validate config files without simulating")
    check.add_argument(
        "files", type=Path, nargs="+", help="hardware, energy, workload or run YAML files"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``accelsim`` console script."""
    args = build_parser().parse_args(argv)
    try:
        handler = {"run": _cmd_run, "layer": _cmd_layer, "check": _cmd_check}[args.command]
        return handler(args)
    except InputError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_INPUT
    except OutputError as exc:
        print(exc, file=sys.stderr)
        return EXIT_INPUT
    except Exception as exc:
        if os.environ.get("ACCELSIM_DEBUG"):
            raise
        print(f"accelsim: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        print(
            "accelsim: rerun with ACCELSIM_DEBUG=1 for a traceback and report it", file=sys.stderr
        )
        return EXIT_INTERNAL


def _cmd_run(args: argparse.Namespace) -> int:
    inputs = load_inputs(args.run_file, parse_sets(args.sets))
    check_writable(run_directory(args.out, inputs.run.name), args.force)
    result = simulate_run(inputs)
    directory = write_run(result, resolved_config(inputs), args.out, args.force)
    print(summary_table(result.summary()))
    print(f"wrote {display_path(directory)}/")
    return EXIT_OK


def _hardware_sets(sets: list[Override]) -> list[Override]:
    return [
        Override(o.key.removeprefix("hardware."), o.value, o.source, o.source_path) for o in sets
    ]


def _cmd_layer(args: argparse.Namespace) -> int:
    hw = load_hardware(args.hardware, _hardware_sets(parse_sets(args.sets)))
    table = load_energy(args.energy)
    check_table(table, hw, display_path(args.energy))
    phase = Phase(args.phase)
    convention = Convention(args.convention)
    if args.gemm:
        m, n, k = args.gemm
        gemm = gemm_for(m, n, k, phase)
    else:
        h, w, r, s, c, k, stride = args.conv
        if r > h or s > w:
            raise InputError.single(
                "--conv", "R S", "filter larger than the padded ifmap", [h, w, r, s]
            )
        gemm = conv_gemm(h, w, r, s, c, k, stride, phase, convention)
    record = simulate_layer(hw, table, gemm, phase, convention, PsumPolicy(args.psums))
    print(json.dumps(record, indent=2) if args.json else layer_table(record))
    return EXIT_OK


def _cmd_check(args: argparse.Namespace) -> int:
    problems = []
    for path in args.files:
        try:
            print(f"{display_path(path)}: ok ({_check_file(path)})")
        except InputError as exc:
            problems.extend(exc.problems)
    if problems:
        raise InputError(problems)
    return EXIT_OK


def _check_file(path: Path) -> str:
    data: dict[str, Any] = read_yaml(path)
    if "layers" in data:
        workload = load_workload(path)
        return f"workload '{workload.name}', {len(workload.layers)} layers"
    if "array" in data:
        return f"hardware '{load_hardware(path).name}'"
    if "mac_pj" in data:
        return f"energy table '{load_energy(path).name}'"
    if "workload" in data or "hardware" in data:
        inputs = load_inputs(path)
        return f"run '{inputs.run.name}' with all referenced files"
    raise InputError.single(
        display_path(path),
        "",
        "not a hardware, energy, workload or run"
        " file (no 'array', 'mac_pj', 'layers' or 'workload' key)",
    )
