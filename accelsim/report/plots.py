"""Figures, drawn from result files only (never by re-simulating).

The only module that imports matplotlib, lazily and through the object-oriented
API with the Agg canvas, so plotting needs no display and touches no global
pyplot state.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _save(fig: Figure, png_path: Path, dpi: int) -> None:
    """Write ``fig`` to ``png_path`` as a PNG of ``dpi`` dots per inch, drawn once.

    The same file as ``fig.savefig(png_path, dpi=dpi)``, which with a layout
    engine draws the figure twice (once only to lay it out, then to render it);
    the canvas's own ``print_png`` lays out and renders in one draw, and writes
    the pixels as ``savefig`` does (``tests/test_plots.py``).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    fig.set_dpi(dpi)
    canvas.print_png(png_path)


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


def plot_suite(csv_path: Path, png_path: Path, title: str) -> None:
    """Per model of a ``suite.csv``: step time, step energy and its breakdown by component."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with csv_path.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    models = [r["model"] for r in rows]
    components = [c for c in rows[0] if c.startswith("energy_") and c != "energy_pj"]
    fig = Figure(figsize=(max(8.0, 0.6 * len(models) + 4), 9), layout="constrained")
    FigureCanvasAgg(fig)
    time_ax, energy_ax, share_ax = fig.subplots(3, 1, sharex=True)
    fig.suptitle(title)
    time_ax.bar(models, [float(r["seconds"]) * 1e3 for r in rows], color="tab:blue")
    time_ax.set_ylabel("step time (ms)")
    time_ax.set_yscale("log")
    energy_ax.bar(models, [float(r["energy_pj"]) / 1e9 for r in rows], color="tab:orange")
    energy_ax.set_ylabel("step energy (mJ)")
    energy_ax.set_yscale("log")
    bottom = [0.0] * len(rows)
    for component in components:
        share = [100 * float(r[component]) / float(r["energy_pj"]) for r in rows]
        label = component.removeprefix("energy_").removesuffix("_pj")
        share_ax.bar(models, share, bottom=bottom, label=label)
        bottom = [b + v for b, v in zip(bottom, share, strict=True)]
    share_ax.set_ylabel("energy share (%)")
    share_ax.set_ylim(0, 100)
    share_ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    share_ax.tick_params(axis="x", labelrotation=45)
    _save(fig, png_path, dpi=110)


def plot_speedup(csv_path: Path, png_path: Path, title: str) -> None:
    """Speedup (and energy reduction, when reported) per model of a technique's ``suite.csv``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with csv_path.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    models = [r["model"] for r in rows]
    panels = [("speedup", "speedup (x)", 1.0, "tab:green", 1.0)]
    if rows[0].get("energy_reduction"):
        panels.append(("energy_reduction", "energy reduction (%)", 100.0, "tab:purple", 0.0))
    fig = Figure(figsize=(max(8.0, 0.6 * len(models) + 4), 3 * len(panels)), layout="constrained")
    FigureCanvasAgg(fig)
    fig.suptitle(title)
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (key, label, scale, colour, baseline) in zip(axes, panels, strict=True):
        values = [scale * float(r[key]) for r in rows]
        mean = sum(values) / len(values)
        ax.bar(models, values, color=colour)
        ax.axhline(baseline, color="black", linewidth=0.8)
        ax.axhline(mean, color=colour, linestyle="--", label=f"mean {mean:.2f}")
        ax.set_ylabel(label)
        ax.legend(fontsize="small")
    axes[-1].tick_params(axis="x", labelrotation=45)
    _save(fig, png_path, dpi=110)


