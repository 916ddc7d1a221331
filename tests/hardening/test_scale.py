"""Regression tests of input sizes: a topology's rows and a measurements file's GEMMs
are capped (refused at the first row past the cap, in seconds), what is accepted
costs each distinct GEMM once, and a topology layer name or row that ``layer`` and
``run`` would refuse is refused when the file is read, by ``check`` too."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from accelsim import cli
from accelsim.calibration import measurements, model
from accelsim.calibration.measurements import Measurements, read_measurements
from accelsim.config.enums import PsumPolicy
from accelsim.config.loader import load_hardware
from accelsim.driver import layer
from accelsim.errors import InputError, WorkloadError
from accelsim.workload import topology
from accelsim.workload.topology import read_topology
from tests.conftest import ROOT

HARDWARE = ROOT / "configs" / "hardware" / "default.yaml"
TPU = ROOT / "configs" / "hardware" / "tpu_v6e.yaml"


def run_cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def problems_of(path: Path) -> list[str]:
    with pytest.raises(WorkloadError) as caught:
        read_topology(path)
    return [str(p) for p in caught.value.problems]


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("a\x00b", "a\\x00b"),
        ("a\x1b[2Jb", "a\\x1b[2Jb"),
        ("a\tb", "a\\tb"),
        ("a\x0cb", "a\\x0cb"),
        ("a\x85b", "a\\x85b"),
        ("a\u2028b", "a\\u2028b"),
    ],
)
def test_a_topology_name_with_a_control_character_is_refused_where_it_is(
    tmp_path: Path, name: str, shown: str
) -> None:
    # NEL, U+2028 and a form feed end a line for str.splitlines, not for a CSV file:
    # they stay in the name, which refuses them
    path = tmp_path / "t.csv"
    path.write_text(f"Layer, M, N, K,\nok, 8, 8, 8,\n{name}, 8, 8, 8,\n", encoding="utf-8")
    assert problems_of(path) == [
        f"{path}: row 3, Layer: the name holds a control or other non-printable"
        f" character (got '{shown}')"
    ]


def test_check_run_and_layer_refuse_a_nul_in_a_topology_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.csv"
    path.write_text("Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width,"
                    " Channels, Num Filter, Strides,\nc\x000, 8, 8, 3, 3, 4, 4, 1,\n",
                    encoding="utf-8")  # fmt: skip
    message = (
        f"{path}: row 2, Layer name: the name holds a control or other non-printable"
        " character (got 'c\\x000')\n"
    )
    out_dir = tmp_path / "out"
    for args in (
        ("check", path),
        ("layer", "--hardware", HARDWARE, "--topology", path),
        ("run", ROOT / "configs/runs/mlp.yaml", "--set", f"workload={path}", "--out", out_dir),
    ):
        assert run_cli(capsys, *args) == (cli.EXIT_INPUT, "", message)
    assert not out_dir.exists()


def test_a_row_whose_largest_gemm_passes_2_53_macs_is_refused_by_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GEMM row: 2^18 * 2^18 * 2^18 = 2^54 MACs.  Conv row: forward P Q R S C NF =
    # 1 * 1 * 2^12 * 2^12 * 2^12 * 1 = 2^36, but dX is H W C NF R S = 2^12 * 2^12 *
    # 2^12 * 1 * 2^12 * 2^12 = 2^60; the last row's 2^48 passes.
    path = tmp_path / "t.csv"
    path.write_text(
        "Layer, M, N, K,\n"
        "g, 262144, 262144, 262144,\n"
        "c, 4096, 4096, 4096, 4096, 4096, 1, 1,\n"
        "ok, 4096, 4096, 1, 1, 4096, 4096, 4096,\n",
        encoding="utf-8",
    )
    assert topology.largest_macs("conv", (4096, 4096, 1, 1, 4096, 4096, 4096)) == 2**48
    expected = (
        f"{path}: row 2: its largest GEMM's MACs (1.8e+16) exceed the limit of 2^53"
        " (9.01e+15) (got [262144, 262144, 262144])\n"
        f"{path}: row 3: its largest GEMM's MACs (1.15e+18) exceed the limit of 2^53"
        " (9.01e+15) (got [4096, 4096, 4096, 4096, 4096, 1, 1])\n"
    )
    assert run_cli(capsys, "check", path) == (cli.EXIT_INPUT, "", expected)
    args = ("layer", "--hardware", HARDWARE, "--topology", path, "--phase", "fwd")
    assert run_cli(capsys, *args) == (cli.EXIT_INPUT, "", expected)


def test_a_topology_of_more_rows_than_the_cap_is_refused_at_the_row_past_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(topology, "MAX_ROWS", 3)
    path = tmp_path / "t.csv"
    rows = "".join(f"l{i}, 8, 8, 8,\n" for i in range(3))
    path.write_text(f"Layer, M, N, K,\n{rows}", encoding="utf-8")
    assert [layer.name for layer in read_topology(path)] == ["l0", "l1", "l2"]
    path.write_text(f"Layer, M, N, K,\n# a comment\n{rows}\nl3, 8, 8, 8,\nbad\n", "utf-8")
    # the row past the cap is reported, and nothing after it is read
    assert problems_of(path) == [f"{path}: row 7: more than 3 layer rows (got 'l3, 8, 8, 8,')"]


def test_the_row_cap_is_checked_in_seconds(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    rows = "l, 8, 8, 8,\n" * (topology.MAX_ROWS + 1)
    path.write_text(f"Layer, M, N, K,\n{rows}", encoding="utf-8")
    start = time.perf_counter()
    problems = problems_of(path)
    assert time.perf_counter() - start < 10
    assert problems == [
        f"{path}: row {topology.MAX_ROWS + 2}: more than 100,000 layer rows (got 'l, 8, 8, 8,')"
    ]


def test_layer_topology_simulates_each_distinct_gemm_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.csv"
    path.write_text(
        "Layer, M, N, K,\na, 8, 16, 32,\nb, 8, 16, 32,\nc, 64, 8, 8,\nd, 8, 16, 32,\n", "utf-8"
    )
    args = ("layer", "--hardware", HARDWARE, "--topology", path, "--json")
    code, before, _ = run_cli(capsys, *args)
    simulated = []
    original = layer.simulate_layer

    def counted(*given: object, **named: object) -> object:
        simulated.append(given[2])
        return original(*given, **named)  # type: ignore[arg-type]

    monkeypatch.setattr("accelsim.cli_layer.simulate_layer", counted)
    assert run_cli(capsys, *args) == (code, before, "")
    assert [(g.m, g.n, g.k) for g in simulated] == [(8, 16, 32), (64, 8, 8)]
    single = ("layer", "--hardware", HARDWARE, "--gemm", 8, 16, 32, "--json")
    _, alone, _ = run_cli(capsys, *single)
    records = json.loads(before)
    assert [r.pop("layer") for r in records] == ["a", "b", "c", "d"]
    assert records[0] == records[1] == records[3] == json.loads(alone)


def gemms(dims: list[tuple[int, int, int]]) -> Measurements:
    m, n, k = (np.asarray(d, np.int64) for d in zip(*dims, strict=True))
    return Measurements(m, n, k, np.ones(len(dims)))


def test_calibrate_costs_each_distinct_gemm_once_per_orientation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hw = load_hardware(TPU)
    dims = [(128, 256, 512), (300, 100, 77), (128, 256, 512), (128, 256, 512)]
    each = [model.gemm_features(hw, gemms([d]), False, PsumPolicy.CHUNK) for d in dims]
    costed = []
    original = model._lone_gemm_costs

    def counted(*given: object) -> object:
        costed.append(given[1:4])
        return original(*given)  # type: ignore[arg-type]

    monkeypatch.setattr(model, "_lone_gemm_costs", counted)
    together = model.gemm_features(hw, gemms(dims), False, PsumPolicy.CHUNK)
    # tpu_v6e has mapping.orientation: best, so each GEMM is costed transposed too
    assert costed == [(128, 256, 512), (300, 100, 77), (256, 128, 512), (100, 300, 77)]
    for name in ("given", "transposed"):
        for column in ("compute_cycles", "read_bytes", "prologue_bytes", "epilogue_bytes"):
            assert getattr(getattr(together, name), column).tolist() == [
                getattr(getattr(one, name), column)[0] for one in each
            ]
    costed.clear()
    timed = model.engine_us(hw, gemms(dims), False)
    assert costed == [(128, 256, 512), (300, 100, 77)]
    assert timed.tolist() == [model.engine_us(hw, gemms([d]), False)[0] for d in dims]


def test_a_measurements_file_of_more_gemms_than_the_cap_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(measurements, "MAX_GEMMS", 2)
    path = tmp_path / "m.csv"
    path.write_text("M,N,K,dtype,latency_us\n8,8,8,bf16,1\n8,8,8,bf16,1\n", encoding="utf-8")
    assert len(read_measurements(path, "bf16")) == 2
    with path.open("a", encoding="utf-8") as f:
        f.write("16,8,8,bf16,2\n")
    with pytest.raises(InputError) as caught:
        read_measurements(path, "bf16")
    assert [str(p) for p in caught.value.problems] == [
        f"{path}: more than 2 measured GEMMs (got '3 rows')"
    ]
