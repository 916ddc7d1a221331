"""Regression tests of the commands that write single files and project copies
(``import``, ``calibrate``, ``init``), and of the rule every writing command keeps
for a symbolic link: an existing output is replaced only with ``--force``, a link
itself and never its target; an output that is an input is refused; a failed
write loses nothing.  What they print and the headers they write:
``test_writes_text.py``.

One test (or a parametrized family) per cause; most call :func:`accelsim.cli.main`
in this process, the concurrent ``init`` runs processes.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from accelsim import resources
from accelsim.errors import OutputError
from accelsim.report import staging
from accelsim.report.staging import staged_entries
from tests.hardening.writing import (
    SMOKE,
    Writer,
    calibrate_args,
    hidden,
    run_cli,
    writer_of,
)

# ---- 1, 2. an existing output needs --force; a link is replaced, never its target


@pytest.fixture(params=["import", "calibrate"])
def writer(request: pytest.FixtureRequest, tmp_path: Path) -> Writer:
    """``import`` and ``calibrate``, each in turn."""
    return writer_of(request.param, tmp_path)


def test_an_existing_output_or_link_needs_force_and_a_link_is_replaced_itself(
    tmp_path: Path, writer: Writer, capsys: pytest.CaptureFixture[str]
) -> None:
    args, _ = writer
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    existing = tmp_path / "existing.yaml"
    existing.write_text("mine\n")
    code, out, err = run_cli(capsys, *args(existing))
    assert (code, out, err) == (2, "", f"{existing}: exists; pass --force to replace it\n")
    assert existing.read_text() == "mine\n"
    dangling = tmp_path / "dangling.yaml"
    dangling.symlink_to(elsewhere / "created.yaml")
    linked = tmp_path / "linked.yaml"
    (elsewhere / "target.yaml").write_text("theirs\n")
    linked.symlink_to(elsewhere / "target.yaml")
    for link in (dangling, linked):
        code, out, err = run_cli(capsys, *args(link))
        assert (code, out) == (2, "")
        assert err == (
            f"{link}: exists (a symbolic link); pass --force to replace the link (never its"
            " target)\n"
        )
        code, out, _ = run_cli(capsys, *args(link), "--force")
        assert code == 0 and f"wrote {link}" in out
        assert not link.is_symlink() and link.read_text().startswith("# ")
    assert sorted(p.name for p in elsewhere.iterdir()) == ["target.yaml"]
    assert (elsewhere / "target.yaml").read_text() == "theirs\n"
    assert hidden(tmp_path) == []


def test_an_output_that_is_an_input_is_refused_even_with_force(
    tmp_path: Path, writer: Writer, capsys: pytest.CaptureFixture[str]
) -> None:
    args, inputs = writer
    for what, path in inputs.items():
        before = path.read_bytes()
        link, hard = tmp_path / f"link-{path.name}", tmp_path / f"hard-{path.name}"
        link.symlink_to(path)
        os.link(path, hard)
        for out in (path, link, hard):
            code, printed, err = run_cli(capsys, *args(out), "--force")
            assert (code, printed) == (2, "")
            assert err == (
                f"--out: is the {what}, an input of this command; write elsewhere (got {str(out)!r})\n"
            )
        assert path.read_bytes() == before and link.is_symlink()


def test_import_and_calibrate_refuse_before_reading_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The output is checked first: a missing model or hardware file is not reported."""
    out = tmp_path / "there.yaml"
    out.write_text("mine\n")
    code, _, err = run_cli(capsys, "import", tmp_path / "missing.onnx", "--out", out)
    assert (code, err) == (2, f"{out}: exists; pass --force to replace it\n")
    code, _, err = run_cli(capsys, *calibrate_args(tmp_path / "no.csv", out, tmp_path / "no.yaml"))
    assert (code, err) == (2, f"{out}: exists; pass --force to replace it\n")


# ---- the link rule for every other writing command


