"""Command line of sweeps: ``accelsim sweep | collect | plot``.

Part of the command line (:mod:`accelsim.cli` registers these subcommands and
maps their exceptions to exit codes); like it, it prints.  ``accelsim sweep``
exits with code 3 when a point failed (every other point is stored).  Output
files are staged (:func:`accelsim.report.staging.staged_file`) and never written
onto a sweep's own files; a stdout that cannot be written is an
:class:`~accelsim.errors.OutputError` (exit 2) that says whether the results are
safe (:func:`printing`).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelsim.cli_compile import engine_notices
from accelsim.config.files import display_path
from accelsim.errors import InputError, OutputError
from accelsim.resources import bundled_path
from accelsim.units import plural

if TYPE_CHECKING:
    from accelsim.sweep import Executor, SweepPlan

    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

EXIT_OK, EXIT_FAILED_POINTS = 0, 3


@contextmanager
def printing(results: Path | None = None) -> Iterator[None]:
    """Print the command's report inside the block, then flush stdout.

    A stdout that cannot be written (a full disk, ``> /dev/full``) becomes an
    :class:`OutputError` saying, when ``results`` were written before, that they are
    complete; a closed pipe (``| head``) stays a :class:`BrokenPipeError`.
    """
    try:
        yield
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        safe = f"; the results are complete in {display_path(results)}" if results else ""
        raise OutputError(f"<stdout>: cannot print: {exc.strerror or exc}{safe}") from None


def _output_file(text: str) -> Path:
    if not text:
        raise argparse.ArgumentTypeError("expected a file path (got '')")
    return Path(text)


def _not_a_sweep_file(path: Path, option: str) -> None:
    """Refuse an output path that is a sweep's own file (its store or ``points/``).

    Raises:
        InputError: naming the option and the sweep directory.
    """
    from accelsim.sweep.schema import sweep_owning

    owner = sweep_owning(path)
    if owner is not None:
        raise InputError.single(
            option,
            "",
            f"a file of the sweep in {display_path(owner)} (its store or points/); write elsewhere",
            str(path),
        )


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer (got {text!r})") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer (got {value})")
    return value


def add_executor_options(parser: argparse.ArgumentParser) -> None:
    """The options that choose where points run: ``--jobs``, ``--scheduler``,
    ``--dask-workers`` (read by :func:`executor_of`)."""
    parser.add_argument(
        "--jobs",
        type=positive,
        default=os.cpu_count() or 1,
        help="local worker processes (default: the core count; 1 runs in this process)",
    )
    cluster = parser.add_mutually_exclusive_group()
    cluster.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run on a Dask scheduler, e.g. tcp://host:8786 (default: a local process pool)",
    )
    cluster.add_argument(
        "--dask-workers",
        type=positive,
        metavar="N",
        help="run on a local Dask cluster of N worker processes (default: no Dask)",
    )


def executor_of(args: argparse.Namespace, todo: int) -> Executor:
    """The executor :func:`add_executor_options`'s options choose for ``todo`` points."""
    from accelsim.sweep import DaskExecutor, Executor, PoolExecutor

    if args.scheduler is not None or args.dask_workers is not None:
        return DaskExecutor(args.scheduler, args.dask_workers)
    if args.jobs == 1 or todo <= 1:
        return Executor()
    return PoolExecutor(min(args.jobs, todo))


