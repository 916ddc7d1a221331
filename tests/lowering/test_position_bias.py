"""``position_bias``: a learned table gathered onto its input and added (a relative
position bias on attention scores). Every count is worked out by hand beside it."""

from __future__ import annotations

from accelsim.graph.ops import Phase, VectorOp
from tests.conftest import params
from tests.lowering.test_lowering import lower, net

SCORES = {"kind": "image", "channels": 6, "height": 4, "width": 4}
"""Scores of 6 window-heads of 4 tokens, as a map."""


def test_position_bias_carries_its_table_and_sums_the_whole_gradient() -> None:
    conv = {"name": "conv", "kind": "conv2d", "out_channels": 6, "kernel": 1}
    bias = {"name": "bias", "kind": "position_bias", "table": 21}
    head = (
        {"name": "flat", "kind": "flatten"},
        {"name": "fc", "kind": "linear", "out_features": 2},
    )
    graph = lower(net(SCORES, conv, bias, *head), 2)
    # The conv's 6 x 6, the table's 21 values, the classifier's 96 x 2 + 2.
    assert params(graph) == 36 + 21 + 194
    ops = {
        op.name: (op.elements, op.ops_per_element)
        for op in graph.ops
        if isinstance(op, VectorOp) and op.layer == "bias" and op.phase is not Phase.UPDATE
    }
    # 2 samples x 6 x 4 x 4 = 192 scores: one add each forward, dX one op each, and the
    # table's gradient sums all 192 (over windows and samples), one op each.
    assert ops == {"bias.fwd": (192, 1), "bias.dp": (192, 1), "bias.bwd": (192, 1)}
    (table,) = [p for p in graph.parameters if p.weight.name.startswith("bias")]
    assert table.weight.elements == 21
