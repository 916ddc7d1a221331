"""``accelsim plot`` and :func:`accelsim.plot_sweep`: a figure of a sweep's stored
points, from its directory to the written file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from accelsim.report.figure import FigureSize
from accelsim.report.staging import staged_file
from accelsim.sweep import plots
from accelsim.sweep.collect import collect, open_store
from accelsim.sweep.plot_options import PlotKind, output_path, select
from accelsim.sweep.relabel import relabelled


def plot_sweep(
    directory: Path,
    kind: PlotKind,
    where: Sequence[tuple[str, Any]] = (),
    labels: Mapping[str, str] | None = None,
    *,
    by: str | None = None,
    baseline: tuple[str, Any] | None = None,
    x_key: str | None = None,
    y_key: str | None = None,
    size: FigureSize = FigureSize.PAGE,
    output: Path | None = None,
    fmt: str | None = None,
) -> Path:
    """Draw the ``kind`` figure of the finished points of the sweep in ``directory``
    that match ``where``, renamed by ``labels``; the file written (``output``, else
    ``directory/plots/<kind>.<fmt>``).

    Raises:
        InputError: for options that choose no point or name nothing, or points the
            figure cannot be drawn from.
        OutputError: when the file cannot be written.
    """
    path, chosen_fmt = output_path(directory, kind, output, fmt)
    with open_store(directory) as store:
        meta = store.meta()
    axes: list[str] = meta.get("axes", [])
    _, rows = collect(directory)
    chosen = select(rows, axes, where)
    name = str(meta.get("name", directory.name))
    figure = plots.Figure(kind, name, chosen, axes, where, baseline, x_key, by, size, y_key)
    figure = relabelled(figure, labels or {})
    with staged_file(path) as staged:
        plots.draw(figure, staged, chosen_fmt)
    return path
