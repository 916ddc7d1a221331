"""Local worker processes: forked where the platform allows, dying with their parent.

Forked workers start with what the parent already imported and parsed; on Linux
they are killed with the parent, even by SIGKILL, so a killed sweep leaves no
orphans.  The sweep's process pool (:class:`~accelsim.sweep.executors.PoolExecutor`)
and a big sweep's planning (:func:`~accelsim.sweep.plan.plan_sweep`) use them.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
from concurrent.futures import ProcessPoolExecutor

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def can_fork() -> bool:
    """Whether worker processes can be forked here."""
    return "fork" in multiprocessing.get_all_start_methods()


def process_pool(jobs: int) -> ProcessPoolExecutor:
    """A pool of ``jobs`` worker processes, forked where the platform allows."""
    context = multiprocessing.get_context("fork" if can_fork() else None)
    return ProcessPoolExecutor(
        max_workers=jobs, mp_context=context, initializer=_die_with, initargs=(os.getpid(),)
    )


def _die_with(parent: int) -> None:
    """Pool worker initializer: on Linux, be killed with the parent process, even by
    SIGKILL; elsewhere a no-op."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the call
        os._exit(1)
