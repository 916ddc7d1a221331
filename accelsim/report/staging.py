"""Atomic output directories: fill a hidden staging sibling, then commit it by rename.

The guarantees, for every directory accelsim writes (a run, a suite):

* A name becomes one path component below the output directory, or is refused:
  nothing is written outside ``--out``.
* Readers see the old directory or the complete new one, never a half-written
  one: all files go into a hidden ``.accelsim-*`` sibling, which is renamed
  into place only when complete and is removed on any failure or signal.
* Without ``force`` an existing directory is never replaced, even by a
  concurrent run: the commit is a rename that fails if the target exists
  (``renameat2(RENAME_NOREPLACE)`` on Linux; elsewhere ``rename``, which
  never replaces a non-empty directory, after an existence check).  Of two
  runs racing for one name, exactly one succeeds.
* With ``force`` the old directory is renamed aside, the new one renamed in,
  and only then is the old one deleted; SIGINT, SIGTERM and SIGHUP are held
  back during these steps, so a signal cannot leave neither of them.
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from accelsim.config.base import MAX_NAME_CHARS, NAME_PATTERN
from accelsim.errors import OutputError

PREFIX = ".accelsim-"
"""Start of the name of every staging directory and of an old directory being deleted."""

_RENAME_NOREPLACE = 1
_AT_FDCWD = -100
_HELD_SIGNALS = {
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
}


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def child_directory(parent: Path, name: str) -> Path:
    """``parent / name`` for a name that is one plain path component.

    Raises:
        OutputError: for a name that is not a valid run name (empty, ``..``, a
            path, too long, or with characters other than letters, digits and
            ``._-``): such a name could point outside ``parent``.
    """
    if len(name) > MAX_NAME_CHARS or not NAME_PATTERN.fullmatch(name):
        raise OutputError(
            f"{parent}: cannot write results for {name[:MAX_NAME_CHARS]!r}: a run or model"
            f" name is 1 to {MAX_NAME_CHARS} letters, digits, '.', '_' or '-', starting with a"
            " letter or digit"
        )
    return parent / name


def check_writable(directory: Path, force: bool) -> None:
    """Refuse early to overwrite an existing directory unless ``force``.

    The commit checks again (a concurrent run may create it meanwhile).

    Raises:
        OutputError: if ``directory`` exists and ``force`` is false.
    """
    if os.path.lexists(directory) and not force:
        raise _exists(directory)


def _exists(directory: Path) -> OutputError:
    return OutputError(
        f"{directory}: run directory exists; pass --force to overwrite it"
        " or --out to write elsewhere"
    )


@contextmanager
def staged_directory(target: Path, force: bool) -> Iterator[Path]:
    """Yield an empty hidden sibling of ``target`` to fill; commit it on success.

    The old ``target`` (replaced only with ``force``) survives any failure, and
    the staging directory is removed on any failure, exception or signal
    (that the caller turns into an exception).

    Raises:
        OutputError: if ``target`` exists without ``force`` (now or at the
            commit) or cannot be written.
    """
    check_writable(target, force)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{target.name[:32]}.", dir=target.parent))
        staging.chmod(0o777 & ~_umask())
    except OSError as exc:
        raise OutputError(f"{target.parent}: cannot create the results directory: {exc}") from None
    try:
        yield staging
        with _signals_held():
            _commit(staging, target, force)
    except OSError as exc:
        raise OutputError(f"{target}: cannot write results: {exc}") from None
    finally:
        if os.path.lexists(staging):
            shutil.rmtree(staging, ignore_errors=True)


def _commit(staging: Path, target: Path, force: bool) -> None:
    """Rename ``staging`` to ``target``; with ``force`` replace it: aside, in, delete."""
    # A concurrent forced run can move the target in again between our steps;
    # each attempt either commits or finds a newer directory to replace.
    for _ in range(8):
        try:
            rename_noreplace(staging, target)
            return
        except FileExistsError:
            if not force:
                raise _exists(target) from None
        aside = target.parent / f"{PREFIX}old-{secrets.token_hex(8)}"
        try:
            os.rename(target, aside)
        except FileNotFoundError:
            continue
        try:
            rename_noreplace(staging, target)
        except FileExistsError:
            shutil.rmtree(aside, ignore_errors=True)
            continue
        except OSError:
            os.rename(aside, target)
            raise
        _remove(aside)
        return
    raise OutputError(f"{target}: other runs kept replacing it; not written")


def _remove(path: Path) -> None:
    """Delete a replaced directory (a symbolic link is removed, not followed)."""
    if path.is_symlink() or not path.is_dir():
        path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)


def _libc_renameat2() -> Any:
    """glibc's ``renameat2``, or None off Linux or before glibc 2.28."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    function = getattr(libc, "renameat2", None)
    if function is not None:
        path, fd = ctypes.c_char_p, ctypes.c_int
        function.argtypes = [fd, path, fd, path, ctypes.c_uint]
        function.restype = ctypes.c_int
    return function


_RENAMEAT2 = _libc_renameat2()


def rename_noreplace(source: Path, target: Path) -> None:
    """Rename ``source`` to ``target``, failing if ``target`` exists.

    Raises:
        FileExistsError: if ``target`` exists (a file, a link or a directory).
        OSError: for any other failure.
    """
    if _RENAMEAT2 is not None:
        source_b, target_b = os.fsencode(source), os.fsencode(target)
        if _RENAMEAT2(_AT_FDCWD, source_b, _AT_FDCWD, target_b, _RENAME_NOREPLACE) == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOSYS):  # else: the file system lacks the flag
            raise OSError(code, os.strerror(code), str(target))
    if os.path.lexists(target):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(target))
    try:
        # Between the check and here, only an empty directory can be replaced:
        # rename() fails on a non-empty one and on a file.
        os.rename(source, target)
    except OSError as exc:
        if exc.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
            raise FileExistsError(exc.errno, exc.strerror, str(target)) from None
        raise


@contextmanager
def _signals_held() -> Iterator[None]:
    """Defer SIGINT, SIGTERM and SIGHUP until the block is done (where supported)."""
    block = getattr(signal, "pthread_sigmask", None)
    if block is None:
        yield
        return
    previous = block(signal.SIG_BLOCK, _HELD_SIGNALS)
    try:
        yield
    finally:
        block(signal.SIG_SETMASK, previous)
