"""The figures: written in one draw, with the bytes ``savefig`` writes."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from accelsim.report import figure, plots


def constrained_figure() -> Figure:
    """A figure like the suite's: constrained layout, log axes (mathtext ticks), a legend."""
    fig = Figure(figsize=(6, 5), layout="constrained")
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True)
    fig.suptitle("title")
    top.bar(["a", "b", "c"], [3.0, 300.0, 30_000.0], label="x")
    top.set_yscale("log")
    bottom.bar(["a", "b", "c"], [50.0, 20.0, 70.0], label="share")
    bottom.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    bottom.tick_params(axis="x", labelrotation=45)
    return fig


@pytest.fixture
def draws(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The renderers of every ``Figure.draw`` from here on."""
    seen: list[object] = []
    original = Figure.draw

    def counted(self: Figure, renderer: object) -> None:
        seen.append(renderer)
        original(self, renderer)

    monkeypatch.setattr(Figure, "draw", counted)
    return seen


def test_save_writes_the_bytes_of_savefig_in_one_draw(tmp_path: Path, draws: list[object]) -> None:
    with figure.styled():
        constrained_figure().savefig(tmp_path / "savefig.png", dpi=figure.PNG_DPI)
    assert len(draws) == 2  # lay out, then render
    with figure.styled():
        once = constrained_figure()
    figure.save(once, tmp_path / "once.png", "png")
    assert len(draws) == 3
    assert (tmp_path / "once.png").read_bytes() == (tmp_path / "savefig.png").read_bytes()


def test_suite_plot_draws_once(tmp_path: Path, draws: list[object]) -> None:
    rows = [
        {"model": m, "seconds": s, "energy_pj": 10.0, "energy_dram_pj": 6.0, "energy_mac_pj": 4.0}
        for m, s in (("mlp", 0.001), ("resnet18", 0.04))
    ]
    with (tmp_path / "suite.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    plots.plot_suite(tmp_path / "suite.csv", tmp_path / "suite.png", "t")
    assert len(draws) == 1
    assert (tmp_path / "suite.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
