"""Command line: ``accelsim run | layer | suite | models | check``, and ``sweep |
collect | plot`` (:mod:`accelsim.cli_sweep`).

With :mod:`accelsim.cli_sweep`, the only module that prints or exits.  Bad input (any
:class:`~accelsim.errors.InputError`, an existing run directory) exits with
code 2 and one line per problem, ``file: key.path: problem (got value)``;
an internal error exits with code 1.  Set ``ACCELSIM_DEBUG=1`` for tracebacks.
SIGINT, SIGTERM and SIGHUP remove unfinished results and exit ``128 +
signal`` with one line; a closed stdout (``| head``) exits 141 silently.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from accelsim import __version__, cli_sweep
from accelsim.config.base import MAX_INT, Convention
from accelsim.config.files import display_path
from accelsim.config.run import PsumPolicy
from accelsim.errors import InputError, LimitError, OutputError
from accelsim.graph.ops import Phase
from accelsim.resources import bundled_path, data_dir

if TYPE_CHECKING:
    from accelsim.config.energy import EnergyTable
    from accelsim.config.hardware import HardwareSpec
    from accelsim.config.loader import Override
    from accelsim.driver.inputs import RunInputs

# Each command imports what it uses when it runs, so that a command loads none of
# what only another one needs (``tests/test_startup.py``).

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT = 0, 1, 2
EXIT_SIGNAL = 128
"""Stopped by signal N: exit ``128 + N`` (130 for Ctrl-C), as a shell reports it."""
SIGPIPE = 13
CONFIGS = data_dir() / "configs"
DEFAULT_ENERGY = CONFIGS / "energy" / "horowitz45.yaml"
DEFAULT_SUITE = CONFIGS / "suites" / "default.yaml"


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer (got {text!r})") from None
    if not 0 < value <= MAX_INT:
        raise argparse.ArgumentTypeError(
            f"expected a positive integer up to 2^31 - 1 = {MAX_INT:,} (got {value})"
        )
    return value


def _add_output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("results"),
        help="parent directory of run directories (default: results)",
    )
    parser.add_argument("--force", action="store_true", help="overwrite an existing run directory")


def _add_sets(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument(
        "--set", dest="sets", action="append", default=[], metavar="KEY=VALUE", help=help_text
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="accelsim", description="Cycle-level simulator of DNN training accelerators."
    )
    parser.add_argument("--version", action="version", version=f"accelsim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_run(sub)
    _add_layer(sub)
    _add_suite(sub)
    models = sub.add_parser("models", help="list the models of a suite with their sizes")
    models.add_argument(
        "--suite",
        type=bundled_path,
        default=DEFAULT_SUITE,
        help="suite YAML (default: configs/suites/default.yaml)",
    )
    models.add_argument("--json", action="store_true", help="print one JSON list")
    check = sub.add_parser("check", help="validate config files without simulating")
    check.add_argument(
        "files",
        type=bundled_path,
        nargs="+",
        help="hardware, energy, workload, run or sweep YAML files",
    )
    cli_sweep.add_commands(sub)
    return parser


Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _add_run(sub: Subparsers) -> None:
    run = sub.add_parser("run", help="simulate one training step of a run file")
    run.add_argument("run_file", type=bundled_path, help="run YAML (configs/runs/*.yaml)")
    _add_output(run)
    run.add_argument(
        "--gantt",
        action="store_true",
        help="also draw gantt.png (op timeline per processor) for every step kind",
    )
    _add_sets(
        run,
        "override a field: batch_size=64, array.rows=64, "
        "hardware.dram.bandwidth_bytes_per_cycle=32, workload.input.height=32",
    )


def _add_layer(sub: Subparsers) -> None:
    layer = sub.add_parser("layer", help="simulate one GEMM or conv layer (SCALE-Sim style)")
    layer.add_argument("--hardware", type=bundled_path, required=True, help="hardware YAML")
    layer.add_argument(
        "--energy",
        type=bundled_path,
        default=DEFAULT_ENERGY,
        help="energy table YAML (default: configs/energy/horowitz45.yaml)",
    )
    _add_sets(layer, "override a hardware field, e.g. array.rows=64")
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
    shape.add_argument(
        "--topology",
        type=bundled_path,
        metavar="CSV",
        help="every row of a SCALE-Sim topology file, in one process",
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


def _add_suite(sub: Subparsers) -> None:
    suite = sub.add_parser("suite", help="simulate one training step of every model of a suite")
    suite.add_argument(
        "run_file", type=bundled_path, help="run YAML whose workload is replaced per model"
    )
    suite.add_argument(
        "--suite",
        type=bundled_path,
        default=DEFAULT_SUITE,
        help="suite YAML (default: configs/suites/default.yaml, the 14 models)",
    )
    suite.add_argument(
        "--models",
        type=_names,
        default=None,
        metavar="A,B,...",
        help="only these models of the suite",
    )
    _add_output(suite)
    _add_sets(suite, "override a field for every model (as for run)")


class _Interrupted(BaseException):
    """A termination signal arrived (a BaseException, as KeyboardInterrupt is)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


