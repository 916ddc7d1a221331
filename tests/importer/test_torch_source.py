"""``accelsim.export_onnx`` (``importer/torch_source.py``) around the exporter, with a
stand-in ``torch`` module (the default run has no torch): the weights left out when an
import asks, the 2 GiB protobuf limit as a message, the exporter's message in plain text.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np
import onnx
import pytest
from google.protobuf.message import EncodeError
from onnx import helper, numpy_helper

from accelsim.errors import WorkloadError
from accelsim.importer.torch_source import onnx_bytes


class _Module:
    """Stands in for ``torch.nn.Module``."""

    def train(self) -> _Module:
        return self


class _Unserialisable:
    """A model proto too large to serialise, as protobuf reports one over 2 GiB."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.graph = model.graph

    def SerializeToString(self) -> bytes:
        raise EncodeError("Failed to serialize proto")


def _model() -> onnx.ModelProto:
    """``y = x W`` with a 10 x 100 float weight."""
    weight = numpy_helper.from_array(np.ones((10, 100), dtype=np.float32), "W")
    node = helper.make_node("MatMul", ["x", "W"], ["y"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 10])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 100])],
        [weight],
    )
    return helper.make_model(graph)


def _fake_torch(monkeypatch: pytest.MonkeyPatch, export: Any) -> None:
    torch = types.ModuleType("torch")
    torch.nn = types.SimpleNamespace(Module=_Module)  # type: ignore[attr-defined]
    torch.onnx = types.SimpleNamespace(export=export)  # type: ignore[attr-defined]
    torch.zeros = torch.randn = lambda *a, **k: None  # type: ignore[attr-defined]
    torch.long, torch.bool = "long", "bool"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", torch)


@pytest.mark.parametrize("weights", [True, False])
def test_weights_are_kept_or_left_out_with_their_dimensions(
    monkeypatch: pytest.MonkeyPatch, weights: bool
) -> None:
    _fake_torch(monkeypatch, lambda *a, **k: types.SimpleNamespace(model_proto=_model()))
    model = onnx.load_from_string(onnx_bytes(_Module(), (10,), weights=weights))
    (tensor,) = model.graph.initializer
    assert list(tensor.dims) == [10, 100]
    assert len(tensor.raw_data) == (4_000 if weights else 0)


def test_a_model_over_the_protobuf_limit_is_a_message(monkeypatch: pytest.MonkeyPatch) -> None:
    program = types.SimpleNamespace(model_proto=_Unserialisable(_model()))
    _fake_torch(monkeypatch, lambda *a, **k: program)
    with pytest.raises(WorkloadError) as caught:
        onnx_bytes(_Module(), (10,))
    assert str(caught.value) == (
        "_Module: the exported model (4,012 bytes of initializers) does not fit in one protobuf"
        " message (2 GiB): export it without weights (weights=False), as an import does"
    )


def test_the_exporters_message_is_plain_text(monkeypatch: pytest.MonkeyPatch) -> None:
    def export(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "Failed to convert. \x1b[96mThis is step 3/3\x1b[0m of exporting.\n- Next"
        )

    _fake_torch(monkeypatch, export)
    with pytest.raises(WorkloadError) as caught:
        onnx_bytes(_Module(), (10,))
    assert str(caught.value) == (
        "_Module: torch.onnx.export failed: Failed to convert. This is step 3/3 of exporting. - Next"
    )


def test_each_input_is_exported_with_its_type(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[str, tuple[int, ...], str]] = []
    _fake_torch(monkeypatch, lambda *a, **k: types.SimpleNamespace(model_proto=_model()))
    torch = sys.modules["torch"]
    torch.randn = lambda shape: made.append(("randn", shape, "float"))  # type: ignore[attr-defined]
    torch.zeros = lambda shape, dtype: made.append(("zeros", shape, dtype))  # type: ignore[attr-defined]
    onnx_bytes(_Module(), [(16, 8), (16,), (16,)], input_types=["float", "int", "bool"])
    assert made == [
        ("randn", (1, 16, 8), "float"),
        ("zeros", (1, 16), "long"),
        ("zeros", (1, 16), "bool"),
    ]
    made.clear()
    onnx_bytes(_Module(), [(16,), (16,)], tokens=True)  # token ids: the first an int
    assert made == [("zeros", (1, 16), "long"), ("randn", (1, 16), "float")]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (["int"], "module: input_types: give one per input (2) (got ['int'])"),
        (["int", "long"], "module: input_types[1]: expected float, int, bool (got 'long')"),
    ],
)
def test_input_types_are_one_known_type_per_input(given: list[str], expected: str) -> None:
    with pytest.raises(WorkloadError) as caught:
        onnx_bytes(_Module(), [(16,), (16,)], input_types=given)
    assert str(caught.value) == expected
