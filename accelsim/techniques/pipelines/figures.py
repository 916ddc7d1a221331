"""The pipeline schedules' figure (``scripts/pipeline_sweep.py``): speedup over one
processor against the processor count, and LayerPipe over PipeDream, drawn from the
sweep's CSV in the shared look of :mod:`accelsim.report.figure` (matplotlib loads only
when it is drawn)."""

from __future__ import annotations

from pathlib import Path

from accelsim.report.figure import FigureSize, new_figure, save, styled, whole_number_ticks
from accelsim.report.means import geometric_mean
from accelsim.report.plots import csv_rows


def plot_pipeline_sweep(
    csv_path: Path,
    path: Path,
    title: str,
    fmt: str = "png",
    size: FigureSize = FigureSize.PAGE,
) -> None:
    """Geometric-mean speedup over one processor against P per schedule; LayerPipe over
    PipeDream per model and in geometric mean, with the LayerPipe paper's +25 % (mean)
    and +80 % (best, 7-9 processors) marked."""
    with styled():
        _pipeline_sweep(csv_rows(csv_path), path, title, fmt, size)


def _pipeline_sweep(
    rows: list[dict[str, str]], path: Path, title: str, fmt: str, size: FigureSize
) -> None:
    counts = sorted({int(r["processors"]) for r in rows})
    schedules = list(dict.fromkeys(r["schedule"] for r in rows))
    models = sorted({r["model"] for r in rows})
    speed = {(r["model"], int(r["processors"]), r["schedule"]): float(r["speedup"]) for r in rows}
    fig = new_figure(size, size.height_in(1) + 0.6)
    mean_ax, ratio_ax = fig.subplots(1, 2)
    fig.suptitle(title)
    gmean = geometric_mean
    for schedule in schedules:
        mean = [gmean([speed[(m, p, schedule)] for m in models]) for p in counts]
        mean_ax.plot(counts, mean, "o-", label=schedule)
    mean_ax.plot(counts, counts, ":", color="gray", label="linear")
    mean_ax.set_xlabel("processors")
    for ax in (mean_ax, ratio_ax):  # processor counts are whole numbers
        whole_number_ticks(ax)
    mean_ax.set_ylabel("geometric-mean speedup over one processor (x)")
    mean_ax.legend()
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
        ratio_ax.legend()
    save(fig, path, fmt)
