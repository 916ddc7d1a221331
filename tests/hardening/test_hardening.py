"""Regression tests of the hardening issue: hostile and extreme inputs.

Nothing is written outside ``--out``, no earlier run is lost (``--force``,
concurrent runs, failures, signals), no count overflows silently, no result is
non-finite, and every absurd input is a clean exit 2 that names the field and
the limit within a second or two.  Most tests call :func:`accelsim.cli.main`
in-process (a subprocess costs a second of imports); the few that need a real
process (a FIFO that could block, a closed pipe) run one.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from tqdm import tqdm

import accelsim
from accelsim import cli
from accelsim.config.base import Convention
from accelsim.config.files import display_path
from accelsim.config.hardware import HardwareSpec
from accelsim.config.loader import load_energy, load_hardware, parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.layer import _touched, conv_gemm, gemm_for, simulate_layer
from accelsim.driver.run import simulate_run, simulate_training
from accelsim.errors import (
    MAX_COUNT,
    ConfigError,
    InputError,
    LimitError,
    OutputError,
    Problem,
    SimulationError,
)
from accelsim.graph.ops import Phase
from accelsim.report import plots, staging, writer
from accelsim.report.result import RunResult
from accelsim.report.staging import child_directory, rename_noreplace, staged_directory
from tests.conftest import ROOT as REPO

SMOKE = REPO / "configs" / "runs" / "smoke.yaml"
DEFAULT_RUN = REPO / "configs" / "runs" / "default.yaml"
ADAGP_RUN = REPO / "configs" / "experiments" / "adagp" / "run.yaml"
SCALESIM_HW = REPO / "configs" / "hardware" / "scalesim.yaml"
HOROWITZ = REPO / "configs" / "energy" / "horowitz45.yaml"
MLP = REPO / "workloads" / "mlp.yaml"


def run_cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    """``accelsim ARGS`` in this process: (exit code, stdout, stderr)."""
    code = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def leftovers(directory: Path) -> list[str]:
    """Hidden staging or replaced directories left below ``directory``."""
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(staging.PREFIX))


def snapshot(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


# --------------------------------------------------------------------------- paths


@pytest.mark.parametrize("name", ["../victim", "/tmp/absolute", "a/b", "..", ".hidden", "x" * 201])
def test_suite_model_names_cannot_leave_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        yaml.safe_dump({"name": "s", "models": [{"name": name, "workload": str(MLP)}]}),
        encoding="utf-8",
    )
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "suite", SMOKE, "--suite", suite, "--out", out)
    assert code == cli.EXIT_INPUT
    assert err.startswith(f"{display_path(suite)}: models[0].name: ")
    assert len(err.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["suite.yaml"]


@pytest.mark.parametrize("name", ["", ".", "..", "../x", "/abs", "a/b", "a\nb", "x" * 201])
def test_child_directory_takes_one_plain_component(tmp_path: Path, name: str) -> None:
    with pytest.raises(OutputError, match="a run or model name is 1 to 200 letters"):
        child_directory(tmp_path, name)
    assert child_directory(tmp_path, "x" * 200) == tmp_path / ("x" * 200)


def test_run_names_up_to_200_characters_are_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    long = "r" * 200
    code, _, err = run_cli(capsys, "run", SMOKE, "--out", tmp_path, "--set", f"name={long}")
    assert code == cli.EXIT_OK, err
    assert (tmp_path / f"mlp_{long}"[:200] / "summary.json").is_file()
    code, _, err = run_cli(capsys, "run", SMOKE, "--out", tmp_path, "--set", f"name={long}r")
    assert code == cli.EXIT_INPUT
    assert err.startswith("--set: name: string should have at most 200 characters (got 'rrr")
    assert err.rstrip().endswith("... (203 characters))")
    assert leftovers(tmp_path) == []


# --------------------------------------------------------------------------- commits


def fill(directory: Path, label: str) -> None:
    (directory / "label.txt").write_text(label, encoding="utf-8")
    (directory / "sub").mkdir()
    (directory / "sub" / "data.txt").write_text(label * 3, encoding="utf-8")


def test_force_renames_the_old_run_aside_and_deletes_it_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "run"
    target.mkdir()
    fill(target, "old")
    seen: list[tuple[str, str]] = []
    remove = staging._remove

    def spy(path: Path) -> None:
        # When the old run is deleted, the new one is already in place.
        seen.append(((path / "label.txt").read_text(), (target / "label.txt").read_text()))
        remove(path)

    monkeypatch.setattr(staging, "_remove", spy)
    with staged_directory(target, force=True) as staged:
        fill(staged, "new")
    assert seen == [("old", "new")]
    assert snapshot(target) == {"label.txt": b"new", "sub/data.txt": b"newnewnew"}
    assert leftovers(tmp_path) == []


def test_a_failed_forced_commit_keeps_the_old_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "run"
    target.mkdir()
    fill(target, "old")
    before = snapshot(target)
    calls = []

    def failing(source: Path, destination: Path) -> None:
        calls.append(destination)
        if len(calls) == 1:
            raise FileExistsError(errno.EEXIST, "exists", str(destination))
        raise OSError(errno.EIO, "I/O error", str(destination))

    monkeypatch.setattr(staging, "rename_noreplace", failing)
    with (
        pytest.raises(OutputError, match="cannot write results"),
        staged_directory(target, force=True) as staged,
    ):
        fill(staged, "new")
    assert calls == [target, target]
    assert snapshot(target) == before
    assert leftovers(tmp_path) == []


def test_concurrent_commits_without_force_never_replace(tmp_path: Path) -> None:
    target = tmp_path / "run"
    writers = 8
    ready = threading.Barrier(writers)
    outcomes: list[str] = []

    def write(i: int) -> None:
        try:
            with staged_directory(target, force=False) as staged:
                (staged / f"writer{i}.txt").write_text(str(i), encoding="utf-8")
                ready.wait(timeout=10)
            outcomes.append(f"ok {i}")
        except OutputError as exc:
            outcomes.append(str(exc))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [o for o in outcomes if o.startswith("ok ")]
    assert len(winners) == 1, outcomes
    assert all("run directory exists" in o for o in outcomes if o not in winners)
    assert [p.name for p in target.iterdir()] == [f"writer{winners[0][3:]}.txt"]
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("existing", ["file", "empty directory", "directory"])
def test_rename_noreplace_refuses_any_existing_target(tmp_path: Path, existing: str) -> None:
    source, target = tmp_path / "source", tmp_path / "target"
    source.mkdir()
    (source / "a").write_text("new", encoding="utf-8")
    if existing == "file":
        target.write_text("old", encoding="utf-8")
    else:
        target.mkdir()
        if existing == "directory":
            (target / "a").write_text("old", encoding="utf-8")
    with pytest.raises(FileExistsError):
        rename_noreplace(source, target)
    assert (source / "a").read_text() == "new"
    rename_noreplace(source, tmp_path / "fresh")
    assert (tmp_path / "fresh" / "a").read_text() == "new"


def test_gantt_is_drawn_in_staging_and_a_failure_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    drawn: list[Path] = []

    def full_disk(ops_csv: Path, png: Path, title: str, *dram: object) -> None:
        drawn.append(png)
        png.write_bytes(b"\x89PNG trunc")
        raise OSError(errno.ENOSPC, "No space left on device", str(png))

    monkeypatch.setattr(plots, "plot_gantt", full_disk)
    code, out, err = run_cli(capsys, "run", SMOKE, "--out", tmp_path, "--gantt")
    assert code == cli.EXIT_INPUT
    assert "No space left on device" in err and "Traceback" not in err
    assert out == ""
    assert drawn and drawn[0].parent.name.startswith(staging.PREFIX)
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- signals


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_removes_staging_keeps_the_old_run_and_exits_128_plus_n(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    signum: signal.Signals,
) -> None:
    assert run_cli(capsys, "run", SMOKE, "--out", tmp_path)[0] == cli.EXIT_OK
    before = snapshot(tmp_path / "mlp_smoke")
    write = writer.write_run_files

    def interrupted(directory: Path, *args: Any) -> None:
        write(directory, *args)
        os.kill(os.getpid(), signum)
        time.sleep(5)  # the handler interrupts this

    monkeypatch.setattr(writer, "write_run_files", interrupted)
    started = time.perf_counter()
    code, out, err = run_cli(capsys, "run", SMOKE, "--out", tmp_path, "--force")
    assert time.perf_counter() - started < 4
    assert code == 128 + signum
    assert err.splitlines() == [
        f"accelsim: stopped by {signal.Signals(signum).name}; unfinished results removed"
    ]
    assert out == ""
    assert snapshot(tmp_path / "mlp_smoke") == before
    assert leftovers(tmp_path) == []
    # The handlers are restored: a later signal is no longer ours.
    assert signal.getsignal(signal.SIGTERM) is not cli._on_signal


def test_ctrl_c_while_the_command_loads_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt  # as Ctrl-C during pydantic's or NumPy's import

    monkeypatch.setattr(cli.importlib, "import_module", interrupted)
    code, out, err = run_cli(capsys, "run", SMOKE, "--out", tmp_path)
    assert (code, out) == (130, "")
    assert err.splitlines() == ["accelsim: stopped by SIGINT"]
    assert list(tmp_path.iterdir()) == []


def test_a_closed_stdout_ends_quietly(tmp_path: Path) -> None:
    topology = tmp_path / "many.csv"
    # About 900 bytes of JSON per row: 160 rows overflow the 64 KiB pipe buffer.
    rows = [f"L{i}, {64 + i}, {64 + i}, 64" for i in range(160)]
    topology.write_text("name, M, N, K\n" + "\n".join(rows) + "\n", encoding="utf-8")
    args = ["layer", "--hardware", SCALESIM_HW, "--topology", topology, "--json"]
    process = subprocess.Popen(
        [sys.executable, "-m", "accelsim", *map(str, args)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.read(1) == b"["
    process.stdout.close()  # as `| head -c 1` does
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=60) == 128 + 13
    assert stderr == ""


# --------------------------------------------------------------------------- numbers


def test_a_step_whose_op_counts_overflow_is_rejected_naming_batch_size() -> None:
    # fc2 of 2,048 x 2e9 weights at 10^7 samples: 4.1e19 MACs in one op, past 2^62
    sets = parse_sets(
        [
            "workload=workloads/mlp.yaml",
            "batch_size=10000000",
            "workload.layers[fc2].out_features=2000000000",
        ]
    )
    with pytest.raises(ConfigError) as excinfo:
        simulate_training(load_inputs(DEFAULT_RUN, sets))
    first = excinfo.value.problems[0]
    assert (first.path, first.value) == ("batch_size", 10_000_000)
    assert first.message == (
        "layer fc2: one op's MACs (4.1e+19) exceed the limit of 2^62 (4.61e+18) of an op's"
        " counts; lower the batch size or the workload's layer sizes"
    )


def test_a_step_past_int64_macs_is_counted_exactly() -> None:
    # VGG-16 at 2 x 10^8 samples: 9.26e18 MACs, past int64's 9.22e18; each op under 2^62
    sets = parse_sets(["workload=workloads/vgg16.yaml", "batch_size=200000000"])
    macs = simulate_run(load_inputs(DEFAULT_RUN, sets)).summary()["macs"]
    one = simulate_run(
        load_inputs(DEFAULT_RUN, parse_sets(["workload=workloads/vgg16.yaml", "batch_size=1"]))
    ).summary()["macs"]
    assert macs["total"] == 200_000_000 * one["total"] == 9_264_817_766_400_000_000
    assert macs["total"] > 2**63 - 1


def test_a_step_longer_than_2_to_the_62_cycles_stops_cleanly(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A = 10^16 bf16 elements at 1/1000 byte per cycle: 2e19 cycles of DRAM alone.
    hw = load_hardware(SCALESIM_HW, parse_sets(["dram.bandwidth_bytes_per_cycle=0.001"]))
    gemm = gemm_for(10**9, 1, 10**7, Phase.FWD)
    assert gemm.m * gemm.n * gemm.k <= MAX_COUNT
    with pytest.raises(LimitError, match=r"more than 2\^62 cycles"):
        simulate_layer(hw, load_energy(HOROWITZ), gemm, Phase.FWD, Convention.ACCELSIM)
    code, _, err = run_cli(
        capsys,
        "layer",
        "--hardware",
        SCALESIM_HW,
        "--set",
        "dram.bandwidth_bytes_per_cycle=0.001",
        "--gemm",
        10**9,
        1,
        10**7,
    )
    assert code == cli.EXIT_INPUT
    assert err.startswith("accelsim: the step takes more than 2^62 cycles")


@pytest.fixture(scope="module")
def smoke_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("smoke")
    assert cli.main(["run", str(SMOKE), "--out", str(out)]) == cli.EXIT_OK
    return out / "mlp_smoke"


def test_result_files_are_strict_json_and_name_the_version(smoke_out: Path) -> None:
    def reject(constant: str) -> None:
        raise AssertionError(f"non-finite {constant} in summary.json")

    summary = json.loads((smoke_out / "summary.json").read_text(), parse_constant=reject)
    assert summary["accelsim_version"] == accelsim.__version__
    first = (smoke_out / "resolved_config.yaml").read_text().splitlines()[0]
    assert first == f"# written by accelsim {accelsim.__version__}"


def test_a_non_finite_summary_is_never_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = simulate_training(load_inputs(SMOKE))
    monkeypatch.setattr(type(result), "summary", lambda self: {"energy_pj": float("inf")})
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        accelsim.write_run(result, "", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_utilization_outside_0_1_is_never_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RunResult, "utilization", lambda self: 1.5)
    with pytest.raises(SimulationError, match=r"base step: utilization 1.5 outside \[0, 1\]"):
        simulate_run(load_inputs(SMOKE))


# --------------------------------------------------------------------------- bounds


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            "buffers.ifmap_kib=1e308",
            "buffers.ifmap_kib: input should be less than or equal to 1073741824",
        ),
        (
            "dram.bandwidth_bytes_per_cycle=1e-12",
            "dram.bandwidth_bytes_per_cycle: input should be greater than or equal to 0.001",
        ),
        (
            "dram.latency_cycles=1000000000000000000",
            "dram.latency_cycles: input should be less than or equal to 2147483647",
        ),
        (
            "batch_size=1000000000000000000",
            "batch_size: input should be less than or equal to 2147483647",
        ),
        (
            "energy.sram.capacity_exponent=1000",
            "energy.sram.capacity_exponent: input should be less than or equal to 4",
        ),
        (
            "workload.layers[fc1].out_features=100000000000000000000",
            "workload.layers[fc1].out_features: input should be less than or equal to 2147483647",
        ),
        (
            "energy.dram_read_pj_per_bit=1e308",
            "energy.dram_read_pj_per_bit: input should be less than or equal to 1000000",
        ),
        ("clock_mhz=1e-300", "clock_mhz: input should be greater than or equal to 0.001"),
        ("processors=100000", "processors: input should be less than or equal to 8192"),
        (
            "training.epochs=1000000000",
            "training.epochs: input should be less than or equal to 100000",
        ),
        (
            "techniques={gpipe: {mini_batches: 1000000}}",
            "techniques.gpipe.mini_batches: input should be less than or equal to 1024",
        ),
    ],
)
def test_absurd_sizes_are_rejected_at_once_naming_field_and_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], setting: str, message: str
) -> None:
    started = time.perf_counter()
    code, out, err = run_cli(capsys, "run", SMOKE, "--out", tmp_path, "--set", setting)
    assert time.perf_counter() - started < 2
    assert code == cli.EXIT_INPUT
    (line,) = err.splitlines()
    assert message in line
    assert out == ""
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        (["--gemm", 10**9, 10**9, 10**9], "--gemm: 1e+27 MACs exceed the limit of 2^62"),
        (
            ["--conv", 10**9, 10**9, 3, 3, 3, 64, 1],
            "--conv: 1.73e+21 MACs exceed the limit of 2^62",
        ),
    ],
)
def test_huge_layers_are_rejected_at_once(
    capsys: pytest.CaptureFixture[str], shape: list[object], message: str
) -> None:
    started = time.perf_counter()
    code, _, err = run_cli(capsys, "layer", "--hardware", SCALESIM_HW, *shape)
    assert time.perf_counter() - started < 2
    assert code == cli.EXIT_INPUT
    assert err.startswith(message)


def test_layer_sizes_above_2_to_the_31_are_usage_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as excinfo:
        cli.main(["layer", "--hardware", str(SCALESIM_HW), "--gemm", "1e11", "1", "1"])
    assert excinfo.value.code == cli.EXIT_INPUT
    with pytest.raises(SystemExit):
        cli.main(["layer", "--hardware", str(SCALESIM_HW), "--gemm", str(2**31), "1", "1"])
    assert "up to 2^31 - 1 = 2,147,483,647 (got 2147483648)" in capsys.readouterr().err


def test_the_ifmap_footprint_is_counted_in_closed_form() -> None:
    def by_set(size: int, kernel: int, stride: int, windows: int) -> int:
        covered: set[int] = set()
        for e in range(windows):
            covered.update(range(e * stride, min(size, e * stride + kernel)))
        return len(covered)

    for size in range(1, 24):
        for kernel in range(1, size + 1):
            for stride in range(1, 10):
                exact = (size - kernel) // stride + 1
                scalesim = -(-(size - kernel + stride) // stride)  # may run off the edge
                for windows in (exact, scalesim):
                    assert _touched(size, kernel, stride, windows) == by_set(
                        size, kernel, stride, windows
                    )
    # 10^9 x 10^9 pixels, instantly: every pixel is touched by some 3x3 window.
    gemm = conv_gemm(10**9, 10**9, 3, 3, 3, 64, 1, Phase.FWD, Convention.ACCELSIM)
    assert gemm.a_elements == 3 * 10**18


# --------------------------------------------------------------------------- YAML and files


def billion_laughs(levels: int) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        refs = ", ".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (billion_laughs(10), "more than 200,000 values once YAML aliases are expanded"),
        ("a: &a [*a]\n", "nested deeper than 64 levels"),
        ("a: " + "[" * 900 + "]" * 900 + "\n", "invalid YAML: nested deeper than 64 levels"),
        ("a: " + "[" * 70 + "]" * 70 + "\n", "invalid YAML: nested deeper than 64 levels"),
        (
            "".join(" " * i + "a:\n" for i in range(70)) + " " * 70 + "b: 1\n",
            "nested deeper than 64 levels",
        ),
        (
            "".join(" " * i + "a:\n" for i in range(300)),
            "invalid YAML: nested deeper than 64 levels",
        ),
        (
            "k: don't\nv: " + "[" * 99 + "]" * 99 + "\nw: 'x'\n",
            "invalid YAML: nested deeper than 64 levels",
        ),
    ],
    ids=[
        "billion-laughs",
        "alias-cycle",
        "900-levels",
        "70-levels",
        "block-70",
        "block-300",
        "quote",
    ],
)
def test_yaml_bombs_and_deep_nesting_are_rejected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(text, encoding="utf-8")
    started = time.perf_counter()
    code, _, err = run_cli(capsys, "check", path)
    assert time.perf_counter() - started < 2
    assert code == cli.EXIT_INPUT
    assert err == f"{display_path(path)}: {message}\n"


def test_deep_set_values_are_rejected() -> None:
    with pytest.raises(ConfigError, match="nested deeper than 64 levels"):
        parse_sets(["seed=" + "[" * 900 + "]" * 900])


def test_files_that_are_not_regular_text_are_rejected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"name: \xff\xfe\x00\x01")
    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as handle:
        handle.truncate(17 * 2**20)
    for path, message in [
        (Path("/dev/zero"), "not a regular file"),
        (tmp_path, "not a regular file"),
        (binary, "not a UTF-8 text file (byte 6 cannot be decoded)"),
        (huge, "larger than 16 MiB, not an input file"),
    ]:
        code, _, err = run_cli(capsys, "check", path)
        assert (code, err) == (cli.EXIT_INPUT, f"{display_path(path)}: {message}\n")
    code, _, err = run_cli(capsys, "layer", "--hardware", SCALESIM_HW, "--topology", binary)
    assert (code, err) == (
        cli.EXIT_INPUT,
        f"{binary}: not a UTF-8 text file (byte 6 cannot be decoded)\n",
    )
    sets = parse_sets(
        [
            "workload=workloads/mlp.yaml",
            f"techniques.gradient_prediction.schedule.error_trace={binary}",
        ]
    )
    with pytest.raises(ConfigError) as excinfo:
        load_inputs(ADAGP_RUN, sets)
    assert [str(p) for p in excinfo.value.problems] == [
        "--set: techniques.gradient_prediction.schedule.error_trace:"
        f" not a UTF-8 text file (byte 6 cannot be decoded) (got '{binary}')"
    ]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_run_file_does_not_block(tmp_path: Path) -> None:
    fifo = tmp_path / "run.yaml"
    os.mkfifo(fifo)
    done = subprocess.run(
        [sys.executable, "-m", "accelsim", "run", str(fifo), "--out", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert (done.returncode, done.stderr) == (cli.EXIT_INPUT, f"{fifo}: not a regular file\n")


# --------------------------------------------------------------------------- small cases


def test_a_superscript_digit_is_a_layer_name_not_an_index() -> None:
    with pytest.raises(ConfigError) as excinfo:
        load_inputs(SMOKE, parse_sets(["workload.layers[²].out_features=3"]))
    (problem,) = excinfo.value.problems
    assert (problem.file, problem.path) == ("--set", "workload.layers[²].out_features")
    assert problem.message.startswith("no list element of that name")


def test_messages_stay_on_one_line_and_short() -> None:
    problem = Problem("f\nx.yaml", "a\x00b\nc", "bad\nvalue", "v" * 1000)
    text = str(problem)
    assert "\n" not in text and "\x00" not in text
    assert text.startswith("f\\nx.yaml: a\\x00b\\nc: bad\\nvalue (got 'vvv")
    assert text.endswith("... (1,002 characters))")
    assert len(text) < 300
    with pytest.raises(ConfigError) as excinfo:
        parse_sets(["batch\n_size=3"])
    assert str(excinfo.value) == (
        "--set: the key holds a control character (newline, NUL, ...) (got 'batch\\n_size')"
    )


def adagp_sets(*extra: str) -> list[Any]:
    return parse_sets(["workload=workloads/mlp.yaml", "training.epochs=3", *extra])


def test_schedule_minimum_above_maximum_is_rejected() -> None:
    prefix = "techniques.gradient_prediction.schedule"
    with pytest.raises(ConfigError) as excinfo:
        load_inputs(ADAGP_RUN, adagp_sets(f"{prefix}.minimum=0.8", f"{prefix}.maximum=0.2"))
    (problem,) = excinfo.value.problems
    assert (problem.path, problem.message, problem.value) == (
        f"{prefix}.minimum",
        "larger than maximum (0.2)",
        0.8,
    )


@pytest.mark.parametrize("bad", ["nan", "inf", "-inf", "x"])
def test_a_non_finite_error_trace_value_is_rejected(tmp_path: Path, bad: str) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(f"epoch,batch,predictor_error\n0,0,0.3\n1,0,{bad}\n2,0,0.1\n")
    key = "techniques.gradient_prediction.schedule.error_trace"
    with pytest.raises(ConfigError) as excinfo:
        load_inputs(ADAGP_RUN, adagp_sets(f"{key}={trace}"))
    # A bad row is blamed on the trace file, at its line.
    assert [str(p) for p in excinfo.value.problems] == [
        f"{display_path(trace)}: line 3: predictor_error: expected a finite number >= 0"
        f" (got '{bad}')"
    ]


# --------------------------------------------------------------------------- honest output


def test_several_processors_with_the_single_assignment_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, "run", SMOKE, "--out", tmp_path, "--set", "processors=4")
    assert code == cli.EXIT_OK
    assert err == (
        "accelsim: warning: 4 processors, but the single assignment runs the step on"
        " processor 0; set assignment=data_parallel or a pipeline technique to use them\n"
    )
    assert "(4 x 32x32 os, single assignment: processor 0 only), batch 4" in out


def test_several_arrays_per_processor_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(capsys, "run", SMOKE, "--out", tmp_path, "--set", "array.count=2")
    assert code == cli.EXIT_OK
    assert "(1 x 2 x 32x32 os), batch 4" in out


def test_data_parallel_stalls_are_a_mean_share_per_processor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sets = ["--set", "processors=4", "--set", "assignment=data_parallel"]
    code, out, err = run_cli(capsys, "run", SMOKE, "--out", tmp_path, *sets)
    assert (code, err) == (cli.EXIT_OK, "")
    summary = json.loads((tmp_path / "mlp_smoke" / "summary.json").read_text())
    stalls, cycles = summary["array_stall_cycles"], summary["total_cycles"]
    assert summary["stall_fraction"] == stalls / (4 * cycles)
    assert 0 <= summary["stall_fraction"] <= 1
    line = next(s for s in out.splitlines() if s.startswith("array stalls"))
    assert f"{stalls / 4:,.0f} cycles per processor on average" in line


def test_a_technique_run_leads_with_the_technique(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sets = ["--set", "processors=2", "--set", "run.techniques={layerpipe: {}}"]
    code, out, _ = run_cli(capsys, "run", SMOKE, "--out", tmp_path, *sets)
    assert code == cli.EXIT_OK
    lines = out.splitlines()
    assert lines[0].split() == ["techniques", "layerpipe"]
    baseline = lines.index("baseline step (no technique applied):")
    assert any(s.startswith("speedup") for s in lines[:baseline])
    assert lines[baseline + 1].startswith("run ")


def test_the_readme_states_what_a_new_user_needs() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    cli_reference = (REPO / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    reliability = (REPO / "docs" / "reliability.md").read_text(encoding="utf-8")
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert 'license = { text = "MIT" }' in pyproject
    assert (REPO / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    assert "Python 3.10 to 3.13" in readme and "python3 -m venv" in readme
    assert "## `accelsim layer --hardware HW.yaml (--gemm M N K | --conv" in cli_reference
    assert "| `--topology CSV` |" in cli_reference
    assert "\n## Reliability\n" in reliability
    # The ADA-GP quick-start line trains past the warm-up, so GP steps run.
    assert '--set "run.techniques={gradient_prediction: {}}" --set training.epochs=90' in readme


def test_hardware_bounds_are_part_of_the_spec() -> None:
    schema = HardwareSpec.model_json_schema()
    assert schema["properties"]["processors"]["maximum"] == 8192


# --------------------------------------------------------------------------- bandwidth


@settings(max_examples=12, deadline=None, derandomize=True)
@given(
    hardware=st.sampled_from(["default", "eyeriss", "tpu_v1", "scalesim", "multichip"]),
    model=st.sampled_from(["mlp", "lenet5", "lstm_ptb", "linear5"]),
    batch=st.integers(1, 8),
    processors=st.sampled_from([1, 2, 4]),
    optimizer=st.sampled_from(["sgd", "momentum", "adam"]),
    bandwidth=st.sampled_from([1, 4, 16, 64, 256]),
)
def test_more_dram_bandwidth_never_slows_a_shipped_preset(
    hardware: str, model: str, batch: int, processors: int, optimizer: str, bandwidth: int
) -> None:
    sets = [
        f"workload=workloads/{model}.yaml",
        f"hardware=configs/hardware/{hardware}.yaml",
        f"batch_size={max(batch, processors)}",
        f"processors={processors}",
        f"assignment={'data_parallel' if processors > 1 else 'single'}",
        f"optimizer.kind={optimizer}",
    ]
    cycles = [
        simulate_run(
            load_inputs(DEFAULT_RUN, parse_sets([*sets, f"dram.bandwidth_bytes_per_cycle={bw}"]))
        ).total_cycles
        for bw in (bandwidth, 2 * bandwidth, ".inf")
    ]
    assert cycles == sorted(cycles, reverse=True)


ANOMALY = [
    "workload=workloads/lstm_ptb.yaml",
    "hardware=configs/hardware/eyeriss.yaml",
    "array.rows=128",
    "array.cols=256",
    "buffers.ifmap_kib=4096",
    "buffers.filter_kib=256",
    "buffers.ofmap_kib=1024",
    "word_bytes={activations: 4, weights: 4, gradients: 4, optimizer_state: 4}",
    "batch_size=7",
    "processors=4",
    "assignment=data_parallel",
    "optimizer.kind=adam",
]


def test_the_documented_bandwidth_anomaly_is_a_scheduling_order_change() -> None:
    """docs/reliability.md: doubling the bandwidth slows this step by 3.0 %.

    No transfer takes longer; the greedy, in-program-order vector unit takes the
    weight updates in another order once the all-reduces finish in another order
    on the shared channel, and the last long update starts later.
    """
    slow, fast = (
        simulate_run(
            load_inputs(DEFAULT_RUN, parse_sets([*ANOMALY, f"dram.bandwidth_bytes_per_cycle={bw}"]))
        )
        for bw in (1024, 2048)
    )
    assert (slow.total_cycles, fast.total_cycles) == (27_956_305, 28_801_835)
    updates = [
        i
        for i, op in enumerate(slow.graph.ops)
        if slow.graph.processor[i] == 3 and op.name.endswith(".update")
    ]
    order = [
        [slow.graph.ops[i].name for i in sorted(updates, key=lambda i: r.trace.start_cycle[i])]
        for r in (slow, fast)
    ]
    assert order[0] != order[1]
    assert sorted(order[0]) == sorted(order[1])
    # Each op's compute is unchanged; only waiting differs.
    assert (slow.trace.costs.compute_cycles == fast.trace.costs.compute_cycles).all()


# ---- issue 23: input and blame


def _internal_error(_args: object) -> int:
    raise RuntimeError("a bug")


@pytest.mark.parametrize(
    ("value", "traceback"),
    [
        ("0", False),
        ("", False),
        ("no", False),
        ("false", False),
        ("1", True),
        ("TRUE", True),
        ("yes", True),
    ],
)
def test_only_a_truthy_accelsim_debug_shows_tracebacks(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], value: str, traceback: bool
) -> None:
    monkeypatch.setenv("ACCELSIM_DEBUG", value)
    if traceback:
        with pytest.raises(RuntimeError, match="a bug"):
            cli._run(_internal_error, argparse.Namespace())
        return
    assert cli._run(_internal_error, argparse.Namespace()) == cli.EXIT_INTERNAL
    assert capsys.readouterr().err == (
        "accelsim: internal error: RuntimeError: a bug\n"
        "accelsim: rerun with ACCELSIM_DEBUG=1 for a traceback and report it\n"
    )


DEEP_KEY = ".".join(["a"] * 1000)


def write_yaml(path: Path, data: object) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def deep_key_inputs(tmp_path: Path, where: str) -> tuple[list[object], str, str]:
    """``accelsim`` arguments that write :data:`DEEP_KEY` in ``where``, the file
    blamed and the key as written there."""
    run = yaml.safe_load(SMOKE.read_text(encoding="utf-8"))
    run.update(hardware=str(SCALESIM_HW), workload=str(MLP), energy=str(HOROWITZ))
    if where == "overrides":
        run["overrides"] = {f"hardware.{DEEP_KEY}": 1}
        path = write_yaml(tmp_path / "run.yaml", run)
        return ["run", path], display_path(path), f"overrides.hardware.{DEEP_KEY}"
    if where == "variant":
        workload = yaml.safe_load(MLP.read_text(encoding="utf-8"))
        workload["variants"] = {"deep": {"overrides": {DEEP_KEY: 1}}}
        run.update(workload=str(write_yaml(tmp_path / "mlp.yaml", workload)))
        run["workload_variant"] = "deep"
        path = write_yaml(tmp_path / "run.yaml", run)
        return (
            ["run", path],
            display_path(tmp_path / "mlp.yaml"),
            f"variants.deep.overrides.{DEEP_KEY}",
        )
    if where == "sweep":
        base = write_yaml(tmp_path / "run.yaml", run)
        sweep = {"name": "deep", "base": str(base), "grid": {f"hardware.{DEEP_KEY}": [1, 2]}}
        path = write_yaml(tmp_path / "sweep.yaml", sweep)
        return ["check", path], display_path(path), f"grid.hardware.{DEEP_KEY}"
    return ["run", SMOKE, "--set", f"{where}{DEEP_KEY}=1"], "--set", f"{where}{DEEP_KEY}"


@pytest.mark.parametrize(
    "where",
    ["", "hardware.", "workload.layers[fc1].", "run.techniques.", "overrides", "variant", "sweep"],
)
def test_a_key_of_a_thousand_parts_is_refused_where_it_was_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    args, file, key = deep_key_inputs(tmp_path, where)
    out_args = ["--out", tmp_path / "out"] if args[0] == "run" else []
    code, out, err = run_cli(capsys, *args, *out_args)
    shown = repr(key)[:200]
    assert (code, out) == (cli.EXIT_INPUT, "")
    assert err == (
        f"{file}: key nested deeper than 64 levels"
        f" (got {shown}... ({len(repr(key)):,} characters))\n"
    )


def test_keys_of_64_parts_and_values_64_levels_deep_load_or_fail_cleanly() -> None:
    value = "{a: " * 63 + "1" + "}" * 63
    for prefix in ("hardware", "workload", "run.techniques.gpipe"):
        parts = 64 - len(prefix.split("."))
        with pytest.raises(InputError, match="unknown key"):
            load_inputs(SMOKE, parse_sets([f"{prefix}.{'.'.join(['a'] * parts)}={value}"]))
    with pytest.raises(ConfigError, match="key nested deeper than 64 levels"):
        parse_sets([".".join(["a"] * 65) + "=1"])


MLP_SHOWN = display_path(SMOKE.parent / "../../workloads/mlp.yaml")
TECHNIQUES = "approximate_dropout, gpipe, gradient_prediction, gradient_skipping, layerpipe"
HARDWARE_KEYS = (
    "array, buffers, calibrated_under, clock_mhz, description, dram, interconnect, mapping,"
    " name, power, processors, technology_nm, timing, vector_unit, word_bytes"
)


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (
            ["techniques.gpipe.bogus=1"],
            "techniques.gpipe.bogus: unknown key; expected one of: micro_batches,"
            " mini_batches, stages (got 1)",
        ),
        (
            ["run.techniques.gpipe.mini_batches=0"],
            "run.techniques.gpipe.mini_batches: input should be greater than 0 (got 0)",
        ),
        (
            ["techniques={gpipe: {stages: 0}}"],
            "techniques.gpipe.stages: input should be greater than 0 (got 0)",
        ),
        (
            ["techniques.nosuch={}"],
            f"techniques.nosuch: unknown technique; expected one of: {TECHNIQUES},"
            " optimizer_fusion, pipedream, recomputation (got 'nosuch')",
        ),
        (
            ["run.techniques.gradient_prediction.schedule.error_trace=nowhere.csv"],
            "run.techniques.gradient_prediction.schedule.error_trace: file not found"
            f" (got '{SMOKE.parent / 'nowhere.csv'}')",
        ),
        (
            ["techniques.approximate_dropout.max_period=16"],
            "techniques.approximate_dropout.pattern: the workload has no dropout layer a row"
            " pattern can compact (set feature_maps.rate for a CNN) (got 'row')",
        ),
        (
            ["workload_variant=nope"],
            f"workload_variant: unknown workload variant; {MLP_SHOWN} defines no variants"
            " (got 'nope')",
        ),
        (
            ["processors=4", "assignment=data_parallel", "batch_size=2"],
            "batch_size: data_parallel needs at least one sample per processor (4) (got 2)",
        ),
        (["workload=nope.yaml"], "workload: file not found (got 'nope.yaml')"),
        (
            ["hardware.bogus.x=1"],
            f"hardware.bogus: unknown key; expected one of: {HARDWARE_KEYS} (got {{'x': 1}})",
        ),
        (
            ["array.bogus.x=1"],
            "array.bogus: unknown key; expected one of: cols, count, dataflow, dataflows, load_rows_per_cycle,"
            " pe_scratchpad_bytes, precision, rates, rates_source, rows, tile_swap_cycles"
            " (got {'x': 1})",
        ),
        (
            ["workload.bogus.x=1"],
            "workload.bogus: unknown key; expected one of: description, extra_inputs, input,"
            " layers, name, notes, source, variants (got {'x': 1})",
        ),
        (
            ["workload.layers[fc1].bogus.x=1"],
            "workload.layers[fc1].bogus: unknown key; expected one of: bias, block, inputs,"
            " kind, name, out_features, tied_to (got {'x': 1})",
        ),
        (
            ["workload.layers[fc3].inputs=[fc1, relu1]"],
            "workload.layers[fc3].inputs: linear takes exactly one input (got 2)",
        ),
        (
            ["energy.bogus.x=1"],
            "energy.bogus: unknown key; expected one of: dram_read_pj_per_bit,"
            " dram_write_pj_per_bit, interconnect_pj_per_bit, mac_pj, name, sources, sram,"
            " static, unit, vector_op_pj (got {'x': 1})",
        ),
        (
            ["energy.mac_pj={fp32: 1.0}"],
            "energy.mac_pj: no entry for the array precision of hardware 'scalesim-32x32'"
            " (got 'int8')",
        ),
        (
            ["optimizer.bogus.x=1"],
            "optimizer.bogus: unknown key; expected one of: clip_global_norm, kind, master_weights (got {'x': 1})",
        ),
        (
            ["run.overrides={hardware.bogus.y: 1}"],
            f"run.overrides.hardware.bogus: unknown key; expected one of: {HARDWARE_KEYS}"
            " (got {'y': 1})",
        ),
    ],
)
def test_a_set_value_is_blamed_on_set_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sets: list[str], message: str
) -> None:
    args = [a for s in sets for a in ("--set", s)]
    code, out, err = run_cli(capsys, "run", SMOKE, "--out", tmp_path, *args)
    assert (code, out, err) == (cli.EXIT_INPUT, "", f"--set: {message}\n")


def test_a_set_shape_problem_is_blamed_on_set_key() -> None:
    with pytest.raises(InputError) as excinfo:
        load_inputs(DEFAULT_RUN, parse_sets(["workload.layers[maxpool].padding=2"]))
    assert [str(p) for p in excinfo.value.problems] == [
        "--set: workload.layers[maxpool].padding: more than half the 3x3 kernel (at most 1x1,"
        " as PyTorch requires) (got 2)"
    ]


@pytest.mark.parametrize("key", ["hardware.bogus.x", "bogus.x"])
def test_a_layer_set_value_is_blamed_on_set_key(
    capsys: pytest.CaptureFixture[str], key: str
) -> None:
    code, _, err = run_cli(
        capsys, "layer", "--hardware", SCALESIM_HW, "--gemm", 8, 8, 8, "--set", f"{key}=1"
    )
    assert (code, err) == (
        cli.EXIT_INPUT,
        f"--set: {key.removesuffix('.x')}: unknown key; expected one of: {HARDWARE_KEYS}"
        " (got {'x': 1})\n",
    )


def test_values_the_files_wrote_stay_blamed_on_the_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = yaml.safe_load(SMOKE.read_text(encoding="utf-8"))
    run.update(hardware=str(SCALESIM_HW), workload=str(MLP), energy=str(HOROWITZ))
    run["overrides"] = {"hardware.bogus.x": 1}
    run["techniques"] = {"gpipe": {"stages": 0}}
    path = write_yaml(tmp_path / "run.yaml", run)
    code, _, err = run_cli(capsys, "check", path)
    shown = display_path(path)
    assert (code, err.splitlines()) == (
        cli.EXIT_INPUT,
        [
            f"{shown}: overrides.hardware.bogus: unknown key; expected one of: {HARDWARE_KEYS}"
            " (got {'x': 1})"
        ],
    )
    del run["overrides"]
    write_yaml(path, run)
    code, _, err = run_cli(capsys, "check", path)
    assert err == f"{shown}: techniques.gpipe.stages: input should be greater than 0 (got 0)\n"
    sweep = {"name": "s", "base": str(path), "grid": {"techniques.gpipe.stages": [0]}}
    run["techniques"] = {}
    write_yaml(path, run)
    sweep_path = write_yaml(tmp_path / "sweep.yaml", sweep)
    code, _, err = run_cli(capsys, "check", sweep_path)
    assert (code, err) == (
        cli.EXIT_INPUT,
        f"{display_path(sweep_path)}: grid.techniques.gpipe.stages: input should be greater"
        " than 0 (got 0)\n",
    )


@pytest.mark.parametrize("command", ["suite", "models"])
def test_a_suite_entrys_missing_workload_is_blamed_on_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    models = [{"name": "mlp", "workload": str(MLP)}, {"name": "gone", "workload": "../x.yaml"}]
    suite = write_yaml(tmp_path / "suite.yaml", {"name": "s", "models": models})
    args = [SMOKE, "--out", tmp_path / "out"] if command == "suite" else []
    code, out, err = run_cli(capsys, command, *args, "--suite", suite)
    assert (code, out, err) == (
        cli.EXIT_INPUT,
        "",
        f"{display_path(suite)}: models[1].workload: file not found (got '../x.yaml')\n",
    )


@pytest.mark.parametrize(
    ("kind", "kernel", "padding", "refused"),
    [
        ("maxpool", 3, 1, False),
        ("maxpool", 3, 2, True),
        ("maxpool", 2, 1, False),
        ("maxpool", 1, 1, True),
        ("maxpool", [3, 5], [1, 2], False),
        ("maxpool", [3, 5], [2, 2], True),
        ("avgpool", 4, 3, True),
    ],
)
def test_pool_padding_follows_pytorchs_rule(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    kind: str,
    kernel: int | list[int],
    padding: int | list[int],
    refused: bool,
) -> None:
    """PyTorch's pool2d_shape_check: padding <= kernel // 2 in each dimension."""
    pool = {"name": "pool", "kind": kind, "kernel": kernel, "padding": padding}
    workload = {
        "name": "w",
        "input": {"kind": "image", "channels": 1, "height": 8, "width": 8},
        "layers": [
            pool,
            {"name": "flat", "kind": "flatten"},
            {"name": "loss", "kind": "cross_entropy"},
        ],
    }
    path = write_yaml(tmp_path / "w.yaml", workload)
    code, _, err = run_cli(capsys, "check", path)
    if not refused:
        assert (code, err) == (cli.EXIT_OK, "")
        return
    k = kernel if isinstance(kernel, list) else [kernel, kernel]
    assert (code, err) == (
        cli.EXIT_INPUT,
        f"{display_path(path)}: layers[0].padding: more than half the {k[0]}x{k[1]} kernel"
        f" (at most {k[0] // 2}x{k[1] // 2}, as PyTorch requires) (got {padding})\n",
    )


