"""Where sweep points run: in this process, a local process pool, or a Dask cluster.

Each executor takes chunks of tasks and yields each chunk's outcomes as it
finishes (in any order).  All of them run :func:`accelsim.sweep.worker.run_chunk`,
so the stored results do not depend on the executor.
"""

from __future__ import annotations

import importlib
import itertools
import logging
import math
import threading
import time
from collections.abc import Hashable, Iterator, Sequence
from concurrent.futures import CancelledError
from contextlib import AbstractContextManager, ExitStack, suppress
from dataclasses import dataclass
from typing import Any

from accelsim.errors import ClusterError, InputError, WorkerError
from accelsim.sweep.plan import PointTask
from accelsim.sweep.processes import process_pool
from accelsim.sweep.worker import PointOutcome, run_chunk

CLUSTER_HINT = (
    "needs the optional cluster extra: pip install 'accelsim[cluster]' (dask, distributed)"
)


START_S = 30.0
"""Seconds a Dask sweep waits for the scheduler given with ``--scheduler`` to take its
client (connection, handshake and first answer) before it gives up (exit 2)."""

CONNECT_S = 20.0
"""Seconds Dask itself keeps trying to connect to a scheduler that refuses it."""

WORKERLESS_S = 30.0
"""Seconds a Dask sweep waits with no worker in the cluster before it gives up."""

POLL_S = 5.0
"""Seconds between a Dask sweep's checks for finished chunks and live workers."""


def chunked(
    tasks: Sequence[PointTask], workers: int, runs: Sequence[Hashable] | None = None
) -> list[list[PointTask]]:
    """Split ``tasks`` into chunks: about eight per worker, at most 16 points each,
    so a round trip is amortised and a killed sweep loses little work.

    ``runs`` (one key per task) groups consecutive tasks of equal key into runs, which
    a chunk holds whole where they fit: the points of a run differ only along the
    sweep's fastest dimension and often simulate the same step, which a worker's memo
    then serves (:mod:`accelsim.timing.engines`) instead of another worker simulating
    it again.  A run longer than a chunk is cut into chunks.
    """
    size = max(1, min(16, math.ceil(len(tasks) / (8 * max(workers, 1)))))
    keys = runs if runs is not None else range(len(tasks))
    pieces: list[list[PointTask]] = []
    for _, members in itertools.groupby(zip(keys, tasks, strict=True), key=lambda kt: kt[0]):
        run = [task for _, task in members]
        pieces += [run[i : i + size] for i in range(0, len(run), size)]
    chunks: list[list[PointTask]] = []
    for piece in pieces:
        if chunks and len(chunks[-1]) + len(piece) <= size:
            chunks[-1] += piece
        else:
            chunks.append(piece)
    return chunks


class Executor(AbstractContextManager["Executor"]):
    """Runs chunks of points; :meth:`run` yields each chunk's outcomes when done."""

    workers = 1
    description = "in-process"

    def run(
        self, chunks: Sequence[Sequence[PointTask]], following: int = 0, files: bool = True
    ) -> Iterator[list[PointOutcome]]:
        """Each chunk's outcomes, as chunks end; ``following``: about how many points
        each worker runs in all, and ``files``: whether finished points' files are made
        (see :func:`~accelsim.sweep.worker.run_chunk`)."""
        for chunk in chunks:
            yield run_chunk(chunk, following, files)

    def __exit__(self, *exc: object) -> None:
        return None


@dataclass
class PoolExecutor(Executor):
    """A local process pool of ``jobs`` workers (forked where the platform allows, so
    they start with the files the sweep's process already parsed; on Linux they die
    with the sweep's process)."""

    jobs: int

    def __post_init__(self) -> None:
        self.workers = self.jobs
        self.description = f"process pool, {self.jobs} worker{'s' if self.jobs != 1 else ''}"
        self._pool = process_pool(self.jobs, self.description)

    def run(
        self, chunks: Sequence[Sequence[PointTask]], following: int = 0, files: bool = True
    ) -> Iterator[list[PointOutcome]]:
        """Each chunk's outcomes as it finishes.

        Raises:
            WorkerError: when a worker process died (within
                :data:`~accelsim.sweep.processes.POLL_S`), with the points left.
        """
        sizes = {
            self._pool.submit(run_chunk, list(chunk), following, files): len(chunk)
            for chunk in chunks
        }
        try:
            for future in self._pool.completed(list(sizes)):
                del sizes[future]
                yield future.result()
        except WorkerError as exc:
            left = sum(sizes.values())
            raise WorkerError(f"{exc} with {left} point{'s' if left != 1 else ''} left") from None

    def __exit__(self, *exc: object) -> None:
        self._pool.__exit__(*exc)


