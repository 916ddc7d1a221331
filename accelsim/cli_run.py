"""``accelsim run | suite | models | init | check`` (part of :mod:`accelsim.cli`).

Loaded only for these commands; each imports what it uses when it runs (``run``
no plots unless ``--gantt``, no progress bar unless it runs for over 2 s), so that
a command loads none of what only another one needs
(``tests/architecture/test_startup.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelsim import cli_sweep
from accelsim.cli_compile import engine_notices
from accelsim.config.files import display_path
from accelsim.errors import InputError
from accelsim.units import plural

if TYPE_CHECKING:
    from accelsim.config.hardware import HardwareSpec
    from accelsim.driver.inputs import RunInputs

EXIT_OK = 0


def cmd_run(args: argparse.Namespace) -> int:
    """``accelsim run``: one training step of a run file, into a run directory."""
    from accelsim.config.loader import parse_sets
    from accelsim.driver.inputs import load_inputs, resolved_config
    from accelsim.driver.run import simulate_training
    from accelsim.report import writer
    from accelsim.report.console import (
        step_groups,
        step_silicon,
        summary_table,
        training_table,
    )

    inputs = load_inputs(args.run_file, parse_sets(args.sets))
    if args.memory_only:
        from accelsim.driver.run import step_memory
        from accelsim.report.memory import memory_block

        print(memory_block(step_memory(inputs)))
        return EXIT_OK
    name = run_directory_name(inputs)
    directory = writer.run_directory(args.out, name)
    writer.check_writable(directory, args.force)
    with slow_progress(name) as tell, engine_notices():
        result = simulate_training(inputs, tell)
        with writer.staged_directory(directory, args.force) as staging:
            tell("writing the result files")
            writer.write_run_files(staging, result, resolved_config(inputs))
            if args.gantt:
                from accelsim.report import plots

                for step_dir in (staging, *sorted((staging / "steps").glob("*"))):
                    kind = "base step" if step_dir == staging else f"{step_dir.name} step"
                    tell(f"drawing the {kind}'s Gantt chart")
                    plots.plot_gantt(
                        step_dir / "ops.csv",
                        step_dir / "gantt.png",
                        f"{name}: {kind} on {hardware_text(inputs.hardware)}",
                        *_dram_bandwidth(inputs.hardware),
                    )
    if result.training is not None:
        # The technique's steps and speedup lead; the baseline is what they compare to.
        with cli_sweep.printing(directory):
            print(training_table(result.training))
            for lines in (step_groups(result), step_silicon(result)):
                if lines:
                    print(lines)
            print("\nbaseline step (no technique applied):")
    elif _one_of_many(inputs):
        print(
            f"accelsim: warning: {inputs.hardware.processors} processors, but the single"
            " assignment runs the step on processor 0; set assignment=data_parallel"
            " or a pipeline technique to use them",
            file=sys.stderr,
        )
    with cli_sweep.printing(directory):
        if result.pipeline is None:
            print(summary_table(result.base.summary()))
        else:
            from accelsim.report.pipeline import pipeline_block

            print(summary_table(result.step_record()))
            print(pipeline_block(result.pipeline))
        if result.memory is not None:
            from accelsim.report.memory import memory_block

            print(memory_block(result.memory))
        if inputs.workload.notes:
            from accelsim.report.console import workload_notes

            print(workload_notes(inputs.workload.source, inputs.workload.notes))
        print(f"wrote {display_path(directory)}/")
    return EXIT_OK


PROGRESS_DELAY_S = 2.0
"""Seconds a command runs before its progress bar appears (quick runs print none)."""


@contextmanager
def slow_progress(name: str) -> Iterator[Callable[[str], None]]:
    """A progress bar on stderr for one run, from the first stage that starts after
    :data:`PROGRESS_DELAY_S`: each call of the function yielded starts a stage (a
    simulation, a file, a figure), counted and named, with the time elapsed.  A
    quicker run, or one whose stderr is no terminal (a log: a bar redraws itself with
    carriage returns), prints nothing and never imports tqdm."""
    started = time.monotonic()
    count = 0
    bar: Any = None

    def tell(stage: str) -> None:
        nonlocal count, bar
        count += 1
        if bar is None:
            if time.monotonic() - started < PROGRESS_DELAY_S or not sys.stderr.isatty():
                return
            from tqdm import tqdm

            # A delay keeps tqdm from drawing before its clock is set back to the start.
            bar = tqdm(desc=name, unit=" stages", file=sys.stderr, initial=count - 1, delay=1e-3)
            bar.start_t -= time.monotonic() - started
        bar.set_postfix_str(stage, refresh=False)
        bar.update(1)

    try:
        yield tell
    finally:
        if bar is not None:
            bar.close()


def run_directory_name(inputs: RunInputs) -> str:
    """The run's directory below ``--out``: its workload, name and techniques."""
    from accelsim.report.writer import run_directory_name as name

    techniques = [t.name for t in inputs.techniques]
    return name(inputs.run.name, inputs.workload.name, inputs.run.workload_variant, techniques)


