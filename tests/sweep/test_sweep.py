"""Design-point sweeps: ``accelsim sweep | collect | plot`` and the ``accelsim.sweep`` package."""

from __future__ import annotations

import csv
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import accelsim
from accelsim.cli import main
from accelsim.errors import ConfigError, SimulationError
from accelsim.sweep import Executor, PoolExecutor, Store, plan_sweep, run_sweep
from accelsim.sweep.collect import collect
from accelsim.sweep.pareto import pareto_front
from accelsim.sweep.plots import axis_name, varying
from accelsim.sweep.points import KeepPoints
from accelsim.sweep.store import TIMING_COLUMNS
from tests.conftest import ROOT

SMOKE = ROOT / "configs" / "runs" / "smoke.yaml"
DEFAULT = ROOT / "configs" / "runs" / "default.yaml"
SUITE = ROOT / "configs" / "suites" / "default.yaml"


def sweep_file(directory: Path, text: str, base: Path = SMOKE, name: str = "sw.yaml") -> Path:
    """A sweep file in ``directory`` whose ``base`` is ``base``, relative to the file."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    relative = os.path.relpath(base, directory)
    path.write_text(f"base: {relative}\n{text}", encoding="utf-8")
    return path


def fail_16_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every point with 16 array rows fail in simulation."""
    real = accelsim.sweep.worker.simulate_training

    def flaky(inputs: Any) -> Any:
        if inputs.hardware.array.rows == 16:
            raise SimulationError("engine deadlock at cycle 7")
        return real(inputs)

    monkeypatch.setattr("accelsim.sweep.worker.simulate_training", flaky)


