"""A sweep's ``points/`` directory: each point's files, written into a hidden staging
directory and renamed into place, and the clean-up of what a killed sweep left.

Nothing here deletes what it cannot prove it made.  Every staging entry is named
``.accelsim-point.<token>.<identity>`` (a point being written) or
``.accelsim-old.<token>.<identity>`` (a point directory being replaced), where
``<token>`` is the sweep process's random token, recorded in the store before
its first entry is made.  Clean-up removes only entries whose token the store
records, only real directories, and in them only the files a point has
(:data:`POINT_FILES`); every operation is relative to ``points/`` opened without
following symbolic links (``O_NOFOLLOW``, ``dir_fd``), and a sweep directory or
``points/`` that is a symbolic link is refused.

Which points get a directory is the sweep's choice (:class:`KeepPoints`); the
store alone holds what ``collect``, ``plot`` and a resumed sweep read.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Callable, Mapping
from enum import Enum
from pathlib import Path
from typing import IO, Any

from accelsim.errors import OutputError, shown
from accelsim.sweep.schema import POINTS_DIR

POINT_FILES = ("summary.json", "point.json", "layers.csv")
"""The files of a point directory (``layers.csv`` only with ``layers: true``)."""

_NEW, _OLD = ".accelsim-point.", ".accelsim-old."
_STAGED = re.compile(r"\.accelsim-(?:point|old)\.([0-9a-f]{32})\.[0-9a-f]{16}")
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW

Writer = Callable[[IO[str]], Any]
"""Writes one file's content to an open text file."""


class KeepPoints(str, Enum):
    """Which finished points keep a directory in ``points/`` (``--keep-points``):
    ``none``; ``failed`` (its ``point.json``: label, overrides and error); ``all``
    (a failed point's as with ``failed``; a finished one's ``summary.json`` and
    ``point.json``, and ``layers.csv`` when the sweep asks for it)."""

    NONE = "none"
    FAILED = "failed"
    ALL = "all"

    def keeps(self, status: str) -> bool:
        """Whether a point that ended with ``status`` (``ok``, ``failed``) keeps a directory."""
        return self is KeepPoints.ALL or (self is KeepPoints.FAILED and status != "ok")


DEFAULT_KEEP = KeepPoints.NONE
"""What a sweep keeps unless told: a point's summary, directory and files cost about a
fifth of a ResNet-18 point's time (docs/performance.md), and nothing accelsim reads
needs them."""


def sweep_root(directory: Path) -> None:
    """Create the sweep directory ``directory`` if needed; refuse it if it is not a real
    directory (a symbolic link, a file).

    Raises:
        OutputError: for a symbolic link or a file, or when it cannot be created.
    """
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            directory.mkdir()
        kind = os.lstat(directory).st_mode
    except OSError as exc:
        raise OutputError(
            f"{shown(str(directory))}: cannot create the sweep directory: {_reason(exc)}"
        ) from None
    if not stat.S_ISDIR(kind):
        raise _not_ours(directory, "a sweep directory")


