"""The technique figure's layout at 1 to 12 configurations, both print sizes and
``--by array.rows``: no text box leaves the figure or overlaps another, and
matplotlib warns of nothing (every warning an error)."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from accelsim.report import figure
from accelsim.report.figure import FigureSize
from accelsim.sweep.plot_options import PlotKind
from accelsim.sweep.plots import Figure, plot_technique

TECHNIQUES = (
    "gradient_prediction",
    "optimizer_fusion",
    "gradient_prediction+optimizer_fusion",
    "approximate_dropout+gradient_skipping",
)
MODELS = ("resnet18", "vgg16", "mlp")
AXES = ["model", "techniques", "array.rows"]


def rows(configurations: int) -> list[dict[str, Any]]:
    """Three models x ``configurations`` (techniques x array rows) of made-up numbers."""
    made = []
    for c in range(configurations):
        for m, model in enumerate(MODELS):
            speedup = 0.8 + 0.1 * c + 0.2 * m
            made.append(
                {
                    "status": "ok",
                    "model": model,
                    "workload": model,
                    "techniques": TECHNIQUES[c // 3],
                    "array.rows": 32 * 2 ** (c % 3),
                    "rows": 32,
                    "cols": 32,
                    "dataflow": "ws",
                    "dram_bandwidth_bytes_per_cycle": 64.0,
                    "processors": 1,
                    "batch_size": 32,
                    "speedup": speedup,
                    "speedup_bound": speedup * 1.3,
                    "energy_reduction": 0.05 * c - 0.1 * m,
                }
            )
    return made


def text_boxes(fig: Any) -> list[tuple[str, Any]]:
    """Every visible, non-empty text of ``fig`` with its box: title, axis labels, tick
    labels, legend title and entries, texts on the axes (bar labels)."""
    renderer = fig.canvas.get_renderer()
    texts = [fig._suptitle] if fig._suptitle is not None else []
    for ax in fig.axes:
        texts += [ax.xaxis.label, ax.yaxis.label, *ax.texts]
        for axis in (ax.xaxis, ax.yaxis):  # the ticks drawn: inside the view limits
            texts += [t.label1 for t in axis._update_ticks() if t.label1.get_visible()]
    for legend in fig.legends:
        texts += [legend.get_title(), *legend.get_texts()]
    return [
        (t.get_text(), t.get_window_extent(renderer))
        for t in texts
        if t.get_visible() and t.get_text().strip()
    ]


@pytest.mark.parametrize("size", list(FigureSize))
@pytest.mark.parametrize("by", [None, "array.rows"])
def test_no_text_leaves_the_figure_or_overlaps_another(size: FigureSize, by: str | None) -> None:
    for configurations in range(1 if by is None else 2, 13):
        points = rows(configurations)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with figure.styled():
                drawn = plot_technique(
                    Figure(PlotKind.TECHNIQUE, "study", points, AXES, by=by, size=size)
                )
                drawn.draw_without_rendering()
                boxes = text_boxes(drawn)
        frame = drawn.bbox
        assert drawn.get_figwidth() == size.width_in
        case = (size.value, by, configurations)
        assert len(boxes) > 10, case
        for i, (text, box) in enumerate(boxes):
            inside = box.x0 >= frame.x0 and box.x1 <= frame.x1
            assert inside and box.y0 >= frame.y0 and box.y1 <= frame.y1, (*case, text)
            for other, other_box in boxes[i + 1 :]:
                assert not box.overlaps(other_box), (*case, text, other)


def test_groups_split_over_panels_up_to_a_limit() -> None:
    from accelsim.errors import InputError
    from accelsim.report import bars

    assert bars.rows_of(15, 1, FigureSize.PAGE) == [range(15)]
    assert bars.rows_of(15, 1, FigureSize.COLUMN) == [range(8), range(8, 15)]
    assert bars.rows_of(15, 12, FigureSize.PAGE) == [range(4), range(4, 8), range(8, 12),
                                                      range(12, 15)]  # fmt: skip
    bars.check_rows("technique", 15, 12, FigureSize.PAGE, ["model", "techniques"])
    with pytest.raises(InputError) as caught:
        bars.check_rows("technique", 15, 12, FigureSize.COLUMN, ["model", "techniques"])
    assert str(caught.value) == (
        "--kind technique: 180 bars in 15 groups of 12 are more than a column-wide figure"
        " shows legibly (4 panels of at most 24 bars); keep fewer points with --where"
        " KEY=VALUE (varying axes: model, techniques)"
    )
