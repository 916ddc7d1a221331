"""A PyTorch ``nn.Module`` -> ONNX bytes, exported in training mode.

The only module that imports ``torch``. It uses the TorchScript-based exporter
(``torch.onnx.export(..., dynamo=False)`` with ``TrainingMode.TRAINING``): it
keeps batch normalisation and dropout as ops and names every node after its module
(``/layer1/layer1.0/conv1/Conv``). The ``torch.export``-based exporter folds both
into the graph it traces, so a training step would lose them.
"""

from __future__ import annotations

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
    buffer = io.BytesIO()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                copied,
                (example,),
                buffer,
                training=torch.onnx.TrainingMode.TRAINING,
                do_constant_folding=False,
                dynamo=False,
                opset_version=OPSET,
                input_names=["input"],
            )
    except Exception as exc:
        raise WorkloadError.single(
            type(module).__name__, "", f"torch.onnx.export failed: {exc}"
        ) from None
    return buffer.getvalue()