class DaskExecutor(Executor):
    """Dask distributed: an existing scheduler at ``address``, or a ``LocalCluster`` of
    ``local_workers`` single-threaded worker processes.

    Raises:
        InputError: when ``dask``/``distributed`` are not installed, or naming
            ``--scheduler`` for an address Dask refuses and a scheduler that cannot
            be reached or does not answer within :data:`START_S`.
    """

    def __init__(self, address: str | None = None, local_workers: int | None = None) -> None:
        try:
            distributed: Any = importlib.import_module("distributed")
        except ImportError:
            option = "--scheduler" if address is not None else "--dask-workers"
            raise InputError.single(option, "", CLUSTER_HINT) from None
        self._distributed: Any = distributed
        self._stack = ExitStack()
        if address is None:
            cluster = self._stack.enter_context(
                distributed.LocalCluster(
                    n_workers=local_workers or 1,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                )
            )
            self._client = self._stack.enter_context(distributed.Client(cluster))
            plural = "s" if local_workers != 1 else ""
            self.description = f"Dask LocalCluster, {local_workers} worker{plural}"
        else:
            self._client = self._stack.enter_context(_connected(distributed, address))
            self.description = f"Dask scheduler {address}"
        self.workers = max(1, len(self._client.scheduler_info().get("workers", {})))

    def run(
        self, chunks: Sequence[Sequence[PointTask]], following: int = 0, files: bool = True
    ) -> Iterator[list[PointOutcome]]:
        """Each chunk's outcomes as it finishes (see :meth:`_run`).

        Raises:
            ClusterError: when the cluster has had no worker for :data:`WORKERLESS_S`
                with chunks left, or the scheduler is gone (killed, unreachable).
        """
        try:
            yield from self._run(chunks, following, files)
        except (OSError, TimeoutError, CancelledError) as exc:
            # A lost scheduler: futures cancelled, comms closed, calls timed out.
            raise ClusterError(
                f"{self.description}: lost the scheduler ({type(exc).__name__}); restart it"
            ) from None

    def _run(
        self, chunks: Sequence[Sequence[PointTask]], following: int, files: bool
    ) -> Iterator[list[PointOutcome]]:
        """Each chunk's outcomes as it finishes.

        Raises:
            ClusterError: when the cluster has had no worker for :data:`WORKERLESS_S`
                with chunks left (Dask would wait for one forever).
        """
        pending = list(
            self._client.map(
                run_chunk,
                [list(c) for c in chunks],
                [following] * len(chunks),
                [files] * len(chunks),
                pure=False,
            )
        )
        sizes = {f.key: len(c) for f, c in zip(pending, chunks, strict=True)}
        workerless_since: float | None = None
        while pending:
            with suppress(TimeoutError):
                self._distributed.wait(pending, timeout=POLL_S, return_when="FIRST_COMPLETED")
            finished = [f.done() for f in pending]
            done = [f for f, d in zip(pending, finished, strict=True) if d]
            pending = [f for f, d in zip(pending, finished, strict=True) if not d]
            for future in done:
                result: list[PointOutcome] = future.result()
                yield result
            if done or self._client.nthreads():
                workerless_since = None
            elif workerless_since is None:
                workerless_since = time.monotonic()
            elif time.monotonic() - workerless_since >= WORKERLESS_S:
                left = sum(sizes[f.key] for f in pending)
                raise ClusterError(
                    f"{self.description}: no worker for {WORKERLESS_S:.0f} s with"
                    f" {left} point{'s' if left != 1 else ''} left"
                )

    def __exit__(self, *exc: object) -> None:
        # A client that lost its scheduler logs its cancelled reconnection, with a
        # traceback, as it closes: nothing the sweep has not said already.
        client_log = logging.getLogger("distributed.client")
        level = client_log.level
        client_log.setLevel(logging.CRITICAL)
        try:
            self._stack.close()
        finally:
            client_log.setLevel(level)


def _connected(distributed: Any, address: str) -> Any:
    """A Dask client of the scheduler at ``address``, started within :data:`START_S`.

    Dask bounds its connection (:data:`CONNECT_S`), not its handshake: a port that
    accepts and never answers would hold the client forever, so the client starts in
    a daemon thread this one waits for.

    Raises:
        InputError: naming ``--scheduler`` for an address Dask refuses, a scheduler
            that cannot be reached, or one that does not answer in time.
    """
    started: list[Any] = []
    failed: list[Exception] = []

    def start() -> None:
        try:
            started.append(distributed.Client(address, timeout=f"{CONNECT_S}s"))
        except Exception as exc:  # anything the address or the scheduler causes
            failed.append(exc)

    thread = threading.Thread(target=start, name="accelsim-dask-client", daemon=True)
    thread.start()
    thread.join(START_S)
    if started:
        return started[0]
    if failed:
        exc = failed[0]
        reason = (
            "not a Dask scheduler address"
            if isinstance(exc, ValueError)
            else "cannot reach the Dask scheduler"
        )
        raise InputError.single("--scheduler", "", f"{reason}: {exc}", address) from None
    raise InputError.single(
        "--scheduler", "", f"the Dask scheduler did not answer within {START_S:.0f} s", address
    )
