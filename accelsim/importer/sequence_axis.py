"""Which axis of a graph's float sequence input is the sequence.

The importer reads a tensor's first axis as the batch. A sequence-first model
(``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer``, ``nn.LSTM`` with
``batch_first=False``, PyTorch's defaults) exported with its input as ``(S, B, E)``
has the sequence first: read batch first, ``S`` would be the batch and ``B`` tokens
the sequence. The graph's sequence ops say which it is: an attention's scores end in
its key length, an ONNX ``LSTM``'s or ``GRU``'s input is ``(sequence, batch,
features)`` by definition. When every one of them runs over an input's first axis,
and no input's first axis is also its second's length, the graph is sequence-first
(all its inputs: a module reads them alike).
"""

from __future__ import annotations

from collections.abc import Iterable

from accelsim.importer.attention import AttentionMatch
from accelsim.importer.graph_view import GraphView

RECURRENT_OPS = frozenset({"LSTM", "GRU", "RNN"})
"""ONNX ops whose first input is ``(sequence, batch, features)``."""


def sequence_lengths(view: GraphView, attentions: Iterable[AttentionMatch]) -> list[int]:
    """The sequence length each sequence op of the graph runs over (its key length for
    an attention), as the graph's shapes give it; unknown ones left out."""
    lengths = []
    for match in attentions:
        for index in match.absorbed:
            node = view.nodes[index]
            if node.op == "Softmax" and view.dims(node.outputs[0]):
                lengths.append(view.dims(node.outputs[0])[-1])
    for node in view.nodes:
        if node.op in RECURRENT_OPS and view.dims(node.inputs[0]):
            lengths.append(view.dims(node.inputs[0])[0])
    return lengths


def is_sequence_first(view: GraphView, attentions: Iterable[AttentionMatch]) -> bool:
    """Whether the graph's inputs are ``(sequence, batch, features)``: each is a float
    sequence whose second axis differs from its first, and the graph has sequence ops,
    each running over the first axis of an input (a decoder's cross-attention over its
    memory's)."""
    firsts = set()
    for name in view.input_names:
        dims = view.dims(name)
        if len(dims) != 3 or dims[0] == dims[1] or not view.is_float_input(name):
            return False
        firsts.add(dims[0])
    lengths = sequence_lengths(view, attentions)
    return bool(lengths) and all(length in firsts for length in lengths)
