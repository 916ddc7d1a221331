"""Workload files of layer widths (``.widths``): whitespace-separated positive
integers, the input's features and then each linear layer's outputs, with a ReLU
between two linear layers and softmax cross-entropy after the last."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelsim.config.files import display_path, read_text
from accelsim.errors import WorkloadError


def widths_table(path: Path) -> dict[str, Any]:
    """The layer table of a ``.widths`` file.

    Raises:
        WorkloadError: for a file that is not two or more positive integers.
    """
    file = display_path(path)
    words = read_text(path, WorkloadError, file).split()
    for index, word in enumerate(words, 1):
        if not word.isdigit() or int(word) == 0:
            raise WorkloadError.single(file, f"width {index}", "not a positive integer", word)
    if len(words) < 2:
        raise WorkloadError.single(file, "", "needs the input's width and a layer's", len(words))
    layers: list[dict[str, Any]] = []
    for index, width in enumerate(words[1:], 1):
        if index > 1:
            layers.append({"name": f"relu{index - 1}", "kind": "activation", "function": "relu"})
        layers.append({"name": f"fc{index}", "kind": "linear", "out_features": int(width)})
    return {
        "name": path.name.split(".")[0],
        "source": f"{path.name} (layer widths)",
        "input": {"kind": "vector", "features": int(words[0])},
        "layers": [*layers, {"name": "loss", "kind": "cross_entropy"}],
        "notes": ["a ReLU between two linear layers"],
    }
