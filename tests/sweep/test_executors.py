"""The sweep's executors: a Dask sweep that loses every worker (in ``tests/sweep/``, after
``tests/report/``: the cluster's thread outlives it; ``tests/README.md``)."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest

from accelsim import cli
from accelsim.sweep import executors
from tests.conftest import ROOT

SMOKE = ROOT / "configs" / "runs" / "smoke.yaml"


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