def add_commands(sub: Subparsers) -> None:
    """Add ``sweep``, ``collect`` and ``plot`` to the subcommands."""
    sweep = sub.add_parser(
        "sweep", help="simulate every design point of a sweep file into a resumable store"
    )
    sweep.add_argument("sweep_file", type=bundled_path, help="sweep YAML")
    sweep.add_argument(
        "--out", type=Path, default=Path("results"), help="parent of the sweep's directory"
    )
    add_executor_options(sweep)
    sweep.add_argument(
        "--retry-failed", action="store_true", help="run the points that failed before again"
    )
    sweep.add_argument(
        "--keep-points",
        choices=["none", "failed", "all"],
        default=None,
        metavar="WHICH",
        help="which points keep a directory in points/: none (the store holds everything"
        " collect and plot read), failed (point.json with the error) or all (each finished"
        " point's summary.json too) (default: all with layers: true, else none)",
    )
    sweep.add_argument(
        "--max-points",
        type=positive,
        default=None,
        metavar="N",
        help="allow up to N points (default: 10,000)",
    )
    collect = sub.add_parser("collect", help="export a sweep's store as one flat table")
    collect.add_argument("directory", type=Path, help="the sweep's output directory")
    output = collect.add_mutually_exclusive_group()
    output.add_argument(
        "--csv",
        type=_output_file,
        metavar="FILE",
        help="write CSV to FILE (default: CSV to stdout)",
    )
    output.add_argument("--json", action="store_true", help="print one JSON list")
    plot = sub.add_parser(
        "plot", help="draw a sweep's speedup, technique, energy, heatmap, Pareto or scaling figure"
    )
    plot.add_argument("directory", type=Path, help="the sweep's output directory")
    plot.add_argument(
        "--kind",
        required=True,
        choices=["speedup", "technique", "energy", "heatmap", "pareto", "scaling"],
        help="technique: speedup and energy saving of the sweep's technique per model",
    )
    plot.add_argument(
        "--baseline",
        metavar="KEY=VALUE",
        help="speedup: the axis value to compare against (default: none, the technique's"
        " own speedup)",
    )
    plot.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only the points with this axis value (repeatable); techniques as the sweep file"
        " writes them ({gradient_prediction: {}}) or as labelled (gradient_prediction)",
    )
    plot.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="KEY=TEXT",
        help="show an axis (array.rows) or a value (a model, a technique combination) as"
        " TEXT (repeatable)",
    )
    plot.add_argument(
        "--by",
        metavar="KEY",
        help="speedup, technique: the axis whose values group the bars (default: the model)",
    )
    plot.add_argument(
        "--x",
        dest="x_key",
        metavar="KEY",
        help="scaling: the numeric axis (default: the first varying one); pareto: the x"
        " metric, a numeric column of accelsim collect or seconds_per_sample (the default)",
    )
    plot.add_argument(
        "--y",
        dest="y_key",
        metavar="KEY",
        help="pareto: the y metric, a numeric column of accelsim collect or"
        " energy_pj_per_sample (the default)",
    )
    add_figure_options(plot, "--output's suffix, else png")
    plot.add_argument(
        "--output",
        type=_output_file,
        metavar="FILE",
        help="exactly this file (default: DIR/plots/<kind>.<format>)",
    )


def add_figure_options(parser: argparse.ArgumentParser, format_default: str) -> None:
    """``--format`` and ``--size`` of a command that draws figures."""
    parser.add_argument(
        "--format", choices=["png", "pdf", "svg"], help=f"figure format (default: {format_default})"
    )
    parser.add_argument(
        "--size",
        choices=["column", "page"],
        default="page",
        help="printed width: one column (3.5 in) or the page (7.16 in)",
    )


def check_sweep(path: Path, max_points: int | None = None) -> SweepPlan:
    """Validate every point of a sweep file of at most ``max_points`` points (default
    :data:`~accelsim.sweep.plan.MAX_POINTS`) for ``accelsim check``."""
    from accelsim.sweep import plan_sweep
    from accelsim.sweep.plan import MAX_POINTS

    return plan_sweep(path, max_points or MAX_POINTS, os.cpu_count() or 1)