def lenet_scores(extra: str) -> str:
    """A complete LeNet-5 score file (c3: 6 maps, c5: 16) followed by ``extra`` rows."""
    rows = ["layer,channel,score"]
    rows += [f"c3,{c},{c + 1}" for c in range(6)] + [f"c5,{c},1" for c in range(16)]
    return "\n".join(rows) + "\n" + extra


@pytest.mark.parametrize(
    ("text", "problems"),
    [
        (
            lenet_scores("c3,0,1\n"),
            ["line 24: a second score for c3 channel 0 (the first is line 2) (got 1.0)"],
        ),
        (
            lenet_scores("c3,0,9\n"),
            ["line 24: a second score for c3 channel 0 (the first is line 2) (got 9.0)"],
        ),
        (
            lenet_scores("c3,-1,1\n"),
            ["line 24: channel: expected an input map of c3, 0 to 5 (got '-1')"],
        ),
        (
            lenet_scores("c5,16,1\n"),
            ["line 24: channel: expected an input map of c5, 0 to 15 (got '16')"],
        ),
        (
            lenet_scores("c9,0,1\nc1,0,1\n"),
            [
                "line 24: layer: not a convolution whose input maps may be dropped; expected one"
                " of: c3, c5 (got 'c9')",
                "line 25: layer: not a convolution whose input maps may be dropped; expected one"
                " of: c3, c5 (got 'c1')",
            ],
        ),
        (
            lenet_scores("c5,3,nan\nc5,4,-2\n"),
            [
                "line 24: score: expected a finite number >= 0 (got 'nan')",
                "line 25: score: expected a finite number >= 0 (got '-2')",
            ],
        ),
        (
            "layer,chan,score\nc3,0,1\n",
            [
                "line 1: expected a header line naming the columns layer, channel, score (got 'layer,chan,score')"
            ],
        ),
        (
            "layer,channel,score\n"
            + "".join(f"c3,{c},0\n" for c in range(6))
            + "".join(f"c5,{c},1\n" for c in range(16)),
            ["every score of c3 is 0: its maps cannot be ranked"],
        ),
    ],
    ids=[
        "duplicate",
        "conflicting",
        "channel-1",
        "channel-past",
        "unknown-layer",
        "scores",
        "header",
        "all-zero",
    ],
)
def test_dropout_score_rows_are_checked_and_blamed_on_the_file(
    tmp_path: Path, text: str, problems: list[str] | None
) -> None:
    scores = tmp_path / "scores.csv"
    scores.write_text(text, encoding="utf-8")
    technique = f"{{pattern: element, feature_maps: {{rate: 0.5, scores: {scores}}}}}"
    sets = [
        "workload=workloads/lenet5.yaml",
        f"run.techniques.approximate_dropout={technique}",
    ]
    with pytest.raises(ConfigError) as excinfo:
        load_inputs(DEFAULT_RUN, parse_sets(sets))
    shown = display_path(scores)
    assert [str(p) for p in excinfo.value.problems] == [f"{shown}: {p}" for p in problems]


