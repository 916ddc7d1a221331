"""Regression tests of what the writing commands print and write as text: a stdout
that is closed or full is exit 2 after the results are written; header comments
and strings of written files cannot start a line of their own, whatever a file
name or a model holds (non-UTF-8 names included); what is written reads back.

One test (or a parametrized family) per cause; most call :func:`accelsim.cli.main`
in this process, one starts a process with its stdout closed.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from accelsim import cli
from accelsim.config.loader import dump_yaml, load_hardware, parse_yaml, reads_back
from accelsim.importer.table_text import workload_text
from accelsim.lowering.infer import load_model
from accelsim.workload.model import Workload
from tests.hardening.writing import (
    HARDWARE,
    HOSTILE,
    REPO,
    SMOKE,
    calibrate_args,
    measurements,
    onnx_model,
    run_cli,
    writer_of,
)

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
        "import": (writer_of("import", tmp_path)[0](tmp_path / "w.yaml"), tmp_path / "w.yaml"),
        "calibrate": (
            writer_of("calibrate", tmp_path)[0](tmp_path / "fitted.yaml"),
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
