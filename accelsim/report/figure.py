"""The look every figure shares: print sizes, fonts, colours, axis scales, saving.

Figures are made for papers: a ``column`` (3.5 in) or ``page`` (7.16 in) wide
figure, the widths of a two-column IEEE or ACM page, with fonts of 7 to 9 pt at
that size; PDFs embed their fonts as TrueType (Type 42, which publishers' checks
accept, where matplotlib's default Type 3 is refused) and SVGs keep their text
as text.  Every energy component and every training phase has one colour in
every figure.  matplotlib is imported lazily, through the object-oriented API
with the Agg canvas (no display, no global pyplot state).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


class FigureSize(str, Enum):
    """Width of a figure on the printed page."""

    COLUMN = "column"
    PAGE = "page"

    @property
    def width_in(self) -> float:
        """Width in inches: one column or the whole text width of a two-column page."""
        return 3.5 if self is FigureSize.COLUMN else 7.16

    @property
    def max_bars(self) -> int:
        """Bars a panel of this width shows legibly (about 14 per inch)."""
        return 48 if self is FigureSize.COLUMN else 100

    @property
    def title_chars(self) -> int:
        """Characters per title line before it wraps."""
        return 48 if self is FigureSize.COLUMN else 100

    def height_in(self, panels: int) -> float:
        """Height in inches of a figure of ``panels`` stacked panels of bars or lines."""
        return (0.9 + 1.5 * panels) if self is FigureSize.COLUMN else (1.2 + 2.0 * panels)

    @property
    def panel_in(self) -> float:
        """Height in inches of the plotting area of one panel of a grouped bar figure
        (its tick labels, titles and legend come on top: the figure grows to fit them)."""
        return 1.1 if self is FigureSize.COLUMN else 1.5

    @property
    def row_bars(self) -> int:
        """Bars one panel of a grouped bar figure holds; past that its groups are split
        over more panels, one under the other."""
        return 24 if self is FigureSize.COLUMN else 48

    @property
    def row_groups(self) -> int:
        """Groups one panel of a grouped bar figure holds (each tick label clear of the
        next, upright); past that its groups are split over more panels."""
        return 12 if self is FigureSize.COLUMN else 28

    @property
    def label_chars(self) -> int:
        """Characters of a legend entry or a tick label per line before it wraps."""
        return 30 if self is FigureSize.COLUMN else 48


FORMATS = ("png", "pdf", "svg")
"""The formats figures are written in."""

PNG_DPI = 300
"""Dots per inch of a PNG: print resolution at the figure's printed size."""

