"""Shape inference and consistency checks for a workload's layer table.

Each layer kind's shape rule is part of its lowering rule
(:mod:`accelsim.lowering.rules`); this module walks the table in order, resolves
every layer's inputs, and reports every inconsistency as a
:class:`~accelsim.errors.WorkloadError` at the layer's key path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelsim.config.loader import Override, display_path
from accelsim.config.validate import suggest
from accelsim.errors import Problem, WorkloadError
from accelsim.lowering.rules import rule_for
from accelsim.lowering.shapes import INPUT_NAME, LayerInfo, Shape, ShapeProblem, model_inputs
from accelsim.workload import model as wm
from accelsim.workload.loader import load_workload_with_origins


def infer_shapes(workload: wm.Workload, file: str) -> list[LayerInfo]:
    """Resolve every layer's inputs and infer its output shape.

    Args:
        workload: The validated layer table.
        file: Source name for error messages.

    Returns:
        One :class:`LayerInfo` per layer, in order.

    Raises:
        WorkloadError: listing every inconsistent layer.
    """
    inputs = model_inputs(workload)
    shapes: dict[str, Shape] = dict(inputs)
    infos: list[LayerInfo] = []
    problems: list[Problem] = _input_name_problems(workload, file)
    consumers: dict[str, int] = {}
    failed: set[str] = set()
    losses = []
    for index, layer in enumerate(workload.layers):
        where = f"layers[{index}]"
        if layer.name in inputs:
            message = "the name of a model input (input or extra_inputs): a layer needs its own"
            problems.append(Problem(file, f"{where}.name", message, layer.name))
            continue
        if layer.name in shapes:
            problems.append(Problem(file, f"{where}.name", "duplicate layer name", layer.name))
            continue
        names = (
            tuple(layer.inputs)
            if layer.inputs is not None
            else ((workload.layers[index - 1].name if index else INPUT_NAME),)
        )
        if any(n in failed for n in names):
            failed.add(layer.name)  # already reported where it first went wrong
            continue
        unknown = [n for n in names if n not in shapes]
        if unknown:
            problems.append(
                Problem(
                    file,
                    f"{where}.inputs",
                    "unknown input (inputs must be defined earlier); "
                    + suggest(unknown[0], list(shapes)),
                    unknown[0],
                )
            )
            continue
        in_shapes = tuple(shapes[n] for n in names)
        try:
            out = rule_for(layer).shape(layer, in_shapes)
        except ShapeProblem as exc:
            path = f"{where}.{exc.key}" if exc.key else where
            problems.append(Problem(file, path, exc.message, exc.value))
            failed.add(layer.name)
            continue
        tie = _tie_problem(layer, in_shapes, workload.layers, index, file)
        if tie is not None:
            problems.append(tie)
            failed.add(layer.name)
            continue
        for n in names:
            consumers[n] = consumers.get(n, 0) + 1
        if isinstance(layer, wm.CrossEntropy):
            losses.append(index)
        shapes[layer.name] = out
        infos.append(LayerInfo(index, layer, names, in_shapes, out))
    if not problems:
        problems.extend(_check_losses(workload, losses, consumers, file))
        problems.extend(
            Problem(file, f"extra_inputs.{name}", "no layer reads this input", name)
            for name in workload.extra_inputs
            if not consumers.get(name)
        )
    if problems:
        raise WorkloadError(problems)
    return infos


def _input_name_problems(workload: wm.Workload, file: str) -> list[Problem]:
    """An extra input named as the first input is (``input``)."""
    if INPUT_NAME not in workload.extra_inputs:
        return []
    message = f"{INPUT_NAME} names the first input (the workload's input): name this one otherwise"
    return [Problem(file, f"extra_inputs.{INPUT_NAME}", message, INPUT_NAME)]


def _tie_problem(
    layer: wm.Layer, in_shapes: tuple[Shape, ...], layers: list[wm.Layer], index: int, file: str
) -> Problem | None:
    """What is wrong with the linear layer ``layers[index]``'s ``tied_to``, if anything
    (the earlier layers are searched only for a tied layer)."""
    if not isinstance(layer, wm.Linear) or layer.tied_to is None:
        return None
    path = f"layers[{index}].tied_to"
    table = next((x for x in layers[:index] if x.name == layer.tied_to), None)
    if not isinstance(table, wm.Embedding):
        return Problem(file, path, "must name an earlier embedding layer", layer.tied_to)
    fan_in = in_shapes[0].dims[-1]
    if (table.num_embeddings, table.embedding_dim) != (layer.out_features, fan_in):
        message = (
            f"the table is {table.num_embeddings} x {table.embedding_dim}; this layer's weight"
            f" is {layer.out_features} x {fan_in}"
        )
        return Problem(file, path, message, layer.tied_to)
    return None


def _check_losses(
    workload: wm.Workload, losses: list[int], consumers: dict[str, int], file: str
) -> list[Problem]:
    if len(losses) != 1:
        return [
            Problem(
                file,
                "layers",
                "a training workload needs exactly one cross_entropy loss layer",
                len(losses),
            )
        ]
    loss = workload.layers[losses[0]]
    if consumers.get(loss.name):
        return [
            Problem(
                file,
                f"layers[{losses[0]}].name",
                "the loss output cannot feed another layer",
                loss.name,
            )
        ]
    # Every other output must reach the loss, or its layer would get no gradient.
    return [
        Problem(
            file,
            f"layers[{i}].name",
            "output is never used: no later layer reads it and it is not the loss",
            layer.name,
        )
        for i, layer in enumerate(workload.layers)
        if i != losses[0] and not consumers.get(layer.name)
    ]


def load_model(
    path: Path,
    overrides: list[Override] | None = None,
    variant: Override | None = None,
    data: dict[str, Any] | None = None,
) -> tuple[wm.Workload, list[LayerInfo]]:
    """Load a workload file (see :func:`~accelsim.workload.loader.load_workload`) and
    infer its shapes (``data``: the file already parsed).

    Raises:
        WorkloadError: for schema problems or shape inconsistencies.
    """
    workload, origins = load_workload_with_origins(path, overrides, variant, data)
    try:
        return workload, infer_shapes(workload, display_path(path))
    except WorkloadError as exc:
        raise WorkloadError(origins.blame(exc.problems)) from None
