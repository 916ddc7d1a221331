"""Figures of a sweep, drawn from its collected table (never by re-simulating): the
kind and the points :mod:`accelsim.sweep.plot_options` chose.

Units are ms, mJ, x and %; titles state what is drawn, the set-up of the points
drawn and the filters that chose them (:mod:`accelsim.sweep.labels`); there is
one y axis per panel, each meaning keeps one colour, data spanning decades get
a log axis, and figures are sized and typeset for print
(:mod:`accelsim.report.figure`).  The bar figures are in
:mod:`accelsim.report.bars`.  matplotlib is imported lazily.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from accelsim.errors import InputError
from accelsim.report import bars
from accelsim.report.figure import (
    FORMATS,
    FigureSize,
    log_if_decades,
    new_figure,
    save,
    spans_decades,
    styled,
)
from accelsim.report.means import geometric_mean, saving_mean
from accelsim.sweep import pareto
from accelsim.sweep.labels import Row, axis_title, title, value_text, values_text
from accelsim.sweep.plot_options import PlotKind, same_value
from accelsim.sweep.point_labels import number_points


def varying(rows: Sequence[Row], axes: Sequence[str]) -> list[str]:
    """The axes that take more than one value among ``rows``, less those that move in
    step with an earlier one (the later keys of a zip group)."""
    chosen: list[str] = []
    for axis in axes:
        values = {str(r.get(axis)) for r in rows}
        if len(values) < 2:
            continue
        if not any(_in_step(rows, a, axis) for a in chosen):
            chosen.append(axis)
    return chosen


def _in_step(rows: Sequence[Row], a: str, b: str) -> bool:
    """Whether axes ``a`` and ``b`` take their values one-to-one among ``rows``."""
    pairs = {(str(r.get(a)), str(r.get(b))) for r in rows}
    return len(pairs) == len({str(r.get(a)) for r in rows}) == len({str(r.get(b)) for r in rows})


def axis_name(rows: Sequence[Row], axes: Sequence[str], axis: str) -> str:
    """``axis`` and the axes that move in step with it, for an axis label."""
    same = [a for a in axes if a == axis or (len({str(r.get(a)) for r in rows}) > 1
                                             and _in_step(rows, axis, a))]  # fmt: skip
    return " = ".join(axis_title(a) for a in same)


def _ms(row: Row) -> float:
    return 1e3 * float(row["seconds"])


def _step(rows: Sequence[Row]) -> str:
    """What the points' time and energy columns measure: with a technique, the
    baseline step (the technique's own numbers are its speedup and saving)."""
    techniques = {r.get("techniques") for r in rows} - {None, "", "none"}
    return "baseline step" if techniques else "step"


def _technique(rows: Sequence[Row]) -> bool:
    """Whether every point reports a technique's speedup (the figure to show then)."""
    return all(r.get("speedup") is not None for r in rows)


@dataclass(frozen=True)
class Figure:
    """What ``accelsim plot`` draws: a kind, of which points, how.

    Attributes:
        kind: The figure.
        name: The sweep's name (the title's start).
        rows: The points drawn (already filtered by ``where``).
        axes: The sweep's axes.
        where: The ``--where`` filters that chose ``rows``, for the title.
        baseline: ``speedup``'s ``--baseline KEY=VALUE``.
        x_key: ``scaling``'s ``--x`` axis, ``pareto``'s ``--x`` metric.
        y_key: ``pareto``'s ``--y`` metric.
        by: The axis whose values group the bars (``--by``; default: the model).
        size: The printed width.
    """

    kind: PlotKind
    name: str
    rows: Sequence[Row]
    axes: Sequence[str]
    where: Sequence[tuple[str, Any]] = ()
    baseline: tuple[str, Any] | None = None
    x_key: str | None = None
    by: str | None = None
    size: FigureSize = FigureSize.PAGE
    y_key: str | None = None

    def title(self, what: str) -> str:
        """The title of this figure of ``what``."""
        return title(self.name, what, self.rows, self.where, self.size.title_chars)

    def varying(self) -> list[str]:
        """The axes that vary among the points drawn."""
        return varying(self.rows, self.axes)


@dataclass(frozen=True)
class _Layout:
    """The bars of a sweep: groups by the ``by`` axis, series by the ``series`` axes."""

    by: str
    series: tuple[str, ...]
    grouping: bars.Grouping

    def of(self, row: Row) -> tuple[str, str]:
        """The group and the series of ``row``."""
        return value_text(row.get(self.by)), values_text(row, self.series)


def _bar_layout(fig: Figure, exclude: Sequence[str] = ()) -> _Layout:
    """Groups by ``--by`` (default: the model, else the first varying axis), series by
    the other varying axes (``exclude`` first).

    Raises:
        InputError: for a ``--by`` that is not a varying axis.
    """
    keys = [a for a in fig.varying() if a not in exclude]
    if fig.by is not None:
        if fig.by not in keys:
            raise InputError.single(
                "--by", "", f"not a varying axis; they are: {', '.join(keys) or 'none'}", fig.by
            )
        by = fig.by
    else:
        by = next((a for a in ("model", "workload") if a in keys), keys[0] if keys else "")
    series = (*exclude, *(a for a in keys if a != by))
    groups = dict.fromkeys(value_text(r.get(by)) for r in fig.rows)
    names = dict.fromkeys(values_text(r, series) for r in fig.rows)
    titles = ", ".join(axis_title(a) for a in series)
    grouping = bars.Grouping(tuple(groups), tuple(names), axis_title(by), titles)
    return _Layout(by, series, grouping)


def plot_technique(fig: Figure) -> Any:
    """The paper figure of a technique: its whole-training speedup (x, each bar with its
    bound) and energy saving (%) per group, with the geometric mean of each series.

    Raises:
        InputError: when the points report no technique's speedup.
    """
    if not _technique(fig.rows):
        raise InputError.single(
            "--kind technique", "", "these points report no technique speedup (no technique ran)"
        )
    layout = _bar_layout(fig)
    panels = [_panel(fig.rows, layout, "speedup", "speedup (x)", "speedup_bound")]
    if all(r.get("energy_reduction") is not None for r in fig.rows):
        panels.append(_panel(fig.rows, layout, "energy_reduction", "energy saving (%)"))
    _check(fig, layout)
    what = "the technique's whole-training speedup" + (
        " and energy saving" if len(panels) == 2 else ""
    )
    return bars.draw_panels(layout.grouping, panels, fig.size, fig.title(what))


def _check(fig: Figure, layout: _Layout) -> None:
    """Refuse more bars than :func:`bars.check_rows` lets the figure hold."""
    groups, names = layout.grouping.groups, layout.grouping.names
    bars.check_rows(fig.kind.value, len(groups) + 1, len(names), fig.size, fig.varying())


def _panel(
    rows: Sequence[Row], layout: _Layout, key: str, ylabel: str, bound: str = ""
) -> bars.Panel:
    values: dict[tuple[str, str], float] = {}
    bounds: dict[tuple[str, str], float] = {}
    for r in rows:
        place = layout.of(r)
        values[place] = float(r[key])
        if bound and r.get(bound) is not None:
            bounds[place] = float(r[bound])
    if key == "energy_reduction":
        return bars.Panel(ylabel, values, bounds, saving_mean, 0.0, percent=True)
    return bars.Panel(ylabel, values, bounds, geometric_mean, 1.0)


def plot_speedup(fig: Figure) -> Any:
    """Speedup bars over ``baseline`` (the point with that axis value and the same other
    axes), grouped by ``--by``, a colour per compared value and combination of the other
    axes, with a geometric-mean group.  Without a baseline, the technique's own
    whole-training ``speedup`` per point, each bar with its bound.

    Raises:
        InputError: for a baseline that is not an axis value, or no speedup to plot.
    """
    if fig.baseline is None:
        if not _technique(fig.rows):
            raise InputError.single(
                "--baseline", "", "needed: these points report no technique speedup"
            )
        layout = _bar_layout(fig)
        panel = _panel(fig.rows, layout, "speedup", "speedup (x)", "speedup_bound")
        what = "the technique's whole-training speedup over the baseline"
    else:
        key, value = fig.baseline
        if key not in fig.axes:
            raise InputError.single("--baseline", key, f"not an axis; axes: {', '.join(fig.axes)}")
        others = [a for a in fig.varying() if a != key]
        base = {values_text(r, others): r for r in fig.rows if same_value(r.get(key), value)}
        if not base:
            raise InputError.single("--baseline", key, "no finished point has this value", value)
        compared = [r for r in fig.rows if not same_value(r.get(key), value)]
        layout = _bar_layout(replace(fig, rows=compared), exclude=(key,))
        values = {}
        for r in compared:
            match = base.get(values_text(r, others))
            if match is not None:
                values[layout.of(r)] = _ms(match) / _ms(r)
        panel = bars.Panel("speedup (x)", values, {}, geometric_mean, 1.0)
        what = f"{_step(fig.rows)} speedup over {axis_title(key)} = {value_text(value)}"
    _check(fig, layout)
    return bars.draw_panels(layout.grouping, [panel], fig.size, fig.title(what))


def plot_energy(fig: Figure) -> Any:
    """Step energy per point stacked by component (mJ)."""
    keys = fig.varying()
    bars.check_bars(fig.kind.value, len(fig.rows), fig.size, keys)
    step = _step(fig.rows)
    what = f"{step} energy by component"
    ticks = [values_text(r, keys) for r in fig.rows]
    xlabel = ", ".join(axis_title(k) for k in keys) or "point"
    return bars.energy_stacks(fig.rows, ticks, xlabel, fig.size, fig.title(what), step)


def plot_heatmap(fig: Figure) -> Any:
    """The technique's speedup (x, each cell with the bound it allows) when every point
    has one, else step time (ms), over the two axes that vary; a log colour scale when
    the values span decades.

    Raises:
        InputError: unless exactly two axes vary among the rows.
    """
    from matplotlib.colors import LogNorm

    rows = fig.rows
    keys = fig.varying()
    if len(keys) != 2:
        raise InputError.single(
            "--kind heatmap",
            "",
            "needs exactly two varying axes; fix the others with --where KEY=VALUE",
            keys,
        )
    y_key, x_key = keys
    xs = list(dict.fromkeys(value_text(r.get(x_key)) for r in rows))
    ys = list(dict.fromkeys(value_text(r.get(y_key)) for r in rows))
    column = {x: j for j, x in enumerate(xs)}
    line = {y: i for i, y in enumerate(ys)}
    technique = _technique(rows)
    grid = [[math.nan] * len(xs) for _ in ys]
    labels = [[""] * len(xs) for _ in ys]
    for r in rows:
        i, j = line[value_text(r.get(y_key))], column[value_text(r.get(x_key))]
        grid[i][j] = float(r["speedup"]) if technique else _ms(r)
        labels[i][j] = f"{grid[i][j]:.3g}"
        if technique and r.get("speedup_bound") is not None:
            labels[i][j] += f"\n(at most {float(r['speedup_bound']):.3g})"
    finite = [v for row in grid for v in row if math.isfinite(v)]
    log = spans_decades(finite)
    figure = new_figure(fig.size, min(9.0, max(2.6, 0.3 * len(ys) + 1.6)))
    ax = figure.subplots()
    image = ax.imshow(grid, cmap="viridis", aspect="auto", norm=LogNorm() if log else None)
    low, high = (
        (math.log(min(finite)), math.log(max(finite))) if log else (min(finite), max(finite))
    )
    if len(xs) * len(ys) <= 150:
        for i, values in enumerate(grid):
            for j, value in enumerate(values):
                if math.isfinite(value):
                    dark = (math.log(value) if log else value) < (low + high) / 2
                    ax.text(j, i, labels[i][j], ha="center", va="center", fontsize=6,
                            color="white" if dark else "black")  # fmt: skip
    ax.set_xticks(range(len(xs)), xs)
    ax.set_yticks(range(len(ys)), ys)
    ax.set_xlabel(axis_name(rows, fig.axes, x_key))
    ax.set_ylabel(axis_name(rows, fig.axes, y_key))
    label = "technique speedup (x)" if technique else f"{_step(rows)} time (ms)"
    figure.colorbar(image, ax=ax, label=label + (", log scale" if log else ""))
    figure.suptitle(fig.title("the technique's speedup" if technique else f"{_step(rows)} time"))
    return figure


PARETO_LABELS = 16
"""Pareto-optimal points a figure names at most (evenly spread along the front)."""


def plot_pareto(fig: Figure) -> Any:
    """Two metrics of every point (``--x``, ``--y``: :mod:`accelsim.sweep.pareto`; time
    and energy per sample by default), both minimised: the points no other beats in
    both marked and joined, numbered (the numbers placed clear of each other) and named
    by their varying axes in a key below the axes, the dominated points faint."""
    rows = fig.rows
    x_key, y_key = fig.x_key or pareto.SECONDS_PER_SAMPLE, fig.y_key or pareto.ENERGY_PER_SAMPLE
    xs = [pareto.metric(r, x_key, "--x") for r in rows]
    ys = [pareto.metric(r, y_key, "--y") for r in rows]
    (x_scale, x_label), (y_scale, y_label) = (
        pareto.axis_label(x_key, xs),
        pareto.axis_label(y_key, ys),
    )
    points = [(x_scale * x, y_scale * y) for x, y in zip(xs, ys, strict=True)]
    front = pareto.pareto_front(points)
    named = _spread(front, PARETO_LABELS)
    keys = fig.varying()
    key_lines = [f"{n}: {values_text(rows[i], keys)}" for n, i in enumerate(named, 1)]
    columns = 1 if fig.size is FigureSize.COLUMN else 2
    depth = math.ceil(len(key_lines) / columns) + 3
    figure = new_figure(fig.size, 3.2 + 0.13 * depth)
    ax, key_ax = figure.subplots(2, 1, height_ratios=(2.2, 0.13 * depth))
    on_front = set(front)
    faint = [p for i, p in enumerate(points) if i not in on_front]
    ax.scatter([p[0] for p in faint], [p[1] for p in faint], color="0.6", alpha=0.5,
               s=6 if len(rows) > 500 else 12, linewidths=0, label="dominated point",
               rasterized=len(rows) > 2000)  # fmt: skip
    ax.plot([points[i][0] for i in front], [points[i][1] for i in front], color="tab:red",
            marker="o", markersize=3, linewidth=1, label="Pareto front")  # fmt: skip
    log_if_decades(ax, [p[0] for p in points], "x")
    log_if_decades(ax, [p[1] for p in points], "y")
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.legend(loc="best")
    number_points(figure, ax, [points[i] for i in named])
    key_ax.axis("off")
    header = f"Pareto-optimal points ({len(front)} of {len(rows)})" + (
        f":\n{', '.join(axis_title(k) for k in keys)}" if keys else ""
    )
    if len(named) < len(front):
        header += f"; {len(named)} of {len(front)} named"
    rows_of_key = depth - 1
    for c in range(columns):
        chunk = key_lines[c * rows_of_key : (c + 1) * rows_of_key]
        text = "\n".join(([header] if c == 0 else [""]) + chunk)
        note = key_ax.text(c / columns, 1.0, text, fontsize=6, va="top", ha="left",
                           transform=key_ax.transAxes, wrap=True)  # fmt: skip
        note.set_in_layout(False)
    figure.suptitle(fig.title(f"{y_label.split(' (')[0]} against {x_label.split(' (')[0]}"))
    return figure


def _spread(items: Sequence[int], count: int) -> list[int]:
    """At most ``count`` of ``items``, evenly spread, first and last included."""
    if len(items) <= count:
        return list(items)
    return [items[round(k * (len(items) - 1) / (count - 1))] for k in range(count)]


MAX_LINES = 20
"""Lines a scaling figure draws at most (beyond that, filter with ``--where``)."""


def plot_scaling(fig: Figure) -> Any:
    """Speedup along a numeric axis, one labelled line per combination of the other
    varying axes: the technique's own speedup when every point reports one (a
    pipeline's over one processor, say; dotted beside it, the bound it allows),
    else the step time's over the axis's smallest value.

    Raises:
        InputError: when no numeric axis varies (or ``x_key`` is not one), or for more
            lines than :data:`MAX_LINES`.
    """
    rows = fig.rows
    keys = fig.varying()
    numeric = [
        a
        for a in keys
        if all(isinstance(r.get(a), int | float) and not isinstance(r.get(a), bool) for r in rows)
    ]
    key = fig.x_key or (numeric[0] if numeric else None)
    if key is None or key not in numeric:
        raise InputError.single("--x", "", "needs a numeric axis that varies", numeric)
    others = [a for a in keys if a != key]
    lines: dict[str, list[Row]] = {}
    for r in rows:
        lines.setdefault(values_text(r, others), []).append(r)
    if len(lines) > MAX_LINES:
        raise InputError.single(
            "--kind scaling",
            "",
            f"{len(lines):,} lines are more than a figure shows legibly ({MAX_LINES}); keep"
            f" fewer points with --where KEY=VALUE (other varying axes: {', '.join(others)})",
        )
    technique = _technique(rows)
    figure = new_figure(fig.size, 3.2)
    ax = figure.subplots()
    from matplotlib import colormaps

    cmap = colormaps["tab10" if len(lines) <= 10 else "tab20"]
    drawn: list[float] = []
    for n, (name, members) in enumerate(lines.items()):
        members = sorted(members, key=lambda r: float(r[key]))
        first = _ms(members[0])
        xs = [float(r[key]) for r in members]
        ys = [float(r["speedup"]) if technique else first / _ms(r) for r in members]
        drawn += ys
        ax.plot(xs, ys, marker="o", markersize=3, color=cmap(n % cmap.N),
                label=name if others else None)  # fmt: skip
        if technique and all(r.get("speedup_bound") is not None for r in members):
            ax.plot(xs, [float(r["speedup_bound"]) for r in members], linestyle=":",
                    color=cmap(n % cmap.N))  # fmt: skip
    log_if_decades(ax, [float(r[key]) for r in rows], "x")
    log_if_decades(ax, drawn, "y")
    if all(isinstance(r[key], int) for r in rows) and ax.get_xscale() == "linear":
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(axis_name(rows, fig.axes, key))
    ylabel = "technique speedup (x)" if technique else f"speedup over the smallest {key} (x)"
    ax.set_ylabel(ylabel + (", dotted: its bound" if technique else ""))
    if others:
        ax.legend(title=", ".join(axis_title(a) for a in others), loc="upper left",
                  bbox_to_anchor=(1.0, 1.0))  # fmt: skip
    figure.suptitle(fig.title("scaling along " + axis_title(key)))
    return figure


MAKERS: dict[PlotKind, Callable[[Figure], Any]] = {
    PlotKind.SPEEDUP: plot_speedup,
    PlotKind.TECHNIQUE: plot_technique,
    PlotKind.ENERGY: plot_energy,
    PlotKind.HEATMAP: plot_heatmap,
    PlotKind.PARETO: plot_pareto,
    PlotKind.SCALING: plot_scaling,
}


def draw(fig: Figure, path: Path, fmt: str = FORMATS[0]) -> None:
    """Draw ``fig`` into ``path`` in format ``fmt`` (whatever ``path``'s suffix).

    Raises:
        InputError: when the figure cannot be drawn from these points (see each kind).
    """
    with styled():
        figure = MAKERS[fig.kind](fig)
    save(figure, path, fmt)
