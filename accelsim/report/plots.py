"""Figures of runs, suites and the experiment scripts, drawn from result files only
(never by re-simulating).

Every figure is made and saved with the shared look of :mod:`accelsim.report.figure`
(print sizes, embedded fonts, one colour per energy component and per phase) in
``png``, ``pdf`` or ``svg``.  matplotlib is imported lazily, through the
object-oriented API with the Agg canvas, so plotting needs no display and touches
no global pyplot state.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

import numpy as np

from accelsim.report.bars import Grouping, Panel, draw_panels
from accelsim.report.figure import (
    PHASE_COLOURS,
    FigureSize,
    energy_colour,
    log_if_decades,
    new_figure,
    save,
    styled,
)
from accelsim.report.means import geometric_mean, saving_mean
from accelsim.report.tables import STANDS_FOR_COLUMN


def csv_rows(csv_path: Path) -> list[dict[str, str]]:
    """The rows of a result CSV file, each a dict by column (lines starting with ``#``
    before the header, comments saying how the file was made, skipped)."""
    with csv_path.open(encoding="utf-8") as handle:
        lines = list(handle)
    start = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    return list(csv.DictReader(lines[start:]))


def warm_up() -> None:
    """Draw a small figure with a log axis and a title, to nowhere: loads matplotlib,
    its fonts and its text caches (what :mod:`accelsim.report.plot_worker`'s child
    does while the parent simulates)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2, 2), layout="constrained")
    ax = fig.subplots()
    ax.bar(["a", "b"], [1.0, 100.0])
    ax.set_yscale("log")
    ax.set_ylabel("warm-up")
    fig.suptitle("warm-up")
    FigureCanvasAgg(fig).print_png(io.BytesIO())


def plot_suite(
    csv_path: Path,
    path: Path,
    title: str,
    fmt: str = "png",
    size: FigureSize = FigureSize.PAGE,
) -> None:
    """Per model of a ``suite.csv``: step time, step energy (each on a log axis when it
    spans decades) and each energy component's share."""
    rows = csv_rows(csv_path)
    models = [r["model"] for r in rows]
    components = [
        c for c in rows[0] if c.startswith("energy_") and c.endswith("_pj") and c != "energy_pj"
    ]
    with styled():
        fig = new_figure(size, size.height_in(3))
        time_ax, energy_ax, share_ax = fig.subplots(3, 1, sharex=True)
        fig.suptitle(title)
        times = [float(r["seconds"]) * 1e3 for r in rows]
        time_ax.bar(models, times, color="0.35")
        time_ax.set_ylabel("step time (ms)")
        log_if_decades(time_ax, times)
        energies = [float(r["energy_pj"]) / 1e9 for r in rows]
        energy_ax.bar(models, energies, color="0.55")
        energy_ax.set_ylabel("step energy (mJ)")
        log_if_decades(energy_ax, energies)
        bottom = [0.0] * len(rows)
        for component in components:
            share = [100 * float(r[component]) / float(r["energy_pj"]) for r in rows]
            label = component.removeprefix("energy_").removesuffix("_pj")
            share_ax.bar(models, share, bottom=bottom, label=label, color=energy_colour(label))
            bottom = [b + v for b, v in zip(bottom, share, strict=True)]
        share_ax.set_ylabel("energy share (%)")
        share_ax.set_ylim(0, 100)
        handles, labels = share_ax.get_legend_handles_labels()
        share_ax.legend(handles[::-1], labels[::-1], loc="upper left", bbox_to_anchor=(1.0, 1.0))
        if len(models) > 8:
            share_ax.tick_params(axis="x", labelrotation=45)
            for label in share_ax.get_xticklabels():
                label.set_horizontalalignment("right")
    save(fig, path, fmt)


