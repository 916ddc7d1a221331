"""Progress on stderr for long runs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from accelsim import cli, cli_run, load_inputs, parse_sets, simulate_training
from tests.conftest import ROOT

SMOKE = ROOT / "configs" / "runs" / "smoke.yaml"


def test_a_run_longer_than_the_delay_shows_its_stages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    gp = "run.techniques={gradient_prediction: {}}"
    args = ["run", str(SMOKE), "--out", str(tmp_path), "--set", gp]
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
    monkeypatch.setattr(cli_run, "PROGRESS_DELAY_S", 1.0)
    with cli_run.slow_progress("x") as tell:
        tell("first")
        assert capsys.readouterr().err == ""
        time.sleep(1.1)
        tell("second")
    lines = capsys.readouterr().err.replace("\r", "\n").split("\n")
    assert next(line for line in lines if line).startswith("x: 2 stages [00:01, ")
