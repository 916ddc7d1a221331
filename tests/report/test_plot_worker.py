"""PlotWorker: figures drawn by a forked child, the same files, errors as in-process."""

from __future__ import annotations

import csv
import os
import threading
from pathlib import Path

import pytest
from tqdm import tqdm

from accelsim.report import plot_worker, plots

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")


@pytest.fixture(autouse=True)
def one_thread() -> None:
    """End the monitor thread an earlier test's progress bar left running (it ends by
    itself 10 s after the last bar closes): with a second thread the worker must not fork."""
    if tqdm.monitor is not None:
        tqdm.monitor.exit()
    assert threading.active_count() == 1


def suite_csv(path: Path) -> Path:
    rows = [
        {"model": m, "seconds": s, "energy_pj": 10.0, "energy_dram_pj": 6.0, "energy_mac_pj": 4.0}
        for m, s in (("mlp", 0.001), ("resnet18", 0.04))
    ]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def refuse(*args: object) -> None:
    raise AssertionError("drawn in the parent")


@needs_fork
def test_the_child_draws_the_same_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plot_worker, "_cores", lambda: 2)
    table = suite_csv(tmp_path / "suite.csv")
    plots.plot_suite(table, tmp_path / "parent.png", "t")
    with plot_worker.PlotWorker() as worker:
        assert worker._pid is not None
        # Forked already: a figure the parent drew itself would fail here.
        monkeypatch.setattr(plots, "plot_suite", refuse)
        worker.draw("suite", table, tmp_path / "child.png", "t")
        worker.finish()
        assert worker._pid is None  # waited for
    assert (tmp_path / "child.png").read_bytes() == (tmp_path / "parent.png").read_bytes()


def test_one_core_draws_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plot_worker, "_cores", lambda: 1)
    table = suite_csv(tmp_path / "suite.csv")
    with plot_worker.PlotWorker() as worker:
        assert worker._pid is None
        worker.draw("suite", table, tmp_path / "suite.png", "t")
        worker.finish()
    assert (tmp_path / "suite.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@needs_fork
def test_a_plot_that_fails_in_the_child_raises_in_the_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plot_worker, "_cores", lambda: 2)
    with plot_worker.PlotWorker() as worker:
        worker.draw("suite", tmp_path / "missing.csv", tmp_path / "suite.png", "t")
        with pytest.raises(FileNotFoundError, match=r"missing\.csv"):
            worker.finish()
    assert not (tmp_path / "suite.png").exists()


@needs_fork
def test_leaving_early_ends_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plot_worker, "_cores", lambda: 2)
    with pytest.raises(RuntimeError), plot_worker.PlotWorker() as worker:
        pid = worker._pid
        assert pid is not None
        raise RuntimeError("a model failed")
    assert worker._pid is None
    with pytest.raises(ChildProcessError):  # killed and reaped: no zombie left
        os.waitpid(pid, os.WNOHANG)


def test_unknown_figure_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown figure 'pie'"):
        plot_worker.PlotWorker().draw("pie", Path("a.csv"), Path("a.png"), "t")


def test_no_fork_while_another_thread_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plot_worker, "_cores", lambda: 2)
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        with plot_worker.PlotWorker() as worker:
            assert worker._pid is None
    finally:
        stop.set()
        thread.join()
