"""Command line: ``accelsim run | layer | suite | models | check``, and ``sweep |
collect | plot`` (:mod:`accelsim.cli_sweep`): the entry point, which parses the
arguments (:mod:`accelsim.cli_parser`), imports the command's module, runs it and
maps what it raises to a message and an exit code.

With :mod:`accelsim.cli_sweep`, the only module that prints or exits.  Bad input (any
:class:`~accelsim.errors.InputError`, an existing run directory) exits with
code 2 and one line per problem, ``file: key.path: problem (got value)``;
an internal error exits with code 1, a local worker process that died (killed by the
kernel when memory runs out) with code 3.  Set ``ACCELSIM_DEBUG=1`` (or ``true``,
``yes``) for tracebacks.
SIGINT, SIGTERM and SIGHUP remove unfinished results and exit ``128 +
signal`` with one line; a closed stdout (``| head``) exits 141 silently.
"""

from __future__ import annotations

import argparse
import errno
import gc
import importlib
import io
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO, cast

from accelsim.cli_parser import build_parser
from accelsim.collections_policy import fewer_collections
from accelsim.errors import InputError, LimitError, OutputError, WorkerError

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT = 0, 1, 2
EXIT_WORKER = 3
"""A local worker process died (:class:`~accelsim.errors.WorkerError`), as ``sweep``
and ``plan`` exit when one dies while simulating."""
EXIT_SIGNAL = 128
"""Stopped by signal N: exit ``128 + N`` (130 for Ctrl-C), as a shell reports it."""
SIGPIPE = 13
# The module and function of each command, imported when that command runs, so that
# a command loads none of what only another one needs
# (``tests/architecture/test_startup.py``).
COMMANDS = {
    "run": ("accelsim.cli_run", "cmd_run"),
    "layer": ("accelsim.cli_layer", "cmd_layer"),
    "calibrate": ("accelsim.cli_calibrate", "cmd_calibrate"),
    "suite": ("accelsim.cli_run", "cmd_suite"),
    "models": ("accelsim.cli_run", "cmd_models"),
    "check": ("accelsim.cli_run", "cmd_check"),
    "import": ("accelsim.cli_import", "cmd_import"),
    "compile": ("accelsim.cli_compile", "cmd_compile"),
    "init": ("accelsim.cli_run", "cmd_init"),
    "sweep": ("accelsim.cli_sweep", "cmd_sweep"),
    "collect": ("accelsim.cli_sweep", "cmd_collect"),
    "plot": ("accelsim.cli_sweep", "cmd_plot"),
    "plan": ("accelsim.cli_plan", "cmd_plan"),
}


class _Interrupted(BaseException):
    """A termination signal arrived (a BaseException, as KeyboardInterrupt is)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


def _on_signal(signum: int, _frame: object) -> None:
    # Only the first signal interrupts; later ones must not cut the clean-up short.
    for sig in _SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise _Interrupted(signum)


@contextmanager
def _signals_interrupt() -> Iterator[None]:
    """Turn SIGINT, SIGTERM and SIGHUP into :class:`_Interrupted` (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _on_signal) for sig in _SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def _fewer_collections(process_ends: bool) -> Iterator[None]:
    """Collect young objects less often while a command runs
    (:func:`~accelsim.collections_policy.fewer_collections`).

    When the process ends with the command (``process_ends``), the objects left
    are frozen (:func:`gc.freeze`) instead of collected: the interpreter's exit
    would otherwise traverse every one of them (pydantic's schemas, numpy's and
    the step's objects), 50-100 ms after a run on the reference machine, to free
    memory the operating system takes back anyway.  Output files are closed by
    then and the standard streams are still flushed at exit.
    """
    with fewer_collections():
        try:
            yield
        finally:
            if process_ends:
                gc.freeze()


def escaped(text: str, keep: str = "\n\t") -> str:
    """``text`` with every non-printable character but those in ``keep`` escaped
    (``\x1b``, ``\x07``, ``\u2028``), as error messages show them."""
    if text.isprintable():
        return text
    return "\n".join(
        line
        if line.isprintable()
        else "".join(c if c.isprintable() or c in keep else repr(c)[1:-1] for c in line)
        for line in text.split("\n")
    )


