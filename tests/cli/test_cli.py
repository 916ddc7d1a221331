"""End-to-end tests of the ``accelsim`` command line, run as a real subprocess.

Exit codes: 0 on success, 2 for bad input (one ``file: key.path: problem
(got value)`` line per problem on stderr, never a traceback), 1 for internal
errors.  Results go to ``tmp_path`` through ``--out``.  Each subprocess costs
about a second, so the file keeps their number small: the smoke run is done
once per module and copied where a test needs an existing run directory.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT as REPO

SMOKE = "configs/runs/smoke.yaml"
SCALESIM = "configs/hardware/scalesim.yaml"
RUN_FILES = ("resolved_config.yaml", "ops.csv", "layers.csv", "summary.json")

# workloads/mlp.yaml is 784-2048-2048-10 with biases.
MLP_WIDTHS = (784, 2048, 2048, 10)
MLP_FWD_MACS_PER_SAMPLE = sum(a * b for a, b in itertools.pairwise(MLP_WIDTHS))
MLP_PARAMETERS = sum(a * b + b for a, b in itertools.pairwise(MLP_WIDTHS))


def accelsim(*args: object) -> subprocess.CompletedProcess[str]:
    """Run ``python -m accelsim ARGS`` from the repository root."""
    env = {k: v for k, v in os.environ.items() if k != "ACCELSIM_DEBUG"}
    return subprocess.run(
        [sys.executable, "-m", "accelsim", *map(str, args)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def shown(path: Path) -> str:
    """How the CLI (run from REPO) names ``path`` in its messages."""
    relative = os.path.relpath(path, REPO)
    return str(path) if relative.startswith("..") else relative


def assert_input_error(result: subprocess.CompletedProcess[str]) -> list[str]:
    """Bad input: exit 2, no traceback, no internal error; returns the stderr lines."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    assert "internal error" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines, "bad input must be explained on stderr"
    return lines


