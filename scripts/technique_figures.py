#!/usr/bin/env python3
"""Each technique across the suite: the data and the figure of its page.

    python scripts/technique_figures.py [--technique NAME ...]   # simulate, write, draw
    python scripts/technique_figures.py --draw-only              # redraw from the CSVs

Runs every technique of :data:`TECHNIQUES` on the fourteen models of
``configs/suites/default.yaml`` (with the run file and settings its page measures
with), writes ``docs/techniques/data/<technique>.csv`` (per model: the whole-training
speedup, the bound it is drawn beside with its binding resource, the energy
saving), its first lines ``#`` comments naming the command, the commit and the
inputs, and draws ``docs/techniques/figures/<technique>.png`` from it.  The
documentation build draws the site's copy from the same CSV
(``scripts/mkdocs_hooks.py``), so a page shows what its CSV holds; the PNG in the
repository is the one its Markdown shows when read as a file.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "configs" / "suites" / "default.yaml"
DATA = ROOT / "docs" / "techniques" / "data"
FIGURES = ROOT / "docs" / "techniques" / "figures"
COLUMNS = ("model", "speedup", "speedup_bound", "binding_bound", "energy_reduction")


@dataclass(frozen=True)
class Setup:
    """How a technique's page measures it on the suite.

    Attributes:
        name: The file names (``data/<name>.csv``, ``figures/<name>.png``).
        title: The figure's title.
        run: The run file, relative to the checkout.
        sets: ``--set`` overrides of every model's run (the technique among them).
        models: The suite models it runs on (empty: all fourteen; approximate dropout
            runs on those with a dropout layer).
        own_bound: The technique whose one step kind carries a tighter bound than the
            run's (optimizer fusion's: the forward pass as simulated, then what waits
            for its end); the figure marks the tighter of the two.
    """

    name: str
    title: str
    run: str
    sets: tuple[str, ...]
    models: tuple[str, ...] = ()
    own_bound: str = ""


TECHNIQUES = (
    Setup(
        "gradient-prediction",
        "ADA-GP (adaptive schedule, 64x64 predictor), batch 128, 90 epochs",
        "configs/experiments/adagp/run.yaml",
        (),
    ),
    Setup(
        "optimizer-fusion",
        "optimizer fusion (backward, momentum), batch 32, one step",
        "configs/runs/default.yaml",
        ("run.techniques={optimizer_fusion: {}}",),
        own_bound="optimizer_fusion",
    ),
    Setup(
        "gradient-skipping",
        "gradient skipping (closed-loop monitor, filter groups), batch 32,"
        " 90 epochs of 1000 batches",
        "configs/runs/default.yaml",
        (
            "run.training={epochs: 90, batches_per_epoch: 1000}",
            "run.techniques={gradient_skipping: {}}",
        ),
    ),
    Setup(
        "approximate-dropout",
        "approximate random dropout (row patterns at each dropout layer's own rate), batch 32",
        "configs/runs/default.yaml",
        ("run.techniques={approximate_dropout: {}}",),
        ("lstm_ptb", "alexnet", "vgg13", "vgg16", "mobilenet_v2", "inception_v3", "bert_base"),
    ),
    Setup(
        "recomputation",
        "activation recomputation (policy full), batch 32, one step",
        "configs/runs/default.yaml",
        ("run.techniques={recomputation: {policy: full}}",),
    ),
    Setup(
        "pipelines",
        "LayerPipe on 4 processors sharing one DRAM, over one processor, batch 32, momentum",
        "configs/experiments/pipeline.yaml",
        ("processors=4", "run.techniques={layerpipe: {}}"),
    ),
)
"""The techniques and the set-up each page measures them with."""


def measure(setup: Setup) -> list[dict[str, Any]]:
    """One row per model: ``setup``'s run on it, through the suite's entries."""
    from accelsim import parse_sets, simulate_training, suite_entries, suite_inputs

    rows = []
    for entry in suite_entries(SUITE, list(setup.models) or None):
        print(f"{setup.name}: {entry.name}", file=sys.stderr, flush=True)
        inputs = suite_inputs(ROOT / setup.run, entry, parse_sets(list(setup.sets)))
        training = simulate_training(inputs).training
        assert training is not None, setup.name
        bound, binding = training.speedup_bound, training.binding_bound
        if setup.own_bound:
            (kind,) = training.sections[setup.own_bound].details["by_kind"].values()
            if kind["speedup_bound"] < bound:
                bound, binding = kind["speedup_bound"], kind["binding_bound"]
        rows.append(
            {
                "model": entry.name,
                "speedup": f"{training.speedup:.6g}",
                "speedup_bound": f"{bound:.6g}",
                "binding_bound": binding,
                "energy_reduction": f"{training.energy_reduction:.6g}",
            }
        )
    return rows


def header(setup: Setup, seconds: float) -> list[str]:
    """The CSV's comment lines: the command, the commit, the inputs and the run time."""
    from accelsim import __version__

    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    return [
        f"# {setup.title}",
        f"# written by: python scripts/technique_figures.py --technique {setup.name}"
        f" ({seconds:.0f} s, {today})",
        f"# accelsim {__version__}, commit {commit or 'unknown'}",
        f"# run file: {setup.run}; suite: configs/suites/default.yaml"
        + "".join(f"; --set {s}" for s in setup.sets),
        "# speedup and speedup_bound: whole training over the baseline (x);"
        " energy_reduction: fraction saved",
    ]


def write(setup: Setup, rows: Sequence[dict[str, Any]], seconds: float) -> Path:
    """``data/<name>.csv``: the header comments, then the rows."""
    DATA.mkdir(parents=True, exist_ok=True)
    path = DATA / f"{setup.name}.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in header(setup, seconds)))
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return path


def draw(csv_path: Path, png_path: Path) -> None:
    """The figure of a technique CSV (its title the first comment line): each model's
    speedup beside its bound, and its energy saving, with the geometric means."""
    from accelsim import plot_speedup

    title = csv_path.read_text(encoding="utf-8").splitlines()[0].removeprefix("# ")
    plot_speedup(csv_path, png_path, title)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    names = [s.name for s in TECHNIQUES]
    parser.add_argument("--technique", action="append", choices=names, help="(repeatable)")
    parser.add_argument("--draw-only", action="store_true", help="redraw from the CSVs")
    args = parser.parse_args(argv)
    chosen = [s for s in TECHNIQUES if s.name in (args.technique or names)]
    FIGURES.mkdir(parents=True, exist_ok=True)
    for setup in chosen:
        path = DATA / f"{setup.name}.csv"
        if not args.draw_only:
            started = time.perf_counter()
            rows = measure(setup)
            write(setup, rows, time.perf_counter() - started)
        draw(path, FIGURES / f"{setup.name}.png")
        print(f"wrote {path.relative_to(ROOT)}, figures/{setup.name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
