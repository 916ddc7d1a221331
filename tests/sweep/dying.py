"""A command of accelsim run in a child process whose pool workers die on purpose, under
a deadline: the test fails, rather than hangs, if the command waits for a dead worker.

The child replaces a function before the pool's workers fork, so that a worker, never
the command's own process, SIGKILLs itself: ``kill_at`` (at a sweep's point of that
index), ``die_writing`` (after simulating that point's chunk, halfway through writing
its result, holding the result queue's lock), ``kill_at_exit`` (the worker of that
index, killed as the pool is left), ``kill_share`` (a plan search's filter
share, or a sweep's planning share, that does not start at 0, with the least
candidates or points filtered, or planned, in processes lowered)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass

from tests.conftest import ROOT

DEADLINE_S = 120.0
"""Seconds the child may take before the test fails as hung (a death is found within
a second or two; the commands take about a second)."""

_CHILD = """
import os, signal, struct, sys
import concurrent.futures.process as pool
from accelsim import cli
from accelsim.planner import search
from accelsim.sweep import plan, worker

how, where = sys.argv[1], int(sys.argv[2])
parent = os.getpid()

def die():
    os.kill(os.getpid(), signal.SIGKILL)

run_point, send_back = worker.run_point, pool._sendback_result
filter_share, verdicts = search._filter_share, plan._verdicts

def killing_run_point(task, files=True):
    if os.getpid() != parent and task.index == where:
        die()
    return run_point(task, files)

def dying_send_back(queue, work_id, result=None, exception=None, exit_pid=None):
    if any(outcome.task.index == where for outcome in result or ()):
        queue._wlock.acquire()
        os.write(queue._writer.fileno(), struct.pack("!i", 1 << 24) + bytes(1000))
        die()
    return send_back(queue, work_id, result, exception, exit_pid)

def killing_share(bounds):
    if bounds[0] > 0:
        die()
    return filter_share(bounds)

def killing_verdicts(expansion, start, stop):
    if start > 0:
        die()
    return verdicts(expansion, start, stop)

if how == "kill_at":
    worker.run_point = killing_run_point
elif how == "die_writing":
    pool._sendback_result = dying_send_back
elif how == "kill_at_exit":
    from accelsim.sweep import processes
    leave = processes.WorkerPool.__exit__
    def killing_exit(self, *exc):
        os.kill(self._workers[where].pid, signal.SIGKILL)
        return leave(self, *exc)
    processes.WorkerPool.__exit__ = killing_exit
elif how == "kill_share":
    search.FILTERED_APART = 2
    search._filter_share = killing_share
    plan.PARALLEL_POINTS = 2
    plan._verdicts = killing_verdicts
sys.exit(cli.main(sys.argv[3:]))
"""


@dataclass(frozen=True)
class Ended:
    """How the child ended: its exit code, its stderr's last line, its wall seconds."""

    code: int
    last_error: str
    seconds: float


def run_dying(how: str, where: int, *argv: str) -> Ended:
    """``accelsim argv`` in a child whose worker dies as ``how`` says (at point or
    share ``where``).

    Raises:
        subprocess.TimeoutExpired: when the child takes :data:`DEADLINE_S` (killed).
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, how, str(where), *argv],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        env=env,
        cwd=ROOT,
    )
    lines = child.stderr.replace("\r", "\n").strip().splitlines()
    return Ended(child.returncode, lines[-1] if lines else "", time.monotonic() - started)