def snapshot(directory: Path) -> dict[str, tuple[int, bytes]]:
    """Every file below ``directory`` with its mtime (ns) and content."""
    return {
        str(p.relative_to(directory)): (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def read_summary(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- run


@pytest.fixture(scope="module")
def smoke_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """One ``accelsim run configs/runs/smoke.yaml``; returns (out dir, process)."""
    out = tmp_path_factory.mktemp("smoke-out")
    return out, accelsim("run", SMOKE, "--out", out)


def test_run_writes_the_four_result_files(
    smoke_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out, result = smoke_run
    assert result.returncode == 0, result.stderr
    run_dir = out / "mlp_smoke"
    assert sorted(p.name for p in run_dir.iterdir()) == sorted(RUN_FILES)
    assert [p.name for p in out.iterdir()] == ["mlp_smoke"]  # no staging leftovers

    summary = read_summary(run_dir)
    assert summary["schema_version"] == 2
    assert summary["run"] == "smoke"
    assert summary["workload"] == "mlp"
    assert summary["hardware"] == "scalesim-32x32"
    assert summary["batch_size"] == 4
    assert summary["macs"]["fwd"] == 4 * MLP_FWD_MACS_PER_SAMPLE
    assert summary["parameters"] == MLP_PARAMETERS

    resolved = yaml.safe_load((run_dir / "resolved_config.yaml").read_text(encoding="utf-8"))
    assert resolved["run"]["name"] == "smoke"
    assert resolved["hardware"]["array"] == {
        "rows": 32,
        "cols": 32,
        "dataflow": "os",
        "precision": "int8",
    }

    layers_csv = (run_dir / "layers.csv").read_text(encoding="utf-8").splitlines()
    assert layers_csv[0].startswith("layer,")
    assert [row.split(",")[0] for row in layers_csv[1:]] == [
        "fc1",
        "relu1",
        "fc2",
        "relu2",
        "fc3",
        "loss",
    ]
    ops_csv = (run_dir / "ops.csv").read_text(encoding="utf-8").splitlines()
    assert len(ops_csv) - 1 == summary["ops"] > 0
    # The step ends with its last op.
    ends = [int(row["end_cycle"]) for row in csv.DictReader(ops_csv)]
    assert summary["total_cycles"] == max(ends)

    # The printed summary agrees with summary.json and names the run directory.
    assert f"{summary['total_cycles']:,}" in result.stdout
    assert result.stdout.rstrip().endswith(f"wrote {shown(run_dir)}/")
    assert result.stderr == ""


def test_run_directory_has_normal_permissions(
    smoke_run: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    # The run directory used to keep tempfile.mkdtemp's 0700 mode.
    out, result = smoke_run
    assert result.returncode == 0, result.stderr
    reference = tmp_path / "made-by-mkdir"
    reference.mkdir()
    assert (out / "mlp_smoke").stat().st_mode & 0o777 == reference.stat().st_mode & 0o777


def test_rerun_without_force_refuses_and_keeps_everything(
    smoke_run: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    out, first = smoke_run
    assert first.returncode == 0, first.stderr
    run_dir = tmp_path / "mlp_smoke"
    shutil.copytree(out / "mlp_smoke", run_dir)
    (run_dir / "my_notes.txt").write_text("keep me\n", encoding="utf-8")
    before = snapshot(tmp_path)

    result = accelsim("run", SMOKE, "--out", tmp_path)

    (line,) = assert_input_error(result)
    assert str(run_dir) in line
    assert "--force" in line
    assert snapshot(tmp_path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlp_smoke"]
    assert result.stdout == ""


def test_rerun_with_force_replaces_the_run(
    smoke_run: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    out, first = smoke_run
    assert first.returncode == 0, first.stderr
    run_dir = tmp_path / "mlp_smoke"
    shutil.copytree(out / "mlp_smoke", run_dir)
    (run_dir / "summary.json").write_text("{}", encoding="utf-8")

    result = accelsim("run", SMOKE, "--out", tmp_path, "--force")

    assert result.returncode == 0, result.stderr
    assert read_summary(run_dir) == read_summary(out / "mlp_smoke")  # deterministic and rewritten
    assert all((run_dir / name).is_file() for name in RUN_FILES)


def test_set_batch_size(tmp_path: Path) -> None:
    result = accelsim("run", SMOKE, "--out", tmp_path, "--set", "batch_size=8")
    assert result.returncode == 0, result.stderr
    summary = read_summary(tmp_path / "mlp_smoke")
    assert summary["batch_size"] == 8
    assert summary["macs"]["fwd"] == 8 * MLP_FWD_MACS_PER_SAMPLE
    resolved = yaml.safe_load((tmp_path / "mlp_smoke" / "resolved_config.yaml").read_text())
    assert resolved["run"]["batch_size"] == 8


def test_set_invalid_value_blames_set(tmp_path: Path) -> None:
    result = accelsim("run", SMOKE, "--out", tmp_path, "--set", "array.rows=-1")
    lines = assert_input_error(result)
    assert lines == ["--set: array.rows: input should be greater than 0 (got -1)"]
    assert list(tmp_path.iterdir()) == []


def test_set_unknown_key_lists_the_choices(tmp_path: Path) -> None:
    result = accelsim("run", SMOKE, "--out", tmp_path, "--set", "nonsense=1")
    (line,) = assert_input_error(result)
    assert line.startswith("--set: nonsense: unknown key; expected one of: ")
    assert line.endswith("(got 1)")
    choices = line.split("expected one of: ")[1]
    assert "batch_size" in choices and "array" in choices
    assert list(tmp_path.iterdir()) == []


def test_malformed_run_file(tmp_path: Path) -> None:
    run_file = tmp_path / "broken.yaml"
    run_file.write_text("name: broken\nhardware: [../hardware/default.yaml\n", encoding="utf-8")
    out = tmp_path / "out"
    result = accelsim("run", run_file, "--out", out)
    (line,) = assert_input_error(result)
    assert line.startswith(f"{shown(run_file)}: line 3, column 1: invalid YAML: ")
    assert not out.exists()


# --------------------------------------------------------------------------- layer

LAYER_KEYS = {
    "compute_cycles",
    "stall_cycles",
    "total_cycles",
    "folds",
    "mapping_efficiency",
    "utilization",
    "sram_reads",
    "sram_writes",
    "dram_bytes",
    "energy_pj",
}


def layer_json(*args: object) -> dict[str, Any]:
    result = accelsim("layer", "--hardware", SCALESIM, "--json", *args)
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert record.keys() >= LAYER_KEYS
    assert record["sram_reads"].keys() == {"ifmap", "filter"}
    assert record["sram_writes"].keys() == {"ofmap"}
    assert record["dram_bytes"].keys() == {"ifmap", "filter", "ofmap", "psum_read"}
    # scalesim.yaml's DRAM moves 64 B/cycle with no latency and the layer ends when
    # its last byte has moved; its first tiles arrive before compute and its last
    # output tile drains after it, at least a cycle each.
    assert record["total_cycles"] >= math.ceil(sum(record["dram_bytes"].values()) / 64)
    assert record["stall_cycles"] >= 2
    return record


def os_compute_cycles(m: int, n: int, k: int, rows: int = 32, cols: int = 32) -> tuple[int, int]:
    """SCALE-Sim output-stationary closed form: (folds, compute cycles)."""
    folds = math.ceil(m / rows) * math.ceil(n / cols)
    return folds, folds * (rows + cols + k - 2) - 1


def test_layer_gemm_matches_the_scalesim_closed_form() -> None:
    m, n, k = 100, 37, 513
    record = layer_json("--gemm", m, n, k, "--convention", "scalesim")
    folds, compute = os_compute_cycles(m, n, k)
    assert (folds, compute) == (8, 4599)
    assert record["folds"] == folds
    assert record["compute_cycles"] == compute
    assert record["mapping_efficiency"] == pytest.approx(m * n / (folds * 32 * 32))
    assert record["utilization"] == pytest.approx(m * n * k / (32 * 32 * record["total_cycles"]))
    # OS: A is streamed once per column fold, B once per row fold (1-byte words).
    assert record["sram_reads"] == {
        "ifmap": m * k * math.ceil(n / 32),
        "filter": k * n * math.ceil(m / 32),
    }
    # Every output once, plus SCALE-Sim's extra rows + cols writes per fold.
    assert record["sram_writes"]["ofmap"] == m * n + folds * (32 + 32)
    dram = record["dram_bytes"]
    assert dram["ifmap"] >= m * k and dram["filter"] >= k * n and dram["ofmap"] >= m * n
    # horowitz45 charges 20 pJ per DRAM bit; everything else only adds to it.
    assert record["energy_pj"] >= 20 * 8 * sum(dram.values())


def test_layer_conv_uses_scalesim_output_size() -> None:
    # 10x10 padded ifmap, 3x3 filter, 4 channels, 8 filters, stride 2: SCALE-Sim
    # counts ceil((10 - 3 + 2) / 2) = 5 output rows and columns (accelsim: 4).
    record = layer_json("--conv", 10, 10, 3, 3, 4, 8, 2, "--convention", "scalesim")
    m, n, k = 5 * 5, 8, 3 * 3 * 4
    assert (record["m"], record["n"], record["k"]) == (m, n, k)
    assert record["macs"] == m * n * k
    assert (record["folds"], record["compute_cycles"]) == os_compute_cycles(m, n, k) == (1, 97)


def test_layer_rejects_a_zero_dimension() -> None:
    result = accelsim("layer", "--hardware", SCALESIM, "--gemm", 0, 1, 1, "--json")
    lines = assert_input_error(result)
    assert "--gemm" in lines[-1]
    assert "expected a positive integer up to 2^31 - 1 = 2,147,483,647 (got 0)" in lines[-1]
    assert result.stdout == ""


# --------------------------------------------------------------------------- check


def test_check_accepts_every_shipped_file() -> None:
    files = sorted(
        str(p.relative_to(REPO))
        for pattern in (
            "configs/hardware/*.yaml",
            "configs/energy/*.yaml",
            "configs/runs/*.yaml",
            "workloads/*.yaml",
        )
        for p in REPO.glob(pattern)
    )
    assert len(files) >= 4
    result = accelsim("check", *files)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert [line.split(": ok (")[0] for line in result.stdout.splitlines()] == files


def test_check_reports_every_broken_file(tmp_path: Path) -> None:
    hardware = yaml.safe_load((REPO / SCALESIM).read_text(encoding="utf-8"))
    hardware["array"]["dataflow"] = "WS"
    bad_hw = tmp_path / "bad_hw.yaml"
    bad_hw.write_text(yaml.safe_dump(hardware), encoding="utf-8")
    workload = yaml.safe_load((REPO / "workloads/mlp.yaml").read_text(encoding="utf-8"))
    workload["layers"][0]["kind"] = "conv"
    bad_wl = tmp_path / "bad_workload.yaml"
    bad_wl.write_text(yaml.safe_dump(workload), encoding="utf-8")

    result = accelsim("check", bad_hw, SCALESIM, bad_wl)

    lines = assert_input_error(result)
    assert lines[0] == (
        f"{shown(bad_hw)}: array.dataflow: input should be 'os', 'ws' or 'is' (got 'WS')"
    )
    assert lines[1].startswith(
        f"{shown(bad_wl)}: layers[0].kind: unknown kind; did you mean 'conv2d'"
    )
    assert len(lines) == 2
    # The good file in between is still checked and reported.
    assert result.stdout.splitlines() == [f"{SCALESIM}: ok (hardware 'scalesim-32x32')"]


def test_check_unhashable_yaml_key_is_bad_input(tmp_path: Path) -> None:
    # Used to exit 1 with "internal error: TypeError: unhashable type: 'list'".
    path = tmp_path / "weird.yaml"
    path.write_text("name: x\n[a, b]: 1\n", encoding="utf-8")
    (line,) = assert_input_error(accelsim("check", path))
    assert line.startswith(f"{shown(path)}: line 2, column 1: invalid YAML: ")


def test_layer_topology_runs_every_row_in_one_process(tmp_path: Path) -> None:
    topo = tmp_path / "t.csv"
    topo.write_text("Layer, M, N, K,\ng1, 100, 37, 513,\nc1, 8, 8, 3, 3, 4, 8, 1,\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "accelsim",
            "layer",
            "--hardware",
            "configs/hardware/scalesim.yaml",
            "--topology",
            str(topo),
            "--convention",
            "scalesim",
            "--json",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    records = json.loads(done.stdout)
    assert [r["layer"] for r in records] == ["g1", "c1"]
    # 32x32 OS, GEMM 100x37x513: ceil(100/32) * ceil(37/32) = 8 folds of 32+32+513-2 cycles, -1.
    assert records[0]["compute_cycles"] == 8 * (32 + 32 + 513 - 2) - 1
    # Conv 8x8 ifmap, 3x3, 4 channels, 8 filters: M = 6*6 = 36 pixels, K = 36, N = 8;
    # M > 32 rows gives 2 folds of 32+32+36-2 cycles.
    assert (records[1]["m"], records[1]["k"], records[1]["n"]) == (36, 36, 8)
    assert records[1]["compute_cycles"] == 2 * (32 + 32 + 36 - 2) - 1
