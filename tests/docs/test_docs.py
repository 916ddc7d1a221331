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


def test_the_figures_shown_are_drawn(tutorial: tuple[Path, list[tuple[object, str]]]) -> None:
    workdir, _ = tutorial
    shown = load_script("mkdocs_hooks").figures()
    assert shown == ["my_study/heatmap.png", "my_study/pareto.png"]
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