def cmd_sweep(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from accelsim.errors import ClusterError, WorkerError
    from accelsim.sweep import pending_points, plan_sweep, run_sweep, sweep_directory
    from accelsim.sweep.plan import MAX_POINTS
    from accelsim.sweep.points import KeepPoints

    plan = plan_sweep(args.sweep_file, args.max_points or MAX_POINTS, args.jobs)
    todo = pending_points(plan, args.out, args.retry_failed)
    executor = executor_of(args, todo)
    failures: list[str] = []
    finished = 0
    with (
        executor,
        tqdm(
            total=todo,
            desc=plan.name,
            unit="pt",
            file=sys.stderr,
            dynamic_ncols=True,
            disable=not sys.stderr.isatty(),  # no carriage returns in a log
        ) as bar,
    ):

        def on_point(outcome: Any) -> None:
            nonlocal finished
            finished += 1
            if outcome.status != "ok":
                failures.append(f"{outcome.task.label}: {outcome.error}")
            bar.update(1)

        try:
            keep = None if args.keep_points is None else KeepPoints(args.keep_points)
            with engine_notices():
                report = run_sweep(plan, args.out, executor, args.retry_failed, on_point, keep)
        except ClusterError as exc:
            bar.close()
            directory = sweep_directory(args.out, plan.name)
            start = "" if isinstance(exc, WorkerError) else "start workers and "
            print(
                f"accelsim: {exc}; points finished so far: {finished}, stored in"
                f" {display_path(directory)}/: {start}rerun the same command to resume",
                file=sys.stderr,
            )
            return EXIT_FAILED_POINTS
    for failure in failures:
        print(f"failed: {failure}", file=sys.stderr)
    with printing(report.directory):
        print(
            f"{plan.name}: {report.points} {plural(report.points, 'point')},"
            f" {report.skipped} already stored, "
            f"{report.ran} run ({report.failed} failed) in {report.seconds:.1f} s "
            f"({executor.description})"
        )
        print(f"wrote {display_path(report.directory)}/: store.sqlite, points/")
    return EXIT_FAILED_POINTS if report.failed else EXIT_OK


def cmd_collect(args: argparse.Namespace) -> int:
    from accelsim.report.staging import staged_file
    from accelsim.sweep.collect import collect
    from accelsim.sweep.schema import dumps

    if args.csv is not None:
        _not_a_sweep_file(args.csv, "--csv")
    columns, rows = collect(args.directory)
    if args.json:
        with printing():
            print(dumps(rows, indent=2))
        return EXIT_OK
    cells = [{k: dumps(v) if isinstance(v, list | dict) else v for k, v in r.items()} for r in rows]
    if args.csv is None:
        with printing():
            _write_table(sys.stdout, columns, cells)
        return EXIT_OK
    with staged_file(args.csv) as staged, staged.open("w", newline="", encoding="utf-8") as handle:
        _write_table(handle, columns, cells)
    with printing(args.csv):
        points, count = len(rows), len(columns)
        print(
            f"wrote {display_path(args.csv)}: {points} {plural(points, 'point')},"
            f" {count} {plural(count, 'column')}"
        )
    return EXIT_OK


def _write_table(handle: Any, columns: list[str], cells: list[dict[str, Any]]) -> None:
    writer = csv.DictWriter(handle, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(cells)


def cmd_plot(args: argparse.Namespace) -> int:
    from accelsim.report.figure import FigureSize
    from accelsim.sweep.plot_options import PlotKind, output_path, parse_assignment
    from accelsim.sweep.plotting import plot_sweep
    from accelsim.sweep.relabel import parse_label

    kind = PlotKind(args.kind)
    path, fmt = output_path(args.directory, kind, args.output, args.format)
    _not_a_sweep_file(path, "--output")
    where = [parse_assignment(w, "--where") for w in args.where]
    baseline = None if args.baseline is None else parse_assignment(args.baseline, "--baseline")
    labels = dict(parse_label(text) for text in args.label)
    plot_sweep(
        args.directory,
        kind,
        where,
        labels,
        by=args.by,
        baseline=baseline,
        x_key=args.x_key,
        y_key=args.y_key,
        size=FigureSize(args.size),
        output=path,
        fmt=fmt,
    )
    with printing(path):
        print(f"wrote {display_path(path)}")
    return EXIT_OK
