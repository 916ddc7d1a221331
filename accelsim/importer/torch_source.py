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
import warnings
from typing import Any

from accelsim.errors import WorkloadError

OPSET = 20
"""ONNX opset of the export (20 has ``Gelu`` as one op)."""


def onnx_bytes(module: Any, input_shape: tuple[int, ...], tokens: bool = False) -> bytes:
    """Export a copy of ``module`` in training mode at batch 1.

    Args:
        module: A ``torch.nn.Module`` taking one tensor.
        input_shape: Its input's dimensions per sample.
        tokens: The input is integer token ids (else floats).

    Raises:
        WorkloadError: when torch is not installed, ``module`` is not a module, or the
            export fails (its message included).
    """
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
    shape = (1, *input_shape)
    example = torch.zeros(shape, dtype=torch.long) if tokens else torch.randn(shape)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            program = torch.onnx.export(
                copied,
                (example,),
                dynamo=True,
                optimize=False,
                opset_version=OPSET,
                input_names=["input"],
                verbose=False,
            )
    except Exception as exc:
        raise WorkloadError.single(
            type(module).__name__, "", f"torch.onnx.export failed: {exc}"
        ) from None
    return bytes(program.model_proto.SerializeToString())
