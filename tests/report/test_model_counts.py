"""The counts ``accelsim models`` prints for the bundled suite from its cache."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from accelsim.cli import main
from accelsim.driver.inputs import suite_entries, suite_models
from accelsim.lowering.stats import model_stats
from accelsim.report import model_counts
from accelsim.report.model_counts import COUNTS_FILE, cached_counts, counts_record
from accelsim.resources import data_dir

SUITE = data_dir() / "configs" / "suites" / "default.yaml"


def test_the_cache_holds_the_live_counts_of_the_files_as_they_are() -> None:
    """Fails after a change to a bundled workload, the suite or lowering that moves a
    count: run ``python scripts/model_counts.py``."""
    workloads = [entry.workload_path for entry in suite_entries(SUITE)]
    live = [model_stats(workload, infos) for workload, infos in suite_models(SUITE)]
    stored = json.loads((data_dir() / COUNTS_FILE).read_text(encoding="utf-8"))
    assert stored == counts_record(SUITE, workloads, live)
    assert cached_counts(SUITE) == live
    assert len(live) == 14


def test_models_prints_the_cache_only_for_unchanged_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "data"
    shutil.copytree(data_dir() / "configs" / "suites", root / "configs" / "suites")
    shutil.copytree(data_dir() / "workloads", root / "workloads")
    shutil.copy(data_dir() / COUNTS_FILE, root / COUNTS_FILE)
    monkeypatch.setattr(model_counts, "data_dir", lambda: root)
    suite = root / "configs" / "suites" / "default.yaml"
    record = json.loads((root / COUNTS_FILE).read_text(encoding="utf-8"))
    first = record["models"][0]
    first["params"] += 1  # a cache that is used shows it
    (root / COUNTS_FILE).write_text(json.dumps(record), encoding="utf-8")
    assert main(["models", "--suite", str(suite), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown[0] == first
    mlp = root / "workloads" / "mlp.yaml"
    mlp.write_text(mlp.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    assert cached_counts(suite) is None
    assert main(["models", "--suite", str(suite), "--json"]) == 0
    live = json.loads(capsys.readouterr().out)
    assert live[0] == {**first, "params": first["params"] - 1}
    assert cached_counts(tmp_path / "other.yaml") is None


def test_the_table_lists_every_count() -> None:
    (stats,) = [s for s in cached_counts(SUITE) or [] if s.name == "mlp"]
    line = model_counts.models_table([stats]).splitlines()[1]
    assert line.split()[0] == "mlp"
    assert f"{stats.params:,}" in line and f"{stats.training_macs:,}" in line
    assert dataclasses.asdict(stats)["layers"] == int(line.split()[-1])
