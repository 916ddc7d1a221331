"""Grouped bar figures: speedups, a technique's speedup and energy saving, energy by
component (``accelsim plot`` and ``accelsim suite``).

Bars are grouped by one axis (the model, say), one bar per series (a combination
of the other axes) in each group, each colour one series; ratio panels end with
a geometric-mean group, named so.  A panel holds as many bars and groups as its
width shows legibly (:attr:`FigureSize.row_bars`, :attr:`FigureSize.row_groups`);
past that the groups are split over more panels, up to :data:`MAX_ROWS` a measure,
and past that the figure is refused with the axes to filter by, not drawn
illegibly (the stacked energy bars: :attr:`FigureSize.max_bars`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from accelsim.errors import InputError
from accelsim.report.figure import (
    ENERGY_COLOURS,
    FigureSize,
    energy_colour,
    fit_height,
    log_if_decades,
    new_figure,
    spans_decades,
    text_width,
    wrap,
)

MEAN_LABEL = "geometric mean"
"""The tick of the group of geometric means."""


@dataclass(frozen=True)
class Grouping:
    """How a bar figure lays out its values.

    Attributes:
        groups: The groups, in order, as tick labels.
        names: The series, in order, as legend entries.
        by_title: What the groups are (the x axis label).
        series_title: What the series are (the legend's title; empty for none).
    """

    groups: tuple[str, ...]
    names: tuple[str, ...]
    by_title: str
    series_title: str = ""


@dataclass(frozen=True)
class Panel:
    """One panel of bars: a value per (group, series), and what to draw with it.

    Attributes:
        ylabel: The y axis label, with its unit.
        values: ``(group, series) -> value``; a missing pair draws no bar.
        bounds: ``(group, series) -> bound`` drawn as a marker above the bar.
        mean: How the geometric-mean group combines a series' values (``None``: no
            such group).
        reference: A horizontal line (1 for a ratio, 0 for a saving).
        percent: Whether the values are fractions shown as percentages.
    """

    ylabel: str
    values: dict[tuple[str, str], float]
    bounds: dict[tuple[str, str], float]
    mean: Callable[[Sequence[float]], float] | None
    reference: float
    percent: bool = False


def check_bars(kind: str, count: int, size: FigureSize, axes: Sequence[str]) -> None:
    """Refuse a figure of ``kind`` with more than ``size.max_bars`` bars in a panel.

    Raises:
        InputError: saying how many bars there would be and which axes to filter on.
    """
    if count > size.max_bars:
        raise InputError.single(
            f"--kind {kind}",
            "",
            f"{count:,} bars are more than a {size.value}-wide figure shows legibly"
            f" ({size.max_bars}); keep fewer points with --where KEY=VALUE"
            f" (varying axes: {', '.join(axes)})",
        )


MAX_ROWS = 4
"""Panels a grouped bar figure splits each measure's groups over at most
(:attr:`FigureSize.row_bars` bars and :attr:`FigureSize.row_groups` groups each);
past that it is refused with the axes to filter by."""


def rows_of(groups: int, series: int, size: FigureSize) -> list[range]:
    """The groups of each panel, in order: as few panels as hold ``groups`` groups of
    ``series`` bars at ``size``, the groups dealt out evenly."""
    per_row = max(1, min(size.row_groups, size.row_bars // max(1, series)))
    count = math.ceil(groups / per_row)
    each = math.ceil(groups / count)
    return [range(i, min(i + each, groups)) for i in range(0, groups, each)]


def check_rows(kind: str, groups: int, series: int, size: FigureSize, axes: Sequence[str]) -> None:
    """Refuse a grouped bar figure of ``kind`` that needs more than :data:`MAX_ROWS`
    panels a measure, or more series than a panel holds bars.

    Raises:
        InputError: saying how many bars there would be and which axes to filter on.
    """
    panels = len(rows_of(groups, series, size))
    if panels > MAX_ROWS or series > size.row_bars:
        raise InputError.single(
            f"--kind {kind}",
            "",
            f"{groups * series:,} bars in {groups} groups of {series} are more than a"
            f" {size.value}-wide figure shows legibly ({MAX_ROWS} panels of at most"
            f" {size.row_bars} bars); keep fewer points with --where KEY=VALUE"
            f" (varying axes: {', '.join(axes)})",
        )


def draw_panels(layout: Grouping, panels: Sequence[Panel], size: FigureSize, title: str) -> Any:
    """A figure of ``panels`` stacked, sharing the groups; each bar coloured by its series.

    Each measure's groups are split over as many panels as :func:`rows_of` says, one
    under the other (one y scale per measure); the series and the bound marker are
    in one legend under the panels, in as many rows as its entries need at ``size``;
    the figure is as high as its panels, tick labels, title and legend need.
    """
    from matplotlib import colormaps

    with_mean = any(p.mean is not None for p in panels)
    ticks = [*layout.groups, MEAN_LABEL] if with_mean else list(layout.groups)
    rows = rows_of(len(ticks), len(layout.names), size)
    fig = new_figure(size, size.panel_in)
    axes = list(fig.subplots(len(panels) * len(rows), 1, squeeze=False)[:, 0])
    cmap = colormaps["tab10" if len(layout.names) <= 10 else "tab20"]
    widest = max(len(r) for r in rows)
    labels, rotation = _tick_labels(fig, ticks, size, widest)
    for c, chunk in enumerate(rows):
        for p, panel in enumerate(panels):
            ax = axes[c * len(panels) + p]
            if c:
                ax.sharey(axes[p])
            log = panel.reference == 1.0 and not panel.percent
            log = log and spans_decades(list(panel.values.values()))
            _bars(ax, panel, layout, [ticks[j] for j in chunk], cmap, log, first=ax is axes[0])
            ax.set_xlim(-0.5, widest - 0.5)
            ax.set_xticks(range(len(chunk)), [labels[j] for j in chunk], rotation=rotation)
            ax.tick_params(axis="x", labelbottom=p == len(panels) - 1)
    axes[-1].set_xlabel(layout.by_title)
    fig.suptitle(title)
    _legend(fig, axes[0], layout, size)
    fit_height(fig, axes, size.panel_in)
    return fig


def _bars(
    ax: Any, panel: Panel, layout: Grouping, ticks: Sequence[str], cmap: Any, log: bool,
    first: bool,
) -> None:  # fmt: skip
    """One panel's bars of the groups ``ticks`` (the mean group among them when its
    name is), each series a colour, its bounds marked; labelled for the legend when
    ``first``."""
    scale = 100.0 if panel.percent else 1.0
    if log:
        log_if_decades(ax, list(panel.values.values()))
    width = 0.8 / len(layout.names)
    base = 1.0 if log else 0.0
    for i, name in enumerate(layout.names):
        offset = (i - (len(layout.names) - 1) / 2) * width
        heights = [_value(panel, layout, g, name) for g in ticks]
        xs = [j + offset for j in range(len(ticks))]
        ax.bar(xs, [scale * h - base for h in heights], bottom=base, width=width,
               color=cmap(i % cmap.N), label=name if first else None)  # fmt: skip
        marks = [panel.bounds.get((g, name), math.nan) for g in ticks]
        if any(math.isfinite(b) for b in marks):
            ax.scatter(xs, [scale * b for b in marks], marker="_",
                       s=max(8.0, 120.0 * width), linewidths=1.2, color="black", zorder=3,
                       label="speedup bound" if first and i == 0 else None)  # fmt: skip
    ax.axhline(scale * panel.reference, color="black", linewidth=0.6)
    ax.set_ylabel(panel.ylabel)
    if MEAN_LABEL in ticks:
        ax.axvline(ticks.index(MEAN_LABEL) - 0.5, color="0.6", linewidth=0.6, linestyle=":")


def _value(panel: Panel, layout: Grouping, group: str, name: str) -> float:
    """The bar of ``name`` in ``group``: its value, or for the mean group the mean of
    its values (NaN: no bar)."""
    if group != MEAN_LABEL or panel.mean is None:
        return panel.values.get((group, name), math.nan)
    values = [panel.values.get((g, name), math.nan) for g in layout.groups]
    return panel.mean([v for v in values if math.isfinite(v)])


def _tick_labels(
    fig: Any, ticks: Sequence[str], size: FigureSize, per_panel: int
) -> tuple[list[str], int]:
    """The tick labels and their rotation: upright, each wrapped to its group's share of
    a panel's width, when every line fits it; else on end (90 degrees)."""
    spacing = 0.9 * (size.width_in - 0.8) / per_panel * fig.dpi
    chars = max(4, int(spacing / text_width(fig, "n")))
    upright = [wrap(tick, chars) for tick in ticks]
    widest = max(text_width(fig, line)
                 for tick in upright for line in tick.split("\n"))  # fmt: skip
    if widest <= spacing:
        return upright, 0
    return [wrap(tick, size.label_chars) for tick in ticks], 90


