"""Progress on stderr for long runs, and a Dask sweep that loses every worker."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest

from accelsim import cli, cli_run, load_inputs, parse_sets, simulate_training
from accelsim.sweep import executors

ROOT = Path(__file__).resolve().parents[1]
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


@pytest.mark.skipif(importlib.util.find_spec("distributed") is None, reason="needs dask")
def test_a_dask_sweep_without_workers_says_so_and_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every worker of the cluster gone: the sweep stops after WORKERLESS_S, says what
    happened and how to resume, and exits 3 (not waiting for a worker forever)."""
    monkeypatch.setattr(executors, "WORKERLESS_S", 1.0)
    monkeypatch.setattr(executors, "POLL_S", 0.2)
    original = executors.DaskExecutor.__init__

    def without_workers(self: executors.DaskExecutor, *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)  # type: ignore[arg-type]
        self._client.cluster.scale(0)
        deadline = time.monotonic() + 30
        while self._client.nthreads() and time.monotonic() < deadline:
            time.sleep(0.1)

    monkeypatch.setattr(executors.DaskExecutor, "__init__", without_workers)
    sweep = tmp_path / "sw.yaml"
    sweep.write_text(f"base: {SMOKE}\nname: gone\ngrid:\n  array.rows: [8, 16]\n", encoding="utf-8")
    started = time.monotonic()
    code = cli.main(["sweep", str(sweep), "--out", str(tmp_path / "out"), "--dask-workers", "1"])
    assert code == 3
    assert time.monotonic() - started < 30
    err = capsys.readouterr().err.replace("\r", "\n").splitlines()
    assert err[-1] == (
        "accelsim: Dask LocalCluster, 1 worker: no worker for 1 s with 1 point left;"
        f" points finished so far: 1, stored in {tmp_path / 'out' / 'gone'}/: start"
        " workers and rerun the same command to resume"
    )