def plot_speedup(
    csv_path: Path,
    path: Path,
    title: str,
    fmt: str = "png",
    size: FigureSize = FigureSize.PAGE,
) -> None:
    """Per model of a technique's ``suite.csv``: the whole-training speedup (x, each bar
    with its bound) and, when reported, the energy saving (%), each ending with the
    geometric mean over the models (the saving's: of the energy ratios)."""
    rows = csv_rows(csv_path)
    models = tuple(r["model"] for r in rows)
    layout = Grouping(models, ("",), "model")
    speedup = {(r["model"], ""): float(r["speedup"]) for r in rows}
    bounds = {(r["model"], ""): float(r["speedup_bound"]) for r in rows if r.get("speedup_bound")}
    panels = [Panel("speedup (x)", speedup, bounds, geometric_mean, 1.0)]
    if rows[0].get("energy_reduction"):
        saving = {(r["model"], ""): float(r["energy_reduction"]) for r in rows}
        panels.append(Panel("energy saving (%)", saving, {}, saving_mean, 0.0, percent=True))
    with styled():
        fig = draw_panels(layout, panels, size, title)
    save(fig, path, fmt)


def plot_sensitivity(
    csv_path: Path,
    path: Path,
    title: str,
    fmt: str = "png",
    size: FigureSize = FigureSize.PAGE,
) -> None:
    """The suite's geometric-mean speedup and energy saving along each swept axis of a
    sensitivity CSV (its ``speedup`` and ``energy_reduction`` columns)."""
    with styled():
        _sensitivity(csv_rows(csv_path), path, title, fmt, size)


def _sensitivity(
    rows: list[dict[str, str]], path: Path, title: str, fmt: str, size: FigureSize
) -> None:
    axes = list(dict.fromkeys(r["axis"] for r in rows))
    fig = new_figure(size, size.height_in(1) + 0.4)
    fig.suptitle(title)
    for ax, axis in zip(fig.subplots(1, len(axes), squeeze=False)[0], axes, strict=True):
        points = [r for r in rows if r["axis"] == axis]
        x = [float(r["value"]) for r in points]
        ax.plot(
            x, [float(r["speedup"]) for r in points], "o-", color="tab:green", label="speedup (x)"
        )
        ax.set_xlabel(axis.replace("_", " "))
        ax.set_ylabel("geometric-mean speedup (x)")
        ax.axhline(1.0, color="black", linewidth=0.8)
        twin = ax.twinx()
        twin.plot(
            x,
            [100 * float(r["energy_reduction"]) for r in points],
            "s--",
            color="tab:purple",
            label="energy saving (%)",
        )
        twin.set_ylabel("geometric-mean energy saving (%)")
        ax.legend(loc="upper left")
        twin.legend(loc="lower right")
    save(fig, path, fmt)


