"""Figures drawn by a forked child that loads matplotlib while the parent simulates.

Before ``accelsim suite`` can draw, matplotlib has to be imported and its fonts
and text caches loaded: about 0.4-0.7 s on the 2-core reference machine, as
long as the drawing itself, and a quarter of a suite command.  On a machine
with a second core and ``os.fork``, :class:`PlotWorker` forks when it is
entered; the child imports :mod:`accelsim.report.plots` and draws a small
throw-away figure (which loads the fonts) while the parent simulates, then
waits for what to draw.  :meth:`PlotWorker.draw` only records a figure;
:meth:`PlotWorker.finish` hands the recorded figures to the child and waits for
it.  A figure the child did not report as drawn (no fork, one core, other
threads running, the child died, the plot raised) is drawn by the parent
in-process, so an error in a plot surfaces exactly as without the worker, and
the files are the same either way (``tests/report/test_plot_worker.py``).

The child never returns into the caller's code: it ends with :func:`os._exit`
(no ``atexit`` handlers, no flushing of the parent's buffered output), takes
the default action on the signals the command line catches (a Ctrl-C to the
process group ends it), and exits as soon as its request pipe closes, even when
the parent died.  Leaving the ``with`` block kills a child still running.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from pathlib import Path
from types import TracebackType

from accelsim.report import plots
from accelsim.report.figure import FigureSize

# The figures a worker can draw: the name that crosses the pipe, and the function
# of :mod:`accelsim.report.plots` that draws it (looked up when drawing).
FIGURES = {"suite": "plot_suite", "speedup": "plot_speedup"}

# Signals the command line turns into exceptions; the child takes their default action.
_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


def _cores() -> int:
    """Processors this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class PlotWorker:
    """Draws figures in a forked child where that can help; see the module docstring."""

    def __init__(self) -> None:
        self._pid: int | None = None
        self._requests = -1
        self._answers = -1
        self._figures: list[tuple[str, str, str, str, str, str]] = []

    def __enter__(self) -> PlotWorker:
        # Forking a process that runs other threads is unsafe (a lock one of them
        # holds stays held in the child): then the parent draws.
        if hasattr(os, "fork") and _cores() >= 2 and threading.active_count() == 1:
            self._fork()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._end_child(kill=True)

    def draw(
        self,
        figure: str,
        csv_path: Path,
        path: Path,
        title: str,
        fmt: str = "png",
        size: FigureSize = FigureSize.PAGE,
    ) -> None:
        """Record ``figure`` (a name in :data:`FIGURES`) of ``csv_path`` for ``path``, in
        format ``fmt`` and ``size`` wide."""
        if figure not in FIGURES:
            raise ValueError(f"unknown figure {figure!r}")
        self._figures.append((figure, str(csv_path), str(path), title, fmt, size.value))

    def finish(self) -> None:
        """Draw every recorded figure: by the child when it can, else in this process."""
        drawn: set[int] = set()
        if self._pid is not None:
            drawn = self._draw_in_child()
        for index, request in enumerate(self._figures):
            if index not in drawn:
                _plot(*request)
        self._figures.clear()

    def _fork(self) -> None:
        requests_read, requests_write = os.pipe()
        answers_read, answers_write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            code = 1
            try:
                os.close(requests_write)
                os.close(answers_read)
                _serve(requests_read, answers_write)
                code = 0
            finally:
                os._exit(code)
        os.close(requests_read)
        os.close(answers_write)
        self._pid, self._requests, self._answers = pid, requests_write, answers_read

    def _draw_in_child(self) -> set[int]:
        """Send the figures to the child; the indices it reports as drawn."""
        try:
            with os.fdopen(self._requests, "w", encoding="utf-8") as requests:
                self._requests = -1
                json.dump(self._figures, requests)
            with os.fdopen(self._answers, encoding="utf-8") as answers:
                self._answers = -1
                reply = answers.read()
        except OSError:  # the child is gone: the parent draws
            reply = ""
        self._end_child(kill=False)
        return {int(line) for line in reply.split()}

    def _end_child(self, kill: bool) -> None:
        for fd in (self._requests, self._answers):
            if fd >= 0:
                os.close(fd)
        self._requests = self._answers = -1
        if self._pid is None:
            return
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
        os.waitpid(self._pid, 0)
        self._pid = None


def _plot(figure: str, csv_path: str, path: str, title: str, fmt: str, size: str) -> None:
    draw = getattr(plots, FIGURES[figure])
    draw(Path(csv_path), Path(path), title, fmt, FigureSize(size))


def _serve(requests_fd: int, answers_fd: int) -> None:
    """The child: warm matplotlib up, then draw what the parent sends and say which."""
    for name in _SIGNALS:
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    plots.warm_up()
    with os.fdopen(requests_fd, encoding="utf-8") as requests:
        text = requests.read()
    figures = json.loads(text) if text else []
    with os.fdopen(answers_fd, "w", encoding="utf-8") as answers:
        for index, request in enumerate(figures):
            try:
                _plot(*request)
            except Exception:  # the parent draws it again and reports the error
                continue
            answers.write(f"{index}\n")
            answers.flush()