def without_timings(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    timing = {name for name, _ in TIMING_COLUMNS}
    return [{k: v for k, v in r.items() if k not in timing} for r in rows]


def test_the_minimal_sweep_file_runs_and_collects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's minimal form: four points into DIR/arrays/, one CSV row per point
    with a column per axis key, named exactly as the key, and the same numbers as
    ``accelsim.simulate`` with the same overrides."""
    path = sweep_file(
        tmp_path / "sweeps",
        "name: arrays\ngrid:\n  array.rows: [32, 64]\n  array.dataflow: [os, ws]\n",
    )
    out = tmp_path / "out"
    argv = ["sweep", str(path), "--out", str(out), "--jobs", "2", "--keep-points", "all"]
    assert main(argv) == 0
    assert "4 points, 0 already stored, 4 run (0 failed)" in capsys.readouterr().out
    assert (out / "arrays" / "store.sqlite").is_file()
    table = tmp_path / "arrays.csv"
    assert main(["collect", str(out / "arrays"), "--csv", str(table)]) == 0
    with table.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["array.rows"], r["array.dataflow"]) for r in rows] == [
        ("32", "os"),
        ("32", "ws"),
        ("64", "os"),
        ("64", "ws"),
    ]
    # The hardware file's name, and the point's array where it is not the file's.
    assert [r["hardware"] for r in rows] == [
        "scalesim-32x32",
        "scalesim-32x32 (32x32 ws)",
        "scalesim-32x32 (64x32 os)",
        "scalesim-32x32 (64x32 ws)",
    ]
    for row in rows:
        sets = [f"array.rows={row['array.rows']}", f"array.dataflow={row['array.dataflow']}"]
        expected = accelsim.simulate(SMOKE, sets).base.step_summary()
        assert int(row["total_cycles"]) == expected.total_cycles
        assert float(row["energy_pj"]) == pytest.approx(expected.energy_pj.total, rel=1e-9)
        assert int(row["rows"]) == int(row["array.rows"])
        assert row["status"] == "ok"
        summary = json.loads(
            (out / "arrays" / "points" / row["identity"] / "summary.json").read_text()
        )
        assert summary["design"]["rows"] == int(row["array.rows"])
        assert summary["total_cycles"] == int(row["total_cycles"])
    assert main(["sweep", str(path), "--out", str(out)]) == 0
    assert "4 points, 4 already stored, 0 run" in capsys.readouterr().out


def test_every_bad_point_is_reported_before_any_runs(tmp_path: Path) -> None:
    path = sweep_file(
        tmp_path,
        "name: bad\n"
        "grid:\n  array.rows: [0, 8]\n  array.dataflow: [ws, diagonal]\n"
        "zip:\n  - {batch_size: [2, -1], processors: [1, 1]}\n",
    )
    with pytest.raises(ConfigError) as excinfo:
        plan_sweep(path)
    shown = [str(p) for p in excinfo.value.problems]
    assert f"{path}: grid.array.rows: input should be greater than 0 (got 0)" in shown
    assert (
        f"{path}: grid.array.dataflow: input should be 'os', 'ws' or 'is' (got 'diagonal')" in shown
    )
    assert f"{path}: zip[0].batch_size: input should be greater than 0 (got -1)" in shown
    assert len(shown) == len(set(shown)) == 3
    assert not (tmp_path / "results").exists()


def test_check_validates_every_point(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = sweep_file(tmp_path, "name: ok\ngrid:\n  array.rows: [8, 16]\n", name="ok.yaml")
    bad = sweep_file(tmp_path, "name: bad\ngrid:\n  array.rows: [8, 0]\n", name="bad.yaml")
    assert main(["check", str(good)]) == 0
    assert "ok (sweep 'ok', 2 points, each with all its files)" in capsys.readouterr().out
    assert main(["check", str(bad)]) == 2
    assert f"{bad}: grid.array.rows: input should be greater than 0 (got 0)" in (
        capsys.readouterr().err
    )


def test_bad_sweep_files_name_the_key(tmp_path: Path) -> None:
    cases = {
        "grid:\n  array.rowz: [1]\n": "grid.array.rowz",
        "grid:\n  nonsense: [1]\n": "grid.nonsense: unknown key",
        "zip:\n  - {array.rows: [8, 16], array.cols: [8]}\n": (
            "zip[0]: the lists of a zip group differ in length"
        ),
        "grid:\n  array.rows: [8]\nexclude:\n  - {array.cols: 8}\n": (
            "exclude[0].array.cols: not an axis of the sweep"
        ),
        "grid:\n  array.rows: []\n": "grid.array.rows: expected at least one value",
        "grid:\n  array.rows: [8]\nexclude:\n  - {array.rows: 8}\n": (
            "exclude: excludes every point of the sweep"
        ),
    }
    for i, (body, expected) in enumerate(cases.items()):
        path = sweep_file(tmp_path, f"name: s{i}\n{body}", name=f"s{i}.yaml")
        with pytest.raises(ConfigError) as excinfo:
            plan_sweep(path)
        assert any(expected in str(p) for p in excinfo.value.problems), (body, excinfo.value)


def test_excludes_zips_and_fixed_sets(tmp_path: Path) -> None:
    path = sweep_file(
        tmp_path,
        "name: shape\nset: {batch_size: 2}\n"
        "grid:\n  array.dataflow: [os, ws]\n"
        "zip:\n  - {array.rows: [8, 16], array.cols: [16, 8]}\n"
        "exclude:\n  - {array.dataflow: os, array.rows: 16}\n",
    )
    plan = plan_sweep(path)
    assert [dict(p.axes) for p in plan.points] == [
        {"array.dataflow": "os", "array.rows": 8, "array.cols": 16},
        {"array.dataflow": "ws", "array.rows": 8, "array.cols": 16},
        {"array.dataflow": "ws", "array.rows": 16, "array.cols": 8},
    ]
    assert all(("batch_size", 2, str(path), "set.batch_size") in p.task.sets for p in plan.points)


def test_identity_is_the_resolved_design_and_the_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two sweeps that reach the same design by different keys share its identity; a
    different design or another accelsim version does not."""
    one = plan_sweep(sweep_file(tmp_path, "name: a\ngrid:\n  array.rows: [8, 16]\n", name="a.yaml"))
    two = plan_sweep(
        sweep_file(tmp_path, "name: b\ngrid:\n  hardware.array.rows: [16]\n", name="b.yaml")
    )
    assert two.points[0].task.identity == one.points[1].task.identity
    assert one.points[0].task.identity != one.points[1].task.identity
    monkeypatch.setattr("accelsim.sweep.plan.version", lambda: "9.9.9")
    three = plan_sweep(
        sweep_file(tmp_path, "name: b\ngrid:\n  hardware.array.rows: [16]\n", name="b.yaml")
    )
    assert three.points[0].task.identity != two.points[0].task.identity


def test_a_suite_is_a_model_axis(tmp_path: Path) -> None:
    """``suite`` + ``models`` add a ``model`` axis first; a variant the model lacks is dropped."""
    path = sweep_file(
        tmp_path,
        f"name: models\nsuite: {os.path.relpath(SUITE, tmp_path)}\n"
        "models: [mlp, resnet18]\nset: {workload_variant: cifar10}\n"
        "grid:\n  array.rows: [8]\nlayers: true\n",
    )
    plan = plan_sweep(path)
    assert [p.axes["model"] for p in plan.points] == ["mlp", "resnet18"]
    report = run_sweep(plan, tmp_path / "out", Executor())
    assert (report.ran, report.failed) == (2, 0)
    _, rows = collect(report.directory)
    assert [(r["model"], r["workload"]) for r in rows] == [("mlp", "mlp"), ("resnet18", "resnet18")]
    assert rows[1]["workload_variant"] == "cifar10" and rows[0]["workload_variant"] == ""
    for row, variant in zip(rows, ([], ["workload_variant=cifar10"]), strict=True):
        workload = ROOT / "workloads" / f"{row['model']}.yaml"
        result = accelsim.simulate(SMOKE, ["array.rows=8", f"workload={workload}", *variant])
        assert row["total_cycles"] == result.base.total_cycles
        points = report.directory / "points" / str(row["identity"])
        with (points / "layers.csv").open(encoding="utf-8") as handle:
            layers = list(csv.DictReader(handle))
        assert [r["layer"] for r in layers] == [r["layer"] for r in result.base.layer_rows()]


def test_a_store_gains_the_columns_it_lacks(tmp_path: Path) -> None:
    """A new axis, or a column an older accelsim did not write, is added on the next run."""
    path = sweep_file(tmp_path, "name: grow\ngrid:\n  array.rows: [8]\n")
    out = tmp_path / "out"
    run_sweep(plan_sweep(path), out, Executor())
    with sqlite3.connect(out / "grow" / "store.sqlite") as db:
        db.execute("ALTER TABLE points DROP COLUMN interconnect_bytes")
    path.write_text(path.read_text() + "  array.cols: [8, 16]\n")
    report = run_sweep(plan_sweep(path), out, Executor())
    assert (report.skipped, report.ran) == (0, 2)  # array.cols joins the identity
    _, rows = collect(out / "grow")
    by_cols = {r["array.cols"]: r for r in rows}
    assert set(by_cols) == {8, 16, None}  # the first run's point stays
    assert by_cols[8]["interconnect_bytes"] == by_cols[16]["interconnect_bytes"] == 0


def test_a_failing_point_is_recorded_and_the_sweep_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = plan_sweep(sweep_file(tmp_path, "name: f\ngrid:\n  array.rows: [8, 16, 32]\n"))
    real = accelsim.sweep.worker.simulate_training
    fail_16_rows(monkeypatch)
    report = run_sweep(plan, tmp_path / "out", Executor())
    assert (report.ran, report.failed) == (3, 1)
    _, rows = collect(report.directory)
    assert [r["status"] for r in rows] == ["ok", "failed", "ok"]
    assert rows[1]["error"] == "engine deadlock at cycle 7" and rows[1]["total_cycles"] is None
    assert not (report.directory / "points" / rows[1]["identity"]).exists()
    again = run_sweep(plan, tmp_path / "out", Executor())
    assert (again.skipped, again.ran) == (3, 0)
    monkeypatch.setattr("accelsim.sweep.worker.simulate_training", real)
    retried = run_sweep(plan, tmp_path / "out", Executor(), retry_failed=True)
    assert (retried.skipped, retried.ran, retried.failed) == (2, 1, 0)
    _, rows = collect(report.directory)
    assert [r["status"] for r in rows] == ["ok", "ok", "ok"]


def test_a_worker_of_another_version_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = plan_sweep(sweep_file(tmp_path, "name: v\ngrid:\n  array.rows: [8]\n"))
    monkeypatch.setattr("accelsim.sweep.worker.version", lambda: "0.0.1")
    report = run_sweep(plan, tmp_path / "out", Executor())
    assert report.failed == 1
    (row,) = collect(report.directory)[1]
    assert row["status"] == "failed" and "runs accelsim 0.0.1, this sweep" in row["error"]


def test_each_input_file_is_parsed_once_per_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planning and simulating six points parse the sweep, run, hardware, energy and
    workload files once each (an edited file is parsed again)."""
    from accelsim.config import loader

    parsed: list[str] = []
    real = loader._parse

    def counting(text: str, name: str, error: Any) -> dict[str, Any]:
        parsed.append(Path(name).name)
        return real(text, name, error)

    monkeypatch.setattr(loader, "_parse", counting)
    monkeypatch.setattr(loader, "_PARSED", {})
    path = sweep_file(
        tmp_path, "name: once\ngrid:\n  array.rows: [8, 16, 32]\n  batch_size: [1, 2]\n"
    )
    run_sweep(plan_sweep(path), tmp_path / "out", Executor())
    assert sorted(parsed) == [
        "horowitz45.yaml",
        "mlp.yaml",
        "scalesim.yaml",
        "smoke.yaml",
        "sw.yaml",
    ]
    path.write_text(path.read_text().replace("[1, 2]", "[1, 2, 3]"))  # a new size
    plan_sweep(path)
    assert parsed.count("sw.yaml") == 2 and len(parsed) == 6


def test_executors_store_identical_results(tmp_path: Path) -> None:
    """In-process, the process pool and a Dask LocalCluster store the same rows
    (timings and worker names aside)."""
    path = sweep_file(
        tmp_path, "name: same\ngrid:\n  array.rows: [8, 16, 32]\n  array.dataflow: [os, ws]\n"
    )
    plan = plan_sweep(path)
    stores = {}
    with Executor() as executor:
        stores["in-process"] = run_sweep(plan, tmp_path / "a", executor).directory
    with PoolExecutor(2) as executor:
        stores["pool"] = run_sweep(plan, tmp_path / "b", executor).directory
    if _has_dask():
        from accelsim.sweep import DaskExecutor

        with DaskExecutor(local_workers=2) as executor:
            stores["dask"] = run_sweep(plan, tmp_path / "c", executor).directory
    # ``engine`` says which event engine ran: with ``timing.engine: auto`` that
    # depends on what the process simulated before (the engines' numbers are
    # identical, tests/timing/test_compiled.py), so it is left out of the comparison.
    tables = {
        name: [{k: v for k, v in r.items() if k != "engine"} for r in without_timings(rows)]
        for name, rows in ((name, collect(d)[1]) for name, d in stores.items())
    }
    reference = tables.pop("in-process")
    assert len(reference) == 6 and all(r["status"] == "ok" for r in reference)
    for name, table in tables.items():
        assert table == reference, name

    def summaries(directory: Path) -> list[dict[str, Any]]:
        found = [json.loads(p.read_text()) for p in directory.glob("points/*/summary.json")]
        for summary in found:
            summary.pop("engine")
        return sorted(found, key=lambda d: json.dumps(d, sort_keys=True))

    for directory in stores.values():
        assert summaries(directory) == summaries(stores["in-process"])


def _has_dask() -> bool:
    try:
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True


def test_a_killed_sweep_resumes_without_losing_or_recomputing(tmp_path: Path) -> None:
    """SIGKILL the sweep's process mid-run: its pool workers die with it, the store stays
    sound, and the rerun keeps every committed point (its row untouched) and runs only
    the rest."""
    path = sweep_file(
        tmp_path,
        "name: kill\ngrid:\n  array.rows: [16, 24, 32, 40, 48, 56, 64, 72]\n"
        "  array.cols: [16, 32, 48, 64, 80]\n",
        base=DEFAULT,
    )
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = ["sweep", str(path), "--out", str(out), "--jobs", "2", "--keep-points", "all"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelsim", *argv],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    store_path = out / "kill" / "store.sqlite"
    deadline = time.monotonic() + 60
    done = 0
    while done < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
        if store_path.exists():
            try:
                with sqlite3.connect(store_path) as db:
                    done = db.execute("SELECT count(*) FROM points").fetchone()[0]
            except sqlite3.OperationalError:
                done = 0
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if sys.platform.startswith("linux"):  # its pool workers die with it
        deadline = time.monotonic() + 10
        while _processes_naming(path) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _processes_naming(path)
    with Store(out / "kill") as store:
        assert store.integrity() == "ok"
        before = {r["identity"]: r for r in store.rows()}
    assert 3 <= len(before) < 40, "the sweep was not killed mid-run"
    plan = plan_sweep(path)
    with PoolExecutor(2) as executor:
        report = run_sweep(plan, out, executor, keep_points=KeepPoints.ALL)
    assert (report.skipped, report.ran, report.failed) == (len(before), 40 - len(before), 0)
    with Store(out / "kill") as store:
        after = {r["identity"]: r for r in store.rows()}
        assert store.integrity() == "ok"
    assert len(after) == 40
    for identity, row in before.items():
        assert after[identity] == row
    assert sorted(p.name for p in (out / "kill" / "points").iterdir()) == sorted(after)


def _processes_naming(path: Path) -> list[int]:
    """Live processes whose command line names ``path``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if str(path).encode() in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def test_plots_in_vector_and_raster_formats(tmp_path: Path) -> None:
    """Every kind draws; a zip group counts as one axis (the heatmap's second)."""
    path = sweep_file(
        tmp_path,
        "name: figs\ngrid:\n  array.dataflow: [os, ws]\n"
        "zip:\n  - {array.rows: [8, 16, 32], array.cols: [8, 16, 32]}\n",
    )
    with Executor() as executor:
        directory = run_sweep(plan_sweep(path), tmp_path / "out", executor).directory
    magic = {"png": b"\x89PNG", "pdf": b"%PDF", "svg": b"<?xml"}
    runs = [
        ("speedup", "pdf", ["--baseline", "array.dataflow=os"]),
        ("energy", "png", []),
        ("heatmap", "pdf", []),
        ("pareto", "svg", []),
        ("scaling", "png", ["--x", "array.rows"]),
    ]
    for kind, fmt, extra in runs:
        assert main(["plot", str(directory), "--kind", kind, "--format", fmt, *extra]) == 0
        head = (directory / "plots" / f"{kind}.{fmt}").read_bytes()[:5]
        assert head.startswith(magic[fmt]), (kind, fmt, head)
    assert main(["plot", str(directory), "--kind", "heatmap", "--where", "array.rows=8"]) == 2, (
        "one varying axis left"
    )
    assert main(["plot", str(directory), "--kind", "speedup", "--baseline", "rows=3"]) == 2


def test_technique_axes_carry_the_technique_report(tmp_path: Path) -> None:
    """A technique section and one of its options as axes: each point's record holds the
    technique's speedup, its bound and the binding resource, as ``accelsim run`` reports
    them; without ``--baseline`` the speedup plot shows them."""
    gp = "techniques.gradient_prediction"
    path = sweep_file(
        tmp_path,
        f"name: gp\nset: {{{gp}.schedule.policy: fixed, {gp}.schedule.warmup_epochs: 0}}\n"
        "grid:\n  techniques: [{gradient_prediction: {}}]\n"
        f"  {gp}.schedule.gp_fraction: [0.25, 0.75]\n",
        base=ROOT / "configs" / "runs" / "mlp.yaml",
    )
    directory = run_sweep(plan_sweep(path), tmp_path / "out", Executor()).directory
    _, rows = collect(directory)
    for row, fraction in zip(rows, (0.25, 0.75), strict=True):
        training = accelsim.simulate(
            ROOT / "configs" / "runs" / "mlp.yaml",
            [
                "run.techniques={gradient_prediction: {schedule: {policy: fixed, "
                f"warmup_epochs: 0, gp_fraction: {fraction}}}}}}}"
            ],
        ).training
        assert training is not None
        assert row["techniques"] == "gradient_prediction"
        assert row[f"{gp}.schedule.gp_fraction"] == fraction
        assert row["speedup"] == training.speedup <= row["speedup_bound"]
        assert row["binding_bound"] == training.binding_bound
        assert "note" not in row
    assert rows[1]["speedup"] > rows[0]["speedup"]
    assert main(["plot", str(directory), "--kind", "speedup"]) == 0
    x = f"{gp}.schedule.gp_fraction"
    assert main(["plot", str(directory), "--kind", "scaling", "--x", x]) == 0


def test_zipped_axes_move_in_step() -> None:
    rows = [
        {"a": 1, "b": 10, "c": "x"},
        {"a": 2, "b": 20, "c": "x"},
        {"a": 1, "b": 10, "c": "y"},
        {"a": 2, "b": 20, "c": "y"},
    ]
    assert varying(rows, ["c", "a", "b"]) == ["c", "a"]
    assert axis_name(rows, ["c", "a", "b"], "a") == "a = b"
    assert varying(rows[:2], ["c", "a", "b"]) == ["a"]


def test_pareto_front_by_hand() -> None:
    points = [(3.0, 1.0), (1.0, 3.0), (2.0, 2.0), (2.5, 2.5), (4.0, 0.5), (1.0, 4.0)]
    assert pareto_front(points) == [1, 2, 0, 4]