def test_run_and_suite_force_replace_a_link_never_its_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("keep")
    for command, extra in (("run", []), ("suite", ["--models", "mlp"])):
        out = tmp_path / command
        assert run_cli(capsys, command, SMOKE, *extra, "--out", out)[0] == 0
        (name,) = [p.name for p in out.iterdir()]
        shutil.rmtree(out / name)
        (out / name).symlink_to(victim)
        code, _, err = run_cli(capsys, command, SMOKE, *extra, "--out", out)
        assert code == 2 and err.splitlines()[-1].startswith(f"{out / name}: run directory exists")
        assert run_cli(capsys, command, SMOKE, *extra, "--out", out, "--force")[0] == 0
        table = "suite.csv" if command == "suite" else "summary.json"
        assert not (out / name).is_symlink() and (out / name / table).is_file()
        assert sorted(p.name for p in out.iterdir()) == [name]
    assert sorted(p.name for p in victim.iterdir()) == ["keep.txt"]


def test_collect_and_plot_replace_a_link_never_its_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from accelsim.sweep import Executor, plan_sweep, run_sweep

    sweep_file = tmp_path / "arrays.yaml"
    sweep_file.write_text(f"name: arrays\nbase: {SMOKE}\ngrid:\n  array.rows: [8, 16]\n")
    run_sweep(plan_sweep(sweep_file), tmp_path / "out", Executor())
    swept = tmp_path / "out" / "arrays"
    victim = tmp_path / "victim"
    victim.mkdir()
    for name in ("table.csv", "figure.png"):
        (victim / name).write_text("theirs")
        (tmp_path / name).symlink_to(victim / name)
    assert run_cli(capsys, "collect", swept, "--csv", tmp_path / "table.csv")[0] == 0
    figure = ["plot", swept, "--kind", "energy", "--output", tmp_path / "figure.png"]
    assert run_cli(capsys, *figure)[0] == 0
    for name in ("table.csv", "figure.png"):
        assert not (tmp_path / name).is_symlink() and (victim / name).read_text() == "theirs"
    assert (tmp_path / "table.csv").read_text().startswith("point,")