def suite_directory_name(inputs: RunInputs) -> str:
    """A suite's directory below ``--out``: the run's name and its techniques."""
    techniques = "-".join(t.name for t in inputs.techniques)
    return f"{inputs.run.name}_{techniques}" if techniques else inputs.run.name


def hardware_text(hw: HardwareSpec) -> str:
    """The hardware as its numbers say (never a preset's name, which overrides outdate):
    ``4 x 64x64 ws, DRAM 128 B/cycle`` (one memory's bandwidth, all its channels)."""
    array = f"{hw.array.rows}x{hw.array.cols} {hw.array.dataflow.value}"
    machine = array if hw.processors == 1 else f"{hw.processors} x {array}"
    from accelsim.timing.machine import machine_of

    bandwidth = machine_of(hw).dram_bandwidths()[0]
    dram = "ideal DRAM" if bandwidth == float("inf") else f"DRAM {bandwidth:g} B/cycle"
    return f"{machine}, {dram}"


def _dram_bandwidth(hw: HardwareSpec) -> tuple[float, int]:
    """A Gantt chart's DRAM rows: one memory's bandwidth and how many memories."""
    from accelsim.timing.machine import machine_of

    bandwidths = machine_of(hw).dram_bandwidths()
    return bandwidths[0], len(bandwidths)


def _one_of_many(inputs: RunInputs) -> bool:
    """Whether the step runs on one of several processors (and nothing places it)."""
    from accelsim.config.run import AssignmentPolicy
    from accelsim.driver.parallel import tensor_degree

    single = inputs.run.assignment is AssignmentPolicy.SINGLE
    return inputs.hardware.processors > tensor_degree(inputs.run) and single


