"""The measured per-group statistics gradient skipping uses by default.

``accelsim/data/traces/digits_<model>.weights.csv`` (written by
``scripts/training_signals.py``; ``docs/techniques/training-signals.md``) holds,
per layer, epoch and output channel of a small model trained on bundled digits,
``|dw| / |w|`` in units of the layer's epoch-0 mean (column ``relative``).  A
run's grouped layers take them as follows [D]:

* the model: the CNN's trace when any grouped layer is a convolution, else the
  MLP's;
* the layer: among the trace's layers of the same kind (``conv``, else
  ``linear``), the one at the same relative depth: grouped layer ``i`` of ``n``
  of that kind takes trace layer ``round(i (m - 1) / (n - 1))`` of ``m``;
* the group: group ``j`` of ``N`` takes trace group ``floor(j M / N)`` of ``M``
  (``layer`` grouping: one group, the trace layer's mean over its groups);
* the epoch: epoch ``e`` of a run of ``E`` takes trace epoch ``floor(e T / E)``
  of ``T``, so convergence keeps its place in training.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from accelsim.lowering.shapes import LayerInfo
from accelsim.techniques.plan import CONV_KINDS, bundled_trace, read_csv, trace_epochs


def read_trace(path: Path) -> dict[str, tuple[str, np.ndarray]]:
    """Per trace layer, in file order: its kind and its ``(groups, epochs)`` array of
    relative statistics."""
    _, rows = read_csv(path, ("layer", "kind", "epoch", "group", "relative"), str(path), "trace")
    cells: dict[str, dict[tuple[int, int], float]] = {}
    kinds: dict[str, str] = {}
    for _, row in rows:
        layer = row["layer"]
        kinds[layer] = row["kind"]
        cells.setdefault(layer, {})[int(row["group"]), int(row["epoch"])] = float(row["relative"])
    out = {}
    for layer, values in cells.items():
        groups = 1 + max(g for g, _ in values)
        epochs = 1 + max(e for _, e in values)
        array = np.empty((groups, epochs))
        for (g, e), v in values.items():
            array[g, e] = v
        out[layer] = (kinds[layer], array)
    return out


def measured_statistics(
    infos: Sequence[LayerInfo], layers: Sequence[str], groups: Mapping[str, int], epochs: int
) -> tuple[str, dict[str, np.ndarray], dict[str, str]]:
    """The bundled measured statistics of the grouped ``layers`` with ``groups`` each,
    for a run of ``epochs``.

    Returns:
        The trace's model, per layer its ``(groups, epochs)`` statistics, and per
        layer the trace layer it takes them from.
    """
    kind_of = {info.layer.name: info.layer.kind for info in infos}
    model, path = bundled_trace([kind_of[layer] for layer in layers], "weights")
    trace = read_trace(path)

    def family(kind: str) -> str:
        return "conv" if kind in CONV_KINDS else "linear"

    stats: dict[str, np.ndarray] = {}
    source: dict[str, str] = {}
    for fam in ("conv", "linear"):
        ours = [layer for layer in layers if family(kind_of[layer]) == fam]
        theirs = [name for name, (kind, _) in trace.items() if kind == fam]
        if not theirs:
            theirs = list(trace)
        for i, layer in enumerate(ours):
            index = round(i * (len(theirs) - 1) / max(len(ours) - 1, 1))
            name = theirs[index]
            values = trace[name][1]
            picked = values[:, trace_epochs(epochs, values.shape[1])]
            n = groups[layer]
            if n == 1:
                stats[layer] = picked.mean(axis=0, keepdims=True)
            else:
                stats[layer] = picked[[j * len(picked) // n for j in range(n)]]
            source[layer] = name
    return model, stats, source
