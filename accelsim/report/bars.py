"""Grouped bar figures: speedups, a technique's speedup and energy saving, energy by
component (``accelsim plot`` and ``accelsim suite``).

Bars are grouped by one axis (the model, say), one bar per series (a combination
of the other axes) in each group, each colour one series; ratio panels end with
a geometric-mean group, named so.  A figure never draws more bars than its width
shows legibly (:attr:`FigureSize.max_bars`): past that it is refused with the
axes to filter by, not drawn illegibly.
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
    log_if_decades,
    new_figure,
    spans_decades,
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


def draw_panels(layout: Grouping, panels: Sequence[Panel], size: FigureSize, title: str) -> Any:
    """A figure of ``panels`` stacked, sharing the groups; each bar coloured by its series."""
    from matplotlib import colormaps

    with_mean = any(p.mean is not None for p in panels)
    ticks = [*layout.groups, MEAN_LABEL] if with_mean else list(layout.groups)
    count = len(ticks) * len(layout.names)
    fig = new_figure(size, size.height_in(len(panels)))
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    cmap = colormaps["tab10" if len(layout.names) <= 10 else "tab20"]
    width = 0.8 / len(layout.names)
    for ax, panel in zip(axes, panels, strict=True):
        scale = 100.0 if panel.percent else 1.0
        ratio = panel.reference == 1.0 and not panel.percent
        log = ratio and log_if_decades(ax, list(panel.values.values()))
        for i, name in enumerate(layout.names):
            offset = (i - (len(layout.names) - 1) / 2) * width
            heights = [panel.values.get((g, name), math.nan) for g in layout.groups]
            if panel.mean is not None:
                heights.append(panel.mean([h for h in heights if math.isfinite(h)]))
            xs = [j + offset for j in range(len(heights))]
            shown = [scale * h for h in heights]
            base = 1.0 if log else 0.0
            ax.bar(
                xs,
                [h - base for h in shown],
                bottom=base,
                width=width,
                color=cmap(i % cmap.N),
                label=name if ax is axes[0] else None,
            )
            marks = [panel.bounds.get((g, name), math.nan) for g in layout.groups]
            if any(math.isfinite(b) for b in marks):
                ax.scatter(
                    xs[: len(marks)],
                    [scale * b for b in marks],
                    marker="_",
                    s=max(8.0, 120.0 * width),
                    linewidths=1.2,
                    color="black",
                    zorder=3,
                    label="speedup bound" if i == 0 else None,
                )
        ax.axhline(scale * panel.reference, color="black", linewidth=0.6)
        ax.set_ylabel(panel.ylabel)
        if with_mean:
            ax.axvline(len(layout.groups) - 0.5, color="0.6", linewidth=0.6, linestyle=":")
    last = axes[-1]
    last.set_xticks(range(len(ticks)), ticks, rotation=45 if count > 12 else 0, ha="right"
                    if count > 12 else "center")  # fmt: skip
    last.set_xlabel(layout.by_title)
    _legend(axes[0], layout)
    fig.suptitle(title)
    return fig


def _legend(ax: Any, layout: Grouping) -> None:
    """The series (and the bound marker) in one legend above the panels."""
    handles, labels = ax.get_legend_handles_labels()
    if not labels or (labels == list(layout.names) and len(labels) < 2 and not layout.series_title):
        return
    ax.legend(
        handles,
        labels,
        title=layout.series_title or None,
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        ncols=min(len(labels), 6),
        frameon=False,
    )


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