def _on_signal(signum: int, _frame: object) -> None:
    # Only the first signal interrupts; later ones must not cut the clean-up short.
    for sig in _SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise _Interrupted(signum)


@contextmanager
def _signals_interrupt() -> Iterator[None]:
    """Turn SIGINT, SIGTERM and SIGHUP into :class:`_Interrupted` (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _on_signal) for sig in _SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# Allocations between two young-generation collections while a command runs.
# Big runs build hundreds of thousands of small immutable ops and tensors, which
# reference counting frees; at Python's default (700) the cyclic collector
# rescans them thousands of times, about a quarter of a LayerPipe run's time.
GC_ALLOCATIONS = 100_000


@contextmanager
def _fewer_collections() -> Iterator[None]:
    threshold = gc.get_threshold()
    gc.set_threshold(GC_ALLOCATIONS, *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``accelsim`` console script."""
    args = build_parser().parse_args(argv)
    handler = {
        "run": _cmd_run,
        "layer": _cmd_layer,
        "suite": _cmd_suite,
        "models": _cmd_models,
        "check": _cmd_check,
        "sweep": cli_sweep.cmd_sweep,
        "collect": cli_sweep.cmd_collect,
        "plot": cli_sweep.cmd_plot,
    }[args.command]
    try:
        with _signals_interrupt(), _fewer_collections():
            return handler(args)
    except _Interrupted as exc:
        name = signal.Signals(exc.signum).name
        print(f"accelsim: stopped by {name}; unfinished results removed", file=sys.stderr)
        return EXIT_SIGNAL + exc.signum
    except BrokenPipeError:
        # The reader of stdout went away (``accelsim ... | head``): stop quietly,
        # as a program killed by SIGPIPE would, without a second error at exit.
        _silence_stdout()
        return EXIT_SIGNAL + SIGPIPE
    except InputError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_INPUT
    except (OutputError, LimitError) as exc:
        print(f"accelsim: {exc}" if isinstance(exc, LimitError) else exc, file=sys.stderr)
        return EXIT_INPUT
    except Exception as exc:
        if os.environ.get("ACCELSIM_DEBUG"):
            raise
        print(f"accelsim: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        print(
            "accelsim: rerun with ACCELSIM_DEBUG=1 for a traceback and report it", file=sys.stderr
        )
        return EXIT_INTERNAL


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _cmd_run(args: argparse.Namespace) -> int:
    from accelsim.config.loader import parse_sets
    from accelsim.driver.inputs import load_inputs, resolved_config
    from accelsim.driver.run import simulate_training
    from accelsim.report import writer
    from accelsim.report.console import summary_table, training_table

    inputs = load_inputs(args.run_file, parse_sets(args.sets))
    directory = writer.run_directory(args.out, inputs.run.name)
    writer.check_writable(directory, args.force)
    result = simulate_training(inputs)
    with writer.staged_directory(directory, args.force) as staging:
        writer.write_run_files(staging, result, resolved_config(inputs))
        if args.gantt:
            from accelsim.report import plots

            for step_dir in (staging, *sorted((staging / "steps").glob("*"))):
                kind = "base step" if step_dir == staging else f"{step_dir.name} step"
                plots.plot_gantt(
                    step_dir / "ops.csv",
                    step_dir / "gantt.png",
                    f"{inputs.run.name}: {kind} on {inputs.hardware.name}",
                )
    if result.training is not None:
        # The technique's steps and speedup lead; the baseline is what they compare to.
        print(training_table(result.training))
        print("\nbaseline step (no technique applied):")
    elif _one_of_many(inputs):
        print(
            f"accelsim: warning: {inputs.hardware.processors} processors, but the single"
            " assignment runs the step on processor 0; set assignment=data_parallel"
            " or a pipeline technique to use them",
            file=sys.stderr,
        )
    print(summary_table(result.base.summary()))
    print(f"wrote {display_path(directory)}/")
    return EXIT_OK


def _one_of_many(inputs: RunInputs) -> bool:
    """Whether the step runs on one of several processors (and nothing places it)."""
    from accelsim.config.run import AssignmentPolicy

    return inputs.hardware.processors > 1 and inputs.run.assignment is AssignmentPolicy.SINGLE


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated model names (got {text!r})")
    return names


