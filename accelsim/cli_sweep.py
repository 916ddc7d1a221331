"""Command line of sweeps: ``accelsim sweep | collect | plot``.

Part of the command line (:mod:`accelsim.cli` registers these subcommands and
maps their exceptions to exit codes); like it, it prints.  ``accelsim sweep``
exits with code 3 when a point failed (every other point is stored).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelsim.config.files import display_path
from accelsim.resources import bundled_path

if TYPE_CHECKING:
    from accelsim.sweep import SweepPlan

    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

EXIT_OK, EXIT_FAILED_POINTS = 0, 3


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer (got {text!r})") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer (got {value})")
    return value


def add_commands(sub: Subparsers) -> None:
    """Add ``sweep``, ``collect`` and ``plot`` to the subcommands."""
    sweep = sub.add_parser(
        "sweep", help="simulate every design point of a sweep file into a resumable store"
    )
    sweep.add_argument("sweep_file", type=bundled_path, help="sweep YAML")
    sweep.add_argument(
        "--out", type=Path, default=Path("results"), help="parent of the sweep's directory"
    )
    sweep.add_argument(
        "--jobs",
        type=_positive,
        default=os.cpu_count() or 1,
        help="local worker processes (default: the core count; 1 runs in this process)",
    )
    cluster = sweep.add_mutually_exclusive_group()
    cluster.add_argument(
        "--scheduler", metavar="ADDRESS", help="run on a Dask scheduler, e.g. tcp://host:8786"
    )
    cluster.add_argument(
        "--dask-workers",
        type=_positive,
        metavar="N",
        help="run on a local Dask cluster of N worker processes",
    )
    sweep.add_argument(
        "--retry-failed", action="store_true", help="run the points that failed before again"
    )
    sweep.add_argument(
        "--max-points",
        type=_positive,
        default=None,
        metavar="N",
        help="allow up to N points (default: 10,000)",
    )
    collect = sub.add_parser("collect", help="export a sweep's store as one flat table")
    collect.add_argument("directory", type=Path, help="the sweep's output directory")
    output = collect.add_mutually_exclusive_group()
    output.add_argument(
        "--csv", type=Path, metavar="FILE", help="write CSV to FILE (default: CSV to stdout)"
    )
    output.add_argument("--json", action="store_true", help="print one JSON list")
    plot = sub.add_parser("plot", help="draw a sweep's speedup, energy, heatmap, Pareto or scaling")
    plot.add_argument("directory", type=Path, help="the sweep's output directory")
    plot.add_argument(
        "--kind", required=True, choices=["speedup", "energy", "heatmap", "pareto", "scaling"]
    )
    plot.add_argument(
        "--baseline", metavar="KEY=VALUE", help="speedup: the axis value to compare against"
    )
    plot.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only the points with this axis value (repeatable)",
    )
    plot.add_argument("--x", dest="x_key", metavar="KEY", help="scaling: the numeric axis")
    plot.add_argument("--format", choices=["png", "pdf", "svg"], default="png")
    plot.add_argument(
        "--output", type=Path, metavar="FILE", help="default: DIR/plots/<kind>.<format>"
    )


def check_sweep(path: Path) -> SweepPlan:
    """Validate every point of a sweep file (for ``accelsim check``)."""
    from accelsim.sweep import plan_sweep

    return plan_sweep(path)


def cmd_sweep(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from accelsim.sweep import (
        DaskExecutor,
        Executor,
        PoolExecutor,
        pending_points,
        plan_sweep,
        run_sweep,
    )
    from accelsim.sweep.plan import MAX_POINTS

    plan = plan_sweep(args.sweep_file, args.max_points or MAX_POINTS)
    todo = pending_points(plan, args.out, args.retry_failed)
    executor: Executor
    if args.scheduler is not None or args.dask_workers is not None:
        executor = DaskExecutor(args.scheduler, args.dask_workers)
    elif args.jobs == 1 or todo <= 1:
        executor = Executor()
    else:
        executor = PoolExecutor(min(args.jobs, todo))
    failures: list[str] = []
    with (
        executor,
        tqdm(total=todo, desc=plan.name, unit="pt", file=sys.stderr, dynamic_ncols=True) as bar,
    ):

        def on_point(outcome: Any) -> None:
            if outcome.status != "ok":
                failures.append(f"{outcome.task.label}: {outcome.error}")
            bar.update(1)

        report = run_sweep(plan, args.out, executor, args.retry_failed, on_point)
    for failure in failures:
        print(f"failed: {failure}", file=sys.stderr)
    print(
        f"{plan.name}: {report.points} points, {report.skipped} already stored, "
        f"{report.ran} run ({report.failed} failed) in {report.seconds:.1f} s "
        f"({executor.description})"
    )
    print(f"wrote {display_path(report.directory)}/: store.sqlite, points/")
    return EXIT_FAILED_POINTS if report.failed else EXIT_OK


def cmd_collect(args: argparse.Namespace) -> int:
    from accelsim.sweep.collect import collect

    columns, rows = collect(args.directory)
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    cells = [
        {k: json.dumps(v) if isinstance(v, list | dict) else v for k, v in r.items()} for r in rows
    ]
    if args.csv is None:
        writer = csv.DictWriter(sys.stdout, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(cells)
        return EXIT_OK
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    with args.csv.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(cells)
    print(f"wrote {display_path(args.csv)}: {len(rows)} points, {len(columns)} columns")
    return EXIT_OK


def cmd_plot(args: argparse.Namespace) -> int:
    from accelsim.sweep.collect import collect, open_store
    from accelsim.sweep.plots import PlotKind, draw, parse_assignment, select

    with open_store(args.directory) as store:
        meta = store.meta()
    axes: list[str] = meta.get("axes", [])
    _, rows = collect(args.directory)
    where = [parse_assignment(w, "--where") for w in args.where]
    baseline = None if args.baseline is None else parse_assignment(args.baseline, "--baseline")
    chosen = select(rows, axes, where)
    kind = PlotKind(args.kind)
    path = args.output or args.directory / "plots" / f"{kind.value}.{args.format}"
    path.parent.mkdir(parents=True, exist_ok=True)
    draw(kind, str(meta.get("name", args.directory.name)), chosen, axes, path, baseline, args.x_key)
    print(f"wrote {display_path(path)}")
    return EXIT_OK
