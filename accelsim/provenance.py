"""What produced a result: the accelsim version and, from a source checkout, its git commit."""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path

from accelsim._version import __version__

_SOURCE = Path(__file__).resolve().parent.parent


def version() -> str:
    """The installed accelsim version."""
    return __version__


@cache
def git_commit() -> str | None:
    """The commit of the checkout accelsim is imported from, ``-dirty`` when tracked
    files differ from it; ``None`` for an installed package or without git."""
    if not (_SOURCE / ".git").exists():
        return None
    try:
        head = subprocess.run(
            ["git", "-C", str(_SOURCE), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(_SOURCE), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}-dirty" if status.strip() else head