def _legend(fig: Any, ax: Any, layout: Grouping, size: FigureSize) -> None:
    """The series (and the bound marker) in one legend under the panels, in as many
    columns as fit the figure's width."""
    handles, labels = ax.get_legend_handles_labels()
    if not labels or (labels == list(layout.names) and len(labels) < 2 and not layout.series_title):
        return
    shown = [wrap(label, size.label_chars) for label in labels]
    renderer = fig.canvas.get_renderer()
    for columns in range(len(shown), 0, -1):
        legend = fig.legend(handles, shown, title=layout.series_title or None,
                            loc="outside lower center", ncols=columns, frameon=False)  # fmt: skip
        if columns == 1 or legend.get_window_extent(renderer).width <= 0.98 * fig.bbox.width:
            return
        legend.remove()


def energy_stacks(
    rows: Sequence[Mapping[str, Any]],
    ticks: Sequence[str],
    xlabel: str,
    size: FigureSize,
    title: str,
    step: str,
) -> Any:
    """Step energy per row stacked by component (mJ, from the rows' ``energy_pj`` and
    ``energy_<component>_pj``), one colour per component; when the totals span decades,
    the total on a log axis above each component's share instead."""
    present = {k for r in rows for k in r if k.startswith("energy_") and k.endswith("_pj")}
    components = [f"energy_{c}_pj" for c in ENERGY_COLOURS if f"energy_{c}_pj" in present]
    components += sorted(present - {"energy_pj", *components})
    totals = [float(r["energy_pj"]) / 1e9 for r in rows]
    split = spans_decades(totals)
    fig = new_figure(size, size.height_in(2 if split else 1))
    axes = fig.subplots(2 if split else 1, 1, sharex=True, squeeze=False)[:, 0]
    xs = range(len(rows))
    if split:
        axes[0].bar(xs, totals, color="0.35")
        log_if_decades(axes[0], totals)
        axes[0].set_ylabel(f"{step} energy (mJ)")
    stack = axes[-1]
    bottom = [0.0] * len(rows)
    for component in components:
        values = [float(r.get(component) or 0.0) / 1e9 for r in rows]
        if split:
            values = [100 * v / t if t > 0 else 0.0 for v, t in zip(values, totals, strict=True)]
        name = component.removeprefix("energy_").removesuffix("_pj")
        stack.bar(xs, values, bottom=bottom, color=energy_colour(name), label=name)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    stack.set_ylabel(f"share of {step} energy (%)" if split else f"{step} energy (mJ)")
    stack.set_xticks(xs, ticks, rotation=45 if len(rows) > 8 else 0,
                     ha="right" if len(rows) > 8 else "center")  # fmt: skip
    stack.set_xlabel(xlabel)
    handles, labels = stack.get_legend_handles_labels()
    stack.legend(handles[::-1], labels[::-1], loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(title)
    return fig
