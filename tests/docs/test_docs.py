"""The tutorial of docs/getting-started.md runs as written, and says what it shows.

Marked ``docs`` (``python -m pytest -m docs``, run by ``.ci/run``): it runs every block
of the page through ``scripts/mkdocs_hooks.py``, the runner the site's build uses for
the figures it shows, in a fresh directory.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ROOT, load_script

pytestmark = pytest.mark.docs


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple[object, str]]]:
    workdir = tmp_path_factory.mktemp("tutorial")
    return workdir, load_script("mkdocs_hooks").run_tutorial(workdir)


def test_every_block_runs_and_the_files_it_names_are_written(
    tutorial: tuple[Path, list[tuple[object, str]]],
) -> None:
    workdir, outputs = tutorial
    blocks = [block for block, _ in outputs]
    assert [b.title for b in blocks if b.title] == [
        "my_study/cnn.yaml",
        "my_study/run.yaml",
        "my_study/sweep.yaml",
        "my_study/tradeoff.yaml",
    ]
    for name in ("tutorial", "os_fused", "tutorial_gradient_prediction"):
        assert (workdir / "my_study" / "results" / f"small_cnn_{name}" / "summary.json").is_file()
    assert (workdir / "my_study" / "arrays.csv").read_text().count("\n") == 1 + 18


def test_the_prose_about_the_first_step_holds(
    tutorial: tuple[Path, list[tuple[object, str]]],
) -> None:
    """ "About 5 % busy ... most of its energy in DRAM."""
    workdir, _ = tutorial
    summary = json.loads((workdir / "my_study/results/small_cnn_tutorial/summary.json").read_text())
    assert 0.045 <= summary["utilization"] <= 0.055
    energy = summary["energy_pj"]
    assert energy["by_component"]["dram"] > energy["total"] / 2


def test_the_comparison_prints_each_technique_within_its_bound(
    tutorial: tuple[Path, list[tuple[object, str]]],
) -> None:
    _, outputs = tutorial
    printed = next(out for block, out in outputs if block.language == "python")
    rows = printed.splitlines()[1:]
    assert [row[:20].strip() for row in rows] == [
        "ADA-GP",
        "gradient skipping",
        "optimizer fusion",
        "fusion, W from dX",
        "ADA-GP + fusion",
    ]
    speedups = {}
    for row in rows:
        speedup, bound = (float(cell.rstrip("x")) for cell in row[20:].split()[:2])
        assert speedup <= bound
        assert row.split()[-1] == "dram"
        speedups[row[:20].strip()] = speedup
    # "Backward optimizer fusion gains little on this one ... Forced to take each
    # weight's tiles from dX ... the step is slower than the baseline's."
    assert speedups["fusion, W from dX"] < 1.0 <= speedups["optimizer fusion"] < 1.01
    assert speedups["ADA-GP"] > 1.2 and speedups["gradient skipping"] > 1.1


def every(directory: Path) -> list[dict[str, object]]:
    """A sweep's points with their time and energy per sample, in µs and µJ."""
    from accelsim.sweep.collect import collect
    from accelsim.sweep.pareto import ENERGY_PER_SAMPLE, SECONDS_PER_SAMPLE, metric

    _, rows = collect(directory)
    return [
        {
            **r,
            "us": metric(r, SECONDS_PER_SAMPLE, "--x") * 1e6,
            "uj": metric(r, ENERGY_PER_SAMPLE, "--y") / 1e6,
        }
        for r in rows
    ]


def front(directory: Path) -> list[dict[str, object]]:
    """The Pareto-optimal points of a sweep (:func:`every`)."""
    from accelsim.sweep.pareto import pareto_front

    points = every(directory)
    return [points[i] for i in pareto_front([(p["us"], p["uj"]) for p in points])]