def test_a_short_score_file_is_blamed_on_the_key_that_names_it(tmp_path: Path) -> None:
    scores = tmp_path / "scores.csv"
    scores.write_text("layer,channel,score\nc3,0,1\n", encoding="utf-8")
    technique = f"{{pattern: element, feature_maps: {{rate: 0.5, scores: {scores}}}}}"
    sets = [
        "workload=workloads/lenet5.yaml",
        f"run.techniques.approximate_dropout={technique}",
    ]
    with pytest.raises(ConfigError) as excinfo:
        load_inputs(DEFAULT_RUN, parse_sets(sets))
    assert [str(p) for p in excinfo.value.problems] == [
        "--set: run.techniques.approximate_dropout.feature_maps.scores: no score for input map 1"
        " of c3 (it has 6; every input map of every droppable convolution needs one)"
        f" (got '{scores}')"
    ]


@pytest.mark.parametrize("model", ["mlp", "lstm_ptb", "bert_base"])
def test_feature_maps_need_a_droppable_convolution(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str
) -> None:
    sets = [
        f"workload=workloads/{model}.yaml",
        "run.techniques.approximate_dropout={pattern: element, feature_maps: {rate: 0.5}}",
    ]
    args = [a for s in sets for a in ("--set", s)]
    code, out, err = run_cli(capsys, "run", DEFAULT_RUN, "--out", tmp_path, *args)
    assert (code, out, err) == (
        cli.EXIT_INPUT,
        "",
        "--set: run.techniques.approximate_dropout.feature_maps.rate: the workload has no"
        " convolution whose input maps may be dropped (ungrouped, fed by another layer, with two"
        " or more input maps) (got 0.5)\n",
    )


