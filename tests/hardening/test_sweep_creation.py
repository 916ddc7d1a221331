"""Two sweeps started at once into the same new directory: the second finds the store
the first has just created, still an empty database, and waits for its tables
(bounded by ``CREATOR_WAIT_S``) instead of refusing it as not a sweep store."""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path

import pytest

from accelsim import cli
from accelsim.sweep import Store, pending_points, plan_sweep
from accelsim.sweep import run as sweep_run
from tests.hardening.test_hardening_store import messages, sweep_file


def empty_store(directory: Path) -> Path:
    """A store file as a sweep's first connection leaves it: a database without tables."""
    directory.mkdir(parents=True)
    path = directory / "store.sqlite"
    with closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA user_version = 0")
    return path


def test_a_second_sweep_waits_for_the_creator_of_the_store(tmp_path: Path) -> None:
    """The creator makes the tables 0.5 s after the store appeared: the second sweep
    reads them then and counts the four points to run, not an error."""
    plan = plan_sweep(sweep_file(tmp_path))
    directory = tmp_path / "out" / "arrays"
    empty_store(directory)
    axes = {k: [p.axes[k] for p in plan.points] for k in plan.axes()}

    def create() -> None:
        time.sleep(0.5)
        with Store(directory, write=True) as store:
            store.prepare({"name": plan.name, "axes": plan.axes()}, axes)

    creator = threading.Thread(target=create)
    started = time.monotonic()
    creator.start()
    try:
        assert pending_points(plan, tmp_path / "out") == 4
    finally:
        creator.join()
    assert 0.5 <= time.monotonic() - started < 5
    with Store(directory) as store:
        assert store.created and store.meta()["name"] == "arrays"


def test_an_empty_store_nobody_fills_is_made_by_the_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The creator was killed before it made the tables: after the wait the sweep takes
    the empty database for a new store; collect and plot still refuse it before that."""
    monkeypatch.setattr(sweep_run, "CREATOR_WAIT_S", 0.3)
    from tqdm import tqdm

    monkeypatch.setattr(tqdm, "monitor_interval", 0)
    directory = tmp_path / "out" / "arrays"
    path = empty_store(directory)
    assert cli.main(["collect", str(directory)]) == 2
    assert messages(capsys.readouterr().err) == [
        f"{path}: not a sweep store yet: an empty database"
    ]
    started = time.monotonic()
    code = cli.main(["sweep", str(sweep_file(tmp_path)), "--out", str(tmp_path / "out"),
                     "--jobs", "1"])  # fmt: skip
    assert code == 0
    assert time.monotonic() - started >= 0.3
    assert messages(capsys.readouterr().err) == []
    with Store(directory) as store:
        assert len(store.rows()) == 4
