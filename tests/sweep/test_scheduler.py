"""``accelsim sweep --scheduler``: an address Dask refuses, a port that accepts and never
answers, and a scheduler killed mid-sweep (in ``tests/sweep/``, after ``tests/report/``:
a Dask client leaves threads in the process; ``tests/README.md``)."""

from __future__ import annotations

import importlib.util
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from accelsim import cli
from accelsim.sweep import Store, executors
from tests.conftest import ROOT

SMOKE = ROOT / "configs" / "runs" / "smoke.yaml"

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("distributed") is None, reason="needs dask"
)


@pytest.fixture(autouse=True)
def _no_progress_bar_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    from tqdm import tqdm

    monkeypatch.setattr(tqdm, "monitor_interval", 0)


def sweep(tmp_path: Path, scheduler: str, sizes: int = 2) -> int:
    """The exit code of ``accelsim sweep`` of ``sizes`` x 2 smoke points on ``scheduler``."""
    path = tmp_path / "sw.yaml"
    rows = ", ".join(str(8 * (i + 1)) for i in range(sizes))
    path.write_text(
        f"base: {SMOKE}\nname: far\ngrid:\n  array.rows: [{rows}]\n  array.cols: [8, 16]\n",
        encoding="utf-8",
    )
    return cli.main(["sweep", str(path), "--out", str(tmp_path / "out"), "--scheduler", scheduler])


def errors(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The lines of stderr but the progress bar's."""
    err = capsys.readouterr().err.replace("\r", "\n")
    return [line for line in err.splitlines() if line and "pt/s" not in line and "/it]" not in line]


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        (
            "foo://bar",
            "not a Dask scheduler address: unknown address scheme 'foo' (known schemes:"
            " ['inproc', 'tcp', 'tls', 'ucx', 'ws', 'wss'])",
        ),
        ("nonsense", "not a Dask scheduler address: missing port number in address 'nonsense'"),
    ],
)
def test_an_address_dask_refuses_is_exit_2_naming_scheduler(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], address: str, problem: str
) -> None:
    code = sweep(tmp_path, address)
    assert (code, errors(capsys)) == (2, [f"--scheduler: {problem} (got {address!r})"])


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A local port that accepts connections and never answers on them."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                accepted.append(server.accept()[0])
            except OSError:  # closed
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    server.close()
    for conn in accepted:
        conn.close()


def test_a_scheduler_that_never_answers_is_exit_2_after_the_deadline(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    silent_port: int,
) -> None:
    """Dask's own timeout bounds only the connection, which succeeds: without the
    deadline the client waits for the handshake forever."""
    monkeypatch.setattr(executors, "START_S", 1.5)
    address = f"tcp://127.0.0.1:{silent_port}"
    started = time.monotonic()
    code = sweep(tmp_path, address)
    assert 1.5 <= time.monotonic() - started < 10
    assert (code, errors(capsys)) == (
        2,
        [f"--scheduler: the Dask scheduler did not answer within 2 s (got {address!r})"],
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _dask(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def test_a_scheduler_killed_mid_sweep_is_exit_3_with_the_resume_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real scheduler and worker process; the scheduler is SIGKILLed once the first
    chunk the cluster ran is stored.  The points stored stay, and the sweep says how
    many and how to resume, as when every worker is gone."""
    address = f"tcp://127.0.0.1:{_free_port()}"
    port = address.rsplit(":", 1)[1]
    scheduler = _dask("distributed.cli.dask_scheduler", "--port", port, "--no-dashboard")
    worker = _dask("distributed.cli.dask_worker", address, "--nthreads", "1", "--no-dashboard")
    original = executors.DaskExecutor._run

    def killing_the_scheduler(
        self: executors.DaskExecutor, *args: object
    ) -> Iterator[list[object]]:
        for n, outcomes in enumerate(original(self, *args)):  # type: ignore[arg-type]
            yield outcomes
            if n == 0:
                scheduler.kill()
                scheduler.wait()

    monkeypatch.setattr(executors.DaskExecutor, "_run", killing_the_scheduler)
    try:
        code = sweep(tmp_path, address, sizes=40)
    finally:
        for process in (scheduler, worker):
            process.kill()
            process.wait()
    assert code == 3
    with Store(tmp_path / "out" / "far") as store:
        stored = len(store.rows())
    assert 1 < stored < 80  # the sweep's own first point, the first chunk, and no more
    last = errors(capsys)[-1]
    assert re.fullmatch(
        rf"accelsim: Dask scheduler {address}: lost the scheduler \(\w+\); restart it;"
        rf" points finished so far: {stored}, stored in {re.escape(str(tmp_path / 'out' / 'far'))}/:"
        " start workers and rerun the same command to resume",
        last,
    ), last
