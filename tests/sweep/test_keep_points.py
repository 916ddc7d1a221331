"""``--keep-points``: which points keep a directory; the store, and so ``collect``, the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import accelsim
from accelsim.cli import main
from accelsim.errors import InputError
from accelsim.sweep import Executor, plan_sweep, run_sweep
from accelsim.sweep.collect import collect
from accelsim.sweep.points import KeepPoints
from tests.sweep.test_sweep import fail_16_rows, sweep_file, without_timings

GRID = "name: k\ngrid:\n  array.rows: [8, 16, 32]\n"


def kept(directory: Path) -> dict[str, list[str]]:
    """Each point directory's files."""
    return {p.name: sorted(f.name for f in p.iterdir()) for p in (directory / "points").iterdir()}


def test_every_choice_stores_the_same_table_and_keeps_what_it_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fail_16_rows(monkeypatch)
    plan = plan_sweep(sweep_file(tmp_path, GRID))
    tables, files = {}, {}
    for keep in KeepPoints:
        report = run_sweep(plan, tmp_path / keep.value, Executor(), keep_points=keep)
        assert (report.ran, report.failed) == (3, 1)
        columns, rows = collect(report.directory)
        tables[keep] = (columns, without_timings(rows))
        files[keep] = kept(report.directory)
    assert tables[KeepPoints.NONE] == tables[KeepPoints.FAILED] == tables[KeepPoints.ALL]
    rows = tables[KeepPoints.ALL][1]
    assert [r["status"] for r in rows] == ["ok", "failed", "ok"]
    ok, failed = rows[0]["identity"], rows[1]["identity"]
    assert files[KeepPoints.NONE] == {}
    assert files[KeepPoints.FAILED] == {failed: ["point.json"]}
    assert files[KeepPoints.ALL][ok] == ["point.json", "summary.json"]
    assert files[KeepPoints.ALL][failed] == ["point.json"]
    point = json.loads((tmp_path / "failed" / "k" / "points" / failed / "point.json").read_text())
    assert point["label"] == rows[1]["label"]
    assert point["error"] == "engine deadlock at cycle 7"
    summary = json.loads((tmp_path / "all" / "k" / "points" / ok / "summary.json").read_text())
    assert summary["total_cycles"] == rows[0]["total_cycles"]


def test_a_point_run_again_and_not_kept_loses_its_old_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = accelsim.sweep.worker.simulate_training
    fail_16_rows(monkeypatch)
    plan = plan_sweep(sweep_file(tmp_path, GRID))
    first = run_sweep(plan, tmp_path / "out", Executor(), keep_points=KeepPoints.FAILED)
    assert len(kept(first.directory)) == 1
    monkeypatch.setattr("accelsim.sweep.worker.simulate_training", real)
    again = run_sweep(
        plan, tmp_path / "out", Executor(), retry_failed=True, keep_points=KeepPoints.FAILED
    )
    assert (again.skipped, again.ran, again.failed) == (2, 1, 0)
    assert kept(again.directory) == {}
    assert [r["status"] for r in collect(again.directory)[1]] == ["ok", "ok", "ok"]


def test_layers_need_every_point_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = sweep_file(tmp_path, "name: l\nlayers: true\ngrid:\n  array.rows: [8]\n")
    with pytest.raises(InputError) as excinfo:
        run_sweep(plan_sweep(path), tmp_path / "out", Executor(), keep_points=KeepPoints.NONE)
    assert [str(p) for p in excinfo.value.problems] == [
        "--keep-points: the sweep file asks for each point's layers.csv (layers: true), kept"
        " in the point's directory: use --keep-points all (got 'none')"
    ]
    assert not (tmp_path / "out").exists()
    argv = ["sweep", str(path), "--out", str(tmp_path / "out"), "--keep-points", "failed"]
    assert main(argv) == 2
    assert "use --keep-points all (got 'failed')" in capsys.readouterr().err
    assert main(["sweep", str(path), "--out", str(tmp_path / "out"), "--jobs", "1"]) == 0
    (row,) = collect(tmp_path / "out" / "l")[1]
    assert kept(tmp_path / "out" / "l") == {
        row["identity"]: ["layers.csv", "point.json", "summary.json"]
    }
