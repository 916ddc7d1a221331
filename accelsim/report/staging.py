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
* With ``force`` the old directory is renamed aside
  (``.accelsim-old.<token>.<name>``), the new one renamed in, and only then is
  the old one renamed to ``.accelsim-del.<token>`` and deleted; SIGINT, SIGTERM
  and SIGHUP are held back during these steps, so a signal cannot leave neither
  of them.  A SIGKILL between the steps leaves the old directory aside: the
  next write of the same name puts it back (the new one was never committed)
  or finishes deleting it (it was).
* A single output file (:func:`staged_file`: ``collect --csv``, ``plot``,
  ``import``, ``calibrate``) is written to a hidden temporary file beside it and
  renamed onto it when complete, so an interrupted write never truncates the
  earlier file; a symbolic link there is replaced itself, never written through.

Staging entries are ``.accelsim-new.<name>.<random>``; messages show paths cut
to :data:`accelsim.errors.MAX_SHOWN` characters.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import secrets
import shutil
import signal
import stat
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from accelsim.config.base import MAX_NAME_CHARS, NAME_PATTERN
from accelsim.errors import InputError, OutputError, shown

PREFIX = ".accelsim-"
"""Start of the name of every staging entry and of an old directory set aside or being deleted."""
NEW, OLD, DELETED = f"{PREFIX}new.", f"{PREFIX}old.", f"{PREFIX}del."
_ASIDE = re.compile(rf"{re.escape(OLD)}[0-9a-f]{{16}}\.(.+)", re.DOTALL)

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
            f"{shown(str(parent))}: cannot write results for {shown(repr(name))}: a run or model"
            f" name is 1 to {MAX_NAME_CHARS} letters, digits, '.', '_' or '-', starting with a"
            " letter or digit"
        )
    return parent / name


def check_writable(directory: Path, force: bool) -> None:
    """Refuse early to overwrite an existing directory unless ``force``.

    First puts back an earlier run that a killed forced commit left aside (see
    :func:`recover`).  The commit checks again (a concurrent run may create the
    directory meanwhile).

    Raises:
        OutputError: if ``directory`` exists and ``force`` is false.
    """
    restored = recover(directory)
    if os.path.lexists(directory) and not force:
        raise _exists(directory, restored)


def _exists(directory: Path, restored: str | None = None) -> OutputError:
    put_back = (
        f" (put back from {shown(restored)}, where a killed 'run --force' had moved it)"
        if restored
        else ""
    )
    return OutputError(
        f"{shown(str(directory))}: run directory exists{put_back}; pass --force to overwrite it"
        " or --out to write elsewhere"
    )


def recover(target: Path) -> str | None:
    """Finish what a forced commit killed between its renames (SIGKILL, power cut) left.

    A directory ``.accelsim-old.<token>.<name>`` beside ``target`` is the
    earlier ``target``, set aside.  If ``target`` is missing, the new directory
    was never committed: the earlier one is renamed back (one of them, should
    there be several; the others stay).  If ``target`` exists, the new one was
    committed and the earlier one is deleted, as the forced commit would have
    done.  Only real directories of that name are touched (a symbolic link is
    left alone).

    Returns:
        The name of the directory put back, or None.

    Raises:
        OutputError: when the earlier directory cannot be put back.
    """
    try:
        names = sorted(os.listdir(target.parent))
    except OSError:
        return None
    committed, restored = os.path.lexists(target), None
    for name in names:
        match = _ASIDE.fullmatch(name)
        aside = target.parent / name
        if match is None or match.group(1) != target.name or not _is_directory(aside):
            continue
        if committed:
            _discard(aside)
            continue
        if restored is not None:
            continue
        try:
            rename_noreplace(aside, target)
        except OSError as exc:
            raise OutputError(
                f"{shown(str(aside))}: holds the earlier {target.name!r}, set aside by a killed"
                f" 'run --force', and cannot be put back: {exc.strerror}"
            ) from None
        restored = name
    return restored