@pytest.mark.parametrize(
    ("rows", "problems"),
    [
        ("1,1,-0.2\n", ["line 5: {column}: expected a finite number >= 0 (got '-0.2')"]),
        (
            "99999999,0,0.1\n-1,0,0.1\n",
            [
                "line 5: epoch: expected a whole number from 0 to 99,999 (got '99999999')",
                "line 6: epoch: expected a whole number from 0 to 99,999 (got '-1')",
            ],
        ),
        ("1,-3,0.1\n", ["line 5: batch: expected a whole number >= 0 (got '-3')"]),
        (
            "1,0,0.9\n",
            ["line 5: a second row for epoch 1, batch 0 (the first is line 3) (got '0.9')"],
        ),
    ],
    ids=["negative", "epoch", "batch", "duplicate"],
)
@pytest.mark.parametrize(
    ("technique", "key", "column"),
    # gradient skipping's per-layer statistics: tests/techniques/skipping/test_gradient_skipping.py
    [("gradient_prediction", "schedule.error_trace", "predictor_error")],
)
def test_trace_rows_are_checked_and_blamed_on_the_file(
    tmp_path: Path, rows: str, problems: list[str], technique: str, key: str, column: str
) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(f"epoch,batch,{column}\n0,0,0.5\n1,0,0.4\n2,0,0.3\n{rows}", encoding="utf-8")
    sets = [
        "workload=workloads/mlp.yaml",
        "training.epochs=3",
        f"run.techniques.{technique}.{key}={trace}",
    ]
    with pytest.raises(ConfigError) as excinfo:
        load_inputs(DEFAULT_RUN, parse_sets(sets))
    shown = display_path(trace)
    assert [str(p) for p in excinfo.value.problems] == [
        f"{shown}: {p.format(column=column)}" for p in problems
    ]