STYLE: dict[str, Any] = {
    "pdf.fonttype": 42,
    "ps.fonttype": 42,
    "svg.fonttype": "none",
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "legend.title_fontsize": 7,
    "figure.titlesize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
"""matplotlib settings of every figure: embedded TrueType fonts in PDF, real text in
SVG, and font sizes readable at the printed size."""

ENERGY_COLOURS = {
    "mac": "#4c72b0",
    "vector": "#8172b3",
    "sram_ifmap": "#64b5cd",
    "sram_filter": "#55a868",
    "sram_ofmap": "#ccb974",
    "dram": "#c44e52",
    "interconnect": "#937860",
    "static": "#8c8c8c",
}
"""The colour of each energy component, in every figure."""

PHASE_COLOURS = {
    "fwd": "tab:blue",
    "bwd_input": "tab:orange",
    "bwd_weight": "tab:red",
    "update": "tab:green",
    "comm": "tab:gray",
    "aux": "tab:purple",
}
"""The colour of each training phase (Gantt charts)."""

DECADES = 10.0
"""Data whose largest positive value is this many times its smallest get a log axis."""


@contextmanager
def styled() -> Iterator[None]:
    """Make and save figures inside this block with :data:`STYLE`."""
    from matplotlib import rc_context

    with rc_context(cast(Any, STYLE)):
        yield


def new_figure(size: FigureSize, height_in: float) -> Figure:
    """A constrained-layout figure ``size`` wide and ``height_in`` inches high
    (made inside :func:`styled`)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(size.width_in, height_in), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def fit_height(fig: Figure, axes: Sequence[Axes], panel_in: float) -> None:
    """Make ``fig`` as high as its decorations (titles, tick labels, legends) need with
    each of ``axes`` ``panel_in`` inches high: laid out once at a height that holds
    them all, then cut to what the axes leave (constrained layout keeps the
    decorations' size, so it never collapses an axes)."""
    generous = len(axes) * (panel_in + 2.0) + 4.0
    fig.set_figheight(generous)
    fig.draw_without_rendering()
    plotted = sum(ax.get_position().height for ax in axes) * generous
    fig.set_figheight(generous - plotted + len(axes) * panel_in)


def text_width(fig: Figure, text: str) -> float:
    """Width in ``fig``'s pixels of one line of ``text`` at the tick labels' font size."""
    from matplotlib import rcParams
    from matplotlib.font_manager import FontProperties

    font = FontProperties(size=rcParams["xtick.labelsize"])
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    width, _, _ = renderer.get_text_width_height_descent(text, font, ismath=False)
    return float(width)


_BREAK = re.compile(r"(?<=[ +,/])")


def wrap(text: str, chars: int) -> str:
    """``text`` in lines of at most ``chars`` characters where it can be: broken after a
    space, ``+``, ``,`` or ``/``, and inside a longer name after a ``_`` (names such as
    ``gradient_prediction+optimizer_fusion`` have no spaces to break at)."""
    pieces = []
    for piece in _BREAK.split(text):
        pieces += re.split(r"(?<=_)", piece) if len(piece.rstrip()) > chars else [piece]
    lines: list[str] = []
    line = ""
    for piece in pieces:
        if line and len(line) + len(piece.rstrip()) > chars:
            lines.append(line.rstrip())
            line = ""
        line += piece
    return "\n".join([*lines, line.rstrip()])


def energy_colour(component: str) -> str:
    """The colour of an energy component (``dram``, or its column ``energy_dram_pj``)."""
    name = component.removeprefix("energy_").removesuffix("_pj")
    return ENERGY_COLOURS.get(name, "#4d4d4d")


def spans_decades(values: Sequence[float]) -> bool:
    """Whether the positive finite ``values`` span :data:`DECADES` or more."""
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    return bool(positive) and max(positive) >= DECADES * min(positive)


def log_if_decades(ax: Axes, values: Sequence[float], axis: str = "y") -> bool:
    """Put ``ax``'s ``axis`` on a log scale when ``values`` span decades; whether it did.

    Its ticks read as plain numbers (``2``, ``10``, ``50``, not ``2 x 10^0``): the
    powers of ten and, between them, the 2s and 5s.
    """
    from matplotlib.ticker import FuncFormatter, LogLocator

    if not spans_decades(values):
        return False
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    scale = ax.yaxis if axis == "y" else ax.xaxis
    scale.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
    scale.set_major_formatter(FuncFormatter(_plain))
    scale.set_minor_formatter(FuncFormatter(_plain))
    return True


def whole_number_ticks(ax: Axes) -> None:
    """Tick ``ax``'s x axis at whole numbers only (counts: processors, layers)."""
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _plain(value: float, _position: object = None) -> str:
    """A tick value as a plain number, thousands separated: ``0.5``, ``20``, ``5,000``."""
    return f"{value:,.0f}" if value >= 1 else f"{value:g}"


def save(fig: Figure, path: Path, fmt: str) -> None:
    """Write ``fig`` to ``path`` in ``fmt`` (``png`` at :data:`PNG_DPI`; ``pdf``, ``svg``),
    inside :func:`styled` so the fonts are embedded as it says."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    with styled():
        if fmt == "png":
            # One draw: the canvas's print_png lays out and renders at once, where
            # savefig with a layout engine draws twice (tests/report/test_plots.py).
            canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else None
            fig.set_dpi(PNG_DPI)
            (canvas or FigureCanvasAgg(fig)).print_png(path)
        else:
            fig.savefig(path, format=fmt)