def test_sweep_and_init_never_write_through_a_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    sweep_file = tmp_path / "arrays.yaml"
    sweep_file.write_text(f"name: arrays\nbase: {SMOKE}\ngrid:\n  array.rows: [8]\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "arrays").symlink_to(victim)
    code, _, err = run_cli(capsys, "sweep", sweep_file, "--out", tmp_path / "out", "--jobs", 1)
    assert code == 2 and "a symbolic link or a file, not a sweep directory" in err
    project = tmp_path / "project"
    project.mkdir()
    (project / "configs").symlink_to(victim)
    code, out, err = run_cli(capsys, "init", project)
    assert (code, out, err) == (
        2,
        "",
        f"{project}: already holds configs/; choose a new directory\n",
    )
    assert list(victim.iterdir()) == [] and sorted(p.name for p in project.iterdir()) == ["configs"]


# ---- 1, 4. write errors are exit 2 with the path and the reason; nothing is lost


def _write_failures(tmp_path: Path) -> list[tuple[Path, str]]:
    (tmp_path / "file").write_text("a file")
    (tmp_path / "dir").mkdir()
    cases = [
        (tmp_path / "file" / "out.yaml", "Not a directory"),
        (tmp_path / "dir", "is a directory"),
        (tmp_path / ("x" * 300 + ".yaml"), "File name too long"),
    ]
    if Path("/dev/full").exists():
        cases.append((Path("/dev/full"), "No space left on device"))
    return cases


def test_write_errors_are_exit_2_with_the_path_and_the_reason(
    tmp_path: Path,
    writer: Writer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args, _ = writer
    for out, reason in _write_failures(tmp_path):
        code, printed, err = run_cli(capsys, *args(out), "--force")
        shown = (
            str(out)
            if len(str(out)) <= 200
            else f"{str(out)[:200]}... ({len(str(out))} characters)"
        )
        assert (code, printed, err) == (2, "", f"{shown}: cannot write: {reason}\n")
    new = tmp_path / "missing" / "parent" / "out.yaml"
    assert run_cli(capsys, *args(new))[0] == 0 and new.read_text().startswith("# ")

    def read_only(*_: Any, **__: Any) -> Any:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(staging.tempfile, "mkstemp", read_only)
    code, _, err = run_cli(capsys, *args(tmp_path / "ro.yaml"))
    assert (code, err) == (2, f"{tmp_path / 'ro.yaml'}: cannot write: Read-only file system\n")
    assert not (tmp_path / "ro.yaml").exists()


def test_a_full_disk_keeps_the_earlier_output_whole(
    tmp_path: Path,
    writer: Writer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args, _ = writer
    out = tmp_path / "out.yaml"
    out.write_text("the earlier file\n")
    real = Path.write_bytes

    def full(path: Path, data: bytes) -> int:
        real(path, data[:100])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", full)
    code, printed, err = run_cli(capsys, *args(out), "--force")
    assert (code, printed, err) == (2, "", f"{out}: cannot write: No space left on device\n")
    assert out.read_text() == "the earlier file\n" and hidden(tmp_path) == []


# ---- 3. init: one staging directory per process, nothing left on failure


def _bundled_files() -> list[str]:
    root = resources.data_dir()
    return sorted(
        str(p.relative_to(root))
        for top in resources.BUNDLED_TOPS
        for p in (root / top).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )


def test_four_concurrent_inits_leave_one_complete_copy(tmp_path: Path) -> None:
    project = tmp_path / "project"
    command = [sys.executable, "-m", "accelsim", "init", str(project)]
    started = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    done = [(*p.communicate(timeout=120), p.returncode) for p in started]
    assert sorted(code for _, _, code in done) == [0, 2, 2, 2]
    for out, err, code in done:
        if code == 2:
            assert (out, err.splitlines()[-1].split(": already holds")[0]) == ("", str(project))
    copied = sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file())
    assert copied == _bundled_files() and hidden(project) == []


@pytest.mark.parametrize("existing", [False, True])
def test_a_full_disk_under_init_removes_what_it_made_and_says_why(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    existing: bool,
) -> None:
    project = tmp_path / "project"
    if existing:
        project.mkdir()
        (project / "notes.txt").write_text("mine")
    copied = []
    real = shutil.copyfile

    def fills_up(source: Path, target: Path) -> Any:
        if len(copied) == 30:  # in workloads/, configs/ (39 files) staged already
            raise OSError(errno.ENOSPC, "No space left on device", str(target))
        copied.append(target)
        return real(source, target)

    monkeypatch.setattr(resources.shutil, "copyfile", fills_up)
    code, out, err = run_cli(capsys, "init", project)
    assert (code, out) == (2, "")
    assert err == f"{project}: cannot write: No space left on device; removed what was written\n"
    if existing:
        assert sorted(p.name for p in project.iterdir()) == ["notes.txt"]
    else:
        assert not project.exists()
    monkeypatch.setattr(resources.shutil, "copyfile", real)
    assert run_cli(capsys, "init", project)[0] == 0


def test_init_write_errors_are_exit_2_with_the_path_and_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "file").write_text("a file")
    long = tmp_path / ("x" * 300)
    for project, reason in (
        (tmp_path / "file" / "project", "Not a directory"),
        (tmp_path / "file", "File exists"),
        (long, "File name too long"),
    ):
        code, out, err = run_cli(capsys, "init", project)
        where = (
            str(project)
            if project != long
            else f"{str(long)[:200]}... ({len(str(long))} characters)"
        )
        assert (code, out, err) == (2, "", f"{where}: cannot write: {reason}\n")

    def read_only(*_: Any, **__: Any) -> Any:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(staging.tempfile, "mkdtemp", read_only)
    code, _, err = run_cli(capsys, "init", tmp_path / "project")
    assert (code, err) == (2, f"{tmp_path / 'project'}: cannot write: Read-only file system\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_entries_moved_in_before_a_failure_are_removed(tmp_path: Path) -> None:
    """Another writer makes the second entry meanwhile: the first, moved in, goes again."""
    with pytest.raises(OutputError) as caught, staged_entries(tmp_path, ["a", "b"]) as staging:
        (staging / "a").mkdir()
        (staging / "b").mkdir()
        (tmp_path / "b").mkdir()
    assert str(caught.value) == f"{tmp_path}: already holds b/; choose a new directory"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]
