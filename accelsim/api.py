"""The Python API: simulate a run file in one call; read a sweep's points or a run's
files back as pandas tables, for notebooks.

>>> import accelsim
>>> result = accelsim.simulate("configs/runs/default.yaml", overrides=["batch_size=8"])
>>> result.base.total_cycles  # doctest: +SKIP
>>> result.to_records()       # one flat record per step kind  # doctest: +SKIP
>>> points = accelsim.load_sweep("results/arrays")  # doctest: +SKIP
>>> points.attrs["units"]["energy_pj"]  # doctest: +SKIP
'pJ'

pandas is imported by :func:`load_sweep` and :func:`load_run` only (the ``data``
extra: ``pip install accelsim[data]``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelsim.config.hardware import HardwareSpec
from accelsim.config.interconnect import Algorithm, InterconnectSpec
from accelsim.config.loader import parse_sets
from accelsim.config.validate import validate_data
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import simulate_training
from accelsim.errors import InputError
from accelsim.network.collectives import Collective
from accelsim.network.cost import cycles
from accelsim.network.topology import Network
from accelsim.report.training import TrainingResult
from accelsim.sweep.collect import collect, column_unit

if TYPE_CHECKING:
    import pandas as pd


def simulate(run_file: str | Path, overrides: Sequence[str] = ()) -> TrainingResult:
    """Load ``run_file`` with ``overrides`` (``key=value`` strings, as ``--set``) and
    simulate the baseline step and every step kind of its techniques.

    Paths resolve as on the command line: ``configs/...`` and ``workloads/...`` not
    found from the working directory are the bundled files, and a file an override
    names (``workload=FILE``) is relative to the working directory.

    Raises:
        ConfigError: for bad run, hardware or energy files or overrides.
        WorkloadError: for a bad workload file.
    """
    return simulate_training(load_inputs(Path(run_file), parse_sets(list(overrides))))


def hardware_from_data(data: Mapping[str, Any], source: str = "<data>") -> HardwareSpec:
    """Validate ``data`` (a hardware file's mapping, e.g. from :func:`read_yaml`) as a
    hardware spec; ``source`` names it in error messages.

    Raises:
        ConfigError: listing every problem in ``data``.
    """
    return validate_data(HardwareSpec, dict(data), source)


def collective_cycles(
    interconnect: Mapping[str, Any],
    processors: int,
    collective: str,
    size_bytes: int,
    algorithm: str = "fastest",
) -> int:
    """Cycles of ``collective`` (``all_reduce``, ``all_gather``, ``reduce_scatter``,
    ``all_to_all``, ``broadcast`` or ``point_to_point``) of ``size_bytes`` on all
    ``processors`` of the network ``interconnect`` describes (a hardware file's
    ``interconnect`` mapping), lowered by ``algorithm`` and timed without contention
    from outside it, as in the documentation's network model (an all-gather's size is
    the gathered buffer).

    Raises:
        ConfigError: for a bad ``interconnect``.
        ValueError: for processors the network does not hold, an unknown collective or
            algorithm, or an algorithm that cannot run the collective on them.
    """
    spec = validate_data(InterconnectSpec, dict(interconnect), "<interconnect>")
    spec.check_processors(processors)
    network = Network.of(spec, processors)
    group = tuple(range(processors))
    return cycles(network, Collective(collective), group, size_bytes, Algorithm(algorithm))


def load_sweep(directory: str | Path) -> pd.DataFrame:
    """A sweep's points as a DataFrame: one row per stored point in sweep order, the
    columns of ``accelsim collect`` (each axis, the design, the metrics, the
    technique's numbers, then status and timings).

    ``frame.attrs["units"]`` maps every column to its unit (``"pJ"``, ``"cycles"``,
    ``"fraction (0.25 = 25 % saved; ...)"``; empty for names, counts and axis values):
    ratios such as ``energy_reduction`` are fractions, not percentages.

    Raises:
        InputError: when ``directory`` holds no sweep store, or a damaged one.
    """
    import pandas as pd

    columns, rows = collect(Path(directory))
    frame = pd.DataFrame(rows, columns=columns)
    frame.attrs["units"] = {c: column_unit(c) for c in columns}
    return frame


def plot_sweep(
    directory: str | Path,
    kind: str = "technique",
    *,
    where: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    by: str | None = None,
    baseline: tuple[str, Any] | None = None,
    x: str | None = None,
    y: str | None = None,
    size: str = "page",
    output: str | Path | None = None,
) -> Path:
    """Draw a figure of a sweep's finished points, as ``accelsim plot`` does; the file
    written (``output``, its format by its suffix; else ``directory/plots/<kind>.png``).

    ``kind`` is ``technique``, ``speedup``, ``energy``, ``heatmap``, ``pareto`` or
    ``scaling``; ``where`` keeps the points with these axis values (``{"techniques":
    {"gradient_prediction": {}}}``, as the sweep file writes it, or
    ``{"techniques": "gradient_prediction"}``); ``labels`` shows an axis or a value as
    another text (``{"gradient_prediction": "ADA-GP", "array.rows": "array height"}``);
    ``by``, ``baseline``, ``x``, ``y`` and ``size`` (``page`` or ``column``) are the
    options of the same names.

    Raises:
        InputError: for an unknown kind or size, options that choose no point or name
            nothing (the message lists what they can be), or points the figure cannot
            be drawn from.
    """
    from accelsim.report.figure import FigureSize
    from accelsim.sweep.plot_options import PlotKind
    from accelsim.sweep.plotting import plot_sweep as plot

    kinds = {k.value: k for k in PlotKind}
    sizes = {s.value: s for s in FigureSize}
    if kind not in kinds:
        raise InputError.single("kind", "", f"one of {', '.join(kinds)}", kind)
    if size not in sizes:
        raise InputError.single("size", "", f"one of {', '.join(sizes)}", size)
    return plot(
        Path(directory),
        kinds[kind],
        list((where or {}).items()),
        labels,
        by=by,
        baseline=baseline,
        x_key=x,
        y_key=y,
        size=sizes[size],
        output=None if output is None else Path(output),
    )


@dataclass(frozen=True)
class RunTables:
    """A run directory read back (``accelsim run``'s files).

    Attributes:
        summary: ``summary.json`` (cycles, energy by component in pJ, DRAM bytes,
            the ``training`` section with techniques, ...).
        ops: ``ops.csv``, one row per op (cycles, bytes, pJ as its column names say).
        layers: ``layers.csv``, one row per layer.
        steps: Each technique step kind's own tables (``steps/<kind>/``), by kind.
    """

    summary: dict[str, Any]
    ops: pd.DataFrame
    layers: pd.DataFrame
    steps: dict[str, RunTables]


def load_run(directory: str | Path) -> RunTables:
    """A run directory's summary, op table and layer table, and those of each
    technique step kind below ``steps/``.

    Raises:
        InputError: when ``directory`` is not a run directory (no ``summary.json``,
            ``ops.csv`` or ``layers.csv``) or one of them cannot be read.
    """
    import pandas as pd

    root = Path(directory)
    try:
        summary = json.loads((root / "summary.json").read_text(encoding="utf-8"))
        ops = pd.read_csv(root / "ops.csv", keep_default_na=False, na_values=[""])
        layers = pd.read_csv(root / "layers.csv", keep_default_na=False, na_values=[""])
    except (OSError, ValueError) as exc:
        problem = getattr(exc, "strerror", None) or str(exc)
        raise InputError.single(str(root), "", f"not a readable run directory: {problem}") from None
    steps_dir = root / "steps"
    kinds = sorted(p.name for p in steps_dir.iterdir() if p.is_dir()) if steps_dir.is_dir() else []
    return RunTables(summary, ops, layers, {kind: load_run(steps_dir / kind) for kind in kinds})
