"""Figures by their content (titles, tick labels, PDF fonts, SVG text, pixel sizes), the
DRAM row of Gantt charts, the suite's technique table and run directory names."""

from __future__ import annotations

import csv
import math
import os
import struct
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from accelsim import cli
from accelsim.errors import InputError
from accelsim.report import bars, figure, plots, writer
from accelsim.report.console import suite_training_table
from accelsim.report.figure import FigureSize
from tests.conftest import ROOT

SMOKE = ROOT / "configs" / "runs" / "smoke.yaml"
SUITE = ROOT / "configs" / "suites" / "default.yaml"
GP = "run.techniques={gradient_prediction: {}}"


def svg_text(path: Path) -> list[str]:
    """The text of every ``<text>`` element of an SVG (its lines and spans joined)."""
    root = ET.parse(path).getroot()
    return ["".join(e.itertext()) for e in root.iter("{http://www.w3.org/2000/svg}text")]


def png_size(path: Path) -> tuple[int, int]:
    """Width and height in pixels, from the PNG's header."""
    width, height = struct.unpack(">II", path.read_bytes()[16:24])
    return width, height


def assert_embedded_truetype(pdf: Path) -> None:
    data = pdf.read_bytes()
    assert b"/FontFile2" in data  # a TrueType font program (Type 42)
    assert b"/Type3" not in data


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ADA-GP on three models x two arrays x two DRAM bandwidths (12 points)."""
    directory = tmp_path_factory.mktemp("sweep")
    path = directory / "sw.yaml"
    path.write_text(
        f"base: {os.path.relpath(SMOKE, directory)}\nname: gp\n"
        f"suite: {os.path.relpath(SUITE, directory)}\nmodels: [mlp, alexnet, lstm_ptb]\n"
        "set: {techniques: {gradient_prediction: {}}}\n"
        "grid:\n  array.rows: [16, 32]\n  dram.bandwidth_bytes_per_cycle: [32, 64]\n",
        encoding="utf-8",
    )
    assert cli.main(["sweep", str(path), "--out", str(directory / "out"), "--jobs", "1"]) == 0
    return directory / "out" / "gp"


def test_technique_figure_says_what_it_plots(sweep: Path, tmp_path: Path) -> None:
    svg = tmp_path / "t.svg"
    args = ["plot", str(sweep), "--kind", "technique", "--where", "array.rows=32"]
    assert cli.main([*args, "--output", str(svg)]) == 0
    texts = svg_text(svg)
    joined = "\n".join(texts)
    assert "gp: the technique's whole-training speedup and energy saving" in joined
    assert "array 32x32 os; DRAM varied; 1 processor; model varied; batch 4" in joined
    assert "points with array rows = 32" in joined
    for tick in ("mlp", "alexnet", "lstm_ptb", "geometric mean", "model", "speedup (x)"):
        assert tick in texts
    assert {"32", "64", "speedup bound", "energy saving (%)"} <= set(texts)
    assert not [t for t in texts if "=" in t and not t.startswith("points with")]
    pdf = tmp_path / "t.pdf"
    assert cli.main([*args, "--output", str(pdf), "--size", "column"]) == 0
    assert_embedded_truetype(pdf)
    png = tmp_path / "t.png"
    assert cli.main([*args, "--output", str(png), "--size", "column"]) == 0
    width, height = png_size(png)
    assert width == round(3.5 * figure.PNG_DPI) and height < 6 * figure.PNG_DPI


def test_every_kind_has_real_text_and_embedded_fonts(sweep: Path, tmp_path: Path) -> None:
    runs = {
        "energy": ["--where", "array.rows=32"],
        "pareto": [],
        "heatmap": ["--where", "model=mlp"],
        "scaling": ["--x", "array.rows", "--where", "dram.bandwidth_bytes_per_cycle=64"],
        "speedup": ["--baseline", "array.rows=16"],
    }
    for kind, extra in runs.items():
        for fmt in ("svg", "pdf", "png"):
            path = tmp_path / f"{kind}.{fmt}"
            args = ["plot", str(sweep), "--kind", kind, *extra, "--output", str(path)]
            assert cli.main(args) == 0, kind
        texts = svg_text(tmp_path / f"{kind}.svg")
        assert any(t.startswith("gp: ") for t in texts), (kind, texts)
        assert_embedded_truetype(tmp_path / f"{kind}.pdf")
        assert png_size(tmp_path / f"{kind}.png")[0] == round(7.16 * figure.PNG_DPI)
    energy = svg_text(tmp_path / "energy.svg")
    assert {"mlp, 32", "alexnet, 64", "dram", "mac", "baseline step energy (mJ)"} <= set(energy)
    assert not [t for t in energy if "10^" in t or "$" in t]  # plain log ticks


def test_a_figure_of_too_many_bars_is_refused_with_the_axes_to_filter() -> None:
    bars.check_bars("technique", 48, FigureSize.COLUMN, ["model"])
    with pytest.raises(InputError) as caught:
        bars.check_bars("technique", 49, FigureSize.COLUMN, ["model", "array.rows"])
    assert str(caught.value) == (
        "--kind technique: 49 bars are more than a column-wide figure shows legibly (48);"
        " keep fewer points with --where KEY=VALUE (varying axes: model, array.rows)"
    )


def test_log_axes_read_as_plain_numbers() -> None:
    with figure.styled():
        fig = figure.new_figure(FigureSize.COLUMN, 2.0)
        ax = fig.subplots()
        ax.bar(["a", "b"], [1.3, 23.0])
        assert figure.log_if_decades(ax, [1.3, 23.0])
        assert not figure.log_if_decades(ax, [1.3, 12.9])
        fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_yticklabels(minor=True) + ax.get_yticklabels()]
    shown = {t for t in labels if t}
    assert {"2", "5", "10", "20"} <= shown
    assert not [t for t in shown if "$" in t or "10^" in t]


def test_dram_demand_spreads_each_ops_bytes_over_its_span() -> None:
    # op A: cycles 0-100, 1,000 B on processor 0; op B: 50-150, 500 B on processor 1.
    at = np.array([0.0, 50.0, 100.0, 150.0])
    done = plots._cumulative(np.array([0.0, 50.0]), np.array([100.0, 150.0]),
                             np.array([1000.0, 500.0]), at)  # fmt: skip
    assert done.tolist() == [0.0, 500.0, 1250.0, 1500.0]  # 10 B/cycle, then 10 + 5
    rows = [
        {"start_cycle": "0", "end_cycle": "100", "processor": "0", "dram_read_ifmap_bytes": "600",
         "dram_write_ofmap_bytes": "400"},
        {"start_cycle": "50", "end_cycle": "150", "processor": "1", "dram_read_ifmap_bytes": "500",
         "dram_write_ofmap_bytes": ""},
    ]  # fmt: skip
    edges, shared = plots.dram_demand(rows, 1)
    assert (edges[0], edges[-1], len(edges)) == (0.0, 150.0, plots.GANTT_BINS + 1)
    assert len(shared) == 1 and math.isclose(shared[0].sum(), 1500.0)
    assert math.isclose(shared[0][0], 10.0 * 150 / plots.GANTT_BINS)  # A alone at 10 B/cycle
    _, split = plots.dram_demand(rows, 2)
    assert [round(float(u.sum()), 6) for u in split] == [1000.0, 500.0]


def test_gantt_has_a_dram_row_per_channel(tmp_path: Path) -> None:
    assert cli.main(["run", str(SMOKE), "--out", str(tmp_path), "--gantt"]) == 0
    ops = tmp_path / "mlp_smoke" / "ops.csv"
    assert (tmp_path / "mlp_smoke" / "gantt.png").is_file()
    plots.plot_gantt(ops, tmp_path / "g.svg", "t", 64.0, 1, "svg")
    texts = svg_text(tmp_path / "g.svg")
    assert {"P0 array", "P0 vector", "DRAM", "fwd", "update"} <= set(texts)
    (legend,) = [t for t in texts if t.startswith("DRAM demand")]
    assert legend.startswith("DRAM demand (100 % = 64 B/cycle; peak ")
    plots.plot_gantt(ops, tmp_path / "g2.svg", "t", 64.0, 2, "svg")
    assert {"P0 DRAM", "P1 DRAM"} <= set(svg_text(tmp_path / "g2.svg"))
    plots.plot_gantt(ops, tmp_path / "ideal.svg", "t", math.inf, 1, "svg")
    (ideal,) = [t for t in svg_text(tmp_path / "ideal.svg") if t.startswith("DRAM demand")]
    assert ideal.startswith("DRAM demand (ideal DRAM: 100 % = its peak, ")


def test_suite_training_table_gives_geometric_means() -> None:
    rows = [
        {"model": "a", "speedup": 2.0, "speedup_bound": 4.0, "binding_bound": "dram",
         "energy_reduction": 0.5, "dram_reduction": 0.75},
        {"model": "b", "speedup": 0.5, "speedup_bound": 1.0, "binding_bound": "compute",
         "energy_reduction": -1.0, "dram_reduction": 0.0},
    ]  # fmt: skip
    assert suite_training_table(rows).splitlines() == [
        "model           speedup    bound bound set by   energy saving DRAM saving",
        "a                2.000x   4.000x dram                  50.0 %      75.0 %",
        "b                0.500x   1.000x compute             -100.0 %       0.0 %",
        # geometric means: of 2 and 0.5; of 4 and 1; energy ratios 0.5 and 2; DRAM 0.25, 1
        "geometric mean   1.000x   2.000x                        0.0 %      50.0 %",
    ]


def test_suite_with_a_technique_prints_its_table_and_plots_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["suite", str(SMOKE), "--models", "mlp,alexnet", "--out", str(tmp_path)]
    assert cli.main([*args, "--set", GP, "--format", "svg"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ["model", "speedup", "bound", "bound", "set", "by", "energy",
                                "saving", "DRAM", "saving"]  # fmt: skip
    assert [line.split()[0] for line in lines[1:4]] == ["mlp", "alexnet", "geometric"]
    assert "baseline steps (no technique applied):" in lines
    target = tmp_path / "smoke_gradient_prediction"
    with (target / "suite.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    for row, line in zip(rows, lines[1:3], strict=True):
        assert f"{float(row['speedup']):.3f}x" == line.split()[1]
        assert float(row["speedup"]) <= float(row["speedup_bound"])
    texts = svg_text(target / "suite_speedup.svg")
    assert {"mlp", "alexnet", "geometric mean", "speedup bound", "energy saving (%)"} <= set(texts)
    assert "smoke: gradient_prediction against the baseline, whole training" in "\n".join(texts)
    assert "32x32 os, DRAM 64 B/cycle, batch 4" in "\n".join(svg_text(target / "suite.svg"))


def test_run_directories_name_the_workload_and_techniques() -> None:
    name = writer.run_directory_name
    assert name("default", "resnet18", None, []) == "resnet18_default"
    assert name("default", "resnet18", "cifar10", []) == "resnet18-cifar10_default"
    assert (
        name("default", "resnet18", None, ["gradient_skipping", "optimizer_fusion"])
        == "resnet18_default_gradient_skipping-optimizer_fusion"
    )
    assert len(name("r" * 200, "mlp", None, [])) == 200


def test_quick_start_runs_no_longer_overwrite_each_other(tmp_path: Path) -> None:
    """A technique or another workload writes its own directory beside the baseline's."""
    out = ["--out", str(tmp_path)]
    dropout = ROOT / "workloads" / "mlp_dropout.yaml"
    assert cli.main(["run", str(SMOKE), *out]) == 0
    assert cli.main(["run", str(SMOKE), *out, "--set", GP]) == 0
    assert cli.main(["run", str(SMOKE), *out, "--set", f"workload={dropout}"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "mlp_dropout_smoke",
        "mlp_smoke",
        "mlp_smoke_gradient_prediction",
    ]


def test_pareto_numbers_sit_inside_the_axes_clear_of_each_other(sweep: Path) -> None:
    """A crowded front (the 12 points copied 50 times with scattered times and energies):
    every number inside the axes and overlapping no other number."""
    import random

    from accelsim.sweep.collect import collect
    from accelsim.sweep.plot_options import PlotKind
    from accelsim.sweep.plots import Figure, plot_pareto

    _, rows = collect(sweep)
    scatter = random.Random(1)
    crowded = []
    for i in range(600):
        row = dict(rows[i % len(rows)])
        row["array.rows"] = i
        row["seconds"] *= 0.5 + scatter.random()
        row["energy_pj"] *= 0.5 + scatter.random()
        crowded.append(row)
    axes = ["model", "array.rows", "dram.bandwidth_bytes_per_cycle"]
    for size in FigureSize:
        with figure.styled():
            fig = plot_pareto(Figure(PlotKind.PARETO, "gp", crowded, axes, size=size))
            renderer = fig.canvas.get_renderer()
            fig.draw_without_rendering()
            (ax, _) = fig.axes
            frame = ax.get_window_extent(renderer)
            boxes = [t.get_window_extent(renderer) for t in ax.texts]
        assert len(boxes) >= 4, size
        for i, box in enumerate(boxes):
            assert frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1), size
            assert not any(box.overlaps(other) for other in boxes[i + 1 :]), size