def plot_sensitivity(csv_path: Path, png_path: Path, title: str) -> None:
    """Suite-mean speedup and energy reduction along each swept axis of a sensitivity CSV."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with csv_path.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    axes = list(dict.fromkeys(r["axis"] for r in rows))
    fig = Figure(figsize=(5 * len(axes), 4), layout="constrained")
    FigureCanvasAgg(fig)
    fig.suptitle(title)
    for ax, axis in zip(fig.subplots(1, len(axes), squeeze=False)[0], axes, strict=True):
        points = [r for r in rows if r["axis"] == axis]
        x = [float(r["value"]) for r in points]
        ax.plot(
            x, [float(r["speedup"]) for r in points], "o-", color="tab:green", label="speedup (x)"
        )
        ax.set_xlabel(axis.replace("_", " "))
        ax.set_ylabel("suite-mean speedup (x)")
        ax.axhline(1.0, color="black", linewidth=0.8)
        twin = ax.twinx()
        twin.plot(
            x,
            [100 * float(r["energy_reduction"]) for r in points],
            "s--",
            color="tab:purple",
            label="energy reduction (%)",
        )
        twin.set_ylabel("suite-mean energy reduction (%)")
        ax.legend(loc="upper left", fontsize="small")
        twin.legend(loc="lower right", fontsize="small")
    _save(fig, png_path, dpi=110)


PHASE_COLOURS = {
    "fwd": "tab:blue",
    "bwd_input": "tab:orange",
    "bwd_weight": "tab:red",
    "update": "tab:green",
    "comm": "tab:gray",
    "aux": "tab:purple",
}


def plot_gantt(ops_csv: Path, png_path: Path, title: str) -> None:
    """Timeline of every op: one row per processor and unit, coloured by phase."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    with ops_csv.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    lanes = sorted({(int(r["processor"]), r["unit"]) for r in rows})
    lane_of = {lane: i for i, lane in enumerate(lanes)}
    bars: dict[tuple[int, str], list[tuple[int, int]]] = {}
    for r in rows:
        start, end = int(r["start_cycle"]), int(r["end_cycle"])
        if end > start:
            bars.setdefault((lane_of[(int(r["processor"]), r["unit"])], r["phase"]), []).append(
                (start, end - start)
            )
    fig = Figure(figsize=(12, 1.0 + 0.45 * len(lanes)), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    for (lane, phase), spans in bars.items():
        ax.broken_barh(spans, (lane - 0.4, 0.8), facecolors=PHASE_COLOURS.get(phase, "black"))
    ax.set_yticks(range(len(lanes)), [f"P{p} {unit}" for p, unit in lanes])
    ax.invert_yaxis()
    ax.set_xlabel("cycle")
    ax.set_title(title)
    phases = sorted({phase for _, phase in bars})
    ax.legend(
        handles=[Patch(color=PHASE_COLOURS.get(p, "black"), label=p) for p in phases],
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
        fontsize="small",
    )
    _save(fig, png_path, dpi=110)


def plot_pipeline_sweep(csv_path: Path, png_path: Path, title: str) -> None:
    """Geometric-mean speedup over one processor against P per schedule; LayerPipe over
    PipeDream per model and in geometric mean, with the LayerPipe paper's +25 % (mean)
    and +80 % (best, 7-9 processors) marked."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with csv_path.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    counts = sorted({int(r["processors"]) for r in rows})
    schedules = list(dict.fromkeys(r["schedule"] for r in rows))
    models = sorted({r["model"] for r in rows})
    speed = {(r["model"], int(r["processors"]), r["schedule"]): float(r["speedup"]) for r in rows}
    fig = Figure(figsize=(11, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    mean_ax, ratio_ax = fig.subplots(1, 2)
    fig.suptitle(title)

    def gmean(values: list[float]) -> float:
        return math.exp(sum(math.log(v) for v in values) / len(values))

    for schedule in schedules:
        mean = [gmean([speed[(m, p, schedule)] for m in models]) for p in counts]
        mean_ax.plot(counts, mean, "o-", label=schedule)
    mean_ax.plot(counts, counts, ":", color="gray", label="linear")
    mean_ax.set_xlabel("processors")
    mean_ax.set_ylabel("geometric-mean speedup over one processor (x)")
    mean_ax.legend(fontsize="small")
    if {"layerpipe", "pipedream"} <= set(schedules):
        for model in models:
            ratio_ax.plot(
                counts,
                [speed[(model, p, "layerpipe")] / speed[(model, p, "pipedream")] for p in counts],
                color="tab:gray",
                alpha=0.3,
            )
        mean_ratio = [
            gmean([speed[(m, p, "layerpipe")] / speed[(m, p, "pipedream")] for m in models])
            for p in counts
        ]
        ratio_ax.plot(counts, mean_ratio, "o-", color="tab:red", label="geometric mean")
        ratio_ax.axhline(1.0, color="black", linewidth=0.8)
        ratio_ax.axhline(1.25, color="tab:blue", linestyle="--", label="paper: +25 % mean")
        ratio_ax.axhline(1.80, color="tab:purple", linestyle=":", label="paper: +80 % at 7-9")
        ratio_ax.set_xlabel("processors")
        ratio_ax.set_ylabel("LayerPipe speedup / PipeDream speedup")
        ratio_ax.legend(fontsize="small")
    _save(fig, png_path, dpi=110)


def plot_dropout_sweep(csv_path: Path, png_path: Path, title: str) -> None:
    """Approximate random dropout against the rate: speedup over conventional dropout
    (left, with the journal paper's ranges, 1.18-2.16x MLP and 1.24-1.85x LSTM, as
    bands) and energy reduction (right), one line per model, pattern and batch."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with csv_path.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    fig = Figure(figsize=(11, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    speed_ax, energy_ax = fig.subplots(1, 2)
    fig.suptitle(title)
    for lo, hi, label, colour in (
        (1.18, 2.16, "paper MLP", "C0"),
        (1.24, 1.85, "paper LSTM", "C1"),
    ):
        speed_ax.axhspan(lo, hi, color=colour, alpha=0.08, label=label)
    groups = list(dict.fromkeys((r["model"], r["batch"]) for r in rows))
    lines = dict.fromkeys((r["model"], r["pattern"], r["batch"]) for r in rows)
    for model, pattern, batch in lines:
        key = (model, pattern, batch)
        mine = sorted(
            (r for r in rows if (r["model"], r["pattern"], r["batch"]) == key),
            key=lambda r: float(r["rate"]),
        )
        rates = [float(r["rate"]) for r in mine]
        look = {
            "color": f"C{(groups.index((model, batch)) + 2) % 10}",
            "linestyle": {"element": ":", "row": "-", "tile": "--"}.get(pattern, "-."),
            "marker": {"row": "o", "tile": "s"}.get(pattern, ""),
            "label": f"{model} {pattern} batch {batch}",
        }
        speed_ax.plot(rates, [float(r["speedup"]) for r in mine], **look)
        energy_ax.plot(rates, [100 * float(r["energy_reduction"]) for r in mine], **look)
    speed_ax.set_xlabel("dropout rate")
    speed_ax.set_ylabel("speedup over conventional dropout (x)")
    energy_ax.set_xlabel("dropout rate")
    energy_ax.set_ylabel("energy reduction (%)")
    speed_ax.legend(fontsize="x-small", ncol=2)
    _save(fig, png_path, dpi=120)
