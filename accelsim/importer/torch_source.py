"""A PyTorch ``nn.Module`` -> ONNX bytes, exported in training mode.

The only module that imports ``torch``. It uses PyTorch's ``torch.export``-based ONNX
exporter (``torch.onnx.export(..., dynamo=True, optimize=False)``) on the module in
training mode: the graph keeps batch normalisation (with batch statistics) and dropout
as ops, and each node records its module path, which names the layers. With the
exporter's optimisation on, or from a module in eval mode, both would be folded away.
"""

from __future__ import annotations

import contextlib
import copy
import io
import re
import warnings
from collections.abc import Sequence
from typing import Any

from google.protobuf.message import EncodeError

from accelsim.errors import WorkloadError
from accelsim.importer.input_shapes import InputShapes, element_types, several

OPSET = 20
"""ONNX opset of the export (20 has ``Gelu`` as one op)."""


def onnx_bytes(
    module: Any,
    input_shape: InputShapes,
    tokens: bool = False,
    weights: bool = True,
    sequence_first: bool = False,
    input_types: Sequence[str] | None = None,
) -> bytes:
    """Export a copy of ``module`` in training mode at batch 1.

    Args:
        module: A ``torch.nn.Module`` taking one tensor per input.
        input_shape: Its input's dimensions per sample, or a sequence of them, one per
            input in ``forward``'s order (the graph's inputs are then named after its
            arguments; a single one is named ``input``).
        tokens: The (first) input is integer token ids (else floats).
        weights: Keep the weights' values; without them (all an import reads is the
            graph and the shapes) a model of any size serialises, where one protobuf
            message holds at most 2 GiB.
        sequence_first: The batch axis is the second (``(S, 1, E)`` for a sequence
            ``input_shape`` of ``(S, E)``: ``batch_first=False`` modules), not the first,
            in every input.
        input_types: Each input's elements, one per input: ``float`` (the default: random
            values), ``int`` (zeros, int64: token ids, a mask of ones and zeros) or
            ``bool`` (false); ``tokens`` makes the first ``int``.

    Raises:
        WorkloadError: when ``input_types`` are not one known type per input, torch is
            not installed, ``module`` is not a module, the export fails (its message
            included) or, with weights, the model does not fit in one protobuf message.
    """
    shapes = several(input_shape)
    kinds = element_types(len(shapes), tokens, input_types)
    try:
        import torch
    except ImportError:
        raise WorkloadError.single(
            "module", "", "importing a PyTorch module needs torch: pip install 'accelsim[torch]'"
        ) from None
    if not isinstance(module, torch.nn.Module):
        raise WorkloadError.single(
            "module", "", "expected an ONNX file or a torch.nn.Module", type(module).__name__
        )
    copied = copy.deepcopy(module).train()
    examples = []
    for dims, kind in zip(shapes, kinds, strict=True):
        shape = (dims[0], 1, *dims[1:]) if sequence_first else (1, *dims)
        if kind == "float":
            examples.append(torch.randn(shape))
        else:
            examples.append(torch.zeros(shape, dtype=torch.long if kind == "int" else torch.bool))
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            program = torch.onnx.export(
                copied,
                tuple(examples),
                dynamo=True,
                optimize=False,
                opset_version=OPSET,
                input_names=["input"] if len(examples) == 1 else None,
                verbose=False,
            )
    except Exception as exc:
        raise WorkloadError.single(
            type(module).__name__, "", f"torch.onnx.export failed: {_plain(str(exc))}"
        ) from None
    if program is None:  # only the TorchScript exporter returns None
        raise WorkloadError.single(type(module).__name__, "", "torch.onnx.export returned no model")
    model = program.model_proto
    if not weights:
        for tensor in model.graph.initializer:
            for name in DATA_FIELDS:
                tensor.ClearField(name)
    try:
        return bytes(model.SerializeToString())
    except EncodeError:
        size = sum(t.ByteSize() for t in model.graph.initializer)
        message = (
            f"the exported model ({size:,} bytes of initializers) does not fit in one protobuf"
            " message (2 GiB): export it without weights (weights=False), as an import does"
        )
        raise WorkloadError.single(type(module).__name__, "", message) from None


DATA_FIELDS = ("raw_data", "float_data", "int32_data", "int64_data", "double_data")
"""The fields of an ONNX tensor that hold its values (its dimensions kept)."""
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _plain(text: str) -> str:
    """An exporter's message without terminal colours, on one line, at most 600 characters."""
    line = " ".join(ANSI.sub("", text).split())
    return line if len(line) <= 600 else line[:599] + "…"
