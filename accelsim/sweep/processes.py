"""Local worker processes: forked where the platform allows, dying with their parent,
and watched, so that a worker that dies fails the work promptly instead of hanging it.

Forked workers start with what the parent already imported and parsed; on Linux
they are killed with the parent, even by SIGKILL, so a killed sweep leaves no
orphans.  The sweep's process pool (:class:`~accelsim.sweep.executors.PoolExecutor`),
a big sweep's planning (:func:`~accelsim.sweep.plan.plan_sweep`) and the plan
search's filter (:func:`~accelsim.planner.search.filter_in_parallel`) use them.

A worker restores the default action of SIGTERM and ignores SIGINT and SIGHUP: the
command line's handlers (:mod:`accelsim.cli`), inherited by a fork, would turn
Python's own SIGTERM of the surviving workers of a broken pool into an exception the
worker reports and survives, then ignore every further signal; such a worker blocked
writing a result nobody read any more, while the parent waited for it to exit.
Ctrl-C reaches the parent, which stops the workers.

:class:`WorkerPool` looks at its workers every :data:`POLL_S` while it waits for
results and stops a pool whose worker died (or that Python found broken) by killing
the workers left, never waiting for them: a worker killed while writing its result
leaves a partial message that Python's pool waits for forever, and one killed while
holding a queue's lock blocks the others.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.connection
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import AbstractContextManager
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar

from accelsim.errors import WorkerError

_PR_SET_PDEATHSIG = 1  # linux/prctl.h

POLL_S = 1.0
"""Seconds between a pool's checks of its workers while it waits for results."""

STOP_S = 5.0
"""Seconds a pool whose work is done gives its workers to exit before it kills them,
and gives Python's thread of the pool to end once they are gone."""

_T = TypeVar("_T")


def can_fork() -> bool:
    """Whether worker processes can be forked here."""
    return "fork" in multiprocessing.get_all_start_methods()


def process_pool(jobs: int, purpose: str) -> WorkerPool:
    """A watched pool of ``jobs`` worker processes, forked where the platform allows;
    ``purpose`` (``planning the sweep``) begins the message of a worker's death."""
    return WorkerPool(jobs, purpose)


class WorkerPool(AbstractContextManager["WorkerPool"]):
    """A process pool that finds a dead worker within :data:`POLL_S`.

    Its iterators (:meth:`completed`, :meth:`ordered`) raise
    :class:`~accelsim.errors.WorkerError` naming how a worker ended; leaving the
    ``with`` block after an error kills the workers left instead of waiting for them.
    """

    def __init__(self, jobs: int, purpose: str) -> None:
        context = multiprocessing.get_context("fork" if can_fork() else None)
        self.purpose = purpose
        self._pool = ProcessPoolExecutor(
            max_workers=jobs, mp_context=context, initializer=_start, initargs=(os.getpid(),)
        )
        self._workers: list[BaseProcess] = []
        self._failed = False

    def submit(self, fn: Callable[..., _T], *args: Any) -> Future[_T]:
        """``fn(*args)`` in a worker.

        Raises:
            WorkerError: when a worker died already.
        """
        try:
            future = self._pool.submit(fn, *args)
        except BrokenProcessPool:
            raise self._lost() from None
        # Forked workers all start at the first submission; others one by one.
        known = {p.pid for p in self._workers}
        self._workers += [p for p in self._pool._processes.values() if p.pid not in known]
        return future

    def map(self, fn: Callable[[Any], _T], items: Sequence[Any]) -> list[_T]:
        """``fn`` of each item, each in a worker, in the items' order.

        Raises:
            WorkerError: when a worker died.
        """
        return list(self.ordered([self.submit(fn, item) for item in items]))

    def completed(self, futures: Sequence[Future[_T]]) -> Iterator[Future[_T]]:
        """``futures`` as they finish (in any order), each with its result.

        Raises:
            WorkerError: when a worker died, after the futures finished before.
        """
        finished: queue.SimpleQueue[Future[_T]] = queue.SimpleQueue()
        for future in futures:
            future.add_done_callback(finished.put)
        for _ in futures:
            while True:
                try:
                    future = finished.get(timeout=POLL_S)
                    break
                except queue.Empty:
                    if self._dead():
                        raise self._lost() from None
            if isinstance(future.exception(), BrokenProcessPool):
                raise self._lost()
            yield future

    def ordered(self, futures: Sequence[Future[_T]]) -> Iterator[_T]:
        """The results of ``futures`` in their order.

        Raises:
            WorkerError: when a worker died.
        """
        for future in futures:
            while not wait([future], timeout=POLL_S).done:
                if self._dead():
                    raise self._lost()
            if isinstance(future.exception(), BrokenProcessPool):
                raise self._lost()
            yield future.result()

    def _dead(self) -> list[BaseProcess]:
        """The workers that have ended (their sentinels say so without reaping them)."""
        ready = multiprocessing.connection.wait([p.sentinel for p in self._workers], timeout=0)
        return [p for p in self._workers if p.sentinel in ready]

    def _lost(self) -> WorkerError:
        """The error of a pool a worker of which died (marking the pool failed)."""
        self._failed = True
        dead = self._dead()
        # Python's pool sends SIGTERM to the workers left once it finds one dead:
        # the cause is the death that is not such a SIGTERM, if any.
        dead.sort(key=lambda p: _exit_code(p) == -signal.SIGTERM)
        how = _ended(_exit_code(dead[0])) if dead else "ended abruptly"
        return WorkerError(f"{self.purpose}: a worker process {how}")

    def __exit__(self, *exc: object) -> None:
        """Stop the workers: after the work (no error), let them exit, killing any
        left after :data:`STOP_S`; after an error, or a worker's death, kill them."""
        graceful = exc[0] is None and not self._failed
        # Python's pool's internals (the same from 3.10 to 3.13): its thread and the
        # queue of results.
        internals: Any = self._pool
        manager: threading.Thread | None = internals._executor_manager_thread
        results = internals._result_queue
        self._pool.shutdown(wait=False, cancel_futures=True)
        if graceful:
            deadline = time.monotonic() + STOP_S
            for process in self._workers:
                process.join(max(0.0, deadline - time.monotonic()))
        dead = self._dead()
        for process in self._workers:
            if process not in dead:
                process.kill()
        for process in self._workers:
            process.join()
        # A worker killed while writing its result left a partial message, which
        # Python's thread of the pool reads until the writer's last copy, this
        # process's, is closed: it then ends (at exit, Python waits for it).
        if results is not None:
            results._writer.close()
        if manager is not None:
            manager.join(STOP_S)


def _exit_code(process: BaseProcess) -> int | None:
    """The exit code of an ended worker, once its status is read (by this thread or
    by Python's thread of the pool), or None after a second."""
    deadline = time.monotonic() + 1.0
    while process.exitcode is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return process.exitcode


def _ended(code: int | None) -> str:
    """How a worker that exited with ``code`` ended, in words."""
    if code is None:
        return "ended abruptly"
    if code >= 0:
        return f"exited with code {code}"
    number = -code
    try:
        name = signal.Signals(number).name
    except ValueError:
        return f"was killed by signal {number}"
    why = "; the kernel does this when memory runs out" if number == signal.SIGKILL else ""
    return f"was killed by {name} (signal {number}{why})"


def _start(parent: int) -> None:
    """Pool worker initializer: the default action of SIGTERM, SIGINT and SIGHUP
    ignored (the parent stops its workers), and on Linux, be killed with the parent
    process, even by SIGKILL."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for name in ("SIGINT", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the call
        os._exit(1)
