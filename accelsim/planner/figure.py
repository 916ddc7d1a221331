"""The plan search's Pareto figure: step time against memory per chip of every plan
simulated, the plans no other is both faster and smaller than joined and marked, and
the plans pruned unsimulated at their step's lower bound (their step is no less)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

from accelsim.mapping.memory import MemoryBreakdown
from accelsim.planner.result import Evaluated, front
from accelsim.report.figure import FigureSize, new_figure, save, styled

FIGURE_NAME = "plans_pareto.png"
"""The figure's file name, beside the search's store."""

GIB = 2**30


def plot_plans(
    plans: Sequence[Evaluated],
    chosen: Evaluated,
    path: Path,
    pruned: Sequence[tuple[MemoryBreakdown, float]] = (),
) -> None:
    """Draw ``plans`` (step seconds against GiB per chip), the front joined, ``chosen``
    (the fastest) marked, its plan the title, and the ``pruned`` plans (each its memory
    and its bound's seconds) hollow at their bound."""
    on_front = front(plans)
    with styled():
        fig = new_figure(FigureSize.COLUMN, 2.8)
        ax = fig.add_subplot()
        if pruned:
            ax.scatter(
                [memory.total_bytes / GIB for memory, _ in pruned],
                [seconds for _, seconds in pruned],
                s=12,
                facecolors="none",
                edgecolors="tab:gray",
                linewidths=0.5,
                label="pruned, at their bound",
            )
        xs = [e.memory_bytes / GIB for e in plans]
        ys = [e.step_seconds for e in plans]
        ax.scatter(xs, ys, s=12, color="tab:gray", label="plans that fit")
        best = sorted(on_front, key=lambda i: xs[i])
        ax.plot(
            [xs[i] for i in best],
            [ys[i] for i in best],
            marker="o",
            markersize=4,
            color="tab:red",
            label="Pareto front",
        )
        ax.annotate(
            "fastest",
            (chosen.memory_bytes / GIB, chosen.step_seconds),
            xytext=(0, 6),
            textcoords="offset points",
            ha="center",
        )
        # The plan's label, wrapped at its commas, above the axes: beside the point a
        # long label ran out of the figure.
        ax.set_title(textwrap.fill(chosen.candidate.label.replace(",", ", "), 48), fontsize=8)
        ax.set_xlabel("memory per chip (GiB)")
        ax.set_ylabel("step time (s)")
        ax.legend()
        save(fig, path, "png")
