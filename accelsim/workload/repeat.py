"""A block of layers repeated N times in a workload file, expanded into the layer table.

An entry of ``layers`` may be ``{repeat: {name: P, count: N, layers: [...]}}``: the
block's layers are written once and the table gets ``N`` copies of them in order,
copy ``i``'s layer ``x`` named ``P.i.x``.  Inside the block, an input naming a layer
of the block reads that layer of the same copy, :data:`BLOCK_INPUT` reads the
block's input (the layer before the repeat entry, or the model input, for copy 0;
the previous copy's last layer after), and any other name is kept (an earlier layer
or a model input).  A layer without ``inputs`` reads the previous layer of the
table, as everywhere.  Each copy's layers carry their ``block``
(:class:`~accelsim.workload.model.Block`: the repeat's name and the copy's index)
as data.

The expansion runs on the file's data before overrides and validation, so an
override addresses a copied layer by its full name (``layers[h.5.attn].heads``);
a problem found in a copy is reported at the layer as written in the block
(:func:`expand_repeats`'s ``Origins`` entries).
"""

from __future__ import annotations

from typing import Any

from accelsim.errors import Problem, WorkloadError
from accelsim.workload.inputs import INPUT_NAME

REPEAT = "repeat"
"""The key of a repeat entry in ``layers``."""

BLOCK_INPUT = "block_input"
"""The input name that, inside a repeated block, reads the block's input."""

MAX_REPEATED_LAYERS = 100_000
"""Most layers one repeat entry expands to (``count`` x the block's layers)."""

_KEYS = ("name", "count", "layers")


def expand_repeats(
    data: dict[str, Any], file: str
) -> tuple[dict[str, Any], tuple[tuple[str, str, str], ...]]:
    """``data`` with every repeat entry of its ``layers`` expanded, and for each copied
    layer ``(its path in the expanded data, file, its path as written)``, the entries
    an :class:`~accelsim.config.overrides.Origins` blames its problems with.

    Raises:
        WorkloadError: listing every malformed repeat entry, at its key path.
    """
    layers = data.get("layers")
    if not isinstance(layers, list) or not any(_is_repeat(e) for e in layers):
        return data, ()
    out: list[Any] = []
    written: list[tuple[str, str, str]] = []
    problems: list[Problem] = []
    for index, entry in enumerate(layers):
        if not _is_repeat(entry):
            out.append(entry)
            continue
        where = f"layers[{index}].{REPEAT}"
        found = _problems(entry, file, where)
        if found:
            problems.extend(found)
            continue
        spec = entry[REPEAT]
        before = _name_of(out[-1]) if out else INPUT_NAME
        for copy in range(spec["count"]):
            for k, layer in enumerate(spec["layers"]):
                written.append((f"layers[{len(out)}]", file, f"{where}.layers[{k}]"))
                out.append(_copied(layer, spec, copy, before))
            before = f"{spec['name']}.{copy}.{_name_of(spec['layers'][-1])}"
    if problems:
        raise WorkloadError(problems)
    return {**data, "layers": out}, tuple(written)


def _is_repeat(entry: Any) -> bool:
    return isinstance(entry, dict) and REPEAT in entry


def _name_of(layer: Any) -> str:
    name = layer.get("name") if isinstance(layer, dict) else None
    return name if isinstance(name, str) else ""


def _copied(layer: dict[str, Any], spec: dict[str, Any], copy: int, before: str) -> dict[str, Any]:
    """Copy ``copy`` of a block's ``layer``: its name and the block's inputs renamed."""
    prefix = f"{spec['name']}.{copy}."
    own = {_name_of(x) for x in spec["layers"]}

    def renamed(name: Any) -> Any:
        if name == BLOCK_INPUT:
            return before
        return prefix + name if name in own else name

    copied = {
        **layer,
        "name": prefix + layer["name"],
        "block": {"repeat": spec["name"], "index": copy},
    }
    if isinstance(layer.get("inputs"), list):
        copied["inputs"] = [renamed(n) for n in layer["inputs"]]
    return copied


def _problems(entry: dict[str, Any], file: str, where: str) -> list[Problem]:
    """What is wrong with a repeat entry (nothing: it expands)."""
    if len(entry) != 1:
        extra = sorted(str(k) for k in entry if k != REPEAT)
        return [Problem(file, where, "a repeat entry holds the repeat key alone", extra)]
    spec = entry[REPEAT]
    if not isinstance(spec, dict):
        return [Problem(file, where, "must be a mapping of name, count and layers", spec)]
    unknown = sorted(str(k) for k in spec if k not in _KEYS)
    if unknown:
        return [
            Problem(file, f"{where}.{unknown[0]}", "unknown key; expected name, count or layers")
        ]
    missing = [k for k in _KEYS if k not in spec]
    if missing:
        return [Problem(file, f"{where}.{missing[0]}", "field required")]
    name, count, layers = spec["name"], spec["count"], spec["layers"]
    if not isinstance(name, str) or not name:
        return [Problem(file, f"{where}.name", "must be a non-empty name", name)]
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        return [
            Problem(file, f"{where}.count", "must be a whole number of copies, 1 or more", count)
        ]
    if not isinstance(layers, list) or not layers:
        return [Problem(file, f"{where}.layers", "must be a non-empty list of layers", layers)]
    if count * len(layers) > MAX_REPEATED_LAYERS:
        message = f"count x the block's layers is more than {MAX_REPEATED_LAYERS:,} layers"
        return [Problem(file, f"{where}.count", message, count)]
    return _block_problems(layers, file, f"{where}.layers")


def _block_problems(layers: list[Any], file: str, where: str) -> list[Problem]:
    """A block's layers: named mappings, none a repeat or named :data:`BLOCK_INPUT`."""
    problems = []
    for k, layer in enumerate(layers):
        at = f"{where}[{k}]"
        if not isinstance(layer, dict):
            problems.append(Problem(file, at, "must be a layer (a mapping)", layer))
        elif REPEAT in layer:
            problems.append(Problem(file, at, "a repeat inside a repeated block is not supported"))
        elif not _name_of(layer):
            problems.append(Problem(file, f"{at}.name", "a layer of a repeated block needs a name"))
        elif layer["name"] == BLOCK_INPUT:
            message = f"{BLOCK_INPUT} names the block's input: a layer needs its own"
            problems.append(Problem(file, f"{at}.name", message, BLOCK_INPUT))
    return problems
