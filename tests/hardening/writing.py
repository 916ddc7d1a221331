"""What the tests of writing commands share: running a command in this process, a
tiny ONNX model, a short measurements file, and ``import`` and ``calibrate`` called
for an output."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from accelsim import cli
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
    """``accelsim calibrate`` of one parameter."""
    return ["calibrate", csv, "--hardware", hardware, "--out", out, "--fit", "op_overhead_us"]


def hidden(directory: Path) -> list[str]:
    """The hidden entries of ``directory`` (staging leftovers)."""
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


Writer = tuple[Callable[[Path], list[object]], dict[str, Path]]
"""How a command is called for an output, and what its inputs are."""


def writer_of(command: str, tmp_path: Path) -> Writer:
    """``import`` of a tiny model or ``calibrate`` of a copied hardware file."""
    if command == "import":
        model = onnx_model(tmp_path / "tiny.onnx")
        return (lambda out: ["import", model, "--out", out]), {"model file": model}
    csv = measurements(tmp_path / "gemms.csv")
    hardware = tmp_path / "hw.yaml"
    shutil.copyfile(HARDWARE, hardware)
    inputs = {"measurements file": csv, "--hardware file": hardware}
    return (lambda out: calibrate_args(csv, out, hardware)), inputs
