"""Integer or float graph inputs that only mask attention scores (Hugging Face's
``attention_mask``: ones and zeros per token, turned into an additive mask by the model).

Such an input is read as a constant, as a boolean mask input and a mask the model
builds itself are (:attr:`~accelsim.importer.graph_view.GraphView.mask_names`): its
values decide which scores count, never how much work there is. An input after the
first is one when

* no ``Gather`` reads it, or a tensor made from it, as indices (token type or
  position ids are an embedding's indices: inputs of the table);
* no graph output is made from it alone;
* every node where its data flow meets the model's activations is an ``Add`` to the
  scores of an attention the importer matches with the input read as a constant, or a
  ``Where`` on them (:mod:`accelsim.importer.attention`: a node on its scores).
"""

from __future__ import annotations

from accelsim.importer.attention import match_attentions
from accelsim.importer.graph_view import GraphView

GATHERS = frozenset({"Gather", "GatherElements", "GatherND"})
"""Ops whose second input is indices into their first."""
SHAPE_OPS = frozenset({"Shape", "Size"})
"""Ops that read a tensor's shape, not its values."""
ON_SCORES = frozenset({"Add", "Where"})
"""How a mask meets the scores: added to them, or choosing between them and a value."""


def mask_inputs(view: GraphView) -> tuple[str, ...]:
    """The graph's inputs after the first, not boolean, whose values only mask
    attention scores (see the module's description)."""
    return tuple(
        name
        for name in view.input_names[1:]
        if name not in view.mask_names and _only_masks_scores(view.with_masks((name,)), name)
    )


def _only_masks_scores(masked: GraphView, name: str) -> bool:
    """Whether the input ``name`` only masks scores, ``masked`` reading it as a mask."""
    live = masked.live()
    made, ends = {name}, []
    for node in masked.nodes:
        read = [t for t in masked.value_inputs(node) if t in made]
        if not read or node.op in SHAPE_OPS:
            continue
        if node.op in GATHERS and node.inputs[1:2] and node.inputs[1] in made:
            return False
        if any(t in live for t in masked.value_inputs(node)):
            ends.append(node)
            continue
        made.update(node.outputs)
    if not ends or made & set(masked.output_names):
        return False
    on_scores = {i for match in match_attentions(masked) for i, _ in match.on_scores}
    return all(node.op in ON_SCORES and node.index in on_scores for node in ends)