class PointsDirectory:
    """``points/`` of a sweep directory, opened without following symbolic links.

    Args:
        directory: The sweep directory (checked by :func:`sweep_root`).
        token: This sweep process's token (32 hex digits), already recorded in the store.

    Raises:
        OutputError: when the sweep directory or ``points/`` is a symbolic link or
            cannot be opened or created.
    """

    def __init__(self, directory: Path, token: str) -> None:
        self.path = directory / POINTS_DIR
        self._token = token
        try:
            parent = os.open(directory, _DIRECTORY)
        except OSError as exc:
            raise _cannot_open(directory, exc, "a sweep directory") from None
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(POINTS_DIR, 0o777, dir_fd=parent)
            self._fd = os.open(POINTS_DIR, _DIRECTORY, dir_fd=parent)
        except OSError as exc:
            raise _cannot_open(self.path, exc, f"the sweep's {POINTS_DIR}/") from None
        finally:
            os.close(parent)
        self._entries = set(os.listdir(self._fd))

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> PointsDirectory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def clean(self, tokens: set[str]) -> set[str]:
        """Remove the staging entries of ``tokens`` (sweeps killed before they ended).

        Returns:
            The tokens of which an entry is left (one holding more than a point's files).
        """
        left = set()
        for name in os.listdir(self._fd):
            match = _STAGED.fullmatch(name)
            if match is not None and match.group(1) in tokens and not self._remove(name):
                left.add(match.group(1))
        return left

    def write(self, identity: str, files: Mapping[str, Writer]) -> None:
        """Write a point's ``files`` (name -> writer) into a staging directory, then rename it
        to ``identity`` (replacing a directory of that name, left by a sweep killed before
        it stored the point's row).

        Raises:
            OutputError: when the files cannot be written (the staging directory is removed)
                or ``identity`` is not a directory accelsim wrote.
        """
        staging = f"{_NEW}{self._token}.{identity}"
        try:
            os.mkdir(staging, 0o777, dir_fd=self._fd)
            try:
                self._fill(staging, files)
                self._commit(staging, identity)
            finally:
                self._remove(staging)
        except OSError as exc:
            raise OutputError(
                f"{shown(str(self.path / identity))}: cannot write the point's results:"
                f" {_reason(exc)}"
            ) from None

    def discard(self, identity: str) -> None:
        """Remove the directory of point ``identity`` that was there when ``points/`` was
        opened (a point run again and not kept), if accelsim wrote it."""
        if identity in self._entries:
            self._remove(identity)

    def _fill(self, staging: str, files: Mapping[str, Writer]) -> None:
        directory = os.open(staging, _DIRECTORY, dir_fd=self._fd)
        try:
            for name, write in files.items():
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                handle = os.open(name, flags, 0o666, dir_fd=directory)
                with open(handle, "w", encoding="utf-8", newline="") as text:
                    write(text)
        finally:
            os.close(directory)

    def _commit(self, staging: str, identity: str) -> None:
        try:
            kind: int | None = os.stat(identity, dir_fd=self._fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            kind = None
        if kind is not None and not stat.S_ISDIR(kind):
            raise _not_ours(self.path / identity, "a point directory")
        if kind is None:
            os.rename(staging, identity, src_dir_fd=self._fd, dst_dir_fd=self._fd)
            return
        old = f"{_OLD}{self._token}.{identity}"
        os.rename(identity, old, src_dir_fd=self._fd, dst_dir_fd=self._fd)
        try:
            os.rename(staging, identity, src_dir_fd=self._fd, dst_dir_fd=self._fd)
        except OSError:
            os.rename(old, identity, src_dir_fd=self._fd, dst_dir_fd=self._fd)
            raise
        self._remove(old)

    def _remove(self, name: str) -> bool:
        """Remove the entry ``name`` of ``points/`` if it is a real directory holding only a
        point's files; whether it is gone."""
        try:
            directory = os.open(name, _DIRECTORY, dir_fd=self._fd)
        except FileNotFoundError:
            return True
        except OSError:  # a symbolic link or a file: not made here
            return False
        try:
            for entry in os.listdir(directory):
                mode = os.stat(entry, dir_fd=directory, follow_symlinks=False).st_mode
                if entry in POINT_FILES and stat.S_ISREG(mode):
                    os.unlink(entry, dir_fd=directory)
            os.rmdir(name, dir_fd=self._fd)
        except OSError:
            return False
        finally:
            os.close(directory)
        return True


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _cannot_open(path: Path, exc: OSError, what: str) -> OutputError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # O_NOFOLLOW met a link, or a file
        return _not_ours(path, what)
    return OutputError(f"{shown(str(path))}: cannot open {what}: {_reason(exc)}")


def _not_ours(path: Path, what: str) -> OutputError:
    return OutputError(
        f"{shown(str(path))}: a symbolic link or a file, not {what}; a sweep writes (and"
        " deletes) only in directories it made: move it away or choose another --out"
    )
