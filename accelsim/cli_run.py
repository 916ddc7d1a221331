"""``accelsim run | suite | models | check`` (part of :mod:`accelsim.cli`).

Loaded only for these commands; each imports what it uses when it runs (``run``
no plots unless ``--gantt``, no progress bar), so that a command loads none of
what only another one needs (``tests/test_startup.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelsim import cli_sweep
from accelsim.config.files import display_path
from accelsim.errors import InputError

if TYPE_CHECKING:
    from accelsim.driver.inputs import RunInputs

EXIT_OK = 0


def cmd_run(args: argparse.Namespace) -> int:
    """``accelsim run``: one training step of a run file, into a run directory."""
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
        with cli_sweep.printing(directory):
            print(training_table(result.training))
            print("\nbaseline step (no technique applied):")
    elif _one_of_many(inputs):
        print(
            f"accelsim: warning: {inputs.hardware.processors} processors, but the single"
            " assignment runs the step on processor 0; set assignment=data_parallel"
            " or a pipeline technique to use them",
            file=sys.stderr,
        )
    with cli_sweep.printing(directory):
        print(summary_table(result.base.summary()))
        if inputs.workload.notes:
            from accelsim.report.console import workload_notes

            print(workload_notes(inputs.workload.source, inputs.workload.notes))
        print(f"wrote {display_path(directory)}/")
    return EXIT_OK


def _one_of_many(inputs: RunInputs) -> bool:
    """Whether the step runs on one of several processors (and nothing places it)."""
    from accelsim.config.run import AssignmentPolicy

    return inputs.hardware.processors > 1 and inputs.run.assignment is AssignmentPolicy.SINGLE


def cmd_suite(args: argparse.Namespace) -> int:
    """``accelsim suite``: one training step of every model of a suite."""
    from tqdm import tqdm

    from accelsim.config.loader import parse_sets
    from accelsim.driver.inputs import resolved_config, suite_entries, suite_inputs
    from accelsim.driver.run import simulate_training
    from accelsim.report.console import suite_table
    from accelsim.report.plot_worker import PlotWorker
    from accelsim.report.suite import suite_columns, suite_row
    from accelsim.report.writer import run_directory, staged_directory, write_csv, write_run_files

    sets = parse_sets(args.sets)
    # Forked first (before tqdm starts a thread): the child loads matplotlib meanwhile.
    with PlotWorker() as plotter:
        entries = suite_entries(args.suite, args.models)
        _no_suite_file_names(args.suite, [entry.name for entry in entries])
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
            table, figure, speedup = (staging / name for name in SUITE_FILES)
            write_csv(table, suite_columns(rows), rows)
            first = inputs[0]
            title = f"{first.run.name}: {first.hardware.name}, batch {first.run.batch_size}"
            plotter.draw("suite", table, figure, title)
            if any("speedup" in row for row in rows):
                plotter.draw("speedup", table, speedup, title)
            plotter.finish()
    with cli_sweep.printing(target):
        print(suite_table(rows))
        print(f"wrote {display_path(target)}/: suite.csv, plots and one directory per model")
    return EXIT_OK


SUITE_FILES = ("suite.csv", "suite.png", "suite_speedup.png")
"""The files ``accelsim suite`` writes beside the models' directories."""


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
    """``accelsim models``: the sizes of workload files, or of the models of a suite."""
    from accelsim.driver.inputs import suite_models
    from accelsim.lowering.stats import model_stats
    from accelsim.report.console import models_table
    from accelsim.resources import data_dir

    if args.files:
        if args.suite is not None:
            raise InputError.single("--suite", "", "give workload files or --suite, not both")
        return _workload_models(args.files, args.json)
    suite = args.suite or data_dir() / "configs" / "suites" / "default.yaml"
    stats = [model_stats(workload, infos) for workload, infos in suite_models(suite)]
    if args.json:
        print(json.dumps([dataclasses.asdict(s) for s in stats], indent=2))
    else:
        print(models_table(stats))
    return EXIT_OK


def _workload_models(files: list[Path], as_json: bool) -> int:
    """``accelsim models FILE...``: each file's sizes, with the source and the notes of
    a file that has them (a SCALE-Sim topology's assumptions)."""
    from accelsim.lowering.infer import load_model
    from accelsim.lowering.stats import model_stats
    from accelsim.report.console import models_table, workload_notes

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
        print(json.dumps(records, indent=2))
        return EXIT_OK
    print(models_table(stats))
    for _, workload, _ in models:
        if workload.notes:
            print(f"\n{workload.name}: " + workload_notes(workload.source, workload.notes))
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    """``accelsim check``: validate config files without simulating."""
    problems = []
    for path in args.files:
        try:
            print(f"{display_path(path)}: ok ({_check_file(path, args.max_points)})")
        except InputError as exc:
            problems.extend(exc.problems)
    if problems:
        raise InputError(problems)
    return EXIT_OK


def _check_file(path: Path, max_points: int | None = None) -> str:
    from accelsim.config.loader import load_energy, load_hardware, read_yaml
    from accelsim.driver.inputs import load_inputs
    from accelsim.lowering.infer import load_model
    from accelsim.workload.formats import reader_for

    if reader_for(path) is not None:
        workload, _ = load_model(path)
        return f"workload '{workload.name}', {len(workload.layers)} layers"
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
        plan = cli_sweep.check_sweep(path, max_points)
        return f"sweep '{plan.name}', {len(plan.points)} points, each with all its files"
    if "models" in data:
        from accelsim.config.loader import load_suite
        from accelsim.driver.inputs import suite_models

        models = suite_models(path)
        return f"suite '{load_suite(path).name}', {len(models)} models, each with its workload"
    raise InputError.single(
        display_path(path),
        "",
        "not a hardware, energy, workload, run, sweep or suite file"
        " (no 'array', 'mac_pj', 'layers', 'workload', 'base' or 'models' key)",
    )