def _is_directory(path: Path) -> bool:
    """Whether ``path`` is a directory itself (not a symbolic link to one)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


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
        staging = Path(tempfile.mkdtemp(prefix=f"{NEW}{target.name[:32]}.", dir=target.parent))
        staging.chmod(0o777 & ~_umask())
    except OSError as exc:
        raise OutputError(
            f"{shown(str(target.parent))}: cannot create the results directory: {_reason(exc)}"
        ) from None
    try:
        yield staging
        with _signals_held():
            _commit(staging, target, force)
    except OSError as exc:
        raise OutputError(f"{shown(str(target))}: cannot write results: {_reason(exc)}") from None
    finally:
        if os.path.lexists(staging):
            shutil.rmtree(staging, ignore_errors=True)


@contextmanager
def staged_file(target: Path, replace: bool = True) -> Iterator[Path]:
    """Yield the path to write ``target``'s new content to; put it in place when the block ends.

    For a regular file, a symbolic link or a new file that is a hidden temporary
    file beside ``target``, renamed onto it only when the block completes: a
    failure, an exception or a signal leaves the earlier entry as it was and
    removes the temporary file.  A symbolic link is replaced itself, never
    followed (its target, dangling or not, is left alone); an existing file keeps
    its permissions.  Without ``replace`` an existing entry (a file, a link) is
    refused, now and at the rename, which never replaces one made meanwhile.  A
    device or pipe (``/dev/stdout``, also through a link) is written directly.
    Missing parent directories are created.

    Raises:
        OutputError: if ``target`` exists without ``replace``, is a directory (or a link
            to one) or a read-only file, or cannot be written (the path and the reason).
    """
    where = shown(str(target))
    kind, mode = check_file(target, replace)
    if kind == "device":
        try:
            yield target
        except OSError as exc:
            raise OutputError(f"{where}: cannot write: {_reason(exc)}") from None
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=f"{NEW}{target.name[:32]}.", dir=target.parent)
        os.close(handle)
    except OSError as exc:
        raise OutputError(f"{where}: cannot write: {_reason(exc)}") from None
    temporary = Path(name)
    try:
        yield temporary
        os.chmod(temporary, mode)
        if replace:
            os.replace(temporary, target)
        else:
            try:
                rename_noreplace(temporary, target)
            except FileExistsError:
                raise _file_exists(where, "file") from None  # made meanwhile
    except OSError as exc:
        raise OutputError(f"{where}: cannot write: {_reason(exc)}") from None
    finally:
        if os.path.lexists(temporary):
            os.unlink(temporary)


def check_file(target: Path, replace: bool) -> tuple[str, int]:
    """Refuse early an output file :func:`staged_file` would refuse; say what it is.

    Returns:
        What ``target`` is (``new``, ``file``, ``link`` or ``device``) and the mode its
        replacement gets (an existing file's own).

    Raises:
        OutputError: for an existing file or link without ``replace``, a directory (or a
            link to one), a read-only file, or a path that cannot be looked at (under a
            file, too long).
    """
    where = shown(str(target))
    fresh = 0o666 & ~_umask()
    try:
        entry = os.lstat(target)
    except FileNotFoundError:
        return "new", fresh
    except OSError as exc:
        raise OutputError(f"{where}: cannot write: {_reason(exc)}") from None
    kind, mode, followed = "file", stat.S_IMODE(entry.st_mode), entry.st_mode
    if stat.S_ISLNK(entry.st_mode):
        kind, mode = "link", fresh
        try:
            followed = os.stat(target).st_mode
        except OSError:
            followed = stat.S_IFREG  # dangling, or a loop of links: replaced like a file's
    if stat.S_ISDIR(followed):
        raise OutputError(f"{where}: cannot write: is a directory")
    if not stat.S_ISREG(followed):
        return "device", fresh
    if not replace:
        raise _file_exists(where, kind)
    if kind == "file" and not os.access(target, os.W_OK):
        raise OutputError(f"{where}: cannot write: the file is read-only")
    return kind, mode


def _file_exists(where: str, kind: str) -> OutputError:
    if kind == "link":
        return OutputError(
            f"{where}: exists (a symbolic link); pass --force to replace the link"
            " (never its target)"
        )
    return OutputError(f"{where}: exists; pass --force to replace it")


def write_verified(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` as UTF-8 and, for a regular file, read it back.

    Raises:
        OSError: when it cannot be written, or reads back otherwise.
    """
    data = text.encode("utf-8")
    path.write_bytes(data)
    if path.is_file() and path.read_bytes() != data:
        raise OSError(errno.EIO, "the file reads back otherwise than written")


def not_an_input(target: Path, option: str, inputs: Mapping[str, Path]) -> None:
    """Refuse an output that is one of the command's ``inputs`` (what each is, ``the
    model file``, and its path): the same file, also through a symbolic or a hard link,
    with or without ``--force``.

    Raises:
        InputError: blamed on ``option`` (``--out``), naming the input and the path.
    """
    for what, path in inputs.items():
        try:
            same = os.path.samefile(target, path)
        except (OSError, ValueError):
            same = False
        if same:
            raise InputError.single(
                option, "", f"is {what}, an input of this command; write elsewhere", str(target)
            )


@contextmanager
def staged_entries(directory: Path, names: Sequence[str]) -> Iterator[Path]:
    """Yield an empty hidden directory inside ``directory`` to make ``names`` in; move
    each of them into ``directory`` when the block ends (``accelsim init``).

    The staging directory is unique to the call, so concurrent calls never touch
    each other's.  Each entry is renamed in without replacing anything: of
    several calls into one directory, the one that moves the first entry in
    moves them all, and the others fail.  On any failure, exception or signal
    the call removes only what it made: its staging directory, the entries it
    moved in, and ``directory`` if it made it and left it empty.

    Raises:
        OutputError: if ``directory`` holds one of ``names`` (now or at the rename), or
            cannot be written (the path and the reason).
    """
    where = shown(str(directory))
    taken = [name for name in names if os.path.lexists(directory / name)]
    if taken:
        raise _holds(where, taken)
    made = not os.path.lexists(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f"{NEW}{directory.name[:32]}.", dir=directory))
    except OSError as exc:
        if made:
            with suppress(OSError):
                directory.rmdir()
        raise OutputError(f"{where}: cannot write: {_reason(exc)}") from None
    moved: list[Path] = []
    done = False
    try:
        yield staging
        with _signals_held():
            for name in names:
                rename_noreplace(staging / name, directory / name)
                moved.append(directory / name)
            done = True
    except FileExistsError:
        raise _holds(where, [name for name in names if directory / name not in moved]) from None
    except OSError as exc:
        raise OutputError(
            f"{where}: cannot write: {_reason(exc)}; removed what was written"
        ) from None
    finally:
        with _signals_held():
            _remove_made(staging, [] if done else moved, made and not done)


