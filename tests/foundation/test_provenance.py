"""The git commit results record: one ``git status``, the same answer as ``rev-parse``
plus ``status --porcelain``."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from accelsim.provenance import _SOURCE, checkout_commit, git_commit

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def git(directory: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(directory), *args], capture_output=True, text=True, check=True
    ).stdout


def two_commands(directory: Path) -> str:
    """The commit as ``rev-parse HEAD`` and ``status --porcelain`` give it."""
    head = git(directory, "rev-parse", "HEAD").strip()
    status = git(directory, "status", "--porcelain", "--untracked-files=no")
    return f"{head}-dirty" if status.strip() else head


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "user.email", "test@example.com")
    git(tmp_path, "config", "user.name", "test")
    return tmp_path


def test_no_checkout_or_no_commit_gives_none(tmp_path: Path, repo: Path) -> None:
    assert checkout_commit(tmp_path / "elsewhere") is None
    assert checkout_commit(repo) is None


def test_clean_modified_staged_and_untracked(repo: Path) -> None:
    (repo / "a.txt").write_text("one\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", "first")
    head = git(repo, "rev-parse", "HEAD").strip()
    assert checkout_commit(repo) == head == two_commands(repo)
    (repo / "new.txt").write_text("untracked\n")
    assert checkout_commit(repo) == head == two_commands(repo)
    (repo / "a.txt").write_text("two\n")
    assert checkout_commit(repo) == f"{head}-dirty" == two_commands(repo)
    git(repo, "add", "a.txt")
    assert checkout_commit(repo) == f"{head}-dirty" == two_commands(repo)
    git(repo, "commit", "-q", "-m", "second")
    assert checkout_commit(repo) == git(repo, "rev-parse", "HEAD").strip() != head


def test_this_checkout_agrees_with_the_two_commands() -> None:
    if not (_SOURCE / ".git").exists():
        pytest.skip("not a source checkout")
    # git_commit() is this checkout's, looked up once per process (the tree may change since).
    assert git_commit() is not None
    assert checkout_commit(_SOURCE) == two_commands(_SOURCE)
