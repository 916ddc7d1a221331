"""Regression tests of issue 23, stores and output files: nothing accelsim writes can
lose a store, a point or an earlier result; nothing it deletes is reached through a
symbolic link; read-only commands change nothing; damage and bad outputs are exit 2.

One test (or a parametrized family) per cause; most call :func:`accelsim.cli.main`
in this process, the few that need a real SIGKILL or a real ``/dev/full`` run one.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from accelsim import cli, cli_run, cli_sweep
from accelsim.errors import ConfigError, OutputError
from accelsim.report import staging
from accelsim.report.staging import staged_file
from accelsim.report.summary import DesignKnobs, StepSummary
from accelsim.sweep import Executor, Store, plan_sweep, run_sweep
from accelsim.sweep import points as sweep_points
from accelsim.sweep.plan import MAX_POINTS
from accelsim.sweep.points import KeepPoints
from tests.conftest import ROOT as REPO

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
    run_sweep(plan_sweep(sweep_file(base)), base / "out", Executor(), keep_points=KeepPoints.ALL)
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
    before = tree(tmp_path / "mlp_smoke")
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
    assert not (tmp_path / "mlp_smoke").exists()
    code, out, err = run_cli(capsys, "run", SMOKE, "--out", tmp_path)
    assert (code, out) == (cli.EXIT_INPUT, "")
    assert err == (
        f"{tmp_path / 'mlp_smoke'}: run directory exists (put back from {aside}, where a killed"
        " 'run --force' had moved it); pass --force to overwrite it or --out to write elsewhere\n"
    )
    assert tree(tmp_path / "mlp_smoke") == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".accelsim-old.")] == []


def test_a_committed_forced_run_finishes_deleting_the_old_one(tmp_path: Path) -> None:
    target = tmp_path / "mlp_smoke"
    target.mkdir()
    (target / "label.txt").write_text("new")
    aside = tmp_path / ".accelsim-old.0123456789abcdef.mlp_smoke"
    aside.mkdir()
    (aside / "label.txt").write_text("old")
    other = tmp_path / ".accelsim-old.0123456789abcdef.other"
    other.mkdir()
    linked = tmp_path / ".accelsim-old.fedcba9876543210.mlp_smoke"
    linked.symlink_to(other)
    assert staging.recover(target) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [other.name, linked.name, "mlp_smoke"]
    )
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


# ---- 2. nothing deleted through a symbolic link; clean-up of proven entries only


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A directory whose hidden entries a sweep must never touch."""
    victim = tmp_path / "victim"
    (victim / ".ssh").mkdir(parents=True)
    (victim / ".ssh" / "id").write_text("key")
    (victim / ".git").mkdir()
    (victim / "points" / ".hidden").mkdir(parents=True)
    return victim


@pytest.mark.parametrize("link", ["points", "sweep directory"])
def test_a_symlinked_sweep_directory_or_points_is_refused(
    tmp_path: Path, victim: Path, capsys: pytest.CaptureFixture[str], link: str
) -> None:
    out = tmp_path / "out"
    if link == "points":
        (out / "arrays").mkdir(parents=True)
        (out / "arrays" / "points").symlink_to(victim)
        where, what = out / "arrays" / "points", "the sweep's points/"
    else:
        out.mkdir()
        (out / "arrays").symlink_to(victim)
        where, what = out / "arrays", "a sweep directory"
    before = tree(victim)
    code, stdout, err = run_cli(capsys, "sweep", sweep_file(tmp_path), "--out", out, "--jobs", 1)
    assert (code, stdout) == (cli.EXIT_INPUT, "")
    assert messages(err)[-1] == (
        f"{where}: a symbolic link or a file, not {what}; a sweep writes (and deletes) only in"
        " directories it made: move it away or choose another --out"
    )
    assert tree(victim) == before
    assert not (out / "arrays" / "store.sqlite").exists()


