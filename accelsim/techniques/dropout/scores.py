"""The sensitivity of convolutions' input feature maps, which sensitivity-aware dropping
ranks: from a CSV file of ``layer,channel,score`` or synthetic."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from accelsim.config.validate import suggest
from accelsim.errors import ConfigError, Problem
from accelsim.lowering.shapes import LayerInfo
from accelsim.techniques.dropout.sites import droppable_convs
from accelsim.techniques.plan import cell, read_csv


def sensitivity_scores(
    path: str | None,
    run_file: Path,
    infos: Sequence[LayerInfo],
    seed: int,
    source: str,
    where: str,
) -> dict[str, np.ndarray]:
    """Sensitivity of every input map of each droppable conv: from the file or synthetic.

    Every row of the file names a droppable convolution, one of its input maps
    once, and a finite score >= 0; each conv has a score for every map, not all 0.

    ``path`` is the file (relative to ``run_file``; ``None``: log-normal scores drawn
    from ``seed``), named at ``where`` in ``source``.

    Raises:
        ConfigError: at ``where`` for a file that cannot be read or leaves a map
            without a score; in the file, each bad row at its line.
    """
    channels = {i.layer.name: i.in_shapes[0].dims[0] for i in droppable_convs(infos)}
    if path is None:
        rng = np.random.default_rng(seed)
        return {name: rng.lognormal(0.0, 1.0, c) for name, c in channels.items()}
    name, rows = read_csv(run_file.parent / path, ("layer", "channel", "score"), source, where)
    scores = {layer: np.full(c, np.nan) for layer, c in channels.items()}
    first: dict[tuple[str, int], int] = {}
    problems: list[Problem] = []
    for line, row in rows:
        layer = (row.get("layer") or "").strip()
        if layer not in scores:
            problems.append(
                Problem(
                    name,
                    f"line {line}",
                    "layer: not a convolution whose input maps may be dropped; "
                    + (suggest(layer, list(scores)) if scores else "the workload has none"),
                    layer,
                )
            )
            continue
        maps = scores[layer].shape[0]
        channel = cell(
            name,
            line,
            row,
            "channel",
            int,
            range(maps).__contains__,
            f"an input map of {layer}, 0 to {maps - 1}",
            problems,
        )
        score = cell(
            name,
            line,
            row,
            "score",
            float,
            lambda v: math.isfinite(v) and v >= 0,
            "a finite number >= 0",
            problems,
        )
        if channel is None or score is None:
            continue
        earlier = first.setdefault((layer, channel), line)
        if earlier != line:
            problems.append(
                Problem(
                    name,
                    f"line {line}",
                    f"a second score for {layer} channel {channel} (the first is line {earlier})",
                    score,
                )
            )
            continue
        scores[layer][channel] = score
    if problems:
        raise ConfigError(problems)
    for layer, s in scores.items():
        if np.isnan(s).any():
            raise ConfigError.single(
                source,
                where,
                f"no score for input map {int(np.isnan(s).argmax())} of {layer}"
                f" (it has {s.shape[0]}; every input map of every droppable"
                " convolution needs one)",
                path,
            )
        if not s.any():
            raise ConfigError.single(
                name, "", f"every score of {layer} is 0: its maps cannot be ranked"
            )
    return scores