def test_a_trace_header_without_the_column_is_refused(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("epoch,batch,error\n0,0,0.5\n", encoding="utf-8")
    sets = [
        "workload=workloads/mlp.yaml",
        f"run.techniques.gradient_skipping.update_trace={trace}",
    ]
    with pytest.raises(ConfigError) as excinfo:
        load_inputs(DEFAULT_RUN, parse_sets(sets))
    assert [str(p) for p in excinfo.value.problems] == [
        f"{display_path(trace)}: line 1: expected a header line naming the columns layer,"
        " epoch, statistic (got 'epoch,batch,error')"
    ]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (
            "base: &b {rows: 32, cols: 32}\nname: m\narray:\n  <<: *b\n  rows: 64\n",
            "line 4, column 3",
        ),
        ("name: m\narray: {<<: {rows: 3}}\n", "line 2, column 9"),
    ],
)
def test_yaml_merge_keys_are_refused_clearly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, where: str
) -> None:
    path = tmp_path / "merge.yaml"
    path.write_text(text, encoding="utf-8")
    code, _, err = run_cli(capsys, "check", path)
    assert (code, err) == (
        cli.EXIT_INPUT,
        f"{display_path(path)}: {where}: invalid YAML: merge keys (<<) are not supported:"
        " write the keys out, or put shared settings in one file and change them with"
        " overrides\n",
    )


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (
            "{<<: {rows: 3}}",
            "merge keys (<<) are not supported: write the keys out, or put"
            " shared settings in one file and change them with overrides",
        ),
        ("{rows: 3, rows: 4}", "duplicate key 'rows'"),
    ],
)
def test_set_values_with_keys_a_file_may_not_hold_are_refused(value: str, problem: str) -> None:
    with pytest.raises(ConfigError) as excinfo:
        parse_sets([f"array={value}"])
    assert str(excinfo.value) == f"--set: array: invalid YAML: {problem} (got {value!r})"


