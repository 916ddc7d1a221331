"""Regression tests of the commands that write single files and project copies
(``import``, ``calibrate``, ``init``), and of the rule every writing command keeps
for a symbolic link: an existing output is replaced only with ``--force``, a link
itself and never its target; an output that is an input is refused; a failed
write loses nothing; a stdout that cannot be written is exit 2; header comments
cannot start a line of their own.

One test (or a parametrized family) per cause; most call :func:`accelsim.cli.main`
in this process, the concurrent ``init`` and a really closed stdout run processes.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from accelsim import cli, resources
from accelsim.config.loader import dump_yaml, load_hardware, parse_yaml, reads_back
from accelsim.errors import OutputError
from accelsim.importer.table_text import workload_text
from accelsim.lowering.infer import load_model
from accelsim.report import staging
from accelsim.report.staging import staged_entries
from accelsim.workload.model import Workload
from tests.conftest import ROOT as REPO

SMOKE = REPO / "configs" / "runs" / "smoke.yaml"
HARDWARE = REPO / "configs" / "hardware" / "tpu_v4.yaml"
SILICON = REPO / "configs" / "validation" / "silicon" / "tpu_v4_gemm_train.csv"
HOSTILE = "\n\r\x85\u2028\u2029\x1b\x00\t"
"""Characters YAML reads as line breaks, and escapes and NUL that may not appear raw."""


def run_cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    """``accelsim ARGS`` in this process: (exit code, stdout, stderr)."""
    code = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def onnx_model(path: Path, producer: str = "", version: str = "", doc: str = "") -> Path:
    """A one-MatMul ONNX model (4 features to 2) at ``path``."""
    onnx = pytest.importorskip("onnx")
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.zeros((4, 2), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="fc")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.producer_name, model.producer_version, model.doc_string = producer, version, doc
    onnx.save(model, path)
    return path


def measurements(path: Path) -> Path:
    """The first 40 rows of the TPU v4 measurements (a fit of one parameter in 0.2 s)."""
    path.write_text("".join(SILICON.read_text().splitlines(keepends=True)[:41]))
    return path


def calibrate_args(csv: Path, out: Path, hardware: Path = HARDWARE) -> list[object]:
    return ["calibrate", csv, "--hardware", hardware, "--out", out, "--fit", "op_overhead_us"]


def hidden(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


# ---- 1, 2. an existing output needs --force; a link is replaced, never its target


Writer = tuple[Callable[[Path], list[object]], dict[str, Path]]
"""How a command is called for an output, and what its inputs are."""


def _writer(command: str, tmp_path: Path) -> Writer:
    if command == "import":
        model = onnx_model(tmp_path / "tiny.onnx")
        return (lambda out: ["import", model, "--out", out]), {"model file": model}
    csv = measurements(tmp_path / "gemms.csv")
    hardware = tmp_path / "hw.yaml"
    shutil.copyfile(HARDWARE, hardware)
    inputs = {"measurements file": csv, "--hardware file": hardware}
    return (lambda out: calibrate_args(csv, out, hardware)), inputs


@pytest.fixture(params=["import", "calibrate"])
def writer(request: pytest.FixtureRequest, tmp_path: Path) -> Writer:
    """``import`` and ``calibrate``, each in turn."""
    return _writer(request.param, tmp_path)


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


# ---- 7. stdout closed or full: exit 2, the results written first


class _FullStdout:
    """A stdout on a full disk: what is written fails (flushing has nothing to write)."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("stdout", ["closed", "full"])
def test_a_stdout_that_cannot_be_written_is_exit_2_after_the_results(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    stdout: str,
) -> None:
    reason = "stdout is closed" if stdout == "closed" else "No space left on device"
    sweep_file = tmp_path / "arrays.yaml"
    sweep_file.write_text(f"name: arrays\nbase: {SMOKE}\ngrid:\n  array.rows: [8]\n")
    results = {
        "import": (_writer("import", tmp_path)[0](tmp_path / "w.yaml"), tmp_path / "w.yaml"),
        "calibrate": (
            _writer("calibrate", tmp_path)[0](tmp_path / "fitted.yaml"),
            tmp_path / "fitted.yaml",
        ),
        "init": (["init", tmp_path / "project"], tmp_path / "project"),
        "run": (["run", SMOKE, "--out", tmp_path / "runs"], tmp_path / "runs" / "mlp_smoke"),
        "suite": (
            ["suite", SMOKE, "--models", "mlp", "--out", tmp_path / "suite"],
            tmp_path / "suite" / "smoke",
        ),
        "sweep": (
            ["sweep", sweep_file, "--out", tmp_path / "sweeps", "--jobs", 1],
            tmp_path / "sweeps" / "arrays",
        ),
    }
    for command, (args, written) in results.items():
        monkeypatch.setattr(sys, "stdout", None if stdout == "closed" else _FullStdout())
        code = cli.main([str(a) for a in args])
        monkeypatch.undo()
        last = capsys.readouterr().err.splitlines()[-1]
        assert (code, last) == (
            2,
            f"<stdout>: cannot print: {reason}; the results are complete in {written}",
        ), command
    assert load_hardware(tmp_path / "fitted.yaml").timing.op_overhead_cycles > 0
    for command, args in {
        "layer --json": ["layer", "--hardware", HARDWARE, "--gemm", 8, 8, 8, "--json"],
        "check": ["check", SMOKE],
        "models": ["models", REPO / "workloads" / "mlp.yaml"],
    }.items():
        monkeypatch.setattr(sys, "stdout", None if stdout == "closed" else _FullStdout())
        code = cli.main([str(a) for a in args])
        monkeypatch.undo()
        assert (code, capsys.readouterr().err) == (2, f"<stdout>: cannot print: {reason}\n"), (
            command
        )


