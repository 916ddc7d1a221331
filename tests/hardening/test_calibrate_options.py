"""Hostile inputs of ``accelsim calibrate``: measurement files as spreadsheets write them
(a byte order mark), digits Python counts as digits but ``int()`` refuses, rows at the
dimension limit, lines the CSV reader refuses, and ``--fit`` and ``--range`` each
blamed on the option."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from accelsim import cli
from accelsim.calibration.measurements import Measurements, read_measurements
from accelsim.calibration.model import engine_us
from accelsim.config.loader import load_hardware, parse_sets
from accelsim.errors import InputError
from tests.conftest import ROOT

V6E = ROOT / "configs" / "hardware" / "tpu_v6e.yaml"
V4 = ROOT / "configs" / "hardware" / "tpu_v4.yaml"
V4_GEMMS = ROOT / "configs" / "validation" / "silicon" / "tpu_v4_gemm_train.csv"
HEADER = "M,N,K,dtype,latency_us\n"


def calibrate(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, rows: str | Path, *options: str
) -> tuple[int, list[str], Path]:
    """Exit code and stderr lines of ``calibrate`` of ``rows`` (the text after the header,
    or a file) on the v6e, and the ``--out`` file."""
    if isinstance(rows, Path):
        measured = rows
    else:
        measured = tmp_path / "m.csv"
        measured.write_text(HEADER + rows, encoding="utf-8")
    out = tmp_path / "fitted.yaml"
    hardware = V4 if measured == V4_GEMMS else V6E
    code = cli.main(
        ["calibrate", str(measured), "--hardware", str(hardware), "--out", str(out), *options]
    )
    return code, capsys.readouterr().err.splitlines(), out


def test_a_byte_order_mark_is_read_as_excel_writes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Excel's "CSV UTF-8" starts with U+FEFF: the header is still M, not '\\ufeffM'."""
    measured = tmp_path / "bom.csv"
    measured.write_text("\ufeff" + HEADER + "64,64,64,bf16,1.0\n128,64,64,bf16,2.0\n", "utf-8")
    code, err, out = calibrate(capsys, tmp_path, measured, "--fit", "op_overhead_us")
    assert (code, err) == (0, [])
    assert out.is_file()


@pytest.mark.parametrize(
    ("cell", "shown"),
    [
        ("6\u00b2", "'6\u00b2'"),  # superscript two: isdigit() but not int()
        ("\u0661\u0662", "'\u0661\u0662'"),  # Arabic-Indic digits: int() reads them as 12
        ("\u2460", "'\u2460'"),  # circled one
        ("1" * 5000, "'" + "1" * 199 + "... (5,002 characters)"),  # past int()'s 4,300 digits
        ("16777217", "'16777217'"),  # MAX_DIM + 1
    ],
)
def test_a_dimension_that_is_not_ascii_digits_in_range_is_refused_at_its_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cell: str, shown: str
) -> None:
    code, err, out = calibrate(capsys, tmp_path, f"64,64,64,bf16,1.0\n64,{cell},64,bf16,1.0\n")
    assert (code, err) == (
        2, [f"{tmp_path / 'm.csv'}: line 3: N: not an integer in 1..16777216 (got {shown})"]
    )  # fmt: skip
    assert not out.exists()


@pytest.mark.parametrize(
    ("rows", "problem"),
    [
        # leading zeros are read, a blank line skipped and counted
        (
            "0000000000000000000000000064,64,64,bf16,1.0\n\n64,64,64,bf16,\u0661\n",
            "line 4: latency_us: not a positive number (got '\u0661')",
        ),
        (
            "64,64,64,bf16,1.0\n" + "9" * 200_000 + ",1\n",
            "line 3: not CSV: field larger than field limit (131072)",
        ),
    ],
)
def test_each_problem_is_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rows: str, problem: str
) -> None:
    code, err, _ = calibrate(capsys, tmp_path, rows)
    assert (code, err) == (2, [f"{tmp_path / 'm.csv'}: {problem}"])