def test_check_accepts_suite_files_and_checks_what_they_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = REPO / "configs" / "suites" / "default.yaml"
    sweep = REPO / "configs" / "sweeps" / "arrays.yaml"
    code, out, err = run_cli(capsys, "check", suite, sweep)
    assert (code, err) == (cli.EXIT_OK, "")
    assert out.splitlines() == [
        f"{display_path(suite)}: ok (suite 'fourteen', 14 models, each with its workload)",
        f"{display_path(sweep)}: ok (sweep 'arrays', 4 points, each with all its files)",
    ]
    workload = yaml.safe_load(MLP.read_text(encoding="utf-8"))
    workload["layers"][0]["out_features"] = 0
    bad = write_yaml(tmp_path / "bad.yaml", workload)
    models = [{"name": "bad", "workload": "bad.yaml"}, {"name": "gone", "workload": "gone.yaml"}]
    path = write_yaml(tmp_path / "suite.yaml", {"name": "s", "models": models})
    code, out, err = run_cli(capsys, "check", path)
    assert (code, out, err) == (
        cli.EXIT_INPUT,
        "",
        f"{display_path(path)}: models[1].workload: file not found (got 'gone.yaml')\n",
    )
    models.pop()
    write_yaml(path, {"name": "s", "models": models})
    code, out, err = run_cli(capsys, "check", path)
    assert (code, out, err) == (
        cli.EXIT_INPUT,
        "",
        f"{display_path(bad)}: layers[0].out_features: input should be greater than 0 (got 0)\n",
    )


