"""Progress on stderr for long runs, drawn only on a terminal."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from accelsim import cli, cli_run, load_inputs, parse_sets, simulate_training
from tests.conftest import ROOT

SMOKE = ROOT / "configs" / "runs" / "smoke.yaml"
GP = "run.techniques={gradient_prediction: {}}"


def as_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test's captured stderr taken for a terminal (called in the test, whose
    capture is not the fixtures')."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)


def test_a_run_longer_than_the_delay_shows_its_stages(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    as_terminal(monkeypatch)
    args = ["run", str(SMOKE), "--out", str(tmp_path), "--set", GP]
    assert cli.main(args) == 0
    assert capsys.readouterr().err == ""  # quick: no bar
    monkeypatch.setattr(cli_run, "PROGRESS_DELAY_S", 0.0)
    assert cli.main([*args, "--force", "--gantt"]) == 0
    shown = capsys.readouterr().err.replace("\r", "\n").splitlines()
    final = [line.rstrip() for line in shown if line.strip()][-1]
    # base, bp and gp steps, the files, three Gantt charts
    assert final.startswith("mlp_smoke_gradient_prediction: 7 stages [")
    assert final.endswith("drawing the gp step's Gantt chart]")


def test_simulate_training_tells_each_simulation() -> None:
    calls: list[str] = []
    inputs = load_inputs(SMOKE, parse_sets(["run.techniques={gradient_prediction: {}}"]))
    result = simulate_training(inputs, calls.append)
    graphs = {"base": result.base.graph, **{k: r.graph for k, r in result.steps.items()}}
    assert calls == [f"{kind} step, {len(graph.ops)} ops" for kind, graph in graphs.items()]
    assert [len(g.ops) for g in graphs.values()] == [23, 62, 21]


def test_progress_appears_after_the_delay_counting_from_the_start(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    as_terminal(monkeypatch)
    monkeypatch.setattr(cli_run, "PROGRESS_DELAY_S", 1.0)
    with cli_run.slow_progress("x") as tell:
        tell("first")
        assert capsys.readouterr().err == ""
        time.sleep(1.1)
        tell("second")
    lines = capsys.readouterr().err.replace("\r", "\n").split("\n")
    assert next(line for line in lines if line).startswith("x: 2 stages [00:01, ")


def test_a_log_gets_no_progress_bar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Stderr that is no terminal (a file, a pipe, a captured log) gets no bar and so no
    carriage return, from a long run or a sweep; the same on a terminal draws them."""
    monkeypatch.setattr(cli_run, "PROGRESS_DELAY_S", 0.0)
    assert cli.main(["run", str(SMOKE), "--out", str(tmp_path), "--set", GP]) == 0
    assert capsys.readouterr().err == ""
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"name: rows\nbase: {SMOKE}\ngrid:\n  array.rows: [8, 16]\n")
    out = ["--out", str(tmp_path / "out"), "--jobs", "1"]
    assert cli.main(["sweep", str(sweep), *out]) == 0
    assert capsys.readouterr().err == ""
    as_terminal(monkeypatch)
    sweep.write_text(f"name: rows\nbase: {SMOKE}\ngrid:\n  array.rows: [8, 16, 24]\n")
    assert cli.main(["sweep", str(sweep), *out]) == 0
    shown = capsys.readouterr().err
    assert "\r" in shown and "rows: 100%" in shown and "1/1" in shown
