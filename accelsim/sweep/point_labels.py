"""Numbers beside the points of a scatter plot, placed clear of each other.

matplotlib is imported lazily.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def number_points(figure: Any, ax: Any, points: Sequence[tuple[float, float]]) -> None:
    """Number ``points`` 1, 2, ..., each number at the nearest of eight directions and
    six distances around its point where it stays inside the axes and overlaps no
    number placed before it (measured on the laid-out figure), else where it overlaps
    the fewest; a number placed away from its point gets a leader line."""
    from matplotlib.text import Text

    directions = [(1, 1), (1, -1), (-1, 1), (-1, -1), (1, 0), (-1, 0), (0, 1), (0, -1)]
    slots = [(d * 6 * ring, e * 6 * ring) for ring in range(1, 7) for d, e in directions]
    renderer = figure.canvas.get_renderer()
    figure.draw_without_rendering()
    frame = ax.get_window_extent(renderer)
    placed: list[Any] = []

    def number(n: int, point: tuple[float, float], slot: int) -> Any:
        dx, dy = slots[slot]
        note = ax.annotate(
            str(n),
            point,
            xytext=(dx, dy),
            textcoords="offset points",
            fontsize=6,
            ha="center",
            va="center",
            arrowprops={"arrowstyle": "-", "linewidth": 0.4, "color": "0.3"}
            if slot >= len(directions)
            else None,
        )
        note.update_positions(renderer)  # where it is drawn, before it is measured
        return note

    for n, point in enumerate(points, 1):
        costs = []
        for slot in range(len(slots)):
            note = number(n, point, slot)
            box = Text.get_window_extent(note, renderer)  # the number, not its leader
            note.remove()
            inside = frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1)
            cost = (0 if inside else len(points)) + sum(box.overlaps(o) for o in placed)
            if cost == 0:
                break
            costs.append((cost, slot))
        best = slot if cost == 0 else min(costs)[1]
        note = number(n, point, best)
        placed.append(Text.get_window_extent(note, renderer))