def cmd_suite(args: argparse.Namespace) -> int:
    """``accelsim suite``: one training step of every model of a suite."""
    from tqdm import tqdm

    from accelsim.config.loader import parse_sets
    from accelsim.driver.inputs import resolved_config, suite_entries, suite_inputs
    from accelsim.driver.run import simulate_training
    from accelsim.report.console import suite_table, suite_training_table
    from accelsim.report.figure import FigureSize
    from accelsim.report.plot_worker import PlotWorker
    from accelsim.report.suite import suite_columns, suite_row
    from accelsim.report.writer import run_directory, staged_directory, write_csv, write_run_files

    sets = parse_sets(args.sets)
    # Forked first (before tqdm starts a thread): the child loads matplotlib meanwhile.
    with PlotWorker() as plotter:
        entries = suite_entries(args.suite, args.models)
        _no_suite_file_names(args.suite, [entry.name for entry in entries])
        inputs = [suite_inputs(args.run_file, entry, sets) for entry in entries]
        target = run_directory(args.out, suite_directory_name(inputs[0]))
        rows = []
        with (
            staged_directory(target, args.force) as staging,
            tqdm(
                total=len(entries),
                desc="suite",
                unit="model",
                file=sys.stderr,
                disable=not sys.stderr.isatty(),  # no carriage returns in a log
            ) as bar,
        ):
            for entry, model_inputs in zip(entries, inputs, strict=True):
                bar.set_postfix_str(entry.name)
                result = simulate_training(model_inputs)
                write_run_files(
                    run_directory(staging, entry.name), result, resolved_config(model_inputs)
                )
                rows.append(suite_row(entry.name, result))
                bar.update(1)
            table = staging / SUITE_TABLE
            write_csv(table, suite_columns(rows), rows)
            first = inputs[0]
            setup = f"{hardware_text(first.hardware)}, batch {first.run.batch_size}"
            fmt, size = args.format or "png", FigureSize(args.size)
            plotter.draw(
                "suite", table, staging / f"suite.{fmt}", f"{first.run.name}: {setup}", fmt, size
            )
            training = first.run.techniques
            if training:
                title = (
                    f"{first.run.name}: {' + '.join(training)} against the baseline,"
                    f" whole training\n{setup}"
                )
                plotter.draw("speedup", table, staging / f"suite_speedup.{fmt}", title, fmt, size)
            plotter.finish()
    with cli_sweep.printing(target):
        if first.run.techniques:
            print(suite_training_table(rows))
            print("\nbaseline steps (no technique applied):")
        print(suite_table(rows))
        print(f"wrote {display_path(target)}/: suite.csv, plots and one directory per model")
    return EXIT_OK


SUITE_TABLE = "suite.csv"
SUITE_FILES = (
    SUITE_TABLE,
    *(f"{name}.{fmt}" for name in ("suite", "suite_speedup") for fmt in ("png", "pdf", "svg")),
)
"""The files ``accelsim suite`` may write beside the models' directories."""


def _no_suite_file_names(suite: Path, names: list[str]) -> None:
    """Refuse, before simulating, model names that are the suite's own file names (in any
    letter case, for case-insensitive file systems).

    Raises:
        InputError: naming each such model at its key in the suite file.
    """
    from accelsim.driver.inputs import suite_entries
    from accelsim.errors import Problem

    reserved = {name.lower() for name in SUITE_FILES}
    order = [entry.name for entry in suite_entries(suite)]
    problems = [
        Problem(
            display_path(suite),
            f"models[{order.index(name)}].name",
            f"is the name of a file the suite writes ({', '.join(SUITE_FILES)})",
            name,
        )
        for name in names
        if name.lower() in reserved
    ]
    if problems:
        raise InputError(problems)


def cmd_models(args: argparse.Namespace) -> int:
    """``accelsim models``: the sizes of workload files, or of the models of a suite
    (the bundled suite's from their cache while its files are unchanged)."""
    from accelsim.report.model_counts import cached_counts, models_table
    from accelsim.resources import data_dir

    if args.files:
        if args.suite is not None:
            raise InputError.single("--suite", "", "give workload files or --suite, not both")
        return _workload_models(args.files, args.json)
    suite = args.suite or data_dir() / "configs" / "suites" / "default.yaml"
    stats = cached_counts(suite)
    if stats is None:
        from accelsim.driver.inputs import suite_models
        from accelsim.lowering.stats import model_stats

        stats = [model_stats(workload, infos) for workload, infos in suite_models(suite)]
    with cli_sweep.printing():
        print(
            json.dumps([dataclasses.asdict(s) for s in stats], indent=2)
            if args.json
            else models_table(stats)
        )
    return EXIT_OK


