"""Integer or float graph inputs that only mask attention scores (Hugging Face's
``attention_mask``: ones and zeros per token, turned into an additive mask by the model).

Such an input is read as a constant, as a boolean mask input and a mask the model
builds itself are (:attr:`~accelsim.importer.graph_view.GraphView.mask_names`): its
values decide which scores count, never how much work there is. An input after the
first is one when

* no ``Gather`` reads it, or a tensor made from it, as indices (token type or
  position ids are an embedding's indices: inputs of the table);
* no graph output is made from it alone;
* every node where its data flow meets the model's activations is an ``Add`` to
  attention scores or a ``Where`` on them: the activation it reads comes, through
  views and other constant masks or scales, from a product of two activations
  (``Q . K^T``) and goes on, the same way, to a ``Softmax``.
"""

from __future__ import annotations

from accelsim.importer.attention import MASK_OPS, VIEW_OPS, is_product
from accelsim.importer.graph_view import GraphView, Node

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
        if name not in view.mask_names and _only_masks_scores(view, name)
    )


def _only_masks_scores(view: GraphView, name: str) -> bool:
    live = view.live(n for n in view.input_names if n != name)
    made, ends = {name}, []
    for node in view.nodes:
        read = [t for t in view.value_inputs(node) if t in made]
        if not read or node.op in SHAPE_OPS:
            continue
        if node.op in GATHERS and node.inputs[1:2] and node.inputs[1] in made:
            return False
        if any(t in live for t in view.value_inputs(node)):
            ends.append(node)
            continue
        made.update(node.outputs)
    outputs = set(view.output_names)
    return bool(ends) and not made & outputs and all(_on_scores(view, n, live) for n in ends)


def _on_scores(view: GraphView, node: Node, live: set[str]) -> bool:
    """Whether ``node`` adds a mask to attention scores or chooses among them by one."""
    acts = [t for t in node.inputs if t in live]
    if node.op not in ON_SCORES or len(acts) != 1:
        return False
    return _from_product(view, acts[0], live) and _to_softmax(view, node.outputs[0], live)


def _from_product(view: GraphView, tensor: str, live: set[str]) -> bool:
    """Whether ``tensor`` is a product of two activations, through views and nodes of
    one activation (scales, masks)."""
    while True:
        node = view.producer.get(tensor)
        if node is None:
            return False
        acts = [t for t in node.inputs if t in live]
        if is_product(node) and len(acts) == 2:
            return True
        if node.op not in VIEW_OPS | MASK_OPS or len(acts) != 1:
            return False
        tensor = acts[0]


def _to_softmax(view: GraphView, tensor: str, live: set[str]) -> bool:
    """Whether ``tensor`` alone reaches a ``Softmax``, through views and nodes of one
    activation (scales, masks)."""
    while True:
        node = view.single_reader(tensor)
        if node is None:
            return False
        if node.op == "Softmax":
            return True
        if node.op not in VIEW_OPS | MASK_OPS or len([t for t in node.inputs if t in live]) != 1:
            return False
        tensor = node.outputs[0]
