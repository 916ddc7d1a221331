"""Regression tests of issue 23, stores and output files: nothing accelsim writes can
lose a store, a point or an earlier result; nothing it deletes is reached through a
symbolic link; read-only commands change nothing; damage and bad outputs are exit 2.

One test (or a parametrized family) per cause; most call :func:`accelsim.cli.main`
in this process, the few that need a real SIGKILL or a real ``/dev/full`` run one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from accelsim import cli
from accelsim.errors import OutputError
from accelsim.report import staging
from accelsim.report.staging import staged_file
from accelsim.report.summary import DesignKnobs
from accelsim.sweep import Executor, plan_sweep, run_sweep

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "configs" / "runs" / "smoke.yaml"
MLP = REPO / "workloads" / "mlp.yaml"
FOUR = "grid:\n  array.rows: [8, 16]\n  array.dataflow: [os, ws]\n"


@pytest.fixture(autouse=True)
def _no_progress_bar_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """``accelsim sweep``'s progress bar would leave tqdm's monitor thread running in this
    process, and later tests (a forked plot worker) need it to have one thread."""
    from tqdm import tqdm

    monkeypatch.setattr(tqdm, "monitor_interval", 0)


def run_cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    """``accelsim ARGS`` in this process: (exit code, stdout, stderr)."""
    code = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def messages(err: str) -> list[str]:
    """The lines of ``err`` but the progress bar's."""
    return [line for line in err.splitlines() if line and "pt/s" not in line]


def sweep_file(directory: Path, body: str = FOUR, name: str = "arrays") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.yaml"
    path.write_text(f"name: {name}\nbase: {SMOKE}\n{body}", encoding="utf-8")
    return path


INDEX_FILES = ("store.sqlite-shm", "store.sqlite-wal")
"""SQLite's WAL index files, which any reader of a WAL database may create beside it."""


def tree(directory: Path) -> dict[str, bytes | str]:
    """Every entry below ``directory``: a file's bytes, a link's target, ``dir`` for a
    directory; SQLite's WAL index files (:data:`INDEX_FILES`) left out."""
    found: dict[str, bytes | str] = {}
    for path in sorted(directory.rglob("*")):
        key = str(path.relative_to(directory))
        if path.name in INDEX_FILES:
            continue
        if path.is_symlink():
            found[key] = f"-> {os.readlink(path)}"
        elif path.is_dir():
            found[key] = "dir"
        else:
            found[key] = path.read_bytes()
    return found


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished four-point sweep directory (copy it before changing it)."""
    base = tmp_path_factory.mktemp("swept")
    run_sweep(plan_sweep(sweep_file(base)), base / "out", Executor())
    return base / "out" / "arrays"


def copy_sweep(source: Path, destination: Path) -> Path:
    """A copy of the sweep directory ``source`` (without SQLite's index files)."""
    destination.mkdir(parents=True)
    for name, content in tree(source).items():
        target = destination / name
        if content == "dir":
            target.mkdir(parents=True, exist_ok=True)
        elif isinstance(content, bytes):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
    return destination


def hidden(points: Path) -> list[str]:
    return sorted(p.name for p in points.iterdir() if p.name.startswith("."))


# ---- 3. a run --force killed between its renames is put back or finished


def test_a_run_force_killed_between_its_renames_is_put_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real SIGKILL after the old run was renamed aside and before the new one was
    renamed in: the next run puts the old one back and says so."""
    assert run_cli(capsys, "run", SMOKE, "--out", tmp_path)[0] == cli.EXIT_OK
    before = tree(tmp_path / "smoke")
    driver = (
        "import os, signal, sys\n"
        "from accelsim import cli\n"
        "from accelsim.report import staging\n"
        "rename, calls = staging.rename_noreplace, []\n"
        "def dying(source, target):\n"
        "    calls.append(target)\n"
        "    if len(calls) == 2:\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    rename(source, target)\n"
        "staging.rename_noreplace = dying\n"
        "sys.exit(cli.main(sys.argv[1:]))\n"
    )
    args = ["run", str(SMOKE), "--out", str(tmp_path), "--force", "--set", "batch_size=7"]
    killed = subprocess.run(
        [sys.executable, "-c", driver, *args], capture_output=True, check=False, timeout=120
    )
    assert killed.returncode == -signal.SIGKILL
    (aside,) = [p.name for p in tmp_path.iterdir() if p.name.startswith(".accelsim-old.")]
    assert not (tmp_path / "smoke").exists()
    code, out, err = run_cli(capsys, "run", SMOKE, "--out", tmp_path)
    assert (code, out) == (cli.EXIT_INPUT, "")
    assert err == (
        f"{tmp_path / 'smoke'}: run directory exists (put back from {aside}, where a killed"
        " 'run --force' had moved it); pass --force to overwrite it or --out to write elsewhere\n"
    )
    assert tree(tmp_path / "smoke") == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".accelsim-old.")] == []


def test_a_committed_forced_run_finishes_deleting_the_old_one(tmp_path: Path) -> None:
    target = tmp_path / "smoke"
    target.mkdir()
    (target / "label.txt").write_text("new")
    aside = tmp_path / ".accelsim-old.0123456789abcdef.smoke"
    aside.mkdir()
    (aside / "label.txt").write_text("old")
    other = tmp_path / ".accelsim-old.0123456789abcdef.other"
    other.mkdir()
    linked = tmp_path / ".accelsim-old.fedcba9876543210.smoke"
    linked.symlink_to(other)
    assert staging.recover(target) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([other.name, linked.name, "smoke"])
    assert (target / "label.txt").read_text() == "new"


# ---- 1. every output file staged


def test_staged_file_writes_devices_directly_and_refuses_what_it_cannot_replace(
    tmp_path: Path,
) -> None:
    with staged_file(Path(os.devnull)) as path:
        assert path == Path(os.devnull)
        path.write_text("discarded")
    read_only = tmp_path / "kept.csv"
    read_only.write_text("kept")
    read_only.chmod(0o444)
    if not os.access(read_only, os.W_OK):  # not as root
        with (
            pytest.raises(OutputError, match="cannot write: the file is read-only"),
            staged_file(read_only),
        ):
            pytest.fail("a read-only file is replaced")
    with pytest.raises(OutputError, match="cannot write: is a directory"), staged_file(tmp_path):
        pytest.fail("a directory is replaced")
    new = tmp_path / "sub" / "new.csv"
    with staged_file(new) as path:
        assert path.parent == new.parent and path.name.startswith(".accelsim-new.new.csv.")
        path.write_text("new")
    assert new.read_text() == "new"
    assert new.stat().st_mode & 0o777 == 0o666 & ~staging._umask()


# ---- 6. ideal memory in summary.json


def test_design_knobs_round_trip_ideal_memory() -> None:
    knobs = DesignKnobs(8, 8, "os", 1.0, 1.0, 1.0, 0.0, float("inf"), 0, 1, 100.0, 1)
    record = knobs.to_dict()
    assert list(record)[7:10] == [
        "dram_bandwidth_bytes_per_cycle",
        "dram_ideal",
        "dram_latency_cycles",
    ]
    assert DesignKnobs.from_dict(json.loads(json.dumps(record, allow_nan=False))) == knobs