def _workload_models(files: list[Path], as_json: bool) -> int:
    """``accelsim models FILE...``: each file's sizes, with the source and the notes of
    a file that has them (a SCALE-Sim topology's assumptions)."""
    from accelsim.lowering.infer import load_model
    from accelsim.lowering.stats import model_stats
    from accelsim.report.console import workload_notes
    from accelsim.report.model_counts import models_table

    models = []
    problems = []
    for path in files:
        try:
            models.append((path, *load_model(path)))
        except InputError as exc:
            problems.extend(exc.problems)
    if problems:
        raise InputError(problems)
    stats = [model_stats(workload, infos) for _, workload, infos in models]
    if as_json:
        records = [
            {
                "file": display_path(path),
                **dataclasses.asdict(s),
                "source": workload.source,
                "notes": workload.notes or [],
            }
            for (path, workload, _), s in zip(models, stats, strict=True)
        ]
        with cli_sweep.printing():
            print(json.dumps(records, indent=2))
        return EXIT_OK
    with cli_sweep.printing():
        print(models_table(stats))
        for _, workload, _ in models:
            if workload.notes:
                print(f"\n{workload.name}: " + workload_notes(workload.source, workload.notes))
    return EXIT_OK


def cmd_init(args: argparse.Namespace) -> int:
    """``accelsim init DIR``: a project directory with copies of the bundled inputs."""
    from accelsim.report.staging import staged_entries
    from accelsim.resources import BUNDLED_TOPS, copy_bundled

    directory: Path = args.directory
    with staged_entries(directory, BUNDLED_TOPS) as staging:
        copy_bundled(staging)
    runs = len(list((directory / "configs" / "runs").glob("*.yaml")))
    models = len(list((directory / "workloads").glob("*.yaml")))
    shown = display_path(directory)
    with cli_sweep.printing(directory):
        print(f"wrote {shown}/: configs/ ({runs} run files), workloads/ ({models} models)")
        print(f"next: cd {shown} && accelsim run configs/runs/default.yaml")
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    """``accelsim check``: validate config files without simulating."""
    problems = []
    with cli_sweep.printing():
        for path in args.files:
            try:
                print(f"{display_path(path)}: ok ({_check_file(path, args.max_points)})")
            except InputError as exc:
                problems.extend(exc.problems)
    if problems:
        raise InputError(problems)
    return EXIT_OK


def _workload_line(path: Path) -> str:
    """What ``accelsim check`` says of a valid workload file."""
    from accelsim.lowering.infer import load_model

    workload, _ = load_model(path)
    layers = len(workload.layers)
    return f"workload '{workload.name}', {layers} {plural(layers, 'layer')}"


def _check_file(path: Path, max_points: int | None = None) -> str:
    from accelsim.config.loader import load_energy, load_hardware, read_yaml
    from accelsim.workload.formats import reader_for

    if reader_for(path) is not None:
        return _workload_line(path)
    data: dict[str, Any] = read_yaml(path)
    if "layers" in data:
        return _workload_line(path)
    if "array" in data:
        return f"hardware '{load_hardware(path).name}'"
    if "mac_pj" in data:
        return f"energy table '{load_energy(path).name}'"
    if "workload" in data or "hardware" in data:
        from accelsim.driver.inputs import load_inputs

        inputs = load_inputs(path)
        return f"run '{inputs.run.name}' with all referenced files"
    if "base" in data:
        plan = cli_sweep.check_sweep(path, max_points)
        points = len(plan.points)
        return f"sweep '{plan.name}', {points} {plural(points, 'point')}, each with all its files"
    if "models" in data:
        from accelsim.config.loader import load_suite
        from accelsim.driver.inputs import suite_models

        models = suite_models(path)
        name, count = load_suite(path).name, len(models)
        return f"suite '{name}', {count} {plural(count, 'model')}, each with its workload"
    raise InputError.single(
        display_path(path),
        "",
        "not a hardware, energy, workload, run, sweep or suite file"
        " (no 'array', 'mac_pj', 'layers', 'workload', 'base' or 'models' key)",
    )
