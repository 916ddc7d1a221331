"""Approximate dropout's figure (``scripts/dropout_sweep.py``): speedup and energy
saving against the dropout rate, drawn from the sweep's CSV in the shared look of
:mod:`accelsim.report.figure` (matplotlib loads only when it is drawn)."""

from __future__ import annotations

from pathlib import Path

from accelsim.report.figure import FigureSize, new_figure, save, styled
from accelsim.report.plots import csv_rows


def plot_dropout_sweep(
    csv_path: Path,
    path: Path,
    title: str,
    fmt: str = "png",
    size: FigureSize = FigureSize.PAGE,
) -> None:
    """Approximate random dropout against the rate: speedup over conventional dropout
    (left, with the journal paper's ranges, 1.18-2.16x MLP and 1.24-1.85x LSTM, as
    bands) and energy saving (right), one line per model, pattern and batch."""
    with styled():
        _dropout_sweep(csv_rows(csv_path), path, title, fmt, size)


def _dropout_sweep(
    rows: list[dict[str, str]], path: Path, title: str, fmt: str, size: FigureSize
) -> None:
    fig = new_figure(size, size.height_in(1) + 0.8)
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
    energy_ax.set_ylabel("energy saving (%)")
    speed_ax.legend(fontsize="x-small", ncol=2)
    save(fig, path, fmt)