def test_clean_up_removes_only_entries_it_can_prove_it_made(
    swept: Path, tmp_path: Path, victim: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = copy_sweep(swept, tmp_path / "out" / "arrays")
    points = sweep / "points"
    ours, other = "0123456789abcdef" * 2, "fedcba9876543210" * 2
    made = points / f".accelsim-point.{ours}.{'a' * 16}"
    made.mkdir()
    (made / "summary.json").write_text("{")
    foreign = points / f".accelsim-point.{other}.{'b' * 16}"  # a token the store lacks
    foreign.mkdir()
    (foreign / "summary.json").write_text("{")
    (points / f".accelsim-old.{ours}.{'c' * 16}").symlink_to(victim)
    mixed = points / f".accelsim-point.{ours}.{'d' * 16}"
    (mixed / "sub").mkdir(parents=True)
    (mixed / "point.json").write_text("{}")
    (points / ".hidden").mkdir()
    with sqlite3.connect(sweep / "store.sqlite") as db:
        db.execute("INSERT INTO staging VALUES (?, 0)", [ours])
    victims = tree(victim)
    code, out, _ = run_cli(
        capsys, "sweep", sweep_file(tmp_path), "--out", tmp_path / "out", "--keep-points", "all"
    )
    assert code == cli.EXIT_OK and "4 already stored, 0 run" in out
    assert hidden(points) == sorted(
        [".hidden", foreign.name, mixed.name, f".accelsim-old.{ours}.{'c' * 16}"]
    )
    assert tree(mixed) == {"sub": "dir"}  # a point's own file removed, the rest kept
    assert tree(victim) == victims
    with Store(sweep) as store:
        assert store.staging_tokens() == {ours}  # entries left: tried again next time


def test_a_point_directory_that_is_a_link_is_never_replaced(
    tmp_path: Path, victim: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = sweep_file(tmp_path)
    plan = plan_sweep(path)
    first = plan.points[0].task.identity
    points = tmp_path / "out" / "arrays" / "points"
    points.mkdir(parents=True)
    (points / first).symlink_to(victim)
    before = tree(victim)
    code, _, err = run_cli(
        capsys, "sweep", path, "--out", tmp_path / "out", "--jobs", 1, "--keep-points", "all"
    )
    assert code == cli.EXIT_INPUT
    assert messages(err)[-1].startswith(
        f"{points / first}: a symbolic link or a file, not a point directory;"
    )
    assert tree(victim) == before and (points / first).is_symlink()


def test_a_point_killed_mid_write_is_cleaned_up_by_the_next_sweep(tmp_path: Path) -> None:
    """SIGKILL while the second point is written: its staging directory stays, named
    with the token the store recorded; the next sweep removes it and stores every point."""
    path = sweep_file(tmp_path)
    out = tmp_path / "out"
    driver = (
        "import os, signal, sys\n"
        "from accelsim import cli\n"
        "from accelsim.sweep import points\n"
        "commit, calls = points.PointsDirectory._commit, []\n"
        "def dying(self, staging, identity):\n"
        "    calls.append(identity)\n"
        "    if len(calls) == 2:\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    commit(self, staging, identity)\n"
        "points.PointsDirectory._commit = dying\n"
        "sys.exit(cli.main(sys.argv[1:]))\n"
    )
    killed = subprocess.run(
        [
            sys.executable,
            "-c",
            driver,
            "sweep",
            str(path),
            "--out",
            str(out),
            "--jobs",
            "1",
            "--keep-points",
            "all",
        ],
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL
    sweep = out / "arrays"
    with Store(sweep) as store:
        (token,) = store.staging_tokens()
        assert len(store.rows()) == 1
    (left,) = hidden(sweep / "points")
    assert left.startswith(f".accelsim-point.{token}.")
    assert sorted(p.name for p in (sweep / "points" / left).iterdir()) == [
        "point.json",
        "summary.json",
    ]
    report = run_sweep(plan_sweep(path), out, Executor(), keep_points=KeepPoints.ALL)
    assert (report.skipped, report.ran) == (1, 3)
    assert hidden(sweep / "points") == []
    with Store(sweep) as store:
        assert store.staging_tokens() == set()
        assert len(store.rows()) == 4


# ---- 4. read-only commands change nothing and read read-only stores


def test_collect_and_plot_refuse_a_foreign_sqlite_file_and_leave_it_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "foreign"
    directory.mkdir()
    store = directory / "store.sqlite"
    with sqlite3.connect(store) as db:
        db.execute("CREATE TABLE t (x)")
    db.close()
    before = tree(directory)
    for args in (["collect", directory], ["plot", directory, "--kind", "energy"]):
        code, out, err = run_cli(capsys, *args)
        assert (code, out) == (cli.EXIT_INPUT, "")
        assert err == f"{store}: not a sweep store: an SQLite database with tables 't'\n"
    assert tree(directory) == before
    code, _, err = run_cli(capsys, "collect", tmp_path)
    assert (code, err) == (
        cli.EXIT_INPUT,
        f"{tmp_path}: not a sweep output directory (no store.sqlite)\n",
    )


def test_collect_does_not_change_the_store(
    swept: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = copy_sweep(swept, tmp_path / "arrays")
    store = sweep / "store.sqlite"
    before, stamp = store.read_bytes(), store.stat().st_mtime_ns
    assert run_cli(capsys, "collect", sweep)[0] == cli.EXIT_OK
    assert run_cli(capsys, "plot", sweep, "--kind", "pareto")[0] == cli.EXIT_OK
    assert (store.read_bytes(), store.stat().st_mtime_ns) == (before, stamp)
    assert (sweep / "store.sqlite-wal").stat().st_size == 0  # nothing written to the log


def _make_read_only(paths: list[Path]) -> bool:
    """Make ``paths`` unwritable for this user (chmod, or chattr +i as root); whether it could."""
    if os.geteuid() != 0:
        for path in paths:
            path.chmod(0o555 if path.is_dir() else 0o444)
        return True
    done = subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True, check=False)
    return done.returncode == 0


def _make_writable(paths: list[Path]) -> None:
    if os.geteuid() != 0:
        for path in paths:
            path.chmod(0o755 if path.is_dir() else 0o644)
    else:
        subprocess.run(["chattr", "-i", *map(str, paths)], check=False)


def test_a_store_the_user_cannot_write_still_collects_and_plots(
    swept: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = copy_sweep(swept, tmp_path / "arrays")
    expected = run_cli(capsys, "collect", swept)[1]
    locked = [sweep / "store.sqlite", sweep]
    try:
        if not _make_read_only(locked):
            pytest.skip("cannot make a file read-only here (no chattr as root)")
        code, out, err = run_cli(capsys, "collect", sweep)
        assert (code, out, err) == (cli.EXIT_OK, expected, "")
        figure = tmp_path / "energy.png"
        code, out, _ = run_cli(capsys, "plot", sweep, "--kind", "energy", "--output", figure)
        assert code == cli.EXIT_OK and figure.read_bytes().startswith(b"\x89PNG")
        code, _, err = run_cli(capsys, "sweep", sweep_file(tmp_path), "--out", tmp_path)
        assert code == cli.EXIT_INPUT
        assert messages(err)[-1].startswith(f"{sweep / 'store.sqlite'}: cannot write")
    finally:
        _make_writable(locked)
    assert sorted(p.name for p in sweep.iterdir()) == ["points", "store.sqlite"]


# ---- 5. and 9. a damaged or altered store is exit 2, reported, unchanged


def _scramble_points_root(store: Path) -> None:
    """600 bytes of the points table's root page scrambled (as ``dd`` would)."""
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        (root,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'points'").fetchone()
        (size,) = db.execute("PRAGMA page_size").fetchone()
    db.close()
    with store.open("r+b") as handle:
        handle.seek((root - 1) * size)
        handle.write(bytes((i * 97 + 13) % 251 for i in range(600)))


def test_a_damaged_store_is_reported_with_what_can_be_recovered(
    swept: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = copy_sweep(swept, tmp_path / "out" / "arrays")
    _scramble_points_root(sweep / "store.sqlite")
    before = tree(sweep)
    for args in (
        ["sweep", sweep_file(tmp_path), "--out", tmp_path / "out", "--jobs", 1],
        ["collect", sweep],
        ["plot", sweep, "--kind", "energy"],
    ):
        code, out, err = run_cli(capsys, *args)
        assert (code, out) == (cli.EXIT_INPUT, ""), args
        (line,) = messages(err)
        assert line.startswith(f"{sweep / 'store.sqlite'}: damaged sweep store (")
        assert line.endswith(
            "); nothing was changed. 0 point rows are still readable and 4 finished points are"
            " intact in points/: move store.sqlite aside and run the sweep again to rebuild it"
            " (the points are recomputed), or salvage rows with sqlite3's .recover"
        )
        assert tree(sweep) == before


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            "UPDATE meta SET value = '{bad' WHERE key = 'axes'",
            "meta 'axes': not JSON (got '{bad')",
        ),
        (
            "UPDATE meta SET value = '\"x\"' WHERE key = 'axes'",
            "meta 'axes': not a list of axis keys (got 'x')",
        ),
        (
            "ALTER TABLE points DROP COLUMN status",
            "table 'points' lacks column 'status'; a sweep store has always had it: the file"
            " was changed outside accelsim",
        ),
        (
            "DROP TABLE meta",
            "not a sweep store: an SQLite database with tables 'points', 'staging'",
        ),
        (
            "CREATE TABLE other (x)",
            "not a sweep store: an SQLite database with tables 'meta', 'other', 'points',"
            " 'staging'",
        ),
    ],
    ids=["meta-json", "meta-axes", "missing-column", "no-meta", "foreign-table"],
)
def test_an_altered_store_is_exit_2_for_every_command(
    swept: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: str,
    message: str,
) -> None:
    sweep = copy_sweep(swept, tmp_path / "out" / "arrays")
    with sqlite3.connect(sweep / "store.sqlite") as db:
        db.execute(change)
    db.close()
    before = tree(sweep)
    for args in (
        ["sweep", sweep_file(tmp_path), "--out", tmp_path / "out", "--jobs", 1],
        ["collect", sweep],
        ["plot", sweep, "--kind", "energy"],
    ):
        code, out, err = run_cli(capsys, *args)
        assert (code, out, err) == (
            cli.EXIT_INPUT,
            "",
            f"{sweep / 'store.sqlite'}: {message}\n",
        ), args
    assert tree(sweep) == before


def test_a_row_whose_json_is_bad_is_named(
    swept: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = copy_sweep(swept, tmp_path / "arrays")
    with sqlite3.connect(sweep / "store.sqlite") as db:
        (identity,) = db.execute("SELECT identity FROM points WHERE point = 2").fetchone()
        db.execute("UPDATE points SET extra = '[1' WHERE point = 2")
    db.close()
    code, _, err = run_cli(capsys, "collect", sweep)
    assert (code, err) == (
        cli.EXIT_INPUT,
        f"{sweep / 'store.sqlite'}: point {identity!r}: column 'extra' is not a JSON object"
        " (got '[1')\n",
    )


# ---- 15. a failed point write leaves no staging directory


def test_a_failed_point_write_leaves_no_staging_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = sweep_file(tmp_path)
    fill, calls = sweep_points.PointsDirectory._fill, []

    def full_disk(self: Any, staging_name: str, files: Any) -> None:
        calls.append(staging_name)
        if len(calls) == 3:
            fill(self, staging_name, {"summary.json": files["summary.json"]})
            raise OSError(errno.ENOSPC, "No space left on device")
        fill(self, staging_name, files)

    monkeypatch.setattr(sweep_points.PointsDirectory, "_fill", full_disk)
    plan = plan_sweep(path)
    with pytest.raises(OutputError) as excinfo:
        run_sweep(plan, tmp_path / "out", Executor(), keep_points=KeepPoints.ALL)
    third = plan.points[2].task.identity
    points = tmp_path / "out" / "arrays" / "points"
    assert str(excinfo.value) == (
        f"{points / third}: cannot write the point's results: No space left on device"
    )
    assert hidden(points) == []
    assert sorted(p.name for p in points.iterdir()) == sorted(
        p.task.identity for p in plan.points[:2]
    )
    monkeypatch.setattr(sweep_points.PointsDirectory, "_fill", fill)
    report = run_sweep(plan, tmp_path / "out", Executor(), keep_points=KeepPoints.ALL)
    assert (report.skipped, report.ran) == (2, 2)


# ---- 16. a stored column an axis differs from only in letter case


def test_an_axis_a_stored_column_differs_from_only_in_case_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    first, renamed = "workload.layers[fc1].out_features", "workload.layers[FC1].out_features"
    run_sweep(plan_sweep(sweep_file(tmp_path, f"grid:\n  {first}: [8]\n")), out, Executor())
    workload = tmp_path / "mlp.yaml"
    workload.write_text(MLP.read_text().replace("fc1", "FC1"), encoding="utf-8")
    second = sweep_file(tmp_path, f"set: {{workload: {workload}}}\ngrid:\n  {renamed}: [16]\n")
    before = tree(out)
    code, _, err = run_cli(capsys, "sweep", second, "--out", out, "--jobs", 1)
    assert code == cli.EXIT_INPUT
    assert messages(err)[-1] == (
        f"{out / 'arrays' / 'store.sqlite'}: axis '{renamed}' would share column"
        f" '{first}' (SQLite ignores letter case in column names); rename the axis or write"
        " the sweep to another --out"
    )
    assert tree(out) == before


# ---- campaigns (slow): random damage, SIGKILL at every step of a point's write


@pytest.mark.slow
def test_forty_scrambled_stores_are_reported_or_read_back_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """600 random bytes at a random offset of a 64-point store, 40 times (seeded): every
    command exits 0 with the rows of the undamaged store (the bytes fell where SQLite
    keeps nothing) or 2 with the file unchanged; never 1."""
    import random

    grid = "grid:\n  array.rows: [8, 16, 24, 32]\n  array.cols: [8, 16, 24, 32]\n"
    path = sweep_file(tmp_path, grid + "  array.dataflow: [os, ws]\n  batch_size: [1, 2]\n")
    out = tmp_path / "out"
    assert run_sweep(plan_sweep(path), out, Executor()).ran == 64
    sweep = out / "arrays"
    store = sweep / "store.sqlite"
    pristine = store.read_bytes()
    expected = run_cli(capsys, "collect", sweep)[1]
    outcomes = {"reported": 0, "harmless": 0}
    for seed in range(40):
        rng = random.Random(seed)
        offset = rng.randrange(len(pristine) - 600)
        damaged = bytearray(pristine)
        damaged[offset : offset + 600] = rng.randbytes(600)
        for index in INDEX_FILES:
            (sweep / index).unlink(missing_ok=True)
        store.write_bytes(bytes(damaged))
        codes = set()
        for args in (["collect", sweep], ["sweep", path, "--out", out, "--jobs", 1]):
            code, stdout, err = run_cli(capsys, *args)
            codes.add(code)
            if code == cli.EXIT_INPUT:
                assert store.read_bytes() == damaged, (seed, args)
                reported = messages(err)[-1].removeprefix(f"{store}: ")
                assert reported.startswith(
                    ("damaged sweep store (", "not a sweep store: not an SQLite database")
                ), (seed, err)
            elif args[0] == "collect":
                assert (code, stdout) == (cli.EXIT_OK, expected), (seed, err)
        assert codes in ({cli.EXIT_OK}, {cli.EXIT_INPUT}), (seed, codes)
        outcomes["reported" if cli.EXIT_INPUT in codes else "harmless"] += 1
    assert outcomes["reported"] >= 20, outcomes


KILLER = """
import os, signal, sys
from accelsim import cli
from accelsim.sweep import points, store
site, when = sys.argv[1], int(sys.argv[2])
count = [0]
def due():
    count[0] += 1
    if count[0] == when:
        os.kill(os.getpid(), signal.SIGKILL)
fill, commit, add, rename = (
    points.PointsDirectory._fill, points.PointsDirectory._commit, store.Store.add, os.rename
)
def half_filled(self, staging, files):
    fill(self, staging, dict(list(files.items())[:1]))
    due()
    fill(self, staging, dict(list(files.items())[1:]))
def before_rename(self, staging, identity):
    due()
    commit(self, staging, identity)
def before_row(self, point):
    due()
    add(self, point)
def mid_replace(source, target, **kwargs):
    rename(source, target, **kwargs)
    if str(target).startswith(".accelsim-old."):
        due()
patch = {"fill": ("_fill", half_filled), "rename": ("_commit", before_rename)}
if site in patch:
    setattr(points.PointsDirectory, *patch[site])
elif site == "row":
    store.Store.add = before_row
else:
    os.rename = mid_replace
sys.exit(cli.main(sys.argv[3:]))
"""


@pytest.mark.slow
def test_a_sweep_killed_at_every_step_of_a_point_write_resumes_whole(tmp_path: Path) -> None:
    """SIGKILL while a point's files are half written, before the rename, between the rename
    and the row's commit, and while a directory of the point left by such a kill is being
    replaced: each time the next sweep leaves no hidden entry, forgets the token and gives
    the store and points/ of an uninterrupted sweep."""
    path = sweep_file(tmp_path, "grid:\n  array.rows: [8, 16, 24]\n  array.cols: [8, 16]\n")
    reference = run_sweep(
        plan_sweep(path), tmp_path / "reference", Executor(), keep_points=KeepPoints.ALL
    ).directory
    out = tmp_path / "out"
    sweep = out / "arrays"
    args = ["sweep", str(path), "--out", str(out), "--jobs", "1", "--keep-points", "all"]
    rounds = [[("fill", 2)], [("rename", 3)], [("row", 4)], [("row", 2), ("replace", 1)]]
    for kills in rounds:
        shutil.rmtree(out, ignore_errors=True)
        for site, when in kills:
            killed = subprocess.run(
                [sys.executable, "-c", KILLER, site, str(when), *args],
                capture_output=True,
                check=False,
                timeout=120,
            )
            assert killed.returncode == -signal.SIGKILL, (site, killed.stderr)
            with Store(sweep) as store:
                assert store.integrity() == "ok"
                rows = len(store.rows())
            left = hidden(sweep / "points")
            shown = [p for p in (sweep / "points").iterdir() if not p.name.startswith(".")]
            if site == "row":  # the point's directory is in place, its row is not
                assert (left, len(shown)) == ([], rows + 1)
            else:  # the point being written (and the directory being replaced) stay aside
                kinds = {"fill": [".accelsim-point"], "rename": [".accelsim-point"]}
                expected = kinds.get(site, [".accelsim-old", ".accelsim-point"])
                assert [name.rsplit(".", 2)[0] for name in left] == expected, left
        report = run_sweep(plan_sweep(path), out, Executor(), keep_points=KeepPoints.ALL)
        assert report.failed == 0
        assert hidden(sweep / "points") == [], kills
        with Store(sweep) as store:
            assert store.staging_tokens() == set()
        assert _results(sweep) == _results(reference), kills


def _results(sweep: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A sweep's rows and point files, without what depends on the process (timings, and
    ``engine``: ``timing.engine: auto`` picks it by what the process simulated before)."""
    process = ("wall_seconds", "finished_at", "worker", "engine")
    with Store(sweep) as store:
        rows = [{k: v for k, v in r.items() if k not in process} for r in store.rows()]
    files: dict[str, Any] = {}
    for name, content in tree(sweep / "points").items():
        if name.endswith("summary.json"):
            summary = json.loads(content)
            summary.pop("engine")
            files[name] = summary
        else:
            files[name] = content
    return rows, files


# ---- 12. sweep names follow the run-name rule


@pytest.mark.parametrize("name", ['"a\\0b"', '"a\\nb"', ".accelsim-x", "a b", "x" * 201])
def test_sweep_names_follow_the_run_name_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    path = tmp_path / "sw.yaml"
    path.write_text(f"name: {name}\nbase: {SMOKE}\n{FOUR}", encoding="utf-8")
    code, out, err = run_cli(capsys, "sweep", path, "--out", tmp_path / "out")
    assert (code, out) == (cli.EXIT_INPUT, "")
    (line,) = err.splitlines()
    assert line.startswith(f"{path}: name: string should")
    assert not (tmp_path / "out").exists()


# ---- 16. axes SQLite cannot tell apart


def test_axes_differing_only_in_letter_case_are_refused_at_plan_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = "workload.layers[fc1].out_features"
    path = sweep_file(tmp_path, f"grid:\n  {key}: [8]\n  {key.upper()}: [16]\n")
    code, out, err = run_cli(capsys, "check", path)
    assert (code, out) == (cli.EXIT_INPUT, "")
    assert err == (
        f"{path}: grid.{key.upper()}: differs from axis '{key}' only in letter case, which the"
        f" store's columns do not tell apart (got '{key.upper()}')\n"
    )


# ---- 18. a cap on the number of points, counted before expanding


def test_a_million_point_grid_is_refused_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = ", ".join(str(v) for v in range(1, 101))
    path = sweep_file(
        tmp_path,
        f"grid:\n  array.rows: [{values}]\n  array.cols: [{values}]\n  batch_size: [{values}]\n",
    )
    message = (
        f"{path}: 1,000,000 points (the product of the axes' lengths, before exclude) exceed the"
        " limit of 10,000; split the sweep, or raise the limit with --max-points N (accelsim"
        " sweep and accelsim check)\n"
    )
    for args in (["sweep", path, "--out", tmp_path / "out"], ["check", path]):
        started = time.perf_counter()
        code, out, err = run_cli(capsys, *args)
        assert time.perf_counter() - started < 2
        assert (code, out, err) == (cli.EXIT_INPUT, "", message)
    assert not (tmp_path / "out").exists()


def test_max_points_sets_the_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = sweep_file(tmp_path, FOUR + "exclude:\n  - {array.rows: 8, array.dataflow: ws}\n")
    code, _, err = run_cli(capsys, "sweep", path, "--out", tmp_path / "out", "--max-points", 3)
    assert code == cli.EXIT_INPUT
    assert (
        "4 points (the product of the axes' lengths, before exclude) exceed the limit of 3" in err
    )
    code, out, _ = run_cli(
        capsys, "sweep", path, "--out", tmp_path / "out", "--max-points", 4, "--jobs", 1
    )
    assert code == cli.EXIT_OK and "3 points, 0 already stored, 3 run" in out
    with pytest.raises(ConfigError, match="exceed the limit of 2"):
        plan_sweep(path, max_points=2)
    code, _, err = run_cli(capsys, "check", path, "--max-points", 3)
    assert code == cli.EXIT_INPUT and "exceed the limit of 3" in err
    code, out, _ = run_cli(capsys, "check", path, "--max-points", 4)
    assert code == cli.EXIT_OK and "3 points, each with all its files" in out
    with pytest.raises(SystemExit):
        cli.main(["sweep", "--help"])
    assert f"allow up to N points (default: {MAX_POINTS:,})" in capsys.readouterr().out


# ---- 15. the same record from any working directory


def test_points_record_the_same_thing_from_any_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = sweep_file(tmp_path / "sweeps" / "sub")
    stores = []
    for where in (tmp_path / "sweeps", tmp_path):
        monkeypatch.chdir(where)
        out = tmp_path / f"out-{where.name}"
        run_sweep(
            plan_sweep(Path(os.path.relpath(path))), out, Executor(), keep_points=KeepPoints.ALL
        )
        stores.append(out / "arrays")
    first, second = (tree(s / "points") for s in stores)
    assert first == second
    point = json.loads(next(iter(stores[0].glob("points/*/point.json"))).read_text())
    assert {s[2] for s in point["sets"]} == {str(path.resolve())}
    for store in stores:
        with Store(store) as opened:
            assert opened.meta()["sweep_file"] == str(path.resolve())


# ---- 1. no output onto a sweep's own files; output files staged


def test_collect_and_plot_refuse_to_write_onto_a_sweeps_own_files(
    swept: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = copy_sweep(swept, tmp_path / "arrays")
    (tmp_path / "link.csv").symlink_to(sweep / "store.sqlite")
    before = tree(sweep)
    targets = [
        sweep / "store.sqlite",
        sweep / "store.sqlite-wal",
        sweep / "points" / "x.csv",
        tmp_path / "link.csv",
        tmp_path / "arrays" / ".." / "arrays" / "store.sqlite",
    ]
    shown = cli_sweep.display_path(sweep)
    for target in targets:
        code, out, err = run_cli(capsys, "collect", sweep, "--csv", target)
        assert (code, out) == (cli.EXIT_INPUT, "")
        assert err == (
            f"--csv: a file of the sweep in {shown} (its store or points/); write elsewhere"
            f" (got {str(target)!r})\n"
        )
    code, _, err = run_cli(capsys, "plot", sweep, "--kind", "energy", "--output", sweep / "points")
    assert code == cli.EXIT_INPUT and err.startswith(f"--output: a file of the sweep in {shown}")
    assert tree(sweep) == before


def test_collect_writes_beside_the_store_and_replaces_a_link(
    swept: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CSV inside the sweep directory that is not the sweep's own is fine; a link to a
    file of ours is replaced itself (the file it names is left alone)."""
    sweep = copy_sweep(swept, tmp_path / "arrays")
    code, out, _ = run_cli(capsys, "collect", sweep, "--csv", sweep / "table.csv")
    assert code == cli.EXIT_OK and out.startswith("wrote ")
    table = (sweep / "table.csv").read_text()
    real = tmp_path / "real.csv"
    real.write_text("old\n")
    real.chmod(0o640)
    (tmp_path / "link.csv").symlink_to(real)
    assert run_cli(capsys, "collect", sweep, "--csv", tmp_path / "link.csv")[0] == cli.EXIT_OK
    assert not (tmp_path / "link.csv").is_symlink()
    assert (tmp_path / "link.csv").read_text() == table
    assert real.read_text() == "old\n"
    assert real.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_an_interrupted_collect_leaves_the_earlier_csv_whole(
    swept: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "table.csv"
    target.write_text("the earlier table\n")

    def interrupted(handle: Any, columns: list[str], cells: list[dict[str, Any]]) -> None:
        handle.write("point,half a row")
        handle.flush()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler interrupts this

    monkeypatch.setattr(cli_sweep, "_write_table", interrupted)
    code, out, err = run_cli(capsys, "collect", swept, "--csv", target)
    assert (code, out) == (128 + signal.SIGTERM, "")
    assert err == "accelsim: stopped by SIGTERM; unfinished results removed\n"
    assert target.read_text() == "the earlier table\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.csv"]


def test_a_failed_plot_leaves_the_earlier_figure_whole(
    swept: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    figure = tmp_path / "energy.png"
    figure.write_bytes(b"the earlier figure")

    def full_disk(fig: object, path: Path, fmt: str) -> None:
        path.write_bytes(b"\x89PNG trunc")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("accelsim.sweep.plots.draw", full_disk)
    code, out, err = run_cli(capsys, "plot", swept, "--kind", "energy", "--output", figure)
    assert (code, out) == (cli.EXIT_INPUT, "")
    assert err == f"{figure}: cannot write: No space left on device\n"
    assert figure.read_bytes() == b"the earlier figure"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["energy.png"]


# ---- 6. ideal memory in every JSON file


def _strict(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"non-finite {constant} in JSON")

    return json.loads(text, parse_constant=refuse)


def test_ideal_memory_is_null_and_flagged_in_every_json_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ideal = ["--set", "dram.bandwidth_bytes_per_cycle=.inf"]
    assert run_cli(capsys, "run", SMOKE, "--out", tmp_path, *ideal)[0] == cli.EXIT_OK
    summary = _strict((tmp_path / "mlp_smoke" / "summary.json").read_text())
    design = summary["design"]
    assert (design["dram_bandwidth_bytes_per_cycle"], design["dram_ideal"]) == (None, True)
    assert StepSummary.from_dict(summary).design.dram_bandwidth_bytes_per_cycle == float("inf")
    models = ["--models", "mlp", "--out", tmp_path / "suite"]
    assert run_cli(capsys, "suite", SMOKE, *models, *ideal)[0] == cli.EXIT_OK
    _strict((tmp_path / "suite" / "smoke" / "mlp" / "summary.json").read_text())
    path = sweep_file(tmp_path, "grid:\n  dram.bandwidth_bytes_per_cycle: [.inf, 8]\n")
    assert (
        run_cli(
            capsys, "sweep", path, "--out", tmp_path / "out", "--jobs", 1, "--keep-points", "all"
        )[0]
        == 0
    )
    sweep = tmp_path / "out" / "arrays"
    for file in sweep.glob("points/*/*.json"):
        _strict(file.read_text())
    with sqlite3.connect(f"file:{sweep / 'store.sqlite'}?mode=ro", uri=True) as db:
        for (text,) in [
            *db.execute("SELECT value FROM meta"),
            *db.execute("SELECT extra FROM points"),
        ]:
            _strict(text)
        labels = [row[0] for row in db.execute("SELECT label FROM points ORDER BY point")]
    db.close()
    assert labels == ["dram.bandwidth_bytes_per_cycle=.inf", "dram.bandwidth_bytes_per_cycle=8"]
    code, out, _ = run_cli(capsys, "collect", sweep, "--json")
    rows = _strict(out)
    assert [
        (r["dram.bandwidth_bytes_per_cycle"], r["dram_bandwidth_bytes_per_cycle"], r["dram_ideal"])
        for r in rows
    ] == [(".inf", None, True), (8, 8.0, False)]
    code, _, _ = run_cli(
        capsys, "plot", sweep, "--kind", "energy", "--where", "dram.bandwidth_bytes_per_cycle=.inf"
    )
    assert code == cli.EXIT_OK


# ---- 8. and 11. outputs that cannot be written, and what plot writes


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("/dev/full", "/dev/full: cannot write: No space left on device"),
        ("DIR", "DIR: cannot write: is a directory"),
        ("FILE/x", "FILE/x: cannot write: Not a directory"),
    ],
)
def test_outputs_that_cannot_be_written_are_exit_2(
    swept: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str, message: str
) -> None:
    if target == "/dev/full" and not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    (tmp_path / "FILE").write_text("a file")
    target = target.replace("DIR", str(tmp_path)).replace("FILE", str(tmp_path / "FILE"))
    message = message.replace("DIR", str(tmp_path)).replace("FILE", str(tmp_path / "FILE"))
    before = tree(tmp_path)
    code, out, err = run_cli(capsys, "collect", swept, "--csv", target)
    assert (code, out, err) == (cli.EXIT_INPUT, "", message + "\n")
    code, out, err = run_cli(capsys, "plot", swept, "--kind", "energy", "--output", target)
    assert (code, out, err) == (cli.EXIT_INPUT, "", message + "\n")
    assert tree(tmp_path) == before
    assert not Path("/dev/full.png").exists()


def test_an_empty_output_path_is_a_usage_error(
    swept: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for args in (
        ["collect", swept, "--csv", ""],
        ["plot", swept, "--kind", "energy", "--output", ""],
    ):
        with pytest.raises(SystemExit) as excinfo:
            cli.main([str(a) for a in args])
        assert excinfo.value.code == cli.EXIT_INPUT
        assert "expected a file path (got '')" in capsys.readouterr().err


def test_a_full_disk_under_collect_keeps_the_earlier_file(
    swept: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "table.csv"
    target.write_text("earlier")

    def full(handle: Any, *args: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cli_sweep, "_write_table", full)
    code, _, err = run_cli(capsys, "collect", swept, "--csv", target)
    assert (code, err) == (cli.EXIT_INPUT, f"{target}: cannot write: No space left on device\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.csv"]
    assert target.read_text() == "earlier"


@pytest.mark.parametrize(
    ("output", "fmt", "written", "magic"),
    [
        ("figure", None, "figure", b"\x89PNG"),
        ("figure", "svg", "figure", b"<?xml"),
        ("figure.PDF", None, "figure.PDF", b"%PDF"),
        ("figure.svg", "svg", "figure.svg", b"<?xml"),
    ],
)
def test_plot_writes_exactly_the_output_it_names(
    swept: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    output: str,
    fmt: str | None,
    written: str,
    magic: bytes,
) -> None:
    extra = [] if fmt is None else ["--format", fmt]
    path = tmp_path / output
    code, out, err = run_cli(capsys, "plot", swept, "--kind", "energy", "--output", path, *extra)
    assert (code, out, err) == (cli.EXIT_OK, f"wrote {path}\n", "")
    assert [p.name for p in tmp_path.iterdir()] == [written]
    assert (tmp_path / written).read_bytes().startswith(magic)


@pytest.mark.parametrize(
    ("output", "fmt", "message"),
    [
        ("figure.jpg", None, "--output: unknown suffix '.jpg'; the formats are png, pdf, svg"),
        ("figure.png", "pdf", "--output: its suffix contradicts --format pdf"),
    ],
)
def test_plot_refuses_contradictory_outputs(
    swept: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    output: str,
    fmt: str | None,
    message: str,
) -> None:
    extra = [] if fmt is None else ["--format", fmt]
    path = tmp_path / output
    code, out, err = run_cli(capsys, "plot", swept, "--kind", "energy", "--output", path, *extra)
    assert (code, out, err) == (cli.EXIT_INPUT, "", f"{message} (got {str(path)!r})\n")
    assert list(tmp_path.iterdir()) == []


# ---- 10. a stdout that cannot be written


class FullStdout:
    """A buffered stdout on a full device: writes are buffered, a flush of them fails."""

    def __init__(self) -> None:
        self.pending = ""

    def write(self, text: str) -> int:
        self.pending += text
        return len(text)

    def flush(self) -> None:
        if self.pending:
            raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_stdout_after_the_results_says_they_are_safe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = sweep_file(tmp_path)
    sweep = tmp_path / "out" / "arrays"
    cases = [
        (
            ["sweep", path, "--out", tmp_path / "out", "--jobs", 1],
            f"; the results are complete in {sweep}",
        ),
        (
            ["run", SMOKE, "--out", tmp_path],
            f"; the results are complete in {tmp_path / 'mlp_smoke'}",
        ),
        (["collect", sweep], ""),
        (
            ["collect", sweep, "--csv", tmp_path / "t.csv"],
            f"; the results are complete in {tmp_path / 't.csv'}",
        ),
    ]
    for args, safe in cases:
        monkeypatch.setattr(sys, "stdout", FullStdout())
        code = cli.main([str(a) for a in args])
        err = capsys.readouterr().err
        assert code == cli.EXIT_INPUT, args
        assert messages(err)[-1] == f"<stdout>: cannot print: No space left on device{safe}"
    with Store(sweep) as store:
        assert len(store.rows()) == 4
    assert (tmp_path / "mlp_smoke" / "summary.json").is_file() and (tmp_path / "t.csv").is_file()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_a_sweep_into_dev_full_exits_2_with_its_results(tmp_path: Path) -> None:
    path = sweep_file(tmp_path)
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "accelsim",
                "sweep",
                str(path),
                "--out",
                str(tmp_path),
                "--jobs",
                "1",
            ],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            timeout=120,
        )
    assert done.returncode == cli.EXIT_INPUT
    assert messages(done.stderr)[-1] == (
        f"<stdout>: cannot print: No space left on device; the results are complete in"
        f" {tmp_path / 'arrays'}"
    )
    with Store(tmp_path / "arrays") as store:
        assert len(store.rows()) == 4


# ---- 15. long paths cut in messages


def test_long_paths_are_cut_in_messages(
    swept: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    long = tmp_path / ("d" * 4200)
    for args in (
        ["run", SMOKE, "--out", long],
        ["sweep", sweep_file(tmp_path), "--out", long],
        ["collect", swept, "--csv", long / "x.csv"],
        ["plot", swept, "--kind", "energy", "--output", long / "x.png"],
    ):
        code, _, err = run_cli(capsys, *args)
        assert code == cli.EXIT_INPUT, args
        (line,) = messages(err)
        assert "... (4," in line and line.endswith("File name too long"), line
        assert len(line) < 300, args


# ---- 16. suite model names that are the suite's files


def test_suite_model_names_that_are_the_suites_files_are_refused_before_simulating(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "name: s\nmodels:\n"
        + "".join(
            f"  - {{name: {n}, workload: {MLP}}}\n" for n in ("mlp", "suite.csv", "Suite.PNG")
        ),
        encoding="utf-8",
    )

    def never(*args: Any) -> None:
        pytest.fail("simulated before the names were checked")

    monkeypatch.setattr("accelsim.driver.run.simulate_training", never)
    code, out, err = run_cli(capsys, "suite", SMOKE, "--suite", suite, "--out", tmp_path / "out")
    files = ", ".join(cli_run.SUITE_FILES)
    assert (code, out) == (cli.EXIT_INPUT, "")
    assert err.splitlines() == [
        f"{suite}: models[1].name: is the name of a file the suite writes ({files}) (got 'suite.csv')",
        f"{suite}: models[2].name: is the name of a file the suite writes ({files}) (got 'Suite.PNG')",
    ]
    assert not (tmp_path / "out").exists()