def _cmd_suite(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from accelsim.config.loader import parse_sets
    from accelsim.driver.inputs import resolved_config, suite_entries, suite_inputs
    from accelsim.driver.run import simulate_training
    from accelsim.report.console import suite_table
    from accelsim.report.plots import plot_speedup, plot_suite
    from accelsim.report.suite import suite_columns, suite_row
    from accelsim.report.writer import run_directory, staged_directory, write_csv, write_run_files

    sets = parse_sets(args.sets)
    entries = suite_entries(args.suite, args.models)
    inputs = [suite_inputs(args.run_file, entry, sets) for entry in entries]
    target = run_directory(args.out, inputs[0].run.name)
    rows = []
    with (
        staged_directory(target, args.force) as staging,
        tqdm(total=len(entries), desc="suite", unit="model", file=sys.stderr) as bar,
    ):
        for entry, model_inputs in zip(entries, inputs, strict=True):
            bar.set_postfix_str(entry.name)
            result = simulate_training(model_inputs)
            write_run_files(
                run_directory(staging, entry.name), result, resolved_config(model_inputs)
            )
            rows.append(suite_row(entry.name, result))
            bar.update(1)
        write_csv(staging / "suite.csv", suite_columns(rows), rows)
        title = f"{inputs[0].run.name}: {inputs[0].hardware.name}, batch {inputs[0].run.batch_size}"
        plot_suite(staging / "suite.csv", staging / "suite.png", title)
        if any("speedup" in row for row in rows):
            plot_speedup(staging / "suite.csv", staging / "suite_speedup.png", title)
    print(suite_table(rows))
    print(f"wrote {display_path(target)}/: suite.csv, plots and one directory per model")
    return EXIT_OK


def _cmd_models(args: argparse.Namespace) -> int:
    from accelsim.driver.inputs import suite_entries
    from accelsim.lowering.infer import load_model
    from accelsim.lowering.stats import model_stats
    from accelsim.report.console import models_table

    stats = []
    for entry in suite_entries(args.suite):
        stats.append(model_stats(*load_model(entry.workload_path)))
    if args.json:
        print(json.dumps([dataclasses.asdict(s) for s in stats], indent=2))
    else:
        print(models_table(stats))
    return EXIT_OK


def _hardware_sets(sets: list[Override]) -> list[Override]:
    from accelsim.config.loader import Override

    return [
        Override(o.key.removeprefix("hardware."), o.value, o.source, o.source_path) for o in sets
    ]


def _cmd_layer(args: argparse.Namespace) -> int:
    from accelsim.config.loader import load_energy, load_hardware, parse_sets
    from accelsim.driver.layer import conv_gemm, gemm_for, gemm_problems, simulate_layer
    from accelsim.energy.model import check_table

    hw = load_hardware(args.hardware, _hardware_sets(parse_sets(args.sets)))
    table = load_energy(args.energy)
    check_table(table, hw, display_path(args.energy))
    phase = Phase(args.phase)
    convention = Convention(args.convention)
    psums = PsumPolicy(args.psums)
    if args.topology:
        return _layer_topology(args, hw, table, phase, convention, psums)
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
    problems = gemm_problems(gemm, "--gemm" if args.gemm else "--conv")
    if problems:
        raise InputError(problems)
    record = simulate_layer(hw, table, gemm, phase, convention, psums)
    if args.json:
        print(json.dumps(record, indent=2))
    else:
        from accelsim.report.console import layer_table

        print(layer_table(record))
    return EXIT_OK


def _layer_topology(
    args: argparse.Namespace,
    hw: HardwareSpec,
    table: EnergyTable,
    phase: Phase,
    convention: Convention,
    psums: PsumPolicy,
) -> int:
    """``accelsim layer --topology``: every row of a SCALE-Sim topology file."""
    from accelsim.driver.layer import gemm_problems, simulate_layer, topology_gemm
    from accelsim.workload.topology import read_topology

    rows = read_topology(args.topology)
    gemms = [topology_gemm(row, phase, convention) for row in rows]
    problems = [
        p
        for row, gemm in zip(rows, gemms, strict=True)
        for p in gemm_problems(gemm, display_path(args.topology), row.name)
    ]
    if problems:
        raise InputError(problems)
    records = [
        {"layer": row.name, **simulate_layer(hw, table, gemm, phase, convention, psums)}
        for row, gemm in zip(rows, gemms, strict=True)
    ]
    if args.json:
        print(json.dumps(records, indent=2))
    else:
        from accelsim.report.console import topology_table

        print(topology_table(records))
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
    from accelsim.config.loader import load_energy, load_hardware, read_yaml
    from accelsim.driver.inputs import load_inputs
    from accelsim.lowering.infer import load_model

    data: dict[str, Any] = read_yaml(path)
    if "layers" in data:
        workload, _ = load_model(path)
        return f"workload '{workload.name}', {len(workload.layers)} layers"
    if "array" in data:
        return f"hardware '{load_hardware(path).name}'"
    if "mac_pj" in data:
        return f"energy table '{load_energy(path).name}'"
    if "workload" in data or "hardware" in data:
        inputs = load_inputs(path)
        return f"run '{inputs.run.name}' with all referenced files"
    if "base" in data:
        plan = cli_sweep.check_sweep(path)
        return f"sweep '{plan.name}', {len(plan.points)} points, each with all its files"
    raise InputError.single(
        display_path(path),
        "",
        "not a hardware, energy, workload, run or sweep"
        " file (no 'array', 'mac_pj', 'layers', 'workload' or 'base' key)",
    )