class _Escaping:
    """A text stream that writes ``stream`` with :func:`escaped` text (other attributes
    are the stream's): what accelsim prints cannot drive the terminal (set its title,
    clear its screen), whatever names the inputs hold."""

    def __init__(self, stream: TextIO, keep: str) -> None:
        self._stream = stream
        self._keep = keep

    def write(self, text: str) -> int:
        self._stream.write(escaped(text, self._keep))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _ClosedStdout(io.TextIOBase):
    """The stdout of a process started without one (``accelsim ... >&-``, where Python's
    ``sys.stdout`` is None): printing fails as on a closed descriptor, so a command's
    printing guard reports it (exit 2) instead of the report vanishing.  Flushing,
    which progress bars do before they draw on stderr, has nothing to write."""

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "stdout is closed")

    def flush(self) -> None:
        pass


@contextmanager
def _escaped_output() -> Iterator[None]:
    """Escape control characters in everything printed while a command runs: tables,
    ``wrote ...`` lines, CSV and warnings on stdout, messages on stderr.  Newlines and
    tabs are kept, and on stderr the carriage returns that redraw a progress bar.  A
    closed stdout fails when printed to (:class:`_ClosedStdout`); what goes to a closed
    stderr is dropped."""
    stdout, stderr = sys.stdout, sys.stderr
    out = _ClosedStdout() if stdout is None else stdout
    err = io.StringIO() if stderr is None else stderr
    sys.stdout = cast(TextIO, _Escaping(cast(TextIO, out), "\n\t"))
    sys.stderr = cast(TextIO, _Escaping(err, "\n\t\r"))
    try:
        yield
    finally:
        sys.stdout, sys.stderr = stdout, stderr


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``accelsim`` console script and ``python -m accelsim``.

    Without ``argv`` the command is the process's own (``sys.argv``) and the
    process ends after it (see :func:`_fewer_collections`); with ``argv`` (a
    caller in Python) nothing outlives the call.
    """
    # Parsing builds the parser, which imports pydantic: collect less from the start.
    with _fewer_collections(process_ends=argv is None), _escaped_output():
        try:
            args = build_parser().parse_args(argv)
            module, name = COMMANDS[args.command]
            command = getattr(importlib.import_module(module), name)
        except KeyboardInterrupt:
            # Ctrl-C while pydantic, NumPy and the command's modules load (before the
            # command's own handlers): nothing is written yet, so one line suffices.
            print("accelsim: stopped by SIGINT", file=sys.stderr)
            return EXIT_SIGNAL + signal.SIGINT
        return _run(command, args)


def _run(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run ``command``, mapping what it raises to a message and an exit code."""
    try:
        with _signals_interrupt():
            return command(args)
    except _Interrupted as exc:
        name = signal.Signals(exc.signum).name
        print(f"accelsim: stopped by {name}; unfinished results removed", file=sys.stderr)
        return EXIT_SIGNAL + exc.signum
    except BrokenPipeError:
        # The reader of stdout went away (``accelsim ... | head``): stop quietly,
        # as a program killed by SIGPIPE would, without a second error at exit.
        _silence_stdout()
        return EXIT_SIGNAL + SIGPIPE
    except InputError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_INPUT
    except (OutputError, LimitError) as exc:
        print(f"accelsim: {exc}" if isinstance(exc, LimitError) else exc, file=sys.stderr)
        return EXIT_INPUT
    except WorkerError as exc:
        # A worker planning a sweep or filtering plans (one that dies simulating, the
        # sweep and the plan search report with what is stored).
        print(f"accelsim: {exc}; rerun the same command", file=sys.stderr)
        return EXIT_WORKER
    except Exception as exc:
        if debugging():
            raise
        print(f"accelsim: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        print(
            "accelsim: rerun with ACCELSIM_DEBUG=1 for a traceback and report it", file=sys.stderr
        )
        return EXIT_INTERNAL


DEBUG_VALUES = ("1", "true", "yes")
"""Values of ``ACCELSIM_DEBUG`` (any letter case) that turn tracebacks on; ``0``,
``false``, ``no`` or an empty value keep them off."""


def debugging() -> bool:
    """Whether ``ACCELSIM_DEBUG`` asks for tracebacks of internal errors."""
    return os.environ.get("ACCELSIM_DEBUG", "").strip().lower() in DEBUG_VALUES


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
