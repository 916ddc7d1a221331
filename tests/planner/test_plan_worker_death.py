"""``accelsim plan`` whose pool worker dies (SIGKILL, as the kernel's OOM killer sends),
run in a child process under a deadline (:mod:`tests.sweep.dying`): a worker
simulating plans fails the search within seconds with the plans simulated stored, and
the same command resumes (before, the search waited forever); a worker filtering the
plans fails it the same way (before, an internal error)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from accelsim.cli import main
from accelsim.sweep import Store
from tests.planner.test_plan_command import plan
from tests.sweep.dying import run_dying
from tests.sweep.test_worker_death import KILLED

PLANS = 40
"""The plans of the tiny GPT on 8 chips (:mod:`tests.planner.test_plan_command`)."""


def on_two_workers(tmp_path: Path) -> list[str]:
    """The search of :func:`~tests.planner.test_plan_command.plan` on 2 workers, every
    plan simulated (``--exhaustive``: one sweep of all 40, none pruned)."""
    argv = plan(tmp_path, "--exhaustive")
    argv[argv.index("--jobs") + 1] = "2"
    return argv


def test_a_dead_worker_fails_the_search_which_then_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ended = run_dying("kill_at", 30, *on_two_workers(tmp_path))
    assert ended.code == 3, ended
    assert ended.seconds < 60, ended
    store = tmp_path / "search"
    match = re.fullmatch(
        rf"accelsim: process pool, 2 workers: {re.escape(KILLED)} with (\d+) points? left;"
        rf" rerun the same command to resume \({re.escape(str(store))}/\)",
        ended.last_error,
    )
    assert match, ended.last_error
    with Store(store) as stored:
        rows = stored.rows()
    assert len(rows) + int(match[1]) == PLANS
    assert 30 not in {row["point"] for row in rows}
    assert main([*plan(tmp_path, "--exhaustive"), "--json"]) == 0
    search = json.loads(capsys.readouterr().out)["search"]
    assert (search["simulated"], search["already_stored"]) == (PLANS, len(rows))


def test_a_dead_filter_worker_fails_the_search(tmp_path: Path) -> None:
    """The filter on 2 workers (from 2 candidates on, here), one of which dies."""
    ended = run_dying("kill_share", 0, *on_two_workers(tmp_path))
    assert (ended.code, ended.last_error) == (
        3,
        f"accelsim: filtering the plans (2 worker processes): {KILLED}; rerun the same command",
    )
    assert not (tmp_path / "search" / "store.sqlite").exists()
