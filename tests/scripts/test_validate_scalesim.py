"""SCALE-Sim 3.0.0 cross-validation harness (scripts/validate_scalesim.py).

The harness runs the real SCALE-Sim in its own interpreter: ``.scalesim-venv/``
at the repository root, created here on first use (``python -m venv`` and
``pip install scalesim==3.0.0 "numpy<2.4"``, about 30 s) and reused afterwards,
or the python named by ``$ACCELSIM_SCALESIM_PYTHON``.  The CI subset is a few
small layers on 8x8, 16x16 and 8x16 arrays across os/ws/is.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from accelsim.errors import WorkloadError
from tests.conftest import ROOT, load_script

VALIDATION = ROOT / "configs" / "validation"
CI_TOPOLOGIES = [str(VALIDATION / "ci_small_conv.csv"), str(VALIDATION / "ci_small_gemm.csv")]


vs = load_script("validate_scalesim")


# Tests that run the real SCALE-Sim: excluded from the default run (``.ci/run`` runs
# them with ``-m crossval``), and skipped where it cannot be installed (offline).
crossval = pytest.mark.crossval


def scalesim_or_skip() -> Path:
    """The python of SCALE-Sim 3.0.0, installed on first use; skips the test if that fails."""
    explicit = os.environ.get(vs.PYTHON_ENV)
    if explicit:
        return Path(explicit)
    try:
        return vs.ensure_scalesim_venv(vs.DEFAULT_VENV)
    except (vs.HarnessError, OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"SCALE-Sim 3.0.0 is not available (offline?): {exc}")


@pytest.fixture(scope="module")
def scalesim_python() -> Path:
    return scalesim_or_skip()


def test_without_network_the_cross_check_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(venv: Path) -> Path:
        raise vs.HarnessError(f"could not install scalesim==3.0.0 into {venv}")

    monkeypatch.delenv(vs.PYTHON_ENV, raising=False)
    monkeypatch.setattr(vs, "ensure_scalesim_venv", offline)
    with pytest.raises(pytest.skip.Exception, match=r"not available \(offline\?\)"):
        scalesim_or_skip()


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Route the harness's temporary directories here, to check they are removed."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    return scratch


CI_CASES = [
    # array, dataflow, SRAM kB (1 kB: some operands do not fit), extra args
    ("8x8", "os", 1, ["--user"]),
    ("16x16", "ws", 64, []),
    ("8x16", "is", 4, []),
]


@crossval
@pytest.mark.parametrize(("array", "dataflow", "kb", "extra"), CI_CASES)
def test_ci_subset_matches_scalesim(
    array: str,
    dataflow: str,
    kb: int,
    extra: list[str],
    scalesim_python: Path,
    private_tmp: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "result.json"
    argv = [
        "--array", array, "--dataflow", dataflow, "--sram-kb", str(kb), "--bandwidth", "10",
        "--scalesim-python", str(scalesim_python), "--json", str(out),
        *[a for t in CI_TOPOLOGIES for a in ("--topology", t)], *extra,
    ]  # fmt: skip
    status = vs.main(argv)
    printed = capsys.readouterr().out
    assert status == 0, printed
    result = json.loads(out.read_text())
    assert result["mismatches"] == 0
    assert len(result["layers"]) == 6
    assert "6 layers compared" in printed and " 0 mismatches" in printed
    for layer in result["layers"]:
        quantities = layer["quantities"]
        for name in ("cycles", "folds", "mapping_eff", "sram_ifmap_reads", "sram_filter_reads",
                     "sram_ofmap_writes"):  # fmt: skip
            assert quantities[name]["checked"] and quantities[name]["equal"], (layer["name"], name)
    # At least one DRAM read count is compared per case, and SCALE-Sim's outputs are gone.
    assert any(layer["quantities"]["dram_ifmap_reads"]["checked"] for layer in result["layers"])
    assert list(private_tmp.iterdir()) == []


@pytest.fixture(scope="module")
def real_case(scalesim_python: Path) -> tuple[object, list[object], list[dict[str, object]]]:
    hw = vs.Hardware(8, 8, "ws", 64, 64, 64, 10)
    layers = vs.read_topology(VALIDATION / "ci_small_gemm.csv")
    rows, _ = vs.run_scalesim(scalesim_python, hw, layers, "CALC")
    return hw, layers, rows


@crossval
@pytest.mark.parametrize(
    ("column", "quantity"),
    [
        ("Total Cycles", "cycles"),
        ("Mapping Efficiency %", "mapping_eff"),
        ("SRAM IFMAP Reads", "sram_ifmap_reads"),
        ("SRAM Filter Reads", "sram_filter_reads"),
        ("SRAM OFMAP Writes", "sram_ofmap_writes"),
        ("DRAM IFMAP Reads", "dram_ifmap_reads"),
        ("DRAM Filter Reads", "dram_filter_reads"),
    ],
)
def test_tampered_scalesim_result_is_a_mismatch(
    column: str,
    quantity: str,
    real_case: tuple[vs.Hardware, list[vs.Layer], list[dict[str, object]]],
) -> None:
    hw, layers, rows = real_case
    acc, _ = vs.run_accelsim(hw, layers)
    honest = vs.compare_layer(hw, layers[1], rows[1], acc[1])
    assert honest.mismatches == []
    tampered = copy.deepcopy(rows[1])
    tampered[column] = tampered[column] + 1  # type: ignore[operator]
    bad = vs.compare_layer(hw, layers[1], tampered, acc[1])
    names = [q.name for q in bad.mismatches]
    assert quantity in names
    if quantity == "cycles":  # the folds are derived from SCALE-Sim's cycles
        assert "folds" in names


@crossval
def test_mismatch_gives_nonzero_exit(
    real_case: tuple[vs.Hardware, list[vs.Layer], list[dict[str, object]]],
    scalesim_python: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, _, rows = real_case
    tampered = copy.deepcopy(rows)
    tampered[0]["SRAM OFMAP Writes"] = tampered[0]["SRAM OFMAP Writes"] + 7  # type: ignore[operator]
    monkeypatch.setattr(vs, "run_scalesim", lambda *args, **kw: (tampered, 0.0))
    status = vs.main([
        "--array", "8x8", "--dataflow", "ws", "--sram-kb", "64", "--bandwidth", "10",
        "--scalesim-python", str(scalesim_python), "--topology", CI_TOPOLOGIES[1],
    ])  # fmt: skip
    printed = capsys.readouterr().out
    assert status == 1
    assert "MISMATCH" in printed and "1 mismatch in 1 layer;" in printed


@crossval
def test_accelsim_rejected_hardware_is_an_error(
    scalesim_python: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A 128x128 tile of 1-byte words needs 16 KiB per buffer.
    status = vs.main([
        "--array", "128x128", "--sram-kb", "8", "--scalesim-python", str(scalesim_python),
        "--topology", CI_TOPOLOGIES[1],
    ])  # fmt: skip
    assert status == 2
    assert "accelsim rejects" in capsys.readouterr().err


def test_topology_reader(tmp_path: Path) -> None:
    topo = tmp_path / "t.csv"
    topo.write_text(
        "Layer, anything,\n"
        "a, 7, 5, 3,\n"
        "b,8,8,3,3,4,8,2\n"  # no trailing comma
        "\n"
    )
    layers = vs.read_topology(topo)
    assert [(x.name, x.kind, x.dims, x.row) for x in layers] == [
        ("a", "gemm", (7, 5, 3), 2),
        ("b", "conv", (8, 8, 3, 3, 4, 8, 2), 3),
    ]
    shape = vs.scalesim_shape(layers[1])  # ceil output size: 4x4 windows, 8 channels x 4
    assert (shape.m, shape.n, shape.k, shape.ifmap_unique) == (16, 8, 36, 64 * 4)
    topo.write_text("h\nx, 1, 2,\n")
    with pytest.raises(
        WorkloadError,
        match=r"t.csv: row 2: expected M, N, K \(GEMM\) or IFMAP Height, IFMAP Width, "
        r"Filter Height, Filter Width, Channels, Num Filter, Strides \(conv\) after the name "
        r"\(got '2 values'\)",
    ):
        vs.read_topology(topo)


def test_shipped_topologies_parse() -> None:
    kinds = {
        name: {layer.kind for layer in vs.read_topology(VALIDATION / name)}
        for name in vs.SWEEP_TOPOLOGIES
    }
    assert kinds == {
        "alexnet_conv.csv": {"conv"},
        "resnet18_conv.csv": {"conv"},
        "gemm_odd.csv": {"gemm"},
    }
    assert len(vs.read_topology(VALIDATION / "resnet18_conv.csv")) == 20


def test_sweep_arrays_option() -> None:
    assert vs.parse_arrays("12x14:36, 31X41:48") == ((12, 14, 36), (31, 41, 48))
    jobs = vs.sweep_jobs([VALIDATION / "gemm_odd.csv"], vs.parse_arrays("12x14:36"))
    assert [(hw.rows, hw.cols, hw.dataflow, hw.ifmap_kb) for hw, _ in jobs] == [
        (12, 14, "os", 36),
        (12, 14, "ws", 36),
        (12, 14, "is", 36),
    ]
    for bad in ("12x14", "12x14:0", "axb:3"):
        with pytest.raises(vs.HarnessError, match="--arrays"):
            vs.parse_arrays(bad)


def test_each_scalesim_layer_is_counted_as_it_ends(tmp_path: Path) -> None:
    """SCALE-Sim prints ``Running Layer N`` as each layer starts: a layer has ended when
    the next starts or the process exits cleanly (a crash ends none)."""
    ended: list[int] = []
    script = "print('Running Layer 0'); print('Total cycles: 9'); print('Running Layer 1')"
    code, output = vs.run_counting_layers(
        [sys.executable, "-c", script], tmp_path, lambda: ended.append(len(ended))
    )
    assert (code, ended) == (0, [0, 1])
    assert output == "Running Layer 0\nTotal cycles: 9\nRunning Layer 1\n"
    crash = "import sys; print('Running Layer 0'); sys.exit('boom')"
    ended.clear()
    code, output = vs.run_counting_layers(
        [sys.executable, "-c", crash], tmp_path, lambda: ended.append(len(ended))
    )
    assert (code, output, ended) == (1, "Running Layer 0\nboom\n", [])
