"""A local pool worker that dies (SIGKILL, as the kernel's OOM killer sends) fails the
sweep within seconds, saying how, with the points finished stored; the same command
then resumes.  Each command runs in a child process under a deadline
(:mod:`tests.sweep.dying`): before, a sweep whose worker died mid-chunk, or halfway
through writing its result, waited forever."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from accelsim.cli import main
from accelsim.sweep import Store
from accelsim.sweep.processes import _ended
from tests.sweep.dying import run_dying
from tests.sweep.test_sweep import sweep_file

KILLED = (
    "a worker process was killed by SIGKILL (signal 9; the kernel does this when memory runs out)"
)
POINTS = 24


def dying_sweep(tmp_path: Path, how: str) -> tuple[Path, int]:
    """A 24-point sweep on 2 workers, one of which dies at point 12 as ``how`` says:
    exit 3 within seconds, the last line naming the death, the points left and those
    stored, which are the store's rows; the number stored."""
    path = sweep_file(
        tmp_path,
        "name: dies\ngrid:\n  array.rows: [8, 16, 24, 32, 40, 48]\n  array.cols: [8, 16, 24, 32]\n",
    )
    out = tmp_path / "out"
    ended = run_dying(how, 12, "sweep", str(path), "--out", str(out), "--jobs", "2")
    assert ended.code == 3, ended
    assert ended.seconds < 60, ended
    match = re.fullmatch(
        rf"accelsim: process pool, 2 workers: {re.escape(KILLED)} with (\d+) points? left;"
        rf" points finished so far: (\d+), stored in {re.escape(str(out / 'dies'))}/:"
        " rerun the same command to resume",
        ended.last_error,
    )
    assert match, ended.last_error
    left, finished = int(match[1]), int(match[2])
    with Store(out / "dies") as store:
        rows = store.rows()
    assert len(rows) == finished  # the sweep's first point, run in its process, among them
    assert finished + left == POINTS
    assert 12 not in {row["point"] for row in rows}
    return path, len(rows)


@pytest.mark.parametrize("how", ["kill_at", "die_writing"])
def test_a_dead_worker_fails_the_sweep_which_then_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    """Killed mid-chunk (its partner, which the command's SIGTERM handler once kept
    alive past Python's own SIGTERM, blocked writing a result nobody read), or killed
    halfway through writing its result while holding the result queue's lock (Python's
    pool waits forever for the rest of the message): both exit 3; a rerun simulates
    only the points not stored."""
    path, stored = dying_sweep(tmp_path, how)
    code = main(["sweep", str(path), "--out", str(tmp_path / "out"), "--jobs", "1"])
    assert code == 0
    assert (
        capsys.readouterr()
        .out.splitlines()[0]
        .startswith(
            f"dies: {POINTS} points, {stored} already stored, {POINTS - stored} run (0 failed) in "
        )
    )


def test_a_worker_killed_as_the_pool_stops(tmp_path: Path) -> None:
    """Every point simulated and stored, a worker killed as the pool is left: the
    sweep ends as usual (exit 0), all points stored."""
    path = sweep_file(tmp_path, "name: ends\ngrid:\n  array.rows: [8, 16, 24, 32]\n")
    out = tmp_path / "out"
    ended = run_dying("kill_at_exit", 0, "sweep", str(path), "--out", str(out), "--jobs", "2")
    assert ended.code == 0, ended
    assert ended.seconds < 60, ended
    with Store(out / "ends") as store:
        assert len(store.rows()) == 4


def test_a_dead_planning_worker_fails_the_sweep(tmp_path: Path) -> None:
    """A process planning a big sweep's points (forked from 2 points on, here) that
    dies: exit 3, naming the death, nothing simulated."""
    path = sweep_file(tmp_path, "name: plans\ngrid:\n  array.rows: [8, 16, 24, 32]\n")
    out = tmp_path / "out"
    ended = run_dying("kill_share", 0, "sweep", str(path), "--out", str(out), "--jobs", "2")
    assert (ended.code, ended.last_error) == (
        3,
        f"accelsim: planning the sweep (2 worker processes): {KILLED}; rerun the same command",
    )
    assert not (out / "plans").exists()


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (-signal.SIGKILL, f"was killed by SIGKILL (signal 9; {KILLED.split('; ')[1]}"),
        (-signal.SIGSEGV, "was killed by SIGSEGV (signal 11)"),
        (-99, "was killed by signal 99"),
        (1, "exited with code 1"),
        (None, "ended abruptly"),
    ],
)
def test_how_a_worker_ended(code: int | None, text: str) -> None:
    assert _ended(code) == text
