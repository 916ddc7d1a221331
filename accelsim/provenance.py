"""What produced a result: the accelsim version and, from a source checkout, its git commit."""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path

from accelsim._version import __version__

_SOURCE = Path(__file__).resolve().parent.parent
# One ``git`` process gives both the commit (``# branch.oid``) and whether tracked
# files differ from it (any line that is not a ``#`` header).
_STATUS = ["status", "--porcelain=v2", "--branch", "--untracked-files=no"]


def version() -> str:
    """The installed accelsim version."""
    return __version__


@cache
def git_commit() -> str | None:
    """The commit of the checkout accelsim is imported from, ``-dirty`` when tracked
    files differ from it; ``None`` for an installed package or without git."""
    return checkout_commit(_SOURCE)


def checkout_commit(directory: Path) -> str | None:
    """The commit checked out in ``directory`` (``-dirty`` when tracked files differ
    from it); ``None`` when it is no git checkout, has no commit yet or git fails."""
    if not (directory / ".git").exists():
        return None
    try:
        status = subprocess.run(
            ["git", "-C", str(directory), *_STATUS],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    lines = status.splitlines()
    head = next(
        (line[len("# branch.oid ") :] for line in lines if line.startswith("# branch.oid ")), None
    )
    if head is None or head == "(initial)":
        return None
    dirty = any(line and not line.startswith("#") for line in lines)
    return f"{head}-dirty" if dirty else head