HOSTILE = "x\x1b]0;pwned\x07\x1b[2J\x1b[31m\u2028red"
HOSTILE_SHOWN = "x\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31m\\u2028red"


def hostile_run(tmp_path: Path) -> Path:
    """A run whose hardware and workload names would drive a terminal."""
    hardware = yaml.safe_load(SCALESIM_HW.read_text(encoding="utf-8"))
    hardware["name"] = HOSTILE
    workload = yaml.safe_load(MLP.read_text(encoding="utf-8"))
    workload["name"] = HOSTILE
    run = yaml.safe_load(SMOKE.read_text(encoding="utf-8"))
    run.update(
        hardware=str(write_yaml(tmp_path / "hw.yaml", hardware)),
        workload=str(write_yaml(tmp_path / "wl.yaml", workload)),
        energy=str(HOROWITZ),
    )
    return write_yaml(tmp_path / "run.yaml", run)


def no_control_characters(text: str) -> bool:
    return all(c.isprintable() or c in "\n\t" for c in text)


def test_names_and_paths_are_printed_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = hostile_run(tmp_path)
    out_dir = tmp_path / "o\x1b[2J"
    code, out, err = run_cli(capsys, "run", run, "--out", out_dir)
    assert (code, err) == (cli.EXIT_OK, "")
    assert no_control_characters(out)
    assert f"smoke: {HOSTILE_SHOWN} on {HOSTILE_SHOWN} (1 x 32x32 os), batch 4" in out
    directory = writer.run_directory_name("smoke", HOSTILE, None, [])
    assert directory == "x--0-pwned---2J--31m-red_smoke"  # a safe directory name
    assert out.endswith(f"wrote {display_path(out_dir)}/{directory}/\n".replace("\x1b", "\\x1b"))
    summary = json.loads((out_dir / directory / "summary.json").read_text(encoding="utf-8"))
    assert summary["hardware"] == HOSTILE  # files keep the name as it is
    code, out, err = run_cli(capsys, "run", run, "--out", out_dir)
    assert code == cli.EXIT_INPUT and no_control_characters(err) and "o\\x1b[2J" in err
    code, out, err = run_cli(capsys, "check", tmp_path / "hw.yaml", tmp_path / "wl.yaml")
    assert (code, err) == (cli.EXIT_OK, "")
    assert out.splitlines() == [
        f"{display_path(tmp_path / 'hw.yaml')}: ok (hardware '{HOSTILE_SHOWN}')",
        f"{display_path(tmp_path / 'wl.yaml')}: ok (workload '{HOSTILE_SHOWN}', 6 layers)",
    ]