def test_plot_labels_and_filters_from_the_command_line(
    sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--label`` renames a model and an axis in the drawn text; a ``--where`` value no
    point has exits 2 with the values the axis takes."""
    svg = tmp_path / "t.svg"
    args = ["plot", str(sweep), "--kind", "technique", "--where", "array.rows=32"]
    labels = ["--label", "mlp=MLP", "--label", "dram.bandwidth_bytes_per_cycle=DRAM B/cycle"]
    assert cli.main([*args, *labels, "--output", str(svg)]) == 0
    texts = svg_text(svg)
    assert {"MLP", "alexnet", "DRAM B/cycle"} <= set(texts)
    assert "mlp" not in texts
    capsys.readouterr()
    assert cli.main(["plot", str(sweep), "--kind", "technique", "--where", "array.rows=48"]) == 2
    assert capsys.readouterr().err.strip() == (
        "--where: array.rows: no finished point has this value; it takes: 16, 32 (got 48)"
    )


def test_plot_sweep_draws_from_python_as_the_command_does(sweep: Path, tmp_path: Path) -> None:
    import accelsim

    svg = accelsim.plot_sweep(
        sweep,
        "technique",
        where={"array.rows": 32},
        labels={"alexnet": "AlexNet"},
        size="column",
        output=tmp_path / "api.svg",
    )
    assert svg == tmp_path / "api.svg"
    assert {"AlexNet", "mlp", "speedup bound"} <= set(svg_text(svg))
    with pytest.raises(InputError) as caught:
        accelsim.plot_sweep(sweep, "bars")
    assert str(caught.value) == (
        "kind: one of speedup, technique, energy, heatmap, pareto, scaling (got 'bars')"
    )