def test_rows_at_max_dim_run_or_are_refused_at_the_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """2^24 on every side is 2^72 MACs: refused at the row before anything is costed.
    2^24 x 2^24 x 2^14 is 2^62 MACs, the limit: it runs on the v6e, and at 0.001 bytes
    a cycle of DRAM it takes more than 2^62 cycles, refused at its row (no
    RuntimeWarning, no unlocated limit)."""
    top = 2**24
    code, err, _ = calibrate(capsys, tmp_path, f"64,64,64,bf16,1.0\n{top},{top},{top},bf16,1\n")
    assert (code, err) == (
        2, [f"{tmp_path / 'm.csv'}: line 3: the GEMM's MACs, M x N x K (4.72e+21), exceed the"
            " limit of 2^62 (4.61e+18) (got '16777216 x 16777216 x 16777216')"],
    )  # fmt: skip
    edge = f"64,64,64,bf16,1.0\n{top},{top},{2**14},bf16,1e9\n"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code, err, out = calibrate(capsys, tmp_path, edge, "--fit", "op_overhead_us")
        assert (code, err) == (0, [])
        out.unlink()
        slow = ("--fit", "op_overhead_us", "--set", "dram.bandwidth_bytes_per_cycle=0.001")
        code, err, out = calibrate(capsys, tmp_path, edge, *slow)
    assert (code, err) == (
        2, [f"{tmp_path / 'm.csv'}: line 3: the GEMM takes more than 2^62 cycles (4.61e+18) on"
            " the fitted hardware, beyond what an event's time is kept in"
            " (got '16777216 x 16777216 x 16384')"],
    )  # fmt: skip
    assert not out.exists()


@pytest.mark.parametrize(
    ("options", "line"),
    [
        (("--fit", ","), "--fit: expected comma-separated parameter names, none empty (got ',')"),
        (("--fit", ""), "--fit: expected comma-separated parameter names, none empty (got '')"),
        (
            ("--fit", "op_overhead_us,,array_efficiency"),
            "--fit: expected comma-separated parameter names, none empty"
            " (got 'op_overhead_us,,array_efficiency')",
        ),
        (
            ("--fit", "bogus"),
            "--fit: unknown parameter (known: op_overhead_us, array_efficiency,"
            " read_bandwidth_gb_s, write_bandwidth_gb_s) (got 'bogus')",
        ),
        (
            ("--range", "bogus=1:2"),
            "--range: unknown parameter (known: op_overhead_us, array_efficiency,"
            " read_bandwidth_gb_s, write_bandwidth_gb_s) (got 'bogus')",
        ),
        (("--range", "1:2"), "--range: expected NAME=LOW:HIGH (two numbers) (got '1:2')"),
        (("--range", "a=1"), "--range: expected NAME=LOW:HIGH (two numbers) (got 'a=1')"),
        (
            ("--range", "op_overhead_us=0:1", "--range", "op_overhead_us=0:2"),
            "--range: a parameter given twice (got 'op_overhead_us=0:2')",
        ),
    ],
)
def test_fit_and_range_are_refused_naming_their_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: tuple[str, ...], line: str
) -> None:
    code, err, out = calibrate(capsys, tmp_path, V4_GEMMS, *options)
    assert (code, err) == (2, [f"calibrate: {line}"])
    assert not out.exists()


def test_gemms_keep_their_line_and_others_are_named_by_position(tmp_path: Path) -> None:
    """A subset (a cross-validation fold) keeps each GEMM's line; GEMMs built in code,
    not read from a file, are named by their position."""
    measured = tmp_path / "m.csv"
    measured.write_text(HEADER + "64,64,64,bf16,1.0\n\n128,64,64,bf16,2.0\n", "utf-8")
    assert read_measurements(measured, "bf16").subset(np.array([1])).row(0) == "line 4"
    hw = load_hardware(V6E, parse_sets(["dram.bandwidth_bytes_per_cycle=0.001"]))
    top = 2**24
    gemms = Measurements(
        np.array([64, top]), np.array([64, top]), np.array([64, 2**14]), np.ones(2)
    )
    with pytest.raises(InputError) as raised:
        engine_us(hw, gemms, False)
    assert str(raised.value) == (
        "measurements: row 2: the GEMM takes more than 2^62 cycles (4.61e+18) on the fitted"
        " hardware, beyond what an event's time is kept in"
        " (got '16777216 x 16777216 x 16384')"
    )
