"""Read an input file as text, refusing what is not a regular UTF-8 file of sane size.

Every input file (YAML, topology CSV, trace CSV) is read through
:func:`read_text`: a FIFO would block forever, ``/dev/zero`` would exhaust
memory and a binary file would fail to decode, so each is rejected with one
``file: problem`` line before anything is read.  :func:`display_path` is how
messages name a file.
"""

from __future__ import annotations

import functools
import os
import stat
from pathlib import Path

from accelsim.errors import InputError

MAX_INPUT_BYTES = 16 * 1024 * 1024
"""Largest input file read (16 MiB; the biggest shipped file is under 40 KiB)."""


def display_path(path: Path) -> str:
    """Show ``path`` relative to the working directory when it lies below it."""
    return _display(str(path), os.getcwd())


@functools.lru_cache(maxsize=256)
def _display(path: str, cwd: str) -> str:
    try:
        relative = os.path.relpath(path, cwd)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative


def read_text(path: Path, error: type[InputError], name: str, where: str = "") -> str:
    """The UTF-8 text of the regular file ``path``.

    Args:
        path: The file.
        error: The :class:`InputError` subclass to raise.
        name: The file as messages name it (the problem's file).
        where: The key path the problem is reported at (empty for the whole file).

    Raises:
        InputError: of type ``error`` when the file is missing, not a regular
            file, larger than :data:`MAX_INPUT_BYTES`, unreadable or not UTF-8.
    """

    def problem(message: str) -> InputError:
        # A file named by another file's key shows its path as the value.
        return (
            error.single(name, where, message, str(path))
            if where
            else error.single(name, where, message)
        )

    too_big = f"larger than {MAX_INPUT_BYTES // 2**20} MiB, not an input file"
    try:
        info = path.stat()
    except FileNotFoundError:
        raise problem("file not found") from None
    except OSError as exc:
        raise problem(f"cannot read file: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise problem("not a regular file")
    if info.st_size > MAX_INPUT_BYTES:
        raise problem(too_big)
    try:
        # O_NONBLOCK: a FIFO swapped in after the check above must not block the open.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        raise problem(f"cannot read file: {exc.strerror}") from None
    if len(data) > MAX_INPUT_BYTES:
        raise problem(too_big)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise problem(f"not a UTF-8 text file (byte {exc.start} cannot be decoded)") from None