def test_sweep_tables_and_collected_csv_are_printed_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # No progress-bar monitor thread may outlive the test: PlotWorker forks only
    # in a process without other threads (tests/report/test_plot_worker.py).
    monkeypatch.setattr(tqdm, "monitor_interval", 0)
    sweep = {"name": "s", "base": str(hostile_run(tmp_path)), "grid": {"batch_size": [1, 2]}}
    path = write_yaml(tmp_path / "sweep.yaml", sweep)
    code, out, err = run_cli(capsys, "sweep", path, "--out", tmp_path / "out", "--jobs", 1)
    assert code == cli.EXIT_OK and no_control_characters(out)
    assert all(c.isprintable() or c in "\n\t\r" for c in err)  # the progress bar redraws
    code, out, _ = run_cli(capsys, "collect", tmp_path / "out" / "s")
    assert code == cli.EXIT_OK and no_control_characters(out)
    assert out.count(f",{HOSTILE_SHOWN},") == 2
    code, out, _ = run_cli(capsys, "collect", tmp_path / "out" / "s", "--json")
    assert code == cli.EXIT_OK and no_control_characters(out)
    assert [row["hardware"] for row in json.loads(out)] == [HOSTILE, HOSTILE]
    csv_file = tmp_path / "s.csv"
    code, out, _ = run_cli(capsys, "collect", tmp_path / "out" / "s", "--csv", csv_file)
    assert code == cli.EXIT_OK and no_control_characters(out)
    assert csv_file.read_text(encoding="utf-8").count(f",{HOSTILE},") == 2


def test_topology_layer_names_are_printed_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topology = tmp_path / "t.csv"
    topology.write_text("name,M,N,K\nbad\x1b[2Jname,8,8,8\n", encoding="utf-8")
    code, out, err = run_cli(capsys, "layer", "--hardware", SCALESIM_HW, "--topology", topology)
    assert code == cli.EXIT_INPUT and out == "" and no_control_characters(err)
    assert err == (
        f"{topology}: row 2, Layer: the name holds a control or other non-printable"
        " character (got 'bad\\x1b[2Jname')\n"
    )


def test_escaping_keeps_newlines_tabs_and_only_on_stderr_carriage_returns() -> None:
    assert cli.escaped("a\tb\nc\x1b\rd\x00") == "a\tb\nc\\x1b\\rd\\x00"
    assert cli.escaped("\r50%|##", keep="\n\t\r") == "\r50%|##"
    assert cli.escaped("é ü 日本") == "é ü 日本"