def test_a_process_started_with_stdout_closed_exits_2(tmp_path: Path) -> None:
    layer = ["layer", "--hardware", str(HARDWARE), "--gemm", "8", "8", "8", "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "accelsim", *layer],
        stderr=subprocess.PIPE,
        text=True,
        check=False,
        timeout=120,
        preexec_fn=lambda: os.close(1),
    )
    assert (done.returncode, done.stderr) == (2, "<stdout>: cannot print: stdout is closed\n")


# ---- 12, 8. header comments escaped; what is written reads back; non-UTF-8 names


@pytest.mark.parametrize("char", [*HOSTILE, "\U0001f600", "\U000e0001", '"', "\\", "\ufeff"])
def test_every_string_of_an_imported_table_reads_back_as_itself(char: str) -> None:
    text = f"a{char}b"
    written = workload_text(
        [f"header {text}", text],
        {"name": "w", "description": text, "input": {"kind": "vector", "features": 4}},
        [{"name": "fc", "kind": "linear", "out_features": 2}],
    )
    assert [line[0] for line in written.splitlines()[:2]] == ["#", "#"]
    assert parse_yaml(written, "w.yaml")["description"] == text
    assert written.isascii() or (char in "\U0001f600\U000e0001" and char in written)


def test_hostile_onnx_names_stay_in_their_comments_and_strings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evil = f"x{HOSTILE}name: pwned{HOSTILE}\U0001f600"
    name = f"m{HOSTILE.replace(chr(0), '')}layers: []\U0001f600.onnx"
    model = onnx_model(tmp_path / name, evil, evil, evil)
    out = tmp_path / "w.yaml"
    assert run_cli(capsys, "import", model, "--out", out)[0] == 0
    text = out.read_text(encoding="utf-8")
    lines = text.splitlines()
    header = [line for line in lines if line.startswith("#")]
    assert lines[: len(header)] == header and "\U0001f600" in header[0]
    data = yaml.safe_load(text)
    assert list(data) == ["name", "description", "source", "input", "layers"]
    assert data["source"].startswith(f"{name} (ONNX, opset 20, by x")
    workload, _ = load_model(out)
    assert [layer.name for layer in workload.layers] == ["fc", "loss"]


def test_a_measurements_file_name_cannot_set_a_key_of_the_fitted_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = measurements(tmp_path / "c\ntiming: {op_overhead_cycles: 99999}\n\u2028#.csv")
    out, plain = tmp_path / "fitted.yaml", tmp_path / "plain.yaml"
    assert run_cli(capsys, *calibrate_args(csv, out))[0] == 0
    head = out.read_text().splitlines()[0]
    assert head.endswith("/c\\ntiming: {op_overhead_cycles: 99999}\\n\\u2028#.csv")
    assert run_cli(capsys, *calibrate_args(measurements(tmp_path / "c.csv"), plain))[0] == 0
    assert load_hardware(out) == load_hardware(plain)
    assert load_hardware(out).timing.op_overhead_cycles != 99999


def test_non_utf8_file_names_are_written_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = os.fsencode(tmp_path)
    model = onnx_model(Path(os.fsdecode(raw + b"/bad\xff.onnx")))
    out = Path(os.fsdecode(raw + b"/out\xfe.yaml"))
    code, printed, _ = run_cli(capsys, "import", model, "--out", out)
    assert code == 0 and printed.startswith(f"wrote {tmp_path}/out\\udcfe.yaml: 2 layers")
    assert "from bad\\xff.onnx (ONNX" in out.read_text(encoding="utf-8")
    csv = measurements(Path(os.fsdecode(raw + b"/m\xff.csv")))
    assert run_cli(capsys, *calibrate_args(csv, tmp_path / "f.yaml"))[0] == 0
    assert (tmp_path / "f.yaml").read_text().splitlines()[0].endswith("/m\\udcff.csv")


def test_a_written_file_that_reads_back_otherwise_is_never_committed() -> None:
    hardware = load_hardware(HARDWARE)
    other = dump_yaml({**hardware.model_dump(mode="json"), "name": "other"})
    with pytest.raises(RuntimeError, match="reads back as another spec"):
        reads_back(other, hardware)
    with pytest.raises(RuntimeError, match="does not read back"):
        reads_back("name: [\n", hardware)
    workload = Workload.model_validate(
        {"name": "w", "input": {"kind": "vector", "features": 4}, "layers": [
            {"name": "fc", "kind": "linear", "out_features": 2}]}
    )  # fmt: skip
    reads_back(workload_text([], {"name": "w", "input": {"kind": "vector", "features": 4}},
                             [{"name": "fc", "kind": "linear", "out_features": 2}]), workload)  # fmt: skip