def test_the_prose_about_the_fronts_holds(
    tutorial: tuple[Path, list[tuple[object, str]]],
) -> None:
    """ "Here two are, 128x64 and 128x128 at 128 bytes per cycle, within 4 % of each
    other in time and 0.1 % in energy" and "The front has two points, both the 128x128
    array with 512 KiB operand buffers: mapped for time (17.1 µs and 313 µJ a sample)
    and mapped for energy (17.8 µs, 302 µJ) ... at 4 % more time. 2 MiB buffers buy no
    time over 512 KiB and cost 21 µJ a sample more"."""
    workdir, _ = tutorial
    results = workdir / "my_study" / "results"
    arrays = front(results / "small_cnn_arrays")
    assert [(p["array.rows"], p["array.cols"]) for p in arrays] == [(128, 64), (128, 128)]
    assert {p["dram.bandwidth_bytes_per_cycle"] for p in arrays} == {128}
    fast, frugal = arrays
    assert 1 < frugal["us"] / fast["us"] < 1.04
    assert 0.998 < frugal["uj"] / fast["uj"] < 1
    trade = front(results / "small_cnn_tradeoff")
    assert [(p["mapping.objective"], p["array.rows"], p["buffers.ifmap_kib"]) for p in trade] == [
        ("time", 128, 512),
        ("energy", 128, 512),
    ]
    assert [(round(p["us"], 1), round(p["uj"])) for p in trade] == [(17.1, 313), (17.8, 302)]
    assert 1.03 < trade[1]["us"] / trade[0]["us"] < 1.045
    time_128 = {
        p["buffers.ifmap_kib"]: p
        for p in every(results / "small_cnn_tradeoff")
        if (p["mapping.objective"], p["array.rows"]) == ("time", 128)
    }
    assert round(time_128[2048]["us"], 2) == round(time_128[512]["us"], 2)
    assert round(time_128[2048]["uj"] - time_128[512]["uj"]) == 21


def test_the_figures_shown_are_drawn(tutorial: tuple[Path, list[tuple[object, str]]]) -> None:
    workdir, _ = tutorial
    shown = load_script("mkdocs_hooks").figures()
    assert shown == ["my_study/heatmap.png", "my_study/pareto.png", "my_study/tradeoff.png"]
    for name in shown:
        assert (workdir / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_python_api_guide_runs_as_written(tmp_path: Path) -> None:
    outputs = load_script("mkdocs_hooks").run_tutorial(
        tmp_path, ROOT / "docs" / "guides" / "python-api.md"
    )
    printed = [out for block, out in outputs if block.language == "python"]
    assert len(printed) == 6
    one_call, _, notebook, sweep, layers, errors = printed
    lines = notebook.splitlines()
    assert lines[0].split() == ["dram.bandwidth_bytes_per_cycle", "32", "64"]
    cycles = {int(line.split()[0]): [int(c) for c in line.split()[1:]] for line in lines[2:5]}
    assert sorted(cycles) == [8, 16, 32]
    # More rows or more bandwidth never slow the smoke run's step.
    assert all(slow > fast for slow, fast in cycles.values())
    assert cycles[8][0] > cycles[16][0] > cycles[32][0]
    assert [line.split()[0] for line in lines[5:10]] == [
        "phase",
        "bwd_input",
        "bwd_weight",
        "fwd",
        "update",
    ]
    assert [line.split()[0] for line in one_call.splitlines()[1:]] == ["base", "bp", "gp"]
    assert (tmp_path / "results" / "mlp_default" / "summary.json").is_file()
    assert sweep.split()[:3] == ["4", "0", "0"]
    assert [line.split()[0] for line in layers.splitlines()] == [
        "Conv1",
        "Conv2",
        "Conv3",
        "Conv4",
        "Conv5",
    ]
    assert errors == "--set: array.dataflow: input should be 'os', 'ws' or 'is' (got 'WS')\n"


def test_the_readme_quick_start_runs_as_written(tmp_path: Path) -> None:
    outputs = load_script("mkdocs_hooks").run_tutorial(tmp_path, ROOT / "README.md", "Quick start")
    runs = sorted(p.name for p in (tmp_path / "results" / "quick").iterdir())
    # Every command writes a directory of its own: none overwrites another's.
    assert runs == [
        "arrays",
        "arrays.csv",
        "mlp_default",
        "mlp_default_layerpipe",
        "mlp_dropout_default_approximate_dropout",
        "resnet18_default_gradient_prediction",
        "scalesim_resnet18_default",
    ]
    assert (tmp_path / "results" / "quick" / "mlp_default_layerpipe" / "gantt.png").is_file()
    assert (tmp_path / "results" / "quick" / "arrays" / "plots" / "heatmap.png").is_file()
    printed = next(out for block, out in outputs if block.language == "python")
    speedup, bound = (float(word.rstrip("x,")) for word in printed.split()[0:4:3])
    assert 1.0 < speedup <= bound
    assert printed.endswith("(dram bound)\n")