def _holds(where: str, names: Sequence[str]) -> OutputError:
    listed = " and ".join(f"{name}/" for name in names)
    return OutputError(f"{where}: already holds {listed}; choose a new directory")


def _remove_made(staging: Path, moved: list[Path], directory_made: bool) -> None:
    """Remove a staging directory, the entries moved in before a failure and the
    directory they were moved into, if the failed call made it and it is empty."""
    shutil.rmtree(staging, ignore_errors=True)
    for entry in moved:
        shutil.rmtree(entry, ignore_errors=True)
    if directory_made:
        with suppress(OSError):  # not empty: another process wrote into it meanwhile
            os.rmdir(staging.parent)


def _reason(exc: OSError) -> str:
    """What went wrong, without the path (messages show it once, cut)."""
    return exc.strerror or str(exc)


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
        aside = target.parent / f"{OLD}{secrets.token_hex(8)}.{target.name}"
        try:
            os.rename(target, aside)
        except FileNotFoundError:
            continue
        try:
            rename_noreplace(staging, target)
        except FileExistsError:
            _discard(aside)
            continue
        except OSError:
            os.rename(aside, target)
            raise
        _discard(aside)
        return
    raise OutputError(f"{shown(str(target))}: other runs kept replacing it; not written")


def _discard(aside: Path) -> None:
    """Delete a replaced directory set aside: renamed to ``.accelsim-del.<token>`` first, so a
    half-deleted one is never taken for an earlier run to put back."""
    doomed = aside.parent / f"{DELETED}{secrets.token_hex(8)}"
    try:
        os.rename(aside, doomed)
    except FileNotFoundError:
        return
    _remove(doomed)


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