def plot_gantt(
    ops_csv: Path,
    path: Path,
    title: str,
    dram_bytes_per_cycle: float,
    channels: int = 1,
    fmt: str = "png",
) -> None:
    """Timeline of every op: one row per processor and unit coloured by phase, and a row
    per DRAM channel with the share of its bandwidth the running ops demand.

    An op's DRAM bytes are spread evenly over its span (ops.csv records bytes, not
    when each transfer ran), so the DRAM row shows demand: above 100 % the ops on the
    channel wanted more than its bandwidth and waited.  ``channels`` is 1 for a shared
    channel, else the processor count (``dram.sharing: per_processor``): a row each,
    but for a step whose replica stood for every processor (``ops.csv``'s
    ``stands_for``), whose processor 0 alone gets one.
    """
    from matplotlib.patches import Patch

    rows = csv_rows(ops_csv)
    lanes = sorted({(int(r["processor"]), r["unit"]) for r in rows})
    lane_of = {lane: i for i, lane in enumerate(lanes)}
    bars: dict[tuple[int, str], list[tuple[int, int]]] = {}
    for r in rows:
        start, end = int(r["start_cycle"]), int(r["end_cycle"])
        if end > start:
            bars.setdefault((lane_of[(int(r["processor"]), r["unit"])], r["phase"]), []).append(
                (start, end - start)
            )
    once = bool(rows) and STANDS_FOR_COLUMN in rows[0]
    listed = [0] if once or channels == 1 else list(range(channels))
    edges, every = dram_demand(rows, channels)
    demand = edges, [every[c] for c in listed]
    names = [f"P{p} {unit}" for p, unit in lanes]
    names += ["DRAM" if channels == 1 else f"P{c} DRAM" for c in listed]
    with styled():
        fig = new_figure(FigureSize.PAGE, 1.0 + 0.3 * len(names))
        ax = fig.subplots()
        for (lane, phase), spans in bars.items():
            ax.broken_barh(spans, (lane - 0.4, 0.8), facecolors=PHASE_COLOURS.get(phase, "black"))
        edges, used = demand
        ideal = not math.isfinite(dram_bytes_per_cycle)
        # Ideal DRAM has no bandwidth to compare with: its busiest bin is the 100 %.
        widths = np.diff(edges)
        full = max((float((u / widths).max(initial=0.0)) for u in used), default=0.0) or 1.0
        rate = full if ideal else dram_bytes_per_cycle
        peak = 1.0
        for c, share in enumerate(used):
            lane = len(lanes) + c
            fraction = share / (rate * widths)
            peak = max(peak, float(fraction.max(initial=0.0)))
            ax.stairs(
                lane + 0.4 - 0.8 * np.minimum(fraction, 1.0),
                edges,
                baseline=lane + 0.4,
                fill=True,
                color=energy_colour("dram"),
            )
            ax.axhline(lane - 0.4, color="0.8", linewidth=0.4)
        ax.set_yticks(range(len(names)), names)
        ax.set_ylim(len(names) - 0.5, -0.5)
        _cycle_axis(ax, float(edges[-1]))
        ax.set_title(title)
        phases = sorted({phase for _, phase in bars})
        dram = (
            f"DRAM demand (ideal DRAM: 100 % = its peak, {rate:,.0f} B/cycle)"
            if ideal
            else f"DRAM demand (100 % = {rate:g} B/cycle; peak {100 * peak:.0f} %)"
        )
        fig.legend(
            handles=[
                *(Patch(color=PHASE_COLOURS.get(p, "black"), label=p) for p in phases),
                Patch(color=energy_colour("dram"), label=dram),
            ],
            loc="outside lower center",
            ncols=len(phases) + 1,
            frameon=False,
        )
    save(fig, path, fmt)


def _cycle_axis(ax: Any, last_cycle: float) -> None:
    """Label the x axis in cycles, or in millions of cycles for a long step (no ``1e7``
    offset in a corner)."""
    from matplotlib.ticker import FuncFormatter

    if last_cycle < 1e6:
        ax.set_xlabel("cycle")
        return
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value / 1e6:g}"))
    ax.set_xlabel("million cycles")


GANTT_BINS = 600
"""Time bins of a Gantt chart's DRAM rows."""


def dram_demand(rows: list[dict[str, str]], channels: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Bin edges (cycles) and, per DRAM channel, the bytes the ops demand in each bin,
    each op's DRAM bytes spread evenly over its span (one channel: every op's; else
    each processor's own)."""
    start = np.array([int(r["start_cycle"]) for r in rows], np.float64)
    end = np.array([int(r["end_cycle"]) for r in rows], np.float64)
    moved = np.array(
        [sum(float(v) for k, v in r.items() if k.startswith("dram_") and v) for r in rows]
    )
    processor = np.array([int(r["processor"]) for r in rows])
    total = float(end.max(initial=1.0))
    edges = np.linspace(0.0, total, GANTT_BINS + 1)
    used = []
    for channel in range(channels):
        mine = (end > start) & (moved > 0) & ((processor == channel) | (channels == 1))
        used.append(np.diff(_cumulative(start[mine], end[mine], moved[mine], edges)))
    return edges, used


def _cumulative(
    start: np.ndarray, end: np.ndarray, moved: np.ndarray, at: np.ndarray
) -> np.ndarray:
    """Bytes moved by time ``at``, each op moving its bytes at a constant rate over its span:
    a piecewise-linear sum, from the rate changes at every start and end."""
    rate = moved / (end - start)
    times = np.concatenate([start, end])
    order = np.argsort(times, kind="stable")
    times = times[order]
    slope = np.cumsum(np.concatenate([rate, -rate])[order])
    done = np.concatenate([[0.0], np.cumsum(slope[:-1] * np.diff(times))])
    return (
        np.interp(at, times, done, left=0.0, right=float(moved.sum()))
        if len(times)
        else (np.zeros_like(at))
    )
